"""References as sacrebleu takes them, for every metric: one stream of N strings (one reference
per segment) or R such streams (several references per segment, ``[refs_a, refs_b]``)."""

from __future__ import annotations

from typing import Sequence, Union

from rerank.errors import InputError

#: what every metric takes as references: one stream of N strings, or R such streams
References = Union[Sequence[str], Sequence[Sequence[str]]]


def reference_streams(references) -> list:
    """References as sacrebleu takes them: one stream of N strings (one reference per
    segment), or R such streams (several references per segment, ``[refs_a, refs_b]``).
    Returns a list of R ≥ 1 lists of N strings.

    Raises:
        InputError: streams of different lengths, or no stream.
        TypeError: not a list of strings or of lists of strings (a path, None, a None item).
    """
    if isinstance(references, str):
        raise InputError("references: expected a list of reference strings (or a list of such lists), not a string")
    if references is None or not hasattr(references, "__iter__"):
        raise TypeError(
            f"references: expected a list of strings (or a list of such lists), not {type(references).__name__}"
        )
    items = list(references)
    if not items or isinstance(items[0], str):
        strings(items)
        return [items]
    if any(isinstance(stream, str) for stream in items):
        raise InputError("references: mix of strings and lists; give one list, or one list per reference")
    if any(stream is None or not hasattr(stream, "__iter__") for stream in items):
        bad = next(s for s in items if s is None or not hasattr(s, "__iter__"))
        raise TypeError(f"references: expected a list of strings (or a list of such lists), found {type(bad).__name__}")
    streams = [strings(list(stream)) for stream in items]
    counts = {len(stream) for stream in streams}
    if len(counts) != 1:
        raise InputError(f"the reference streams differ in length: {', '.join(str(len(x)) for x in streams)} lines")
    return streams


def strings(items: list, what: str = "references") -> list:
    """``items``, checked to hold strings only.

    Raises:
        TypeError: naming ``what``, the first item that is not a string and its position.
    """
    for k, item in enumerate(items):
        if not isinstance(item, str):
            raise TypeError(f"{what}: item {k} is {type(item).__name__}, not a string")
    return items


def segment_count(references) -> int:
    """N, the segments of ``references`` (one stream or R streams)."""
    return len(reference_streams(references)[0])


def references_slice(references, first: int, last: int):
    """Segments ``first:last`` of ``references``, in the same shape (one stream or R)."""
    streams = reference_streams(references)
    return streams[0][first:last] if len(streams) == 1 else [stream[first:last] for stream in streams]


def reference_keys(references) -> list:
    """One hashable key per segment: its reference, or the tuple of its R references."""
    streams = reference_streams(references)
    return streams[0] if len(streams) == 1 else list(zip(*streams))
