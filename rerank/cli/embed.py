"""``rerank embed train|isr|sts``: train MLMME / VSE on Multi30k task 2 and evaluate it.

Data composition of ``train``: all task-2 training descriptions (``--task1`` adds task
1's translated training pairs: same images, one more description pair each), text only
unless ``--image-features`` has rows for their images.  With ``--image-features``:

* every training or validation image (task-2 train / val) with a feature row gets its
  features: the paper's protocol, when features exist for every split (give
  ``--image-task2-split none``);
* the featured images of ``--image-task2-split`` (default test_2016, the only real
  features here) join training with their descriptions, except the held-out ones: the
  last ``--heldout-images``, or with ``--folds F --fold k`` the images of fold k
  (cross-fitting, ``rerank/folds.py``); the held-out names go to ``heldout.json`` for
  ``isr``; the ``--valid-images`` before them become the validation data.

Model selection uses the validation data: image–sentence ranking on its images if it has
any, else sentence–sentence ranking between the languages on the task-2 validation split.
``--init-model`` warm-starts from a trained model and ``--max-steps`` caps the batches.
"""

from __future__ import annotations

import argparse
import json
import os

import numpy as np

from rerank.argtypes import closed_unit_interval, non_negative_int, positive_float, positive_int
from rerank.cli.options import device_options, device_settings
from rerank.embed.config import PRESET_LR, EmbedTrainConfig, MLMMEConfig
from rerank.embed.data import EmbedDataConfig, align_images, load_image_features, read_task2, split_data, training_data
from rerank.embed.evaluation import image_sentence_ranking, sts_pearson
from rerank.embed.lazy import encode_images, encode_sentences, load_model, train_embeddings
from rerank.errors import InputError
from rerank.nmt.data import preprocess_lines, resolve_data_dir
from rerank.outputs import atomic_write


def cmd_embed(args) -> None:
    """Entry point of ``rerank embed``."""
    {"train": _train, "isr": _isr, "sts": _sts}[args.embed_verb](args)


def _train(args) -> None:
    device_settings(args).resolve()  # a device that cannot be had fails before any work
    args.data = resolve_data_dir(args.data, args.download_dir, task2=True, task1=args.task1)
    langs = args.langs.split(",")
    data = EmbedDataConfig(
        args.data,
        langs,
        args.task1,
        args.image_features,
        args.image_split,
        args.image_task2_split,
        args.heldout_images,
        args.folds,
        args.fold,
        args.valid_images,
    )
    train, valid, heldout = training_data(data)
    extra = {"init": args.init} if args.init else {}
    model_config = MLMMEConfig.from_preset(args.preset, langs=langs, beta=args.beta, margin=args.margin, **extra)
    config = EmbedTrainConfig(
        model=model_config,
        epochs=args.epochs,
        batch_size=args.batch_size,
        lr=args.lr if args.lr is not None else PRESET_LR[args.preset],
        seed=args.seed,
        contrastive=args.contrastive,
        image_rows=args.image_rows,
        validate_every=args.validate_every,
        patience=args.patience,
        threads=args.threads,
        max_steps=args.max_steps,
        init_model=args.init_model or "",
        device=args.device,
        dtype=args.dtype,
    )
    _, _, history = train_embeddings(train, valid, config, out_dir=args.out, progress=True)
    with atomic_write(os.path.join(args.out, "heldout.json")) as out:
        json.dump({"task2_split": args.image_task2_split, "images": heldout}, out, indent=2)
    for row in history:
        print(json.dumps(row))


def _isr(args) -> None:
    model, vocabs = load_model(args.model)
    with open(os.path.join(args.model, "heldout.json"), encoding="utf-8") as handle:
        held = json.load(handle)
    if not held["images"]:
        raise InputError("the model was trained without held-out images", args.model)
    lang = args.lang or model.config.langs[-1]
    split = read_task2(args.data, held["task2_split"], [lang])
    index = {name: i for i, name in enumerate(split.images)}
    rows = np.array([index[name] for name in held["images"]])
    names, matrix = load_image_features(args.image_features, args.image_split)
    feats, _ = align_images([split.images[i] for i in rows], names, matrix, require_all=True)
    data = split_data(split, [lang], rows)
    result = image_sentence_ranking(
        encode_images(model, feats), encode_sentences(model, vocabs[lang], lang, data.sentences[lang]), data.image_of
    )
    result = {"images": len(rows), "sentences": len(data.image_of), "lang": lang, **result}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"ISR on {len(rows)} held-out real images, {len(data.image_of)} {lang} descriptions")
        for direction in ("image_to_sentence", "sentence_to_image"):
            r = result[direction]
            print(
                f"{direction:18s} r@1 {r['r@1']:5.1f}  r@5 {r['r@5']:5.1f}  r@10 {r['r@10']:5.1f}  mrank {r['mrank']:g}"
            )


