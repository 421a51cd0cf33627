"""The n-best data model.

An :class:`NBestList` is a ragged table stored flat (``../shared/DESIGN.md``): the
hypotheses of segment ``i`` are rows ``offsets[i]:offsets[i+1]`` of ``hypotheses`` and
``features``; the Moses n-best format is read and written by :mod:`rerank.nbest.moses`.

List-level settings (:class:`ListInfo`: the beam feature, the feature sets) live in the
list's signature ``PATH.json`` beside it; they are read and written with the list
(:func:`read_list_info`, :func:`write_list_info`) and travel as ``NBestList.info``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.nbest.sparse import SparseFeatures
from rerank.signature import write_signed
from rerank.textio import read_json

SEPARATOR = " ||| "


class PackedStrings(Sequence[str]):
    """M strings stored as one UTF-8 buffer and int64[M + 1] byte offsets: about the
    strings' bytes + 8 bytes each instead of ~60 bytes of Python object per string, for the
    commands that keep a whole list (``tune``, ``oracle``, ``crossfit``).  A read-only
    sequence: ``len``, indexing (decodes one string), iteration and :meth:`take`."""

    def __init__(self, data: np.ndarray, offsets: np.ndarray):
        self.data = np.asarray(data, dtype=np.uint8)
        self.offsets = np.asarray(offsets, dtype=np.int64)

    @classmethod
    def from_strings(cls, strings: Sequence[str]) -> "PackedStrings":
        """Pack ``strings`` (each may hold any character but none is split)."""
        joined = "".join(strings).encode("utf-8")
        lengths = np.fromiter(map(len, strings), dtype=np.int64, count=len(strings))
        if len(joined) != int(lengths.sum()):  # non-ASCII: byte lengths differ from character lengths
            lengths = np.fromiter((len(t.encode("utf-8")) for t in strings), dtype=np.int64, count=len(strings))
        return cls(np.frombuffer(joined, dtype=np.uint8), np.concatenate([[0], np.cumsum(lengths)]))

    @classmethod
    def concat(cls, parts: Sequence["PackedStrings"]) -> "PackedStrings":
        """One sequence of the strings of ``parts`` in order."""
        if not parts:
            return cls(np.zeros(0, np.uint8), np.zeros(1, np.int64))
        shifts = np.cumsum([0] + [len(p.data) for p in parts[:-1]])
        offsets = np.concatenate([[0]] + [p.offsets[1:] + shift for p, shift in zip(parts, shifts)])
        return cls(np.concatenate([p.data for p in parts]), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        return self.data[self.offsets[index] : self.offsets[index + 1]].tobytes().decode("utf-8")

    def __iter__(self):
        data, offsets = self.data.tobytes(), self.offsets.tolist()
        for start, end in zip(offsets[:-1], offsets[1:]):
            yield data[start:end].decode("utf-8")

    def take(self, rows: np.ndarray) -> "PackedStrings":
        """The strings of ``rows`` (int[K]) in that order, packed."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        starts = np.cumsum(lengths) - lengths
        index = np.repeat(self.offsets[rows] - starts, lengths) + np.arange(int(lengths.sum()))
        return PackedStrings(self.data[index], np.concatenate([[0], np.cumsum(lengths)]))


def _take(strings: Sequence[str], rows: np.ndarray) -> Sequence[str]:
    return strings.take(rows) if isinstance(strings, PackedStrings) else [strings[i] for i in rows]


