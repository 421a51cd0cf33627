"""Consensus features: the expected utility of MBR decoding (Kumar & Byrne 2004,
"Minimum Bayes-Risk Decoding for Statistical Machine Translation").

``mbr:bleu`` -> ``MBRBLEU``, ``mbr:chrf`` -> ``MBRchrF``: for hypothesis h of a segment's
list H, ``E(h) = sum_{h' in H} p(h') · u(h, h')`` with ``p = softmax(NMT)`` over the list
(the model's log-probability column, natural log, temperature 1) and u sentence BLEU
(sacrebleu's ``BLEU(effective_order=True).sentence_score``, tokenisation 'none': the
lists are tokenised text) or sentence chrF (sacrebleu's ``CHRF().sentence_score``) of h
against h' as the reference.  The sum runs over the whole list, h itself included, as
in MBR decoding (mbrs' expected utility with the hypotheses as pseudo-references).
Optional settings after the metric: ``mbr:bleu,feature=NMTNorm,temperature=0.5``;
``feature=uniform`` weighs every candidate alike — the Monte-Carlo estimate for lists of
samples (``rerank generate --sampling``; Eikema & Aziz 2020).

``algorithm=aggregate`` (``rerank mbr --algorithm aggregate``) is reference aggregation
(Vamvas & Sennrich 2024, "Linear-time Minimum Bayes Risk Decoding with Reference
Aggregation"): the pseudo-references' n-gram counts are averaged, weighted by their
probability, into one aggregate reference, and each candidate is scored once against it
(chrF: character n-grams; BLEU: word n-grams, matches clipped by the aggregate's fractional
counts, its length the expected reference length) — O(N) utilities per segment instead of
O(N²); with one pseudo-reference it equals the exact utility.

``rerank mbr --algorithm pruned`` is confidence-based pruning (Cheng & Vlachos 2023, "Faster
Minimum Bayes Risk Decoding with Confidence-based Pruning"): utilities against a growing
sample of the pseudo-references (8, 16, 32, … of them), and after each step every candidate
whose bootstrap estimate of beating the current best falls below ``1 − alpha`` is dropped;
the survivors are ranked on every pseudo-reference drawn.

``algorithm=centroid`` (``rerank mbr --algorithm centroid``) is centroid MBR (Deguchi et al.
2024): the pseudo-references of a segment clustered by weighted k-means on their n-gram
counts, each centroid its cluster's aggregate reference, weighted by the cluster's mass.

For BLEU and chrF, every distinct pair of a segment's distinct texts is matched at once by
matrix products over n-gram indicator matrices (:class:`NgramCounts`); a segment too large
for them, and TER, go pair by pair through the statistics layer
(:func:`rerank.bleu.pair_bleu_stats`, :meth:`rerank.metrics.chrf.ChrfMetric.pair_stats`,
:meth:`rerank.metrics.ter.TerMetric.pair_stats`) in groups of at most ``max_pairs`` pairs
(:func:`pair_groups`).  Statistics become scores by those layers' own formulas
(:func:`rerank.bleu.bleu_stats_from_matches`, :meth:`ChrfMetric.stats_from_matches`), so
no metric is implemented twice, and both routes give the same values, bit for bit.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.argtypes import positive_float, positive_int
from rerank.bleu import ORDER, bleu_from_stats, bleu_stats_from_matches, ngram_codes, pair_bleu_stats
from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, cost_ranges
from rerank.metrics.chrf import ChrfMetric
from rerank.metrics.ter import TerMetric
from rerank.nbest import iter_nbest, iter_nbest_pair
from rerank.outputs import StagedOutputs
from rerank.shards import Shard, shard_blocks
from rerank.signature import write_signed
from rerank.textio import file_digest


def list_pairs(offsets: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """All ordered pairs (h, r) of rows within each segment, grouped by reference r.

    Args:
        offsets: int[N + 1] segment boundaries.
    Returns:
        (hyp int64[P], ref int64[P]) with P = sum of squared list sizes.
    """
    counts = np.diff(offsets)
    sizes = counts**2
    seg = np.repeat(np.arange(len(counts)), sizes)
    local = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    n = counts[seg]
    ref = offsets[:-1][seg] + local // n
    hyp = offsets[:-1][seg] + local % n
    return hyp, ref


def pair_groups(offsets: np.ndarray, max_pairs: int) -> List[Tuple[int, int]]:
    """Consecutive segment ranges ``[(first, last), ...]`` (last exclusive) holding at most
    ``max_pairs`` ordered pairs each, or one segment where that alone holds more: memory of
    the pairwise statistics is bounded by the largest group, not by the list."""
    return cost_ranges(np.cumsum(np.diff(offsets) ** 2), max_pairs)


def list_softmax(values: np.ndarray, offsets: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Softmax of ``values / temperature`` within each segment (float64[M])."""
    seg = np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))
    scaled = np.asarray(values, dtype=np.float64) / temperature
    shifted = np.exp(scaled - np.maximum.reduceat(scaled, offsets[:-1])[seg])
    return shifted / np.add.reduceat(shifted, offsets[:-1])[seg]


