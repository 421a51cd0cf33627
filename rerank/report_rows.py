"""The rows of a significance table: each system's score over its replicas (s_sel, s_opt, its
own interval), its test against the baseline and the ``compare_to`` system (p from
approximate randomisation or the paired bootstrap, the interval of Δ), every pair with
``pairs="all"``, and the adjustment of the whole table's p-values with its rank clusters
(:mod:`rerank.signif_adjust`).  :func:`rerank.report.significance_of` calls :func:`metric_rows`
once per metric and :func:`adjust_table` once for the table."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.report_thresholds import accuracy, calibrated, detectable
from rerank.signif import ResampleMemo, SignificanceSettings, compare, score_system
from rerank.signif_adjust import NullSample, adjust, clusters
from rerank.signif_bootstrap import (
    PairedBootstrap,
    paired_bootstrap,
    percentile_interval,
    resampled_scores,
)

#: one test of a table: (metric name, system A, system B) -> its record
Tests = Dict[Tuple[str, str, str], Dict[str, Any]]


def _pairs(names: List[str], settings: SignificanceSettings) -> List[Tuple[str, str]]:
    """The (A, B) pairs tested: B against the baseline (and the ``compare_to`` system), or every pair."""
    base, other = settings.baseline_name, settings.compare_to
    if settings.pairs == "all":
        return [(a, b) for k, a in enumerate(names) for b in names[k + 1 :]]
    pairs = [(base, name) for name in names if name != base]
    return pairs + [(other, name) for name in names if other is not None and name not in (base, other)]


def _test(
    metric: Metric, stats: Dict[str, Any], a: str, b: str, settings: SignificanceSettings, memo: ResampleMemo
) -> Dict[str, Any]:
    """The record of B tested against A: Δ, its interval, p and the null sample (for max-T)."""
    boot: PairedBootstrap = paired_bootstrap(
        metric, stats[a], stats[b], settings.bootstrap, settings.seed, settings.confidence, memo
    )
    if settings.test == "bs":
        p, sample = boot.p_value, NullSample(abs(boot.delta), boot.null)
    else:
        held: list = []
        p = compare(metric, stats[a], stats[b], settings.shuffles, settings.seed, held)
        sample = held[0]
    return {"delta": boot.delta, "delta_ci": list(boot.delta_ci), "p": p, "sample": sample}


def metric_rows(
    metric: Metric,
    metric_name: str,
    stats: Dict[str, Any],
    names: List[str],
    settings: SignificanceSettings,
    files: Optional[Dict[str, List[str]]],
    bar: Any,
    tests: Tests,
) -> List[Dict]:
    """The table's rows of one metric, a row per system in ``names``' order (its score, s_sel,
    s_opt, interval; p and Δ's interval against the baseline and ``compare_to``); every test
    made is added to ``tests`` for :func:`adjust_table`."""
    baseline_name, compare_to = settings.baseline_name, settings.compare_to
    calibration = calibrated(metric_name, metric.signature())
    memo: ResampleMemo = {}  # each replica resampled once: s_sel's draws serve the intervals and tests
    scored, own_ci = {}, {}
    for name in names:
        scored[name] = score_system(metric, stats[name], settings.resamples, settings.seed, memo)
        resampled = resampled_scores(metric, stats[name], settings.bootstrap, settings.seed, memo)
        own_ci[name] = list(percentile_interval(resampled, settings.confidence))
        if bar is not None:
            bar.update()
    for a, b in _pairs(names, settings):
        tests[(metric_name, a, b)] = _test(metric, stats, a, b, settings, memo)
    rows = []
    for name in names:
        r = scored[name]
        against = tests.get((metric_name, baseline_name, name))
        versus = None
        if compare_to is not None and name not in (baseline_name, compare_to):
            versus = tests.get((metric_name, compare_to, name)) or tests.get((metric_name, name, compare_to))
        rows.append(
            {
                "system": name,
                "metric": metric_name,
                "score": r.score,
                "ci": own_ci[name],
                "s_sel": r.s_sel,
                "s_opt": r.s_opt,
                "p_value": None if against is None else against["p"],
                "delta": r.score - scored[baseline_name].score,
                "delta_ci": None if against is None else against["delta_ci"],
                "detectable": None if against is None else detectable(against["sample"], settings.alpha),
                "accuracy": (
                    None
                    if against is None or calibration is None
                    else accuracy((r.score - scored[baseline_name].score) * calibration[1], calibration[0])
                ),
                "p_compare": None if versus is None else versus["p"],
                "delta_compare": None if versus is None or compare_to is None else r.score - scored[compare_to].score,
                "higher_is_better": metric.higher_is_better,
                "replicas": len(r.replica_scores),
                "replica_scores": r.replica_scores,
                **({"files": files[name]} if files is not None else {}),
            }
        )
    return rows


def adjust_table(rows: List[Dict], tests: Tests, settings: SignificanceSettings) -> Dict[str, Any]:
    """Adjust the p-values of every test of the table (one family: all rows and metrics with a
    direction) by ``settings.adjust``; sets each row's ``p_adjusted`` (and ``p_compare_adjusted``),
    and with ``pairs="all"`` its ``cluster``.  Returns the meta's additions: ``adjust`` (the method
    used: max-T falls back to Holm where the tests share no shuffles, said in ``adjust_note``), the
    family's size and, with ``pairs="all"``, the ``pairs`` matrix."""
    direction = {(r["metric"]): r["higher_is_better"] for r in rows}
    family = [key for key in tests if direction.get(key[0]) is not None]
    method, note = settings.adjust, None
    raw = [tests[key]["p"] for key in family]
    try:
        adjusted = adjust(raw, method, [tests[key]["sample"] for key in family])
    except InputError as error:
        method, note = "holm", f"max-T needs tests over the same shuffles ({error}); Holm instead"
        adjusted = adjust(raw, "holm")
    for key in tests:
        tests[key]["p_adjusted"] = tests[key]["p"]
    for key, value in zip(family, adjusted):
        tests[key]["p_adjusted"] = float(value)

    def adjusted_p(metric: str, a: Optional[str], b: str) -> Optional[float]:
        found = tests.get((metric, a, b)) or tests.get((metric, b, a)) if a is not None else None
        return None if found is None else found["p_adjusted"]

    for row in rows:
        row["p_adjusted"] = (
            None if row["p_value"] is None else adjusted_p(row["metric"], settings.baseline_name, row["system"])
        )
        if row["p_compare"] is not None:
            row["p_compare_adjusted"] = adjusted_p(row["metric"], settings.compare_to, row["system"])
    meta: Dict[str, Any] = {"adjust": method, "family": len(family)}
    if note:
        meta["adjust_note"] = note
    if settings.pairs == "all":
        meta["pairs"] = [
            {"metric": m, "a": a, "b": b, "delta": t["delta"], "delta_ci": t["delta_ci"], "p": t["p"]}
            | {"p_adjusted": t["p_adjusted"]}
            for (m, a, b), t in tests.items()
        ]
        for metric, better in direction.items():
            if better is None:
                continue
            scores = {r["system"]: r["score"] for r in rows if r["metric"] == metric}
            p_of = {(a, b): t["p_adjusted"] for (m, a, b), t in tests.items() if m == metric}
            for name, cluster in clusters(scores, bool(better), p_of, settings.alpha).items():
                next(r for r in rows if r["metric"] == metric and r["system"] == name)["cluster"] = cluster
    return meta
