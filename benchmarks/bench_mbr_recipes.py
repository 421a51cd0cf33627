"""Every MBR decoder of rerank on one list, side by side: seconds, utilities computed, picks
shared with exact MBR, and the corpus BLEU and chrF of the picks against the references — the
numbers of docs/usage/mbr-recipes.md.

The list (``--nbest``, with ``--ref``) defaults to 100 Multi30k test_2016 sentences × 100
candidates made by 1-5 random word edits of the reference (benchmarks/bench_mbr_lowrank.py's
``edit_lists``): MBR should pick the least-edited candidate, so quality is measurable without
a trained model, but such lists are not a model's samples (their utility matrices are far from
low rank).  Writes JSON (``--out``) and a Markdown table on standard output, with the seconds of
each stage of ``rerank mbr`` (for COMET: ``utilities`` holds the encoder and the estimator).

    .venv/bin/python benchmarks/bench_mbr_recipes.py --out out/bench/mbr_recipes.json

A COMET utility (``--metric comet:DIR``) reads each segment's source: with the default lists,
the English of the same test_2016 sentences (``--data``'s ``.en``), unless the spec names
``source=``.  At wmt22-comet-da's size (benchmarks/bench_comet.py ``--build DIR --size large``:
random weights, XLM-R large's shape), a few segments and the recipes that apply:

    .venv/bin/python benchmarks/bench_comet.py --build out/comet-bench --size large
    .venv/bin/python benchmarks/bench_mbr_recipes.py --metric comet:out/comet-bench/da-large --sentences 4 \
        --recipes exact,aggregate,centroid,coarse-to-fine --out out/bench/mbr_recipes_comet22.json
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

#: (key, label, decoder name, its settings, pre-filters) in table order
RECIPES = [
    ("exact", "exact", "exact", {}, []),
    ("aggregate", "aggregate", "aggregate", {}, []),
    ("centroid", "centroid k=8", "centroid", {"clusters": 8}, []),
    ("pruned", "pruned α=0.99", "pruned", {"alpha": 0.99}, []),
    ("lowrank", "lowrank 1/8", "lowrank", {"reduction": 8.0}, []),
    ("halving", "halving 1/8", "halving", {"reduction": 8.0}, []),
    ("coarse-to-fine", "chrF top 16 → exact (coarse-to-fine)", "exact", {}, ["mbr:chrf,top_k=16"]),
]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", help="the candidates (default: the edit lists of the docstring)")
    parser.add_argument("--ref", help="their references, one per segment (with --nbest)")
    parser.add_argument("--data", default="../shared/data/multi30k/task1/raw/test_2016_flickr.de.gz")
    parser.add_argument("--sentences", type=int, default=100)
    parser.add_argument("--candidates", type=int, default=100)
    parser.add_argument("--metric", default="chrf", help="the MBR utility (default: chrf)")
    parser.add_argument(
        "--feature",
        default="uniform",
        help="the pseudo-references' weights: uniform, or the softmax of a column of the list (default: uniform)",
    )
    parser.add_argument(
        "--recipes",
        default=",".join(r[0] for r in RECIPES),
        help=f"which recipes, comma-separated, exact first (default: all: {','.join(r[0] for r in RECIPES)})",
    )
    parser.add_argument("--out", help="the JSON record (default: none)")
    args = parser.parse_args(argv)
    chosen = args.recipes.split(",")
    unknown = sorted(set(chosen) - {r[0] for r in RECIPES})
    if unknown or chosen[0] != "exact":
        parser.error(f"--recipes: exact first, then any of {', '.join(r[0] for r in RECIPES)} (not {unknown})")
    from rerank.cli import guard_script

    guard_script(
        parser.prog,
        {"--nbest": args.nbest, "--ref": args.ref, "--data": None if args.nbest else args.data},
        {"--out": args.out},
        [args.metric],
    )
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_mbr_lowrank import edit_lists

    from rerank.mbr import mbr_decode
    from rerank.mbr.decoders import make_decoder
    from rerank.metrics import make_metric
    from rerank.nbest import write_lines, write_nbest
    from rerank.textio import read_lines

    with tempfile.TemporaryDirectory() as tmp:
        nbest_path, refs = args.nbest, read_lines(args.ref) if args.ref else None
        if nbest_path is None:
            nbest_path = os.path.join(tmp, "edits.nbest")
            write_nbest(edit_lists(args.data, args.sentences, args.candidates, 1), nbest_path)
            with gzip.open(args.data, "rt", encoding="utf-8") as handle:
                refs = [line.strip() for line in handle][: args.sentences]
        utility = args.metric
        if utility.startswith("comet:") and "source=" not in utility and args.nbest is None:
            sources = os.path.join(tmp, "sources.en")
            with gzip.open(args.data.replace(".de.gz", ".en.gz"), "rt", encoding="utf-8") as handle:
                write_lines([line.strip() for line in handle][: args.sentences], sources)
            utility += f",source={sources}"
        metrics = {name: make_metric(name, "none") for name in ("bleu", "chrf")}
        rows, exact_picks = [], None
        for _, label, name, settings, prefilters in [r for r in RECIPES if r[0] in chosen]:
            out = os.path.join(tmp, "picks.txt")
            began = time.perf_counter()
            result = mbr_decode(
                nbest_path,
                out,
                utility=utility,
                weights_from=args.feature,
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
                "stage_seconds": result.get("seconds"),
                "utility_work": result.get("utility"),
                "same_as_exact": float(np.mean([a == b for a, b in zip(picks, exact_picks)])),
            }
            if refs is not None:
                row.update({k: round(m.corpus_score(picks, refs), 2) for k, m in metrics.items()})
            rows.append(row)
    header = "| recipe | seconds | utilities | same picks as exact | BLEU | chrF | seconds by stage |"
    print(header + "\n|---|---:|---:|---:|---:|---:|---|")
    for row in rows:
        stages = ", ".join(f"{k} {v:.2f}" for k, v in (row["stage_seconds"] or {}).items())
        work = row["utility_work"]
        if work:  # a neural utility: its load, encoder and estimator inside "utilities"
            parts = ", ".join(f"{k} {work['counts'].get(k, 0):,} in {v:.2f}" for k, v in work["seconds"].items())
            stages += f" (load {work['load_seconds']:.2f}, {parts})"
        print(
            f"| {row['recipe']} | {row['seconds']:.2f} | {row['utilities']:,} | {100 * row['same_as_exact']:.0f} % "
            f"| {row.get('bleu', '')} | {row.get('chrf', '')} | {stages} |"
        )
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
