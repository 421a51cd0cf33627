"""Metrics over per-segment sufficient statistics: one interface for evaluation,
bootstrap resampling and approximate randomisation.

Each :class:`Metric` extracts statistics once per system (``stats``: float[N, K], one
row per segment) and scores any stack of summed rows (``score``: float[..., K] ->
float[...]) without touching text again, as sacrebleu's ``metrics/base.py`` and
MultEval do.  BLEU statistics are :mod:`rerank.bleu`'s (the layer tuning and oracle
use); TER and chrF statistics are sacrebleu's own per-segment statistics, and their
vectorised ``score`` reproduces sacrebleu's ``_compute_score_from_stats`` (tests check
both against sacrebleu's corpus scores).  METEOR lives in :mod:`rerank.meteor`.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.textio import read_lines


class Metric:
    """Interface: ``name``, ``higher_is_better``, ``stats(hyps, refs)``, ``score(stats)``,
    ``signature()``."""

    name = "metric"
    higher_is_better = True

    def stats(self, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
        """float64[N, K] per-segment statistics (one reference per segment)."""
        raise NotImplementedError

    def score(self, stats: np.ndarray) -> np.ndarray:
        """Corpus score(s) of summed statistics float[..., K] -> float64[...]."""
        raise NotImplementedError

    def signature(self) -> str:
        """A sacrebleu-style signature string naming the settings and versions."""
        raise NotImplementedError

    def corpus_score(self, hypotheses: Sequence[str], references: Sequence[str]) -> float:
        """Corpus score of one system."""
        return float(self.score(self.stats(hypotheses, references).sum(axis=0)))


class BleuMetric(Metric):
    """BLEU (Papineni et al. 2002) as sacrebleu computes it: statistics from
    :func:`rerank.bleu.bleu_stats`, score from :func:`rerank.bleu.bleu_from_stats`."""

    name = "bleu"

    def __init__(self, tokenize: str = "13a", lowercase: bool = False):
        from rerank.bleu import sacrebleu_metric

        sacrebleu_metric(tokenize, lowercase)  # validates the tokeniser name
        self.tokenize, self.lowercase = tokenize, lowercase

    def stats(self, hypotheses, references):
        from rerank.bleu import bleu_stats

        return bleu_stats(hypotheses, references, np.arange(len(hypotheses)), self.tokenize, self.lowercase)

    def score(self, stats):
        from rerank.bleu import bleu_from_stats

        return bleu_from_stats(stats)

    def signature(self):
        from rerank.bleu import bleu_signature

        return bleu_signature(self.tokenize, self.lowercase)


class LengthMetric(Metric):
    """Length ratio as MultEval reports it: 100 · hypothesis length / reference length
    (words after BLEU's tokenisation; with one reference the closest reference is that
    one).  Statistics are columns t1 and r of :func:`rerank.bleu.bleu_stats`."""

    name = "length"
    higher_is_better = True  # neither: closeness to 100 matters; kept for the interface

    def __init__(self, tokenize: str = "13a", lowercase: bool = False):
        self.bleu = BleuMetric(tokenize, lowercase)

    def stats(self, hypotheses, references):
        from rerank.bleu import REF_LEN

        return self.bleu.stats(hypotheses, references)[:, [1, REF_LEN]]

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(stats[..., 1] > 0, 100.0 * stats[..., 0] / stats[..., 1], 0.0)

    def signature(self):
        return "length|" + self.bleu.signature()


class _SacrebleuStatsMetric(Metric):
    """Statistics from a sacrebleu metric object's per-segment extraction."""

    def _make(self):
        raise NotImplementedError

    def __init__(self, lowercase: bool = False):
        self.lowercase = lowercase
        self.metric = self._make()

    def stats(self, hypotheses, references):
        rows = self.metric._extract_corpus_statistics(list(hypotheses), [list(references)])
        return np.asarray(rows, dtype=np.float64).reshape(len(hypotheses), -1)

    def signature(self):
        self.metric.num_refs = 1  # set by corpus_score() in sacrebleu; we score without it
        return str(self.metric.get_signature())


