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

import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.metrics import Metric, make_objective
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.nbest import NBestList, concat_blocks, count_segments, finite_scores
from rerank.signature import signature
from rerank.textio import read_lines
from rerank.tuning.base import TuneResult, make_tuner
from rerank.tuning.data import load_tuning_data
from rerank.tuning.weights import read_weights, weights_dict, weights_vector

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
    lang: str = "de"
    #: the list's beam feature where its signature does not name one (a list from another
    #: toolkit): ``init="beam"`` starts with weight 1 on this column
    beam_feature: Optional[str] = None

    def tuner(self):
        """A fresh tuner of ``algorithm`` with ``config`` (:data:`rerank.tuning.base.TUNERS`)."""
        return make_tuner(self.algorithm, self.config)

    def objective(self) -> Metric:
        """The metric maximised.  Raises :class:`InputError` for one without a direction."""
        return make_objective(self.metric, self.tokenize, self.lowercase, self.lang)


def read_start(path: str) -> Dict[str, Any] | List[float]:
    """Start weights from a file: a weights JSON (``{"weights": {name: value or
    [values]}}``, as ``rerank tune`` writes; names may be missing), Moses' ``name= v1 …
    vk`` lines (kbmira ``--dense-init``; k values for a name with k columns), or Moses
    mert's legacy ``init.opt`` (first line: one value per column in list order; its min /
    max lines are ignored).  Returns a name map, or a list of values for ``init.opt``.

    Raises:
        InputError: naming the file (and line): JSON without a weights object, a line
            that is neither form, a value that is not a finite number, a name twice.
    """
    text = "\n".join(read_lines(path))
    if text.lstrip().startswith("{"):
        return read_weights(path)
    lines = [(k, line.split()) for k, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError("no start weights in the file", path)

    def numbers(values, lineno):
        try:
            out = [float(v) for v in values]
        except ValueError:
            raise InputError("a weight is not a number", path, lineno) from None
        if not out or not all(math.isfinite(v) for v in out):
            raise InputError("a weight is missing or not finite", path, lineno)
        return out

    if not lines[0][1][0].endswith("="):  # mert's init.opt: the first line holds the weights
        return numbers(lines[0][1], lines[0][0])
    weights: Dict[str, Any] = {}
    for lineno, words in lines:
        if not words[0].endswith("=") or len(words[0]) < 2:
            raise InputError(f"expected 'name= value …' (Moses weights), found {words[0]!r}", path, lineno)
        name = words[0][:-1]
        if name in weights:
            raise InputError(f"the feature {name!r} has a second line", path, lineno)
        values = numbers(words[1:], lineno)
        weights[name] = values[0] if len(values) == 1 else values
    return weights


def start_vector(start: Dict[str, Any] | List[float], nbest: NBestList, source: str) -> Tuple[np.ndarray, List[str]]:
    """(float64[F] start weights over ``nbest``'s columns, the names that had no weight and
    start at 0) from :func:`read_start`'s result.

    Raises:
        InputError: a weight for a name the list does not have, a name whose number of
            values differs from its columns, an ``init.opt`` line of another length.
    """
    if isinstance(start, list):
        if len(start) != len(nbest.feature_names):
            raise InputError(
                f"{len(start)} start weights but the n-best list has {len(nbest.feature_names)} columns "
                f"({' '.join(nbest.feature_names)})",
                source,
            )
        return np.asarray(start, dtype=np.float64), []
    missing = [name for name, _ in nbest.groups() if name not in start]
    full = {**start, **{name: [0.0] * count for name, count in nbest.groups() if name in missing}}
    return weights_vector(full, nbest, source), missing


def rank_order(nbest: NBestList) -> Tuple[List[str], Dict[str, int]]:
    """What a list's order says of the column its decoder ranked by: (the one-valued columns
    whose values never rise down any segment and fall in some — the order decoders write n-best
    lists in —, and
    for every one-valued column the segments whose first hypothesis has its highest value).
    Segments of one hypothesis say nothing and are left out of both."""
    sizes = np.diff(nbest.offsets)
    single = [c for c, name in enumerate(nbest.feature_names) if nbest.feature_names.count(name) == 1]
    if not len(sizes) or not single:
        return [], {}
    features = nbest.features[:, single]
    within = np.repeat(np.arange(len(sizes)), sizes)
    same = within[1:] == within[:-1]
    scale = np.maximum(np.abs(features[1:]), np.abs(features[:-1]))
    step = np.diff(features, axis=0)
    rises = (step > 1e-9 * np.maximum(scale, 1.0)) & same[:, None]
    falls = (step < -1e-9 * np.maximum(scale, 1.0)) & same[:, None]  # a constant column orders nothing
    many = sizes > 1
    best = np.maximum.reduceat(features, nbest.offsets[:-1], axis=0)
    first_is_best = (features[nbest.offsets[:-1]] >= best) & many[:, None]
    names = [nbest.feature_names[c] for c in single]
    ordering = [name for k, name in enumerate(names) if not rises[:, k].any() and falls[:, k].any()]
    return ordering, {name: int(first_is_best[:, k].sum()) for k, name in enumerate(names)}


def totals_weights(nbest: NBestList) -> Optional[np.ndarray]:
    """The weights float64[F] whose weighted sum of the columns is the list's totals (the last
    field, Moses' model score) on every hypothesis, where the totals order every segment as
    written (never rising, falling in some) and are such a sum (least squares, residual within
    1e-6 of their scale); else None.  A decoder that ranked by a weighted total wrote it there."""
    totals = nbest.totals
    if totals is None or not len(totals) or not nbest.feature_names:
        return None
    sizes = np.diff(nbest.offsets)
    within = np.repeat(np.arange(len(sizes)), sizes)
    same = within[1:] == within[:-1]
    step = np.diff(totals)
    tol = 1e-9 * max(1.0, float(np.abs(totals).max()))
    if (step[same] > tol).any() or not (step[same] < -tol).any():
        return None
    weights, *_ = np.linalg.lstsq(nbest.features, totals, rcond=None)
    if np.abs(nbest.features @ weights - totals).max() > 1e-6 * max(1.0, float(np.abs(totals).max())):
        return None
    return np.asarray(weights, dtype=np.float64)


def start_weights(
    nbest: NBestList,
    init: str,
    nbest_path: str,
    beam_feature: Optional[str] = None,
    say: Optional[Callable[[str], None]] = None,
) -> Tuple[Optional[np.ndarray], str]:
    """(start weights float[F] or None for zeros, where they came from: ``beam``,
    ``zeros`` or the absolute path of the weights file).

    ``init``: ``beam`` (1 on the beam feature: the one the list's signature declares, or
    ``beam_feature`` for a list without one, or for a list without either the one column whose
    values never rise down any segment — decoders write their lists in rank order
    (:func:`rank_order`), said through ``say`` in one line; a ``beam_feature`` the order
    contradicts is said with the numbers), ``zeros``, or a start file
    (:func:`read_start`; columns it does not name start at 0, said through ``say`` in one
    line).

    Raises:
        InputError: ``beam`` for a list without a signature, no ``beam_feature`` and no column
            in whose order the list is written (the error names the ways on), a beam feature that is not a column or that
            contradicts the signature's; an unreadable start file or weights that
            overflow on the list.
    """
    info = nbest.info
    columns = " ".join(dict.fromkeys(nbest.feature_names))
    if beam_feature is not None:
        if beam_feature not in nbest.feature_names:
            raise InputError(f"--beam-feature {beam_feature}: not a column of the list (it has {columns})", nbest_path)
        if info.declared and info.beam_feature not in (None, beam_feature):
            raise InputError(
                f"--beam-feature {beam_feature} contradicts the beam feature {info.beam_feature!r} that the "
                "list's signature declares",
                nbest_path,
            )
    if init == "zeros":
        return None, "zeros"
    if init != "beam":
        vector, missing = start_vector(read_start(init), nbest, init)
        if missing and say is not None:
            say(f"--init {init}: no weight for {', '.join(missing)}: they start at 0")
        with np.errstate(over="ignore", invalid="ignore"):
            finite_scores(nbest.features @ vector, nbest_path, init)
        return vector, os.path.abspath(init)
    beam = beam_feature or info.beam_feature
    if info.beam_feature is None:  # no signature, or one that names no beam (a foreign list's features added)
        found = _beam_from_order(nbest, nbest_path, beam_feature, columns, say or (lambda text: None), info.declared)
        if isinstance(found, np.ndarray):  # the weights that reproduce the list's totals
            return found, "beam"
        beam = found
    if beam is None:
        return None, "zeros"
    if beam not in nbest.feature_names:
        raise InputError(
            f"the signature names beam feature {beam!r}, which is not a column of the list (it has {columns})",
            nbest_path + ".json",
        )
    return np.asarray([1.0 if name == beam else 0.0 for name in nbest.feature_names]), "beam"


def _beam_from_order(
    nbest: NBestList,
    nbest_path: str,
    beam_feature: Optional[str],
    columns: str,
    say: Callable[[str], None],
    signed: bool = False,
) -> Union[str, np.ndarray, None]:
    """The beam column of a list whose signature names none (or that has none): ``beam_feature``
    (said with the numbers where the list's order contradicts it), else the column in whose
    order the list is written; else, where the totals (the last field: the decoder's weighted
    score) order it and are a weighted sum of the columns, those weights (float64[F]); else None
    for a ``signed`` list (a signature that names no beam: the start is zeros).

    Raises:
        InputError: none of them for a list without a signature (naming the ways on, for the
            command line and the Python API).
    """
    ordering, first_best = rank_order(nbest)
    segments = sum(1 for size in np.diff(nbest.offsets) if size > 1)
    if beam_feature is not None:
        if ordering and beam_feature not in ordering:
            say(
                f"rerank: warning: beam feature {beam_feature}: the list is not in its order (its first hypothesis "
                f"is {beam_feature}'s best in {first_best.get(beam_feature, 0)} of {segments} segments); the list is "
                f"in {ordering[0]}'s order, the column its decoder ranked by: starting from {beam_feature} as asked"
            )
        return beam_feature
    if not ordering:
        weights = totals_weights(nbest)
        if weights is not None:
            shown = ", ".join(f"{name} {value:g}" for name, value in zip(nbest.feature_names, weights))
            say(
                f"rerank: {nbest_path}: no column orders the list but its totals do: starting from the weights "
                f"that reproduce them ({shown})"
            )
            return weights
    if not ordering and signed:
        return None
    if not ordering:
        where = "the list has no signature" if not os.path.exists(nbest_path) else f"no signature {nbest_path}.json"
        raise InputError(
            f"{where} and no column orders every segment as written, so the beam's feature is unknown: name its "
            f"column (--beam-feature COLUMN, beam_feature=COLUMN in Python; the list has {columns}), or start from "
            "zeros or weights (--init zeros | WEIGHTS: JSON, Moses 'name= value' lines or init.opt; init= in "
            "Python); 'rerank convert --beam-feature COLUMN' writes the signature once for every verb",
            nbest_path,
        )
    others = f" ({', '.join(ordering[1:])} too: the first is taken)" if len(ordering) > 1 else ""
    say(
        f"rerank: {nbest_path}: {'its signature names no beam' if signed else 'no signature'}: the beam's column "
        f"is {ordering[0]}, the one whose values never "
        f"rise down any of the {segments} segments{others} (--beam-feature names another)"
    )
    return ordering[0]


def check_tunable(nbest: NBestList, source: str) -> None:
    """Refuse a list with no feature columns (nothing to tune) or with values beyond
    :data:`MAX_FEATURE_MAGNITUDE`.  Raises :class:`InputError` naming ``source``."""
    if not nbest.feature_names:
        raise InputError("the n-best list has no feature columns: nothing to tune", source)
    magnitude = np.abs(nbest.features).max(axis=0)
    if magnitude.max() > MAX_FEATURE_MAGNITUDE:
        column = int(np.argmax(magnitude))
        raise InputError(
            f"feature {nbest.feature_names[column]!r} has a value of magnitude {magnitude[column]:.3g}; "
            f"tuning needs |values| <= {MAX_FEATURE_MAGNITUDE:.0e} (rescale the feature)",
            source,
        )


def restrict(
    nbest: NBestList, init: Optional[np.ndarray], init_from: str, setup: TuningSetup, source: str
) -> Tuple[NBestList, Optional[np.ndarray], str, Optional[np.ndarray]]:
    """The columns to tune: (list of those columns, start restricted to them, where the
    start came from, column indices or None for all).  A beam start whose feature is not
    tuned becomes zeros.

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
    if setup.feature_sets:
        keep += nbest.info.columns_of(setup.feature_sets, source)
    columns = np.flatnonzero([name in keep for name in nbest.feature_names])
    part = NBestList(
        nbest.offsets,
        nbest.hypotheses,
        nbest.features[:, columns],
        [nbest.feature_names[c] for c in columns],
        info=nbest.info,
    )
    check_tunable(part, source)
    if init is not None:
        init = init[columns]
        if not np.any(init) and init_from == "beam":
            init, init_from = None, "zeros"
    return part, init, init_from, columns


def widen(weights: np.ndarray, columns: Optional[np.ndarray], width: int) -> np.ndarray:
    """Weights over every column of the list (0 for the columns not tuned)."""
    if columns is None:
        return weights
    vector = np.zeros(width)
    vector[columns] = weights
    return vector


def _record(setup: TuningSetup, tuner, metric: Metric) -> Dict[str, Any]:
    return {
        "config": asdict(tuner.config),
        "bleu_settings": BleuMetric(setup.tokenize, setup.lowercase).to_json(),
        "bleu_signature": BleuMetric(setup.tokenize, setup.lowercase).signature(),
        "metric_signature": metric.signature(),
        "signature": signature(),
    }


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
    Returns:
        (weights float64[F] over every column, the tuner's result, where it started, the
        list restricted to the tuned columns).
    Raises:
        InputError: a bad start or column choice.
    """
    if start is None:
        init, init_from = start_weights(full, setup.init, where, setup.beam_feature, progress)
    else:
        init, init_from = start, "weights"
    nbest, init, init_from, columns = restrict(full, init, init_from, setup, where)
    tuner, metric = tuner or setup.tuner(), metric or setup.objective()
    result = tuner.tune(nbest.features, stats, nbest.offsets, init, progress, metric)
    return widen(result.vector, columns, len(full.feature_names)), result, init_from, nbest


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
) -> Tuple[Dict[str, Any], TuneResult]:
    """Tune on an n-best list and its references (and on ``extra`` lists of other segments
    with the same columns: :func:`load_with_extra`).  Returns (the weights record that
    ``rerank tune`` writes: ``weights``, ``tuning``, ``config``, ``bleu_settings``,
    signatures; the :class:`~rerank.tuning.base.TuneResult`).

    Raises:
        InputError: unreadable or mismatched files, a bad start or column choice.
    """
    start = time.perf_counter()
    tuner, metric = setup.tuner(), setup.objective()
    full, stats, own, extra_records = load_with_extra(nbest_path, ref_path, extra, metric, progress is not None)
    weights, result, init_from, nbest = tune_list(full, stats, setup, nbest_path, None, progress, tuner, metric)
    record = {
        "weights": weights_dict(weights, full),
        "tuning": {
            "algorithm": setup.algorithm,
            "features": list(dict.fromkeys(nbest.feature_names)),
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
    init, init_from = start_weights(full, setup.init, nbest_path, setup.beam_feature, progress)
    restricted, init, init_from, columns = restrict(full, init, init_from, setup, nbest_path)
    chosen = np.zeros(own, dtype=np.int64)
    per_fold = []
    for k in range(folds.k):
        seen, held = np.concatenate([folds.segments(k, held_out=False), always]), folds.segments(k)
        rows = restricted.rows_of(seen)
        part = restricted.subset(seen)
        result = tuner.tune(part.features, stats[rows], part.offsets, init, progress, metric)
        test = restricted.subset(held)
        chosen[held] = restricted.rows_of(held)[test.select(test.features @ result.vector)]
        if report is not None:
            report(f"fold {k}: tuned on {len(seen)} segments, {describe(result, init_from)}; applied to {len(held)}")
        per_fold.append(
            {
                "fold": k,
                "weights": weights_dict(widen(result.vector, columns, len(full.feature_names)), full),
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
    "start_weights",
    "read_start",
    "start_vector",
    "restrict",
    "check_tunable",
    "widen",
    "describe",
    "MAX_FEATURE_MAGNITUDE",
]
