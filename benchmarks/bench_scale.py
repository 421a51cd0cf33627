"""Wall time and peak memory of rerank's verbs on synthetic n-best lists of any size.

    python benchmarks/bench_scale.py                          # 10k x 50, 1M (20k x 50), 100k x 50, 100k x 100
    python benchmarks/bench_scale.py --sizes 10000x50 --verbs apply,tune
    python benchmarks/bench_scale.py --repo /tmp/old-rerank   # the same runs with another checkout (before/after)

Each verb runs as its own process (rerank's command line); its peak resident memory is that
process's ``VmHWM`` (``/proc/self/status``), its time the wall clock.  Lists are generated
once per size into ``--work`` (default ``/tmp/rerank-bench-scale``): N segments of K
hypotheses of 6-14 words from a 2,000-word vocabulary, features ``NMT``, ``WordPenalty``,
``NMTNorm``, ``F4``, ``F5``, with references and sources.  ``tune`` (MIRA, 5 epochs) and
``oracle`` keep the whole list in memory as numbers and run on lists of at most
``--whole-max`` hypotheses (default 1M); ``apply``, ``truncate`` and ``features add``
(``len:`` and ``mbr:bleu``) stream and run on every size.

Goals (issue 16, 2 cores): 10M hypotheses re-ranked by ``apply`` in < 3 min under 1 GB;
``features add --scorer len: --scorer mbr:bleu`` on them in < 10 min under 1 GB; ``tune``
on 1M hypotheses under 1 GB.  Writes a Markdown table to stdout and JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def generate(work: str, segments: int, size: int, seed: int = 1) -> dict:
    """Write (once) the list, references and sources of one size; returns their paths."""
    base = os.path.join(work, f"{segments}x{size}")
    paths = {"nbest": base + ".nbest", "ref": base + ".ref", "src": base + ".src", "weights": base + ".weights.json"}
    if all(os.path.exists(p) for p in paths.values()):
        return paths
    os.makedirs(work, exist_ok=True)
    rng = np.random.RandomState(seed)
    vocab = np.array([f"w{i}" for i in range(2000)])
    with open(paths["ref"] + ".tmp", "w") as ref, open(paths["src"] + ".tmp", "w") as src:
        for _ in range(segments):
            ref.write(" ".join(vocab[rng.randint(0, 2000, rng.randint(6, 15))]) + "\n")
            src.write(" ".join(vocab[rng.randint(0, 2000, rng.randint(6, 15))]) + "\n")
    with open(paths["nbest"] + ".tmp", "w") as out:
        chunk = max(1, 200_000 // size)
        for first in range(0, segments, chunk):
            n = min(chunk, segments - first) * size
            lengths = rng.randint(6, 15, n)
            words = vocab[rng.randint(0, 2000, int(lengths.sum()))].tolist()
            feats = np.round(rng.randn(n, 5), 4).tolist()
            seg = np.repeat(np.arange(first, first + n // size), size).tolist()
            lines, pos = [], 0
            for i in range(n):
                hyp = " ".join(words[pos : pos + lengths[i]])
                pos += lengths[i]
                f = feats[i]
                lines.append(
                    f"{seg[i]} ||| {hyp} ||| NMT= {f[0]} WordPenalty= {-lengths[i]} NMTNorm= {f[1]} "
                    f"F4= {f[2]} F5= {f[3]} ||| 0\n"
                )
            out.write("".join(lines))
    with open(paths["weights"] + ".tmp", "w") as out:
        json.dump({"weights": {"NMT": 1.0, "WordPenalty": 0.1, "NMTNorm": 0.5, "F4": 0.2, "F5": -0.2}}, out)
    for p in paths.values():
        os.replace(p + ".tmp", p)
    return paths


#: runs rerank's command line, then writes the process's own peak resident memory (VmHWM,
#: kB; ``ru_maxrss`` would carry the forking parent's peak across exec) to $RERANK_HWM
CHILD = """import os, runpy, sys
sys.argv = ["rerank"] + sys.argv[1:]
try:
    runpy.run_module("rerank.cli", run_name="__main__")
