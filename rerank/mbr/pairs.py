"""Utilities of pairs of one list's texts, the engine every MBR algorithm shares.

For an n-gram utility (:class:`~rerank.metrics.utility.NgramUtility`: BLEU, chrF), every
distinct pair of a segment's distinct texts is matched at once by matrix products over n-gram
indicator matrices (:class:`~rerank.mbr.ngrams.NgramCounts`); a segment too large for them,
and any other utility (TER), goes pair by pair through the utility's own statistics
(:meth:`~rerank.metrics.utility.PairwiseUtility.pairs`) in groups of at most ``max_pairs``
pairs (:func:`pair_groups`).  Both routes give the same values, bit for bit, so no metric is
implemented twice.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.mbr.ngrams import NgramCounts
from rerank.metrics.utility import NgramUtility, PairwiseUtility, SourcedUtility
from rerank.nbest import NBestList
from rerank.shards import cost_ranges


def list_pairs(offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """All ordered pairs (h, r) of rows within each segment, grouped by reference r.

    Args:
        offsets: int[N + 1] segment boundaries.
    Returns:
        (hyp int64[P], ref int64[P]) with P = sum of squared list sizes.
    """
    counts = np.diff(offsets)
    sizes = counts**2
    seg = np.repeat(np.arange(len(counts)), sizes)
    local = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    n = counts[seg]
    ref = offsets[:-1][seg] + local // n
    hyp = offsets[:-1][seg] + local % n
    return hyp, ref


def pair_groups(offsets: np.ndarray, max_pairs: int) -> List[Tuple[int, int]]:
    """Consecutive segment ranges ``[(first, last), ...]`` (last exclusive) holding at most
    ``max_pairs`` ordered pairs each, or one segment where that alone holds more: memory of
    the pairwise statistics is bounded by the largest group, not by the list."""
    return cost_ranges(np.cumsum(np.diff(offsets) ** 2), max_pairs)


def list_softmax(values: np.ndarray, offsets: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Softmax of ``values / temperature`` within each segment (float64[M]).

    Raises:
        InputError: ``values / temperature`` overflows (a temperature near 0, scores near the
            float range): the weights would be NaN.
    """
    seg = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    with np.errstate(over="ignore", invalid="ignore"):
        scaled = np.asarray(values, dtype=np.float64) / temperature
    if not np.isfinite(scaled).all():
        worst = float(np.max(np.abs(np.asarray(values, dtype=np.float64)[~np.isfinite(scaled)])))
        raise InputError(
            f"mbr: a score of magnitude {worst:.3g} divided by the temperature {temperature!r} is not a finite "
            "number: the softmax weights would be NaN (give a larger --temperature / temperature=, or a column of "
            "finite log-probabilities)"
        )
    with np.errstate(over="ignore"):  # scores far below a segment's best: exp(-inf) = 0, as it should be
        shifted = np.exp(scaled - np.maximum.reduceat(scaled, offsets[:-1])[seg])
    return shifted / np.add.reduceat(shifted, offsets[:-1])[seg]


def same_segments(candidates: NBestList, refs: NBestList) -> None:
    """Raise :class:`InputError` unless both lists hold the same number of segments."""
    if candidates.num_segments != refs.num_segments:
        raise InputError(
            f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
        )


def bounds(nbest: NBestList, s: int) -> Tuple[int, int]:
    """(first row, end row) of segment ``s``."""
    return int(nbest.offsets[s]), int(nbest.offsets[s + 1])


def segment_texts(candidates: NBestList, refs: NBestList, s: int) -> Tuple[List[str], np.ndarray, np.ndarray]:
    """Segment ``s``'s distinct texts of both lists, each once, numbered in order of first
    appearance (the candidates' first): (texts, the text id of every candidate int64[n], of
    every pseudo-reference int64[m])."""
    (c0, c1), (r0, r1) = bounds(candidates, s), bounds(refs, s)
    index: Dict[str, int] = {}
    cand = np.array([index.setdefault(t, len(index)) for t in candidates.hypotheses[c0:c1]], dtype=np.int64)
    ref = np.array([index.setdefault(t, len(index)) for t in refs.hypotheses[r0:r1]], dtype=np.int64)
    return list(index), cand, ref


