"""The n-best data model and the Moses n-best format.

An :class:`NBestList` is a ragged table stored flat (``../shared/DESIGN.md``): the
hypotheses of segment ``i`` are rows ``offsets[i]:offsets[i+1]`` of ``hypotheses`` and
``features``.  Reading and writing Moses n-best files happens here and nowhere else.

Moses n-best format, one hypothesis per line::

    id ||| hypothesis ||| name= v1 v2 name2= v3 ||| total

``id`` runs 0..N-1 in order, each segment has at least one hypothesis, and every line
carries the same feature names with the same number of values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError, atomic_write
from rerank.textio import open_text

SEPARATOR = " ||| "


@dataclass
class NBestList:
    """A flat n-best table.

    Attributes:
        offsets: int64[N + 1]; hypotheses of segment i are rows ``offsets[i]:offsets[i+1]``.
        hypotheses: M hypothesis strings, M = ``offsets[-1]``.
        features: float64[M, F] dense feature matrix.
        feature_names: F column labels.  A Moses name with k values gives k columns
            labelled with the same name, in order.
        totals: float64[M] the ``total`` field as read (Moses' model score), or None.
    """

    offsets: np.ndarray
    hypotheses: List[str]
    features: np.ndarray
    feature_names: List[str]
    totals: Optional[np.ndarray] = field(default=None)

    def __post_init__(self):
        self.offsets = np.asarray(self.offsets, dtype=np.int64)
        self.features = np.asarray(self.features, dtype=np.float64).reshape(len(self.hypotheses), len(self.feature_names))
        if self.offsets[0] != 0 or self.offsets[-1] != len(self.hypotheses) or np.any(np.diff(self.offsets) < 1):
            raise ValueError("offsets must start at 0, end at M and give each segment at least one hypothesis")

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
        return NBestList(self.offsets, self.hypotheses, np.hstack([self.features, values]),
                         self.feature_names + [name] * values.shape[1], self.totals)

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
        return NBestList(np.concatenate([[0], np.cumsum(counts)]), [self.hypotheses[i] for i in rows],
                         self.features[rows], list(self.feature_names),
                         None if self.totals is None else self.totals[rows])

    def head(self, size: int) -> "NBestList":
        """The first ``size`` (≥ 1) hypotheses of every segment, e.g. a 20-best list from the
        50-best list of the same beam (Calixto & Liu 2017's Tables 3 and 4 share their
        1-best baseline this way)."""
        counts = np.minimum(np.diff(self.offsets), size)
        rows = np.repeat(self.offsets[:-1], counts) + (np.arange(int(counts.sum()))
                                                       - np.repeat(np.cumsum(counts) - counts, counts))
        return NBestList(np.concatenate([[0], np.cumsum(counts)]), [self.hypotheses[i] for i in rows],
                         self.features[rows], list(self.feature_names),
                         None if self.totals is None else self.totals[rows])


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


def _parse_features(text: str, path: str, lineno: int) -> Tuple[List[Tuple[str, int]], List[float]]:
    groups: List[Tuple[str, int]] = []
    values: List[float] = []
    for token in text.split():
        if token.endswith("="):
            if groups and groups[-1][1] == 0:
                raise InputError(f"feature {groups[-1][0]!r} has no value", path, lineno)
            groups.append((token[:-1], 0))
            continue
        if not groups:
            raise InputError(f"value {token!r} before any feature name", path, lineno)
        try:
            value = float(token)
        except ValueError:
            raise InputError(f"feature {groups[-1][0]!r}: non-numeric value {token!r}", path, lineno) from None
        if not math.isfinite(value):
            raise InputError(f"feature {groups[-1][0]!r}: value {token!r} is not finite", path, lineno)
        values.append(value)
        groups[-1] = (groups[-1][0], groups[-1][1] + 1)
    if groups and groups[-1][1] == 0:
        raise InputError(f"feature {groups[-1][0]!r} has no value", path, lineno)
    names = [name for name, _ in groups]
    if len(set(names)) != len(names):
        raise InputError("a feature name occurs twice on the line", path, lineno)
    return groups, values


def read_nbest(path: str, num_segments: Optional[int] = None) -> NBestList:
    """Read a Moses n-best file (``-`` for stdin, ``.gz`` accepted).

    Args:
        path: file to read.
        num_segments: if given, the expected number of segments N (e.g. the number of
            reference lines); a different count is an error.
    Raises:
        InputError: naming file and line, for a wrong field count, a non-integer id, ids
            not 0, 1, 2, ... in order, a missing or non-numeric or non-finite value, a
            feature set different from the first line's, an empty file, or a segment
            count different from ``num_segments``.

    Fast path: the first line's feature field fixes the layout (positions of the name
    tokens); later lines are checked against it token by token and their value tokens
    are converted to float all at once; any failure re-parses the offending line
    slowly to name the problem.
    """
    hypotheses: List[str] = []
    value_tokens: List[str] = []
    total_tokens: List[str] = []
    starts: List[int] = []
    layout: Optional[List[Tuple[str, int]]] = None
    name_at: List[Tuple[int, str]] = []
    value_at: List[int] = []
    width = 0
    current = -1
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            fields = line.rstrip("\n").split(" ||| ")
            if len(fields) != 4:
                if not line.strip():
                    raise InputError("empty line", path, lineno)
                raise InputError(f"expected 4 fields separated by ' ||| ', found {len(fields)}", path, lineno)
            if fields[0] != str(current):
                try:
                    sid = int(fields[0])
                except ValueError:
                    raise InputError(f"segment id {fields[0]!r} is not an integer", path, lineno) from None
                if sid != current + 1:
                    if sid == current:  # e.g. " 3" or "03"
                        pass
                    else:
                        raise InputError(f"segment id {sid} follows {current}: ids must be 0, 1, 2, ... in order",
                                         path, lineno)
                else:
                    current = sid
                    starts.append(len(hypotheses))
            tokens = fields[2].split()
            if layout is None:
                layout, _ = _parse_features(fields[2], path, lineno)
                width = len(tokens)
                name_at = [(k, t) for k, t in enumerate(tokens) if t.endswith("=")]
                value_at = [k for k, t in enumerate(tokens) if not t.endswith("=")]
            if len(tokens) != width or any(tokens[k] != name for k, name in name_at):
                groups, _ = _parse_features(fields[2], path, lineno)  # raises on malformed values
                raise InputError(f"features {_describe(groups)} differ from the first line's {_describe(layout)}",
                                 path, lineno)
            value_tokens.extend([tokens[k] for k in value_at])
            total_tokens.append(fields[3].strip() or "0")
            hypotheses.append(fields[1].strip())
    if not hypotheses:
        raise InputError("no hypotheses", path)
    if num_segments is not None and current + 1 != num_segments:
        raise InputError(f"{current + 1} segments in the n-best list but {num_segments} references", path)
    names = [name for name, count in layout for _ in range(count)]
    try:
        features = np.array(value_tokens, dtype=np.float64).reshape(len(hypotheses), len(names))
        ok = bool(np.isfinite(features).all())
    except ValueError:
        ok = False
    if not ok:  # find and name the first bad line
        _first_bad_line(path)
    try:
        totals = np.array(total_tokens, dtype=np.float64)
    except ValueError:
        bad = next(k for k, t in enumerate(total_tokens) if not _is_float(t))
        raise InputError(f"total {total_tokens[bad]!r} is not a number", path, bad + 1) from None
    return NBestList(np.asarray(starts + [len(hypotheses)]), hypotheses, features, names, totals)


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _first_bad_line(path: str) -> None:
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            _parse_features(line.rstrip("\n").split(" ||| ")[2], path, lineno)
    raise InputError("non-numeric or non-finite feature value", path)


def _describe(groups: Sequence[Tuple[str, int]]) -> str:
    return "[" + " ".join(f"{name}={count}" for name, count in groups) + "]"


def format_value(value: float) -> str:
    """Text of a feature value: shortest round-trip repr, integers without '.0' (and
    ``-0`` for negative zero, so that its sign survives a round trip)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return "-0" if value == 0 and math.copysign(1.0, value) < 0 else str(int(value))
    return repr(float(value))


