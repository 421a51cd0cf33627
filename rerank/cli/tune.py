"""``rerank tune`` and ``rerank crossfit``: options generated from every registered
tuner's ``Config`` (:mod:`rerank.tuning.base`), handlers over :mod:`rerank.tuning.files`."""

from __future__ import annotations

import argparse
import json
import sys

from rerank.argtypes import seed
from rerank.cli.options import (
    add_config_options,
    bleu_options,
    config_from_args,
    metric_options,
    ref_option,
    references,
    seg_sidecars,
)
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.nbest import write_lines
from rerank.outputs import StagedOutputs
from rerank.tuning.base import TUNERS
from rerank.tuning.files import TuningSetup, crossfit_file, describe, tune_file
from rerank.tuning.weights import moses_weights_text


def _names(text):
    return [name.strip() for name in text.split(",") if name.strip()] if text is not None else None


def setup_from_args(args) -> TuningSetup:
    """The :class:`TuningSetup` of ``tune``/``crossfit``'s options."""
    tuners = [(name, TUNERS.get(name).Config) for name in TUNERS.names()]
    config = config_from_args(args, args.algorithm, TUNERS.get(args.algorithm).Config, {"seed": args.seed}, tuners)
    return TuningSetup(
        args.algorithm,
        config,
        args.init,
        _names(args.features),
        _names(args.feature_sets),
        args.tokenize,
        args.lowercase,
        args.metric,
        args.lang,
        args.beam_feature,
    )


def _say(args):
    return None if args.quiet else (lambda text: print(text, file=sys.stderr))


def extra_data(args):
    """The (list, reference) pairs of ``--extra-nbest``/``--extra-ref``, in order.

    Raises:
        InputError: not one ``--extra-ref`` per ``--extra-nbest``.
    """
    lists, refs = args.extra_nbest or [], args.extra_ref or []
    if len(lists) != len(refs):
        raise InputError(
            f"--extra-nbest given {len(lists)} time(s) but --extra-ref {len(refs)}: "
            "give one --extra-ref after each --extra-nbest"
        )
    return list(zip(lists, refs))


def cmd_tune(args) -> None:
    warn = lambda text: print(text, file=sys.stderr)  # noqa: E731  (warnings: also with --quiet)
    record, result = tune_file(args.nbest, references(args), setup_from_args(args), _say(args), extra_data(args), warn)
    print(f"{args.algorithm}: {describe(result, record['tuning']['init'])}", file=sys.stderr)
    with StagedOutputs() as outputs:  # the JSON and the Moses weights appear together
        with outputs.open(args.out) as handle:
            json.dump(record, handle, indent=2, allow_nan=False)
            handle.write("\n")
        if args.out_moses:
            with outputs.open(args.out_moses) as handle:
                handle.write(
                    moses_weights_text(record["weights"], "moses-ini" if args.out_moses.endswith(".ini") else "moses")
                )


def cmd_crossfit(args) -> None:
    chosen, record = crossfit_file(
        args.nbest,
        references(args),
        args.folds,
        setup_from_args(args),
        _say(args),
        lambda text: print(text, file=sys.stderr),
        extra_data(args),
    )
    with StagedOutputs() as outputs:  # the selection and its weights appear together
        write_lines(chosen, outputs.stage(args.out))
        with outputs.open(args.weights_out) as handle:
            json.dump(record, handle, indent=2, allow_nan=False)
            handle.write("\n")


