"""The core verbs: ``rerank apply``, ``folds``, ``truncate``, ``eval``, ``oracle``, ``signif``, ``report`` (each
parser beside its handler)."""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from rerank.cliutil import bleu_options, non_negative_int, positive_int
from rerank.errors import InputError
from rerank.outputs import atomic_write
from rerank.significance import DEFAULT_SEED


def finite_scores(scores: np.ndarray, nbest_path: str, weights_path: str) -> np.ndarray:
    """``scores`` (float[M]) unchanged, or :class:`InputError` when a weighted score
    overflowed (feature or weight magnitudes beyond the float range)."""
    if not np.all(np.isfinite(scores)):
        raise InputError(f"weighted scores of {nbest_path} are not finite numbers: its feature values times "
                         "these weights exceed the float range", weights_path)
    return scores


def cmd_apply(args) -> None:
    """Stream the list block by block: memory is bounded by a block, not the list."""
    import contextlib

    from rerank.nbest import NBestWriter, iter_nbest, read_weights, weights_vector
    from rerank.outputs import StagedOutputs

    folds = None
    if args.folds:  # fold k's segments under the weights file with {fold} replaced by k
        from rerank.folds import read_folds

        if "{fold}" not in args.weights:
            raise InputError("--folds needs {fold} in the --weights path (one weights file per fold)")
        folds = read_folds(args.folds)
        sources = [args.weights.replace("{fold}", str(k)) for k in range(folds.k)]
    else:
        sources = [args.weights]
    weights = [read_weights(path) for path in sources]  # every weights file checked before the list is read
    vectors = None
    segments = 0
    with StagedOutputs() as outputs:  # --out and --out-nbest appear together or not at all
        with outputs.open(args.out) as out, contextlib.ExitStack() as stack:
            writer = NBestWriter(stack.enter_context(outputs.open(args.out_nbest))) if args.out_nbest else None
            for first, block in iter_nbest(args.nbest):
                if vectors is None:
                    vectors = np.stack([weights_vector(w, block, path) for w, path in zip(weights, sources)])
                with np.errstate(over="ignore", invalid="ignore"):
                    table = block.features @ vectors.T  # float[M, folds]
                if folds is None:
                    scores = table[:, 0]
                else:
                    last = first + block.num_segments
                    if last > len(folds.fold):
                        raise InputError(f"more than {len(folds.fold)} segments in the n-best list "
                                         "(the folds file's count)", args.nbest)
                    scores = table[np.arange(len(table)), folds.fold[first:last][block.segment]]
                finite_scores(scores, args.nbest, sources[0] if folds is None else args.weights)
                best = block.select(scores)
                out.write("".join(block.hypotheses[i] + "\n" for i in best))
                if writer is not None:
                    writer.write(block, first, scores)
                segments = first + block.num_segments
        if folds is not None and segments != len(folds.fold):
            raise InputError(f"{len(folds.fold)} segments in the folds file but {segments} in the n-best list",
                             args.folds)


def cmd_eval(args) -> None:
    from rerank.metrics import evaluate_files, format_table

    rows = evaluate_files(args.ref, _hyp_files(args.hyp), tokenize=args.tokenize, lowercase=args.lowercase,
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
    from rerank.tuning_data import load_tuning_data

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
    """Stream the list block by block (memory bounded by a block)."""
    from rerank.nbest import NBestWriter, iter_nbest
    from rerank.outputs import StagedOutputs
    from rerank.signature import read_sidecar, write_signed

    names, hypotheses = None, 0
    with StagedOutputs() as outputs:  # the list and its signature (beam feature carried on) together
        with outputs.open(args.out) as out:
            writer = NBestWriter(out)
            for first, block in iter_nbest(args.nbest):
                block = block.head(args.size)
                writer.write(block, first)
                names, hypotheses = block.feature_names, hypotheses + len(block.hypotheses)
        write_signed(outputs.stage(args.out + ".json"),
                     {"input": args.nbest, "head": args.size, "beam_feature": read_sidecar(args.nbest).get("beam_feature"),
                      "features": names, "hypotheses": hypotheses}, ["numpy"])


def _parse_system(item: str):
    if "=" not in item:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...]")
    name, files = item.split("=", 1)
    replicas = [f for f in files.split(",") if f]
    if not name or not replicas:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...] with a name and at least one file")
    return name, replicas


