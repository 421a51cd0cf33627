"""ctypes bindings of ``rerank/tuning/_kernels.c`` (compiled by ``pip install``): the MIRA epoch,
model-best statistics, MERT's envelopes and its exact BLEU line search.  Wrappers check dtypes, shapes and
contiguity through numpy's ``ndpointer``."""

from __future__ import annotations

import ctypes
from typing import Tuple

import numpy as np
from numpy.ctypeslib import ndpointer

from rerank._native import load_kernels

_I64 = ndpointer(np.int64, flags="C_CONTIGUOUS")
_F64 = ndpointer(np.float64, flags="C_CONTIGUOUS")


def _load() -> ctypes.CDLL:
    lib = load_kernels("rerank.tuning._kernels", __file__)
    lib.mira_epoch.restype = ctypes.c_int64
    lib.mira_epoch.argtypes = [
        _F64,
        ctypes.c_int64,
        _F64,
        _I64,
        _I64,
        ctypes.c_int64,
        _F64,
        _F64,
        ctypes.POINTER(ctypes.c_int64),
        _F64,
        ctypes.c_double,
        ctypes.c_double,
        ctypes.c_int,
        ctypes.POINTER(ctypes.c_double),
    ]
    lib.model_best_stats.restype = None
    lib.model_best_stats.argtypes = [_F64, ctypes.c_int64, _F64, ctypes.c_int64, _I64, ctypes.c_int64, _F64, _F64]
    lib.mert_envelope.restype = ctypes.c_int64
    lib.mert_envelope.argtypes = [_F64, _F64, _I64, ctypes.c_int64, _I64, _F64, _I64, _I64]
    lib.mert_line_search.restype = ctypes.c_int64
    lib.mert_line_search.argtypes = [_F64, _F64, _F64, _I64, ctypes.c_int64, _F64]
    return lib


_lib = _load()


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def mira_epoch(
    features, stats, offsets, order, w, totals, num_updates: int, bg, C: float, decay: float, model_bg: bool
):
    """One kbmira epoch; updates ``w``, ``totals`` and ``bg`` in place (float64,
    contiguous).  Returns (updates, summed loss, num_updates)."""
    n = ctypes.c_int64(num_updates)
    loss = ctypes.c_double(0.0)
    order = np.ascontiguousarray(order, dtype=np.int64)
    updates = _lib.mira_epoch(
        features,
        features.shape[1],
        stats,
        offsets,
        order,
        len(order),
        w,
        totals,
        ctypes.byref(n),
        bg,
        C,
        decay,
        int(model_bg),
        ctypes.byref(loss),
    )
    if updates < 0:
        raise MemoryError("mira_epoch: out of memory")
    return int(updates), loss.value, n.value


def model_best_stats(features, stats, offsets, w) -> np.ndarray:
    """float64[K] summed statistics (float[M, K], any metric's) of the model-best
    hypotheses under ``w`` (first row on ties)."""
    features, stats, w = _f64(features), _f64(stats), _f64(w)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    total = np.zeros(stats.shape[1])
    _lib.model_best_stats(features, features.shape[1], stats, stats.shape[1], offsets, len(offsets) - 1, w, total)
    return total


def mert_envelope(a, b, offsets) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every segment's upper envelope along the line ``a + gamma · b`` (float[M] each):
    (first int64[N]: the row selected at gamma = -inf; gammas float64[B], from int64[B],
    to int64[B]: where the selected row changes, in segment order).  Ties as
    :func:`mert_line_search`.  The C call releases the GIL."""
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    N, M = len(offsets) - 1, int(offsets[-1])
    first = np.zeros(N, dtype=np.int64)
    gammas, frm, to = np.zeros(max(M, 1)), np.zeros(max(M, 1), dtype=np.int64), np.zeros(max(M, 1), dtype=np.int64)
    nb = _lib.mert_envelope(_f64(a), _f64(b), offsets, N, first, gammas, frm, to)
    return first, gammas[:nb], frm[:nb], to[:nb]


def mert_line_search(a, b, stats, offsets) -> Tuple[float, float, int]:
    """Exact corpus-BLEU line search (``rerank/tuning/_kernels.c``): hypothesis i scores
    ``a[i] + gamma * b[i]``.  Returns (gamma, BLEU at gamma, number of breakpoints).
    The C call releases the GIL, so threads can search several directions at once."""
    out = np.zeros(2)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    nb = _lib.mert_line_search(_f64(a), _f64(b), _f64(stats), offsets, len(offsets) - 1, out)
    if nb < 0:
        raise MemoryError("mert_line_search: out of memory")
    return float(out[0]), float(out[1]), int(nb)
