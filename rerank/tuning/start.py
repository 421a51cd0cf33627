"""Where tuning starts (``rerank tune --init``): a start file read (weights JSON, Moses'
``name= v…`` lines, mert's ``init.opt``), matched to a list's columns, or the weights that
reproduce the beam's 1-best (1 on the list's declared beam feature; where a list declares
none, what its rank order says: :func:`start_weights`)."""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList, finite_scores, rank_order
from rerank.textio import read_lines
from rerank.tuning.weights import read_weights, weights_vector


def read_start(path: str) -> Dict[str, Any] | List[float]:
    """Start weights from a file: a weights JSON (``{"weights": {name: value or
    [values]}}``, as ``rerank tune`` writes; names may be missing), Moses' ``name= v1 …
    vk`` lines (kbmira ``--dense-init``; k values for a name with k columns), or Moses
    mert's legacy ``init.opt`` (first line: one value per column in list order; its min /
    max lines are ignored).  Returns a name map, or a list of values for ``init.opt``.

    Raises:
        InputError: naming the file (and line): JSON without a weights object, a line
            that is neither form, a value that is not a finite number, a name twice.
    """
    text = "\n".join(read_lines(path))
    lines = [(k, line.split()) for k, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError("no start weights in the file", path)
    first = lines[0][1][0]
    if text.lstrip().startswith("{") or first.endswith("=") or first.startswith(("[", "#")):
        return read_weights(path)  # JSON, Moses' name= lines or a moses.ini: one reader
    try:  # mert's init.opt: the first line holds the weights
        values = [float(v) for v in lines[0][1]]
    except ValueError:
        raise InputError(f"expected 'name= value …' (Moses weights), found {first!r}", path, lines[0][0]) from None
    if not all(math.isfinite(v) for v in values):
        raise InputError("a weight is missing or not finite", path, lines[0][0])
    return values


def start_vector(start: Dict[str, Any] | List[float], nbest: NBestList, source: str) -> Tuple[np.ndarray, List[str]]:
    """(float64[F] start weights over ``nbest``'s columns, the names that had no weight and
    start at 0) from :func:`read_start`'s result.

    Raises:
        InputError: a weight for a name the list does not have, a name whose number of
            values differs from its columns, an ``init.opt`` line of another length.
    """
    if isinstance(start, list):
        if len(start) != len(nbest.feature_names):
            raise InputError(
                f"{len(start)} start weights but the n-best list has {len(nbest.feature_names)} columns "
                f"({' '.join(nbest.feature_names)})",
                source,
            )
        return pad_sparse(np.asarray(start, dtype=np.float64), nbest), []
    missing = [name for name, _ in nbest.groups() if name not in start]
    full = {**start, **{name: [0.0] * count for name, count in nbest.groups() if name in missing}}
    return weights_vector(full, nbest, source), missing


def totals_weights(nbest: NBestList) -> Optional[np.ndarray]:
    """The weights float64[F] whose weighted sum of the columns is the list's totals (the last
    field, Moses' model score) on every hypothesis, where the totals order every segment as
    written (never rising, falling in some) and are such a sum (least squares, residual within
    1e-6 of their scale); else None.  A decoder that ranked by a weighted total wrote it there."""
    totals = nbest.totals
    if totals is None or not len(totals) or not nbest.feature_names:
        return None
    sizes = np.diff(nbest.offsets)
    within = np.repeat(np.arange(len(sizes)), sizes)
    same = within[1:] == within[:-1]
    step = np.diff(totals)
    tol = 1e-9 * max(1.0, float(np.abs(totals).max()))
    if (step[same] > tol).any() or not (step[same] < -tol).any():
        return None
    weights, *_ = np.linalg.lstsq(nbest.features, totals, rcond=None)
    if np.abs(nbest.features @ weights - totals).max() > 1e-6 * max(1.0, float(np.abs(totals).max())):
        return None
    return np.asarray(weights, dtype=np.float64)


def start_weights(
    nbest: NBestList,
    init: str,
    nbest_path: str,
    beam_feature: Optional[str] = None,
    say: Optional[Callable[[str], None]] = None,
) -> Tuple[Optional[np.ndarray], str]:
    """(start weights float[F + K] (dense columns, then sparse features at 0 unless a start
    file names them) or None for zeros, where they came from: ``beam``,
    ``zeros`` or the absolute path of the weights file).

    ``init``: ``beam`` (1 on the beam feature: the one the list's signature declares, or
    ``beam_feature`` for a list without one, or for a list without either the one column whose
    values never rise down any segment — decoders write their lists in rank order
    (:func:`rank_order`), said through ``say`` in one line; a ``beam_feature`` the order
    contradicts is said with the numbers), ``zeros``, or a start file
    (:func:`read_start`; columns it does not name start at 0, said through ``say`` in one
    line).

    Raises:
        InputError: ``beam`` for a list without a signature, no ``beam_feature`` and no column
            in whose order the list is written (the error names the ways on), a beam feature that is not a column or that
            contradicts the signature's; an unreadable start file or weights that
            overflow on the list.
    """
    info = nbest.info
    columns = " ".join(dict.fromkeys(nbest.feature_names))
    if beam_feature is not None:
        if beam_feature not in nbest.feature_names:
            raise InputError(f"--beam-feature {beam_feature}: not a column of the list (it has {columns})", nbest_path)
        if info.declared and info.beam_feature not in (None, beam_feature):
            raise InputError(
                f"--beam-feature {beam_feature} contradicts the beam feature {info.beam_feature!r} that the "
                "list's signature declares",
                nbest_path,
            )
    if init == "zeros":
        return None, "zeros"
    if init != "beam":
        vector, missing = start_vector(read_start(init), nbest, init)
        if missing and say is not None:
            say(f"--init {init}: no weight for {', '.join(missing)}: they start at 0")
        with np.errstate(over="ignore", invalid="ignore"):
            finite_scores(nbest.scores(vector), nbest_path, init)
        return vector, os.path.abspath(init)
    beam = beam_feature or info.beam_feature
    if info.beam_feature is None:  # no signature, or one that names no beam (a foreign list's features added)
        found = _beam_from_order(nbest, nbest_path, beam_feature, columns, say or (lambda text: None), info.declared)
        if isinstance(found, np.ndarray):  # the weights that reproduce the list's totals
            return pad_sparse(found, nbest), "beam"
        beam = found
    if beam is None:
        return None, "zeros"
    if beam not in nbest.feature_names:
        raise InputError(
            f"the signature names beam feature {beam!r}, which is not a column of the list (it has {columns})",
            nbest_path + ".json",
        )
    return pad_sparse(np.asarray([1.0 if name == beam else 0.0 for name in nbest.feature_names]), nbest), "beam"


def pad_sparse(vector: np.ndarray, nbest: NBestList) -> np.ndarray:
    """``vector`` (float[F], over the dense columns) with 0 for each of the list's sparse
    features after it (float[F + K]); unchanged for a list without any."""
    extra = nbest.sparse.width if nbest.sparse is not None else 0
    return np.concatenate([vector, np.zeros(extra)]) if extra else vector


def _beam_from_order(
    nbest: NBestList,
    nbest_path: str,
    beam_feature: Optional[str],
    columns: str,
    say: Callable[[str], None],
    signed: bool = False,
) -> Union[str, np.ndarray, None]:
    """The beam column of a list whose signature names none (or that has none): ``beam_feature``
    (said with the numbers where the list's order contradicts it), else the column in whose
    order the list is written; else, where the totals (the last field: the decoder's weighted
    score) order it and are a weighted sum of the columns, those weights (float64[F]); else None
    for a ``signed`` list (a signature that names no beam: the start is zeros).

    Raises:
        InputError: none of them for a list without a signature (naming the ways on, for the
            command line and the Python API).
    """
    ordering, first_best = rank_order(nbest)
    segments = sum(1 for size in np.diff(nbest.offsets) if size > 1)
    if beam_feature is not None:
        if ordering and beam_feature not in ordering:
            say(
                f"rerank: warning: beam feature {beam_feature}: the list is not in its order (its first hypothesis "
                f"is {beam_feature}'s best in {first_best.get(beam_feature, 0)} of {segments} segments); the list is "
                f"in {ordering[0]}'s order, the column its decoder ranked by: starting from {beam_feature} as asked"
            )
        return beam_feature
    if not ordering:
        weights = totals_weights(nbest)
        if weights is not None:
            shown = ", ".join(f"{name} {value:g}" for name, value in zip(nbest.feature_names, weights))
            say(
                f"rerank: {nbest_path}: no column orders the list but its totals do: starting from the weights "
                f"that reproduce them ({shown})"
            )
            return weights
    if not ordering and signed:
        return None
    if not ordering:
        where = "the list has no signature" if not os.path.exists(nbest_path) else f"no signature {nbest_path}.json"
        raise InputError(
            f"{where} and no column orders every segment as written, so the beam's feature is unknown: name its "
            f"column (--beam-feature COLUMN, beam_feature=COLUMN in Python; the list has {columns}), or start from "
            "zeros or weights (--init zeros | WEIGHTS: JSON, Moses 'name= value' lines or init.opt; init= in "
            "Python); 'rerank convert --beam-feature COLUMN' writes the signature once for every verb",
            nbest_path,
        )
    others = f" ({', '.join(ordering[1:])} too: the first is taken)" if len(ordering) > 1 else ""
    say(
        f"rerank: {nbest_path}: {'its signature names no beam' if signed else 'no signature'}: the beam's column "
        f"is {ordering[0]}, the one whose values never "
        f"rise down any of the {segments} segments{others} (--beam-feature names another)"
    )
    return ordering[0]


__all__ = ["read_start", "start_vector", "rank_order", "totals_weights", "start_weights"]
