import numpy as np
import pytest
from sacrebleu.metrics import BLEU

from rerank.metrics.bleu_stats import background_sentence_bleu, bleu_from_stats, bleu_stats, sacrebleu_score
from tests.conftest import random_corpus


def sacrebleu_rows(hyps, refs, segment, **kwargs):
    """sacrebleu's own per-segment statistics, reordered to our (Moses) layout."""
    metric = BLEU(force=True, **kwargs)
    st = np.asarray(metric._extract_corpus_statistics(hyps, [[refs[s] for s in segment]]), dtype=float)
    out = np.zeros((len(hyps), 9))
    out[:, 0:8:2] = st[:, 2:6]
    out[:, 1:8:2] = st[:, 6:10]
    out[:, 8] = st[:, 1]
    assert np.array_equal(out[:, 1], st[:, 0])  # hypothesis length = unigram total
    return out


@pytest.mark.parametrize("tokenize,lowercase", [("none", False), ("13a", False), ("13a", True), ("intl", False)])
def test_sentence_statistics_equal_sacrebleu(corpus, tokenize, lowercase):
    refs, hyps, segment = corpus
    hyps = [h.capitalize() + "." if k % 3 == 0 else h for k, h in enumerate(hyps)]
    ours = bleu_stats(hyps, refs, segment, tokenize=tokenize, lowercase=lowercase)
    theirs = sacrebleu_rows(hyps, refs, segment, tokenize=tokenize, lowercase=lowercase)
    assert np.array_equal(ours, theirs)


def test_corpus_bleu_equals_sacrebleu_for_every_selection():
    refs, hyps, segment = random_corpus(60, 5, seed=11)
    stats = bleu_stats(hyps, refs, segment)
    rng = np.random.default_rng(0)
    metric = BLEU(tokenize="none", force=True)
    for _ in range(5):
        pick = np.arange(60) * 5 + rng.integers(0, 5, size=60)
        expected = metric.corpus_score([hyps[i] for i in pick], [refs]).score
        assert bleu_from_stats(stats[pick].sum(0)) == pytest.approx(expected, abs=1e-9)
        assert sacrebleu_score(stats[pick].sum(0)).score == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "hyp,ref",
    [
        ("a b c d", "a b c d"),  # perfect
        ("x y z", "a b c d"),  # no match at all -> 0
        ("a b", "a b c d"),  # no 3-grams in the hypothesis -> 0
        ("a x b y c", "a b c d e f"),  # unigram matches only: exp smoothing of 2,3,4-grams
        ("a b x c d", "a b c d"),  # longer than the reference
        ("", "a b"),  # empty hypothesis
    ],
)
def test_edge_cases_match_sacrebleu_compute_bleu(hyp, ref):
    stats = bleu_stats([hyp], [ref], np.array([0]))
    expected = BLEU(tokenize="none", force=True).corpus_score([hyp], [[ref]]).score
    assert bleu_from_stats(stats[0]) == pytest.approx(expected, abs=1e-9)


def test_bleu_from_stats_vectorises_over_leading_axes(corpus):
    refs, hyps, segment = corpus
    stats = bleu_stats(hyps, refs, segment)
    stack = np.stack([stats[:10].sum(0), stats[10:30].sum(0), stats[5:6].sum(0)])
    each = [bleu_from_stats(row) for row in stack]
    assert np.allclose(bleu_from_stats(stack), each)
    assert np.allclose(bleu_from_stats(stack[None]), [each])


def test_clipping_counts_repeated_ngrams_once_per_reference_occurrence():
    # "the the the the" vs "the cat": 1 clipped unigram match of 4, no bigram matches
    stats = bleu_stats(["the the the the"], ["the cat"], np.array([0]))
    assert stats[0].tolist() == [1, 4, 0, 3, 0, 2, 0, 1, 2]


def test_background_sentence_bleu_by_hand():
    # kbmira: exp(mean log((m+bg)/(t+bg))) * (r + bg_r), brevity min(0, 1 - r/t1)
    stats = np.array([[2, 3, 1, 2, 0, 1, 0, 0, 5]], dtype=float)
    bg = np.ones(9)
    p = [(3 / 4), (2 / 3), (1 / 2), (1 / 1)]
    log_bleu = np.mean(np.log(p)) + (1 - 6 / 4)
    assert background_sentence_bleu(stats, bg)[0] == pytest.approx(np.exp(log_bleu) * 6)


def test_large_vocabulary_uses_exact_dense_codes():
    # more than 2**15 types: n-gram codes are re-ranked instead of packed 16 bits per token
    rng = np.random.default_rng(0)
    vocab = np.array([f"t{i}" for i in range(40000)])
    refs = [" ".join(vocab[rng.integers(0, 40000, size=12)]) for _ in range(3000)]
    hyps = [" ".join(r.split()[:8] + list(vocab[rng.integers(0, 40000, size=3)])) for r in refs]
    hyps[0] = refs[0]
    segment = np.arange(3000)
    ours = bleu_stats(hyps, refs, segment)
    assert np.array_equal(ours, sacrebleu_rows(hyps, refs, segment, tokenize="none"))
    assert ours[0, 6] == 9  # identical 12-token line: 9 four-gram matches


def test_empty_lines_and_empty_input():
    stats = bleu_stats(["", "a b", ""], ["a b", "a b"], np.array([0, 0, 1]))
    assert stats[:, 1].tolist() == [0, 2, 0] and stats[:, 8].tolist() == [2, 2, 2]
    assert stats[1, 0] == 2 and stats[1, 2] == 1
    assert bleu_stats([], ["a"], np.zeros(0, dtype=int)).shape == (0, 9)
