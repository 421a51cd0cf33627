"""k-best batch MIRA after Cherry & Foster (2012), "Batch Tuning Strategies for
Statistical Machine Translation", NAACL, as implemented by Moses ``mert/kbmira.cpp``.

Per epoch, for each sentence (shuffled order by default) under the current weights w:

* sentence BLEU of every hypothesis against a background pseudo-document ``bg``
  (:func:`rerank.bleu.background_sentence_bleu`; kbmira's ``sentenceLevelBackgroundBleu``);
* hope = argmax(w·h + BLEU), fear = argmax(w·h − BLEU), model = argmax(w·h), first index
  winning ties as in kbmira;
* if hope ≠ fear and BLEU(hope) > BLEU(fear): loss = ΔBLEU − w·(h_hope − h_fear); if
  loss > 0, w += η (h_hope − h_fear) with η = min(C, loss / ‖h_hope − h_fear‖²); then
  ``bg = decay·bg + stats(hope)`` (or the model-best's statistics with ``model_bg``).

Weights are averaged over updates exactly as kbmira's ``MiraWeightVector``: the running
total starts at the initial weights, each update adds the new weight vector, and the
average divides by the number of updates (the initial weights when there was none).
After each epoch the averaged weights select the model-best hypotheses; their corpus
BLEU decides the epoch kept (strictly better than the best so far).

Deliberate differences from kbmira:

* the initial weights are a candidate too ("epoch 0"): an epoch is kept only if its
  corpus BLEU is strictly higher than the initial weights', so tuning never returns
  weights worse on the tuning set than where it started (kbmira starts the comparison
  at BLEU 0 and can return weights worse than its start; ``kbmira_selection=True``,
  ``rerank tune --kbmira-selection``, restores that).
* kbmira de-duplicates hypotheses by hash, and its comparison can drop distinct
  hypotheses on collisions (on a 1,014 × 50-best list it kept 15.6k of 50.7k); we keep
  every hypothesis (exact duplicates cannot change any argmax, ties go to the first).
* the background starts at ones (kbmira's current default; early versions used
  4,4,3,3,2,2,1,1,4) and all arithmetic is float64 (kbmira uses float).
* the epoch-selection BLEU is sacrebleu's corpus BLEU (``exp`` smoothing), equal to
  kbmira's unsmoothed BLEU whenever every n-gram order has a match.
* shuffling uses numpy's generator with ``seed`` (kbmira: ``srand``/``random_shuffle``),
  so orders differ from kbmira's for the same seed.
* no "safe hope" rescaling (kbmira's hypergraph option ``--safe-hope`` is off by default).

The sequential update loop is compiled C (``rerank/_kernels.c``, via ctypes); everything
else is numpy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Optional

import numpy as np

from mira._native import mira_epoch, model_best_stats
from mira.common import tuning_arrays
from rerank.bleu import NUM_STATS, bleu_from_stats
from rerank.errors import InputError


@dataclass
class MiraConfig:
    """kbmira settings: ``iterations`` (-J), ``C`` (-C), ``decay`` (-D), ``shuffle``
    (not --no-shuffle), ``model_bg`` (--model-bg), the shuffling ``seed``, and
    ``kbmira_selection``: select the best epoch as kbmira does (from BLEU 0, the initial
    weights are not a candidate).

    Raises:
        ValueError: ``iterations`` < 1, ``C`` not a positive finite number, ``decay``
            outside (0, 1].
    """

    iterations: int = 60
    C: float = 0.01
    decay: float = 0.999
    shuffle: bool = True
    model_bg: bool = False
    seed: int = 1
    kbmira_selection: bool = False

    def __post_init__(self):
        if self.iterations < 1:
            raise InputError(f"iterations must be at least 1, not {self.iterations}")
        if not (np.isfinite(self.C) and self.C > 0):
            raise InputError(f"C must be a positive number, not {self.C}")
        if not (0 < self.decay <= 1):
            raise InputError(f"decay must be in (0, 1], not {self.decay}")


@dataclass
class MiraResult:
    """Outcome of :func:`tune`.

    Attributes:
        weights: float64[F] averaged weights of the best epoch.
        best_bleu: corpus BLEU (0-100) on the tuning set with ``weights``.
        best_epoch: 1-based epoch of ``weights`` (0: no epoch beat the initial weights,
            which are returned).
        initial_bleu: corpus BLEU of the initial weights.
        epoch_bleu: corpus BLEU of the averaged weights after each epoch.
        epoch_updates: number of updates in each epoch.
    """

    weights: np.ndarray
    best_bleu: float
    best_epoch: int
    initial_bleu: float
    epoch_bleu: List[float] = field(default_factory=list)
    epoch_updates: List[int] = field(default_factory=list)


def corpus_bleu_of_weights(features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, w: np.ndarray) -> float:
    """Corpus BLEU (0-100) of the model-best hypotheses under ``w`` (first index on ties)."""
    return float(bleu_from_stats(model_best_stats(features, stats, offsets, w)))


def tune(features: np.ndarray, stats: np.ndarray, offsets: np.ndarray, config: MiraConfig = MiraConfig(),
         init: Optional[np.ndarray] = None,
         callback: Optional[Callable[[int, float, int, float], None]] = None) -> MiraResult:
    """Tune weights with k-best batch MIRA.

    Args:
        features: float[M, F] feature values of all hypotheses.
        stats: float[M, 9] BLEU statistics (:func:`rerank.bleu.bleu_stats`).
        offsets: int[N + 1] segment boundaries (rows ``offsets[i]:offsets[i+1]``).
        config: kbmira settings.
        init: float[F] initial weights (default zeros, as kbmira without ``--dense-init``).
        callback: called after each epoch with (epoch, BLEU, updates, average loss).
    Returns:
        :class:`MiraResult` with the averaged weights of the best epoch.
    Raises:
        ValueError: inconsistent shapes or an empty segment.
    """
    features, stats, offsets, w = tuning_arrays(features, stats, offsets, init)
    totals = w.copy()
    num_updates = 0
    bg = np.ones(NUM_STATS)
    rng = np.random.default_rng(config.seed)
    N = len(offsets) - 1
    initial_bleu = corpus_bleu_of_weights(features, stats, offsets, w)
    best = MiraResult(weights=w.copy(), best_bleu=0.0 if config.kbmira_selection else initial_bleu, best_epoch=0,
                      initial_bleu=initial_bleu)
    for epoch in range(1, config.iterations + 1):
        order = rng.permutation(N) if config.shuffle else np.arange(N)
        updates, loss, num_updates = mira_epoch(features, stats, offsets, order, w, totals, num_updates, bg,
                                                config.C, config.decay, config.model_bg)
        avg = totals / num_updates if num_updates else w.copy()
        bleu = corpus_bleu_of_weights(features, stats, offsets, avg)
        best.epoch_bleu.append(bleu)
        best.epoch_updates.append(int(updates))
        if callback is not None:
            callback(epoch, bleu, int(updates), loss / N)
        if bleu > best.best_bleu:
            best.weights, best.best_bleu, best.best_epoch = avg.copy(), bleu, epoch
    if best.best_epoch == 0:
        best.best_bleu = initial_bleu
    return best
