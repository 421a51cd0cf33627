"""The Python API's argument checks, shared by :mod:`rerank.api` and :mod:`rerank.api_lists`:
what a caller passes, checked at the edge and named in the error (``nbest: expected an
NBestList``), never deep inside."""

from __future__ import annotations

import os
from typing import Any, List, Optional

from rerank.errors import InputError, expect
from rerank.metrics.references import reference_streams, strings
from rerank.nbest import NBestList
from rerank.textio import read_lines


def _one_or_many(items: Any, what: str) -> List[Any]:
    """A spec or a (name, settings) pair alone as a list of one; a sequence of them as it is.

    Raises:
        TypeError: None or another non-sequence; InputError: an empty sequence, naming ``what``.
    """
    if isinstance(items, str) or (isinstance(items, tuple) and len(items) == 2 and isinstance(items[1], dict)):
        return [items]
    expect(items, (list, tuple), what, "a spec such as 'bleu', or a list of them")
    if not items:
        raise InputError(f"{what}: an empty list (give at least one)")
    return list(items)


def _nbest(nbest: Any, what: str = "nbest") -> NBestList:
    """``nbest`` checked to be an :class:`NBestList` (a path is not read here)."""
    expect(nbest, NBestList, what, "an NBestList (rerank.read_nbest(path) reads a file)")
    return nbest


def _names(names: Optional[Any], what: str) -> Optional[List[str]]:
    """Column or feature-set names: one name alone, or a list of names (None: all)."""
    if names is None or isinstance(names, str):
        return None if names is None else [names]
    expect(names, (list, tuple), what, "a name or a list of names")
    for name in names:
        expect(name, str, what, "names (strings)")
    return list(names)


def _texts(texts, what: str) -> List[str]:
    """``texts`` as a list of strings, each one segment's line.

    Raises:
        TypeError: a string (it would be read character by character) or items that are
            not strings, naming ``what``.
        InputError: an item holding a line break (written to the line-aligned files the verbs
            read, it would shift every later segment), naming ``what`` and the item.
    """
    if isinstance(texts, str):
        raise TypeError(f"{what}: expected a list of strings, not a string")
    if texts is None or not hasattr(texts, "__iter__"):
        raise TypeError(f"{what}: expected a list of strings, not {type(texts).__name__}")
    items = strings(list(texts), what)
    for k, text in enumerate(items):
        if "\n" in text or "\r" in text:
            raise InputError(f"{what}[{k}] holds a line break: one segment is one line ({text[:40]!r})")
    return items


def _sources(sources, what: str = "sources") -> List[str]:
    """The source sentences a caller gave: a list of strings (one per segment, as :func:`_texts`
    takes them) or the path of a file of them, one per line (``str`` or ``os.PathLike``).

    Raises:
        InputError: a path that is not a readable text file (named), or a line break inside an item.
        TypeError: neither a list of strings nor a path."""
    if isinstance(sources, (str, os.PathLike)):
        path = os.fspath(sources)
        if not os.path.isfile(path):
            raise InputError(f"{what}: no such file (give a list of sentences, or the path of a file of them)", path)
        return read_lines(path)
    return _texts(sources, what)


def _references(references) -> List[List[str]]:
    """The R reference streams of what the caller gave: one list of strings (one reference
    per segment) or R such lists (sacrebleu's ``[refs_a, refs_b]``)."""
    return reference_streams(references)


def _one_or_streams(streams: List[List[str]]):
    """One stream as a plain list (the single-reference path), several as they are."""
    return streams[0] if len(streams) == 1 else streams
