"""Evaluations of sentence–image embeddings (numpy only).

* :func:`image_sentence_ranking`: r@1, r@5, r@10 and median rank in both directions
  (Calixto & Liu 2017, Table 1; Kiros et al. 2014): *annotation* (image → sentence: the
  rank of the best-ranked correct sentence of each image) and *retrieval* (sentence →
  image: the rank of each sentence's image).
* :func:`sts_pearson`: Pearson r between 5 · cos(v1, v2) and the gold 0–5 scores
  (SemEval STS, paper Table 2).
* :func:`spearman` and :func:`word_similarity`: Spearman ρ of word-vector cosines
  against human similarity judgements (SimLex-999, WordSim-353), with coverage.

Ranks are 1-based and count only strictly higher scores (ties rank optimistically).
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np


def similarity_scores(images: np.ndarray, sentences: np.ndarray, similarity: str = "cosine", chunk: int = 64):
    """float64 (S, I): S(image_i, sentence_s) for every pair, the numpy twin of
    :func:`rerank.embed.model.pair_scores` (``order``: −‖max(0, v_s − d_i)‖², computed
    ``chunk`` sentences at a time so that memory stays O(chunk · I · D)).

    Raises:
        ValueError: an unknown similarity.
    """
    images = np.asarray(images, dtype=np.float64)
    sentences = np.asarray(sentences, dtype=np.float64)
    if similarity == "cosine":
        return sentences @ images.T
    if similarity != "order":
        raise ValueError(f"unknown similarity {similarity!r}")
    out = np.empty((len(sentences), len(images)))
    for s in range(0, len(sentences), chunk):
        part = sentences[s : s + chunk, None, :] - images[None, :, :]
        out[s : s + chunk] = -np.square(np.maximum(part, 0.0)).sum(-1)
    return out


def _summary(ranks: np.ndarray) -> Dict[str, float]:
    return {
        "r@1": 100.0 * float(np.mean(ranks <= 1)),
        "r@5": 100.0 * float(np.mean(ranks <= 5)),
        "r@10": 100.0 * float(np.mean(ranks <= 10)),
        "mrank": float(np.median(ranks)),
    }


def image_sentence_ranking(
    images: np.ndarray, sentences: np.ndarray, sentence_image: np.ndarray, similarity: str = "cosine"
) -> Dict[str, Dict]:
    """Ranking metrics of unit image vectors against unit sentence vectors.

    Args:
        images: (I, D) image vectors.
        sentences: (S, D) sentence vectors.
        sentence_image: int (S,): the image (row of ``images``) each sentence describes;
            every image must have at least one sentence.
        similarity: ``cosine`` or ``order`` (:func:`similarity_scores`).
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
    scores = similarity_scores(images, sentences, similarity)  # (S, I)
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


def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values`` (N,), ties sharing the mean of their ranks (as
    ``scipy.stats.rankdata(method='average')``)."""
    values = np.asarray(values, dtype=np.float64)
    order = np.argsort(values, kind="mergesort")
    sorted_values = values[order]
    starts = np.flatnonzero(np.r_[True, sorted_values[1:] != sorted_values[:-1]])
    ends = np.r_[starts[1:], len(values)]
    mean_rank = (starts + ends + 1) / 2.0  # ranks starts+1 .. ends, averaged
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(mean_rank, ends - starts)
    return ranks


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ: Pearson r of the average ranks of ``x`` and ``y`` (N,) each, N ≥ 2.

    Raises:
        ValueError: fewer than two pairs or different lengths.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"Spearman needs two equal-length samples of at least 2 values, got {len(x)} and {len(y)}")
    return float(np.corrcoef(average_ranks(x), average_ranks(y))[0, 1])


def word_similarity(vectors: Dict[str, np.ndarray], pairs: Sequence[Tuple[str, str, float]]) -> Dict[str, float]:
    """Spearman ρ between cos(vectors[a], vectors[b]) and the gold score of every pair
    (a, b, score) whose two words both have a vector; the others are left out and counted.

    Returns:
        {"spearman", "covered", "pairs", "coverage"} (coverage in percent; spearman NaN
        when fewer than two pairs are covered).
    """
    model, gold = [], []
    for a, b, score in pairs:
        if a in vectors and b in vectors:
            u, v = vectors[a], vectors[b]
            model.append(float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v) or 1.0)))
            gold.append(score)
    rho = spearman(np.asarray(model), np.asarray(gold)) if len(gold) >= 2 else float("nan")
    return {
        "spearman": rho,
        "covered": len(gold),
        "pairs": len(pairs),
        "coverage": 100.0 * len(gold) / len(pairs) if pairs else 0.0,
    }


def cross_lingual_pairs(
    first: Sequence[Tuple[str, str, float]], second: Sequence[Tuple[str, str, float]]
) -> List[Tuple[str, str, float]]:
    """Cross-lingual pairs from two line-aligned monolingual sets (Camacho-Collados et al.
    2015): for line i, (a₁, b₂) and (a₂, b₁), each scored with the mean of the two lines'
    scores.  Words keep whatever language prefix the callers gave them.

    Raises:
        ValueError: the two sets differ in length.
    """
    if len(first) != len(second):
        raise ValueError(f"the two sets are not line-aligned: {len(first)} and {len(second)} pairs")
    out = []
    for (a1, b1, s1), (a2, b2, s2) in zip(first, second):
        mean = (s1 + s2) / 2.0
        out += [(a1, b2, mean), (a2, b1, mean)]
    return out
