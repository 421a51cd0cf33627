"""rerank mbr (issue 44): exact MBR decoding on the mbr: scorer's engine — the selection is
the argmax of the scorer's column, a hand-computed case, pseudo-references from another
list, the utility matrix, and bad inputs."""

import numpy as np
import pytest
from sacrebleu.metrics import CHRF

from rerank.cli import main
from rerank.features.scorer import make_scorer
from rerank.mbr.aggregate import aggregate_expected
from rerank.mbr.centroid import cluster
from rerank.mbr.pruned import pruned_select
from rerank.nbest import NBestList, read_nbest, write_nbest
from tests.conftest import write_split


def test_the_selection_is_the_argmax_of_the_mbr_column(tmp_path, capsys):
    write_split(tmp_path, "test", 25, seed=7)
    for metric in ("bleu", "chrf"):
        out = tmp_path / f"{metric}.txt"
        assert main(["mbr", "--nbest", str(tmp_path / "test.nbest"), "--metric", metric, "--out", str(out)]) == 0
        nbest = read_nbest(str(tmp_path / "test.nbest"))
        column = next(iter(make_scorer(f"mbr:{metric}").score(nbest, None, None).values()))
        assert out.read_text().splitlines() == [nbest.hypotheses[i] for i in nbest.select(column)]
    assert "mean expected chrf of the selections" in capsys.readouterr().err


def test_a_hand_computed_case_with_pseudo_references_and_the_matrix(tmp_path):
    # one segment, candidates c0 = "a b c", c1 = "a b d"; pseudo-references r0 = "a b c"
    # (weight e^0) and r1 = "x y z" (weight e^0): uniform 1/2 each
    cands = NBestList(np.array([0, 2]), ["a b c", "a b d"], np.zeros((2, 1)), ["NMT"])
    refs = NBestList(np.array([0, 2]), ["a b c", "x y z"], np.zeros((2, 1)), ["NMT"])
    write_nbest(cands, str(tmp_path / "c.nbest"))
    write_nbest(refs, str(tmp_path / "r.nbest"))
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--pseudo-refs", str(tmp_path / "r.nbest"), "--feature", "NMT"]
    assert main(argv + ["--out", str(tmp_path / "o.txt"), "--matrix", str(tmp_path / "m.tsv")]) == 0
    chrf = CHRF()
    u = {
        (h, r): chrf.sentence_score(ch, [cr]).score
        for h, ch in enumerate(cands.hypotheses)
        for r, cr in enumerate(refs.hypotheses)
    }
    rows = [line.split("\t") for line in (tmp_path / "m.tsv").read_text().splitlines()]
    assert len(rows) == 4
    for segment, h, r, value in rows:
        assert segment == "0" and float(value) == pytest.approx(u[(int(h), int(r))])
    expected = [0.5 * u[(h, 0)] + 0.5 * u[(h, 1)] for h in (0, 1)]
    assert expected[0] > expected[1]
    assert (tmp_path / "o.txt").read_text() == "a b c\n"
    # pruning draws both pseudo-references (fewer than its first step, 8) and prunes nothing
    # before they are all drawn: the same choice, from the same 4 utilities
    from rerank.features.consensus import ConsensusScorer

    scorer = ConsensusScorer(ConsensusScorer.Config("chrf", "uniform"))
    chosen, computed = pruned_select(scorer, cands, refs, np.array([0.5, 0.5]))
    assert list(chosen) == [0] and computed == 4


def test_ter_mbr_is_minus_the_expected_sentence_ter_of_sacrebleu(tmp_path, capsys):
    """mbr:ter and rerank mbr --metric ter: utility = minus sacrebleu's sentence TER; the
    column is the expected utility under the list's own softmax, the selection its argmax."""
    from sacrebleu.metrics import TER

    # one segment of three hypotheses, NMT log-probabilities 0, -1, -2
    texts = ["a man rides a horse", "a man rides the horse fast", "dog"]
    nbest = NBestList(np.array([0, 3]), texts, np.array([[0.0], [-1.0], [-2.0]]), ["NMT"])
    write_nbest(nbest, str(tmp_path / "l.nbest"))
    p = np.exp([0.0, -1.0, -2.0])
    p /= p.sum()
    ter = TER()
    expected = [-sum(p[r] * ter.sentence_score(h, [texts[r]]).score for r in range(3)) for h in texts]
    column = make_scorer("mbr:ter,feature=NMT").score(nbest, None, None)["MBRTER"]
    assert column == pytest.approx(expected)
    out = tmp_path / "o.txt"
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", "ter", "--feature", "NMT", "--out", str(out)]
    assert main(argv) == 0
    assert out.read_text() == texts[int(np.argmax(expected))] + "\n"
    assert (
        main(
            [
                "mbr",
                "--nbest",
                str(tmp_path / "l.nbest"),
                "--metric",
                "ter",
                "--feature",
                "NMT",
                "--algorithm",
                "aggregate",
                "--out",
                str(tmp_path / "a.txt"),
            ]
        )
        == 1
    )
    assert "TER has no aggregate reference" in capsys.readouterr().err


def test_bad_inputs_are_refused_in_one_line(tmp_path, capsys):
    write_split(tmp_path, "test", 5, seed=1)
    write_split(tmp_path, "other", 4, seed=2)
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--out", str(tmp_path / "o.txt")]
    assert main(argv + ["--pseudo-refs", str(tmp_path / "other.nbest")]) == 1
    assert "other.nbest" in capsys.readouterr().err
    assert main(argv + ["--feature", "Bogus"]) == 1
    assert "has no 'Bogus' column for their weights" in capsys.readouterr().err
    assert not (tmp_path / "o.txt").exists()


