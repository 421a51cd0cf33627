#!/usr/bin/env python3
"""The val guard of a main-job directory (issue 46): does each tuned row gain on val segments
its weights never saw? Every row of ``OUT/experiment.json`` is tuned again as it was (its
weights file records the columns, tuner and metric) by K-fold cross-fitting on val (``rerank
crossfit``: fold k of val, by image, re-ranked with weights tuned on the other folds), and the
cross-fitted val outputs are tested against the beam's val 1-best (``rerank signif``: paired
approximate randomisation; the row's own tuning metric — its objective —, BLEU, TER and length).
A row passes ("gain") when its objective gains significantly over the beam, BLEU and TER are
not significantly worse, and — for a row that adds columns to a smaller row of the same tuner
and metric (its base: of those rows whose columns are a strict subset of its own, the one with
the fewest; ``+mbr``'s is ``+nmt``, the beam's own columns re-weighted) — its objective also
gains significantly over the base's: the added feature set, not the re-weighting, must carry
the gain. Any other row is marked: it only fits val, and a test set nobody tuned on is not
expected to gain from it. Nothing here looks at test_2016.

    python scripts/val_guard.py out/multi30k-transformer [--k 5] [--replicas 1]

Writes ``OUT/crossfit/guard/DIR/val.seedS.txt`` (resumable: an existing output is kept),
``OUT/report/val_guard.json`` (``rerank signif``'s rows and each row's base), ``OUT/report/val_guard.md``
(one line per row: the objective's Δ and p against the beam and against the base, BLEU, TER,
length, the verdict),
``OUT/report/val_guard.verdicts.json`` (system -> verdict) and ``OUT/report/val_guard.marks.json``
(the rows it does not pass, and what that means: ``rerank report --marks`` marks them §). Run it with the
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


def better(row: Dict, compare: bool = False) -> bool:
    """Significantly better (p < 0.05) than the beam, or than the base with ``compare``."""
    p, delta = (row["p_compare"], row["delta_compare"]) if compare else (row["p_value"], row["delta"])
    if p is None or p >= 0.05:
        return False
    return delta > 0 if row["higher_is_better"] else delta < 0


def worse(row: Dict) -> bool:
    """Significantly worse (p < 0.05) than the beam."""
    if row["p_value"] is None or row["p_value"] >= 0.05:
        return False
    return row["delta"] < 0 if row["higher_is_better"] else row["delta"] > 0


def base_of(name: str, setups: Dict[str, Dict]) -> str:
    """The row ``name`` adds columns to: of the rows of the same tuner and metric whose columns
    are a strict subset of its own, the one with the fewest (the first in row order on a tie);
    '' when there is none."""
    own = setups[name]
    bases = [
        other
        for other, setup in setups.items()
        if (setup["algorithm"], setup["metric"]) == (own["algorithm"], own["metric"])
        and set(setup["features"]) < set(own["features"])
    ]
    return min(bases, key=lambda other: len(setups[other]["features"])) if bases else ""


def metrics_of(setup: Dict) -> List[str]:
    """The metrics a row is tested in: its objective, then BLEU, TER and length (once each)."""
    return list(dict.fromkeys([setup["metric"], "bleu", "ter", "length"]))


def verdict(objective: Dict, bleu: Dict, ter: Dict, base: str = "") -> str:
    """gain, worse than the beam on val (BLEU or TER), no significant gain on val (the
    objective against the beam), or no significant gain over BASE on val (against the base)."""
    if worse(bleu) or worse(ter):
        return "worse than the beam on val" + (" (TER)" if worse(ter) and not worse(bleu) else "")
    if not better(objective):
        return "no significant gain on val"
    if base and not better(objective, compare=True):
        return f"no significant gain over {base} on val"
    return "gain"


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
    systems, setups = [], {}
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
        setups[name] = setup
    report = os.path.join(out, "report")
    os.makedirs(report, exist_ok=True)
    files_of, bases = dict(systems), {name: base_of(name, setups) for name in setups}
    by, meta = {}, {}
    for name, _ in systems:  # the row against the beam and, with --compare-to, against its base
        base, metrics = bases[name], metrics_of(setups[name])
        table = os.path.join(guard, f"{os.path.basename(os.path.dirname(files_of[name][0]))}.signif.json")
        command = ["rerank", "signif", "--ref", ref, "--baseline", beam, "--tokenize", "none"]
        command += ["--metrics", ",".join(metrics), "--format", "json", "--out", table]
        for system in ([base] if base else []) + [name]:
            command += ["--system", f"{system}={','.join(files_of[system])}"]
        if base:
            command += ["--compare-to", base]
        run(command)
        with open(table, encoding="utf-8") as handle:
            result = json.load(handle)
        meta = result["meta"]
        for row in result["rows"]:
            if row["system"] == name:
                by[(name, row["metric"])] = row
    with open(os.path.join(report, "val_guard.json"), "w", encoding="utf-8") as handle:
        rows = [by[(name, m)] for name, _ in systems for m in metrics_of(setups[name])]
        meta = {k: v for k, v in meta.items() if k != "compare_to"}  # each row's base is in "bases"
        json.dump({"rows": rows, "bases": bases, "meta": meta}, handle, indent=1)
    lines = [
        f"Val guard: each row tuned again by {args.k}-fold cross-fitting on val ({args.replicas} replica(s)), "
        "against the beam's val 1-best and against its base row (paired AR, p < 0.05); objective: the row's "
        "tuning metric.",
        "",
        "| system | objective | Δ beam (p) | base | Δ base (p) | BLEU (Δ, p) | TER Δ (p) | length | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = {}
    for name, _ in systems:
        objective, bleu, ter, length = (by[(name, m)] for m in (setups[name]["metric"], "bleu", "ter", "length"))
        base = bases[name]
        verdicts[name] = verdict(objective, bleu, ter, base)
        against_base = f"{objective['delta_compare']:+.2f} ({objective['p_compare']:.4f})" if base else "–"
        lines.append(
            f"| {name} | {setups[name]['metric']} | {objective['delta']:+.2f} ({objective['p_value']:.4f}) | "
            f"{base or '–'} | {against_base} | {bleu['score']:.2f} ({bleu['delta']:+.2f}, {bleu['p_value']:.4f}) | "
            f"{ter['delta']:+.2f} ({ter['p_value']:.4f}) | {length['score']:.2f} | {verdicts[name]} |"
        )
    text = "\n".join(lines) + "\n"
    with open(os.path.join(report, "val_guard.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    with open(os.path.join(report, "val_guard.verdicts.json"), "w", encoding="utf-8") as handle:
        json.dump({"verdicts": verdicts, "k": args.k, "replicas": args.replicas}, handle, indent=1)
    marks = {
        "marks": {name: why for name, why in verdicts.items() if why != "gain"},
        "legend": "the val guard does not pass the row: tuned again by cross-fitting on val, its held-out val gain "
        "is not significant or it is significantly worse than the beam on val (report/val_guard.md)",
    }
    with open(os.path.join(report, "val_guard.marks.json"), "w", encoding="utf-8") as handle:
        json.dump(marks, handle, indent=1)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
