"""``rerank eval``: score hypothesis files with registered metrics."""

from __future__ import annotations

import sys
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.metrics.meteor import MeteorUnavailable
from rerank.metrics.references import References, reference_keys, segment_count
from rerank.metrics.spec import DEFAULT_METRICS, make_metric
from rerank.textio import read_lines, read_references


def read_system(path: str, num_refs: int) -> List[str]:
    """Read a hypothesis file; :class:`InputError` if its line count differs from the references'."""
    hyps = read_lines(path)
    if len(hyps) != num_refs:
        raise InputError(f"{len(hyps)} lines but the reference has {num_refs}", path)
    return hyps


def system_stats(metric: Metric, path: str, hypotheses: Sequence[str], references: References) -> np.ndarray:
    """float64[N, K] per-segment statistics of the system output ``path`` (its lines
    ``hypotheses``): from the text, or for ``seg:`` metrics from the sidecar ``path.NAME``.

    Raises:
        InputError: a missing or malformed sidecar, or one of another line count.
    """
    bound = metric.bind(path)
    bound.check_count(len(hypotheses))
    index = np.arange(len(hypotheses))
    return bound.hypothesis_stats(hypotheses, references, index, index)


def check_system_names(
    baseline: Optional[str], systems: Sequence[Tuple[str, object]], source: Optional[str] = None
) -> None:
    """Refuse a table whose rows cannot be told apart (``eval``, ``signif``, ``report``).

    Raises:
        InputError: an empty name, two systems of one name, or a system named as the
            baseline (they would be merged into one row), naming ``source``.
    """
    seen = set() if baseline is None else {baseline}
    for name, _ in systems:
        if not name:
            raise InputError("a system has an empty name", source)
        if name in seen:
            what = "the baseline's name" if name == baseline else "given to two systems"
            raise InputError(f"system name {name!r} is {what}: every row needs its own name", source)
        seen.add(name)


def evaluate_files(
    ref_path: str,
    systems: Sequence[Tuple[str, str]],
    metrics: Sequence[str] = DEFAULT_METRICS,
    tokenize: str = DEFAULT_TOKENIZE,
    lowercase: bool = False,
    lang: Optional[str] = None,
    sentence_level: bool = False,
) -> List[Dict]:
    """Score each (name, path) system against one reference file, or several (several
    references per segment, sacrebleu's convention) under ``metrics``: specifications as
    :func:`rerank.metrics.spec.make_metric` reads them, ``seg:NAME`` too (``tokenize``: BLEU's
    and the length ratio's tokeniser; ``lowercase``: of every text metric; ``lang``: METEOR's,
    which it needs).

    METEOR, where java or its jar is missing, is left out with a one-line warning (as
    :func:`rerank.report.significance_table` does).

    Returns one dict per system and metric: ``{"system", "metric", "score",
    "signature", "file"}``; with ``sentence_level``, one per system and segment instead:
    ``{"system", "segment" (1-based), metric label: score, …}``, each segment's own score
    (:meth:`Metric.sentence_level`: sacreBLEU's ``--sentence-level`` numbers for BLEU, chrF and TER).  Raises :class:`InputError` when a file's line count differs
    from the reference's, when the reference is empty (no metric is defined there), or
    for two systems of one name (:func:`check_system_names`).
    """
    check_system_names(None, systems)
    refs = read_references(ref_path)
    if not segment_count(refs):
        raise InputError(
            "no reference segments: nothing to score", ref_path if isinstance(ref_path, str) else ref_path[0]
        )
    objs = {}
    for name in metrics:
        try:
            objs[name] = make_metric(name, tokenize, lowercase, lang)
        except MeteorUnavailable as err:  # as rerank signif: say so, score the other metrics
            print(f"rerank: warning: {err}", file=sys.stderr)
    if not objs:
        raise InputError("no metric can be computed here (see the warnings above)")
    rows: List[Dict] = []
    for name, path in systems:
        hyps = read_system(path, segment_count(refs))
        if sentence_level:
            columns = {obj.label: obj.sentence_level(system_stats(obj, path, hyps, refs)) for obj in objs.values()}
            for k in range(len(hyps)):
                rows.append(
                    {"system": name, "segment": k + 1, **{m: round(float(v[k]), 4) for m, v in columns.items()}}
                )
            continue
        for metric, obj in objs.items():
            summed = system_stats(obj, path, hyps, refs).sum(axis=0)  # once: METEOR's run the jar
            with np.errstate(over="ignore", invalid="ignore"):  # a non-finite score is refused below
                score = float(obj.score(summed))
            if not np.isfinite(score):
                raise InputError(f"metric {metric!r}: the score is not a finite number (statistics too large)", path)
            rows.append(
                {
                    "system": name,
                    "metric": metric,
                    "score": round(score, 4),
                    "signature": obj.signature(),
                    "file": path,
                    "label": obj.label,
                    "sacrebleu": obj.describe(summed),
                    **({"decimals": obj.decimals} if obj.decimals != 2 else {}),  # a 0-1 scale (COMET)
                }
            )
    return rows


