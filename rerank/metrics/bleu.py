"""BLEU (Papineni et al. 2002) over :mod:`rerank.metrics.bleu_stats`' statistics, the layer tuning and
oracle selection use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

import numpy as np

from rerank.argtypes import non_negative_float, positive_float
from rerank.config import option
from rerank.errors import InputError
from rerank.metrics.base import METRICS, Metric
from rerank.metrics.bleu_stats import (
    DEFAULT_TOKENIZE,
    NUM_STATS,
    ORDER,
    REF_LEN,
    background_sentence_bleu,
    bleu_from_stats,
    bleu_plus_one,
    bleu_signature,
    bleu_stats,
    bleu_stats_from_matches,
    pair_bleu_stats,
    sacrebleu_metric,
    sacrebleu_score,
    warn_if_tokenised,
)
from rerank.metrics.utility import NgramUtility, word_ids


class BleuUtility(NgramUtility):
    """MBR's BLEU utility: sentence BLEU with effective order (sacrebleu's
    ``BLEU(effective_order=True).sentence_score``, tokenisation ``none``: n-best lists are
    tokenised text) over the statistics layer (:func:`~rerank.metrics.bleu_stats.pair_bleu_stats`,
    :func:`~rerank.metrics.bleu_stats.bleu_stats_from_matches`); 0-100."""

    order = ORDER

    def pairs(self, texts, hyp, ref):
        return bleu_from_stats(pair_bleu_stats(texts, hyp, ref), effective_order=True)

    def token_ids(self, texts):
        return word_ids(texts)

    def from_matches(self, matches, hyp_len, ref_len, ref_ngrams=None):
        """An aggregate reference's expected length is ``ref_len``; ``ref_ngrams`` is not used."""
        return bleu_from_stats(bleu_stats_from_matches(matches, hyp_len, ref_len), effective_order=True)


@METRICS.register("bleu")
class BleuMetric(Metric):
    """BLEU (Papineni et al. 2002) as sacrebleu computes it: statistics from
    :func:`rerank.metrics.bleu_stats.bleu_stats`, score from
    :func:`rerank.metrics.bleu_stats.bleu_from_stats`.  Its ``tokenize`` and ``lowercase`` are
    recorded with every tuning (weights files: :meth:`to_json`) and experiment (manifests), so
    that every BLEU of one experiment (tables, plots, oracle, tuning) is computed the same way.

    Raises:
        InputError: an unknown tokeniser name.
    """

    name = "bleu"
    size_column = REF_LEN
    width = NUM_STATS
    # the settings' types, for the type checker (declared, with defaults and help, in Config)
    tokenize: str
    lowercase: bool
    length_penalty: float
    length_target: float

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

    # length_penalty and length_target (issue 46): BLEU tuned until the brevity penalty is gone
    # overshoots the length on a set whose beam/reference length ratio differs; a penalty on
    # |ratio − target| holds the tuned length near the target

    def setup(self) -> None:
        sacrebleu_metric(self.tokenize, self.lowercase)  # validates the tokeniser name

    @property
    def fast_kernel(self) -> Optional[str]:  # type: ignore[override]  # a class attribute elsewhere
        """``"bleu"`` for plain BLEU (the tuners' C kernels); None with a length penalty,
        whose gain the kernels do not compute."""
        return None if self.length_penalty else "bleu"

    def _key(self):
        return (self.tokenize, self.lowercase, self.length_penalty, self.length_target)

    def __eq__(self, other) -> bool:
        """BLEU metrics are equal when their settings are."""
        return isinstance(other, BleuMetric) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return f"BleuMetric(tokenize={self.tokenize!r}, lowercase={self.lowercase!r})"

    def stats(self, hypotheses, references):
        return self._stats(hypotheses, self.streams(references), np.arange(len(hypotheses)))

    def _stats(self, hypotheses: Sequence[str], streams, segment: np.ndarray) -> np.ndarray:
        """:func:`~rerank.metrics.bleu_stats.bleu_stats` under these settings: float64[M, 9]; warns
        once (:func:`~rerank.metrics.bleu_stats.warn_if_tokenised`) when tokenised text meets a
        tokeniser."""
        warn_if_tokenised(hypotheses, self.tokenize)
        return bleu_stats(hypotheses, streams, segment, self.tokenize, self.lowercase)

    def sentence_level(self, rows):
        """sacreBLEU's sentence BLEU (``BLEU(effective_order=True).sentence_score``, as its
        ``--sentence-level`` prints it) of each row; a length penalty applied as in :meth:`score`."""
        if self.length_penalty:
            return super().sentence_level(rows)
        return bleu_from_stats(rows, effective_order=True)

    def score(self, stats):
        bleu = bleu_from_stats(stats)
        if not self.length_penalty:
            return bleu
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(stats[..., REF_LEN] > 0, stats[..., 1] / stats[..., REF_LEN], 0.0)
        return bleu - self.length_penalty * 100.0 * np.abs(ratio - self.length_target)

    def signature(self):
        base = bleu_signature(self.tokenize, self.lowercase, self.num_refs)
        if not self.length_penalty:
            return base
        return f"{base}|length_penalty:{self.length_penalty:g}|length_target:{self.length_target:g}"

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        """Each reference is tokenised once, not once per hypothesis."""
        return self._stats(hypotheses, self.streams(references), segment)

    def background_gain(self, rows, background):
        """kbmira's ``sentenceLevelBackgroundBleu`` (:func:`~rerank.metrics.bleu_stats.background_sentence_bleu`);
        with a length penalty, the generic gain of the pseudo-document (:class:`Metric`)."""
        if self.length_penalty:
            return super().background_gain(rows, background)
        return background_sentence_bleu(rows, background)

    def sentence_score(self, rows):
        """Moses' sentence-BLEU+1 (:func:`~rerank.metrics.bleu_stats.bleu_plus_one`), PRO's smoothing (the
        length penalty is a corpus-level term: PRO's pairs are drawn on BLEU+1 alone)."""
        return bleu_plus_one(rows)

    def length_ratio(self, summed):
        return float(summed[1] / summed[REF_LEN]) if summed[REF_LEN] else 0.0

    def describe(self, summed):
        """sacrebleu's BLEU line: ``BLEU = 36.48 70.1/45.0/30.2/20.1 (BP = 0.980 ratio = 0.980
        hyp_len = 12000 ref_len = 12240)`` (the length-controlled objective: the generic line)."""
        if self.length_penalty:
            return super().describe(summed)
        return sacrebleu_score(summed).format(width=2)

    def utility(self) -> "BleuUtility":
        """Sentence BLEU (effective order) over whitespace-separated words, MBR's ``MBRBLEU``."""
        return BleuUtility("MBRBLEU")

    # --- the settings as weights files and experiment manifests record them ---

    def to_json(self) -> Dict[str, Any]:
        """``{"tokenize", "lowercase", "signature"}`` (the single-reference signature of plain
        BLEU under these settings), as weights files and manifests record it."""
        return {
            "tokenize": self.tokenize,
            "lowercase": self.lowercase,
            "signature": bleu_signature(self.tokenize, self.lowercase),
        }

    @classmethod
    def from_json(cls, value: Any, source: str) -> "BleuMetric":
        """BLEU under settings recorded by :meth:`to_json`.  Raises :class:`InputError` naming
        ``source``."""
        if not (
            isinstance(value, dict)
            and isinstance(value.get("tokenize"), str)
            and isinstance(value.get("lowercase", False), bool)
        ):
            raise InputError('"bleu" must be {"tokenize": NAME, "lowercase": true|false}', source)
        return cls(value["tokenize"], value.get("lowercase", False))
