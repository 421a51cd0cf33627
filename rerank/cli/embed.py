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

from rerank.argtypes import (
    closed_unit_interval,
    non_negative_float,
    non_negative_int,
    positive_float,
    positive_int,
    seed,
)
from rerank.cli.options import device_options, device_settings
from rerank.embed.config import (
    ENCODERS,
    OBJECTIVES,
    OPTIMIZERS,
    PRESET_LR,
    SIMILARITIES,
    EmbedTrainConfig,
    MLMMEConfig,
)
from rerank.embed.data import EmbedDataConfig, align_images, load_image_features, read_task2, split_data, training_data
from rerank.embed.evaluation import cross_lingual_pairs, image_sentence_ranking, sts_pearson, word_similarity
from rerank.embed.lazy import encode_images, encode_sentences, load_model, train_embeddings, word_vectors
from rerank.embed.words import keyed_pairs, read_pairs, read_vectors, write_vectors
from rerank.errors import InputError
from rerank.nmt.data import preprocess_lines, resolve_data_dir
from rerank.outputs import atomic_write


def cmd_embed(args) -> None:
    """Entry point of ``rerank embed``."""
    {"train": _train, "isr": _isr, "sts": _sts, "words": _words, "wordsim": _wordsim}[args.embed_verb](args)


#: the model sizes that ``embed train`` takes beside its ``--preset`` (MLMMEConfig fields)
SIZE_OPTIONS = ("word_dim", "hidden_dim", "embed_dim")


def _model_config(args) -> MLMMEConfig:
    """The model settings of ``embed train``: the objective's fixed settings (OBJECTIVES),
    then the options given (sizes over the preset's); an option that contradicts the objective, or sizes
    beside a warm start (which keeps its model's), is refused."""
    fixed = OBJECTIVES[args.objective]
    given = {
        key: getattr(args, key)
        for key in ("beta", "similarity", "encoder", "adversary", "neighbour")
        if getattr(args, key) is not None
    }
    clash = [f"--{k} {given[k]}" for k in given if k in fixed and given[k] != fixed[k]]
    if clash:
        raise InputError(
            f"--objective {args.objective} fixes {', '.join(f'{k}={v}' for k, v in fixed.items())}; "
            f"drop {', '.join(clash)}"
        )
    extra = {"init": args.init} if args.init else {}
    sizes = {key: getattr(args, key) for key in SIZE_OPTIONS if getattr(args, key) is not None}
    if sizes and args.init_model:
        raise InputError(
            f"a warm start keeps its model's sizes; drop {', '.join('--' + k.replace('_', '-') for k in sizes)} "
            f"or --init-model"
        )
    extra.update(sizes)
    return MLMMEConfig.from_preset(
        args.preset,
        langs=args.langs.split(","),
        margin=args.margin,
        objective=args.objective,
        **{**fixed, **given, **extra},
    )


def _train(args) -> None:
    device_settings(args).resolve()  # a device that cannot be had fails before any work
    model_config = _model_config(args)  # settings that contradict the objective, too
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
        max_minutes=args.max_minutes,
        init_model=args.init_model or "",
        device=args.device,
        dtype=args.dtype,
        optimizer=args.optimizer,
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
        encode_images(model, feats),
        encode_sentences(model, vocabs[lang], lang, data.sentences[lang]),
        data.image_of,
        model.config.similarity,
    )
    if args.json:
        print(json.dumps({"images": len(rows), "sentences": len(data.image_of), "lang": lang, **result}))
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


def _words(args) -> None:
    model, vocabs = load_model(args.model)
    vectors = word_vectors(model, vocabs, progress=True, kind=args.kind)
    write_vectors(args.out, vectors)
    print(
        f"{len(vectors)} word vectors ({', '.join(f'{lang} {len(vocabs[lang]) - 2}' for lang in vocabs)}) -> {args.out}"
    )


