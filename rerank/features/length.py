"""Length features (``len:``): how far a hypothesis's length strays from what the
training corpus leads one to expect of its source.

``len:PREPARED_DIR`` or ``len:RATIO`` -> ``LenRatio`` = hypothesis words / source words
(tokenised text, at least one word each), and ``LenDev`` = (log LenRatio − log r̄)², the
squared log deviation from the training corpus's mean ratio r̄.  With a ``rerank nmt
prepare`` directory, r̄ is the geometric mean of the per-sentence ratios of its
tokenised training pairs (``tok/train.{src,tgt}``, languages from ``prepare.json``);
a number gives r̄ directly.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List

import numpy as np

from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, prepared_training_pairs


def mean_log_ratio(source_lines: List[str], target_lines: List[str]) -> float:
    """Mean over sentence pairs of log(target words / source words), each at least 1."""
    if len(source_lines) != len(target_lines) or not source_lines:
        raise ValueError("mean_log_ratio needs two non-empty lists of the same length")
    src = np.array([max(len(line.split()), 1) for line in source_lines], dtype=np.float64)
    tgt = np.array([max(len(line.split()), 1) for line in target_lines], dtype=np.float64)
    return float(np.mean(np.log(tgt / src)))


@SCORERS.register("len")
class LengthScorer(Scorer):
    """``LenRatio`` and ``LenDev`` (see the module docstring).

    Raises:
        InputError: no argument, a path that is not a prepare directory, a ratio that is
            not a positive number.
    """

    summary = "LenRatio, LenDev: length ratio and its deviation"

    @dataclass
    class Config:
        corpus: str = option("", "a rerank nmt prepare directory, or the mean ratio itself", positional=True)

    set_name = "Len"

    def __init__(self, config: "LengthScorer.Config"):
        arg = config.corpus
        if not arg:
            raise InputError("len: needs the training corpus: len:PREPARED_DIR (rerank nmt prepare) or len:RATIO")
        if os.path.isdir(arg):
            self.log_mean = mean_log_ratio(*prepared_training_pairs(arg))
        else:
            try:
                ratio = float(arg)
            except ValueError:
                raise InputError(f"len:{arg}: neither a directory nor a number") from None
            if not (math.isfinite(ratio) and ratio > 0):
                raise InputError(f"len:{arg}: the mean ratio must be a positive number")
            self.log_mean = math.log(ratio)

    def names(self, has_images: bool) -> List[str]:
        return ["LenRatio", "LenDev"]

    def score(self, nbest, sources, images):
        if sources is None or len(sources) != nbest.num_segments:
            raise InputError(f"len: needs one source sentence per segment ({nbest.num_segments}): --source")
        src = np.array([max(len(s.split()), 1) for s in sources], dtype=np.float64)
        hyp = np.array([max(len(h.split()), 1) for h in nbest.hypotheses], dtype=np.float64)
        ratio = hyp / src[nbest.segment]
        return {"LenRatio": ratio, "LenDev": (np.log(ratio) - self.log_mean) ** 2}