finally:
    with open("/proc/self/status") as status, open(os.environ["RERANK_HWM"], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM")).split()[1])
"""


def run(argv, repo: str, work: str) -> dict:
    """Run ``rerank ARGV`` from ``repo``: {seconds, peak_mb, ok, error}."""
    hwm = os.path.join(work, "hwm")
    env = dict(os.environ, PYTHONPATH=repo, RERANK_HWM=hwm)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", CHILD] + argv, cwd=repo, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    seconds = time.perf_counter() - start
    err = done.stderr.decode(errors="replace").strip().splitlines()
    with open(hwm) as handle:
        peak_kb = int(handle.read())
    ok = done.returncode == 0
    return {
        "seconds": round(seconds, 2),
        "peak_mb": round(peak_kb / 1024, 1),
        "ok": ok,
        "error": None if ok else (err[-1] if err else f"exit status {done.returncode}"),
    }


def verbs_for(paths: dict, work: str, tag: str, hypotheses: int, whole_max: int) -> dict:
    out = os.path.join(work, f"out.{tag}")
    verbs = {
        "apply": ["apply", "--nbest", paths["nbest"], "--weights", paths["weights"], "--out", out + ".1best"],
        "truncate": ["truncate", "--nbest", paths["nbest"], "--size", "10", "--out", out + ".trunc.nbest"],
        "features add": [
            "features",
            "add",
            "--nbest",
            paths["nbest"],
            "--source",
            paths["src"],
            "--scorer",
            "len:1.0",
            "--scorer",
            "mbr:bleu",
            "--out",
            out + ".feat.nbest",
        ],
    }
    if hypotheses <= whole_max:
        verbs["tune"] = [
            "tune",
            "--nbest",
            paths["nbest"],
            "--ref",
            paths["ref"],
            "--mira-iterations",
            "5",
            "--quiet",
            "--init",
            "zeros",
            "--tokenize",
            "none",
            "--out",
            out + ".weights.json",
        ]
        verbs["oracle"] = [
            "oracle",
            "--nbest",
            paths["nbest"],
            "--ref",
            paths["ref"],
            "--tokenize",
            "none",
            "--out",
            out + ".oracle",
        ]
    return verbs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sizes", default="10000x50,20000x50,100000x50,100000x100", help="SEGMENTSxNBEST,... (default: %(default)s)"
    )
    parser.add_argument(
        "--verbs",
        default="apply,truncate,features add,tune,oracle",
        help="comma-separated verbs to time (default: %(default)s)",
    )
    parser.add_argument(
        "--whole-max",
        type=int,
        default=1_000_000,
        help="largest list (hypotheses) for tune and oracle (default: %(default)s)",
    )
    parser.add_argument(
        "--work", default="/tmp/rerank-bench-scale", help="where lists are generated (default: %(default)s)"
    )
    parser.add_argument("--repo", default=ROOT, help="checkout whose rerank runs (default: this one)")
    parser.add_argument("--out", help="JSON results (e.g. out/bench_scale.json)")
    args = parser.parse_args()
    from rerank.cli import guard_script

    guard_script(parser.prog, {"--repo": args.repo}, {"--out": args.out})
    wanted = [v.strip() for v in args.verbs.split(",")]
    results = []
    print("| list | hypotheses | verb | seconds | peak RSS (MB) | bytes/hyp |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        segments, nbest = (int(x) for x in size.split("x"))
        paths = generate(args.work, segments, nbest)
        hypotheses = segments * nbest
        for verb, argv in verbs_for(paths, args.work, size, hypotheses, args.whole_max).items():
            if verb not in wanted:
                continue
            result = {"list": size, "hypotheses": hypotheses, "verb": verb, **run(argv, args.repo, args.work)}
            results.append(result)
            cell = f"{result['seconds']}" if result["ok"] else f"failed: {result['error']}"
            print(
                f"| {size} | {hypotheses:,} | {verb} | {cell} | {result['peak_mb']} | "
                f"{result['peak_mb'] * 2**20 / hypotheses:.0f} |",
                flush=True,
            )
    if args.out:
        with open(args.out, "w") as handle:
            json.dump(
                {
                    "results": results,
                    "repo": os.path.abspath(args.repo),
                    "cores": os.cpu_count(),
                    "python": platform.python_version(),
                    "date": time.strftime("%Y-%m-%d"),
                },
                handle,
                indent=2,
            )


if __name__ == "__main__":
    main()
