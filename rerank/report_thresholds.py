"""How much a difference matters: MT-Thresholds' estimated accuracy of a metric delta, and the
smallest delta a test set can detect.

Kocmi et al. (2024, "Navigating the Metrics Maze: Reconciling Score Magnitudes and Accuracies",
ACL; the MT-Thresholds tool) fit, per metric, how often humans agree with the metric's ranking of
two systems as a function of the metric's delta: accuracy(Δ) = a · σ(b · Δ), in percent.  The
fit holds for the metric as they ran it — sacreBLEU's default BLEU (13a, mixed case) and chrF2,
COMET-22 and CometKiwi-22 on a 0-100 scale —, so rerank gives the estimate only where a
metric's signature says it is that metric (:func:`calibrated`), never for BLEU on pre-tokenised
text.  Their published coefficients (``python-tool/mt_thresholds.py``) are :data:`CALIBRATION`.

The smallest detectable Δ of a test is the (1 − α) quantile of its null sample (the shuffles'
|Δ| under approximate randomisation, the centred resampled |Δ| under the bootstrap): a
difference below it cannot reach p < α against that baseline on this test set.
"""

from __future__ import annotations

import math
import statistics
from typing import Dict, List, Optional, Tuple

import numpy as np

from rerank.signif import NullSample

#: (a, b) of accuracy(Δ) = a · σ(b · Δ) per calibrated metric (Kocmi et al. 2024)
CALIBRATION: Dict[str, Tuple[float, float]] = {
    "bleu": (88.33333333333225, 0.9663926931178954),
    "chrf": (92.999999999972, 1.1142732157139852),
    "comet22": (96.22374133884283, 2.8359194570556636),
    "cometkiwi22": (98.88141616584615, 2.719280643871758),
}


def calibrated(name: str, signature: str) -> Optional[Tuple[str, float]]:
    """(the calibration's key, the factor to its scale) of a metric by its name and sacreBLEU-style
    signature, or None where the settings differ from the calibration's: BLEU with ``tok:13a`` and
    ``case:mixed`` on one reference, chrF2 (``nc:6|nw:0``, mixed case), COMET-22 and CometKiwi-22
    (a checkpoint named ``wmt22-comet-da`` / ``wmt22-cometkiwi-da``; scores ×100)."""
    fields = set(signature.split("|"))
    if name == "bleu" and {"tok:13a", "case:mixed", "nrefs:1"} <= fields:
        return "bleu", 1.0
    if name == "chrf" and {"nc:6", "nw:0", "case:mixed", "nrefs:1"} <= fields:  # "chrf" alone: β = 2
        return "chrf", 1.0
    if name.startswith("comet:") and "wmt22-comet-da" in signature:
        return "comet22", 100.0
    if name.startswith("cometkiwi:") and "wmt22-cometkiwi-da" in signature:
        return "cometkiwi22", 100.0
    return None


def accuracy(delta: float, key: str) -> float:
    """The estimated accuracy (percent) of a delta of |``delta``| in the calibrated metric ``key``:
    a · σ(b · |Δ|) (MT-Thresholds' ``accuracy``)."""
    a, b = CALIBRATION[key]
    return a / (1.0 + math.exp(-b * abs(delta)))


def detectable(sample: NullSample, alpha: float) -> float:
    """The smallest |Δ| that reaches p < ``alpha`` under the test's null sample: its (1 − α) quantile."""
    if not len(sample.null):
        return math.nan
    return float(np.quantile(sample.null, 1.0 - alpha))


def footer_lines(rows: List[Dict], titles: Dict[str, str], alpha: float) -> List[str]:
    """The report footer's lines on how much a Δ matters: each metric's smallest detectable Δ (the median
    over the rows' tests against the baseline) and, for calibrated metrics, each row's estimated
    accuracy (``rows``: the table's rows; ``titles``: each metric's heading)."""
    found: Dict[str, List[float]] = {}
    for row in rows:
        if row.get("detectable") is not None and row.get("higher_is_better") is not None:
            found.setdefault(row["metric"], []).append(row["detectable"])
    lines = []
    if found:
        shown = ", ".join(f"{titles.get(m, m.upper())} {statistics.median(v):.2f}" for m, v in found.items())
        lines.append(f"smallest Δ this test set detects against the baseline (p < {alpha}, before adjustment): {shown}")
    rated = [r for r in rows if r.get("accuracy") is not None]
    if rated:
        shown = "; ".join(
            f"{r['system']} {titles.get(r['metric'], r['metric'].upper())} {r['accuracy']:.0f} %" for r in rated
        )
        lines.append(
            f"estimated accuracy of each Δ, humans agreeing with its sign (MT-Thresholds, Kocmi et al. 2024): {shown}"
        )
    return lines
