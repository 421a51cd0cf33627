"""One option vocabulary across verbs and the API: --ref, --system NAME=FILES and
FILE[,FILE...] everywhere (old spellings accepted with a one-line note), one default metric
set, score objects with signatures, short reprs, settings errors that list the valid names."""

import json
import pickle

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics import DEFAULT_METRICS, Score
from rerank.nbest import ListInfo, NBestList, write_lines
from tests.conftest import write_split


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch):
    """Notes are said once per process: each test starts with none said."""
    from rerank.cli import options

    monkeypatch.setattr(options, "_NOTED", set())


def _experiment_files(exp):
    (exp / "rerank" / "b1").mkdir(parents=True)
    write_lines(["a b c d", "e f g h"], str(exp / "ref.txt"))
    write_lines(["a b c x", "e f g x"], str(exp / "base.txt"))
    for k in (1, 2):
        write_lines(["a b c d", "e f g x"], str(exp / "rerank" / "b1" / f"test.seed{k}.txt"))


def test_experiment_takes_signifs_spelling_and_the_old_one_with_a_note(tmp_path, capsys):
    new, old = tmp_path / "new", tmp_path / "old"
    manifests = []
    for exp, spelling in ((new, "new"), (old, "old")):
        _experiment_files(exp)
        pattern = str(exp / "rerank" / "b1" / "test.seed{replica}.txt")
        args = ["experiment", str(exp), "--baseline", str(exp / "base.txt"), "--tokenize", "none", "--replicas", "2"]
        if spelling == "new":
            args += ["--ref", str(exp / "ref.txt"), "--system", f"+MLMME beta=1={pattern}"]
        else:
            args += ["--reference", str(exp / "ref.txt"), "--system", "+MLMME beta=1", pattern]
        assert main(args) == 0
        err = capsys.readouterr().err
        notes = [line for line in err.splitlines() if line.startswith("rerank: note:")]
        assert len(notes) == (0 if spelling == "new" else 2)
        manifests.append(json.loads((exp / "experiment.json").read_text()))
    assert (
        manifests[0]["systems"]
        == manifests[1]["systems"]
        == [["+MLMME beta=1", ["rerank/b1/test.seed1.txt", "rerank/b1/test.seed2.txt"]]]
    )
    assert manifests[0]["reference"] == manifests[1]["reference"] == "ref.txt"
    args = ["experiment", str(new), "--baseline", str(new / "base.txt"), "--system", f"x={new / 'base.txt'}"]
    assert main(args) == 1
    assert "--ref is required" in capsys.readouterr().err


def test_baseline_replicas_with_commas_or_spaces_give_the_same_table(tmp_path, capsys):
    _, refs = write_split(tmp_path, "test", 40, seed=5)
    rng = np.random.default_rng(0)
    hyps = open(tmp_path / "test.1best").read().splitlines()
    for k in (1, 2):
        shuffled = [hyps[i] if rng.random() < 0.7 else refs[i] for i in range(len(refs))]
        write_lines(shuffled, str(tmp_path / f"b{k}.txt"))
    base = ["signif", "--ref", str(tmp_path / "test.de"), "--tokenize", "none", "--format", "json"]
    base += ["--system", f"s={tmp_path / 'test.1best'}", "--shuffles", "200", "--resamples", "0"]
    assert main(base + ["--baseline", str(tmp_path / "b1.txt"), str(tmp_path / "b2.txt")]) == 0
    spaces = json.loads(capsys.readouterr().out)
    assert main(base + ["--baseline", f"{tmp_path / 'b1.txt'},{tmp_path / 'b2.txt'}"]) == 0
    commas = json.loads(capsys.readouterr().out)
    assert spaces["rows"] == commas["rows"]
    # one default metric set: sacrebleu's three, in every verb and API function
    assert DEFAULT_METRICS == ("bleu", "chrf", "ter")
    assert list(dict.fromkeys(row["metric"] for row in spaces["rows"])) == ["bleu", "chrf", "ter"]


