"""Oracle selection: the hypotheses of an n-best list that maximise corpus BLEU."""

from __future__ import annotations

import numpy as np

from rerank.bleu import NUM_STATS, BleuSettings, background_sentence_bleu, bleu_from_stats
from rerank.nbest import select_best, write_lines
from rerank.tuning_data import load_tuning_data


def oracle_select(stats: np.ndarray, offsets: np.ndarray, max_passes: int = 5) -> np.ndarray:
    """Approximate corpus-BLEU oracle by greedy coordinate ascent.

    Starts from each segment's best hypothesis by smoothed sentence BLEU (statistics
    plus a background of ones, as kbmira's), then repeatedly visits the segments in
    order and swaps in the hypothesis that maximises corpus BLEU given all other
    choices (all candidates of a segment scored at once), until a pass changes nothing
    or ``max_passes`` passes.  Corpus BLEU never decreases.

    Args:
        stats: float[M, 9] BLEU statistics rows.
        offsets: int[N + 1] segment boundaries.
    Returns:
        int64[N] selected row per segment.
    """
    stats = np.asarray(stats, dtype=np.float64)
    offsets = np.asarray(offsets, dtype=np.int64)
    choice = select_best(background_sentence_bleu(stats, np.ones(NUM_STATS)), offsets)
    total = stats[choice].sum(axis=0)
    for _ in range(max_passes):
        changed = False
        for s in range(len(offsets) - 1):
            start, end = offsets[s], offsets[s + 1]
            trial = total - stats[choice[s]] + stats[start:end]
            scores = bleu_from_stats(trial)
            best = start + int(np.argmax(scores))
            if best != choice[s] and scores[best - start] > scores[choice[s] - start]:
                total = trial[best - start]
                choice[s] = best
                changed = True
        if not changed:
            break
    return choice


def oracle_file(nbest_path: str, ref_path: str, out_path: str, bleu: BleuSettings = BleuSettings()) -> np.ndarray:
    """Write the oracle selection (:func:`oracle_select`, statistics under ``bleu``) of an
    n-best list to ``out_path``.  Returns its summed statistics float64[9]."""
    nbest, _refs, stats = load_tuning_data(nbest_path, ref_path, bleu)
    best = oracle_select(stats, nbest.offsets)
    write_lines((nbest.hypotheses[i] for i in best), out_path)
    return stats[best].sum(0)
