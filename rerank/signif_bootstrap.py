"""Paired bootstrap over optimiser replicas: the confidence interval of a difference, each
system's own interval, and the paired bootstrap test (Koehn 2004; sacreBLEU ``--paired-bs``).

One engine with :mod:`rerank.signif`: the segment draws are :func:`rerank.signif.resample_counts`
(``default_rng(seed).integers(0, N, size=(B, N))``, the very draws of sacreBLEU's
``rng.choice(N, size=(B, N))``), the counts a resample gives each segment, shared by every
system, replica and metric of a table.  Over R optimiser replicas a resample also draws R
replicas with replacement (the same for both systems of a pair: replica r of one is paired with
replica r of the other, as :func:`rerank.signif.compare` pairs them), so that the interval covers
the optimiser's variance as s_opt does, and the segments' as s_sel does; a system's resampled
score is the mean of its drawn replicas' corpus scores, as its score is the mean of its
replicas'.  With one replica nothing is drawn for the replicas and everything equals
sacreBLEU 2.6 on the same seed:

* the test statistic is |Δ|, the null sample ``|Δ_b| − mean_b |Δ_b|`` (sacreBLEU's centring of the
  resampled absolute differences), p = (#{b: null_b > |Δ|} + 1)/(B + 1) — except that two
  identical outputs get p = 1 (sacreBLEU: 1/(B + 1)), as :func:`rerank.signif.approximate_randomization`;
* an interval is the percentile interval of the resampled values at ``confidence``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from rerank.defaults import DEFAULT_SEED
from rerank.metrics import Metric
from rerank.signif import ResampleMemo, paired_replicas, replica_resamples

#: the paired bootstrap's resamples by default (sacreBLEU's ``--paired-bs-n``)
BOOTSTRAP_RESAMPLES = 1000


@dataclass
class PairedBootstrap:
    """A paired bootstrap of system B against system A on one metric.

    Attributes:
        delta: the observed Δ = score(B) − score(A) (means over replicas).
        delta_ci: (lo, hi) percentile interval of Δ at ``confidence``.
        ci: (lo, hi) of B's own score; ``baseline_ci``: of A's.
        p_value: the paired bootstrap test's two-sided p (module docstring).
        null: float64[B] the null sample of the test (``|Δ_b| − mean |Δ_b|``), for max-T.
        deltas: float64[B] the resampled Δ_b.
    """

    delta: float
    delta_ci: Tuple[float, float]
    ci: Tuple[float, float]
    baseline_ci: Tuple[float, float]
    p_value: float
    null: np.ndarray
    deltas: np.ndarray


def replica_draws(replicas: int, resamples: int, seed: int) -> np.ndarray:
    """float64[resamples, R]: how often each of R replicas is drawn in each resample (R draws
    with replacement; all ones for R = 1, nothing drawn).  Seeded apart from the segments'."""
    if replicas == 1:
        return np.ones((resamples, 1))
    rng = np.random.default_rng([seed, 1])
    return rng.multinomial(replicas, np.full(replicas, 1.0 / replicas), size=resamples).astype(np.float64)


def resampled_scores(
    metric: Metric,
    replicas: Sequence[np.ndarray],
    resamples: int,
    seed: int = DEFAULT_SEED,
    memo: Optional[ResampleMemo] = None,
) -> np.ndarray:
    """float64[resamples] a system's score in each resample: the mean over the drawn replicas
    (:func:`replica_draws`) of each replica's corpus score on the drawn segments
    (:func:`rerank.signif.replica_resamples`, from ``memo`` where it holds them); ``replicas``: R
    float[N, K] statistics."""
    drawn = replica_draws(len(replicas), resamples, seed)
    total = np.zeros(resamples)
    for r, stats in enumerate(replicas):
        total += drawn[:, r] * replica_resamples(metric, stats, resamples, seed, memo)
    return total / len(replicas)


def percentile_interval(values: np.ndarray, confidence: float) -> Tuple[float, float]:
    """(lo, hi): the (1 − confidence)/2 and (1 + confidence)/2 quantiles of ``values`` (float[B])."""
    (lo,), (hi,) = percentiles(np.asarray(values, dtype=np.float64)[None, :], confidence)
    return float(lo), float(hi)


