"""Forced decoding on the CPU in float32 against bfloat16 autocast (issue 60's untried lever
for ``rerank translate``): a finished main job's right-to-left model scores the first
``--segments`` segments of its test list (``nmt:`` scorer, the main job's R2L feature) once in
float32 and once under ``torch.autocast("cpu", dtype=torch.bfloat16)``; it reports the seconds
of each (model loading excluded), the largest and mean absolute difference of every column,
and on how many segments the best hypothesis by the normalised column is the same.

    python benchmarks/bench_bf16.py --job out/multi30k-de-en --segments 150 --json out/bench_bf16.json

The machine should be otherwise idle; bfloat16 needs a CPU with bf16 instructions to be fast
(this one lists avx512_bf16).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import pathlib
import sys
import time

import numpy as np


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True, help="a finished main job's OUT (nbest/test.nbest, models/r2l.*)")
    parser.add_argument("--segments", type=int, default=150, help="the first N test segments (default: 150)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    import torch

    from rerank.features.scorer import make_scorer
    from rerank.nbest import read_nbest
    from rerank.signature import signature
    from rerank.textio import read_lines

    job = os.path.abspath(args.job)
    prepared = json.load(open(os.path.join(job, "data", "prepare.json")))["config"]
    nbest = read_nbest(os.path.join(job, "nbest", "test.nbest"))
    sources = read_lines(os.path.join(job, "data", "tok", f"test_2016_flickr.{prepared['src']}"))
    keep = np.arange(min(args.segments, nbest.num_segments))
    part, part_sources = nbest.subset(keep), [sources[k] for k in keep]
    r2l = next(path for path in sorted(glob.glob(os.path.join(job, "models", "r2l*"))) if os.path.isdir(path))
    scorer = make_scorer(f"nmt:{r2l}", None)
    start = time.perf_counter()
    single = scorer.score(part, part_sources, None)
    float32_s = time.perf_counter() - start
    start = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        half = scorer.score(part, part_sources, None)
    bfloat16_s = time.perf_counter() - start
    norm = next(name for name in single if name.endswith("Norm"))
    bounds = part.offsets
    same_best = sum(
        int(np.argmax(single[norm][a:b]) == np.argmax(half[norm][a:b])) for a, b in zip(bounds[:-1], bounds[1:])
    )
    result = {
        "job": job,
        "model": r2l,
        "segments": len(keep),
        "hypotheses": len(part.hypotheses),
        "threads": torch.get_num_threads(),
        "float32_s": round(float32_s, 2),
        "bfloat16_autocast_s": round(bfloat16_s, 2),
        "difference": {
            name: {
                "max": float(np.max(np.abs(single[name] - half[name]))),
                "mean": float(np.mean(np.abs(single[name] - half[name]))),
            }
            for name in single
        },
        "same_best_by_" + norm: same_best,
        "signature": signature(["torch", "fairseq-fixed"]),
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        pathlib.Path(args.json).write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
