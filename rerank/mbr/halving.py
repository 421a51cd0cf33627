"""MBR under a budget of utilities by correlated sequential halving (Baharav & Tse 2019,
"Ultra Fast Medoid Identification via Correlated Sequential Halving"; as approximate MBR,
Jinnai & Ariu 2024, "Hyperparameter-Free Approach for Faster Minimum Bayes Risk Decoding"):
every surviving candidate is scored against the same, growing set of pseudo-references, and
after each round the better half (by the weighted mean utility so far) survives, until the
survivors' exact expected utilities fit in what is left of the budget of ``ceil(n·m /
reduction)`` utilities per segment.  Any pairwise utility.

Two choices of rerank's, measured on the validation lists (docs/usage/mbr-recipes.md): a
round adds pseudo-references to those of the rounds before (their utilities are kept, not
drawn afresh), and the pseudo-references are taken in descending weight (ties — uniform
weights, samples — in a seeded random order), so that under a model's distribution the
probable ones are scored first.  Repeated texts are scored once: the n distinct candidates
against the m distinct pseudo-references, each weighing the summed weight of its copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from rerank.argtypes import positive_float
from rerank.argtypes import seed as seed_type
from rerank.config import option
from rerank.defaults import DEFAULT_SEED
from rerank.mbr.decoders import DECODERS, SelectingDecoder
from rerank.mbr.pairs import PairUtilities, same_segments, segment_texts
from rerank.nbest import NBestList


def halving_select(
    engine: PairUtilities,
    candidates: NBestList,
    refs: NBestList,
    p_refs: np.ndarray,
    reduction: float = 8.0,
    seed: int = DEFAULT_SEED,
    first: int = 0,
) -> Tuple[np.ndarray, int]:
    """MBR by correlated sequential halving under a budget (Baharav & Tse 2019, Algorithm 1;
    Jinnai & Ariu 2024's approximate MBR), one segment at a time.

    Of a segment's n distinct candidates and m distinct pseudo-references (weights: the summed
    ``p_refs`` of their copies), at most ``B = max(n, ceil(n·m / reduction))`` utilities are
    computed.  The pseudo-references are visited in descending weight, ties in the order of a
    permutation drawn from the stream seeded by (``seed``, ``first`` + s).  Each round, while
    the survivors' remaining utilities do not fit in what is left of B, every survivor is
    scored against ``t = max(1, left // (survivors · ceil(log2 survivors)))`` more
    pseudo-references, the same for all of them, and the half with the highest weighted mean
    utility over all visited pseudo-references survives (the earlier candidate on ties).
    When they fit, the survivors are scored against every pseudo-reference and the one of the
    highest exact expected utility is selected; when one survives, or too little is left for
    another column, the best so far is.  ``reduction`` ≤ 1: every utility, exact MBR.

    Args:
        engine: the pair utilities (:class:`~rerank.mbr.pairs.PairUtilities`).
        candidates, refs: lists of the same segments (candidates and pseudo-references; the
            same list for MBR over a list's own hypotheses).
        p_refs: float64[R] weights of the pseudo-references (summing to 1 per segment).
        reduction: the budget, 1/reduction of each segment's n·m distinct utilities.
        seed, first: the tie-breaking order's stream is seeded by (seed, first + s), s the
            segment's index in ``candidates`` (so shards select as one process does).
    Returns:
        (int64[N] the selected candidate rows — a text's first row —, the utilities computed).
    Raises:
        InputError: lists of different segment counts.
    """
    same_segments(candidates, refs)
    chosen = np.zeros(candidates.num_segments, dtype=np.int64)
    computed = 0
    for s in range(candidates.num_segments):
        c0, r0 = int(candidates.offsets[s]), int(refs.offsets[s])
        # every distinct text once (a list's own pseudo-references are its candidates)
        texts, cand, ref = segment_texts(candidates, refs, s)
        cand_ids, cand_rows = np.unique(cand, return_index=True)  # in order of first appearance
        ref_ids, ref_of = np.unique(ref, return_inverse=True)
        weight = np.bincount(ref_of.reshape(-1), weights=p_refs[r0 : r0 + len(ref)], minlength=len(ref_ids))
        n, m = len(cand_ids), len(ref_ids)
        if n <= 1:  # nothing to choose (an empty segment: its offset, as select_best)
            chosen[s] = c0
            continue
        budget = n * m if reduction <= 1 else max(n, math.ceil(n * m / reduction))
        ties = np.random.default_rng([seed, first + s]).permutation(m)
        order = np.lexsort((ties, -weight))  # descending weight, ties in the seeded order
        gather = engine.pair_utilities_of(texts, every_pair=False, segment=s)
        pick, spent = _halve(gather, cand_ids, ref_ids, order, weight, budget)
        chosen[s] = c0 + cand_rows[pick]
        computed += spent
    return chosen, computed


def _halve(
    gather, cand_ids: np.ndarray, ref_ids: np.ndarray, order: np.ndarray, weight: np.ndarray, budget: int
) -> Tuple[int, int]:
    """(the selected candidate of 0..n-1, utilities computed) by :func:`halving_select`'s rounds:
    ``gather(hyp int[P], ref int[P])`` float[P] the utilities of pairs of text ids, the n
    candidates' ``cand_ids`` int[n] against the m pseudo-references' ``ref_ids`` int[m] of
    weights ``weight`` float64[m], visited in ``order`` int[m]."""
    n, m = len(cand_ids), len(ref_ids)
    table = np.zeros((n, m))
    alive, visited, spent = np.arange(n), 0, 0

    def score(rows: np.ndarray, refs: np.ndarray) -> None:
        nonlocal spent
        hyp, ref = np.repeat(rows, len(refs)), np.tile(refs, len(rows))
        table[hyp, ref] = gather(cand_ids[hyp], ref_ids[ref])
        spent += len(hyp)

    while True:
        left = budget - spent
        if len(alive) * (m - visited) <= left:  # the survivors' exact expected utilities
            score(alive, order[visited:])
            alive = np.sort(alive)
            return int(alive[np.argmax(table[alive] @ weight)]), spent
        if len(alive) == 1 or (visited and left < len(alive)):
            return int(alive[0]), spent
        step = max(1, left // (len(alive) * math.ceil(math.log2(len(alive)))))
        score(alive, order[visited : visited + step])
        visited = min(m, visited + step)
        seen = order[:visited]
        means = table[np.ix_(alive, seen)] @ weight[seen] / weight[seen].sum()
        alive = alive[np.argsort(-means, kind="stable")[: math.ceil(len(alive) / 2)]]


#: the pairs per segment (median) below which halving's rounds cost more than the utilities
#: they save (32 × 32; measured: on a 20-best list it took twice exact's time)
HALVING_PAYS = 1024.0


@DECODERS.register("halving")
class HalvingDecoder(SelectingDecoder):
    """Correlated sequential halving under a budget (Baharav & Tse 2019; Jinnai & Ariu 2024):
    :func:`halving_select` at ``reduction`` and ``seed``; it selects and gives no column."""

    name = "halving"
    summary = (
        "correlated sequential halving within 1/reduction of the utilities (Baharav & Tse 2019; Jinnai & Ariu 2024)"
    )
    choose = staticmethod(halving_select)

    def advice(self, candidates, references):
        pairs = float(np.median(candidates * references)) if len(candidates) else 0.0
        if pairs < HALVING_PAYS:
            return (
                f"halving on about {pairs:.0f} (candidate, pseudo-reference) pairs per segment: its rounds cost more "
                f"than they save below about {HALVING_PAYS:.0f} (a 20-best list took twice exact's time): "
                "--algorithm exact computes them all"
            )
        return None

    @dataclass
    class Config:
        reduction: float = option(
            8.0,
            "compute 1/reduction of each segment's utilities (halving: at most; lowrank: mbrs' reduction_factor); 1: all",
            type=positive_float,
        )
        seed: int = option(DEFAULT_SEED, "seed of the draws (rerank's seed of every draw)", type=seed_type)