def test_reference_aggregation_by_hand_and_against_sacrebleu(tmp_path, capsys):
    from sacrebleu.metrics import BLEU

    from rerank.features.consensus import ConsensusScorer

    # BLEU, by hand: candidate "a b" against r0 = "a b", r1 = "a c" (weights 1/2 each). The
    # aggregate reference has unigrams a 1, b 1/2, c 1/2 and bigrams "a b" 1/2, "a c" 1/2, length
    # 2: matches 1 + 1/2 of 2 unigrams and 1/2 of 1 bigram, so BLEU = sqrt(0.75 · 0.5) = 61.24
    # (the exact expected utility is (100 + 50) / 2 = 75)
    cands = NBestList(np.array([0, 1]), ["a b"], np.zeros((1, 1)), ["NMT"])
    refs = NBestList(np.array([0, 2]), ["a b", "a c"], np.zeros((2, 1)), ["NMT"])
    p = np.array([0.5, 0.5])
    bleu = ConsensusScorer(ConsensusScorer.Config("bleu", "uniform", 1.0, "aggregate"))
    assert bleu.expected(cands, refs, p) == pytest.approx([100 * np.sqrt(0.75 * 0.5)])
    exact = ConsensusScorer(ConsensusScorer.Config("bleu", "uniform"))
    assert exact.expected(cands, refs, p) == pytest.approx([75.0])
    # one pseudo-reference per segment: the aggregate is that reference, so the utilities are
    # sacrebleu's sentence BLEU and chrF exactly
    write_split(tmp_path, "test", 12, seed=3)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    first = NBestList(
        np.arange(nbest.num_segments + 1),
        [nbest.hypotheses[o] for o in nbest.offsets[:-1]],
        nbest.features[nbest.offsets[:-1]],
        nbest.feature_names,
    )
    one = np.ones(nbest.num_segments)
    seg = np.repeat(np.arange(nbest.num_segments), np.diff(nbest.offsets))
    for metric, reference in (
        ("bleu", lambda h, r: BLEU(effective_order=True, tokenize="none").sentence_score(h, [r]).score),
        ("chrf", lambda h, r: CHRF().sentence_score(h, [r]).score),
    ):
        scorer = ConsensusScorer(ConsensusScorer.Config(metric, "uniform", 1.0, "aggregate"))
        got = scorer.expected(nbest, first, one)
        want = [reference(h, first.hypotheses[s]) for h, s in zip(nbest.hypotheses, seg)]
        assert got == pytest.approx(want, abs=1e-9)
        # the scorer's column (mbr:chrf,algorithm=aggregate) is the same engine, the list its own references
        column = next(iter(make_scorer(f"mbr:{metric},algorithm=aggregate").score(nbest, None, None).values()))
        weighted = ConsensusScorer(ConsensusScorer.Config(metric, "NMT", 1.0, "aggregate"))
        assert column == pytest.approx(weighted.expected(nbest, nbest, weighted.distribution(nbest)))
    # the command: the argmax of the aggregate utilities; no matrix (no pairs are scored)
    out = tmp_path / "agg.txt"
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--algorithm", "aggregate", "--out", str(out)]
    assert main(argv) == 0
    assert out.read_text().splitlines() == [nbest.hypotheses[i] for i in nbest.select(column)]
    assert "mbr (aggregate): 12 segments" in capsys.readouterr().err
    assert main(argv[:-1] + [str(tmp_path / "agg2.txt"), "--matrix", str(tmp_path / "m.tsv")]) == 1
    assert "--matrix needs --algorithm exact" in capsys.readouterr().err
    assert not (tmp_path / "agg2.txt").exists() and not (tmp_path / "m.tsv").exists()


def test_confidence_based_pruning_keeps_the_exact_choice_with_fewer_utilities(tmp_path, capsys):
    from rerank.features.consensus import ConsensusScorer

    # 40 segments of 40 candidates, each candidate its own pseudo-reference (uniform): at
    # alpha 1 nothing is pruned and every reference is drawn, so the selection is exact MBR's
    rng = np.random.default_rng(0)
    words = "ein mann eine frau hund rennt über die wiese im park mit ball".split()
    segments, hyps = 40, []
    for _ in range(segments):
        base = list(rng.choice(words, size=8))
        for _ in range(40):
            h = list(base)
            for _ in range(int(rng.integers(0, 4))):  # a few edits of a shared sentence
                h[int(rng.integers(0, len(h)))] = str(rng.choice(words))
            hyps.append(" ".join(h))
    nbest = NBestList(np.arange(0, 40 * segments + 1, 40), hyps, np.zeros((len(hyps), 1)), ["NMT"])
    for metric in ("chrf", "bleu"):
        scorer = ConsensusScorer(ConsensusScorer.Config(metric, "uniform"))
        p = scorer.distribution(nbest)
        exact = nbest.select(scorer.expected(nbest, nbest, p))
        chosen, computed = pruned_select(scorer, nbest, nbest, p, alpha=1.0)
        assert list(chosen) == list(exact) and computed == 40 * 40 * segments
        # pruning at 0.99: almost always the exact choice, for a fraction of the utilities
        chosen, computed = pruned_select(scorer, nbest, nbest, p, alpha=0.99)
        assert np.mean(chosen == exact) >= 0.9 and computed < 0.6 * 40 * 40 * segments
    write_nbest(nbest, str(tmp_path / "c.nbest"))
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", "chrf", "--feature", "uniform"]
    assert main(argv + ["--algorithm", "pruned", "--alpha", "1", "--out", str(tmp_path / "p.txt")]) == 0
    assert "64,000 utilities computed" in capsys.readouterr().err
    assert main(argv + ["--out", str(tmp_path / "e.txt")]) == 0
    assert (tmp_path / "p.txt").read_text() == (tmp_path / "e.txt").read_text()
    # weighted pseudo-references (the softmax of a model column, the default): every reference
    # drawn once and weighed by its probability, so alpha 1 is exact MBR here too (issue 61, item 5)
    weighted = NBestList(nbest.offsets, hyps, rng.normal(scale=2.0, size=(len(hyps), 1)), ["NMT"])
    for metric in ("chrf", "bleu"):
        scorer = ConsensusScorer(ConsensusScorer.Config(metric, "NMT"))
        p = scorer.distribution(weighted)
        exact = weighted.select(scorer.expected(weighted, weighted, p))
        chosen, _ = pruned_select(scorer, weighted, weighted, p, alpha=1.0)
        assert list(chosen) == list(exact), metric
        chosen, computed = pruned_select(scorer, weighted, weighted, p, alpha=0.99)
        # (measured: the exact choice in 78 % of the segments at seed 12345; a bootstrap of few draws under
        # peaked weights is coarser than on samples)
        assert np.mean(chosen == exact) >= 0.5 and computed < 40 * 40 * segments
    assert main(argv + ["--algorithm", "pruned", "--alpha", "1.5", "--out", str(tmp_path / "x.txt")]) == 1
    assert "alpha must be in (0, 1], not 1.5" in capsys.readouterr().err and not (tmp_path / "x.txt").exists()


