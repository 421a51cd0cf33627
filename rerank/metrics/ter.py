"""TER (Snover et al. 2006) with sacrebleu's settings; edit counts in C."""

from __future__ import annotations

import numpy as np

from rerank._native import ter_edits
from rerank.metrics.base import METRICS, SacrebleuStatsMetric
from rerank.metrics.utility import PairwiseUtility


@METRICS.register("ter")
class TerMetric(SacrebleuStatsMetric):
    """TER (Snover et al. 2006) via sacrebleu's defaults (case-insensitive, no
    normalisation): statistics [edits, reference length], edit counts in C;
    score = 100 · Σedits / Σref_len (100 if the references are empty and edits > 0)."""

    name = "ter"
    higher_is_better = False
    width = 2
    size_column = 1  # reference words: MIRA's sentence gain is minus the (smoothed) edit count

    def _make(self):
        from sacrebleu.metrics import TER

        return TER()  # sacrebleu's default: case-insensitive, whatever --lowercase says

    def stats(self, hypotheses, references):
        """float64[N, 2] [edits, reference length]: sacrebleu's TER tokenisation, and the
        edit counts of its ``translation_edit_rate`` computed in C (``rerank/_kernels.c``,
        tested equal to sacrebleu's on every segment)."""

        tok = self.metric.tokenizer
        hyp_words = [tok(h.rstrip()).split() for h in hypotheses]
        streams = self.streams(references)
        edits, lengths = [], []
        for stream in streams:
            ref_words = [tok(r.rstrip()).split() for r in stream]
            edits.append(ter_edits(hyp_words, ref_words))
            lengths.append([len(words) for words in ref_words])
        # several references (sacrebleu's rule): the fewest edits of any reference, over
        # the references' mean length
        out = np.zeros((len(hyp_words), 2))
        out[:, 0] = np.min(edits, axis=0) if len(hyp_words) else 0.0
        out[:, 1] = np.mean(lengths, axis=0) if len(hyp_words) else 0.0
        return out

    def pair_stats(self, texts, hyp, ref) -> np.ndarray:
        """float64[P, 2] [edits, reference length] of ``texts[hyp[k]]`` against
        ``texts[ref[k]]`` (MBR's pairs within a segment): each text tokenised once."""
        tok = self.metric.tokenizer
        words = [tok(t.rstrip()).split() for t in texts]
        refs = [words[j] for j in ref]
        out = np.zeros((len(refs), 2))
        out[:, 0] = ter_edits([words[i] for i in hyp], refs) if refs else 0.0
        out[:, 1] = [len(r) for r in refs]
        return out

    def utility(self) -> "TerUtility":
        """Minus sentence TER, MBR's ``MBRTER`` (pair by pair: TER has no n-gram counts)."""
        return TerUtility("MBRTER", self)

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        edits, ref_len = stats[..., 0], stats[..., 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ref_len > 0, edits / ref_len, np.where(edits > 0, 1.0, 0.0))
        return 100.0 * ratio


class TerUtility(PairwiseUtility):
    """MBR's TER utility: minus sentence TER (sacrebleu's tokenisation and edit counts,
    :meth:`TerMetric.pair_stats`); ≤ 0, higher is better."""

    def __init__(self, column: str, metric: TerMetric):
        super().__init__(column)
        self.metric = metric

    def pairs(self, texts, hyp, ref):
        return -self.metric.score(self.metric.pair_stats(texts, hyp, ref))
