"""Tuning feature weights on a fixed n-best list: k-best batch MIRA (Cherry & Foster
2012, Moses ``kbmira``), MERT (Och 2003, Moses ``mert``) and PRO (Hopkins & May 2011),
each a :class:`~rerank.mira.tuner.Tuner` registered in :data:`~rerank.mira.tuner.TUNERS`;
:mod:`rerank.mira.tuning` runs them on files (start weights, feature selection, cross-fitting).

Every tuner maximises a metric over sufficient statistics (BLEU by default; chrF, TER,
METEOR, interpolations, ``seg:`` scores: :mod:`rerank.metrics`) and returns weights that
score at least the initial weights' corpus score on the tuning set (MIRA's
``kbmira_selection`` aside, which reproduces kbmira).
"""

from rerank.mira.kbmira import Mira, MiraConfig
from rerank.mira.mert import Mert, MertConfig
from rerank.mira.pro import Pro, ProConfig
from rerank.mira.tuner import TUNERS, Tuner, TuneResult, corpus_score, make_tuner

__all__ = [
    "TUNERS",
    "Tuner",
    "TuneResult",
    "make_tuner",
    "corpus_score",
    "Mira",
    "MiraConfig",
    "Mert",
    "MertConfig",
    "Pro",
    "ProConfig",
]