def test_centroid_mbr_by_hand_and_its_two_limits(tmp_path, capsys):
    """Centroid MBR (Deguchi et al. 2024) on the utility's own n-gram counts: the pseudo-
    references clustered by weighted k-means, each centroid its cluster's aggregate reference;
    one cluster is reference aggregation, as many clusters as references is exact MBR."""
    pytest.importorskip("sklearn")  # k-means: scikit-learn (nbest-rerank[mbr])
    from rerank.features.consensus import ConsensusScorer

    # candidate "a b c d"; r0 "a b c d" and r1 "a b c e" (0.2 each) form one cluster, r2 = r3 =
    # "x y z w" (0.3 each) the other. Cluster 1's centroid: a, b, c, ab, bc, abc counted 1,
    # d, cd, bcd, abcd 1/2 (r0's half), length 4 -> matches 3.5/4, 2.5/3, 1.5/2, 0.5/1;
    # BLEU = 100 · (0.875 · 2.5/3 · 0.75 · 0.5)^(1/4); cluster 2 matches nothing (BLEU 0).
    # Expected = P(cluster 1) · BLEU = 0.4 · 72.31
    cands = NBestList(np.array([0, 1]), ["a b c d"], np.zeros((1, 1)), ["NMT"])
    refs = NBestList(np.array([0, 4]), ["a b c d", "a b c e", "x y z w", "x y z w"], np.zeros((4, 1)), ["NMT"])
    p = np.array([0.2, 0.2, 0.3, 0.3])
    scorer = ConsensusScorer(ConsensusScorer.Config("bleu", "uniform", 1.0, "centroid", 2))
    labels = cluster(scorer, refs.hypotheses, p, 0, 2)
    assert labels[0] == labels[1] != labels[2] == labels[3]
    by_hand = 0.4 * 100 * (0.875 * 2.5 / 3 * 0.75 * 0.5) ** 0.25
    assert scorer.expected(cands, refs, p) == pytest.approx([by_hand])
    # the limits, on lists of several segments: k = 1 is aggregation, k >= N exact MBR
    write_split(tmp_path, "test", 9, seed=5)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    for metric in ("bleu", "chrf"):
        one = ConsensusScorer(ConsensusScorer.Config(metric, "NMT", 1.0, "centroid", 1))
        q = one.distribution(nbest)
        assert one.expected(nbest, nbest, q) == pytest.approx(aggregate_expected(one, nbest, nbest, q))
        every = ConsensusScorer(ConsensusScorer.Config(metric, "NMT", 1.0, "centroid", 1000))
        exact = ConsensusScorer(ConsensusScorer.Config(metric, "NMT"))
        assert every.expected(nbest, nbest, q) == pytest.approx(exact.expected(nbest, nbest, q))
    # the command and the scorer column are one engine
    out = tmp_path / "c.txt"
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--algorithm", "centroid", "--clusters", "3"]
    assert main(argv + ["--metric", "bleu", "--out", str(out)]) == 0
    column = make_scorer("mbr:bleu,algorithm=centroid,clusters=3").score(nbest, None, None)["MBRBLEU"]
    assert out.read_text().splitlines() == [nbest.hypotheses[i] for i in nbest.select(column)]
    assert "mbr (centroid): 9 segments" in capsys.readouterr().err
    assert main(argv + ["--metric", "ter", "--out", str(tmp_path / "t.txt")]) == 1
    assert "centroid needs an n-gram utility" in capsys.readouterr().err


def test_two_lists_stream_in_step_whatever_their_blocks(tmp_path):
    from rerank.errors import InputError
    from rerank.nbest import concat_blocks, iter_nbest_pair

    write_split(tmp_path, "a", 17, seed=8)
    rng = np.random.default_rng(1)  # another list of the same 17 segments, other widths
    widths = rng.integers(1, 9, size=17)
    other = NBestList(
        np.concatenate([[0], np.cumsum(widths)]),
        [f"h{i}" for i in range(widths.sum())],
        np.zeros((widths.sum(), 1)),
        ["X"],
    )
    write_nbest(other, str(tmp_path / "b.nbest"))
    whole_a, whole_b = read_nbest(str(tmp_path / "a.nbest")), read_nbest(str(tmp_path / "b.nbest"))
    for size in (1, 3, 10, 1000):
        parts = list(iter_nbest_pair(str(tmp_path / "a.nbest"), str(tmp_path / "b.nbest"), block_size=size))
        assert [f for f, _, _ in parts] == list(np.cumsum([0] + [a.num_segments for _, a, _ in parts])[:-1])
        assert all(a.num_segments == b.num_segments for _, a, b in parts)
        assert concat_blocks([b for _, _, b in parts]).hypotheses == whole_b.hypotheses
        assert concat_blocks([a for _, a, _ in parts]).hypotheses == whole_a.hypotheses
    write_split(tmp_path, "short", 16, seed=9)
    with pytest.raises(InputError, match="more segments than the 16"):
        list(iter_nbest_pair(str(tmp_path / "short.nbest"), str(tmp_path / "b.nbest"), block_size=5))
    with pytest.raises(InputError, match="16 segments, but"):
        list(iter_nbest_pair(str(tmp_path / "b.nbest"), str(tmp_path / "short.nbest"), block_size=5))


