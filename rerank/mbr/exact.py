"""Exact MBR (Kumar & Byrne 2004): the expected utility of every candidate against every
pseudo-reference of its segment — the list itself (:func:`expected`: the ``mbr:`` column) or
another list of the same segments, e.g. samples (:func:`cross_expected`; Eikema & Aziz 2020)."""

from __future__ import annotations

from typing import Callable, Optional

import numpy as np

from rerank.mbr.decoders import DECODERS, Decoder
from rerank.mbr.pairs import PairUtilities, bounds, list_pairs, pair_groups, same_segments
from rerank.nbest import NBestList


def expected(engine: PairUtilities, nbest: NBestList, p: np.ndarray) -> np.ndarray:
    """float64[M] expected utility of every hypothesis of ``nbest`` against its own list,
    weighted by ``p`` (float64[M], summing to 1 within each segment), ``E(h) = sum_{h'} p(h') ·
    u(h, h')`` over the whole list, h itself included.  Segments in groups of at most
    ``engine.max_pairs`` pairs; one longer list a block of references at a time."""
    out = np.zeros(len(nbest.hypotheses))
    for first, last in pair_groups(nbest.offsets, engine.max_pairs):
        a, b = nbest.offsets[first], nbest.offsets[last]
        n = int(b - a)
        if last - first == 1 and n * n > engine.max_pairs:  # one long list: its pairs a block of references at a time
            step = max(1, engine.max_pairs // n)
            gather, weights = engine.pair_utilities_of(nbest.hypotheses[a:b], segment=first), p[a:b]
            for r0 in range(0, n, step):
                ref = np.repeat(np.arange(r0, min(n, r0 + step)), n)
                hyp = np.tile(np.arange(n), len(ref) // n)
                out[a:b] += np.bincount(hyp, weights=weights[ref] * gather(hyp, ref), minlength=n)
            continue
        hyp, ref = list_pairs(nbest.offsets[first : last + 1] - a)
        utility = engine.utilities(nbest.hypotheses[a:b], hyp, ref, nbest.segment[a:b] - first, first)
        out[a:b] = np.bincount(hyp, weights=p[a:b][ref] * utility, minlength=b - a)
    return out


def cross_expected(
    engine: PairUtilities,
    candidates: NBestList,
    refs: NBestList,
    p_refs: np.ndarray,
    matrix: Optional[Callable[[int, np.ndarray, np.ndarray, np.ndarray], None]] = None,
) -> np.ndarray:
    """float64[M] expected utility of every candidate of ``candidates`` against the
    pseudo-references of the same segment in ``refs`` (another list of the same segments,
    e.g. samples: Eikema & Aziz 2020), weighted by ``p_refs`` (float64[R], summing to 1 within
    each segment); one segment at a time, a block of references at a time where it is long
    (memory ≤ ``max_pairs`` pairs).  ``matrix``: called with (segment, candidate rows int[P],
    reference rows int[P], utilities float[P]) for every block (``rerank mbr --matrix``).

    Raises:
        InputError: lists of different segment counts.
    """
    same_segments(candidates, refs)
    out = np.zeros(len(candidates.hypotheses))
    for s in range(candidates.num_segments):
        (c0, c1), (r0, r1) = bounds(candidates, s), bounds(refs, s)
        n, m = c1 - c0, r1 - r0
        gather = engine.pair_utilities_of(list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]), segment=s)
        step = max(1, engine.max_pairs // n)
        for k0 in range(0, m, step):
            ref = np.repeat(np.arange(k0, min(m, k0 + step)), n)
            hyp = np.tile(np.arange(n), len(ref) // n)
            utility = gather(hyp, n + ref)
            if matrix is not None:
                matrix(s, hyp, ref, utility)
            out[c0:c1] += np.bincount(hyp, weights=p_refs[r0:r1][ref] * utility, minlength=n)
    return out


@DECODERS.register("exact")
class ExactDecoder(Decoder):
    """Exact MBR: every candidate against every pseudo-reference of its segment — the list
    itself (:func:`expected`) or another list (:func:`cross_expected`)."""

    name = "exact"
    summary = "every candidate against every pseudo-reference (N^2 utilities per segment)"

    def expected(self, engine, candidates, refs, p_refs, first=0):
        if refs is candidates:
            return expected(engine, candidates, p_refs)
        return cross_expected(engine, candidates, refs, p_refs)
