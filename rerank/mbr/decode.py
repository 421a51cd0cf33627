"""``rerank mbr``: MBR decoding of n-best lists (or of candidates against another list of
pseudo-references, e.g. samples), streamed a block of segments at a time, sharded."""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np

from rerank.errors import InputError
from rerank.mbr.decoders import Decoder
from rerank.mbr.engine import MBR
from rerank.mbr.exact import cross_expected
from rerank.mbr.prefilter import Prefilter, prefilter
from rerank.nbest import count_segments, iter_nbest, iter_nbest_pair
from rerank.outputs import StagedOutputs
from rerank.progress import Stages
from rerank.shards import Shard, shard_blocks
from rerank.signature import write_signed
from rerank.textio import file_digest


def mbr_decode(
    candidates_path: str,
    out: str,
    *,
    utility: str = "chrf",
    pseudo_refs_path: Optional[str] = None,
    weights_from: str = "NMT",
    temperature: float = 1.0,
    matrix_path: Optional[str] = None,
    decoder: Union[str, Decoder] = "exact",
    shard: Optional[Shard] = None,
    prefilters: Sequence[Union[str, Prefilter]] = (),
) -> Dict[str, Any]:
    """Minimum Bayes-risk decoding (Kumar & Byrne 2004): for every segment, the candidate the
    algorithm ``decoder`` selects (a registered name or a :class:`~rerank.mbr.decoders.Decoder`
    with its settings: :mod:`rerank.mbr.decoders`) by the expected ``utility`` (sentence
    BLEU, chrF, minus TER, COMET…) against the pseudo-references — the candidates
    themselves, or the same segment of ``pseudo_refs_path`` (e.g. samples) — weighted by the
    softmax of their ``weights_from`` column at ``temperature``, or uniformly; the first on
    ties.  The one engine of the ``mbr:`` scorer
    (:class:`~rerank.features.consensus.ConsensusScorer`), so the exact selection is the
    argmax of its column.  Writes the selections to ``out`` and, with ``matrix_path``
    (exact only), every utility as ``segment<TAB>candidate<TAB>pseudo-reference<TAB>utility``
    lines (the segment id of the whole list, candidate and pseudo-reference 0-based within
    the segment); both appear together or not at all.  The lists are streamed a block of
    segments at a time (:func:`rerank.nbest.iter_nbest_pair`); segment s's draws (centroid,
    pruned) are seeded by its id in the whole list, so shards select as one process does;
    ``shard``: only that block of segments (:mod:`rerank.shards`), ``out`` with a signature
    recording it.  ``prefilters``: stages (:mod:`rerank.mbr.prefilter`, or their
    specifications ``mbr:chrf,top_k=16``, ``column:CometKiwi,top_k=8``) that keep each
    segment's top K candidates, in order, before the algorithm chooses among what is left
    (their utilities are counted, their seconds are the stage ``prefilter``).  Returns {"segments", "expected" (the mean expected, aggregate or centroid
    utility of the selections; pruned: nan), "utilities" (how many were computed),
    "repeated" (of the exact algorithm's utilities, those of a (candidate, pseudo-reference)
    pair of texts that repeats within its segment: scored once, as a cache hit; other
    algorithms: None), "seconds" ({stage: seconds} of ``read``, ``weights``, ``utilities``
    (with the selection) and ``write``: mbrs' timer)}, the ``stages`` of a shard's record too.

    Raises:
        InputError: unreadable lists, lists of different segment counts, a missing column,
            an unknown algorithm, a matrix asked of another algorithm than exact, a shard of
            standard input or to standard output, or holding no segment.
    """
    scorer = MBR(utility, weights_from, temperature, decoder)
    algorithm = scorer.decoder.name
    if algorithm != "exact" and matrix_path:
        raise InputError(f"--matrix needs --algorithm exact: the {algorithm} algorithm scores no full matrix")
    stages_given = [stage if isinstance(stage, Prefilter) else Prefilter.parse(stage) for stage in prefilters]
    if stages_given and matrix_path:
        raise InputError("--matrix writes every candidate's utilities: not with --prefilter")
    filters = [(stage, stage.engine(weights_from, temperature)) for stage in stages_given]  # before any work
    lo, hi, total = 0, 0, 0  # the whole list (set for a shard)
    if shard is not None:
        lo, hi, total = shard.list_bounds(candidates_path)
        shard.check_output(out)
    if pseudo_refs_path:
        counts = [count_segments(path) for path in (candidates_path, pseudo_refs_path)]
        if None not in counts and counts[0] != counts[1]:  # before any work
            raise InputError(
                f"{counts[1]} segments in the pseudo-references but {counts[0]} in the candidates", pseudo_refs_path
            )
        blocks = iter_nbest_pair(candidates_path, pseudo_refs_path)
    else:
        blocks = ((first, block, block) for first, block in iter_nbest(candidates_path))
    if shard is not None:
        blocks = shard_blocks(blocks, lo, hi)
    segments, utilities, expected_sum, repeated = 0, 0, 0.0, 0
    stages = Stages()
    with StagedOutputs() as outputs, contextlib.ExitStack() as stack:
        handle = stack.enter_context(outputs.open(matrix_path)) if matrix_path else None
        best = stack.enter_context(outputs.open(out))
        for first, candidates, refs in stages.timed(blocks, "read"):
            with stages.measure("weights"):
                scorer.begin_list(first)  # COMET: segment 0 of the block among its sources
                p = scorer.distribution(refs)
            rows = None
            if stages_given:
                with stages.measure("prefilter"):
                    kept, rows, filtered = prefilter(filters, candidates, refs, p, first)
                utilities += filtered
            else:
                kept = candidates
            if algorithm == "exact":
                repeated += repeated_pairs(kept, refs)
            with stages.measure("utilities"):
                chosen, computed, chosen_sum = _select(scorer, kept, refs, p, first, handle)
            if rows is not None:
                chosen = rows[chosen]
            utilities += computed
            expected_sum += chosen_sum
            with stages.measure("write"):
                best.writelines(candidates.hypotheses[i] + "\n" for i in chosen)
            segments += candidates.num_segments
        if shard is not None:
            record = {
                "shard": shard.record(total, candidates_path, "text"),
                "input": candidates_path,
                "segments": segments,
                "mbr": {
                    "metric": utility,
                    "algorithm": algorithm,
                    "weights_from": weights_from,
                    "temperature": temperature,
                    "pseudo_refs_sha256": file_digest(pseudo_refs_path) if pseudo_refs_path else None,
                    "prefilters": [str(stage) for stage in stages_given],
                    **scorer.decoder.settings(),
                },
                "stages": {
                    "utilities": utilities,
                    "repeated": repeated if algorithm == "exact" else None,
                    "seconds": stages.rounded(),
                },
            }
            write_signed(outputs.signature(out), record)
    return {
        "segments": segments,
        "expected": expected_sum / max(segments, 1),
        "utilities": utilities,
        "repeated": repeated if algorithm == "exact" else None,
        "seconds": stages.rounded(),
    }