@pytest.mark.parametrize("algorithm", ["exact", "centroid", "pruned", "halving"])
def test_mbr_shards_merged_equal_one_process(tmp_path, algorithm, capsys):
    if algorithm == "centroid":
        pytest.importorskip("sklearn")  # k-means: scikit-learn (nbest-rerank[mbr])
    write_split(tmp_path, "test", 11, seed=6)
    write_split(tmp_path, "samples", 11, seed=7)  # pseudo-references: another list of the same segments
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--pseudo-refs", str(tmp_path / "samples.nbest")]
    argv += ["--feature", "uniform", "--algorithm", algorithm, "--clusters", "2"]
    matrix = ["--matrix", str(tmp_path / "m.tsv")] if algorithm == "exact" else []
    assert main(argv + ["--out", str(tmp_path / "one.txt")] + matrix) == 0
    for k in range(3):
        matrix = ["--matrix", str(tmp_path / f"m{k}.tsv")] if algorithm == "exact" else []
        shard = ["--num-shards", "3", "--shard-id", str(k), "--out", str(tmp_path / f"s{k}.txt")]
        assert main(argv + shard + matrix) == 0
    assert main(["merge", *[str(tmp_path / f"s{k}.txt") for k in (1, 2, 0)], "--out", str(tmp_path / "m.txt")]) == 0
    assert (tmp_path / "m.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    if algorithm == "exact":  # the matrix names segments by their ids in the whole list: shards join with cat
        joined = "".join((tmp_path / f"m{k}.tsv").read_text() for k in range(3))
        assert joined == (tmp_path / "m.tsv").read_text()
    capsys.readouterr()
    # bad shards: one line each, nothing written
    cases = [
        (["--num-shards", "3", "--shard-id", "3"], "--shard-id 3 of --num-shards 3: ids run 0..2"),
        (["--num-shards", "12", "--shard-id", "0"], "shard 0 of 12 holds no segment (11 segments)"),
        (["--shard-id", "0"], "--num-shards and --shard-id go together"),
    ]
    for extra, message in cases:
        assert main(argv + extra + ["--out", str(tmp_path / "x.txt")]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
        assert not (tmp_path / "x.txt").exists()
    assert main(argv + ["--num-shards", "3", "--shard-id", "0", "--out", "-"]) == 1
    assert "a shard's output must be a file" in capsys.readouterr().err
    assert main(["merge", str(tmp_path / "s0.txt"), str(tmp_path / "s2.txt"), "--out", str(tmp_path / "x.txt")]) == 1
    assert "shard 1 of 3 is missing" in capsys.readouterr().err and not (tmp_path / "x.txt").exists()


def test_apply_shards_merged_equal_one_process(tmp_path, capsys):
    import json

    write_split(tmp_path, "test", 10, seed=3)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    weights = {name: float(k + 1) * (-1) ** k for k, name in enumerate(dict.fromkeys(nbest.feature_names))}
    (tmp_path / "w.json").write_text(json.dumps({"weights": weights}))
    argv = ["apply", "--nbest", str(tmp_path / "test.nbest"), "--weights", str(tmp_path / "w.json")]
    assert main(argv + ["--out", str(tmp_path / "one.txt"), "--out-nbest", str(tmp_path / "one.nbest")]) == 0
    for k in range(2):
        out = ["--out", str(tmp_path / f"s{k}.txt"), "--out-nbest", str(tmp_path / f"s{k}.nbest")]
        assert main(argv + ["--num-shards", "2", "--shard-id", str(k)] + out) == 0
    assert main(["merge", str(tmp_path / "s1.txt"), str(tmp_path / "s0.txt"), "--out", str(tmp_path / "m.txt")]) == 0
    assert (
        main(["merge", str(tmp_path / "s0.nbest"), str(tmp_path / "s1.nbest"), "--out", str(tmp_path / "m.nbest")]) == 0
    )
    assert (tmp_path / "m.txt").read_bytes() == (tmp_path / "one.txt").read_bytes()
    assert (tmp_path / "m.nbest").read_bytes() == (tmp_path / "one.nbest").read_bytes()
    # a text shard and a list shard of the same run are different outputs
    assert main(["merge", str(tmp_path / "s0.txt"), str(tmp_path / "s1.nbest"), "--out", str(tmp_path / "x")]) == 1
    assert "another kind of output" in capsys.readouterr().err
    # missing, duplicate and foreign text and list shards: one line each, nothing written
    write_split(tmp_path, "other", 10, seed=4)
    foreign = ["apply", "--nbest", str(tmp_path / "other.nbest"), "--weights", str(tmp_path / "w.json")]
    out = ["--out", str(tmp_path / "o1.txt"), "--out-nbest", str(tmp_path / "o1.nbest")]
    assert main(foreign + ["--num-shards", "2", "--shard-id", "1"] + out) == 0
    capsys.readouterr()
    for kind in ("txt", "nbest"):
        for names, message in (
            (["s0"], "shard 1 of 2 is missing"),
            (["s0", "s0"], "shard 0 is given twice"),
            (["s0", "o1"], "a shard of another run (another input than"),
        ):
            files = [str(tmp_path / f"{name}.{kind}") for name in names]
            assert main(["merge", *files, "--out", str(tmp_path / f"x.{kind}")]) == 1
            err = capsys.readouterr().err.strip()
            assert message in err and "\n" not in err, (kind, err)
            assert not (tmp_path / f"x.{kind}").exists()
    # a text shard cut short: a line missing, or its last line without its newline
    text = (tmp_path / "s1.txt").read_text()
    for cut, message in (
        (text[: text.rindex("\n", 0, -1) + 1], "4 lines but shard 1 holds 5"),
        (text[:-1], "s1.txt:5: its last line has no newline"),
    ):
        (tmp_path / "s1.txt").write_text(cut)
        assert main(["merge", str(tmp_path / "s0.txt"), str(tmp_path / "s1.txt"), "--out", str(tmp_path / "x")]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
        assert not (tmp_path / "x").exists()


def _mbrs_python():
    """The interpreter of a virtual environment holding mbrs (a peer, never a dependency):
    ``RERANK_MBRS_PYTHON``, or the benchmark's /tmp/mbrs-venv; None where there is none."""
    import os
    import subprocess

    for python in (os.environ.get("RERANK_MBRS_PYTHON"), "/tmp/mbrs-venv/bin/python"):
        if python and os.path.exists(python):
            if subprocess.run([python, "-c", "import mbrs"], capture_output=True).returncode == 0:
                return python
    return None


def test_exact_mbr_selects_what_mbrs_selects(tmp_path):
    """Exact MBR against mbrs' DecoderMBR (uniform weights, the candidates as their own
    pseudo-references) on a small list: the same text in every segment (ties between
    identical texts aside), for chrF and BLEU; skipped where no mbrs environment exists."""
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT

    python = _mbrs_python()
    if python is None:
        pytest.skip("no mbrs environment (benchmarks/bench_mbrs.py says how to make one)")
    write_split(tmp_path, "test", 12, seed=11)
    script = f"{ROOT}/benchmarks/bench_mbrs.py"
    for engine, interpreter in (("mbrs", python), ("rerank", sys.executable)):
        run = subprocess.run(
            [interpreter, script, "--engine", engine, "--nbest", str(tmp_path / "test.nbest")]
            + ["--out", str(tmp_path / f"{engine}.json")],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert run.returncode == 0, run.stderr[-2000:]
    ours, theirs = (json.loads((tmp_path / f"{e}.json").read_text()) for e in ("rerank", "mbrs"))
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    for metric in ("chrf", "bleu"):
        texts = [
            (nbest.hypotheses[o + a], nbest.hypotheses[o + b])
            for o, a, b in zip(nbest.offsets[:-1], ours[metric]["chosen"], theirs[metric]["chosen"])
        ]
        assert all(a == b for a, b in texts), metric


def test_a_softmax_that_would_overflow_is_refused_in_one_line(tmp_path, capsys):
    """``--temperature 1e-320`` (or scores near the float range under a small temperature) made
    the weights NaN and the selections wrong, with exit 0 (issue 62); now refused in one line.
    Scores of ±1e308 at temperature 1 are fine: the far one weighs 0, with no numpy warning."""
    import warnings

    nbest = NBestList(
        np.array([0, 2, 4]), ["a b", "a c", "d e", "d f"], np.array([[0.0], [-1.0], [1e308], [-1e308]]), ["NMT"]
    )
    write_nbest(nbest, str(tmp_path / "c.nbest"))
    args = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", "chrf", "--feature", "NMT"]
    args += ["--out", str(tmp_path / "o.txt")]
    with pytest.raises(SystemExit):  # below 1e-4 the command line refuses it (issue 92)
        main(args + ["--temperature", "1e-320"])
    assert "is not a temperature" in capsys.readouterr().err
    assert not (tmp_path / "o.txt").exists()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a numpy overflow warning would fail here
        assert main(args) == 0
    assert (tmp_path / "o.txt").read_text().splitlines()[1] == "d e"  # all the weight on the 1e308 candidate
    assert main(args + ["--temperature", "0.5"]) == 1


def test_the_record_counts_the_work_of_every_stage(tmp_path, capsys):
    """rerank mbr --json (issue 80, mbrs' timer): utilities computed, of which those of
    repeated texts (scored once), and seconds per stage; the closing line says the same."""
    import json

    # segment 0: 3 candidates, 2 distinct; pseudo-references 4, 2 distinct: 12 pairs, 4 distinct
    # segment 1: 2 candidates, 2 distinct; pseudo-references 1: 2 pairs, 2 distinct
    cands = NBestList(np.array([0, 3, 5]), ["a b", "a b", "c d", "e f", "g h"], np.zeros((5, 1)), ["NMT"])
    refs = NBestList(np.array([0, 4, 5]), ["a b", "x y", "a b", "x y", "e f"], np.zeros((5, 1)), ["NMT"])
    write_nbest(cands, str(tmp_path / "c.nbest"))
    write_nbest(refs, str(tmp_path / "r.nbest"))
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--pseudo-refs", str(tmp_path / "r.nbest"), "--json"]
    argv += ["--feature", "NMT"]
    assert main(argv + ["--out", str(tmp_path / "o.txt")]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    assert record["utilities"] == 12 + 2 and record["repeated"] == (12 - 4) + 0 and record["segments"] == 2
    assert list(record["seconds"]) == ["read", "weights", "utilities", "write"]
    assert all(value >= 0 for value in record["seconds"].values())
    assert "6 utilities computed; read " in captured.err  # one count: 14 pairs, 8 of them repeated texts
    # an algorithm that estimates its own work says no repeated count
    assert main(argv + ["--algorithm", "pruned", "--out", str(tmp_path / "p.txt")]) == 0
    assert json.loads(capsys.readouterr().out)["repeated"] is None


def test_prefilters_keep_the_top_k_before_the_algorithm_chooses(tmp_path, capsys):
    """rerank mbr --prefilter (issue 80: coarse-to-fine, QE pre-filter): top_k=1 is the stage's
    own choice; top_k=2 is exact MBR over the two kept candidates against the whole list (a
    list restricted by hand); top_k ≥ n changes nothing; utilities counted per stage."""
    import json

    from tests.conftest import one_line_error

    write_split(tmp_path, "test", 12, seed=3)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    rng = np.random.default_rng(0)
    quality = rng.normal(size=len(nbest.hypotheses))
    listed = NBestList(
        nbest.offsets, list(nbest.hypotheses), np.column_stack([nbest.features, quality]), nbest.feature_names + ["Q"]
    )
    full = str(tmp_path / "q.nbest")
    write_nbest(listed, full)
    base = ["mbr", "--nbest", full, "--feature", "uniform", "--json"]

    def run(*extra):
        out = str(tmp_path / "o.txt")
        assert main(base + list(extra) + ["--out", out]) == 0
        return (tmp_path / "o.txt").read_text().splitlines(), json.loads(capsys.readouterr().out)

    chrf_pick, _ = run("--metric", "chrf")
    assert run("--metric", "bleu", "--prefilter", "mbr:chrf,top_k=1")[0] == chrf_pick
    assert run("--metric", "bleu", "--prefilter", "column:Q,top_k=1")[0] == [
        listed.hypotheses[i] for i in listed.select(quality)
    ]
    bleu_pick, plain = run("--metric", "bleu")
    assert run("--metric", "bleu", "--prefilter", "mbr:chrf,top_k=1000")[0] == bleu_pick
    # top 2 by chrF, then BLEU-MBR among them against every candidate as pseudo-reference
    chrf = make_scorer("mbr:chrf,feature=uniform").score(listed, None, None)
    chrf = next(iter(chrf.values()))
    keep = np.concatenate(
        [
            listed.offsets[s] + np.sort(np.argsort(-chrf[listed.offsets[s] : listed.offsets[s + 1]], kind="stable")[:2])
            for s in range(listed.num_segments)
        ]
    )
    write_nbest(listed.keep(keep), str(tmp_path / "kept.nbest"))
    by_hand = ["mbr", "--nbest", str(tmp_path / "kept.nbest"), "--pseudo-refs", full, "--feature", "uniform"]
    assert main(by_hand + ["--metric", "bleu", "--out", str(tmp_path / "h.txt")]) == 0
    picks, record = run("--metric", "bleu", "--prefilter", "mbr:chrf,top_k=2")
    assert picks == (tmp_path / "h.txt").read_text().splitlines()
    sizes = np.diff(listed.offsets)
    assert plain["utilities"] == int((sizes * sizes).sum())
    assert record["utilities"] == int((sizes * sizes).sum() + (np.minimum(sizes, 2) * sizes).sum())
    assert "prefilter" in record["seconds"]
    # two stages in order: a column, then coarse-to-fine on what is left
    two, _ = run("--metric", "bleu", "--prefilter", "column:Q,top_k=3", "--prefilter", "mbr:chrf,top_k=1")
    for s, pick in enumerate(two):
        lo, hi = listed.offsets[s], listed.offsets[s + 1]
        top3 = lo + np.sort(np.argsort(-quality[lo:hi], kind="stable")[:3])
        assert pick == listed.hypotheses[top3[np.argmax(chrf[top3])]]
    for extra, message in (
        (["--prefilter", "chrf,top_k=2"], "expected mbr:UTILITY,top_k=K or column:NAME,top_k=K"),
        (["--prefilter", "mbr:chrf,top_k=0"], "top_k must be a positive integer, not '0'"),
        (["--prefilter", "column:Kiwi,top_k=2"], "the candidates have no 'Kiwi' column"),
        (["--prefilter", "mbr:length,top_k=2"], "has no pairwise utility"),
        (["--prefilter", "mbr:chrf,top_k=2", "--matrix", str(tmp_path / "m.tsv")], "not with --prefilter"),
    ):
        assert main(base + extra + ["--out", str(tmp_path / "x.txt")]) == 1
        one_line_error(capsys, message)
    assert not (tmp_path / "x.txt").exists()


def test_low_rank_mbr_completes_a_planted_matrix_and_is_exact_at_reduction_1(tmp_path, capsys):
    """--algorithm lowrank (Trabelsi et al. 2024, mbrs' probabilistic_mbr): ALS recovers a
    planted rank-2 matrix from half its cells; reduction 1 is exact MBR; it computes
    ceil(n·m / reduction) utilities a segment, the same cells for the same seed and segment
    (shards select as one process does)."""
    import json

    from rerank.features.consensus import ConsensusScorer
    from rerank.mbr.lowrank import als_complete, lowrank_expected

    rng = np.random.default_rng(0)
    planted = (rng.random((30, 2)) * 5) @ (rng.random((30, 2)) * 5).T
    mask = rng.random((30, 30)) < 0.5
    completed = als_complete(np.where(mask, planted, 0), mask, 2, 1e-6, 50, np.random.default_rng(1))
    assert np.abs(completed - planted)[~mask].max() < 1e-2
    write_split(tmp_path, "test", 10, seed=4)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    scorer = ConsensusScorer(ConsensusScorer.Config("chrf", "uniform"))
    p = scorer.distribution(nbest)
    exact = scorer.expected(nbest, nbest, p)
    same, computed = lowrank_expected(scorer, nbest, nbest, p, reduction=1)
    sizes = np.diff(nbest.offsets)
    assert np.allclose(same, exact) and computed == int((sizes * sizes).sum())
    estimate, computed = lowrank_expected(scorer, nbest, nbest, p, reduction=4, seed=3)
    assert computed == sum(-(-int(n * n) // 4) for n in sizes)
    again, _ = lowrank_expected(scorer, nbest, nbest, p, reduction=4, seed=3)
    assert np.array_equal(estimate, again)
    # segments 5.. as their own list, numbered from 5: the same estimates
    tail = nbest.subset(np.arange(5, nbest.num_segments))
    part, _ = lowrank_expected(scorer, tail, tail, scorer.distribution(tail), reduction=4, seed=3, first=5)
    assert np.array_equal(part, estimate[nbest.offsets[5] :])
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--feature", "uniform", "--json"]
    assert main(argv + ["--algorithm", "lowrank", "--reduction", "1", "--out", str(tmp_path / "l.txt")]) == 0
    assert main(argv + ["--out", str(tmp_path / "e.txt")]) == 0
    assert (tmp_path / "l.txt").read_text() == (tmp_path / "e.txt").read_text()
    capsys.readouterr()
    assert (
        main(argv + ["--algorithm", "lowrank", "--seed", "3", "--reduction", "4", "--out", str(tmp_path / "q.txt")])
        == 0
    )
    record = json.loads(capsys.readouterr().out)
    assert record["utilities"] == computed
    assert (tmp_path / "q.txt").read_text().splitlines() == [nbest.hypotheses[i] for i in nbest.select(estimate)]


def test_k_best_and_diverse_mbr_choices(tmp_path, capsys):
    """rerank mbr --keep K --out-kbest FILE (mbrs' nbest selector) and --diversity λ (its diverse
    selector's objective): the K distinct best by the mbr: column, best first; with λ, greedy
    only, the second choice maximises mean expected chrF + λ · mean(−chrF) between the two, by
    hand; with the local search, the pair of the highest objective of all, by hand."""
    from tests.conftest import one_line_error

    write_split(tmp_path, "test", 6, seed=5)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    # a duplicate of every segment's first candidate: kept once
    rows = np.concatenate([[o] + list(range(o, e)) for o, e in zip(nbest.offsets[:-1], nbest.offsets[1:])])
    sizes = np.diff(nbest.offsets) + 1
    listed = NBestList(
        np.concatenate([[0], np.cumsum(sizes)]),
        [nbest.hypotheses[i] for i in rows],
        nbest.features[rows],
        nbest.feature_names,
    )
    path = str(tmp_path / "d.nbest")
    write_nbest(listed, path)
    column = next(iter(make_scorer("mbr:chrf,feature=uniform").score(listed, None, None).values()))
    argv = ["mbr", "--nbest", path, "--feature", "uniform", "--out", str(tmp_path / "o.txt")]
    assert main(argv + ["--keep", "3", "--out-kbest", str(tmp_path / "k.nbest")]) == 0
    kbest = read_nbest(str(tmp_path / "k.nbest"))
    assert kbest.feature_names == ["MBRchrF"]
    picks = (tmp_path / "o.txt").read_text().splitlines()
    for s in range(listed.num_segments):
        lo, hi = listed.offsets[s], listed.offsets[s + 1]
        texts, values = listed.hypotheses[lo:hi], column[lo:hi]
        best = {}
        for text, value in zip(texts, values):
            best.setdefault(text, value)  # each text once (its first row)
        want = sorted(best, key=lambda t: -best[t])[:3]
        got = kbest.hypotheses[kbest.offsets[s] : kbest.offsets[s + 1]]
        assert list(got) == want and got[0] == picks[s] and len(set(got)) == len(got)
        assert np.allclose(kbest.features[kbest.offsets[s] : kbest.offsets[s + 1], 0], [best[t] for t in want])
    # diverse: one segment, by hand
    texts = ["a man is riding a red bike", "a man is riding a red bicycle", "two dogs play in the snow", "a man rides"]
    one = NBestList(np.array([0, 4]), texts, np.zeros((4, 1)), ["NMT"])
    write_nbest(one, str(tmp_path / "one.nbest"))
    chrf = CHRF()
    u = np.array([[chrf.sentence_score(h, [r]).score for r in texts] for h in texts])
    expected = u.mean(axis=1)
    first = int(np.argmax(expected))
    for lam in (0.0, 0.5, 3.0):
        objective = [
            (expected[first] + expected[j]) / 2 + lam * (-(u[first, j] + u[j, first])) / 2 if j != first else -np.inf
            for j in range(4)
        ]
        second = int(np.argmax(objective))
        one_argv = ["mbr", "--nbest", str(tmp_path / "one.nbest"), "--feature", "uniform", "--out", str(tmp_path / "x")]
        one_argv += ["--keep", "2", "--diversity", str(lam), "--out-kbest", str(tmp_path / "v.nbest")]
        assert main(one_argv + ["--local-search-iterations", "0"]) == 0  # greedy only
        got = read_nbest(str(tmp_path / "v.nbest")).hypotheses
        assert set(got) == {texts[first], texts[second]}
        if lam == 3.0:
            assert texts[second] == "two dogs play in the snow"  # far from the first: chosen for diversity
        # with the local search (20 rounds, 1 neighbour): here the best pair of all six
        pairs = [(i, j) for i in range(4) for j in range(i + 1, 4)]
        value = [(expected[i] + expected[j]) / 2 - lam * (u[i, j] + u[j, i]) / 2 for i, j in pairs]
        assert main(one_argv) == 0
        got = read_nbest(str(tmp_path / "v.nbest")).hypotheses
        assert set(got) == {texts[k] for k in pairs[int(np.argmax(value))]}
        if lam == 3.0:  # the MBR choice itself gives way to two far-apart candidates
            assert texts[first] not in got and "two dogs play in the snow" in got
    capsys.readouterr()
    for extra, message in (
        (["--algorithm", "pruned"], "the pruned algorithm only selects"),
        (["--num-shards", "2", "--shard-id", "0"], "not written in shards"),
    ):
        assert main(argv + extra + ["--out-kbest", str(tmp_path / "z.nbest")]) == 1
        one_line_error(capsys, message)
    assert not (tmp_path / "z.nbest").exists()


def test_low_rank_mbr_with_mbrs_draws_makes_mbrs_picks():
    """--algorithm lowrank --draws mbrs --seed 0 reproduces mbrs 0.1.8's probabilistic_mbr
    (tests/data/mbrs_lowrank.json: its picks on 16 segments of 12-40 candidates, computed in its
    own venv) pick for pick; rerank's own draws differ (each segment its own stream)."""
    import json
    import os

    pytest.importorskip("torch")
    from rerank.mbr import MBR
    from rerank.mbr.decoders import make_decoder

    peer = json.load(open(os.path.join(os.path.dirname(__file__), "..", "data", "mbrs_lowrank.json"), encoding="utf-8"))
    sizes = [len(s) for s in peer["segments"]]
    texts = [t for s in peer["segments"] for t in s]
    nbest = NBestList(np.concatenate([[0], np.cumsum(sizes)]), texts, np.zeros((len(texts), 1)), ["NMT"])
    picks = {}
    for draws in ("mbrs", "numpy"):
        engine = MBR("chrf", "uniform", 1.0, make_decoder("lowrank", draws=draws, seed=0))
        chosen, computed, _ = engine.select(nbest, nbest, engine.distribution(nbest))
        picks[draws] = [int(c - o) for c, o in zip(chosen, nbest.offsets[:-1])]
        assert computed == sum(-(-n * n // 8) for n in sizes)
    assert picks["mbrs"] == peer["chosen"] and len(set(peer["chosen"])) > 8
    assert picks["numpy"] != peer["chosen"]


def test_diverse_mbr_with_mbrs_draws_makes_mbrs_diverse_picks(tmp_path, capsys):
    """--keep 4 --diversity λ with --local-search-draws mbrs reproduces mbrs 0.1.8's diverse
    selector (greedy best-first, then its seeded local search; tests/data/mbrs_diverse.json,
    computed in its own venv) set for set on 16 segments: at λ = 1 every segment, where the
    local search changes every greedy set; at λ = 0.1 every segment but the one where mbrs keeps
    two copies of one text (rerank keeps K distinct texts)."""
    import json
    import os

    pytest.importorskip("torch")
    data = os.path.join(os.path.dirname(__file__), "..", "data")
    segments = json.load(open(os.path.join(data, "mbrs_lowrank.json"), encoding="utf-8"))["segments"]
    peer = json.load(open(os.path.join(data, "mbrs_diverse.json"), encoding="utf-8"))["chosen"]
    sizes = [len(s) for s in segments]
    texts = [t for s in segments for t in s]
    nbest = NBestList(np.concatenate([[0], np.cumsum(sizes)]), texts, np.zeros((len(texts), 1)), ["NMT"])
    write_nbest(nbest, str(tmp_path / "c.nbest"))
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--feature", "uniform", "--out", str(tmp_path / "o.txt")]

    def sets(lam, *extra):
        assert main(argv + ["--keep", "4", "--diversity", lam, "--out-kbest", str(tmp_path / "k.nbest"), *extra]) == 0
        kbest = read_nbest(str(tmp_path / "k.nbest"))
        return [set(kbest.hypotheses[kbest.offsets[s] : kbest.offsets[s + 1]]) for s in range(len(segments))]

    for lam in ("1.0", "0.1"):
        theirs = [{segments[s][i] for i in chosen} for s, chosen in enumerate(peer[lam])]
        ours = sets(lam, "--local-search-draws", "mbrs")
        repeated = [s for s, chosen in enumerate(peer[lam]) if len(theirs[s]) < len(chosen)]
        assert repeated == ([] if lam == "1.0" else [1])
        assert all(ours[s] == theirs[s] for s in range(len(segments)) if s not in repeated)
        assert all(len(ours[s]) == 4 for s in range(len(segments)))
        greedy = sets(lam, "--local-search-iterations", "0")
        changed = sum(greedy[s] != ours[s] for s in range(len(segments)))
        assert changed == (16 if lam == "1.0" else 0)
    capsys.readouterr()
    assert (
        main(
            argv + ["--keep", "2", "--diversity", "1", "--out-kbest", str(tmp_path / "z"), "--local-search-draws", "x"]
        )
        == 1
    )
    assert "--local-search-draws must be numpy or mbrs, not 'x'" in capsys.readouterr().err
    assert not (tmp_path / "z").exists()


class _PlantedUtilities:
    """A pair-utility engine over a planted matrix: ``u(text_i, text_j) = matrix[i][j]`` for the
    texts named ``names`` (each text's index); counts the utilities asked."""

    def __init__(self, names, matrix):
        self.index, self.matrix, self.asked = {t: i for i, t in enumerate(names)}, np.asarray(matrix), 0

    def pair_utilities_of(self, texts, every_pair=True, segment=None):
        ids = np.array([self.index[t] for t in texts])

        def gather(hyp, ref):
            self.asked += len(hyp)
            return self.matrix[ids[hyp], ids[ref]]

        return gather


def test_sequential_halving_by_hand_within_its_budget():
    """--algorithm halving (Baharav & Tse 2019; Jinnai & Ariu 2024) traced by hand on a planted
    4 × 4 matrix: the pseudo-references visited in descending weight, the better half kept each
    round, the survivors completed once they fit in the budget; reduction 1 is exact MBR."""
    from rerank.mbr.halving import halving_select

    names = ["a", "b", "c", "d"]
    # weights 0.4, 0.3, 0.2, 0.1: the visiting order a, b, c, d
    matrix = [
        [1.0, 0.2, 0.2, 1.0],  # E(a) = 0.40 + 0.06 + 0.04 + 0.10 = 0.60
        [0.3, 1.0, 0.9, 0.9],  # E(b) = 0.12 + 0.30 + 0.18 + 0.09 = 0.69: exact MBR's choice
        [0.6, 0.5, 1.0, 0.0],  # E(c) = 0.24 + 0.15 + 0.20 + 0.00 = 0.59
        [0.5, 0.6, 0.6, 1.0],  # E(d) = 0.20 + 0.18 + 0.12 + 0.10 = 0.60
    ]
    nbest = NBestList(np.array([0, 4]), names, np.zeros((4, 1)), ["NMT"])
    p = np.array([0.4, 0.3, 0.2, 0.1])
    # budget 8 (16 / 2): round 1, 8 // (4 survivors · 2 rounds) = 1 reference (a): a 1.0, c 0.6
    # survive; round 2, 4 // (2 · 1) = 2 more (b, c): a (0.4 + 0.06 + 0.04) / 0.9 = 0.556, c
    # (0.24 + 0.15 + 0.2) / 0.9 = 0.656: c alone survives, 4 + 4 utilities
    engine = _PlantedUtilities(names, matrix)
    chosen, computed = halving_select(engine, nbest, nbest, p, 2)
    assert list(chosen) == [2] and computed == engine.asked == 8
    # budget 10: after round 1 (4 utilities) the two survivors' 2 × 3 others fit in the 6 left:
    # exact between them, E(a) 0.60 > E(c) 0.59
    chosen, computed = halving_select(_PlantedUtilities(names, matrix), nbest, nbest, p, 1.6)
    assert list(chosen) == [0] and computed == 10
    chosen, computed = halving_select(_PlantedUtilities(names, matrix), nbest, nbest, p, 1)
    assert list(chosen) == [1] and computed == 16
    # repeated texts are scored once, a pseudo-reference weighing its copies' summed weight: "b"
    # twice at 0.15 is "b" at 0.3 (the same choices), and the choice is a text's first row
    twice = NBestList(np.array([0, 5]), ["a", "b", "c", "d", "b"], np.zeros((5, 1)), ["NMT"])
    p5 = np.array([0.4, 0.15, 0.2, 0.1, 0.15])
    for reduction, pick, utilities in ((2, 2, 8), (1.6, 0, 10), (1, 1, 16)):
        assert halving_select(_PlantedUtilities(names, matrix), twice, twice, p5, reduction)[0][0] == pick
        assert halving_select(_PlantedUtilities(names, matrix), twice, twice, p5, reduction)[1] == utilities


def test_sequential_halving_on_chrf_lists_exact_at_reduction_1_and_shardable(tmp_path, capsys):
    import json

    from rerank.features.consensus import ConsensusScorer
    from rerank.mbr.halving import halving_select

    write_split(tmp_path, "test", 12, seed=5)
    nbest = read_nbest(str(tmp_path / "test.nbest"))
    for feature in ("uniform", "NMT"):
        scorer = ConsensusScorer(ConsensusScorer.Config("chrf", feature))
        p = scorer.distribution(nbest)
        exact = nbest.select(scorer.expected(nbest, nbest, p))
        chosen, computed = halving_select(scorer, nbest, nbest, p, reduction=1)
        assert list(chosen) == list(exact)
        chosen, computed = halving_select(scorer, nbest, nbest, p, reduction=4, seed=3)
        sizes = np.diff(nbest.offsets)
        assert computed <= sum(max(int(n), -(-int(n * n) // 4)) for n in sizes)
        tail = nbest.subset(np.arange(5, nbest.num_segments))
        part, _ = halving_select(scorer, tail, tail, scorer.distribution(tail), reduction=4, seed=3, first=5)
        assert list(part + nbest.offsets[5]) == list(chosen[5:])
    argv = ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--feature", "uniform", "--json"]
    assert main(argv + ["--algorithm", "halving", "--reduction", "1", "--out", str(tmp_path / "h.txt")]) == 0
    assert main(argv + ["--out", str(tmp_path / "e.txt")]) == 0
    assert (tmp_path / "h.txt").read_text() == (tmp_path / "e.txt").read_text()
    capsys.readouterr()
    argv += ["--algorithm", "halving", "--seed", "3", "--reduction", "4", "--out", str(tmp_path / "q.txt")]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    scorer = ConsensusScorer(ConsensusScorer.Config("chrf", "uniform"))
    chosen, computed = halving_select(scorer, nbest, nbest, scorer.distribution(nbest), reduction=4, seed=3)
    assert record["utilities"] == computed
    # it selects: no expected utility (null, not NaN), and the record names its settings
    assert record["expected"] is None and record["settings"] == {"reduction": 4.0, "seed": 3}
    assert (tmp_path / "q.txt").read_text().splitlines() == [nbest.hypotheses[i] for i in chosen]
    import rerank

    result = rerank.mbr_decode(nbest, "chrf", algorithm="halving", weights_from="uniform", reduction=4, seed=3)
    assert result.picks == [nbest.hypotheses[i] for i in chosen] and result.summary["utilities"] == computed
