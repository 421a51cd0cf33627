"""Training the Bahdanau GRU model with fairseq-train (resumable, best checkpoint by
validation BLEU, early stopping), and the auxiliary models of re-ranking.

Directions (``TrainConfig.direction``): ``forward`` en→de (the baseline, or a second
left-to-right model with another seed, role ``L2R2``); ``backward`` de→en, the channel
model P(source | hypothesis) of noisy-channel re-ranking (Yee et al. 2019); ``r2l``
en→de with every target sentence's subword tokens reversed (end-of-sentence stays
last), the right-to-left model of Sennrich et al. (2016).  Auxiliary models (every
direction but the baseline's) are selected by validation loss, the quantity they are
used for as scorers, and skip the per-epoch BLEU decoding; so does a transformer
baseline, which generates with the average of its last epoch checkpoints.  :func:`train_lm` trains
the target-side LSTM language model (fairseq ``lstm_lm``).

Every model directory is self-contained for scoring (``rerank/features/nmt_scorer.py``): the
checkpoints, the fairseq dictionaries, the BPE codes and ``train.json`` (settings,
direction, role).

The optimiser differs from the paper on purpose: Adam (lr 2e-3) instead of Adadelta,
because it converges in the few epochs a CPU budget allows; the L2 weight is passed as
fairseq Adam's ``--weight-decay`` (which fairseq applies decoupled, AdamW-style).
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass, replace
from typing import Any, Dict, List, Union

from rerank.devices import native_bfloat16
from rerank.errors import InputError
from rerank.nmt import USER_DIR, fairseq_device
from rerank.nmt.bindata import own_target_vocabulary, reverse_targets
from rerank.nmt.checkpoints import check_checkpoint, fairseq_environ, load_state, run_fairseq
from rerank.nmt.subword import subword_spec
from rerank.outputs import atomic_write
from rerank.signature import write_signed
from rerank.textio import read_json

#: preset name -> fairseq architecture
PRESETS = {"cpu": "bahdanau_gru_cpu", "small": "bahdanau_gru_small", "paper": "bahdanau_gru_paper"}
#: fairseq's own transformer (``--arch``): sizes, and the regularisation small-data
#: transformers need (dropout 0.3 on a 29k-sentence corpus, label smoothing 0.1,
#: attention/activation dropout 0.1, Adam β2 0.98 with inverse-square-root warm-up, weight
#: decay 1e-4; Vaswani et al. 2017, Wu et al. 2021's Transformer-Tiny on Multi30K).  The
#: last ``average`` epoch checkpoints are averaged into ``checkpoint_avg.pt`` (the model
#: that generates and scores): averaging smooths the noisy last epochs of a small corpus,
#: usually +0.5-1 BLEU over the last checkpoint, and needs no extra training.  Their loss
#: is fairseq's label-smoothed cross-entropy computed by our criterion
#: ``fused_label_smoothed_cross_entropy`` (:mod:`rerank.nmt.criterion`: the same loss and gradient
#: in one pass over the output layer, 12 % faster per update on one CPU thread), with
#: ``bf16_autocast`` the forward pass in bfloat16 (30 % faster together).
ARCHS = {
    "transformer-tiny": {"layers": 4, "dim": 128, "ffn": 256, "heads": 4, "lr": 5e-3, "warmup": 1000},
    "transformer-small": {"layers": 3, "dim": 256, "ffn": 1024, "heads": 4, "lr": 1e-3, "warmup": 1000},
}
TRANSFORMER_REGULARISATION: Dict[str, float] = {
    "dropout": 0.3,
    "l2": 1e-4,
    "label_smoothing": 0.1,
    "attention_dropout": 0.1,
    "average": 5,
}
#: direction -> default role (the feature name a scorer gives the model's columns)
DIRECTIONS = {"forward": "L2R", "backward": "Channel", "r2l": "R2L"}
#: output dictionaries a model can have (TrainConfig.target_vocab)
TARGET_VOCABS = ("joint", "own")
#: regularisation variants of §8 of Calixto & Liu (2017): (dropout, L2 weight)
VARIANTS = {"weak": (0.0, 0.0), "regular": (0.5, 1e-8), "optimised": (0.2, 0.0)}


@dataclass
class TrainConfig:
    """Settings of :func:`train`; serialised into ``train.json`` beside the checkpoints.

    ``dropout``/``l2`` default to the variant's values; ``max_epoch`` and ``patience``
    (epochs without validation improvement) bound the run.  ``direction`` is one of
    :data:`DIRECTIONS`; ``role`` names the model's feature columns (default by direction:
    L2R, Channel, R2L); ``threads`` limits torch's CPU threads (0: its default).
    ``src``/``tgt`` are the *task's* languages: a backward model swaps them itself.
    ``arch``: ``gru`` (the Bahdanau model at ``preset``) or a fairseq transformer of
    :data:`ARCHS` (``preset`` and ``variant`` then unused; dropout 0.3 and weight decay
    1e-4 unless given, the arch's learning rate unless ``lr`` is given, the last
    ``average`` epochs averaged into ``checkpoint_avg.pt``; ``warmup``: updates of the
    inverse-square-root schedule's linear warm-up, 0 for the architecture's).
    ``target_vocab`` is ``joint`` (the joint BPE dictionary of ``prepare``) or ``own``:
    the model's output layer covers only the subword types of its own target language
    in the training data (:func:`rerank.nmt.bindata.own_target_vocabulary`; for a channel model on
    Multi30k 5,200 English types instead of 9,728, so forced decoding costs about half);
    the baseline, whose n-best lists are decoded against the data directory's
    dictionaries, keeps the joint one.  ``bf16_autocast`` (transformers only): mixed
    precision, the forward pass under ``torch.autocast`` in bfloat16 on the training
    device, weights, Adam and the loss in float32 (:mod:`rerank.nmt.criterion`); it makes
    another model, so a model directory is refused for a training with the other value.
    """

    preset: str = "cpu"
    variant: str = "regular"
    dropout: float = -1.0
    l2: float = -1.0
    lr: float = 0.0  # 0: the architecture's (GRU 2e-3)
    warmup: int = 0  # transformers' warm-up updates (0: the architecture's, 1000)
    arch: str = "gru"
    average: int = 0  # epochs averaged (transformers: 5 by default)
    max_tokens: int = 4000
    max_epoch: int = 10
    max_update: int = 0
    patience: int = 3
    clip_norm: float = 1.0
    seed: int = 1
    valid_beam: int = 5
    src: str = "en"
    tgt: str = "de"
    direction: str = "forward"
    role: str = ""
    threads: int = 0
    target_vocab: str = "joint"
    device: str = "auto"
    dtype: str = "float32"
    distributed_world_size: int = 1
    bf16_autocast: bool = False

    def __post_init__(self):
        if self.direction not in DIRECTIONS:
            raise InputError(f"unknown direction {self.direction!r}; known: {', '.join(DIRECTIONS)}")
        if not self.role:
            self.role = DIRECTIONS[self.direction]
        if self.preset not in PRESETS:
            raise InputError(f"unknown preset {self.preset!r}; known: {', '.join(PRESETS)}")
        if self.variant not in VARIANTS:
            raise InputError(f"unknown variant {self.variant!r}; known: {', '.join(VARIANTS)}")
        if self.arch != "gru" and self.arch not in ARCHS:
            raise InputError(f"unknown architecture {self.arch!r}; known: gru, {', '.join(ARCHS)}")
        transformer = self.arch in ARCHS
        if self.bf16_autocast and not transformer:
            raise InputError(
                "bf16 autocast is for the transformers (their criterion runs it); the GRU trains in float32"
            )
        if self.warmup < 0 or (self.warmup and not transformer):
            raise InputError(
                f"warm-up {self.warmup}: a number of updates ≥ 0, and for transformers only "
                "(the GRU's Adam runs at a constant learning rate)"
            )
        dropout, l2 = (
            (TRANSFORMER_REGULARISATION["dropout"], TRANSFORMER_REGULARISATION["l2"])
            if transformer
            else VARIANTS[self.variant]
        )
        if self.lr <= 0:
            self.lr = ARCHS[self.arch]["lr"] if transformer else 2e-3
        if self.average <= 0 and transformer:
            self.average = int(TRANSFORMER_REGULARISATION["average"])
        if self.dropout < 0:
            self.dropout = dropout
        if self.l2 < 0:
            self.l2 = l2
        if self.target_vocab not in TARGET_VOCABS:
            raise InputError(f"unknown target vocabulary {self.target_vocab!r}; known: {', '.join(TARGET_VOCABS)}")
        if self.target_vocab == "own" and self.direction == "forward" and self.role == DIRECTIONS["forward"]:
            raise InputError(
                "the baseline (forward, role L2R) keeps the joint dictionary: its n-best lists are "
                "decoded with the data directory's; --target-vocab own is for re-ranking models"
            )


#: settings that say how a training runs, not which model it makes: they may differ
#: between a model's sittings and from a later check (:func:`check_settings`)
RUN_ONLY_SETTINGS = ("threads", "device", "dtype", "distributed_world_size")
#: settings that say when a training stops: training resumes on with other values of
#: them (a finished model trained on to more epochs), but a check of a finished model
#: (:func:`check_settings` without ``resuming``) counts them
STOPPING_SETTINGS = ("max_epoch", "max_update", "patience")


def check_settings(save_dir: str, config, resuming: bool = False) -> None:
    """Refuse a model directory that holds a model trained with other settings.

    ``config`` is a :class:`TrainConfig` or :class:`rerank.nmt.lm.LMConfig`; it is compared
    with the ``config`` of ``save_dir/train.json`` (nothing to compare when there is
    none; a setting it lacks counts as its default), every setting but
    :data:`RUN_ONLY_SETTINGS` (and, with ``resuming``, but :data:`STOPPING_SETTINGS`:
    training on in the same directory is how a model gets more epochs).  Scripts that share model directories between runs (run_configs.sh)
    call it for a finished model they would reuse, so that two settings never
    silently share one model.

    Raises:
        InputError: naming ``save_dir`` and each differing setting (stored → asked).
    """
    path = os.path.join(save_dir, "train.json")
    if not os.path.exists(path):
        return
    stored = read_json(path).get("config")
    if not isinstance(stored, dict):
        raise InputError("train.json has no 'config' object: not a model directory of rerank nmt", path)
    skip = set(RUN_ONLY_SETTINGS) | (set(STOPPING_SETTINGS) if resuming else set())
    defaults = asdict(type(config)())  # a setting newer than the model: it was trained as its default
    differ = [
        f"{k} {stored.get(k, defaults[k])} → {v}"
        for k, v in asdict(config).items()
        if k not in skip and stored.get(k, defaults[k]) != v
    ]
    if differ:
        hint = (
            "use another directory"
            if resuming
            else "remove its train.done to train it on with these settings, or use another directory"
        )
        raise InputError(f"holds a model trained with other settings ({'; '.join(differ)}): {hint}", save_dir)


def _languages(config: TrainConfig):
    return (config.tgt, config.src) if config.direction == "backward" else (config.src, config.tgt)


#: a transformer's size options (fairseq's ``--{encoder,decoder}-OPTION``) -> their key in :data:`ARCHS`
SIZE_OPTIONS = (("layers", "layers"), ("embed-dim", "dim"), ("ffn-embed-dim", "ffn"), ("attention-heads", "heads"))


def transformer_sizes(sizes: Dict[str, Any], sides=("encoder", "decoder")) -> List[str]:
    """fairseq-train's size options of a transformer (``sizes``: a row of :data:`ARCHS`), for
    the ``sides`` it has (a language model: ``("decoder",)``), each option for every side in turn."""
    return [arg for option, key in SIZE_OPTIONS for side in sides for arg in (f"--{side}-{option}", str(sizes[key]))]


def inverse_sqrt_schedule(warmup: Union[int, float]) -> List[str]:
    """Adam's β (0.9, 0.98) and the inverse-square-root schedule warming up over ``warmup``
    updates from 1e-7 (Vaswani et al. 2017), as fairseq-train options."""
    schedule = ["--lr-scheduler", "inverse_sqrt", "--warmup-updates", str(warmup), "--warmup-init-lr", "1e-07"]
    return ["--adam-betas", "(0.9, 0.98)", *schedule]


def fairseq_train(bin_dir: str, task: str, *options: str) -> List[str]:
    """The fairseq-train command line (this python, rerank's fairseq user directory) for
    ``task`` on the binarised ``bin_dir``, followed by ``options``."""
    return [sys.executable, "-m", "fairseq_cli.train", bin_dir, "--user-dir", USER_DIR, "--task", task, *options]


def run_options(config: Any, save_dir: str, progress: str) -> List[str]:
    """fairseq-train's options of the run itself, shared by the translation models and the
    language model: epochs, patience and seed of ``config``, the checkpoint directory, no
    data workers, every sentence kept in a batch, the log format (``simple`` or ``tqdm``)."""
    return [
        "--max-epoch",
        str(config.max_epoch),
        "--patience",
        str(config.patience),
        "--seed",
        str(config.seed),
        "--save-dir",
        save_dir,
        "--num-workers",
        "0",
        # fairseq 0.12's batch_by_size drops the last batch when it is not a multiple of
        # --required-batch-size-multiple (default 8): with 1 every sentence is kept
        "--required-batch-size-multiple",
        "1",
        "--log-format",
        progress,
        "--log-interval",
        "100",
    ]


def run_fairseq_train(command, save_dir: str, threads: int, device_env: Dict[str, str]) -> str:
    """Run fairseq-train, ``command(progress)`` (its log format: ``tqdm`` on a terminal, else
    ``simple``), with ``threads`` CPU threads and the device's environment; returns
    ``save_dir/checkpoint_best.pt``.

    Raises:
        subprocess.CalledProcessError: fairseq failed.
        InputError: it ended without a best checkpoint.
    """
    progress = "tqdm" if sys.stderr.isatty() else "simple"
    done = run_fairseq(command(progress), fairseq_environ({**thread_env(threads), **device_env}))
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, command(progress))
    best = os.path.join(save_dir, "checkpoint_best.pt")
    if not os.path.exists(best):
        raise InputError("fairseq-train ended without a best checkpoint", save_dir)
    return best


def _transformer_args(config: TrainConfig) -> List[str]:
    """fairseq-train's arguments of a transformer architecture (:data:`ARCHS`): its sizes, the
    regularisation, label smoothing, the inverse-square-root schedule with its warm-up, the
    last ``average`` epochs kept (to average), bf16 autocast where asked."""
    a, reg = ARCHS[config.arch], TRANSFORMER_REGULARISATION
    args = ["--arch", "transformer", *transformer_sizes(a), "--share-decoder-input-output-embed"]
    args += [
        "--attention-dropout",
        str(reg["attention_dropout"]),
        "--activation-dropout",
        str(reg["attention_dropout"]),
    ]
    args += ["--criterion", "fused_label_smoothed_cross_entropy", "--label-smoothing", str(reg["label_smoothing"])]
    args += inverse_sqrt_schedule(config.warmup or a["warmup"]) + ["--keep-last-epochs", str(config.average)]
    return args + (["--bf16-autocast"] if config.bf16_autocast else [])


def train_command(bin_dir: str, save_dir: str, config: TrainConfig, progress: str = "simple") -> List[str]:
    """The fairseq-train command line for ``config`` (see :func:`train`); ``bin_dir`` is
    the directory fairseq reads (for r2l, the reversed copy)."""
    src, tgt = _languages(config)
    cmd = fairseq_train(bin_dir, "translation", "--source-lang", src, "--target-lang", tgt)
    cmd += ["--dropout", str(config.dropout), "--optimizer", "adam", "--lr", str(config.lr)]
    cmd += [
        "--weight-decay",
        str(config.l2),
        "--clip-norm",
        str(config.clip_norm),
        "--max-tokens",
        str(config.max_tokens),
    ]
    cmd += run_options(config, save_dir, progress)
    if config.arch in ARCHS:
        cmd += _transformer_args(config)
    else:
        cmd += ["--arch", PRESETS[config.preset], "--criterion", "cross_entropy", "--no-epoch-checkpoints"]
    cmd += fairseq_device(config.device, config.dtype, config.distributed_world_size)[0]
    # the GRU baseline generates with its best checkpoint by validation BLEU (beam search
    # over val each epoch); a transformer with its average of the last epochs, so it
    # validates by loss only (~3 s instead of ~16 s per epoch on Multi30k, one thread)
    if config.direction == "forward" and config.role == DIRECTIONS["forward"] and config.arch not in ARCHS:
        cmd += [
            "--eval-bleu",
            "--eval-bleu-args",
            json.dumps({"beam": config.valid_beam, "max_len_a": 1.2, "max_len_b": 10}),
            "--eval-bleu-remove-bpe",
            "--eval-tokenized-bleu",
            "--eval-bleu-detok",
            "space",
            "--best-checkpoint-metric",
            "bleu",
            "--maximize-best-checkpoint-metric",
        ]
    if config.max_update:
        cmd += ["--max-update", str(config.max_update)]
    return cmd


def thread_env(threads: int) -> dict:
    """Environment for a subprocess limited to ``threads`` CPU threads (0: unchanged)."""
    if threads <= 0:
        return {}
    return {name: str(threads) for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}


def _copy_scoring_files(bin_dir: str, save_dir: str, names: List[str], codes_of: str = "") -> None:
    """Copy dictionaries (from ``bin_dir``) and the subword step's file into ``save_dir`` (the
    model directory then loads and scores on its own).  That file is ``codes_of/../bpe.codes``
    or ``spm.model`` (prepare's layout, :func:`rerank.nmt.subword.subword_spec`; ``codes_of``
    defaults to ``bin_dir``).  Raises :class:`InputError` where there is none."""
    for name in names:
        shutil.copyfile(os.path.join(bin_dir, name), os.path.join(save_dir, name))
    codes = subword_spec(os.path.dirname(os.path.abspath(codes_of or bin_dir))).partition(":")[2]
    shutil.copyfile(codes, os.path.join(save_dir, os.path.basename(codes)))


def _with_native_precision(config: TrainConfig, device_type: str) -> TrainConfig:
    """``config`` as it runs on ``device_type``: ``bf16_autocast`` kept where the device has
    native bfloat16 (:func:`rerank.devices.native_bfloat16`), else dropped with one line on
    standard error — emulated, autocast makes training ~20× slower than float32.  The model
    directory's record keeps the asked settings (a run resumed on another machine is the same
    training) and says how its forward pass ran (``forward_pass`` in ``train.json``)."""
    if not config.bf16_autocast or native_bfloat16(device_type):
        return config
    print(
        f"rerank nmt train: bf16 autocast skipped: this {device_type.upper()} has no native bfloat16 "
        "(AVX-512 BF16 or AMX), where emulated it is ~20x slower; the forward pass runs in float32",
        file=sys.stderr,
    )
    return replace(config, bf16_autocast=False)


def train(bin_dir: str, save_dir: str, config: TrainConfig) -> str:
    """Train (or resume from ``save_dir/checkpoint_last.pt``) and return the path of
    ``checkpoint_best.pt`` (best validation BLEU for the GRU baseline, validation loss for
    auxiliary models and transformers), or for a transformer ``checkpoint_avg.pt``.

    Raises:
        InputError: ``bin_dir`` is not a fairseq-preprocess output; ``save_dir`` holds a
            model trained with other settings (:func:`check_settings`, ``resuming``).
        subprocess.CalledProcessError: fairseq-train failed.
    """
    device_args, device_env = fairseq_device(
        config.device, config.dtype, config.distributed_world_size
    )  # before any work
    run = _with_native_precision(config, "cpu" if "--cpu" in device_args else "cuda")
    if not os.path.exists(os.path.join(bin_dir, f"dict.{config.tgt}.txt")):
        raise InputError("not a binarised fairseq data directory (no dict file)", bin_dir)
    check_settings(save_dir, config, resuming=True)
    last = os.path.join(save_dir, "checkpoint_last.pt")
    if os.path.exists(last):  # fairseq-train resumes from it: refused if it names classes beyond fairseq's
        check_checkpoint(last)
    os.makedirs(save_dir, exist_ok=True)
    data_dir = bin_dir
    if config.direction == "r2l":
        data_dir = reverse_targets(bin_dir, os.path.abspath(bin_dir).rstrip("/") + ".r2l", config.src, config.tgt)
    if config.target_vocab == "own":
        target = _languages(config)[1]
        data_dir = own_target_vocabulary(data_dir, os.path.abspath(data_dir).rstrip("/") + f".vocab-{target}", target)
    _copy_scoring_files(data_dir, save_dir, [f"dict.{config.src}.txt", f"dict.{config.tgt}.txt"], codes_of=bin_dir)
    ran = {"kind": "translation", "forward_pass": "bfloat16 autocast" if run.bf16_autocast else "float32"}
    write_signed(
        os.path.join(save_dir, "train.json"),
        {"config": asdict(config), "bin_dir": os.path.abspath(bin_dir), **ran},
        ["torch", "fairseq-fixed", "sacrebleu"],
    )
    best = run_fairseq_train(
        lambda progress: train_command(data_dir, save_dir, run, progress), save_dir, config.threads, device_env
    )
    if config.average > 1:
        epochs = sorted(
            glob.glob(os.path.join(save_dir, "checkpoint[0-9]*.pt")),
            key=lambda p: int(re.findall(r"checkpoint(\d+)\.pt$", p)[0]),
        )[-config.average :]
        best = average_checkpoints(epochs, os.path.join(save_dir, "checkpoint_avg.pt"))
        write_signed(
            os.path.join(save_dir, "train.json"),
            {
                "config": asdict(config),
                "bin_dir": os.path.abspath(bin_dir),
                **ran,
                "checkpoint": "checkpoint_avg.pt",
                "averaged": [os.path.basename(p) for p in epochs],
            },
            ["torch", "fairseq-fixed", "sacrebleu"],
        )
    return best


def average_checkpoints(paths: List[str], out: str) -> str:
    """Average the model parameters of fairseq checkpoints ``paths`` into ``out`` (the rest
    of the last checkpoint kept), as fairseq's ``scripts/average_checkpoints.py`` does
    (it is not in the pip package).  Returns ``out``.  Raises :class:`InputError` for no
    checkpoints."""
    import torch

    if not paths:
        raise InputError("no epoch checkpoints to average")
    total: Dict[str, Any] = {}
    for path in paths:
        state = load_state(path)
        params = state["model"]
        if not total:
            total = {k: v.clone().double() if v.is_floating_point() else v.clone() for k, v in params.items()}
        else:
            for k, v in params.items():
                if v.is_floating_point():
                    total[k] += v.double()
    state["model"] = {k: (v / len(paths)).to(params[k].dtype) if v.is_floating_point() else v for k, v in total.items()}
    with atomic_write(out, "wb") as handle:
        torch.save(state, handle)
    return out
