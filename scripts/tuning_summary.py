"""Tuning-set score (BLEU, or the metric tuned for) of every tuning run of a pipeline
directory against its start (the beam's): ``python scripts/tuning_summary.py OUT/rerank``
(run_pipeline.sh's last table)."""

import argparse
import glob
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("rerank_dir", help="the pipeline's rerank/ directory (SET/weights.seedS.json files)")
    args = parser.parse_args()
    for path in sorted(glob.glob(os.path.join(args.rerank_dir, "*", "weights.seed*.json"))):
        with open(path, encoding="utf-8") as handle:
            t = json.load(handle)["tuning"]
        metric = t.get("metric", "bleu")  # records before issue 19 hold BLEU only
        start, tuned = t.get("initial_score", t.get("initial_bleu")), t.get("score", t.get("bleu"))
        ratio = "" if t.get("length_ratio") is None else f"  length ratio {t['length_ratio']:.3f}"
        print(
            f"{os.path.relpath(path, args.rerank_dir):32s} {t['algorithm']:5s} {metric:5s} {t['init']} {start:6.2f}  "
            f"tuned {tuned:6.2f}{ratio}"
        )


if __name__ == "__main__":
    main()
