import json

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank.cli import main
from rerank.nbest import NBestList, write_lines, write_nbest
from tests.conftest import random_corpus


@pytest.fixture
def tuning_files(tmp_path):
    """An n-best list whose 'Good' feature is sentence BLEU and 'Bad' its negation."""
    refs, hyps, segment = random_corpus(60, 5, seed=4)
    bleu = BLEU(tokenize="none", effective_order=True)
    good = np.array([bleu.sentence_score(h, [refs[s]]).score for h, s in zip(hyps, segment)])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    features = np.stack([-good + np.random.default_rng(0).normal(size=len(good)), good], axis=1)
    nbest = NBestList(offsets, hyps, features, ["Bad", "Good"])
    write_nbest(nbest, str(tmp_path / "dev.nbest"))
    write_lines(refs, str(tmp_path / "dev.ref"))
    return tmp_path, refs, hyps, nbest, good


def test_tune_then_apply_round_trip(tuning_files, capsys):
    tmp, refs, hyps, nbest, good = tuning_files
    weights = tmp / "weights.json"
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--out",
                str(weights),
                "--seed",
                "2",
                "--mira-iterations",
                "10",
                "--tokenize",
                "none",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert err.count("tuning BLEU") == 10
    data = json.loads(weights.read_text())
    assert set(data["weights"]) == {"Bad", "Good"}
    assert data["weights"]["Good"] > 0 > data["weights"]["Bad"] or abs(data["weights"]["Bad"]) < data["weights"]["Good"]
    assert data["config"]["iterations"] == 10 and data["config"]["seed"] == 2
    assert {"rerank", "numpy", "sacrebleu"} <= set(data["signature"])
    assert "tok:none" in data["bleu_signature"]

    out = tmp / "dev.1best"
    assert main(["apply", "--nbest", str(tmp / "dev.nbest"), "--weights", str(weights), "--out", str(out)]) == 0
    chosen = out.read_text().splitlines()
    w = np.array([data["weights"]["Bad"], data["weights"]["Good"]])
    expected = nbest.select(nbest.features @ w)
    assert chosen == [hyps[i] for i in expected]
    score = BLEU(tokenize="none", force=True).corpus_score(chosen, [refs]).score
    assert score == pytest.approx(data["tuning"]["bleu"], abs=1e-9)
    first = BLEU(tokenize="none", force=True).corpus_score([hyps[i] for i in nbest.offsets[:-1]], [refs]).score
    assert score > first


def test_apply_rejects_missing_and_unknown_features(tuning_files, capsys):
    tmp = tuning_files[0]
    for weights in ({"Good": 1.0}, {"Good": 1.0, "Bad": 0.0, "MLMMEss": 1.0}):
        (tmp / "w.json").write_text(json.dumps({"weights": weights}))
        assert (
            main(
                [
                    "apply",
                    "--nbest",
                    str(tmp / "dev.nbest"),
                    "--weights",
                    str(tmp / "w.json"),
                    "--out",
                    str(tmp / "x.txt"),
                ]
            )
            == 1
        )
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and ("no weight for n-best feature(s) Bad" in err or "MLMMEss" in err)
        assert not (tmp / "x.txt").exists()


def test_tune_rejects_reference_count_mismatch(tuning_files, capsys):
    tmp, refs = tuning_files[0], tuning_files[1]
    write_lines(refs[:-1], str(tmp / "short.ref"))
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "short.ref"),
                "--out",
                str(tmp / "w.json"),
            ]
        )
        == 1
    )
    assert "60 segments in the n-best list but 59 references" in capsys.readouterr().err
    assert not (tmp / "w.json").exists()


def test_eval_json_equals_sacrebleu(tmp_path, capsys):
    refs, hyps, segment = random_corpus(30, 2, seed=1)
    sys_a = [hyps[2 * i] for i in range(30)]
    sys_b = [hyps[2 * i + 1] for i in range(30)]
    write_lines(refs, str(tmp_path / "ref"))
    write_lines(sys_a, str(tmp_path / "a"))
    write_lines(sys_b, str(tmp_path / "b"))
    assert (
        main(
            [
                "eval",
                "--ref",
                str(tmp_path / "ref"),
                "--hyp",
                f"A={tmp_path / 'a'}",
                "--hyp",
                f"B={tmp_path / 'b'}",
                "--tokenize",
                "none",
                "--json",
            ]
        )
        == 0
    )
    rows = json.loads(capsys.readouterr().out)
    got = {(r["system"], r["metric"]): r["score"] for r in rows}
    for name, hyp in (("A", sys_a), ("B", sys_b)):
        assert got[(name, "bleu")] == pytest.approx(BLEU(tokenize="none").corpus_score(hyp, [refs]).score, abs=1e-4)
        assert got[(name, "ter")] == pytest.approx(TER().corpus_score(hyp, [refs]).score, abs=1e-4)
        assert got[(name, "chrf")] == pytest.approx(CHRF().corpus_score(hyp, [refs]).score, abs=1e-4)
    assert all("nrefs:1" in r["signature"] for r in rows)