def _hyp_files(items):
    """``--hyp FILE`` or ``--hyp NAME=FILE`` -> [(name, file)]."""
    systems = []
    for item in items:
        name, path = item.split("=", 1) if "=" in item and not os.path.exists(item) else (os.path.basename(item), item)
        if not path:
            raise InputError(f"--hyp {item!r}: expected FILE or NAME=FILE")
        systems.append((name, path))
    return systems


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
                                compare_to=args.compare_to, partial=args.partial)
    with open(written["text"], encoding="utf-8") as handle:
        sys.stdout.write(handle.read())
    for kind, path in written.items():
        print(f"{kind}: {path}", file=sys.stderr)


def _report_paths(args):
    """``report``'s inputs (every file its manifest names) and outputs (its tables and plots)."""
    from rerank.report import read_experiment, report_files

    experiment = read_experiment(args.experiment_dir, args.partial)
    if experiment.left_out:
        print(f"rerank report: leaving out systems not run yet (--partial): {', '.join(experiment.left_out)}",
              file=sys.stderr)
    inputs = {"manifest": os.path.join(args.experiment_dir, "experiment.json"), "reference": experiment.reference,
              "baseline": experiment.baseline, "systems": [f for _, files in experiment.systems for f in files],
              "nbest": experiment.nbest}
    return inputs, {"--out": list(report_files(args.experiment_dir, args.out).values())}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``apply``, ``folds``, ``truncate``, ``eval``, ``oracle``, ``signif`` and ``report`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("apply", help="select the best hypothesis per segment under given weights")
    p.add_argument("--nbest", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True, help="1-best output, one line per segment ('-' for stdout)")
    p.add_argument("--out-nbest", help="also write the n-best list with totals = weighted scores")
    p.add_argument("--folds", help="folds file (rerank folds): fold k's segments use the --weights file whose path "
                                   "has {fold} replaced by k")
    p.set_defaults(func=cmd_apply, paths=lambda a: (
        {"--nbest": a.nbest, "--weights": [a.weights.replace("{fold}", "0")] if a.folds else a.weights,
         "--folds": a.folds}, {"--out": a.out, "--out-nbest": a.out_nbest}))

    p = sub.add_parser("folds", help="K-fold split of a test set by image, for cross-fitting (rerank crossfit)")
    p.add_argument("--segment-images", required=True, help="image file name of each segment, one per line")
    p.add_argument("--k", type=positive_int, default=5, help="number of folds (≥ 2)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True, help="folds file: image<TAB>fold per segment")
    p.set_defaults(func=cmd_folds, paths=lambda a: ({"--segment-images": a.segment_images}, {"--out": a.out}))

    p = sub.add_parser("truncate", help="the first N hypotheses of every segment (e.g. 20-best from 50-best)")
    p.add_argument("--nbest", required=True)
    p.add_argument("--size", type=positive_int, required=True)
    p.add_argument("--out", required=True, help="truncated list (and OUT.json, its signature)")
    p.set_defaults(func=cmd_truncate, paths=lambda a: (
        {"--nbest": a.nbest}, {"--out": a.out, "--out (signature)": a.out + ".json"}))

    p = sub.add_parser("eval", help="BLEU, TER, chrF with sacrebleu (signatures included)")
    p.add_argument("--ref", required=True)
    p.add_argument("--hyp", required=True, action="append", help="hypothesis file, or NAME=FILE; repeatable")
    p.add_argument("--tokenize", default=None, help="sacrebleu BLEU tokeniser (default: sacrebleu's 13a)")
    p.add_argument("--lowercase", action="store_true")
    p.add_argument("--metrics", default="bleu,ter,chrf")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", help="also write what is printed to this file")
    p.set_defaults(func=cmd_eval, paths=lambda a: (
        {"--ref": a.ref, "--hyp": [path for _, path in _hyp_files(a.hyp)]}, {"--out": a.out}))

    p = sub.add_parser("oracle", help="oracle-BLEU selection from an n-best list")
    p.add_argument("--nbest", required=True)
    p.add_argument("--ref", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--json", action="store_true")
    bleu_options(p)
    p.set_defaults(func=cmd_oracle, paths=lambda a: ({"--nbest": a.nbest, "--ref": a.ref}, {"--out": a.out}))

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
    p.set_defaults(func=cmd_signif, paths=lambda a: (
        {"--ref": a.ref, "--baseline": a.baseline, "--nbest": a.nbest,
         "--system": [f for item in a.system or [] for f in _parse_system(item)[1]]}, {"--out": a.out}))

    p = sub.add_parser("report", help="the paper's Table 3/4 layout, significance and plots from a pipeline directory")
    p.add_argument("experiment_dir")
    p.add_argument("--out", help="output directory (default EXPERIMENT_DIR/report)")
    p.add_argument("--partial", action="store_true",
                   help="leave out systems whose replica files do not all exist yet, naming them (default: an error)")
    signif_options(p)
    p.set_defaults(func=cmd_report, paths=_report_paths)

