"""The Moses n-best format: streaming reader (:func:`iter_nbest`, :func:`read_nbest`,
:func:`iter_nbest_pair`) and writer (:class:`NBestWriter`, :func:`write_nbest`) of
:class:`~rerank.nbest.model.NBestList`; reading and writing Moses n-best files happens here and
nowhere else.

One hypothesis per line::

    id ||| hypothesis ||| name= v1 v2 name2= v3 word_pair= 1 ||| total

``id`` runs 0..N-1 in order, each segment has at least one hypothesis, and every line
carries the same dense feature names with the same number of values.  A name holding an
underscore with one value (``word_pair= 1``) is a sparse feature, as Moses reads it
(``mert/Data.cpp``): it may be absent from a line (value 0) and is kept sparse
(:class:`rerank.nbest.sparse.SparseFeatures`); a name the list's signature lists in a feature
set stays dense whatever its spelling.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError, expect, path_argument
from rerank.nbest.count import count_segments  # noqa: F401  (re-exported: the list's count before it is read)
from rerank.nbest.model import NBestList, PackedStrings, read_list_info, write_list_info
from rerank.nbest.sparse import SparseFeatures, is_sparse_name, split_sparse
from rerank.outputs import atomic_write
from rerank.textio import finite_number, open_text


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
        values.append(finite_number(token, f"feature {groups[-1][0]!r}", path, lineno))
        groups[-1] = (groups[-1][0], groups[-1][1] + 1)
    if groups and groups[-1][1] == 0:
        raise InputError(f"feature {groups[-1][0]!r} has no value", path, lineno)
    names = [name for name, _ in groups]
    if len(set(names)) != len(names):
        raise InputError("a feature name occurs twice on the line", path, lineno)
    return groups, values


#: hypotheses per block when a list is streamed (:func:`iter_nbest`): memory per block is
#: about this many lines' text and values, independent of the list's size
BLOCK_HYPOTHESES = 50_000


def _getter(indices: Sequence[int]):
    """A function returning the tuple of ``tokens[k]`` for k in ``indices`` (C-speed)."""
    import operator

    if not indices:
        return lambda tokens: ()
    if len(indices) == 1:
        k = indices[0]
        return lambda tokens: (tokens[k],)
    return operator.itemgetter(*indices)


class _BlockParser:
    """Accumulates the lines of whole segments and converts them into an :class:`NBestList`."""

    def __init__(self, path: str, dense: Iterable[str] = ()):
        self.path = path
        self.dense = frozenset(dense)  # names the signature declares dense, underscores or not
        self.sparse_rows: Optional[List[List[Tuple[str, float]]]] = None  # None until a sparse feature is seen
        self.layout: Optional[List[Tuple[str, int]]] = None
        self.names: List[str] = []
        self.width = self.num_values = 0
        self.names_of: Callable[[Sequence[str]], tuple] = _getter([])
        self.values_of: Callable[[Sequence[str]], tuple] = _getter([])
        self.expected: tuple = ()
        self.current: int = -1  # the last segment id seen
        self.current_text: Optional[str] = None  # ... as written
        self.first_line = 1
        self.hypotheses: List[str] = []
        self.value_tokens: List[str] = []
        self.total_tokens: List[str] = []
        self.starts: List[int] = []

    def set_layout(self, field: str, lineno: int) -> None:
        self.layout, _ = _parse_features(field, self.path, lineno)
        tokens = field.split()
        self.width = len(tokens)
        self.names = [name for name, count in self.layout for _ in range(count)]
        name_at = [k for k, t in enumerate(tokens) if t.endswith("=")]
        value_at = [k for k, t in enumerate(tokens) if not t.endswith("=")]
        self.num_values = len(value_at)
        self.names_of, self.values_of = _getter(name_at), _getter(value_at)
        self.expected = self.names_of(tokens)

    def add(self, line: str, lineno: int) -> bool:
        """Parse one line; True when it starts a new segment.

        Raises:
            InputError: a line without 4 ``|||`` fields, with a NUL byte, empty, a non-integer or
                out-of-order segment id, other feature names than the first line's (file and line).
        """
        fields = line.rstrip("\n").split(" ||| ")
        if len(fields) != 4:
            if not line.strip():
                raise InputError("empty line", self.path, lineno)
            raise InputError(f"expected 4 fields separated by ' ||| ', found {len(fields)}", self.path, lineno)
        new = False
        if fields[0] != self.current_text:
            try:
                sid = int(fields[0])
            except ValueError:
                raise InputError(f"segment id {fields[0]!r} is not an integer", self.path, lineno) from None
            if sid == self.current + 1:
                self.current, self.current_text = sid, fields[0]
                new = True
            elif sid != self.current or self.current_text is None:  # " 3" or "03" for the current id are accepted
                raise InputError(
                    f"segment id {sid} follows {self.current}: ids must be 0, 1, 2, ... in order", self.path, lineno
                )
        if "\x00" in line:
            raise InputError("NUL byte in the line (a binary file?)", self.path, lineno)
        if "_" in fields[2]:
            tokens = self.split_sparse(fields[2], lineno)
        else:
            tokens = fields[2].split()
            if self.sparse_rows is not None:
                self.sparse_rows.append([])
        if self.layout is None:
            self.set_layout(" ".join(tokens), lineno)
        if len(tokens) != self.width or self.names_of(tokens) != self.expected:
            groups, _ = _parse_features(fields[2], self.path, lineno)  # raises on malformed values
            raise InputError(
                f"features {_describe(groups)} differ from the first line's {_describe(self.layout or [])}"
                " (a sparse feature's name holds an underscore and has one value)",
                self.path,
                lineno,
            )
        if new:
            self.starts.append(len(self.hypotheses))
        self.value_tokens.extend(self.values_of(tokens))
        self.total_tokens.append(fields[3].strip() or "0")
        self.hypotheses.append(fields[1].strip())
        return new

    def split_sparse(self, text: str, lineno: int) -> List[str]:
        """The dense tokens of the feature field ``text``; its sparse features go to
        :attr:`sparse_rows` (:func:`rerank.nbest.sparse.split_sparse`, which raises)."""
        dense, pairs = split_sparse(text.split(), self.dense, self.path, lineno)
        if pairs and self.sparse_rows is None:
            self.sparse_rows = [[] for _ in self.hypotheses]
        if self.sparse_rows is not None:
            self.sparse_rows.append(pairs)
        return dense

    def block(self, upto: Optional[int] = None) -> NBestList:
        """The list of the accumulated rows before row ``upto`` (whole segments).

        Raises:
            InputError: a total that is not a number (file and line).
        """
        upto = len(self.hypotheses) if upto is None else upto
        starts = [s for s in self.starts if s < upto]
        try:
            features = np.array(self.value_tokens[: upto * self.num_values], dtype=np.float64)
            ok = bool(np.isfinite(features).all())
        except ValueError:
            ok = False
        if not ok:  # name the first bad line
            for row in range(upto):
                tokens = self.value_tokens[row * self.num_values : (row + 1) * self.num_values]
                if not all(_is_float(t) and math.isfinite(float(t)) for t in tokens):
                    line = " ".join(f"{n}= {t}" for n, t in zip(self.names, tokens))
                    _parse_features(line, self.path, self.first_line + row)
        try:
            totals = np.array(self.total_tokens[:upto], dtype=np.float64)
        except ValueError:
            bad = next(k for k, t in enumerate(self.total_tokens[:upto]) if not _is_float(t))
            raise InputError(
                f"total {self.total_tokens[bad]!r} is not a number", self.path, self.first_line + bad
            ) from None
        return NBestList(
            np.asarray(starts + [upto]),
            self.hypotheses[:upto],
            features.reshape(upto, len(self.names)),
            list(self.names),
            totals,
            sparse=None if self.sparse_rows is None else SparseFeatures.from_rows(self.sparse_rows[:upto]),
        )


def iter_nbest(path: str, block_size: Optional[int] = None) -> Iterator[Tuple[int, NBestList]]:
    """Stream a Moses n-best file (``-`` for stdin, ``.gz`` accepted) in blocks of whole
    segments: yields ``(first segment id, NBestList of about block_size hypotheses)``,
    each block's segments renumbered from 0 (``block_size`` None: :data:`BLOCK_HYPOTHESES`).
    Memory is bounded by the block, not the list.

    Raises:
        InputError: naming file and line, as :func:`read_nbest` (the error comes when the
            parser reaches the bad line: earlier blocks have been yielded by then).
    """
    block_size = BLOCK_HYPOTHESES if block_size is None else block_size
    info = read_list_info(path)
    parser = _BlockParser(path, [c for columns in info.feature_sets.values() for c in columns])
    first_segment = 0
    lineno = 0
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            if parser.add(line, lineno) and len(parser.hypotheses) > block_size:
                cut = parser.starts[-1]  # rows before the segment that starts now
                block = parser.block(cut)
                block.info = info
                yield first_segment, block
                first_segment += block.num_segments
                rest = (
                    parser.hypotheses[cut:],
                    parser.value_tokens[cut * parser.num_values :],
                    parser.total_tokens[cut:],
                )
                parser.first_line += cut
                parser.hypotheses, parser.value_tokens, parser.total_tokens = map(list, rest)
                if parser.sparse_rows is not None:
                    parser.sparse_rows = parser.sparse_rows[cut:]
                parser.starts = [0]
    if parser.hypotheses:
        block = parser.block()
        block.info = info
        yield first_segment, block
    elif lineno == 0:
        raise InputError("no hypotheses", path)


def read_nbest(path: str, num_segments: Optional[int] = None) -> NBestList:
    """Read a whole Moses n-best file (``-`` for stdin, ``.gz`` accepted); see
    :func:`iter_nbest` to stream one instead.

    Args:
        path: file to read.
        num_segments: if given, the expected number of segments N (e.g. the number of
            reference lines); a different count is an error.
    Raises:
        InputError: naming file and line, for a wrong field count, a non-integer id, ids
            not 0, 1, 2, ... in order, a missing or non-numeric or non-finite value, a
            feature set different from the first line's, a NUL byte, an empty file, or a
            segment count different from ``num_segments``.

    Fast path: the first line's feature field fixes the layout (positions of the name
    tokens); later lines are checked against it token by token and their value tokens
    are converted to float a block at a time; any failure re-parses the offending line
    slowly to name the problem.
    """
    path = path_argument(path, "read_nbest: path")
    blocks = [block for _, block in iter_nbest(path)]
    nbest = concat_blocks(blocks)
    if num_segments is not None and nbest.num_segments != num_segments:
        raise InputError(f"{nbest.num_segments} segments in the n-best list but {num_segments} references", path)
    return nbest


def iter_nbest_pair(
    path: str, other: str, block_size: Optional[int] = None
) -> Iterator[Tuple[int, NBestList, NBestList]]:
    """Stream two lists of the same segments in step (e.g. candidates and pseudo-references):
    yields ``(first segment id, block of path, block of other)`` holding the same segments,
    each renumbered from 0; memory is bounded by a block of each.

    Raises:
        InputError: the lists hold different numbers of segments (naming the shorter one),
            or as :func:`iter_nbest`.
    """
    rest = iter_nbest(other, block_size)
    held: List[NBestList] = []  # blocks of ``other`` from segment ``base`` on
    base = end = 0
    last = 0
    for first, block in iter_nbest(path, block_size):
        last = first + block.num_segments
        while end < last:
            got = next(rest, None)
            if got is None:
                raise InputError(f"{end} segments, but {path} has more", other)
            held.append(got[1])
            end = got[0] + got[1].num_segments
        joined = concat_blocks(held)
        yield first, block, joined.subset(np.arange(first - base, last - base))
        held = [joined.subset(np.arange(last - base, end - base))] if end > last else []
        base = last
    if end > last or next(rest, None) is not None:
        raise InputError(f"more segments than the {last} of {path}", other)


def concat_blocks(blocks: Sequence[NBestList]) -> NBestList:
    """One list from consecutive blocks (:func:`iter_nbest`), segments renumbered; the
    hypotheses stay packed where every block's are (:class:`PackedStrings`)."""
    if len(blocks) == 1:
        return blocks[0]
    counts = np.concatenate([np.diff(b.offsets) for b in blocks])
    hypotheses: Sequence[str]
    if all(isinstance(b.hypotheses, PackedStrings) for b in blocks):
        hypotheses = PackedStrings.concat([b.hypotheses for b in blocks if isinstance(b.hypotheses, PackedStrings)])
    else:
        hypotheses = [h for b in blocks for h in b.hypotheses]
    totals = None if any(b.totals is None for b in blocks) else np.concatenate([b.totals for b in blocks])
    sparse = None
    if any(b.sparse is not None for b in blocks):
        sparse = SparseFeatures.concat(
            [b.sparse if b.sparse is not None else SparseFeatures.empty(len(b.hypotheses)) for b in blocks]
        )
    return NBestList(
        np.concatenate([[0], np.cumsum(counts)]),
        hypotheses,
        np.concatenate([b.features for b in blocks]),
        list(blocks[0].feature_names),
        totals,
        blocks[0].info,
        sparse,
    )


