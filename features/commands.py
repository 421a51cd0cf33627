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
import sys
import time
from typing import TYPE_CHECKING, List

import numpy as np

from features.config import EmbedTrainConfig, MLMMEConfig
from rerank.cliutil import closed_unit_interval, non_negative_int, positive_float, positive_int
from rerank.errors import InputError
from rerank.outputs import StagedOutputs, atomic_write
from rerank.signature import read_sidecar, write_signed

if TYPE_CHECKING:
    from features.train import EmbedData


def _concat(parts: List["EmbedData"], langs) -> "EmbedData":
    from features.train import EmbedData

    sentences = {lang: [s for p in parts for s in p.sentences[lang]] for lang in langs}
    offset, image_of, feats, has = 0, [], [], []
    dim = next((p.image_features.shape[1] for p in parts if p.image_features is not None), None)
    for p in parts:
        n_img = int(p.image_of.max()) + 1 if len(p.image_of) else 0
        image_of.append(p.image_of + offset)
        if dim is not None:
            feats.append(p.image_features if p.image_features is not None else np.zeros((n_img, dim), np.float32))
            has.append(p.has_image if p.has_image is not None else np.zeros(n_img, dtype=bool))
        offset += n_img
    return EmbedData(sentences, np.concatenate(image_of), np.concatenate(feats) if dim else None,
                     np.concatenate(has) if dim else None)


def _split_data(split, langs, rows=None, features=None, has=None) -> "EmbedData":
    """EmbedData of a task-2 split, optionally restricted to the images ``rows``."""
    from features.train import EmbedData

    n = len(split.images)
    rows = np.arange(n) if rows is None else np.asarray(rows)
    remap = np.full(n, -1)
    remap[rows] = np.arange(len(rows))
    keep = remap[split.image_of] >= 0
    sentences = {lang: [s for s, k in zip(split.sentences[lang], keep) if k] for lang in langs}
    return EmbedData(sentences, remap[split.image_of[keep]], None if features is None else features[rows],
                     None if has is None else has[rows])


def cmd_features(args) -> None:
    if args.features_verb == "extract":
        return _features_extract(args)
    return _features_add(args)


def _features_add(args) -> None:
    """Stream the list block by block (:func:`rerank.nbest.iter_nbest`): every scorer is
    per segment, so memory is bounded by a block (and the models), not by the list."""
    from tqdm import tqdm

    from rerank.nbest import NBestWriter, iter_nbest
    from rerank.textio import read_lines

    sources = read_lines(args.source) if args.source else None
    images = None
    if args.images:
        from features.data import align_images, load_image_features

        if not (args.image_split and args.segment_images):
            raise InputError("--images needs --image-split (rows of the matrix) and --segment-images (one per segment)")
        names, matrix = load_image_features(args.images, args.image_split)
        images, _ = align_images(read_lines(args.segment_images), names, matrix, require_all=True)
    folds = None
    if args.folds:
        from rerank.folds import read_folds

        folds = read_folds(args.folds)
    for spec in args.scorer:
        if "{fold}" in spec and folds is None:
            raise InputError(f"--scorer {spec}: {{fold}} needs --folds")
    if folds is not None and not any("{fold}" in spec for spec in args.scorer):
        raise InputError("--folds given but no --scorer has {fold} in its argument")
    per_segment = [(option, values) for option, values in (("--source", sources), ("--segment-images", images),
                                                           ("--folds", None if folds is None else folds.fold))
                   if values is not None]
    scorers = _Scorers()
    start = time.perf_counter()
    timings = {spec: 0.0 for spec in args.scorer}
    segments, hypotheses, names = 0, 0, []
    bar = tqdm(unit=" hyp", desc="features add", disable=not sys.stderr.isatty(), leave=False)
    with StagedOutputs() as outputs:  # the list and its signature appear together
        with outputs.open(args.out) as out:
            writer = NBestWriter(out)
            for first, block in iter_nbest(args.nbest):
                last = first + block.num_segments
                for option, values in per_segment:
                    if last > len(values):
                        raise InputError(f"{len(values)} lines but the n-best list has more segments", getattr(
                            args, option[2:].replace("-", "_")))
                part_sources = None if sources is None else sources[first:last]
                part_images = None if images is None else images[first:last]
                for spec in args.scorer:
                    began = time.perf_counter()
                    progress = first == 0  # the scorers' own bars for the first block only
                    columns = (scorers.by_fold(spec, block, part_sources, part_images, folds.fold[first:last],
                                               folds.k, progress) if "{fold}" in spec
                               else scorers.get(spec, progress).score(block, part_sources, part_images))
                    for name, values in columns.items():
                        if name in block.feature_names:
                            raise InputError(f"feature {name!r} is already in the n-best list", args.nbest)
                        block = block.add_feature(name, values)
                    timings[spec] += time.perf_counter() - began
                writer.write(block, first)
                segments, hypotheses, names = last, hypotheses + len(block.hypotheses), block.feature_names
                bar.update(len(block.hypotheses))
        bar.close()
        for option, values in per_segment:
            if len(values) != segments:
                raise InputError(f"{len(values)} lines but {segments} segments in the n-best list",
                                 getattr(args, option[2:].replace("-", "_")))
        seconds = time.perf_counter() - start
        for spec, took in timings.items():
            print(f"{spec}: {hypotheses} hypotheses in {took:.1f} s ({hypotheses / max(took, 1e-9):.0f}/s, "
                  "loading included)", file=sys.stderr)
        write_signed(outputs.stage(args.out + ".json"),  # signature beside the list, as nmt nbest writes
                     {"input": args.nbest, "beam_feature": read_sidecar(args.nbest).get("beam_feature"),
                      "scorers": args.scorer, "source": args.source, "images": args.images, "folds": args.folds,
                      "features": names, "hypotheses": hypotheses,
                      "seconds": round(seconds, 3), "scorer_seconds": {k: round(v, 3) for k, v in timings.items()}},
                     ["torch", "numpy"])
    print(f"{hypotheses} hypotheses scored in {seconds:.1f} s "
          f"({hypotheses / max(seconds, 1e-9):.0f}/s); features: {' '.join(names)}", file=sys.stderr)