@dataclass
class ListInfo:
    """The list-level settings of an n-best list, kept in its signature ``PATH.json``.

    Attributes:
        beam_feature: the column the decoder ranked its beam by (``rerank nmt nbest``
            writes ``NMT``); tuning starts from the weights that reproduce the beam's
            1-best (1 on it, 0 elsewhere).  None: the list declares no such column.
        feature_sets: {set name: column names}: ``beam`` for the decoder's columns, and
            each scorer's set (its name, e.g. ``R2L``, ``MBR``, ``MLMME``; parts such as
            ``MLMME/ss``), as :class:`rerank.features.scorer.Scorer` declares them.  ``rerank tune
            --feature-sets beam,R2L`` selects columns by set, so no script spells a column.
        declared: True when the settings were read from (or are to be written to) a
            signature; False for a list without one (a Moses list from elsewhere), whose
            beam feature is unknown rather than absent.
    """

    beam_feature: Optional[str] = None
    feature_sets: Dict[str, List[str]] = field(default_factory=dict)
    declared: bool = False

    def with_sets(self, sets: Dict[str, List[str]]) -> "ListInfo":
        """A copy with ``sets`` added (columns appended to a set of the same name)."""
        merged = {name: list(columns) for name, columns in self.feature_sets.items()}
        for name, columns in sets.items():
            merged[name] = list(dict.fromkeys(merged.get(name, []) + list(columns)))
        return ListInfo(self.beam_feature, merged, self.declared)

    def columns_of(self, names: Sequence[str], source: str) -> List[str]:
        """The columns of the feature sets ``names``, in order, without repeats.

        Raises:
            InputError: naming ``source``, for a list without a signature (no sets known)
                or a set it does not have.
        """
        if not self.declared:
            raise InputError(
                f"no signature {source}.json beside the list, so no feature sets are known: name the "
                "columns with --features instead",
                source,
            )
        unknown = [name for name in names if name not in self.feature_sets]
        if unknown:
            raise InputError(
                f"no feature set {unknown[0]!r} in the list's signature (it has: "
                f"{', '.join(self.feature_sets) or 'none'})",
                source,
            )
        return list(dict.fromkeys(c for name in names for c in self.feature_sets[name]))


def read_list_info(path: str) -> ListInfo:
    """The :class:`ListInfo` of the n-best list ``path`` from its signature ``path.json``;
    an undeclared one when there is no signature (or ``path`` is ``-``).

    Raises:
        InputError: naming ``path.json``, when it exists but cannot be read, is not JSON,
            or holds a malformed ``beam_feature`` / ``feature_sets``.
    """
    sidecar = path + ".json"
    if path == "-" or not os.path.exists(sidecar):
        return ListInfo()
    data = read_json(sidecar)
    beam = data.get("beam_feature") if isinstance(data, dict) else None
    sets = data.get("feature_sets", {}) if isinstance(data, dict) else None
    if (
        not isinstance(data, dict)
        or not (beam is None or isinstance(beam, str))
        or not isinstance(sets, dict)
        or not all(isinstance(v, list) and all(isinstance(c, str) for c in v) for v in sets.values())
    ):
        raise InputError(
            "not an n-best signature (beam_feature: a name or null; feature_sets: {name: [columns]})", sidecar
        )
    return ListInfo(beam, {str(k): list(v) for k, v in sets.items()}, True)


def write_list_info(
    path: Optional[str], info: Optional[ListInfo], record: Dict[str, Any], packages: Sequence[str] = ("numpy",)
) -> None:
    """Write the signature ``path`` (an n-best list's ``.json``): ``record`` (provenance:
    settings, inputs, timings) with ``info``'s beam feature (when declared) and feature sets.
    ``path`` None (a list written to ``-``, a device or a FIFO:
    :meth:`rerank.outputs.StagedOutputs.signature`): nothing is written."""
    if path is None:
        return
    info = info or ListInfo()
    out = dict(record)
    if info.declared:
        out["beam_feature"] = info.beam_feature
    out["feature_sets"] = info.feature_sets
    write_signed(path, out, packages)


