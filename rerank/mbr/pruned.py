"""Confidence-based pruning MBR (Cheng & Vlachos 2023, "Faster Minimum Bayes Risk Decoding with
Confidence-based Pruning"): utilities against a growing sample of the pseudo-references (8,
16, 32, … of them), and after each step every candidate whose bootstrap estimate of beating
the current best falls below ``1 − alpha`` is dropped; the survivors are ranked on every
pseudo-reference drawn.  Any pairwise utility."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from rerank.argtypes import positive_float
from rerank.argtypes import seed as seed_type
from rerank.config import option
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.mbr.decoders import DECODERS, SelectingDecoder
from rerank.mbr.pairs import PairUtilities, same_segments
from rerank.nbest import NBestList


def pruned_select(
    engine: PairUtilities,
    candidates: NBestList,
    refs: NBestList,
    p_refs: np.ndarray,
    alpha: float = 0.99,
    schedule: Sequence[int] = (8, 16, 32, 64, 128, 256, 512, 1024),
    bootstrap: int = 500,
    seed: int = DEFAULT_SEED,
    first: int = 0,
) -> Tuple[np.ndarray, int]:
    """Confidence-based pruning MBR (Cheng & Vlachos 2023, Algorithm 1): for every segment,
    the pseudo-references are drawn in a random order, without replacement, and every mean
    weighs them by ``p_refs`` (uniform: plain means), so that once all are drawn it is the
    exact expected utility; at each size of ``schedule`` (then all
    of them) the surviving candidates' utilities against the references drawn so far are
    resampled ``bootstrap`` times, and a candidate whose mean beats or ties the current
    best's in fewer than ``1 − alpha`` of the resamples is pruned.  The survivor of the
    highest mean utility on all drawn references is selected (the earlier on ties).

    Args:
        engine: the pair utilities (:class:`~rerank.mbr.pairs.PairUtilities`).
        candidates, refs: lists of the same segments (candidates and pseudo-references).
        p_refs: float64[R] weights of the pseudo-references (summing to 1 per segment).
        alpha: confidence, in (0, 1]; 1 prunes nothing (exact MBR on the drawn references).
        schedule: increasing numbers of pseudo-references drawn before each pruning.
        bootstrap: resamples per pruning step.
        seed: of the draws and resamples; segment s (``first`` + its index here: its id in
            the whole list) draws from the stream seeded by (seed, first + s).
    Returns:
        (int64[N] selected candidate rows, number of utilities computed).
    Raises:
        InputError: lists of different segment counts, alpha outside (0, 1].
    """
    if not 0 < alpha <= 1:
        raise InputError(f"the pruning confidence alpha must be in (0, 1], not {alpha}")
    same_segments(candidates, refs)
    chosen = np.zeros(candidates.num_segments, dtype=np.int64)
    computed = 0
    for s in range(candidates.num_segments):
        rng = np.random.default_rng([seed, first + s])
        c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
        r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
        n, m = c1 - c0, r1 - r0
        weights = p_refs[r0:r1]
        order = rng.permutation(m)
        # weighted pseudo-references: every mean below weighs each drawn reference by its
        # probability, so once all are drawn it is the exact expected utility (uniform: plain means)
        w = None if np.allclose(weights, weights[0]) else weights[order]
        gather = engine.pair_utilities_of(
            list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]), every_pair=False, segment=s
        )
        alive = np.arange(n)
        table = np.zeros((n, m))  # utilities of candidate i against the k-th drawn reference
        drawn = 0
        for size in [k for k in schedule if k < m] + [m]:
            new = np.arange(drawn, size)
            hyp = np.repeat(alive, len(new))
            col = np.tile(new, len(alive))
            table[hyp, col] = gather(hyp, n + order[col])
            computed += len(hyp)
            drawn = size
            if len(alive) == 1 or size == m or alpha == 1:
                continue
            means = _means(table[alive, :drawn], w, drawn)
            best = alive[int(np.argmax(means))]
            resample = rng.integers(0, drawn, size=(bootstrap, drawn))
            # each resample as counts of the drawn references: its means are one matrix product
            picks = np.bincount(
                (np.arange(bootstrap)[:, None] * drawn + resample).reshape(-1), minlength=bootstrap * drawn
            ).reshape(bootstrap, drawn)
            if w is None:
                resampled = table[alive, :drawn] @ picks.T / drawn  # [alive, bootstrap]
            else:
                mass = picks * w[:drawn]  # each resample's references, weighted by their probability
                resampled = table[alive, :drawn] @ mass.T / np.maximum(mass.sum(axis=1), 1e-300)
            target = resampled[int(np.flatnonzero(alive == best)[0])]
            wins = (resampled >= target).mean(axis=1)
            alive = alive[(wins >= 1 - alpha) | (alive == best)]
        means = _means(table[alive, :drawn], w, drawn)
        chosen[s] = c0 + alive[int(np.argmax(means))]
    return chosen, computed


def _means(utilities: np.ndarray, w, drawn: int) -> np.ndarray:
    """float64[n] each candidate's mean utility over the ``drawn`` references drawn so far
    (``utilities``: float[n, drawn]), weighted by their probabilities ``w`` (None: alike)."""
    if w is None:
        return utilities.mean(axis=1)
    return utilities @ w[:drawn] / w[:drawn].sum()


@DECODERS.register("pruned")
class PrunedDecoder(SelectingDecoder):
    """Confidence-based pruning (Cheng & Vlachos 2023): :func:`pruned_select` at ``alpha`` and
    ``seed``; it selects and gives no column."""

    name = "pruned"
    summary = "confidence-based pruning on growing samples of pseudo-references (Cheng & Vlachos 2023)"
    choose = staticmethod(pruned_select)

    @dataclass
    class Config:
        alpha: float = option(
            0.99,
            "a candidate is dropped when its bootstrap chance of beating the current best is below 1 - alpha; "
            "1 prunes nothing",
            type=positive_float,
        )
        seed: int = option(
            DEFAULT_SEED, "seed of the draws and the bootstrap (rerank's seed of every draw)", type=seed_type
        )
