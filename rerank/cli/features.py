"""``rerank features add|extract``: append scorers' columns to an n-best list
(:func:`rerank.features.add.add_features`); CNN features of image files (:mod:`rerank.embed.cnn`)."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from rerank.argtypes import non_negative_float, positive_int
from rerank.argtypes import temperature as temperature_type
from rerank.cli.options import (
    FORMATS_HELP,
    OLD_SPELLING,
    add_config_options,
    config_from_args,
    device_options,
    device_settings,
    shard_option_value,
    shard_options,
    signature_option,
)
from rerank.config import setting_parser
from rerank.embed.lazy import cnn_module
from rerank.errors import InputError
from rerank.features.add import ScoringInputs, add_features
from rerank.features.scorer import scorer_summaries
from rerank.mbr import mbr_decode
from rerank.mbr.decoders import DECODERS, make_decoder, setting_fields
from rerank.mbr.engine import mbr_utilities
from rerank.mbr.kbest import LocalSearch
from rerank.metrics import make_metric
from rerank.nbest import BLOCK_HYPOTHESES
from rerank.outputs import atomic_write, signature_path
from rerank.signature import write_signed


def cmd_features(args) -> None:
    if args.features_verb == "extract":
        return _features_extract(args)
    add_features(
        args.nbest,
        args.scorer,
        args.out,
        ScoringInputs(args.source, args.images, args.image_split, args.segment_images, args.folds),
        devices=device_settings(args),
        beam=_beam(args),
        shard=shard_option_value(args),
        block_hypotheses=args.block_hypotheses,
    )


def _beam(args):
    """(feature, columns) of --beam-feature / --beam-set, or None."""
    if (args.beam_feature is None) != (args.beam_set is None):
        raise InputError(
            "--beam-feature and --beam-set go together (e.g. --beam-feature NMTNorm --beam-set NMT,WordPenalty,NMTNorm)"
        )
    if args.beam_feature is None:
        return None
    columns = [c for c in args.beam_set.split(",") if c]
    return args.beam_feature, columns


def _features_extract(args) -> None:
    cnn = cnn_module()
    if not args.out.endswith(".npy"):
        raise InputError("--out must end in .npy", args.out)
    backbone = cnn.load_backbone(args.cnn)
    names, matrix = cnn.extract_split(args.images_dir, args.image_split, backbone, args.batch_size, progress=True)
    with atomic_write(args.out, "wb", encoding=None) as out:
        np.save(out, matrix.astype(args.dtype))
    write_signed(
        args.out[:-4] + ".json",
        {
            "cnn": args.cnn,
            "dim": backbone.dim,
            "rows": len(names),
            "image_split": args.image_split,
            "dtype": args.dtype,
        },
        ["torch", "numpy", "pillow"],
    )
    print(f"{len(names)} images -> {args.out} ({matrix.shape[1]}-d {args.cnn})", file=sys.stderr)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``features`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("features", help="add feature columns to an n-best list")
    fsub = p.add_subparsers(dest="features_verb", required=True)
    q = fsub.add_parser(
        "add",
        help="append the columns of one or more scorers (existing ones untouched)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=FORMATS_HELP + "\n\nscorers:\n" + "\n".join(f"  {line}" for line in scorer_summaries().values()),
        epilog="example: rerank features add --nbest val.nbest --source val.en --scorer nmt:models/r2l --scorer mbr:bleu --out val.r2l.nbest",
    )
    q.add_argument("--nbest", required=True, help="Moses n-best list (id ||| hypothesis ||| name= value ... ||| total)")
    q.add_argument("--scorer", required=True, action="append", help="NAME:ARG, e.g. mlmme:MODEL_DIR; repeatable")
    q.add_argument("--source", help="source sentences, one per segment (preprocessed as the n-best text)")
    q.add_argument("--images", help="CNN feature matrix (.npy/.npz), rows = lines of --image-split")
    q.add_argument("--image-split", help="image file names, one per row of --images")
    q.add_argument("--segment-images", help="image file name of each segment")
    q.add_argument(
        "--folds",
        help="folds file (rerank folds): fold k's segments are scored by the --scorer whose "
        "argument has {fold} replaced by k (cross-fitting)",
    )
    q.add_argument(
        "--beam-feature",
        help="declare this column (after scoring) the list's beam feature, the one "
        "rerank tune --init beam starts from; for a list without one, e.g. rerank "
        "union's scored by the first list's model (default: none declared); e.g. "
        "--beam-feature NMTNorm",
    )
    q.add_argument(
        "--beam-set",
        help="with --beam-feature: the columns of the list's beam feature set (default: "
        "none), e.g. --beam-set NMT,WordPenalty,NMTNorm",
    )
    q.add_argument(
        "--block-hypotheses",
        type=positive_int,
        default=BLOCK_HYPOTHESES,
        help="score the list in blocks of whole segments, each cut after more than this many "
        "hypotheses, one scorer call per block (memory; a neural scorer's last digits depend on "
        "the block, so the shards and the unsharded run of one list take the same value) "
        f"(default: {BLOCK_HYPOTHESES}), e.g. --block-hypotheses 5000 to deal 4 shards a 200-segment 100-best list",
    )
    shard_options(q, "segments of the list", parts="blocks (--block-hypotheses), dealt round-robin, of")
    q.add_argument("--out", required=True, help="the list with the new columns (and OUT.json, its signature)")
    device_options(q)
    signature_option(q)
    q.set_defaults(
        paths=lambda a: (
            {
                "--nbest": a.nbest,
                "--source": a.source,
                "--images": a.images,
                "--image-split": a.image_split,
                "--segment-images": a.segment_images,
                "--folds": a.folds,
            },
            {"--out": a.out, "--out (signature)": signature_path(a.out)},
        )
    )
    q = fsub.add_parser(
        "extract",
        help="CNN features of the images of an image-split file (.npy, row i = line i)",
        epilog="example: rerank features extract --images-dir flickr30k-images --image-split test_images.txt --cnn resnet50 --out test.npy",
    )
    q.add_argument("--images-dir", required=True, help="directory holding the image files")
    q.add_argument("--image-split", required=True, help="image file names, one per line")
    q.add_argument("--cnn", default="resnet50", help="resnet50 | resnet152 | vgg19 | efficientnet-lite0")
    q.add_argument("--batch-size", type=int, default=16, help="images per CNN batch")
    q.add_argument("--dtype", default="float32", choices=["float32", "float16"], help="stored feature type")
    q.add_argument("--out", required=True, help="FEATS.npy (a FEATS.json signature is written beside it)")
    q.set_defaults(
        paths=lambda a: ({"--image-split": a.image_split}, {"--out": a.out, "--out (signature)": a.out[:-4] + ".json"})
    )
    p.set_defaults(func=cmd_features)
    _add_mbr(sub)


def _add_mbr(sub) -> None:
    """``rerank mbr``: its parser and options."""
    p = sub.add_parser(
        "mbr",
        help="minimum Bayes-risk decoding: the candidate of the highest expected utility (any utility: "
        f"{', '.join(mbr_utilities())})",
        epilog="example: rerank mbr --nbest test.nbest --metric chrf --out test.mbr.de; with samples as "
        "pseudo-references: --pseudo-refs test.samples.nbest --feature uniform",
    )
    p.add_argument(
        "--nbest",
        "--candidates",
        dest="candidates",
        metavar="NBEST",
        required=True,
        action=OLD_SPELLING,
        help="the n-best list to choose from (the candidates; --candidates is its old spelling)",
    )
    p.add_argument(
        "--pseudo-refs",
        help="another list of the same segments whose hypotheses are the pseudo-references (default: the "
        "candidates themselves), e.g. 256 samples per sentence from rerank generate --sampling",
    )
    p.add_argument(
        "--metric",
        default="chrf",
        help="the sentence utility: a metric with a pairwise utility — bleu, chrf, ter (minus sentence TER), "
        "comet:DIR (a COMET checkpoint; the sources from source=FILE), bertscore:DIR, or any metric registered "
        "with one (default: chrf), e.g. --metric bleu, --metric comet:models/wmt22-comet-da,source=test.en",
    )
    p.add_argument(
        "--feature",
        "--weights-from",
        dest="weights_from",
        metavar="COLUMN",
        action=OLD_SPELLING,
        help="the pseudo-references' log-probability column whose softmax weighs them, or uniform (samples), "
        "as the mbr: scorer's feature= (default: the list's model column, the one its signature's beam feature "
        "normalises: NMT of rerank nmt nbest, HF of generate --model hf:…; a list without a signature needs it; "
        "--weights-from is its old spelling), e.g. --feature uniform",
    )
    p.add_argument(
        "--temperature", type=temperature_type, default=1.0, help="softmax temperature (default: 1.0), e.g. 0.5"
    )
    algorithm_options(p)
    p.add_argument(
        "--prefilter",
        action="append",
        default=[],
        metavar="STAGE",
        help="keep each segment's top K candidates before the algorithm chooses, stages in the order given "
        "(repeatable): mbr:UTILITY,top_k=K (coarse-to-fine: exact MBR under a cheap utility) or "
        "column:NAME,top_k=K (a column of the list, e.g. CometKiwi from features add --scorer cometkiwi:DIR: "
        "a QE pre-filter) (default: none), e.g. --prefilter mbr:chrf,top_k=16 --metric comet:DIR,source=test.en",
    )
    p.add_argument("--out", required=True, help="the selected candidate of every segment, one per line")
    p.add_argument(
        "--out-kbest",
        help="also the --keep best distinct candidates of every segment as an n-best list (its column the expected "
        "utility, best first; mbrs' nbest and diverse selectors) (default: none), e.g. --out-kbest test.mbr.kbest",
    )
    p.add_argument(
        "--keep", type=positive_int, default=5, help="--out-kbest: choices per segment (default: 5), e.g. --keep 3"
    )
    p.add_argument(
        "--diversity",
        type=non_negative_float,
        default=0.0,
        help="--out-kbest: λ of the diverse choice, mean expected utility + λ · mean dissimilarity (minus the "
        "utility) of the set, chosen greedily, then by --local-search-iterations rounds of local search (Jinnai et al. "
        "2024; mbrs' diverse selector) (default: 0, the K best), e.g. --diversity 0.5",
    )
    add_config_options(p, "local-search", LocalSearch)
    p.add_argument(
        "--matrix",
        help="also write every utility: segment<TAB>candidate<TAB>pseudo-reference<TAB>utility (the segment's id "
        "in the whole list, candidate and pseudo-reference 0-based within the segment: shards' matrices join with "
        "cat) (default: none), e.g. --matrix test.utilities.tsv",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="also print the run's record as JSON on standard output: segments, expected, utilities computed, "
        "repeated (cache hits), seconds per stage (default: the closing line on stderr only)",
    )
    shard_options(p, "segments of the lists")
    p.set_defaults(
        func=cmd_mbr,
        paths=lambda a: (
            {"--candidates": a.candidates, "--pseudo-refs": a.pseudo_refs},
            {
                "--out": a.out,
                "--matrix": a.matrix,
                "--out-kbest": a.out_kbest,
                "--json": "-" if a.json else None,  # the record goes to standard output
            },
        ),
    )


def algorithm_options(p: argparse.ArgumentParser) -> None:
    """``--algorithm`` (the registered MBR algorithms, :mod:`rerank.mbr.decoders`) and one
    option per setting of their Configs (``--clusters``, ``--alpha``, ``--seed``), generated:
    a new algorithm's settings appear here by themselves."""
    decoders = DECODERS.classes()
    described = "; ".join(f"{name}: {cls.summary}" for name, cls in decoders.items())
    p.add_argument(
        "--algorithm",
        default="exact",
        choices=list(decoders),
        help=f"the MBR algorithm — {described} (default: exact), e.g. --algorithm pruned",
    )
    for name, field, owners in setting_fields():
        default = field.default
        p.add_argument(
            f"--{name.replace('_', '-')}",
            dest=name,
            type=setting_parser(field),
            default=default,
            help=f"--algorithm {', '.join(owners)}: {field.metadata.get('help', name)} (default: {default})",
        )