def _is_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _describe(groups: Sequence[Tuple[str, int]]) -> str:
    return "[" + " ".join(f"{name}={count}" for name, count in groups) + "]"


def format_value(value: float) -> str:
    """Text of a feature value: shortest round-trip repr, integers without '.0' (and
    ``-0`` for negative zero, so that its sign survives a round trip)."""
    if float(value).is_integer() and abs(value) < 1e15:
        return "-0" if value == 0 and math.copysign(1.0, value) < 0 else str(int(value))
    return repr(float(value))


def check_writable(nbest: NBestList, totals: np.ndarray, path: Optional[str] = None, first_line: int = 1) -> None:
    """Refuse what :func:`read_nbest` would refuse or read back differently; errors name
    the output ``path`` and the line the row would have had (rows numbered from
    ``first_line``).

    Raises:
        InputError: a feature name that is empty, holds whitespace (including control
            characters such as ``\x1d`` that ``str.split`` treats as whitespace) or ``|||``,
            or repeats a name used earlier for other columns; a hypothesis with outer
            whitespace, a line break or ``|||``; a feature value or total that is not finite.
    """
    seen = set()
    for name, _ in nbest.groups():
        if not name or any(ch.isspace() for ch in name) or "|||" in name or "\x00" in name:
            raise InputError(
                f"feature name {name!r} cannot be written in Moses format (empty, whitespace, '|||' or a NUL byte)",
                path,
                first_line if path else None,
            )
        if name in seen:
            raise InputError(f"feature name {name!r} names two separate groups of columns", path)
        seen.add(name)
    sparse = nbest.sparse
    for name in sparse.names if sparse is not None else []:
        if not is_sparse_name(name) or any(ch.isspace() for ch in name) or "|||" in name or "\x00" in name:
            raise InputError(
                f"sparse feature name {name!r} cannot be written in Moses format (it needs an underscore, "
                "and no whitespace, '|||' or NUL byte)",
                path,
            )
        if name in seen:
            raise InputError(f"feature name {name!r} is both a dense column and a sparse feature", path)
    if sparse is not None and not np.isfinite(sparse.values).all():
        row = int(sparse.row_of[np.flatnonzero(~np.isfinite(sparse.values))[0]])
        raise InputError("sparse feature values must be finite numbers", path, first_line + row if path else None)
    for row, hyp in enumerate(nbest.hypotheses):
        if hyp != hyp.strip() or "\n" in hyp or "\r" in hyp or "|||" in hyp or "\x00" in hyp:
            raise InputError(
                f"hypothesis {row} ({hyp!r}) cannot be written in Moses format "
                "(outer whitespace, a line break, '|||' or a NUL byte)",
                path,
                first_line + row if path else None,
            )
    finite = np.isfinite(nbest.features).all(axis=1) & np.isfinite(totals)
    if not finite.all():
        row = int(np.flatnonzero(~finite)[0])
        raise InputError("feature values and totals must be finite numbers", path, first_line + row if path else None)


