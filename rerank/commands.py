"""The core verbs: ``rerank apply``, ``folds``, ``truncate``, ``eval``, ``oracle``, ``signif``, ``report`` (each
parser beside its handler), and :func:`load_tuning_data`, which ``tune`` shares."""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from rerank.cliutil import bleu_options, non_negative_int, positive_int
from rerank.errors import InputError, atomic_write
from rerank.significance import DEFAULT_SEED


def load_tuning_data(nbest_path: str, ref_path: str, tokenize: str, lowercase: bool):
    """(n-best list, references, BLEU statistics float[M, 9]) of a tuning or oracle run.

    Raises:
        InputError: unreadable files, or a segment count that differs from the references'.
    """
    from rerank.bleu import bleu_stats
    from rerank.nbest import read_nbest
    from rerank.textio import read_lines

    refs = read_lines(ref_path)
    nbest = read_nbest(nbest_path, num_segments=len(refs))
    stats = bleu_stats(nbest.hypotheses, refs, nbest.segment, tokenize=tokenize, lowercase=lowercase)
    return nbest, refs, stats


def cmd_apply(args) -> None:
    from rerank.errors import StagedOutputs
    from rerank.nbest import read_nbest, read_weights, weights_vector, write_lines, write_nbest

    nbest = read_nbest(args.nbest)
    if args.folds:  # fold k's segments under the weights file with {fold} replaced by k
        from rerank.folds import read_folds

        if "{fold}" not in args.weights:
            raise InputError("--folds needs {fold} in the --weights path (one weights file per fold)")
        folds = read_folds(args.folds, nbest.num_segments)
        scores = np.zeros(len(nbest.hypotheses))
        for k in range(folds.k):
            path = args.weights.replace("{fold}", str(k))
            rows = nbest.rows_of(folds.segments(k))
            scores[rows] = nbest.features[rows] @ weights_vector(read_weights(path), nbest, path)
    else:
        scores = nbest.features @ weights_vector(read_weights(args.weights), nbest, args.weights)
    best = nbest.select(scores)
    with StagedOutputs() as outputs:  # --out and --out-nbest appear together or not at all
        write_lines((nbest.hypotheses[i] for i in best), args.out if args.out == "-" else outputs.stage(args.out))
        if args.out_nbest:
            write_nbest(nbest, outputs.stage(args.out_nbest), totals=scores)


def cmd_eval(args) -> None:
    from rerank.metrics import evaluate_files, format_table

    systems = []
    for item in args.hyp:
        name, path = item.split("=", 1) if "=" in item and not os.path.exists(item) else (os.path.basename(item), item)
        systems.append((name, path))
    rows = evaluate_files(args.ref, systems, tokenize=args.tokenize, lowercase=args.lowercase,
                          metrics=args.metrics.split(","))
    text = json.dumps(rows, indent=2) + "\n" if args.json else format_table(rows)
    sys.stdout.write(text)
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(text)


def cmd_oracle(args) -> None:
    from rerank.bleu import bleu_signature, sacrebleu_score
    from rerank.nbest import write_lines
    from rerank.oracle import oracle_select

    nbest, _refs, stats = load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    best = oracle_select(stats, nbest.offsets)
    write_lines((nbest.hypotheses[i] for i in best), args.out)
    score = sacrebleu_score(stats[best].sum(0))
    result = {"oracle_bleu": score.score, "bleu": score.format(), "nbest": args.nbest, "out": args.out,
              "signature": bleu_signature(args.tokenize, args.lowercase)}
    print(json.dumps(result) if args.json else f"oracle {score.format()}")


def cmd_folds(args) -> None:
    from rerank.folds import assign_folds, write_folds
    from rerank.textio import read_lines

    images = read_lines(args.segment_images)
    if not images:
        raise InputError("no segments", args.segment_images)
    folds = assign_folds(images, args.k, args.seed)
    write_folds(folds, args.out)
    sizes = np.bincount(folds.fold, minlength=folds.k)
    print(f"{len(images)} segments, {len(set(images))} images -> {folds.k} folds of {sizes.min()}-{sizes.max()} "
          f"segments: {args.out}", file=sys.stderr)


def cmd_truncate(args) -> None:
    from rerank.nbest import read_nbest, write_nbest
    from rerank.signature import read_sidecar, write_signed

    nbest = read_nbest(args.nbest).head(args.size)
    from rerank.errors import StagedOutputs

    with StagedOutputs() as outputs:  # the list and its signature (beam feature carried on) together
        write_nbest(nbest, outputs.stage(args.out))
        write_signed(outputs.stage(args.out + ".json"),
                     {"input": args.nbest, "head": args.size, "beam_feature": read_sidecar(args.nbest).get("beam_feature"),
                      "features": nbest.feature_names, "hypotheses": len(nbest.hypotheses)}, ["numpy"])


def _parse_system(item: str):
    if "=" not in item:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...]")
    name, files = item.split("=", 1)
    return name, [f for f in files.split(",") if f]


