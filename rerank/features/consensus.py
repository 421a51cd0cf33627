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
from rerank.metrics.ter import TerMetric
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
    ids: np.ndarray, lengths: np.ndarray, segment: np.ndarray, weight: np.ndarray, order: int
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """n-gram statistics of texts against their segment's aggregate reference (Vamvas &
    Sennrich 2024): the n-gram counts of the segment's references averaged with their weights.
    Vectorised over all the texts given (every segment at once).

    Args:
        ids: int64[L] the token (or character) ids of every text, one after the other.
        lengths: int64[T] each text's length in ``ids``.
        segment: int64[T] each text's segment (any integers; texts of a segment share one aggregate).
        weight: float64[T] a reference's weight within its segment (summing to 1), or -1 for a
            candidate (a text that is scored, not aggregated; a text can be both only by
            appearing twice).
        order: the highest n-gram order.
    Returns:
        (matches float64[T, order]: for a candidate, the sum over its n-grams g of
        min(count(g), aggregate(g)), else 0; n-grams float64[T, order]: max(len - n + 1, 0);
        aggregate reference n-grams float64[T, order]: the weighted mean of its segment's
        references' n-gram counts, per text).  Memory is linear in the n-grams.
    """
    count = len(lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    candidate = weight < 0
    matches, totals, ref_totals = np.zeros((count, order)), np.zeros((count, order)), np.zeros((count, order))
    _, segment = np.unique(segment, return_inverse=True)
    segments = int(segment.max()) + 1 if count else 0
    for n in range(1, order + 1):
        windows = np.maximum(lengths - n + 1, 0)
        totals[:, n - 1] = windows
        ref_totals[:, n - 1] = np.bincount(
            segment[~candidate], weights=weight[~candidate] * windows[~candidate], minlength=segments
        )[segment]
        total = int(windows.sum())
        if not total:
            continue
        owner = np.repeat(np.arange(count), windows)
        position = np.repeat(starts, windows) + np.arange(total) - np.repeat(np.cumsum(windows) - windows, windows)
        grams = np.column_stack([segment[owner], ids[position[:, None] + np.arange(n)]])
        _, code = np.unique(grams, axis=0, return_inverse=True)
        code = code.reshape(-1)
        distinct = int(code.max()) + 1
        is_ref = ~candidate[owner]
        aggregate = np.bincount(code[is_ref], weights=weight[owner[is_ref]], minlength=distinct)
        # each candidate's count of each of its n-grams, clipped by its segment's aggregate
        keys, per_key = np.unique(owner[~is_ref] * distinct + code[~is_ref], return_counts=True)
        matches[:, n - 1] = np.bincount(
            keys // distinct, weights=np.minimum(per_key, aggregate[keys % distinct]), minlength=count
        )
    return matches, totals, ref_totals


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
            "exact (every pair) or aggregate (one aggregate reference per segment: Vamvas & Sennrich 2024)",
            choices=("exact", "aggregate"),
        )

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
        if self.metric == "ter" and self.algorithm == "aggregate":
            raise InputError("mbr: aggregate needs an n-gram utility (bleu or chrf); TER has no aggregate reference")

    def names(self, has_images: bool) -> List[str]:
        return [self.NAMES[self.metric]]

    def utilities(self, hypotheses, hyp, ref) -> np.ndarray:
        """float64[P] sentence utility of ``hypotheses[hyp[k]]`` against ``hypotheses[ref[k]]``:
        BLEU or chrF (0-100), or minus sentence TER (sacrebleu's tokenisation and edit
        counts, :class:`rerank.metrics.ter.TerMetric`; ≤ 0, higher is better)."""
        if self.metric == "bleu":
            return bleu_from_stats(pair_bleu_stats(hypotheses, hyp, ref), effective_order=True)
        if self.metric == "ter":
            ter = TerMetric()
            return -ter.score(ter.pair_stats(hypotheses, hyp, ref))

        chrf = ChrfMetric()
        return chrf.score(chrf.pair_stats(hypotheses, hyp, ref))

    def score(self, nbest, sources, images):
        # uniform: candidates that are samples, the Monte-Carlo estimate weighs them alike
        p = self.distribution(nbest)
        if self.algorithm == "aggregate":
            return {self.NAMES[self.metric]: self.aggregate_expected(nbest, nbest, p)}
        return self._expected(nbest, p)

    def _ids(self, texts: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(int64[L] ids, int64[T] lengths) of ``texts``: words (BLEU; the lists are tokenised
        text, split on whitespace) or characters without whitespace (chrF, as sacrebleu's default)."""
        if self.metric == "bleu":
            words = [t.split() for t in texts]
            lengths = np.array([len(w) for w in words], dtype=np.int64)
            flat = [w for ws in words for w in ws]
            ids = np.unique(np.array(flat, dtype=object), return_inverse=True)[1] if flat else np.zeros(0)
            return np.asarray(ids, dtype=np.int64).reshape(-1), lengths
        stripped = ["".join(t.split()) for t in texts]
        lengths = np.array([len(t) for t in stripped], dtype=np.int64)
        return np.frombuffer("".join(stripped).encode("utf-32-le"), dtype=np.uint32).astype(np.int64), lengths

    #: hypotheses (candidates and pseudo-references) aggregated at once: bounds the n-gram arrays
    aggregate_block = 20_000

    def aggregate_expected(self, candidates, refs, p_refs) -> np.ndarray:
        """float64[M] utility of every candidate against its segment's aggregate reference
        (reference aggregation, Vamvas & Sennrich 2024): the pseudo-references of ``refs``
        (the same segments) averaged with ``p_refs``; sentence BLEU (effective order, the
        aggregate length as reference length) or chrF (order 6, beta 2) from the averaged
        statistics.  Equals :meth:`cross_expected` where a segment has one pseudo-reference.
        Vectorised over blocks of segments (about ``aggregate_block`` hypotheses each).

        Raises:
            InputError: lists of different segment counts.
        """
        if candidates.num_segments != refs.num_segments:
            raise InputError(
                f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
            )
        order = ORDER if self.metric == "bleu" else ChrfMetric().metric.char_order
        stats = np.zeros((len(candidates.hypotheses), NUM_STATS if self.metric == "bleu" else 3 * order))
        sizes = np.diff(candidates.offsets) + np.diff(refs.offsets)
        for first, last in cost_ranges(np.cumsum(sizes), self.aggregate_block):
            c0, c1 = int(candidates.offsets[first]), int(candidates.offsets[last])
            r0, r1 = int(refs.offsets[first]), int(refs.offsets[last])
            texts = list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1])
            segment = np.concatenate(
                [
                    np.repeat(np.arange(first, last), np.diff(candidates.offsets[first : last + 1])),
                    np.repeat(np.arange(first, last), np.diff(refs.offsets[first : last + 1])),
                ]
            )
            weight = np.concatenate([-np.ones(c1 - c0), p_refs[r0:r1]])
            ids, lengths = self._ids(texts)
            matches, totals, ref_totals = aggregate_matches(ids, lengths, segment, weight, order)
            matches, totals, ref_totals = matches[: c1 - c0], totals[: c1 - c0], ref_totals[: c1 - c0]
            if self.metric == "bleu":
                stats[c0:c1, 0:REF_LEN:2], stats[c0:c1, 1:REF_LEN:2] = matches, totals
                stats[c0:c1, REF_LEN] = ref_totals[:, 0]  # the expected reference length
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

    def pruned_select(
        self,
        candidates,
        refs,
        p_refs,
        alpha: float = 0.99,
        schedule: Sequence[int] = (8, 16, 32, 64, 128, 256, 512, 1024),
        bootstrap: int = 500,
        seed: int = 1,
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
            seed: of the draws and resamples.
        Returns:
            (int64[N] selected candidate rows, number of utilities computed).
        Raises:
            InputError: lists of different segment counts, alpha outside (0, 1].
        """
        if not 0 < alpha <= 1:
            raise InputError(f"the pruning confidence alpha must be in (0, 1], not {alpha}")
        if candidates.num_segments != refs.num_segments:
            raise InputError(
                f"{refs.num_segments} segments of pseudo-references but {candidates.num_segments} of candidates"
            )
        rng = np.random.default_rng(seed)
        chosen = np.zeros(candidates.num_segments, dtype=np.int64)
        computed = 0
        for s in range(candidates.num_segments):
            c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
            r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
            n, m = c1 - c0, r1 - r0
            weights = p_refs[r0:r1]
            if np.allclose(weights, weights[0]):
                order = rng.permutation(m)
            else:
                order = rng.choice(m, size=m, p=weights / weights.sum())
            texts = list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1])
            alive = np.arange(n)
            table = np.zeros((n, m))  # utilities of candidate i against the k-th drawn reference
            drawn = 0
            for size in [k for k in schedule if k < m] + [m]:
                new = np.arange(drawn, size)
                hyp = np.repeat(alive, len(new))
                col = np.tile(new, len(alive))
                table[hyp, col] = self.utilities(texts, hyp, n + order[col])
                computed += len(hyp)
                drawn = size
                if len(alive) == 1 or size == m or alpha == 1:
                    continue
                means = table[alive, :drawn].mean(axis=1)
                best = alive[int(np.argmax(means))]
                resample = rng.integers(0, drawn, size=(bootstrap, drawn))
                target = table[best][resample].mean(axis=1)  # [bootstrap]
                wins = np.concatenate(  # a block of candidates at a time: [block, bootstrap, drawn] floats
                    [
                        (table[block][:, resample].mean(axis=2) >= target).mean(axis=1)
                        for block in np.array_split(alive, max(1, len(alive) * bootstrap * drawn // 4_000_000))
                    ]
                )
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
    alpha: float = 0.99,
    seed: int = 1,
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
    no matrix); ``"pruned"``: confidence-based pruning at ``alpha`` and ``seed``
    (:meth:`ConsensusScorer.pruned_select`; no matrix).  Returns {"segments", "expected"
    (the mean expected utility, or aggregate utility, of the selections; pruned: none),
    "utilities" (how many were computed)}.

    Raises:
        InputError: unreadable lists, lists of different segment counts, a missing column,
            a matrix asked of the aggregate algorithm.
    """
    scorer = ConsensusScorer(
        ConsensusScorer.Config(utility, weights_from, temperature, "aggregate" if algorithm == "aggregate" else "exact")
    )
    if algorithm != "exact" and matrix_path:
        raise InputError(f"--matrix needs --algorithm exact: the {algorithm} algorithm scores no full matrix")
    candidates = read_nbest(candidates_path)
    refs = read_nbest(pseudo_refs_path, num_segments=candidates.num_segments) if pseudo_refs_path else candidates
    p = scorer.distribution(refs)
    with StagedOutputs() as outputs, contextlib.ExitStack() as stack:
        handle = stack.enter_context(outputs.open(matrix_path)) if matrix_path else None
        if algorithm == "pruned":
            chosen, computed = scorer.pruned_select(candidates, refs, p, alpha=alpha, seed=seed)
            with outputs.open(out) as best:
                best.writelines(candidates.hypotheses[i] + "\n" for i in chosen)
            return {"segments": candidates.num_segments, "expected": float("nan"), "utilities": computed}
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
    counts = np.diff(candidates.offsets) * (np.diff(refs.offsets) if algorithm == "exact" else 1)
    return {
        "segments": candidates.num_segments,
        "expected": float(np.mean(expected[chosen])),
        "utilities": int(counts.sum()),
    }
