"""BLEU sufficient statistics: the one layer that tuning, oracle and evaluation share.

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

from typing import List, Sequence, Tuple

import numpy as np

ORDER = 4
NUM_STATS = 2 * ORDER + 1
#: column of the reference length in a statistics row
REF_LEN = 2 * ORDER


def sacrebleu_metric(tokenize: str = "none", lowercase: bool = False):
    """The sacrebleu ``BLEU`` object whose tokeniser, casing and signature we follow.

    Raises:
        InputError: unknown tokeniser name.
    """
    from sacrebleu.metrics import BLEU

    from rerank.errors import InputError

    try:
        return BLEU(tokenize=tokenize, lowercase=lowercase, force=True)
    except Exception as err:  # sacrebleu raises a bare Exception/KeyError for unknown names
        raise InputError(f"unknown sacrebleu tokeniser {tokenize!r}: {err}") from None


def bleu_signature(tokenize: str = "none", lowercase: bool = False, num_refs: int = 1) -> str:
    """sacrebleu's BLEU signature string for statistics computed by :func:`bleu_stats`."""
    metric = sacrebleu_metric(tokenize, lowercase)
    metric.num_refs = num_refs  # set by corpus_score() in sacrebleu; we score without it
    return str(metric.get_signature())


def _token_ids(lines: Sequence[str], vocab: dict, tokenize: str, lowercase: bool) -> Tuple[np.ndarray, np.ndarray]:
    """Flatten tokenised lines into (ids int64[L], lengths int64[len(lines)])."""
    tokenizer = None if tokenize == "none" else sacrebleu_metric(tokenize, lowercase).tokenizer
    ids: List[int] = []
    lengths = np.empty(len(lines), dtype=np.int64)
    setdefault = vocab.setdefault
    for k, line in enumerate(lines):
        line = line.rstrip()
        if lowercase:
            line = line.lower()
        if tokenizer is not None:
            line = tokenizer(line)
        tokens = line.split()
        lengths[k] = len(tokens)
        ids.extend([setdefault(t, len(vocab)) for t in tokens])
    return np.asarray(ids, dtype=np.int64), lengths


def bleu_stats(hypotheses: Sequence[str], references: Sequence[str], segment: np.ndarray,
               tokenize: str = "none", lowercase: bool = False) -> np.ndarray:
    """Per-hypothesis BLEU sufficient statistics, vectorised over all hypotheses.

    Args:
        hypotheses: M hypothesis strings.
        references: N reference strings (one reference per segment).
        segment: int[M], the segment (0..N-1) of each hypothesis.
        tokenize: sacrebleu tokeniser name ('none', '13a', 'intl', ...).
        lowercase: lowercase before tokenising, as sacrebleu's ``lowercase=True``.
    Returns:
        float64[M, 9] statistics rows (layout in the module docstring).

    n-grams are compared exactly: each order's n-grams are ranked into dense integer
    codes (``np.unique``), so no hashing and no Python loop over n-grams.
    """
    segment = np.asarray(segment, dtype=np.int64)
    M, N = len(hypotheses), len(references)
    if segment.shape != (M,):
        raise ValueError(f"segment has shape {segment.shape}, expected ({M},)")
    vocab: dict = {}
    h_ids, h_len = _token_ids(hypotheses, vocab, tokenize, lowercase)
    r_ids, r_len = _token_ids(references, vocab, tokenize, lowercase)
    V = max(len(vocab), 1)
    # one token stream: hypotheses first, then references; owner = row index in its own table
    ids = np.concatenate([h_ids, r_ids])
    is_hyp = np.zeros(len(ids), dtype=bool)
    is_hyp[: len(h_ids)] = True
    lengths = np.concatenate([h_len, r_len])
    owner_all = np.repeat(np.arange(M + N), lengths)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    pos = np.arange(len(ids)) - np.repeat(starts, lengths)
    remaining = np.repeat(lengths, lengths) - pos  # tokens from this position to the end of its line

    stats = np.zeros((M, NUM_STATS), dtype=np.float64)
    stats[:, REF_LEN] = r_len[segment] if M else 0
    code = ids.copy()  # dense code of the n-gram starting at each position (valid where remaining >= n)
    for n in range(1, ORDER + 1):
        stats[:, 2 * (n - 1) + 1] = np.maximum(h_len - n + 1, 0)
        valid = remaining >= n
        if n > 1:
            prev_valid = np.flatnonzero(valid)
            raw = code[prev_valid] * V + ids[prev_valid + n - 1]
            _, dense = np.unique(raw, return_inverse=True)
            code = np.full(len(ids), -1, dtype=np.int64)
            code[prev_valid] = dense
        at = np.flatnonzero(valid)
        if len(at) == 0:
            break
        C = int(code[at].max()) + 1
        owner = owner_all[at]
        hyp_at = is_hyp[at]
        # hypothesis n-gram counts per (hypothesis, code)
        h_key, h_cnt = np.unique(owner[hyp_at] * C + code[at][hyp_at], return_counts=True)
        # reference n-gram counts per (segment, code); reference owners are offset by M
        r_key, r_cnt = np.unique((owner[~hyp_at] - M) * C + code[at][~hyp_at], return_counts=True)
        if len(h_key) == 0:
            continue
        h_row, h_code = np.divmod(h_key, C)
        query = segment[h_row] * C + h_code
        where = np.searchsorted(r_key, query)
        where_c = np.minimum(where, max(len(r_key) - 1, 0))
        found = (where < len(r_key)) & (r_key[where_c] == query) if len(r_key) else np.zeros(len(query), bool)
        ref_cnt = np.where(found, r_cnt[where_c] if len(r_key) else 0, 0)
        stats[:, 2 * (n - 1)] = np.bincount(h_row, weights=np.minimum(h_cnt, ref_cnt), minlength=M)
    return stats


