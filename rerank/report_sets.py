"""One report over several test sets (``rerank report EXP1 EXP2 …``): each set's rows side by side,
and for every system and metric the number of sets on which its effect holds — Dror et al.'s
(2017, "Replicability Analysis for Natural Language Processing", TACL) count of replicated
effects.

For a system and metric tested on N sets with p-values p_1…p_N (each set's adjusted p, in the
direction of an improvement: a set where the system is worse counts p = 1), the Bonferroni
partial-conjunction p-value that the effect holds in at least u sets is
p^(u/N) = (N − u + 1) · p_(u), p_(u) the u-th smallest; the count k̂ is the largest u with
max_{j ≤ u} p^(j/N) ≤ α, which keeps the probability of overstating the count at most α.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.outputs import StagedOutputs
from rerank.textio import read_json


def replicability_count(p_values: Sequence[float], alpha: float) -> int:
    """k̂: on how many of the N sets the effect holds (module docstring), 0 ≤ k̂ ≤ N."""
    p = np.sort(np.asarray(p_values, dtype=np.float64))
    n = len(p)
    partial = np.maximum.accumulate((n - np.arange(n)) * p)
    return int(np.sum(partial <= alpha))


def combine_sets(tables: Dict[str, Dict[str, Any]], alpha: float) -> Dict[str, Any]:
    """{"sets": {name: its rows}, "replicability": [...], "meta"}: every (system, metric) present in
    all ``tables`` ({set name: a table.json's content}) with its Δ and adjusted p per set, the count
    of sets where it is significantly better (k̂, module docstring) and where it is better at all."""
    names = list(tables)
    keys = [
        (r["system"], r["metric"])
        for r in tables[names[0]]["rows"]
        if r.get("p_value") is not None and r.get("higher_is_better") is not None
    ]
    found = []
    for system, metric in keys:
        per_set = []
        for name in names:
            row = next((r for r in tables[name]["rows"] if r["system"] == system and r["metric"] == metric), None)
            if row is None:
                break
            per_set.append((name, row))
        if len(per_set) != len(names):
            continue
        better = [(r["delta"] > 0) == bool(r["higher_is_better"]) and r["delta"] != 0 for _, r in per_set]
        p = [r.get("p_adjusted", r["p_value"]) if up else 1.0 for (_, r), up in zip(per_set, better)]
        found.append(
            {
                "system": system,
                "metric": metric,
                "deltas": {name: r["delta"] for name, r in per_set},
                "p_adjusted": {name: r.get("p_adjusted", r["p_value"]) for name, r in per_set},
                "better_in": int(sum(better)),
                "holds_in": replicability_count(p, alpha),
                "sets": len(names),
            }
        )
    return {
        "sets": {name: tables[name]["rows"] for name in names},
        "replicability": found,
        "meta": {"sets": names, "alpha": alpha, "method": "Bonferroni partial conjunctions (Dror et al. 2017)"},
    }


def format_sets(combined: Dict[str, Any]) -> str:
    """The replicability table as text: a row per system and metric, Δ per set, k̂ of N."""
    names = combined["meta"]["sets"]
    header = ["system", "metric"] + [f"Δ {n}" for n in names] + ["holds in", "better in"]
    body = [
        [r["system"], r["metric"]]
        + [f"{r['deltas'][n]:+.2f} (p {r['p_adjusted'][n]:.4f})" for n in names]
        + [f"{r['holds_in']} of {r['sets']}", f"{r['better_in']} of {r['sets']}"]
        for r in combined["replicability"]
    ]
    widths = [max(len(x) for x in column) for column in zip(header, *body)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in [header] + body]
    alpha = combined["meta"]["alpha"]
    lines += [
        "",
        f"holds in: the sets on which the improvement is significant after each set's adjustment, counted "
        f"by Bonferroni partial conjunctions at α = {alpha} (Dror et al. 2017); better in: the sets where Δ "
        "points the better way",
    ]
    return "\n".join(lines) + "\n"


def sets_report(experiment_dirs: Sequence[str], out_dir: str, alpha: float) -> Dict[str, str]:
    """Combine the reports (``EXP/report/table.json``) of several experiment directories into
    ``out_dir``: ``sets.json`` and ``sets.txt``.  Set names are the directories' base names.

    Raises:
        InputError: a report missing, or two directories of the same name."""
    tables = {}
    for directory in experiment_dirs:
        name = os.path.basename(os.path.normpath(directory))
        if name in tables:
            raise InputError(f"two test sets named {name!r}: give directories of different names", directory)
        tables[name] = read_json(os.path.join(directory, "report", "table.json"))
    combined = combine_sets(tables, alpha)
    written = {"sets.json": os.path.join(out_dir, "sets.json"), "sets.txt": os.path.join(out_dir, "sets.txt")}
    with StagedOutputs() as outputs:
        with outputs.open(written["sets.json"]) as handle:
            json.dump(combined, handle, indent=1, ensure_ascii=False)
            handle.write("\n")
        with outputs.open(written["sets.txt"]) as handle:
            handle.write(format_sets(combined))
    return written


__all__: List[str] = ["replicability_count", "combine_sets", "format_sets", "sets_report"]
