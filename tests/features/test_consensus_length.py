"""Consensus (MBR) and length features against sacrebleu and hand computations."""

import math

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from rerank.errors import InputError
from rerank.features.length import mean_log_ratio
from rerank.features.scorer import make_scorer
from rerank.mbr import list_pairs, list_softmax
from rerank.metrics.bleu_stats import bleu_from_stats, pair_bleu_stats
from rerank.metrics.chrf import ChrfMetric
from rerank.nbest import NBestList
from tests.conftest import random_corpus

LISTS = [
    ["ein mann fährt rad .", "ein mann fährt ein rad .", "mann rad", "eine frau läuft ."],
    ["zwei hunde spielen im schnee .", "zwei hunde spielen .", "hunde"],
]


def _nbest(lists, nmt):
    texts = [h for lst in lists for h in lst]
    offsets = np.concatenate([[0], np.cumsum([len(lst) for lst in lists])])
    features = np.stack([nmt, -np.array([len(t.split()) for t in texts], dtype=float)], axis=1)
    return NBestList(offsets, texts, features, ["NMT", "WordPenalty"])


def test_pairs_cover_every_ordered_pair_grouped_by_reference():
    hyp, ref = list_pairs(np.array([0, 2, 5]))
    assert list(zip(ref.tolist(), hyp.tolist())) == [(0, 0), (0, 1), (1, 0), (1, 1)] + [
        (r, h) for r in range(2, 5) for h in range(2, 5)
    ]


def test_softmax_within_lists():
    p = list_softmax(np.array([0.0, math.log(3.0), 5.0]), np.array([0, 2, 3]))
    assert p.tolist() == pytest.approx([0.25, 0.75, 1.0])


def test_pair_bleu_equals_sacrebleu_sentence_bleu():
    refs, hyps, segment = random_corpus(15, 6, seed=1)
    texts = hyps + ["", "a", "a b"]  # empty and very short texts: effective order
    rng = np.random.default_rng(0)
    hyp_index = rng.integers(0, len(texts), 300)
    ref_index = np.sort(rng.integers(0, len(texts), 300))
    ours = bleu_from_stats(pair_bleu_stats(texts, hyp_index, ref_index), effective_order=True)
    bleu = BLEU(tokenize="none", effective_order=True)
    theirs = [bleu.sentence_score(texts[h], [texts[r]]).score for h, r in zip(hyp_index, ref_index)]
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_pair_chrf_equals_sacrebleu_sentence_chrf():
    refs, hyps, segment = random_corpus(10, 5, seed=2)
    texts = hyps + ["", "x", "Über die Straße"]
    rng = np.random.default_rng(1)
    hyp_index = rng.integers(0, len(texts), 200)
    ref_index = np.sort(rng.integers(0, len(texts), 200))
    metric = ChrfMetric()
    stats = metric.pair_stats(texts, hyp_index, ref_index)
    chrf = CHRF()
    expected = np.asarray(
        chrf._extract_corpus_statistics([texts[h] for h in hyp_index], [[texts[r] for r in ref_index]]), dtype=float
    )
    assert stats.tolist() == expected.tolist()
    theirs = [chrf.sentence_score(texts[h], [texts[r]]).score for h, r in zip(hyp_index, ref_index)]
    assert metric.score(stats) == pytest.approx(theirs, abs=1e-9)


@pytest.mark.parametrize("metric", ["bleu", "chrf"])
def test_expected_utility_by_hand(metric):
    nmt = np.array([-1.0, -2.0, -5.0, -3.0, -0.5, -1.5, -4.0])
    nbest = _nbest(LISTS, nmt)
    got = make_scorer(f"mbr:{metric},feature=NMT").score(nbest, None, None)[
        "MBRBLEU" if metric == "bleu" else "MBRchrF"
    ]
    sentence = (BLEU(tokenize="none", effective_order=True) if metric == "bleu" else CHRF()).sentence_score
    expected = []
    for start, lst in ((0, LISTS[0]), (4, LISTS[1])):
        logits = nmt[start : start + len(lst)]
        p = np.exp(logits - logits.max())
        p /= p.sum()
        for h in lst:
            expected.append(sum(pj * sentence(h, [r]).score for pj, r in zip(p, lst)))
    assert got == pytest.approx(expected, abs=1e-9)


