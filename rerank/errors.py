"""Errors raised on bad input and the helpers that write files atomically."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from typing import Iterator, Optional


class InputError(ValueError):
    """Bad user input. ``str(err)`` is one line naming the file and line where known.

    Args:
        message: what is wrong.
        path: the file, if the error comes from a file.
        line: 1-based line number within ``path``.
    """

    def __init__(self, message: str, path: Optional[str] = None, line: Optional[int] = None):
        self.path, self.line, self.message = path, line, message
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator:
    """Open a temporary file beside ``path``; rename it onto ``path`` only on success.

    No partial output is ever left at ``path``: if the body raises, the temporary file
    is removed and ``path`` is untouched. ``path == "-"`` writes to standard output.
    """
    if path == "-":
        import sys

        yield sys.stdout
        sys.stdout.flush()
        return
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; outputs get the usual permissions
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


class StagedOutputs:
    """Several output files that appear together or not at all.

    ``stage(path)`` returns a temporary path beside ``path`` to write instead; leaving
    the ``with`` block normally renames every staged file onto its final path, an
    exception removes them all (no final path is touched).  Directories of the final
    paths are created on success only.
    """

    def __init__(self):
        self._staged: list = []

    def stage(self, path: str) -> str:
        """Temporary path to write in place of ``path`` (in its directory, or the nearest
        existing ancestor, so that the final rename stays on one file system)."""
        directory = os.path.dirname(os.path.abspath(path))
        while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
            directory = os.path.dirname(directory)
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".staged", dir=directory)
        os.close(fd)
        self._staged.append((tmp, path))
        return tmp

    def __enter__(self) -> "StagedOutputs":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                for _, path in self._staged:  # check every target before the first rename
                    if os.path.isdir(path):
                        raise IsADirectoryError(errno.EISDIR, "is a directory", path)
                    ancestor = os.path.dirname(os.path.abspath(path))
                    while not os.path.exists(ancestor):
                        ancestor = os.path.dirname(ancestor)
                    if not os.path.isdir(ancestor):
                        raise NotADirectoryError(errno.ENOTDIR, "not a directory", ancestor)
                umask = os.umask(0)
                os.umask(umask)
                for tmp, path in self._staged:
                    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                    os.chmod(tmp, 0o666 & ~umask)
                    os.replace(tmp, path)
        finally:
            for tmp, _ in self._staged:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        return False
