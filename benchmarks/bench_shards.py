"""One process against SHARDS processes side by side: the main job's n-best generation (``rerank
nmt nbest``) and its forced-decoding feature stage (``rerank features add`` with the R2L
model), on a finished main job's test set — what the workflow's ``SHARDS`` setting does on one
machine. Each stage runs once unsharded (torch's default threads: every core, as the job's
rules; ``--one-threads T``: T) and once as ``--shards`` processes side by side
(``OMP_NUM_THREADS`` = cores / shards each), joined by ``rerank merge``; it reports the wall
seconds, the speed-up, and how the merged list compares with the unsharded one (byte for byte;
else whether the hypotheses are equal and the largest difference of a score). A decoding shard
decodes its sentences in the batches one process decodes them in, so the lists are
byte-identical when the processes have the same threads (``--one-threads`` = cores / shards);
with more threads, torch's float sums run in another order and the last digits may differ.

    python benchmarks/bench_shards.py --job out/multi30k-de-en --shards 2 --json out/bench_shards.json
    python benchmarks/bench_shards.py --job out/multi30k-de-en --shards 2 --one-threads 1 --limit 200 \
        --block-hypotheses 5000

Every process is timed with its loading; the machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

from rerank.nbest import read_nbest
from rerank.signature import signature

#: the rerank command beside this python (a virtual environment's, used without activating it)
RERANK = shutil.which("rerank", path=os.path.dirname(sys.executable)) or shutil.which("rerank") or "rerank"


def _run_side_by_side(commands, threads):
    """Wall seconds of ``commands`` started together, each with ``threads`` torch threads (0: torch's default)."""
    env = dict(os.environ)
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
        if threads:
            env[name] = str(threads)
    start = time.perf_counter()
    running = [subprocess.Popen(c, env=env, stdout=subprocess.DEVNULL) for c in commands]
    for process, command in zip(running, commands):
        if process.wait():
            sys.exit(f"bench_shards: failed: {' '.join(command)}")
    return time.perf_counter() - start


def _compare(one, merged):
    a, b = read_nbest(one), read_nbest(merged)
    same = a.hypotheses == b.hypotheses and a.feature_names == b.feature_names
    diff = float(np.max(np.abs(a.features - b.features))) if same else None
    return {
        "same_hypotheses": same,
        "max_score_difference": diff,
        "byte_identical": open(one, "rb").read() == open(merged, "rb").read(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True, help="a finished main job's OUT (its data/, model and models/r2l.*)")
    parser.add_argument("--shards", type=int, default=2, help="processes side by side (default: 2)")
    parser.add_argument("--nbest", type=int, default=100, help="hypotheses per sentence (default: 100, the job's)")
    parser.add_argument(
        "--one-threads", type=int, default=0, help="torch threads of the unsharded process (default: 0, every core)"
    )
    parser.add_argument(
        "--limit", type=int, default=0, help="only the first N test sentences, raw text (default: 0, the whole set)"
    )
    parser.add_argument(
        "--block-hypotheses",
        type=int,
        default=0,
        help="features add --block-hypotheses of every scoring process (default: 0, the verb's); a "
        "feature shard scores whole blocks, so a list needs at least --shards blocks",
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    from rerank.cli import guard_script

    guard_script(parser.prog, {"--job": args.job}, {"--json": args.json})
    if not os.path.isdir(os.path.join(args.job, "models")):
        print(f"{parser.prog}: error: {args.job}: --job: not a finished main job (no models/)", file=sys.stderr)
        return 1
    job, shards = os.path.abspath(args.job), args.shards
    cores = os.cpu_count() or 1
    model = next(os.path.join(job, d) for d in sorted(os.listdir(job)) if d.startswith("model"))
    r2l = next(
        os.path.join(job, "models", d) for d in sorted(os.listdir(os.path.join(job, "models"))) if d.startswith("r2l")
    )
    checkpoint = os.path.join(
        model, json.load(open(os.path.join(model, "train.json"))).get("checkpoint", "checkpoint_best.pt")
    )
    prepared = json.load(open(os.path.join(job, "data", "prepare.json")))["config"]
    source = os.path.join(job, "data", "tok", f"test_2016_flickr.{prepared['src']}")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        decode = [RERANK, "nmt", "nbest", "--data-bin", os.path.join(job, "data", "bin"), "--checkpoint", checkpoint]
        if args.limit:  # the first N sentences: the tokenised test source is the raw text's preprocessing
            with open(source, encoding="utf-8") as handle:
                lines = [next(handle) for _ in range(args.limit)]
            source = os.path.join(tmp, "source.txt")
            with open(source, "w", encoding="utf-8") as handle:
                handle.writelines(lines)
            decode += ["--input", source, "--nbest", str(args.nbest)]
        else:
            decode += ["--subset", "test", "--nbest", str(args.nbest)]

        def decoding(name, extra=()):
            out = os.path.join(tmp, name)
            return decode + ["--out-nbest", out + ".nbest", "--out-1best", out + ".1best", *extra]

        def scoring(name, extra=()):
            command = [RERANK, "features", "add", "--nbest", os.path.join(tmp, "one.nbest"), "--source", source]
            command += ["--block-hypotheses", str(args.block_hypotheses)] if args.block_hypotheses else []
            return command + ["--scorer", f"nmt:{r2l}", "--out", os.path.join(tmp, name + ".nbest"), *extra]

        for stage, build in (("nbest", decoding), ("features-r2l", scoring)):
            prefix = "one" if stage == "nbest" else "scored"
            one = _run_side_by_side([build(prefix)], args.one_threads)
            parts = [build(f"{prefix}.{k}", ["--num-shards", str(shards), "--shard-id", str(k)]) for k in range(shards)]
            sharded = _run_side_by_side(parts, max(1, cores // shards))
            start = time.perf_counter()
            merged = os.path.join(tmp, f"{prefix}.merged.nbest")
            subprocess.run(
                [
                    RERANK,
                    "merge",
                    *(os.path.join(tmp, f"{prefix}.{k}.nbest") for k in range(shards)),
                    "--out",
                    merged,
                ],
                check=True,
            )
            merging = time.perf_counter() - start
            rows[stage] = {
                "one_process_s": round(one, 1),
                "shards_s": round(sharded, 1),
                "merge_s": round(merging, 1),
                "speedup": round(one / (sharded + merging), 2),
                **_compare(os.path.join(tmp, f"{prefix}.nbest"), merged),
            }
            print(
                f"{stage}: one process {one:.1f} s; {shards} shards {sharded:.1f} s + merge {merging:.1f} s: "
                f"x{rows[stage]['speedup']}; {rows[stage]}",
                file=sys.stderr,
            )
    result = {
        "job": job,
        "shards": shards,
        "cores": cores,
        "one_process_threads": args.one_threads or "default",
        "limit": args.limit or None,
        "block_hypotheses": args.block_hypotheses or None,
        "stages": rows,
        "signature": signature(["torch", "fairseq-fixed"]),
    }
    print(json.dumps(result, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
