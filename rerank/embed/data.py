"""Data for the embedding models: Multi30k task 2 descriptions, vocabularies and CNN
image features aligned with image-split files.

Text goes through :func:`rerank.nmt.data.preprocess_lines`, the one text convention of the
project (Moses normalisation and tokenisation, lowercasing), so that n-best hypotheses
and training text share a vocabulary.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.nmt.data import preprocess_lines
from rerank.outputs import atomic_write
from rerank.textio import read_lines

PAD, UNK = 0, 1
#: task 2 has 5 independent descriptions per image and language
DESCRIPTIONS = 5


@dataclass
class EmbedData:
    """Sentences of several languages describing images.

    Attributes:
        sentences: lang -> N sentences (preprocessed text); row i of every language is example i.
        image_of: int64[N] image index of each example.
        image_features: float32 (I, D) CNN features, or None.
        has_image: bool (I,): images with real features (R_MM only uses these).
    """

    sentences: Dict[str, List[str]]
    image_of: np.ndarray
    image_features: Optional[np.ndarray] = None
    has_image: Optional[np.ndarray] = None


@dataclass
class Task2Split:
    """One split of Multi30k task 2.

    Attributes:
        images: image file names, one per image (rows of the split file).
        sentences: lang -> list of DESCRIPTIONS · len(images) preprocessed sentences;
            sentence ``k · len(images) + i`` is description k+1 of image i.
        image_of: int64[DESCRIPTIONS · len(images)]: the image of each sentence index.
    """

    images: List[str]
    sentences: Dict[str, List[str]]
    image_of: np.ndarray


def read_task2(data_dir: str, split: str, langs: Sequence[str] = ("en", "de")) -> Task2Split:
    """Read ``task2/raw/{split}.{1..5}.{lang}.gz`` and ``task2/image_splits/{split}_images.txt``.

    Raises:
        InputError: a missing file or a description file whose line count differs from
            the number of images (naming the file).
    """
    images = read_lines(os.path.join(data_dir, "task2", "image_splits", f"{split}_images.txt"))
    sentences: Dict[str, List[str]] = {}
    for lang in langs:
        out: List[str] = []
        for k in range(1, DESCRIPTIONS + 1):
            path = os.path.join(data_dir, "task2", "raw", f"{split}.{k}.{lang}.gz")
            lines = read_lines(path)
            if len(lines) != len(images):
                raise InputError(f"{len(lines)} descriptions but {len(images)} images in the split file", path)
            out.extend(preprocess_lines(lines, lang))
        sentences[lang] = out
    image_of = np.tile(np.arange(len(images), dtype=np.int64), DESCRIPTIONS)
    return Task2Split(images, sentences, image_of)


def read_task1(data_dir: str, split: str, langs: Sequence[str] = ("en", "de")) -> Task2Split:
    """Multi30k task 1 (translated pairs) in the shape of :class:`Task2Split` with one
    description per image: ``task1/raw/{split}.{lang}.gz`` and ``task1/image_splits/{split}.txt``.

    Raises:
        InputError: a missing file or a line count different from the split file's.
    """
    images = read_lines(os.path.join(data_dir, "task1", "image_splits", f"{split}.txt"))
    sentences = {}
    for lang in langs:
        path = os.path.join(data_dir, "task1", "raw", f"{split}.{lang}.gz")
        lines = read_lines(path)
        if len(lines) != len(images):
            raise InputError(f"{len(lines)} sentences but {len(images)} images in the split file", path)
        sentences[lang] = preprocess_lines(lines, lang)
    return Task2Split(images, sentences, np.arange(len(images), dtype=np.int64))


def merge_splits(a: Task2Split, b: Task2Split) -> Task2Split:
    """The descriptions of ``a`` and ``b`` over the same images (task 1 and task 2 train
    list the same 29,000 images in the same order).

    Raises:
        InputError: the two splits list different images or languages.
    """
    if a.images != b.images:
        raise InputError("the two splits list different images")
    if sorted(a.sentences) != sorted(b.sentences):
        raise InputError(f"languages differ: {sorted(a.sentences)} vs {sorted(b.sentences)}")
    return Task2Split(
        a.images,
        {lang: a.sentences[lang] + b.sentences[lang] for lang in a.sentences},
        np.concatenate([a.image_of, b.image_of]),
    )


class Vocabulary:
    """Word ↔ index map of one language; index 0 is padding, 1 the unknown word."""

    def __init__(self, words: Sequence[str]):
        self.words = ["<pad>", "<unk>"] + [w for w in words if w not in ("<pad>", "<unk>")]
        self.index = {w: i for i, w in enumerate(self.words)}

    @classmethod
    def build(cls, sentences: Iterable[str], min_count: int = 1, max_size: Optional[int] = None) -> "Vocabulary":
        """Words of ``sentences`` seen at least ``min_count`` times, most frequent first."""
        counts = Counter(w for s in sentences for w in s.split())
        words = [w for w, c in sorted(counts.items(), key=lambda x: (-x[1], x[0])) if c >= min_count]
        return cls(words[:max_size] if max_size else words)

    def __len__(self) -> int:
        return len(self.words)

    def encode(self, sentence: str) -> List[int]:
        """Indices of the words of ``sentence`` (UNK for unknown words); [UNK] if empty."""
        ids = [self.index.get(w, UNK) for w in sentence.split()]
        return ids or [UNK]

    def save(self, path: str) -> None:
        """Write the words (JSON list, the two reserved ids left out) to ``path``, atomically."""
        with atomic_write(path) as out:
            json.dump(self.words[2:], out, ensure_ascii=False)

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        """The vocabulary :meth:`save` wrote to ``path``."""
        with open(path, encoding="utf-8") as handle:
            return cls(json.load(handle))


def batch_tokens(vocab: Vocabulary, sentences: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 (B, T) token matrix and int64 (B,) lengths (≥ 1)."""
    encoded = [vocab.encode(s) for s in sentences]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    tokens = np.full((len(encoded), int(lengths.max()) if len(encoded) else 1), PAD, dtype=np.int64)
    for row, ids in enumerate(encoded):
        tokens[row, : len(ids)] = ids
    return tokens, lengths