class TerMetric(_SacrebleuStatsMetric):
    """TER (Snover et al. 2006) via sacrebleu's defaults (case-insensitive, no
    normalisation): statistics [edits, reference length], edit counts in C;
    score = 100 · Σedits / Σref_len (100 if the references are empty and edits > 0)."""

    name = "ter"
    higher_is_better = False

    def _make(self):
        from sacrebleu.metrics import TER

        return TER()  # sacrebleu's default: case-insensitive, whatever --lowercase says

    def stats(self, hypotheses, references):
        """float64[N, 2] [edits, reference length]: sacrebleu's TER tokenisation, and the
        edit counts of its ``translation_edit_rate`` computed in C (``rerank/_kernels.c``,
        tested equal to sacrebleu's on every segment)."""
        from rerank._native import ter_edits

        tok = self.metric.tokenizer
        hyp_words = [tok(h.rstrip()).split() for h in hypotheses]
        ref_words = [tok(r.rstrip()).split() for r in references]
        out = np.zeros((len(hyp_words), 2))
        out[:, 0] = ter_edits(hyp_words, ref_words)
        out[:, 1] = [len(words) for words in ref_words]
        return out

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        edits, ref_len = stats[..., 0], stats[..., 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(ref_len > 0, edits / ref_len, np.where(edits > 0, 1.0, 0.0))
        return 100.0 * ratio


class ChrfMetric(_SacrebleuStatsMetric):
    """chrF (Popović 2015) via sacrebleu (char order 6, beta 2): statistics are
    [hyp, ref, match] counts per order; the score follows sacrebleu's effective-order
    averaging of precision and recall."""

    name = "chrf"

    def _make(self):
        from sacrebleu.metrics import CHRF

        return CHRF(lowercase=self.lowercase)

    def pair_stats(self, texts: Sequence[str], hyp_index: np.ndarray, ref_index: np.ndarray) -> np.ndarray:
        """float64[K, 3 · char order] statistics of ``texts[hyp_index[k]]`` against
        ``texts[ref_index[k]]`` for every pair k, in sacrebleu's layout (per order: hyp,
        ref, match counts), equal to its ``_extract_corpus_statistics`` on each pair
        (whitespace removed, as chrF's default).  Vectorised: characters become dense ids,
        each text's n-gram codes are sorted once (:func:`rerank.bleu.pair_matches`)."""
        from rerank.bleu import pair_matches

        if self.metric.word_order or self.metric.whitespace:
            raise ValueError("pair_stats covers chrF (word order 0, whitespace removed) only")
        stripped = ["".join((t.lower() if self.lowercase else t).split()) for t in texts]
        lengths = np.array([len(t) for t in stripped], dtype=np.int64)
        points = np.frombuffer("".join(stripped).encode("utf-32-le"), dtype=np.uint32)
        alphabet, ids = np.unique(points, return_inverse=True)
        order = self.metric.char_order
        hyp_index = np.asarray(hyp_index, dtype=np.int64)
        ref_index = np.asarray(ref_index, dtype=np.int64)
        out = np.zeros((len(hyp_index), 3 * order))
        if len(hyp_index):
            out[:, 2::3] = pair_matches(ids.astype(np.int64).reshape(-1), lengths, len(alphabet), hyp_index,
                                        ref_index, order)
            n = np.arange(order)
            ref_counts = np.maximum(lengths[ref_index, None] - n, 0)
            # as sacrebleu: an order the reference has no n-gram of counts no hypothesis n-grams
            out[:, 0::3] = np.where(ref_counts > 0, np.maximum(lengths[hyp_index, None] - n, 0), 0)
            out[:, 1::3] = ref_counts
        return out

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        order = stats.shape[-1] // 3
        n_hyp, n_ref, n_match = stats[..., 0::3], stats[..., 1::3], stats[..., 2::3]
        factor = self.metric.beta ** 2
        valid = (n_hyp > 0) & (n_ref > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            prec = np.where(valid, n_match / n_hyp, 0.0)
            rec = np.where(valid, n_match / n_ref, 0.0)
        effective = valid.sum(axis=-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            avg_prec = np.where(effective > 0, prec.sum(axis=-1) / effective, 0.0)
            avg_rec = np.where(effective > 0, rec.sum(axis=-1) / effective, 0.0)
            score = (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec)
        assert order == self.metric.order
        return np.where(avg_prec + avg_rec > 0, 100.0 * score, 0.0)


METRICS = ("bleu", "ter", "chrf", "meteor", "length")


def make_metric(name: str, tokenize: Optional[str] = None, lowercase: bool = False, lang: str = "de") -> Metric:
    """The :class:`Metric` called ``name`` ('bleu', 'ter', 'chrf', 'meteor', 'length').

    ``tokenize`` applies to BLEU and length only (sacrebleu's default '13a' when None); ``lang`` to
    METEOR only.  Raises :class:`InputError` for an unknown name.
    """
    if name == "bleu":
        return BleuMetric(tokenize or "13a", lowercase)
    if name == "ter":
        return TerMetric(lowercase)
    if name == "chrf":
        return ChrfMetric(lowercase)
    if name == "length":
        return LengthMetric(tokenize or "13a", lowercase)
    if name == "meteor":
        from rerank.meteor import MeteorMetric

        return MeteorMetric(lang=lang, lowercase=lowercase)
    raise InputError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")


def read_system(path: str, num_refs: int) -> List[str]:
    """Read a hypothesis file; :class:`InputError` if its line count differs from the references'."""
    hyps = read_lines(path)
    if len(hyps) != num_refs:
        raise InputError(f"{len(hyps)} lines but the reference has {num_refs}", path)
    return hyps


def evaluate_files(ref_path: str, systems: Sequence[Tuple[str, str]], tokenize: Optional[str] = None,
                   lowercase: bool = False, metrics: Sequence[str] = ("bleu", "ter", "chrf")) -> List[Dict]:
    """Score each (name, path) system against one reference file.

    Returns one dict per system and metric: ``{"system", "metric", "score",
    "signature", "file"}``.  Raises :class:`InputError` when a file's line count differs
    from the reference's, or when the reference is empty (no metric is defined there).
    """
    refs = read_lines(ref_path)
    if not refs:
        raise InputError("no reference segments: nothing to score", ref_path)
    objs = {m: make_metric(m, tokenize, lowercase) for m in metrics}
    rows = []
    for name, path in systems:
        hyps = read_system(path, len(refs))
        for metric, obj in objs.items():
            rows.append({"system": name, "metric": metric, "score": round(obj.corpus_score(hyps, refs), 4),
                         "signature": obj.signature(), "file": path})
    return rows


def format_table(rows: List[Dict]) -> str:
    """A plain-text table: one row per system, one column per metric, signatures below."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    score = {(r["system"], r["metric"]): r["score"] for r in rows}
    width = max(len(s) for s in systems + ["system"])
    lines = ["system".ljust(width) + "".join(f"{m.upper():>10}" for m in metrics)]
    for s in systems:
        lines.append(s.ljust(width) + "".join(f"{score[(s, m)]:>10.2f}" for m in metrics))
    sigs = list(dict.fromkeys((r["metric"], r["signature"]) for r in rows))
    lines.append("")
    lines.extend(f"{m.upper()} signature: {sig}" for m, sig in sigs)
    return "\n".join(lines) + "\n"
