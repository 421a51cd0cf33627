"""k-best batch MIRA after Cherry & Foster (2012), "Batch Tuning Strategies for
Statistical Machine Translation", NAACL, as implemented by Moses ``mert/kbmira.cpp``.

Per epoch, for each sentence (shuffled order by default) under the current weights w:

* sentence BLEU of every hypothesis against a background pseudo-document ``bg``
  (:func:`rerank.metrics.bleu_stats.background_sentence_bleu`; kbmira's ``sentenceLevelBackgroundBleu``);
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

Other metrics (chrF, TER, METEOR, interpolations, ``seg:`` scores): the same algorithm
with the metric's smoothed sentence gain (:meth:`rerank.metrics.Metric.background_gain`,
the row added to the background pseudo-document) in place of background BLEU, and the
metric's corpus gain selecting the epoch.

``Mira`` is registered as tuner ``mira`` (:mod:`rerank.tuning.base`).  The sequential update
loop is compiled C for BLEU (``rerank/tuning/_kernels.c``, via ctypes) and numpy per sentence for
every other metric (:func:`mira_epoch_numpy`, equal to the C loop on BLEU, tested).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from rerank.argtypes import positive_float, positive_int, unit_interval
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.nbest.sparse import SparseFeatures
from rerank.tuning._native import mira_epoch
from rerank.tuning.base import TUNERS, Problem, Tuner, option


@dataclass
class MiraConfig:
    """kbmira settings (flags of ``rerank tune``, kbmira's in parentheses).

    Raises:
        InputError: ``iterations`` < 1, ``C`` not a positive finite number, ``decay``
            outside (0, 1].
    """

    iterations: int = option(60, "epochs (kbmira -J)", "--iterations", positive_int)
    C: float = option(0.01, "step-size cap (kbmira -C)", "--C", positive_float)
    decay: float = option(0.999, "background BLEU decay (kbmira -D)", "--decay", unit_interval)
    shuffle: bool = option(True, "visit sentences in a shuffled order (--mira-no-shuffle: file order)", "--no-shuffle")
    model_bg: bool = option(False, "background from the model-best (kbmira --model-bg)", "--model-bg")
    seed: int = DEFAULT_SEED
    kbmira_selection: bool = option(
        False, "select the best epoch as kbmira (the initial weights are no candidate)", "--kbmira-selection"
    )

    def __post_init__(self):
        if self.iterations < 1:
            raise InputError(f"iterations must be at least 1, not {self.iterations}")
        if not (np.isfinite(self.C) and self.C > 0):
            raise InputError(f"C must be a positive number, not {self.C}")
        if not (0 < self.decay <= 1):
            raise InputError(f"decay must be in (0, 1], not {self.decay}")


def _hope_fear(metric: Metric, scores, stats, bg):
    """kbmira's hope and fear among one sentence's rows (``stats`` int[N, S], ``scores``
    float[N] = w·h): hope = argmax(w·h + g), fear = argmax(w·h − g) with g the background
    gain (first row on ties).  Returns (gains, hope, fear), or None when there is nothing to
    learn (hope = fear or g(hope) ≤ g(fear))."""
    gains = metric.background_gain(stats, bg)
    hope, fear = int(np.argmax(scores + gains)), int(np.argmax(scores - gains))
    if hope == fear or not gains[hope] > gains[fear]:
        return None
    return gains, hope, fear


def _step(loss: float, squared_norm: float, C: float) -> float:
    """MIRA's step size: loss / ‖Δh‖², capped at C (C where Δh = 0)."""
    return C if (squared_norm == 0.0 or loss / squared_norm > C) else loss / squared_norm


def _move_background(bg, stats, start: int, scores, hope: int, decay: float, model_bg: bool) -> None:
    """The background statistics decay and take the hope's (or, ``model_bg``, the
    model-best's) row, in place."""
    bg *= decay
    bg += stats[start + (int(np.argmax(scores)) if model_bg else hope)]


def mira_epoch_numpy(
    metric: Metric,
    features,
    stats,
    offsets,
    order,
    w,
    totals,
    num_updates: int,
    bg,
    C: float,
    decay: float,
    model_bg: bool,
):
    """One kbmira epoch for any metric, as ``mira_epoch`` (C, BLEU) does it: per sentence
    in ``order``, hope = argmax(w·h + g), fear = argmax(w·h − g), model = argmax(w·h)
    with g = ``metric.background_gain(rows, bg)`` (first row on ties); an update when
    hope ≠ fear, g(hope) > g(fear) and the loss is positive; then the background moves
    towards the hope's (or model-best's) statistics.  Updates ``w``, ``totals`` and ``bg``
    in place.  Returns (updates, summed loss, num_updates)."""
    updates, total_loss = 0, 0.0
    for s in order:
        start, end = offsets[s], offsets[s + 1]
        scores = features[start:end] @ w
        picked = _hope_fear(metric, scores, stats[start:end], bg)
        if picked is None:
            continue
        gains, hope, fear = picked
        diff = features[start + hope] - features[start + fear]
        loss = (gains[hope] - gains[fear]) - float(diff @ w)
        if loss > 0.0:
            eta = _step(loss, float(diff @ diff), C)
            num_updates += 1
            w += eta * diff
            totals += w
            total_loss += loss
            updates += 1
        _move_background(bg, stats, start, scores, hope, decay, model_bg)
    return updates, total_loss, num_updates


def mira_epoch_sparse(
    metric: Metric,
    sparse: SparseFeatures,
    features,
    stats,
    offsets,
    order,
    w,
    totals,
    num_updates: int,
    bg,
    C: float,
    decay: float,
    model_bg: bool,
):
    """:func:`mira_epoch_numpy` over dense features float[M, F] and ``sparse`` ones (S of
    them; ``w`` and ``totals`` are float[F + S]), as kbmira tunes Moses' sparse features: each
    update touches only the features on which hope and fear differ, and the running sum of the
    weights is kept lazily (``totals = n·w − u`` after n updates, ``u`` moving by (n − 1)·δ
    where w moves by δ), as kbmira's ``MiraWeightVector`` averages, so an update costs the
    features it touches, not F + S.  The same result as :func:`mira_epoch_numpy` on the
    densified list (up to rounding).  Updates ``w``, ``totals`` and ``bg`` in place."""
    F = features.shape[1]
    indptr, indices, values, row_of = sparse.indptr, sparse.indices, sparse.values, sparse.row_of
    u = num_updates * w - totals
    updates, total_loss = 0, 0.0
    for s in order:
        start, end = offsets[s], offsets[s + 1]
        lo, hi = indptr[start], indptr[end]
        scores = features[start:end] @ w[:F]
        if hi > lo:
            scores += np.bincount(row_of[lo:hi] - start, values[lo:hi] * w[F + indices[lo:hi]], minlength=end - start)
        picked = _hope_fear(metric, scores, stats[start:end], bg)
        if picked is None:
            continue
        gains, hope, fear = picked
        dense = features[start + hope] - features[start + fear]
        h, f = start + hope, start + fear
        keys = np.concatenate([indices[indptr[h] : indptr[h + 1]], indices[indptr[f] : indptr[f + 1]]])
        vals = np.concatenate([values[indptr[h] : indptr[h + 1]], -values[indptr[f] : indptr[f + 1]]])
        keys, inverse = np.unique(keys, return_inverse=True)
        vals = np.bincount(inverse, vals, minlength=len(keys))
        loss = (gains[hope] - gains[fear]) - float(dense @ w[:F]) - float(vals @ w[F + keys])
        if loss > 0.0:
            eta = _step(loss, float(dense @ dense) + float(vals @ vals), C)
            w[:F] += eta * dense
            w[F + keys] += eta * vals
            u[:F] += num_updates * eta * dense
            u[F + keys] += num_updates * eta * vals
            num_updates += 1
            total_loss += loss
            updates += 1
        _move_background(bg, stats, start, scores, hope, decay, model_bg)
    totals[:] = num_updates * w - u
    return updates, total_loss, num_updates


@TUNERS.register("mira")
class Mira(Tuner):
    """k-best batch MIRA (Cherry & Foster 2012) as Moses ``kbmira``: see the module
    docstring.  Details: ``best_epoch`` (0: no epoch beat the start, which is returned),
    ``epoch_score`` (the metric's corpus gain: BLEU for BLEU, −TER for TER) and
    ``epoch_updates`` per epoch."""

    name = "mira"
    Config = MiraConfig
    takes_sparse = True
    #: run the numpy loop even for BLEU (tests compare it with the C loop)
    numpy_loop = False
    #: segments per call of the epoch (C or numpy): the state carries over, so the result is
    #: that of one call, and Ctrl-C / SIGTERM wait for one block only (well under a second)
    BLOCK = 8192

    def search(self, problem: Problem, progress: Callable[[str], None]) -> Tuple[np.ndarray, Dict[str, Any]]:
        config = self.config
        features, stats, offsets = problem.features, problem.stats, problem.offsets
        w = problem.start.copy()
        totals = w.copy()
        num_updates = 0
        bg = np.ones(stats.shape[1])
        rng = np.random.default_rng(config.seed)
        N = len(offsets) - 1
        best_weights, best_epoch = w.copy(), 0
        best_gain = (0.0 if problem.kernel == "bleu" else -np.inf) if config.kbmira_selection else problem.start_score
        epoch_score, epoch_updates = [], []
        run_epoch: Callable[..., Any]
        if problem.sparse is not None:
            run_epoch = partial(mira_epoch_sparse, problem.metric, problem.sparse)
        elif problem.kernel == "bleu" and not self.numpy_loop:
            run_epoch = mira_epoch
        else:
            run_epoch = partial(mira_epoch_numpy, problem.metric)
        for epoch in range(1, config.iterations + 1):
            order = rng.permutation(N) if config.shuffle else np.arange(N)
            updates, loss = 0, 0.0
            for lo in range(0, N, self.BLOCK):  # the state is updated in place: blocks = one call
                block_updates, block_loss, num_updates = run_epoch(
                    features,
                    stats,
                    offsets,
                    order[lo : lo + self.BLOCK],
                    w,
                    totals,
                    num_updates,
                    bg,
                    config.C,
                    config.decay,
                    config.model_bg,
                )
                updates, loss = updates + block_updates, loss + block_loss
            avg = totals / num_updates if num_updates else w.copy()
            gain = problem.gain(avg)
            epoch_score.append(gain)
            epoch_updates.append(int(updates))
            progress(
                f"epoch {epoch:3d}: {int(updates)} updates, avg loss {loss / N:.4f}, tuning "
                f"{problem.metric.label} {problem.as_score(gain):.2f}"
            )
            if gain > best_gain:
                best_weights, best_gain, best_epoch = avg.copy(), gain, epoch
        return best_weights, {"best_epoch": best_epoch, "epoch_score": epoch_score, "epoch_updates": epoch_updates}

    def tried(self, details: Dict[str, Any]) -> Tuple[str, Optional[float]]:
        scores = details["epoch_score"]
        what = f"{len(scores)} epoch(s) at C {self.config.C:g}" + (", model BG" if self.config.model_bg else "")
        return what, max(scores) if scores else None
