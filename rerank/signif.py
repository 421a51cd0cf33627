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

Where enumerating costs no more than shuffling (:func:`enumerates`: 2^(n−1) ≤ the shuffles
asked for, n ≤ 14 units with 10,000), :func:`exact_randomization` enumerates all 2^n swap
patterns instead: p = (number of patterns with |difference| ≥ observed) / 2^n, the exact
permutation p-value (the identity pattern included; half of the patterns are scored, each
standing for its complement too).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.config import check_setting_types
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.metrics import DEFAULT_METRICS, Metric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE

EXACT_MAX = 20
#: swap patterns of an exact enumeration scored at once (a power of 2)
EXACT_CHUNK = 2**14
#: the tests a table's p-values come from: approximate randomisation, paired bootstrap
TESTS = ("ar", "bs")
#: what is compared: every system with the baseline, or every pair too
PAIRS = ("baseline", "all")
#: rows of the swap / resample matrices multiplied at once (bounds memory)
CHUNK = 1000
#: largest resample-count (float32) or swap (bool) matrix kept for reuse (cells)
CACHE_CELLS = 1e8


@dataclass(frozen=True)
class SignificanceSettings:
    """How ``rerank signif`` / ``rerank report`` score and test (MultEval's approximate
    randomisation and bootstrap over optimiser replicas; Clark et al. 2011).

    Attributes:
        metrics: metric specs (``bleu``, ``chrf:word_order=2``, ``seg:comet``…).
        tokenize: BLEU's and the length ratio's tokeniser (sacrebleu's names).
        lowercase: every text metric's lowercasing.
        lang: the target language (METEOR's).
        shuffles: approximate-randomisation shuffles per comparison (MultEval: 10,000).
        resamples: bootstrap resamples behind s_sel (MultEval: 10,000).
        seed: the random seed of both.
        compare_to: a second system every other one is also tested against (‡ / ⇓), or None.
        baseline_name: the baseline's name in the rows.
        progress: a progress bar (or a line every few seconds off a terminal).
        test: the p-value of each row: ``ar`` (approximate randomisation, MultEval's and
            sacreBLEU's ``--paired-ar``) or ``bs`` (paired bootstrap, sacreBLEU's ``--paired-bs``).
        bootstrap: paired bootstrap resamples behind the intervals and ``test="bs"`` (sacreBLEU: 1,000).
        confidence: the intervals' level (percentile intervals).
        adjust: ``none``, ``holm`` or ``maxT`` (:mod:`rerank.signif_adjust`) over the table's
            family: every test of its rows and metrics.
        alpha: the level of the marks and of the rank clusters.
        pairs: ``baseline`` (every system against the baseline) or ``all`` (also every pair:
            the p-value matrix and rank clusters per metric).
    """

    metrics: Tuple[str, ...] = tuple(DEFAULT_METRICS)
    tokenize: str = DEFAULT_TOKENIZE
    lowercase: bool = False
    lang: Optional[str] = None
    shuffles: int = 10000
    resamples: int = 10000
    seed: int = DEFAULT_SEED
    compare_to: Optional[str] = None
    baseline_name: str = "baseline"
    progress: bool = False
    test: str = "ar"
    bootstrap: int = 1000
    confidence: float = 0.95
    adjust: str = "none"
    alpha: float = 0.05
    pairs: str = "baseline"

    def __post_init__(self) -> None:
        """Raises InputError for a setting of the wrong type or range (no shuffle, a negative
        resample count or seed, an unknown test, adjustment or pairing, a level outside (0, 1))."""
        check_setting_types(type(self), dataclasses.asdict(self), "significance")
        for name, low in (("shuffles", 1), ("resamples", 0), ("seed", 0), ("bootstrap", 1)):
            if getattr(self, name) < low:
                raise InputError(f"significance: {name}={getattr(self, name)} must be at least {low}")
        for name, known in (("test", TESTS), ("adjust", ("none", "holm", "maxT")), ("pairs", PAIRS)):
            if getattr(self, name) not in known:
                raise InputError(f"significance: {name} must be one of {', '.join(known)}, not {getattr(self, name)!r}")
        for name in ("confidence", "alpha"):
            if not 0 < getattr(self, name) < 1:
                raise InputError(f"significance: {name}={getattr(self, name)} must be between 0 and 1")


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


#: resamples drawn per block when the counts are made (small blocks keep the scatter in cache)
DRAW_BLOCK = 100