class NgramCounts:
    """The n-gram counts of a few texts (one segment's candidates and pseudo-references), per
    order the triplets (text, n-gram, count).  Two products on them:

    * all pairs' clipped matches by matrix products (:meth:`matches`): for order n, column
      (g, t) of an indicator matrix is 1 where a text holds n-gram g at least t times, so
      ``sum_g min(c_a(g), c_b(g))`` is the dot product of the rows of texts a and b (exact:
      float32 holds integers below 2^24);
    * matches against aggregate references of fractional counts x(g) (Vamvas & Sennrich
      2024; :meth:`aggregate_matches`): ``sum_g min(c_a(g), x(g))`` over each text's
      triplets, linear in the n-grams.
    """

    #: the most indicator cells (float32) :meth:`matches` builds for one set of texts
    #: (~128 MB); a larger segment is scored pair by pair (:func:`rerank.bleu.pair_matches`)
    max_cells = 32_000_000

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, vocab_size: int, order: int):
        """Count the n-grams (orders 1..``order``) of the texts given flat as token ``ids``
        (int64[L], ids below ``vocab_size``) and ``lengths`` (int64[T])."""
        self.lengths = np.asarray(lengths, dtype=np.int64)
        codes = ngram_codes(ids, self.lengths, vocab_size, order)
        owner = np.repeat(np.arange(len(self.lengths)), self.lengths)
        self.triplets: List[Optional[Tuple[np.ndarray, np.ndarray, np.ndarray, int]]] = []
        for k in range(order):
            valid = codes[k] >= 0
            if not valid.any():
                self.triplets.append(None)
                continue
            grams, gram = np.unique(codes[k][valid], return_inverse=True)
            key, count = np.unique(owner[valid] * len(grams) + gram.reshape(-1), return_counts=True)
            self.triplets.append((key // len(grams), key % len(grams), count, len(grams)))
        self._indicator: Optional[list] = None

    def _indicators(self) -> Optional[list]:
        """Per order the float32 indicator matrix [T, (n-gram, t) columns], or None where they
        would exceed :attr:`max_cells`."""
        if self._indicator is None:
            tops = []
            for part in self.triplets:
                if part is not None:
                    text, g, count, size = part
                    top = np.zeros(size, dtype=np.int64)
                    np.maximum.at(top, g, count)
                    tops.append(top)
            if len(self.lengths) * sum(int(t.sum()) for t in tops) > self.max_cells:
                return None
            self._indicator, tops = [], iter(tops)
            for part in self.triplets:
                if part is None:
                    self._indicator.append(None)
                    continue
                text, g, count, _ = part
                base = np.concatenate([[0], np.cumsum(next(tops))])
                matrix = np.zeros((len(self.lengths), int(base[-1])), dtype=np.float32)
                within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
                matrix[np.repeat(text, count), np.repeat(base[g], count) + within] = 1.0
                self._indicator.append(matrix)
        return self._indicator

    def fits(self) -> bool:
        """Whether :meth:`matches` can build its matrices (:attr:`max_cells`)."""
        return self._indicators() is not None

    def matches(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float64[len(rows), len(cols), order] clipped matches of texts ``rows`` against
        ``cols``, by matrix products.  Raises ``MemoryError`` where :meth:`fits` is false."""
        indicator = self._indicators()
        if indicator is None:
            raise MemoryError("n-gram indicator matrices over NgramCounts.max_cells")
        out = np.zeros((len(rows), len(cols), len(indicator)))
        for k, matrix in enumerate(indicator):
            if matrix is not None:
                out[:, :, k] = matrix[rows] @ matrix[cols].T
        return out

    def aggregate_matches(self, rows: np.ndarray, refs: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """float64[len(rows), K, order] clipped matches of texts ``rows`` against K aggregate
        references: column j of ``weights`` (float64[len(refs), K]) averages the n-gram
        counts of the texts ``refs`` (Vamvas & Sennrich 2024's aggregate; a column per
        centroid for centroid MBR).  Linear in the texts' n-grams; ``rows`` distinct."""
        count_texts = len(self.lengths)
        out = np.zeros((len(rows), weights.shape[1], len(self.triplets)))
        where = np.full(count_texts, -1, dtype=np.int64)
        where[rows] = np.arange(len(rows))
        weight_of = np.zeros((count_texts, weights.shape[1]))
        np.add.at(weight_of, refs, weights)  # a text given twice among refs counts twice
        for k, part in enumerate(self.triplets):
            if part is None:
                continue
            text, g, count, size = part
            for j in range(weights.shape[1]):
                aggregate = np.bincount(g, weights=weight_of[text, j] * count, minlength=size)
                keep = where[text] >= 0
                out[:, j, k] = np.bincount(
                    where[text[keep]], weights=np.minimum(count[keep], aggregate[g[keep]]), minlength=len(rows)
                )
        return out

    def vectors(self):
        """[T, n-grams of all orders] each text's n-gram counts, the space in which centroid
        MBR clusters: a dense array up to 4M cells, else scipy.sparse CSR."""
        from scipy.sparse import csr_matrix

        rows, cols, values, offset = [], [], [], 0
        for part in self.triplets:
            if part is not None:
                text, g, count, size = part
                rows.append(text)
                cols.append(g + offset)
                values.append(count.astype(np.float64))
                offset += size
        if not rows:
            return np.zeros((len(self.lengths), 1))
        matrix = csr_matrix(
            (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(len(self.lengths), offset)
        )
        return matrix.toarray() if len(self.lengths) * offset <= 4_000_000 else matrix


@SCORERS.register("mbr")
class ConsensusScorer(Scorer):
    """Expected sentence-BLEU, chrF or minus TER of each hypothesis against its list (MBR utility).

    Args:
        config: :attr:`Config` (``mbr:bleu``, ``mbr:chrf,feature=uniform,temperature=0.5``).
    Raises:
        InputError: (from the spec) an unknown utility or setting, a non-positive temperature.
    """

    summary = "MBRBLEU / MBRchrF / MBRTER: MBR expected utility (MBRTER: minus expected TER)"

    @dataclass
    class Config:
        utility: str = option(
            "", "the sentence utility (ter: minus sentence TER)", choices=("bleu", "chrf", "ter"), positional=True
        )
        feature: str = option("NMT", "the log-probability column of the distribution, or uniform (samples)")
        temperature: float = option(1.0, "softmax temperature", type=positive_float)
        algorithm: str = option(
            "exact",
            "exact (every pair), aggregate (one aggregate reference per segment: Vamvas & Sennrich 2024) or "
            "centroid (the aggregates of k clusters: Deguchi et al. 2024)",
            choices=("exact", "aggregate", "centroid"),
        )
        clusters: int = option(8, "centroid: clusters of pseudo-references per segment (k)", type=positive_int)

    set_name = "MBR"

    NAMES = {"bleu": "MBRBLEU", "chrf": "MBRchrF", "ter": "MBRTER"}
    #: ordered pairs scored at once (about 260 bytes each): bounds memory per group of
    #: segments, and within one long list per block of its references
    max_pairs = 1_000_000

    def __init__(self, config: "ConsensusScorer.Config"):
        if config.utility not in self.NAMES:
            raise InputError(f"mbr: the utility must be one of {', '.join(self.NAMES)}: mbr:bleu or mbr:chrf")
        self.metric, self.feature, self.temperature = config.utility, config.feature or "NMT", config.temperature
        self.algorithm = config.algorithm or "exact"
        self.clusters = config.clusters
        if self.metric == "ter" and self.algorithm in ("aggregate", "centroid"):
            raise InputError(
                f"mbr: {self.algorithm} needs an n-gram utility (bleu or chrf); TER has no aggregate reference"
            )

    def names(self, has_images: bool) -> List[str]:
        return [self.NAMES[self.metric]]

    def utilities(self, hypotheses, hyp, ref, segment: Optional[np.ndarray] = None) -> np.ndarray:
        """float64[P] sentence utility of ``hypotheses[hyp[k]]`` against ``hypotheses[ref[k]]``:
        BLEU or chrF (0-100), or minus sentence TER (sacrebleu's tokenisation and edit
        counts, :class:`rerank.metrics.ter.TerMetric`; ≤ 0, higher is better).  Identical
        texts (samples repeat: 256 epsilon samples of a sentence hold ~140 distinct ones)
        are scored once.  ``segment`` (int[T], the texts' segments, pairs never across them):
        BLEU and chrF of each segment's distinct texts all at once by matrix products
        (:class:`NgramCounts`) where they fit, else pair by pair (:func:`rerank.bleu.pair_matches`).
        The same values either way, bit for bit."""
        if segment is not None and self.metric != "ter":
            segment = np.asarray(segment, dtype=np.int64)
            out = np.empty(len(hyp))
            owner = segment[hyp]
            order = np.argsort(owner, kind="stable")
            cuts = np.searchsorted(owner[order], np.arange(int(segment.max(initial=-1)) + 2))
            for s in range(len(cuts) - 1):
                pick = order[cuts[s] : cuts[s + 1]]
                if not len(pick):
                    continue
                rows = np.flatnonzero(segment == s)
                local = np.full(len(segment), -1, dtype=np.int64)
                local[rows] = np.arange(len(rows))
                gather = self.pair_utilities_of([hypotheses[r] for r in rows])
                out[pick] = gather(local[hyp[pick]], local[ref[pick]])
            return out
        index: Dict[str, int] = {}
        ids = np.fromiter((index.setdefault(t, len(index)) for t in hypotheses), np.int64, len(hypotheses))
        if len(index) == len(ids):
            return self._pair_utilities(hypotheses, hyp, ref)
        distinct = len(index)
        pair = ids[hyp] * distinct + ids[ref]
        if distinct * distinct <= 4 * len(pair):  # a dense table of the text pairs: no sort
            table = np.zeros(distinct * distinct, dtype=np.int32)
            table[pair] = 1
            keys = np.flatnonzero(table)
            table[keys] = np.arange(len(keys), dtype=np.int32)
            back = table[pair]
        else:
            keys, back = np.unique(pair, return_inverse=True)
        return self._pair_utilities(list(index), keys // distinct, keys % distinct)[back.reshape(-1)]

    #: the most distinct texts of a segment whose all-pairs utility matrix is built at once
    max_matrix_texts = 1500

    def pair_utilities_of(
        self, texts: Sequence[str], every_pair: bool = True
    ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """A function (hyp int[P], ref int[P]) -> float64[P] utilities of pairs of ``texts``
        (one segment's): for BLEU and chrF by matrix products of :class:`NgramCounts` (at
        most ``max_matrix_texts`` distinct texts and its cells) — ``every_pair``: the matrix
        of every distinct pair at once, gathered at each call; else at each call only the
        block of the distinct texts it asks for (pruning asks for few) — otherwise
        :meth:`utilities` pair by pair."""
        index: Dict[str, int] = {}
        ids = np.fromiter((index.setdefault(t, len(index)) for t in texts), np.int64, len(texts))
        if self.metric != "ter" and len(index) <= self.max_matrix_texts:
            tokens, lengths, vocab = self._ids(list(index))
            counts = NgramCounts(tokens, lengths, vocab, self._order())
            if counts.fits():

                def block(rows, cols):
                    return self.from_matches(counts.matches(rows, cols), lengths[rows][:, None], lengths[cols][None, :])

                if every_pair:
                    matrix = block(np.arange(len(index)), np.arange(len(index)))
                    return lambda hyp, ref: matrix[ids[hyp], ids[ref]]

                def asked(hyp, ref):
                    rows, row = np.unique(ids[hyp], return_inverse=True)
                    cols, col = np.unique(ids[ref], return_inverse=True)
                    return block(rows, cols)[row.reshape(-1), col.reshape(-1)]

                return asked
        return lambda hyp, ref: self.utilities(texts, hyp, ref)

    def from_matches(self, matches: np.ndarray, hyp_len, ref_len, ref_ngrams=None) -> np.ndarray:
        """Utilities float64[...] from clipped matches float[..., order] of hypotheses of
        ``hyp_len`` tokens (words, or characters without whitespace) against references of
        ``ref_len`` (broadcast): sentence BLEU (effective order) or chrF (beta 2) through
        the statistics layer (:func:`rerank.bleu.bleu_stats_from_matches`,
        :meth:`rerank.metrics.chrf.ChrfMetric.stats_from_matches`).  ``ref_ngrams``
        (float[..., order], chrF): the reference's n-grams per order where they are not
        ``ref_len − n + 1`` (an aggregate reference's expected counts); BLEU takes an
        aggregate's expected length as ``ref_len``."""
        if self.metric == "bleu":
            return bleu_from_stats(bleu_stats_from_matches(matches, hyp_len, ref_len), effective_order=True)
        n = np.arange(matches.shape[-1])
        hyp_ngrams = np.maximum(np.asarray(hyp_len)[..., None] - n, 0)
        if ref_ngrams is None:
            ref_ngrams = np.maximum(np.asarray(ref_len)[..., None] - n, 0)
        chrf = ChrfMetric()
        return chrf.score(chrf.stats_from_matches(matches, hyp_ngrams, ref_ngrams))

    def _pair_utilities(self, texts, hyp, ref) -> np.ndarray:
        """:meth:`utilities` of the pairs as given (no texts merged)."""
        if self.metric == "bleu":
            return bleu_from_stats(pair_bleu_stats(texts, hyp, ref), effective_order=True)
        if self.metric == "ter":
            ter = TerMetric()
            return -ter.score(ter.pair_stats(texts, hyp, ref))
        chrf = ChrfMetric()
        return chrf.score(chrf.pair_stats(texts, hyp, ref))

    def score(self, nbest, sources, images):
        # uniform: candidates that are samples, the Monte-Carlo estimate weighs them alike
        p = self.distribution(nbest)
        if self.algorithm == "aggregate":
            return {self.NAMES[self.metric]: self.aggregate_expected(nbest, nbest, p)}
        if self.algorithm == "centroid":
            return {self.NAMES[self.metric]: self.centroid_expected(nbest, nbest, p)}
        return self._expected(nbest, p)

    def _ids(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray, int]:
        """(int64[L] ids, int64[T] lengths, vocabulary size) of ``texts``: words (BLEU; the
        lists are tokenised text, split on whitespace) or characters without whitespace
        (chrF, as sacrebleu's default), ids dense from 0."""
        if self.metric == "bleu":
            words = [t.split() for t in texts]
            lengths = np.array([len(w) for w in words], dtype=np.int64)
            flat = [w for ws in words for w in ws]
        else:
            flat = "".join("".join(t.split()) for t in texts)
            lengths = np.array([len("".join(t.split())) for t in texts], dtype=np.int64)
        if not len(flat):
            return np.zeros(0, dtype=np.int64), lengths, 1
        if self.metric == "bleu":
            vocabulary, ids = np.unique(np.array(flat, dtype=object), return_inverse=True)
        else:
            vocabulary, ids = np.unique(np.frombuffer(flat.encode("utf-32-le"), dtype=np.uint32), return_inverse=True)
        return np.asarray(ids, dtype=np.int64).reshape(-1), lengths, len(vocabulary)

    def _order(self) -> int:
        """The highest n-gram order of the utility (BLEU 4 words, chrF 6 characters)."""
        return ORDER if self.metric == "bleu" else ChrfMetric().metric.char_order

    def _segment_counts(self, candidates, refs, s):
        """One segment's distinct texts of both lists, counted: (NgramCounts, lengths, candidate
        text ids int[n], pseudo-reference text ids int[m])."""
        c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
        r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
        index: Dict[str, int] = {}
        cand = np.array([index.setdefault(t, len(index)) for t in candidates.hypotheses[c0:c1]], dtype=np.int64)
        ref = np.array([index.setdefault(t, len(index)) for t in refs.hypotheses[r0:r1]], dtype=np.int64)
        tokens, lengths, vocab = self._ids(list(index))
        return NgramCounts(tokens, lengths, vocab, self._order()), lengths, cand, ref

    def _against_aggregates(self, counts, lengths, cand, refs, weights) -> np.ndarray:
        """float64[n, K] utility of candidate texts ``cand`` against K aggregate references,
        column j of ``weights`` (float64[len(refs), K], summing to 1) averaging texts ``refs``:
        BLEU with the aggregate's expected length, chrF with its expected n-gram counts."""
        distinct, back = np.unique(cand, return_inverse=True)  # candidates that repeat: scored once
        matches = counts.aggregate_matches(distinct, refs, weights)  # [distinct, K, order]
        if self.metric == "bleu":
            values = self.from_matches(matches, lengths[distinct][:, None], (weights.T @ lengths[refs])[None, :])
        else:
            n = np.arange(matches.shape[-1])
            windows = np.maximum(lengths[refs][:, None] - n, 0)  # [refs, order]
            values = self.from_matches(matches, lengths[distinct][:, None], None, (weights.T @ windows)[None, :, :])
        return values[back.reshape(-1)]

    def aggregate_expected(self, candidates, refs, p_refs) -> np.ndarray:
        """float64[M] utility of every candidate against its segment's aggregate reference
        (reference aggregation, Vamvas & Sennrich 2024): the n-gram counts of the
        pseudo-references of ``refs`` (the same segments) averaged with ``p_refs``; sentence
        BLEU (effective order, the expected reference length) or chrF (order 6, beta 2, the
        expected n-gram counts) from the averaged statistics (:class:`NgramCounts`).  Equals
        :meth:`cross_expected` where a segment has one pseudo-reference.

        Raises:
            InputError: lists of different segment counts.
        """
        self._same_segments(candidates, refs)
        expected = np.zeros(len(candidates.hypotheses))
        for s in range(candidates.num_segments):
            counts, lengths, cand, ref = self._segment_counts(candidates, refs, s)
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            expected[c0:c1] = self._against_aggregates(counts, lengths, cand, ref, p_refs[r0:r1, None])[:, 0]
        return expected

    def references_per_segment(self, refs) -> np.ndarray:
        """int[N] the references each candidate is scored against, per segment: 1 for
        ``aggregate``, min(clusters, pseudo-references) for ``centroid``."""
        counts = np.diff(refs.offsets)
        return np.ones_like(counts) if self.algorithm == "aggregate" else np.minimum(counts, self.clusters)

    def cluster(self, texts: Sequence[str], weights: np.ndarray, seed: int) -> np.ndarray:
        """int64[R] the cluster (0..k-1) of each of one segment's pseudo-references: weighted
        k-means (scikit-learn's ``KMeans``, k-means++ start, ``sample_weight`` = their
        probabilities) of their n-gram count vectors (the utility's own n-grams, orders 1 to
        4 words or 1 to 6 characters: :meth:`NgramCounts.vectors`), k = min(``clusters``,
        distinct texts); each its own cluster where there are no more than k.

        Raises:
            InputError: scikit-learn is not installed.
        """
        index: Dict[str, int] = {}
        ids = np.array([index.setdefault(t, len(index)) for t in texts], dtype=np.int64)
        k = min(self.clusters, len(index))
        if len(texts) <= self.clusters or k <= 1:
            return np.arange(len(texts), dtype=np.int64) if len(texts) <= self.clusters else np.zeros_like(ids)
        try:
            from sklearn.cluster import KMeans
        except ImportError:
            raise InputError("mbr: algorithm=centroid needs scikit-learn: pip install 'rerank[mbr]'") from None
        tokens, lengths, vocab = self._ids(texts)
        vectors = NgramCounts(tokens, lengths, vocab, self._order()).vectors()
        labels = KMeans(n_clusters=k, n_init=1, random_state=seed).fit(vectors, sample_weight=weights).labels_
        return np.unique(labels, return_inverse=True)[1].astype(np.int64).reshape(-1)

    def centroid_expected(self, candidates, refs, p_refs, first: int = 0) -> np.ndarray:
        """float64[M] centroid-based MBR (Deguchi et al. 2024, "Centroid-Based Efficient
        Minimum Bayes Risk Decoding"): each segment's pseudo-references clustered by
        :meth:`cluster` in the utility's own feature space (n-gram counts, where Deguchi et al.
        cluster COMET embeddings), each cluster's centroid the weighted mean of its members'
        n-gram counts — its aggregate reference (Vamvas & Sennrich 2024) — and a candidate's
        expected utility ``sum_c P(c) · u(h, centroid_c)``, P(c) the cluster's total
        probability.  k = 1 is :meth:`aggregate_expected`; k ≥ the pseudo-references is exact
        MBR (:meth:`cross_expected`).  O(N·k) utilities per segment; segment s clusters with
        seed ``first`` + s (its id in the whole list).

        Raises:
            InputError: lists of different segment counts; scikit-learn missing.
        """
        self._same_segments(candidates, refs)
        expected = np.zeros(len(candidates.hypotheses))
        for s in range(candidates.num_segments):
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            p = p_refs[r0:r1]
            labels = self.cluster(refs.hypotheses[r0:r1], p, first + s)
            mass = np.bincount(labels, weights=p)
            weights = np.zeros((r1 - r0, len(mass)))
            weights[np.arange(r1 - r0), labels] = p / np.where(mass[labels] > 0, mass[labels], 1.0)
            counts, lengths, cand, ref = self._segment_counts(candidates, refs, s)
            expected[c0:c1] = self._against_aggregates(counts, lengths, cand, ref, weights) @ mass
        return expected

    @staticmethod
    def _same_segments(candidates, refs) -> None:
        if candidates.num_segments != refs.num_segments:
            raise InputError(
                f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
            )

    def cross_expected(self, candidates, refs, p_refs, matrix=None) -> np.ndarray:
        """float64[M] expected utility of every candidate of ``candidates`` against the
        pseudo-references of the same segment in ``refs`` (another list of the same
        segments, e.g. samples: Eikema & Aziz 2020), weighted by ``p_refs`` (float64[R],
        summing to 1 within each segment); one segment at a time, a block of references at a
        time where it is long (memory ≤ ``max_pairs`` pairs).  ``matrix``: called with
        (segment, candidate rows int[P], reference rows int[P], utilities float[P]) for
        every block (``rerank mbr --matrix``).

        Raises:
            InputError: lists of different segment counts.
        """
        self._same_segments(candidates, refs)
        expected = np.zeros(len(candidates.hypotheses))
        for s in range(candidates.num_segments):
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            n, m = c1 - c0, r1 - r0
            gather = self.pair_utilities_of(list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]))
            step = max(1, self.max_pairs // n)
            for k0 in range(0, m, step):
                ref = np.repeat(np.arange(k0, min(m, k0 + step)), n)
                hyp = np.tile(np.arange(n), len(ref) // n)
                utility = gather(hyp, n + ref)
                if matrix is not None:
                    matrix(s, hyp, ref, utility)
                expected[c0:c1] += np.bincount(hyp, weights=p_refs[r0:r1][ref] * utility, minlength=n)
        return expected

    def pruned_select(
        self,
        candidates,
        refs,
        p_refs,
        alpha: float = 0.99,
        schedule: Sequence[int] = (8, 16, 32, 64, 128, 256, 512, 1024),
        bootstrap: int = 500,
        seed: int = 1,
        first: int = 0,
    ) -> Tuple[np.ndarray, int]:
        """Confidence-based pruning MBR (Cheng & Vlachos 2023, Algorithm 1): for every segment,
        the pseudo-references are drawn in a random order (without replacement when
        ``p_refs`` is uniform within the segment, else with replacement by ``p_refs``: a
        Monte-Carlo estimate of the same expectation); at each size of ``schedule`` (then all
        of them) the surviving candidates' utilities against the references drawn so far are
        resampled ``bootstrap`` times, and a candidate whose mean beats or ties the current
        best's in fewer than ``1 − alpha`` of the resamples is pruned.  The survivor of the
        highest mean utility on all drawn references is selected (the earlier on ties).

        Args:
            candidates, refs: lists of the same segments (candidates and pseudo-references).
            p_refs: float64[R] weights of the pseudo-references (summing to 1 per segment).
            alpha: confidence, in (0, 1]; 1 prunes nothing (exact MBR on the drawn references).
            schedule: increasing numbers of pseudo-references drawn before each pruning.
            bootstrap: resamples per pruning step.
            seed: of the draws and resamples; segment s (``first`` + its index here: its id in
                the whole list) draws from the stream seeded by (seed, first + s).
        Returns:
            (int64[N] selected candidate rows, number of utilities computed).
        Raises:
            InputError: lists of different segment counts, alpha outside (0, 1].
        """
        if not 0 < alpha <= 1:
            raise InputError(f"the pruning confidence alpha must be in (0, 1], not {alpha}")
        self._same_segments(candidates, refs)
        chosen = np.zeros(candidates.num_segments, dtype=np.int64)
        computed = 0
        for s in range(candidates.num_segments):
            rng = np.random.default_rng([seed, first + s])
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            n, m = c1 - c0, r1 - r0
            weights = p_refs[r0:r1]
            if np.allclose(weights, weights[0]):
                order = rng.permutation(m)
            else:
                order = rng.choice(m, size=m, p=weights / weights.sum())
            gather = self.pair_utilities_of(
                list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]), every_pair=False
            )
            alive = np.arange(n)
            table = np.zeros((n, m))  # utilities of candidate i against the k-th drawn reference
            drawn = 0
            for size in [k for k in schedule if k < m] + [m]:
                new = np.arange(drawn, size)
                hyp = np.repeat(alive, len(new))
                col = np.tile(new, len(alive))
                table[hyp, col] = gather(hyp, n + order[col])
                computed += len(hyp)
                drawn = size
                if len(alive) == 1 or size == m or alpha == 1:
                    continue
                means = table[alive, :drawn].mean(axis=1)
                best = alive[int(np.argmax(means))]
                resample = rng.integers(0, drawn, size=(bootstrap, drawn))
                # each resample as counts of the drawn references: its means are one matrix product
                picks = np.bincount(
                    (np.arange(bootstrap)[:, None] * drawn + resample).reshape(-1), minlength=bootstrap * drawn
                ).reshape(bootstrap, drawn)
                resampled = table[alive, :drawn] @ picks.T / drawn  # [alive, bootstrap]
                target = resampled[int(np.flatnonzero(alive == best)[0])]
                wins = (resampled >= target).mean(axis=1)
                alive = alive[(wins >= 1 - alpha) | (alive == best)]
            means = table[alive, :drawn].mean(axis=1)
            chosen[s] = c0 + alive[int(np.argmax(means))]
        return chosen, computed

    def distribution(self, nbest) -> np.ndarray:
        """float64[M] the weight of every hypothesis within its segment: the softmax of the
        ``feature`` column at ``temperature``, or uniform.

        Raises:
            InputError: the list has no such column.
        """
        if self.feature == "uniform":
            counts = np.diff(nbest.offsets)
            return np.repeat(1.0 / counts, counts)
        if self.feature not in nbest.feature_names:
            raise InputError(
                f"mbr: the n-best list has no {self.feature!r} column for the distribution "
                f"(its features: {' '.join(dict.fromkeys(nbest.feature_names))})"
            )
        column = nbest.feature_names.index(self.feature)
        return list_softmax(nbest.features[:, column], nbest.offsets, self.temperature)

    def _expected(self, nbest, p):
        """{column: float64[M]} expected utility of every hypothesis under ``p`` (float64[M])."""
        expected = np.zeros(len(nbest.hypotheses))
        for first, last in pair_groups(nbest.offsets, self.max_pairs):
            a, b = nbest.offsets[first], nbest.offsets[last]
            n = int(b - a)
            if last - first == 1 and n * n > self.max_pairs:  # one long list: its pairs a block of references at a time
                step = max(1, self.max_pairs // n)
                gather, weights = self.pair_utilities_of(nbest.hypotheses[a:b]), p[a:b]
                for r0 in range(0, n, step):
                    ref = np.repeat(np.arange(r0, min(n, r0 + step)), n)
                    hyp = np.tile(np.arange(n), len(ref) // n)
                    expected[a:b] += np.bincount(hyp, weights=weights[ref] * gather(hyp, ref), minlength=n)
                continue
            hyp, ref = list_pairs(nbest.offsets[first : last + 1] - a)
            utility = self.utilities(nbest.hypotheses[a:b], hyp, ref, nbest.segment[a:b] - first)
            expected[a:b] = np.bincount(hyp, weights=p[a:b][ref] * utility, minlength=b - a)
        return {self.NAMES[self.metric]: expected}


def mbr_decode(
    candidates_path: str,
    out: str,
    utility: str = "chrf",
    pseudo_refs_path: Optional[str] = None,
    weights_from: str = "NMT",
    temperature: float = 1.0,
    matrix_path: Optional[str] = None,
    algorithm: str = "exact",
    alpha: float = 0.99,
    seed: int = 1,
    shard: Optional[Shard] = None,
    clusters: int = 8,
) -> Dict[str, float]:
    """Minimum Bayes-risk decoding (Kumar & Byrne 2004): for every segment, the candidate of
    the highest expected ``utility`` (sentence BLEU, chrF or minus TER) against the
    pseudo-references — the candidates themselves, or the same segment of
    ``pseudo_refs_path`` (e.g. samples) — weighted by the softmax of their ``weights_from``
    column at ``temperature``, or uniformly; the first on ties.  The one engine of the
    ``mbr:`` scorer (:class:`ConsensusScorer`), so the exact selection is the argmax of its
    column.  Writes the selections to ``out`` and, with ``matrix_path``, every utility as
    ``segment<TAB>candidate<TAB>pseudo-reference<TAB>utility`` lines (the segment id of the
    whole list, candidate and pseudo-reference 0-based within the segment); both appear
    together or not at all.  ``algorithm``: ``exact``; ``aggregate`` (each candidate against
    its segment's aggregate reference, :meth:`ConsensusScorer.aggregate_expected`);
    ``centroid`` (against ``clusters`` cluster centroids, :meth:`ConsensusScorer.centroid_expected`);
    ``pruned`` (confidence-based pruning at ``alpha`` and ``seed``,
    :meth:`ConsensusScorer.pruned_select`; the draws of segment s are seeded by (seed, s),
    so shards select as one process does).  The lists are streamed a block of segments at
    a time (:func:`rerank.nbest.iter_nbest_pair`); ``shard``: only that block of segments
    (:mod:`rerank.shards`), ``out`` with a signature recording it.  Returns {"segments",
    "expected" (the mean expected, aggregate or centroid utility of the selections; pruned:
    nan), "utilities" (how many were computed)}.

    Raises:
        InputError: unreadable lists, lists of different segment counts, a missing column,
            a matrix asked of another algorithm than exact, a shard of standard input or to
            standard output, or holding no segment.
    """
    scorer = ConsensusScorer(
        ConsensusScorer.Config(
            utility,
            weights_from,
            temperature,
            algorithm if algorithm in ("aggregate", "centroid") else "exact",
            clusters,
        )
    )
    if algorithm != "exact" and matrix_path:
        raise InputError(f"--matrix needs --algorithm exact: the {algorithm} algorithm scores no full matrix")
    lo, hi, total = 0, None, None
    if shard is not None:
        lo, hi, total = shard.list_bounds(candidates_path)
        shard.check_output(out)
    if pseudo_refs_path:
        blocks = iter_nbest_pair(candidates_path, pseudo_refs_path)
    else:
        blocks = ((first, block, block) for first, block in iter_nbest(candidates_path))
    if shard is not None:
        blocks = shard_blocks(blocks, lo, hi)
    segments, utilities, expected_sum = 0, 0, 0.0
    with StagedOutputs() as outputs, contextlib.ExitStack() as stack:
        handle = stack.enter_context(outputs.open(matrix_path)) if matrix_path else None
        best = stack.enter_context(outputs.open(out))
        for first, candidates, refs in blocks:
            p = scorer.distribution(refs)
            if algorithm == "pruned":
                chosen, computed = scorer.pruned_select(candidates, refs, p, alpha=alpha, seed=seed, first=first)
                utilities += computed
            else:
                if algorithm == "aggregate":
                    expected = scorer.aggregate_expected(candidates, refs, p)
                elif algorithm == "centroid":
                    expected = scorer.centroid_expected(candidates, refs, p, first)
                elif handle is None and refs is candidates:  # the scorer's own path: the same numbers as its column
                    expected = scorer._expected(candidates, p)[scorer.names(False)[0]]
                else:

                    def write(segment, hyp, ref, values, first=first):
                        rows = zip(hyp.tolist(), ref.tolist(), values.tolist())
                        handle.writelines(f"{first + segment}\t{h}\t{r}\t{v!r}\n" for h, r, v in rows)

                    expected = scorer.cross_expected(candidates, refs, p, write if handle is not None else None)
                chosen = candidates.select(expected)
                expected_sum += float(np.sum(expected[chosen]))
                per_segment = np.diff(refs.offsets) if algorithm == "exact" else scorer.references_per_segment(refs)
                utilities += int((np.diff(candidates.offsets) * per_segment).sum())
            best.writelines(candidates.hypotheses[i] + "\n" for i in chosen)
            segments += candidates.num_segments
        if shard is not None:
            record = {
                "shard": shard.record(total, candidates_path, "text"),
                "input": candidates_path,
                "segments": segments,
                "mbr": {
                    "metric": utility,
                    "algorithm": algorithm,
                    "weights_from": weights_from,
                    "temperature": temperature,
                    "pseudo_refs_sha256": file_digest(pseudo_refs_path) if pseudo_refs_path else None,
                    **({"alpha": alpha, "seed": seed} if algorithm == "pruned" else {}),
                    **({"clusters": clusters} if algorithm == "centroid" else {}),
                },
            }
            write_signed(outputs.signature(out), record)
    return {
        "segments": segments,
        "expected": float("nan") if algorithm == "pruned" else expected_sum / max(segments, 1),
        "utilities": utilities,
    }
