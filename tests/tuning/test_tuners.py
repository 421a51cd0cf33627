"""MERT and PRO on constructed n-best lists whose answers are known."""

import numpy as np
import pytest

from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import bleu_from_stats, bleu_plus_one, bleu_stats
from rerank.tuning._native import mert_line_search, model_best_stats
from rerank.tuning.base import corpus_score
from rerank.tuning.mert import Mert, MertConfig
from rerank.tuning.oracle import oracle_select
from rerank.tuning.pro import Pro, ProConfig, sample_pairs
from tests.conftest import random_corpus

#: the metric of the statistics these tests build (bleu_stats rows; the tokeniser does not enter a score)
BLEU_METRIC = BleuMetric()


def corpus_bleu_of_weights(features, stats, offsets, weights):
    """Corpus BLEU of the model-best hypotheses under ``weights``."""
    return corpus_score(features, stats, offsets, weights, BLEU_METRIC)


def tune_mert(features, stats, offsets, config=MertConfig(), init=None):
    return Mert(config).tune(features, stats, offsets, init, metric=BLEU_METRIC)


def tune_pro(features, stats, offsets, config=ProConfig(), init=None):
    return Pro(config).tune(features, stats, offsets, init, metric=BLEU_METRIC)


def _list(num_segments, nbest, seed, num_features=2):
    refs, hyps, segment = random_corpus(num_segments, nbest, seed=seed)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    stats = bleu_stats(hyps, refs, segment)
    rng = np.random.default_rng(seed)
    sent = bleu_plus_one(stats)
    # features: noisy views of sentence quality and of length, so the optimum is a mixture
    features = np.stack(
        [sent + rng.normal(scale=0.15, size=len(hyps)), -stats[:, 1] / 10.0 + rng.normal(scale=0.3, size=len(hyps))]
        + [rng.normal(size=len(hyps)) for _ in range(num_features - 2)],
        axis=1,
    )
    return features, stats, offsets


def _exact_2d_optimum(features, stats, offsets):
    """Global corpus-BLEU optimum over all 2-feature weight directions: the model-best
    hypotheses only change at angles where two lines of a segment swap order, so the
    midpoints between consecutive critical angles visit every distinct selection."""
    angles = [0.0]
    for s in range(len(offsets) - 1):
        h = features[offsets[s] : offsets[s + 1]]
        for i in range(len(h)):
            for j in range(i + 1, len(h)):
                d = h[i] - h[j]  # (cos t, sin t) . d = 0
                if np.any(d != 0):
                    t = np.arctan2(-d[0], d[1])
                    angles += [t % (2 * np.pi), (t + np.pi) % (2 * np.pi)]
    angles = np.unique(angles)
    mids = (angles + np.roll(angles, -1) + np.where(np.arange(len(angles)) == len(angles) - 1, 2 * np.pi, 0)) / 2
    return max(corpus_bleu_of_weights(features, stats, offsets, np.array([np.cos(t), np.sin(t)])) for t in mids)


def test_line_search_by_hand():
    # one segment, three hypotheses with lines a + g b: (0, 0), (-1, -1), (-1, 1)
    # envelope: g < -1 -> h1, -1 < g < 1 -> h0, g > 1 -> h2
    a, b = np.array([0.0, -1.0, -1.0]), np.array([0.0, -1.0, 1.0])
    ref = np.array([4, 4, 3, 3, 2, 2, 1, 1, 4], dtype=float)
    bad = np.array([1, 4, 0, 3, 0, 2, 0, 1, 4], dtype=float)
    offsets = np.array([0, 3])
    for best, expected in ((0, 0.0), (1, -2.0), (2, 2.0)):
        stats = np.stack([ref if k == best else bad for k in range(3)])
        gamma, bleu, breakpoints = mert_line_search(a, b, stats, offsets)
        assert breakpoints == 2
        assert gamma == pytest.approx(expected)  # 0 inside (-1, 1); -1 - 1 and 1 + 1 outside
        assert bleu == pytest.approx(100.0)


def test_line_search_agrees_with_brute_force_on_a_corpus():
    features, stats, offsets = _list(60, 10, seed=4)
    rng = np.random.default_rng(0)
    for _ in range(5):
        w, d = rng.normal(size=2), rng.normal(size=2)
        gamma, bleu, _ = mert_line_search(features @ w, features @ d, stats, offsets)
        assert bleu == pytest.approx(corpus_bleu_of_weights(features, stats, offsets, w + gamma * d))
        grid = np.linspace(-20, 20, 4001)
        brute = max(corpus_bleu_of_weights(features, stats, offsets, w + g * d) for g in grid)
        assert bleu >= brute - 1e-9
        assert bleu >= corpus_bleu_of_weights(features, stats, offsets, w) - 1e-9


def test_mert_finds_the_exact_two_feature_optimum():
    features, stats, offsets = _list(40, 8, seed=11)
    optimum = _exact_2d_optimum(features, stats, offsets)
    grid = max(
        corpus_bleu_of_weights(features, stats, offsets, np.array([np.cos(t), np.sin(t)]))
        for t in np.linspace(0, 2 * np.pi, 3601)
    )
    assert optimum >= grid - 1e-9  # the grid search confirms: nothing beats the exact optimum
    result = tune_mert(features, stats, offsets, MertConfig(restarts=5, seed=1))
    assert result.score == pytest.approx(optimum)
    assert result.score == pytest.approx(corpus_bleu_of_weights(features, stats, offsets, result.vector))
    assert np.abs(result.vector).sum() == pytest.approx(1.0)
    assert result.score > result.initial_score


