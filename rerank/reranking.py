"""Applying weights, cutting and joining lists, streamed block by block
(:func:`rerank.nbest.iter_nbest`): memory is bounded by a block, not the list.  ``rerank
apply``, ``rerank truncate`` and ``rerank union``."""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.nbest import (
    ListInfo,
    NBestList,
    NBestWriter,
    count_segments,
    finite_scores,
    iter_nbest,
    write_list_info,
)
from rerank.outputs import StagedOutputs
from rerank.shards import Shard, shard_blocks
from rerank.signature import write_signed
from rerank.textio import read_json
from rerank.tuning.weights import missing_columns, read_weights, weights_vector


def apply_file(
    nbest_path: str,
    weights_path: Optional[str],
    out: str,
    out_nbest: Optional[str] = None,
    folds_path: Optional[str] = None,
    shard: Optional[Shard] = None,
    missing: str = "error",
    column: Optional[str] = None,
    say: Callable[[str], None] = lambda text: None,
) -> int:
    """Write the best hypothesis of every segment of ``nbest_path`` under the weights of
    ``weights_path`` to ``out`` (and, with ``out_nbest``, the list with totals = weighted
    scores).  With ``folds_path`` (:mod:`rerank.folds`), fold k's segments use the weights
    file whose path has ``{fold}`` replaced by k.  ``missing``: ``error`` (every column needs a
    weight) or ``zero`` (a column the weights leave out weighs 0, said through ``say``).
    ``column`` instead of weights: the argmax of that one column (fixed re-ranking by a QE
    column such as ``CometKiwi``, Fernandes et al. 2022).  ``shard``: only that block of
    segments (:mod:`rerank.shards`), each output with a signature recording the shard, for
    :func:`merge_shards`.  Outputs appear together or not at all.  Returns the segments written.

    Raises:
        InputError: unreadable files, weights that name no column or overflow, a column the
            list does not have, both or neither of ``weights_path`` and ``column``, a folds
            file of another segment count, ``folds_path`` without ``{fold}`` in ``weights_path``,
            a shard of standard input, to standard output or holding no segment.
    """
    if (weights_path is None) == (column is None):
        raise InputError("give --weights FILE or --column NAME (re-rank by one column), one of them")
    folds = None
    if column is not None:
        _check_column(nbest_path, column)
        say(f"apply: re-ranked by the column {column} alone (every other column weighs 0)")
        missing = "zero"
    weights_path = weights_path if weights_path is not None else nbest_path  # named in messages
    if folds_path:
        if "{fold}" not in weights_path:
            raise InputError("--folds needs {fold} in the --weights path (one weights file per fold)")
        folds = read_folds(folds_path)
        listed = count_segments(nbest_path)  # before any work
        if shard is None and listed is not None and listed != len(folds.fold):
            raise InputError(
                f"{len(folds.fold)} segments in the folds file but {listed} in the n-best list", folds_path
            )
        sources = [weights_path.replace("{fold}", str(k)) for k in range(folds.k)]
    else:
        sources = [weights_path]
    if column is not None:
        weights: List[Dict[str, Any]] = [{column: 1.0}]
    else:
        weights = [read_weights(path) for path in sources]  # every weights file checked before the list is read
    lo, hi, total = 0, 0, 0  # the whole list (set for a shard)
    if shard is not None:
        lo, hi, total = shard.list_bounds(nbest_path)
        shard.check_output(out)
    vectors: List[np.ndarray] = []
    segments, info, names = 0, None, None
    with StagedOutputs() as outputs:
        with outputs.open(out) as handle, contextlib.ExitStack() as stack:
            writer = NBestWriter(stack.enter_context(outputs.open(out_nbest)), out_nbest) if out_nbest else None
            blocks = iter_nbest(nbest_path)
            for first, block in blocks if shard is None else shard_blocks(blocks, lo, hi):
                first_block = not vectors
                if first_block or block.sparse is not None:  # each block has its own sparse features
                    vectors = [weights_vector(w, block, path, missing) for w, path in zip(weights, sources)]
                    absent = " ".join(sorted({name for w in weights for name in missing_columns(w, block)}))
                    if absent and column is None and first_block:
                        say(
                            f"apply: {absent.count(' ') + 1} column(s) without a weight weigh 0 (--missing zero): {absent}"
                        )
                with np.errstate(over="ignore", invalid="ignore"):
                    table = np.stack([block.scores(vector) for vector in vectors], axis=1)  # float[M, folds]
                if folds is None:
                    scores = table[:, 0]
                else:
                    last = first + block.num_segments
                    if last > len(folds.fold):
                        raise InputError(
                            f"more than {len(folds.fold)} segments in the n-best list (the folds file's count)",
                            nbest_path,
                        )
                    scores = table[np.arange(len(table)), folds.fold[first:last][block.segment]]
                finite_scores(scores, nbest_path, sources[0] if folds is None else weights_path)
                best = block.select(scores)
                handle.write("".join(block.hypotheses[i] + "\n" for i in best))
                if writer is not None:
                    writer.write(block, first - lo, scores)
                segments, info, names = first + block.num_segments - lo, block.info, block.feature_names
        if folds is not None and shard is None and segments != len(folds.fold):
            raise InputError(
                f"{len(folds.fold)} segments in the folds file but {segments} in the n-best list", folds_path
            )
        if shard is not None:  # each output says which shard it holds
            recorded = [{"column": column}] if column is not None else [read_json(path) for path in sources]
            run = {"input": nbest_path, "weights": recorded, "segments": segments}
            write_signed(outputs.signature(out), {"shard": shard.record(total, nbest_path, "text"), **run})
            if out_nbest:
                record = {"shard": shard.record(total, nbest_path), **run, "features": names}
                write_list_info(outputs.signature(out_nbest), info, record)
    return segments


