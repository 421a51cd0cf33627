"""The :class:`Metric` interface and the metric registry.

Each :class:`Metric` extracts statistics once per system (``stats``: float[N, K], one
row per segment) and scores any stack of summed rows (``score``: float[..., K] ->
float[...]) without touching text again, as sacrebleu's ``metrics/base.py`` and
MultEval do: evaluation, bootstrap resampling and approximate randomisation share it.
A metric is one module of this package registered with ``@METRICS.register(name)``.
"""

from __future__ import annotations

import abc
from typing import Optional, Sequence

import numpy as np

from rerank.registry import Registry

#: every metric by name; the modules of this package register themselves
METRICS = Registry("metric", builtin=("rerank.metrics.bleu", "rerank.metrics.length", "rerank.metrics.ter",
                                      "rerank.metrics.chrf", "rerank.metrics.meteor"))


class Metric(abc.ABC):
    """Interface: ``name``, ``higher_is_better`` (True, False, or None when neither
    direction is better), ``stats(hyps, refs)``, ``score(stats)``, ``signature()``, and
    :meth:`create` building the metric from the command line's options."""

    name = "metric"
    higher_is_better = True

    @classmethod
    def create(cls, tokenize: Optional[str] = None, lowercase: bool = False, lang: str = "de") -> "Metric":
        """The metric for the command line's options (``tokenize`` matters to BLEU and
        length, ``lang`` to METEOR); by default ``cls(lowercase=lowercase)``."""
        return cls(lowercase=lowercase)

    @abc.abstractmethod
    def stats(self, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
        """float64[N, K] per-segment statistics (one reference per segment)."""
        raise NotImplementedError

    @abc.abstractmethod
    def score(self, stats: np.ndarray) -> np.ndarray:
        """Corpus score(s) of summed statistics float[..., K] -> float64[...]."""
        raise NotImplementedError

    @abc.abstractmethod
    def signature(self) -> str:
        """A sacrebleu-style signature string naming the settings and versions."""
        raise NotImplementedError

    def corpus_score(self, hypotheses: Sequence[str], references: Sequence[str]) -> float:
        """Corpus score of one system."""
        return float(self.score(self.stats(hypotheses, references).sum(axis=0)))


class SacrebleuStatsMetric(Metric):
    """Statistics from a sacrebleu metric object's per-segment extraction."""

    @abc.abstractmethod
    def _make(self):
        """The sacrebleu metric object."""

    def __init__(self, lowercase: bool = False):
        self.lowercase = lowercase
        self.metric = self._make()

    def stats(self, hypotheses, references):
        rows = self.metric._extract_corpus_statistics(list(hypotheses), [list(references)])
        return np.asarray(rows, dtype=np.float64).reshape(len(hypotheses), -1)

    def signature(self):
        self.metric.num_refs = 1  # set by corpus_score() in sacrebleu; we score without it
        return str(self.metric.get_signature())


def make_metric(name: str, tokenize: Optional[str] = None, lowercase: bool = False, lang: str = "de") -> Metric:
    """The metric registered as ``name`` ('bleu', 'ter', 'chrf', 'meteor', 'length', ...).

    ``tokenize`` applies to BLEU and length only (sacrebleu's default '13a' when None); ``lang`` to
    METEOR only.  Raises :class:`InputError` for an unknown name.
    """
    return METRICS.get(name).create(tokenize=tokenize, lowercase=lowercase, lang=lang)
