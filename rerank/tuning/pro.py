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
(:func:`rerank.metrics.bleu_stats.bleu_plus_one`).  For another metric the pairs are drawn on its
sentence-level score (:meth:`rerank.metrics.Metric.sentence_score`, 0-1 scale: chrF,
−TER, a ``seg:`` score itself) and the corpus gain decides whether the start is kept.  Sampling is vectorised over all segments and seeded; ties in
the top-Ξ choice go to the earlier sample.  The result is never worse on the tuning set
than the initial weights: if the learnt weights score lower corpus BLEU, the initial
ones are returned (``kept_initial``).  ``Pro`` is registered as tuner ``pro``
(:mod:`rerank.tuning.base`); scikit-learn is the one optional dependency, loaded when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from rerank.argtypes import non_negative_float, positive_float, positive_int
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.tuning.base import TUNERS, Problem, Tuner, option


@dataclass
class ProConfig:
    """PRO settings (Hopkins & May 2011; flags of ``rerank tune``).

    Raises:
        InputError: non-positive counts or ``C``, negative ``threshold``.
    """

    samples: int = option(5000, "sampled pairs per sentence (Gamma)", "--pro-samples", positive_int)
    keep: int = option(50, "pairs kept per sentence (Xi)", "--pro-keep", positive_int)
    threshold: float = option(
        0.05,
        "the smallest sentence-BLEU+1 difference of a kept pair (0-1 scale)",
        "--pro-threshold",
        non_negative_float,
    )
    C: float = option(1.0, "inverse L2 strength of the logistic regression", "--pro-C", positive_float)
    seed: int = DEFAULT_SEED

    def __post_init__(self):
        if self.samples < 1 or self.keep < 1:
            raise InputError("samples and keep must be at least 1")
        if not (self.threshold >= 0) or not (np.isfinite(self.C) and self.C > 0):
            raise InputError("threshold must be non-negative and C a positive number")


def sample_pairs(sentence_scores: np.ndarray, offsets: np.ndarray, config: ProConfig):
    """Hopkins & May's sampler, for all segments at once.

    Returns (better int64[P], worse int64[P]) row indices of the kept pairs, with
    ``sentence_scores[better] - sentence_scores[worse] > threshold``.
    """
    rng = np.random.default_rng(config.seed)
    counts = np.diff(offsets)
    N = len(counts)
    u = rng.random((N, config.samples, 2))
    rows = offsets[:-1, None, None] + np.floor(u * counts[:, None, None]).astype(np.int64)
    first, second = rows[..., 0], rows[..., 1]
    diff = sentence_scores[first] - sentence_scores[second]
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


def pair_differences(problem: Problem, better: np.ndarray, worse: np.ndarray):
    """The feature differences h_better − h_worse of the P pairs: float64[P, F] for a dense
    problem; for one with S sparse features a scipy CSR matrix [P, F + S] (the dense
    differences, then the sparse ones, which stay sparse as ``mert --pro`` writes them)."""
    dense = problem.features[better] - problem.features[worse]
    sparse = problem.sparse
    if sparse is None:
        return dense
    from scipy import sparse as sp

    def rows(which: np.ndarray):
        part = sparse.take(which)
        return sp.csr_matrix((part.values, part.indices, part.indptr), shape=(len(which), sparse.width))

    return sp.hstack([sp.csr_matrix(dense), rows(better) - rows(worse)]).tocsr()


@TUNERS.register("pro")
class Pro(Tuner):
    """PRO (Hopkins & May 2011) as Moses ``mert --pro``: see the module docstring.
    Weights are returned L1-normalised.  Details: ``pairs`` kept over all segments,
    ``kept_initial`` (True if the learnt weights were worse than the start).

    Raises (from :meth:`tune`):
        InputError: scikit-learn is not installed (``pip install 'nbest-rerank[pro]'``).
    """

    name = "pro"
    Config = ProConfig
    takes_sparse = True

    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        try:
            from sklearn.linear_model import LogisticRegression
        except ImportError:
            raise InputError("--algorithm pro needs scikit-learn: pip install 'nbest-rerank[pro]'") from None
        w0 = problem.start
        better, worse = sample_pairs(problem.metric.sentence_score(problem.stats), problem.offsets, self.config)
        if len(better) == 0:
            return w0, {"pairs": 0, "kept_initial": True}
        x = pair_differences(problem, better, worse)
        # columns scaled to unit RMS so that the L2 penalty treats every feature alike
        scale = np.sqrt(np.asarray(x.multiply(x).mean(axis=0) if hasattr(x, "multiply") else (x**2).mean(axis=0)))
        scale = scale.reshape(-1)
        scale[scale == 0] = 1.0
        if hasattr(x, "multiply"):  # sparse features: the pairs' differences stay sparse (scipy, with scikit-learn)
            from scipy import sparse as sp

            X = sp.vstack([x, -x]).tocsr() @ sp.diags(1.0 / scale)
        else:
            X = np.vstack([x, -x]) / scale
        y = np.concatenate([np.ones(x.shape[0]), np.zeros(x.shape[0])])
        model = LogisticRegression(C=self.config.C, fit_intercept=False, max_iter=1000)
        model.fit(X, y)
        w = model.coef_[0].astype(np.float64) / scale
        norm = np.abs(w).sum()
        if norm > 0:
            w = w / norm
        progress(f"{len(better)} pairs")
        if problem.gain(w) < problem.start_score:
            return w0, {"pairs": len(better), "kept_initial": True}
        return w, {"pairs": len(better), "kept_initial": False}

    def tried(self, details: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        return f"a logistic regression on {details['pairs']} sampled pair(s)", None
