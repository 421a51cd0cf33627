#!/usr/bin/env python3
"""The val guard of a main-job directory (issue 46): does each tuned row gain on val segments
its weights never saw? Every row of ``OUT/experiment.json`` is tuned again as it was (its
weights file records the columns, tuner and metric) by K-fold cross-fitting on val (``rerank
crossfit``: fold k of val, by image, re-ranked with weights tuned on the other folds), and the
cross-fitted val outputs are tested against the beam's val 1-best (``rerank signif``: paired
approximate randomisation, BLEU, TER and length). A row whose cross-fitted val BLEU gain is not
significant, or whose TER is significantly worse, is marked: it only fits val, and a test set
nobody tuned on is not expected to gain from it. Nothing here looks at test_2016.

    python scripts/val_guard.py out/multi30k-transformer [--k 5] [--replicas 1]

Writes ``OUT/crossfit/guard/DIR/val.seedS.txt`` (resumable: an existing output is kept),
``OUT/report/val_guard.json`` (``rerank signif``'s rows), ``OUT/report/val_guard.md``
(one line per row: val BLEU, Δ and p, TER Δ and p, length, the verdict) and
``OUT/report/val_guard.verdicts.json`` (system -> verdict, which ``rerank report --guard``
marks in the report). Run it with the
project's ``.venv`` (``rerank`` on PATH).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rows_of(out: str) -> List[Tuple[str, str]]:
    """(row name, tuning directory) of every system of ``OUT/experiment.json``, in row order."""
    with open(os.path.join(out, "experiment.json"), encoding="utf-8") as handle:
        manifest = json.load(handle)
    rows = []
    for name, files in manifest["systems"]:
        directory = os.path.dirname(os.path.join(out, files[0]))
        rows.append((name, directory))
    return rows


def tuning_of(directory: str) -> Dict:
    """The columns, tuner and metric of a row (its first replica's weights file)."""
    with open(os.path.join(directory, "weights.seed1.json"), encoding="utf-8") as handle:
        tuning = json.load(handle)["tuning"]
    return {"features": tuning["features"], "algorithm": tuning["algorithm"], "metric": tuning.get("metric", "bleu")}


def run(command: List[str]) -> None:
    done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode:
        sys.exit(f"val_guard: error: {' '.join(command[:2])}: {done.stderr.strip().splitlines()[-1]}")


def verdict(bleu: Dict, ter: Dict) -> str:
    """gain (BLEU significantly better, TER not significantly worse), loss, or no significant gain."""
    bleu_better = bleu["p_value"] is not None and bleu["p_value"] < 0.05 and bleu["delta"] > 0
    bleu_worse = bleu["p_value"] is not None and bleu["p_value"] < 0.05 and bleu["delta"] < 0
    ter_worse = ter["p_value"] is not None and ter["p_value"] < 0.05 and ter["delta"] > 0
    if bleu_worse or ter_worse:
        return "worse than the beam on val" + (" (TER)" if ter_worse and not bleu_worse else "")
    return "gain" if bleu_better else "no significant gain on val"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", help="a run_pipeline.sh directory, e.g. out/multi30k-transformer")
    parser.add_argument("--k", type=int, default=5, help="folds of val, by image (default: 5), e.g. 10")
    parser.add_argument("--replicas", type=int, default=1, help="tuner seeds per row (default: 1), e.g. 3")
    parser.add_argument(
        "--images",
        default=os.path.join(ROOT, "..", "shared", "data", "multi30k", "task1", "image_splits", "val.txt"),
        help="the image of each val segment (default: ../shared/data/multi30k/task1/image_splits/val.txt)",
    )
    args = parser.parse_args(argv)
    out = args.out
    nbest, ref, beam = (os.path.join(out, p) for p in ("nbest/val.full.nbest", "data/tok/val.de", "nbest/val.1best"))
    for path in (nbest, ref, beam, args.images, os.path.join(out, "experiment.json")):
        if not os.path.exists(path):
            sys.exit(f"val_guard: error: {path}: no such file (a finished run_pipeline.sh OUT?)")
    guard = os.path.join(out, "crossfit", "guard")
    os.makedirs(guard, exist_ok=True)
    folds = os.path.join(out, "crossfit", f"val.folds.k{args.k}.seed1.tsv")
    if not os.path.exists(folds):
        run(["rerank", "folds", "--segment-images", args.images, "--k", str(args.k), "--seed", "1", "--out", folds])
    systems = []
    for name, directory in rows_of(out):
        setup = tuning_of(directory)
        target = os.path.join(guard, os.path.basename(directory))
        os.makedirs(target, exist_ok=True)
        files = []
        for seed in range(1, args.replicas + 1):
            path = os.path.join(target, f"val.seed{seed}.txt")
            if not os.path.exists(path):
                run(
                    ["rerank", "crossfit", "--nbest", nbest, "--ref", ref, "--folds", folds, "--tokenize", "none"]
                    + ["--features", ",".join(setup["features"]), "--algorithm", setup["algorithm"]]
                    + ["--metric", setup["metric"], "--seed", str(seed), "--quiet", "--out", path]
                    + ["--weights-out", os.path.join(target, f"weights.seed{seed}.json")]
                )
            files.append(path)
        systems.append((name, files))
    report = os.path.join(out, "report")
    os.makedirs(report, exist_ok=True)
    table = os.path.join(report, "val_guard.json")
    command = ["rerank", "signif", "--ref", ref, "--baseline", beam, "--tokenize", "none"]
    command += ["--metrics", "bleu,ter,length", "--format", "json", "--out", table]
    for name, files in systems:
        command += ["--system", f"{name}={','.join(files)}"]
    run(command)
    with open(table, encoding="utf-8") as handle:
        result = json.load(handle)
    rows = result["rows"] if isinstance(result, dict) else result
    by = {(r["system"], r["metric"]): r for r in rows}
    lines = [
        f"Val guard: each row tuned again by {args.k}-fold cross-fitting on val ({args.replicas} replica(s)), "
        "against the beam's val 1-best (paired AR; † / ↓ p < 0.05).",
        "",
        "| system | val BLEU (Δ, p) | TER Δ (p) | length | verdict |",
        "|---|---|---|---|---|",
    ]
    for name, _ in systems:
        bleu, ter, length = by[(name, "bleu")], by[(name, "ter")], by[(name, "length")]
        lines.append(
            f"| {name} | {bleu['score']:.2f} ({bleu['delta']:+.2f}, {bleu['p_value']:.4f}) | "
            f"{ter['delta']:+.2f} ({ter['p_value']:.4f}) | {length['score']:.2f} | {verdict(bleu, ter)} |"
        )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(report, "val_guard.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    verdicts = {name: verdict(by[(name, "bleu")], by[(name, "ter")]) for name, _ in systems}
    with open(os.path.join(report, "val_guard.verdicts.json"), "w", encoding="utf-8") as handle:
        json.dump({"verdicts": verdicts, "k": args.k, "replicas": args.replicas}, handle, indent=1)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
