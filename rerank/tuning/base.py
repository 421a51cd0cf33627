"""The tuner interface: one :class:`Tuner` base, one :class:`TuneResult`, one registry.

After Moses ``mert/`` (an ``Optimizer`` base and ``OptimizerFactory``) and mbrs (registered
components, each with a nested ``Config`` dataclass).  A tuner is one module::

    @TUNERS.register("mira")
    class Mira(Tuner):
        @dataclass
        class Config:
            iterations: int = option(60, "epochs (kbmira -J)", alias="--iterations", type=positive_int)
            seed: int = DEFAULT_SEED
        def search(self, problem, progress):
            ...
            return weights, {"best_epoch": ...}

:meth:`Tuner.tune` checks the arrays, scores the start, calls :meth:`Tuner.search` and
scores its weights.  What is maximised is the problem's metric (:class:`rerank.metrics.Metric`
as a tuning objective: BLEU by default, any metric over sufficient statistics, e.g. chrF,
TER, ``0.5*bleu+0.5*chrf``, ``seg:comet``): ``Problem.gain`` of the model-best rows; ``rerank tune``/``crossfit`` options are generated from each
registered ``Config`` (``rerank/cli/tune.py``), so a new tuner needs no other file.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, Optional, Tuple, Type

import numpy as np

from rerank.config import option  # noqa: F401  (re-exported: tuners import it from here)
from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.nbest import select_best
from rerank.nbest.sparse import SparseFeatures
from rerank.registry import Registry
from rerank.tuning._native import model_best_stats

#: every tuner by name (``rerank tune --algorithm``); the modules of rerank.tuning register themselves
TUNERS: Registry["Tuner"] = Registry("tuner", "rerank.tuning", "TUNERS")


@dataclass
class Problem:
    """One tuning problem: features float64[M, F], the metric's statistics float64[M, K],
    offsets int64[N + 1] and the start weights float64[F + S], as :func:`tuning_arrays`
    checked them; the ``metric`` maximised (whose statistics these are), the start's corpus
    gain ``start_score`` (computed once, by :meth:`Tuner.tune`) and the list's S ``sparse``
    features (:class:`rerank.nbest.sparse.SparseFeatures`, or None), whose weights follow the
    F dense ones in every weight vector."""

    features: np.ndarray
    stats: np.ndarray
    offsets: np.ndarray
    start: np.ndarray
    metric: Metric
    start_score: float = 0.0
    sparse: Optional[SparseFeatures] = None

    def scores(self, weights: np.ndarray) -> np.ndarray:
        """float64[M] model scores under ``weights`` (float[F + S])."""
        F = self.features.shape[1]
        out = self.features @ weights[:F]
        return out + self.sparse.dot(weights[F:]) if self.sparse is not None else out

    def best_stats(self, weights: np.ndarray) -> np.ndarray:
        """float64[K] summed statistics of the model-best hypotheses under ``weights``."""
        if self.sparse is not None:
            return self.stats[select_best(self.scores(weights), self.offsets)].sum(axis=0)
        return model_best_stats(self.features, self.stats, self.offsets, weights)

    def gain(self, weights: np.ndarray) -> float:
        """The metric's corpus gain (:meth:`rerank.metrics.Metric.gain`: the score, or
        minus it where lower is better) of the model-best hypotheses under ``weights``."""
        return float(self.metric.gain(self.best_stats(weights)))

    def as_score(self, gain: float) -> float:
        """A gain in the metric's own units (TER: minus the gain)."""
        return gain if self.metric.higher_is_better else -gain

    @property
    def kernel(self) -> Optional[str]:
        """The metric's compiled kernel (:attr:`rerank.metrics.Metric.fast_kernel`: ``"bleu"``
        or None), which picks the tuners' fast paths."""
        return self.metric.fast_kernel


@dataclass
class TuneResult:
    """The one result of tuning: what every tuner returns, and what :func:`rerank.tune` (the
    Python API, as ``rerank.Tuning``) and ``rerank tune`` (its JSON record) report.

    Attributes:
        vector: float64[F] tuned weights, one per column tuned.
        score: tuning-set corpus score of the weights in the metric's units (BLEU 0-100 by
            default; TER as TER, lower is better).
        initial_score: the same of the start weights.
        length_ratio: hypothesis / reference length of the model-best hypotheses in the
            metric's units (words for BLEU; None where its statistics have no length).
        details: the tuner's own record (MIRA: best epoch and score per epoch; MERT: score
            per restart, line searches; PRO: pairs, whether the start was kept).
        metric: the metric's name (``bleu``, ``chrf``, ``0.5*bleu+0.5*chrf``, ...).
        improved: whether the weights beat the start on the tuning set.
        note: when not improved, one line saying what the tuner tried, the best score it
            saw and that the start is kept (:meth:`Tuner.tried`); else "".
        weights: {column name: weight} over every column of the list (0 for the columns not
            tuned), where the list is known (:func:`rerank.tune`); what :func:`rerank.apply`
            and ``rerank apply --weights`` take.  Empty from a tuner alone.
    """

    vector: np.ndarray
    score: float
    initial_score: float
    length_ratio: Optional[float]
    details: Dict[str, Any] = field(default_factory=dict)
    metric: str = "bleu"
    improved: bool = True
    note: str = ""
    weights: Dict[str, Any] = field(default_factory=dict)
    #: the metric's direction (TER: lower is better), recorded so that replicas are compared without the metric
    higher_is_better: bool = True


