"""``rerank tune``: its parser (defaults from the tuners' configs) and handler."""

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
from rerank.commands import load_tuning_data
from rerank.errors import InputError, atomic_write
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


def cmd_tune(args) -> None:
    from mira import tune, tune_mert, tune_pro
    from mira._native import model_best_stats
    from rerank.bleu import REF_LEN, bleu_signature
    from rerank.nbest import NBestList, read_weights, weights_dict, weights_vector
    from rerank.signature import signature

    start = time.perf_counter()
    nbest, _refs, stats = load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    init, init_from = None, "zeros"
    if args.init:
        init, init_from = weights_vector(read_weights(args.init), nbest, args.init), os.path.abspath(args.init)
    else:
        init = beam_weights(args.nbest, nbest)
        init_from = "beam" if init is not None else "zeros"
    full = nbest
    if args.features:  # tune a subset of the columns; the others get weight 0
        keep = [name.strip() for name in args.features.split(",") if name.strip()]
        unknown = [name for name in keep if name not in nbest.feature_names]
        if unknown:
            raise InputError(f"--features: not in the n-best list: {', '.join(unknown)} "
                             f"(it has {' '.join(dict.fromkeys(nbest.feature_names))})", args.nbest)
        columns = np.flatnonzero([name in keep for name in nbest.feature_names])
        nbest = NBestList(nbest.offsets, nbest.hypotheses, nbest.features[:, columns],
                          [nbest.feature_names[c] for c in columns])
        if init is not None:
            init = init[columns]
            if not np.any(init) and init_from == "beam":
                init, init_from = None, "zeros"
    say = (lambda *a: None) if args.quiet else (lambda text: print(text, file=sys.stderr))
    details: dict = {}
    if args.algorithm == "mira":
        config = MiraConfig(iterations=args.iterations, C=args.C, decay=args.decay, seed=args.seed,
                            shuffle=not args.no_shuffle, model_bg=args.model_bg,
                            kbmira_selection=args.kbmira_selection)

        def report(epoch, bleu, updates, loss):
            say(f"epoch {epoch:3d}: {updates} updates, avg loss {loss:.4f}, tuning BLEU {bleu:.2f}")

        result = tune(nbest.features, stats, nbest.offsets, config, init=init, callback=report)
        weights, bleu = result.weights, result.best_bleu
        details = {"best_epoch": result.best_epoch, "epoch_bleu": result.epoch_bleu}
    elif args.algorithm == "mert":
        config = MertConfig(restarts=args.restarts, random_directions=args.random_directions, seed=args.seed)
        result = tune_mert(nbest.features, stats, nbest.offsets, config, init=init,
                           callback=lambda run, bleu, n: say(f"run {run + 1:3d}: tuning BLEU {bleu:.2f} "
                                                             f"({n} line searches so far)"))
        weights, bleu = result.weights, result.best_bleu
        details = {"best_run": result.best_run, "run_bleu": result.run_bleu, "line_searches": result.line_searches}
    else:
        config = ProConfig(samples=args.pro_samples, keep=args.pro_keep, seed=args.seed)
        result = tune_pro(nbest.features, stats, nbest.offsets, config, init=init)
        weights, bleu = result.weights, result.best_bleu
        details = {"pairs": result.pairs, "kept_initial": result.kept_initial}
    best_stats = model_best_stats(nbest.features, stats, nbest.offsets, weights)
    length_ratio = float(best_stats[1] / best_stats[REF_LEN]) if best_stats[REF_LEN] else 0.0
    initial_bleu = result.initial_bleu
    print(f"{args.algorithm}: initial BLEU {initial_bleu:.2f} ({init_from}); tuned BLEU {bleu:.2f}, "
          f"length ratio {length_ratio:.3f}", file=sys.stderr)
    if full is not nbest:  # back to every column of the list, 0 for those not tuned
        vector = np.zeros(len(full.feature_names))
        vector[columns] = weights
        weights = vector
    out = {
        "weights": weights_dict(weights, full),
        "tuning": {"algorithm": args.algorithm, "features": list(dict.fromkeys(nbest.feature_names)), "bleu": bleu, "initial_bleu": initial_bleu, "init": init_from,
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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``tune`` to the ``rerank`` sub-commands."""
    p = sub.add_parser("tune", help="tune feature weights: k-best batch MIRA (default), MERT or PRO")
    p.add_argument("--nbest", required=True, help="Moses n-best list of the tuning set")
    p.add_argument("--ref", required=True, help="reference translations, one per line")
    p.add_argument("--out", required=True, help="weights JSON to write")
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
    p.set_defaults(func=cmd_tune)
