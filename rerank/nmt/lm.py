"""The target-side language model of re-ranking: an LSTM LM (fairseq ``lstm_lm``) on
German text of the training split only.

Training text: the German side of Multi30k task 1 train (already tokenised and BPE'd by
``rerank nmt prepare``) plus the five German descriptions per training image of task 2
(``task2/raw/train.{1..5}.de.gz``, preprocessed with the project's text convention and
the same BPE codes), 174,000 sentences; validation: task 1 val.  Neither val's nor
test_2016's German is trained on.  The dictionary is the translation models' joint one,
so hypotheses are encoded once for every scorer.  Each sentence is a sample
(``--sample-break-mode eos``): the LM scores ``tokens + </s>`` given ``</s>`` as the
first input, which ``rerank/features/nmt_scorer.py`` reproduces.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import asdict, dataclass
from typing import List, Optional

from rerank.errors import InputError
from rerank.nmt import fairseq_device
from rerank.nmt.checkpoints import check_checkpoint
from rerank.nmt.data import fairseq_preprocess, preprocess_lines, resolve_data_dir
from rerank.nmt.subword import make_bpe, subword_spec
from rerank.nmt.train import (
    check_settings,
    fairseq_train,
    inverse_sqrt_schedule,
    run_fairseq_train,
    run_options,
    transformer_sizes,
)
from rerank.outputs import atomic_write, staged_directory
from rerank.signature import write_signed
from rerank.textio import read_lines


@dataclass
class LMConfig:
    """Settings of :func:`train_lm` (serialised into ``train.json``): LSTM sizes, dropout,
    Adam ``lr``, batch ``max_tokens``, epochs and ``patience`` (validation loss),
    ``seed``, CPU ``threads`` (0: torch's default), ``lang``, the feature name ``role``,
    and whether task 2's descriptions join the training text.  ``arch``: ``lstm`` (fairseq's
    ``lstm_lm`` at ``embed_dim``/``hidden_size``/``layers``) or ``transformer-tiny``
    (fairseq's ``transformer_lm``: :data:`TRANSFORMER_LM`, inverse-sqrt warm-up; the sizes
    above unused)."""

    embed_dim: int = 256
    hidden_size: int = 512
    layers: int = 1
    dropout: float = 0.3
    lr: float = 2e-3
    max_tokens: int = 4000
    max_epoch: int = 3
    patience: int = 2
    seed: int = 1
    threads: int = 0
    lang: str = "de"
    device: str = "auto"
    dtype: str = "float32"
    role: str = "LM"
    task2: bool = True
    arch: str = "lstm"

    def __post_init__(self):
        if self.arch not in ("lstm",) + tuple(TRANSFORMER_LM):
            raise InputError(f"unknown LM architecture {self.arch!r}; known: lstm, {', '.join(TRANSFORMER_LM)}")


#: the transformer LM (fairseq ``transformer_lm``), the size of the tiny translation model
TRANSFORMER_LM = {"transformer-tiny": {"layers": 4, "dim": 128, "ffn": 256, "heads": 4, "warmup": 1000}}


def prepare_lm_data(prepared_dir: str, out_dir: str, config: LMConfig, data_dir: Optional[str] = None) -> str:
    """Build the LM's binarised data in ``out_dir/bin`` (skipped when it exists).

    Args:
        prepared_dir: a ``rerank nmt prepare`` output (``bpe/``, ``bpe.codes`` or ``spm.model``, ``bin/``).
        out_dir: the LM model directory.
        config: :class:`LMConfig` (``lang``, ``task2``).
        data_dir: Multi30k copy for task 2 (default as ``rerank nmt prepare``).
    Returns:
        the binarised directory.
    Raises:
        InputError: ``prepared_dir`` lacks prepare's files, or task 2 is missing.
    """
    lang = config.lang
    subwords = subword_spec(prepared_dir)
    needed = [
        os.path.join(prepared_dir, "bpe", f"train.{lang}"),
        os.path.join(prepared_dir, "bpe", f"val.{lang}"),
        os.path.join(prepared_dir, "bin", f"dict.{lang}.txt"),
    ]
    for path in needed:
        if not os.path.exists(path):
            raise InputError("missing: not a 'rerank nmt prepare' output directory", path)
    bin_dir = os.path.join(out_dir, "bin")
    if os.path.exists(os.path.join(bin_dir, "preprocess.done")):
        return bin_dir
    text_dir = os.path.join(out_dir, "text")
    os.makedirs(text_dir, exist_ok=True)
    train_text = os.path.join(text_dir, f"train.{lang}")
    if not os.path.exists(train_text):
        with open(needed[0], encoding="utf-8") as handle:
            lines = [line.rstrip("\n") for line in handle]
        if config.task2:
            data_dir = resolve_data_dir(data_dir, os.path.join(prepared_dir, "download"), task2=True, task1=False)
            bpe = make_bpe(subwords, prepared_dir)
            raw = []
            for k in range(1, 6):
                raw += read_lines(os.path.join(data_dir, "task2", "raw", f"train.{k}.{lang}.gz"))
            lines += [bpe.process_line(line) for line in preprocess_lines(raw, lang, progress="tokenise task 2")]
        with atomic_write(train_text) as out:
            out.writelines(line + "\n" for line in lines)
    with staged_directory(bin_dir) as tmp:
        options = ["--only-source", "--srcdict", needed[2], "--trainpref", train_text, "--validpref", needed[1]]
        fairseq_preprocess(tmp, options, workers=2)
        open(os.path.join(tmp, "preprocess.done"), "w").close()
    return bin_dir


def train_lm_command(bin_dir: str, save_dir: str, config: LMConfig, progress: str = "simple") -> List[str]:
    """The fairseq-train command line of :func:`train_lm`."""
    if config.arch in TRANSFORMER_LM:
        a = TRANSFORMER_LM[config.arch]
        model = ["--arch", "transformer_lm", *transformer_sizes(a, ("decoder",)), *inverse_sqrt_schedule(a["warmup"])]
    else:
        model = ["--arch", "lstm_lm", "--decoder-embed-dim", str(config.embed_dim)]
        model += ["--decoder-hidden-size", str(config.hidden_size), "--decoder-layers", str(config.layers)]
        model += ["--decoder-out-embed-dim", str(config.embed_dim)]
    cmd = fairseq_train(bin_dir, "language_modeling", "--sample-break-mode", "eos", "--tokens-per-sample", "512")
    cmd += [*model, "--share-decoder-input-output-embed", "--dropout", str(config.dropout), "--optimizer", "adam"]
    cmd += ["--lr", str(config.lr), "--clip-norm", "1.0", "--criterion", "cross_entropy"]
    cmd += ["--max-tokens", str(config.max_tokens), *run_options(config, save_dir, progress), "--no-epoch-checkpoints"]
    return cmd + fairseq_device(config.device, config.dtype)[0]


def train_lm(prepared_dir: str, save_dir: str, config: LMConfig = LMConfig(), data_dir: Optional[str] = None) -> str:
    """Prepare the LM data (:func:`prepare_lm_data`) and train (or resume); returns
    ``save_dir/checkpoint_best.pt`` (best validation loss).  The directory also gets the
    dictionary (``dict.txt``), the BPE codes and ``train.json``.

    Raises:
        InputError: see :func:`prepare_lm_data`; ``save_dir`` holds a model trained with
            other settings (:func:`rerank.nmt.train.check_settings`, ``resuming``); no best
            checkpoint at the end.
        subprocess.CalledProcessError: fairseq failed.
    """
    _, device_env = fairseq_device(config.device, config.dtype)  # before any work
    check_settings(save_dir, config, resuming=True)
    if os.path.exists(os.path.join(save_dir, "checkpoint_last.pt")):  # fairseq-train resumes from it
        check_checkpoint(os.path.join(save_dir, "checkpoint_last.pt"))
    os.makedirs(save_dir, exist_ok=True)
    bin_dir = prepare_lm_data(prepared_dir, save_dir, config, data_dir)
    shutil.copyfile(os.path.join(bin_dir, "dict.txt"), os.path.join(save_dir, "dict.txt"))
    codes = subword_spec(prepared_dir).partition(":")[2]
    shutil.copyfile(codes, os.path.join(save_dir, os.path.basename(codes)))
    write_signed(
        os.path.join(save_dir, "train.json"),
        {"config": asdict(config), "kind": "lm", "prepared_dir": os.path.abspath(prepared_dir)},
        ["torch", "fairseq-fixed", "subword-nmt"],
    )
    return run_fairseq_train(
        lambda progress: train_lm_command(bin_dir, save_dir, config, progress), save_dir, config.threads, device_env
    )
