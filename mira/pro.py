"""Pairwise ranking optimisation (Hopkins & May 2011, "Tuning as Ranking", EMNLP) on a
fixed n-best list, as Moses ``mert --pro`` samples it.

For each segment, ``samples`` (Γ = 5000) hypothesis pairs are drawn uniformly with
replacement; pairs whose sentence-BLEU+1 differs by at most ``threshold`` (0.05, BLEU
on a 0-1 scale) are dropped, and the ``keep`` (Ξ = 50) with the largest difference
stay.  Each kept pair (i, j) gives two training examples, ``h_i - h_j`` labelled with
the sign of ``BLEU(i) - BLEU(j)`` and its negation; a logistic regression without
intercept (scikit-learn, L2 penalty with inverse strength ``C`` on features scaled to
unit root-mean-square difference, so the penalty does not depend on feature units)
learns the weights.

Sentence-BLEU+1 is Moses' ``sentenceLevelBleuPlusOne`` (PRO's smoothing): add one to
the matches and totals of every order, brevity ``min(0, 1 - r/c)`` on the raw lengths
(:func:`bleu_plus_one`).  Sampling is vectorised over all segments and seeded; ties in
the top-Ξ choice go to the earlier sample.  The result is never worse on the tuning set
than the initial weights: if the learnt weights score lower corpus BLEU, the initial
ones are returned (``kept_initial``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from mira.common import tuning_arrays
from rerank.bleu import ORDER, REF_LEN, bleu_from_stats
from rerank.errors import InputError


@dataclass
class ProConfig:
    """PRO settings (Hopkins & May 2011): Γ ``samples`` per segment, Ξ ``keep``, the
    minimum sentence-BLEU+1 difference ``threshold`` (0-1 scale), the logistic
    regression's inverse L2 strength ``C``, and the sampling ``seed``.

    Raises:
        ValueError: non-positive counts or ``C``, negative ``threshold``.
    """

    samples: int = 5000
    keep: int = 50
    threshold: float = 0.05
    C: float = 1.0
    seed: int = 1

    def __post_init__(self):
        if self.samples < 1 or self.keep < 1:
            raise InputError("samples and keep must be at least 1")
        if not (self.threshold >= 0) or not (np.isfinite(self.C) and self.C > 0):
            raise InputError("threshold must be non-negative and C a positive number")


@dataclass
class ProResult:
    """Outcome of :func:`tune_pro`: ``weights`` float64[F] (L1-normalised), tuning-set
    ``best_bleu`` and ``initial_bleu`` (0-100), ``pairs`` kept over all segments, and
    ``kept_initial`` (True if the learnt weights were worse than the initial ones)."""

    weights: np.ndarray
    best_bleu: float
    initial_bleu: float
    pairs: int
    kept_initial: bool


def bleu_plus_one(stats: np.ndarray) -> np.ndarray:
    """Sentence-BLEU+1 (0-1) of statistics rows float[..., 9], vectorised: Moses
    ``sentenceLevelBleuPlusOne`` (Lin & Och 2004's add-one smoothing on every order)."""
    s = np.asarray(stats, dtype=np.float64)
    log_p = (np.log(s[..., 0:REF_LEN:2] + 1.0) - np.log(s[..., 1:REF_LEN:2] + 1.0)).sum(axis=-1) / ORDER
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = np.where(s[..., 1] > 0, 1.0 - s[..., REF_LEN] / s[..., 1], -np.inf)
    return np.exp(log_p + np.minimum(0.0, brevity))


def sample_pairs(sentence_bleu: np.ndarray, offsets: np.ndarray, config: ProConfig):
    """Hopkins & May's sampler, for all segments at once.

    Returns (better int64[P], worse int64[P]) row indices of the kept pairs, with
    ``sentence_bleu[better] - sentence_bleu[worse] > threshold``.
    """
    rng = np.random.default_rng(config.seed)
    counts = np.diff(offsets)
    N = len(counts)
    u = rng.random((N, config.samples, 2))
    rows = offsets[:-1, None, None] + np.floor(u * counts[:, None, None]).astype(np.int64)
    first, second = rows[..., 0], rows[..., 1]
    diff = sentence_bleu[first] - sentence_bleu[second]
    gap = np.where(np.abs(diff) > config.threshold, np.abs(diff), -1.0)  # (N, samples)
    keep = min(config.keep, config.samples)
    # stable descending sort of each row's gaps: the largest Ξ, earlier samples first on ties
    top = np.argsort(-gap, axis=1, kind="stable")[:, :keep]
    chosen = np.take_along_axis(gap, top, axis=1) > 0
    a = np.take_along_axis(first, top, axis=1)[chosen]
    b = np.take_along_axis(second, top, axis=1)[chosen]
    d = np.take_along_axis(diff, top, axis=1)[chosen]
    better = np.where(d > 0, a, b)
    worse = np.where(d > 0, b, a)
    return better, worse


def tune_pro(features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, config: ProConfig = ProConfig(),
             init: Optional[np.ndarray] = None) -> ProResult:
    """Tune weights with PRO.

    Args:
        features: float[M, F] feature values of all hypotheses.
        stats: float[M, 9] BLEU statistics (:func:`rerank.bleu.bleu_stats`).
        offsets: int[N + 1] segment boundaries.
        config: :class:`ProConfig`.
        init: float[F] initial weights (default zeros): the fallback if PRO's are worse.
    Returns:
        :class:`ProResult`.
    Raises:
        ValueError: inconsistent shapes or an empty segment.
        InputError: scikit-learn is not installed (``pip install rerank[pro]``).
    """
    from mira._native import model_best_stats

    try:
        from sklearn.linear_model import LogisticRegression
    except ImportError:
        raise InputError("--algorithm pro needs scikit-learn: pip install 'rerank[pro]'") from None
    features, stats, offsets, w0 = tuning_arrays(features, stats, offsets, init)
    initial_bleu = float(bleu_from_stats(model_best_stats(features, stats, offsets, w0)))
    better, worse = sample_pairs(bleu_plus_one(stats), offsets, config)
    if len(better) == 0:
        return ProResult(w0, initial_bleu, initial_bleu, 0, True)
    x = features[better] - features[worse]
    # columns scaled to unit RMS so that the L2 penalty treats every feature alike
    scale = np.sqrt((x ** 2).mean(axis=0))
    scale[scale == 0] = 1.0
    X = np.vstack([x, -x]) / scale
    y = np.concatenate([np.ones(len(x)), np.zeros(len(x))])
    model = LogisticRegression(C=config.C, fit_intercept=False, max_iter=1000)
    model.fit(X, y)
    w = model.coef_[0].astype(np.float64) / scale
    norm = np.abs(w).sum()
    if norm > 0:
        w = w / norm
    bleu = float(bleu_from_stats(model_best_stats(features, stats, offsets, w)))
    if bleu < initial_bleu:
        return ProResult(w0, initial_bleu, initial_bleu, len(better), True)
    return ProResult(w, bleu, initial_bleu, len(better), False)