def _wordsim(args) -> None:
    if (args.model is None) == (args.vectors is None):
        raise InputError("give --model DIR or --vectors FILE (one of them)")
    sets = [(args.pairs, args.lang)] + ([(args.pairs2, args.lang2)] if args.pairs2 else [])
    if args.lang2 and not args.pairs2:
        raise InputError("--lang2 goes with --pairs2")
    if args.pairs2 and not args.lang2:
        raise InputError("--pairs2 needs --lang2 (the language of its words)")
    read = [(path, lang, read_pairs(path)) for path, lang in sets]  # every set checked before the model loads
    if len(read) == 2 and len(read[0][2]) != len(read[1][2]):
        raise InputError(
            f"{len(read[1][2])} pairs but {len(read[0][2])} in {read[0][0]}: not line-aligned", args.pairs2
        )
    if args.vectors:
        vectors = read_vectors(args.vectors)
    else:
        model, vocabs = load_model(args.model)
        vectors = word_vectors(model, vocabs, kind=args.kind)
    keyed = [keyed_pairs(pairs, lang, lang) for _, lang, pairs in read]
    results = {lang: word_similarity(vectors, k) for (_, lang, _), k in zip(read, keyed)}
    if len(keyed) == 2:
        results[f"{read[0][1]}-{read[1][1]}"] = word_similarity(vectors, cross_lingual_pairs(*keyed))
    if args.json:
        print(json.dumps(results))
        return
    for name, r in results.items():
        print(
            f"{name:6s} Spearman rho {r['spearman']:.3f} on {r['covered']}/{r['pairs']} pairs ({r['coverage']:.1f} %)"
        )


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``embed`` to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "embed",
        help="multilingual sentence-image embeddings (MLMME, VSE, PIVOT, PARALLEL, MULE, ImageVec): "
        "train, isr, sts, words, wordsim",
    )
    esub = p.add_subparsers(dest="embed_verb", required=True)
    _add_embed_train(esub)
    _add_embed_isr(esub)
    _add_embed_sts(esub)
    _add_embed_words(esub)
    _add_embed_wordsim(esub)
    p.set_defaults(func=cmd_embed)


def _add_embed_train(esub) -> None:
    """``rerank embed train``: its parser and options."""
    q = esub.add_parser(
        "train",
        help="train on Multi30k task 2 (VSE: --langs de --beta 1)",
        epilog="example: rerank embed train --data multi30k-dataset/data --task1 --beta 0 --epochs 2 --out models/mlmme",
    )
    q.add_argument(
        "--data",
        help="a local Multi30k copy (task2/raw, task2/image_splits: the data/ directory of "
        "github.com/multi30k/dataset); default: downloaded into --download-dir",
    )
    q.add_argument("--download-dir", default="multi30k-download", help="where a download goes")
    _embed_model_options(q)
    _embed_image_options(q)
    _embed_schedule_options(q)
    device_options(q, threads=False)
    q.add_argument(
        "--out", required=True, help="model directory to write (checkpoints, vocabularies, config, heldout.json)"
    )


def _embed_model_options(q) -> None:
    """``rerank embed train``'s model options: sizes, family, loss weights, languages."""
    q.add_argument(
        "--preset",
        default=MLMMEConfig.preset,
        help="cpu (300-d words, 512-d GRU, 512-d joint space) | paper (620 / 1024 / 2048, Calixto & Liu 2017 §5)",
    )
    for key, what, example in (
        ("word_dim", "word embeddings", 1024),
        ("hidden_dim", "the GRU's state (gru encoder only)", 2048),
        ("embed_dim", "the joint sentence-image space", 4096),
    ):
        q.add_argument(
            "--" + key.replace("_", "-"),
            type=positive_int,
            help=f"size of {what} (default: the preset's), e.g. --{key.replace('_', '-')} {example}",
        )
    q.add_argument(
        "--objective",
        default="mlmme",
        choices=list(OBJECTIVES),
        help="the embedding family (default mlmme): pivot / parallel (Gella et al. 2017; -asym: order "
        "embeddings), mule (Kim et al. 2020: shared branch, adversary, neighbours), imagevec (Singhal et al. "
        "2019: bag of words); each fixes its own settings of the options below",
    )
    q.add_argument(
        "--beta",
        type=closed_unit_interval,
        help=f"weight of the multi-modal loss R_MM against the multilingual R_ML, β·R_MM + (1−β)·R_ML "
        f"(default {MLMMEConfig.beta}; 1: VSE / PIVOT)",
    )
    q.add_argument(
        "--similarity",
        choices=SIMILARITIES,
        help="image–sentence similarity (default cosine): cosine, or order (order embeddings, Vendrov et al. 2016)",
    )
    q.add_argument("--encoder", choices=ENCODERS, help="text encoder (default gru): gru, or bow (mean of word vectors)")
    q.add_argument(
        "--adversary",
        type=non_negative_float,
        help="weight of the adversarial language classifier on the word embeddings (default 0; mule 0.1)",
    )
    q.add_argument(
        "--neighbour",
        type=non_negative_float,
        help="weight of the neighbourhood constraints between descriptions of one image (default 0; mule 1)",
    )
    q.add_argument("--margin", type=positive_float, default=MLMMEConfig.margin, help="the ranking loss's margin α")
    q.add_argument(
        "--langs",
        default=",".join(MLMMEConfig().langs),
        help="comma-separated description languages, e.g. en,de (de alone: the one-language VSE)",
    )