def cmd_mbr(args) -> None:
    settings = {name: getattr(args, name) for name, _, _ in setting_fields()}
    decoder = make_decoder(args.algorithm, **settings)
    result = mbr_decode(
        args.candidates,
        args.out,
        utility=args.metric,
        pseudo_refs_path=args.pseudo_refs,
        weights_from=args.weights_from,
        temperature=args.temperature,
        matrix_path=args.matrix,
        decoder=decoder,
        shard=shard_option_value(args),
        prefilters=args.prefilter,
        keep=args.keep,
        kbest_path=args.out_kbest,
        diversity=args.diversity,
        local_search=config_from_args(args, "local-search", LocalSearch),
    )
    for warning in result["warnings"]:
        print(f"rerank mbr: warning: {warning}", file=sys.stderr)
    if args.json:  # the record on standard output, the closing line on stderr as always
        print(json.dumps({"algorithm": args.algorithm, "metric": args.metric, "out": args.out, **result}))
    work = _stage_line(result)
    if not decoder.gives_column:  # it selects: no expected utility to report, only the work done
        shown = ", ".join(f"{key} {value:g}" for key, value in decoder.settings().items() if key != "seed")
        print(
            f"mbr ({args.algorithm}{', ' + shown if shown else ''}): {result['segments']} segments, {work} -> {args.out}",
            file=sys.stderr,
        )
        return
    utility = f"{args.metric} of the selections {result['expected']:.2f}"
    if make_metric(args.metric).higher_is_better is False:  # the utility is minus the metric: say the metric
        name = args.metric.upper() if args.metric.isalpha() else args.metric
        utility = f"{name} of the selections {-result['expected']:.2f} (the utility is minus {name})"
    print(
        f"mbr ({args.algorithm}): {result['segments']} segments, mean {decoder.estimate} {utility}; {work} "
        f"-> {args.out}",
        file=sys.stderr,
    )


def _stage_line(result) -> str:
    """``8,000 utilities computed; read 0.1 s, weights 0.0 s, utilities 2.3 s, write 0.0 s``: the
    work of :func:`rerank.mbr.decode.mbr_decode`, one count — the utilities scored, pairs of
    repeated texts (cache hits) left out (``--json`` records both: ``utilities``, ``repeated``);
    with COMET ``(of which load 3.1 s, encoder 1,010 in 1.9 s, estimator 100,000 in 0.2 s)``."""
    computed = result["utilities"] - (result["repeated"] or 0)
    seconds = ", ".join(f"{stage} {value:.1f} s" for stage, value in result["seconds"].items())
    line = f"{computed:,} utilities computed; {seconds}"
    parts = result.get("utility")
    if parts:  # a neural utility's own work, inside "utilities": its load, encoder, estimator
        done = ", ".join(
            f"{part} {parts['counts'].get(part, 0):,} in {value:.1f} s" for part, value in parts["seconds"].items()
        )
        line += f" (of which load {parts['load_seconds']:.1f} s, {done})"
    return line
