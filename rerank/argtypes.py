"""Argument types that range-check while parsing: the ``type=`` of the command line's
options (``rerank/cli/``) and of the tuners' ``Config`` fields (``rerank/tuning/base.py:option``)."""

from __future__ import annotations

import argparse
import math

#: the largest integer an option takes (int64: what numpy and the C kernels hold)
MAX_INT = 2**63 - 1


def _number(kind, ok, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if kind is int and abs(value) > MAX_INT:
            raise argparse.ArgumentTypeError(f"{text!r} is too large (at most {MAX_INT})")
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


positive_int = _number(int, lambda v: v >= 1, "a positive integer")
non_negative_int = _number(int, lambda v: v >= 0, "a non-negative integer")
positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a positive finite number")
non_negative_float = _number(float, lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number")
unit_interval = _number(float, lambda v: 0 < v <= 1, "in (0, 1]")
open_unit_interval = _number(float, lambda v: 0 < v < 1, "in (0, 1)")
closed_unit_interval = _number(float, lambda v: 0 <= v <= 1, "in [0, 1]")
