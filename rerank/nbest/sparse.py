"""Sparse features: Moses' ``name_key= value`` pairs that vary from line to line.

Moses (``mert/Data.cpp``, read by ``kbmira`` and ``mert --pro``) takes a feature whose name
holds an underscore and carries one value as sparse: it may be absent from a line, where it
counts 0, and a list may hold thousands of them (one per word pair, per rule).  rerank reads
them the same way (:mod:`rerank.nbest.moses`; a name its signature lists in a feature set
stays dense) and keeps them sparse in memory, as :class:`SparseFeatures` — compressed rows
(CSR): row ``m``'s features are ``names[indices[indptr[m]:indptr[m+1]]]`` with ``values[…]``,
so a list costs 16 bytes per feature that fires rather than 8 per hypothesis and name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, List, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.textio import finite_number


def is_sparse_name(name: str) -> bool:
    """Whether ``name`` is a sparse feature's name by Moses' rule (it holds an underscore)."""
    return "_" in name


def split_sparse(
    tokens: List[str], dense: FrozenSet[str], path: str, lineno: int
) -> Tuple[List[str], List[Tuple[str, float]]]:
    """(the dense tokens, the sparse features ``[(name, value), ...]``) of one line's feature
    tokens: a sparse feature is a name with an underscore (:func:`is_sparse_name`), not in
    ``dense`` (the names a signature declares), followed by exactly one value.

    Raises:
        InputError: naming ``path`` and ``lineno``: a sparse value that is not a finite number,
            or a sparse name twice on the line."""
    kept: List[str] = []
    pairs: List[Tuple[str, float]] = []
    k = 0
    while k < len(tokens):
        token = tokens[k]
        if (
            token.endswith("=")
            and is_sparse_name(token)
            and token[:-1] not in dense
            and k + 1 < len(tokens)
            and not tokens[k + 1].endswith("=")
            and (k + 2 == len(tokens) or tokens[k + 2].endswith("="))
        ):
            name = token[:-1]
            pairs.append((name, finite_number(tokens[k + 1], f"feature {name!r}", path, lineno)))
            k += 2
            continue
        kept.append(token)
        k += 1
    if len({name for name, _ in pairs}) != len(pairs):
        raise InputError("a sparse feature name occurs twice on the line", path, lineno)
    return kept, pairs


@dataclass
class SparseFeatures:
    """The sparse features of M hypotheses, compressed by rows.

    Attributes:
        indptr: int64[M + 1], row m's entries are ``indptr[m]:indptr[m+1]``.
        indices: int64[nnz], each entry's feature (an index into ``names``).
        values: float64[nnz], each entry's value.
        names: K feature names, each once.

    Raises:
        ValueError: arrays that do not fit together (``indptr`` not rising from 0 to nnz, an
            index outside ``names``, repeated names).
    """

    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    names: List[str]

    def __post_init__(self):
        self.indptr = np.asarray(self.indptr, dtype=np.int64)
        self.indices = np.asarray(self.indices, dtype=np.int64)
        self.values = np.asarray(self.values, dtype=np.float64)
        self.names = list(self.names)
        nnz = len(self.indices)
        if (
            len(self.indptr) < 1
            or self.indptr[0] != 0
            or self.indptr[-1] != nnz
            or len(self.values) != nnz
            or np.any(np.diff(self.indptr) < 0)
            or (nnz and (self.indices.min() < 0 or self.indices.max() >= len(self.names)))
            or len(set(self.names)) != len(self.names)
        ):
            raise ValueError("sparse features: indptr, indices, values and names do not fit together")

    @classmethod
    def empty(cls, rows: int) -> "SparseFeatures":
        """No sparse feature on any of ``rows`` hypotheses."""
        return cls(np.zeros(rows + 1, np.int64), np.zeros(0, np.int64), np.zeros(0), [])

    @classmethod
    def from_rows(cls, rows: Sequence[Sequence[Tuple[str, float]]]) -> "SparseFeatures":
        """From one ``[(name, value), ...]`` per hypothesis (names numbered in order of first use)."""
        index: Dict[str, int] = {}
        counts = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
        indices = [index.setdefault(name, len(index)) for row in rows for name, _ in row]
        values = [value for row in rows for _, value in row]
        return cls(
            np.concatenate([[0], np.cumsum(counts)]),
            np.asarray(indices, np.int64),
            np.asarray(values, float),
            list(index),
        )

    @property
    def num_rows(self) -> int:
        """M, the hypotheses."""
        return len(self.indptr) - 1

    @property
    def width(self) -> int:
        """K, the sparse features."""
        return len(self.names)

    @property
    def row_of(self) -> np.ndarray:
        """int64[nnz]: the row of each entry."""
        return np.repeat(np.arange(self.num_rows), np.diff(self.indptr))

    def row(self, m: int) -> List[Tuple[str, float]]:
        """Row ``m``'s ``[(name, value), ...]`` in the order read."""
        lo, hi = self.indptr[m], self.indptr[m + 1]
        return [(self.names[k], v) for k, v in zip(self.indices[lo:hi].tolist(), self.values[lo:hi].tolist())]

    def dot(self, weights: np.ndarray) -> np.ndarray:
        """float64[M]: each row's values times ``weights`` (float[K], in ``names`` order)."""
        weights = np.asarray(weights, dtype=np.float64)
        return np.bincount(self.row_of, self.values * weights[self.indices], minlength=self.num_rows)

    def take(self, rows: np.ndarray) -> "SparseFeatures":
        """The rows ``rows`` (int[R]) in that order, the same names."""
        rows = np.asarray(rows, dtype=np.int64)
        counts = self.indptr[rows + 1] - self.indptr[rows]
        starts = np.cumsum(counts) - counts
        entries = np.repeat(self.indptr[rows] - starts, counts) + np.arange(int(counts.sum()))
        return SparseFeatures(
            np.concatenate([[0], np.cumsum(counts)]), self.indices[entries], self.values[entries], self.names
        )

    def moses_fields(self, format_column: Callable[[np.ndarray], List[str]]) -> List[str]:
        """Each row's features as Moses ``name= value`` tokens in the order read (empty for a row
        without any); values as ``format_column`` writes them (:func:`rerank.nbest.format_column`)."""
        names = [name + "=" for name in self.names]
        tokens = [f"{names[k]} {v}" for k, v in zip(self.indices.tolist(), format_column(self.values))]
        bounds = self.indptr.tolist()
        return [" ".join(tokens[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]

    def to_dense(self) -> np.ndarray:
        """float64[M, K], the rows written out (for small lists and tests)."""
        out = np.zeros((self.num_rows, self.width))
        np.add.at(out, (self.row_of, self.indices), self.values)
        return out

    def restrict(self, names: Sequence[str]) -> "SparseFeatures":
        """Only the features ``names`` (those of them present), in that order."""
        keep = {name: k for k, name in enumerate(names)}
        mapping = np.array([keep.get(name, -1) for name in self.names] or [0], dtype=np.int64)
        new = mapping[self.indices] if len(self.indices) else self.indices
        mask = new >= 0
        counts = np.bincount(self.row_of[mask], minlength=self.num_rows)
        return SparseFeatures(np.concatenate([[0], np.cumsum(counts)]), new[mask], self.values[mask], list(names))

    @classmethod
    def concat(cls, parts: Sequence["SparseFeatures"]) -> "SparseFeatures":
        """The rows of ``parts`` in order, their names united (first use first)."""
        names: Dict[str, int] = {}
        indices, values, counts = [], [], []
        for part in parts:
            mapping = np.array([names.setdefault(n, len(names)) for n in part.names] or [0], dtype=np.int64)
            indices.append(mapping[part.indices] if len(part.indices) else part.indices)
            values.append(part.values)
            counts.append(np.diff(part.indptr))
        total = np.concatenate(counts) if counts else np.zeros(0, np.int64)
        return cls(
            np.concatenate([[0], np.cumsum(total)]),
            np.concatenate(indices) if indices else np.zeros(0, np.int64),
            np.concatenate(values) if values else np.zeros(0),
            list(names),
        )
