"""BLEU sufficient statistics (:class:`rerank.metrics.bleu.BleuMetric` is the metric over them): n-gram
matching in C, the statistics rows, corpus BLEU from summed rows, kbmira's background BLEU and BLEU+1.

Layout of a statistics row (Moses ``BleuScorer`` / ``kbmira`` order)::

    stats[k] = [m1, t1, m2, t2, m3, t3, m4, t4, r]

``m_n`` = clipped n-gram matches, ``t_n`` = hypothesis n-grams (``max(len - n + 1, 0)``),
``r`` = reference length; the hypothesis length is ``t1``.  Rows of different
hypotheses add up to corpus statistics; :func:`bleu_from_stats` turns any stack of
summed rows into BLEU exactly as sacrebleu's ``BLEU.compute_bleu`` does with its
default corpus smoothing ('exp'), which the tests check.

Tokenisation and lowercasing are sacrebleu's own (``tokenize='none'`` splits on
whitespace only, for already tokenised text such as the Multi30k ``lc.norm.tok`` files).
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor
from typing import List, Sequence, Tuple

import numpy as np
from sacrebleu.metrics import BLEU

from rerank._native import clipped_matches, cpu_count, sort_runs
from rerank.errors import InputError
from rerank.metrics.references import reference_streams

ORDER = 4
NUM_STATS = 2 * ORDER + 1
#: column of the reference length in a statistics row
REF_LEN = 2 * ORDER


def sacrebleu_metric(tokenize: str = "none", lowercase: bool = False):
    """The sacrebleu ``BLEU`` object whose tokeniser, casing and signature we follow.

    Raises:
        InputError: unknown tokeniser name.
    """
    known = list(getattr(BLEU, "TOKENIZERS", []))
    if known and tokenize not in known:
        raise InputError(f"unknown sacrebleu tokeniser {tokenize!r}; known: {', '.join(known)}")
    try:
        return BLEU(tokenize=tokenize, lowercase=lowercase, force=True)
    except Exception as err:  # sacrebleu raises a bare Exception/KeyError for unknown names
        raise InputError(f"sacrebleu tokeniser {tokenize!r}: {err}") from None


def bleu_signature(tokenize: str = "none", lowercase: bool = False, num_refs: int = 1) -> str:
    """sacrebleu's BLEU signature string for statistics computed by :func:`bleu_stats`."""
    metric = sacrebleu_metric(tokenize, lowercase)
    metric.num_refs = num_refs  # set by corpus_score() in sacrebleu; we score without it
    return str(metric.get_signature())


_WARNED_TOKENISED: List[bool] = []


def warn_if_tokenised(hypotheses: Sequence[str], tokenize: str, say=None) -> bool:
    """sacrebleu's check for tokenised input: when a tokeniser other than ``none`` meets
    at least 100 hypotheses ending in a tokenised period (``" ."``), say once per process
    (stderr, or ``say``) that the text looks tokenised and ``--tokenize none`` scores it as
    it is.  Returns whether it warned now."""
    if tokenize == "none" or _WARNED_TOKENISED:
        return False
    count = sum(1 for h in hypotheses if h.endswith(" ."))
    if count < 100:
        return False
    _WARNED_TOKENISED.append(True)
    text = (
        f"rerank: warning: {count} of {len(hypotheses)} hypotheses end in a tokenised period (' .'): the text "
        f"looks tokenised, and BLEU's {tokenize!r} tokeniser tokenises it again; give --tokenize none "
        "(tokenize='none') to score tokenised text as it is (sacrebleu warns the same)"
    )
    (say or (lambda line: print(line, file=sys.stderr)))(text)
    return True


#: sacrebleu's default BLEU tokeniser: the one default of every verb (tune, crossfit,
#: oracle, eval, signif, report); already tokenised text such as Multi30k's ``lc.norm.tok``
#: files is scored with ``none`` (whitespace only), as the pipelines pass explicitly
DEFAULT_TOKENIZE = "13a"


