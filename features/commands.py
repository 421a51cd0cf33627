"""``rerank embed train|isr|sts``: train MLMME / VSE on Multi30k task 2 and evaluate it.

Data composition of ``train``: all task-2 training descriptions (text only: their image
features are not available here) plus, with ``--image-features``, the images of the
task-2 split ``--image-task2-split`` that have feature rows, with their descriptions; the
last ``--heldout-images`` of those images are held out for ``isr`` and never trained on
(their names are saved in ``heldout.json``), and the ``--valid-images`` before them
join the validation data.  ``--task1`` adds task 1's translated training pairs (same
images, one more description pair each).  Model selection uses the validation data:
image–sentence ranking on its images if it has any, else sentence–sentence ranking
between the languages on the task-2 validation split.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, List

import numpy as np

from rerank.errors import InputError, atomic_write

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


def cmd_embed(args) -> None:
    """Entry point of ``rerank embed``."""
    if args.embed_verb == "train":
        _train(args)
    elif args.embed_verb == "isr":
        _isr(args)
    else:
        _sts(args)


def _train(args) -> None:
    from features.data import align_images, load_image_features, merge_splits, read_task1, read_task2
    from features.mlmme import MLMMEConfig
    from features.train import PRESET_LR, EmbedTrainConfig, train_embeddings
    from nmt.data import resolve_data_dir

    args.data = resolve_data_dir(args.data, args.download_dir, task2=True, task1=args.task1)
    langs = args.langs.split(",")
    train_split = read_task2(args.data, "train", langs)
    if args.task1:
        train_split = merge_splits(train_split, read_task1(args.data, "train", langs))
    parts = [_split_data(train_split, langs)]
    valid_parts = [_split_data(read_task2(args.data, "val", langs), langs)]
    heldout: List[str] = []
    if args.image_features:
        if not args.image_split:
            raise InputError("--image-features needs --image-split")
        names, matrix = load_image_features(args.image_features, args.image_split)
        split = read_task2(args.data, args.image_task2_split, langs)
        feats, has = align_images(split.images, names, matrix)
        with_rows = np.flatnonzero(has)
        if args.heldout_images + args.valid_images >= len(with_rows):
            raise InputError(f"--heldout-images {args.heldout_images} and --valid-images {args.valid_images} "
                             f"leave no image to train on")
        cut = len(with_rows) - args.heldout_images
        start = cut - args.valid_images
        heldout = [split.images[i] for i in with_rows[cut:]]
        parts.append(_split_data(split, langs, with_rows[:start], feats, has))
        if args.valid_images:
            valid_parts = [_split_data(split, langs, with_rows[start:cut], feats, has)]
        print(f"images: {start} for training, {args.valid_images} for validation, {len(heldout)} held out "
              f"({args.image_task2_split})")
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
                              validate_every=args.validate_every, patience=args.patience, threads=args.threads)
    _, _, history = train_embeddings(train, valid, config, out_dir=args.out, progress=True)
    with atomic_write(os.path.join(args.out, "heldout.json")) as out:
        json.dump({"task2_split": args.image_task2_split, "images": heldout}, out, indent=2)
    for row in history:
        print(json.dumps(row))


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
