"""``rerank tune`` and ``rerank crossfit``: parsers (defaults from the tuners' configs) and handlers."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict
from typing import Optional

import numpy as np

from mira import MertConfig, MiraConfig, ProConfig
from rerank.cliutil import bleu_options, non_negative_int, positive_float, positive_int, unit_interval
from rerank.tuning_data import load_tuning_data
from rerank.errors import InputError
from rerank.outputs import atomic_write
from rerank.signature import read_sidecar


def beam_weights(nbest_path: str, nbest) -> Optional[np.ndarray]:
    """Weights that reproduce the decoder's 1-best: 1 on the feature the beam ranked by,
    0 elsewhere, when the n-best list's signature (``NBEST.json``, written by ``rerank nmt
    nbest`` and carried on by ``rerank features add``) names it and the list has it;
    else None."""
    feature = read_sidecar(nbest_path).get("beam_feature")
    if feature not in nbest.feature_names:
        return None
    return np.asarray([1.0 if name == feature else 0.0 for name in nbest.feature_names])


def _restrict(nbest, init, init_from: str, features: Optional[str], source: str):
    """The columns of ``--features`` (all when None): (list, init, init_from, columns or None)."""
    from rerank.nbest import NBestList

    if not features:
        _check_tunable(nbest, source)
        return nbest, init, init_from, None
    keep = [name.strip() for name in features.split(",") if name.strip()]
    unknown = [name for name in keep if name not in nbest.feature_names]
    if unknown:
        raise InputError(f"--features: not in the n-best list: {', '.join(unknown)} "
                         f"(it has {' '.join(dict.fromkeys(nbest.feature_names))})", source)
    columns = np.flatnonzero([name in keep for name in nbest.feature_names])
    nbest = NBestList(nbest.offsets, nbest.hypotheses, nbest.features[:, columns],
                      [nbest.feature_names[c] for c in columns])
    _check_tunable(nbest, source)
    if init is not None:
        init = init[columns]
        if not np.any(init) and init_from == "beam":
            init, init_from = None, "zeros"
    return nbest, init, init_from, columns


#: the largest feature magnitude the tuners accept: beyond it, products with weights and
#: differences between hypotheses lose all precision (and overflow near 1e308)
MAX_FEATURE_MAGNITUDE = 1e15


def _check_tunable(nbest, source: str) -> None:
    """Refuse a list with no feature columns (nothing to tune: zero weights would be
    written as a result) or with values beyond :data:`MAX_FEATURE_MAGNITUDE`."""
    if not nbest.feature_names:
        raise InputError("the n-best list has no feature columns: nothing to tune", source)
    magnitude = np.abs(nbest.features).max(axis=0)
    if magnitude.max() > MAX_FEATURE_MAGNITUDE:
        column = int(np.argmax(magnitude))
        raise InputError(f"feature {nbest.feature_names[column]!r} has a value of magnitude {magnitude[column]:.3g}; "
                         f"tuning needs |values| <= {MAX_FEATURE_MAGNITUDE:.0e} (rescale the feature)", source)


def _start(args, nbest):
    """Initial weights (``--init``, else the beam's, else None) and where they came from."""
    from rerank.nbest import read_weights, weights_vector

    if args.init:
        from rerank.commands import finite_scores

        init = weights_vector(read_weights(args.init), nbest, args.init)
        with np.errstate(over="ignore", invalid="ignore"):
            finite_scores(nbest.features @ init, args.nbest, args.init)
        return init, os.path.abspath(args.init)
    init = beam_weights(args.nbest, nbest)
    return init, "beam" if init is not None else "zeros"


def _run_tuner(args, nbest, stats, init, say):
    """Tune ``nbest`` (its rows' BLEU statistics ``stats``) with ``args.algorithm`` from
    ``init``: (weights float[F], tuned BLEU, initial BLEU, details dict, config)."""
    from mira import tune, tune_mert, tune_pro

    if args.algorithm == "mira":
        config = MiraConfig(iterations=args.iterations, C=args.C, decay=args.decay, seed=args.seed,
                            shuffle=not args.no_shuffle, model_bg=args.model_bg,
                            kbmira_selection=args.kbmira_selection)

        def report(epoch, bleu, updates, loss):
            say(f"epoch {epoch:3d}: {updates} updates, avg loss {loss:.4f}, tuning BLEU {bleu:.2f}")

        result = tune(nbest.features, stats, nbest.offsets, config, init=init, callback=report)
        details = {"best_epoch": result.best_epoch, "epoch_bleu": result.epoch_bleu}
    elif args.algorithm == "mert":
        config = MertConfig(restarts=args.restarts, random_directions=args.random_directions, seed=args.seed)
        result = tune_mert(nbest.features, stats, nbest.offsets, config, init=init,
                           callback=lambda run, bleu, n: say(f"run {run + 1:3d}: tuning BLEU {bleu:.2f} "
                                                             f"({n} line searches so far)"))
        details = {"best_run": result.best_run, "run_bleu": result.run_bleu, "line_searches": result.line_searches}
    else:
        config = ProConfig(samples=args.pro_samples, keep=args.pro_keep, seed=args.seed)
        result = tune_pro(nbest.features, stats, nbest.offsets, config, init=init)
        details = {"pairs": result.pairs, "kept_initial": result.kept_initial}
    return result.weights, result.best_bleu, result.initial_bleu, details, config


def _length_ratio(nbest, stats, weights) -> float:
    from mira._native import model_best_stats
    from rerank.bleu import REF_LEN

    best = model_best_stats(nbest.features, stats, nbest.offsets, weights)
    return float(best[1] / best[REF_LEN]) if best[REF_LEN] else 0.0


def _widen(weights, columns, width: int):
    """Back to every column of the list, 0 for those not tuned."""
    if columns is None:
        return weights
    vector = np.zeros(width)
    vector[columns] = weights
    return vector


def cmd_tune(args) -> None:
    from rerank.bleu import bleu_signature
    from rerank.nbest import weights_dict
    from rerank.signature import signature

    start = time.perf_counter()
    full, _refs, stats = load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    init, init_from = _start(args, full)
    nbest, init, init_from, columns = _restrict(full, init, init_from, args.features, args.nbest)
    say = (lambda *a: None) if args.quiet else (lambda text: print(text, file=sys.stderr))
    weights, bleu, initial_bleu, details, config = _run_tuner(args, nbest, stats, init, say)
    length_ratio = _length_ratio(nbest, stats, weights)
    print(f"{args.algorithm}: initial BLEU {initial_bleu:.2f} ({init_from}); tuned BLEU {bleu:.2f}, "
          f"length ratio {length_ratio:.3f}", file=sys.stderr)
    weights = _widen(weights, columns, len(full.feature_names))
    out = {
        "weights": weights_dict(weights, full),
        "tuning": {"algorithm": args.algorithm, "features": list(dict.fromkeys(nbest.feature_names)), "bleu": bleu,
                   "initial_bleu": initial_bleu, "init": init_from,
                   "length_ratio": length_ratio, **details, "nbest": os.path.abspath(args.nbest),
                   "ref": os.path.abspath(args.ref), "segments": nbest.num_segments,
                   "hypotheses": len(nbest.hypotheses), "seconds": round(time.perf_counter() - start, 3)},
        "config": asdict(config),
        "bleu_signature": bleu_signature(args.tokenize, args.lowercase),
        "signature": signature(),
    }
    with atomic_write(args.out) as handle:
        json.dump(out, handle, indent=2, allow_nan=False)
        handle.write("\n")


def cmd_crossfit(args) -> None:
    """``rerank crossfit``: K-fold cross-fitted re-ranking of one list (rerank/folds.py):
    for each fold k, tune on the other folds' segments from the same start as ``tune``,
    apply to fold k; write the K selections in segment order and every fold's weights."""
    from rerank.bleu import bleu_signature
    from rerank.outputs import StagedOutputs
    from rerank.folds import read_folds
    from rerank.nbest import weights_dict, write_lines
    from rerank.signature import signature

    start = time.perf_counter()
    full, _refs, stats = load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    folds = read_folds(args.folds, full.num_segments)
    init0, init_from0 = _start(args, full)
    restricted, init0, init_from0, columns = _restrict(full, init0, init_from0, args.features, args.nbest)
    say = (lambda *a: None) if args.quiet else (lambda text: print(text, file=sys.stderr))
    chosen = np.zeros(full.num_segments, dtype=np.int64)
    per_fold = []
    for k in range(folds.k):
        seen, held = folds.segments(k, held_out=False), folds.segments(k)
        rows = restricted.rows_of(seen)
        part = restricted.subset(seen)
        weights, bleu, initial_bleu, details, config = _run_tuner(args, part, stats[rows], init0, say)
        length_ratio = _length_ratio(part, stats[rows], weights)
        test = restricted.subset(held)
        chosen[held] = restricted.rows_of(held)[test.select(test.features @ weights)]
        print(f"fold {k}: tuned on {len(seen)} segments, BLEU {initial_bleu:.2f} ({init_from0}) -> {bleu:.2f}, "
              f"length ratio {length_ratio:.3f}; applied to {len(held)}", file=sys.stderr)
        per_fold.append({"fold": k, "weights": weights_dict(_widen(weights, columns, len(full.feature_names)), full),
                         "tuned_segments": int(len(seen)), "applied_segments": int(len(held)), "bleu": bleu,
                         "initial_bleu": initial_bleu, "length_ratio": length_ratio, **details})
    out = {
        "crossfit": {"algorithm": args.algorithm, "features": list(dict.fromkeys(restricted.feature_names)),
                     "init": init_from0, "folds": os.path.abspath(args.folds), "k": folds.k,
                     "nbest": os.path.abspath(args.nbest), "ref": os.path.abspath(args.ref),
                     "segments": full.num_segments, "seconds": round(time.perf_counter() - start, 3)},
        "folds": per_fold,
        "config": asdict(config),
        "bleu_signature": bleu_signature(args.tokenize, args.lowercase),
        "signature": signature(),
    }
    with StagedOutputs() as outputs:  # the selection and its weights appear together
        write_lines((full.hypotheses[i] for i in chosen), outputs.stage(args.out))
        with outputs.open(args.weights_out) as handle:
            json.dump(out, handle, indent=2, allow_nan=False)
            handle.write("\n")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``tune`` and ``crossfit`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("tune", help="tune feature weights: k-best batch MIRA (default), MERT or PRO")
    p.add_argument("--nbest", required=True, help="Moses n-best list of the tuning set")
    p.add_argument("--ref", required=True, help="reference translations, one per line")
    p.add_argument("--out", required=True, help="weights JSON to write")
    tuning_options(p)
    p.set_defaults(func=cmd_tune, paths=lambda a: ({"--nbest": a.nbest, "--ref": a.ref, "--init": a.init},
                                                   {"--out": a.out}))

    p = sub.add_parser("crossfit", help="K-fold cross-fitted re-ranking: tune on the other folds, apply to each fold")
    p.add_argument("--nbest", required=True, help="Moses n-best list of the test set (features out-of-fold)")
    p.add_argument("--ref", required=True, help="its references, one per line")
    p.add_argument("--folds", required=True, help="folds file (rerank folds): image<TAB>fold per segment")
    p.add_argument("--out", required=True, help="re-ranked 1-best of every segment")
    p.add_argument("--weights-out", required=True, help="JSON with every fold's weights and tuning BLEU")
    tuning_options(p)
    p.set_defaults(func=cmd_crossfit, paths=lambda a: (
        {"--nbest": a.nbest, "--ref": a.ref, "--folds": a.folds, "--init": a.init},
        {"--out": a.out, "--weights-out": a.weights_out}))


def tuning_options(p: argparse.ArgumentParser) -> None:
    """Options shared by ``tune`` and ``crossfit``: tuner, start, features, tuner settings, BLEU."""
    p.add_argument("--algorithm", default="mira", choices=["mira", "mert", "pro"],
                   help="mira (Cherry & Foster 2012), mert (Och 2003), pro (Hopkins & May 2011)")
    p.add_argument("--seed", type=int, default=MiraConfig.seed,
                   help="shuffling (mira), restarts and directions (mert), sampling (pro)")
    p.add_argument("--init", help="initial weights JSON (default: the beam's own choice when the n-best "
                                  "signature names its feature, else all zero)")
    p.add_argument("--features", help="comma-separated feature names to tune (default: all); the others get weight 0")
    p.add_argument("--iterations", type=positive_int, default=MiraConfig.iterations, help="mira: epochs (kbmira -J)")
    p.add_argument("--C", type=positive_float, default=MiraConfig.C, help="mira: step-size cap (kbmira -C)")
    p.add_argument("--decay", type=unit_interval, default=MiraConfig.decay,
                   help="mira: background BLEU decay (kbmira -D)")
    p.add_argument("--no-shuffle", action="store_true", help="mira: visit sentences in file order")
    p.add_argument("--model-bg", action="store_true", help="mira: background from the model-best (kbmira --model-bg)")
    p.add_argument("--kbmira-selection", action="store_true",
                   help="mira: select the best epoch as kbmira (the initial weights are no candidate)")
    p.add_argument("--restarts", type=positive_int, default=MertConfig.restarts,
                   help="mert: optimisation runs, the first from --init")
    p.add_argument("--random-directions", type=non_negative_int, default=MertConfig.random_directions,
                   help="mert: random directions per iteration besides the coordinate axes")
    p.add_argument("--pro-samples", type=positive_int, default=ProConfig.samples,
                   help="pro: sampled pairs per sentence (Gamma)")
    p.add_argument("--pro-keep", type=positive_int, default=ProConfig.keep, help="pro: pairs kept per sentence (Xi)")
    p.add_argument("--quiet", action="store_true", help="do not print per-epoch / per-run BLEU")
    bleu_options(p)
