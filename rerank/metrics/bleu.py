"""BLEU (Papineni et al. 2002) over :mod:`rerank.bleu`'s statistics, the layer tuning and
oracle selection use."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rerank.argtypes import non_negative_float, positive_float
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
        length_penalty: float = option(
            0.0,
            "length control for tuning: BLEU − λ·100·|ratio − target|, ratio = hypothesis / reference length "
            "(0: plain BLEU)",
            type=non_negative_float,
        )
        length_target: float = option(1.0, "the length ratio length_penalty pulls towards", type=positive_float)

    def __init__(
        self,
        tokenize: str = DEFAULT_TOKENIZE,
        lowercase: bool = False,
        length_penalty: float = 0.0,
        length_target: float = 1.0,
    ):
        self.settings = BleuSettings(tokenize, lowercase)  # validates the tokeniser name
        self.tokenize, self.lowercase = tokenize, lowercase
        #: λ and the target of the length-controlled objective (issue 46): BLEU tuned until the
        #: brevity penalty is gone overshoots the length on a set whose beam/reference length
        #: ratio differs; a penalty on |ratio − target| holds the tuned length near the target
        self.length_penalty, self.length_target = length_penalty, length_target

    def stats(self, hypotheses, references):
        return self.settings.stats(hypotheses, self.streams(references), np.arange(len(hypotheses)))

    def score(self, stats):
        bleu = bleu_from_stats(stats)
        if not self.length_penalty:
            return bleu
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(stats[..., REF_LEN] > 0, stats[..., 1] / stats[..., REF_LEN], 0.0)
        return bleu - self.length_penalty * 100.0 * np.abs(ratio - self.length_target)

    def signature(self):
        base = self.settings.signature(self.num_refs)
        if not self.length_penalty:
            return base
        return f"{base}|length_penalty:{self.length_penalty:g}|length_target:{self.length_target:g}"

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        """:meth:`BleuSettings.stats`: each reference is tokenised once, not once per hypothesis."""
        return self.settings.stats(hypotheses, self.streams(references), segment)

    def background_gain(self, rows, background):
        """kbmira's ``sentenceLevelBackgroundBleu`` (:func:`rerank.bleu.background_sentence_bleu`);
        with a length penalty, the generic gain of the pseudo-document (:class:`Metric`)."""
        if self.length_penalty:
            return super().background_gain(rows, background)
        return background_sentence_bleu(rows, background)

    def sentence_score(self, rows):
        """Moses' sentence-BLEU+1 (:func:`rerank.bleu.bleu_plus_one`), PRO's smoothing (the
        length penalty is a corpus-level term: PRO's pairs are drawn on BLEU+1 alone)."""
        return bleu_plus_one(rows)

    def length_ratio(self, summed):
        return float(summed[1] / summed[REF_LEN]) if summed[REF_LEN] else 0.0
