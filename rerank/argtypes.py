"""Argument types that range-check while parsing: the ``type=`` of the command line's
options (``rerank/cli/``) and of the tuners' ``Config`` fields (``rerank/tuning/base.py:option``)."""

from __future__ import annotations

import argparse
import math

#: the largest integer an option takes (int64: what numpy and the C kernels hold)
MAX_INT = 2**63 - 1


def ranged(kind, ok, what):
    """An argument type: ``kind`` (int or float) parsed from text, refused with
    :class:`argparse.ArgumentTypeError` unless ``ok(value)`` (``what`` names the range)."""

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


positive_int = ranged(int, lambda v: v >= 1, "a positive integer")
non_negative_int = ranged(int, lambda v: v >= 0, "a non-negative integer")
positive_float = ranged(float, lambda v: math.isfinite(v) and v > 0, "a positive finite number")
non_negative_float = ranged(float, lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number")
unit_interval = ranged(float, lambda v: 0 < v <= 1, "in (0, 1]")
open_unit_interval = ranged(float, lambda v: 0 < v < 1, "in (0, 1)")
closed_unit_interval = ranged(float, lambda v: 0 <= v <= 1, "in [0, 1]")
#: the smallest softmax temperature: below it, log-probabilities divided by it overflow to
#: infinity (1e-300 did): the softmax is a one-hot argmax long before (use beam search or greedy)
MIN_TEMPERATURE = 1e-4
#: a softmax temperature (sampling, MBR's weights): a finite number of at least MIN_TEMPERATURE
temperature = ranged(
    float, lambda v: math.isfinite(v) and v >= MIN_TEMPERATURE, f"a temperature (a finite number ≥ {MIN_TEMPERATURE})"
)
#: the largest seed: what numpy's, torch's and CTranslate2's generators all take (32 bits)
MAX_SEED = 2**32 - 1
#: a seed: an integer in [0, 2^32 − 1] (every seed of the command line, the specs and the API)
seed = ranged(int, lambda v: 0 <= v <= MAX_SEED, f"a seed (an integer from 0 to {MAX_SEED})")