def _select(scorer: MBR, candidates, refs, p, first: int, handle) -> Tuple[np.ndarray, int, float]:
    """The decoder's (selections, utilities computed, sum of their expected utilities) of one
    block; with ``handle`` (exact's ``--matrix``), every utility written as it is computed."""
    if handle is None:
        return scorer.select(candidates, refs, p, first)

    def write(segment, hyp, ref, values):
        rows = zip(hyp.tolist(), ref.tolist(), values.tolist())
        handle.writelines(f"{first + segment}\t{h}\t{r}\t{v!r}\n" for h, r, v in rows)

    expected = cross_expected(scorer, candidates, refs, p, write)
    return scorer.decoder.selection(candidates, refs, expected)


def repeated_pairs(candidates, refs) -> int:
    """Of the n × m (candidate, pseudo-reference) pairs of every segment, those whose pair of
    texts is another pair's too (a text repeats: samples do), which MBR scores once: Σ over
    segments of n·m − (distinct candidates)·(distinct pseudo-references)."""
    total = 0
    for s in range(candidates.num_segments):
        c0, c1 = candidates.offsets[s], candidates.offsets[s + 1]
        r0, r1 = refs.offsets[s], refs.offsets[s + 1]
        cands, pseudo = candidates.hypotheses[c0:c1], refs.hypotheses[r0:r1]
        total += len(cands) * len(pseudo) - len(set(cands)) * len(set(pseudo))
    return total
