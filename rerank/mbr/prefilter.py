"""Pre-filters of MBR: stages that keep each segment's top K candidates before the MBR
algorithm chooses among them, declared in order (``rerank mbr --prefilter STAGE``, repeatable):

* ``mbr:UTILITY,top_k=K`` — coarse-to-fine MBR (Eikema & Aziz 2022, "Sampling-Based
  Approximations to Minimum Bayes Risk Decoding"; ZurichNLP ``mbr``'s coarse-to-fine): the K
  candidates of the highest exact expected utility under a cheap utility (``chrf``, ``bleu``)
  against the same pseudo-references, e.g. ``--prefilter mbr:chrf,top_k=16 --metric comet:DIR``;
* ``column:NAME,top_k=K`` — the K candidates of the highest value in a column of the list: a
  quality-estimation pre-filter (``comet-mbr --rerank_top_k K --qe_model …``) after ``rerank
  features add --scorer cometkiwi:DIR`` (column ``CometKiwi``), or any other feature.

Ties keep the earlier candidate (the first in list order, as every selection of rerank); a
segment of K or fewer candidates keeps them all.  Pseudo-references are never filtered: the
stage only narrows the hypothesis space.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.mbr.engine import MBR
from rerank.nbest import NBestList

#: the kinds of stage, in the order the help lists them
PREFILTER_KINDS = ("mbr", "column")


@dataclass(frozen=True)
class Prefilter:
    """One stage: ``kind`` (``mbr`` or ``column``), ``what`` (the utility's spec, or the
    column's name) and ``top_k`` (≥ 1) candidates kept per segment."""

    kind: str
    what: str
    top_k: int

    @classmethod
    def parse(cls, text: str) -> "Prefilter":
        """``mbr:chrf,top_k=16`` or ``column:CometKiwi,top_k=8`` -> Prefilter (``top_k`` is the
        last setting, so a utility's own settings may precede it: ``mbr:comet:DIR,source=F,top_k=8``).

        Raises:
            InputError: another kind, no ``top_k``, or a ``top_k`` that is not a positive integer."""
        kind, colon, rest = text.partition(":")
        what, comma, last = rest.rpartition(",")
        key, eq, value = last.partition("=")
        if not colon or kind not in PREFILTER_KINDS or not comma or key != "top_k" or not eq or not what:
            raise InputError(f"--prefilter {text!r}: expected mbr:UTILITY,top_k=K or column:NAME,top_k=K")
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"--prefilter {text!r}: top_k must be a positive integer, not {value!r}")
        return cls(kind, what, int(value))

    def __str__(self) -> str:
        return f"{self.kind}:{self.what},top_k={self.top_k}"

    def engine(self, feature: Optional[str], temperature: float) -> Optional[MBR]:
        """The exact MBR engine of an ``mbr`` stage (None for a column), built once per run.

        Raises:
            InputError: a utility MBR cannot use."""
        return MBR(self.what, feature, temperature, "exact") if self.kind == "mbr" else None

    def scores(
        self, coarse: Optional[MBR], candidates: NBestList, refs: NBestList, p_refs: np.ndarray, first: int
    ) -> np.ndarray:
        """float64[M] what the stage ranks the candidates by: the exact expected utility under
        ``coarse`` (its :meth:`engine`) against ``refs`` weighed by ``p_refs``, or the column.

        Raises:
            InputError: a column the list does not have."""
        if self.kind == "column":
            if self.what not in candidates.feature_names:
                raise InputError(
                    f"--prefilter {self}: the candidates have no {self.what!r} column "
                    f"(their features: {' '.join(dict.fromkeys(candidates.feature_names))})"
                )
            return candidates.features[:, candidates.feature_names.index(self.what)]
        assert coarse is not None
        coarse.begin_list(first)
        return coarse.expected(candidates, refs, p_refs, first)

    def kept(self, candidates: NBestList, scores: np.ndarray) -> np.ndarray:
        """int64[K'] the rows kept, ascending: each segment's ``top_k`` best by ``scores``
        (float[M]; the earlier on ties)."""
        keep = []
        for s in range(candidates.num_segments):
            lo, hi = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            order = np.argsort(-np.asarray(scores[lo:hi], dtype=np.float64), kind="stable")[: self.top_k]
            keep.append(lo + np.sort(order))
        return np.concatenate(keep).astype(np.int64)


def prefilter(
    stages: Sequence[Tuple[Prefilter, Optional[MBR]]],
    candidates: NBestList,
    refs: NBestList,
    p_refs: np.ndarray,
    first: int,
) -> Tuple[NBestList, Optional[np.ndarray], int]:
    """The candidates after every stage (with its :meth:`Prefilter.engine`) in order: (the
    list of the kept candidates, int64[K] their rows in ``candidates`` — None where no stage
    ran — and the utilities the stages computed)."""
    rows: Optional[np.ndarray] = None
    computed = 0
    for stage, coarse in stages:
        scores = stage.scores(coarse, candidates, refs, p_refs, first)
        if stage.kind == "mbr":
            computed += int((np.diff(candidates.offsets) * np.diff(refs.offsets)).sum())
        kept = stage.kept(candidates, scores)
        rows = kept if rows is None else rows[kept]
        candidates = candidates.keep(kept)
    return candidates, rows, computed


__all__: Sequence[str] = ["PREFILTER_KINDS", "Prefilter", "prefilter"]