def test_eval_rejects_length_mismatch(tmp_path, capsys):
    write_lines(["a b", "c d"], str(tmp_path / "ref"))
    write_lines(["a b"], str(tmp_path / "hyp"))
    assert main(["eval", "--ref", str(tmp_path / "ref"), "--hyp", str(tmp_path / "hyp")]) == 1
    assert f"{tmp_path / 'hyp'}: 1 lines but the reference" in capsys.readouterr().err


def test_oracle_cli_beats_first_best(tuning_files, capsys):
    tmp, refs, hyps, nbest, _ = tuning_files
    assert (
        main(
            [
                "oracle",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--out",
                str(tmp / "oracle.txt"),
                "--json",
            ]
        )
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    chosen = (tmp / "oracle.txt").read_text().splitlines()
    score = BLEU(tokenize="none", force=True).corpus_score(chosen, [refs]).score
    assert result["oracle_bleu"] == pytest.approx(score, abs=1e-9)
    first = BLEU(tokenize="none", force=True).corpus_score([hyps[i] for i in nbest.offsets[:-1]], [refs]).score
    assert score > first


@pytest.mark.parametrize("algorithm", ["mira", "mert", pytest.param("pro", marks=pytest.mark.pro)])
def test_every_tuner_writes_weights_and_never_loses_to_the_beam(tuning_files, capsys, algorithm):
    tmp, refs, hyps, nbest, good = tuning_files
    # the "beam" ranked by Bad (scaled down so that MIRA's BLEU-sized margins can move
    # away from it); the signature names it, so tuning starts there
    nbest = NBestList(nbest.offsets, hyps, nbest.features * np.array([0.01, 1.0]), nbest.feature_names)
    write_nbest(nbest, str(tmp / "dev.nbest"))
    (tmp / "dev.nbest.json").write_text(json.dumps({"beam_feature": "Bad"}))
    weights = tmp / f"{algorithm}.json"
    args = [
        "tune",
        "--nbest",
        str(tmp / "dev.nbest"),
        "--ref",
        str(tmp / "dev.ref"),
        "--out",
        str(weights),
        "--algorithm",
        algorithm,
        "--quiet",
    ]
    if algorithm == "mert":
        args += ["--mert-restarts", "3"]
    assert main(args) == 0
    data = json.loads(weights.read_text())
    tuning = data["tuning"]
    assert tuning["algorithm"] == algorithm and tuning["init"] == "beam"
    beam = (
        BLEU(tokenize="none", force=True)
        .corpus_score([hyps[i] for i in nbest.select(nbest.features[:, 0])], [refs])
        .score
    )
    assert tuning["initial_bleu"] == pytest.approx(beam)
    assert tuning["bleu"] >= tuning["initial_bleu"] and tuning["bleu"] > beam + 5
    assert 0.5 < tuning["length_ratio"] < 1.5
    assert data["weights"]["Good"] > 0
    assert f"{algorithm}: BLEU {tuning['initial_bleu']:.2f} (beam) -> {tuning['bleu']:.2f}" in capsys.readouterr().err


def test_tune_a_feature_subset(tuning_files):
    tmp = tuning_files[0]
    weights = tmp / "subset.json"
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--out",
                str(weights),
                "--features",
                "Bad",
                "--mira-iterations",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    data = json.loads(weights.read_text())
    assert data["weights"]["Good"] == 0.0 and data["tuning"]["features"] == ["Bad"]
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--out",
                str(weights),
                "--features",
                "Bad,LM",
            ]
        )
        == 1
    )


@pytest.mark.parametrize(
    "option,value",
    [
        ("--mira-iterations", "-5"),
        ("--C", "-1"),
        ("--C", "nan"),
        ("--mira-decay", "5"),
        ("--mert-restarts", "0"),
        ("--algorithm", "sgd"),
    ],
)
def test_tune_options_are_range_checked(tuning_files, capsys, option, value):
    tmp = tuning_files[0]
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--out",
                str(tmp / "w.json"),
                option,
                value,
            ]
        )
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err
    assert not (tmp / "w.json").exists()


