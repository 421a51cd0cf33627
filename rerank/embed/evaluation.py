"""Evaluations of sentence–image embeddings (numpy only).

* :func:`image_sentence_ranking`: r@1, r@5, r@10 and median rank in both directions
  (Calixto & Liu 2017, Table 1; Kiros et al. 2014): *annotation* (image → sentence: the
  rank of the best-ranked correct sentence of each image) and *retrieval* (sentence →
  image: the rank of each sentence's image).
* :func:`sts_pearson`: Pearson r between 5 · cos(v1, v2) and the gold 0–5 scores
  (SemEval STS, paper Table 2).

Ranks are 1-based and count only strictly higher scores (ties rank optimistically).
"""

from __future__ import annotations

from typing import Dict

import numpy as np


def _summary(ranks: np.ndarray) -> Dict[str, float]:
    return {
        "r@1": 100.0 * float(np.mean(ranks <= 1)),
        "r@5": 100.0 * float(np.mean(ranks <= 5)),
        "r@10": 100.0 * float(np.mean(ranks <= 10)),
        "mrank": float(np.median(ranks)),
    }


def image_sentence_ranking(images: np.ndarray, sentences: np.ndarray, sentence_image: np.ndarray) -> Dict[str, Dict]:
    """Ranking metrics of unit image vectors against unit sentence vectors.

    Args:
        images: (I, D) image vectors.
        sentences: (S, D) sentence vectors.
        sentence_image: int (S,): the image (row of ``images``) each sentence describes;
            every image must have at least one sentence.
    Returns:
        {"image_to_sentence": {"r@1", "r@5", "r@10", "mrank"}, "sentence_to_image": {...}}
        with recalls in percent.
    Raises:
        ValueError: an image without sentences or an index out of range.
    """
    images = np.asarray(images, dtype=np.float64)
    sentences = np.asarray(sentences, dtype=np.float64)
    sentence_image = np.asarray(sentence_image, dtype=np.int64)
    n_img = len(images)
    if sentence_image.min() < 0 or sentence_image.max() >= n_img:
        raise ValueError("sentence_image holds an index outside the images")
    if len(np.unique(sentence_image)) != n_img:
        raise ValueError("every image needs at least one sentence")
    scores = sentences @ images.T  # (S, I)
    true = scores[np.arange(len(sentences)), sentence_image]
    retrieval = (scores > true[:, None]).sum(axis=1) + 1
    best_true = np.full(n_img, -np.inf)
    np.maximum.at(best_true, sentence_image, true)
    annotation = (scores > best_true[None, :]).sum(axis=0) + 1
    return {"image_to_sentence": _summary(annotation), "sentence_to_image": _summary(retrieval)}


def sts_pearson(v1: np.ndarray, v2: np.ndarray, gold: np.ndarray) -> float:
    """Pearson r between 5 · cos(v1_i, v2_i) and ``gold`` (shapes (N, D), (N, D), (N,))."""
    v1 = np.asarray(v1, dtype=np.float64)
    v2 = np.asarray(v2, dtype=np.float64)
    cos = (v1 * v2).sum(1) / (np.linalg.norm(v1, axis=1) * np.linalg.norm(v2, axis=1))
    return float(np.corrcoef(5.0 * cos, np.asarray(gold, dtype=np.float64))[0, 1])
