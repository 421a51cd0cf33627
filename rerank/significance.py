"""Significance over optimizer replicas, MultEval style (Clark et al. 2011), vectorised.

A *system* is one or more hypothesis files, one per optimizer replica (e.g. the 1-best
of ``rerank tune --seed 1..5``).  For a metric with per-segment statistics
(:mod:`rerank.metrics`):

* score = mean over replicas of the corpus score;
* s_opt = sample standard deviation (ddof 1) of the replicas' corpus scores (None with
  one replica);
* s_sel = standard deviation of the corpus score over bootstrap resamples of the test
  segments (10,000 by default), averaged over replicas;
* p = approximate randomisation against the baseline: the units are (replica,
  segment) pairs, replica r of the system paired with replica r of the baseline
  (MultEval's stratified shuffling: the metric is computed on all replicas' segments
  summed); each shuffle swaps each pair with probability ½; p = (c + 1)/(R + 1) where c
  counts shuffles whose absolute score difference is *strictly* greater than the
  observed one (as sacreBLEU; MultEval 0.5.1 counts ≥).  When the observed difference
  is zero, p = 1 (sacreBLEU's strict count would report 1/(R + 1) for identical systems).

Randomness is seeded and reproducible (MultEval's is not).  With one replica, the swap
matrix is drawn exactly as ``sacrebleu --paired-ar`` draws it
(``default_rng(seed).integers(2, size=(R, N), dtype=bool)``, fresh for every system),
so the same seed gives the same p-values as sacreBLEU.  All shuffles are one swap
matrix times the statistics difference matrix (numpy), in chunks of rows.

For test sets of at most :data:`EXACT_MAX` units, :func:`exact_randomization` enumerates
all 2^n swap patterns: p = (number of patterns with |difference| ≥ observed) / 2^n,
the exact permutation p-value (the identity pattern included).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.metrics import Metric

EXACT_MAX = 20
#: rows of the swap / resample matrices multiplied at once (bounds memory)
CHUNK = 1000


@dataclass
class SystemScore:
    """One system's result for one metric.

    Attributes:
        score: mean corpus score over replicas.
        replica_scores: corpus score of each replica.
        s_sel: mean over replicas of the bootstrap standard deviation.
        s_opt: sample standard deviation over replicas (None for one replica).
        p_value: AR p-value against the baseline (None for the baseline itself).
    """

    score: float
    replica_scores: List[float]
    s_sel: float
    s_opt: Optional[float]
    p_value: Optional[float] = None


def bootstrap_std(metric: Metric, stats: np.ndarray, resamples: int = 10000, seed: int = 12345) -> float:
    """Standard deviation (ddof 1) of the corpus score over bootstrap resamples.

    Args:
        stats: float[N, K] per-segment statistics of one system (one replica).
    Resample r draws N segment indices uniformly with replacement
    (``rng.integers(0, N, size=(rows, N))``, in chunks of rows); its summed statistics are
    one row of ``counts @ stats`` with ``counts`` the per-segment draw counts.
    """
    rng = np.random.default_rng(seed)
    n = len(stats)
    scores = []
    for start in range(0, resamples, CHUNK):
        rows = min(CHUNK, resamples - start)
        picks = rng.integers(0, n, size=(rows, n)) + (np.arange(rows) * n)[:, None]
        counts = np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        scores.append(metric.score(counts @ stats))
    return float(np.std(np.concatenate(scores), ddof=1))


def _swap_matrix(rng: np.random.Generator, rows: int, units: int) -> np.ndarray:
    return rng.integers(2, size=(rows, units), dtype=bool)


def approximate_randomization(metric: Metric, stats_a: np.ndarray, stats_b: np.ndarray, shuffles: int = 10000,
                              seed: int = 12345, null: Optional[list] = None) -> float:
    """Two-sided paired AR p-value of the difference between systems A and B.

    Args:
        stats_a, stats_b: float[U, K] statistics of the paired units (segments, or
            (replica, segment) pairs stacked replica by replica).
        null: if a list is given, the shuffled absolute differences (the distribution
            under the null hypothesis) are appended to it as one float array.
    Returns:
        p = (c + 1)/(shuffles + 1), c = shuffles with |score(A') − score(B')| strictly
        greater than the observed |score(A) − score(B)|.

    The swap matrix S (True: keep A's unit in A') is drawn in one call when it holds
    at most 2e8 cells, exactly as sacreBLEU draws it; A' = S·A + (¬S)·B and
    B' = ΣA + ΣB − A' in summed statistics.
    """
    stats_a = np.asarray(stats_a, dtype=np.float64)
    stats_b = np.asarray(stats_b, dtype=np.float64)
    if stats_a.shape != stats_b.shape:
        raise ValueError(f"paired statistics differ in shape: {stats_a.shape} vs {stats_b.shape}")
    total = stats_a.sum(0) + stats_b.sum(0)
    observed = abs(float(metric.score(stats_a.sum(0)) - metric.score(stats_b.sum(0))))
    rng = np.random.default_rng(seed)
    units = len(stats_a)
    whole = shuffles * units <= 2e8
    swaps = _swap_matrix(rng, shuffles, units) if whole else None
    delta = stats_a - stats_b
    base = stats_b.sum(0)
    count = 0
    for start in range(0, shuffles, CHUNK):
        rows = min(CHUNK, shuffles - start)
        keep = swaps[start:start + rows] if whole else _swap_matrix(rng, rows, units)
        shuf_a = base + keep.astype(np.float64) @ delta
        diff = np.abs(metric.score(shuf_a) - metric.score(total - shuf_a))
        count += int(np.sum(diff > observed))
        if null is not None:
            null.append(diff)
    if null is not None:
        null[:] = [np.concatenate(null)] if null else []
    if observed <= 1e-12 * max(1.0, abs(float(metric.score(total)))):
        return 1.0  # no observed difference: no evidence against the null (MultEval's >= gives 1 too)
    return (count + 1) / (shuffles + 1)


def exact_randomization(metric: Metric, stats_a: np.ndarray, stats_b: np.ndarray) -> float:
    """Exact two-sided paired randomisation p-value over all 2^n swap patterns.

    p = #{patterns: |score(A') − score(B')| ≥ |score(A) − score(B)|} / 2^n.  The observed
    difference is compared with a relative tolerance of 1e-12 so that patterns equal to
    the observed one up to rounding count.
    Raises ValueError for more than :data:`EXACT_MAX` units.
    """
    stats_a = np.asarray(stats_a, dtype=np.float64)
    stats_b = np.asarray(stats_b, dtype=np.float64)
    n = len(stats_a)
    if n > EXACT_MAX:
        raise ValueError(f"exact enumeration is limited to {EXACT_MAX} units, got {n}")
    patterns = ((np.arange(2 ** n)[:, None] >> np.arange(n)[None, :]) & 1).astype(np.float64)
    shuf_a = stats_b.sum(0) + patterns @ (stats_a - stats_b)
    total = stats_a.sum(0) + stats_b.sum(0)
    diff = np.abs(metric.score(shuf_a) - metric.score(total - shuf_a))
    observed = abs(float(metric.score(stats_a.sum(0)) - metric.score(stats_b.sum(0))))
    return float(np.mean(diff >= observed * (1 - 1e-12)))


def score_system(metric: Metric, replica_stats: Sequence[np.ndarray], resamples: int = 10000,
                 seed: int = 12345) -> SystemScore:
    """Score, s_sel and s_opt of one system from its replicas' statistics (float[N, K] each)."""
    scores = [float(metric.score(s.sum(0))) for s in replica_stats]
    s_sel = float(np.mean([bootstrap_std(metric, s, resamples, seed) for s in replica_stats])) if resamples else 0.0
    s_opt = float(np.std(scores, ddof=1)) if len(scores) > 1 else None
    return SystemScore(float(np.mean(scores)), scores, s_sel, s_opt)


def compare(metric: Metric, baseline: Sequence[np.ndarray], system: Sequence[np.ndarray], shuffles: int = 10000,
            seed: int = 12345) -> float:
    """AR p-value of ``system`` against ``baseline`` (lists of replica statistics).

    Replica r of the system is paired with replica r of the baseline; with one replica
    on one side, it is paired with every replica of the other.  Raises ValueError for
    other unequal replica counts.
    """
    if len(baseline) != len(system):
        if len(baseline) == 1:
            baseline = list(baseline) * len(system)
        elif len(system) == 1:
            system = list(system) * len(baseline)
        else:
            raise InputError(f"{len(baseline)} baseline replicas but {len(system)} system replicas")
    a, b = np.concatenate(list(baseline)), np.concatenate(list(system))
    if len(a) <= EXACT_MAX:
        return exact_randomization(metric, a, b)
    return approximate_randomization(metric, a, b, shuffles, seed)
