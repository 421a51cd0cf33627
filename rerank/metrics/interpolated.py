"""Interpolated metrics: ``0.5*bleu+0.5*chrf``, ``bleu-ter``, ``0.5*bleu+0.5*comet:DIR``.

A weighted sum of metrics, each computed from its own columns of one concatenated
statistics row, so that every tuner, the oracle and significance handle it as any other
metric.  Each term's sign must agree with its metric's direction (``+bleu``, ``-ter``).
Every term is on the 0-100 scale sacreBLEU reports BLEU, chrF and TER on: a 0-1 metric
(COMET, CometKiwi, BERTScore) enters ×100 (:attr:`Metric.interpolation_scale`), so that
``0.5*bleu+0.5*comet:DIR`` gives COMET half of the weight (on its own 0-1 scale it got ~1 %).
``seg:NAME`` scores enter as written in their sidecar: scores on 0-1 need a coefficient ×100
(``bleu+20*seg:comet`` gives COMET the weight 0.2 has beside BLEU).

Moses ``mert --sctype BLEU,TER --scconfig weights:0.5+0.5`` (``InterpolatedScorer``)
maximises 0.5·BLEU + 0.5·(1 − TER) on a 0-1 scale (its ``TerScorer`` returns 1 − TER).
``0.5*bleu-0.5*ter`` here is 0.5·BLEU − 0.5·TER on a 0-100 scale: 100 × (Moses' value
− 0.5), so both select the same weights.
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric


class InterpolatedMetric(Metric):
    """Σ_i c_i · score_i over ``terms`` [(c_i, metric_i)]: statistics are the metrics'
    rows side by side; higher is better.  ``c_i > 0`` for a metric where higher is
    better, ``c_i < 0`` where lower is better.

    Raises:
        InputError: no term, a zero coefficient, a coefficient whose sign
            contradicts the metric's direction, or a metric without a direction.
    """

    higher_is_better = True

    def __init__(self, terms: Sequence[Tuple[float, Metric]], name: Optional[str] = None):
        if not terms:
            raise InputError("an interpolation needs at least one term")
        for coefficient, metric in terms:
            if metric.higher_is_better is None:
                raise InputError(f"{metric.name} has no better direction and cannot be interpolated")
            if coefficient == 0 or (coefficient > 0) != metric.higher_is_better:
                sign = "+" if metric.higher_is_better else "-"
                raise InputError(
                    f"{metric.name} is better {'higher' if metric.higher_is_better else 'lower'}: give it "
                    f"a {'positive' if sign == '+' else 'negative'} coefficient ({sign}{metric.name})"
                )
        self.terms = list(terms)
        self.name = name or format_terms(self.terms)
        self.from_text = all(metric.from_text for _, metric in self.terms)
        self.reads_source = any(metric.reads_source for _, metric in self.terms)
        self.width = sum(metric.width for _, metric in self.terms)

    # statistics -------------------------------------------------------------

    def _parts(self, stats: np.ndarray):
        stats = np.asarray(stats, dtype=np.float64)
        start = 0
        for coefficient, metric in self.terms:
            yield abs(coefficient), metric, stats[..., start : start + metric.width]
            start += metric.width

    def _join(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        return np.hstack(blocks)

    def stats(self, hypotheses, references):
        return self._join([metric.stats(hypotheses, references) for _, metric in self.terms])

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        return self._join([metric.hypothesis_stats(hypotheses, references, segment, lines) for _, metric in self.terms])

    def bind(self, path):
        return InterpolatedMetric([(c, metric.bind(path)) for c, metric in self.terms], self.name)

    def sidecars(self, path):
        return [file for _, metric in self.terms for file in metric.sidecars(path)]

    def check_count(self, count):
        for _, metric in self.terms:
            metric.check_count(count)

    # scores -----------------------------------------------------------------

    def score(self, stats):
        return sum(c * metric.interpolation_scale * metric.gain(part) for c, metric, part in self._parts(stats))

    def background_gain(self, rows, background):
        return sum(
            c * metric.interpolation_scale * metric.background_gain(part, bg)
            for (c, metric, part), (_, _, bg) in zip(self._parts(rows), self._parts(background))
        )

    def sentence_score(self, rows):
        return sum(c * metric.sentence_score(part) for c, metric, part in self._parts(rows))

    def length_ratio(self, summed):
        for _, metric, part in self._parts(summed):
            ratio = metric.length_ratio(part)
            if ratio is not None:
                return ratio
        return None

    def signature(self):
        scaled = [
            f"{metric.label}×{metric.interpolation_scale:g}"
            for _, metric in self.terms
            if metric.interpolation_scale != 1
        ]
        on = f" (0-100 scale: {', '.join(scaled)})" if scaled else ""
        return self.name + on + " with " + " + ".join(metric.signature() for _, metric in self.terms)


def format_terms(terms: Sequence[Tuple[float, Metric]]) -> str:
    """``0.5*bleu+0.5*chrf`` for [(0.5, BLEU), (0.5, chrF)]; a coefficient ±1 is left out."""
    text = ""
    for coefficient, metric in terms:
        sign = "-" if coefficient < 0 else ("+" if text else "")
        size = abs(coefficient)
        text += sign + ("" if size == 1 else f"{size:g}*") + metric.name
    return text