def check_writable(nbest: NBestList, totals: np.ndarray) -> None:
    """Refuse what :func:`read_nbest` would refuse or read back differently.

    Raises:
        InputError: a feature name that is empty, holds whitespace (including control
            characters such as ``\x1d`` that ``str.split`` treats as whitespace) or ``|||``,
            or repeats a name used earlier for other columns; a hypothesis with outer
            whitespace, a line break or ``|||``; a feature value or total that is not finite.
    """
    seen = set()
    for name, _ in nbest.groups():
        if not name or any(ch.isspace() for ch in name) or "|||" in name:
            raise InputError(f"feature name {name!r} cannot be written in Moses format "
                             "(empty, whitespace or '|||')")
        if name in seen:
            raise InputError(f"feature name {name!r} names two separate groups of columns")
        seen.add(name)
    for row, hyp in enumerate(nbest.hypotheses):
        if hyp != hyp.strip() or "\n" in hyp or "\r" in hyp or "|||" in hyp:
            raise InputError(f"hypothesis {row} ({hyp!r}) cannot be written in Moses format "
                             "(outer whitespace, a line break or '|||')")
    if not np.all(np.isfinite(nbest.features)) or not np.all(np.isfinite(totals)):
        raise InputError("feature values and totals must be finite numbers")


