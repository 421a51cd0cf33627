"""Feature weights: the ``weights`` object of a weights JSON file (what ``rerank tune`` writes and
``rerank apply`` reads), checked, and aligned with an n-best list's columns."""

from __future__ import annotations

import json
import math
from typing import Any, Dict, List, Mapping

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.textio import read_json


def read_weights(path: str) -> Dict[str, Any]:
    """The ``weights`` object of a weights JSON file: names -> finite numbers or lists of
    them.  Raises :class:`InputError` naming the file (and line for JSON syntax)."""
    data = read_json(path)
    weights = data.get("weights") if isinstance(data, dict) else None
    if not isinstance(weights, dict):
        raise InputError('no "weights" object', path)
    return check_weights(weights, path)


def check_weights(weights: Dict[str, Any], source: str) -> Dict[str, Any]:
    """``weights`` unchanged when every value is a finite number or a non-empty list of
    them (the one check of weights files and of the Python API's weight maps).

    Raises:
        InputError: naming ``source`` and the weight: NaN, infinite, not a number.
    """

    def number(value) -> bool:
        return (
            isinstance(value, (int, float, np.floating, np.integer))
            and not isinstance(value, bool)
            and math.isfinite(value)
        )

    for name, value in weights.items():
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values or not all(number(v) for v in values):
            shown = json.dumps(value) if isinstance(value, (list, int, float, str)) or value is None else repr(value)
            raise InputError(f"weight of {name!r} must be a finite number or a list of them, not {shown}", source)
    return weights


def weights_vector(weights: Mapping[str, Any], nbest: NBestList, source: str = "weights") -> np.ndarray:
    """Align a ``{name: value or [values]}`` weight map with ``nbest``'s columns.

    Raises:
        InputError: a name in the n-best list has no weight, a weight has no column, or
            a name's number of values differs.
    """
    missing = [name for name, _ in nbest.groups() if name not in weights]
    unknown = [name for name in weights if name not in nbest.feature_names]
    if missing or unknown:
        parts = []
        if missing:
            parts.append("no weight for n-best feature(s) " + ", ".join(missing))
        if unknown:
            parts.append("weight(s) for feature(s) not in the n-best list: " + ", ".join(unknown))
        raise InputError("; ".join(parts), source)
    vector: List[float] = []
    for name, count in nbest.groups():
        value = weights[name]
        values: List[Any] = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(values) != count:
            raise InputError(
                f"feature {name!r} has {count} value(s) in the n-best list but {len(values)} weight(s)", source
            )
        vector.extend(float(v) for v in values)
    return np.asarray(vector, dtype=np.float64)


def weights_dict(vector: np.ndarray, nbest: NBestList) -> Dict[str, Any]:
    """Inverse of :func:`weights_vector`: a scalar for one-valued names, else a list."""
    out: Dict[str, Any] = {}
    col = 0
    for name, count in nbest.groups():
        vals = [float(v) for v in vector[col : col + count]]
        out[name] = vals[0] if count == 1 else vals
        col += count
    return out