def percentiles(rows: np.ndarray, confidence: float) -> Tuple[np.ndarray, np.ndarray]:
    """(lo[R], hi[R]): each row's (1 ∓ confidence)/2 quantiles of ``rows`` (float[R, B]), equal to
    ``np.quantile(rows, q, axis=1)`` (its linear method, bit for bit) at a fraction of its cost
    per call: one sort, two interpolations."""
    ordered = np.sort(rows, axis=1)
    last = ordered.shape[1] - 1
    out = []
    for q in ((1.0 - confidence) / 2.0, (1.0 + confidence) / 2.0):
        position = q * last
        below = int(np.floor(position))
        t = position - below
        a, b = ordered[:, below], ordered[:, min(below + 1, last)]
        out.append(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t)  # numpy's _lerp
    return out[0], out[1]


def paired_bootstrap(
    metric: Metric,
    baseline: Sequence[np.ndarray],
    system: Sequence[np.ndarray],
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
    memo: Optional[ResampleMemo] = None,
) -> PairedBootstrap:
    """The paired bootstrap of ``system`` against ``baseline`` (lists of replica statistics,
    float[N, K] each) under ``metric``: the module docstring's interval, test and their samples.
    ``memo``: the replicas' resampled scores, where the caller holds them already
    (:func:`rerank.signif.replica_resamples`).

    Raises:
        InputError: unequal replica counts that cannot be paired; ValueError: no resample."""
    if resamples < 1:
        raise ValueError("the paired bootstrap needs at least one resample")
    base, own = paired_replicas(baseline, system)
    observed_a = float(np.mean([metric.score(s.sum(0)) for s in base]))
    observed_b = float(np.mean([metric.score(s.sum(0)) for s in own]))
    scores_a = resampled_scores(metric, base, resamples, seed, memo)
    scores_b = resampled_scores(metric, own, resamples, seed, memo)
    return bootstrap_outcome((observed_a, observed_b), scores_a, scores_b, confidence)


def bootstrap_outcome(
    observed: Tuple[float, float], scores_a: np.ndarray, scores_b: np.ndarray, confidence: float
) -> PairedBootstrap:
    """The paired bootstrap's intervals and test (module docstring) from the ``observed`` scores
    (A, B) and the resampled ones (float64[B] each, drawn alike)."""
    observed_a, observed_b = observed
    deltas = scores_b - scores_a
    (p,), null = _test(observed_a, np.array([observed_b]), deltas[None, :])
    (d_lo, b_lo, a_lo), (d_hi, b_hi, a_hi) = percentiles(np.stack([deltas, scores_b, scores_a]), confidence)
    return PairedBootstrap(
        observed_b - observed_a,
        (float(d_lo), float(d_hi)),
        (float(b_lo), float(b_hi)),
        (float(a_lo), float(a_hi)),
        float(p),
        null[0],
        deltas,
    )


def _test(observed_a: float, observed_b: np.ndarray, deltas: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """(p float64[S], null float64[S, B]): the test of S systems against A (module docstring)
    from their observed scores (float[S]) and resampled Δ (float64[S, B], one row each, rows
    reduced one by one as a single system's)."""
    resamples = deltas.shape[1]
    magnitude = np.abs(deltas)
    null = magnitude - magnitude.mean(axis=1, keepdims=True)
    gap = np.abs(observed_b - observed_a)
    p = (np.sum(null > gap[:, None], axis=1) + 1) / (resamples + 1)
    same = (gap <= 1e-12 * max(1.0, abs(observed_a))) & ~magnitude.any(axis=1)
    return np.where(same, 1.0, p), null  # the same output: no evidence against the null


def delta_outcomes(
    observed: Tuple[float, np.ndarray], scores_a: np.ndarray, scores_b: np.ndarray, confidence: float
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`bootstrap_outcome`'s Δ, its interval and p for S systems B against one A at once,
    without the systems' own intervals: ``observed`` (A's score, float[S] B's), ``scores_a``
    float64[R] and ``scores_b`` float64[S, R] resampled alike.  Returns (Δ, lo, hi, p), float64[S]
    each, equal to :func:`bootstrap_outcome`'s for each system alone."""
    observed_a, observed_b = observed
    observed_b = np.asarray(observed_b, dtype=np.float64)
    deltas = np.ascontiguousarray(scores_b - scores_a[None, :])
    p, _ = _test(observed_a, observed_b, deltas)
    lo, hi = percentiles(deltas, confidence)
    return observed_b - observed_a, lo, hi, p
