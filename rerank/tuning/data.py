"""What tuning, oracle selection and cross-fitting read: an n-best list with the
sufficient statistics of every hypothesis under the metric optimised (BLEU by default),
kept as numbers only.

The list is streamed block by block (:func:`rerank.nbest.iter_nbest`); each block's
statistics are computed against its segments' references and its hypotheses are packed
into one UTF-8 buffer (:class:`rerank.nbest.PackedStrings`), so a whole list costs its
features (8 bytes each), the statistics (BLEU: 9, 72 bytes) and the hypotheses' bytes — no Python
string per hypothesis.

What is read is cached, content-addressed (Moses' ``extractor`` computes its statistics once
the same way): the key is a SHA-256 over the bytes of the list, its signature, the references
and any ``seg:`` sidecar, the statistics' settings and rerank's version, so the ~40 tuning
runs of the main job on one val list parse it and compute its statistics once, and a
changed input can never meet a stale entry (an entry whose recorded key differs, that
cannot be read, whose arrays do not fit together or whose checksum of its statistics and
list differs from the one it records, is rebuilt).  ``RERANK_CACHE`` names the directory (default
``~/.cache/rerank/tuning``; ``off``: no cache); ``RERANK_CACHE_MAX`` caps its size (default 2 GB;
``500M``, ``10G``): after each write, the entries used longest ago are removed (:func:`evict`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import zipfile
from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from rerank._version import __version__
from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.metrics.references import references_slice, segment_count
from rerank.nbest import ListInfo, NBestList, PackedStrings, count_segments, iter_nbest, read_list_info
from rerank.nbest.sparse import SparseFeatures
from rerank.outputs import atomic_write
from rerank.progress import progress_bar
from rerank.textio import file_digest, read_references


#: where tuning data is cached (``RERANK_CACHE``; ``off`` disables the cache)
def cache_dir() -> Optional[str]:
    """The directory of cached tuning data: ``$RERANK_CACHE``, by default
    ``~/.cache/rerank/tuning``; None when ``RERANK_CACHE=off``."""
    value = os.environ.get("RERANK_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "rerank", "tuning"))
    return None if value.lower() in ("off", "0", "") else value


#: the default size cap of the tuning cache (``RERANK_CACHE_MAX``): entries used longest ago go first
DEFAULT_CACHE_MAX = 2 << 30


def cache_limit() -> int:
    """The tuning cache's size cap in bytes: ``$RERANK_CACHE_MAX`` (a number of bytes, or with a
    K, M, G suffix: ``500M``), by default :data:`DEFAULT_CACHE_MAX` (2 GB).

    Raises:
        InputError: a value that is not such a size."""
    text = os.environ.get("RERANK_CACHE_MAX", "").strip()
    if not text:
        return DEFAULT_CACHE_MAX
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(text[-1:].upper(), 1)
    number = text[:-1] if scale > 1 else text
    try:
        size = float(number)
    except ValueError:
        size = -1.0
    if not (size >= 0 and size * scale < 1 << 62):
        raise InputError(f"RERANK_CACHE_MAX={text!r}: expected a size in bytes, e.g. 500M or 2G (0: keep no entry)")
    return int(size * scale)


def evict(directory: str, limit: int, keep: str = "") -> List[str]:
    """Remove the cache's entries used longest ago (oldest modification time: a load touches its
    entry) until the entries of ``directory`` take at most ``limit`` bytes; ``keep`` (the entry
    just written) goes last of all.  Returns the names removed."""
    entries = []
    for name in os.listdir(directory) if os.path.isdir(directory) else []:
        path = os.path.join(directory, name)
        if name.endswith(".npz") and os.path.isfile(path):
            with contextlib.suppress(OSError):
                stat = os.stat(path)
                entries.append((name == keep, stat.st_mtime, stat.st_size, name))
    total, removed = sum(size for _, _, size, _ in entries), []
    for _, _, size, name in sorted(entries):
        if total <= limit:
            break
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(directory, name))
            total -= size
            removed.append(name)
    return removed


def cache_key(nbest_path: str, ref_paths: Sequence[str], what: str, sidecars: Sequence[str]) -> Optional[str]:
    """The content address of a tuning run's data: SHA-256 over the bytes of the list, its
    signature, the references and the ``seg:`` sidecars, the statistics' settings
    (``what``: the metric's signature) and rerank's version; None where an input is not a
    regular file (standard input, a FIFO), which is never cached."""
    files = [nbest_path, nbest_path + ".json", *ref_paths, *sidecars]
    if any(path == "-" for path in files[:1] + list(ref_paths)):
        return None
    digest = hashlib.sha256(f"rerank {__version__}\n{what}\n".encode("utf-8"))
    for path in files:
        if not os.path.exists(path):
            digest.update(b"absent\n")
            continue
        if not os.path.isfile(path):
            return None
        digest.update(f"{os.path.basename(path)} {file_digest(path)}\n".encode("utf-8"))
    return digest.hexdigest()


#: the arrays of a cache entry, with their dtype kind and number of dimensions
_ENTRY = {
    "offsets": ("i", 1),
    "features": ("f", 2),
    "totals": ("f", 1),
    "names": ("U", 1),
    "text": ("u", 1),
    "text_offsets": ("i", 1),
    "stats": ("f", 2),
    "sparse_indptr": ("i", 1),
    "sparse_indices": ("i", 1),
    "sparse_values": ("f", 1),
    "sparse_names": ("U", 1),
}


def _entry_digest(arrays: dict) -> str:
    """SHA-256 over every array of an entry (name, dtype, shape, bytes), in :data:`_ENTRY` order."""
    digest = hashlib.sha256()
    for name in _ENTRY:
        value = np.ascontiguousarray(arrays[name])
        digest.update(f"{name} {value.dtype.str} {value.shape}\n".encode("ascii"))
        digest.update(value.data)
    return digest.hexdigest()


def _consistent(entry: dict) -> bool:
    """Whether a cache entry's arrays fit together: each of its dtype kind and rank, one
    row of features, totals and statistics per hypothesis, offsets that rise from 0 to the
    hypothesis count, a column name per feature, features and totals finite (as the list's
    reader requires: a NaN would be tuned on silently)."""
    if any(
        name not in entry or entry[name].dtype.kind != kind or entry[name].ndim != ndim
        for name, (kind, ndim) in _ENTRY.items()
    ):
        return False
    offsets, text_offsets = entry["offsets"], entry["text_offsets"]
    rows = len(entry["features"])
    return bool(
        len(offsets) >= 1
        and offsets[0] == 0
        and offsets[-1] == rows
        and np.all(np.diff(offsets) >= 0)
        and len(entry["totals"]) == rows == len(entry["stats"]) == len(text_offsets) - 1
        and entry["features"].shape[1] == len(entry["names"])
        and text_offsets[0] == 0
        and text_offsets[-1] == len(entry["text"])
        and np.all(np.diff(text_offsets) >= 0)
        and bool(np.isfinite(entry["features"]).all())
        and bool(np.isfinite(entry["totals"]).all())
        and _sparse_of(entry, rows) is not False
    )


def _sparse_of(entry: dict, rows: int):
    """The sparse features of a cache entry (None where the list has none), or False where its
    arrays do not fit the entry's ``rows`` hypotheses."""
    try:
        sparse = SparseFeatures(
            entry["sparse_indptr"],
            entry["sparse_indices"],
            entry["sparse_values"],
            [str(n) for n in entry["sparse_names"]],
        )
    except ValueError:
        return False
    if sparse.num_rows != rows or not np.isfinite(sparse.values).all():
        return False
    return sparse if sparse.width else None


def _cache_load(key: str) -> Optional[dict]:
    """The entry of ``key``, or None — rebuilt by the caller — where there is none, it cannot
    be read, it records another key, its arrays do not fit together (:func:`_consistent`)
    or their checksum differs from the one it records (an entry edited or truncated)."""
    directory = cache_dir()
    path = os.path.join(directory, key + ".npz") if directory else None
    if not path or not os.path.isfile(path):
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if str(data["key"]) != key:  # a foreign file under this name: rebuilt, never used
                return None
            entry = {name: data[name] for name in data.files}
        if not _consistent(entry) or str(entry.get("check")) != _entry_digest(entry):
            return None
        with contextlib.suppress(OSError):  # used now: the last to go when the cache is full
            os.utime(path)
        return entry
    except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile):
        return None  # unreadable: rebuilt