def _token_ids(lines: Sequence[str], vocab: dict, tokenize: str, lowercase: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Flatten tokenised lines into (ids int64[L], lengths int64[len(lines)]); extends ``vocab``."""
    tokenizer = None if tokenize == "none" else sacrebleu_metric(tokenize, lowercase).tokenizer
    if lowercase:
        lines = [line.lower() for line in lines]
    if tokenizer is not None:
        lines = [tokenizer(line.rstrip()) for line in lines]
    if len(lines) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    # one C-level split of the whole text; a sentinel token marks the line ends
    text = " \x00 ".join(lines)
    if "\x00" in text.replace(" \x00 ", " "):
        raise InputError("text contains NUL characters")
    tokens = text.split()
    tokens.append("\x00")
    for token in dict.fromkeys(tokens):  # C-speed de-duplication, first-seen order
        vocab.setdefault(token, len(vocab))
    all_ids = np.fromiter(map(vocab.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    is_end = all_ids == vocab["\x00"]
    ends = np.flatnonzero(is_end)
    lengths = np.diff(np.concatenate([[-1], ends])) - 1
    ids = all_ids[~is_end]
    return ids, lengths


def ngram_codes(ids: np.ndarray, lengths: np.ndarray, vocab_size: int, orders: int = ORDER) -> np.ndarray:
    """int64[orders, L] exact codes of the n-gram starting at each token (-1 where it would
    cross the end of its line).  Token ids are packed ``bit_length(vocab_size)`` bits each
    when ``orders`` of them fit in 63 bits; otherwise each order's codes are densely
    re-ranked with ``np.unique``."""
    L = len(ids)
    starts = np.cumsum(lengths) - lengths
    remaining = np.repeat(lengths, lengths) - (np.arange(L) - np.repeat(starts, lengths))
    codes = np.full((orders, L), -1, dtype=np.int64)
    codes[0] = ids
    bits = max(int(vocab_size).bit_length(), 1)
    packed = bits * orders <= 63
    for n in range(1, orders):
        at = np.flatnonzero(remaining > n)
        if packed:
            codes[n, at] = (codes[n - 1, at] << bits) | ids[at + n]
        else:
            raw = codes[n - 1, at] * vocab_size + ids[at + n]
            codes[n, at] = np.unique(raw, return_inverse=True)[1].reshape(-1)
    return codes


def pair_matches(
    ids: np.ndarray, lengths: np.ndarray, vocab_size: int, hyp_index: np.ndarray, ref_index: np.ndarray, orders: int
) -> np.ndarray:
    """Clipped n-gram matches (orders 1..``orders``) of text ``hyp_index[k]`` against text
    ``ref_index[k]`` for every pair k, the texts given flat as token ``ids`` (int[L]) and
    ``lengths`` (int[T]).  Clipped matches are symmetric (sum of min counts), so each
    distinct unordered pair is matched once; each text's codes are sorted once and merged
    per pair (``rerank/_kernels.c``), in chunks of about :data:`CHUNK_WORK` code comparisons
    so that Ctrl-C stops a long call within a fraction of a second (the kernel runs without
    the GIL and cannot see the signal).  Returns float64[K, orders]."""

    codes = ngram_codes(ids, lengths, vocab_size, orders)
    starts = np.cumsum(lengths) - lengths
    sort_runs(codes, starts, lengths)
    lo = np.minimum(hyp_index, ref_index).astype(np.int64)
    hi = np.maximum(hyp_index, ref_index).astype(np.int64)
    keys, where = np.unique(hi * len(lengths) + lo, return_inverse=True)  # sorted by the reference (hi)
    a, b = keys % len(lengths), keys // len(lengths)
    work = np.cumsum((lengths[a] + lengths[b]) * orders)
    edges = [0, *np.searchsorted(work, np.arange(CHUNK_WORK, work[-1] if len(work) else 0, CHUNK_WORK)), len(keys)]
    parts = [_chunk_matches(codes, starts, lengths, a[lo:hi], b[lo:hi]) for lo, hi in zip(edges, edges[1:]) if hi > lo]
    matches = np.concatenate(parts) if parts else np.zeros((0, orders))
    return matches[where.reshape(-1)]


#: code comparisons of one call of the matching kernel (about 0.2 s on one CPU): between
#: calls Python sees Ctrl-C
CHUNK_WORK = 50_000_000


def _chunk_matches(codes, starts, lengths, a, b) -> np.ndarray:
    """:func:`pair_matches` of the pairs (``a[k]``, ``b[k]``): the C kernel runs without the
    GIL, so blocks of pairs go to the CPUs side by side."""
    workers = min(cpu_count(), max(1, len(a) // 20_000))
    if workers == 1:
        return clipped_matches(codes, starts[a], lengths[a], starts, lengths, b, presorted=True)
    cuts = np.linspace(0, len(a), workers + 1).astype(np.int64)
    with ThreadPoolExecutor(workers) as pool:
        parts = pool.map(
            lambda k: clipped_matches(
                codes,
                starts[a[cuts[k] : cuts[k + 1]]],
                lengths[a[cuts[k] : cuts[k + 1]]],
                starts,
                lengths,
                b[cuts[k] : cuts[k + 1]],
                presorted=True,
            ),
            range(workers),
        )
        return np.concatenate(list(parts))


def pair_bleu_stats(
    texts: Sequence[str], hyp_index: np.ndarray, ref_index: np.ndarray, tokenize: str = "none", lowercase: bool = False
) -> np.ndarray:
    """BLEU statistics of ``texts[hyp_index[k]]`` against ``texts[ref_index[k]]`` for every
    pair k (e.g. all ordered pairs of each n-best list, for consensus / MBR features).

    Args:
        texts: T strings.
        hyp_index, ref_index: int[K] indices into ``texts``; pairs sharing a reference
            should be adjacent (sorted by ``ref_index``) for speed.
        tokenize, lowercase: as :func:`bleu_stats`.
    Returns:
        float64[K, 9] statistics rows (layout in the module docstring).
    """
    hyp_index = np.asarray(hyp_index, dtype=np.int64)
    ref_index = np.asarray(ref_index, dtype=np.int64)
    vocab: dict = {}
    ids, lengths = _token_ids(texts, vocab, tokenize, lowercase)
    if not len(hyp_index):
        return np.zeros((0, NUM_STATS))
    matches = pair_matches(ids, lengths, len(vocab), hyp_index, ref_index, ORDER)
    return bleu_stats_from_matches(matches, lengths[hyp_index], lengths[ref_index])


def bleu_stats_from_matches(matches: np.ndarray, hyp_len: np.ndarray, ref_len: np.ndarray) -> np.ndarray:
    """float64[..., 9] BLEU statistics rows (layout in the module docstring) of clipped
    matches float[..., ORDER] (orders 1..4) of hypotheses of ``hyp_len`` words against
    references of ``ref_len`` (float: an expected length for an aggregate reference),
    vectorised over leading axes."""
    matches = np.asarray(matches, dtype=np.float64)
    hyp_len = np.asarray(hyp_len, dtype=np.float64)
    stats = np.empty(matches.shape[:-1] + (NUM_STATS,))
    stats[..., 0:REF_LEN:2] = matches
    for n in range(1, ORDER + 1):
        stats[..., 2 * n - 1] = np.maximum(hyp_len - n + 1, 0)
    stats[..., REF_LEN] = ref_len
    return stats


def bleu_stats(
    hypotheses: Sequence[str],
    references: Sequence[str],
    segment: np.ndarray,
    tokenize: str = "none",
    lowercase: bool = False,
) -> np.ndarray:
    """Per-hypothesis BLEU sufficient statistics.

    Args:
        hypotheses: M hypothesis strings.
        references: N reference strings (one reference per segment), or R streams of N
            (several references, sacrebleu's ``[refs_a, refs_b]``; :func:`reference_streams`).
        segment: int[M], the segment (0..N-1) of each hypothesis.
        tokenize: sacrebleu tokeniser name ('none', '13a', 'intl', ...).
        lowercase: lowercase before tokenising, as sacrebleu's ``lowercase=True``.
    Returns:
        float64[M, 9] statistics rows (layout in the module docstring).
    Raises:
        ValueError: ``segment`` has the wrong shape or an id outside 0..N-1.

    n-grams are compared exactly through integer codes (:func:`ngram_codes`); clipped
    counts come from merging each hypothesis's sorted codes with its reference's, in
    compiled C (``rerank/_kernels.c``), O(L log L) per hypothesis.
    """
    segment = np.ascontiguousarray(segment, dtype=np.int64)
    streams = reference_streams(references)
    M, N = len(hypotheses), len(streams[0])
    if segment.shape != (M,):
        raise ValueError(f"segment has shape {segment.shape}, expected ({M},)")
    if M and (segment.min() < 0 or segment.max() >= N):
        raise ValueError("segment ids outside 0..N-1")
    vocab: dict = {}
    h_ids, h_len = _token_ids(hypotheses, vocab, tokenize, lowercase)
    refs = [_token_ids(stream, vocab, tokenize, lowercase) for stream in streams]
    stats = np.zeros((M, NUM_STATS), dtype=np.float64)
    for n in range(1, ORDER + 1):
        stats[:, 2 * n - 1] = np.maximum(h_len - n + 1, 0)
    if not M:
        return stats
    if len(streams) == 1:
        r_ids, r_len = refs[0]
        codes = ngram_codes(np.concatenate([h_ids, r_ids]), np.concatenate([h_len, r_len]), len(vocab))
        h_start = np.cumsum(h_len) - h_len
        r_start = len(h_ids) + np.cumsum(r_len) - r_len
        stats[:, 0:REF_LEN:2] = clipped_matches(codes, h_start, h_len, r_start, r_len, segment)
        stats[:, REF_LEN] = r_len[segment]
        return stats
    # several references (sacrebleu's rule): each n-gram clipped by its largest count in any
    # reference of the segment; reference length the closest to the hypothesis's, the
    # shorter on ties
    ids = np.concatenate([h_ids] + [r for r, _ in refs])
    lengths = np.concatenate([h_len] + [length for _, length in refs])
    codes = ngram_codes(ids, lengths, len(vocab))
    merged, m_len = _merged_references(codes[:, len(h_ids) :], [length for _, length in refs], N)
    h_start = np.cumsum(h_len) - h_len
    m_start = len(h_ids) + np.cumsum(m_len) - m_len
    stats[:, 0:REF_LEN:2] = clipped_matches(
        np.ascontiguousarray(np.concatenate([codes[:, : len(h_ids)], merged], axis=1)),
        h_start,
        h_len,
        m_start,
        m_len,
        segment,
    )
    ref_len = np.stack([length for _, length in refs])[:, segment]  # (R, M)
    distance = np.abs(ref_len - h_len[None, :])
    best = np.lexsort((ref_len, distance), axis=0)[0]  # smallest distance, then the shorter
    stats[:, REF_LEN] = ref_len[best, np.arange(M)]
    return stats


def _merged_references(codes: np.ndarray, lengths: Sequence[np.ndarray], segments: int):
    """One synthetic run of n-gram codes per segment holding, for every order, each n-gram
    of the segment's references as often as the reference that has it most often: the
    clipping counts of several references, in the layout :func:`clipped_matches` reads
    (row n of a run of length L: its first L − n codes; the rest padded with −2, which no
    hypothesis code equals).

    Args:
        codes: int64[ORDER, L] the references' codes, stream after stream, segment after
            segment within a stream (``ngram_codes`` of their tokens).
        lengths: R int arrays (N,) of token counts, one per stream.
    Returns:
        (int64[ORDER, T] the runs, int64[N] their lengths).
    """
    R = len(lengths)
    seg_of_token = np.concatenate([np.repeat(np.arange(segments), length) for length in lengths])
    ref_of_token = np.repeat(np.arange(R), [int(length.sum()) for length in lengths])
    per_order = []
    for n in range(codes.shape[0]):
        valid = codes[n] >= 0
        seg, ref, code = seg_of_token[valid], ref_of_token[valid], codes[n][valid]
        # count of each (segment, code) in each reference, then the max over references
        keys, counts = np.unique(np.stack([seg, code, ref]), axis=1, return_counts=True)
        sc = keys[:2]
        first = np.r_[True, np.any(sc[:, 1:] != sc[:, :-1], axis=0)]
        group = np.cumsum(first) - 1
        maximum = np.zeros(int(group[-1]) + 1 if len(group) else 0, dtype=np.int64)
        np.maximum.at(maximum, group, counts)
        unique = sc[:, first]
        per_order.append((np.repeat(unique[0], maximum), np.repeat(unique[1], maximum)))
    sizes = np.stack([np.bincount(seg, minlength=segments) for seg, _ in per_order])  # (ORDER, N)
    run = (sizes + np.arange(codes.shape[0])[:, None]).max(axis=0)
    run = np.maximum(run, 1)
    start = np.cumsum(run) - run
    out = np.full((codes.shape[0], int(run.sum())), -2, dtype=np.int64)
    for n, (seg, code) in enumerate(per_order):
        order = np.argsort(seg, kind="stable")
        seg, code = seg[order], code[order]
        offset = np.arange(len(seg)) - np.repeat(np.cumsum(sizes[n]) - sizes[n], sizes[n])
        out[n, start[seg] + offset] = code
    return out, run.astype(np.int64)


def bleu_from_stats(stats: np.ndarray, effective_order: bool = False) -> np.ndarray:
    """BLEU (0-100) of summed statistics rows, vectorised over leading axes.

    Follows sacrebleu 2.x ``BLEU.compute_bleu`` with ``smooth_method='exp'`` (its default):
    brevity penalty ``exp(1 - r/c)`` for ``c < r`` (0 if ``c == 0``); precision of an order
    with zero matches is ``100 / (2^k · t_n)`` (k-th such order); BLEU is 0 when no order
    has a match.  Without ``effective_order`` (corpus BLEU) it is also 0 when some order
    has no hypothesis n-gram; with it (sacrebleu's sentence BLEU,
    ``BLEU(effective_order=True).sentence_score``) the geometric mean runs over the
    orders that have hypothesis n-grams.

    Args:
        stats: float[..., 9] summed statistics.
        effective_order: sacrebleu's ``effective_order``.
    Returns:
        float64[...] BLEU scores.
    """
    stats = np.asarray(stats, dtype=np.float64)
    matches, totals = stats[..., 0:REF_LEN:2], stats[..., 1:REF_LEN:2]
    sys_len, ref_len = totals[..., 0], stats[..., REF_LEN]
    present = totals > 0  # n-gram totals never grow with n: the orders present are a prefix
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1.0 - ref_len / sys_len), 0.0), 1.0)
        zero = (matches == 0) & present
        smooth = np.power(2.0, np.cumsum(zero, axis=-1))
        precision = np.where(zero, 100.0 / (smooth * totals), 100.0 * matches / totals)
        log_p = np.where(present, np.log(np.where(present, precision, 1.0)), 0.0)
        if effective_order:
            log_mean = log_p.sum(axis=-1) / np.maximum(present.sum(axis=-1), 1)
        else:
            log_mean = log_p.mean(axis=-1)
        score = bp * np.exp(log_mean)
    dead = ~np.any(matches > 0, axis=-1)
    if not effective_order:
        dead |= np.any(~present, axis=-1)
    return np.where(dead, 0.0, score)


def sacrebleu_score(stats_sum: np.ndarray, tokenize: str = "none", lowercase: bool = False):
    """sacrebleu ``BLEUScore`` (with its ``format()``) for one summed statistics row."""
    s = np.asarray(stats_sum, dtype=np.float64)
    return BLEU.compute_bleu(
        correct=[int(x) for x in s[0:REF_LEN:2]],
        total=[int(x) for x in s[1:REF_LEN:2]],
        sys_len=int(s[1]),
        ref_len=int(s[REF_LEN]),
        smooth_method="exp",
    )


def background_sentence_bleu(stats: np.ndarray, background: np.ndarray) -> np.ndarray:
    """kbmira's sentence BLEU against a background pseudo-document, vectorised.

    Moses ``BleuScorer::sentenceLevelBackgroundBleu`` (Cherry & Foster 2012; Chiang et
    al. 2008): add the background statistics to each row, take unsmoothed log BLEU with
    the brevity term ``min(0, 1 - r/t1)``, and scale ``exp`` of it by the summed reference
    length ``r``.  Args: stats float[..., 9], background float[9].  Returns float64[...].
    The MIRA kernel (``rerank/_kernels.c``) computes the same quantity inside its loop.
    """
    s = np.asarray(stats, dtype=np.float64) + np.asarray(background, dtype=np.float64)
    log_bleu = (np.log(s[..., 0:REF_LEN:2]) - np.log(s[..., 1:REF_LEN:2])).mean(axis=-1)
    log_bleu += np.minimum(0.0, 1.0 - s[..., REF_LEN] / s[..., 1])
    return np.exp(log_bleu) * s[..., REF_LEN]


def bleu_plus_one(stats: np.ndarray) -> np.ndarray:
    """Sentence-BLEU+1 (0-1) of statistics rows float[..., 9], vectorised: Moses
    ``sentenceLevelBleuPlusOne`` (Lin & Och 2004's add-one smoothing on every order)."""
    s = np.asarray(stats, dtype=np.float64)
    log_p = (np.log(s[..., 0:REF_LEN:2] + 1.0) - np.log(s[..., 1:REF_LEN:2] + 1.0)).sum(axis=-1) / ORDER
    with np.errstate(divide="ignore", invalid="ignore"):
        brevity = np.where(s[..., 1] > 0, 1.0 - s[..., REF_LEN] / s[..., 1], -np.inf)
    return np.exp(log_p + np.minimum(0.0, brevity))
