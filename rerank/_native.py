"""ctypes bindings of ``rerank/_kernels.c`` (compiled by ``pip install``): n-gram matching
and TER edit counts; :func:`load_kernels` also loads the tuners' ``rerank/tuning/_kernels.c``.

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


def load_kernels(module: str, package_file: str) -> ctypes.CDLL:
    """Load the compiled C extension ``module`` (e.g. ``"rerank._kernels"``) with ctypes.

    ``package_file`` is the ``__file__`` of a module beside it (an in-place build is
    looked for there too).  Raises ImportError, telling how to rebuild, when it is missing.
    """
    spec = importlib.util.find_spec(module)
    candidates = [spec.origin] if spec is not None and spec.origin else []
    stem = module.rsplit(".", 1)[-1]
    candidates += glob.glob(os.path.join(os.path.dirname(os.path.abspath(package_file)), stem + "*.so"))
    for path in candidates:
        if path and os.path.exists(path):
            return ctypes.CDLL(path)
    raise ImportError(
        f"rerank's compiled kernels ({module}) are missing: reinstall with 'pip install -e .' (needs a C compiler)"
    )


def _load() -> ctypes.CDLL:
    lib = load_kernels("rerank._kernels", __file__)
    lib.clipped_matches.restype = ctypes.c_int
    lib.clipped_matches.argtypes = [
        _I64,
        ctypes.c_int64,
        ctypes.c_int,
        _I64,
        _I64,
        ctypes.c_int64,
        _I64,
        _I64,
        _I64,
        ctypes.c_int,
        _F64,
    ]
    lib.sort_runs.restype = ctypes.c_int
    lib.sort_runs.argtypes = [_I64, ctypes.c_int64, ctypes.c_int, _I64, _I64, ctypes.c_int64]
    lib.ter_stats.restype = ctypes.c_int
    lib.ter_stats.argtypes = [_I32, _I64, _I32, _I64, ctypes.c_int64, _F64]
    return lib


_lib = _load()


def _i64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


def cpu_count() -> int:
    """The CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where that
    is unknown): how many blocks of pairs the kernels run side by side."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def clipped_matches(codes, h_start, h_len, r_start, r_len, segment, presorted: bool = False) -> np.ndarray:
    """float64[M, K] clipped n-gram matches of each hypothesis against its reference,
    for the K orders of ``codes`` (int[K, L], row n: codes of the (n+1)-grams starting at
    each token; see ``rerank.metrics.bleu_stats.bleu_stats``).  Hypothesis h is tokens
    ``h_start[h]:h_start[h]+h_len[h]``, its reference ``segment[h]`` is tokens
    ``r_start[s]:r_start[s]+r_len[s]``.  ``presorted``: ``codes`` went through
    :func:`sort_runs` for every run used (then no copies are sorted per pair)."""
    codes, h_start, h_len = _i64(codes), _i64(h_start), _i64(h_len)
    r_start, r_len, segment = _i64(r_start), _i64(r_len), _i64(segment)
    out = np.zeros((len(h_start), codes.shape[0]))
    if _lib.clipped_matches(
        codes,
        codes.shape[1],
        codes.shape[0],
        h_start,
        h_len,
        len(h_start),
        r_start,
        r_len,
        segment,
        int(presorted),
        out,
    ):
        raise MemoryError("clipped_matches: out of memory")
    return out


def sort_runs(codes: np.ndarray, start, length) -> None:
    """Sort in place (int64[K, L], C-contiguous) the valid n-gram codes of each run
    ``start[k]:start[k]+length[k]`` (row n: its first ``length[k] - n`` codes)."""
    if codes.dtype != np.int64 or not codes.flags.c_contiguous:
        raise ValueError("codes must be a C-contiguous int64 array")
    if _lib.sort_runs(codes, codes.shape[1], codes.shape[0], _i64(start), _i64(length), len(start)):
        raise MemoryError("sort_runs: out of memory")


def ter_edits(hyp_words, ref_words) -> np.ndarray:
    """float64[N] TER edit counts (sacrebleu's ``translation_edit_rate``, shifts
    included) of each tokenised hypothesis (list of words) against its reference."""
    vocab: dict = {}

    def flatten(lines):
        ids = [vocab.setdefault(w, len(vocab)) for words in lines for w in words]
        offsets = np.zeros(len(lines) + 1, dtype=np.int64)
        np.cumsum([len(words) for words in lines], out=offsets[1:])
        return np.asarray(ids, dtype=np.int32), offsets

    out = np.zeros(len(hyp_words))
    # blocks of pairs: between two C calls Python runs its signal handlers, so Ctrl-C and
    # SIGTERM act within a block's time (TER with shifts is the slowest statistic we compute)
    for start in range(0, len(hyp_words), TER_BLOCK):
        h_ids, h_off = flatten(hyp_words[start : start + TER_BLOCK])
        r_ids, r_off = flatten(ref_words[start : start + TER_BLOCK])
        part = np.zeros(len(h_off) - 1)
        if _lib.ter_stats(h_ids, h_off, r_ids, r_off, len(part), part):
            raise MemoryError("ter_stats failed")
        out[start : start + len(part)] = part
    return out


#: hypothesis-reference pairs per C call of :func:`ter_edits`
TER_BLOCK = 2000