class _Scorers:
    """Each scorer built once (loading a model is the expensive part), on first use."""

    def __init__(self):
        self._built: dict = {}

    def get(self, spec: str, progress: bool):
        from features.scorer import make_scorer

        if spec not in self._built:
            self._built[spec] = make_scorer(spec)
        scorer = self._built[spec]
        scorer.progress = progress
        return scorer

    def by_fold(self, spec: str, nbest, sources, images, fold: np.ndarray, k: int, progress: bool) -> dict:
        """Cross-fitted scoring (rerank/folds.py): the segments of fold k (``fold``: int[N],
        the fold of each of ``nbest``'s segments) are scored by the scorer of ``spec`` with
        ``{fold}`` replaced by k (e.g. the embedding model trained without fold k's images);
        returns the columns over the whole list."""
        columns: dict = {}
        for f in range(k):
            held = np.flatnonzero(fold == f)
            if not len(held):
                continue
            rows = nbest.rows_of(held)
            part = self.get(spec.replace("{fold}", str(f)), progress).score(
                nbest.subset(held), None if sources is None else [sources[s] for s in held],
                None if images is None else images[held])
            for name, values in part.items():
                values = np.asarray(values, dtype=np.float64)
                if name not in columns:
                    columns[name] = np.zeros((len(nbest.hypotheses),) + values.shape[1:])
                columns[name][rows] = values
        return columns


def _features_extract(args) -> None:
    from features.cnn import extract_split, load_backbone
    from rerank.signature import write_signed

    if not args.out.endswith(".npy"):
        raise InputError("--out must end in .npy", args.out)
    backbone = load_backbone(args.cnn)
    names, matrix = extract_split(args.images_dir, args.image_split, backbone, args.batch_size, progress=True)
    with atomic_write(args.out, "wb", encoding=None) as out:
        np.save(out, matrix.astype(args.dtype))
    write_signed(args.out[:-4] + ".json", {"cnn": args.cnn, "dim": backbone.dim, "rows": len(names),
                                           "image_split": args.image_split, "dtype": args.dtype},
                 ["torch", "numpy", "pillow"])
    print(f"{len(names)} images -> {args.out} ({matrix.shape[1]}-d {args.cnn})", file=sys.stderr)