def _draw_counts(rng: np.random.Generator, rows: int, n: int) -> np.ndarray:
    """int64[rows, n] draw counts of ``rows`` resamples of n segments with replacement."""
    picks = rng.integers(0, n, size=(rows, n), dtype=np.int32)
    picks += (np.arange(rows, dtype=np.int32) * n)[:, None]
    return np.bincount(picks.ravel(), minlength=rows * n).reshape(rows, n)


@functools.lru_cache(maxsize=4)
def resample_counts(n: int, resamples: int, seed: int) -> np.ndarray:
    """float32[resamples, n] bootstrap draw counts: row r counts how often each of the n
    segments is drawn when n indices are drawn uniformly with replacement (numpy's
    generator seeded with ``seed``, int32 draws in blocks of :data:`DRAW_BLOCK` rows).
    Cached: every system, replica and metric of a table resamples the same segment
    indices, so the draws are made once and only re-summed afterwards — a resample then
    costs what a shuffle of the approximate randomisation costs."""
    if n >= 2**31 // DRAW_BLOCK:
        raise ValueError(f"{n} segments are too many for int32 draw offsets")
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, n), dtype=np.float32)
    for start in range(0, resamples, DRAW_BLOCK):
        rows = min(DRAW_BLOCK, resamples - start)
        out[start : start + rows] = _draw_counts(rng, rows, n)
    out.flags.writeable = False
    return out


def bootstrap_scores(metric: Metric, stats: np.ndarray, resamples: int = 10000, seed: int = DEFAULT_SEED) -> np.ndarray:
    """float64[resamples]: the corpus score of one replica on each bootstrap resample.

    Args:
        stats: float[N, K] per-segment statistics of one system (one replica).
    Resample r's summed statistics are row r of ``counts @ stats`` with ``counts`` the
    draw counts of :func:`resample_counts` (drawn block by block, with the same draws,
    when the matrix would be too large to keep).  The draws of B resamples are the first B of
    any larger number's, so that the first rows of one call serve a smaller one
    (:func:`replica_resamples`).
    """
    stats = np.asarray(stats, dtype=np.float64)
    n = len(stats)
    counts = resample_counts(n, resamples, seed) if resamples * n <= CACHE_CELLS else None
    rows_of = summable(stats)
    rng = np.random.default_rng(seed)
    scores = []
    step = CHUNK if counts is not None else DRAW_BLOCK
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        block = counts[start : start + rows] if counts is not None else _draw_counts(rng, rows, n).astype(np.float32)
        scores.append(np.asarray(metric.score(resampled_sums(block, rows_of)), dtype=np.float64))
    return np.concatenate(scores) if scores else np.zeros(0)


def summable(stats: np.ndarray) -> np.ndarray:
    """``stats`` (float[N, K]) in the type its resampled sums are made in: integer statistics whose
    sums (at most N · max |stat|) stay below 2^24 in float32, exact and twice as fast, with no
    conversion of the float32 draw counts; others in float64."""
    stats = np.asarray(stats, dtype=np.float64)
    if len(stats) and np.all(stats == np.round(stats)) and len(stats) * np.abs(stats).max() < 2**24:
        return stats.astype(np.float32)
    return stats


def resampled_sums(counts: np.ndarray, stats: np.ndarray) -> np.ndarray:
    """float64[B, K]: each resample's summed statistics, ``counts`` (float32[B, N] draw counts)
    times ``stats`` (float[N, K], :func:`summable`)."""
    if stats.dtype == np.float32:
        return (counts @ stats).astype(np.float64)
    return counts.astype(np.float64) @ stats


#: a table's resampled replica scores, kept for reuse: {(id(metric), id(stats)): (stats, scores)}
ResampleMemo = Dict[Tuple[int, int], Tuple[np.ndarray, np.ndarray]]


def replica_resamples(
    metric: Metric, stats: np.ndarray, resamples: int, seed: int = DEFAULT_SEED, memo: Optional[ResampleMemo] = None
) -> np.ndarray:
    """:func:`bootstrap_scores` of one replica, taken from ``memo`` where it holds at least
    ``resamples`` of them for this metric and these very statistics (the first rows: the same
    draws), else computed and kept there.  s_sel (10,000 resamples) and the paired bootstrap's
    intervals and test (1,000) of a table then resum each replica's statistics once."""
    key = (id(metric), id(stats))
    if memo is not None and key in memo and memo[key][0] is stats and len(memo[key][1]) >= resamples:
        return memo[key][1][:resamples]
    scores = bootstrap_scores(metric, stats, resamples, seed)
    if memo is not None:
        memo[key] = (stats, scores)
    return scores


