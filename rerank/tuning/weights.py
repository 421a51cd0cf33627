"""Feature weights: the ``weights`` object of a weights JSON file (what ``rerank tune`` writes and
``rerank apply`` reads), checked, and aligned with an n-best list's columns."""

from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from rerank.errors import InputError, path_argument
from rerank.nbest import NBestList
from rerank.nbest.sparse import is_sparse_name
from rerank.outputs import atomic_write
from rerank.textio import read_json, read_text

#: the formats :func:`write_weights` writes: rerank's JSON, Moses' ``name= value`` lines
#: (kbmira ``--dense-init``, mert's output), and a moses.ini ``[weight]`` section
WEIGHT_FORMATS = ("json", "moses", "moses-ini")


def read_weights(path: str) -> Dict[str, Any]:
    """The weights of a file: names -> finite numbers or lists of them, from a weights JSON
    (``{"weights": {...}}``, what ``rerank tune`` writes), Moses' ``name= v1 … vk`` lines (k
    values for a name of k columns), or a moses.ini's ``[weight]`` section (other sections
    skipped).  Raises :class:`InputError` naming the file (and line)."""
    text = read_text(path)
    head = text.lstrip().split("\n", 1)[0].strip()
    if text.lstrip().startswith(("{", "[")) and not re.fullmatch(r"\[[A-Za-z][\w-]*\]", head):  # JSON, not [weight]
        data = read_json(path)
        weights = data.get("weights") if isinstance(data, dict) else None
        if not isinstance(weights, dict):
            raise InputError('no "weights" object', path)
        return check_weights(weights, path)
    return check_weights(_moses_weights(text, path), path)


def _moses_weights(text: str, path: str) -> Dict[str, Any]:
    """Moses' ``name= v1 …`` lines, or the ``[weight]`` section of a moses.ini."""
    lines = [(k, line.split()) for k, line in enumerate(text.splitlines(), start=1) if line.strip()]
    lines = [(k, words) for k, words in lines if not words[0].startswith("#")]
    if any(words[0].startswith("[") for _, words in lines):  # a moses.ini: its [weight] section only
        section, kept = None, []
        for lineno, words in lines:
            if words[0].startswith("["):
                section = words[0]
            elif section == "[weight]":
                kept.append((lineno, words))
        if section is None or not kept:
            raise InputError("a moses.ini without a [weight] section (or an empty one)", path)
        lines = kept
    if not lines:
        raise InputError("no weights in the file", path)
    weights: Dict[str, Any] = {}
    for lineno, words in lines:
        if not words[0].endswith("=") or len(words[0]) < 2:
            raise InputError(f"expected 'name= value …' (Moses weights), found {words[0]!r}", path, lineno)
        name = words[0][:-1]
        if name in weights:
            raise InputError(f"the feature {name!r} has a second line", path, lineno)
        try:
            values = [float(v) for v in words[1:]]
        except ValueError:
            raise InputError("a weight is not a number", path, lineno) from None
        if not values or not all(math.isfinite(v) for v in values):
            raise InputError("a weight is missing or not finite", path, lineno)
        weights[name] = values[0] if len(values) == 1 else values
    return weights


def moses_weights_text(weights: Mapping[str, Any], fmt: str = "moses") -> str:
    """``weights`` as Moses writes them: one ``name= v1 … vk`` line per name (``moses``), under
    a ``[weight]`` header for a moses.ini (``moses-ini``); values as Python's shortest repr
    (read back exactly)."""
    lines = [
        f"{name}= " + " ".join(repr(float(v)) for v in (w if isinstance(w, (list, tuple)) else [w]))
        for name, w in weights.items()
    ]
    return ("[weight]\n" if fmt == "moses-ini" else "") + "".join(line + "\n" for line in lines)


def weights_given(weights: Any) -> Dict[str, Any]:
    """{name: weight} of what a caller gives as weights: a tuning result (``rerank.tune()``'s,
    its ``weights``), a path (:func:`read_weights`: JSON or Moses' formats), a weights file's
    content as ``json.load`` gives it (``{"weights": {...}, ...}``) or {name: weight} itself.

    Raises:
        TypeError: another type.
        InputError: what :func:`read_weights` and :func:`check_weights` refuse."""
    if hasattr(weights, "vector") and isinstance(getattr(weights, "weights", None), dict):  # a TuneResult
        return check_weights(dict(weights.weights), "weights")
    if isinstance(weights, str):
        return read_weights(weights)
    if not isinstance(weights, Mapping):  # a wrong argument in Python: TypeError, as every API edge
        raise TypeError(
            "weights: expected rerank.tune()'s result, {column: weight}, a weights file's dict or its path, "
            f"not {type(weights).__name__}"
        )
    mapping = dict(weights)
    if isinstance(mapping.get("weights"), Mapping):  # a weights file as json.load gives it
        mapping = dict(mapping["weights"])
    return check_weights(mapping, "weights")


