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

All ordered pairs of a group of lists (at most ``max_pairs``, see :func:`pair_groups`) come
from the statistics layer in one vectorised pass (:func:`rerank.bleu.pair_bleu_stats`,
:meth:`rerank.metrics.chrf.ChrfMetric.pair_stats`); scores are those layers' own formulas,
so no metric is implemented twice.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.argtypes import positive_float
from rerank.bleu import NUM_STATS, ORDER, REF_LEN, bleu_from_stats, pair_bleu_stats
from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, cost_ranges
from rerank.metrics.chrf import ChrfMetric
from rerank.nbest import read_nbest
from rerank.outputs import StagedOutputs


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


def aggregate_matches(
    candidates: List[np.ndarray], references: List[np.ndarray], weights: np.ndarray, order: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-gram statistics of each candidate against the aggregate of ``references``
    (Vamvas & Sennrich 2024): the references' n-gram counts averaged with ``weights``.

    Args:
        candidates: C int64 arrays of token (or character) ids.
        references: R int64 arrays of ids of the same vocabulary.
        weights: float64[R], the references' weights (summing to 1).
        order: the highest n-gram order.
    Returns:
        (matches float64[C, order]: sum over n-grams g of min(count_c(g), aggregate(g));
        candidate n-grams float64[C, order]; aggregate reference n-grams float64[order]:
        the weighted mean of max(len_r - n + 1, 0)).  Memory is linear in the n-grams.
    """
    count = len(candidates)
    matches, totals, ref_totals = np.zeros((count, order)), np.zeros((count, order)), np.zeros(order)
    texts = list(candidates) + list(references)
    for n in range(1, order + 1):
        windows = [np.lib.stride_tricks.sliding_window_view(t, n) for t in texts if len(t) >= n]
        owners = [np.full(len(t) - n + 1, i) for i, t in enumerate(texts) if len(t) >= n]
        if not windows:
            continue
        grams, owner = np.concatenate(windows), np.concatenate(owners)
        _, code = np.unique(grams, axis=0, return_inverse=True)
        code = code.reshape(-1)
        distinct = int(code.max()) + 1
        is_ref = owner >= count
        aggregate = np.bincount(code[is_ref], weights=weights[owner[is_ref] - count], minlength=distinct)
        ref_totals[n - 1] = aggregate.sum()
        # each candidate's count of each of its n-grams, clipped by the aggregate's
        pairs, per_pair = np.unique(owner[~is_ref] * distinct + code[~is_ref], return_counts=True)
        cand, gram = pairs // distinct, pairs % distinct
        matches[:, n - 1] = np.bincount(cand, weights=np.minimum(per_pair, aggregate[gram]), minlength=count)
        totals[:, n - 1] = np.bincount(cand, weights=per_pair, minlength=count)
    return matches, totals, ref_totals


@SCORERS.register("mbr")
class ConsensusScorer(Scorer):
    """Expected sentence-BLEU or chrF of each hypothesis against its list (MBR utility).

    Args:
        config: :attr:`Config` (``mbr:bleu``, ``mbr:chrf,feature=uniform,temperature=0.5``).
    Raises:
        InputError: (from the spec) an unknown utility or setting, a non-positive temperature.
    """

    summary = "MBRBLEU / MBRchrF: MBR expected utility"

    @dataclass
    class Config:
        utility: str = option("", "the sentence utility", choices=("bleu", "chrf"), positional=True)
        feature: str = option("NMT", "the log-probability column of the distribution, or uniform (samples)")
        temperature: float = option(1.0, "softmax temperature", type=positive_float)
        algorithm: str = option(
            "exact",
            "exact (every pair) or aggregate (one aggregate reference per segment: Vamvas & Sennrich 2024)",
            choices=("exact", "aggregate"),
        )

    set_name = "MBR"

    NAMES = {"bleu": "MBRBLEU", "chrf": "MBRchrF"}
    #: ordered pairs scored at once (about 260 bytes each): bounds memory per group of
    #: segments, and within one long list per block of its references
    max_pairs = 1_000_000

    def __init__(self, config: "ConsensusScorer.Config"):
        if config.utility not in self.NAMES:
            raise InputError(f"mbr: the utility must be one of {', '.join(self.NAMES)}: mbr:bleu or mbr:chrf")
        self.metric, self.feature, self.temperature = config.utility, config.feature or "NMT", config.temperature
        self.algorithm = config.algorithm or "exact"

    def names(self, has_images: bool) -> List[str]:
        return [self.NAMES[self.metric]]

    def utilities(self, hypotheses, hyp, ref) -> np.ndarray:
        """float64[P] sentence utility (0-100) of ``hypotheses[hyp[k]]`` against ``hypotheses[ref[k]]``."""
        if self.metric == "bleu":
            return bleu_from_stats(pair_bleu_stats(hypotheses, hyp, ref), effective_order=True)

        chrf = ChrfMetric()
        return chrf.score(chrf.pair_stats(hypotheses, hyp, ref))

    def score(self, nbest, sources, images):
        # uniform: candidates that are samples, the Monte-Carlo estimate weighs them alike
        p = self.distribution(nbest)
        if self.algorithm == "aggregate":
            return {self.NAMES[self.metric]: self.aggregate_expected(nbest, nbest, p)}
        return self._expected(nbest, p)

    def _ids(self, texts: Sequence[str]) -> List[np.ndarray]:
        """Each text as ids: words (BLEU; the lists are tokenised text, split on whitespace)
        or characters without whitespace (chrF, as sacrebleu's default)."""
        if self.metric == "bleu":
            vocabulary: Dict[str, int] = {}
            return [
                np.array([vocabulary.setdefault(w, len(vocabulary)) for w in t.split()], dtype=np.int64) for t in texts
            ]
        return [np.array([ord(c) for c in "".join(t.split())], dtype=np.int64) for t in texts]

    def aggregate_expected(self, candidates, refs, p_refs) -> np.ndarray:
        """float64[M] utility of every candidate against its segment's aggregate reference
        (reference aggregation, Vamvas & Sennrich 2024): the pseudo-references of ``refs``
        (the same segments) averaged with ``p_refs``; sentence BLEU (effective order, the
        aggregate length as reference length) or chrF (order 6, beta 2) from the averaged
        statistics.  Equals :meth:`cross_expected` where a segment has one pseudo-reference.

        Raises:
            InputError: lists of different segment counts.
        """
        if candidates.num_segments != refs.num_segments:
            raise InputError(
                f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
            )
        order = ORDER if self.metric == "bleu" else ChrfMetric().metric.char_order
        stats = np.zeros((len(candidates.hypotheses), NUM_STATS if self.metric == "bleu" else 3 * order))
        for s in range(candidates.num_segments):
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            ids = self._ids(list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]))
            matches, totals, ref_totals = aggregate_matches(ids[: c1 - c0], ids[c1 - c0 :], p_refs[r0:r1], order)
            if self.metric == "bleu":
                stats[c0:c1, 0:REF_LEN:2], stats[c0:c1, 1:REF_LEN:2] = matches, totals
                stats[c0:c1, REF_LEN] = ref_totals[0]  # the expected reference length
            else:  # as sacrebleu: an order the reference has no n-gram of counts no hypothesis n-grams
                stats[c0:c1, 0::3] = np.where(ref_totals > 0, totals, 0.0)
                stats[c0:c1, 1::3] = ref_totals
                stats[c0:c1, 2::3] = matches
        if self.metric == "bleu":
            return bleu_from_stats(stats, effective_order=True)
        return ChrfMetric().score(stats)

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
        if candidates.num_segments != refs.num_segments:
            raise InputError(
                f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
            )
        expected = np.zeros(len(candidates.hypotheses))
        for s in range(candidates.num_segments):
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            n, m = c1 - c0, r1 - r0
            texts = list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1])
            step = max(1, self.max_pairs // n)
            for k0 in range(0, m, step):
                ref = np.repeat(np.arange(k0, min(m, k0 + step)), n)
                hyp = np.tile(np.arange(n), len(ref) // n)
                utility = self.utilities(texts, hyp, n + ref)
                if matrix is not None:
                    matrix(s, hyp, ref, utility)
                expected[c0:c1] += np.bincount(hyp, weights=p_refs[r0:r1][ref] * utility, minlength=n)
        return expected

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
                texts, weights = nbest.hypotheses[a:b], p[a:b]
                for r0 in range(0, n, step):
                    ref = np.repeat(np.arange(r0, min(n, r0 + step)), n)
                    hyp = np.tile(np.arange(n), len(ref) // n)
                    expected[a:b] += np.bincount(
                        hyp, weights=weights[ref] * self.utilities(texts, hyp, ref), minlength=n
                    )
                continue
            hyp, ref = list_pairs(nbest.offsets[first : last + 1] - a)
            expected[a:b] = np.bincount(
                hyp, weights=p[a:b][ref] * self.utilities(nbest.hypotheses[a:b], hyp, ref), minlength=b - a
            )
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
) -> Dict[str, float]:
    """Minimum Bayes-risk decoding (Kumar & Byrne 2004), exact: for every segment, the
    candidate of the highest expected ``utility`` (sentence BLEU or chrF, 0-100) against
    the pseudo-references — the candidates themselves, or the same segment of
    ``pseudo_refs_path`` (e.g. samples) — weighted by the softmax of their ``weights_from``
    column at ``temperature``, or uniformly; the first on ties.  The one engine of the
    ``mbr:`` scorer (:class:`ConsensusScorer`), so the selection is the argmax of its
    column.  Writes the selections to ``out`` and, with ``matrix_path``, every utility as
    ``segment<TAB>candidate<TAB>pseudo-reference<TAB>utility`` lines (0-based within the
    segment); both appear together or not at all.  ``algorithm="aggregate"``: each candidate
    against its segment's aggregate reference (:meth:`ConsensusScorer.aggregate_expected`;
    no matrix).  Returns {"segments", "expected"} (the mean expected utility, or aggregate
    utility, of the selections).

    Raises:
        InputError: unreadable lists, lists of different segment counts, a missing column,
            a matrix asked of the aggregate algorithm.
    """
    scorer = ConsensusScorer(ConsensusScorer.Config(utility, weights_from, temperature, algorithm))
    if algorithm == "aggregate" and matrix_path:
        raise InputError("--matrix needs --algorithm exact: the aggregate algorithm scores no pairs")
    candidates = read_nbest(candidates_path)
    refs = read_nbest(pseudo_refs_path, num_segments=candidates.num_segments) if pseudo_refs_path else candidates
    p = scorer.distribution(refs)
    with StagedOutputs() as outputs, contextlib.ExitStack() as stack:
        handle = stack.enter_context(outputs.open(matrix_path)) if matrix_path else None
        if algorithm == "aggregate":
            expected = scorer.aggregate_expected(candidates, refs, p)
        elif handle is None and refs is candidates:  # the scorer's own path: the same numbers as its column
            expected = scorer._expected(candidates, p)[scorer.names(False)[0]]
        else:

            def write(segment, hyp, ref, values):
                rows = zip(hyp.tolist(), ref.tolist(), values.tolist())
                handle.writelines(f"{segment}\t{h}\t{r}\t{v!r}\n" for h, r, v in rows)

            expected = scorer.cross_expected(candidates, refs, p, write if handle is not None else None)
        chosen = candidates.select(expected)
        with outputs.open(out) as best:
            best.writelines(candidates.hypotheses[i] + "\n" for i in chosen)
    return {"segments": candidates.num_segments, "expected": float(np.mean(expected[chosen]))}
