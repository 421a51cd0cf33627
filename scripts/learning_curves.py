#!/usr/bin/env python3
"""Validation curves of fairseq trainings side by side (issue 20: which batch size and
warm-up train a transformer-tiny baseline furthest in a fixed number of epochs).

    python scripts/learning_curves.py default=out/multi30k-transformer/train.log \\
        fast=out/fast/train.log --out out/configs/curves

Reads fairseq's ``--log-format simple`` lines of each LOG (``rerank nmt train`` writes
them; run_pipeline.sh keeps them in ``OUT/train.log`` and ``OUT/models/NAME.log``):
``| valid | epoch N | … | loss L | nll_loss NLL | … | bleu B | …`` (``bleu`` only for a
baseline: fairseq's beam-5 BLEU on val, ``--eval-bleu``) and ``| train | epoch N | … |
wall W``.  A log of several sittings (a resumed training) repeats an epoch: the last line
of an epoch wins.  Seconds per epoch are the differences of ``wall`` between consecutive
epochs of one sitting (the first epoch of a sitting has none).

Writes ``OUT.md`` (one row per epoch: each run's valid NLL (base 2, fairseq's) and BLEU),
``OUT.json`` and, with matplotlib, ``OUT.png`` (NLL and BLEU against the epoch); without
``--out`` prints the Markdown.  A LOG without a single validation line is an error naming
the file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from typing import Dict, List, Optional, Tuple

VALID = re.compile(r"\| valid \| epoch (\d+) \|.*?\| nll_loss ([0-9.]+) \|(?:.*?\| bleu ([0-9.]+) \|)?")
TRAIN = re.compile(r"\| train \| epoch (\d+) \|.*\| wall (\d+)\s*$")


def read_log(path: str) -> Tuple[Dict[int, Dict[str, float]], List[int]]:
    """({epoch: {"nll": valid NLL, "bleu": valid BLEU (absent without --eval-bleu)}},
    [seconds of each epoch that follows another of the same sitting]) of one fairseq log."""
    epochs: Dict[int, Dict[str, float]] = {}
    seconds: List[int] = []
    last: Optional[Tuple[int, int]] = None  # (epoch, wall) of the previous train line
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            valid = VALID.search(line)
            if valid:
                row = {"nll": float(valid.group(2))}
                if valid.group(3) is not None:
                    row["bleu"] = float(valid.group(3))
                epochs[int(valid.group(1))] = row
                continue
            train = TRAIN.search(line)
            if train:
                epoch, wall = int(train.group(1)), int(train.group(2))
                if last is not None and epoch == last[0] + 1 and wall > last[1]:
                    seconds.append(wall - last[1])
                last = (epoch, wall)
    if not epochs:
        sys.exit(f"learning_curves: error: {path}: no fairseq validation lines ('| valid | epoch N | … nll_loss …')")
    return epochs, seconds


def markdown(runs: Dict[str, Dict]) -> str:
    """One row per epoch, a column pair (NLL, BLEU) per run; seconds per epoch below."""
    names = list(runs)
    last = max(max(r["epochs"]) for r in runs.values())
    head = "| epoch | " + " | ".join(f"{n} NLL | {n} BLEU" for n in names) + " |"
    lines = [head, "|---|" + "---|---|" * len(names)]
    for epoch in range(1, last + 1):
        cells = []
        for name in names:
            row = runs[name]["epochs"].get(epoch, {})
            cells += [f"{row['nll']:.3f}" if "nll" in row else "–", f"{row['bleu']:.2f}" if "bleu" in row else "–"]
        lines.append(f"| {epoch} | " + " | ".join(cells) + " |")
    lines.append("")
    for name in names:
        median = runs[name]["median_epoch_s"]
        lines.append(
            f"{name}: {runs[name]['log']}, median {median:.0f} s per epoch"
            if median is not None
            else f"{name}: {runs[name]['log']}"
        )
    return "\n".join(lines) + "\n"


def plot(runs: Dict[str, Dict], path: str) -> bool:
    """NLL and BLEU against the epoch, one line per run; False without matplotlib."""
    try:
        import matplotlib
    except ImportError:
        return False
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (nll_axis, bleu_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for number, (name, run) in enumerate(runs.items()):
        epochs, colour = sorted(run["epochs"]), f"C{number % 10}"  # one colour per run in both panels
        nll_axis.plot(epochs, [run["epochs"][e]["nll"] for e in epochs], marker=".", label=name, color=colour)
        with_bleu = [e for e in epochs if "bleu" in run["epochs"][e]]
        if with_bleu:
            bleu_axis.plot(
                with_bleu, [run["epochs"][e]["bleu"] for e in with_bleu], marker=".", label=name, color=colour
            )
    nll_axis.set(xlabel="epoch", ylabel="valid NLL (bits per token)", title="validation loss")
    bleu_axis.set(xlabel="epoch", ylabel="valid BLEU (beam 5)", title="validation BLEU")
    nll_axis.legend()
    bleu_axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="example: python scripts/learning_curves.py "
        "default=out/multi30k-transformer/train.log fast=out/fast/train.log "
        "--out out/configs/curves",
    )
    parser.add_argument("logs", nargs="+", metavar="NAME=LOG", help="a run's name and its fairseq training log")
    parser.add_argument("--out", help="write OUT.md, OUT.json and OUT.png (default: print the Markdown only)")
    args = parser.parse_args()
    runs: Dict[str, Dict] = {}
    for pair in args.logs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            sys.exit(f"learning_curves: error: {pair}: expected NAME=LOG")
        if name in runs:
            sys.exit(f"learning_curves: error: {name}: named twice")
        if not os.path.isfile(path):
            sys.exit(f"learning_curves: error: {path}: no such file")
        epochs, seconds = read_log(path)
        runs[name] = {
            "log": path,
            "epochs": epochs,
            "epoch_seconds": seconds,
            "median_epoch_s": statistics.median(seconds) if seconds else None,
        }
    text = markdown(runs)
    if not args.out:
        sys.stdout.write(text)
        return
    with open(args.out + ".md", "w", encoding="utf-8") as handle:
        handle.write(text)
    with open(args.out + ".json", "w", encoding="utf-8") as handle:
        json.dump(
            {
                name: {**run, "epochs": {str(e): v for e, v in sorted(run["epochs"].items())}}
                for name, run in runs.items()
            },
            handle,
            indent=1,
        )
    plotted = plot(runs, args.out + ".png")
    print(f"wrote {args.out}.md, {args.out}.json" + (f", {args.out}.png" if plotted else " (no matplotlib: no plot)"))


if __name__ == "__main__":
    main()