def bootstrap_std(metric: Metric, stats: np.ndarray, resamples: int = 10000, seed: int = DEFAULT_SEED) -> float:
    """Standard deviation (ddof 1) of the corpus score over bootstrap resamples
    (:func:`bootstrap_scores`; ``stats``: float[N, K] of one replica)."""
    return float(np.std(bootstrap_scores(metric, stats, resamples, seed), ddof=1))


def _swap_matrix(rng: np.random.Generator, rows: int, units: int) -> np.ndarray:
    return rng.integers(2, size=(rows, units), dtype=bool)


@functools.lru_cache(maxsize=4)
def swap_matrix(units: int, shuffles: int, seed: int) -> np.ndarray:
    """bool[shuffles, units] swap patterns drawn in one call, as sacreBLEU's paired AR
    draws them; cached, since every comparison of a table with the same number of units
    uses the same patterns."""
    out = _swap_matrix(np.random.default_rng(seed), shuffles, units)
    out.flags.writeable = False
    return out


def approximate_randomization(
    metric: Metric,
    stats_a: np.ndarray,
    stats_b: np.ndarray,
    shuffles: int = 10000,
    seed: int = DEFAULT_SEED,
    null: Optional[list] = None,
) -> float:
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
    whole = shuffles * units <= CACHE_CELLS
    swaps = swap_matrix(units, shuffles, seed) if whole else None
    delta = stats_a - stats_b
    base = stats_b.sum(0)
    count = 0
    for start in range(0, shuffles, CHUNK):
        rows = min(CHUNK, shuffles - start)
        keep = swaps[start : start + rows] if swaps is not None else _swap_matrix(rng, rows, units)
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


def enumerates(units: int, shuffles: int) -> bool:
    """Whether :func:`compare` enumerates the swap patterns of ``units`` (replica, segment) pairs
    exactly rather than drawing ``shuffles``: when the 2^(units−1) patterns it scores
    (:func:`exact_randomization`) are no more than the shuffles, and ``units`` ≤ :data:`EXACT_MAX`."""
    return units <= EXACT_MAX and 2 ** max(units - 1, 0) <= shuffles


def exact_randomization(metric: Metric, stats_a: np.ndarray, stats_b: np.ndarray, null: Optional[list] = None) -> float:
    """Exact two-sided paired randomisation p-value over all 2^n swap patterns.

    p = #{patterns: |score(A') − score(B')| ≥ |score(A) − score(B)|} / 2^n.  The observed
    difference is compared with a relative tolerance of 1e-12 so that patterns equal to
    the observed one up to rounding count.  A pattern and its complement (every unit swapped
    the other way) give the same absolute difference — A' and B' trade places — so only the
    2^(n−1) patterns that leave the last unit unswapped are scored, each standing for itself and
    its complement: the same p, at half the cost.  Their summed statistics are the outer sum of
    the patterns of the first units and those of the rest (no 2^n × n pattern matrix), scored in
    chunks of :data:`EXACT_CHUNK` patterns.  ``null``: if a list is given, it is set to
    [every scored pattern's absolute difference] (float[2^(n−1)], the identity first; pattern
    k swaps unit i where bit i of k is set), the null sample of max-T
    (:func:`rerank.signif_adjust.max_t`: the complements double every value alike, so its
    p-values are those of all 2^n patterns).
    Raises ValueError for more than :data:`EXACT_MAX` units.
    """
    stats_a = np.asarray(stats_a, dtype=np.float64)
    stats_b = np.asarray(stats_b, dtype=np.float64)
    n = len(stats_a)
    if n > EXACT_MAX:
        raise ValueError(f"exact enumeration is limited to {EXACT_MAX} units, got {n}")
    delta = (stats_a - stats_b)[: max(n - 1, 0)]
    total = stats_a.sum(0) + stats_b.sum(0)
    observed = abs(float(metric.score(stats_a.sum(0)) - metric.score(stats_b.sum(0))))
    low = min(len(delta), EXACT_CHUNK.bit_length() - 1)  # the units of one chunk's patterns

    def _sums(units: np.ndarray) -> np.ndarray:
        """float[2^len(units), K]: the swapped statistics of every pattern of ``units``."""
        bits = (np.arange(2 ** len(units))[:, None] >> np.arange(len(units))[None, :]) & 1
        return bits.astype(np.float64) @ units

    inner = stats_b.sum(0) + _sums(delta[:low])
    outer = _sums(delta[low:])
    diffs = []
    for offset in outer:
        shuf_a = inner + offset
        diffs.append(np.abs(metric.score(shuf_a) - metric.score(total - shuf_a)))
    diff = np.concatenate(diffs)
    if null is not None:
        null[:] = [diff]
    return float(np.mean(diff >= observed * (1 - 1e-12)))


