"""Length features (``len:``): how far a hypothesis's length strays from what the
training corpus leads one to expect of its source.

``len:PREPARED_DIR``, ``len:src=TRAIN.SRC,tgt=TRAIN.TGT`` or ``len:RATIO`` -> ``LenRatio`` =
hypothesis words / source words (tokenised text, at least one word each), and ``LenDev`` =
(log LenRatio − log r̄)², the squared log deviation from the training corpus's mean ratio r̄:
the geometric mean of the per-sentence ratios of the tokenised training pairs — of a ``rerank
nmt prepare`` directory (``tok/train.{src,tgt}``, languages from ``prepare.json``) or of any
two line-aligned parallel files (plain or ``.gz``); a number gives r̄ directly.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, VocabularyCheck, training_pairs


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
        InputError: no argument, a path that is not a prepare directory, parallel files
            that are not line-aligned, a ratio that is not a positive number.
    """

    summary = "LenRatio, LenDev: length ratio and its deviation"

    @dataclass
    class Config:
        corpus: str = option("", "a rerank nmt prepare directory, or the mean ratio itself", positional=True, path=True)
        src: str = option(
            "", "or the ratio estimated from two parallel files: the source side (plain or .gz)", path="file"
        )
        tgt: str = option("", "… and the target side, line-aligned with src", path="file")

    set_name = "Len"

    def __init__(self, config: "LengthScorer.Config"):
        arg = config.corpus
        self.vocabulary: Optional[VocabularyCheck] = None
        if config.src or config.tgt or not arg or os.path.isdir(arg):
            sources, targets = training_pairs("len", arg, config.src, config.tgt)
            self.log_mean = mean_log_ratio(sources, targets)
            spec = f"len:src={config.src},tgt={config.tgt}" if config.src else f"len:{arg}"
            self.vocabulary = VocabularyCheck(spec, config.tgt or arg, (w for line in targets for w in line.split()))
        else:
            try:
                ratio = float(arg)
            except ValueError:
                raise InputError(
                    f"len:{arg}: neither a directory nor a number: give len:PREPARED_DIR, "
                    "len:src=TRAIN.SRC,tgt=TRAIN.TGT (parallel files) or len:RATIO"
                ) from None
            if not (math.isfinite(ratio) and ratio > 0):
                raise InputError(f"len:{arg}: the mean ratio must be a positive number")
            self.log_mean = math.log(ratio)

    def names(self, has_images: bool) -> List[str]:
        return ["LenRatio", "LenDev"]

    def score(self, nbest, sources, images):
        if sources is None or len(sources) != nbest.num_segments:
            raise InputError(f"len: needs one source sentence per segment ({nbest.num_segments}): --source")
        if self.vocabulary is not None:  # a ratio from text tokenised otherwise than the list is another ratio
            self.vocabulary.check(nbest.hypotheses)
        src = np.array([max(len(s.split()), 1) for s in sources], dtype=np.float64)
        hyp = np.array([max(len(h.split()), 1) for h in nbest.hypotheses], dtype=np.float64)
        ratio = hyp / src[nbest.segment]
        return {"LenRatio": ratio, "LenDev": (np.log(ratio) - self.log_mean) ** 2}
