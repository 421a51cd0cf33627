"""The scoring verbs: ``rerank eval``, ``oracle``, ``signif``, ``report``, ``experiment`` (each
parser beside its handler; the work is in the library modules they call)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile

from rerank.argtypes import positive_int
from rerank.cli.options import (
    bleu_options,
    bleu_settings,
    lang_option,
    metric_options,
    note_once,
    oracle_metric_option,
    ref_option,
    references,
    seg_sidecars,
    signif_options,
    test_settings,
)
from rerank.errors import InputError
from rerank.experiment import Experiment
from rerank.metrics import DEFAULT_METRICS, METRIC_HELP, evaluate_files, make_objective, split_metrics
from rerank.metrics import format_table as format_scores
from rerank.metrics.base import METRICS
from rerank.metrics.bleu_stats import sacrebleu_score
from rerank.outputs import atomic_write
from rerank.report import (
    SignificanceSettings,
    experiment_report,
    format_table,
    report_files,
    significance_table,
)
from rerank.report_plots import plots_available
from rerank.report_sets import sets_report
from rerank.tuning.oracle import oracle_file


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``eval``, ``oracle``, ``signif``, ``report`` and ``experiment`` to the ``rerank``
    sub-commands."""
    _add_eval(sub)
    _add_oracle(sub)
    _add_signif(sub)
    _add_report(sub)
    _add_experiment_parser(sub)


def cmd_eval(args) -> None:
    files, metrics = _hyp_files(args.hyp), split_metrics(args.metrics)
    rows = evaluate_files(
        references(args), files, metrics, args.tokenize, args.lowercase, args.lang, sentence_level=args.sentence_level
    )
    if not args.sentence_level:
        text = json.dumps(rows, indent=2) + "\n" if args.json else format_scores(rows)
    elif args.json:  # every segment's own scores (sacreBLEU --sentence-level): JSON lines, or a TSV
        text = "".join(json.dumps(row) + "\n" for row in rows)
    else:
        keys = list(rows[0]) if rows else ["system", "segment"]
        text = "".join("\t".join(str(row.get(k, k)) for k in keys) + "\n" for row in [dict(zip(keys, keys))] + rows)
    sys.stdout.write(text)
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(text)


def cmd_oracle(args) -> None:
    bleu = bleu_settings(args)
    metric = make_objective(args.metric, bleu.tokenize, bleu.lowercase, args.lang)
    summed, _ = oracle_file(args.nbest, references(args), args.out, metric)
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
        "score_line": metric.describe(summed),
        "nbest": args.nbest,
        "out": args.out,
        "signature": metric.signature(),
    }
    print(json.dumps(result) if args.json else f"oracle {metric.describe(summed)}")


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
    return [side for spec in split_metrics(metrics) for path in files for side in seg_sidecars(spec, path)]


