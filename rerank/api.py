"""The Python API: the loop of the command line — features, tuning, re-ranking,
evaluation, significance — on n-best lists held in memory.

``import rerank`` exposes these names (loaded on first use, so that ``import rerank``
stays light); the README's "From Python" section is an example that the tests run::

    nbest = rerank.read_nbest("val.nbest")
    nbest = rerank.add_features(nbest, ["mbr:bleu"])
    tuned = rerank.tune(nbest, rerank.read_lines("val.de"), algorithm="mert", tokenize="none")
    best = rerank.apply(rerank.add_features(rerank.read_nbest("test.nbest"), ["mbr:bleu"]), tuned)

This module sits on the top floor beside the command line (``tests/core/test_layers.py``):
it calls the layers below and nothing imports it but ``rerank/__init__.py``'s lazy
attribute lookup.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from rerank.api_args import _names, _nbest, _one_or_many, _one_or_streams, _references, _sources, _texts  # noqa: E402
from rerank.api_lists import oracle, truncate  # noqa: E402,F401  (API re-exports)
from rerank.api_names import API
from rerank.config import check_setting_types, spec_of
from rerank.devices import DeviceSettings
from rerank.errors import InputError, expect, paths_named
from rerank.features.add import add_columns
from rerank.features.generate import generate_file
from rerank.features.sampling import Sampling
from rerank.mbr.decode import mbr_decode as decode_files
from rerank.mbr.decoders import DECODERS, make_decoder
from rerank.mbr.kbest import LocalSearch
from rerank.metrics import DEFAULT_METRICS, Score, make_metric, make_objective
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.metrics.evaluate import check_system_names
from rerank.metrics.references import References
from rerank.nbest import NBestList, finite_scores, read_nbest, write_nbest, write_signed_nbest  # noqa: F401
from rerank.report import SignificanceSettings, format_table, significance_of  # noqa: F401
from rerank.textio import read_lines  # noqa: F401
from rerank.tuning.base import TUNERS, TuneResult
from rerank.tuning.files import TuningSetup, tune_list
from rerank.tuning.start import start_vector
from rerank.tuning.weights import (
    MISSING,
    check_weights,
    read_weights,  # noqa: F401  (API re-export)
    weights_dict,
    weights_given,
    weights_vector,
    write_weights,  # noqa: F401  (API re-export)
)

#: the public names: rerank.api_names.API, the one list (``import rerank`` loads them from here on first use)
__all__ = list(API)


def add_features(
    nbest: NBestList,
    scorers: Sequence[Union[str, Tuple[str, Dict[str, Any]]]],
    sources: Union[Sequence[str], str, "os.PathLike[str]", None] = None,
    images: Optional[np.ndarray] = None,
) -> NBestList:
    """The list with the columns of ``scorers`` appended (specs as ``rerank features add
    --scorer``: ``mbr:bleu``, ``nmt:MODEL_DIR``, ``e5:``…; ``rerank features add --help``
    lists them), their feature sets recorded in ``nbest.info``.

    Args:
        nbest: an n-best list (:func:`read_nbest`).
        scorers: scorer specifications, or (name, {setting: value}) pairs whose keys are
            the scorer's ``Config`` fields: ``("mbr", {"utility": "chrf", "temperature": 0.5})``.
        sources: N source sentences, for scorers that read them: a list, or the path of a
            file of them (one per line).
        images: float[N, D] CNN features, one row per segment (``mlmme:``'s s_i).
    Raises:
        InputError: an unknown scorer, inputs of another segment count, a column that
            is already in the list.
    """
    scorers = _one_or_many(scorers, "scorers")
    if sources is not None:
        sources = _sources(sources)
    return add_columns(_nbest(nbest), [spec_of(s, "scorer") for s in scorers], sources, images)


#: what :func:`tune` returns: the tuners' one result type (:class:`rerank.tuning.base.TuneResult`),
#: with ``weights`` by column name (0 for the columns not tuned)
Tuning = TuneResult


def _with_scores(metric, scores: Optional[Mapping[str, Sequence[float]]], count: int):
    """``metric`` with the in-memory scores of its ``seg:`` parts bound (an interpolation's
    parts too); metrics computed from text are returned as they are.

    Raises:
        InputError: a ``seg:NAME`` without ``scores[NAME]``, or scores of another count.
    """
    if metric.from_text:
        return metric
    if hasattr(metric, "terms"):  # an interpolation: bind each part
        metric.terms = [(w, _with_scores(m, scores, count)) for w, m in metric.terms]
        return metric
    key = getattr(metric, "key", None)
    if not scores or key is None or key not in scores:
        raise InputError(f"metric {metric.name!r} needs its scores: scores={{{key!r}: [one number per hypothesis]}}")
    bound = metric.bind_values(scores[key], f"scores[{key!r}]")
    bound.check_count(count)
    return bound


def tune(
    nbest: NBestList,
    references: References,
    algorithm: str = "mira",
    metric: Union[str, Tuple[str, Dict[str, Any]]] = "bleu",
    init: Union[str, Mapping[str, float]] = "beam",
    features: Optional[Sequence[str]] = None,
    feature_sets: Optional[Sequence[str]] = None,
    tokenize: str = DEFAULT_TOKENIZE,
    lowercase: bool = False,
    lang: Optional[str] = None,
    beam_feature: Optional[str] = None,
    scores: Optional[Mapping[str, Sequence[float]]] = None,
    **config: Any,
) -> Tuning:
    """Tune feature weights on ``nbest`` against ``references`` (one per segment), as
    ``rerank tune`` does.

    Args:
        algorithm: a registered tuner: ``mira`` (Moses kbmira), ``mert`` (Och 2003), ``pro``.
        metric: what is maximised (``bleu``, ``chrf``, ``ter``, ``meteor``,
            ``0.5*bleu+0.5*chrf``, ``chrf:word_order=2`` or ``("chrf", {"word_order": 2})``…;
            ``seg:`` scores need files: use ``rerank tune``).
        init: ``beam`` (1 on the beam feature the list's signature declares, or on
            ``beam_feature``), ``zeros``, or {column: weight} (columns left out start at 0).
        features: the columns to tune (default: all).
        feature_sets: the feature sets to tune, by the names the list's signature gives
            (``beam``, ``R2L``…; default: all).
        tokenize: BLEU's tokeniser (``none`` for tokenised text; default sacrebleu's ``13a``).
        lowercase: lowercase before scoring.
        lang: METEOR's language.
        beam_feature: the beam's column of a list without a signature (e.g. ``"NMTNorm"``).
        scores: for a ``seg:NAME`` metric, ``scores[NAME]``: one number per hypothesis of
            ``nbest``, in order (COMET, BLEURT… computed elsewhere).
        **config: the tuner's settings, by their ``Config`` field names (e.g.
            ``iterations=60``, ``C=0.01`` for MIRA; ``restarts=20`` for MERT; ``seed``).
    Returns:
        :class:`Tuning`.
    Raises:
        InputError: an empty list, references of another count, an unknown tuner, metric,
            setting or column, a ``beam`` start on a list that declares no beam feature.
    """
    nbest = _nbest(nbest)
    if nbest.num_segments == 0 or not len(nbest.hypotheses):
        raise InputError("the n-best list is empty: nothing to tune")
    references = _references(references)
    if len(references[0]) != nbest.num_segments:
        raise InputError(f"{len(references[0])} references but the n-best list has {nbest.num_segments} segments")
    expect(algorithm, str, "algorithm", "a tuner's name: mira, mert or pro")
    if not isinstance(init, str):
        expect(init, Mapping, "init", "'beam', 'zeros' or {column: weight}")
    features, feature_sets = _names(features, "features"), _names(feature_sets, "feature_sets")
    config_class = TUNERS.get(algorithm).Config
    known = [f.name for f in dataclasses.fields(config_class)]
    unknown = [key for key in config if key not in known]
    if unknown:
        raise InputError(
            f"{algorithm} has no setting {', '.join(map(repr, unknown))}; its settings: {', '.join(known)}"
        )
    check_setting_types(config_class, config, algorithm)
    try:
        settings = config_class(**config)
    except TypeError as err:
        raise InputError(f"{algorithm}: {err}") from None
    metric = spec_of(metric, "metric")
    objective = _with_scores(make_objective(metric, tokenize, lowercase, lang), scores, len(nbest.hypotheses))
    setup = TuningSetup(
        algorithm,
        settings,
        "zeros" if not isinstance(init, str) else init,
        features,
        feature_sets,
        tokenize,
        lowercase,
        metric,
        lang,
        beam_feature,
    )
    start = None if isinstance(init, str) else start_vector(check_weights(dict(init), "init"), nbest, "init")[0]
    if start is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            finite_scores(nbest.scores(start), "the n-best list", "init")
    index = np.arange(len(nbest.hypotheses))
    stats = objective.hypothesis_stats(list(nbest.hypotheses), _one_or_streams(references), nbest.segment, index)
    vector, result, _, _ = tune_list(nbest, stats, setup, "the n-best list", start=start, metric=objective)
    return dataclasses.replace(
        result,
        vector=vector,
        weights={k: v if isinstance(v, list) else float(v) for k, v in weights_dict(vector, nbest).items()},
    )


def decoder_1best(nbest: NBestList) -> List[str]:
    """The first hypothesis of every segment: the decoder's own 1-best of a list in rank order
    (decoders write n-best lists that way), the baseline of a re-ranking; ``rerank truncate
    --out-1best`` on files.  N strings for N segments."""
    nbest = _nbest(nbest)
    return [nbest.hypotheses[i] for i in nbest.offsets[:-1]]


def apply(
    nbest: NBestList,
    weights: Union[Tuning, Mapping[str, Any], str, None] = None,
    *,
    column: Optional[str] = None,
    missing: str = "error",
) -> List[str]:
    """The re-ranked 1-best of every segment: the hypothesis of highest weighted score
    (the first on ties, as Moses), as ``rerank apply``.

    Args:
        weights: a :class:`Tuning`, {column: weight}, a weights file's content as
            ``json.load`` gives it (``{"weights": {...}, ...}``) or its path (JSON or Moses
            ``name= value`` lines: :func:`read_weights`).
        column: instead of weights, re-rank by this one column (QE re-ranking by ``CometKiwi``).
        missing: ``error`` (every column of the list needs a weight) or ``zero`` (columns the
            weights leave out weigh 0).
    Raises:
        InputError: a column without a weight (``missing="error"``), a weight without a column,
            a ``column`` the list does not have, both or neither of ``weights`` and ``column``.
    """
    nbest = _nbest(nbest)
    if (weights is None) == (column is None):
        raise InputError("apply(): give weights or column=NAME (re-rank by one column), one of them")
    expect(missing, str, "missing", " or ".join(MISSING))
    if missing not in MISSING:
        raise InputError(f"apply(): missing must be {' or '.join(MISSING)}, not {missing!r}")
    if column is not None:
        if column not in nbest.feature_names:
            raise InputError(
                f"apply(): the list has no column {column!r} (its columns: {' '.join(nbest.feature_names)})"
            )
        mapping: Dict[str, Any] = {column: 1.0}
        missing = "zero"
    else:
        mapping = weights_given(weights)
    vector = weights_vector(check_weights(mapping, "weights"), nbest, "weights", missing)
    with np.errstate(over="ignore", invalid="ignore"):
        scores = finite_scores(nbest.scores(vector), "the n-best list", "weights")
    return [nbest.hypotheses[i] for i in nbest.select(scores)]


def evaluate(
    hypotheses: Sequence[str],
    references: References,
    metrics: Sequence[Union[str, Tuple[str, Dict[str, Any]]]] = DEFAULT_METRICS,
    tokenize: str = DEFAULT_TOKENIZE,
    lowercase: bool = False,
    lang: Optional[str] = None,
    scores: Optional[Mapping[str, Sequence[float]]] = None,
) -> Dict[str, Score]:
    """{metric: corpus score} of one system (scores equal sacrebleu's; METEOR the jar's).
    Each score is a float that also carries its metric's name and signature
    (:class:`rerank.metrics.Score`: ``str(s)`` is ``BLEU = 38.75``, ``s.signature``).

    ``metrics``: specs (``"bleu"``, ``"chrf:word_order=2"``; one string is one metric) or
    (name, {setting: value}) pairs of the metric's ``Config`` fields
    (``("chrf", {"word_order": 2})``), keyed in the result by their spec; ``seg:NAME``
    metrics read ``scores[NAME]`` (one number per hypothesis: COMET, BLEURT… computed
    elsewhere; their mean is the corpus score).
    Raises :class:`InputError` for another line count, an unknown metric or a ``seg:``
    metric without its scores."""
    hypotheses = _texts(hypotheses, "hypotheses")
    references = _references(references)
    if not hypotheses:
        raise InputError("no hypotheses: nothing to score")
    if len(hypotheses) != len(references[0]):
        raise InputError(f"{len(hypotheses)} hypotheses but {len(references[0])} references")
    metrics = _one_or_many(metrics, "metrics")
    result = {}
    for spec in (spec_of(m, "metric") for m in metrics):
        metric = _with_scores(make_metric(spec, tokenize, lowercase, lang), scores, len(hypotheses))
        value = float(metric.score(metric.stats(list(hypotheses), _one_or_streams(references)).sum(axis=0)))
        if not np.isfinite(value):
            raise InputError(f"metric {spec!r}: the score is not a finite number (statistics too large)")
        result[spec] = Score(value, metric.name, metric.signature(), metric.label)
    return result


def significance(
    references: References,
    baseline: Sequence[Sequence[str]],
    systems: Mapping[str, Sequence[Sequence[str]]],
    metrics: Sequence[Union[str, Tuple[str, Dict[str, Any]]]] = DEFAULT_METRICS,
    tokenize: str = DEFAULT_TOKENIZE,
    lowercase: bool = False,
    **options: Any,
) -> Dict:
    """MultEval-style significance over optimiser replicas, as ``rerank signif``: the
    baseline and every system are lists of replicas, each a list of hypotheses.  Returns
    ``{"rows", "meta"}`` (:func:`rerank.report.significance_table`; render it with
    :func:`format_table`).  ``options``: ``shuffles``, ``resamples``, ``seed``,
    ``compare_to``, ``lang``, and the tests' (:class:`rerank.signif.SignificanceSettings`):
    ``test`` (``ar``/``bs``), ``bootstrap``, ``confidence``, ``adjust`` (``none``/``holm``/``maxT``),
    ``alpha``, ``pairs`` (``baseline``/``all``).  Each row carries ``ci`` (its score's interval),
    ``delta_ci`` (the difference's) and ``p_adjusted``.  Raises :class:`InputError` as ``rerank signif``."""

    def replicas_of(name: str, replicas: Sequence[Sequence[str]]) -> List[List[str]]:
        if not replicas or isinstance(replicas, str) or any(isinstance(r, str) for r in replicas):
            raise InputError(f"{name}: expected a list of replicas, each a list of hypotheses")
        return [_texts(hyps, f"{name}, replica {k + 1}") for k, hyps in enumerate(replicas)]

    expect(systems, Mapping, "systems", "{name: [replica, …]}, each replica a list of hypotheses")
    check_system_names("baseline", list(systems.items()))
    texts = {"baseline": replicas_of("baseline", baseline)}
    texts.update((name, replicas_of(name, replicas)) for name, replicas in systems.items())
    specs = [spec_of(m, "metric") for m in _one_or_many(metrics, "metrics")]
    references = _references(references)
    if not references[0]:
        raise InputError("no references: nothing to score")
    known = (
        "shuffles",
        "resamples",
        "seed",
        "compare_to",
        "lang",
        "test",
        "bootstrap",
        "confidence",
        "adjust",
        "alpha",
        "pairs",
    )
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise TypeError(f"significance() has no setting {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    settings = SignificanceSettings(metrics=tuple(specs), tokenize=tokenize, lowercase=lowercase, **options)
    return significance_of(_one_or_streams(references), texts, settings)


@dataclasses.dataclass
class MBRResult:
    """What :func:`mbr_decode` returns: ``picks`` (the selected hypothesis of every segment),
    ``kbest`` (with ``keep`` > 1: the ``keep`` best distinct candidates of every segment, best
    first, their expected utility the column ``MBR``; else None) and ``summary`` (what ``rerank
    mbr --json`` records: ``segments``, ``expected``, ``settings``, ``utilities``, ``repeated``, ``seconds``)."""

    picks: List[str]
    kbest: Optional[NBestList]
    summary: Dict[str, Any]


def mbr_decode(
    nbest: NBestList,
    utility: str = "chrf",
    *,
    algorithm: str = "exact",
    pseudo_refs: Optional[NBestList] = None,
    weights_from: Optional[str] = None,
    temperature: float = 1.0,
    prefilters: Sequence[str] = (),
    keep: int = 1,
    diversity: float = 0.0,
    local_search: Optional[LocalSearch] = None,
    sources: Union[Sequence[str], str, "os.PathLike[str]", None] = None,
    **settings: Any,
) -> MBRResult:
    """Minimum Bayes-risk decoding of an n-best list held in memory, as ``rerank mbr`` (the
    same engine, :func:`rerank.mbr.decode.mbr_decode`, on the list written to a temporary
    directory).

    Args:
        nbest: the candidates (:func:`read_nbest`).
        utility: the utility's metric spec (``chrf``, ``bleu``, ``comet:DIR,source=FILE``…).
        algorithm: a registered MBR algorithm (``exact``, ``aggregate``, ``centroid``,
            ``pruned``, ``lowrank``, ``halving``); ``settings``: its ``Config`` fields (``clusters=8``…).
        pseudo_refs: another list of the same segments to take the expectation over (samples).
        weights_from: the column whose softmax at ``temperature`` weighs the pseudo-references,
            or ``"uniform"``; None: the list's model column (the one its signature's
            beam feature normalises), which a list without a signature does not have (refused: give one).
        prefilters: stages keeping each segment's top K first (``mbr:chrf,top_k=16``,
            ``column:CometKiwi,top_k=8``).
        keep, diversity: with ``keep`` > 1 also the ``keep`` best (diverse with λ > 0) per segment.
        local_search: the diverse set's local search after the greedy choice
            (:class:`rerank.mbr.kbest.LocalSearch`; default: mbrs' 20 rounds, 1 neighbour, seed 0).
        sources: the N source sentences of a utility that reads them (COMET), as a list or the
            path of a file of them: the utility's ``source=FILE`` (a ``source=`` in ``utility``
            itself is an error then).
    Raises:
        InputError: as ``rerank mbr``; TypeError: a setting the algorithm does not have.
    """
    known = [f.name for f in dataclasses.fields(DECODERS.get(algorithm).Config)]
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise TypeError(
            f"mbr_decode(): the {algorithm} algorithm has no setting {', '.join(map(repr, unknown))}; "
            f"its settings: {', '.join(known) or 'none'}"
        )
    with tempfile.TemporaryDirectory(prefix="rerank-mbr.") as tmp:
        candidates, out = os.path.join(tmp, "candidates.nbest"), os.path.join(tmp, "picks.txt")
        write_signed_nbest(_nbest(nbest), candidates)  # its signature: the model column by default
        refs = None
        if pseudo_refs is not None:
            refs = os.path.join(tmp, "pseudo-refs.nbest")
            write_signed_nbest(_nbest(pseudo_refs, "pseudo_refs"), refs)
        kbest = os.path.join(tmp, "kbest.nbest") if keep > 1 else None
        if sources is not None:
            utility = _with_source(utility, _sources(sources), os.path.join(tmp, "sources.txt"))
        names = {candidates: "nbest (the candidates given)", refs: "pseudo_refs (the list given)"}
        with paths_named(names):
            summary = decode_files(
                candidates,
                out,
                utility=utility,
                pseudo_refs_path=refs,
                weights_from=weights_from,
                temperature=temperature,
                decoder=make_decoder(algorithm, **settings),
                prefilters=prefilters,
                keep=keep,
                kbest_path=kbest,
                diversity=diversity,
                local_search=local_search,
            )
        return MBRResult(read_lines(out), read_nbest(kbest) if kbest else None, summary)


def _with_source(utility: str, sources: List[str], path: str) -> str:
    """``utility`` with ``source=PATH`` added, ``sources`` written to ``path``.  Raises
    :class:`InputError` for a utility that reads no source or names one already."""
    if "source=" in utility:
        raise InputError(f"mbr_decode(): sources= and the utility's own source= ({utility}): give one of them")
    if not make_metric(utility).reads_source:
        raise InputError(f"mbr_decode(): the utility {utility} reads no source sentences (sources= is for COMET)")
    with open(path, "w", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in sources)
    return f"{utility}{',' if ':' in utility and not utility.endswith(':') else ''}source={path}"


def generate(
    model: str,
    sources: Sequence[str],
    nbest: int,
    *,
    beam: Optional[int] = None,
    sampling: Optional[str] = None,
    max_length: int = 256,
    device: str = "auto",
    dtype: str = "float32",
) -> NBestList:
    """The ``nbest`` candidates of every source sentence under ``model`` (``hf:DIR``,
    ``ct2:DIR``, ``hf-lm:DIR,prompt=FILE``), scored, as ``rerank generate`` writes them (the
    same code, :func:`rerank.features.generate.generate_file`, through a temporary
    directory): beam search (``beam``, default ``nbest``) or a sampler (``sampling``:
    ``epsilon=0.02,seed=1``, ``top_p=0.9``, ``top_k=10,temperature=0.7``, ``ancestral``).

    Raises:
        InputError: as ``rerank generate``.
    """
    drawn = None if sampling is None else Sampling.parse(sampling)
    with tempfile.TemporaryDirectory(prefix="rerank-generate.") as tmp:
        source, out = os.path.join(tmp, "sources.txt"), os.path.join(tmp, "candidates.nbest")
        with open(source, "w", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in _texts(sources, "sources"))
        with paths_named({source: "sources (the list given)"}):
            generate_file(model, source, out, None, nbest, beam, drawn, DeviceSettings(device, dtype), max_length)
        return read_nbest(out)