def _embed_image_options(q) -> None:
    """``rerank embed train``'s image and held-out options, the start model, the step limits."""
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
        "--max-minutes",
        type=non_negative_float,
        default=EmbedTrainConfig.max_minutes,
        help="stop after M minutes of training, validating there and keeping the best state, e.g. "
        "--max-minutes 50 inside a 1-hour job (default: 0, no limit)",
    )
    q.add_argument(
        "--valid-images",
        type=non_negative_int,
        default=0,
        help="N featured images before the held-out ones used for model selection",
    )
    q.add_argument("--task1", action="store_true", help="add task 1's translated training pairs")


def _embed_schedule_options(q) -> None:
    """``rerank embed train``'s initialisation, batches, epochs, optimiser, threads, seed."""
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
    q.add_argument(
        "--optimizer",
        default=EmbedTrainConfig.optimizer,
        choices=OPTIMIZERS,
        help="adam (every weight every step), or lazy-adam (a word-embedding row moves only when its word is "
        "in the batch: SparseAdam, TensorFlow's LazyAdam; fast for large --word-dim on a CPU), "
        "e.g. --optimizer lazy-adam",
    )
    q.add_argument("--lr", type=float, help="Adam learning rate (default: the preset's, cpu 2e-3, paper 2e-4)")
    q.add_argument(
        "--threads",
        type=non_negative_int,
        default=EmbedTrainConfig.threads,
        help="torch CPU threads (0: torch's default)",
    )
    q.add_argument("--seed", type=seed, default=EmbedTrainConfig.seed, help="seed of initialisation and batch order")


def _add_embed_isr(esub) -> None:
    """``rerank embed isr``: its parser and options."""
    q = esub.add_parser(
        "isr",
        help="image-sentence ranking on the model's held-out real images",
        epilog="example: rerank embed isr --model models/mlmme --data multi30k-dataset/data --image-features test.npy --image-split test_images.txt",
    )
    q.add_argument("--model", required=True, help="a trained model directory (rerank embed train --out)")
    q.add_argument("--data", required=True, help="Multi30k directory (task2/raw, task2/image_splits)")
    q.add_argument("--image-features", required=True, help="CNN feature matrix (.npy/.npz) of the held-out images")
    q.add_argument("--image-split", required=True, help="image file names, one per row of --image-features")
    q.add_argument("--lang", help="description language (default: the model's last)")
    q.add_argument("--json", action="store_true", help="print JSON instead of a line of text")


def _add_embed_sts(esub) -> None:
    """``rerank embed sts``: its parser and options."""
    q = esub.add_parser(
        "sts",
        help="STS Pearson r of 5 · cosine against gold",
        epilog="example: rerank embed sts --model models/mlmme --data sts2014.images.tsv --lang en",
    )
    q.add_argument("--model", required=True, help="a trained model directory (rerank embed train --out)")
    q.add_argument("--data", required=True, help="score<TAB>sentence<TAB>sentence file")
    q.add_argument("--lang", default="en", help="language of the sentences")
    q.add_argument("--json", action="store_true", help="print JSON instead of a line of text")


def _add_embed_words(esub) -> None:
    """``rerank embed words``: its parser and options."""
    q = esub.add_parser(
        "words",
        help="export a model's word vectors (word v1 … vd, words prefixed en_ / de_)",
        epilog="example: rerank embed words --model models/imagevec --out models/imagevec/words.txt",
    )
    q.add_argument("--model", required=True, help="a trained model directory (rerank embed train --out)")
    q.add_argument("--out", required=True, help="the vectors file to write (text, word2vec header line)")
    q.add_argument(
        "--kind",
        default="joint",
        choices=["joint", "input"],
        help="joint: each word encoded as a one-word sentence (the joint space); input: the rows of the "
        "word-embedding tables (default: joint)",
    )


def _add_embed_wordsim(esub) -> None:
    """``rerank embed wordsim``: its parser and options."""
    q = esub.add_parser(
        "wordsim",
        help="word similarity: Spearman rho of vector cosines against a set's scores, with coverage",
        epilog="example: rerank embed wordsim --model models/mule --pairs simlex-english.tsv --lang en "
        "--pairs2 simlex-german.tsv --lang2 de",
    )
    q.add_argument("--model", help="a trained model directory (its words encoded as one-word sentences)")
    q.add_argument("--vectors", help="or a word vectors file (word v1 … vd, words prefixed LANG_)")
    q.add_argument(
        "--kind",
        default="joint",
        choices=["joint", "input"],
        help="with --model: joint (one-word sentences) or input (word-embedding rows) vectors (default: joint)",
    )
    q.add_argument("--pairs", required=True, help="word1<TAB>word2<TAB>score file (a header line is skipped)")
    q.add_argument("--lang", required=True, help="the language of --pairs' words, e.g. en")
    q.add_argument("--pairs2", help="a second set line-aligned with --pairs: adds it and the cross-lingual pairs")
    q.add_argument("--lang2", help="the language of --pairs2's words, e.g. de")
    q.add_argument("--json", action="store_true", help="print JSON instead of lines of text")
