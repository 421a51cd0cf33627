"""``rerank analyze``: the sentences, buckets and n-grams behind a significance table
(:mod:`rerank.report_analysis`), for systems given as replica files."""

from __future__ import annotations

import argparse
import sys

from rerank.argtypes import positive_int, seed
from rerank.cli.options import bleu_options, lang_option, ref_option, references
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.metrics import read_system, split_metrics
from rerank.metrics.references import segment_count
from rerank.nbest import read_nbest
from rerank.outputs import StagedOutputs
from rerank.report_analysis import AnalysisSettings, analyze, write_analysis
from rerank.textio import read_lines, read_references


def _system(item: str):
    """``NAME=FILE[,FILE...]`` -> (name, files)."""
    name, _, files = item.rpartition("=")
    replicas = [f for f in files.split(",") if f]
    if not name or not replicas:
        raise InputError(f"--system {item!r}: expected NAME=FILE[,FILE...]")
    return name, replicas


def cmd_analyze(args) -> None:
    refs = read_references(references(args))
    count = segment_count(refs)
    systems = dict([("baseline", [args.baseline])] + [_system(item) for item in args.system])
    texts = {name: [read_system(path, count) for path in files] for name, files in systems.items()}
    sources = read_lines(args.source) if args.source else None
    if sources is not None and len(sources) != count:
        raise InputError(f"{len(sources)} source lines for {count} references", args.source)
    settings = AnalysisSettings(
        metrics=tuple(split_metrics(args.metrics)),
        tokenize=args.tokenize,
        lowercase=args.lowercase,
        lang=args.lang,
        bootstrap=args.bootstrap,
        seed=args.seed,
        top=args.top,
    )
    nbest = read_nbest(args.nbest, count) if args.nbest else None
    train = read_lines(args.train_source) if args.train_source else None
    result = analyze(refs, texts, settings, sources, nbest, train)
    with StagedOutputs() as outputs:
        files = write_analysis(result, args.out, outputs)
    for name, part in result.items():
        gains = sum(1 for s in part["sentences"] if s["gain"] > 0)
        losses = sum(1 for s in part["sentences"] if s["gain"] < 0)
        print(
            f"analyze: {name} (replica {part['replica']}): {gains} sentences gain, {losses} lose under "
            f"{settings.metrics[0]} -> {args.out}",
            file=sys.stderr,
        )
    print(files["analysis.json"])


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``analyze`` to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "analyze",
        help="sentences ranked by gain, buckets with intervals, n-grams over/under-produced, per system",
        epilog="example: rerank analyze --ref test.de --tokenize none --baseline test.1best "
        "--system +r2l=r2l.seed1.txt,r2l.seed2.txt --source test.en --nbest test.nbest --out analysis/",
    )
    ref_option(p)
    p.add_argument("--baseline", required=True, help="the baseline's output (one hypothesis per line)")
    p.add_argument("--system", action="append", required=True, help="NAME=FILE[,FILE...] replica files; repeatable")
    p.add_argument("--source", help="the source sentences (shown beside the sentences; default: none)")
    p.add_argument("--nbest", help="the n-best list the systems picked from: the picked rank (default: none)")
    p.add_argument(
        "--train-source", help="the training corpus' source side: the word-frequency buckets (default: none)"
    )
    p.add_argument("--metrics", default="bleu,chrf,ter", help="comma-separated; the first ranks the sentences")
    p.add_argument("--bootstrap", type=positive_int, default=1000, help="paired bootstrap resamples per bucket")
    p.add_argument("--seed", type=seed, default=DEFAULT_SEED, help="seed of the resamples")
    p.add_argument("--top", type=positive_int, default=20, help="n-grams each way")
    p.add_argument("--out", required=True, help="output directory")
    bleu_options(p)
    lang_option(p)
    p.set_defaults(
        func=cmd_analyze,
        paths=lambda a: (
            {
                "--ref": a.ref,
                "--baseline": a.baseline,
                "--system": [f for item in a.system for f in _system(item)[1]],
                "--source": a.source,
                "--nbest": a.nbest,
                "--train-source": a.train_source,
            },
            {"--out": a.out},
        ),
    )
