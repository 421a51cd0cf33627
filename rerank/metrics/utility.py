"""Pairwise utilities: what makes a metric an MBR utility (:mod:`rerank.mbr`).

A metric that can serve as MBR's utility returns one from :meth:`rerank.metrics.Metric.utility`:

* :class:`PairwiseUtility` — ``u(h, r)`` of hypotheses against pseudo-references, pair by pair
  (:meth:`PairwiseUtility.pairs`); enough for exact MBR, cross-list MBR and pruning (TER);
* :class:`NgramUtility` — a utility computed from clipped n-gram matches (BLEU, chrF): MBR then
  matches every pair of a segment at once by matrix products, and reference aggregation and
  centroid MBR average the pseudo-references' n-gram counts (Vamvas & Sennrich 2024; Deguchi
  et al. 2024).

Adding an MBR utility is one metric module (``@METRICS.register``) whose metric returns one of
these; ``mbr:NAME`` and ``rerank mbr --metric NAME`` then take it by name (as mbrs' registry of
metrics does).
"""

from __future__ import annotations

import abc
from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np


class PairwiseUtility(abc.ABC):
    """A sentence-level utility, higher is better.

    Args:
        column: the feature column of the expected utility (``MBRBLEU``, ``MBRchrF``, ``MBRTER``).
    """

    def __init__(self, column: str):
        self.column = column

    @abc.abstractmethod
    def pairs(self, texts: Sequence[str], hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """float64[P] utility of ``texts[hyp[k]]`` against ``texts[ref[k]]`` for every pair k."""
        raise NotImplementedError

    def accounting(self) -> Dict[str, Any]:
        """What the utility's own parts did, for MBR's record (a neural utility's encoder and
        estimator: rows and seconds); {} for one that is computed in one piece (n-gram
        utilities: their utilities are what MBR counts)."""
        return {}


class SourcedUtility(PairwiseUtility):
    """A utility that also reads the segment's source sentence, u(h, r | s) (COMET): the MBR
    engine asks for the pairs of one segment at a time (:meth:`segment_pairs`).  ``offset``: the
    number, among the sources, of segment 0 of the list scored now (a block or shard of a list)."""

    offset: int = 0

    @property
    def has_sources(self) -> bool:
        """Whether the utility holds its sources already (its spec's ``source=FILE``); False:
        :meth:`set_sources` must give them."""
        return False

    def pairs(self, texts: Sequence[str], hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """Not defined without the segment: :meth:`segment_pairs`.  Raises RuntimeError."""
        raise RuntimeError(f"{self.column}: a sourced utility is scored per segment (segment_pairs)")

    def set_sources(self, sources: Sequence[str]) -> None:  # noqa: B027 (a hook: the spec may name a file)
        """The source sentences, one per segment, where the utility was given none (``--source``)."""

    def prefetch(self, texts: Sequence[str], segments: Sequence[int]) -> None:  # noqa: B027 (a hook)
        """The texts of segments ``segments`` (0-based in the list scored now) are about to be
        scored: work they share may be done at once (COMET encodes them together)."""

    @abc.abstractmethod
    def segment_pairs(self, segment: int, texts: Sequence[str], hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """float64[P] utility of ``texts[hyp[k]]`` against ``texts[ref[k]]`` given the source of
        segment ``segment`` (0-based in the list): the texts are that segment's."""
        raise NotImplementedError


class NgramUtility(PairwiseUtility):
    """A utility computed from clipped n-gram matches of orders 1..``order`` between token
    sequences (:meth:`token_ids`): :meth:`from_matches` turns matches into utilities."""

    #: the highest n-gram order (BLEU: 4 words; chrF: 6 characters)
    order: int = 4

    @abc.abstractmethod
    def token_ids(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, int]:
        """(int64[L] token ids of all texts flat, int64[T] lengths, vocabulary size), ids dense
        from 0."""
        raise NotImplementedError

    @abc.abstractmethod
    def from_matches(
        self, matches: np.ndarray, hyp_len, ref_len, ref_ngrams: Optional[np.ndarray] = None
    ) -> np.ndarray:
        """Utilities float64[...] from clipped matches float[..., order] of hypotheses of
        ``hyp_len`` tokens against references of ``ref_len`` (broadcast).  ``ref_ngrams``
        (float[..., order]): the reference's n-grams per order where they are not
        ``ref_len − n + 1`` (an aggregate reference's expected counts)."""
        raise NotImplementedError


def word_ids(texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, int]:
    """:meth:`NgramUtility.token_ids` over whitespace-separated words (tokenised text)."""
    words = [t.split() for t in texts]
    lengths = np.array([len(w) for w in words], dtype=np.int64)
    flat = [w for ws in words for w in ws]
    if not flat:
        return np.zeros(0, dtype=np.int64), lengths, 1
    vocabulary, ids = np.unique(np.array(flat, dtype=object), return_inverse=True)
    return np.asarray(ids, dtype=np.int64).reshape(-1), lengths, len(vocabulary)


def char_ids(texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, int]:
    """:meth:`NgramUtility.token_ids` over characters, whitespace removed (chrF's default)."""
    stripped = ["".join(t.split()) for t in texts]
    lengths = np.array([len(t) for t in stripped], dtype=np.int64)
    flat = "".join(stripped)
    if not flat:
        return np.zeros(0, dtype=np.int64), lengths, 1
    vocabulary, ids = np.unique(np.frombuffer(flat.encode("utf-32-le"), dtype=np.uint32), return_inverse=True)
    return np.asarray(ids, dtype=np.int64).reshape(-1), lengths, len(vocabulary)
