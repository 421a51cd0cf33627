"""Benchmark `rerank tune` (k-best batch MIRA, MERT, PRO) on the size of issue 2's reference point.

Builds a Multi30k-sized tuning set (1,014 segments × 50-best, 10 dense features,
hypotheses ~13 tokens from a 2,000-word vocabulary, perturbed references), writes it as
Moses n-best + reference files, and times:

* each phase in-process (read n-best, BLEU statistics, 60 MIRA epochs, MERT with 20
  restarts and 10 random directions, PRO);
* the whole command ``rerank tune`` (MIRA) from the n-best file to the weights file, as
  a subprocess, best of ``--repeats`` runs (all runs are listed too).

Reference point (issue 2): Moses ``extractor`` + ``kbmira`` (C++, 60 epochs) take about
1.2 s together on the same size on our 2-core machines.

    python benchmarks/bench_mira.py [--segments 1014] [--nbest 50] [--features 10] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def build(directory: str, segments: int, nbest: int, features: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(2000)])
    nb_path, ref_path = os.path.join(directory, "dev.nbest"), os.path.join(directory, "dev.ref")
    with open(nb_path, "w") as nb, open(ref_path, "w") as ref:
        for s in range(segments):
            base = rng.integers(0, 2000, size=rng.integers(6, 20))
            ref.write(" ".join(vocab[base]) + "\n")
            for k in range(nbest):
                hyp = base.copy()
                edits = rng.integers(0, 6)
                pos = rng.integers(0, len(hyp), size=edits)
                hyp[pos] = rng.integers(0, 2000, size=edits)
                if rng.random() < 0.3:
                    hyp = hyp[: max(1, len(hyp) - rng.integers(1, 4))]
                vals = rng.normal(size=features)
                feats = " ".join(f"F{j}= {v:.6f}" for j, v in enumerate(vals))
                nb.write(f"{s} ||| {' '.join(vocab[hyp])} ||| {feats} ||| 0\n")
    return nb_path, ref_path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segments", type=int, default=1014)
    parser.add_argument("--nbest", type=int, default=50)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    from mira import Mert, Mira, Pro
    from rerank.bleu import bleu_stats
    from rerank.nbest import read_nbest
    from rerank.textio import read_lines

    with tempfile.TemporaryDirectory() as tmp:
        nb_path, ref_path = build(tmp, args.segments, args.nbest, args.features)
        result = {"segments": args.segments, "nbest": args.nbest, "features": args.features,
                  "hypotheses": args.segments * args.nbest}
        t = time.perf_counter()
        refs = read_lines(ref_path)
        nb = read_nbest(nb_path, num_segments=len(refs))
        result["read_s"] = time.perf_counter() - t
        t = time.perf_counter()
        stats = bleu_stats(nb.hypotheses, refs, nb.segment)
        result["bleu_stats_s"] = time.perf_counter() - t
        t = time.perf_counter()
        Mira().tune(nb.features, stats, nb.offsets)
        result["mira_60_epochs_s"] = time.perf_counter() - t
        t = time.perf_counter()
        mert = Mert().tune(nb.features, stats, nb.offsets)
        result["mert_20_restarts_s"] = time.perf_counter() - t
        result["mert_line_searches"] = mert.details["line_searches"]
        t = time.perf_counter()
        Pro().tune(nb.features, stats, nb.offsets)
        result["pro_s"] = time.perf_counter() - t
        cmd = [sys.executable, "-m", "rerank.cli", "tune", "--nbest", nb_path, "--ref", ref_path,
               "--out", os.path.join(tmp, "w.json"), "--quiet", "--init", "zeros", "--tokenize", "none"]
        runs = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            runs.append(time.perf_counter() - t)
        result["rerank_tune_cli_s"] = min(runs)
        result["rerank_tune_cli_runs_s"] = runs
        result["reference_moses_extractor_kbmira_s"] = 1.2
    for key, value in result.items():
        print(f"{key:36s} {value if not isinstance(value, float) else round(value, 3)}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
