"""Tuning feature weights on a fixed n-best list: k-best batch MIRA (Cherry & Foster
2012, Moses ``kbmira``), MERT (Och 2003, Moses ``mert``) and PRO (Hopkins & May 2011).

Every tuner returns weights that score at least the initial weights' corpus BLEU on the
tuning set.
"""

from mira.kbmira import MiraConfig, MiraResult, tune
from mira.mert import MertConfig, MertResult, tune_mert
from mira.pro import ProConfig, ProResult, tune_pro

#: ``rerank tune --algorithm`` names
ALGORITHMS = ("mira", "mert", "pro")

__all__ = ["ALGORITHMS", "MiraConfig", "MiraResult", "tune", "MertConfig", "MertResult", "tune_mert",
           "ProConfig", "ProResult", "tune_pro"]
