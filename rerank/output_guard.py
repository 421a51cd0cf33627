"""The output guard: before any work, the command line refuses outputs that would destroy an
input or each other (:func:`check_paths`) — an output that is the same file as an input (or
an input's signature) or as another output, symbolic and hard links included, standard input
or output named twice, an output in a directory that cannot be written — on one line naming
the option and the path.  Where and how outputs are then written: :mod:`rerank.outputs`."""

from __future__ import annotations

import os
import stat
from typing import Dict, List, Optional, Sequence, Tuple, Union

from rerank.errors import InputError
from rerank.outputs import is_special

#: ``{option: path or [paths]}`` of the files a command reads or writes (None skipped)
Paths = Dict[str, Union[None, str, Sequence[Optional[str]]]]


def _flatten(paths: Paths) -> List[Tuple[str, str]]:
    out: List[Tuple[str, str]] = []
    for option, value in paths.items():
        values = [value] if isinstance(value, str) or value is None else list(value)
        out.extend((option, v) for v in values if v)
    return out


def _identity(path: str) -> Tuple:
    """What makes two paths one file: (device, inode) when it exists, else its real path."""
    try:
        st = os.stat(path)
        return ("inode", st.st_dev, st.st_ino)
    except OSError:
        return ("path", os.path.realpath(path))


def _check_writable(option: str, path: str) -> None:
    real = os.path.realpath(path)
    if os.path.isdir(real):
        raise InputError(f"{option}: is a directory, not a file", path)
    if is_special(real):
        if not os.access(real, os.W_OK):
            raise InputError(f"{option}: not writable (permission denied)", path)
        return
    ancestor = os.path.dirname(real)
    while not os.path.exists(ancestor) and os.path.dirname(ancestor) != ancestor:
        ancestor = os.path.dirname(ancestor)
    if not os.path.isdir(ancestor):
        raise InputError(f"{option}: {ancestor} is not a directory", path)
    if not os.access(ancestor, os.W_OK | os.X_OK):
        try:  # EROFS and EACCES read alike through access(); say which
            readonly = bool(os.statvfs(ancestor).f_flag & os.ST_RDONLY)
        except OSError:
            readonly = False
        reason = "read-only file system" if readonly else "permission denied"
        raise InputError(f"{option}: cannot write in {ancestor} ({reason})", path)
    if os.path.isfile(real) and (
        not os.access(real, os.W_OK) or not os.stat(real).st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    ):  # the user protected it (no write bit: even for root): never replaced
        raise InputError(f"{option}: the file is read-only: refusing to replace it", path)


def check_paths(inputs: Paths, outputs: Paths) -> None:
    """Refuse, before any work, outputs that would destroy an input or each other.

    Args:
        inputs: ``{option: path or [paths]}`` of the files a command reads (None skipped).
        outputs: ``{option: path or [paths]}`` of the files it writes.
    Every input's side file (its signature ``INPUT.json``, where it exists) counts as an
    input too: no output may replace the signature a verb reads.

    Raises:
        InputError: ``-`` (standard input) given for two inputs or standard output for two
            outputs; an output path that ends in ``/`` (a directory meant, or a typo); an
            output that resolves to the same file as an input (or an input's side file) or another output
            (``realpath``, and the same device and inode for hard links; devices and FIFOs,
            which are written and never replaced, are exempt); an output that is a directory
            or lies in a directory that does not exist as one or cannot be written.
    """
    ins, outs = _flatten(inputs), _flatten(outputs)
    for paths, what in ((ins, "standard input"), (outs, "standard output")):
        dashes = [option for option, path in paths if path == "-"]
        if len(dashes) > 1:
            raise InputError(f"'-' ({what}) given for both {dashes[0]} and {dashes[1]}")
    seen: Dict[Tuple, Tuple[str, str, str]] = {}
    for option, path in ins:
        if path != "-":
            seen.setdefault(_identity(path), ("input", option, path))
    for option, path in ins:  # the signatures beside the inputs are read too
        side = path + ".json"
        if path != "-" and not path.endswith(".json") and os.path.isfile(side):
            seen.setdefault(_identity(side), ("input", f"{option} (its signature)", side))
    for option, path in outs:
        if path == "-":
            continue
        if path.endswith(os.sep) or (os.altsep and path.endswith(os.altsep)):
            raise InputError(f"{option} ends in '/': give a file name, not a directory", path)
        _check_writable(option, path)
        if is_special(os.path.realpath(path)):
            continue
        key = _identity(path)
        if key in seen:
            kind, other, other_path = seen[key]
            same = "" if os.path.abspath(other_path) == os.path.abspath(path) else f" ({other_path})"
            raise InputError(f"{option} is the same file as {kind} {other}{same}: refusing to overwrite it", path)
        seen[key] = ("output", option, path)