def distinct_pairs(hyp: np.ndarray, ref: np.ndarray, distinct: int) -> Tuple[np.ndarray, np.ndarray]:
    """(keys int64[K], back int[P]): the distinct pairs among the pairs of text ids ``hyp[k]``,
    ``ref[k]`` (each < ``distinct``), as keys ``hyp * distinct + ref`` in increasing order, and for
    every pair the position of its key — so that ``scores(keys)[back]`` scores each pair of
    distinct texts once.  A dense table where the distinct² keys are few, else a sort."""
    pair = np.asarray(hyp, dtype=np.int64) * distinct + np.asarray(ref, dtype=np.int64)
    if distinct * distinct <= 4 * len(pair):  # a dense table of the text pairs: no sort
        table = np.zeros(distinct * distinct, dtype=np.int32)
        table[pair] = 1
        keys = np.flatnonzero(table)
        table[keys] = np.arange(len(keys), dtype=np.int32)
        return keys, table[pair]
    keys, back = np.unique(pair, return_inverse=True)
    return keys, back.reshape(-1)


def finite_utilities(values: np.ndarray, column: str, segment: Optional[int] = None) -> np.ndarray:
    """``values`` (float64[P] utilities) when every one is finite.

    Raises:
        InputError: a NaN or infinite utility (a model with a broken weight: a NaN would make
            every segment pick its first candidate), naming the utility and the segment."""
    bad = ~np.isfinite(values)
    if bad.any():
        where = f" in segment {segment} (0-based, as the list's ids)" if segment is not None else ""
        raise InputError(
            f"mbr: {int(bad.sum())} of {len(values)} {column} utilities are not finite (NaN or infinite){where}: "
            "the metric's model or its inputs are broken, no selection is made"
        )
    return values


