"""What the whole significance story costs: ``rerank report`` on a table of the default job's size.

Issue 94's budget: the intervals, the max-T adjustment, the clusters, the sentence analysis and the
page together add at most 25 % to ``rerank report``'s time on the default job's table (3 replicas,
every row, BLEU/chrF/TER).  This script builds an experiment directory of that shape — 1,000
test segments (Multi30k-like word-list text), a baseline, ``--rows`` systems of 3 replicas each
(perturbed copies of the reference, as re-ranked outputs share most of their sentences with the
beam), a 20-best list holding every output — and prints the commands to time with ``farm-bench``
(or times them itself, ``--runs``):

* ``plain``: ``rerank report EXP --metrics bleu,chrf,ter --no-plots --adjust none --bootstrap 1``
  — the table as before issue 94 (one paired resample: the intervals' cost all but gone);
* ``whole``: the same with the defaults (1,000 paired resamples, max-T) and ``--analysis``.

    python benchmarks/bench_report.py --out out/bench-report [--rows 13] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

WORDS = (
    "a man woman child dog runs walks sits on the in with red blue green big small street park water ball "
    "playing wearing shirt jacket looking at two three people group of near front building holds"
).split()


def perturb(rng: random.Random, text: str, rate: float) -> str:
    """``text`` with about ``rate`` of its words replaced, dropped or doubled."""
    out = []
    for word in text.split():
        roll = rng.random()
        if roll < rate / 3:
            out.append(rng.choice(WORDS))
        elif roll < 2 * rate / 3:
            continue
        elif roll < rate:
            out += [word, word]
        else:
            out.append(word)
    return " ".join(out) or rng.choice(WORDS)


def build(directory: str, segments: int, rows: int, seed: int = 0) -> str:
    """The experiment directory (module docstring); returns its path."""
    rng = random.Random(seed)
    shutil.rmtree(directory, ignore_errors=True)
    os.makedirs(os.path.join(directory, "out"))
    refs = [" ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))) for _ in range(segments)]
    beam = [perturb(rng, r, 0.3) for r in refs]
    lists = [[b] + [perturb(rng, r, 0.3) for _ in range(19)] for r, b in zip(refs, beam)]

    def write(name, lines):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in lines)

    write("ref.de", refs)
    write("src.en", [" ".join(rng.choice(WORDS) for _ in range(len(r.split()))) for r in refs])
    write("out/beam.txt", beam)
    systems = []
    for k in range(rows):
        files = []
        for replica in range(1, 4):
            picks = [hyps[0] if rng.random() < 0.6 else rng.choice(hyps) for hyps in lists]
            write(f"out/row{k}.seed{replica}.txt", picks)
            files.append(f"out/row{k}.seed{replica}.txt")
        systems.append([f"+row{k}", files])
    with open(os.path.join(directory, "test.nbest"), "w", encoding="utf-8") as handle:
        for i, hyps in enumerate(lists):
            handle.writelines(f"{i} ||| {h} ||| NMT= {-j} ||| {-j}\n" for j, h in enumerate(hyps))
    manifest = {
        "reference": "ref.de",
        "baseline": ["out/beam.txt"],
        "nbest": "test.nbest",
        "tokenize": "none",
        "systems": systems,
    }
    with open(os.path.join(directory, "experiment.json"), "w", encoding="utf-8") as handle:
        json.dump(manifest, handle)
    return directory


def commands(directory: str):
    """{name: argv} of the two reports (module docstring)."""
    rerank = [sys.executable, "-m", "rerank.cli"]
    base = rerank + ["report", directory, "--metrics", "bleu,chrf,ter", "--no-plots"]
    return {
        "plain": base + ["--adjust", "none", "--bootstrap", "1"],
        "whole": base + ["--analysis", "--source", os.path.join(directory, "src.en")],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="the experiment directory to build")
    parser.add_argument("--segments", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=13, help="systems besides the baseline (the default job: 13)")
    parser.add_argument("--runs", type=int, default=0, help="time each command this many times here (0: print them)")
    parser.add_argument("--json", help="write the timings here")
    args = parser.parse_args()
    build(args.out, args.segments, args.rows)
    argvs = commands(args.out)
    if not args.runs:
        for name, argv in argvs.items():
            print(f"{name}: {' '.join(argv)}")
        return
    seconds = {name: [] for name in argvs}
    for _ in range(args.runs):
        for name, argv in argvs.items():  # alternated: drift hits both
            began = time.perf_counter()
            subprocess.run(argv, check=True, capture_output=True)
            seconds[name].append(time.perf_counter() - began)
    medians = {name: statistics.median(v) for name, v in seconds.items()}
    result = {"seconds": seconds, "median": medians, "added": medians["whole"] / medians["plain"] - 1}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)


if __name__ == "__main__":
    main()
