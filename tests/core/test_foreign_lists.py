"""First contact with a list from another toolkit (no signature): --beam-feature on tune and
crossfit, start weights from Moses' files or a partial JSON, the error that names the ways
on, and the one line a tuner says when nothing beat the start."""

import json

import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from rerank import api
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList, read_nbest, write_lines, write_nbest
from rerank.tuning.start import read_start, start_vector
from tests.conftest import random_corpus


@pytest.fixture
def foreign(tmp_path):
    """A 3-column list with no signature (NMT, WordPenalty, NMTNorm); NMTNorm carries the
    quality signal, so the beam (1 on NMTNorm) is a sensible start."""
    refs, hyps, segment = random_corpus(12, 6, seed=3)
    bleu = BLEU(tokenize="none", effective_order=True)
    quality = np.array([bleu.sentence_score(h, [refs[s]]).score for h, s in zip(hyps, segment)])
    rng = np.random.default_rng(3)
    lengths = np.array([len(h.split()) for h in hyps], dtype=float)
    norm = quality / 20 + rng.normal(scale=1.5, size=len(hyps))
    features = np.column_stack([norm * lengths, -lengths, norm])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    nbest = NBestList(offsets, hyps, features, ["NMT", "WordPenalty", "NMTNorm"])
    write_nbest(nbest, str(tmp_path / "f.nbest"))
    write_lines(refs, str(tmp_path / "f.de"))
    return tmp_path, nbest, refs


def _tune(d, *extra):
    return main(["tune", "--nbest", str(d / "f.nbest"), "--ref", str(d / "f.de"), "--tokenize", "none", *extra])


def test_a_list_without_signature_names_every_way_on(foreign, capsys):
    d, _, _ = foreign
    assert _tune(d, "--out", str(d / "w.json")) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and not (d / "w.json").exists()
    assert "no column orders every segment as written, so the beam's feature is unknown" in err
    assert "(--beam-feature COLUMN, beam_feature=COLUMN in Python; the list has NMT WordPenalty NMTNorm)" in err
    assert "--init zeros | WEIGHTS" in err and "rerank convert --beam-feature COLUMN" in err


def test_beam_feature_starts_tuning_from_the_beams_choice(foreign, capsys):
    d, nbest, refs = foreign
    assert _tune(d, "--beam-feature", "NMTNorm", "--out", str(d / "w.json"), "--quiet") == 0
    record = json.load(open(d / "w.json"))["tuning"]
    beam = [nbest.hypotheses[i] for i in nbest.select(nbest.features[:, 2])]
    expected = BLEU(tokenize="none").corpus_score(beam, [refs]).score
    assert record["init"] == "beam" and record["initial_score"] == pytest.approx(expected, abs=1e-9)
    assert "(beam) ->" in capsys.readouterr().err
    # the same in crossfit and in the API
    folds = d / "folds.tsv"
    folds.write_text("".join(f"img{s}\t{s % 2}\n" for s in range(12)))
    args = ["crossfit", "--nbest", str(d / "f.nbest"), "--ref", str(d / "f.de"), "--folds", str(folds)]
    args += ["--tokenize", "none", "--beam-feature", "NMTNorm", "--out", str(d / "c.txt"), "--weights-out"]
    assert main([*args, str(d / "c.json"), "--quiet"]) == 0
    assert json.load(open(d / "c.json"))["crossfit"]["init"] == "beam"
    tuned = api.tune(read_nbest(str(d / "f.nbest")), refs, tokenize="none", beam_feature="NMTNorm")
    assert tuned.initial_score == pytest.approx(expected, abs=1e-9)
    with pytest.raises(InputError, match="beam's feature is unknown"):
        api.tune(read_nbest(str(d / "f.nbest")), refs, tokenize="none")


def test_beam_feature_must_be_a_column_and_agree_with_a_signature(foreign, capsys):
    d, _, _ = foreign
    assert _tune(d, "--beam-feature", "Bogus", "--out", str(d / "w.json")) == 1
    assert "--beam-feature Bogus: not a column of the list (it has NMT WordPenalty NMTNorm)" in capsys.readouterr().err
    (d / "f.nbest.json").write_text(json.dumps({"beam_feature": "NMT", "feature_sets": {"beam": ["NMT"]}}))
    assert _tune(d, "--beam-feature", "NMTNorm", "--out", str(d / "w.json")) == 1
    err = capsys.readouterr().err
    assert "--beam-feature NMTNorm contradicts the beam feature 'NMT' that the list's signature declares" in err
    assert not (d / "w.json").exists()


