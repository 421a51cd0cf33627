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

MERT's default (issue 19): random directions only on lists of at least 6 features.  The
MERT section times the previous default (10 random directions on every list,
``random_min_features=1``) beside the current one and ``--mert-random-directions 0
--mert-restarts 21`` (the issue's reference point, 0.74× Moses ``mert``'s time), with tuning
BLEU and line searches, on the synthetic list and, with ``--tune-nbest/--tune-ref``, on a
real list (e.g. the main job's ``nbest/val.nbest``, 1,014 × 20, 3 features; its test BLEU
with ``--test-nbest/--test-ref``).  Metrics other than BLEU (``--metrics chrf,ter``) are
timed for MIRA and MERT as well.

    python benchmarks/bench_mira.py [--segments 1014] [--nbest 50] [--features 10] [--json out.json]
    python benchmarks/bench_mira.py --tune-nbest out/multi30k/nbest/val.nbest --tune-ref out/multi30k/data/tok/val.de \
        --test-nbest out/multi30k/nbest/test.nbest --test-ref out/multi30k/data/tok/test_2016_flickr.de
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
            for _k in range(nbest):
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


MERT_SETTINGS = {
    "previous default (10 random directions always)": dict(random_min_features=1),
    "default": dict(),
    "--mert-random-directions 0 --mert-restarts 21": dict(random_directions=0, restarts=21),
}


def compare_mert_defaults(features, stats, offsets, init=None, test=None, repeats: int = 3):
    """Time (best of ``repeats``), tuning BLEU and line searches of each MERT setting;
    ``test``: (features, stats, offsets) of a test list scored with the weights."""
    from rerank.metrics.bleu import BleuMetric
    from rerank.tuning import Mert, MertConfig
    from rerank.tuning.base import corpus_score

    bleu = BleuMetric()  # the metric of ``stats``

    rows = {}
    for label, settings in MERT_SETTINGS.items():
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            tuned = Mert(MertConfig(**settings)).tune(features, stats, offsets, init, metric=bleu)
            times.append(time.perf_counter() - t)
        row = {
            "seconds": min(times),
            "tuning_bleu": tuned.score,
            "initial_bleu": tuned.initial_score,
            "line_searches": tuned.details["line_searches"],
            "random_directions": tuned.details["random_directions"],
        }
        if test is not None:
            row["test_bleu"] = corpus_score(*test, tuned.vector, bleu)
        rows[label] = row
    return rows


def real_list(args):
    """The MERT comparison on a real tuning list (and test list), from the beam's weights."""
    from rerank.metrics.bleu import BleuMetric
    from rerank.tuning.data import load_tuning_data
    from rerank.tuning.start import start_weights

    none = BleuMetric("none")
    nb, _, stats = load_tuning_data(args.tune_nbest, args.tune_ref, none)
    init, _ = start_weights(nb, "beam", args.tune_nbest)
    test = None
    if args.test_nbest:
        tb, _, tstats = load_tuning_data(args.test_nbest, args.test_ref, none)
        test = (tb.features, tstats, tb.offsets)
    rows = compare_mert_defaults(nb.features, stats, nb.offsets, init, test)
    return {
        "list": args.tune_nbest,
        "segments": nb.num_segments,
        "hypotheses": len(nb.hypotheses),
        "features": nb.feature_names,
        **rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segments", type=int, default=1014)
    parser.add_argument("--nbest", type=int, default=50)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--tune-nbest", help="a real tuning list for the MERT comparison (Moses format + LIST.json)")
    parser.add_argument("--tune-ref", help="its references (tokenised: BLEU with tokenize none)")
    parser.add_argument("--test-nbest", help="a test list to apply the MERT weights to")
    parser.add_argument("--test-ref", help="its references")
    parser.add_argument("--metrics", default="chrf,ter", help="metrics besides BLEU timed for MIRA and MERT")
    args = parser.parse_args()
    from rerank.cli import guard_script

    given = {"--tune-nbest": args.tune_nbest, "--tune-ref": args.tune_ref}
    given.update({"--test-nbest": args.test_nbest, "--test-ref": args.test_ref})
    guard_script(parser.prog, given, {"--json": args.json})

    from rerank.metrics import make_objective
    from rerank.metrics.bleu import BleuMetric
    from rerank.metrics.bleu_stats import bleu_stats
    from rerank.nbest import read_nbest
    from rerank.textio import read_lines
    from rerank.tuning import Mert, Mira, Pro

    with tempfile.TemporaryDirectory() as tmp:
        nb_path, ref_path = build(tmp, args.segments, args.nbest, args.features)
        result = {
            "segments": args.segments,
            "nbest": args.nbest,
            "features": args.features,
            "hypotheses": args.segments * args.nbest,
        }
        t = time.perf_counter()
        refs = read_lines(ref_path)
        nb = read_nbest(nb_path, num_segments=len(refs))
        result["read_s"] = time.perf_counter() - t
        t = time.perf_counter()
        stats = bleu_stats(nb.hypotheses, refs, nb.segment)
        result["bleu_stats_s"] = time.perf_counter() - t
        t = time.perf_counter()
        Mira().tune(nb.features, stats, nb.offsets, metric=BleuMetric())
        result["mira_60_epochs_s"] = time.perf_counter() - t
        t = time.perf_counter()
        mert = Mert().tune(nb.features, stats, nb.offsets, metric=BleuMetric())
        result["mert_20_restarts_s"] = time.perf_counter() - t
        result["mert_line_searches"] = mert.details["line_searches"]
        t = time.perf_counter()
        Pro().tune(nb.features, stats, nb.offsets, metric=BleuMetric())
        result["pro_s"] = time.perf_counter() - t
        cmd = [
            sys.executable,
            "-m",
            "rerank.cli",
            "tune",
            "--nbest",
            nb_path,
            "--ref",
            ref_path,
            "--out",
            os.path.join(tmp, "w.json"),
            "--quiet",
            "--init",
            "zeros",
            "--tokenize",
            "none",
        ]
        runs = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
            runs.append(time.perf_counter() - t)
        result["rerank_tune_cli_s"] = min(runs)
        result["rerank_tune_cli_runs_s"] = runs
        result["reference_moses_extractor_kbmira_s"] = 1.2
        result["mert_defaults_synthetic"] = compare_mert_defaults(nb.features, stats, nb.offsets)
        for name in [m for m in args.metrics.split(",") if m]:
            metric = make_objective(name, tokenize="none")
            t = time.perf_counter()
            metric_stats = metric.hypothesis_stats(nb.hypotheses, refs, nb.segment, np.arange(len(nb.hypotheses)))
            result[f"{name}_stats_s"] = time.perf_counter() - t
            for label, tuner in (("mira_60_epochs", Mira()), ("mert_default", Mert())):
                t = time.perf_counter()
                tuned = tuner.tune(nb.features, metric_stats, nb.offsets, metric=metric)
                result[f"{name}_{label}_s"] = time.perf_counter() - t
                result[f"{name}_{label}_score"] = tuned.score
    if args.tune_nbest:
        result["mert_defaults_real"] = real_list(args)
    for key, value in result.items():
        if isinstance(value, dict):
            print(key)
            for label, row in value.items():
                print(f"  {label:48s} {row}")
            continue
        print(f"{key:36s} {value if not isinstance(value, float) else round(value, 3)}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