def bleu_from_stats(stats: np.ndarray) -> np.ndarray:
    """Corpus BLEU (0-100) of summed statistics rows, vectorised over leading axes.

    Follows sacrebleu 2.x ``BLEU.compute_bleu`` with ``smooth_method='exp'`` (its corpus
    default): brevity penalty ``exp(1 - r/c)`` for ``c < r`` (0 if ``c == 0``); precision of
    an order with zero matches is ``100 / (2^k · t_n)`` (k-th such order); BLEU is 0 when no
    order has a match or some order has no hypothesis n-gram.

    Args:
        stats: float[..., 9] summed statistics.
    Returns:
        float64[...] BLEU scores.
    """
    stats = np.asarray(stats, dtype=np.float64)
    matches, totals = stats[..., 0:REF_LEN:2], stats[..., 1:REF_LEN:2]
    sys_len, ref_len = totals[..., 0], stats[..., REF_LEN]
    with np.errstate(divide="ignore", invalid="ignore"):
        bp = np.where(sys_len < ref_len, np.where(sys_len > 0, np.exp(1.0 - ref_len / sys_len), 0.0), 1.0)
        zero = matches == 0
        smooth = np.power(2.0, np.cumsum(zero, axis=-1))
        precision = np.where(zero, 100.0 / (smooth * totals), 100.0 * matches / totals)
        log_mean = np.log(precision).mean(axis=-1)
        score = bp * np.exp(log_mean)
    dead = (~np.any(matches > 0, axis=-1)) | np.any(totals == 0, axis=-1)
    return np.where(dead, 0.0, score)


def sacrebleu_score(stats_sum: np.ndarray, tokenize: str = "none", lowercase: bool = False):
    """sacrebleu ``BLEUScore`` (with its ``format()``) for one summed statistics row."""
    from sacrebleu.metrics import BLEU

    s = np.asarray(stats_sum, dtype=np.float64)
    return BLEU.compute_bleu(correct=[int(x) for x in s[0:REF_LEN:2]], total=[int(x) for x in s[1:REF_LEN:2]],
                             sys_len=int(s[1]), ref_len=int(s[REF_LEN]), smooth_method="exp")


def background_sentence_bleu(stats: np.ndarray, background: np.ndarray) -> np.ndarray:
    """kbmira's sentence BLEU against a background pseudo-document, vectorised.

    Moses ``BleuScorer::sentenceLevelBackgroundBleu`` (Cherry & Foster 2012; Chiang et
    al. 2008): add the background statistics to each row, take unsmoothed log BLEU with
    the brevity term ``min(0, 1 - r/t1)``, and scale ``exp`` of it by the summed reference
    length ``r``.  Args: stats float[..., 9], background float[9].  Returns float64[...].
    The MIRA kernel (``mira.kbmira``) computes the same quantity inside its compiled loop.
    """
    s = np.asarray(stats, dtype=np.float64) + np.asarray(background, dtype=np.float64)
    log_bleu = (np.log(s[..., 0:REF_LEN:2]) - np.log(s[..., 1:REF_LEN:2])).mean(axis=-1)
    log_bleu += np.minimum(0.0, 1.0 - s[..., REF_LEN] / s[..., 1])
    return np.exp(log_bleu) * s[..., REF_LEN]
