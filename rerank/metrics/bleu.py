"""BLEU (Papineni et al. 2002) over :mod:`rerank.bleu`'s statistics, the layer tuning and
oracle selection use."""

from __future__ import annotations

from typing import Optional

import numpy as np

from rerank.bleu import DEFAULT_TOKENIZE, BleuSettings, bleu_from_stats
from rerank.metrics.base import METRICS, Metric


@METRICS.register("bleu")
class BleuMetric(Metric):
    """BLEU (Papineni et al. 2002) as sacrebleu computes it: statistics from
    :func:`rerank.bleu.bleu_stats`, score from :func:`rerank.bleu.bleu_from_stats`."""

    name = "bleu"

    def __init__(self, tokenize: str = DEFAULT_TOKENIZE, lowercase: bool = False):
        self.settings = BleuSettings(tokenize, lowercase)  # validates the tokeniser name
        self.tokenize, self.lowercase = tokenize, lowercase

    def stats(self, hypotheses, references):
        return self.settings.stats(hypotheses, references, np.arange(len(hypotheses)))

    def score(self, stats):
        return bleu_from_stats(stats)

    def signature(self):
        return self.settings.signature()

    @classmethod
    def create(cls, tokenize: Optional[str] = None, lowercase: bool = False, lang: str = "de") -> "BleuMetric":
        return cls(tokenize or DEFAULT_TOKENIZE, lowercase)
