"""``rerank`` command line: ``rerank <verb>`` with files in and out.

Verbs: ``tune`` (k-best batch MIRA), ``apply``, ``eval``, ``oracle``, and ``nmt
prepare|train|nbest`` (needs the ``[nmt]`` extra).  Errors in the input are printed on
one line naming file and line, and the exit status is 1; nothing partial is written.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict
from typing import List, Optional

import numpy as np

from rerank import __version__
from rerank.errors import InputError, atomic_write


def _read_weights(path: str) -> dict:
    """The ``weights`` object of a weights JSON file: names -> finite numbers or lists of
    them.  Raises :class:`InputError` naming the file (and line for JSON syntax)."""
    from rerank.textio import read_text

    try:
        data = json.loads(read_text(path), parse_constant=lambda name: name)  # NaN/Infinity stay strings
    except json.JSONDecodeError as err:
        raise InputError(f"not JSON: {err.msg}", path, err.lineno) from None
    weights = data.get("weights") if isinstance(data, dict) else None
    if not isinstance(weights, dict):
        raise InputError('no "weights" object', path)

    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)

    for name, value in weights.items():
        values = value if isinstance(value, list) else [value]
        if not values or not all(number(v) for v in values):
            raise InputError(f"weight of {name!r} must be a finite number or a list of them, not {json.dumps(value)}",
                             path)
    return weights


def _load_tuning_data(nbest_path: str, ref_path: str, tokenize: str, lowercase: bool):
    from rerank.bleu import bleu_stats
    from rerank.nbest import read_nbest
    from rerank.textio import read_lines

    refs = read_lines(ref_path)
    nbest = read_nbest(nbest_path, num_segments=len(refs))
    stats = bleu_stats(nbest.hypotheses, refs, nbest.segment, tokenize=tokenize, lowercase=lowercase)
    return nbest, refs, stats


def _sidecar(nbest_path: str) -> dict:
    """The signature JSON beside an n-best list (``NBEST.json``), or {} if there is none
    or it is unreadable."""
    try:
        with open(nbest_path + ".json", encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def beam_weights(nbest_path: str, nbest) -> Optional[np.ndarray]:
    """Weights that reproduce the decoder's 1-best: 1 on the feature the beam ranked by,
    0 elsewhere, when the n-best list's signature (``NBEST.json``, written by ``rerank nmt
    nbest`` and carried on by ``rerank features add``) names it and the list has it;
    else None."""
    feature = _sidecar(nbest_path).get("beam_feature")
    if feature not in nbest.feature_names:
        return None
    return np.asarray([1.0 if name == feature else 0.0 for name in nbest.feature_names])


def cmd_tune(args) -> None:
    from mira import MertConfig, MiraConfig, ProConfig, tune, tune_mert, tune_pro
    from mira._native import model_best_stats
    from rerank.bleu import REF_LEN, bleu_signature
    from rerank.nbest import NBestList, weights_dict, weights_vector
    from rerank.signature import signature

    start = time.perf_counter()
    nbest, _refs, stats = _load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    init, init_from = None, "zeros"
    if args.init:
        init, init_from = weights_vector(_read_weights(args.init), nbest, args.init), os.path.abspath(args.init)
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


def cmd_apply(args) -> None:
    from rerank.errors import StagedOutputs
    from rerank.nbest import read_nbest, weights_vector, write_lines, write_nbest

    nbest = read_nbest(args.nbest)
    w = weights_vector(_read_weights(args.weights), nbest, args.weights)
    scores = nbest.features @ w
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

    nbest, _refs, stats = _load_tuning_data(args.nbest, args.ref, args.tokenize, args.lowercase)
    best = oracle_select(stats, nbest.offsets)
    write_lines((nbest.hypotheses[i] for i in best), args.out)
    score = sacrebleu_score(stats[best].sum(0))
    result = {"oracle_bleu": score.score, "bleu": score.format(), "nbest": args.nbest, "out": args.out,
              "signature": bleu_signature(args.tokenize, args.lowercase)}
    print(json.dumps(result) if args.json else f"oracle {score.format()}")


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


def cmd_features(args) -> None:
    if args.features_verb == "extract":
        return _features_extract(args)
    from features.scorer import make_scorer
    from rerank.nbest import read_nbest, write_nbest
    from rerank.textio import read_lines

    nbest = read_nbest(args.nbest)
    sources = read_lines(args.source) if args.source else None
    if sources is not None and len(sources) != nbest.num_segments:
        raise InputError(f"{len(sources)} source lines but {nbest.num_segments} segments", args.source)
    images = None
    if args.images:
        from features.data import align_images, load_image_features

        if not (args.image_split and args.segment_images):
            raise InputError("--images needs --image-split (rows of the matrix) and --segment-images (one per segment)")
        names, matrix = load_image_features(args.images, args.image_split)
        segment_images = read_lines(args.segment_images)
        if len(segment_images) != nbest.num_segments:
            raise InputError(f"{len(segment_images)} image names but {nbest.num_segments} segments", args.segment_images)
        images, _ = align_images(segment_images, names, matrix, require_all=True)
    start = time.perf_counter()
    timings = {}
    for spec in args.scorer:
        began = time.perf_counter()
        scorer = make_scorer(spec)
        scorer.progress = True
        for name, values in scorer.score(nbest, sources, images).items():
            if name in nbest.feature_names:
                raise InputError(f"feature {name!r} is already in the n-best list", args.nbest)
            nbest = nbest.add_feature(name, values)
        timings[spec] = round(time.perf_counter() - began, 3)
        print(f"{spec}: {len(nbest.hypotheses)} hypotheses in {timings[spec]:.1f} s "
              f"({len(nbest.hypotheses) / max(timings[spec], 1e-9):.0f}/s, loading included)", file=sys.stderr)
    seconds = time.perf_counter() - start
    write_nbest(nbest, args.out)
    from rerank.signature import write_signed

    write_signed(args.out + ".json",  # signature beside the list, as nmt nbest writes
                 {"input": args.nbest, "beam_feature": _sidecar(args.nbest).get("beam_feature"),
                  "scorers": args.scorer, "source": args.source, "images": args.images,
                  "features": nbest.feature_names, "hypotheses": len(nbest.hypotheses), "seconds": round(seconds, 3),
                  "scorer_seconds": timings},
                 ["torch", "numpy"])
    print(f"{len(nbest.hypotheses)} hypotheses scored in {seconds:.1f} s "
          f"({len(nbest.hypotheses) / max(seconds, 1e-9):.0f}/s); features: {' '.join(nbest.feature_names)}",
          file=sys.stderr)


def _features_extract(args) -> None:
    from features.cnn import extract_split, load_backbone
    from rerank.signature import write_signed

    if not args.out.endswith(".npy"):
        raise InputError("--out must end in .npy", args.out)
    backbone = load_backbone(args.cnn)
    names, matrix = extract_split(args.images_dir, args.image_split, backbone, args.batch_size, progress=True)
    with atomic_write(args.out, "wb", encoding=None) as out:
        np.save(out, matrix.astype(args.dtype))
    write_signed(args.out[:-4] + ".json", {"cnn": args.cnn, "dim": backbone.dim, "rows": len(names),
                                           "image_split": args.image_split, "dtype": args.dtype},
                 ["torch", "numpy", "pillow"])
    print(f"{len(names)} images -> {args.out} ({matrix.shape[1]}-d {args.cnn})", file=sys.stderr)


def cmd_nmt(args) -> None:
    if args.nmt_verb == "prepare":
        from nmt.data import PrepareConfig, prepare

        print(prepare(args.data, args.out, PrepareConfig(bpe_merges=args.bpe_merges), workers=args.workers))
    elif args.nmt_verb == "train":
        from nmt.train import TrainConfig, train

        config = TrainConfig(preset=args.preset, variant=args.variant, dropout=args.dropout, l2=args.l2,
                             max_epoch=args.max_epoch, max_update=args.max_update, patience=args.patience,
                             max_tokens=args.max_tokens, lr=args.lr, seed=args.seed, direction=args.direction,
                             role=args.role, threads=args.threads)
        print(train(args.data_bin, args.save_dir, config))
    elif args.nmt_verb == "train-lm":
        from nmt.lm import LMConfig, train_lm

        config = LMConfig(embed_dim=args.embed_dim, hidden_size=args.hidden_size, layers=args.layers,
                          dropout=args.dropout, max_epoch=args.max_epoch, patience=args.patience, seed=args.seed,
                          threads=args.threads, task2=not args.no_task2)
        print(train_lm(args.prepared, args.save_dir, config, data_dir=args.data))
    elif args.nmt_verb == "nbest":
        from nmt.generate import GenerateConfig, generate_nbest

        config = GenerateConfig(nbest=args.nbest, beam=args.beam, batch_size=args.batch_size)
        if (args.subset is None) == (args.input is None):
            raise InputError("give exactly one of --subset (valid|test of --data-bin) and --input (raw text)")
        if args.input:
            from nmt.generate import generate_nbest_from_text

            generate_nbest_from_text(args.data_bin, args.checkpoint, args.input, args.out_nbest, args.out_1best,
                                     args.out_source, config)
        else:
            generate_nbest(args.data_bin, args.checkpoint, args.subset, args.out_nbest, args.out_1best, config)


def _number(kind, ok, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value
    return parse


_positive_int = _number(int, lambda v: v >= 1, "a positive integer")
_non_negative_int = _number(int, lambda v: v >= 0, "a non-negative integer")
_positive_float = _number(float, lambda v: math.isfinite(v) and v > 0, "a positive finite number")
_unit_interval = _number(float, lambda v: 0 < v <= 1, "in (0, 1]")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="rerank", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True)

    def bleu_options(p):
        p.add_argument("--tokenize", default="none", help="sacrebleu tokeniser for BLEU statistics (default: none)")
        p.add_argument("--lowercase", action="store_true", help="lowercase before BLEU statistics")

    p = sub.add_parser("tune", help="tune feature weights: k-best batch MIRA (default), MERT or PRO")
    p.add_argument("--nbest", required=True, help="Moses n-best list of the tuning set")
    p.add_argument("--ref", required=True, help="reference translations, one per line")
    p.add_argument("--out", required=True, help="weights JSON to write")
    p.add_argument("--algorithm", default="mira", choices=["mira", "mert", "pro"],
                   help="mira (Cherry & Foster 2012), mert (Och 2003), pro (Hopkins & May 2011)")
    p.add_argument("--seed", type=int, default=1, help="shuffling (mira), restarts and directions (mert), sampling (pro)")
    p.add_argument("--init", help="initial weights JSON (default: the beam's own choice when the n-best "
                                  "signature names its feature, else all zero)")
    p.add_argument("--features", help="comma-separated feature names to tune (default: all); the others get weight 0")
    p.add_argument("--iterations", type=_positive_int, default=60, help="mira: epochs (kbmira -J)")
    p.add_argument("--C", type=_positive_float, default=0.01, help="mira: step-size cap (kbmira -C)")
    p.add_argument("--decay", type=_unit_interval, default=0.999, help="mira: background BLEU decay (kbmira -D)")
    p.add_argument("--no-shuffle", action="store_true", help="mira: visit sentences in file order")
    p.add_argument("--model-bg", action="store_true", help="mira: background from the model-best (kbmira --model-bg)")
    p.add_argument("--kbmira-selection", action="store_true",
                   help="mira: select the best epoch as kbmira (the initial weights are no candidate)")
    p.add_argument("--restarts", type=_positive_int, default=20, help="mert: optimisation runs, the first from --init")
    p.add_argument("--random-directions", type=_non_negative_int, default=10,
                   help="mert: random directions per iteration besides the coordinate axes")
    p.add_argument("--pro-samples", type=_positive_int, default=5000, help="pro: sampled pairs per sentence (Gamma)")
    p.add_argument("--pro-keep", type=_positive_int, default=50, help="pro: pairs kept per sentence (Xi)")
    p.add_argument("--quiet", action="store_true", help="do not print per-epoch / per-run BLEU")
    bleu_options(p)
    p.set_defaults(func=cmd_tune)

    p = sub.add_parser("apply", help="select the best hypothesis per segment under given weights")
    p.add_argument("--nbest", required=True)
    p.add_argument("--weights", required=True)
    p.add_argument("--out", required=True, help="1-best output, one line per segment ('-' for stdout)")
    p.add_argument("--out-nbest", help="also write the n-best list with totals = weighted scores")
    p.set_defaults(func=cmd_apply)

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
        p.add_argument("--shuffles", type=int, default=10000, help="approximate randomisation trials")
        p.add_argument("--resamples", type=int, default=10000, help="bootstrap resamples for s_sel")
        p.add_argument("--seed", type=int, default=12345, help="seed (12345 = sacrebleu's default)")
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

    p = sub.add_parser("embed", help="MLMME / VSE sentence-image embeddings: train, isr, sts")
    esub = p.add_subparsers(dest="embed_verb", required=True)
    q = esub.add_parser("train", help="train on Multi30k task 2 (VSE: --langs de --beta 1)")
    q.add_argument("--data", help="Multi30k directory (task2/raw, task2/image_splits); default: "
                                  "../shared/data/multi30k if present, else downloaded into --download-dir")
    q.add_argument("--download-dir", default="multi30k-download", help="where a download goes")
    q.add_argument("--preset", default="cpu", help="cpu | paper")
    q.add_argument("--beta", type=float, default=0.5)
    q.add_argument("--margin", type=float, default=0.2)
    q.add_argument("--langs", default="en,de")
    q.add_argument("--image-features", help="CNN feature matrix (.npy/.npz)")
    q.add_argument("--image-split", help="image names, one per row of --image-features")
    q.add_argument("--image-task2-split", default="test_2016", help="task-2 split whose images have features")
    q.add_argument("--heldout-images", type=int, default=200, help="last N featured images kept for isr")
    q.add_argument("--valid-images", type=int, default=0,
                   help="N featured images before the held-out ones used for model selection")
    q.add_argument("--task1", action="store_true", help="add task 1's translated training pairs")
    q.add_argument("--init", help="paper (N(0,0.01), orthogonal) | default (PyTorch); default: the preset's")
    q.add_argument("--contrastive", default="batch", choices=["batch", "random"],
                   help="contrastive terms: the other batch rows, or a random sample per batch (the paper)")
    q.add_argument("--image-rows", type=int, default=32, help="image-bearing rows guaranteed per batch")
    q.add_argument("--epochs", type=int, default=10)
    q.add_argument("--validate-every", type=int, default=0, help="also validate every N batches")
    q.add_argument("--patience", type=int, default=3, help="validations without improvement before stopping")
    q.add_argument("--batch-size", type=int, default=128)
    q.add_argument("--lr", type=float, help="Adam learning rate (default: the preset's, cpu 2e-3, paper 2e-4)")
    q.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--out", required=True)
    q = esub.add_parser("isr", help="image-sentence ranking on the model's held-out real images")
    q.add_argument("--model", required=True)
    q.add_argument("--data", required=True)
    q.add_argument("--image-features", required=True)
    q.add_argument("--image-split", required=True)
    q.add_argument("--lang", help="description language (default: the model's last)")
    q.add_argument("--json", action="store_true")
    q = esub.add_parser("sts", help="STS Pearson r of 5 · cosine against gold")
    q.add_argument("--model", required=True)
    q.add_argument("--data", required=True, help="score<TAB>sentence<TAB>sentence file")
    q.add_argument("--lang", default="en")
    q.add_argument("--json", action="store_true")
    p.set_defaults(func=lambda args: __import__("features.commands", fromlist=["cmd_embed"]).cmd_embed(args))

    p = sub.add_parser("features", help="add feature columns to an n-best list")
    fsub = p.add_subparsers(dest="features_verb", required=True)
    q = fsub.add_parser("add", help="append the columns of one or more scorers (existing ones untouched)")
    q.add_argument("--nbest", required=True)
    q.add_argument("--scorer", required=True, action="append", help="NAME:ARG, e.g. mlmme:MODEL_DIR; repeatable")
    q.add_argument("--source", help="source sentences, one per segment (preprocessed as the n-best text)")
    q.add_argument("--images", help="CNN feature matrix (.npy/.npz), rows = lines of --image-split")
    q.add_argument("--image-split", help="image file names, one per row of --images")
    q.add_argument("--segment-images", help="image file name of each segment")
    q.add_argument("--out", required=True)
    q = fsub.add_parser("extract", help="CNN features of the images of an image-split file (.npy, row i = line i)")
    q.add_argument("--images-dir", required=True, help="directory holding the image files")
    q.add_argument("--image-split", required=True, help="image file names, one per line")
    q.add_argument("--cnn", default="resnet50", help="resnet50 | resnet152 | vgg19 | efficientnet-lite0")
    q.add_argument("--batch-size", type=int, default=16)
    q.add_argument("--dtype", default="float32", choices=["float32", "float16"])
    q.add_argument("--out", required=True, help="FEATS.npy (a FEATS.json signature is written beside it)")
    p.set_defaults(func=cmd_features)

    p = sub.add_parser("nmt", help="attention NMT on fairseq: prepare, train, nbest")
    nsub = p.add_subparsers(dest="nmt_verb", required=True)
    q = nsub.add_parser("prepare", help="normalise, tokenise, lowercase, BPE and binarise Multi30k task 1")
    q.add_argument("--data", default=None, help="Multi30k directory (default ../shared/data/multi30k, else download)")
    q.add_argument("--out", required=True)
    q.add_argument("--bpe-merges", type=int, default=10000)
    q.add_argument("--workers", type=int, default=2)
    q = nsub.add_parser("train", help="train the Bahdanau GRU model (resumable)")
    q.add_argument("--data-bin", required=True)
    q.add_argument("--save-dir", required=True)
    q.add_argument("--preset", default="cpu", help="cpu | paper")
    q.add_argument("--variant", default="regular", help="weak (dropout 0, L2 0) | regular (0.5, 1e-8) | optimised (0.2, 0)")
    q.add_argument("--dropout", type=float, default=-1.0, help="override the variant's dropout")
    q.add_argument("--l2", type=float, default=-1.0, help="override the variant's L2 weight")
    q.add_argument("--max-epoch", type=int, default=10)
    q.add_argument("--max-update", type=int, default=0)
    q.add_argument("--patience", type=int, default=3)
    q.add_argument("--max-tokens", type=int, default=4000)
    q.add_argument("--lr", type=float, default=2e-3)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--direction", default="forward", choices=["forward", "backward", "r2l"],
                   help="forward (en->de), backward (de->en: the channel model), r2l (target reversed)")
    q.add_argument("--role", default="", help="feature name of the model's scores (default: L2R, Channel, R2L)")
    q.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    q = nsub.add_parser("train-lm", help="train the target-side LSTM language model (training-split German only)")
    q.add_argument("--prepared", required=True, help="output directory of 'rerank nmt prepare'")
    q.add_argument("--data", default=None, help="Multi30k directory for task 2 (default as prepare)")
    q.add_argument("--save-dir", required=True)
    q.add_argument("--embed-dim", type=int, default=256)
    q.add_argument("--hidden-size", type=int, default=512)
    q.add_argument("--layers", type=int, default=1)
    q.add_argument("--dropout", type=float, default=0.3)
    q.add_argument("--max-epoch", type=int, default=5)
    q.add_argument("--patience", type=int, default=2)
    q.add_argument("--seed", type=int, default=1)
    q.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    q.add_argument("--no-task2", action="store_true", help="task 1's German only")
    q = nsub.add_parser("nbest", help="beam search n-best lists in Moses format")
    q.add_argument("--data-bin", required=True)
    q.add_argument("--checkpoint", required=True)
    q.add_argument("--subset", help="valid | test (a binarised subset of --data-bin)")
    q.add_argument("--input", help="raw source text, one sentence per line: preprocessed as the model's data")
    q.add_argument("--out-source", help="with --input: write the preprocessed source here (for features --source)")
    q.add_argument("--nbest", type=int, default=20)
    q.add_argument("--beam", type=int, default=0, help="beam size (default: = nbest)")
    q.add_argument("--batch-size", type=int, default=32)
    q.add_argument("--out-nbest", required=True)
    q.add_argument("--out-1best", required=True)
    p.set_defaults(func=cmd_nmt)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run one ``rerank`` verb.  Bad input (:class:`InputError`, a file that cannot be
    read or written) prints one line naming the file and returns 1; any other exception
    is a bug of ours and keeps its traceback."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except InputError as err:
        print(f"rerank {args.verb}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except OSError as err:  # e.g. an output path in a missing or read-only place
        where = f"{err.filename}: " if err.filename else ""
        print(f"rerank {args.verb}: error: {where}{err.strerror or err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
