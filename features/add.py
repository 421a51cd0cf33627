"""``rerank features add`` as a library function: append the columns of one or more
scorers to an n-best list, streamed block by block (:func:`rerank.nbest.iter_nbest`):
every scorer is per segment, so memory is bounded by a block (and the models), not by
the list.  The output's signature carries the list settings on and records the new
columns' feature sets (:meth:`features.scorer.Scorer.feature_sets`)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
from tqdm import tqdm

from embed.data import align_images, load_image_features
from features.scorer import Scorer, make_scorer
from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.nbest import NBestList, NBestWriter, iter_nbest, write_list_info
from rerank.outputs import StagedOutputs
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
    """Each scorer built once (loading a model is the expensive part), on first use."""

    def __init__(self, make: Callable[[str], Scorer] = make_scorer):
        self._make = make
        self._built: Dict[str, Scorer] = {}

    def get(self, spec: str, progress: bool) -> Scorer:
        if spec not in self._built:
            self._built[spec] = self._make(spec)
        scorer = self._built[spec]
        scorer.progress = progress
        return scorer

    def by_fold(self, spec: str, nbest: NBestList, sources, images, fold: np.ndarray, k: int,
                progress: bool) -> Dict[str, np.ndarray]:
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
                nbest.subset(held), None if sources is None else [sources[s] for s in held],
                None if images is None else images[held])
            for name, values in part.items():
                values = np.asarray(values, dtype=np.float64)
                if name not in columns:
                    columns[name] = np.zeros((len(nbest.hypotheses),) + values.shape[1:])
                columns[name][rows] = values
        return columns

    def feature_sets(self, spec: str, has_images: bool) -> Dict[str, List[str]]:
        """The feature sets of ``spec`` (fold 0's scorer for a ``{fold}`` spec)."""
        return self.get(spec.replace("{fold}", "0"), False).feature_sets(has_images)


def add_features(nbest_path: str, specs: Sequence[str], out: str, inputs: ScoringInputs = ScoringInputs(),
                 say: Callable[[str], None] = lambda text: print(text, file=sys.stderr)) -> Dict:
    """Append the columns of the scorers ``specs`` (``NAME:ARG``, :func:`make_scorer`) to
    the list ``nbest_path`` and write it to ``out`` with its signature ``out.json``
    (together or not at all).  Returns the signature's record.

    Raises:
        InputError: an unknown or unbuildable scorer, inputs of another segment count, a
            column already in the list, ``{fold}`` without folds or folds without ``{fold}``.
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
    per_segment = [(path, values) for path, values in ((inputs.source, sources), (inputs.segment_images, images),
                                                       (inputs.folds, None if folds is None else folds.fold))
                   if values is not None]
    scorers = ScorerCache()
    start = time.perf_counter()
    timings = {spec: 0.0 for spec in specs}
    segments, hypotheses, names, info = 0, 0, [], None
    bar = tqdm(unit=" hyp", desc="features add", disable=not sys.stderr.isatty(), leave=False)
    with StagedOutputs() as outputs:  # the list and its signature appear together
        with outputs.open(out) as handle:
            writer = NBestWriter(handle)
            for first, block in iter_nbest(nbest_path):
                last = first + block.num_segments
                for path, values in per_segment:
                    if last > len(values):
                        raise InputError(f"{len(values)} lines but the n-best list has more segments", path)
                part_sources = None if sources is None else sources[first:last]
                part_images = None if images is None else images[first:last]
                for spec in specs:
                    began = time.perf_counter()
                    progress = first == 0  # the scorers' own bars for the first block only
                    columns = (scorers.by_fold(spec, block, part_sources, part_images, folds.fold[first:last],
                                               folds.k, progress) if "{fold}" in spec
                               else scorers.get(spec, progress).score(block, part_sources, part_images))
                    for name, values in columns.items():
                        if name in block.feature_names:
                            raise InputError(f"feature {name!r} is already in the n-best list", nbest_path)
                        block = block.add_feature(name, values)
                    timings[spec] += time.perf_counter() - began
                writer.write(block, first)
                segments, hypotheses, names = last, hypotheses + len(block.hypotheses), block.feature_names
                info = block.info
                bar.update(len(block.hypotheses))
        bar.close()
        for path, values in per_segment:
            if len(values) != segments:
                raise InputError(f"{len(values)} lines but {segments} segments in the n-best list", path)
        seconds = time.perf_counter() - start
        for spec, took in timings.items():
            say(f"{spec}: {hypotheses} hypotheses in {took:.1f} s ({hypotheses / max(took, 1e-9):.0f}/s, "
                "loading included)")
        for spec in specs:
            info = info.with_sets({name: [c for c in columns if c in names]
                                   for name, columns in scorers.feature_sets(spec, images is not None).items()})
        record = {"input": nbest_path, "scorers": list(specs), "source": inputs.source, "images": inputs.images,
                  "folds": inputs.folds, "features": names, "hypotheses": hypotheses, "seconds": round(seconds, 3),
                  "scorer_seconds": {k: round(v, 3) for k, v in timings.items()}}
        write_list_info(outputs.stage(out + ".json"), info, record, ["torch", "numpy"])
    say(f"{hypotheses} hypotheses scored in {seconds:.1f} s ({hypotheses / max(seconds, 1e-9):.0f}/s); "
        f"features: {' '.join(names)}")
    return record