def _sts(args) -> None:
    model, vocabs = load_model(args.model)
    lang = args.lang
    if lang not in vocabs:
        raise InputError(f"the model has no {lang!r} encoder", args.model)
    gold, first, second = [], [], []
    with open(args.data, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                raise InputError(
                    f"expected score<TAB>sentence<TAB>sentence, found {len(parts)} fields", args.data, lineno
                )
            try:
                gold.append(float(parts[0]))
            except ValueError:
                raise InputError(f"score {parts[0]!r} is not a number", args.data, lineno) from None
            first.append(parts[1])
            second.append(parts[2])
    v1 = encode_sentences(model, vocabs[lang], lang, preprocess_lines(first, lang))
    v2 = encode_sentences(model, vocabs[lang], lang, preprocess_lines(second, lang))
    r = sts_pearson(v1, v2, np.array(gold))
    print(json.dumps({"pearson": r, "n": len(gold)}) if args.json else f"STS Pearson r = {r:.4f} on {len(gold)} pairs")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``embed`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("embed", help="MLMME / VSE sentence-image embeddings: train, isr, sts")
    esub = p.add_subparsers(dest="embed_verb", required=True)
    q = esub.add_parser(
        "train",
        help="train on Multi30k task 2 (VSE: --langs de --beta 1)",
        epilog="example: rerank embed train --data ../shared/data/multi30k --task1 --beta 0 --epochs 2 --out models/mlmme",
    )
    q.add_argument(
        "--data",
        help="Multi30k directory (task2/raw, task2/image_splits); default: "
        "../shared/data/multi30k if present, else downloaded into --download-dir",
    )
    q.add_argument("--download-dir", default="multi30k-download", help="where a download goes")
    q.add_argument("--preset", default=MLMMEConfig.preset, help="cpu | paper")
    q.add_argument(
        "--beta",
        type=closed_unit_interval,
        default=MLMMEConfig.beta,
        help="weight of the multi-modal loss R_MM against the multilingual R_ML, β·R_MM + (1−β)·R_ML (1: VSE)",
    )
    q.add_argument("--margin", type=positive_float, default=MLMMEConfig.margin, help="the ranking loss's margin α")
    q.add_argument(
        "--langs",
        default=",".join(MLMMEConfig().langs),
        help="comma-separated description languages, e.g. en,de (de alone: the one-language VSE)",
    )
    q.add_argument("--image-features", help="CNN feature matrix (.npy/.npz)")
    q.add_argument("--image-split", help="image names, one per row of --image-features")
    q.add_argument(
        "--image-task2-split",
        default="test_2016",
        help="a further task-2 split whose featured images join training, minus the held-out ones "
        "(none: only train/val images, the paper's protocol)",
    )
    q.add_argument(
        "--heldout-images", type=non_negative_int, default=200, help="last N featured images of that split kept for isr"
    )
    q.add_argument("--folds", help="folds file (rerank folds): hold out the images of --fold instead (cross-fitting)")
    q.add_argument("--fold", type=non_negative_int, help="the fold whose images are held out")
    q.add_argument("--init-model", help="warm start from this trained model (vocabularies, sizes, matching weights)")
    q.add_argument(
        "--max-steps",
        type=non_negative_int,
        default=EmbedTrainConfig.max_steps,
        help="stop after N batches (0: no limit)",
    )
    q.add_argument(
        "--valid-images",
        type=non_negative_int,
        default=0,
        help="N featured images before the held-out ones used for model selection",
    )
    q.add_argument("--task1", action="store_true", help="add task 1's translated training pairs")
    q.add_argument("--init", help="paper (N(0,0.01), orthogonal) | default (PyTorch); default: the preset's")
    q.add_argument(
        "--contrastive",
        default=EmbedTrainConfig.contrastive,
        choices=["batch", "random"],
        help="contrastive terms: the other batch rows, or a random sample per batch (the paper)",
    )
    q.add_argument(
        "--image-rows",
        type=non_negative_int,
        default=EmbedTrainConfig.image_rows,
        help="image-bearing rows guaranteed per batch",
    )
    q.add_argument("--epochs", type=positive_int, default=EmbedTrainConfig.epochs, help="training epochs")
    q.add_argument(
        "--validate-every",
        type=non_negative_int,
        default=EmbedTrainConfig.validate_every,
        help="also validate every N batches",
    )
    q.add_argument(
        "--patience",
        type=positive_int,
        default=EmbedTrainConfig.patience,
        help="validations without improvement before stopping",
    )
    q.add_argument("--batch-size", type=positive_int, default=EmbedTrainConfig.batch_size, help="sentences per batch")
    q.add_argument("--lr", type=float, help="Adam learning rate (default: the preset's, cpu 2e-3, paper 2e-4)")
    q.add_argument(
        "--threads",
        type=non_negative_int,
        default=EmbedTrainConfig.threads,
        help="torch CPU threads (0: torch's default)",
    )
    q.add_argument("--seed", type=int, default=EmbedTrainConfig.seed, help="seed of initialisation and batch order")
    device_options(q)
    q.add_argument(
        "--out", required=True, help="model directory to write (checkpoints, vocabularies, config, heldout.json)"
    )
    q = esub.add_parser(
        "isr",
        help="image-sentence ranking on the model's held-out real images",
        epilog="example: rerank embed isr --model models/mlmme --data ../shared/data/multi30k --image-features test.npy --image-split test_images.txt",
    )
    q.add_argument("--model", required=True, help="a trained model directory (rerank embed train --out)")
    q.add_argument("--data", required=True, help="Multi30k directory (task2/raw, task2/image_splits)")
    q.add_argument("--image-features", required=True, help="CNN feature matrix (.npy/.npz) of the held-out images")
    q.add_argument("--image-split", required=True, help="image file names, one per row of --image-features")
    q.add_argument("--lang", help="description language (default: the model's last)")
    q.add_argument("--json", action="store_true", help="print JSON instead of a line of text")
    q = esub.add_parser(
        "sts",
        help="STS Pearson r of 5 · cosine against gold",
        epilog="example: rerank embed sts --model models/mlmme --data sts2014.images.tsv --lang en",
    )
    q.add_argument("--model", required=True, help="a trained model directory (rerank embed train --out)")
    q.add_argument("--data", required=True, help="score<TAB>sentence<TAB>sentence file")
    q.add_argument("--lang", default="en", help="language of the sentences")
    q.add_argument("--json", action="store_true", help="print JSON instead of a line of text")
    p.set_defaults(func=cmd_embed)
