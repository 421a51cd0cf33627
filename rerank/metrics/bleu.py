"""BLEU (Papineni et al. 2002) over :mod:`rerank.bleu`'s statistics, the layer tuning and
oracle selection use."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rerank.metrics.base import METRICS, Metric


@METRICS.register("bleu")
class BleuMetric(Metric):
    """BLEU (Papineni et al. 2002) as sacrebleu computes it: statistics from
    :func:`rerank.bleu.bleu_stats`, score from :func:`rerank.bleu.bleu_from_stats`."""

    name = "bleu"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False):
        from rerank.bleu import sacrebleu_metric

        sacrebleu_metric(tokenize, lowercase)  # validates the tokeniser name
        self.tokenize, self.lowercase = tokenize, lowercase

    def stats(self, hypotheses, references):
        from rerank.bleu import bleu_stats

        return bleu_stats(hypotheses, references, np.arange(len(hypotheses)), self.tokenize, self.lowercase)

    def score(self, stats):
        from rerank.bleu import bleu_from_stats

        return bleu_from_stats(stats)

    def signature(self):
        from rerank.bleu import bleu_signature

        return bleu_signature(self.tokenize, self.lowercase)

    @classmethod
    def create(cls, tokenize: Optional[str] = None, lowercase: bool = False, lang: str = "de") -> "BleuMetric":
        return cls(tokenize or "13a", lowercase)