def write_nbest(nbest: NBestList, path: str, totals: Optional[np.ndarray] = None) -> None:
    """Write ``nbest`` in Moses format, atomically.  ``totals`` (float[M]) defaults to
    ``nbest.totals`` or zeros.  Raises :class:`InputError` (see :func:`check_writable`)
    before writing anything that would not read back as it is."""
    if totals is None:
        totals = nbest.totals if nbest.totals is not None else np.zeros(len(nbest.hypotheses))
    check_writable(nbest, np.asarray(totals, dtype=np.float64))
    groups = nbest.groups()
    seg = nbest.segment
    with atomic_write(path) as out:
        for row, hyp in enumerate(nbest.hypotheses):
            col, parts = 0, []
            for name, count in groups:
                parts.append(name + "= " + " ".join(format_value(v) for v in nbest.features[row, col:col + count]))
                col += count
            out.write(f"{seg[row]} ||| {hyp} ||| {' '.join(parts)} ||| {format_value(totals[row])}\n")


def write_lines(lines: Iterable[str], path: str) -> None:
    """Write one line per item, atomically."""
    with atomic_write(path) as out:
        for line in lines:
            out.write(line + "\n")


def read_weights(path: str) -> Dict[str, object]:
    """The ``weights`` object of a weights JSON file: names -> finite numbers or lists of
    them.  Raises :class:`InputError` naming the file (and line for JSON syntax)."""
    import json

    from rerank.textio import read_text

    try:
        data = json.loads(read_text(path), parse_constant=lambda name: name)  # NaN/Infinity stay strings
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err.msg}", path, err.lineno) from None
    weights = data.get("weights") if isinstance(data, dict) else None
    if not isinstance(weights, dict):
        raise InputError('no "weights" object', path)

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    for name, value in weights.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(number(v) for v in values):
            raise InputError(f"weight of {name!r} must be a finite number or a list of them, not {json.dumps(value)}",
                             path)
    return weights


def weights_vector(weights: Dict[str, object], nbest: NBestList, source: str = "weights") -> np.ndarray:
    """Align a ``{name: value or [values]}`` weight map with ``nbest``'s columns.

    Raises:
        InputError: a name in the n-best list has no weight, a weight has no column, or
            a name's number of values differs.
    """
    missing = [name for name, _ in nbest.groups() if name not in weights]
    unknown = [name for name in weights if name not in nbest.feature_names]
    if missing or unknown:
        parts = []
        if missing:
            parts.append("no weight for n-best feature(s) " + ", ".join(missing))
        if unknown:
            parts.append("weight(s) for feature(s) not in the n-best list: " + ", ".join(unknown))
        raise InputError("; ".join(parts), source)
    vector = []
    for name, count in nbest.groups():
        value = weights[name]
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(values) != count:
            raise InputError(f"feature {name!r} has {count} value(s) in the n-best list but {len(values)} weight(s)",
                             source)
        vector.extend(float(v) for v in values)
    return np.asarray(vector, dtype=np.float64)


def weights_dict(vector: np.ndarray, nbest: NBestList) -> Dict[str, object]:
    """Inverse of :func:`weights_vector`: a scalar for one-valued names, else a list."""
    out: Dict[str, object] = {}
    col = 0
    for name, count in nbest.groups():
        vals = [float(v) for v in vector[col:col + count]]
        out[name] = vals[0] if count == 1 else vals
        col += count
    return out
