"""Every MBR decoder of rerank on one list, side by side: seconds, utilities computed, picks
shared with exact MBR, and the corpus BLEU and chrF of the picks against the references — the
numbers of docs/usage/mbr-recipes.md.

The list (``--nbest``, with ``--ref``) defaults to 100 Multi30k test_2016 sentences × 100
candidates made by 1-5 random word edits of the reference (benchmarks/bench_mbr_lowrank.py's
``edit_lists``): MBR should pick the least-edited candidate, so quality is measurable without
a trained model, but such lists are not a model's samples (their utility matrices are far from
low rank).  Writes JSON (``--out``) and a Markdown table on standard output.

    .venv/bin/python benchmarks/bench_mbr_recipes.py --out out/bench/mbr_recipes.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time

import numpy as np

#: (label, decoder name, its settings, pre-filters) in table order
RECIPES = [
    ("exact", "exact", {}, []),
    ("aggregate", "aggregate", {}, []),
    ("centroid k=8", "centroid", {"clusters": 8}, []),
    ("pruned α=0.99", "pruned", {"alpha": 0.99}, []),
    ("lowrank 1/8", "lowrank", {"reduction": 8.0}, []),
    ("chrF top 16 → exact (coarse-to-fine)", "exact", {}, ["mbr:chrf,top_k=16"]),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", help="the candidates (default: the edit lists of the docstring)")
    parser.add_argument("--ref", help="their references, one per segment (with --nbest)")
    parser.add_argument("--data", default="../shared/data/multi30k/task1/raw/test_2016_flickr.de.gz")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--metric", default="chrf", help="the MBR utility (default: chrf)")
    parser.add_argument("--out", help="the JSON record (default: none)")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_mbr_lowrank import edit_lists

    from rerank.mbr import mbr_decode
    from rerank.mbr.decoders import make_decoder
    from rerank.metrics import make_metric
    from rerank.nbest import write_nbest
    from rerank.textio import read_lines

    with tempfile.TemporaryDirectory() as tmp:
        nbest_path, refs = args.nbest, read_lines(args.ref) if args.ref else None
        if nbest_path is None:
            nbest_path = os.path.join(tmp, "edits.nbest")
            write_nbest(edit_lists(args.data, args.sentences, args.candidates, 1), nbest_path)
            with gzip.open(args.data, "rt", encoding="utf-8") as handle:
                refs = [line.strip() for line in handle][: args.sentences]
        metrics = {name: make_metric(name, "none") for name in ("bleu", "chrf")}
        rows, exact_picks = [], None
        for label, name, settings, prefilters in RECIPES:
            out = os.path.join(tmp, "picks.txt")
            began = time.perf_counter()
            result = mbr_decode(
                nbest_path,
                out,
                utility=args.metric,
                weights_from="uniform",
                decoder=make_decoder(name, **settings),
                prefilters=prefilters,
            )
            seconds = time.perf_counter() - began
            picks = read_lines(out)
            exact_picks = exact_picks or picks
            row = {
                "recipe": label,
                "seconds": round(seconds, 2),
                "utilities": result["utilities"],
                "same_as_exact": float(np.mean([a == b for a, b in zip(picks, exact_picks)])),
            }
            if refs is not None:
                row.update({k: round(m.corpus_score(picks, refs), 2) for k, m in metrics.items()})
            rows.append(row)
    header = "| recipe | seconds | utilities | same picks as exact | BLEU | chrF |"
    print(header + "\n|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['recipe']} | {row['seconds']:.2f} | {row['utilities']:,} | {100 * row['same_as_exact']:.0f} % "
            f"| {row.get('bleu', '')} | {row.get('chrf', '')} |"
        )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