def test_evaluate_returns_scores_that_are_floats_with_signatures():
    refs = ["the cat sat on the mat", "a dog barks"]
    hyps = ["the cat sat on a mat", "a dog barked"]
    scores = rerank.evaluate(hyps, refs, tokenize="none")
    assert list(scores) == ["bleu", "chrf", "ter"]
    bleu = scores["bleu"]
    expected = BLEU(tokenize="none").corpus_score(hyps, [refs])
    assert isinstance(bleu, Score) and isinstance(bleu, float)
    assert bleu == pytest.approx(expected.score) and bleu + 0 == pytest.approx(expected.score)
    assert str(bleu) == f"BLEU = {expected.score:.2f}" and "tok:none" in bleu.signature
    assert bleu.format(signature=True).endswith(f"({bleu.signature})")
    assert json.loads(json.dumps(scores))["bleu"] == pytest.approx(expected.score)  # serialises as a number
    assert pickle.loads(pickle.dumps(bleu)).signature == bleu.signature
    assert repr(bleu).startswith("Score(bleu=")


def test_a_large_list_has_a_short_repr_and_bad_tuner_settings_list_the_valid_ones():
    hyps = [f"h{i}" for i in range(20000)]
    nbest = NBestList(
        np.arange(0, 20001, 20), hyps, np.zeros((20000, 2)), ["NMT", "NMTNorm"], info=ListInfo("NMTNorm", {}, True)
    )
    assert repr(nbest) == "NBestList(segments=1000, hypotheses=20000, columns=NMT NMTNorm, beam_feature='NMTNorm')"
    with pytest.raises(InputError, match=r"mira has no setting 'restarts'; its settings: iterations, C, "):
        rerank.tune(nbest, ["r"] * 1000, restarts=3)


def test_tuner_options_are_named_by_their_tuner_and_old_spellings_still_work(tmp_path, capsys):
    write_split(tmp_path, "val", 30, seed=2)
    base = ["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de"), "--tokenize", "none"]
    outputs = []
    for flags in (["--mert-restarts", "2"], ["--restarts", "2"]):
        out = tmp_path / f"w{len(outputs)}.json"
        assert main(base + ["--algorithm", "mert", *flags, "--out", str(out), "--quiet"]) == 0
        err = capsys.readouterr().err
        assert ("rerank: note: --restarts is now --mert-restarts" in err) == (flags[0] == "--restarts")
        outputs.append(json.loads(out.read_text()))
    assert outputs[0]["weights"] == outputs[1]["weights"] and outputs[0]["config"]["restarts"] == 2
    # a switch that turns a default off: --mira-no-shuffle (old: --no-shuffle)
    assert (
        main(base + ["--mira-no-shuffle", "--mira-iterations", "2", "--out", str(tmp_path / "s.json"), "--quiet"]) == 0
    )
    assert json.loads((tmp_path / "s.json").read_text())["config"]["shuffle"] is False
    # another tuner's option is refused under its own name
    assert main(base + ["--restarts", "2", "--out", str(tmp_path / "x.json")]) == 1
    assert "--mert-restarts is an option of mert, not of mira" in capsys.readouterr().err


def test_segment_scores_from_arrays_in_the_api():
    refs = ["a b c", "d e f", "g h i"]
    hyps = ["a b c", "d e x", "y y y"]
    out = rerank.evaluate(
        hyps, refs, metrics=["seg:comet", "0.5*bleu+0.5*seg:comet"], scores={"comet": [0.9, 0.5, 0.1]}
    )
    assert out["seg:comet"] == pytest.approx(0.5)
    bleu = rerank.evaluate(hyps, refs, metrics=["bleu"])["bleu"]
    assert out["0.5*bleu+0.5*seg:comet"] == pytest.approx(0.5 * bleu + 0.25)
    with pytest.raises(InputError, match=r"metric 'seg:comet' needs its scores: scores=\{'comet'"):
        rerank.evaluate(hyps, refs, metrics=["seg:comet"])
    with pytest.raises(InputError, match="2 scores but"):
        rerank.evaluate(hyps, refs, metrics=["seg:comet"], scores={"comet": [1, 2]})
    with pytest.raises(InputError, match=r"scores\['comet'\]: score 2 is not finite"):
        rerank.evaluate(hyps, refs, metrics=["seg:comet"], scores={"comet": [1, float("nan"), 2]})
    # as a tuning objective: the hypothesis scored highest wins every segment
    nbest = NBestList(
        np.array([0, 2, 4]), ["a", "b", "c", "d"], np.array([[1.0, 0], [0, 1], [1, 0], [0, 1]]), ["F", "G"]
    )
    tuned = rerank.tune(nbest, ["a", "c"], metric="seg:q", scores={"q": [0, 1, 0, 1]}, init="zeros", tokenize="none")
    assert tuned.score == pytest.approx(1.0) and rerank.apply(nbest, tuned) == ["b", "d"]


