"""The list verbs: ``rerank apply``, ``folds``, ``convert``, ``truncate``, ``average``, ``merge``,
``union`` (each parser beside its handler; the work is in the library modules they call); the
scoring verbs are :mod:`rerank.cli.scoring`'s."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from rerank.argtypes import positive_int, seed
from rerank.cli import scoring
from rerank.cli.options import (
    shard_option_value,
    shard_options,
    signature_option,
)
from rerank.convert import FORMATS as CONVERT_FORMATS
from rerank.convert import convert_file
from rerank.errors import InputError
from rerank.folds import assign_folds, write_folds
from rerank.outputs import atomic_write, signature_path
from rerank.reranking import apply_file, average_weights, truncate_file, union_files
from rerank.shards import merge_shards
from rerank.textio import read_lines
from rerank.tuning.weights import MISSING


def cmd_apply(args) -> None:
    def say(text: str) -> None:
        print(text, file=sys.stderr)

    segments = apply_file(
        args.nbest,
        args.weights,
        args.out,
        args.out_nbest,
        args.folds,
        shard_option_value(args),
        missing=args.missing,
        column=args.column,
        say=say,
    )
    also = f" (and the list with weighted totals -> {args.out_nbest})" if args.out_nbest else ""
    used = args.weights if args.column is None else f"the column {args.column}"
    print(f"apply: {segments} segments re-ranked with {used} -> {args.out}{also}", file=sys.stderr)


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
    source = _convert_input(args)
    nbest = convert_file(
        args.format,
        source,
        args.out,
        args.beam_feature,
        args.text,
        lambda line: print(line, file=sys.stderr),
        args.fill_missing,
    )
    print(
        f"{source}: {nbest.num_segments} segments, {len(nbest.hypotheses)} hypotheses, columns "
        f"{' '.join(dict.fromkeys(nbest.feature_names)) or '(none)'} -> {args.out}",
        file=sys.stderr,
    )


def cmd_truncate(args) -> None:
    written = truncate_file(args.nbest, args.size, args.out, args.out_1best)
    outputs = [f"{args.size}-best list, {written} hypotheses -> {args.out}"] if args.out else []
    outputs += [f"the first hypothesis of every segment -> {args.out_1best}"] if args.out_1best else []
    print(f"truncate: {args.nbest}: {'; '.join(outputs)}", file=sys.stderr)


def cmd_union(args) -> None:
    added = union_files(args.nbest, args.out)
    parts = ", ".join(f"{n} from {path}" for path, n in zip(args.nbest, added))
    print(f"{sum(added)} distinct hypotheses ({parts}), column WordPenalty -> {args.out}", file=sys.stderr)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``apply``, ``folds``, ``convert``, ``truncate``, ``average``, ``merge``, ``union`` and the scoring verbs
    to the ``rerank`` sub-commands."""
    _add_apply(sub)
    _add_folds(sub)
    _add_convert(sub)
    _add_truncate(sub)
    _add_average(sub)
    _add_merge(sub)
    _add_union(sub)
    scoring.add_parsers(sub)


def _add_apply(sub) -> None:
    """``rerank apply``: its parser and options."""
    p = sub.add_parser(
        "apply",
        help="select the best hypothesis per segment under given weights, or by one column (QE re-ranking)",
        epilog="example: rerank apply --nbest test.full.nbest --weights w.json --out test.reranked; "
        "or, QE re-ranking by one column: rerank apply --nbest test.kiwi.nbest --column CometKiwi --out test.qe",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list to re-rank")
    how = p.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--weights", help="weights JSON (rerank tune --out): one weight per column (see --missing), e.g. w.json"
    )
    how.add_argument(
        "--column",
        metavar="NAME",
        help="re-rank by this one column, every other weighing 0: the argmax of a QE column such as CometKiwi "
        "(Fernandes et al. 2022's fixed re-ranking), e.g. --column CometKiwi",
    )
    p.add_argument(
        "--missing",
        choices=MISSING,
        default="error",
        help="a column the weights leave out: error (refused), or zero (weighs 0, said in one line) (default: error)",
    )
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
                "--weights": [a.weights.replace("{fold}", "0")] if a.folds and a.weights else a.weights,
                "--folds": a.folds,
            },
            {"--out": a.out, "--out-nbest": a.out_nbest},
        ),
    )