def _check_column(nbest_path: str, column: str) -> None:
    """Refuse ``--column NAME`` before any work unless the list's first block has that column
    once (a name of several values needs weights).

    Raises:
        InputError: naming the list and its columns."""
    for _, block in iter_nbest(nbest_path):
        columns = " ".join(dict.fromkeys(block.feature_names)) or "none"
        if column not in block.feature_names:
            raise InputError(f"--column {column}: the list has no such column (its columns: {columns})", nbest_path)
        if block.feature_names.count(column) > 1:
            raise InputError(f"--column {column}: a name of several values: give weights instead", nbest_path)
        return


def truncate_file(nbest_path: str, size: Optional[int], out: Optional[str], out_1best: Optional[str] = None) -> int:
    """Write the first ``size`` hypotheses of every segment of ``nbest_path`` to ``out``
    with its signature ``out.json`` (list settings carried on), and/or the first
    hypothesis of every segment to ``out_1best``, one line each (the decoder's own 1-best
    of a list in decoder order, as Moses and fairseq write them).  Outputs appear
    together or not at all.  Returns the hypotheses written to ``out`` (segments for
    ``out_1best`` alone).

    Raises:
        InputError: neither output, ``out`` without ``size``, an unreadable list.
    """
    if out is None and out_1best is None:
        raise InputError("give --out (a truncated list) and/or --out-1best (the first hypothesis of each segment)")
    if out is not None and size is None:
        raise InputError("--out needs --size (hypotheses kept per segment)")
    names, hypotheses, info, segments = None, 0, None, 0
    with StagedOutputs() as outputs:  # the list, its signature and the 1-best together
        with contextlib.ExitStack() as stack:
            handle = stack.enter_context(outputs.open(out)) if out is not None else None
            best = stack.enter_context(outputs.open(out_1best)) if out_1best is not None else None
            writer = NBestWriter(handle, out) if handle is not None else None
            for first, block in iter_nbest(nbest_path):
                if best is not None:
                    best.writelines(block.hypotheses[i] + "\n" for i in block.offsets[:-1])
                segments += block.num_segments
                if writer is not None:
                    assert size is not None  # refused above: --out needs --size
                    block = block.head(size)
                    writer.write(block, first)
                    names, hypotheses, info = block.feature_names, hypotheses + len(block.hypotheses), block.info
        if out is not None:
            write_list_info(
                outputs.signature(out),
                info,
                {"input": nbest_path, "head": size, "features": names, "hypotheses": hypotheses},
            )
    return hypotheses if out is not None else segments


#: segments per block that :func:`union_files` writes
UNION_BLOCK = 1000


def _segment_texts(path: str) -> Iterator[List[str]]:
    """The hypotheses of each segment of the list ``path``, in order, streamed."""
    for _, block in iter_nbest(path):
        for k in range(block.num_segments):
            yield [block.hypotheses[i] for i in range(block.offsets[k], block.offsets[k + 1])]


