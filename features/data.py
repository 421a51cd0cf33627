"""Data for the embedding models: Multi30k task 2 descriptions, vocabularies and CNN
image features aligned with image-split files.

Text goes through :func:`nmt.data.preprocess_lines`, the one text convention of the
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
from rerank.outputs import atomic_write
from rerank.textio import read_lines

PAD, UNK = 0, 1
#: task 2 has 5 independent descriptions per image and language
DESCRIPTIONS = 5


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
    from nmt.data import preprocess_lines

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
    from nmt.data import preprocess_lines

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
    return Task2Split(a.images, {lang: a.sentences[lang] + b.sentences[lang] for lang in a.sentences},
                      np.concatenate([a.image_of, b.image_of]))


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
        with atomic_write(path) as out:
            json.dump(self.words[2:], out, ensure_ascii=False)

    @classmethod
    def load(cls, path: str) -> "Vocabulary":
        with open(path, encoding="utf-8") as handle:
            return cls(json.load(handle))


def batch_tokens(vocab: Vocabulary, sentences: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """Right-padded int64 (B, T) token matrix and int64 (B,) lengths (≥ 1)."""
    encoded = [vocab.encode(s) for s in sentences]
    lengths = np.array([len(e) for e in encoded], dtype=np.int64)
    tokens = np.full((len(encoded), int(lengths.max()) if len(encoded) else 1), PAD, dtype=np.int64)
    for row, ids in enumerate(encoded):
        tokens[row, :len(ids)] = ids
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


def align_images(images: Sequence[str], names: Sequence[str], matrix: np.ndarray,
                 require_all: bool = False) -> Tuple[np.ndarray, np.ndarray]:
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
