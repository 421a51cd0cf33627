"""Oracle selection: the hypotheses of an n-best list that maximise a corpus metric
(any metric over sufficient statistics with a direction: BLEU, chrF, TER, METEOR,
interpolations, ``seg:`` scores)."""

from __future__ import annotations

from typing import Tuple

import numpy as np

from rerank.metrics import Metric
from rerank.nbest import NBestList, select_best, write_lines
from rerank.tuning.data import load_tuning_data


def oracle_select(stats: np.ndarray, offsets: np.ndarray, metric: Metric, max_passes: int = 5) -> np.ndarray:
    """Approximate corpus oracle by greedy coordinate ascent on ``metric``'s gain.

    Starts from each segment's best hypothesis by the smoothed sentence-level gain (the
    row added to a background of ones, as kbmira's sentence BLEU:
    :meth:`rerank.metrics.Metric.background_gain`), then repeatedly visits the segments
    in order and swaps in the hypothesis that maximises the corpus gain given all other
    choices (all candidates of a segment scored at once), until a pass changes nothing
    or ``max_passes`` passes.  The corpus gain never decreases.

    Args:
        stats: float[M, K] the metric's statistics rows (BLEU: K = 9).
        offsets: int[N + 1] segment boundaries.
        metric: what is maximised, the metric of ``stats`` (it must have a direction).
        max_passes: passes over the segments at most.
    Returns:
        int64[N] selected row per segment.
    """
    stats = np.asarray(stats, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    choice = select_best(metric.background_gain(stats, np.ones(stats.shape[1])), offsets)
    total = stats[choice].sum(axis=0)
    for _ in range(max_passes):
        changed = False
        for s in range(len(offsets) - 1):
            start, end = offsets[s], offsets[s + 1]
            trial = total - stats[choice[s]] + stats[start:end]
            scores = metric.gain(trial)
            best = start + int(np.argmax(scores))
            if best != choice[s] and scores[best - start] > scores[choice[s] - start]:
                total = trial[best - start]
                choice[s] = best
                changed = True
        if not changed:
            break
    return choice


def oracle_file(nbest_path: str, ref_path: str, out_path: str, metric: Metric) -> Tuple[np.ndarray, NBestList]:
    """Write the oracle selection (:func:`oracle_select`) of an n-best list under
    ``metric`` to ``out_path``.  Returns (its summed statistics float64[K], the list as read:
    :func:`rerank.tuning.data.load_tuning_data`'s, from the statistics cache where it holds it).

    Raises:
        InputError: as :func:`rerank.tuning.data.load_tuning_data`.
    """
    nbest, _refs, stats = load_tuning_data(nbest_path, ref_path, metric)
    best = oracle_select(stats, nbest.offsets, metric)
    write_lines((nbest.hypotheses[i] for i in best), out_path)
    return stats[best].sum(0), nbest
