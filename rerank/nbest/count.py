"""The segment count of a Moses n-best list from its last line, before the list is read
(:func:`count_segments`): checks before work, such as a reference file of another length."""

from __future__ import annotations

import gzip
import os
import zlib
from typing import Optional


def count_segments(path: str) -> Optional[int]:
    """N, the segments of the n-best list ``path``, from its last line's id (ids run
    0..N-1 in order; the full check happens when the list is read): a seek to the end for
    a plain file, one pass over the lines of a ``.gz``; None for ``-`` (standard input is
    read once) or when the last line holds no id (the read that follows names the problem).
    For checks before work (:func:`rerank.features.add.add_features`)."""
    if path == "-" or not os.path.isfile(path):
        return None
    last = b""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as handle:
                for line in handle:
                    if line.strip():
                        last = line
        else:
            with open(path, "rb") as handle:
                handle.seek(0, os.SEEK_END)
                end = handle.tell()
                step = 4096
                while end > 0:
                    start = max(0, end - step)
                    handle.seek(start)
                    chunk = handle.read(end - start) + last
                    lines = [x for x in chunk.split(b"\n") if x.strip()]
                    if len(lines) > 1 or start == 0:
                        last = lines[-1] if lines else b""
                        break
                    last, end, step = chunk, start, step * 2
    except (OSError, EOFError, zlib.error):
        return None
    head = last.split(b"|||", 1)[0].strip()
    return int(head) + 1 if head.isdigit() else None