class Tuner(abc.ABC):
    """Interface.  ``Config``: the tuner's settings dataclass (fields made with
    :func:`option`; a ``seed`` field receives ``rerank tune --seed``);
    :meth:`search` returns (weights float64[F], details)."""

    name: ClassVar[str] = ""
    Config: ClassVar[type]
    #: whether :meth:`search` tunes sparse features (``Problem.sparse``)
    takes_sparse: ClassVar[bool] = False

    def __init__(self, config: Any = None):
        self.config = self.Config() if config is None else config

    @abc.abstractmethod
    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Weights for ``problem`` and the tuner's details."""

    def tried(self, details: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        """(what the search tried, in words, e.g. ``10 epochs at C 0.01``; the best corpus
        gain it saw, or None where it keeps none) from its ``details``: the words of the
        one line said when no weights beat the start."""
        return "the search", None

    def tune(
        self,
        features: np.ndarray,
        stats: np.ndarray,
        offsets: np.ndarray,
        init: Optional[np.ndarray] = None,
        progress: Optional[Callable[[str], None]] = None,
        *,
        metric: Metric,
        sparse: Optional[SparseFeatures] = None,
    ) -> TuneResult:
        """Tune weights on a fixed n-best list.

        Args:
            features: float[M, F] feature values of all hypotheses.
            stats: float[M, K] the metric's statistics of every hypothesis (BLEU:
                :func:`rerank.metrics.bleu_stats.bleu_stats`, K = 9).
            offsets: int[N + 1] segment boundaries (rows ``offsets[i]:offsets[i+1]``).
            init: float[F + S] start weights (default zeros).
            progress: called with one line of text per epoch / restart.
            metric: what is maximised, the metric of ``stats`` (it must have a direction;
                no default: statistics do not say whose they are).
            sparse: the hypotheses' S sparse features (Moses ``name_key= value``), tuned
                after the F dense ones by the tuners that take them (:attr:`takes_sparse`:
                MIRA and PRO, as kbmira and ``mert --pro``); None: none.
        Returns:
            :class:`TuneResult`.
        Raises:
            ValueError: the arrays do not describe one n-best list, or ``init`` has the
                wrong shape.
            InputError: sparse features for a tuner that does not take them (MERT).
        """
        if sparse is not None and sparse.width and not self.takes_sparse:
            raise InputError(
                f"{self.name} tunes dense features only, as Moses' mert does, and the list has {sparse.width} "
                "sparse feature(s): use --algorithm mira or pro, or select dense columns (--features, --feature-sets)"
            )
        if sparse is not None and sparse.num_rows != len(features):
            raise ValueError("the sparse features have another number of rows than the features")
        extra = sparse.width if sparse is not None else 0
        problem = Problem(
            *tuning_arrays(features, stats, offsets, init, metric.width, extra),
            metric=metric,
            sparse=sparse if extra else None,
        )
        start = problem.best_stats(problem.start)
        problem.start_score = float(metric.gain(start))
        if not np.isfinite(problem.start_score):  # refused before the search: its result could not be written
            raise InputError(f"{metric.name}: the start's score is not a finite number (statistics too large)")
        weights, details = self.search(problem, progress or (lambda text: None))
        best = problem.best_stats(weights)
        improved = float(metric.gain(best)) > problem.start_score
        note = ""
        if not improved:
            what, seen = self.tried(details)
            label = metric.label
            best_seen = "" if seen is None else f"; best seen {label} {problem.as_score(seen):.2f}"
            kept = np.array_equal(weights, problem.start)
            outcome = (
                "the start weights are kept"
                if kept
                else f"its own choice is returned, {label} {problem.as_score(float(metric.gain(best))):.2f}"
            )
            note = (
                f"no improvement: {what} did not beat the start ({label} {problem.as_score(problem.start_score):.2f})"
                f"{best_seen}; {outcome}"
            )
        return TuneResult(
            weights,
            float(metric.score(best)),
            float(metric.score(start)),
            metric.length_ratio(best),
            details,
            metric.name,
            improved,
            note,
            higher_is_better=metric.higher_is_better is not False,
        )


def make_tuner(name: str, config: Any = None) -> Tuner:
    """The tuner registered as ``name`` with ``config`` (default settings when None).
    Raises :class:`InputError` for an unknown name."""
    return TUNERS.get(name)(config)


def config_fields(cls: Type["Tuner"]) -> Tuple[dataclasses.Field, ...]:
    """The fields of a tuner's ``Config``."""
    return dataclasses.fields(cls.Config)


def corpus_score(
    features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, weights: np.ndarray, metric: Metric
) -> float:
    """Corpus score of the model-best hypotheses under ``weights`` (first index on ties)
    in the units of ``metric``, whose statistics ``stats`` are (BLEU: 0-100): the one score
    every tuner, cross-fitting and the CLI compute."""
    return float(metric.score(model_best_stats(features, stats, offsets, weights)))


def tuning_arrays(
    features, stats, offsets, init: Optional[np.ndarray] = None, width: int = 9, sparse: int = 0
) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(features float64[M, F], stats float64[M, width], offsets int64[N + 1], initial
    weights float64[F + sparse]) as contiguous arrays; ``init`` None means zeros.

    Raises:
        ValueError: the three arrays do not describe one n-best list (an empty segment,
            offsets not from 0 to M, statistics of another shape), or ``init`` has the
            wrong shape.
    """
    features = np.ascontiguousarray(features, dtype=np.float64)
    stats = np.ascontiguousarray(stats, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    M, F = features.shape
    if stats.shape != (M, width) or offsets[0] != 0 or offsets[-1] != M or np.any(np.diff(offsets) < 1):
        raise ValueError("features, stats and offsets do not describe the same n-best list")
    w = np.zeros(F + sparse) if init is None else np.array(init, dtype=np.float64)
    if w.shape != (F + sparse,):
        raise ValueError(f"initial weights have shape {w.shape}, expected ({F + sparse},)")
    return features, stats, offsets, w
