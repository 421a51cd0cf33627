"""Many tests at once: adjusted p-values and rank clusters.

A report tests every system against the baseline on every metric — about a hundred tests in the
default job; at α = 0.05 some come out "significant" by chance (Riezler & Maxwell 2005).  The
family of a table is every test of its rows and metrics (length, which has no direction, left
out); its p-values are adjusted by

* ``holm``: Holm's (1979) step-down: the i-th smallest of m p-values times (m − i + 1), made
  monotone, capped at 1;
* ``maxT``: Westfall & Young's (1993) single-step max-T over the shuffles (or resamples) the
  tests share: every test of a table draws the same swap patterns (:func:`rerank.signif.swap_matrix`)
  or segment draws, so shuffle b gives each test its null statistic, standardised by that test's
  null spread, and a test's adjusted p is the share of shuffles whose largest standardised
  statistic reaches its own — the dependence between tests (the same baseline, correlated
  metrics) is kept, where Holm assumes the worst; it costs the maximum over shuffles only;
* ``none``: each test alone.

:func:`clusters` groups systems into rank clusters (mt-metrics-eval's ``AssignRanks``): best
first, a system joins the current cluster when it is not significantly different (after
adjustment) from the cluster's best member, else it starts the next.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.signif import NullSample

#: the adjustments ``--adjust`` takes
ADJUSTMENTS = ("none", "holm", "maxT")


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm's step-down adjustment of m p-values (float[m], any order): adjusted p_(i) =
    max_{j ≤ i} min(1, (m − j + 1) · p_(j)) in ascending order, returned in the given order."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if not m:
        return p
    order = np.argsort(p, kind="stable")
    scaled = np.minimum(1.0, (m - np.arange(m)) * p[order])
    out = np.empty(m)
    out[order] = np.maximum.accumulate(scaled)
    return out


def max_t(samples: Sequence[NullSample]) -> np.ndarray:
    """Westfall–Young single-step max-T adjusted p-values of the tests ``samples`` (module
    docstring): statistics standardised by each null's standard deviation; a test whose null does
    not vary (two identical outputs) keeps p = 1 and takes no part in the maximum.

    Raises:
        InputError: null samples of different lengths (tests that share no shuffles)."""
    if not samples:
        return np.zeros(0)
    lengths = {len(s.null) for s in samples}
    if len(lengths) != 1:
        raise InputError("max-T needs tests over the same shuffles: their null samples differ in length")
    exact = samples[0].exact
    spreads = np.array([float(np.std(s.null)) for s in samples])
    live = spreads > 0
    out = np.ones(len(samples))
    if not live.any():
        return out
    table = np.stack([s.null / sd for s, sd in zip(samples, spreads) if sd > 0])
    largest = table.max(axis=0)
    for k in map(int, np.flatnonzero(live)):
        z = samples[k].observed / spreads[k]
        if exact:
            out[k] = float(np.mean(largest >= z * (1 - 1e-12)))
        else:
            out[k] = (int(np.sum(largest > z)) + 1) / (len(largest) + 1)
    return np.maximum(out, [raw_p(s) for s in samples])  # never below a test's own p from its sample


def raw_p(sample: NullSample) -> float:
    """The test's own p-value from its null sample (as the test computed it)."""
    if sample.exact:
        return float(np.mean(sample.null >= sample.observed * (1 - 1e-12)))
    return (int(np.sum(sample.null > sample.observed)) + 1) / (len(sample.null) + 1)


def adjust(p_values: Sequence[float], method: str, samples: Optional[Sequence[NullSample]] = None) -> np.ndarray:
    """The p-values of one family adjusted by ``method`` (:data:`ADJUSTMENTS`); ``samples``
    (one per test, same order) are needed by ``maxT``.

    Raises:
        InputError: an unknown method, ``maxT`` without samples."""
    if method == "none":
        return np.asarray(p_values, dtype=np.float64)
    if method == "holm":
        return holm(p_values)
    if method == "maxT":
        if samples is None or len(samples) != len(p_values):
            raise InputError("maxT needs the null sample of every test")
        return np.maximum(max_t(samples), np.asarray(p_values, dtype=np.float64))
    raise InputError(f"--adjust must be one of {', '.join(ADJUSTMENTS)}, not {method!r}")


def clusters(
    scores: Dict[str, float], higher_is_better: bool, p_of: Dict[tuple, float], alpha: float
) -> Dict[str, int]:
    """{system: rank cluster, 1 = best}: systems sorted best first by ``scores``; each joins the
    current cluster when its p-value against the cluster's best member (``p_of[(a, b)]`` or
    ``[(b, a)]``) is at least ``alpha``, else it opens the next cluster as its best member."""
    ranked = sorted(scores, key=lambda name: -scores[name] if higher_is_better else scores[name])
    out: Dict[str, int] = {}
    head: Optional[str] = None
    cluster = 0
    for name in ranked:
        p = None if head is None else p_of.get((head, name), p_of.get((name, head)))
        if head is None or p is None or p < alpha:
            cluster += 1
            head = name
        out[name] = cluster
    return out


__all__: List[str] = ["ADJUSTMENTS", "NullSample", "holm", "max_t", "raw_p", "adjust", "clusters"]