def _cache_save(key: str, arrays: dict) -> None:
    directory = cache_dir()
    if not directory:
        return
    try:
        with atomic_write(os.path.join(directory, key + ".npz"), "wb") as out:
            np.savez(out, key=np.array(key), check=np.array(_entry_digest(arrays)), **arrays)
        evict(directory, cache_limit(), keep=key + ".npz")
    except (OSError, InputError):  # a cache that cannot be written is no cache: the run goes on
        pass


def load_tuning_data(
    nbest_path: str,
    ref_path: Union[str, Sequence[str]],
    metric: Metric,
    progress: bool = False,
) -> Tuple[NBestList, List, np.ndarray]:
    """(n-best list with packed hypotheses, its totals and its :class:`~rerank.nbest.ListInfo`,
    references, statistics float64[M, K] of every hypothesis) of a tuning, oracle or
    cross-fitting run (``ref_path``: one reference file, or several: several references
    per segment, :func:`rerank.textio.read_references`): ``metric``'s statistics, bound to
    the list (so ``seg:NAME`` reads ``NBEST.NAME``, one score per hypothesis).  ``progress``:
    a bar on a terminal, a line every few seconds elsewhere, while the statistics are computed
    (chrF's and TER's take a while on a large list; a cached list needs none).

    Raises:
        InputError: unreadable files, a segment count that differs from the references',
            a ``seg:`` sidecar of another line count.
    """
    bound = metric.bind(nbest_path)
    refs = read_references(ref_path)
    count = segment_count(refs)
    listed = count_segments(nbest_path)  # before any work: the last line's id (a seek)
    if listed is not None and listed != count:
        raise InputError(f"{listed} segments in the n-best list but {count} references", nbest_path)
    ref_paths = [ref_path] if isinstance(ref_path, str) else list(ref_path)
    what = f"{bound.name} {bound.signature()}"
    key = cache_key(nbest_path, ref_paths, what, bound.sidecars(nbest_path)) if cache_dir() else None
    cached = _cache_load(key) if key else None
    if cached is not None:
        hypotheses = PackedStrings(cached["text"], cached["text_offsets"])
        columns = [str(n) for n in cached["names"]]
        arrays = (cached["offsets"], hypotheses, cached["features"], columns, cached["totals"])
        sparse = _sparse_of(cached, len(cached["totals"])) or None
        nbest = NBestList(*arrays, info=read_list_info(nbest_path), sparse=sparse)
        if nbest.num_segments != count:  # cannot be (the key covers both files); checked all the same
            raise InputError(f"{nbest.num_segments} segments in the n-best list but {count} references", nbest_path)
        return nbest, refs, cached["stats"]
    offsets, features, stats, packed, totals_of = [np.zeros(1, np.int64)], [], [], [], []
    sparse_parts: List[SparseFeatures] = []
    names: Optional[List[str]] = None
    info: Optional[ListInfo] = None
    row = 0
    bar = progress_bar(total=count, desc=f"{bound.name} statistics", unit="segment", enabled=progress)
    for first, block in iter_nbest(nbest_path):
        bar.update(block.num_segments)
        last = first + block.num_segments
        offsets.append(block.offsets[1:] + offsets[-1][-1])
        if last > count:  # count the rest only, to name the numbers
            continue
        rows = np.arange(len(block.hypotheses)) + row
        if bound.reads_source:  # COMET: segments numbered in the whole list, as its sources are
            stats.append(bound.hypothesis_stats(block.hypotheses, refs, block.segment + first, rows))
        else:
            part = references_slice(refs, first, last)
            stats.append(bound.hypothesis_stats(block.hypotheses, part, block.segment, rows))
        row += len(block.hypotheses)
        features.append(block.features)
        totals_of.append(block.totals if block.totals is not None else np.zeros(len(block.hypotheses)))
        packed.append(PackedStrings.from_strings(block.hypotheses))
        sparse_parts.append(block.sparse if block.sparse is not None else SparseFeatures.empty(len(block.hypotheses)))
        names, info = block.feature_names, block.info
    bar.close()
    segments = sum(len(o) for o in offsets) - 1
    if segments != count:
        raise InputError(f"{segments} segments in the n-best list but {count} references", nbest_path)
    bound.check_count(row)
    hypotheses = PackedStrings.concat(packed)
    del packed
    sparse = SparseFeatures.concat(sparse_parts)
    rows_of = (np.concatenate(offsets), hypotheses, _concat(features), names or [], _concat(totals_of))
    nbest = NBestList(*rows_of, info=info or ListInfo(), sparse=sparse if sparse.width else None)
    statistics = _concat(stats)
    if key:
        _cache_save(
            key,
            {
                "offsets": nbest.offsets,
                "features": nbest.features,
                "totals": nbest.totals,
                "names": np.array(nbest.feature_names, dtype=str),
                "text": hypotheses.data,
                "text_offsets": hypotheses.offsets,
                "stats": statistics,
                "sparse_indptr": sparse.indptr,
                "sparse_indices": sparse.indices,
                "sparse_values": sparse.values,
                "sparse_names": np.array(sparse.names, dtype=str),
            },
        )
    return nbest, refs, statistics


def _concat(arrays: List[np.ndarray]) -> np.ndarray:
    """Concatenate and free the parts as it goes (peak: the result plus one part)."""
    out = np.empty((sum(len(a) for a in arrays),) + arrays[0].shape[1:], dtype=arrays[0].dtype)
    row = 0
    while arrays:
        part = arrays.pop(0)
        out[row : row + len(part)] = part
        row += len(part)
    return out