def test_replica_weights_average_by_direction(tmp_path, capsys):
    (tmp_path / "a.json").write_text(json.dumps({"weights": {"F": 2.0, "G": [1.0, -1.0]}}))  # L1 4
    (tmp_path / "b.json").write_text(json.dumps({"weights": {"F": 0.5, "G": [0.0, 0.5]}}))  # L1 1
    argv = ["average", "--weights", str(tmp_path / "a.json"), "--weights", str(tmp_path / "b.json")]
    assert main(argv + ["--out", str(tmp_path / "avg.json")]) == 0
    out = json.loads((tmp_path / "avg.json").read_text())["weights"]
    assert out["F"] == pytest.approx((0.5 + 0.5) / 2)
    assert out["G"] == pytest.approx([(0.25 + 0.0) / 2, (-0.25 + 0.5) / 2])
    (tmp_path / "c.json").write_text(json.dumps({"weights": {"F": 1.0}}))
    assert (
        main(
            [
                "average",
                "--weights",
                str(tmp_path / "a.json"),
                "--weights",
                str(tmp_path / "c.json"),
                "--out",
                str(tmp_path / "x.json"),
            ]
        )
        == 1
    )
    assert "differ from" in capsys.readouterr().err
    assert main(["average", "--weights", str(tmp_path / "a.json"), "--out", str(tmp_path / "x.json")]) == 1
    assert "at least two weights files" in capsys.readouterr().err


def test_mbr_speaks_the_vocabulary_of_every_verb(tmp_path, capsys):
    """``rerank mbr --nbest`` and ``--feature`` as everywhere (the old ``--candidates`` and
    ``--weights-from`` with a note); an option it does not have is refused with its own usage
    and the option meant; ``mbr:…,algorithm=pruned`` says why it is no column (issue 61, item 7)."""
    nbest = NBestList(
        np.array([0, 2, 4]), ["a b", "a c", "d e", "d f"], np.array([[0.0], [1.0], [0.5], [0.0]]), ["NMT"]
    )
    from rerank.nbest import write_nbest

    write_nbest(nbest, str(tmp_path / "c.nbest"))
    new = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--feature", "uniform", "--metric", "bleu"]
    assert main(new + ["--out", str(tmp_path / "new.txt")]) == 0
    assert "note" not in capsys.readouterr().err
    old = ["mbr", "--candidates", str(tmp_path / "c.nbest"), "--weights-from", "uniform", "--metric", "bleu"]
    assert main(old + ["--out", str(tmp_path / "old.txt")]) == 0
    err = capsys.readouterr().err
    assert "rerank: note: --candidates is now --nbest" in err and "rerank: note: --weights-from is now --feature" in err
    assert (tmp_path / "new.txt").read_text() == (tmp_path / "old.txt").read_text()
    with pytest.raises(SystemExit) as exit_:
        main(new[:-2] + ["--metrics", "chrf", "--out", str(tmp_path / "x.txt")])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith("usage: rerank mbr ")
    assert err.strip().endswith(
        "rerank mbr: error: unrecognized arguments: --metrics chrf; --metrics: did you mean --metric?"
    )
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(tmp_path / "c.nbest"),
                "--scorer",
                "mbr:bleu,algorithm=pruned",
                "--out",
                str(tmp_path / "f.nbest"),
            ]
        )
        == 1
    )
    assert "algorithm=pruned selects one candidate per segment and scores no column" in capsys.readouterr().err
