"""Corpus evaluation with sacrebleu: BLEU, TER and chrF with their signatures."""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from rerank.errors import InputError
from rerank.nbest import read_lines

METRICS = ("bleu", "ter", "chrf")


def make_metric(name: str, tokenize: Optional[str] = None, lowercase: bool = False):
    """The sacrebleu metric object for ``name`` ('bleu', 'ter', 'chrf').

    ``tokenize`` applies to BLEU only (sacrebleu's default '13a' when None); TER and
    chrF use their own defaults.  Raises :class:`InputError` for an unknown name.
    """
    from sacrebleu.metrics import BLEU, CHRF, TER

    if name == "bleu":
        from rerank.bleu import sacrebleu_metric

        return sacrebleu_metric(tokenize or "13a", lowercase) if tokenize else BLEU(lowercase=lowercase)
    if name == "ter":
        return TER(case_sensitive=not lowercase)
    if name == "chrf":
        return CHRF(lowercase=lowercase)
    raise InputError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")


def evaluate_files(ref_path: str, systems: Sequence[Tuple[str, str]], tokenize: Optional[str] = None,
                   lowercase: bool = False, metrics: Sequence[str] = METRICS) -> List[Dict]:
    """Score each (name, path) system against one reference file.

    Returns one dict per system and metric: ``{"system", "metric", "score",
    "formatted", "signature", "file"}``.  Raises :class:`InputError` when a file's line
    count differs from the reference's.
    """
    refs = read_lines(ref_path)
    objs = {m: make_metric(m, tokenize, lowercase) for m in metrics}
    rows = []
    for name, path in systems:
        hyps = read_lines(path)
        if len(hyps) != len(refs):
            raise InputError(f"{len(hyps)} lines but the reference {ref_path} has {len(refs)}", path)
        for metric, obj in objs.items():
            score = obj.corpus_score(hyps, [refs])
            rows.append({"system": name, "metric": metric, "score": round(score.score, 4),
                         "formatted": score.format(), "signature": str(obj.get_signature()), "file": path})
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