def cmd_signif(args) -> None:
    systems = [_parse_system(item) for item in args.system or []]
    oracle_metric = make_objective(args.oracle_metric, args.tokenize, args.lowercase, args.lang)
    with tempfile.TemporaryDirectory() as tmp:
        for k, nbest in enumerate(args.nbest or []):
            name = "oracle" if len(args.nbest) == 1 else f"oracle{k + 1}"
            path = os.path.join(tmp, f"{name}.txt")
            oracle_file(nbest, references(args), path, oracle_metric)
            systems.append((name, [path]))
        settings = SignificanceSettings(
            metrics=tuple(split_metrics(args.metrics)),
            tokenize=args.tokenize,
            lowercase=args.lowercase,
            lang=args.lang,
            shuffles=args.shuffles,
            resamples=args.resamples,
            seed=args.seed,
            compare_to=args.compare_to,
            progress=True,  # a bar on a terminal, a line every few seconds elsewhere
            **test_settings(args),
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
    dirs = args.experiment_dir
    _one_or_sets(args)
    for directory in dirs:
        written = experiment_report(
            directory,
            args.out,
            metrics=split_metrics(args.metrics),
            shuffles=args.shuffles,
            resamples=args.resamples,
            seed=args.seed,
            compare_to=args.compare_to,
            partial=args.partial,
            plots=args.plots,
            marks=args.marks,
            lang=args.lang,
            testing=test_settings(args),
            analysis={"source": args.source, "train_source": args.train_source} if args.analysis else None,
        )
        with open(written["text"], encoding="utf-8") as handle:
            sys.stdout.write(handle.read())
        for kind, path in written.items():
            print(f"{kind}: {path}", file=sys.stderr)
    if len(dirs) > 1:
        for kind, path in sets_report(dirs, _sets_out(args), args.alpha).items():
            print(f"{kind}: {path}", file=sys.stderr)
        with open(os.path.join(_sets_out(args), "sets.txt"), encoding="utf-8") as handle:
            sys.stdout.write("\n" + handle.read())


def _one_or_sets(args) -> None:
    """Refuse what several test sets cannot share (one ``--out``, one ``--source``)."""
    if len(args.experiment_dir) > 1 and (args.out or args.source or args.train_source):
        raise InputError(
            "several test sets: each report goes to its own EXP/report/ (no --out, --source, --train-source)"
        )


def _sets_out(args) -> str:
    """Where the report over several test sets goes (``--sets-out``; default: the first set's report/sets)."""
    return args.sets_out or os.path.join(args.experiment_dir[0], "report", "sets")


def _report_paths(args):
    """``report``'s inputs (every file its manifests name) and outputs (its tables and plots)."""
    _one_or_sets(args)
    inputs: dict = {"--marks": args.marks, "--source": args.source, "--train-source": args.train_source}
    for directory in args.experiment_dir:  # every manifest is checked before anything else is said
        experiment = Experiment.read(directory, args.partial)
        if experiment.left_out:
            print(
                f"rerank report: leaving out systems not run yet (--partial): {', '.join(experiment.left_out)}",
                file=sys.stderr,
            )
        inputs[directory] = [
            os.path.join(directory, "experiment.json"),
            experiment.reference,
            *experiment.baseline,
            *[f for _, files in experiment.systems for f in files],
            *([experiment.nbest] if experiment.nbest else []),
        ]
    args.plots = _report_plots(args)
    outputs = [
        path for directory in args.experiment_dir for path in report_files(directory, args.out, args.plots).values()
    ]
    if len(args.experiment_dir) > 1:
        outputs += [os.path.join(_sets_out(args), name) for name in ("sets.json", "sets.txt")]
    return inputs, {"--out": outputs}


def _add_eval(sub) -> None:
    """``rerank eval``: its parser and options."""
    p = sub.add_parser(
        "eval",
        help=f"score outputs with any metric ({', '.join(METRICS.names())}; sacreBLEU's numbers and signatures)",
        epilog="example: rerank eval --ref test.de --hyp beam=test.1best --hyp reranked=test.reranked --tokenize none --metrics bleu,chrf,ter",
    )
    ref_option(p)
    p.add_argument("--hyp", required=True, action="append", help="hypothesis file, or NAME=FILE; repeatable")
    bleu_options(p)
    p.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help=f"comma-separated metrics (default: {','.join(DEFAULT_METRICS)}); each is "
        + METRIC_HELP
        + "; e.g. --metrics bleu,chrf,seg:comet reads FILE.comet beside each --hyp FILE",
    )
    lang_option(p)
    p.add_argument(
        "--sentence-level",
        action="store_true",
        help="every segment's own scores (sacreBLEU's --sentence-level; sentence BLEU with its effective order): "
        "a TSV of system, segment and one column per metric (--json: JSON lines)",
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


def _add_oracle(sub) -> None:
    """``rerank oracle``: its parser and options."""
    p = sub.add_parser(
        "oracle",
        help="oracle selection from an n-best list (the hypotheses maximising corpus BLEU, or --metric)",
        epilog="example: rerank oracle --nbest test.nbest --ref test.de --tokenize none --metric chrf "
        "--out test.oracle",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list")
    ref_option(p)
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


def _add_signif(sub) -> None:
    """``rerank signif``: its parser and options."""
    p = sub.add_parser(
        "signif",
        help="MultEval-style significance: score (s_sel/s_opt/p) over replicas",
        epilog="example: rerank signif --ref test.de --tokenize none --baseline test.1best --system +r2l=r2l.seed1.txt,r2l.seed2.txt,r2l.seed3.txt --metrics bleu,chrf,ter",
    )
    ref_option(p)
    p.add_argument(
        "--baseline", required=True, nargs="+", help="baseline replica files, FILE[,FILE...] (as --system's)"
    )
    p.add_argument("--system", action="append", help="NAME=FILE[,FILE...] replica files; repeatable")
    p.add_argument("--nbest", action="append", help="n-best list(s) of the test set: adds oracle rows")
    oracle_metric_option(p)
    bleu_options(p)
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


def _add_report(sub) -> None:
    """``rerank report``: its parser and options."""
    p = sub.add_parser(
        "report",
        help="the paper's Table 3/4 layout, significance and plots from a pipeline directory",
        epilog="example: rerank report out/multi30k --metrics bleu,meteor,ter,chrf,length --compare-to +nmt",
    )
    p.add_argument(
        "experiment_dir",
        nargs="+",
        help="the experiment directory; several: one report each, and sets.txt/sets.json counting the test sets "
        "on which each effect holds (Dror et al. 2017)",
    )
    p.add_argument(
        "--sets-out", help="with several directories: where sets.txt/sets.json go (default: FIRST/report/sets)"
    )
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
        "--marks",
        help='mark (§) rows a check outside the report names: JSON {"marks": {system: why}, "legend": text} '
        "(default: no marks; the main job's val guard, scripts/val_guard.py, writes "
        "OUT/report/val_guard.marks.json), e.g. --marks out/job/report/val_guard.marks.json",
    )
    p.add_argument(
        "--analysis",
        action="store_true",
        help="also the sentence analysis of every system (rerank analyze): report/analysis/ and its sections "
        "of report/index.html (default: off)",
    )
    p.add_argument("--source", help="with --analysis: the test set's source sentences, shown (default: none)")
    p.add_argument("--train-source", help="with --analysis: the training corpus' source side, word-frequency buckets")
    signif_options(p, adjust="maxT")
    p.set_defaults(func=cmd_report, paths=_report_paths)


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
        _reference(args),
        _files(args.baseline),
        systems,
        args.nbest,
        bleu_settings(args),
        paper,
        args.caption,
        metric=args.oracle_metric,
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
    oracle_metric_option(p)
    bleu_options(p)
    p.set_defaults(
        func=cmd_experiment,
        paths=lambda a: (
            {"--ref": a.ref if a.reference is None else a.reference, "--paper-table": a.paper_table},
            {"manifest": os.path.join(a.experiment_dir, "experiment.json")},
        ),
    )
