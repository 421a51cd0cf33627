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

from config_table import read_timings  # scripts/: one reader of timings.tsv

from rerank.report import marks

METRICS = ("bleu", "meteor", "ter", "chrf", "length")
TITLES = {
    "crossfit": "cross-fitted over test_2016 folds (s_s and s_i)",
    "val": "tuned on val (s_s only)",
    "paper": "the paper's protocol (tuned on val, s_s and s_i)",
}


def cell(row):
    if row is None:
        return "–"
    ours = f"{row['score']:.2f}{marks(row)}"
    paper = row.get("paper")
    return f"{ours} ({paper['score']:g}{paper['marks']})" if paper else ours


def ablation(system: str) -> bool:
    """Rows of the s_i ablation (the same MLMME model and tuning with s_s only)."""
    return system.endswith("(s_s only)")


def ablation_rows(out: str, size: str, view: str, variants) -> list:
    """The rows of OUT/rerank/VARIANT.SIZE.VIEW/report-vs-nmt/table.json (‡ against +nmt)."""
    found = []
    for variant in variants:
        path = os.path.join(out, "rerank", f"{variant}.{size}.{view}", "report-vs-nmt", "table.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                found.append({"variant": variant, "rows": json.load(handle)["rows"]})
    return found


def ablation_table(size: str, view: str, found: list) -> list:
    """Markdown: each embedding row's difference to +nmt (same tuning) per variant, with and
    without s_i, from :func:`ablation_rows`: does the embedding add anything to the NMT features?"""
    if not found:
        return []
    lines = [
        (
            f"#### {size}-best, {TITLES.get(view, view)}: difference to +nmt (the NMT features alone, tuned the "
            "same way)"
        ),
        "",
        (
            "cells: BLEU / METEOR difference to +nmt; ‡ / ⇓ significantly better / worse than +nmt (AR, p < 0.05); "
            "rows '(s_s only)' are the same models and tuning without s_i"
        ),
        "",
        "| system | " + " | ".join(f["variant"] for f in found) + " |",
        "|---|" + "---|" * len(found),
    ]
    by = [{(r["system"], r["metric"]): r for r in f["rows"]} for f in found]
    systems = [
        s
        for s in dict.fromkeys(r["system"] for f in found for r in f["rows"])
        if s not in ("baseline", "+nmt", "oracle")
    ]

    def diff(row):  # the difference to +nmt with only its mark (the baseline's left out)
        if row is None or row.get("delta_compare") is None:
            return "–"
        return f"{row['delta_compare']:+.2f}{marks(dict(row, p_value=None))}"

    for system in systems:
        lines.append(
            f"| {system} | "
            + " | ".join(f"{diff(b.get((system, 'bleu')))} / {diff(b.get((system, 'meteor')))}" for b in by)
            + " |"
        )
    return lines + [""]


def isr_summary(out: str) -> dict:
    """Mean ISR recalls over the folds of each cross-fitted model (OUT/embed/NAME/foldK/isr.de.json)."""
    summary = {}
    root = os.path.join(out, "embed")
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        found = []
        for fold in sorted(os.listdir(os.path.join(root, name))) if os.path.isdir(os.path.join(root, name)) else []:
            path = os.path.join(root, name, fold, "isr.de.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as handle:
                    found.append(json.load(handle))
        if found:
            summary[name] = {
                "folds": len(found),
                **{
                    d: {k: sum(f[d][k] for f in found) / len(found) for k in ("r@1", "r@5", "r@10")}
                    for d in ("image_to_sentence", "sentence_to_image")
                },
            }
    return summary


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
            lines += [
                f"### Table {number}: {size}-best, {TITLES.get(view, view)}",
                "",
                "cells: ours with † (better than the baseline) / ‡ (better than "
                + ("+nmt" if view == "val" else "+VSE")
                + "), p < 0.05, ↓ ⇓ significantly worse; "
                "(the paper's value and marks)",
                "",
                "| variant | system | " + " | ".join(m.upper() for m in METRICS) + " |",
                "|---|---|" + "---|" * len(METRICS),
            ]
            for variant in args.variants.split():
                path = os.path.join(args.out, "rerank", f"{variant}.{size}.{view}", "report", "table.json")
                if not os.path.exists(path):
                    lines.append(f"| {variant} | (not run yet) |" + " |" * len(METRICS))
                    continue
                with open(path, encoding="utf-8") as handle:
                    table = json.load(handle)
                by = {(r["system"], r["metric"]): r for r in table["rows"]}
                systems = [name for name in dict.fromkeys(r["system"] for r in table["rows"]) if not ablation(name)]
                for system in systems:
                    lines.append(
                        f"| {variant} | {system} | " + " | ".join(cell(by.get((system, m))) for m in METRICS) + " |"
                    )
                collected.append(
                    {
                        "variant": variant,
                        "nbest": int(size),
                        "view": view,
                        "caption": table["meta"].get("caption"),
                        "rows": table["rows"],
                        "meta": table["meta"],
                    }
                )
            lines.append("")
    ablations, versus = [], []
    for size in args.sizes.split():
        for view in args.views.split():
            if view != "val":
                found = ablation_rows(args.out, size, view, args.variants.split())
                versus += ablation_table(size, view, found)
                ablations += [dict(t, nbest=int(size), view=view) for t in found]
    if versus:
        lines += ["### What the embedding features add to the NMT features (and what s_i adds)", ""] + versus
    isr = isr_summary(args.out)
    if isr:
        lines += [
            "### ISR of the cross-fitted embedding models (German, each fold's own held-out images)",
            "",
            "| model | folds | image→sentence r@1 | r@5 | r@10 | sentence→image r@1 | r@5 | r@10 |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for name, row in isr.items():
            lines.append(
                f"| {name} | {row['folds']} | "
                + " | ".join(
                    f"{row[d][k]:.1f}"
                    for d in ("image_to_sentence", "sentence_to_image")
                    for k in ("r@1", "r@5", "r@10")
                )
                + " |"
            )
        lines.append("")
    timings = os.path.join(args.out, "timings.tsv")
    if os.path.exists(timings):
        seconds = {name: value for name, value, _ in read_timings(args.out)}
        lines.append(
            f"stage time (wall, summed over stages; two chains ran side by side): "
            f"{sum(seconds.values()) / 3600:.2f} h in {len(seconds)} stages ({timings})"
        )
    with open(os.path.join(args.out, "tables.md.tmp"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    os.replace(os.path.join(args.out, "tables.md.tmp"), os.path.join(args.out, "tables.md"))
    with open(os.path.join(args.out, "tables.json.tmp"), "w", encoding="utf-8") as handle:
        json.dump({"tables": collected, "versus_nmt": ablations, "isr": isr}, handle, indent=2, ensure_ascii=False)
    os.replace(os.path.join(args.out, "tables.json.tmp"), os.path.join(args.out, "tables.json"))


if __name__ == "__main__":
    main()
