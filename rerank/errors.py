"""The error raised on bad input (writing outputs safely is :mod:`rerank.outputs`)."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, Iterator, Optional, Tuple, Union


def expect(value: Any, kinds: Union[type, Tuple[type, ...]], what: str, wanted: str) -> None:
    """Check an argument's type at the API's edge: a wrong one raises ``TypeError`` naming
    ``what`` (the argument) and ``wanted`` (what it takes, with an example) instead of an
    ``AttributeError`` from deep inside.  Booleans are not numbers here."""
    numeric = kinds in (int, float) or (isinstance(kinds, tuple) and set(kinds) <= {int, float})
    if not isinstance(value, kinds) or (numeric and isinstance(value, bool)):
        raise TypeError(f"{what}: expected {wanted}, not {type(value).__name__}")


def path_argument(path: Any, what: str = "path") -> str:
    """``path`` (a ``str`` or ``os.PathLike``) as a string.

    Raises:
        TypeError: anything else, naming ``what``.
    """
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(
            f"{what}: expected a file path (str or pathlib.Path, '-' for standard input), not {type(path).__name__}"
        )
    return path


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


def one_line(err: BaseException, limit: int = 300) -> str:
    """A library's error message on one line (transformers' and CTranslate2's span several),
    cut at ``limit`` characters."""
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[:limit] + "…"


@contextlib.contextmanager
def paths_named(names: Dict[Optional[str], str]) -> Iterator[None]:
    """A block whose :class:`InputError` about one of the files ``names`` maps names what the
    caller gave instead (the Python API's temporaries: ``nbest (the candidates given):3``, not
    ``/tmp/…/candidates.nbest:3``)."""
    try:
        yield
    except InputError as err:
        if err.path is not None and err.path in names:
            raise InputError(err.message, names[err.path], err.line) from None
        raise
