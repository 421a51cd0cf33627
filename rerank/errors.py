"""The error raised on bad input (writing outputs safely is :mod:`rerank.outputs`)."""

from __future__ import annotations

from typing import Optional


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