def union_files(paths: Sequence[str], out: str) -> List[int]:
    """Join the n-best lists ``paths`` (of the same source segments, e.g. a left-to-right
    and a right-to-left model's own lists: Liu et al. 2016, "Agreement on
    Target-bidirectional Neural Machine Translation") into one list ``out`` with its
    signature ``out.json``: segment i holds the hypotheses of every list's segment i,
    first list first, each distinct text once (at its first occurrence).

    Model scores of one list do not describe another list's hypotheses, so the union keeps
    one column, ``WordPenalty`` (minus the word count, Moses' convention: computed from the
    text) and declares no beam feature; score it with ``rerank features add`` (e.g. the
    first list's model by forced decoding, ``--beam-feature`` to declare its columns the
    beam's again).  Returns the hypotheses each list contributed (int per path; texts
    already in an earlier list are not counted).

    Raises:
        InputError: fewer than two lists, or lists of different segment counts (naming the
            shorter one); unreadable lists as :func:`rerank.nbest.iter_nbest`.
    """
    if len(paths) < 2:
        raise InputError("a union needs at least two n-best lists (--nbest A --nbest B)")
    added = [0] * len(paths)
    segments, hypotheses = 0, 0
    streams = [_segment_texts(path) for path in paths]
    missing: Any = object()  # the fill value of a list that ended early
    with StagedOutputs() as outputs:
        with outputs.open(out) as handle:
            writer = NBestWriter(handle, out)
            while True:
                chunk = list(itertools.islice(itertools.zip_longest(*streams, fillvalue=missing), UNION_BLOCK))
                if not chunk:
                    break
                texts: List[str] = []
                offsets = [0]
                for k, lists in enumerate(chunk):
                    short = next((i for i, texts_of in enumerate(lists) if texts_of is missing), None)
                    if short is not None:
                        raise InputError(
                            f"{segments + k} segments, but {paths[0 if short else 1]} has more", paths[short]
                        )
                    seen = set()
                    for i, texts_of in enumerate(lists):
                        for text in texts_of:
                            if text not in seen:
                                seen.add(text)
                                texts.append(text)
                                added[i] += 1
                    offsets.append(len(texts))
                words = np.array([-float(len(text.split())) for text in texts])
                block = NBestList(np.array(offsets), texts, words[:, None], ["WordPenalty"])
                writer.write(block, segments)
                segments += len(chunk)
                hypotheses += len(texts)
        if segments == 0:
            raise InputError("no segments", paths[0])
        write_list_info(
            outputs.signature(out),
            ListInfo(None, {}, declared=True),
            {
                "inputs": list(paths),
                "hypotheses": hypotheses,
                "segments": segments,
                "added": added,
                "features": ["WordPenalty"],
            },
        )
    return added


def average_weights(paths: Sequence[str]) -> dict:
    """The mean of the replicas' weight vectors, each first divided by its L1 norm (tuners'
    weights are defined up to a positive scale: MERT's are L1-normalised, MIRA's are not), as
    a weights record (``weights``, ``averaged_from``): one replica-independent direction
    instead of picking one replica (issue 46's stability candidate).

    Raises:
        InputError: fewer than two files, files whose columns differ, a replica of all-zero
            weights (no direction to average).
    """
    if len(paths) < 2:
        raise InputError("averaging needs at least two weights files (the replicas)")
    maps: List[Dict[str, Any]] = [read_weights(path) for path in paths]
    names = list(maps[0])
    vectors = []
    for path, weights in zip(paths, maps):
        if list(weights) != names:
            raise InputError(f"columns {list(weights)} differ from {paths[0]}'s {names}", path)
        flat = np.array(
            [v for name in names for v in (weights[name] if isinstance(weights[name], list) else [weights[name]])],
            dtype=np.float64,
        )
        with np.errstate(over="ignore"):  # an overflow is caught below
            norm = np.abs(flat).sum()
        if not np.isfinite(norm):  # weights near the float range: scaled first, the same direction
            flat = flat / np.abs(flat).max()
            norm = np.abs(flat).sum()
        if norm == 0:
            raise InputError("all weights are 0: no direction to average", path)
        vectors.append(flat / norm)
    mean = np.mean(vectors, axis=0)
    out, k = {}, 0
    for name in names:
        count = len(maps[0][name]) if isinstance(maps[0][name], list) else 1
        values = [float(v) for v in mean[k : k + count]]
        out[name] = values if isinstance(maps[0][name], list) else values[0]
        k += count
    return {"weights": out, "averaged_from": [os.path.abspath(p) for p in paths]}