def format_table(rows: List[Dict]) -> str:
    """A plain-text table: one row per system, one column per metric (sacrebleu's names:
    ``BLEU``, ``chrF2``, ``TER``), then each system's sacrebleu score lines (BLEU's with its
    precisions, brevity penalty and lengths) and the signatures."""
    systems = list(dict.fromkeys(r["system"] for r in rows))
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    score = {(r["system"], r["metric"]): r["score"] for r in rows}
    label = {r["metric"]: r.get("label", r["metric"].upper()) for r in rows}
    digits = {r["metric"]: r.get("decimals", 2) for r in rows}
    width = max(len(s) for s in systems + ["system"])
    lines = ["system".ljust(width) + "".join(f"{label[m]:>10}" for m in metrics)]
    for s in systems:
        lines.append(s.ljust(width) + "".join(f"{score[(s, m)]:>10.{digits[m]}f}" for m in metrics))
    lines.append("")
    for s in systems:
        lines.extend(f"{s}: {r['sacrebleu']}" for r in rows if r["system"] == s and "sacrebleu" in r)
    sigs = list(dict.fromkeys((r["metric"], r["signature"]) for r in rows))
    lines.append("")
    lines.extend(f"{label[m]} signature: {sig}" for m, sig in sigs)
    return "\n".join(lines) + "\n"


def shared_stats(
    metric, texts: Dict[str, List[List[str]]], refs: References, files: Optional[Dict[str, List[str]]]
) -> Dict[str, List[np.ndarray]]:
    """{system: [float64[N, K] per replica]}: per-segment statistics of every replica of every
    system (``texts``: {system: [N hypotheses per replica]}), each distinct (hypothesis,
    reference) pair computed once — each (hypothesis, segment) for a metric that reads the
    source (COMET) — as re-ranked outputs and replicas share most of their sentences, and TER /
    METEOR statistics are the slow part.  Metrics not computed from text (``seg:``) read each
    replica file's sidecar (``files``: {system: [path per replica]}).

    Raises:
        InputError: a ``seg:`` metric without ``files``."""
    if not metric.from_text:
        if files is None:
            raise InputError(f"{metric.name}: seg: scores are read from files beside the systems' outputs")
        return {
            name: [system_stats(metric, path, hyps, refs) for path, hyps in zip(files[name], replicas)]
            for name, replicas in texts.items()
        }
    if metric.reads_source:  # COMET: a row depends on the segment's source too — pairs (hypothesis, segment)
        seen: Dict[Tuple[str, int], int] = {}
        rows = {
            name: [
                np.array([seen.setdefault((h, s), len(seen)) for s, h in enumerate(hyps)], dtype=np.int64)
                for hyps in replicas
            ]
            for name, replicas in texts.items()
        }
        pairs = list(seen)
        segment = np.array([s for _, s in pairs], dtype=np.int64)
        table = metric.hypothesis_stats([h for h, _ in pairs], refs, segment, np.arange(len(pairs)))
        return {name: [table[ix] for ix in replicas] for name, replicas in rows.items()}
    index: Dict[Tuple[str, object], int] = {}
    keys = reference_keys(refs)  # a segment's reference, or the tuple of its references
    rows = {
        name: [
            np.array([index.setdefault((h, r), len(index)) for h, r in zip(hyps, keys)], dtype=np.int64)
            for hyps in replicas
        ]
        for name, replicas in texts.items()
    }
    unique = list(index)
    references = [r for _, r in unique]
    if unique and isinstance(unique[0][1], tuple):
        references = [list(stream) for stream in zip(*references)]
    table = metric.stats([h for h, _ in unique], references)
    return {name: [table[ix] for ix in replicas] for name, replicas in rows.items()}
