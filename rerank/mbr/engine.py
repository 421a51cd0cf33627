"""The MBR engine: a utility (any metric with a pairwise utility, :mod:`rerank.metrics.utility`),
the distribution over pseudo-references (the softmax of a log-probability column, or uniform)
and the algorithms — exact (:mod:`~rerank.mbr.exact`), reference aggregation
(:mod:`~rerank.mbr.aggregate`), centroid (:mod:`~rerank.mbr.centroid`) and pruning
(:mod:`~rerank.mbr.pruned`) — as one object, which the ``mbr:`` scorer and ``rerank mbr`` share."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.mbr import aggregate, centroid, exact, pruned
from rerank.mbr.pairs import PairUtilities, list_softmax
from rerank.metrics import METRICS, Metric, make_metric
from rerank.metrics.utility import PairwiseUtility
from rerank.nbest import NBestList

#: the algorithms of :meth:`MBR.expected_of`, and whether each needs an n-gram utility
ALGORITHMS = {"exact": False, "aggregate": True, "centroid": True}


def mbr_utilities() -> List[str]:
    """The registered metrics that have a pairwise utility (MBR's utilities), by name."""
    names = []
    for name in METRICS.names():
        try:
            if make_metric(name).utility() is not None:
                names.append(name)
        except InputError:  # one that needs its model (comet:DIR), or cannot be built here (METEOR without java)
            if METRICS.get(name).utility is not Metric.utility:
                names.append(f"{name}:DIR")
    return names


def make_utility(name: str) -> PairwiseUtility:
    """The pairwise utility of the registered metric ``name``.

    Raises:
        InputError: an unknown metric, or one without a pairwise utility (naming those that have one).
    """
    utility = make_metric(name).utility() if name.strip() else None
    if utility is None:
        raise InputError(
            f"mbr: {name!r} has no pairwise utility: MBR's utilities are {', '.join(mbr_utilities())} "
            "(e.g. mbr:bleu, mbr:chrf)"
        )
    return utility


class MBR(PairUtilities):
    """Minimum Bayes-risk decoding (Kumar & Byrne 2004) under one utility.

    Args:
        utility: a registered metric's name whose :meth:`~rerank.metrics.Metric.utility` is not
            None (``bleu``, ``chrf``, ``ter``, or any registered later).
        feature: the log-probability column whose softmax weighs the pseudo-references, or
            ``uniform`` (samples: the Monte-Carlo estimate, Eikema & Aziz 2020).
        temperature: of that softmax (> 0).
        algorithm: ``exact``, ``aggregate`` or ``centroid`` (n-gram utilities only).
        clusters: centroid MBR's k.
    Raises:
        InputError: an unknown utility, one without a pairwise utility, or an algorithm that
            needs n-gram counts with a utility that has none (TER).
    """

    def __init__(
        self, utility: str, feature: str = "NMT", temperature: float = 1.0, algorithm: str = "exact", clusters: int = 8
    ):
        super().__init__(make_utility(utility))
        self.metric, self.feature, self.temperature = utility, feature or "NMT", temperature
        self.algorithm = algorithm or "exact"
        self.clusters = clusters
        if ALGORITHMS.get(self.algorithm) and not self.ngram:
            raise InputError(
                f"mbr: {self.algorithm} needs an n-gram utility (bleu or chrf); "
                f"{utility.upper()} has no aggregate reference"
            )

    @property
    def column(self) -> str:
        """The feature column of the expected utility (``MBRBLEU``, ``MBRchrF``, ``MBRTER``)."""
        return self.utility.column

    def distribution(self, nbest: NBestList) -> np.ndarray:
        """float64[M] the weight of every hypothesis within its segment: the softmax of the
        ``feature`` column at ``temperature``, or uniform.

        Raises:
            InputError: the list has no such column.
        """
        if self.feature == "uniform":
            counts = np.diff(nbest.offsets)
            return np.repeat(1.0 / counts, counts)
        if self.feature not in nbest.feature_names:
            raise InputError(
                f"mbr: the n-best list has no {self.feature!r} column for the distribution "
                f"(its features: {' '.join(dict.fromkeys(nbest.feature_names))})"
            )
        column = nbest.feature_names.index(self.feature)
        return list_softmax(nbest.features[:, column], nbest.offsets, self.temperature)

    def expected_of(self, nbest: NBestList) -> np.ndarray:
        """float64[M] every hypothesis' expected utility against its own list under
        :meth:`distribution`, by ``algorithm``: the ``mbr:`` column."""
        p = self.distribution(nbest)
        if self.algorithm == "aggregate":
            return self.aggregate_expected(nbest, nbest, p)
        if self.algorithm == "centroid":
            return self.centroid_expected(nbest, nbest, p)
        return self.expected(nbest, p)[self.column]

    # the algorithms (one module each)

    def expected(self, nbest: NBestList, p: np.ndarray) -> Dict[str, np.ndarray]:
        """{column: float64[M]} exact expected utility under ``p`` (:func:`rerank.mbr.exact.expected`)."""
        return {self.column: exact.expected(self, nbest, p)}

    def cross_expected(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, matrix=None) -> np.ndarray:
        """:func:`rerank.mbr.exact.cross_expected`."""
        return exact.cross_expected(self, candidates, refs, p_refs, matrix)

    def aggregate_expected(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray) -> np.ndarray:
        """:func:`rerank.mbr.aggregate.aggregate_expected`."""
        return aggregate.aggregate_expected(self, candidates, refs, p_refs)

    def cluster(self, texts: Sequence[str], weights: np.ndarray, seed: int) -> np.ndarray:
        """:func:`rerank.mbr.centroid.cluster` with ``clusters``."""
        return centroid.cluster(self, texts, weights, seed, self.clusters)

    def centroid_expected(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0):
        """:func:`rerank.mbr.centroid.centroid_expected` with ``clusters``."""
        return centroid.centroid_expected(self, candidates, refs, p_refs, self.clusters, first)

    def pruned_select(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, **settings) -> Tuple:
        """:func:`rerank.mbr.pruned.pruned_select` (``alpha``, ``schedule``, ``bootstrap``,
        ``seed``, ``first`` as keywords)."""
        return pruned.pruned_select(self, candidates, refs, p_refs, **settings)

    def references_per_segment(self, refs: NBestList) -> np.ndarray:
        """int[N] the references each candidate is scored against, per segment: all of them
        for ``exact``, 1 for ``aggregate``, min(clusters, pseudo-references) for ``centroid``."""
        counts = np.diff(refs.offsets)
        if self.algorithm == "exact":
            return counts
        return np.ones_like(counts) if self.algorithm == "aggregate" else np.minimum(counts, self.clusters)