def test_start_weights_from_moses_files_and_partial_json(foreign, capsys):
    d, nbest, _ = foreign
    (d / "dense").write_text("NMT= 0.5\nWordPenalty= -0.25\n\nNMTNorm= 1\n")
    assert read_start(str(d / "dense")) == {"NMT": 0.5, "WordPenalty": -0.25, "NMTNorm": 1.0}
    (d / "init.opt").write_text("0.5 -0.25 1\n0 0 0\n1 1 1\n")
    assert read_start(str(d / "init.opt")) == [0.5, -0.25, 1.0]
    for name in ("dense", "init.opt"):
        vector, missing = start_vector(read_start(str(d / name)), nbest, name)
        assert vector.tolist() == [0.5, -0.25, 1.0] and missing == []
    assert _tune(d, "--init", str(d / "dense"), "--out", str(d / "w.json"), "--quiet") == 0
    assert json.load(open(d / "w.json"))["tuning"]["init"] == str(d / "dense")
    # a partial JSON: the columns it leaves out start at 0, said in one line
    (d / "part.json").write_text(json.dumps({"weights": {"NMTNorm": 1.0}}))
    assert _tune(d, "--init", str(d / "part.json"), "--out", str(d / "w2.json")) == 0
    err = capsys.readouterr().err
    assert f"--init {d / 'part.json'}: no weight for NMT, WordPenalty: they start at 0" in err
    for text, message in (
        ("0.5 1\n", r"init.opt: 2 start weights but the n-best list has 3 columns \(NMT WordPenalty NMTNorm\)"),
        ("NMT= 0.5\nWordPenalty -1\n", r"init.opt:2: expected 'name= value …' \(Moses weights\), found 'WordPenalty'"),
        ("NMT= x\n", r"init.opt:1: a weight is not a number"),
        ("NMT= 1\nNMT= 2\n", r"init.opt:2: the feature 'NMT' has a second line"),
        ("Other= 1\n", r"weight\(s\) for feature\(s\) not in the n-best list: Other"),
    ):
        (d / "init.opt").write_text(text)
        with pytest.raises(InputError, match=message):
            start_vector(read_start(str(d / "init.opt")), nbest, str(d / "init.opt"))


def test_a_tuner_that_beats_nothing_says_so_in_one_line(tmp_path, capsys):
    # the beam column picks the reference itself in every segment: BLEU 100, nothing beats it
    refs = ["a b c d e", "f g h i j", "k l m n o"]
    hyps, feats = [], []
    for ref in refs:
        hyps += ["x y z", ref, ref.replace(" ", " q ")]  # zero weights take the first: BLEU 0
        feats += [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]]
    nbest = NBestList(np.array([0, 3, 6, 9]), hyps, np.array(feats), ["Beam", "Other"])
    write_nbest(nbest, str(tmp_path / "f.nbest"))
    write_lines(refs, str(tmp_path / "f.de"))
    assert _tune(tmp_path, "--beam-feature", "Beam", "--out", str(tmp_path / "w.json"), "--quiet") == 0
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(
        "mira: BLEU 100.00 (beam) -> 100.00, length ratio 1.000 (no improvement: 60 epoch(s) at C 0.01 did not "
    )
    assert line.endswith("beat the start (BLEU 100.00); best seen BLEU 100.00; the start weights are kept)")
    record = json.load(open(tmp_path / "w.json"))
    assert record["tuning"]["improved"] is False and record["weights"] == {"Beam": 1.0, "Other": 0.0}
    tuned = api.tune(read_nbest(str(tmp_path / "f.nbest")), refs, tokenize="none", beam_feature="Beam")
    assert not tuned.improved and tuned.note.startswith("no improvement: 60 epoch(s) at C 0.01")
    # a tuner that does improve says nothing of the kind
    assert _tune(tmp_path, "--init", "zeros", "--out", str(tmp_path / "z.json"), "--quiet") == 0
    assert "no improvement" not in capsys.readouterr().err
    assert json.load(open(tmp_path / "z.json"))["tuning"]["improved"] is True


def test_the_decoders_own_one_best_and_the_readme_loop_on_a_foreign_list(foreign, capsys):
    d, nbest, refs = foreign
    # the first hypothesis of each segment, as the decoder ordered them
    assert main(["truncate", "--nbest", str(d / "f.nbest"), "--out-1best", str(d / "f.1best")]) == 0
    assert open(d / "f.1best").read().splitlines() == [nbest.hypotheses[i] for i in nbest.offsets[:-1]]
    assert not (d / "f.1best.json").exists()
    assert main(["truncate", "--nbest", str(d / "f.nbest"), "--out", str(d / "t.nbest")]) == 1
    assert "--out needs --size" in capsys.readouterr().err and not (d / "t.nbest").exists()
    assert main(["truncate", "--nbest", str(d / "f.nbest"), "--out-1best", str(d / "f.nbest")]) == 1
    capsys.readouterr()
    assert read_nbest(str(d / "f.nbest")).hypotheses == nbest.hypotheses  # the input untouched
    # the README's six commands on a list without a signature (val = test here); its order names
    # no column, so mbr: is told which weighs the pseudo-references (issue 93, item 8)
    assert main(["features", "add", "--nbest", str(d / "f.nbest"), "--scorer", "mbr:bleu", "--out", str(d / "x")]) == 1
    assert "give --feature COLUMN" in capsys.readouterr().err
    for argv in (
        ["features", "add", "--nbest", str(d / "f.nbest"), "--scorer", "mbr:bleu,feature=NMT"]
        + ["--out", str(d / "full.nbest")],
        ["tune", "--nbest", str(d / "full.nbest"), "--ref", str(d / "f.de"), "--tokenize", "none"]
        + ["--beam-feature", "NMTNorm", "--out", str(d / "w.json"), "--quiet"],
        ["apply", "--nbest", str(d / "full.nbest"), "--weights", str(d / "w.json"), "--out", str(d / "r.txt")],
        ["signif", "--ref", str(d / "f.de"), "--baseline", str(d / "f.1best"), "--system", f"r={d / 'r.txt'}"]
        + ["--tokenize", "none", "--metrics", "bleu,chrf,ter"],
    ):
        assert main(argv) == 0, capsys.readouterr().err


