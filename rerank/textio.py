"""Reading text files: the one helper every layer uses (plain or gzip, UTF-8, ``-`` for
standard input), turning every way a file can be unreadable into an :class:`InputError`
that names the file — and the line, for bytes that are not UTF-8.

A UTF-8 byte-order mark at the start of a file is an encoding marker, not text: it is
removed from every input (n-best lists, references, sources, JSON), so a reference file
saved with a BOM scores as the same file without it.  JSON inputs (:func:`read_json`)
refuse duplicate keys and the non-standard constants NaN and Infinity.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import math
import os
import sys
import zlib
from typing import Any, Iterator, List, Optional, TextIO, Union

from rerank.errors import InputError, path_argument


def finite_number(text: str, what: str, path: str, lineno: int) -> float:
    """``float(text)``, or :class:`InputError` naming ``what``, the file and the line for
    a non-numeric or non-finite value (n-best features, segment scores, imported lists)."""
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{what}: non-numeric value {text!r}", path, lineno) from None
    if not math.isfinite(value):
        raise InputError(f"{what}: value {text!r} is not finite", path, lineno)
    return value


def _describe_os_error(err: OSError) -> str:
    if isinstance(err, FileNotFoundError):
        return "no such file"
    if isinstance(err, IsADirectoryError):
        return "is a directory, not a file"
    if isinstance(err, PermissionError):
        return "permission denied"
    if isinstance(err, gzip.BadGzipFile):
        return f"not a valid gzip file ({err})"
    return f"cannot read: {err.strerror or err}"


def _first_undecodable_line(path: str):
    """(1-based line, byte offset within it, the byte) of the first line that is not
    UTF-8, or None where the input cannot be read again (standard input, a FIFO, a
    device: reopening one would wait for a writer forever)."""
    if path == "-" or not os.path.isfile(path):
        return None
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        for lineno, raw in enumerate(handle, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as err:
                return lineno, err.start, raw[err.start]
    return None


@contextlib.contextmanager
def open_text(path: str) -> Iterator[TextIO]:
    """Open ``path`` for reading UTF-8 text (``.gz`` decompressed, ``-`` = stdin).

    Raises:
        InputError: naming ``path`` for a missing file, a directory, a permission
            problem, a corrupt or truncated gzip file, and naming the line for bytes
            that are not UTF-8.
    """
    path = path_argument(path)
    try:
        if path == "-":
            handle = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8-sig")
        elif path.endswith(".gz"):
            handle = gzip.open(path, "rt", encoding="utf-8-sig")
        else:
            handle = open(path, encoding="utf-8-sig")
    except OSError as err:
        raise InputError(_describe_os_error(err), path) from None
    try:
        with handle:
            yield handle
    except UnicodeDecodeError:
        where = _first_undecodable_line(path)
        if where is None:
            raise InputError("not UTF-8 text", path) from None
        lineno, column, byte = where
        raise InputError(f"not UTF-8 text (byte 0x{byte:02x} at byte {column + 1} of the line)", path, lineno) from None
    except EOFError:
        raise InputError("compressed file ended early (truncated gzip)", path) from None
    except zlib.error as err:
        raise InputError(f"corrupt compressed data ({err})", path) from None
    except OSError as err:
        raise InputError(_describe_os_error(err), path) from None


def read_lines(path: str) -> List[str]:
    """The lines of a text file, without their line ends (see :func:`open_text`).

    Raises:
        InputError: as :func:`open_text`, and naming the line of a NUL byte.
    """
    with open_text(path) as handle:
        lines = [line.rstrip("\n") for line in handle]
    if any("\x00" in line for line in lines):
        lineno = next(k for k, line in enumerate(lines, start=1) if "\x00" in line)
        raise InputError("NUL byte in the line (a binary file?)", path, lineno)
    return lines


def count_lines(path: str) -> int:
    """The lines of a plain or .gz text file as rerank's readers split them (a last line
    without its newline counted): the line-alignment rule of a corpus of one's own
    (``rerank nmt prepare``, the main job's TRAIN/VALID/TEST).

    A carriage return that does not end a line (``\\r`` before anything but ``\\n``) is
    refused: the readers split lines there too (universal newlines), so one on each side of a
    pair, at different lines, would keep the counts equal and pair the lines between with the
    wrong partners.

    Raises:
        InputError: as :func:`open_text` (naming the line of bytes that are not UTF-8), and
            naming the line of a carriage return inside it.
    """
    count, last = 0, "\n"
    with open_text(path) as handle:  # in chunks: a 1 GB line is never held whole
        for chunk in iter(lambda: handle.read(1 << 20), ""):
            count, last = count + chunk.count("\n"), chunk[-1]
    count += last != "\n"
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as raw_handle:
        lineno = _inner_carriage_return(raw_handle)
    if lineno is not None:
        raise InputError(
            "a carriage return inside the line, which is read as a line break: remove it (e.g. tr '\\r' ' ')",
            path,
            lineno,
        )
    return count


def _inner_carriage_return(raw_handle) -> Optional[int]:
    """The 1-based line of the first carriage return that neither ends a line (before
    ``\\n``) nor the file, read in chunks; None where there is none."""
    lineno, pending = 1, False
    for chunk in iter(lambda: raw_handle.read(1 << 20), b""):
        if pending and chunk[:1] != b"\n":
            return lineno
        pending = False
        at = chunk.find(b"\r")
        while at != -1:
            if at == len(chunk) - 1:
                pending = True
            elif chunk[at + 1] != 0x0A:
                return lineno + chunk.count(b"\n", 0, at)
            at = chunk.find(b"\r", at + 1)
        lineno += chunk.count(b"\n")
    return None


def read_text(path: str) -> str:
    """The whole text of a file (see :func:`open_text`)."""
    with open_text(path) as handle:
        return handle.read()


def read_json(path: str):
    """The JSON value of a file (see :func:`open_text`).

    Raises:
        InputError: naming the file and line for invalid JSON, a key that occurs twice in one
            object, nesting deeper than Python's parser goes (``RecursionError``) or an integer
            longer than Python converts (``ValueError``, over 4,300 digits).  NaN and Infinity
            (not JSON) are returned as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"``
            for the caller to refuse by name.
    """
    import json

    def unique(pairs):
        seen = {}
        for key, value in pairs:
            if key in seen:
                raise InputError(f"key {key!r} occurs twice in one object", path)
            seen[key] = value
        return seen

    try:
        return json.loads(read_text(path), object_pairs_hook=unique, parse_constant=lambda name: name)
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err.msg}", path, err.lineno) from None
    except InputError:
        raise
    except RecursionError:
        raise InputError("JSON nested too deeply to read (no rerank file nests more than a few levels)", path) from None
    except ValueError as err:  # int('9' * 5000): Python's limit on integer digits
        raise InputError(f"not a JSON rerank reads: {' '.join(str(err).split())[:120]}", path) from None


def read_references(paths) -> Union[List[str], List[List[str]]]:
    """References from one file (a list of N lines) or several (R ≥ 2 files of N lines:
    several references per segment, as sacrebleu takes them: a list of R lists).

    Raises:
        InputError: as :func:`read_lines`, or a file whose line count differs from the
            first one's (naming both).
    """
    paths = [paths] if isinstance(paths, str) else list(paths)
    if len(paths) == 1:
        return read_lines(paths[0])
    streams = [read_lines(path) for path in paths]
    for path, stream in zip(paths[1:], streams[1:]):
        if len(stream) != len(streams[0]):
            raise InputError(f"{len(stream)} lines but the first reference {paths[0]} has {len(streams[0])}", path)
    return streams


def file_digest(path: str) -> str:
    """The SHA-256 (hex) of the bytes of ``path``, read in 4 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):
            digest.update(chunk)
    return digest.hexdigest()
