"""Benchmark the feature scorers on a real n-best list: MLMME s_s + s_i, and with
``--scorer SPEC`` (repeatable) any registered scorer (``nmt:DIR``, ``lm:DIR``, ``mbr:bleu``,
``mbr:chrf``, ``e5:``, ``len:DIR``, and the user's own models: ``fairseq:CKPT,dict=,bpe=``,
``hf:PATH``, ``ct2:DIR,compute_type=int8``), each timed on its own (model loading excluded).

Goals: MLMME ≥ 2,000 hypotheses/s (issue 3); forced decoding (``nmt:``, ``lm:``) ≥ 1,000
hypotheses/s, i.e. the 20,000-hypothesis test list in ≤ 20 s; ``mbr`` and ``len`` ≥ 10,000
hypotheses/s; ``e5`` measured (issue 8).  All on 2 CPU cores.

    python benchmarks/bench_scorer.py --skip-mlmme --scorer nmt:out/multi30k/models/r2l.small \
        --scorer nmt:out/multi30k/models/channel.small-own --scorer lm:out/multi30k/models/lm \
        --scorer mbr:bleu --scorer mbr:chrf --scorer e5: --scorer len:out/multi30k/data

Scores a real pipeline n-best list (default ``out/multi30k/nbest/test.nbest``: 1,000
segments × 20-best) with the real test_2016 ResNet-50 features, using a trained model
directory (``--model``), or, without one, an untrained CPU-preset model whose
vocabularies are built from the n-best list and the source (same sizes, same speed).
Times, best of ``--repeats`` runs each:

* ``features_add_s``: the scorer call inside ``rerank features add`` (encode every
  distinct source once, every distinct hypothesis once, images once; dot products);
* with 1 and 2 torch threads.

    python benchmarks/bench_scorer.py [--nbest N] [--source SRC] [--model DIR] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "multi30k")


def untrained_model(directory: str, nbest, sources) -> str:
    """Write an untrained CPU-preset MLMME (en, de; 2048-d images) with vocabularies from the text."""
    import torch

    from rerank.embed.data import Vocabulary
    from rerank.embed.model import MLMME, MLMMEConfig
    from rerank.embed.train import EmbedTrainConfig

    vocabs = {"en": Vocabulary.build(sources), "de": Vocabulary.build(nbest.hypotheses)}
    config = MLMMEConfig.from_preset("cpu", image_dim=2048)
    model = MLMME({k: len(v) for k, v in vocabs.items()}, config)
    torch.save(model.state_dict(), os.path.join(directory, "model.pt"))
    for lang, vocab in vocabs.items():
        vocab.save(os.path.join(directory, f"vocab.{lang}.json"))
    from dataclasses import asdict

    with open(os.path.join(directory, "config.json"), "w") as handle:
        json.dump({"config": asdict(EmbedTrainConfig(model=config))}, handle)
    return directory


def random_marian(directory: str) -> list:
    """Build (if absent) a random Marian model of transformer-tiny's size and its CTranslate2
    conversion in ``directory`` (with ``tests/tiny_models.py``); return the scorer specs."""
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from tiny_models import build_marian, convert_ct2

    marian, ct2 = os.path.join(directory, "marian"), os.path.join(directory, "ct2")
    if not os.path.exists(os.path.join(ct2, "model.bin")):
        os.makedirs(directory, exist_ok=True)
        build_marian(directory, d_model=128, layers=4, heads=4, ffn=256, vocab_size=8000, lines=29000)
        convert_ct2(marian, ct2)
    return [f"hf:{marian}", f"ct2:{ct2},compute_type=float32", f"ct2:{ct2},compute_type=int8"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nbest", default=os.path.join(ROOT, "out", "multi30k", "nbest", "test.nbest"))
    parser.add_argument("--source", default=os.path.join(ROOT, "out", "multi30k", "data", "tok", "test_2016_flickr.en"))
    parser.add_argument("--features", default=os.path.join(DATA, "features", "test_2016_flickr-resnet50-avgpool.npy"))
    parser.add_argument("--image-split", default=os.path.join(DATA, "task1", "image_splits", "test_2016_flickr.txt"))
    parser.add_argument("--model", help="trained model directory (default: an untrained CPU-preset model)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scorer", action="append", default=[], help="another scorer to time (NAME:ARG)")
    parser.add_argument("--skip-mlmme", action="store_true", help="time only the --scorer scorers")
    parser.add_argument(
        "--random-marian",
        metavar="DIR",
        help="build (once) in DIR a random Marian model the size of transformer-tiny, with a "
        "SentencePiece model of the training text, and its CTranslate2 conversion; then time "
        "hf:DIR/marian, ct2:DIR/ct2 (float32) and ct2:DIR/ct2,compute_type=int8 too",
    )
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    import torch

    from rerank.embed.data import load_image_features
    from rerank.features.scorer import make_scorer
    from rerank.nbest import read_nbest
    from rerank.textio import read_lines

    if args.random_marian:
        args.scorer += random_marian(args.random_marian)
    nbest = read_nbest(args.nbest)
    sources = read_lines(args.source)
    _, images = load_image_features(args.features, args.image_split)  # row i = segment i (task-1 test order)
    if len(images) != nbest.num_segments or len(sources) != nbest.num_segments:
        sys.exit(f"{nbest.num_segments} segments, {len(sources)} sources, {len(images)} image rows")
    hyps = len(nbest.hypotheses)
    result = {
        "hypotheses": hyps,
        "segments": nbest.num_segments,
        "distinct_hypotheses": len(set(nbest.hypotheses)),
        "model": args.model or "untrained cpu preset",
    }
    for spec in args.scorer:  # each with torch's default threads (both cores)
        scorer = make_scorer(spec)
        runs = []
        for _ in range(args.repeats if not spec.startswith("e5") else 1):
            t = time.perf_counter()
            out = scorer.score(nbest, sources, None)
            runs.append(time.perf_counter() - t)
        assert all(len(v) == hyps for v in out.values())
        result[spec] = {"seconds": min(runs), "hyp_per_s": hyps / min(runs), "columns": sorted(out)}
    if args.skip_mlmme:
        print(json.dumps(result, indent=2))
        if args.json:
            with open(args.json, "w") as handle:
                json.dump(result, handle, indent=2)
        return
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model or untrained_model(tmp, nbest, sources)
        scorer = make_scorer(f"mlmme:{model_dir}")
        for threads in (1, 2):
            torch.set_num_threads(threads)
            runs = []
            for _ in range(args.repeats):
                t = time.perf_counter()
                out = scorer.score(nbest, sources, images)
                runs.append(time.perf_counter() - t)
            assert sorted(out) == ["MLMMEsi", "MLMMEss"] and all(len(v) == hyps for v in out.values())
            result[f"threads{threads}_s"] = min(runs)
            result[f"threads{threads}_hyp_per_s"] = hyps / min(runs)
    result["goal_hyp_per_s"] = 2000
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in result.items()}, indent=2))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=2)


if __name__ == "__main__":
    main()