def cmd_embed(args) -> None:
    """Entry point of ``rerank embed``."""
    if args.embed_verb == "train":
        _train(args)
    elif args.embed_verb == "isr":
        _isr(args)
    else:
        _sts(args)


def _train(args) -> None:
    from features.config import PRESET_LR
    from features.data import align_images, load_image_features, merge_splits, read_task1, read_task2
    from features.mlmme import MLMMEConfig
    from features.train import train_embeddings
    from nmt.data import resolve_data_dir

    args.data = resolve_data_dir(args.data, args.download_dir, task2=True, task1=args.task1)
    langs = args.langs.split(",")
    train_split = read_task2(args.data, "train", langs)
    if args.task1:
        train_split = merge_splits(train_split, read_task1(args.data, "train", langs))
    parts = [_split_data(train_split, langs)]
    val_split = read_task2(args.data, "val", langs)
    valid_parts = [_split_data(val_split, langs)]
    heldout: List[str] = []
    if args.image_features:
        if not args.image_split:
            raise InputError("--image-features needs --image-split")
        names, matrix = load_image_features(args.image_features, args.image_split)
        # the paper's protocol: every training or validation image with a feature row gets it
        feats, has = align_images(train_split.images, names, matrix)
        if has.any():
            parts = [_split_data(train_split, langs, None, feats, has)]
            print(f"images: {int(has.sum())} training images with features (train)")
        feats, has = align_images(val_split.images, names, matrix)
        if has.any():
            valid_parts = [_split_data(val_split, langs, None, feats, has)]
            print(f"images: {int(has.sum())} validation images with features (val)")
        if args.image_task2_split != "none":
            heldout = _extra_images(args, langs, names, matrix, parts, valid_parts)
    elif args.folds:
        raise InputError("--folds needs --image-features")
    train = _concat(parts, langs)
    valid = _concat(valid_parts, langs)
    try:
        extra = {"init": args.init} if args.init else {}
        model_config = MLMMEConfig.from_preset(args.preset, langs=langs, beta=args.beta, margin=args.margin, **extra)
    except ValueError as error:
        raise InputError(str(error)) from None
    config = EmbedTrainConfig(model=model_config, epochs=args.epochs, batch_size=args.batch_size,
                              lr=args.lr if args.lr is not None else PRESET_LR[args.preset],
                              seed=args.seed, contrastive=args.contrastive, image_rows=args.image_rows,
                              validate_every=args.validate_every, patience=args.patience, threads=args.threads,
                              max_steps=args.max_steps, init_model=args.init_model or "")
    _, _, history = train_embeddings(train, valid, config, out_dir=args.out, progress=True)
    with atomic_write(os.path.join(args.out, "heldout.json")) as out:
        json.dump({"task2_split": args.image_task2_split, "images": heldout}, out, indent=2)
    for row in history:
        print(json.dumps(row))


def _extra_images(args, langs, names, matrix, parts, valid_parts) -> List[str]:
    """Add the featured images of ``--image-task2-split`` (test_2016 here) to ``parts``,
    except the held-out ones: fold ``--fold`` of ``--folds`` (cross-fitting) or else the
    last ``--heldout-images``; the last ``--valid-images`` of the rest replace
    ``valid_parts``.  Returns the held-out image names (``heldout.json``, for ``isr``)."""
    from features.data import align_images, read_task2

    if args.image_task2_split in ("train", "val"):
        raise InputError(f"--image-task2-split {args.image_task2_split}: training and validation images get their "
                         "features from --image-features directly; name a third split or none")
    split = read_task2(args.data, args.image_task2_split, langs)
    feats, has = align_images(split.images, names, matrix)
    with_rows = np.flatnonzero(has)
    if args.folds:
        from rerank.folds import read_folds

        if args.fold is None:
            raise InputError("--folds needs --fold K (the fold to hold out)")
        folds = read_folds(args.folds)
        of_image = folds.image_fold()
        unknown = [split.images[i] for i in with_rows if split.images[i] not in of_image]
        if unknown:
            raise InputError(f"{len(unknown)} featured images are in no fold, e.g. {unknown[0]}", args.folds)
        if not 0 <= args.fold < folds.k:
            raise InputError(f"--fold {args.fold}: the folds file has folds 0..{folds.k - 1}", args.folds)
        held_mask = np.array([of_image[split.images[i]] == args.fold for i in with_rows], dtype=bool)
        held, rest = with_rows[held_mask], with_rows[~held_mask]
        what = f"fold {args.fold} of {folds.k} held out"
    else:
        if args.fold is not None:
            raise InputError("--fold needs --folds")
        cut = len(with_rows) - args.heldout_images
        held, rest = with_rows[cut:], with_rows[:cut]
        what = f"{len(held)} held out"
    if args.valid_images >= len(rest):
        raise InputError(f"--valid-images {args.valid_images} and {len(held)} held-out images leave no image "
                         "to train on")
    start = len(rest) - args.valid_images
    parts.append(_split_data(split, langs, rest[:start], feats, has))
    if args.valid_images:
        valid_parts[:] = [_split_data(split, langs, rest[start:], feats, has)]
    print(f"images: {start} for training, {args.valid_images} for validation, {what} ({args.image_task2_split})")
    return [split.images[i] for i in held]