def format_column(values: np.ndarray) -> List[str]:
    """:func:`format_value` of every element of ``values`` (float[K]), a column at a time."""
    values = np.asarray(values, dtype=np.float64)
    if values.size and np.abs(values).max() >= 1e15:
        return [format_value(v) for v in values.tolist()]
    return [text[:-2] if text.endswith(".0") else text for text in map(repr, values.tolist())]


class NBestWriter:
    """Writes an n-best list block by block (:func:`iter_nbest`) to an open text handle,
    checking each block as :func:`check_writable` does."""

    def __init__(self, handle, path: Optional[str] = None):
        self.handle = handle
        self.path = path  # the output's name in messages
        self.template: Optional[str] = None
        self.names: Optional[List[str]] = None
        self.lines = 0

    def write(self, nbest: NBestList, first_segment: int = 0, totals: Optional[np.ndarray] = None) -> None:
        """Write ``nbest`` with its segments numbered from ``first_segment``; ``totals``
        (float[M]) defaults to ``nbest.totals`` or zeros.

        Raises:
            InputError: see :func:`check_writable`; or columns other than the first block's.
        """
        if totals is None:
            totals = nbest.totals if nbest.totals is not None else np.zeros(len(nbest.hypotheses))
        totals = np.asarray(totals, dtype=np.float64)
        check_writable(nbest, totals, self.path, self.lines + 1)
        if self.names is None:
            self.names = list(nbest.feature_names)
            self.template = " ".join(
                name.replace("{", "{{").replace("}", "}}") + "=" + " {}" * count for name, count in nbest.groups()
            )
        elif nbest.feature_names != self.names:
            raise InputError("a block of the list has other columns than the first", self.path)
        columns = [format_column(nbest.features[:, c]) for c in range(nbest.features.shape[1])]
        segments = map(str, (nbest.segment + first_segment).tolist())
        template = self.template or ""
        rows: Iterable[tuple] = zip(*columns) if columns else iter(tuple, None)
        fields: Iterable[str] = (template.format(*values) for values in rows)
        if nbest.sparse is not None and len(nbest.sparse.values):
            fields = map(" ".join, zip(fields, nbest.sparse.moses_fields(format_column)))
            fields = (text.strip() for text in fields)
        lines = [
            f"{seg} ||| {hyp} ||| {text} ||| {total}\n"
            for seg, hyp, text, total in zip(segments, nbest.hypotheses, fields, format_column(totals))
        ]
        self.handle.write("".join(lines))
        self.lines += len(lines)


def write_nbest(nbest: NBestList, path: str, totals: Optional[np.ndarray] = None) -> None:
    """Write ``nbest`` in Moses format, atomically (gzip for ``.gz`` names).  ``totals``
    (float[M]) defaults to ``nbest.totals`` or zeros.  Raises :class:`InputError` (see
    :func:`check_writable`) before writing anything that would not read back as it is."""
    expect(nbest, NBestList, "write_nbest(nbest, path): nbest", "an NBestList (rerank.read_nbest)")
    path = path_argument(path, "write_nbest(nbest, path): path")
    with atomic_write(path) as out:
        NBestWriter(out, path).write(nbest, 0, totals)


def write_signed_nbest(nbest: NBestList, path: str) -> None:
    """:func:`write_nbest`, and the list's settings (``nbest.info``: its beam feature and feature
    sets) as its signature ``PATH.json`` where it declares them: a copy that reads back as the
    list it is.  Raises as :func:`write_nbest`."""
    write_nbest(nbest, path)
    if nbest.info.declared:
        write_list_info(path + ".json", nbest.info, {})


def write_lines(lines: Iterable[str], path: str) -> None:
    """Write one line per item, atomically."""
    with atomic_write(path) as out:
        for line in lines:
            out.write(line + "\n")
