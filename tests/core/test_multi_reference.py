"""Several references per segment, as sacrebleu scores them: BLEU (n-grams clipped by their
largest count in any reference, the closest reference length, the shorter on ties), chrF
and chrF++ (the best-scoring reference), TER (the fewest edits over the mean reference
length) — equal to sacrebleu with the same references, from the API, the statistics the
tuners read, and the command line."""

import gzip
import json
import os
import random

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import bleu_from_stats, bleu_stats
from rerank.nbest import NBestList, write_lines, write_nbest
from rerank.textio import read_references
from rerank.tuning.data import load_tuning_data
from tests.conftest import ROOT

TASK2 = os.path.join(ROOT, "..", "shared", "data", "multi30k", "task2", "raw")


def _task2(k, lines=400):
    with gzip.open(os.path.join(TASK2, f"test_2016.{k}.de.gz"), "rt", encoding="utf-8") as handle:
        return [next(handle).rstrip("\n") for _ in range(lines)]


@pytest.mark.skipif(not os.path.isdir(TASK2), reason="no ../shared/data copy")
def test_two_references_on_real_text_equal_sacrebleu(tmp_path, capsys):
    # Multi30k task 2: independent German descriptions of the same images, raw text (13a):
    # descriptions 1 and 2 are the references, 3 the "system"
    refs, hyps = [_task2(1), _task2(2)], _task2(3)
    ours = rerank.evaluate(hyps, refs, metrics=["bleu", "chrf", "chrf:word_order=2", "ter"])
    theirs = {
        "bleu": BLEU().corpus_score(hyps, refs),
        "chrf": CHRF().corpus_score(hyps, refs),
        "chrf:word_order=2": CHRF(word_order=2).corpus_score(hyps, refs),
        "ter": TER().corpus_score(hyps, refs),
    }
    for name, score in theirs.items():
        assert ours[name] == pytest.approx(score.score, abs=1e-9), name
    assert "nrefs:2" in ours["bleu"].signature and "nrefs:2" in ours["ter"].signature
    # more references can only help BLEU (sanity of the direction, not of the value)
    assert ours["bleu"] > rerank.evaluate(hyps, refs[0], metrics=["bleu"])["bleu"]
    # the command line: --ref twice
    for k, lines in enumerate(refs + [hyps]):
        write_lines(lines, str(tmp_path / f"{k}.de"))
    args = ["eval", "--ref", str(tmp_path / "0.de"), "--ref", str(tmp_path / "1.de"), "--hyp", str(tmp_path / "2.de")]
    assert main(args + ["--json"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["bleu"]["score"] == pytest.approx(theirs["bleu"].score, abs=1e-4)
    assert rows["ter"]["score"] == pytest.approx(theirs["ter"].score, abs=1e-4)
    assert rows["bleu"]["signature"].startswith("nrefs:2|")


def test_per_hypothesis_statistics_of_an_nbest_list_equal_sacrebleus_per_segment():
    rng = random.Random(4)
    words = "a b c d e f g h".split()
    refs = [[" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(6)] for _ in range(3)]
    hyps = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 9))) for _ in range(18)]
    segment = np.repeat(np.arange(6), 3)
    ours = bleu_stats(hyps, refs, segment, "none")
    bleu = BLEU(tokenize="none")
    for i, h in enumerate(hyps):
        expected = bleu._extract_corpus_statistics([h], [[stream[segment[i]]] for stream in refs])[0]
        # sacrebleu's row: hyp len, ref len, matches 1-4, totals 1-4; ours interleaves them
        assert ours[i, 8] == expected[1] and list(ours[i, 0:8:2]) == expected[2:6]
    # the closest reference length, the shorter on ties: hypothesis of 3 words, references of 2 and 4
    tie = bleu_stats(["a b c"], [["a b"], ["a b c d"]], np.array([0]), "none")
    assert tie[0, 8] == 2
    corpus = bleu_from_stats(bleu_stats(hyps[:6], refs, np.arange(6), "none").sum(0))
    assert corpus == pytest.approx(BLEU(tokenize="none").corpus_score(hyps[:6], refs).score, abs=1e-9)


