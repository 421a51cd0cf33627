"""Minimum error rate training (Och 2003, "Minimum Error Rate Training in Statistical
Machine Translation", ACL) on a fixed n-best list, as Moses ``mert`` runs it.

For a direction d from the current weights w, hypothesis i scores
``a_i + gamma * b_i`` (``a = H·w``, ``b = H·d``): each segment's model-best hypothesis
as a function of gamma is the upper envelope of its lines, so corpus BLEU is piecewise
constant in gamma and its maximum is found exactly by sweeping the sorted breakpoints
of all segments.  The envelopes are walked in C (``rerank/tuning/_kernels.c``); the sweep is C
for BLEU (``mert_line_search``) and numpy for any other metric (:func:`sweep`: the
statistics of every interval at once by a cumulative sum, scored by the metric's
vectorised gain), so MERT optimises chrF, TER, METEOR, interpolations or ``seg:``
scores exactly too.  The optimiser is Moses'
``SimpleOptimizer`` with random directions added: each iteration line-searches every
coordinate axis and ``random_directions`` fresh random unit directions, moves along the
best one, and stops when no direction improves corpus BLEU by more than ``epsilon``
(Moses' kEPS, 1e-4).  ``restarts`` optimisations run (Moses ``mert -n``, 20 in
``mert-moses.pl``): the first from the initial weights, the others from points drawn
uniformly from ``[-1, 1]^F``; the best by tuning-set BLEU wins (ties: the earliest).

``Mert`` is registered as tuner ``mert`` (:mod:`rerank.tuning.base`).  Corpus BLEU is our
statistics layer's (:func:`rerank.metrics.bleu_stats.bleu_from_stats`, equal to
sacrebleu's).  Weights are returned L1-normalised (as Moses prints them); scaling does
not change any argmax.  Deliberate differences from Moses ``mert``: directions include
random ones by default on lists of 6 or more features (Moses: ``--nrandom`` 0 in
``mert-moses.pl``); a point inside an
unbounded interval is its breakpoint -/+ max(1, |breakpoint|); everything is seeded by
``seed`` (numpy's generator).  Like every tuner here, the result is never worse on the
tuning set than the initial weights (the first restart starts there and only moves
uphill).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from rerank.argtypes import non_negative_float, non_negative_int, positive_int
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.tuning._native import mert_envelope, mert_line_search
from rerank.tuning.base import TUNERS, Problem, Tuner, option


@dataclass
class MertConfig:
    """MERT settings (flags of ``rerank tune``); results do not depend on ``threads``.

    Raises:
        InputError: a count below its minimum (restarts 1, random directions 0,
            iterations 1) or a negative ``epsilon``.
    """

    restarts: int = option(
        20, "optimisation runs, the first from the start weights (Moses mert -n)", "--restarts", positive_int
    )
    random_directions: int = option(
        10, "random unit directions per iteration besides the coordinate axes", "--random-directions", non_negative_int
    )
    random_min_features: int = option(
        6,
        "use the random directions only when the list has at least this many features (1: always)",
        "--random-min-features",
        positive_int,
    )
    max_iterations: int = option(100, "iterations per run", "--mert-max-iterations", positive_int)
    epsilon: float = option(
        1e-4, "the smallest BLEU gain that counts (Moses kEPS)", "--mert-epsilon", non_negative_float
    )
    seed: int = DEFAULT_SEED
    threads: int = option(
        0, "line searches of different directions at once (0: one per CPU core)", "--mert-threads", non_negative_int
    )

    def __post_init__(self):
        if self.restarts < 1 or self.random_directions < 0 or self.max_iterations < 1:
            raise InputError("restarts and max_iterations must be at least 1, random_directions at least 0")
        if not (self.epsilon >= 0):
            raise InputError(f"epsilon must be non-negative, not {self.epsilon}")


def sweep(
    metric: Metric, stats: np.ndarray, first: np.ndarray, gammas: np.ndarray, frm: np.ndarray, to: np.ndarray
) -> Tuple[float, float]:
    """The exact line search's sweep for any metric (``mert_line_search`` does it in C
    for BLEU, with the same choices): the envelopes' changes (:func:`rerank.tuning._native.mert_envelope`)
    sorted by gamma split the line into intervals of constant statistics, all computed at
    once by a cumulative sum and scored by ``metric.gain``.  The interval of highest gain
    wins (ties: the one holding gamma = 0, else the one whose point is nearest 0, else
    the first); its point is 0 if it holds 0, else its midpoint, or the outermost
    breakpoint -/+ max(1, |breakpoint|) for an unbounded interval.

    Returns (gamma, gain at gamma).
    """
    order = np.argsort(gammas, kind="stable")
    g = gammas[order]
    start = stats[first].sum(axis=0)
    if len(g) == 0:
        return 0.0, float(metric.gain(start))
    cumulative = start + np.cumsum(stats[to[order]] - stats[frm[order]], axis=0)
    last = np.flatnonzero(np.append(g[1:] != g[:-1], True))  # the last change at each distinct gamma
    bounds = g[last]
    interval_stats = np.vstack([start[None, :], cumulative[last]])
    lo = np.concatenate([[-np.inf], bounds])
    hi = np.concatenate([bounds, [np.inf]])
    with np.errstate(invalid="ignore"):
        point = np.where(
            np.isinf(lo),
            hi - np.maximum(1.0, np.abs(hi)),
            np.where(np.isinf(hi), lo + np.maximum(1.0, np.abs(lo)), 0.5 * (lo + hi)),
        )
    has_zero = (lo < 0.0) & (0.0 < hi)
    point = np.where(has_zero, 0.0, point)
    gains = metric.gain(interval_stats)
    best = gains == gains.max()
    with_zero = np.flatnonzero(best & has_zero)
    k = int(with_zero[0]) if len(with_zero) else int(np.argmin(np.where(best, np.abs(point), np.inf)))
    return float(point[k]), float(gains[k])


def line_search(problem: Problem, a: np.ndarray, b: np.ndarray) -> Tuple[float, float]:
    """Exact line search of ``problem``'s metric along hypothesis scores ``a + gamma·b``:
    (gamma, corpus gain there).  BLEU in C, any other metric with :func:`sweep`."""
    if problem.kernel == "bleu":
        gamma, bleu, _ = mert_line_search(a, b, problem.stats, problem.offsets)
        return gamma, bleu
    return sweep(problem.metric, problem.stats, *mert_envelope(a, b, problem.offsets))


#: the most memory one MERT iteration may hold for its directions' slopes (hypotheses ×
#: directions × 8 bytes); more is refused before the search starts
MAX_SLOPE_BYTES = 4 * 2**30
#: the most columns MERT tunes: each iteration line-searches every axis (10,000 columns ran for
#: hours without an answer); sparse features are MIRA's and PRO's (Moses: kbmira, pro)
MAX_MERT_COLUMNS = 1000


@TUNERS.register("mert")
class Mert(Tuner):
    """MERT (Och 2003) as Moses ``mert``: see the module docstring.  Weights are returned
    L1-normalised.  Details: ``best_run`` (0: from the start weights), ``run_score`` per
    restart (the metric's gain: BLEU for BLEU, −TER for TER), ``line_searches`` over all
    runs, ``random_directions`` used per iteration."""

    name = "mert"
    Config = MertConfig

    #: line searches run between two looks at the clock (and at Ctrl-C / SIGTERM)
    CHUNK = 64
    #: seconds between two progress lines inside one long iteration
    EVERY = 10.0

    def _line_searches(self, search, columns, pool, talk: bool, run: int, progress) -> list:
        """``search`` on every direction's slopes, a chunk at a time: inside an iteration of
        many directions (``talk``) a line every :attr:`EVERY` seconds says how many are done
        and estimates the iteration's time left, and an interrupt waits for one chunk only."""
        found, started = [], time.perf_counter()
        last = started
        for lo in range(0, len(columns), self.CHUNK):
            part = columns[lo : lo + self.CHUNK]
            found += list(pool.map(search, part)) if pool else [search(c) for c in part]
            now = time.perf_counter()
            if talk and now - last >= self.EVERY and len(found) < len(columns):
                left = (now - started) / len(found) * (len(columns) - len(found))
                progress(
                    f"run {run + 1}: {len(found)}/{len(columns)} line searches of this iteration, "
                    f"about {left:.0f} s left in it"
                )
                last = now
        return found

    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        config = self.config
        features, w0 = problem.features, problem.start
        F = features.shape[1]
        rng = np.random.default_rng(config.seed)
        threads = config.threads or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None  # the C searches release the GIL
        randoms_per_iteration = config.random_directions if F >= config.random_min_features else 0
        directions_per_iteration = F + randoms_per_iteration
        slope_bytes = features.shape[0] * directions_per_iteration * 8
        if F > MAX_MERT_COLUMNS:  # each iteration line-searches every axis: hours per restart, no answer
            raise InputError(
                f"mert: {F} columns: MERT line-searches each of them every iteration of each of {config.restarts} "
                f"runs (at most {MAX_MERT_COLUMNS}, as Moses' mert is for dense features): tune fewer columns "
                "(--features, --feature-sets) or use --algorithm mira or pro, which scale to many features"
            )
        if slope_bytes > MAX_SLOPE_BYTES:  # refused before any work: an iteration holds every direction's slopes
            raise InputError(
                f"mert: {F} columns and {features.shape[0]} hypotheses need {slope_bytes / 2**30:.1f} GiB per "
                f"iteration for the line searches' slopes (at most {MAX_SLOPE_BYTES / 2**30:.0f} GiB): tune fewer "
                "columns (--features, --feature-sets) or use --algorithm mira or pro, which scale to many features"
            )
        talk = directions_per_iteration > 100  # long iterations: say each one
        initial = problem.start_score
        best_weights, best_gain, best_run = w0.copy(), initial, 0
        run_score, line_searches = [], 0
        axes = np.eye(F)
        for run in range(config.restarts):
            w = w0.copy() if run == 0 else np.asarray(rng.uniform(-1.0, 1.0, size=F))
            gain = initial if run == 0 else problem.gain(w)
            for _ in range(config.max_iterations):
                randoms = rng.normal(size=(randoms_per_iteration, F))
                randoms /= np.maximum(np.linalg.norm(randoms, axis=1, keepdims=True), 1e-300)
                directions = np.vstack([axes, randoms])
                a = features @ w
                slopes = features @ directions.T  # (M, D): every direction's slopes at once
                columns = list(np.ascontiguousarray(slopes.T))  # one transposing copy: contiguous rows
                found_all = self._line_searches(partial(line_search, problem, a), columns, pool, talk, run, progress)
                line_searches += len(directions)
                best_step_gain, best_step = config.epsilon, None
                for k, (gamma, found) in enumerate(found_all):  # first direction wins ties
                    if found - gain > best_step_gain and gamma != 0.0:
                        best_step_gain, best_step = found - gain, gamma * directions[k]
                if best_step is None:
                    break
                w = w + best_step
                gain = problem.gain(w)
                if talk:
                    progress(
                        f"run {run + 1}: {line_searches} line searches ({directions_per_iteration} per iteration), "
                        f"tuning {problem.metric.label} {problem.as_score(gain):.2f}"
                    )
            run_score.append(gain)
            progress(
                f"run {run + 1:3d}: tuning {problem.metric.label} {problem.as_score(gain):.2f} "
                f"({line_searches} line searches so far)"
            )
            if gain > best_gain:
                best_weights, best_gain, best_run = w.copy(), gain, run
        if pool is not None:
            pool.shutdown()
        norm = np.abs(best_weights).sum()
        if norm > 0:
            best_weights = best_weights / norm
        return best_weights, {
            "best_run": best_run,
            "run_score": run_score,
            "line_searches": line_searches,
            "random_directions": randoms_per_iteration,
        }

    def tried(self, details: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        scores = details["run_score"]
        return f"{len(scores)} run(s), {details['line_searches']} line searches", max(scores) if scores else None
