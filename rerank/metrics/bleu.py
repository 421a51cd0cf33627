"""BLEU (Papineni et al. 2002) over :mod:`rerank.bleu`'s statistics, the layer tuning and
oracle selection use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.bleu import (
    DEFAULT_TOKENIZE,
    NUM_STATS,
    REF_LEN,
    BleuSettings,
    background_sentence_bleu,
    bleu_from_stats,
    bleu_plus_one,
)
from rerank.config import option
from rerank.metrics.base import METRICS, Metric


@METRICS.register("bleu")
class BleuMetric(Metric):
    """BLEU (Papineni et al. 2002) as sacrebleu computes it: statistics from
    :func:`rerank.bleu.bleu_stats`, score from :func:`rerank.bleu.bleu_from_stats`."""

    name = "bleu"
    size_column = REF_LEN
    width = NUM_STATS

    @dataclass
    class Config:
        tokenize: str = option(DEFAULT_TOKENIZE, "sacrebleu's tokeniser (none for tokenised text)")
        lowercase: bool = option(False, "lowercase before scoring")

    def __init__(self, tokenize: str = DEFAULT_TOKENIZE, lowercase: bool = False):
        self.settings = BleuSettings(tokenize, lowercase)  # validates the tokeniser name
        self.tokenize, self.lowercase = tokenize, lowercase

    def stats(self, hypotheses, references):
        return self.settings.stats(hypotheses, self.streams(references), np.arange(len(hypotheses)))

    def score(self, stats):
        return bleu_from_stats(stats)

    def signature(self):
        return self.settings.signature(self.num_refs)

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        """:meth:`BleuSettings.stats`: each reference is tokenised once, not once per hypothesis."""
        return self.settings.stats(hypotheses, self.streams(references), segment)

    def background_gain(self, rows, background):
        """kbmira's ``sentenceLevelBackgroundBleu`` (:func:`rerank.bleu.background_sentence_bleu`)."""
        return background_sentence_bleu(rows, background)

    def sentence_score(self, rows):
        """Moses' sentence-BLEU+1 (:func:`rerank.bleu.bleu_plus_one`), PRO's smoothing."""
        return bleu_plus_one(rows)

    def length_ratio(self, summed):
        return float(summed[1] / summed[REF_LEN]) if summed[REF_LEN] else 0.0