def cmd_signif(args) -> None:
    import tempfile

    from rerank.report import format_table, oracle_file, significance_table

    systems = [_parse_system(item) for item in args.system or []]
    with tempfile.TemporaryDirectory() as tmp:
        for k, nbest in enumerate(args.nbest or []):
            name = "oracle" if len(args.nbest) == 1 else f"oracle{k + 1}"
            systems.append((name, [oracle_file(nbest, args.ref, os.path.join(tmp, f"{name}.txt"),
                                               args.tokenize or "13a", args.lowercase)]))
        result = significance_table(args.ref, args.baseline, systems, metrics=args.metrics.split(","),
                                    tokenize=args.tokenize, lowercase=args.lowercase, lang=args.lang,
                                    shuffles=args.shuffles, resamples=args.resamples, seed=args.seed,
                                    compare_to=args.compare_to, progress=sys.stderr.isatty())
    text = format_table(result, args.format)  # JSON: the same {"rows", "meta"} schema as rerank report
    sys.stdout.write(text)
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(text)


def cmd_report(args) -> None:
    from rerank.report import experiment_report

    written = experiment_report(args.experiment_dir, args.out, metrics=args.metrics.split(","),
                                shuffles=args.shuffles, resamples=args.resamples, seed=args.seed,
                                compare_to=args.compare_to)
    with open(written["text"], encoding="utf-8") as handle:
        sys.stdout.write(handle.read())
    for kind, path in written.items():
        print(f"{kind}: {path}", file=sys.stderr)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``apply``, ``folds``, ``truncate``, ``eval``, ``oracle``, ``signif`` and ``report`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("apply", help="select the best hypothesis per segment under given weights")
    p.add_argument("--nbest", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True, help="1-best output, one line per segment ('-' for stdout)")
    p.add_argument("--out-nbest", help="also write the n-best list with totals = weighted scores")
    p.add_argument("--folds", help="folds file (rerank folds): fold k's segments use the --weights file whose path "
                                   "has {fold} replaced by k")
    p.set_defaults(func=cmd_apply)

    p = sub.add_parser("folds", help="K-fold split of a test set by image, for cross-fitting (rerank crossfit)")
    p.add_argument("--segment-images", required=True, help="image file name of each segment, one per line")
    p.add_argument("--k", type=positive_int, default=5, help="number of folds (≥ 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="folds file: image<TAB>fold per segment")
    p.set_defaults(func=cmd_folds)

    p = sub.add_parser("truncate", help="the first N hypotheses of every segment (e.g. 20-best from 50-best)")
    p.add_argument("--nbest", required=True)
    p.add_argument("--size", type=positive_int, required=True)
    p.add_argument("--out", required=True, help="truncated list (and OUT.json, its signature)")
    p.set_defaults(func=cmd_truncate)

    p = sub.add_parser("eval", help="BLEU, TER, chrF with sacrebleu (signatures included)")
    p.add_argument("--ref", required=True)
    p.add_argument("--hyp", required=True, action="append", help="hypothesis file, or NAME=FILE; repeatable")
    p.add_argument("--tokenize", default=None, help="sacrebleu BLEU tokeniser (default: sacrebleu's 13a)")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--metrics", default="bleu,ter,chrf")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", help="also write what is printed to this file")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("oracle", help="oracle-BLEU selection from an n-best list")
    p.add_argument("--nbest", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--json", action="store_true")
    bleu_options(p)
    p.set_defaults(func=cmd_oracle)

    def signif_options(p):
        p.add_argument("--metrics", default="bleu,meteor,ter,length",
                       help="comma-separated: bleu, meteor, ter, chrf, length (100 · hyp/ref length, as MultEval)")
        p.add_argument("--shuffles", type=positive_int, default=10000, help="approximate randomisation trials")
        p.add_argument("--resamples", type=non_negative_int, default=10000,
                       help="bootstrap resamples for s_sel (0: none)")
        p.add_argument("--seed", type=int, default=DEFAULT_SEED, help="seed (12345 = sacrebleu's default)")
        p.add_argument("--compare-to", help="system name for the second mark (‡), e.g. VSE")

    p = sub.add_parser("signif", help="MultEval-style significance: score (s_sel/s_opt/p) over replicas")
    p.add_argument("--ref", required=True)
    p.add_argument("--baseline", required=True, nargs="+", help="baseline replica files")
    p.add_argument("--system", action="append", help="NAME=FILE[,FILE...] replica files; repeatable")
    p.add_argument("--nbest", action="append", help="n-best list(s) of the test set: adds oracle rows")
    p.add_argument("--tokenize", default=None, help="sacrebleu BLEU tokeniser (default 13a)")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--lang", default="de", help="METEOR language")
    p.add_argument("--format", default="text", choices=["text", "markdown", "latex", "json", "csv"])
    p.add_argument("--out", help="also write what is printed to this file")
    signif_options(p)
    p.set_defaults(func=cmd_signif)

    p = sub.add_parser("report", help="the paper's Table 3/4 layout, significance and plots from a pipeline directory")
    p.add_argument("experiment_dir")
    p.add_argument("--out", help="output directory (default EXPERIMENT_DIR/report)")
    signif_options(p)
    p.set_defaults(func=cmd_report)