def test_mert_is_seeded_and_never_worse_than_its_start():
    features, stats, offsets = _list(50, 8, seed=2, num_features=4)
    oracle_pick = oracle_select(stats, offsets, BLEU_METRIC)
    onehot = np.zeros(len(features))
    onehot[oracle_pick] = 1.0
    features = np.hstack([features, onehot[:, None]])  # a perfect feature: init at it is the oracle
    init = np.array([0, 0, 0, 0, 1.0])
    start = corpus_bleu_of_weights(features, stats, offsets, init)
    a = tune_mert(features, stats, offsets, MertConfig(restarts=3, seed=5), init=init)
    b = tune_mert(features, stats, offsets, MertConfig(restarts=3, seed=5), init=init)
    assert np.array_equal(a.weights, b.weights) and a.details["run_score"] == b.details["run_score"]
    assert a.score >= start and a.initial_score == pytest.approx(start)


def test_a_long_mert_iteration_says_how_far_it_is_and_what_is_left(monkeypatch):
    """An iteration of many directions (150 columns: 150 line searches) prints a line every
    EVERY seconds inside it, with the share done and the time left estimated from the pace so
    far; the clock changes nothing else (the same weights)."""
    import rerank.tuning.mert as mert_module

    features, stats, offsets = _list(20, 6, seed=3, num_features=2)
    rng = np.random.default_rng(0)
    features = np.hstack([features, rng.normal(size=(len(features), 148))])
    config = MertConfig(restarts=1, max_iterations=1, random_directions=0, seed=1)
    quiet = Mert(config).tune(features, stats, offsets, metric=BLEU_METRIC)
    ticks = iter(np.arange(0.0, 10_000.0, 6.0))  # every look at the clock: 6 s later
    monkeypatch.setattr(mert_module.time, "perf_counter", lambda: float(next(ticks)))
    said = []
    loud = Mert(config).tune(features, stats, offsets, progress=said.append, metric=BLEU_METRIC)
    inside = [line for line in said if "line searches of this iteration" in line]
    # chunks of 64, the clock read once before them and once after each: after 64, 6 s (not yet);
    # after 128, 12 s (said: 22 left at 12/128 s each, about 2 s); after 150 the iteration is over
    assert inside == ["run 1: 128/150 line searches of this iteration, about 2 s left in it"]
    assert np.array_equal(quiet.vector, loud.vector)


def test_bleu_plus_one_by_hand():
    # 3 of 4 unigrams, 1 of 3 bigrams, 0 of 2 trigrams, 0 of 1 4-grams, ref length 5
    stats = np.array([3, 4, 1, 3, 0, 2, 0, 1, 5], dtype=float)
    expected = np.exp(np.log(4 / 5 * 2 / 4 * 1 / 3 * 1 / 2) / 4 + (1 - 5 / 4))
    assert bleu_plus_one(stats) == pytest.approx(expected)
    assert bleu_plus_one(np.array([4, 4, 3, 3, 2, 2, 1, 1, 4.0])) == pytest.approx(1.0)


def test_pro_sampler_keeps_the_largest_differences_above_the_threshold():
    sentence_bleu = np.array([0.0, 0.5, 0.52, 1.0, 0.3, 0.31])
    offsets = np.array([0, 4, 6])
    better, worse = sample_pairs(sentence_bleu, offsets, ProConfig(samples=200, keep=2, threshold=0.05, seed=3))
    diffs = sentence_bleu[better] - sentence_bleu[worse]
    assert np.all(diffs > 0.05)
    # segment 1's only pair differs by 0.01: nothing kept; segment 0 keeps its 2 largest: (3, 0) twice
    assert np.all(better < 4) and len(better) == 2
    assert set(zip(better.tolist(), worse.tolist())) == {(3, 0)}


@pytest.mark.pro
def test_pro_learns_the_quality_feature():
    features, stats, offsets = _list(80, 10, seed=7, num_features=3)
    result = tune_pro(features, stats, offsets, ProConfig(seed=1))
    assert result.details["pairs"] > 0 and not result.details["kept_initial"]
    assert result.vector[0] > 0 and result.vector[0] > 3 * abs(result.vector[2])
    first = float(bleu_from_stats(stats[offsets[:-1]].sum(0)))
    assert result.score > first + 5
    assert result.score == pytest.approx(corpus_bleu_of_weights(features, stats, offsets, result.vector))


@pytest.mark.pro
def test_pro_keeps_a_better_start():
    features, stats, offsets = _list(40, 8, seed=3)
    onehot = np.zeros(len(features))
    onehot[oracle_select(stats, offsets, BLEU_METRIC)] = 1.0
    features = np.hstack([features, 1e-6 * onehot[:, None]])  # perfect but too small for PRO's penalty to use
    init = np.array([0.0, 0.0, 1.0])
    result = tune_pro(features, stats, offsets, ProConfig(seed=1, C=1e-6), init=init)
    assert result.score >= result.initial_score
    if result.details["kept_initial"]:
        assert result.vector.tolist() == init.tolist()
    assert result.score == pytest.approx(
        float(bleu_from_stats(model_best_stats(features, stats, offsets, result.vector)))
    )
