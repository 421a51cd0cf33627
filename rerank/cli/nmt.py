"""``rerank nmt prepare|train|train-lm|nbest|to-ct2``: parsers (defaults from the configs) and
handlers.  The nmt modules run fairseq in subprocesses and load torch only inside the
functions that need it, so importing them here loads neither."""

from __future__ import annotations

import argparse
import os
import sys
from typing import List

from rerank.argtypes import non_negative_int, positive_int, seed
from rerank.cli.options import device_options, shard_option_value, shard_options, signature_option, trust_option
from rerank.errors import InputError
from rerank.nbest import write_lines
from rerank.nmt.ct2 import QUANTIZATIONS, convert
from rerank.nmt.data import LANGUAGE, PrepareConfig, prepare, prepared_languages, prepared_lowercase, preprocess_lines
from rerank.nmt.generate import GenerateConfig, generate_nbest, generate_nbest_from_text
from rerank.nmt.lm import LMConfig, train_lm
from rerank.nmt.subword import SUBWORD_FILES
from rerank.nmt.train import ARCHS, DIRECTIONS, TrainConfig, check_settings, train
from rerank.outputs import signature_path, staged_directory
from rerank.signature import write_signed
from rerank.textio import read_lines


def _check(save_dir: str, config) -> str:
    """--check: compare ``config`` with the model in ``save_dir`` (InputError when they differ)."""
    check_settings(save_dir, config)
    return f"{save_dir}: settings agree with its train.json (or it has none)"


def _file_pair(text: str) -> List[str]:
    """``SRC_FILE,TGT_FILE`` -> [source file, target file] (argparse type)."""
    pair = [part.strip() for part in text.split(",")]
    if len(pair) != 2 or not all(pair):
        raise argparse.ArgumentTypeError(f"{text!r}: expected SRC_FILE,TGT_FILE")
    return pair


def cmd_nmt(args) -> None:
    """``rerank nmt prepare|train|train-lm|nbest``: the verb's function."""
    {"prepare": _nmt_prepare, "train": _nmt_train, "train-lm": _nmt_train_lm, "nbest": _nmt_nbest}[args.nmt_verb](args)


def _nmt_prepare(args) -> None:
    """``rerank nmt prepare``: Multi30k or a corpus of one's own, tokenised, subworded, binarised."""
    files = {
        split: pair
        for split, pair in (("train", args.train), ("val", args.valid), ("test_2016_flickr", args.test))
        if pair
    }
    if files and args.data:
        raise InputError("give --data (Multi30k) or --train/--valid/--test (a corpus of your own), not both")
    prepared = PrepareConfig(
        src=args.src,
        tgt=args.tgt,
        bpe_merges=args.bpe_merges,
        files=files,
        lowercase=not args.cased,
        subword=args.subword,
        spm_vocab=args.spm_vocab,
    )
    print(prepare(args.data, args.out, prepared, workers=args.workers))


def _nmt_train(args) -> None:
    """``rerank nmt train`` (or ``--check``: whether a finished model has these settings)."""
    src, tgt = prepared_languages(args.data_bin)  # the direction the data was prepared in
    config = TrainConfig(
        src=src,
        tgt=tgt,
        preset=args.preset,
        variant=args.variant,
        dropout=args.dropout,
        l2=args.l2,
        max_epoch=args.max_epoch,
        max_update=args.max_update,
        patience=args.patience,
        max_tokens=args.max_tokens,
        lr=args.lr,
        warmup=args.warmup,
        seed=args.seed,
        direction=args.direction,
        role=args.role,
        threads=args.threads,
        target_vocab=args.target_vocab,
        device=args.device,
        dtype=args.dtype,
        arch=args.arch,
        average=args.average,
        distributed_world_size=args.distributed_world_size,
        bf16_autocast=args.bf16_autocast,
    )
    print(_check(args.save_dir, config) if args.check else train(args.data_bin, args.save_dir, config))


def _nmt_train_lm(args) -> None:
    """``rerank nmt train-lm`` (or ``--check``)."""
    lm_config = LMConfig(
        embed_dim=args.embed_dim,
        hidden_size=args.hidden_size,
        layers=args.layers,
        dropout=args.dropout,
        max_epoch=args.max_epoch,
        patience=args.patience,
        seed=args.seed,
        threads=args.threads,
        task2=not args.no_task2,
        lang=prepared_languages(args.prepared)[1],  # the target side's LM
        device=args.device,
        dtype=args.dtype,
        arch=args.arch,
    )
    print(
        _check(args.save_dir, lm_config)
        if args.check
        else train_lm(args.prepared, args.save_dir, lm_config, data_dir=args.data)
    )