def _init_path(init):
    return None if init in ("beam", "zeros") else init


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``tune`` and ``crossfit`` to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "tune",
        help="tune feature weights: k-best batch MIRA (default), MERT or PRO",
        epilog="example: rerank tune --nbest val.nbest --ref val.de --tokenize none "
        "--feature-sets beam,R2L --algorithm mert --seed 2 --out weights.json",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list of the tuning set")
    ref_option(p)
    p.add_argument("--out", required=True, help="weights JSON to write")
    p.add_argument(
        "--out-moses",
        metavar="FILE",
        help="also the weights as Moses writes them: 'name= value' lines (kbmira --dense-init, mert's output), "
        "or a moses.ini [weight] section when FILE ends in .ini; apply --weights and tune --init read both "
        "(default: none), e.g. --out-moses weights.moses",
    )
    tuning_options(p)
    p.set_defaults(
        func=cmd_tune,
        paths=lambda a: (
            {
                "--nbest": a.nbest,
                "--ref": a.ref,
                "--init": _init_path(a.init),
                "--metric": seg_sidecars(a.metric, a.nbest),
                "--extra-nbest": a.extra_nbest or [],
                "--extra-ref": a.extra_ref or [],
            },
            {"--out": a.out, "--out-moses": a.out_moses},
        ),
    )

    p = sub.add_parser(
        "crossfit",
        help="K-fold cross-fitted re-ranking: tune on the other folds, apply to each fold",
        epilog="example: rerank crossfit --nbest test.nbest --ref test.de --folds folds.tsv "
        "--out test.crossfit.txt --weights-out weights.json",
    )
    p.add_argument("--nbest", required=True, help="Moses n-best list of the test set (features out-of-fold)")
    ref_option(p)
    p.add_argument("--folds", required=True, help="folds file (rerank folds): image<TAB>fold per segment")
    p.add_argument("--out", required=True, help="re-ranked 1-best of every segment")
    p.add_argument("--weights-out", required=True, help="JSON with every fold's weights and tuning scores")
    tuning_options(p)
    p.set_defaults(
        func=cmd_crossfit,
        paths=lambda a: (
            {
                "--nbest": a.nbest,
                "--ref": a.ref,
                "--folds": a.folds,
                "--init": _init_path(a.init),
                "--metric": seg_sidecars(a.metric, a.nbest),
                "--extra-nbest": a.extra_nbest or [],
                "--extra-ref": a.extra_ref or [],
            },
            {"--out": a.out, "--weights-out": a.weights_out},
        ),
    )


def tuning_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``tune`` and ``crossfit``: tuner, start, columns, metric, BLEU, and each
    registered tuner's own options (generated from its ``Config``)."""
    p.add_argument(
        "--algorithm",
        default="mira",
        choices=TUNERS.names(),
        help="tuner (default: mira): "
        + "; ".join(f"{name}: {(TUNERS.get(name).__doc__ or '').split(':')[0].strip()}" for name in TUNERS.names()),
    )
    p.add_argument(
        "--seed",
        type=seed,
        default=DEFAULT_SEED,
        help=f"seed of the tuner's random choices (default: {DEFAULT_SEED}), e.g. --seed 2 for a replica",
    )
    p.add_argument(
        "--init",
        default="beam",
        help="start weights: beam (1 on the beam feature the list's signature names or --beam-feature "
        "gives; zeros when the signature names none), zeros, or a file: a weights JSON (columns it "
        "leaves out start at 0, said in one line), Moses 'name= value' lines (kbmira --dense-init) or "
        "mert's init.opt (default: beam), e.g. --init moses.weights",
    )
    p.add_argument(
        "--beam-feature",
        help="the beam's column of a list without a signature (a list from another toolkit): --init beam "
        "starts from weight 1 on it, e.g. --beam-feature NMTNorm (default: the signature's)",
    )
    p.add_argument(
        "--features", help="comma-separated column names to tune, e.g. NMT,R2L (default: all); the others get weight 0"
    )
    p.add_argument(
        "--feature-sets",
        help="comma-separated feature sets of the list's signature, e.g. beam,R2L,MBR, and 'sparse' for the "
        "list's sparse features (Moses name_key= value) "
        "(added to --features; default: none; with neither option every column and sparse feature is tuned)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="do not print per-epoch / per-run scores and progress (warnings about the list and the start are "
        "always printed)",
    )
    p.add_argument(
        "--extra-nbest",
        action="append",
        metavar="LIST",
        help="more tuning data: an n-best list of other segments with the same columns, tuned on beside "
        "--nbest (by crossfit in every fold) and never selected from; one --extra-ref each; repeatable "
        "(default: none), e.g. --extra-nbest train.sample.nbest --extra-ref train.sample.de",
    )
    p.add_argument(
        "--extra-ref",
        action="append",
        metavar="REF",
        help="the references of the --extra-nbest before it, one per line (default: none), e.g. --extra-ref train.sample.de",
    )
    metric_options(p, "tuning")
    bleu_options(p)
    for name in TUNERS.names():
        add_config_options(p, name, TUNERS.get(name).Config, skip=("seed",))