def _add_folds(sub) -> None:
    """``rerank folds``: its parser and options."""
    p = sub.add_parser(
        "folds",
        help="K-fold split of a test set by image, for cross-fitting (rerank crossfit)",
        epilog="example: rerank folds --segment-images test_images.txt --k 5 --out folds.tsv",
    )
    p.add_argument("--segment-images", required=True, help="image file name of each segment, one per line")
    p.add_argument("--k", type=positive_int, default=5, help="number of folds (≥ 2)")
    p.add_argument("--seed", type=seed, default=1, help="seed of the fold assignment")
    p.add_argument("--out", required=True, help="folds file: image<TAB>fold per segment")
    p.set_defaults(func=cmd_folds, paths=lambda a: ({"--segment-images": a.segment_images}, {"--out": a.out}))


def _convert_input(args) -> str:
    """The file ``convert`` reads: the positional or ``--input``, exactly one of them."""
    if (args.input is None) == (args.input_option is None):
        raise InputError("give the file to convert once: as the positional FILE or as --input FILE")
    return args.input if args.input is not None else args.input_option


def _add_convert(sub) -> None:
    """``rerank convert``: its parser and options."""
    p = sub.add_parser(
        "convert",
        help="import another tool's n-best list (fairseq-generate output, JSON lines, "
        "Marian/Moses n-best) as rerank's n-best list with its signature",
        description="fairseq: fairseq-generate --nbest N output (H-/D-/P- lines; columns Fairseq = the "
        "H- score, FairseqSum and FairseqLen from the P- lines; base-2 logs converted to "
        'natural logs; beam feature Fairseq). jsonl: one {"id": 0, "hypotheses": '
        '[...], "scores": {"NAME": [...]}} per line. marian: Marian\'s (Moses\') '
        "n-best list; moses: a Moses n-best list (the same reader). Ids 0..N-1, sorted.",
        epilog="example: fairseq-generate data-bin --path model.pt --nbest 20 --beam 20 > gen.out; "
        "rerank convert --from fairseq gen.out --out test.nbest",
    )
    p.add_argument("input", nargs="?", help="the file to convert ('-' for standard input), or --input")
    p.add_argument("--input", dest="input_option", metavar="FILE", help="the file to convert, as the positional")
    p.add_argument("--from", dest="format", required=True, choices=CONVERT_FORMATS, help="its format")
    p.add_argument("--out", required=True, help="rerank n-best list to write (and OUT.json, its signature)")
    p.add_argument(
        "--beam-feature",
        help="the column the producing decoder ranked its beam by, declared in the "
        "signature (default: Fairseq for fairseq; otherwise the one column the list's order names, as "
        "tune infers it, said in one line; where none does, no signature is written), e.g. --beam-feature F0",
    )
    p.add_argument(
        "--fill-missing",
        type=float,
        metavar="SCORE",
        help="moses/marian: give each segment the list skips (ids jumping from 2 to 4) one empty hypothesis "
        "scored SCORE in every column, said in one line (default: such a list is refused), e.g. --fill-missing -100",
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
        paths=lambda a: (
            {"input": _convert_input(a)},
            {"--out": a.out, "--out (signature)": signature_path(a.out)},
        ),
    )


def _add_truncate(sub) -> None:
    """``rerank truncate``: its parser and options."""
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


def _add_average(sub) -> None:
    """``rerank average``: its parser and options."""
    p = sub.add_parser(
        "average",
        help="average the replicas' weights (each L1-normalised) into one weights file",
        epilog="example: rerank average --weights w.seed1.json --weights w.seed2.json --weights w.seed3.json --out w.avg.json",
    )
    p.add_argument("--weights", required=True, action="append", help="a replica's weights JSON; repeat for each")
    p.add_argument("--out", required=True, help="the averaged weights JSON (rerank apply --weights takes it)")
    p.set_defaults(func=cmd_average, paths=lambda a: ({"--weights": a.weights}, {"--out": a.out}))


def _add_merge(sub) -> None:
    """``rerank merge``: its parser and options."""
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


def _add_union(sub) -> None:
    """``rerank union``: its parser and options."""
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
