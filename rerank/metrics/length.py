"""Length ratio, as MultEval reports it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.config import option
from rerank.metrics.base import METRICS, Metric
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import REF_LEN


@METRICS.register("length")
class LengthMetric(Metric):
    """Length ratio as MultEval reports it: 100 · hypothesis length / reference length
    (words after BLEU's tokenisation; with one reference the closest reference is that
    one).  Statistics are columns t1 and r of :func:`rerank.metrics.bleu_stats.bleu_stats`."""

    name = "length"
    tokenize: str  # the settings' types, for the type checker (declared in Config)
    width = 2
    higher_is_better = None  # neither: closeness to 100 matters, so no better/worse marks

    @dataclass
    class Config:  # BLEU's tokenisation decides what a word is
        tokenize: str = option("13a", "sacrebleu's tokeniser (none for tokenised text)")
        lowercase: bool = option(False, "lowercase before scoring")

    def setup(self) -> None:
        self.bleu = BleuMetric(self.tokenize, self.lowercase)

    def stats(self, hypotheses, references):

        return self.bleu.stats(hypotheses, references)[:, [1, REF_LEN]]

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(stats[..., 1] > 0, 100.0 * stats[..., 0] / stats[..., 1], 0.0)

    def signature(self):
        return "length|" + self.bleu.signature()
