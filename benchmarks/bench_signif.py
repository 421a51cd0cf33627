"""Benchmark `rerank signif` against `sacrebleu --paired-ar` on the same work.

Issue 4's reference point: a 3,004-sentence test set, a baseline and 2 systems, BLEU +
TER, 10,000 approximate-randomisation trials: ``sacrebleu --paired-ar`` needs about
50 s on our 2-core machines.  This script builds such a test set (references are
Multi30k-like sentences from a word list; systems are perturbed copies), times

* ``sacrebleu REF -i BASE SYS1 SYS2 -m bleu ter --paired-ar --paired-ar-n 10000``;
* ``rerank signif`` on the same files with ``--resamples 0`` (the same work: statistics
  once per system, AR p-values) and with the default 10,000 bootstrap resamples too;
* in-process, the bootstrap (s_sel of the 3 systems × 2 metrics) against the AR
  (2 comparisons × 2 metrics) on the same statistics: resampling should cost no more
  than shuffling;

and checks that the p-values agree (same seed, same swaps: they must be equal).

    python benchmarks/bench_signif.py [--sentences 3004] [--trials 10000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

WORDS = (
    "a man woman child dog runs walks sits on the in with red blue green big small street park water ball "
    "playing wearing shirt jacket looking at two three people group of near front building holds"
).split()


def build(directory: str, sentences: int, seed: int = 0):
    rng = random.Random(seed)
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30))) for _ in range(sentences)]

    def system(noise: float):
        out = []
        for ref in refs:
            words = ref.split()
            words = [rng.choice(WORDS) if rng.random() < noise else w for w in words]
            if rng.random() < 0.3:
                words = words[:-1]
            out.append(" ".join(words))
        return out

    paths = {}
    for name, lines in (("ref", refs), ("base", system(0.30)), ("sys1", system(0.28)), ("sys2", system(0.25))):
        paths[name] = os.path.join(directory, name)
        with open(paths[name], "w") as handle:
            handle.write("\n".join(lines) + "\n")
    return paths


def time_phases(paths, trials: int) -> dict:
    """In-process seconds of the bootstrap (3 systems x BLEU, TER) and of the AR
    (2 comparisons x BLEU, TER) on the same statistics, first calls included."""
    from rerank.metrics import make_metric
    from rerank.signif import approximate_randomization, bootstrap_std
    from rerank.textio import read_lines

    refs = read_lines(paths["ref"])
    stats = {}
    for name in ("ter", "bleu"):
        metric = make_metric(name, "none")
        stats[name] = (metric, {k: metric.stats(read_lines(paths[k]), refs) for k in ("base", "sys1", "sys2")})
    t = time.perf_counter()
    for metric, by_system in stats.values():
        for system in by_system.values():
            bootstrap_std(metric, system, trials)
    boot = time.perf_counter() - t
    t = time.perf_counter()
    for metric, by_system in stats.values():
        for system in ("sys1", "sys2"):
            approximate_randomization(metric, by_system["base"], by_system[system], trials)
    ar = time.perf_counter() - t
    return {
        "bootstrap_6_std_s": round(boot, 2),
        "ar_4_comparisons_s": round(ar, 2),
        "bootstrap_per_system_metric_s": round(boot / 6, 3),
        "ar_per_comparison_s": round(ar / 4, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sentences", type=int, default=3004)
    parser.add_argument("--trials", type=int, default=10000)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    env = {**os.environ, "SACREBLEU_SEED": "12345"}
    with tempfile.TemporaryDirectory() as tmp:
        p = build(tmp, args.sentences)
        t = time.perf_counter()
        sacre = subprocess.run(
            [
                sys.executable,
                "-m",
                "sacrebleu",
                p["ref"],
                "-i",
                p["base"],
                p["sys1"],
                p["sys2"],
                "-m",
                "bleu",
                "ter",
                "--paired-ar",
                "--paired-ar-n",
                str(args.trials),
                "--format",
                "json",
                "--tokenize",
                "none",
            ],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        sacre_s = time.perf_counter() - t
        common = [
            sys.executable,
            "-m",
            "rerank.cli",
            "signif",
            "--ref",
            p["ref"],
            "--baseline",
            p["base"],
            "--system",
            f"sys1={p['sys1']}",
            "--system",
            f"sys2={p['sys2']}",
            "--metrics",
            "bleu,ter",
            "--tokenize",
            "none",
            "--shuffles",
            str(args.trials),
            "--format",
            "json",
        ]
        t = time.perf_counter()
        ours = subprocess.run(common + ["--resamples", "0"], capture_output=True, text=True, check=True)
        ours_s = time.perf_counter() - t
        t = time.perf_counter()
        subprocess.run(common, capture_output=True, text=True, check=True)
        ours_boot_s = time.perf_counter() - t
        phases = time_phases(p, args.trials)
    theirs = {
        (entry["system"], m.lower()): entry[m]["p_value"]
        for entry in json.loads(sacre.stdout)[1:]
        for m in ("BLEU", "TER")
    }
    mine = {
        (r["system"], r["metric"]): r["p_value"] for r in json.loads(ours.stdout)["rows"] if r["p_value"] is not None
    }
    agree = all(
        abs(mine[(name.split(":")[-1].strip().split("/")[-1], m)] - p) < 1e-12 for (name, m), p in theirs.items()
    )
    result = {
        "sentences": args.sentences,
        "trials": args.trials,
        "sacrebleu_paired_ar_s": round(sacre_s, 2),
        "rerank_signif_same_work_s": round(ours_s, 2),
        "speedup": round(sacre_s / ours_s, 1),
        "rerank_signif_with_10k_bootstrap_s": round(ours_boot_s, 2),
        **phases,
        "p_values_equal": agree,
        "p_values_sacrebleu": {f"{k[0]}/{k[1]}": v for k, v in theirs.items()},
        "p_values_rerank": {f"{k[0]}/{k[1]}": v for k, v in mine.items()},
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
