"""Shards: one command's work split across processes or machines, as fairseq-generate's
``--num-shards N --shard-id K`` and SLURM array jobs split it.

Where every segment is computed on its own (``apply``, ``mbr``), shard K of N holds the
K-th of N **contiguous blocks** of segments: segments ``K·S//N`` to ``(K+1)·S//N − 1`` of S
(blocks, not strides, so that joining shards is concatenation).  A sharded output numbers
its segments from 0 and records the shard in its signature (``OUT.json``: ``shard`` = id,
of, first, last, segments, input_sha256, kind), a text output (one line per segment:
``apply``/``mbr --out``, ``--out-1best``) too; ``rerank merge``
(:func:`rerank.reranking.merge_shards`) joins the shards of one run in segment order and
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

from dataclasses import dataclass
from typing import Iterable, Iterator, List, Optional, Tuple, TypeVar

import numpy as np

from rerank.errors import InputError
from rerank.nbest import count_segments
from rerank.outputs import signature_path
from rerank.textio import file_digest

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