def load_image_features(features_path: str, split_path: str) -> Tuple[List[str], np.ndarray]:
    """(image names, float32 (N, D) matrix) from a ``.npy`` / ``.npz`` matrix whose row i is
    line i of the image-split file.

    Raises:
        InputError: missing file, a matrix that is not 2-D, a row count different from
            the split file's line count, or non-finite values.
    """
    names = read_lines(split_path)
    try:
        data = np.load(features_path)
    except FileNotFoundError:
        raise InputError("no such file", features_path) from None
    if isinstance(data, np.lib.npyio.NpzFile):
        keys = list(data.keys())
        if len(keys) != 1:
            raise InputError(f"expected one array in the .npz, found {keys}", features_path)
        data = data[keys[0]]
    matrix = np.asarray(data, dtype=np.float32)
    if matrix.ndim != 2:
        raise InputError(f"expected a 2-D feature matrix, got shape {matrix.shape}", features_path)
    if len(matrix) != len(names):
        raise InputError(f"{len(matrix)} feature rows but {len(names)} images in {split_path}", features_path)
    if not np.isfinite(matrix).all():
        raise InputError("non-finite feature values", features_path)
    return names, matrix


def align_images(
    images: Sequence[str], names: Sequence[str], matrix: np.ndarray, require_all: bool = False
) -> Tuple[np.ndarray, np.ndarray]:
    """Feature rows for ``images`` by file name: float32 (len(images), D) and a bool mask
    of the images that have features (rows of the others are zero and must not be used).

    Raises:
        InputError: ``require_all`` and some image has no feature row.
    """
    where = {name: row for row, name in enumerate(names)}
    rows = np.array([where.get(name, -1) for name in images], dtype=np.int64)
    has = rows >= 0
    if require_all and not has.all():
        missing = [images[i] for i in np.flatnonzero(~has)[:3]]
        raise InputError(f"{int((~has).sum())} images have no feature row, e.g. {missing}")
    out = np.zeros((len(images), matrix.shape[1]), dtype=np.float32)
    out[has] = matrix[rows[has]]
    return out, has


def concat_data(parts: List[EmbedData], langs: Sequence[str]) -> EmbedData:
    """One :class:`EmbedData` of ``parts`` (images renumbered; zero features and
    ``has_image`` False for the images of parts without features)."""
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
    return EmbedData(
        sentences,
        np.concatenate(image_of),
        np.concatenate(feats) if dim else None,
        np.concatenate(has) if dim else None,
    )


def split_data(split: Task2Split, langs: Sequence[str], rows=None, features=None, has=None) -> EmbedData:
    """:class:`EmbedData` of a task-2 split, optionally restricted to the images ``rows``
    (int[R]) with their ``features`` float (I, D) and ``has`` bool (I,) rows."""
    n = len(split.images)
    rows = np.arange(n) if rows is None else np.asarray(rows)
    remap = np.full(n, -1)
    remap[rows] = np.arange(len(rows))
    keep = remap[split.image_of] >= 0
    sentences = {lang: [s for s, k in zip(split.sentences[lang], keep) if k] for lang in langs}
    return EmbedData(
        sentences,
        remap[split.image_of[keep]],
        None if features is None else features[rows],
        None if has is None else has[rows],
    )