def test_apply_and_truncate_say_what_they_wrote_and_eval_skips_an_unavailable_meteor(tmp_path, capsys, monkeypatch):
    """Every verb that writes says so in one line (issue 61, item 10); ``eval`` leaves METEOR out
    with a warning where java or its jar is missing, as ``signif`` does."""
    import rerank.metrics.meteor as meteor

    nbest = NBestList(np.array([0, 2, 3]), ["a b", "a c", "d"], np.array([[1.0], [0.0], [0.5]]), ["F"])
    write_nbest(nbest, str(tmp_path / "l.nbest"))
    (tmp_path / "w.json").write_text('{"weights": {"F": -1.0}}')
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(tmp_path / "l.nbest"),
                "--weights",
                str(tmp_path / "w.json"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    assert (
        capsys.readouterr().err.strip() == f"apply: 2 segments re-ranked with {tmp_path / 'w.json'} -> {tmp_path / 'o'}"
    )
    assert (tmp_path / "o").read_text() == "a c\nd\n"
    args = ["truncate", "--nbest", str(tmp_path / "l.nbest"), "--size", "1", "--out", str(tmp_path / "t.nbest")]
    assert main(args + ["--out-1best", str(tmp_path / "t.1best")]) == 0
    err = capsys.readouterr().err.strip()
    assert err == (
        f"truncate: {tmp_path / 'l.nbest'}: 1-best list, 2 hypotheses -> {tmp_path / 't.nbest'}; "
        f"the first hypothesis of every segment -> {tmp_path / 't.1best'}"
    )

    def missing():
        raise meteor.MeteorUnavailable("METEOR unavailable: no 'java' on PATH")

    monkeypatch.setattr(meteor, "find_jar", missing)
    write_lines(["a b", "d"], str(tmp_path / "ref"))
    evaluate = ["eval", "--ref", str(tmp_path / "ref"), "--hyp", str(tmp_path / "o"), "--tokenize", "none", "--json"]
    evaluate += ["--lang", "de"]
    assert main(evaluate + ["--metrics", "bleu,meteor"]) == 0
    out, err = capsys.readouterr()
    assert [row["metric"] for row in json.loads(out)] == ["bleu"] and "warning: METEOR unavailable" in err
    assert main(evaluate + ["--metrics", "meteor"]) == 1


def test_eval_prints_sacrebleus_score_lines_and_names(tmp_path, capsys):
    """``rerank eval`` names the metrics as sacrebleu does (``chrF2``, ``chrF2++``) and prints
    each system's sacrebleu score line (BLEU's with precisions, BP and lengths) beside the
    table; ``oracle`` prints every metric's line; ``mbr --metric ter`` reports TER, not its
    negative (issue 61, item 8)."""
    from sacrebleu.metrics import BLEU, CHRF, TER

    hyps, refs = ["the cat sat", "a dog ran home"], ["the cat sat on it", "the dog ran home"]
    write_lines(hyps, str(tmp_path / "h"))
    write_lines(refs, str(tmp_path / "r"))
    assert (
        main(
            [
                "eval",
                "--ref",
                str(tmp_path / "r"),
                "--hyp",
                str(tmp_path / "h"),
                "--tokenize",
                "none",
                "--metrics",
                "bleu,chrf,chrF++,ter",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["system", "BLEU", "chrF2", "chrF2++", "TER"]
    for theirs in (BLEU(tokenize="none"), CHRF(), CHRF(word_order=2), TER()):
        assert f"h: {theirs.corpus_score(hyps, [refs]).format(width=2)}" in out.splitlines()
    nbest = NBestList(np.array([0, 2, 4]), ["the cat sat on it", "x", "the dog ran home", "y"], np.zeros((4, 1)), ["F"])
    write_nbest(nbest, str(tmp_path / "l.nbest"))
    oracle = ["oracle", "--nbest", str(tmp_path / "l.nbest"), "--ref", str(tmp_path / "r"), "--tokenize", "none"]
    assert main(oracle + ["--metric", "chrf", "--out", str(tmp_path / "o")]) == 0
    assert capsys.readouterr().out.strip() == "oracle chrF2 = 100.00"
    assert (
        main(
            [
                "mbr",
                "--nbest",
                str(tmp_path / "l.nbest"),
                "--metric",
                "ter",
                "--feature",
                "uniform",
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "mean expected TER of the selections " in err
        and "(the utility is minus TER)" in err
        and " -" not in err.split("selections")[1].split("(")[0]
    )