def write_weights(weights: Any, path: str, format: str = "json", record: Optional[Mapping[str, Any]] = None) -> None:
    """Write tuned weights to ``path`` atomically in ``format`` (:data:`WEIGHT_FORMATS`):
    ``json`` (rerank's weights file: ``{"weights": …}`` plus ``record``, by default a tuning
    result's scores), ``moses`` (``name= value`` lines, kbmira's ``--dense-init``) or
    ``moses-ini`` (a moses.ini ``[weight]`` section); :func:`read_weights` reads all three.
    ``weights``: as :func:`weights_given` takes them.

    Raises:
        InputError: a weight that is not a finite number, an unknown format."""
    if format not in WEIGHT_FORMATS:
        raise InputError(f"weights format must be one of {', '.join(WEIGHT_FORMATS)}, not {format!r}")
    if record is None and hasattr(weights, "vector"):  # a tuning result: its scores beside the weights
        summary = {"metric": weights.metric, "score": weights.score, "initial_score": weights.initial_score}
        record = {"tuning": {**summary, "improved": weights.improved}}
    mapping = weights_given(weights)
    with atomic_write(path_argument(path)) as handle:
        if format == "json":
            json.dump({**(record or {}), "weights": mapping}, handle, indent=2, allow_nan=False)
            handle.write("\n")
        else:
            handle.write(moses_weights_text(mapping, format))


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


#: what a column without a weight does (``rerank apply --missing``): refused, or weighs 0
MISSING = ("error", "zero")


def missing_columns(weights: Mapping[str, Any], nbest: NBestList) -> List[str]:
    """The column names of ``nbest`` that ``weights`` gives no weight, in the list's order."""
    return [name for name, _ in nbest.groups() if name not in weights]


def weights_vector(
    weights: Mapping[str, Any], nbest: NBestList, source: str = "weights", missing: str = "error"
) -> np.ndarray:
    """Align a ``{name: value or [values]}`` weight map with ``nbest``'s columns: float64[F + K],
    the dense columns then the list's K sparse features (:attr:`NBestList.all_names`).  With
    ``missing="zero"`` a dense column without a weight weighs 0 (QE re-ranking by one column,
    ``rerank apply --missing zero``).  Sparse features are Moses': one without a weight weighs
    0, and a weight for a sparse name (an underscore, one value) that this list never fires is
    no error.

    Raises:
        InputError: a name in the n-best list has no weight (``missing="error"``: the message
            says how to give it 0), a weight has no column, or a name's number of values differs.
    """
    absent = missing_columns(weights, nbest)
    if missing == "zero":
        weights = {**{name: [0.0] * count for name, count in nbest.groups() if name in absent}, **weights}
        weights = {k: (v[0] if isinstance(v, list) and len(v) == 1 else v) for k, v in weights.items()}
        absent = []
    sparse_names = nbest.sparse.names if nbest.sparse is not None else []
    known = set(nbest.feature_names) | set(sparse_names)
    unknown = [name for name in weights if name not in known and not _sparse_weight(name, weights[name])]
    if absent or unknown:
        parts = []
        if absent:
            parts.append(
                "no weight for n-best feature(s) " + ", ".join(absent) + " (--missing zero gives them 0; "
                "--column NAME re-ranks by one column)"
            )
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
    for name in sparse_names:
        value = weights.get(name, 0.0)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if len(values) != 1:
            raise InputError(f"sparse feature {name!r} has one value but {len(values)} weight(s)", source)
        vector.append(float(values[0]))
    return np.asarray(vector, dtype=np.float64)


def _sparse_weight(name: str, value: Any) -> bool:
    """Whether ``name``: ``value`` can be a sparse feature's weight (Moses' rule: an underscore
    in the name, one value)."""
    return is_sparse_name(name) and (not isinstance(value, (list, tuple)) or len(value) == 1)


def weights_dict(vector: np.ndarray, nbest: NBestList) -> Dict[str, Any]:
    """Inverse of :func:`weights_vector`: a scalar for one-valued names, else a list; the sparse
    features' weights (``vector[F:]``) follow, those that are not 0 (an absent one weighs 0)."""
    out: Dict[str, Any] = {}
    col = 0
    for name, count in nbest.groups():
        vals = [float(v) for v in vector[col : col + count]]
        out[name] = vals[0] if count == 1 else vals
        col += count
    if nbest.sparse is not None:
        for name, value in zip(nbest.sparse.names, np.asarray(vector[col:], dtype=np.float64).tolist()):
            if value != 0.0:
                out[name] = value
    return out
