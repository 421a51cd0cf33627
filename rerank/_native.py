"""ctypes bindings of ``rerank/_kernels.c`` (compiled by ``pip install``).

Each wrapper checks dtypes, shapes and contiguity through numpy's ``ndpointer`` and
returns numpy arrays.  The C library loads in about a millisecond, which keeps
``rerank tune`` start-up small (a JIT such as numba costs ~0.7 s per process).
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os

import numpy as np
from numpy.ctypeslib import ndpointer

_I64 = ndpointer(np.int64, flags="C_CONTIGUOUS")
_I32 = ndpointer(np.int32, flags="C_CONTIGUOUS")
_F64 = ndpointer(np.float64, flags="C_CONTIGUOUS")


def _load() -> ctypes.CDLL:
    spec = importlib.util.find_spec("rerank._kernels")
    candidates = [spec.origin] if spec is not None and spec.origin else []
    candidates += glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "_kernels*.so"))
    for path in candidates:
        if path and os.path.exists(path):
            lib = ctypes.CDLL(path)
            break
    else:
        raise ImportError("rerank's compiled kernels are missing: reinstall with 'pip install -e .' "
                          "(needs a C compiler)")
    lib.clipped_matches.restype = ctypes.c_int
    lib.clipped_matches.argtypes = [_I64, ctypes.c_int64, _I64, _I64, ctypes.c_int64, _I64, _I64, _I64, _F64]
    lib.mira_epoch.restype = ctypes.c_int64
    lib.mira_epoch.argtypes = [_F64, ctypes.c_int64, _F64, _I64, _I64, ctypes.c_int64, _F64, _F64,
                               ctypes.POINTER(ctypes.c_int64), _F64, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                               ctypes.POINTER(ctypes.c_double)]
    lib.ter_stats.restype = ctypes.c_int
    lib.ter_stats.argtypes = [_I32, _I64, _I32, _I64, ctypes.c_int64, _F64]
    lib.model_best_stats.restype = None
    lib.model_best_stats.argtypes = [_F64, ctypes.c_int64, _F64, _I64, ctypes.c_int64, _F64, _F64]
    return lib


_lib = _load()


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def _f64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float64)


def clipped_matches(codes, h_start, h_len, r_start, r_len, segment) -> np.ndarray:
    """float64[M, 4] clipped n-gram matches (see ``rerank.bleu.bleu_stats``)."""
    codes, h_start, h_len = _i64(codes), _i64(h_start), _i64(h_len)
    r_start, r_len, segment = _i64(r_start), _i64(r_len), _i64(segment)
    out = np.zeros((len(h_start), 4))
    if _lib.clipped_matches(codes, codes.shape[1], h_start, h_len, len(h_start), r_start, r_len, segment, out):
        raise MemoryError("clipped_matches: out of memory")
    return out


def mira_epoch(features, stats, offsets, order, w, totals, num_updates: int, bg, C: float, decay: float,
               model_bg: bool):
    """One kbmira epoch; updates ``w``, ``totals`` and ``bg`` in place (float64,
    contiguous).  Returns (updates, summed loss, num_updates)."""
    n = ctypes.c_int64(num_updates)
    loss = ctypes.c_double(0.0)
    order = _i64(order)
    updates = _lib.mira_epoch(features, features.shape[1], stats, offsets, order, len(order), w, totals,
                              ctypes.byref(n), bg, C, decay, int(model_bg), ctypes.byref(loss))
    if updates < 0:
        raise MemoryError("mira_epoch: out of memory")
    return int(updates), loss.value, n.value


def model_best_stats(features, stats, offsets, w) -> np.ndarray:
    """float64[9] summed statistics of the model-best hypotheses under ``w``."""
    features, stats, offsets, w = _f64(features), _f64(stats), _i64(offsets), _f64(w)
    total = np.zeros(stats.shape[1])
    _lib.model_best_stats(features, features.shape[1], stats, offsets, len(offsets) - 1, w, total)
    return total


def ter_edits(hyp_words, ref_words) -> np.ndarray:
    """float64[N] TER edit counts (sacrebleu's ``translation_edit_rate``, shifts
    included) of each tokenised hypothesis (list of words) against its reference."""
    vocab: dict = {}

    def flatten(lines):
        ids = [vocab.setdefault(w, len(vocab)) for words in lines for w in words]
        offsets = np.zeros(len(lines) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in lines], out=offsets[1:])
        return np.asarray(ids, dtype=np.int32), offsets

    h_ids, h_off = flatten(hyp_words)
    r_ids, r_off = flatten(ref_words)
    out = np.zeros(len(hyp_words))
    if _lib.ter_stats(h_ids, h_off, r_ids, r_off, len(hyp_words), out):
        raise MemoryError("ter_stats failed")
    return out