class PairUtilities:
    """Utilities of pairs of texts under one :class:`~rerank.metrics.utility.PairwiseUtility`,
    with memory bounded by :attr:`max_pairs` pairs and :attr:`max_matrix_texts` texts.

    Args:
        utility: the sentence-level utility (a metric's :meth:`~rerank.metrics.Metric.utility`).
    """

    #: ordered pairs scored at once (about 260 bytes each): bounds memory per group of
    #: segments, and within one long list per block of its references
    max_pairs = 1_000_000
    #: the most distinct texts of a segment whose all-pairs utility matrix is built at once
    max_matrix_texts = 1500

    def __init__(self, utility: PairwiseUtility):
        self.utility = utility

    @property
    def ngram_utility(self) -> NgramUtility:
        """The utility as an n-gram utility (aggregation and clustering need its counts).

        Raises:
            InputError: a utility without n-gram counts.
        """
        if not isinstance(self.utility, NgramUtility):
            raise InputError(f"mbr: this algorithm needs an n-gram utility; {self.utility.column} has none")
        return self.utility

    @property
    def ngram(self) -> bool:
        """Whether the utility is computed from n-gram matches (matrix products, aggregates)."""
        return isinstance(self.utility, NgramUtility)

    @property
    def sourced(self) -> bool:
        """Whether the utility reads the segment's source (COMET): pairs go one segment at a time."""
        return isinstance(self.utility, SourcedUtility)

    def begin_list(self, first: int = 0, sources: Optional[Sequence[str]] = None) -> None:
        """Before scoring a list, or a block of one, whose segment 0 is segment ``first`` of
        the sources: a sourced utility (COMET) takes ``sources`` (one per segment of the whole
        list) where its spec named none, and where its segments begin; other utilities need
        nothing.

        Raises:
            InputError: a sourced utility with no sources (neither ``sources`` nor ``source=FILE``).
        """
        utility = self.utility
        if not isinstance(utility, SourcedUtility):
            return
        if sources is not None:
            utility.set_sources(sources)
        elif not utility.has_sources:
            raise InputError(f"{utility.column} needs the source sentences: --source (or the metric's source=FILE)")
        utility.offset = first

    def utilities(self, hypotheses, hyp, ref, segment=None, first: int = 0) -> np.ndarray:
        """float64[P] utility of ``hypotheses[hyp[k]]`` against ``hypotheses[ref[k]]``.
        Identical texts (samples repeat: 256 epsilon samples of a sentence hold ~140 distinct
        ones) are scored once.  ``segment`` (int[T], the texts' segments, pairs never across
        them; ``first``: the list's number of segment 0): n-gram utilities of each segment's
        distinct texts all at once by matrix products (:class:`NgramCounts`) where they fit,
        else pair by pair; sourced utilities (COMET) segment by segment.  The same values
        either way, bit for bit.

        Raises:
            InputError: a sourced utility without ``segment`` (it needs each text's source)."""
        if segment is not None and (self.ngram or self.sourced):
            return self._by_segment(hypotheses, hyp, ref, np.asarray(segment, dtype=np.int64), first)
        if self.sourced:
            raise InputError(f"mbr: {self.utility.column} needs each text's segment (its source)")
        index: Dict[str, int] = {}
        ids = np.fromiter((index.setdefault(t, len(index)) for t in hypotheses), np.int64, len(hypotheses))
        if len(index) == len(ids):
            return finite_utilities(self.utility.pairs(hypotheses, hyp, ref), self.utility.column)
        distinct = len(index)
        keys, back = distinct_pairs(ids[hyp], ids[ref], distinct)
        return finite_utilities(
            self.utility.pairs(list(index), keys // distinct, keys % distinct), self.utility.column
        )[back]

    def _by_segment(self, hypotheses, hyp, ref, segment: np.ndarray, first: int = 0) -> np.ndarray:
        """:meth:`utilities` of the pairs of each segment, by its own matrix."""
        out = np.empty(len(hyp))
        if isinstance(self.utility, SourcedUtility):
            self.utility.prefetch(hypotheses, [first + int(s) for s in np.unique(segment)])
        owner = segment[hyp]
        order = np.argsort(owner, kind="stable")
        cuts = np.searchsorted(owner[order], np.arange(int(segment.max(initial=-1)) + 2))
        for s in range(len(cuts) - 1):
            pick = order[cuts[s] : cuts[s + 1]]
            if not len(pick):
                continue
            rows = np.flatnonzero(segment == s)
            local = np.full(len(segment), -1, dtype=np.int64)
            local[rows] = np.arange(len(rows))
            gather = self.pair_utilities_of([hypotheses[r] for r in rows], segment=first + s)
            out[pick] = gather(local[hyp[pick]], local[ref[pick]])
        return out

    def pair_utilities_of(
        self, texts: Sequence[str], every_pair: bool = True, segment: int = -1
    ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """A function (hyp int[P], ref int[P]) -> float64[P] utilities of pairs of ``texts``
        (one segment's): for n-gram utilities by matrix products of :class:`NgramCounts` (at
        most ``max_matrix_texts`` distinct texts and its cells) — ``every_pair``: the matrix
        of every distinct pair at once, gathered at each call; else at each call only the
        block of the distinct texts it asks for (pruning asks for few) — otherwise
        :meth:`utilities` pair by pair; a sourced utility (COMET) with the source of ``segment``
        (the list's segment the texts belong to).

        Raises:
            InputError: a sourced utility without ``segment``."""
        index: Dict[str, int] = {}
        ids = np.fromiter((index.setdefault(t, len(index)) for t in texts), np.int64, len(texts))
        if isinstance(self.utility, SourcedUtility):
            if segment < 0:
                raise InputError(f"mbr: {self.utility.column} needs the texts' segment (its source)")
            sourced, distinct = self.utility, list(index)

            def scored_once(hyp, ref):  # each pair of distinct texts through the model once
                keys, back = distinct_pairs(ids[hyp], ids[ref], len(distinct))
                values = sourced.segment_pairs(segment, distinct, keys // len(distinct), keys % len(distinct))
                return finite_utilities(values, sourced.column, segment)[back]

            return scored_once
        if isinstance(self.utility, NgramUtility) and len(index) <= self.max_matrix_texts:
            utility = self.utility
            tokens, lengths, vocab = utility.token_ids(list(index))
            counts = NgramCounts(tokens, lengths, vocab, utility.order)
            if counts.fits():

                def block(rows, cols):
                    matches = counts.matches(rows, cols)
                    return utility.from_matches(matches, lengths[rows][:, None], lengths[cols][None, :])

                if every_pair:
                    matrix = block(np.arange(len(index)), np.arange(len(index)))
                    return lambda hyp, ref: matrix[ids[hyp], ids[ref]]

                def asked(hyp, ref):
                    rows, row = np.unique(ids[hyp], return_inverse=True)
                    cols, col = np.unique(ids[ref], return_inverse=True)
                    return block(rows, cols)[row.reshape(-1), col.reshape(-1)]

                return asked
        return lambda hyp, ref: self.utilities(texts, hyp, ref)

    def segment_counts(self, candidates: NBestList, refs: NBestList, s: int):
        """One segment's distinct texts of both lists, counted: (NgramCounts, lengths, candidate
        text ids int[n], pseudo-reference text ids int[m]).  For n-gram utilities only."""
        texts, cand, ref = segment_texts(candidates, refs, s)
        utility = self.ngram_utility
        tokens, lengths, vocab = utility.token_ids(texts)
        return NgramCounts(tokens, lengths, vocab, utility.order), lengths, cand, ref
