"""Tuning and cross-fitting on files: what ``rerank tune`` and ``rerank crossfit`` do,
as library functions over a typed :class:`TuningSetup`.

* the start: ``init="beam"`` (default) starts from the weights that reproduce the beam's
  1-best (1 on the list's declared beam feature, :class:`rerank.nbest.ListInfo`), or from
  zeros when the list declares none; a list without a signature is an error (its beam is
  unknown: say ``init="zeros"`` or give a weights file);
* the columns: all, or ``features`` (column names) and ``feature_sets`` (set names of the
  list's signature, e.g. ``beam``, ``R2L``, ``MLMME/ss``); the others get weight 0;
* the metric maximised: ``bleu`` (default), ``chrf``, ``ter``, ``meteor``, an
  interpolation such as ``0.5*bleu+0.5*chrf`` or ``seg:NAME`` (scores in ``NBEST.NAME``,
  one per hypothesis): :func:`rerank.metrics.make_metric`;
* cross-fitting (:func:`crossfit_file`): for each fold k of a folds file
  (:mod:`rerank.folds`), tune on the other folds' segments from the same start and
  select fold k's hypotheses with those weights;
* more tuning data (``extra``: lists of other segments with the same columns and their
  references, e.g. held-out training sentences decoded by the same system): tuned on with
  the list (in every fold), never selected from.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.metrics import Metric, make_objective
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.nbest import NBestList, concat_blocks, count_segments
from rerank.signature import signature
from rerank.tuning.base import TuneResult, make_tuner
from rerank.tuning.data import load_tuning_data
from rerank.tuning.start import start_weights
from rerank.tuning.weights import weights_dict

#: the largest feature magnitude the tuners accept: beyond it, products with weights and
#: differences between hypotheses lose all precision (and overflow near 1e308)
MAX_FEATURE_MAGNITUDE = 1e15


@dataclass
class TuningSetup:
    """How to tune: the tuner (``algorithm``, a registered name, with its ``config``; None:
    its defaults), the start (``"beam"``, ``"zeros"`` or a weights JSON path), the columns
    (``features`` and/or ``feature_sets``; both None: every column), the text settings
    (``tokenize``: BLEU's tokeniser; ``lowercase``: of every text metric), the ``metric``
    maximised (a specification, :func:`rerank.metrics.make_metric`) and ``lang``
    (METEOR's language); ``beam_feature`` names the beam's column of a list without
    a signature."""

    algorithm: str = "mira"
    config: Any = None
    init: str = "beam"
    features: Optional[Sequence[str]] = None
    feature_sets: Optional[Sequence[str]] = None
    #: how text becomes statistics: sacrebleu's tokeniser (BLEU, length) and lowercasing (every
    #: text metric), given to the metric built from ``metric``
    tokenize: str = DEFAULT_TOKENIZE
    lowercase: bool = False
    metric: str = "bleu"
    lang: Optional[str] = None
    #: the list's beam feature where its signature does not name one (a list from another
    #: toolkit): ``init="beam"`` starts with weight 1 on this column
    beam_feature: Optional[str] = None

    def tuner(self):
        """A fresh tuner of ``algorithm`` with ``config`` (:data:`rerank.tuning.base.TUNERS`)."""
        return make_tuner(self.algorithm, self.config)

    def objective(self) -> Metric:
        """The metric maximised.  Raises :class:`InputError` for one without a direction."""
        return make_objective(self.metric, self.tokenize, self.lowercase, self.lang)


def check_tunable(nbest: NBestList, source: str) -> None:
    """Refuse a list with no feature columns (nothing to tune) or with values beyond
    :data:`MAX_FEATURE_MAGNITUDE` (sparse features included).  Raises :class:`InputError` naming ``source``."""
    sparse = nbest.sparse
    if not nbest.feature_names and (sparse is None or not sparse.width):
        raise InputError("the n-best list has no feature columns: nothing to tune", source)
    magnitude = np.abs(nbest.features).max(axis=0, initial=0.0)
    if sparse is not None and sparse.width:
        magnitude = np.concatenate([magnitude, np.zeros(sparse.width)])
        np.maximum.at(magnitude, len(nbest.feature_names) + sparse.indices, np.abs(sparse.values))
    if magnitude.max(initial=0.0) > MAX_FEATURE_MAGNITUDE:
        column = int(np.argmax(magnitude))
        raise InputError(
            f"feature {nbest.all_names[column]!r} has a value of magnitude {magnitude[column]:.3g}; "
            f"tuning needs |values| <= {MAX_FEATURE_MAGNITUDE:.0e} (rescale the feature)",
            source,
        )


#: the feature set ``--feature-sets`` names to tune a list's sparse features beside the columns it selects
SPARSE_SET = "sparse"


def restrict(
    nbest: NBestList, init: Optional[np.ndarray], init_from: str, setup: TuningSetup, source: str
) -> Tuple[NBestList, Optional[np.ndarray], str, Optional[np.ndarray]]:
    """The columns to tune: (list of those columns, start restricted to them, where the
    start came from, indices into the list's :attr:`~NBestList.all_names` or None for all).
    Without a selection every column and sparse feature is tuned; a selection
    (``features``, ``feature_sets``) tunes the sparse features only where ``feature_sets``
    names :data:`SPARSE_SET`.  A beam start whose feature is not tuned becomes zeros.

    Raises:
        InputError: an unknown column or set name, no column left, values too large.
    """
    if setup.features is None and setup.feature_sets is None:
        check_tunable(nbest, source)
        return nbest, init, init_from, None
    keep = list(setup.features or [])
    unknown = [name for name in keep if name not in nbest.feature_names]
    if unknown:
        raise InputError(
            f"--features: not in the n-best list: {', '.join(unknown)} "
            f"(it has {' '.join(dict.fromkeys(nbest.feature_names))})",
            source,
        )
    sets = [name for name in setup.feature_sets or [] if name != SPARSE_SET]
    if sets:
        keep += nbest.info.columns_of(sets, source)
    dense = np.flatnonzero([name in keep for name in nbest.feature_names])
    sparse = nbest.sparse if SPARSE_SET in (setup.feature_sets or []) else None
    width = len(nbest.feature_names)
    columns = np.concatenate([dense, width + np.arange(sparse.width if sparse is not None else 0)]).astype(np.int64)
    part = NBestList(
        nbest.offsets,
        nbest.hypotheses,
        nbest.features[:, dense],
        [nbest.feature_names[c] for c in dense],
        info=nbest.info,
        sparse=sparse,
    )
    check_tunable(part, source)
    if init is not None:
        init = init[columns]
        if not np.any(init) and init_from == "beam":
            init, init_from = None, "zeros"
    return part, init, init_from, columns


def widen(weights: np.ndarray, columns: Optional[np.ndarray], width: int) -> np.ndarray:
    """Weights over every column and sparse feature of the list (``width``: F + K; 0 for those
    not tuned)."""
    if columns is None:
        return weights
    vector = np.zeros(width)
    vector[columns] = weights
    return vector


def _record(setup: TuningSetup, tuner, metric: Metric) -> Dict[str, Any]:
    """The settings of a weights record: the tuner's ``config``, the objective's own
    ``metric_settings`` (its specification and the text settings it was built with, enough
    to build it again: :meth:`TuningSetup.objective`) and ``metric_signature``; where the
    objective is BLEU, also ``bleu_settings`` and ``bleu_signature`` (the keys of records
    written before metrics were selectable)."""
    record: Dict[str, Any] = {
        "config": asdict(tuner.config),
        "metric_settings": {
            "metric": setup.metric,
            "tokenize": setup.tokenize,
            "lowercase": setup.lowercase,
            "lang": setup.lang,
        },
        "metric_signature": metric.signature(),
    }
    if isinstance(metric, BleuMetric):
        record.update(bleu_settings=metric.to_json(), bleu_signature=metric.signature())
    record["signature"] = signature()
    return record


def _scores(result: TuneResult) -> Dict[str, Any]:
    """The tuning-set scores of a weights record: ``metric``, ``score``, ``initial_score``
    (the metric's units), ``higher_is_better`` (its direction) and, when the metric is BLEU, the same as ``bleu`` and
    ``initial_bleu`` (the keys of records written before metrics were selectable)."""
    scores = {"metric": result.metric, "score": result.score, "initial_score": result.initial_score}
    scores["higher_is_better"] = result.higher_is_better
    if result.metric == "bleu":
        scores.update(bleu=result.score, initial_bleu=result.initial_score)
    return scores


def describe(result: TuneResult, init_from: str) -> str:
    """``BLEU 35.10 (beam) -> 36.02, length ratio 1.003`` for progress lines."""
    ratio = "" if result.length_ratio is None else f", length ratio {result.length_ratio:.3f}"
    label = result.metric.upper() if result.metric.isalpha() else result.metric
    note = f" ({result.note})" if result.note else ""
    return f"{label} {result.initial_score:.2f} ({init_from}) -> {result.score:.2f}{ratio}{note}"


def tune_list(
    full: NBestList,
    stats: np.ndarray,
    setup: TuningSetup,
    where: str,
    start: Optional[np.ndarray] = None,
    progress: Optional[Callable[[str], None]] = None,
    tuner=None,
    metric: Optional[Metric] = None,
    warn: Optional[Callable[[str], None]] = None,
) -> Tuple[np.ndarray, TuneResult, str, NBestList]:
    """Tune on a list held in memory: the one path of ``rerank tune`` (:func:`tune_file`) and
    of the Python API (:func:`rerank.api.tune`).

    Args:
        full: the n-best list (features float64[M, F], offsets).
        stats: float64[M, K] the tuning metric's statistics of its hypotheses.
        setup: tuner, start, columns, metric.
        where: the list's name in messages (its path, or ``the n-best list``).
        start: float64[F] start weights over every column (instead of ``setup.init``).
        tuner, metric: the setup's tuner and objective, where the caller made them already.
        progress: the tuner's per-epoch / per-run lines (None: quiet); warn: what the start
            says about the list (an inferred beam column, columns that start at 0), shown even
            when progress is not (``tune --quiet``).
    Returns:
        (weights float64[F] over every column, the tuner's result, where it started, the
        list restricted to the tuned columns).
    Raises:
        InputError: a bad start or column choice.
    """
    if start is None:
        init, init_from = start_weights(full, setup.init, where, setup.beam_feature, warn or progress)
    else:
        init, init_from = start, "weights"
    nbest, init, init_from, columns = restrict(full, init, init_from, setup, where)
    tuner, metric = tuner or setup.tuner(), metric or setup.objective()
    result = tuner.tune(nbest.features, stats, nbest.offsets, init, progress, metric=metric, sparse=nbest.sparse)
    return widen(result.vector, columns, len(full.all_names)), result, init_from, nbest


def _abspaths(paths):
    """The absolute path of one reference file, or the list of several."""
    return os.path.abspath(paths) if isinstance(paths, str) else [os.path.abspath(p) for p in paths]


#: more tuning data: (n-best list, its reference file or files) pairs
Extra = Sequence[Tuple[str, Any]]


def load_with_extra(
    nbest_path: str, ref_path, extra: Extra, metric: Metric, progress: bool = False
) -> Tuple[NBestList, np.ndarray, int, List[Dict[str, Any]]]:
    """The tuning data of a list and of ``extra`` lists after it (:func:`load_tuning_data`
    of each, joined in that order; list-level settings, such as the beam feature, are the
    first list's).  Returns (the joined list, its statistics float64[M, K], the first list's
    segment count S (segments 0..S-1 are its own), one record per extra list: ``nbest``,
    ``ref``, ``segments``).

    Raises:
        InputError: as :func:`load_tuning_data` for any list, or an extra list whose
            columns (names and order) are not the first list's.
    """
    full, _refs, stats = load_tuning_data(nbest_path, ref_path, metric, progress)
    lists, all_stats, records = [full], [stats], []
    for path, ref in extra:
        more, _more_refs, more_stats = load_tuning_data(path, ref, metric, progress)
        if list(more.feature_names) != list(full.feature_names):
            raise InputError(
                f"its columns ({' '.join(more.feature_names)}) are not those of {nbest_path} "
                f"({' '.join(full.feature_names)}): more tuning data must have the same columns in the same order",
                path,
            )
        lists.append(more)
        all_stats.append(more_stats)
        records.append({"nbest": os.path.abspath(path), "ref": _abspaths(ref), "segments": more.num_segments})
    if not records:
        return full, stats, full.num_segments, records
    return concat_blocks(lists), np.concatenate(all_stats), full.num_segments, records


def tune_file(
    nbest_path: str,
    ref_path: str,
    setup: TuningSetup = TuningSetup(),
    progress: Optional[Callable[[str], None]] = None,
    extra: Extra = (),
    warn: Optional[Callable[[str], None]] = None,
) -> Tuple[Dict[str, Any], TuneResult]:
    """Tune on an n-best list and its references (and on ``extra`` lists of other segments
    with the same columns: :func:`load_with_extra`).  ``progress``: per-epoch lines (None:
    quiet); ``warn``: warnings about the list and the start, shown also when quiet.  Returns (the weights record that
    ``rerank tune`` writes: ``weights``, ``tuning``, ``config``, ``metric_settings``,
    signatures; the :class:`~rerank.tuning.base.TuneResult`).

    Raises:
        InputError: unreadable or mismatched files, a bad start or column choice.
    """
    start = time.perf_counter()
    tuner, metric = setup.tuner(), setup.objective()
    full, stats, own, extra_records = load_with_extra(nbest_path, ref_path, extra, metric, progress is not None)
    weights, result, init_from, nbest = tune_list(full, stats, setup, nbest_path, None, progress, tuner, metric, warn)
    record = {
        "weights": weights_dict(weights, full),
        "tuning": {
            "algorithm": setup.algorithm,
            "features": list(dict.fromkeys(nbest.feature_names)),
            **({"sparse_features": nbest.sparse.width} if nbest.sparse is not None else {}),
            **_scores(result),
            "init": init_from,
            "improved": result.improved,
            "length_ratio": result.length_ratio,
            **result.details,
            "nbest": os.path.abspath(nbest_path),
            "ref": _abspaths(ref_path),
            "segments": own,
            **({"extra": extra_records, "tuned_segments": nbest.num_segments} if extra_records else {}),
            "hypotheses": len(nbest.hypotheses),
            "seconds": round(time.perf_counter() - start, 3),
        },
        **_record(setup, tuner, metric),
    }
    return record, result


def crossfit_file(
    nbest_path: str,
    ref_path: str,
    folds_path: str,
    setup: TuningSetup = TuningSetup(),
    progress: Optional[Callable[[str], None]] = None,
    report: Optional[Callable[[str], None]] = None,
    extra: Extra = (),
) -> Tuple[List[str], Dict[str, Any]]:
    """K-fold cross-fitted re-ranking of one list: for each fold k, tune on the other
    folds' segments and every segment of the ``extra`` lists (:func:`load_with_extra`;
    from the same start as :func:`tune_file`) and select fold k's hypotheses.  Returns
    (the selected hypothesis of every segment in order, the record ``rerank crossfit``
    writes: ``crossfit``, ``folds`` (each fold's weights and BLEU),
    ``config``, signatures).  ``report`` gets one line per fold.

    Raises:
        InputError: as :func:`tune_file`, or a folds file of another segment count.
    """
    start = time.perf_counter()
    tuner, metric = setup.tuner(), setup.objective()
    listed = count_segments(nbest_path)
    if listed is not None:
        read_folds(folds_path, listed)  # before any work: the folds file's segment count
    full, stats, own, extra_records = load_with_extra(nbest_path, ref_path, extra, metric, progress is not None)
    folds = read_folds(folds_path, own)
    always = np.arange(own, full.num_segments)  # the extra lists' segments: tuned on in every fold
    init, init_from = start_weights(full, setup.init, nbest_path, setup.beam_feature, report or progress)
    restricted, init, init_from, columns = restrict(full, init, init_from, setup, nbest_path)
    chosen = np.zeros(own, dtype=np.int64)
    per_fold = []
    for k in range(folds.k):
        seen, held = np.concatenate([folds.segments(k, held_out=False), always]), folds.segments(k)
        rows = restricted.rows_of(seen)
        part = restricted.subset(seen)
        result = tuner.tune(part.features, stats[rows], part.offsets, init, progress, metric=metric, sparse=part.sparse)
        test = restricted.subset(held)
        chosen[held] = restricted.rows_of(held)[test.select(test.scores(result.vector))]
        if report is not None:
            report(f"fold {k}: tuned on {len(seen)} segments, {describe(result, init_from)}; applied to {len(held)}")
        per_fold.append(
            {
                "fold": k,
                "weights": weights_dict(widen(result.vector, columns, len(full.all_names)), full),
                "tuned_segments": int(len(seen)),
                "applied_segments": int(len(held)),
                **_scores(result),
                "length_ratio": result.length_ratio,
                **result.details,
            }
        )
    record = {
        "crossfit": {
            "algorithm": setup.algorithm,
            "features": list(dict.fromkeys(restricted.feature_names)),
            "init": init_from,
            "folds": os.path.abspath(folds_path),
            "k": folds.k,
            "nbest": os.path.abspath(nbest_path),
            "ref": _abspaths(ref_path),
            "segments": own,
            **({"extra": extra_records} if extra_records else {}),
            "seconds": round(time.perf_counter() - start, 3),
        },
        "folds": per_fold,
        **_record(setup, tuner, metric),
    }
    return [full.hypotheses[int(i)] for i in chosen], record


__all__ = [
    "TuningSetup",
    "tune_file",
    "crossfit_file",
    "load_with_extra",
    "restrict",
    "check_tunable",
    "widen",
    "describe",
    "MAX_FEATURE_MAGNITUDE",
]