def _isr(args) -> None:
    from features.data import align_images, load_image_features, read_task2
    from features.evaluation import image_sentence_ranking
    from features.mlmme_scorer import load_model
    from features.train import encode_images, encode_sentences

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
    data = _split_data(split, [lang], rows)
    result = image_sentence_ranking(encode_images(model, feats),
                                    encode_sentences(model, vocabs[lang], lang, data.sentences[lang]), data.image_of)
    result = {"images": len(rows), "sentences": len(data.image_of), "lang": lang, **result}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"ISR on {len(rows)} held-out real images, {len(data.image_of)} {lang} descriptions")
        for direction in ("image_to_sentence", "sentence_to_image"):
            r = result[direction]
            print(f"{direction:18s} r@1 {r['r@1']:5.1f}  r@5 {r['r@5']:5.1f}  r@10 {r['r@10']:5.1f}  mrank {r['mrank']:g}")


def _sts(args) -> None:
    from features.evaluation import sts_pearson
    from features.mlmme_scorer import load_model
    from features.train import encode_sentences
    from nmt.data import preprocess_lines

    model, vocabs = load_model(args.model)
    lang = args.lang
    if lang not in vocabs:
        raise InputError(f"the model has no {lang!r} encoder", args.model)
    gold, first, second = [], [], []
    with open(args.data, encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, start=1):
            parts = line.rstrip("\n").split("\t")
            if len(parts) != 3:
                raise InputError(f"expected score<TAB>sentence<TAB>sentence, found {len(parts)} fields", args.data,
                                 lineno)
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
    """Add ``embed`` and ``features`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("embed", help="MLMME / VSE sentence-image embeddings: train, isr, sts")
    esub = p.add_subparsers(dest="embed_verb", required=True)
    q = esub.add_parser("train", help="train on Multi30k task 2 (VSE: --langs de --beta 1)")
    q.add_argument("--data", help="Multi30k directory (task2/raw, task2/image_splits); default: "
                                  "../shared/data/multi30k if present, else downloaded into --download-dir")
    q.add_argument("--download-dir", default="multi30k-download", help="where a download goes")
    q.add_argument("--preset", default=MLMMEConfig.preset, help="cpu | paper")
    q.add_argument("--beta", type=closed_unit_interval, default=MLMMEConfig.beta)
    q.add_argument("--margin", type=positive_float, default=MLMMEConfig.margin)
    q.add_argument("--langs", default=",".join(MLMMEConfig().langs))
    q.add_argument("--image-features", help="CNN feature matrix (.npy/.npz)")
    q.add_argument("--image-split", help="image names, one per row of --image-features")
    q.add_argument("--image-task2-split", default="test_2016",
                   help="a further task-2 split whose featured images join training, minus the held-out ones "
                        "(none: only train/val images, the paper's protocol)")
    q.add_argument("--heldout-images", type=non_negative_int, default=200,
                   help="last N featured images of that split kept for isr")
    q.add_argument("--folds", help="folds file (rerank folds): hold out the images of --fold instead (cross-fitting)")
    q.add_argument("--fold", type=non_negative_int, help="the fold whose images are held out")
    q.add_argument("--init-model", help="warm start from this trained model (vocabularies, sizes, matching weights)")
    q.add_argument("--max-steps", type=non_negative_int, default=EmbedTrainConfig.max_steps,
                   help="stop after N batches (0: no limit)")
    q.add_argument("--valid-images", type=non_negative_int, default=0,
                   help="N featured images before the held-out ones used for model selection")
    q.add_argument("--task1", action="store_true", help="add task 1's translated training pairs")
    q.add_argument("--init", help="paper (N(0,0.01), orthogonal) | default (PyTorch); default: the preset's")
    q.add_argument("--contrastive", default=EmbedTrainConfig.contrastive, choices=["batch", "random"],
                   help="contrastive terms: the other batch rows, or a random sample per batch (the paper)")
    q.add_argument("--image-rows", type=non_negative_int, default=EmbedTrainConfig.image_rows, help="image-bearing rows guaranteed per batch")
    q.add_argument("--epochs", type=positive_int, default=EmbedTrainConfig.epochs)
    q.add_argument("--validate-every", type=non_negative_int, default=EmbedTrainConfig.validate_every, help="also validate every N batches")
    q.add_argument("--patience", type=positive_int, default=EmbedTrainConfig.patience, help="validations without improvement before stopping")
    q.add_argument("--batch-size", type=positive_int, default=EmbedTrainConfig.batch_size)
    q.add_argument("--lr", type=float, help="Adam learning rate (default: the preset's, cpu 2e-3, paper 2e-4)")
    q.add_argument("--threads", type=non_negative_int, default=EmbedTrainConfig.threads,
                   help="torch CPU threads (0: torch's default)")
    q.add_argument("--seed", type=int, default=EmbedTrainConfig.seed)
    q.add_argument("--out", required=True)
    q = esub.add_parser("isr", help="image-sentence ranking on the model's held-out real images")
    q.add_argument("--model", required=True)
    q.add_argument("--data", required=True)
    q.add_argument("--image-features", required=True)
    q.add_argument("--image-split", required=True)
    q.add_argument("--lang", help="description language (default: the model's last)")
    q.add_argument("--json", action="store_true")
    q = esub.add_parser("sts", help="STS Pearson r of 5 · cosine against gold")
    q.add_argument("--model", required=True)
    q.add_argument("--data", required=True, help="score<TAB>sentence<TAB>sentence file")
    q.add_argument("--lang", default="en")
    q.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_embed)

    p = sub.add_parser("features", help="add feature columns to an n-best list")
    fsub = p.add_subparsers(dest="features_verb", required=True)
    q = fsub.add_parser("add", help="append the columns of one or more scorers (existing ones untouched)")
    q.add_argument("--nbest", required=True)
    q.add_argument("--scorer", required=True, action="append", help="NAME:ARG, e.g. mlmme:MODEL_DIR; repeatable")
    q.add_argument("--source", help="source sentences, one per segment (preprocessed as the n-best text)")
    q.add_argument("--images", help="CNN feature matrix (.npy/.npz), rows = lines of --image-split")
    q.add_argument("--image-split", help="image file names, one per row of --images")
    q.add_argument("--segment-images", help="image file name of each segment")
    q.add_argument("--folds", help="folds file (rerank folds): fold k's segments are scored by the --scorer whose "
                                   "argument has {fold} replaced by k (cross-fitting)")
    q.add_argument("--out", required=True)
    q.set_defaults(paths=lambda a: ({"--nbest": a.nbest, "--source": a.source, "--images": a.images,
                                     "--image-split": a.image_split, "--segment-images": a.segment_images,
                                     "--folds": a.folds}, {"--out": a.out, "--out (signature)": a.out + ".json"}))
    q = fsub.add_parser("extract", help="CNN features of the images of an image-split file (.npy, row i = line i)")
    q.add_argument("--images-dir", required=True, help="directory holding the image files")
    q.add_argument("--image-split", required=True, help="image file names, one per line")
    q.add_argument("--cnn", default="resnet50", help="resnet50 | resnet152 | vgg19 | efficientnet-lite0")
    q.add_argument("--batch-size", type=int, default=16)
    q.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    q.add_argument("--out", required=True, help="FEATS.npy (a FEATS.json signature is written beside it)")
    q.set_defaults(paths=lambda a: ({"--image-split": a.image_split},
                                    {"--out": a.out, "--out (signature)": a.out[:-4] + ".json"}))
    p.set_defaults(func=cmd_features)

