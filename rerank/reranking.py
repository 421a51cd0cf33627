"""Applying weights, cutting and joining lists, streamed block by block
(:func:`rerank.nbest.iter_nbest`): memory is bounded by a block, not the list.  ``rerank
apply``, ``rerank truncate`` and ``rerank union``."""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

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
    read_list_info,
    write_list_info,
)
from rerank.outputs import StagedOutputs
from rerank.shards import Shard, shard_blocks
from rerank.signature import write_signed
from rerank.textio import open_text, read_json
from rerank.tuning.weights import read_weights, weights_vector


def apply_file(
    nbest_path: str,
    weights_path: str,
    out: str,
    out_nbest: Optional[str] = None,
    folds_path: Optional[str] = None,
    shard: Optional[Shard] = None,
) -> int:
    """Write the best hypothesis of every segment of ``nbest_path`` under the weights of
    ``weights_path`` to ``out`` (and, with ``out_nbest``, the list with totals = weighted
    scores).  With ``folds_path`` (:mod:`rerank.folds`), fold k's segments use the weights
    file whose path has ``{fold}`` replaced by k.  ``shard``: only that block of segments
    (:mod:`rerank.shards`), each output with a signature recording the shard, for
    :func:`merge_shards`.  Outputs appear together or not at all.  Returns the number of
    segments written.

    Raises:
        InputError: unreadable files, weights that name no column or overflow, a folds
            file of another segment count, ``folds_path`` without ``{fold}`` in ``weights_path``,
            a shard of standard input, to standard output or holding no segment.
    """
    folds = None
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
    weights = [read_weights(path) for path in sources]  # every weights file checked before the list is read
    lo, hi, total = 0, 0, 0  # the whole list (set for a shard)
    if shard is not None:
        lo, hi, total = shard.list_bounds(nbest_path)
        shard.check_output(out)
    vectors = None
    segments, info, names = 0, None, None
    with StagedOutputs() as outputs:
        with outputs.open(out) as handle, contextlib.ExitStack() as stack:
            writer = NBestWriter(stack.enter_context(outputs.open(out_nbest)), out_nbest) if out_nbest else None
            blocks = iter_nbest(nbest_path)
            for first, block in blocks if shard is None else shard_blocks(blocks, lo, hi):
                if vectors is None:
                    vectors = np.stack([weights_vector(w, block, path) for w, path in zip(weights, sources)])
                with np.errstate(over="ignore", invalid="ignore"):
                    table = block.features @ vectors.T  # float[M, folds]
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
            run = {"input": nbest_path, "weights": [read_json(path) for path in sources], "segments": segments}
            write_signed(outputs.signature(out), {"shard": shard.record(total, nbest_path, "text"), **run})
            if out_nbest:
                record = {"shard": shard.record(total, nbest_path), **run, "features": names}
                write_list_info(outputs.signature(out_nbest), info, record)
    return segments


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


def _check_shard_record(shard: Dict[str, Any], path: str) -> None:
    """Refuse a shard record of the wrong types or ranges (a crafted or damaged signature): ``id``,
    ``of``, ``first``, ``last`` (and ``segments``) whole numbers with 0 ≤ id < of, 0 ≤ first ≤ last
    (≤ segments), ``kind`` nbest or text; a shard of batches (:mod:`rerank.shards`) instead of
    ``first``/``last``: ``segments`` and ``members``, ascending whole numbers below ``segments``
    (none: a ``features add`` shard dealt no block).
    Raises :class:`InputError` naming ``path`` and the field."""

    def whole(key: str, low: int) -> int:
        value = shard.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise InputError(
                f"its shard record's {key!r} must be a whole number ≥ {low}, not {value!r}", path + ".json"
            )
        return value

    of = whole("of", 1)
    if not whole("id", 0) < of:
        raise InputError(f"its shard record's id {shard['id']} is not below its number of shards {of}", path + ".json")
    if "members" in shard:
        total, members = whole("segments", 1), shard["members"]
        if (
            not isinstance(members, list)
            or not all(isinstance(k, int) and not isinstance(k, bool) for k in members)
            or not all(0 <= a < b for a, b in zip(members, members[1:]))
            or not all(0 <= k < total for k in members[:1] + members[-1:])
        ):
            raise InputError(f"its shard record's members must be ascending segment ids below {total}", path + ".json")
    else:
        first, last = whole("first", 0), whole("last", 0)
        if last < first or ("segments" in shard and whole("segments", 0) < last):
            raise InputError(f"its shard record's segments {first}..{last} are out of order or range", path + ".json")
    if shard.get("kind", "nbest") not in ("nbest", "text"):
        raise InputError(f"its shard record's kind must be nbest or text, not {shard.get('kind')!r}", path + ".json")


