"""The MBR engine: a utility (any metric with a pairwise utility, :mod:`rerank.metrics.utility`),
the distribution over pseudo-references (the softmax of a log-probability column, or uniform)
and one algorithm, a component of :data:`rerank.mbr.decoders.DECODERS` picked by name — as
one object, which the ``mbr:`` scorer and ``rerank mbr`` share."""

from __future__ import annotations

import math
import numbers
from typing import List, Optional, Tuple, Union

import numpy as np

from rerank.argtypes import MIN_TEMPERATURE
from rerank.errors import InputError
from rerank.mbr.decoders import Decoder, make_decoder
from rerank.mbr.pairs import PairUtilities, finite_utilities, list_softmax
from rerank.metrics import METRICS, Metric, make_metric
from rerank.metrics.utility import PairwiseUtility
from rerank.nbest import ListInfo, NBestList, rank_order


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


def model_column(info: ListInfo) -> Optional[str]:
    """The model's log-probability column a list's signature names: the column its declared
    beam feature normalises (``NMT`` for ``NMTNorm`` of ``rerank nmt nbest``, ``HF`` for
    ``HFNorm`` of ``rerank generate --model hf:…``), else the beam feature itself (``convert
    --beam-feature``); None for a list whose signature declares none."""
    beam = info.beam_feature if info.declared else None
    if not beam:
        return None
    return _normalised_by(beam, [c for columns in info.feature_sets.values() for c in columns])


def _normalised_by(beam: str, columns: List[str]) -> str:
    """The column the beam feature ``beam`` normalises (``NMT`` for ``NMTNorm``) where the list has
    it, else ``beam`` itself."""
    base = beam[: -len("Norm")] if beam.endswith("Norm") else None
    return base if base and base in columns else beam


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
        decoder: the algorithm — a registered name (``exact``, ``aggregate``, ``centroid``,
            ``pruned``: its default settings) or a :class:`~rerank.mbr.decoders.Decoder`
            (:func:`~rerank.mbr.decoders.make_decoder` with settings).
    Raises:
        InputError: an unknown utility or algorithm, a utility without a pairwise utility, or an
            algorithm that needs n-gram counts with a utility that has none (TER).
    """

    def __init__(
        self,
        utility: str,
        feature: Optional[str] = None,
        temperature: float = 1.0,
        decoder: Union[str, Decoder] = "exact",
    ):
        if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real) or not math.isfinite(temperature):
            raise InputError(f"mbr: temperature must be a finite number, not {temperature!r}")
        if temperature < MIN_TEMPERATURE:
            raise InputError(f"mbr: temperature must be at least {MIN_TEMPERATURE}, not {temperature!r}")
        if not isinstance(feature or "", str):
            raise InputError(f"mbr: the weights' column must be a column name or uniform, not {feature!r}")
        super().__init__(make_utility(utility))
        self.metric: str = utility
        self.feature: str = feature or ""  # "": the list's model column (its signature's beam set)
        self.temperature: float = float(temperature)
        self.decoder: Decoder = decoder if isinstance(decoder, Decoder) else make_decoder(decoder or "exact")
        self.decoder.check(self)

    @property
    def column(self) -> str:
        """The feature column of the expected utility (``MBRBLEU``, ``MBRchrF``, ``MBRTER``)."""
        return self.utility.column

    def distribution(self, nbest: NBestList, path: Optional[str] = None) -> np.ndarray:
        """float64[M] the weight of every hypothesis within its segment: the softmax of the
        ``feature`` column at ``temperature`` — by default the list's model column, the one its
        signature's beam feature normalises (``NMT``, ``HF``: :func:`model_column`), for a list
        without a signature the one its order names (:meth:`_ordered_column`) — or
        uniform.  ``path``: the file ``nbest`` was read from (the pseudo-references' list or the
        candidates'), named in the message.

        Raises:
            InputError: the list has no such column, or no feature was given and the list's
                signature names no model column (naming ``path``, the list's columns and the fix).
        """
        feature = self.feature or model_column(nbest.info) or self._ordered_column(nbest)
        if feature == "uniform":
            counts = np.diff(nbest.offsets)
            return np.repeat(1.0 / counts, counts)
        columns = " ".join(dict.fromkeys(nbest.feature_names)) or "none"
        if feature is None:
            raise InputError(
                "mbr: neither the list's signature nor its order names a model column to weigh the "
                f"pseudo-references by (its columns: {columns}): give --feature COLUMN (their log-probability; "
                "feature= in mbr:, weights_from= in Python), or uniform for samples",
                path,
            )
        if feature not in nbest.feature_names:
            raise InputError(
                f"mbr: the list of pseudo-references has no {feature!r} column for their weights "
                f"(its features: {columns}; --feature COLUMN, or uniform for samples)",
                path,
            )
        column = nbest.feature_names.index(feature)
        return list_softmax(nbest.features[:, column], nbest.offsets, self.temperature)

    def _ordered_column(self, nbest: NBestList) -> Optional[str]:
        """For a list without a signature: the model column its order names, as ``rerank tune``
        infers the beam's (the one column whose values never rise down any segment:
        :func:`rerank.nbest.rank_order`, then :func:`_normalised_by`), decided on the first list
        (block) seen and kept; None where no single column orders it."""
        if not hasattr(self, "_inferred"):
            ordering, _ = rank_order(nbest)
            self._inferred = _normalised_by(ordering[0], nbest.feature_names) if len(ordering) == 1 else None
        return self._inferred

    def expected(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0) -> np.ndarray:
        """float64[M] every candidate's expected utility against the pseudo-references of its
        segment in ``refs`` (``candidates`` itself: its own list) weighed by ``p_refs``, by the
        algorithm (:meth:`Decoder.expected <rerank.mbr.decoders.Decoder.expected>`).

        Raises:
            InputError: an expected utility that is not finite (:meth:`check_finite`)."""
        return self.check_finite(self.decoder.expected(self, candidates, refs, p_refs, first), candidates, first)

    def check_finite(self, expected: np.ndarray, candidates: NBestList, first: int = 0) -> np.ndarray:
        """``expected`` (float64[M], one per candidate) when every value is finite.

        Raises:
            InputError: a NaN or infinite expected utility (a metric model with a broken weight
                would make every segment pick its first candidate), naming the utility and the
                first such segment (its id in the whole list)."""
        bad = np.flatnonzero(~np.isfinite(expected))
        if len(bad):
            segment = first + int(np.searchsorted(candidates.offsets, bad[0], side="right")) - 1
            finite_utilities(expected, self.column, segment)
        return expected

    def select(self, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0) -> Tuple:
        """(selected rows int[N], utilities computed, sum of the selections' expected
        utilities) by the algorithm (:meth:`Decoder.select <rerank.mbr.decoders.Decoder.select>`)."""
        return self.decoder.select(self, candidates, refs, p_refs, first)

    def expected_of(self, nbest: NBestList) -> np.ndarray:
        """float64[M] every hypothesis' expected utility against its own list under
        :meth:`distribution`, by the algorithm: the ``mbr:`` column."""
        return self.expected(nbest, nbest, self.distribution(nbest))
