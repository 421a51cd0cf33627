"""MBR algorithms as components (as mbrs registers its decoders, each with its own Config):
every algorithm is a class registered in :data:`DECODERS` by its module — exact
(:mod:`~rerank.mbr.exact`), reference aggregation (:mod:`~rerank.mbr.aggregate`), centroid
(:mod:`~rerank.mbr.centroid`), confidence-based pruning (:mod:`~rerank.mbr.pruned`), low rank
(:mod:`~rerank.mbr.lowrank`), sequential halving (:mod:`~rerank.mbr.halving`) — with a
``Config`` of its settings and one signature, :meth:`Decoder.select` (and, for one that
gives every candidate a number, :meth:`Decoder.expected`: the ``mbr:`` feature's column).
``rerank mbr``'s options and the ``mbr:`` spec's settings are generated from the Configs;
the engine (:class:`rerank.mbr.engine.MBR`) and ``rerank mbr`` pick an algorithm by name.
A new algorithm is one module with one registered class."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from rerank.config import check_config, check_setting_types
from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.registry import Registry

#: the MBR algorithms by name, registered by the modules of rerank.mbr
DECODERS: Registry["Decoder"] = Registry("MBR algorithm", "rerank.mbr", "DECODERS")


class Decoder:
    """One MBR algorithm over an engine's pair utilities (:class:`rerank.mbr.pairs.PairUtilities`).

    Class attributes: ``name`` (its registered name), ``summary`` (one line: what it does, its
    source), ``estimate`` (what its expected utility is called), ``ngram_only`` (it reads n-gram counts: BLEU and chrF utilities only, or a utility with the
    method named ``hook``, e.g. COMET's ``aggregate_utilities``),
    ``gives_column`` (it gives every candidate an expected utility, so the ``mbr:`` feature can
    use it), ``Config`` (a dataclass of its settings, fields made with
    :func:`rerank.config.option`).

    Args:
        config: its ``Config`` (default: the defaults).
    """

    name = ""
    summary = ""
    ngram_only = False
    #: the method of a utility without n-gram counts that an ``ngram_only`` algorithm can use instead
    hook = ""
    #: what an ``ngram_only`` algorithm lacks in another utility, in its refusal
    lacks = "no n-gram counts"
    gives_column = True
    #: what its expected utility is, in ``rerank mbr``'s closing line ("mean expected chrf of the selections")
    estimate = "expected"

    @dataclass
    class Config:
        pass

    def __init__(self, config: Any = None):
        self.config: Any = config if config is not None else self.Config()

    def check(self, engine) -> None:
        """Refuse a utility this algorithm cannot use (``ngram_only``: one without n-gram counts).

        Raises:
            InputError: naming the algorithm and the utility."""
        if self.ngram_only and not engine.ngram and not (self.hook and hasattr(engine.utility, self.hook)):
            also = " or a COMET one" if self.hook else ""
            raise InputError(
                f"mbr: {self.name} needs an n-gram utility (bleu or chrf){also}; {engine.metric.upper()} has {self.lacks}"
            )

    def expected(self, engine, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0):
        """float64[M] the expected utility of every candidate against the pseudo-references of
        its segment in ``refs`` weighed by ``p_refs`` (float64[R]); ``first``: the id of the
        block's first segment in the whole list (seeds).

        Raises:
            InputError: an algorithm that gives no column (it only selects)."""
        raise InputError(f"mbr: algorithm={self.name} selects one candidate per segment and scores no column")

    def advice(self, candidates: np.ndarray, references: np.ndarray) -> Optional[str]:
        """A warning when this algorithm cannot pay on lists of these sizes (int[N] candidates and
        pseudo-references per segment), or None: exact MBR is faster or better there.  The
        exact algorithm has none."""
        return None

    def references_per_segment(self, refs: NBestList) -> np.ndarray:
        """int[N] the pseudo-references each candidate is scored against, per segment."""
        return np.diff(refs.offsets)

    def estimates(
        self, engine, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0
    ) -> Tuple[np.ndarray, int]:
        """(float64[M] :meth:`expected`, the utilities it computed: each candidate against
        :meth:`references_per_segment` references; an algorithm that draws its cells says its own).

        Raises:
            InputError: a non-finite expected utility (the engine's ``check_finite``)."""
        expected = engine.check_finite(self.expected(engine, candidates, refs, p_refs, first), candidates, first)
        return expected, int((np.diff(candidates.offsets) * self.references_per_segment(refs)).sum())

    def select(
        self, engine, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int = 0
    ) -> Tuple[np.ndarray, int, float]:
        """(rows int[N] of the selected candidate of every segment, utilities computed, the sum
        of the selections' expected utilities — nan where the algorithm estimates none):
        the argmax of :meth:`expected`, the first on ties."""
        expected, computed = self.estimates(engine, candidates, refs, p_refs, first)
        return self.selection(candidates, expected, computed)

    def selection(self, candidates: NBestList, expected: np.ndarray, computed: int) -> Tuple[np.ndarray, int, float]:
        """:meth:`select`'s triple from every candidate's expected utility ``expected`` float64[M]
        and the utilities ``computed`` for it."""
        chosen = candidates.select(expected)
        return chosen, computed, float(np.sum(expected[chosen]))

    def settings(self) -> Dict[str, Any]:
        """{setting: value} of its Config (recorded in a shard's record)."""
        return dataclasses.asdict(self.config)


class SelectingDecoder(Decoder):
    """An algorithm that selects one candidate per segment and scores no column (pruning,
    halving): ``choose`` (a function ``(engine, candidates, refs, p_refs, first=, **settings)``
    → (rows int64[N], utilities computed), as a ``staticmethod``) run with its Config's
    settings; the selections' expected utility is not estimated (nan)."""

    gives_column = False
    choose: Callable[..., Tuple[np.ndarray, int]]

    def select(self, engine, candidates, refs, p_refs, first=0):
        chosen, computed = self.choose(engine, candidates, refs, p_refs, first=first, **self.settings())
        return chosen, computed, float("nan")


def make_decoder(name: str, **settings: Any) -> Decoder:
    """The registered algorithm ``name`` with ``settings`` (its Config's fields; others ignored).

    Raises:
        InputError: an unknown name, naming the known ones.
    """
    cls = DECODERS.get(name)
    fields = {f.name for f in dataclasses.fields(cls.Config)}
    given = {k: v for k, v in settings.items() if k in fields}
    check_setting_types(cls.Config, given, f"mbr {name}")
    return cls(check_config(cls.Config(**given), f"mbr {name}"))


def setting_fields(column_only: bool = False) -> List[Tuple[str, dataclasses.Field, List[str]]]:
    """[(name, field, algorithms that read it)] of every algorithm's settings, each name once
    (the first algorithm's field, in name order), for the options of ``rerank mbr`` and the
    ``mbr:`` spec; ``column_only``: only the algorithms that give a column."""
    seen: Dict[str, Tuple[dataclasses.Field, List[str]]] = {}
    for name, cls in DECODERS.classes().items():
        if column_only and not cls.gives_column:
            continue
        for field in dataclasses.fields(cls.Config):
            seen.setdefault(field.name, (field, []))[1].append(name)
    return [(name, field, owners) for name, (field, owners) in seen.items()]
