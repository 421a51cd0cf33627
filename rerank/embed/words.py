"""Word vectors of the embedding models and their word-similarity evaluation (numpy only).

* :func:`read_vectors` / :func:`write_vectors`: the usual text format, one ``word v1 … vd``
  per line (an optional word2vec header line ``COUNT DIM``), words language-prefixed
  (``en_dog``, ``de_hund``) so that one file holds every language.
* :func:`read_pairs`: a word-similarity set, ``word1<TAB>word2<TAB>score`` per line with an
  optional header line (SimLex-999, WordSim-353 as in ``../shared/data/wordsim``).
* :func:`word_key`: the key of a word of a set in a vectors file: the project's text
  convention (Moses normalisation and tokenisation, lowercasing,
  :func:`rerank.nmt.data.preprocess_lines`), prefixed by its language; a word that
  tokenises into several tokens has no key (it is counted as not covered).

The vectors of a trained model (:func:`rerank.embed.train.word_vectors`) are its sentence
encoder applied to each vocabulary word as a one-word sentence: the joint space of the
model, whatever its encoder (for the bag-of-words ImageVec encoder this is exactly the
projected word embedding).
"""

from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.nmt.data import preprocess_lines
from rerank.outputs import atomic_write
from rerank.textio import read_lines


def read_vectors(path: str) -> Dict[str, np.ndarray]:
    """word -> float32 (D,) from a text vectors file.

    Raises:
        InputError: an unreadable file, a row whose length differs from the first row's
            (ragged), a value that is not a finite number, a word seen twice, or no rows —
            naming the file and line.
    """
    vectors: Dict[str, np.ndarray] = {}
    dim: Optional[int] = None
    for lineno, line in enumerate(read_lines(path), start=1):
        parts = line.split()
        if not parts:
            raise InputError("empty line (expected: word v1 … vd)", path, lineno)
        if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
            continue  # word2vec header: COUNT DIM
        word, values = parts[0], parts[1:]
        if dim is None:
            if not values:
                raise InputError(f"the word {word!r} has no values", path, lineno)
            dim = len(values)
        elif len(values) != dim:
            raise InputError(
                f"{len(values)} values for {word!r} but {dim} on the first row (ragged rows)", path, lineno
            )
        try:
            vector = np.array([float(v) for v in values], dtype=np.float32)
        except ValueError:
            raise InputError(f"a value of {word!r} is not a number", path, lineno) from None
        if not np.isfinite(vector).all():
            raise InputError(f"a value of {word!r} is not finite", path, lineno)
        if word in vectors:
            raise InputError(f"the word {word!r} has a second row", path, lineno)
        vectors[word] = vector
    if not vectors:
        raise InputError("no word vectors", path)
    return vectors


def write_vectors(path: str, vectors: Dict[str, np.ndarray]) -> None:
    """Write ``vectors`` (word -> (D,)) in the text format with a word2vec header line,
    values with 6 significant digits; the file appears whole or not at all."""
    dim = len(next(iter(vectors.values()))) if vectors else 0
    with atomic_write(path) as out:
        out.write(f"{len(vectors)} {dim}\n")
        for word, vector in vectors.items():
            out.write(word + " " + " ".join(f"{v:.6g}" for v in vector) + "\n")


def read_pairs(path: str) -> List[Tuple[str, str, float]]:
    """(word1, word2, score) rows of a tab-separated similarity set; a first line whose
    score is not a number is a header.

    Raises:
        InputError: a row without three tab-separated fields, a score that is not a
            finite number (after the first line), or no pairs — naming file and line.
    """
    pairs = []
    for lineno, line in enumerate(read_lines(path), start=1):
        fields = line.rstrip("\r").split("\t")
        if len(fields) != 3:
            raise InputError(f"expected word1<TAB>word2<TAB>score, found {len(fields)} field(s)", path, lineno)
        try:
            score = float(fields[2])
        except ValueError:
            if lineno == 1:
                continue  # header
            raise InputError(f"the score {fields[2]!r} is not a number", path, lineno) from None
        if not math.isfinite(score):
            raise InputError(f"the score {fields[2]!r} is not finite", path, lineno)
        pairs.append((fields[0], fields[1], score))
    if not pairs:
        raise InputError("no word pairs (expected word1<TAB>word2<TAB>score lines)", path)
    return pairs


def word_key(words: Sequence[str], lang: str) -> List[Optional[str]]:
    """The vectors-file key of each word (module docstring): ``LANG_token``, or None
    where the word is several tokens."""
    out: List[Optional[str]] = []
    for tokens in preprocess_lines(list(words), lang):
        parts = tokens.split()
        out.append(f"{lang}_{parts[0]}" if len(parts) == 1 else None)
    return out


def keyed_pairs(pairs: Sequence[Tuple[str, str, float]], lang_a: str, lang_b: str) -> List[Tuple[str, str, float]]:
    """``pairs`` with each word replaced by its key (:func:`word_key`) in ``lang_a`` (first
    word) and ``lang_b`` (second); a word without a key becomes "" (never covered)."""
    first = word_key([a for a, _, _ in pairs], lang_a)
    second = word_key([b for _, b, _ in pairs], lang_b)
    return [(a or "", b or "", s) for a, b, (_, _, s) in zip(first, second, pairs)]