def test_the_lists_order_names_its_beam_column(foreign, capsys):
    """A decoder writes its list in rank order: with no signature and no --beam-feature, the
    column whose values never rise down any segment is the beam's (issue 61, items 1 and 2),
    said in one line; a --beam-feature the order contradicts is said with the numbers."""
    d, nbest, refs = foreign
    order = np.concatenate(
        [s + np.argsort(-nbest.features[s:e, 2], kind="stable") for s, e in zip(nbest.offsets[:-1], nbest.offsets[1:])]
    )
    ranked = NBestList(nbest.offsets, [nbest.hypotheses[i] for i in order], nbest.features[order], nbest.feature_names)
    write_nbest(ranked, str(d / "r.nbest"))
    decoder = [ranked.hypotheses[i] for i in ranked.offsets[:-1]]
    expected = BLEU(tokenize="none").corpus_score(decoder, [refs]).score
    args = ["tune", "--nbest", str(d / "r.nbest"), "--ref", str(d / "f.de"), "--tokenize", "none"]
    assert main(args + ["--out", str(d / "w.json")]) == 0
    err = capsys.readouterr().err
    assert (
        "no signature: the beam's column is NMTNorm, the one whose values never rise down any of the 12 segments" in err
    )
    record = json.load(open(d / "w.json"))["tuning"]
    assert record["init"] == "beam" and record["initial_score"] == pytest.approx(expected, abs=1e-9)
    # the README's Python example on one's own list: no beam_feature needed
    assert api.tune(read_nbest(str(d / "r.nbest")), refs, tokenize="none").initial_score == pytest.approx(expected)
    # a --beam-feature the order contradicts: the numbers, then the start asked for
    first_best = sum(
        int(ranked.features[s, 1] >= ranked.features[s:e, 1].max())
        for s, e in zip(ranked.offsets[:-1], ranked.offsets[1:])
    )
    assert first_best < 12
    assert main(args + ["--beam-feature", "WordPenalty", "--out", str(d / "w2.json")]) == 0
    err = capsys.readouterr().err
    assert (
        f"beam feature WordPenalty: the list is not in its order (its first hypothesis is WordPenalty's best in "
        f"{first_best} of 12 "
        "segments); the list is in NMTNorm's order" in err
    )
    assert json.load(open(d / "w2.json"))["tuning"]["init"] == "beam"
    # the README's recipe: features added first (their signature names no beam), then tuned
    scored = ["features", "add", "--nbest", str(d / "r.nbest"), "--scorer", "mbr:bleu,feature=uniform"]
    assert main(scored + ["--out", str(d / "r.full.nbest")]) == 0
    capsys.readouterr()
    full = ["tune", "--nbest", str(d / "r.full.nbest"), "--ref", str(d / "f.de"), "--tokenize", "none"]
    assert main(full + ["--out", str(d / "w3.json")]) == 0
    assert "its signature names no beam: the beam's column is NMTNorm" in capsys.readouterr().err
    assert json.load(open(d / "w3.json"))["tuning"]["initial_score"] == pytest.approx(expected, abs=1e-9)


def test_totals_that_order_the_list_give_the_decoders_weights(foreign, capsys):
    """A decoder that ranked by a weighted total (Moses' last field) wrote its list in that
    order: where no single column orders it, the start is the weights that reproduce the totals
    (issue 61, item 1)."""
    d, nbest, refs = foreign
    weights = np.array([1.0, 0.5, 2.0])
    totals = nbest.features @ weights
    order = np.concatenate(
        [s + np.argsort(-totals[s:e], kind="stable") for s, e in zip(nbest.offsets[:-1], nbest.offsets[1:])]
    )
    ranked = NBestList(nbest.offsets, [nbest.hypotheses[i] for i in order], nbest.features[order], nbest.feature_names)
    write_nbest(ranked, str(d / "t.nbest"), totals=totals[order])
    decoder = [ranked.hypotheses[i] for i in ranked.offsets[:-1]]
    expected = BLEU(tokenize="none").corpus_score(decoder, [refs]).score
    args = ["tune", "--nbest", str(d / "t.nbest"), "--ref", str(d / "f.de"), "--tokenize", "none", "--iterations", "1"]
    assert main(args + ["--out", str(d / "w.json")]) == 0
    err = capsys.readouterr().err
    assert "no column orders the list but its totals do: starting from the weights that reproduce them" in err
    assert "(NMT 1, WordPenalty 0.5, NMTNorm 2)" in err
    record = json.load(open(d / "w.json"))["tuning"]
    assert record["init"] == "beam" and record["initial_score"] == pytest.approx(expected, abs=1e-9)