def _nmt_nbest(args) -> None:
    """``rerank nmt nbest``: a subset of the binarised data, or raw text (``--input``)."""
    src, tgt = prepared_languages(args.data_bin)
    generate_config = GenerateConfig(
        src=src,
        tgt=tgt,
        nbest=args.nbest,
        beam=args.beam,
        batch_size=args.batch_size,
        device=args.device,
        dtype=args.dtype,
        direction=args.direction,
        lowercase=prepared_lowercase(args.data_bin),
    )
    if (args.subset is None) == (args.input is None):
        raise InputError("give exactly one of --subset (valid|test of --data-bin) and --input (raw text)")
    if args.input:
        generate_nbest_from_text(
            args.data_bin,
            args.checkpoint,
            args.input,
            args.out_nbest,
            args.out_1best,
            args.out_source,
            generate_config,
            shard_option_value(args),
        )
    else:
        generate_nbest(
            args.data_bin,
            args.checkpoint,
            args.subset,
            args.out_nbest,
            args.out_1best,
            generate_config,
            shard=shard_option_value(args),
        )


def cmd_to_ct2(args) -> None:
    """``rerank nmt to-ct2``: a fairseq translation checkpoint to a CTranslate2 model
    directory (:func:`rerank.nmt.ct2.convert`), written whole or not at all, with its
    record in ``OUT/convert.json``.

    Raises:
        InputError: an ``--out`` that exists, and what :func:`rerank.nmt.ct2.convert` refuses.
    """
    if os.path.exists(args.out):
        raise InputError("exists: the CTranslate2 model is written into a new directory", args.out)
    with staged_directory(args.out, replace=False, fresh=True) as model:  # CTranslate2 makes the directory
        dict_dir = args.dict or os.path.dirname(os.path.abspath(args.checkpoint))
        record = convert(args.checkpoint, dict_dir, model, args.src, args.tgt, args.quantization)
        record = {"checkpoint": os.path.abspath(args.checkpoint), "dict": os.path.abspath(dict_dir), **record}
        write_signed(os.path.join(model, "convert.json"), {**record, "src": args.src, "tgt": args.tgt})
    print(f"{args.checkpoint} -> {args.out} (CTranslate2, {args.quantization})", file=sys.stderr)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``nmt`` and its verbs to the ``rerank`` sub-commands."""
    p = sub.add_parser("nmt", help="attention NMT on fairseq: prepare, train, nbest")
    nsub = p.add_subparsers(dest="nmt_verb", required=True)
    _add_nmt_prepare(nsub)
    _add_nmt_train(nsub)
    _add_nmt_train_lm(nsub)
    _add_nmt_nbest(nsub)
    _add_nmt_to_ct2(nsub)
    p.set_defaults(func=cmd_nmt)
    _add_tokenize(sub)


def _add_tokenize(sub) -> None:
    """``rerank tokenize``: text tokenised as rerank's lists are (``nmt prepare``'s convention)."""
    q = sub.add_parser(
        "tokenize",
        help="tokenise text as rerank nmt prepare does (Moses normaliser and tokeniser, lowercased): a training "
        "corpus for ibm1:/len: that matches the lists",
        epilog="example: rerank tokenize --input train.de.gz --lang de --out train.tok.de",
    )
    q.add_argument("--input", required=True, help="raw text, one sentence per line (plain or .gz)")
    q.add_argument("--lang", required=True, help="its language, for the Moses normaliser and tokeniser, e.g. de")
    q.add_argument("--cased", action="store_true", help="keep the case (default: lowercase, as rerank's lists)")
    q.add_argument("--out", required=True, help="the tokenised text, line for line (.gz compressed)")
    q.set_defaults(func=cmd_tokenize, paths=lambda a: ({"--input": a.input}, {"--out": a.out}))


def cmd_tokenize(args) -> None:
    if not LANGUAGE.fullmatch(args.lang):
        raise InputError(f"--lang {args.lang!r}: expected a language code such as en, de, fr, cs")
    lines = read_lines(args.input)
    write_lines(preprocess_lines(lines, args.lang, f"tokenize {args.input}", lowercase=not args.cased), args.out)
    print(f"tokenize: {len(lines):,} lines -> {args.out}", file=sys.stderr)


def _add_nmt_to_ct2(nsub) -> None:
    """``rerank nmt to-ct2``: its parser and options."""
    q = nsub.add_parser(
        "to-ct2",
        help="a fairseq transformer checkpoint (yours or rerank's) converted to CTranslate2, for rerank "
        "generate --model ct2:OUT,bpe=...",
        epilog="example: rerank nmt to-ct2 --checkpoint models/en-de/checkpoint_best.pt --src en --tgt de "
        "--out models/en-de-ct2",
    )
    q.add_argument("--checkpoint", required=True, help="the fairseq translation checkpoint (a transformer)")
    q.add_argument(
        "--dict", help="the directory of its dictionaries dict.SRC.txt and dict.TGT.txt (default: the checkpoint's)"
    )
    q.add_argument("--src", required=True, help="source language: the name of its dictionary (dict.SRC.txt)")
    q.add_argument("--tgt", required=True, help="target language (dict.TGT.txt)")
    q.add_argument(
        "--quantization",
        default="float32",
        choices=QUANTIZATIONS,
        help="the stored weights (default: float32, lossless; generate's compute_type= still picks how it runs: "
        "int8 on the CPU by default)",
    )
    q.add_argument("--out", required=True, help="the CTranslate2 model directory to write (new)")
    trust_option(q)
    q.set_defaults(
        func=cmd_to_ct2,
        paths=lambda a: ({"--checkpoint": a.checkpoint, "--dict": a.dict}, {}),  # --out: a new directory
    )


def _add_nmt_prepare(nsub) -> None:
    """``rerank nmt prepare``: its parser and options."""
    q = nsub.add_parser(
        "prepare",
        help="normalise, tokenise, lowercase, segment into subwords (BPE or SentencePiece) and binarise Multi30k "
        "task 1 (any of its language pairs) or a corpus of your own",
        epilog="example: rerank nmt prepare --data multi30k-dataset/data --out out/data",
    )
    q.add_argument(
        "--data",
        default=None,
        help="a local Multi30k copy: the data/ directory of github.com/multi30k/dataset (default: its files "
        "downloaded into OUT/download)",
    )
    q.add_argument(
        "--out", required=True, help="directory to write: tok/, bpe.codes (or spm.model), bpe/, bin/, prepare.json"
    )
    q.add_argument(
        "--src", default=PrepareConfig.src, help="source language (default: en); train, nbest and train-lm read it"
    )
    q.add_argument("--tgt", default=PrepareConfig.tgt, help="target language (default: de), e.g. --src de --tgt en")
    for flag, what, split in (
        ("--train", "training", "train"),
        ("--valid", "validation (tuning)", "valid"),
        ("--test", "test", "test"),
    ):
        q.add_argument(
            flag,
            type=_file_pair,
            help=f"a corpus of your own: the {what} pair SRC_FILE,TGT_FILE (plain or .gz, one sentence per line; "
            f"all three splits, instead of --data), e.g. {flag} {split}.de.gz,{split}.en.gz",
        )
    q.add_argument(
        "--bpe-merges",
        type=positive_int,
        default=PrepareConfig.bpe_merges,
        help="joint BPE merge operations (subword-nmt; default: 10000)",
    )
    q.add_argument(
        "--subword",
        choices=tuple(SUBWORD_FILES),
        default=PrepareConfig.subword,
        help="the subword step learned on both sides' training text: subword-nmt's BPE (the paper's, bpe.codes) "
        "or a SentencePiece unigram model (spm.model); every model, list and system made from the data uses it "
        "(default: subword-nmt), e.g. --subword sentencepiece",
    )
    q.add_argument(
        "--spm-vocab",
        type=positive_int,
        default=PrepareConfig.spm_vocab,
        help="the SentencePiece vocabulary's size, at most (--subword sentencepiece; default: 8000)",
    )
    q.add_argument(
        "--cased",
        action="store_true",
        help="keep the case (default: lowercase, Multi30k's lc.norm.tok protocol, the paper's); nbest, the "
        "packed system and translate read it from prepare.json",
    )
    q.add_argument("--workers", type=int, default=2, help="fairseq-preprocess workers")


def _model_directory_options(q) -> None:
    """A training's model directory (``--save-dir``) and ``--check`` (whether it holds a model
    trained with these settings): ``nmt train``'s and ``nmt train-lm``'s."""
    q.add_argument(
        "--save-dir",
        required=True,
        help="model directory: checkpoints, dictionaries, BPE codes, train.json (training "
        "resumes in it; refused when its train.json has other settings, but for the epochs and patience)",
    )
    q.add_argument(
        "--check",
        action="store_true",
        help="train nothing: exit 1 with one line when the model in --save-dir was trained with other settings "
        "(epochs and patience included), else 0; e.g. before reusing a finished model",
    )


def _add_nmt_train(nsub) -> None:
    """``rerank nmt train``: its parser and options."""
    q = nsub.add_parser(
        "train",
        help="train the Bahdanau GRU model (resumable)",
        epilog="example: rerank nmt train --data-bin out/data/bin --save-dir out/model --preset cpu --max-epoch 12",
    )
    q.add_argument("--data-bin", required=True, help="binarised data directory (rerank nmt prepare's OUT/bin)")
    _model_directory_options(q)
    q.add_argument(
        "--arch",
        default=TrainConfig.arch,
        choices=["gru"] + list(ARCHS),
        help="gru: the Bahdanau GRU model at --preset; transformer-tiny (4 layers, 128 dimensions, 4 heads) "
        "or transformer-small (3 layers, 256, 4 heads): fairseq's transformer with dropout 0.3, label "
        "smoothing 0.1, inverse-sqrt warm-up, the last --average epochs averaged",
    )
    q.add_argument(
        "--average",
        type=int,
        default=TrainConfig.average,
        help="epoch checkpoints averaged into checkpoint_avg.pt (0: the architecture's: transformers 5, GRU none)",
    )
    q.add_argument("--preset", default=TrainConfig.preset, help="cpu | small (fast re-ranking models) | paper (GRU)")
    q.add_argument(
        "--variant",
        default=TrainConfig.variant,
        help="weak (dropout 0, L2 0) | regular (0.5, 1e-8) | optimised (0.2, 0)",
    )
    q.add_argument("--dropout", type=float, default=-1.0, help="override the variant's dropout")
    q.add_argument("--l2", type=float, default=-1.0, help="override the variant's L2 weight")
    q.add_argument("--max-epoch", type=positive_int, default=TrainConfig.max_epoch, help="training epochs at most")
    q.add_argument("--max-update", type=int, default=TrainConfig.max_update, help="updates at most (0: no limit)")
    q.add_argument(
        "--patience",
        type=int,
        default=TrainConfig.patience,
        help="epochs without a better validation score before stopping",
    )
    q.add_argument("--max-tokens", type=positive_int, default=TrainConfig.max_tokens, help="tokens per batch")
    q.add_argument(
        "--lr",
        type=float,
        default=TrainConfig.lr,
        help="Adam learning rate (default: 0, the architecture's: GRU 2e-3, transformer-tiny 5e-3, "
        "transformer-small 1e-3)",
    )
    q.add_argument(
        "--warmup",
        type=int,
        default=TrainConfig.warmup,
        help="transformers: updates of linear warm-up before the inverse-square-root decay (default: 0, "
        "the architecture's: 1000); e.g. --warmup 400 for a short training",
    )
    q.add_argument("--seed", type=seed, default=TrainConfig.seed, help="training seed")
    q.add_argument(
        "--direction",
        default=TrainConfig.direction,
        choices=list(DIRECTIONS),
        help="forward (en->de), backward (de->en: the channel model), r2l (target reversed)",
    )
    q.add_argument("--role", default="", help="feature name of the model's scores (default: L2R, Channel, R2L)")
    q.add_argument("--threads", type=non_negative_int, default=0, help="torch CPU threads (0: torch's default)")
    q.add_argument(
        "--target-vocab",
        default=TrainConfig.target_vocab,
        choices=["joint", "own"],
        help="output dictionary: the joint BPE one, or the target language's own types "
        "(re-ranking models: faster forced decoding)",
    )
    q.add_argument(
        "--bf16-autocast",
        action="store_true",
        help="transformers: mixed precision, the forward pass under torch.autocast in bfloat16 (weights, "
        "Adam and the loss stay float32); on a CPU with AVX-512 BF16 or AMX about 1.25x faster per "
        "update; skipped, saying so, where the device has no native bfloat16 (emulated it is ~20x "
        "slower) (default: off, float32); e.g. --arch transformer-tiny --bf16-autocast",
    )
    device_options(q, threads=False)
    q.add_argument(
        "--distributed-world-size",
        type=positive_int,
        default=1,
        help="GPUs to train on with fairseq's own distributed training (torch.distributed), e.g. "
        "--distributed-world-size 4 (needs that many CUDA devices)",
    )


def _add_nmt_train_lm(nsub) -> None:
    """``rerank nmt train-lm``: its parser and options."""
    q = nsub.add_parser(
        "train-lm",
        help="train the target-side LSTM language model (training-split German only)",
        epilog="example: rerank nmt train-lm --prepared out/data --save-dir out/lm --max-epoch 3",
    )
    q.add_argument("--prepared", required=True, help="output directory of 'rerank nmt prepare'")
    q.add_argument("--data", default=None, help="a local Multi30k copy for task 2 (default: downloaded, as prepare)")
    _model_directory_options(q)
    q.add_argument("--embed-dim", type=positive_int, default=LMConfig.embed_dim, help="word embedding size")
    q.add_argument("--hidden-size", type=positive_int, default=LMConfig.hidden_size, help="LSTM hidden size")
    q.add_argument("--layers", type=positive_int, default=LMConfig.layers, help="LSTM layers")
    q.add_argument("--dropout", type=float, default=LMConfig.dropout, help="dropout")
    q.add_argument("--max-epoch", type=positive_int, default=LMConfig.max_epoch, help="training epochs at most")
    q.add_argument(
        "--patience",
        type=int,
        default=LMConfig.patience,
        help="epochs without a better validation score before stopping",
    )
    q.add_argument("--seed", type=seed, default=LMConfig.seed, help="training seed")
    q.add_argument("--threads", type=non_negative_int, default=0, help="torch CPU threads (0: torch's default)")
    q.add_argument("--no-task2", action="store_true", help="task 1's German only")
    q.add_argument(
        "--arch",
        default="lstm",
        choices=["lstm", "transformer-tiny"],
        help="lstm: fairseq's lstm_lm at --embed-dim/--hidden-size/--layers; transformer-tiny: fairseq's "
        "transformer_lm, 4 layers, 128 dimensions, 4 heads",
    )
    device_options(q, threads=False)


def _add_nmt_nbest(nsub) -> None:
    """``rerank nmt nbest``: its parser and options."""
    q = nsub.add_parser(
        "nbest",
        help="beam search n-best lists in Moses format",
        epilog="example: rerank nmt nbest --data-bin out/data/bin --checkpoint out/model/checkpoint_best.pt --subset test --nbest 20 --out-nbest test.nbest --out-1best test.1best",
    )
    q.add_argument("--data-bin", required=True, help="binarised data directory (rerank nmt prepare's OUT/bin)")
    q.add_argument("--checkpoint", required=True, help="the model's checkpoint, e.g. MODEL/checkpoint_best.pt")
    q.add_argument("--subset", help="valid | test (a binarised subset of --data-bin)")
    q.add_argument("--input", help="raw source text, one sentence per line: preprocessed as the model's data")
    q.add_argument("--out-source", help="with --input: write the preprocessed source here (for features --source)")
    q.add_argument("--nbest", type=positive_int, default=GenerateConfig.nbest, help="hypotheses per sentence")
    q.add_argument("--beam", type=int, default=GenerateConfig.beam, help="beam size (default: = nbest)")
    q.add_argument(
        "--batch-size", type=positive_int, default=GenerateConfig.batch_size, help="sentences per decoding batch"
    )
    q.add_argument(
        "--direction",
        default=GenerateConfig.direction,
        choices=["auto", "forward", "r2l"],
        help="the model's direction (default: auto, from the train.json beside --checkpoint; forward "
        "without one); r2l: a right-to-left model's hypotheses, put back in reading order, columns "
        "R2L, WordPenalty, R2LNorm; e.g. --checkpoint models/r2l/checkpoint_avg.pt --direction r2l",
    )
    q.add_argument(
        "--out-nbest", required=True, help="the n-best list (Moses format; its signature OUT_NBEST.json beside it)"
    )
    device_options(q)
    q.add_argument("--out-1best", required=True, help="the beam's 1-best, one line per sentence")
    shard_options(
        q,
        "sentences of --subset or --input (fairseq's length-sorted batches of --batch-size: the merged "
        "shards are one process's lists, byte for byte, with the same torch threads)",
        parts="shards of the batches of",
    )
    signature_option(q, "--out-nbest")
    q.set_defaults(
        paths=lambda a: (
            {"--checkpoint": a.checkpoint, "--input": a.input},
            {
                "--out-nbest": a.out_nbest,
                "--out-1best": a.out_1best,
                "--out-source": a.out_source,
                "--out-nbest (signature)": signature_path(a.out_nbest),
            },
        )
    )
