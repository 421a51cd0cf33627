"""Reference aggregation (Vamvas & Sennrich 2024, "Linear-time Minimum Bayes Risk Decoding with
Reference Aggregation"): the pseudo-references' n-gram counts are averaged, weighted by their
probability, into one aggregate reference, and each candidate is scored once against it
(chrF: character n-grams; BLEU: word n-grams, matches clipped by the aggregate's fractional
counts, its length the expected reference length) — O(N) utilities per segment instead of
O(N²); with one pseudo-reference it equals the exact utility.  For n-gram utilities only."""

from __future__ import annotations

import numpy as np

from rerank.mbr.decoders import DECODERS, Decoder
from rerank.mbr.ngrams import NgramCounts
from rerank.mbr.pairs import PairUtilities, bounds, same_segments
from rerank.nbest import NBestList


def against_aggregates(
    engine: PairUtilities, counts: NgramCounts, lengths: np.ndarray, cand: np.ndarray, refs: np.ndarray, weights
) -> np.ndarray:
    """float64[n, K] utility of candidate texts ``cand`` against K aggregate references,
    column j of ``weights`` (float64[len(refs), K], summing to 1) averaging texts ``refs``:
    the utility of the aggregate's expected length and expected n-gram counts per order."""
    distinct, back = np.unique(cand, return_inverse=True)  # candidates that repeat: scored once
    matches = counts.aggregate_matches(distinct, refs, weights)  # [distinct, K, order]
    n = np.arange(matches.shape[-1])
    windows = np.maximum(lengths[refs][:, None] - n, 0)  # [refs, order]
    values = engine.ngram_utility.from_matches(
        matches, lengths[distinct][:, None], (weights.T @ lengths[refs])[None, :], (weights.T @ windows)[None, :, :]
    )
    return values[back.reshape(-1)]


def aggregate_expected(engine: PairUtilities, candidates: NBestList, refs: NBestList, p_refs: np.ndarray) -> np.ndarray:
    """float64[M] utility of every candidate against its segment's aggregate reference: the
    n-gram counts of the pseudo-references of ``refs`` (the same segments) averaged with
    ``p_refs`` (:class:`~rerank.mbr.ngrams.NgramCounts`).  Equals exact MBR where a segment has
    one pseudo-reference.

    Raises:
        InputError: lists of different segment counts.
    """
    same_segments(candidates, refs)
    out = np.zeros(len(candidates.hypotheses))
    for s in range(candidates.num_segments):
        counts, lengths, cand, ref = engine.segment_counts(candidates, refs, s)
        (c0, c1), (r0, r1) = bounds(candidates, s), bounds(refs, s)
        out[c0:c1] = against_aggregates(engine, counts, lengths, cand, ref, p_refs[r0:r1, None])[:, 0]
    return out


@DECODERS.register("aggregate")
class AggregateDecoder(Decoder):
    """Reference aggregation (Vamvas & Sennrich 2024): n-gram utilities by
    :func:`aggregate_expected`; a utility that aggregates its own references (COMET's
    regression models: the pseudo-references' sentence embeddings averaged by weight, as
    mbrs' ``aggregate_mbr``) by its ``aggregate_utilities``."""

    name = "aggregate"
    estimate = "aggregate-reference"
    summary = (
        "against one aggregate reference: the pseudo-references' n-gram counts (BLEU, chrF) or COMET sentence "
        "embeddings averaged by weight (N utilities: Vamvas & Sennrich 2024)"
    )

    ngram_only = True
    hook = "aggregate_utilities"
    lacks = "no aggregate reference"

    def expected(self, engine, candidates, refs, p_refs, first=0):
        if engine.ngram:
            return aggregate_expected(engine, candidates, refs, p_refs)
        same_segments(candidates, refs)
        out = np.zeros(len(candidates.hypotheses))
        for s in range(candidates.num_segments):
            (c0, c1), (r0, r1) = bounds(candidates, s), bounds(refs, s)
            out[c0:c1] = engine.utility.aggregate_utilities(
                s, candidates.hypotheses[c0:c1], refs.hypotheses[r0:r1], p_refs[r0:r1]
            )
        return out

    def references_per_segment(self, refs):
        return np.ones(refs.num_segments, dtype=np.int64)
