"""chrF (Popović 2015) with sacrebleu's settings, and its statistics for all pairs of an
n-best list (consensus features)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from rerank.argtypes import non_negative_int, positive_int
from rerank.config import option
from rerank.metrics.base import METRICS, SacrebleuStatsMetric
from rerank.metrics.bleu_stats import pair_matches
from rerank.metrics.utility import NgramUtility, char_ids


@METRICS.register("chrf")
class ChrfMetric(SacrebleuStatsMetric):
    """chrF (Popović 2015) via sacrebleu (char order 6, beta 2; ``chrf:word_order=2`` is
    chrF++, Popović 2017): statistics are [hyp, ref, match] counts per order (character
    orders, then word orders); the score follows sacrebleu's effective-order averaging of
    precision and recall."""

    name = "chrf"
    # the settings' types, for the type checker (declared, with defaults and help, in Config)
    char_order: int
    word_order: int
    beta: int
    size_column = 1  # reference characters (order 1): MIRA's sentence gains are in characters

    @dataclass
    class Config:
        char_order: int = option(6, "character n-gram order", type=positive_int)
        word_order: int = option(0, "word n-gram order (2: chrF++)", type=non_negative_int)
        beta: int = option(2, "recall's weight", type=positive_int)
        lowercase: bool = option(False, "lowercase before scoring")

    @property
    def label(self) -> str:
        """sacrebleu's name: ``chrF2`` (β 2), ``chrF2++`` (word order 2)."""
        return f"chrF{self.beta}" + "+" * self.word_order

    def setup(self) -> None:
        super().setup()
        #: 3 statistics (hypothesis, reference, matching n-grams) per character and word order
        self.width = 3 * (self.char_order + self.word_order)

    def length_ratio(self, summed):
        """Hypothesis / reference characters (whitespace removed, as chrF counts them)."""
        return float(summed[0] / summed[1]) if summed[1] else 0.0

    def utility(self) -> Optional["ChrfUtility"]:
        """Sentence chrF over characters (whitespace removed), MBR's ``MBRchrF``; None for
        chrF++ (word n-grams have no pairwise statistics here)."""
        return None if self.word_order else ChrfUtility("MBRchrF", self)

    def _make(self):
        from sacrebleu.metrics import CHRF

        return CHRF(char_order=self.char_order, word_order=self.word_order, beta=self.beta, lowercase=self.lowercase)

    def pair_stats(self, texts: Sequence[str], hyp_index: np.ndarray, ref_index: np.ndarray) -> np.ndarray:
        """float64[K, 3 · char order] statistics of ``texts[hyp_index[k]]`` against
        ``texts[ref_index[k]]`` for every pair k, in sacrebleu's layout (per order: hyp,
        ref, match counts), equal to its ``_extract_corpus_statistics`` on each pair
        (whitespace removed, as chrF's default).  Vectorised: characters become dense ids,
        each text's n-gram codes are sorted once (:func:`rerank.metrics.bleu_stats.pair_matches`)."""

        if self.metric.word_order or self.metric.whitespace:
            raise ValueError("pair_stats covers chrF (word order 0, whitespace removed) only")
        stripped = ["".join((t.lower() if self.lowercase else t).split()) for t in texts]
        lengths = np.array([len(t) for t in stripped], dtype=np.int64)
        points = np.frombuffer("".join(stripped).encode("utf-32-le"), dtype=np.uint32)
        alphabet, ids = np.unique(points, return_inverse=True)
        order = self.metric.char_order
        hyp_index = np.asarray(hyp_index, dtype=np.int64)
        ref_index = np.asarray(ref_index, dtype=np.int64)
        if not len(hyp_index):
            return np.zeros((0, 3 * order))
        matches = pair_matches(ids.astype(np.int64).reshape(-1), lengths, len(alphabet), hyp_index, ref_index, order)
        n = np.arange(order)
        return self.stats_from_matches(
            matches, np.maximum(lengths[hyp_index, None] - n, 0), np.maximum(lengths[ref_index, None] - n, 0)
        )

    @staticmethod
    def stats_from_matches(matches: np.ndarray, hyp_ngrams: np.ndarray, ref_ngrams: np.ndarray) -> np.ndarray:
        """float64[..., 3 · order] chrF statistics (sacrebleu's layout: per order hypothesis,
        reference and match counts) of clipped character n-gram ``matches`` float[..., order]
        between hypotheses of ``hyp_ngrams`` and references of ``ref_ngrams`` n-grams per order
        (float for an aggregate reference), vectorised over leading axes; as sacrebleu, an
        order the reference has no n-gram of counts no hypothesis n-grams."""
        matches = np.asarray(matches, dtype=np.float64)
        ref_ngrams = np.broadcast_to(np.asarray(ref_ngrams, dtype=np.float64), matches.shape)
        out = np.empty(matches.shape[:-1] + (3 * matches.shape[-1],))
        out[..., 0::3] = np.where(ref_ngrams > 0, hyp_ngrams, 0.0)
        out[..., 1::3] = ref_ngrams
        out[..., 2::3] = matches
        return out

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        order = stats.shape[-1] // 3
        n_hyp, n_ref, n_match = stats[..., 0::3], stats[..., 1::3], stats[..., 2::3]
        factor = self.metric.beta**2
        valid = (n_hyp > 0) & (n_ref > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            prec = np.where(valid, n_match / n_hyp, 0.0)
            rec = np.where(valid, n_match / n_ref, 0.0)
        effective = valid.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            avg_prec = np.where(effective > 0, prec.sum(axis=-1) / effective, 0.0)
            avg_rec = np.where(effective > 0, rec.sum(axis=-1) / effective, 0.0)
            score = (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)
        assert order == self.metric.order
        return np.where(avg_prec + avg_rec > 0, 100.0 * score, 0.0)


class ChrfUtility(NgramUtility):
    """MBR's chrF utility: sentence chrF (sacrebleu's ``CHRF().sentence_score``) of the
    metric's settings, pair by pair through :meth:`ChrfMetric.pair_stats` or from character
    n-gram matches through :meth:`ChrfMetric.stats_from_matches`; 0-100."""

    def __init__(self, column: str, metric: ChrfMetric):
        super().__init__(column)
        self.metric = metric
        self.order = metric.char_order

    def pairs(self, texts, hyp, ref):
        return self.metric.score(self.metric.pair_stats(texts, hyp, ref))

    def token_ids(self, texts):
        return char_ids([t.lower() for t in texts] if self.metric.lowercase else texts)

    def from_matches(self, matches, hyp_len, ref_len, ref_ngrams=None):
        n = np.arange(matches.shape[-1])
        hyp_ngrams = np.maximum(np.asarray(hyp_len)[..., None] - n, 0)
        if ref_ngrams is None:
            ref_ngrams = np.maximum(np.asarray(ref_len)[..., None] - n, 0)
        return self.metric.score(self.metric.stats_from_matches(matches, hyp_ngrams, ref_ngrams))