@dataclass
class NBestList:
    """A flat n-best table.

    Attributes:
        offsets: int64[N + 1]; hypotheses of segment i are rows ``offsets[i]:offsets[i+1]``.
        hypotheses: M hypothesis strings, M = ``offsets[-1]`` (a list, or a
            :class:`PackedStrings` where only numbers are kept per hypothesis).
        features: float64[M, F] dense feature matrix.
        feature_names: F column labels.  A Moses name with k values gives k columns
            labelled with the same name, in order.
        totals: float64[M] the ``total`` field as read (Moses' model score), or None.
        info: the list-level settings (:class:`ListInfo`), carried by every copy.
        sparse: the sparse features (Moses ``name_key= value`` pairs that vary per line,
            :class:`rerank.nbest.sparse.SparseFeatures`, K of them), or None.  A weight
            vector over the list has F + K entries: the dense columns, then ``sparse.names``
            (:meth:`scores`, :attr:`all_names`).
    """

    offsets: np.ndarray
    hypotheses: Sequence[str]
    features: np.ndarray
    feature_names: List[str]
    totals: Optional[np.ndarray] = field(default=None)
    info: ListInfo = field(default_factory=ListInfo)
    sparse: Optional[SparseFeatures] = field(default=None)

    def __post_init__(self):
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.features = np.asarray(self.features, dtype=np.float64).reshape(
            len(self.hypotheses), len(self.feature_names)
        )
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.hypotheses) or np.any(np.diff(self.offsets) < 1):
            raise ValueError("offsets must start at 0, end at M and give each segment at least one hypothesis")
        if self.sparse is not None and self.sparse.num_rows != len(self.hypotheses):
            raise ValueError("the sparse features have another number of rows than the list")

    @property
    def all_names(self) -> List[str]:
        """The F dense column labels, then the K sparse feature names: what a weight vector
        over the list (:meth:`scores`) is indexed by."""
        return self.feature_names + (self.sparse.names if self.sparse is not None else [])

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """float64[M] model scores: the dense features times ``weights[:F]`` plus the sparse ones
        times ``weights[F:]`` (float[F + K], :attr:`all_names` order; float[F] for a list
        without sparse features)."""
        weights = np.asarray(weights, dtype=np.float64)
        F = len(self.feature_names)
        out = self.features @ weights[:F]
        if self.sparse is not None and self.sparse.width:
            out = out + self.sparse.dot(weights[F:])
        return out

    def __repr__(self) -> str:
        """A short summary, whatever the list's size: ``NBestList(segments=1000,
        hypotheses=20000, columns=NMT WordPenalty NMTNorm, beam_feature='NMTNorm')``."""
        beam = f", beam_feature={self.info.beam_feature!r}" if self.info.declared else ""
        columns = " ".join(dict.fromkeys(self.feature_names))
        sparse = f", sparse features={self.sparse.width}" if self.sparse is not None else ""
        if len(columns) > 200:
            columns = columns[:200] + "…"
        return (
            f"NBestList(segments={self.num_segments}, hypotheses={len(self.hypotheses)}, "
            f"columns={columns or '(none)'}{sparse}{beam})"
        )

    @property
    def num_segments(self) -> int:
        """N, the number of source segments."""
        return len(self.offsets) - 1

    @property
    def segment(self) -> np.ndarray:
        """int64[M]: the segment id of each hypothesis row."""
        return np.repeat(np.arange(self.num_segments), np.diff(self.offsets))

    def groups(self) -> List[Tuple[str, int]]:
        """Moses feature groups as ``[(name, number of values), ...]`` in column order."""
        out: List[Tuple[str, int]] = []
        for name in self.feature_names:
            if out and out[-1][0] == name:
                out[-1] = (name, out[-1][1] + 1)
            else:
                out.append((name, 1))
        return out

    def add_feature(self, name: str, values: np.ndarray) -> "NBestList":
        """Return a copy with new column(s) ``name`` appended; values float[M] or float[M, k].

        Raises:
            ValueError: ``name`` already present or wrong number of rows.
        """
        if name in self.feature_names:
            raise ValueError(f"feature {name!r} is already in the n-best list")
        values = np.asarray(values, dtype=np.float64)
        values = values.reshape(len(self.hypotheses), -1)
        return NBestList(
            self.offsets,
            self.hypotheses,
            np.hstack([self.features, values]),
            self.feature_names + [name] * values.shape[1],
            self.totals,
            self.info,
            self.sparse,
        )

    def select(self, scores: np.ndarray) -> np.ndarray:
        """Per-segment argmax of ``scores`` (float[M]); see :func:`select_best`."""
        return select_best(scores, self.offsets)

    def rows_of(self, segments: np.ndarray) -> np.ndarray:
        """int64 row indices of the hypotheses of ``segments`` (int[S]), in that order."""
        segments = np.asarray(segments, dtype=np.int64)
        counts = np.diff(self.offsets)[segments]
        starts = np.repeat(self.offsets[segments] - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        return starts + np.arange(int(counts.sum()))

    def subset(self, segments: np.ndarray) -> "NBestList":
        """The list of ``segments`` (int[S], non-empty) only, renumbered 0..S-1 in that
        order; rows are :meth:`rows_of` ``(segments)``."""
        rows = self.rows_of(segments)
        counts = np.diff(self.offsets)[np.asarray(segments, dtype=np.int64)]
        return self._rows(rows, counts)

    def keep(self, rows: np.ndarray) -> "NBestList":
        """The list of only ``rows`` (int[K], ascending, at least one row of every segment):
        the same segments, each with its kept hypotheses in list order.

        Raises:
            ValueError: rows out of order or range, or a segment left without a row."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (np.any(np.diff(rows) <= 0) or rows[0] < 0 or rows[-1] >= len(self.hypotheses)):
            raise ValueError("rows must be ascending row numbers of the list")
        counts = np.bincount(self.segment[rows], minlength=self.num_segments)
        return self._rows(rows, counts)

    def _rows(self, rows: np.ndarray, counts: np.ndarray) -> "NBestList":
        """The list of ``rows`` (int[K]) in that order, ``counts`` (int[S]) of them a segment."""
        return NBestList(
            np.concatenate([[0], np.cumsum(counts)]),
            _take(self.hypotheses, rows),
            self.features[rows],
            list(self.feature_names),
            None if self.totals is None else self.totals[rows],
            self.info,
            None if self.sparse is None else self.sparse.take(rows),
        )

    def head(self, size: int) -> "NBestList":
        """The first ``size`` (≥ 1) hypotheses of every segment, e.g. a 20-best list from the
        50-best list of the same beam (Calixto & Liu 2017's Tables 3 and 4 share their
        1-best baseline this way)."""
        widths = np.diff(self.offsets)
        counts = np.minimum(widths, min(int(size), int(widths.max(initial=0))))  # any size: no int64 overflow
        rows = np.repeat(self.offsets[:-1], counts) + (
            np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
        )
        return self._rows(rows, counts)


def finite_scores(scores: np.ndarray, nbest_path: str, weights_path: str) -> np.ndarray:
    """``scores`` (float[M], feature values times weights) unchanged, or
    :class:`InputError` naming ``weights_path`` when a weighted score overflowed (feature
    or weight magnitudes beyond the float range)."""
    if not np.all(np.isfinite(scores)):
        raise InputError(
            f"weighted scores of {nbest_path} are not finite numbers: its feature values times "
            "these weights exceed the float range",
            weights_path,
        )
    return scores


def select_best(scores: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-segment argmax of ``scores`` (float[M]) over segments given by ``offsets``
    (int[N + 1]); ties go to the earlier row, as in Moses.

    Returns int64[N] row indices.  Vectorised: scores are scattered into an
    (N, largest n-best size) matrix padded with -inf.
    """
    counts = np.diff(offsets)
    seg = np.repeat(np.arange(len(counts)), counts)
    matrix = np.full((len(counts), int(counts.max())), -np.inf)
    matrix[seg, np.arange(len(scores)) - offsets[seg]] = scores
    return offsets[:-1] + np.argmax(matrix, axis=1)


def rank_order(nbest: NBestList) -> Tuple[List[str], Dict[str, int]]:
    """What a list's order says of the column its decoder ranked by: (the one-valued columns
    whose values never rise down any segment and fall in some — the order decoders write n-best
    lists in —, and
    for every one-valued column the segments whose first hypothesis has its highest value).
    Segments of one hypothesis say nothing and are left out of both."""
    sizes = np.diff(nbest.offsets)
    single = [c for c, name in enumerate(nbest.feature_names) if nbest.feature_names.count(name) == 1]
    if not len(sizes) or not single:
        return [], {}
    features = nbest.features[:, single]
    within = np.repeat(np.arange(len(sizes)), sizes)
    same = within[1:] == within[:-1]
    scale = np.maximum(np.abs(features[1:]), np.abs(features[:-1]))
    step = np.diff(features, axis=0)
    rises = (step > 1e-9 * np.maximum(scale, 1.0)) & same[:, None]
    falls = (step < -1e-9 * np.maximum(scale, 1.0)) & same[:, None]  # a constant column orders nothing
    many = sizes > 1
    best = np.maximum.reduceat(features, nbest.offsets[:-1], axis=0)
    first_is_best = (features[nbest.offsets[:-1]] >= best) & many[:, None]
    names = [nbest.feature_names[c] for c in single]
    ordering = [name for k, name in enumerate(names) if not rises[:, k].any() and falls[:, k].any()]
    return ordering, {name: int(first_is_best[:, k].sum()) for k, name in enumerate(names)}
