"""Minimum error rate training (Och 2003, "Minimum Error Rate Training in Statistical
Machine Translation", ACL) on a fixed n-best list, as Moses ``mert`` runs it.

For a direction d from the current weights w, hypothesis i scores
``a_i + gamma * b_i`` (``a = H·w``, ``b = H·d``): each segment's model-best hypothesis
as a function of gamma is the upper envelope of its lines, so corpus BLEU is piecewise
constant in gamma and its maximum is found exactly by sweeping the sorted breakpoints
of all segments (``mira/_kernels.c: mert_line_search``).  The optimiser is Moses'
``SimpleOptimizer`` with random directions added: each iteration line-searches every
coordinate axis and ``random_directions`` fresh random unit directions, moves along the
best one, and stops when no direction improves corpus BLEU by more than ``epsilon``
(Moses' kEPS, 1e-4).  ``restarts`` optimisations run (Moses ``mert -n``, 20 in
``mert-moses.pl``): the first from the initial weights, the others from points drawn
uniformly from ``[-1, 1]^F``; the best by tuning-set BLEU wins (ties: the earliest).

Corpus BLEU is our statistics layer's (:func:`rerank.bleu.bleu_from_stats`, equal to
sacrebleu's).  Weights are returned L1-normalised (as Moses prints them); scaling does
not change any argmax.  Deliberate differences from Moses ``mert``: directions include
random ones by default (Moses: ``--nrandom`` 0 in ``mert-moses.pl``); a point inside an
unbounded interval is its breakpoint -/+ max(1, |breakpoint|); everything is seeded by
``seed`` (numpy's generator).  Like every tuner here, the result is never worse on the
tuning set than the initial weights (the first restart starts there and only moves
uphill).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, List, Optional

import numpy as np

from mira._native import mert_line_search, model_best_stats
from mira.common import tuning_arrays
from rerank.bleu import bleu_from_stats
from rerank.errors import InputError


@dataclass
class MertConfig:
    """MERT settings: ``restarts`` optimisation runs (the first from the initial weights),
    ``random_directions`` random unit directions per iteration beside the coordinate axes,
    ``max_iterations`` per run, ``epsilon`` the smallest BLEU gain that counts, ``seed``,
    and ``threads`` running line searches of different directions at once (0: one per
    CPU core; results do not depend on it).

    Raises:
        ValueError: a count below its minimum (restarts 1, random directions 0,
            iterations 1) or a negative ``epsilon``.
    """

    restarts: int = 20
    random_directions: int = 10
    max_iterations: int = 100
    epsilon: float = 1e-4
    seed: int = 1
    threads: int = 0

    def __post_init__(self):
        if self.restarts < 1 or self.random_directions < 0 or self.max_iterations < 1:
            raise InputError("restarts and max_iterations must be at least 1, random_directions at least 0")
        if not (self.epsilon >= 0):
            raise InputError(f"epsilon must be non-negative, not {self.epsilon}")


@dataclass
class MertResult:
    """Outcome of :func:`tune_mert`.

    Attributes:
        weights: float64[F] best weights, L1-normalised (unless all zero).
        best_bleu: tuning-set corpus BLEU (0-100) of ``weights``.
        initial_bleu: corpus BLEU of the initial weights.
        run_bleu: final BLEU of each restart, in order.
        line_searches: number of line searches over all runs.
        best_run: 0-based index of the winning run (0: from the initial weights).
    """

    weights: np.ndarray
    best_bleu: float
    initial_bleu: float
    run_bleu: List[float] = field(default_factory=list)
    line_searches: int = 0
    best_run: int = 0


def _bleu_of(features, stats, offsets, w) -> float:
    return float(bleu_from_stats(model_best_stats(features, stats, offsets, w)))


def tune_mert(features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, config: MertConfig = MertConfig(),
              init: Optional[np.ndarray] = None,
              callback: Optional[Callable[[int, float, int], None]] = None) -> MertResult:
    """Tune weights with MERT.

    Args:
        features: float[M, F] feature values of all hypotheses.
        stats: float[M, 9] BLEU statistics (:func:`rerank.bleu.bleu_stats`).
        offsets: int[N + 1] segment boundaries.
        config: :class:`MertConfig`.
        init: float[F] initial weights (default zeros).
        callback: called after each run with (run, BLEU, line searches so far).
    Returns:
        :class:`MertResult`.
    Raises:
        ValueError: inconsistent shapes or an empty segment.
    """
    features, stats, offsets, w0 = tuning_arrays(features, stats, offsets, init)
    F = features.shape[1]
    rng = np.random.default_rng(config.seed)
    threads = config.threads or os.cpu_count() or 1
    pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None  # the C search releases the GIL
    initial_bleu = _bleu_of(features, stats, offsets, w0)
    result = MertResult(weights=w0.copy(), best_bleu=initial_bleu, initial_bleu=initial_bleu)
    axes = np.eye(F)
    for run in range(config.restarts):
        w = w0.copy() if run == 0 else rng.uniform(-1.0, 1.0, size=F)
        bleu = initial_bleu if run == 0 else _bleu_of(features, stats, offsets, w)
        for _ in range(config.max_iterations):
            randoms = rng.normal(size=(config.random_directions, F))
            randoms /= np.maximum(np.linalg.norm(randoms, axis=1, keepdims=True), 1e-300)
            directions = np.vstack([axes, randoms])
            a = features @ w
            slopes = features @ directions.T  # (M, D): every direction's slopes at once
            columns = [np.ascontiguousarray(slopes[:, k]) for k in range(len(directions))]
            search = partial(mert_line_search, a, stats=stats, offsets=offsets)
            found_all = list(pool.map(search, columns)) if pool else [search(c) for c in columns]
            result.line_searches += len(directions)
            best_gain, best_step = config.epsilon, None
            for k, (gamma, found, _) in enumerate(found_all):  # first direction wins ties
                if found - bleu > best_gain and gamma != 0.0:
                    best_gain, best_step = found - bleu, gamma * directions[k]
            if best_step is None:
                break
            w = w + best_step
            bleu = _bleu_of(features, stats, offsets, w)
        result.run_bleu.append(bleu)
        if callback is not None:
            callback(run, bleu, result.line_searches)
        if bleu > result.best_bleu:
            result.weights, result.best_bleu, result.best_run = w.copy(), bleu, run
    if pool is not None:
        pool.shutdown()
    norm = np.abs(result.weights).sum()
    if norm > 0:
        result.weights = result.weights / norm
    return result
