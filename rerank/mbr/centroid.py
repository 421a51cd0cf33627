"""Centroid MBR (Deguchi et al. 2024, "Centroid-Based Efficient Minimum Bayes Risk Decoding"):
the pseudo-references of a segment clustered by weighted k-means on their n-gram counts
(BLEU, chrF) or their COMET sentence embeddings (regression models; mbrs' ``centroid_mbr``),
each centroid its cluster's aggregate reference (Vamvas & Sennrich 2024), weighted by the
cluster's mass."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

import numpy as np

from rerank.argtypes import positive_int
from rerank.config import option
from rerank.errors import InputError
from rerank.mbr.aggregate import against_aggregates
from rerank.mbr.decoders import DECODERS, Decoder
from rerank.mbr.ngrams import NgramCounts
from rerank.mbr.pairs import PairUtilities, bounds, same_segments
from rerank.nbest import NBestList


def cluster(
    engine: PairUtilities,
    texts: Sequence[str],
    weights: np.ndarray,
    seed: int,
    clusters: int,
    vectors: Optional[np.ndarray] = None,
) -> np.ndarray:
    """int64[R] the cluster (0..k-1) of each of one segment's pseudo-references: weighted
    k-means (scikit-learn's ``KMeans``, k-means++ start, ``sample_weight`` = their
    probabilities) of ``vectors`` (float[R, H]: COMET's sentence embeddings), by default their
    n-gram count vectors (the utility's own n-grams, orders 1 to 4 words or 1 to 6
    characters: :meth:`NgramCounts.vectors`), k = min(``clusters``, distinct texts); each its
    own cluster where there are no more than k.

    Raises:
        InputError: scikit-learn is not installed.
    """
    index: Dict[str, int] = {}
    ids = np.array([index.setdefault(t, len(index)) for t in texts], dtype=np.int64)
    k = min(clusters, len(index))
    if len(texts) <= clusters or k <= 1:
        return np.arange(len(texts), dtype=np.int64) if len(texts) <= clusters else np.zeros_like(ids)
    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise InputError("mbr: algorithm=centroid needs scikit-learn: pip install 'nbest-rerank[mbr]'") from None
    if vectors is None:
        utility = engine.ngram_utility
        tokens, lengths, vocab = utility.token_ids(texts)
        vectors = NgramCounts(tokens, lengths, vocab, utility.order).vectors()
    labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(vectors, sample_weight=weights).labels_
    return np.unique(labels, return_inverse=True)[1].astype(np.int64).reshape(-1)


def centroid_expected(
    engine: PairUtilities, candidates: NBestList, refs: NBestList, p_refs: np.ndarray, clusters: int, first: int = 0
) -> np.ndarray:
    """float64[M] centroid-based MBR: each segment's pseudo-references clustered by
    :func:`cluster` in the utility's own feature space (n-gram counts; COMET: sentence
    embeddings, as Deguchi et al.), each cluster's centroid the weighted mean of its members'
    n-gram counts or embeddings — its aggregate reference — and a candidate's expected utility
    ``sum_c P(c) · u(h, centroid_c)``, P(c) the cluster's total probability.  k = 1 is
    reference aggregation; k ≥ the pseudo-references is exact MBR.  O(N·k) utilities per
    segment; segment s clusters with seed ``first`` + s (its id in the whole list).

    Raises:
        InputError: lists of different segment counts; scikit-learn missing.
    """
    same_segments(candidates, refs)
    out = np.zeros(len(candidates.hypotheses))
    utility: Any = engine.utility  # COMET's: reference_embeddings and aggregate_utilities (the decoder checked)
    for s in range(candidates.num_segments):
        (c0, c1), (r0, r1) = bounds(candidates, s), bounds(refs, s)
        p = p_refs[r0:r1]
        texts = list(refs.hypotheses[r0:r1])
        vectors = None if engine.ngram else utility.reference_embeddings(texts)
        labels = cluster(engine, texts, p, first + s, clusters, vectors)
        mass = np.bincount(labels, weights=p)
        weights = np.zeros((r1 - r0, len(mass)))
        weights[np.arange(r1 - r0), labels] = p / np.where(mass[labels] > 0, mass[labels], 1.0)
        if not engine.ngram:  # COMET: the centroids are weighted means of the embeddings
            out[c0:c1] = utility.aggregate_utilities(s, candidates.hypotheses[c0:c1], texts, weights) @ mass
            continue
        counts, lengths, cand, ref = engine.segment_counts(candidates, refs, s)
        out[c0:c1] = against_aggregates(engine, counts, lengths, cand, ref, weights) @ mass
    return out


@DECODERS.register("centroid")
class CentroidDecoder(Decoder):
    """Centroid MBR (Deguchi et al. 2024): :func:`centroid_expected` with ``clusters``."""

    name = "centroid"
    estimate = "centroid-expected"
    summary = (
        "against the aggregates of --clusters k-means clusters of the pseudo-references' n-gram counts or COMET "
        "embeddings, weighted by cluster probability (N*k utilities: Deguchi et al. 2024; needs scikit-learn)"
    )

    ngram_only = True
    hook = "reference_embeddings"
    lacks = "no vectors to cluster"

    @dataclass
    class Config:
        clusters: int = option(8, "clusters of pseudo-references per segment (k)", type=positive_int)

    def expected(self, engine, candidates, refs, p_refs, first=0):
        return centroid_expected(engine, candidates, refs, p_refs, self.config.clusters, first)

    def references_per_segment(self, refs):
        return np.minimum(np.diff(refs.offsets), self.config.clusters)
