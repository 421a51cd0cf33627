"""The tuner interface: one :class:`Tuner` base, one :class:`TuneResult`, one registry.

After Moses ``mert/`` (an ``Optimizer`` base and ``OptimizerFactory``) and mbrs (registered
components, each with a nested ``Config`` dataclass).  A tuner is one module::

    @TUNERS.register("mira")
    class Mira(Tuner):
        @dataclass
        class Config:
            iterations: int = option(60, "epochs (kbmira -J)", flag="--iterations", type=positive_int)
            seed: int = DEFAULT_SEED
        def search(self, problem, progress):
            ...
            return weights, {"best_epoch": ...}

:meth:`Tuner.tune` checks the arrays, scores the start, calls :meth:`Tuner.search` and
scores its weights; ``rerank tune``/``crossfit`` options are generated from each
registered ``Config`` (``rerank/cli/tune.py``), so a new tuner needs no other file.
"""

from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, Dict, Optional, Tuple

import numpy as np

from mira._native import model_best_stats
from rerank.bleu import NUM_STATS, REF_LEN, bleu_from_stats
from rerank.registry import Registry

#: every tuner by name (``rerank tune --algorithm``); the modules listed register themselves
TUNERS = Registry("tuner", builtin=("mira.kbmira", "mira.mert", "mira.pro"))


def option(default: Any, help: str, flag: Optional[str] = None, type: Optional[Callable[[str], Any]] = None) -> Any:
    """A ``Config`` field with its command-line help, flag (default ``--TUNER-FIELD``)
    and argument type (a parser that range-checks, e.g. ``rerank.cli.options.positive_int``)."""
    return field(default=default, metadata={"help": help, "flag": flag, "type": type})


@dataclass
class Problem:
    """One tuning problem: features float64[M, F], BLEU statistics float64[M, 9], offsets
    int64[N + 1] and the start weights float64[F], as :func:`tuning_arrays` checked them,
    and the start's corpus BLEU ``start_score`` (computed once, by :meth:`Tuner.tune`)."""

    features: np.ndarray
    stats: np.ndarray
    offsets: np.ndarray
    start: np.ndarray
    start_score: float = 0.0

    def corpus_bleu(self, weights: np.ndarray) -> float:
        """Corpus BLEU (0-100) of the model-best hypotheses under ``weights``."""
        return corpus_bleu(self.features, self.stats, self.offsets, weights)


@dataclass
class TuneResult:
    """What every tuner returns.

    Attributes:
        weights: float64[F] tuned weights.
        score: tuning-set corpus BLEU (0-100) of ``weights``.
        initial_score: corpus BLEU of the start weights.
        length_ratio: hypothesis / reference length of the model-best hypotheses.
        details: the tuner's own record (MIRA: best epoch and BLEU per epoch; MERT: BLEU
            per restart, line searches; PRO: pairs, whether the start was kept).
    """

    weights: np.ndarray
    score: float
    initial_score: float
    length_ratio: float
    details: Dict[str, Any] = field(default_factory=dict)


class Tuner(abc.ABC):
    """Interface.  ``Config``: the tuner's settings dataclass (fields made with
    :func:`option`; a ``seed`` field receives ``rerank tune --seed``);
    :meth:`search` returns (weights float64[F], details)."""

    name: ClassVar[str] = ""
    Config: ClassVar[type]

    def __init__(self, config: Any = None):
        self.config = self.Config() if config is None else config

    @abc.abstractmethod
    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        """Weights for ``problem`` and the tuner's details."""

    def tune(self, features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, init: Optional[np.ndarray] = None,
             progress: Optional[Callable[[str], None]] = None) -> TuneResult:
        """Tune weights on a fixed n-best list.

        Args:
            features: float[M, F] feature values of all hypotheses.
            stats: float[M, 9] BLEU statistics (:func:`rerank.bleu.bleu_stats`).
            offsets: int[N + 1] segment boundaries (rows ``offsets[i]:offsets[i+1]``).
            init: float[F] start weights (default zeros).
            progress: called with one line of text per epoch / restart.
        Returns:
            :class:`TuneResult`.
        Raises:
            ValueError: the arrays do not describe one n-best list, or ``init`` has the
                wrong shape.
        """
        problem = Problem(*tuning_arrays(features, stats, offsets, init))
        problem.start_score = problem.corpus_bleu(problem.start)
        weights, details = self.search(problem, progress or (lambda text: None))
        best = model_best_stats(problem.features, problem.stats, problem.offsets, weights)
        return TuneResult(weights, float(bleu_from_stats(best)), problem.start_score, length_ratio(best), details)


def make_tuner(name: str, config: Any = None) -> Tuner:
    """The tuner registered as ``name`` with ``config`` (default settings when None).
    Raises :class:`InputError` for an unknown name."""
    return TUNERS.get(name)(config)


def config_fields(cls: type) -> Tuple[dataclasses.Field, ...]:
    """The fields of a tuner's ``Config``."""
    return dataclasses.fields(cls.Config)


def corpus_bleu(features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, weights: np.ndarray) -> float:
    """Corpus BLEU (0-100) of the model-best hypotheses under ``weights`` (first index on
    ties): the one score every tuner, cross-fitting and the CLI compute."""
    return float(bleu_from_stats(model_best_stats(features, stats, offsets, weights)))


def length_ratio(best_stats: np.ndarray) -> float:
    """Hypothesis / reference length of summed statistics (0 when the reference is empty)."""
    return float(best_stats[1] / best_stats[REF_LEN]) if best_stats[REF_LEN] else 0.0


def tuning_arrays(features, stats, offsets, init: Optional[np.ndarray] = None
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(features float64[M, F], stats float64[M, 9], offsets int64[N + 1], initial weights
    float64[F]) as contiguous arrays; ``init`` None means zeros.

    Raises:
        ValueError: the three arrays do not describe one n-best list (an empty segment,
            offsets not from 0 to M, statistics of another shape), or ``init`` has the
            wrong shape.
    """
    features = np.ascontiguousarray(features, dtype=np.float64)
    stats = np.ascontiguousarray(stats, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    M, F = features.shape
    if stats.shape != (M, NUM_STATS) or offsets[0] != 0 or offsets[-1] != M or np.any(np.diff(offsets) < 1):
        raise ValueError("features, stats and offsets do not describe the same n-best list")
    w = np.zeros(F) if init is None else np.array(init, dtype=np.float64)
    if w.shape != (F,):
        raise ValueError(f"initial weights have shape {w.shape}, expected ({F},)")
    return features, stats, offsets, w