Shards = List[Tuple[Dict[str, Any], Dict[str, Any], str]]


def _read_shards(paths: Sequence[str]) -> Shards:
    """(shard record, signature, path) of each of ``paths``, in shard order, checked to be
    the shards of one run, each once, none missing; shards of blocks tile the segments."""
    shards: Shards = []
    for path in paths:
        side = path + ".json"
        record = read_json(side) if os.path.isfile(side) else None
        shard = record.get("shard") if isinstance(record, dict) else None
        if not isinstance(record, dict) or not isinstance(shard, dict):
            raise InputError("not a shard: its signature records no shard (a run with --num-shards)", path)
        if not all(k in shard for k in ("id", "of", "input_sha256")) or not (
            "members" in shard or ("first" in shard and "last" in shard)
        ):
            raise InputError("not a shard: its signature's shard record is incomplete", path)
        _check_shard_record(shard, path)
        shards.append((shard, record, path))
    first_shard, first_record, first_path = shards[0]
    for shard, record, path in shards[1:]:
        for key, what in (
            ("input_sha256", "input"),
            ("of", "number of shards"),
            ("segments", "segments"),
            ("kind", "kind of output"),
        ):
            if shard.get(key) != first_shard.get(key):
                raise InputError(f"a shard of another run (another {what} than {first_path}'s)", path)
        if ("members" in shard) != ("members" in first_shard):
            raise InputError(f"a shard of another run (of blocks and of batches, as {first_path})", path)
        for key in _SHARD_SETTINGS:
            if key == "features" and [] in (shard.get("members"), first_shard.get("members")):  # no block, no columns
                continue
            if record.get(key) != first_record.get(key):
                raise InputError(f"a shard of another run (other {key} than {first_path}'s)", path)
    by_id: dict = {}
    for shard, record, path in shards:
        if shard["id"] in by_id:
            raise InputError(f"shard {shard['id']} is given twice (also {by_id[shard['id']][2]})", path)
        by_id[shard["id"]] = (shard, record, path)
    # the first id not given (the ids given are distinct, so one of 0..len(shards) is missing
    # whenever fewer shards than ``of`` are given): no list of ``of`` entries is ever built
    missing = next((k for k in range(min(first_shard["of"], len(shards) + 1)) if k not in by_id), None)
    if missing is not None:
        raise InputError(f"shard {missing} of {first_shard['of']} is missing")
    ordered = [by_id[k] for k in range(first_shard["of"])]
    if "members" in first_shard:  # shards of batches: their members are checked as they are merged
        return ordered
    ends = [0] + [shard["last"] for shard, _, _ in ordered]
    for (shard, _, path), start in zip(ordered, ends):
        if shard["first"] != start:
            raise InputError(
                f"shard {shard['id']} starts at segment {shard['first']}, where the shards before it end at {start}",
                path,
            )
    if isinstance(first_shard.get("segments"), int) and ends[-1] != first_shard["segments"]:
        raise InputError(f"the shards end at segment {ends[-1]} of {first_shard['segments']}", first_path)
    return ordered


def _segment_owners(ordered: Shards) -> np.ndarray:
    """int64[S]: the shard (index in ``ordered``) holding each segment of a run sharded by
    batches.  Raises :class:`InputError`: shards holding more or fewer segments than the run's,
    a segment in two shards (then none is in no shard: the members are below S)."""
    total = ordered[0][0]["segments"]
    held = sum(len(shard["members"]) for shard, _, _ in ordered)
    if held != total:  # before any array of a (crafted) segment count is made
        raise InputError(f"the shards hold {held} segments of {total}", ordered[0][2])
    owner = np.full(total, -1, dtype=np.int64)
    for index, (shard, _, path) in enumerate(ordered):
        members = np.asarray(shard["members"], dtype=np.int64)
        taken = owner[members] >= 0
        if taken.any():
            segment = int(members[np.argmax(taken)])
            raise InputError(f"segment {segment} is in shard {int(owner[segment])} and in shard {shard['id']}", path)
        owner[members] = index
    return owner


