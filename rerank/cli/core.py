"""The core verbs: ``rerank apply``, ``folds``, ``truncate``, ``union``, ``eval``, ``oracle``, ``signif``, ``report``,
``experiment`` (each parser beside its handler; the work is in the library modules they call)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from rerank import DEFAULT_SEED
from rerank.argtypes import non_negative_int, positive_int
from rerank.bleu import sacrebleu_score
from rerank.cli.options import (
    bleu_options,
    bleu_settings,
    metric_options,
    note_once,
    references,
    seg_sidecars,
    shard_option_value,
    shard_options,
    signature_option,
)
from rerank.convert import FORMATS as CONVERT_FORMATS
from rerank.convert import convert_file
from rerank.errors import InputError
from rerank.experiment import Experiment
from rerank.folds import assign_folds, write_folds
from rerank.metrics import DEFAULT_METRICS, METRIC_HELP, evaluate_files, make_objective
from rerank.metrics import format_table as format_scores
from rerank.oracle import oracle_file
from rerank.outputs import atomic_write, signature_path
from rerank.report import (
    SignificanceSettings,
    experiment_report,
    format_table,
    plots_available,
    report_files,
    significance_table,
)
from rerank.reranking import apply_file, average_weights, merge_shards, truncate_file, union_files
from rerank.textio import read_lines


def cmd_apply(args) -> None:
    apply_file(args.nbest, args.weights, args.out, args.out_nbest, args.folds, shard_option_value(args))


def cmd_eval(args) -> None:
    rows = evaluate_files(references(args), _hyp_files(args.hyp), bleu_settings(args), metrics=args.metrics.split(","))
    text = json.dumps(rows, indent=2) + "\n" if args.json else format_scores(rows)
    sys.stdout.write(text)
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(text)


def cmd_oracle(args) -> None:
    bleu = bleu_settings(args)
    metric = make_objective(args.metric, bleu.tokenize, bleu.lowercase, args.lang)
    summed = oracle_file(args.nbest, references(args), args.out, bleu, metric)
    if args.metric == "bleu":
        score = sacrebleu_score(summed)
        result = {
            "oracle_bleu": score.score,
            "bleu": score.format(),
            "nbest": args.nbest,
            "out": args.out,
            "signature": bleu.signature(),
        }
        print(json.dumps(result) if args.json else f"oracle {score.format()}")
        return
    value = float(metric.score(summed))
    result = {
        "metric": metric.name,
        "oracle_score": value,
        "nbest": args.nbest,
        "out": args.out,
        "signature": metric.signature(),
    }
    print(json.dumps(result) if args.json else f"oracle {metric.name} {value:.2f}")


def cmd_folds(args) -> None:
    images = read_lines(args.segment_images)
    if not images:
        raise InputError("no segments", args.segment_images)
    empty = next((k for k, name in enumerate(images) if not name.strip()), None)
    if empty is not None:  # apply --folds would refuse the folds file: refuse it here, before writing it
        raise InputError("empty image name (one image name per segment)", args.segment_images, empty + 1)
    folds = assign_folds(images, args.k, args.seed)
    write_folds(folds, args.out)
    sizes = np.bincount(folds.fold, minlength=folds.k)
    print(
        f"{len(images)} segments, {len(set(images))} images -> {folds.k} folds of {sizes.min()}-{sizes.max()} "
        f"segments: {args.out}",
        file=sys.stderr,
    )


def cmd_merge(args) -> None:
    segments = merge_shards(args.shards, args.out)
    print(f"{len(args.shards)} shards, {segments} segments -> {args.out}", file=sys.stderr)


def cmd_average(args) -> None:
    record = average_weights(args.weights)
    with atomic_write(args.out) as handle:
        json.dump(record, handle, indent=2, allow_nan=False)
        handle.write("\n")


def cmd_convert(args) -> None:
    nbest = convert_file(args.format, args.input, args.out, args.beam_feature, args.text)
    print(
        f"{args.input}: {nbest.num_segments} segments, {len(nbest.hypotheses)} hypotheses, columns "
        f"{' '.join(dict.fromkeys(nbest.feature_names)) or '(none)'} -> {args.out}",
        file=sys.stderr,
    )


def cmd_truncate(args) -> None:
    truncate_file(args.nbest, args.size, args.out, args.out_1best)


def cmd_union(args) -> None:
    added = union_files(args.nbest, args.out)
    parts = ", ".join(f"{n} from {path}" for path, n in zip(args.nbest, added))
    print(f"{sum(added)} distinct hypotheses ({parts}), column WordPenalty -> {args.out}", file=sys.stderr)


def _parse_system(item: str):
    """``NAME=FILE[,FILE...]`` -> (name, files); the files follow the last ``=``, so that
    names may hold one (``+MLMME beta=1=a.txt,b.txt``)."""
    if "=" not in item:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...]")
    name, files = item.rsplit("=", 1)
    replicas = [f for f in files.split(",") if f]
    if not name or not replicas:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...] with a name and at least one file")
    return name, replicas


def _files(items):
    """Replica files given as ``F1 F2`` or ``F1,F2`` (the one ``FILE[,FILE...]`` form of every
    verb; spaces still work)."""
    return [f for item in items or [] for f in item.split(",") if f]


def _hyp_files(items):
    """``--hyp FILE`` or ``--hyp NAME=FILE`` -> [(name, file)]."""
    systems = []
    for item in items:
        name, path = item.split("=", 1) if "=" in item and not os.path.exists(item) else (os.path.basename(item), item)
        if not path:
            raise InputError(f"--hyp {item!r}: expected FILE or NAME=FILE")
        systems.append((name, path))
    return systems


def _sidecars(metrics: str, files) -> list:
    """The ``seg:`` sidecars of every metric in ``metrics`` for every file."""
    return [side for spec in metrics.split(",") for path in files for side in seg_sidecars(spec, path)]


def cmd_signif(args) -> None:
    bleu = bleu_settings(args)
    systems = [_parse_system(item) for item in args.system or []]
    with tempfile.TemporaryDirectory() as tmp:
        for k, nbest in enumerate(args.nbest or []):
            name = "oracle" if len(args.nbest) == 1 else f"oracle{k + 1}"
            path = os.path.join(tmp, f"{name}.txt")
            oracle_file(nbest, references(args), path, bleu)
            systems.append((name, [path]))
        settings = SignificanceSettings(
            metrics=tuple(args.metrics.split(",")),
            bleu=bleu,
            lang=args.lang,
            shuffles=args.shuffles,
            resamples=args.resamples,
            seed=args.seed,
            compare_to=args.compare_to,
            progress=True,  # a bar on a terminal, a line every few seconds elsewhere
        )
        result = significance_table(references(args), _files(args.baseline), systems, settings)
    text = format_table(result, args.format)  # JSON: the same {"rows", "meta"} schema as rerank report
    sys.stdout.write(text)
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(text)


def _report_plots(args) -> bool:
    """Whether ``report`` draws its plots: not with ``--no-plots``, nor without matplotlib
    (then said in one line, before any work; the tables are written all the same)."""
    if hasattr(args, "plots"):  # decided (and said) once
        return args.plots
    if args.no_plots:
        return False
    if not plots_available():
        print(
            "rerank report: plots skipped: matplotlib is not installed (pip install 'nbest-rerank[report]'; "
            "--no-plots says so); the tables are written",
            file=sys.stderr,
        )
        return False
    return True


def cmd_report(args) -> None:
    written = experiment_report(
        args.experiment_dir,
        args.out,
        metrics=args.metrics.split(","),
        shuffles=args.shuffles,
        resamples=args.resamples,
        seed=args.seed,
        compare_to=args.compare_to,
        partial=args.partial,
        plots=args.plots,
        guard=args.guard,
    )
    with open(written["text"], encoding="utf-8") as handle:
        sys.stdout.write(handle.read())
    for kind, path in written.items():
        print(f"{kind}: {path}", file=sys.stderr)


def _report_paths(args):
    """``report``'s inputs (every file its manifest names) and outputs (its tables and plots)."""
    experiment = Experiment.read(args.experiment_dir, args.partial)
    if experiment.left_out:
        print(
            f"rerank report: leaving out systems not run yet (--partial): {', '.join(experiment.left_out)}",
            file=sys.stderr,
        )
    inputs = {
        "manifest": os.path.join(args.experiment_dir, "experiment.json"),
        "reference": experiment.reference,
        "baseline": experiment.baseline,
        "systems": [f for _, files in experiment.systems for f in files],
        "nbest": experiment.nbest,
        "--guard": args.guard,
    }
    args.plots = _report_plots(args)
    return inputs, {"--out": list(report_files(args.experiment_dir, args.out, args.plots).values())}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``apply``, ``folds``, ``convert``, ``truncate``, ``eval``, ``oracle``, ``signif``, ``report`` and ``experiment``
    to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "apply",
        help="select the best hypothesis per segment under given weights",
        epilog="example: rerank apply --nbest test.full.nbest --weights w.json --out test.reranked",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list to re-rank")
    p.add_argument("--weights", required=True, help="weights JSON (rerank tune --out): one weight per column")
    p.add_argument("--out", required=True, help="1-best output, one line per segment ('-' for stdout)")
    p.add_argument("--out-nbest", help="also write the n-best list with totals = weighted scores")
    p.add_argument(
        "--folds",
        help="folds file (rerank folds): fold k's segments use the --weights file whose path has {fold} replaced by k",
    )
    shard_options(p, "segments of the list")
    p.set_defaults(
        func=cmd_apply,
        paths=lambda a: (
            {
                "--nbest": a.nbest,
                "--weights": [a.weights.replace("{fold}", "0")] if a.folds else a.weights,
                "--folds": a.folds,
            },
            {"--out": a.out, "--out-nbest": a.out_nbest},
        ),
    )

    p = sub.add_parser(
        "folds",
        help="K-fold split of a test set by image, for cross-fitting (rerank crossfit)",
        epilog="example: rerank folds --segment-images test_images.txt --k 5 --out folds.tsv",
    )
    p.add_argument("--segment-images", required=True, help="image file name of each segment, one per line")
    p.add_argument("--k", type=positive_int, default=5, help="number of folds (≥ 2)")
    p.add_argument("--seed", type=int, default=1, help="seed of the fold assignment")
    p.add_argument("--out", required=True, help="folds file: image<TAB>fold per segment")
    p.set_defaults(func=cmd_folds, paths=lambda a: ({"--segment-images": a.segment_images}, {"--out": a.out}))

    p = sub.add_parser(
        "convert",
        help="import another tool's n-best list (fairseq-generate output, JSON lines, "
        "Marian/Moses n-best) as rerank's n-best list with its signature",
        description="fairseq: fairseq-generate --nbest N output (H-/D-/P- lines; columns Fairseq = the "
        "H- score, FairseqSum and FairseqLen from the P- lines; base-2 logs converted to "
        'natural logs; beam feature Fairseq). jsonl: one {"id": 0, "hypotheses": '
        '[...], "scores": {"NAME": [...]}} per line. marian: Marian\'s (Moses\') '
        "n-best list. Ids 0..N-1, sorted.",
        epilog="example: fairseq-generate data-bin --path model.pt --nbest 20 --beam 20 > gen.out; "
        "rerank convert --from fairseq gen.out --out test.nbest",
    )
    p.add_argument("input", help="the file to convert ('-' for standard input)")
    p.add_argument("--from", dest="format", required=True, choices=CONVERT_FORMATS, help="its format")
    p.add_argument("--out", required=True, help="rerank n-best list to write (and OUT.json, its signature)")
    p.add_argument(
        "--beam-feature",
        help="the column the producing decoder ranked its beam by, declared in the "
        "signature (default: Fairseq for fairseq; none otherwise, and then no "
        "signature is written), e.g. --beam-feature F0",
    )
    p.add_argument(
        "--text",
        default="h",
        choices=("h", "detok"),
        help="fairseq: the H- hypothesis (tokenised) or the D- one (detokenised) (default: h)",
    )
    signature_option(p)
    p.set_defaults(
        func=cmd_convert,
        paths=lambda a: ({"input": a.input}, {"--out": a.out, "--out (signature)": signature_path(a.out)}),
    )

    p = sub.add_parser(
        "truncate",
        help="the first N hypotheses of every segment (e.g. 20-best from 50-best), or the decoder's own 1-best as text",
        epilog="example: rerank truncate --nbest test.50.nbest --size 20 --out test.20.nbest; "
        "rerank truncate --nbest test.nbest --out-1best test.1best (the first hypothesis of each segment)",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list")
    p.add_argument("--size", type=positive_int, help="hypotheses kept per segment (needed with --out), e.g. 20")
    p.add_argument("--out", help="truncated list (and OUT.json, its signature)")
    p.add_argument(
        "--out-1best",
        help="the first hypothesis of every segment, one line each: the decoder's own 1-best "
        "(the list's order, as Moses, fairseq and Marian write them)",
    )
    signature_option(p)
    p.set_defaults(
        func=cmd_truncate,
        paths=lambda a: (
            {"--nbest": a.nbest},
            {
                "--out": a.out,
                "--out (signature)": signature_path(a.out),
                "--out-1best": a.out_1best,
            },
        ),
    )

    p = sub.add_parser(
        "average",
        help="average the replicas' weights (each L1-normalised) into one weights file",
        epilog="example: rerank average --weights w.seed1.json --weights w.seed2.json --weights w.seed3.json --out w.avg.json",
    )
    p.add_argument("--weights", required=True, action="append", help="a replica's weights JSON; repeat for each")
    p.add_argument("--out", required=True, help="the averaged weights JSON (rerank apply --weights takes it)")
    p.set_defaults(func=cmd_average, paths=lambda a: ({"--weights": a.weights}, {"--out": a.out}))

    p = sub.add_parser(
        "merge",
        help="join the shards of one --num-shards run (features add, apply, mbr, generate, nmt nbest) in segment order",
        epilog="example: rerank merge --out test.full.nbest test.full.shard0.nbest test.full.shard1.nbest; "
        "rerank merge --out test.mbr.de test.mbr.shard0.de test.mbr.shard1.de",
    )
    p.add_argument(
        "shards",
        nargs="+",
        help="the shards (any order): lists or text outputs written with --num-shards/--shard-id, each with its "
        "signature SHARD.json",
    )
    p.add_argument("--out", required=True, help="the joined list (and OUT.json, its signature) or text output")
    signature_option(p)
    p.set_defaults(
        func=cmd_merge,
        paths=lambda a: ({"shards": a.shards}, {"--out": a.out, "--out (signature)": signature_path(a.out)}),
    )

    p = sub.add_parser(
        "union",
        help="join n-best lists of the same segments (e.g. a left-to-right and a right-to-left "
        "model's), each distinct hypothesis once; to be scored again",
        epilog="example: rerank union --nbest test.l2r.nbest --nbest test.r2l.nbest --out test.union.nbest; then "
        "rerank features add --nbest test.union.nbest --scorer fairseq:model/checkpoint_avg.pt,dict=model,"
        "bpe=subword-nmt:model/bpe.codes,name=NMT --beam-feature NMTNorm --beam-set NMT,WordPenalty,NMTNorm "
        "--source test.en --out test.union.nmt.nbest",
    )
    p.add_argument(
        "--nbest",
        required=True,
        action="append",
        help="an n-best list; at least two, each with the same segments; segment i of the union holds "
        "the first list's hypotheses, then each later list's not seen before",
    )
    p.add_argument(
        "--out",
        required=True,
        help="the union (and OUT.json, its signature): column WordPenalty only "
        "(model scores of one list do not describe another's hypotheses)",
    )
    signature_option(p)
    p.set_defaults(
        func=cmd_union,
        paths=lambda a: ({"--nbest": a.nbest}, {"--out": a.out, "--out (signature)": signature_path(a.out)}),
    )

    p = sub.add_parser(
        "eval",
        help="BLEU, TER, chrF with sacrebleu (signatures included)",
        epilog="example: rerank eval --ref test.de --hyp beam=test.1best --hyp reranked=test.reranked --tokenize none --metrics bleu,chrf,ter",
    )
    p.add_argument(
        "--ref",
        required=True,
        action="append",
        help="reference translations, one per line; give --ref again for several references per segment (sacrebleu's rule), e.g. --ref test.de --ref test.2.de",
    )
    p.add_argument("--hyp", required=True, action="append", help="hypothesis file, or NAME=FILE; repeatable")
    bleu_options(p)
    p.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help=f"comma-separated metrics (default: {','.join(DEFAULT_METRICS)}); each is "
        + METRIC_HELP
        + "; e.g. --metrics bleu,chrf,seg:comet reads FILE.comet beside each --hyp FILE",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--out", help="also write what is printed to this file")
    p.set_defaults(
        func=cmd_eval,
        paths=lambda a: (
            {
                "--ref": a.ref,
                "--hyp": [path for _, path in _hyp_files(a.hyp)],
                "--metrics": _sidecars(a.metrics, [path for _, path in _hyp_files(a.hyp)]),
            },
            {"--out": a.out},
        ),
    )

    p = sub.add_parser(
        "oracle",
        help="oracle selection from an n-best list (the hypotheses maximising corpus BLEU, or --metric)",
        epilog="example: rerank oracle --nbest test.nbest --ref test.de --tokenize none --metric chrf "
        "--out test.oracle",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list")
    p.add_argument(
        "--ref",
        required=True,
        action="append",
        help="reference translations, one per line; give --ref again for several references per segment (sacrebleu's rule), e.g. --ref test.de --ref test.2.de",
    )
    p.add_argument("--out", required=True, help="the selected hypothesis of every segment")
    p.add_argument("--json", action="store_true", help="print the result as JSON (default: one line)")
    metric_options(p, "the oracle")
    bleu_options(p)
    p.set_defaults(
        func=cmd_oracle,
        paths=lambda a: (
            {"--nbest": a.nbest, "--ref": a.ref, "--metric": seg_sidecars(a.metric, a.nbest)},
            {"--out": a.out},
        ),
    )

    def signif_options(p):
        p.add_argument(
            "--metrics",
            default=",".join(DEFAULT_METRICS),
            help=f"comma-separated (default: {','.join(DEFAULT_METRICS)}; MultEval's are bleu,meteor,ter,length): "
            + METRIC_HELP
            + " (length: 100 · hyp/ref length, as MultEval; seg: scores one per line in FILE.NAME beside "
            "every replica FILE)",
        )
        p.add_argument("--shuffles", type=positive_int, default=10000, help="approximate randomisation trials")
        p.add_argument(
            "--resamples", type=non_negative_int, default=10000, help="bootstrap resamples for s_sel (0: none)"
        )
        p.add_argument(
            "--seed",
            type=int,
            default=DEFAULT_SEED,
            help=f"seed of shuffles and resamples (default: {DEFAULT_SEED}, sacrebleu's)",
        )
        p.add_argument("--compare-to", help="system name for the second mark (‡), e.g. VSE")

    p = sub.add_parser(
        "signif",
        help="MultEval-style significance: score (s_sel/s_opt/p) over replicas",
        epilog="example: rerank signif --ref test.de --tokenize none --baseline test.1best --system +r2l=r2l.seed1.txt,r2l.seed2.txt,r2l.seed3.txt --metrics bleu,chrf,ter",
    )
    p.add_argument(
        "--ref",
        required=True,
        action="append",
        help="reference translations, one per line; give --ref again for several references per segment (sacrebleu's rule), e.g. --ref test.de --ref test.2.de",
    )
    p.add_argument(
        "--baseline", required=True, nargs="+", help="baseline replica files, FILE[,FILE...] (as --system's)"
    )
    p.add_argument("--system", action="append", help="NAME=FILE[,FILE...] replica files; repeatable")
    p.add_argument("--nbest", action="append", help="n-best list(s) of the test set: adds oracle rows")
    bleu_options(p)
    p.add_argument("--lang", default="de", help="METEOR language")
    p.add_argument(
        "--format", default="text", choices=["text", "markdown", "latex", "json", "csv"], help="table format"
    )
    p.add_argument("--out", help="also write what is printed to this file")
    signif_options(p)
    p.set_defaults(
        func=cmd_signif,
        paths=lambda a: (
            {
                "--ref": a.ref,
                "--baseline": _files(a.baseline),
                "--nbest": a.nbest,
                "--system": [f for item in a.system or [] for f in _parse_system(item)[1]],
                "--metrics": _sidecars(
                    a.metrics, _files(a.baseline) + [f for item in a.system or [] for f in _parse_system(item)[1]]
                ),
            },
            {"--out": a.out},
        ),
    )

    p = sub.add_parser(
        "report",
        help="the paper's Table 3/4 layout, significance and plots from a pipeline directory",
        epilog="example: rerank report out/multi30k --metrics bleu,meteor,ter,chrf,length --compare-to +nmt",
    )
    p.add_argument("experiment_dir")
    p.add_argument("--out", help="output directory (default EXPERIMENT_DIR/report)")
    p.add_argument(
        "--partial",
        action="store_true",
        help="leave out systems whose replica files do not all exist yet, naming them (default: an error)",
    )
    p.add_argument(
        "--no-plots",
        action="store_true",
        help="write the tables only, not gains.png and null.png (default: plots when matplotlib, the [report] "
        "extra, is installed)",
    )
    p.add_argument(
        "--guard",
        help="mark (§) the rows the val guard does not pass: its verdicts file (scripts/val_guard.py writes "
        "OUT/report/val_guard.verdicts.json) (default: no marks), e.g. --guard out/job/report/val_guard.verdicts.json",
    )
    signif_options(p)
    p.set_defaults(func=cmd_report, paths=_report_paths)

    _add_experiment_parser(sub)


def cmd_experiment(args) -> None:
    def replicas(pattern: str):
        if "{replica}" in pattern:
            return [pattern.replace("{replica}", str(k)) for k in range(1, args.replicas + 1)]
        return [f for f in pattern.split(",") if f]

    systems = []
    for given in args.system or []:
        if len(given) == 1:
            if "=" not in given[0]:
                raise InputError(
                    f"--system {given[0]!r}: expected NAME=FILES (FILE[,FILE...] or a {{replica}} PATTERN)"
                )
            name, files = given[0].rsplit("=", 1)
        elif len(given) == 2:
            note_once(
                "'--system NAME FILES' is now '--system NAME=FILES' (as rerank signif's); the old form works for this release"
            )
            name, files = given
        else:
            raise InputError(f"--system {' '.join(given)!r}: expected NAME=FILES")
        if not name or not files:
            raise InputError(
                f"--system {name!r} {files!r}: expected NAME FILE[,FILE...] or NAME PATTERN with {{replica}}"
            )
        systems.append((name, replicas(files)))
    paper = None
    if args.paper_table:
        select = {}
        for item in args.paper_select or []:
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise InputError(f"--paper-select {item!r}: expected COLUMN=VALUE")
            select[key] = value
        paper = {"table": args.paper_table, "select": select}
    experiment = Experiment(
        _reference(args), _files(args.baseline), systems, args.nbest, bleu_settings(args), paper, args.caption
    )
    written = experiment.write(args.experiment_dir)
    path = os.path.join(args.experiment_dir, "experiment.json")
    print(f"{path}: {'written' if written else 'unchanged'} ({len(systems)} systems)", file=sys.stderr)


def _reference(args) -> str:
    if args.reference is not None:
        note_once("'--reference' is now '--ref' (as every other verb's); the old spelling works for this release")
        if args.ref is not None:
            raise InputError("give --ref once (--reference is its old spelling)")
        return args.reference
    if args.ref is None:
        raise InputError("--ref is required (the reference file of the test set)")
    if len(args.ref) > 1:
        raise InputError("rerank experiment takes one --ref: a manifest with several references is not supported yet")
    return args.ref[0]


def _add_experiment_parser(sub) -> None:
    p = sub.add_parser(
        "experiment",
        help="write an experiment's manifest (EXP_DIR/experiment.json) for rerank report",
        epilog="example: rerank experiment out/multi30k --ref data/tok/test.de --baseline "
        "nbest/test.1best --nbest nbest/test.nbest --tokenize none --replicas 3 "
        "--system '+nmt=rerank/nmt/test.seed{replica}.txt'",
    )
    p.add_argument("experiment_dir", help="the experiment directory; paths inside it are stored relative to it")
    p.add_argument("--ref", action="append", help="reference file of the test set (required)")
    p.add_argument("--reference", help="the old spelling of --ref (works this release, with a note)")
    p.add_argument(
        "--baseline",
        required=True,
        nargs="+",
        help="the baseline's replica files, FILE[,FILE...] (e.g. the beam 1-best)",
    )
    p.add_argument(
        "--system",
        action="append",
        required=True,
        nargs="+",
        metavar="NAME=FILES",
        help="a row, as rerank signif's: NAME=FILE[,FILE...] or NAME=PATTERN where {replica} runs "
        "1..--replicas (the files follow the last '=', so names may hold one: '+MLMME beta=1=…'); "
        "repeatable, in row order",
    )
    p.add_argument("--replicas", type=positive_int, default=3, help="replicas of a {replica} pattern (default: 3)")
    p.add_argument("--nbest", help="the test n-best list: adds the oracle row (default: none)")
    p.add_argument("--caption", help="the protocol, printed above the report's footer (default: none)")
    p.add_argument("--paper-table", help="published scores to print beside ours (TSV, see rerank report)")
    p.add_argument("--paper-select", action="append", help="COLUMN=VALUE choosing the published rows; repeatable")
    bleu_options(p)
    p.set_defaults(
        func=cmd_experiment,
        paths=lambda a: (
            {"--ref": a.ref if a.reference is None else a.reference, "--paper-table": a.paper_table},
            {"manifest": os.path.join(a.experiment_dir, "experiment.json")},
        ),
    )
