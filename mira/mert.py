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

``Mert`` is registered as tuner ``mert`` (:mod:`mira.tuner`).  Corpus BLEU is our
statistics layer's (:func:`rerank.bleu.bleu_from_stats`, equal to
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
from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Tuple

import numpy as np

from mira._native import mert_line_search
from mira.tuner import TUNERS, Problem, Tuner, option
from rerank import DEFAULT_SEED
from rerank.argtypes import non_negative_float, non_negative_int, positive_int
from rerank.errors import InputError


@dataclass
class MertConfig:
    """MERT settings (flags of ``rerank tune``); results do not depend on ``threads``.

    Raises:
        InputError: a count below its minimum (restarts 1, random directions 0,
            iterations 1) or a negative ``epsilon``.
    """

    restarts: int = option(20, "optimisation runs, the first from the start weights (Moses mert -n)", "--restarts",
                           positive_int)
    random_directions: int = option(10, "random unit directions per iteration besides the coordinate axes",
                                    "--random-directions", non_negative_int)
    max_iterations: int = option(100, "iterations per run", "--mert-max-iterations", positive_int)
    epsilon: float = option(1e-4, "the smallest BLEU gain that counts (Moses kEPS)", "--mert-epsilon",
                            non_negative_float)
    seed: int = DEFAULT_SEED
    threads: int = option(0, "line searches of different directions at once (0: one per CPU core)", "--mert-threads",
                          non_negative_int)

    def __post_init__(self):
        if self.restarts < 1 or self.random_directions < 0 or self.max_iterations < 1:
            raise InputError("restarts and max_iterations must be at least 1, random_directions at least 0")
        if not (self.epsilon >= 0):
            raise InputError(f"epsilon must be non-negative, not {self.epsilon}")


@TUNERS.register("mert")
class Mert(Tuner):
    """MERT (Och 2003) as Moses ``mert``: see the module docstring.  Weights are returned
    L1-normalised.  Details: ``best_run`` (0: from the start weights), ``run_bleu`` per
    restart, ``line_searches`` over all runs."""

    name = "mert"
    Config = MertConfig

    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        config = self.config
        features, stats, offsets, w0 = problem.features, problem.stats, problem.offsets, problem.start
        F = features.shape[1]
        rng = np.random.default_rng(config.seed)
        threads = config.threads or os.cpu_count() or 1
        pool = ThreadPoolExecutor(max_workers=threads) if threads > 1 else None  # the C search releases the GIL
        initial_bleu = problem.start_score
        best_weights, best_bleu, best_run = w0.copy(), initial_bleu, 0
        run_bleu, line_searches = [], 0
        axes = np.eye(F)
        for run in range(config.restarts):
            w = w0.copy() if run == 0 else rng.uniform(-1.0, 1.0, size=F)
            bleu = initial_bleu if run == 0 else problem.corpus_bleu(w)
            for _ in range(config.max_iterations):
                randoms = rng.normal(size=(config.random_directions, F))
                randoms /= np.maximum(np.linalg.norm(randoms, axis=1, keepdims=True), 1e-300)
                directions = np.vstack([axes, randoms])
                a = features @ w
                slopes = features @ directions.T  # (M, D): every direction's slopes at once
                columns = [np.ascontiguousarray(slopes[:, k]) for k in range(len(directions))]
                search = partial(mert_line_search, a, stats=stats, offsets=offsets)
                found_all = list(pool.map(search, columns)) if pool else [search(c) for c in columns]
                line_searches += len(directions)
                best_gain, best_step = config.epsilon, None
                for k, (gamma, found, _) in enumerate(found_all):  # first direction wins ties
                    if found - bleu > best_gain and gamma != 0.0:
                        best_gain, best_step = found - bleu, gamma * directions[k]
                if best_step is None:
                    break
                w = w + best_step
                bleu = problem.corpus_bleu(w)
            run_bleu.append(bleu)
            progress(f"run {run + 1:3d}: tuning BLEU {bleu:.2f} ({line_searches} line searches so far)")
            if bleu > best_bleu:
                best_weights, best_bleu, best_run = w.copy(), bleu, run
        if pool is not None:
            pool.shutdown()
        norm = np.abs(best_weights).sum()
        if norm > 0:
            best_weights = best_weights / norm
        return best_weights, {"best_run": best_run, "run_bleu": run_bleu, "line_searches": line_searches}