@dataclass
class EmbedDataConfig:
    """What an embedding model trains and selects on (``rerank embed train``'s data options).

    Attributes:
        data_dir: Multi30k directory (``task2/raw``, ``task2/image_splits``, ``task1``).
        langs: the languages of the model.
        task1: add task 1's translated training pairs.
        image_features, image_split: a CNN feature matrix and its image names (or None).
        image_task2_split: a further task-2 split whose featured images join training,
            minus the held-out ones (``none``: only train/val images, the paper's protocol).
        heldout_images: the last N featured images of that split kept for ISR.
        folds, fold: hold out the images of fold ``fold`` of a folds file instead (cross-fitting).
        valid_images: N featured images before the held-out ones for model selection.
    """

    data_dir: str
    langs: Sequence[str] = ("en", "de")
    task1: bool = False
    image_features: Optional[str] = None
    image_split: Optional[str] = None
    image_task2_split: str = "test_2016"
    heldout_images: int = 200
    folds: Optional[str] = None
    fold: Optional[int] = None
    valid_images: int = 0


def training_data(config: EmbedDataConfig, say=print) -> Tuple[EmbedData, EmbedData, List[str]]:
    """(training data, validation data, held-out image names) of an embedding model
    (the data composition of ``rerank embed train``; ``say`` reports the image counts).

    Raises:
        InputError: image options that do not fit together, unreadable files.
    """
    langs = list(config.langs)
    train_split = read_task2(config.data_dir, "train", langs)
    if config.task1:
        train_split = merge_splits(train_split, read_task1(config.data_dir, "train", langs))
    parts = [split_data(train_split, langs)]
    val_split = read_task2(config.data_dir, "val", langs)
    valid_parts = [split_data(val_split, langs)]
    heldout: List[str] = []
    if config.image_features:
        if not config.image_split:
            raise InputError("--image-features needs --image-split")
        names, matrix = load_image_features(config.image_features, config.image_split)
        # the paper's protocol: every training or validation image with a feature row gets it
        feats, has = align_images(train_split.images, names, matrix)
        if has.any():
            parts = [split_data(train_split, langs, None, feats, has)]
            say(f"images: {int(has.sum())} training images with features (train)")
        feats, has = align_images(val_split.images, names, matrix)
        if has.any():
            valid_parts = [split_data(val_split, langs, None, feats, has)]
            say(f"images: {int(has.sum())} validation images with features (val)")
        if config.image_task2_split != "none":
            heldout = _extra_images(config, names, matrix, parts, valid_parts, say)
    elif config.folds:
        raise InputError("--folds needs --image-features")
    return concat_data(parts, langs), concat_data(valid_parts, langs), heldout


def _extra_images(config: EmbedDataConfig, names, matrix, parts, valid_parts, say) -> List[str]:
    """Add the featured images of ``image_task2_split`` to ``parts``, except the held-out
    ones (fold ``fold`` of ``folds``, or else the last ``heldout_images``); the last
    ``valid_images`` of the rest replace ``valid_parts``.  Returns the held-out names."""
    langs = list(config.langs)
    if config.image_task2_split in ("train", "val"):
        raise InputError(
            f"--image-task2-split {config.image_task2_split}: training and validation images get their "
            "features from --image-features directly; name a third split or none"
        )
    split = read_task2(config.data_dir, config.image_task2_split, langs)
    feats, has = align_images(split.images, names, matrix)
    with_rows = np.flatnonzero(has)
    if config.folds:
        if config.fold is None:
            raise InputError("--folds needs --fold K (the fold to hold out)")
        folds = read_folds(config.folds)
        of_image = folds.image_fold()
        unknown = [split.images[i] for i in with_rows if split.images[i] not in of_image]
        if unknown:
            raise InputError(f"{len(unknown)} featured images are in no fold, e.g. {unknown[0]}", config.folds)
        if not 0 <= config.fold < folds.k:
            raise InputError(f"--fold {config.fold}: the folds file has folds 0..{folds.k - 1}", config.folds)
        held_mask = np.array([of_image[split.images[i]] == config.fold for i in with_rows], dtype=bool)
        held, rest = with_rows[held_mask], with_rows[~held_mask]
        what = f"fold {config.fold} of {folds.k} held out"
    else:
        if config.fold is not None:
            raise InputError("--fold needs --folds")
        cut = len(with_rows) - config.heldout_images
        held, rest = with_rows[cut:], with_rows[:cut]
        what = f"{len(held)} held out"
    if config.valid_images >= len(rest):
        raise InputError(
            f"--valid-images {config.valid_images} and {len(held)} held-out images leave no image to train on"
        )
    start = len(rest) - config.valid_images
    parts.append(split_data(split, langs, rest[:start], feats, has))
    if config.valid_images:
        valid_parts[:] = [split_data(split, langs, rest[start:], feats, has)]
    say(f"images: {start} for training, {config.valid_images} for validation, {what} ({config.image_task2_split})")
    return [split.images[i] for i in held]
