"""ctypes bindings of ``mira/_kernels.c`` (compiled by ``pip install``): the MIRA epoch,
model-best statistics and MERT's exact line search.  Wrappers check dtypes, shapes and
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
    lib = load_kernels("mira._kernels", __file__)
    lib.mira_epoch.restype = ctypes.c_int64
    lib.mira_epoch.argtypes = [_F64, ctypes.c_int64, _F64, _I64, _I64, ctypes.c_int64, _F64, _F64,
                               ctypes.POINTER(ctypes.c_int64), _F64, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_double)]
    lib.model_best_stats.restype = None
    lib.model_best_stats.argtypes = [_F64, ctypes.c_int64, _F64, _I64, ctypes.c_int64, _F64, _F64]
    lib.mert_line_search.restype = ctypes.c_int64
    lib.mert_line_search.argtypes = [_F64, _F64, _F64, _I64, ctypes.c_int64, _F64]
    return lib


_lib = _load()


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def mira_epoch(features, stats, offsets, order, w, totals, num_updates: int, bg, C: float, decay: float,
               model_bg: bool):
    """One kbmira epoch; updates ``w``, ``totals`` and ``bg`` in place (float64,
    contiguous).  Returns (updates, summed loss, num_updates)."""
    n = ctypes.c_int64(num_updates)
    loss = ctypes.c_double(0.0)
    order = np.ascontiguousarray(order, dtype=np.int64)
    updates = _lib.mira_epoch(features, features.shape[1], stats, offsets, order, len(order), w, totals,
                              ctypes.byref(n), bg, C, decay, int(model_bg), ctypes.byref(loss))
    if updates < 0:
        raise MemoryError("mira_epoch: out of memory")
    return int(updates), loss.value, n.value


def model_best_stats(features, stats, offsets, w) -> np.ndarray:
    """float64[9] summed statistics of the model-best hypotheses under ``w`` (first row on ties)."""
    features, stats, w = _f64(features), _f64(stats), _f64(w)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    total = np.zeros(stats.shape[1])
    _lib.model_best_stats(features, features.shape[1], stats, offsets, len(offsets) - 1, w, total)
    return total


def mert_line_search(a, b, stats, offsets) -> Tuple[float, float, int]:
    """Exact corpus-BLEU line search (``mira/_kernels.c``): hypothesis i scores
    ``a[i] + gamma * b[i]``.  Returns (gamma, BLEU at gamma, number of breakpoints).
    The C call releases the GIL, so threads can search several directions at once."""
    out = np.zeros(2)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    nb = _lib.mert_line_search(_f64(a), _f64(b), _f64(stats), offsets, len(offsets) - 1, out)
    if nb < 0:
        raise MemoryError("mert_line_search: out of memory")
    return float(out[0]), float(out[1]), int(nb)
