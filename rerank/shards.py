"""Shards: one command's work split across processes or machines, as fairseq-generate's
``--num-shards N --shard-id K`` and SLURM array jobs split it.

Where every segment is computed on its own (``apply``, ``mbr``), shard K of N holds the
K-th of N **contiguous blocks** of segments: segments ``K·S//N`` to ``(K+1)·S//N − 1`` of S
(blocks, not strides, so that joining shards is concatenation).  A sharded output numbers
its segments from 0 and records the shard in its signature (``OUT.json``: ``shard`` = id,
of, first, last, segments, input_sha256, kind), a text output (one line per segment:
``apply``/``mbr --out``, ``--out-1best``) too; ``rerank merge``
(:func:`merge_shards`) joins the shards of one run in segment order and
refuses a missing, duplicate or foreign shard.

Where a model computes several segments together, their results depend in the last digits on
which segments share the computation (a float sum's order, padding), so a shard holds **whole
units of the unsharded run, dealt round-robin** (:meth:`Shard.deal`: units K, K+N, K+2N…),
each computed exactly as one process computes it, and the merged outputs equal one process's
byte for byte (given the same torch threads per process):

- ``rerank nmt nbest``: fairseq's batches (the subset sorted by length, cut into batches of
  ``--batch-size``; fairseq-generate's ``--distributed-world-size N --distributed-rank K``);
- ``features add``: the list's blocks of whole segments (:func:`rerank.nbest.iter_nbest`, cut
  after ``--block-hypotheses`` hypotheses), one scorer call each;
- ``generate``: its chunks of ``--chunk-sentences`` sentences;
- ``translate``: its blocks of ``--block-sentences`` sentences, each decoded, scored and
  re-ranked on its own.

Such a shard's record lists its segments (``members``, ascending; no ``first``/``last``), its
outputs hold them in that order, and ``rerank merge`` interleaves the shards.  A ``features
add``, ``generate`` or ``nmt nbest`` shard may get no unit (fewer units than shards: the
workflow cannot know a list's size when it plans the shards): it writes empty outputs, which
the merge takes (``translate``, run by hand, refuses such a shard).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, TypeVar

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList, NBestWriter, count_segments, iter_nbest, read_list_info, write_list_info
from rerank.outputs import StagedOutputs, signature_path
from rerank.textio import file_digest, open_text, read_json

#: what :meth:`Shard.deal` deals: blocks of a list, chunks or blocks of sentences
Item = TypeVar("Item")


@dataclass(frozen=True)
class Shard:
    """Shard ``id`` of ``of`` (0 ≤ id < of)."""

    id: int
    of: int

    @classmethod
    def from_args(cls, num_shards: Optional[int], shard_id: Optional[int]) -> Optional["Shard"]:
        """The shard of ``--num-shards`` / ``--shard-id``, or None for neither.

        Raises:
            InputError: one without the other, or an id outside 0..N-1.
        """
        if (num_shards is None) != (shard_id is None):
            raise InputError("--num-shards and --shard-id go together (e.g. --num-shards 4 --shard-id 0)")
        if num_shards is None or shard_id is None:
            return None
        if not 0 <= shard_id < num_shards:
            raise InputError(f"--shard-id {shard_id} of --num-shards {num_shards}: ids run 0..{num_shards - 1}")
        return cls(shard_id, num_shards)

    def bounds(self, total: int, path: Optional[str] = None) -> Tuple[int, int]:
        """(first, last) segments of this shard of ``total`` (last exclusive).

        Raises:
            InputError: the shard holds no segment (more shards than segments), naming ``path``.
        """
        lo, hi = self.id * total // self.of, (self.id + 1) * total // self.of
        if hi <= lo:
            raise InputError(f"shard {self.id} of {self.of} holds no segment ({total} segments)", path)
        return lo, hi

    def batch_segments(self, total: int, batch_size: int) -> int:
        """How many of ``total`` segments this shard decodes when fairseq deals the subset's
        ``ceil(total / batch_size)`` batches round-robin (batches id, id+of, …; every batch
        holds ``batch_size`` segments but the last); 0 for a shard dealt no batch (more shards
        than batches)."""
        batches = -(-total // batch_size)
        return sum(min(batch_size, total - j * batch_size) for j in range(self.id, batches, self.of))

    def deal(self, items: Iterable[Item]) -> Iterator[Item]:
        """This shard's ``items`` (e.g. the ``(first, NBestList)`` blocks of
        :func:`rerank.nbest.iter_nbest`, the first sentences of chunks) dealt round-robin:
        items id, id+of, id+2·of, … unchanged (``first`` is still the list's own segment id)."""
        for index, item in enumerate(items):
            if index % self.of == self.id:
                yield item

    def member_record(self, total: int, input_path: str, members: Iterable[int], kind: str = "nbest") -> dict:
        """The signature's ``shard`` entry of a shard of batches (module docstring): as
        :meth:`record`, with the segments it holds (``members``, ascending) for ``first``/``last``."""
        return {
            "id": self.id,
            "of": self.of,
            "members": sorted(int(k) for k in members),
            "segments": total,
            "input_sha256": file_digest(input_path),
            "kind": kind,
        }

    @staticmethod
    def list_segments(path: str) -> int:
        """The segment count S of the n-best list ``path``, which a shard's record holds.

        Raises:
            InputError: standard input (no segment count before reading it).
        """
        total = count_segments(path)
        if total is None:
            raise InputError("shards need a list file (its segment count), not standard input", path)
        return total

    def list_bounds(self, path: str) -> Tuple[int, int, int]:
        """(first, last, S): this shard's block of the segments of the n-best list ``path``.

        Raises:
            InputError: standard input (no segment count before reading it), a shard holding
                no segment.
        """
        total = self.list_segments(path)
        lo, hi = self.bounds(total, path)
        return lo, hi, total

    @staticmethod
    def check_output(path: Optional[str]) -> None:
        """Refuse a shard written to standard output (``-``) or a device: its signature
        (``OUT.json``), which records the shard, needs a file beside it.

        Raises:
            InputError: ``path`` is not a plain file path.
        """
        if path is not None and (path == "-" or signature_path(path) is None):
            raise InputError(f"a shard's output must be a file, not {path!r} (OUT.json records the shard)")

    def record(self, total: int, input_path: str, kind: str = "nbest") -> dict:
        """The signature's ``shard`` entry for this shard of the ``total`` segments of
        ``input_path`` (its SHA-256 ties the shards of one run together); ``kind``: what
        the output is, ``nbest`` (a list) or ``text`` (a line per segment)."""
        lo, hi = self.bounds(total, input_path)
        return {
            "id": self.id,
            "of": self.of,
            "first": lo,
            "last": hi,
            "segments": total,
            "input_sha256": file_digest(input_path),
            "kind": kind,
        }


def shard_blocks(blocks: Iterable[tuple], lo: int, hi: int) -> Iterator[tuple]:
    """The blocks of :func:`rerank.nbest.iter_nbest` (``(first, NBestList)``) or
    :func:`rerank.nbest.iter_nbest_pair` (``(first, NBestList, NBestList)``) cut to the
    segments ``lo..hi-1``: yields the same tuples with ``first`` still the list's own segment
    id (subtract ``lo`` to number the shard from 0); stops reading after ``hi``."""
    for first, *parts in blocks:
        last = first + parts[0].num_segments
        if last <= lo:
            continue
        if first >= hi:
            break
        if first < lo or last > hi:
            keep = np.arange(max(lo, first), min(hi, last)) - first
            parts, first = [part.subset(keep) for part in parts], first + int(keep[0])
        yield (first, *parts)


__all__ = ["Shard", "shard_blocks"]


def cost_ranges(cumulative: np.ndarray, budget: int) -> List[Tuple[int, int]]:
    """Consecutive ranges ``[(first, last), ...]`` (last exclusive) of K items whose cost adds
    up to at most ``budget`` each, or one item where that alone costs more: a scorer's memory
    is bounded by its largest range, not by the list.

    Args:
        cumulative: int64[K] the items' cumulative cost (non-decreasing).
        budget: the most cost per range (> 0).
    """
    ranges, first, done = [], 0, 0
    while first < len(cumulative):
        last = max(first + 1, int(np.searchsorted(cumulative, done + budget, side="right")))
        ranges.append((first, last))
        done, first = int(cumulative[last - 1]), last
    return ranges


# --- reading, checking and merging the shards of one run (rerank merge) ---


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
        if "scores_from_search" in first_record:  # rerank generate's count: the shards' sum
            record["scores_from_search"] = sum(r.get("scores_from_search", 0) for _, r, _ in ordered)
        write_list_info(outputs.signature(out), read_list_info(first_path), record)
    return total if isinstance(total, int) else len(owners)


#: signature entries of a shard that are its own, not the run's
_SHARD_OWN = (
    "shard",
    "signature",
    "hypotheses",
    "seconds",
    "scorer_seconds",
    "segments",
    "input",
    "scores_from_search",
)
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
    "system",  # translate: the packed system's digest, and whether its output is tokenised
    "tokenized",
    "model_files",  # generate: its prompt template's digest
    "pseudo_refs_sha256",
)
