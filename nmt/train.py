"""Training the Bahdanau GRU model with fairseq-train (resumable, best checkpoint by
validation BLEU, early stopping).

The optimiser differs from the paper on purpose: Adam (lr 2e-3) instead of Adadelta,
because it converges in the few epochs a CPU budget allows; the L2 weight is passed as
fairseq Adam's ``--weight-decay`` (which fairseq applies decoupled, AdamW-style).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from typing import List

from nmt import FAIRSEQ_ENV, USER_DIR
from rerank.errors import InputError
from rerank.signature import write_signed

#: preset name -> fairseq architecture
PRESETS = {"cpu": "bahdanau_gru_cpu", "paper": "bahdanau_gru_paper"}
#: regularisation variants of §8 of Calixto & Liu (2017): (dropout, L2 weight)
VARIANTS = {"weak": (0.0, 0.0), "regular": (0.5, 1e-8), "optimised": (0.2, 0.0)}


@dataclass
class TrainConfig:
    """Settings of :func:`train`; serialised into ``train.json`` beside the checkpoints.

    ``dropout``/``l2`` default to the variant's values; ``max_epoch`` and ``patience``
    (epochs without validation-BLEU improvement) bound the run.
    """

    preset: str = "cpu"
    variant: str = "regular"
    dropout: float = -1.0
    l2: float = -1.0
    lr: float = 2e-3
    max_tokens: int = 4000
    max_epoch: int = 10
    max_update: int = 0
    patience: int = 3
    clip_norm: float = 1.0
    seed: int = 1
    valid_beam: int = 5
    src: str = "en"
    tgt: str = "de"

    def __post_init__(self):
        if self.preset not in PRESETS:
            raise InputError(f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; known: {', '.join(VARIANTS)}")
        dropout, l2 = VARIANTS[self.variant]
        if self.dropout < 0:
            self.dropout = dropout
        if self.l2 < 0:
            self.l2 = l2


def train_command(bin_dir: str, save_dir: str, config: TrainConfig, progress: str = "simple") -> List[str]:
    """The fairseq-train command line for ``config`` (see :func:`train`)."""
    cmd = [sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", USER_DIR,
           "--task", "translation", "--source-lang", config.src, "--target-lang", config.tgt,
           "--arch", PRESETS[config.preset], "--dropout", str(config.dropout),
           "--optimizer", "adam", "--lr", str(config.lr), "--weight-decay", str(config.l2),
           "--clip-norm", str(config.clip_norm), "--criterion", "cross_entropy",
           "--max-tokens", str(config.max_tokens), "--max-epoch", str(config.max_epoch),
           "--patience", str(config.patience), "--seed", str(config.seed),
           "--save-dir", save_dir, "--no-epoch-checkpoints", "--num-workers", "0",
           # fairseq 0.12's batch_by_size drops the last batch when it is not a multiple of
           # --required-batch-size-multiple (default 8): with 1 every sentence is kept
           "--required-batch-size-multiple", "1",
           "--eval-bleu", "--eval-bleu-args", json.dumps({"beam": config.valid_beam, "max_len_a": 1.2, "max_len_b": 10}),
           "--eval-bleu-remove-bpe", "--eval-tokenized-bleu", "--eval-bleu-detok", "space",
           "--best-checkpoint-metric", "bleu", "--maximize-best-checkpoint-metric",
           "--log-format", progress, "--log-interval", "100", "--cpu"]
    if config.max_update:
        cmd += ["--max-update", str(config.max_update)]
    return cmd


def train(bin_dir: str, save_dir: str, config: TrainConfig) -> str:
    """Train (or resume from ``save_dir/checkpoint_last.pt``) and return the path of
    ``checkpoint_best.pt`` (best validation BLEU).

    Raises:
        InputError: ``bin_dir`` is not a fairseq-preprocess output.
        subprocess.CalledProcessError: fairseq-train failed.
    """
    if not os.path.exists(os.path.join(bin_dir, f"dict.{config.tgt}.txt")):
        raise InputError("not a binarised fairseq data directory (no dict file)", bin_dir)
    os.makedirs(save_dir, exist_ok=True)
    write_signed(os.path.join(save_dir, "train.json"), {"config": asdict(config), "bin_dir": os.path.abspath(bin_dir)},
                 ["torch", "fairseq-fixed", "sacrebleu"])
    progress = "tqdm" if sys.stderr.isatty() else "simple"
    subprocess.run(train_command(bin_dir, save_dir, config, progress), check=True, env={**os.environ, **FAIRSEQ_ENV})
    best = os.path.join(save_dir, "checkpoint_best.pt")
    if not os.path.exists(best):
        raise InputError("fairseq-train ended without a best checkpoint", save_dir)
    return best