def _shard_segments(shard: Dict[str, Any], path: str) -> Iterator[NBestList]:
    """The segments of a shard's list one by one, as many as its record holds.  Raises
    :class:`InputError`: a list holding another number of segments."""
    expected = len(shard["members"]) if "members" in shard else shard["last"] - shard["first"]
    written = 0
    if expected == 0 and os.path.isfile(path) and os.path.getsize(path) == 0:  # a shard dealt no unit
        return
    for _, block in iter_nbest(path):
        for k in range(block.num_segments):
            if written == expected:
                raise InputError(f"more segments than the {expected} shard {shard['id']} holds", path)
            yield block.subset(np.array([k]))
            written += 1
    if written != expected:
        raise InputError(f"{written} segments but shard {shard['id']} holds {expected}", path)


def _shard_lines(shard: Dict[str, Any], path: str) -> List[str]:
    """A text shard's lines (each with its newline).  Raises :class:`InputError`: another
    number of lines than its record holds, a last line cut short."""
    expected = len(shard["members"]) if "members" in shard else shard["last"] - shard["first"]
    with open_text(path) as part:  # rerank's reader: a byte that is not UTF-8 is named with its line
        lines = part.readlines()
    if len(lines) != expected:
        raise InputError(f"{len(lines)} lines but shard {shard['id']} holds {expected}", path)
    if lines and not lines[-1].endswith("\n"):
        raise InputError("its last line has no newline (a shard cut short?)", path, len(lines))
    return lines


def merge_shards(paths: Sequence[str], out: str) -> int:
    """Join the shards of one ``--num-shards N`` run (``paths``, in any order; :mod:`rerank.shards`)
    into ``out``, in segment order: the output one process would have written.  Lists
    (``features add``, ``generate``, ``nmt nbest``) are joined with their ids renumbered and a
    signature (``merged_from``); text outputs (``apply``/``mbr --out``, ``--out-1best``: a line
    per segment) are concatenated; the shards of batches of ``nmt nbest`` (their records list
    their ``members``) are interleaved.  Returns the number of segments.

    Raises:
        InputError: a file that is no shard (no shard record in its signature), shards of
            different runs (another input, another N, other scorers, columns or settings, a
            list mixed with text), a shard given twice or one missing, a segment in two shards
            or in none, a shard holding another number of segments than its record — naming
            the file or the shard.
    """
    ordered = _read_shards(paths)
    first_shard, first_record, first_path = ordered[0]
    total = first_shard.get("segments")  # optional for shards of blocks (first/last)
    if "members" in first_shard:  # shards of batches: each segment from the shard holding it
        owners = [int(k) for k in _segment_owners(ordered)]
    else:
        owners = [k for k, (shard, _, _) in enumerate(ordered) for _ in range(shard["last"] - shard["first"])]
    if not isinstance(total, int):
        total = len(owners)
    if first_shard.get("kind", "nbest") == "text":
        parts = [iter(_shard_lines(shard, path)) for shard, _, path in ordered]
        with StagedOutputs() as outputs:
            outputs.drop_signature(out)
            with outputs.open(out) as handle:
                handle.writelines(next(parts[k]) for k in owners)
        return total if isinstance(total, int) else len(owners)
    hypotheses = 0
    with StagedOutputs() as outputs:  # the list and its signature together
        with outputs.open(out) as handle:
            writer = NBestWriter(handle, out)
            segments = [_shard_segments(shard, path) for shard, _, path in ordered]
            for segment_id, k in enumerate(owners):
                block = next(segments[k])
                writer.write(block, segment_id)
                hypotheses += len(block.hypotheses)
            for rest in segments:  # a list holding more segments than its record says
                next(rest, None)
        record = {k: v for k, v in first_record.items() if k not in _SHARD_OWN + ("beam_feature", "feature_sets")}
        record.update(
            merged_from=[os.path.abspath(path) for _, _, path in ordered],
            hypotheses=hypotheses,
            seconds=round(sum(r.get("seconds", 0.0) for _, r, _ in ordered), 3),
        )
        if "segments" in first_record:
            record["segments"] = total
        write_list_info(outputs.signature(out), read_list_info(first_path), record)
    return total if isinstance(total, int) else len(owners)


#: signature entries of a shard that are its own, not the run's
_SHARD_OWN = ("shard", "signature", "hypotheses", "seconds", "scorer_seconds", "segments", "input")
#: the settings that the shards of one run share (paths and devices may differ between machines)
_SHARD_SETTINGS = (
    "scorers",
    "features",
    "model",
    "nbest",
    "beam",
    "block_hypotheses",
    "chunk_sentences",
    "sampling",
    "max_length",
    "config",
    "weights",
    "mbr",
)


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
