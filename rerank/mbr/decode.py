"""``rerank mbr``: MBR decoding of n-best lists (or of candidates against another list of
pseudo-references, e.g. samples), streamed a block of segments at a time, sharded."""

from __future__ import annotations

import contextlib
import os
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from rerank.errors import InputError
from rerank.mbr.decoders import Decoder
from rerank.mbr.engine import MBR
from rerank.mbr.exact import cross_expected
from rerank.mbr.kbest import LocalSearch, keep_best
from rerank.mbr.prefilter import Prefilter, prefilter
from rerank.nbest import NBestWriter, count_segments, iter_nbest, iter_nbest_pair
from rerank.outputs import StagedOutputs, signature_path
from rerank.progress import Stages
from rerank.shards import Shard, shard_blocks
from rerank.signature import write_signed
from rerank.textio import file_digest, read_json


def mbr_decode(
    candidates_path: str,
    out: str,
    *,
    utility: str = "chrf",
    pseudo_refs_path: Optional[str] = None,
    weights_from: Optional[str] = None,
    temperature: float = 1.0,
    matrix_path: Optional[str] = None,
    decoder: Union[str, Decoder] = "exact",
    shard: Optional[Shard] = None,
    prefilters: Sequence[Union[str, Prefilter]] = (),
    keep: int = 1,
    kbest_path: Optional[str] = None,
    diversity: float = 0.0,
    local_search: Optional[LocalSearch] = None,
) -> Dict[str, Any]:
    """Minimum Bayes-risk decoding (Kumar & Byrne 2004): for every segment, the candidate the
    algorithm ``decoder`` selects (a registered name or a :class:`~rerank.mbr.decoders.Decoder`
    with its settings: :mod:`rerank.mbr.decoders`) by the expected ``utility`` (sentence
    BLEU, chrF, minus TER, COMET…) against the pseudo-references — the candidates
    themselves, or the same segment of ``pseudo_refs_path`` (e.g. samples) — weighted by the
    softmax of their ``weights_from`` column at ``temperature`` (None: the list's model column,
    the one its signature's beam feature normalises), or uniformly (``uniform``); the first on
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
    (their utilities are counted, their seconds are the stage ``prefilter``).  ``kbest_path``:
    also the ``keep`` best distinct candidates of every segment (with ``diversity`` λ > 0, the
    diverse set: :mod:`rerank.mbr.kbest`, greedy then ``local_search``, default
    :class:`~rerank.mbr.kbest.LocalSearch` ()) as an n-best list whose column is the expected
    utility, best first (an algorithm that gives every candidate an expected utility only).
    Returns {"segments", "expected" (the mean expected, aggregate or centroid utility of the
    selections; None for an algorithm that only selects: pruned, halving), "settings" (the
    algorithm's Config), "utilities" (how many were computed),
    "repeated" (of the exact algorithm's utilities, those of a (candidate, pseudo-reference)
    pair of texts that repeats within its segment: scored once, as a cache hit; other
    algorithms: None), "seconds" ({stage: seconds} of ``read``, ``weights``, ``utilities``
    (with the selection) and ``write``: mbrs' timer), and with COMET "utility" (its encoder's and
    estimator's rows and seconds, its load: :meth:`~rerank.metrics.comet.CometUtility.accounting`),
    "warnings" (what the algorithm says of lists of these sizes: an approximation that cannot pay,
    :meth:`~rerank.mbr.decoders.Decoder.advice`)},
    the ``stages`` of a shard's record too.

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
    search = local_search or LocalSearch()
    if kbest_path is not None:
        _check_kbest(scorer, keep, diversity, shard)
        search.check()
    filters = [(stage, stage.engine(weights_from, temperature)) for stage in stages_given]
    run = _Run(scorer, filters, keep, diversity, search)
    run.refs_path = pseudo_refs_path or candidates_path
    blocks, total = _blocks(candidates_path, pseudo_refs_path, shard, out)
    with StagedOutputs() as outputs, contextlib.ExitStack() as stack:
        handle = stack.enter_context(outputs.open(matrix_path)) if matrix_path else None
        best = stack.enter_context(outputs.open(out))
        kbest = NBestWriter(stack.enter_context(outputs.open(kbest_path)), kbest_path) if kbest_path else None
        for first, candidates, refs in run.stages.timed(blocks, "read"):
            chosen = run.block(first, candidates, refs, handle, kbest)
            with run.stages.measure("write"):
                best.writelines(candidates.hypotheses[i] + "\n" for i in chosen)
        settings: Dict[str, Any] = {"metric": utility, "algorithm": algorithm, "weights_from": weights_from}
        settings["temperature"] = temperature
        settings["pseudo_refs_sha256"] = file_digest(pseudo_refs_path) if pseudo_refs_path not in (None, "-") else None
        settings["prefilters"] = [str(stage) for stage in stages_given]
        record = {"input": candidates_path, "segments": run.segments, "mbr": {**settings, **scorer.decoder.settings()}}
        record["stages"] = run.counts()
        if shard is not None:
            write_signed(outputs.signature(out), {"shard": shard.record(total, candidates_path, "text"), **record})
        else:  # the selections are plain text: a signature of an earlier run beside them goes
            outputs.drop_signature(out)
        if kbest_path is not None:  # the K-best list is signed as every list rerank writes
            kbest_info = {"keep": keep, "diversity": diversity}
            write_signed(outputs.signature(kbest_path), {**record, "kbest": kbest_info})
    # an algorithm that only selects estimates no expected utility: null, not NaN (valid JSON)
    expected = run.expected_sum / max(run.segments, 1) if scorer.decoder.gives_column else None
    summary = {"segments": run.segments, "expected": expected, "settings": scorer.decoder.settings(), **run.counts()}
    return {**summary, "warnings": run.warnings}


def _blocks(candidates_path: str, pseudo_refs_path: Optional[str], shard: Optional[Shard], out: str):
    """(the blocks (first segment, candidates, pseudo-references) to decode, the list's segment
    count for a shard's record, else 0); a shard's output and the two lists' segment counts
    checked before any work."""
    lo, hi, total = 0, 0, 0  # the whole list (set for a shard)
    if shard is not None:
        lo, hi, total = shard.list_bounds(candidates_path)
        shard.check_output(out)
    if pseudo_refs_path:
        counts = [count_segments(path) for path in (candidates_path, pseudo_refs_path)]
        if None not in counts and counts[0] != counts[1]:
            raise InputError(
                f"{counts[1]} segments in the pseudo-references but {counts[0]} in the candidates", pseudo_refs_path
            )
        _check_same_source(candidates_path, pseudo_refs_path)
        blocks: Iterator = iter_nbest_pair(candidates_path, pseudo_refs_path)
    else:
        blocks = ((first, block, block) for first, block in iter_nbest(candidates_path))
    if shard is not None:
        blocks = shard_blocks(blocks, lo, hi)
    return blocks, total


def _check_same_source(candidates_path: str, pseudo_refs_path: str) -> None:
    """Refuse pseudo-references generated from other sentences than the candidates: both lists'
    signatures (``rerank generate``'s ``input_sha256``), where both record one, must name the
    same input.

    Raises:
        InputError: the two inputs differ, naming the pseudo-references' list and both inputs."""
    digests = []
    for path in (candidates_path, pseudo_refs_path):
        side = signature_path(path) if path != "-" else None
        record = read_json(side) if side and os.path.isfile(side) else {}
        digests.append((record.get("input_sha256"), record.get("input")) if isinstance(record, dict) else (None, None))
    (ours, our_input), (theirs, their_input) = digests
    if isinstance(ours, str) and isinstance(theirs, str) and ours != theirs:
        raise InputError(
            f"the pseudo-references were generated from other sentences ({their_input}) than the candidates "
            f"({our_input}): their inputs' SHA-256 differ",
            pseudo_refs_path,
        )


class _Run:
    """One run of :func:`mbr_decode`: its engine, pre-filters and K-best settings, and what it
    has done (segments, utilities, repeated pairs, the selections' expected utilities, seconds)."""

    def __init__(self, scorer: MBR, filters, keep: int, diversity: float, search: LocalSearch):
        self.scorer, self.filters, self.keep, self.diversity, self.search = scorer, filters, keep, diversity, search
        self.stages = Stages()
        self.segments, self.utilities, self.repeated, self.expected_sum = 0, 0, 0, 0.0
        self.refs_path: Optional[str] = None  # the file of the pseudo-references, for messages
        self.warnings: List[str] = []  # what the algorithm says of lists of these sizes

    def block(self, first: int, candidates, refs, handle, kbest: Optional[NBestWriter]) -> np.ndarray:
        """The selected rows int64[N] of one block (pre-filters, the algorithm, the K best); on the
        first, the algorithm's word on lists of these sizes (:attr:`warnings`)."""
        stages, scorer = self.stages, self.scorer
        if not self.segments:
            advice = scorer.decoder.advice(np.diff(candidates.offsets), np.diff(refs.offsets))
            self.warnings += [advice] if advice else []
        with stages.measure("weights"):
            scorer.begin_list(first)  # COMET: segment 0 of the block among its sources
            p = scorer.distribution(refs, self.refs_path)
        kept, rows = candidates, None
        if self.filters:
            with stages.measure("prefilter"):
                kept, rows, filtered = prefilter(self.filters, candidates, refs, p, first)
            self.utilities += filtered
        if scorer.decoder.name == "exact":
            self.repeated += repeated_pairs(kept, refs)
        with stages.measure("utilities"):
            chosen, computed, chosen_sum, expected = _select(scorer, kept, refs, p, first, handle, kbest is not None)
        if kbest is not None and expected is not None:
            with stages.measure("kbest"):
                listed, diverse = keep_best(scorer, kept, expected, self.keep, self.diversity, self.search, first)
            with stages.measure("write"):
                kbest.write(listed, first)
            computed += diverse
        self.utilities += computed
        self.expected_sum += chosen_sum
        self.segments += candidates.num_segments
        return chosen if rows is None else rows[chosen]

    def counts(self) -> Dict[str, Any]:
        """{"utilities", "repeated" (exact only, else None), "seconds" {stage: seconds}, and for a
        utility with parts of its own (COMET) "utility": its
        :meth:`~rerank.metrics.utility.PairwiseUtility.accounting`}."""
        exact = self.scorer.decoder.name == "exact"
        counts = {
            "utilities": self.utilities,
            "repeated": self.repeated if exact else None,
            "seconds": self.stages.rounded(),
        }
        accounting = self.scorer.utility.accounting()
        return {**counts, "utility": accounting} if accounting else counts


def _select(
    scorer: MBR, candidates, refs, p, first: int, handle, want_expected: bool
) -> Tuple[np.ndarray, int, float, Optional[np.ndarray]]:
    """The decoder's (selections, utilities computed, sum of their expected utilities, every
    candidate's expected utility where ``want_expected`` or ``handle``, else None) of one block;
    with ``handle`` (exact's ``--matrix``), every utility written as it is computed."""
    if handle is not None:

        def write(segment, hyp, ref, values):
            rows = zip(hyp.tolist(), ref.tolist(), values.tolist())
            handle.writelines(f"{first + segment}\t{h}\t{r}\t{v!r}\n" for h, r, v in rows)

        expected = scorer.check_finite(cross_expected(scorer, candidates, refs, p, write), candidates, first)
        computed = int((np.diff(candidates.offsets) * np.diff(refs.offsets)).sum())
    elif want_expected:  # estimates are checked finite by the decoder
        expected, computed = scorer.decoder.estimates(scorer, candidates, refs, p, first)
    else:
        return (*scorer.select(candidates, refs, p, first), None)
    return (*scorer.decoder.selection(candidates, expected, computed), expected)


def _check_kbest(scorer: MBR, keep: int, diversity: float, shard: Optional[Shard]) -> None:
    """Refuse K-best choices the run cannot give (before any work)."""
    if not scorer.decoder.gives_column:
        raise InputError(f"--out-kbest needs expected utilities: the {scorer.decoder.name} algorithm only selects")
    if keep < 1 or not diversity >= 0:
        raise InputError(f"--keep must be at least 1 and --diversity non-negative, not {keep} and {diversity}")
    if shard is not None:
        raise InputError("--out-kbest is not written in shards: run it on the whole list")


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