def test_consensus_settings():
    nbest = _nbest(LISTS, np.zeros(7))
    flat = make_scorer("mbr:bleu,feature=WordPenalty,temperature=1e9").score(nbest, None, None)["MBRBLEU"]
    uniform = make_scorer("mbr:bleu,feature=NMT").score(nbest, None, None)["MBRBLEU"]  # NMT all zero: uniform too
    assert flat == pytest.approx(uniform)
    for bad in ("mbr:meteor", "mbr:bleu,temperature=0", "mbr:bleu,temperature=x", "mbr:bleu,beam=3"):
        with pytest.raises(InputError):
            make_scorer(bad)
    with pytest.raises(InputError, match="no 'LM' column"):
        make_scorer("mbr:bleu,feature=LM").score(nbest, None, None)


def test_length_features_by_hand(tmp_path):
    nbest = _nbest(LISTS, np.zeros(7))
    sources = ["a man rides a bike .", "two dogs play in the snow ."]
    scorer = make_scorer("len:1.25")
    out = scorer.score(nbest, sources, None)
    ratios = [5 / 6, 6 / 6, 2 / 6, 4 / 6, 6 / 7, 4 / 7, 1 / 7]
    assert out["LenRatio"] == pytest.approx(ratios)
    assert out["LenDev"] == pytest.approx([(math.log(r) - math.log(1.25)) ** 2 for r in ratios])
    # from a prepare directory: geometric mean of the training pairs' ratios
    (tmp_path / "tok").mkdir()
    (tmp_path / "prepare.json").write_text('{"config": {"src": "en", "tgt": "de"}}')
    (tmp_path / "tok" / "train.en").write_text("a b\na b c d\n")
    (tmp_path / "tok" / "train.de").write_text("a b c d\na b\n")
    assert mean_log_ratio(["a b", "a b c d"], ["a b c d", "a b"]) == pytest.approx(0.0)
    assert make_scorer(f"len:{tmp_path}").log_mean == pytest.approx(0.0)
    # from any two parallel files: the same estimate; the reversed pair, its inverse
    (tmp_path / "a.fr").write_text("a b c\na b c d e f\n")
    assert make_scorer(f"len:src={tmp_path}/tok/train.en,tgt={tmp_path}/a.fr").log_mean == pytest.approx(
        (math.log(3 / 2) + math.log(6 / 4)) / 2
    )
    assert make_scorer(f"len:src={tmp_path}/a.fr,tgt={tmp_path}/tok/train.en").log_mean == pytest.approx(
        -math.log(3 / 2)
    )
    with pytest.raises(
        InputError, match=r"give len:PREPARED_DIR, len:src=TRAIN.SRC,tgt=TRAIN.TGT \(parallel files\) or len:RATIO"
    ):
        make_scorer(f"len:{tmp_path}/a.fr")
    for bad in ("len:", "len:-1", "len:abc", f"len:src={tmp_path}/a.fr"):
        with pytest.raises(InputError):
            make_scorer(bad)
    with pytest.raises(InputError, match="source"):
        scorer.score(nbest, None, None)


def test_mbr_uniform_weighs_samples_alike():
    from rerank.metrics.bleu_stats import bleu_from_stats, pair_bleu_stats
    from rerank.nbest import NBestList

    hyps = ["a b c d", "a b c e", "x y z w"]
    nbest = NBestList(np.array([0, 3]), hyps, np.array([[5.0], [0.0], [-5.0]]), ["NMT"])
    got = make_scorer("mbr:bleu,feature=uniform").score(nbest, None, None)["MBRBLEU"]
    for i in range(3):
        stats = pair_bleu_stats(hyps, np.full(3, i), np.arange(3))
        assert got[i] == pytest.approx(bleu_from_stats(stats, effective_order=True).mean())


@pytest.mark.parametrize("utility", ["bleu", "chrf"])
def test_a_long_list_is_scored_a_block_of_references_at_a_time_with_the_same_values(utility):
    # memory bounded by max_pairs even inside one segment (a 5,000-candidate list held 7.8 GB)
    from rerank.features.consensus import ConsensusScorer
    from rerank.features.scorer import make_scorer

    rng = np.random.default_rng(3)
    words = [f"w{i}" for i in range(12)]
    hyps = [" ".join(rng.choice(words, size=rng.integers(2, 9))) for _ in range(40)] + ["a b", "a c", "b c"]
    nbest = NBestList(np.array([0, 40, 43]), hyps, rng.normal(size=(43, 1)), ["NMT"])
    whole = make_scorer(f"mbr:{utility},feature=NMT").score(nbest, None, None)
    blocked = make_scorer(f"mbr:{utility},feature=NMT")
    blocked.max_pairs = 100  # 40 × 40 = 1,600 pairs in blocks of 2 references (80 pairs)
    assert isinstance(blocked, ConsensusScorer)
    for name, values in blocked.score(nbest, None, None).items():
        assert np.allclose(values, whole[name], rtol=1e-12, atol=1e-9)