def score_system(
    metric: Metric,
    replica_stats: Sequence[np.ndarray],
    resamples: int = 10000,
    seed: int = DEFAULT_SEED,
    memo: Optional[ResampleMemo] = None,
) -> SystemScore:
    """Score, s_sel and s_opt of one system from its replicas' statistics (float[N, K] each);
    ``memo``: where the replicas' resampled scores are kept (:func:`replica_resamples`)."""
    scores = [float(metric.score(s.sum(0))) for s in replica_stats]
    s_sel = (
        float(np.mean([np.std(replica_resamples(metric, s, resamples, seed, memo), ddof=1) for s in replica_stats]))
        if resamples
        else 0.0
    )
    s_opt = float(np.std(scores, ddof=1)) if len(scores) > 1 else None
    return SystemScore(float(np.mean(scores)), scores, s_sel, s_opt)


@dataclass
class NullSample:
    """One test's observed statistic and its null sample: ``observed`` ≥ 0, ``null`` float[B]
    (the shuffles' or resamples' statistics, in the order shared by every test of a family);
    ``exact``: the null is every pattern (exact randomisation: p counts ≥, without the +1)."""

    observed: float
    null: np.ndarray
    exact: bool = False


def paired_replicas(
    baseline: Sequence[np.ndarray], system: Sequence[np.ndarray]
) -> Tuple[List[np.ndarray], List[np.ndarray]]:
    """The replicas of a pair, paired r with r; one replica on a side stands for each of the other's.

    Raises:
        InputError: other unequal replica counts."""
    if len(baseline) != len(system):
        if len(baseline) == 1:
            baseline = list(baseline) * len(system)
        elif len(system) == 1:
            system = list(system) * len(baseline)
        else:
            raise InputError(f"{len(baseline)} baseline replicas but {len(system)} system replicas")
    return list(baseline), list(system)


def compare(
    metric: Metric,
    baseline: Sequence[np.ndarray],
    system: Sequence[np.ndarray],
    shuffles: int = 10000,
    seed: int = DEFAULT_SEED,
    sample: Optional[list] = None,
) -> float:
    """AR p-value of ``system`` against ``baseline`` (lists of replica statistics), exact
    where :func:`enumerates` says so (:func:`exact_randomization`).

    Replica r of the system is paired with replica r of the baseline; with one replica
    on one side, it is paired with every replica of the other.  ``sample``: if a list is given,
    the test's :class:`NullSample` is appended (for max-T).  Raises
    InputError for other unequal replica counts.
    """
    baseline, system = paired_replicas(baseline, system)
    a, b = np.concatenate(list(baseline)), np.concatenate(list(system))
    null: list = []
    exact = enumerates(len(a), shuffles)
    p = (
        exact_randomization(metric, a, b, null)
        if exact
        else approximate_randomization(metric, a, b, shuffles, seed, null)
    )
    if sample is not None:
        observed = abs(float(metric.score(a.sum(0)) - metric.score(b.sum(0))))
        sample.append(NullSample(observed, null[0] if null else np.zeros(0), exact))
    return p


def identical_replicas(replicas: Sequence[Sequence[str]]) -> List[Tuple[int, int]]:
    """[(i, j)] (1-based, i < j): the replicas whose outputs are the same, line for line."""
    first: Dict[Tuple[str, ...], int] = {}
    pairs = []
    for k, hyps in enumerate(replicas, start=1):
        key = tuple(hyps)
        if key in first:
            pairs.append((first[key], k))
        else:
            first[key] = k
    return pairs


def warn_identical_replicas(name: str, replicas: Sequence[Sequence[str]]) -> bool:
    """Say on stderr (one line) when two replicas of system ``name`` are the same output:
    each counts as an optimiser run of its own, so the same run given twice makes a gain look
    more certain than it is (Clark et al. 2011's replicas are independent tunings; a tuner that
    kept its start weights every time also gives identical replicas).  Returns whether it warned."""
    pairs = identical_replicas(replicas)
    if pairs:
        shown = ", ".join(f"{i} and {j}" for i, j in pairs)
        print(
            f"rerank: warning: {name}: replicas {shown} are identical: each counts as an independent optimiser "
            "run, which makes the test more confident than the runs justify",
            file=sys.stderr,
        )
    return bool(pairs)