def test_tune_oracle_and_signif_take_several_references(tmp_path, capsys):
    rng = random.Random(7)
    words = "the a cat dog sat ran on in mat house".split()
    refs = [[" ".join(rng.choice(words) for _ in range(rng.randint(3, 8))) for _ in range(20)] for _ in range(2)]
    hyps, feats, offsets = [], [], [0]
    for s in range(20):
        for k in range(4):
            source = refs[k % 2][s].split()
            hyps.append(" ".join(source[: len(source) - k] or ["x"]))
            feats.append([rng.random(), -float(k)])
        offsets.append(len(hyps))
    write_nbest(NBestList(np.array(offsets), hyps, np.array(feats), ["F", "G"]), str(tmp_path / "l.nbest"))
    for k in (0, 1):
        write_lines(refs[k], str(tmp_path / f"r{k}.txt"))
    two = ["--ref", str(tmp_path / "r0.txt"), "--ref", str(tmp_path / "r1.txt")]
    nbest, _, stats = load_tuning_data(
        str(tmp_path / "l.nbest"), [str(tmp_path / "r0.txt"), str(tmp_path / "r1.txt")], BleuMetric()
    )
    assert np.array_equal(stats, bleu_stats(hyps, refs, nbest.segment, "13a"))
    args = ["tune", "--nbest", str(tmp_path / "l.nbest"), *two, "--init", "zeros", "--out", str(tmp_path / "w.json")]
    assert main(args + ["--quiet"]) == 0
    record = json.load(open(tmp_path / "w.json"))
    assert record["tuning"]["ref"] == [str(tmp_path / "r0.txt"), str(tmp_path / "r1.txt")]
    assert main(["oracle", "--nbest", str(tmp_path / "l.nbest"), *two, "--out", str(tmp_path / "o.txt")]) == 0
    capsys.readouterr()
    oracle = open(tmp_path / "o.txt").read().splitlines()
    # the oracle's BLEU against both references is at least each hypothesis column's
    best = BLEU().corpus_score(oracle, refs).score
    assert best >= BLEU().corpus_score([hyps[o] for o in offsets[:-1]], refs).score
    write_lines([hyps[o + 1] for o in offsets[:-1]], str(tmp_path / "b.txt"))
    signif = ["signif", *two, "--baseline", str(tmp_path / "b.txt"), "--system", f"o={tmp_path / 'o.txt'}"]
    assert main(signif + ["--format", "json", "--shuffles", "100", "--resamples", "0"]) == 0
    table = json.loads(capsys.readouterr().out)
    rows = {(r["system"], r["metric"]): r for r in table["rows"]}
    assert rows[("o", "bleu")]["score"] == pytest.approx(best, abs=1e-6)
    # the signatures say two references, as eval's do (issue 61, item 4): JSON, text and the API
    signatures = table["meta"]["signatures"]
    assert all("nrefs:2" in sig for sig in signatures.values()), signatures
    assert main(signif + ["--shuffles", "100", "--resamples", "0"]) == 0
    text = capsys.readouterr().out
    assert "nrefs:2" in text and "nrefs:1" not in text
    api = rerank.significance(refs, [[hyps[o + 1] for o in offsets[:-1]]], {"o": [oracle]}, shuffles=100)
    assert all("nrefs:2" in sig for sig in api["meta"]["signatures"].values())


def test_reference_files_of_different_lengths_are_refused(tmp_path, capsys):
    write_lines(["a", "b"], str(tmp_path / "r0.txt"))
    write_lines(["a"], str(tmp_path / "r1.txt"))
    with pytest.raises(InputError, match=r"r1.txt: 1 lines but the first reference .*r0.txt has 2"):
        read_references([str(tmp_path / "r0.txt"), str(tmp_path / "r1.txt")])
    with pytest.raises(InputError, match="the reference streams differ in length: 2, 1 lines"):
        rerank.evaluate(["a", "b"], [["a", "b"], ["a"]])
    write_lines(["a", "b"], str(tmp_path / "h.txt"))
    args = [
        "eval",
        "--ref",
        str(tmp_path / "r0.txt"),
        "--ref",
        str(tmp_path / "r1.txt"),
        "--hyp",
        str(tmp_path / "h.txt"),
    ]
    assert main(args) == 1
    assert "r1.txt: 1 lines but the first reference" in capsys.readouterr().err
