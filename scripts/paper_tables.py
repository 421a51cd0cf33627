"""Collect the reports of scripts/run_tables.sh into the paper's Tables 3 (20-best) and 4
(50-best), ours beside Calixto & Liu (2017)'s in every cell: OUT/tables.md, OUT/tables.json.

    python scripts/paper_tables.py OUT [--views "crossfit val"] [--variants "..."] [--sizes "20 50"]

Reads OUT/rerank/VARIANT.SIZE.VIEW/report/table.json (rerank report's JSON: score, s_sel,
s_opt, p, marks and the paper's value per row and metric) and OUT/timings.tsv.
"""

from __future__ import annotations

import argparse
import json
import os

from rerank.report import marks

METRICS = ("bleu", "meteor", "ter", "chrf", "length")
TITLES = {"crossfit": "cross-fitted over test_2016 folds (s_s and s_i)",
          "val": "tuned on val (s_s only)", "paper": "the paper's protocol (tuned on val, s_s and s_i)"}


def cell(row):
    if row is None:
        return "–"
    ours = f"{row['score']:.2f}{marks(row)}"
    paper = row.get("paper")
    return f"{ours} ({paper['score']:g}{paper['marks']})" if paper else ours


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--views", default="crossfit val")
    parser.add_argument("--variants", default="weak regular optimised")
    parser.add_argument("--sizes", default="20 50")
    args = parser.parse_args()
    lines, collected = [], []
    for size in args.sizes.split():
        number = {"20": 3, "50": 4}.get(size, "")
        for view in args.views.split():
            lines += [f"### Table {number}: {size}-best, {TITLES.get(view, view)}", "",
                      "cells: ours with † (better than the baseline) / ‡ (better than "
                      + ("+nmt" if view == "val" else "+VSE") + "), p < 0.05, ↓ ⇓ significantly worse; "
                      "(the paper's value and marks)", "",
                      "| variant | system | " + " | ".join(m.upper() for m in METRICS) + " |",
                      "|---|---|" + "---|" * len(METRICS)]
            for variant in args.variants.split():
                path = os.path.join(args.out, "rerank", f"{variant}.{size}.{view}", "report", "table.json")
                if not os.path.exists(path):
                    lines.append(f"| {variant} | (not run yet) |" + " |" * len(METRICS))
                    continue
                with open(path, encoding="utf-8") as handle:
                    table = json.load(handle)
                by = {(r["system"], r["metric"]): r for r in table["rows"]}
                systems = list(dict.fromkeys(r["system"] for r in table["rows"]))
                for system in systems:
                    lines.append(f"| {variant} | {system} | "
                                 + " | ".join(cell(by.get((system, m))) for m in METRICS) + " |")
                collected.append({"variant": variant, "nbest": int(size), "view": view, "caption":
                                  table["meta"].get("caption"), "rows": table["rows"], "meta": table["meta"]})
            lines.append("")
    timings = os.path.join(args.out, "timings.tsv")
    if os.path.exists(timings):
        with open(timings, encoding="utf-8") as handle:
            seconds = {name: int(value) for name, value in (line.rstrip("\n").split("\t") for line in handle if line.strip())}
        lines.append(f"stage time (wall, summed over stages; two chains ran side by side): "
                     f"{sum(seconds.values()) / 3600:.2f} h in {len(seconds)} stages ({timings})")
    with open(os.path.join(args.out, "tables.md.tmp"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(os.path.join(args.out, "tables.md.tmp"), os.path.join(args.out, "tables.md"))
    with open(os.path.join(args.out, "tables.json.tmp"), "w", encoding="utf-8") as handle:
        json.dump(collected, handle, indent=2, ensure_ascii=False)
    os.replace(os.path.join(args.out, "tables.json.tmp"), os.path.join(args.out, "tables.json"))


if __name__ == "__main__":
    main()
