"""Tuning feature weights on a fixed n-best list: k-best batch MIRA (Cherry & Foster
2012, Moses ``kbmira``), MERT (Och 2003, Moses ``mert``) and PRO (Hopkins & May 2011),
each a :class:`~rerank.tuning.base.Tuner` registered in :data:`~rerank.tuning.base.TUNERS`;
:mod:`rerank.tuning.files` runs them on files (start weights, feature selection, cross-fitting).

Every tuner maximises a metric over sufficient statistics (BLEU by default; chrF, TER,
METEOR, interpolations, ``seg:`` scores: :mod:`rerank.metrics`) and returns weights that
score at least the initial weights' corpus score on the tuning set (MIRA's
``kbmira_selection`` aside, which reproduces kbmira).
"""

from rerank.tuning.base import TUNERS, Tuner, TuneResult, corpus_score, make_tuner
from rerank.tuning.mert import Mert, MertConfig
from rerank.tuning.mira import Mira, MiraConfig
from rerank.tuning.pro import Pro, ProConfig

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
