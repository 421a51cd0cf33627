"""``rerank features add`` as a library function: append the columns of one or more
scorers to an n-best list, streamed block by block (:func:`rerank.nbest.iter_nbest`):
every scorer is per segment, so memory is bounded by a block (and the models), not by
the list.  The output's signature carries the list settings on and records the new
columns' feature sets (:meth:`rerank.features.scorer.Scorer.feature_sets`)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from rerank.devices import DeviceSettings
from rerank.embed.data import align_images, load_image_features
from rerank.errors import InputError
from rerank.features.scorer import Scorer, make_scorer
from rerank.folds import read_folds
from rerank.nbest import BLOCK_HYPOTHESES, ListInfo, NBestList, NBestWriter, count_segments, iter_nbest, write_list_info
from rerank.outputs import StagedOutputs
from rerank.progress import progress_bar
from rerank.shards import Shard
from rerank.textio import read_lines


@dataclass
class ScoringInputs:
    """What scorers read beside the list (paths; None when not given): ``source`` (one
    preprocessed source sentence per segment), ``images`` (a CNN feature matrix) with
    ``image_split`` (its image names) and ``segment_images`` (each segment's image), and
    ``folds`` (a folds file: fold k's segments are scored by the scorer whose spec has
    ``{fold}`` replaced by k, cross-fitting)."""

    source: Optional[str] = None
    images: Optional[str] = None
    image_split: Optional[str] = None
    segment_images: Optional[str] = None
    folds: Optional[str] = None


class ScorerCache:
    """Each scorer built once (loading a model, training IBM Model 1's tables: often the
    expensive part), on first use; ``build_seconds[spec]``: the seconds each took to build."""

    def __init__(self, make: Callable[[str], Scorer] = make_scorer):
        self._make = make
        self._built: Dict[str, Scorer] = {}
        self.build_seconds: Dict[str, float] = {}

    def get(self, spec: str, progress: bool) -> Scorer:
        if spec not in self._built:
            began = time.perf_counter()
            self._built[spec] = self._make(spec)
            self.build_seconds[spec] = time.perf_counter() - began
        scorer = self._built[spec]
        scorer.progress = progress
        return scorer

    def by_fold(
        self, spec: str, nbest: NBestList, sources, images, fold: np.ndarray, k: int, progress: bool
    ) -> Dict[str, np.ndarray]:
        """Cross-fitted scoring (rerank/folds.py): the segments of fold f (``fold``: int[N],
        the fold of each of ``nbest``'s segments) are scored by the scorer of ``spec`` with
        ``{fold}`` replaced by f; returns the columns over the whole list."""
        columns: Dict[str, np.ndarray] = {}
        for f in range(k):
            held = np.flatnonzero(fold == f)
            if not len(held):
                continue
            rows = nbest.rows_of(held)
            part = self.get(spec.replace("{fold}", str(f)), progress).score(
                nbest.subset(held),
                None if sources is None else [sources[s] for s in held],
                None if images is None else images[held],
            )
            for name, values in part.items():
                values = np.asarray(values, dtype=np.float64)
                if name not in columns:
                    columns[name] = np.zeros((len(nbest.hypotheses),) + values.shape[1:])
                columns[name][rows] = values
        return columns

    def feature_sets(self, spec: str, has_images: bool) -> Dict[str, List[str]]:
        """The feature sets of ``spec`` (fold 0's scorer for a ``{fold}`` spec)."""
        return self.get(spec.replace("{fold}", "0"), False).feature_sets(has_images)


def check_new_columns(
    names: Sequence[str], specs: Sequence[str], scorers: ScorerCache, has_images: bool, source: Optional[str]
) -> None:
    """Before any scoring: the columns the scorers ``specs`` will add must be new to the
    list (``names``) and to each other (the scorers are built, their models loaded, but
    nothing is scored; ``{fold}`` specs are asked through fold 0's model).

    Raises:
        InputError: naming ``source``, a column the list already has or two scorers give.
    """
    seen = set(names)
    for spec in specs:
        for name in scorers.get(spec.replace("{fold}", "0"), False).names(has_images):
            if name in seen:
                where = "is already in the n-best list" if name in names else "is given by two scorers"
                raise InputError(f"feature {name!r} {where}", source)
            seen.add(name)


def score_block(
    block: NBestList,
    specs: Sequence[str],
    scorers: ScorerCache,
    sources: Optional[Sequence[str]],
    images: Optional[np.ndarray],
    fold: Optional[np.ndarray] = None,
    k: int = 0,
    progress: bool = False,
    timings: Optional[Dict[str, float]] = None,
    source: Optional[str] = None,
) -> NBestList:
    """``block`` with the columns of every scorer of ``specs`` appended (``sources``,
    ``images`` and ``fold`` are the block's segments'; ``{fold}`` specs are scored fold by
    fold, :meth:`ScorerCache.by_fold`); ``timings[spec]`` accumulates seconds.

    Raises:
        InputError: naming ``source``, a column already in the list.
    """
    for spec in specs:
        built = sum(scorers.build_seconds.values())
        began = time.perf_counter()
        columns = (
            scorers.by_fold(spec, block, sources, images, fold, k, progress)
            if "{fold}" in spec and fold is not None
            else scorers.get(spec, progress).score(block, sources, images)
        )
        for name, values in columns.items():
            if name in block.feature_names:
                raise InputError(f"feature {name!r} is already in the n-best list", source)
            block = block.add_feature(name, values)
        if timings is not None:  # scoring only: a scorer built on the way is counted as built
            took = time.perf_counter() - began - (sum(scorers.build_seconds.values()) - built)
            timings[spec] = timings.get(spec, 0.0) + took
    return block


def add_columns(
    nbest: NBestList,
    specs: Sequence[str],
    sources: Optional[Sequence[str]] = None,
    images: Optional[np.ndarray] = None,
    scorers: Optional[ScorerCache] = None,
) -> NBestList:
    """In memory: ``nbest`` with the columns of the scorers ``specs`` appended and their
    feature sets added to its :class:`~rerank.nbest.ListInfo` (what :func:`add_features`
    does to a file, for a list that fits in memory; the Python API's ``add_features``).

    Args:
        sources: N source sentences (scorers that read them: ``nmt:``, ``e5:``, ``mlmme:``…).
        images: float[N, D] one CNN feature row per segment (``mlmme:``'s s_i).
    Raises:
        InputError: an unknown or unbuildable scorer, ``sources``/``images`` of another
            segment count, a column already in the list.
    """
    for name, values in (("sources", sources), ("images", images)):
        if values is not None and len(values) != nbest.num_segments:
            raise InputError(f"{len(values)} {name} but the n-best list has {nbest.num_segments} segments")
    if any("{fold}" in spec for spec in specs):
        raise InputError("{fold} scorers need a folds file: use rerank features add --folds")
    scorers = scorers or ScorerCache()
    check_new_columns(nbest.feature_names, specs, scorers, images is not None, None)
    out = score_block(nbest, specs, scorers, sources, images)
    info = out.info
    for spec in specs:
        info = info.with_sets(scorers.feature_sets(spec, images is not None))
    return NBestList(out.offsets, out.hypotheses, out.features, out.feature_names, out.totals, info)


def _declare_beam(info: ListInfo, beam: Tuple[str, Sequence[str]], names: Sequence[str], source: str) -> ListInfo:
    """``info`` with ``beam`` = (feature, columns) as its beam feature and ``beam`` set."""
    feature, columns = beam[0], list(dict.fromkeys(beam[1]))
    if info.beam_feature is not None:
        raise InputError(
            f"the list already declares beam feature {info.beam_feature!r}: --beam-feature is for "
            "lists without one (e.g. rerank union's)",
            source,
        )
    unknown = [c for c in [feature] + columns if c not in names]
    if unknown:
        raise InputError(
            f"--beam-feature/--beam-set: {unknown[0]!r} is not a column of the result "
            f"({' '.join(dict.fromkeys(names))})",
            source,
        )
    if feature not in columns:
        raise InputError(f"--beam-set must include the beam feature {feature!r}", source)
    return ListInfo(feature, {**info.feature_sets, "beam": columns}, True)


def _segment_inputs(inputs: ScoringInputs, specs: Sequence[str]):
    """(sources, images, folds, [(path, per-segment values)…]) of ``inputs``: the source
    lines, the segments' image rows, the folds, each read once.

    Raises:
        InputError: ``--images`` without its split files, ``{fold}`` without folds or folds
            without ``{fold}``, an image a segment names that the matrix lacks.
    """
    sources = read_lines(inputs.source) if inputs.source else None
    images = None
    if inputs.images:
        if not (inputs.image_split and inputs.segment_images):
            raise InputError("--images needs --image-split (rows of the matrix) and --segment-images (one per segment)")
        names, matrix = load_image_features(inputs.images, inputs.image_split)
        images, _ = align_images(read_lines(inputs.segment_images), names, matrix, require_all=True)
    folds = read_folds(inputs.folds) if inputs.folds else None
    for spec in specs:
        if "{fold}" in spec and folds is None:
            raise InputError(f"--scorer {spec}: {{fold}} needs --folds")
    if folds is not None and not any("{fold}" in spec for spec in specs):
        raise InputError("--folds given but no --scorer has {fold} in its argument")
    per_segment = [
        (path, values)
        for path, values in (
            (inputs.source, sources),
            (inputs.segment_images, images),
            (inputs.folds, None if folds is None else folds.fold),
        )
        if values is not None
    ]
    return sources, images, folds, per_segment


def add_features(
    nbest_path: str,
    specs: Sequence[str],
    out: str,
    inputs: ScoringInputs = ScoringInputs(),
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    devices: Optional[DeviceSettings] = None,
    beam: Optional[Tuple[str, Sequence[str]]] = None,
    shard: Optional[Shard] = None,
    block_hypotheses: int = BLOCK_HYPOTHESES,
    scorers: Optional[ScorerCache] = None,
) -> Dict:
    """Append the columns of the scorers ``specs`` (``NAME:ARG``, :func:`make_scorer`; model
    scorers on ``devices``) to the list ``nbest_path`` and write it to ``out`` with its
    signature ``out.json`` (together or not at all).  Returns the signature's record.

    ``scorers``: the scorers built so far (:class:`ScorerCache` of :func:`make_scorer` on
    ``devices``), kept for the next call — ``rerank translate`` scores its blocks with the
    models loaded once; None: built here.

    ``beam`` = (feature, columns) declares, in the signature, ``feature`` the list's beam
    feature and ``columns`` its ``beam`` feature set: for a list whose decoder's scores
    are added here, e.g. a union of lists (:func:`rerank.reranking.union_files`) scored
    by forced decoding under the first list's model, so that ``rerank tune`` starts from
    that model's ranking again.

    The list is scored in blocks of whole segments, each cut after more than
    ``block_hypotheses`` hypotheses (:func:`rerank.nbest.iter_nbest`), one scorer call per
    block: a neural scorer batches a call's hypotheses together, and its scores depend in
    their last digits on the block.  ``shard``: score only that shard, blocks K, K+N, …
    (:meth:`rerank.shards.Shard.deal`), each as one process scores it, written as a list of
    its own (ids from 0) whose signature records its segments (``members``) and the input's
    SHA-256, for :func:`rerank.shards.merge_shards` (a shard without a block: an empty list).

    Raises:
        InputError: an unknown or unbuildable scorer, inputs of another segment count, a
            column already in the list, ``{fold}`` without folds or folds without ``{fold}``;
            a ``beam`` whose feature or columns are not columns of the result, whose
            feature is not among its columns, or on a list that declares a beam feature.
    """
    sources, images, folds, per_segment = _segment_inputs(inputs, specs)
    shard_total = _checked_counts(nbest_path, per_segment, shard)
    scorers = scorers or ScorerCache(lambda spec: make_scorer(spec, devices))
    start = time.perf_counter()
    segments, hypotheses, names = 0, 0, []
    members: List[int] = []
    info = ListInfo()
    bar = progress_bar(desc="features add", unit="hyp")
    timings, parts = {spec: 0.0 for spec in specs}, {"reading": 0.0, "writing": 0.0}
    with StagedOutputs() as outputs:  # the list and its signature appear together
        with outputs.open(out) as handle:
            writer = NBestWriter(handle, out)
            blocks = _timed(iter_nbest(nbest_path, block_hypotheses), parts)
            for first, block in blocks if shard is None else shard.deal(blocks):
                last = first + block.num_segments
                _check_input_lines(per_segment, last, exact=False)
                if not members:  # column clashes before the first block is scored
                    check_new_columns(block.feature_names, specs, scorers, images is not None, nbest_path)
                given = (sources, images, folds)  # the scorers' own bars for the first block only:
                block = _score_segments(block, first, specs, scorers, given, not members, timings, nbest_path)
                if beam is not None and not members:  # a beam that does not fit: refused after the first block
                    _declare_beam(block.info, beam, block.feature_names, nbest_path)
                began = time.perf_counter()
                writer.write(block, len(members))
                parts["writing"] += time.perf_counter() - began
                members.extend(range(first, last))
                segments, hypotheses, names = last, hypotheses + len(block.hypotheses), block.feature_names
                info = block.info
                bar.update(len(block.hypotheses))
        bar.close()
        _check_input_lines(per_segment, segments, exact=shard is None)
        seconds = time.perf_counter() - start
        built = _say_scorer_seconds(say, specs, scorers, timings, hypotheses)
        parts.update(building=sum(built.values()), scoring=sum(timings.values()))
        if members:  # a shard without a block has no columns to declare
            info = _declared_sets(info, specs, scorers, names, images is not None, beam, nbest_path)
        record = {
            "input": nbest_path,
            "scorers": list(specs),
            "devices": None if devices is None else {"device": devices.device, "dtype": devices.dtype},
            "source": inputs.source,
            "images": inputs.images,
            "folds": inputs.folds,
            "beam": None if beam is None else [beam[0], list(beam[1])],
            "block_hypotheses": block_hypotheses,
            "features": names,
            "hypotheses": hypotheses,
            "seconds": round(seconds, 3),
            "scorer_seconds": {k: round(v, 3) for k, v in timings.items()},
            "build_seconds": {k: round(v, 3) for k, v in built.items()},
            "phase_seconds": {k: round(v, 3) for k, v in parts.items()},
        }
        if shard is not None:
            record["shard"] = shard.member_record(shard_total, nbest_path, members)
        write_list_info(outputs.signature(out), info, record, ["torch", "numpy"])
    _say_phases(say, hypotheses, seconds, parts, names)
    return record


def _check_input_lines(per_segment: List[Tuple[str, Sequence]], segments: int, exact: bool) -> None:
    """Each per-segment input holds a line for each of the list's first ``segments`` segments
    (while blocks are read), or ``exact``-ly as many (after the last block of a whole list).
    InputError: naming the file."""
    for path, values in per_segment:
        if len(values) < segments:
            raise InputError(f"{len(values)} lines but the n-best list has more segments", path)
        if exact and len(values) != segments:
            raise InputError(f"{len(values)} lines but {segments} segments in the n-best list", path)


def _score_segments(
    block: NBestList,
    first: int,
    specs: Sequence[str],
    scorers: ScorerCache,
    given: Tuple[Any, Any, Any],
    progress: bool,
    timings: Dict[str, float],
    nbest_path: str,
) -> NBestList:
    """:func:`score_block` of a block whose first segment is segment ``first`` of the list,
    with its segments' part of the per-segment inputs ``given`` (sources, images, folds)."""
    sources, images, folds = given
    last = first + block.num_segments
    return score_block(
        block,
        specs,
        scorers,
        None if sources is None else sources[first:last],
        None if images is None else images[first:last],
        None if folds is None else folds.fold[first:last],
        0 if folds is None else folds.k,
        progress=progress,
        timings=timings,
        source=nbest_path,
    )


def _say_phases(
    say: Callable[[str], None], hypotheses: int, seconds: float, parts: Dict[str, float], names: List[str]
) -> None:
    """Say where a run's seconds went: building, reading, scoring, writing, the rest."""
    rest = seconds - sum(parts.values())
    say(
        f"{hypotheses} hypotheses in {seconds:.1f} s: building the scorers {parts['building']:.1f} s, reading the "
        f"list {parts['reading']:.1f} s, scoring {parts['scoring']:.1f} s ({hypotheses / max(parts['scoring'], 1e-9):.0f}"
        f"/s), writing {parts['writing']:.1f} s, the rest (inputs, checks, signature) {max(rest, 0.0):.1f} s; "
        f"features: {' '.join(names)}"
    )


def _checked_counts(nbest_path: str, per_segment: List[Tuple[str, Sequence]], shard: Optional[Shard]) -> int:
    """Before the first model call: every per-segment input (sources, images, folds) has one
    line per segment of the list (of the shard's list); returns the shard's segment count
    (0 without a shard). InputError: another count, naming the file."""
    total = count_segments(nbest_path)
    shard_total = 0
    if shard is not None:
        total = shard_total = shard.list_segments(nbest_path)
    if total is not None:
        for path, values in per_segment:
            if len(values) != total:
                raise InputError(f"{len(values)} lines but the n-best list has {total} segments", path)
    return shard_total


def _say_scorer_seconds(
    say: Callable[[str], None], specs: Sequence[str], scorers: ScorerCache, timings: Dict[str, float], hypotheses: int
) -> Dict[str, float]:
    """Say each scorer's building and scoring seconds; returns {spec: building seconds}."""
    built = {spec: scorers.build_seconds.get(spec.replace("{fold}", "0"), 0.0) for spec in specs}
    for spec, took in timings.items():
        say(
            f"{spec}: built (models loaded, tables trained) in {built[spec]:.1f} s; {hypotheses} hypotheses "
            f"scored in {took:.1f} s ({hypotheses / max(took, 1e-9):.0f}/s)"
        )
    return built


def _declared_sets(
    info: ListInfo,
    specs: Sequence[str],
    scorers: ScorerCache,
    names: List[str],
    has_images: bool,
    beam: Optional[Tuple[str, Sequence[str]]],
    nbest_path: str,
) -> ListInfo:
    """``info`` with each scorer's feature sets (of the columns the list holds) and the
    declared ``beam`` (:func:`_declare_beam`)."""
    for spec in specs:
        info = info.with_sets(
            {
                name: [c for c in columns if c in names]
                for name, columns in scorers.feature_sets(spec, has_images).items()
            }
        )
    return info if beam is None else _declare_beam(info, beam, names, nbest_path)


def _timed(blocks: Iterable, parts: Dict[str, float]) -> Iterator:
    """``blocks`` as they come, the seconds spent reading each added to ``parts["reading"]``."""
    iterator = iter(blocks)
    while True:
        began = time.perf_counter()
        try:
            item = next(iterator)
        except StopIteration:
            parts["reading"] += time.perf_counter() - began
            return
        parts["reading"] += time.perf_counter() - began
        yield item
