"""rerank's COMET against unbabel-comet 2.2.7 on the same checkpoint and segments: wall time of
scoring N Multi30k test segments (source, hypothesis, reference) and the largest difference.

unbabel-comet is a peer in its own venv (scripts/comet_peer.py says how to make it); this
script runs once in each (``--engine``), each run writing its scores and time as JSON;
``--compare`` reads both.  The checkpoint is built here with random weights in the
architecture of a published one (cost does not depend on weights), over the tests' tiny
tokenizer (vocabulary 302: the embedding lookup is not what costs, but its sequences are 2.5
times as long as XLM-R's; ``--pieces 4000`` trains one with XLM-R's rate of tokens per word):

* ``--size large``: wmt22-comet-da's (XLM-R large: 24 layers, hidden 1024, estimator 3072 →
  1024 → 1, sparsemax mix over 25 layers, average pooling);
* ``--size base``: the same over XLM-R base (12 layers, hidden 768).

    .venv/bin/python benchmarks/bench_comet.py --build out/comet-bench --size base
    .venv-comet/bin/python benchmarks/bench_comet.py --engine comet --checkpoint out/comet-bench/da-base \\
        --segments 200 --out comet.json
    .venv/bin/python benchmarks/bench_comet.py --engine rerank --checkpoint out/comet-bench/da-base \\
        --segments 200 --out rerank.json
    .venv/bin/python benchmarks/bench_comet.py --compare rerank.json comet.json

Both run on the CPU with the same batch size (``--batch``, default 16) and threads (torch's
default); unbabel-comet's ``predict`` sorts by length as rerank does.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time

from _guard import guard_script

SIZES = {
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072),
    "large": dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096),
}


def multi30k_tokenizer(directory: str, pieces: int) -> str:
    """``directory/tokenizer-PIECES``: an XLM-R tokenizer (its special ids) over a SentencePiece
    model of ``pieces`` pieces trained on Multi30k task 1's training text, both languages — with
    4,000 pieces about 1.5 tokens a German word, near XLM-R's own rate on such text, where the
    tests' 300 pieces give 3.8 (and an encoder ~2.5 times the work a real one does)."""
    import sentencepiece as spm
    from transformers import XLMRobertaTokenizer

    out = os.path.join(directory, f"tokenizer-{pieces}")
    if os.path.isdir(out):
        return out
    os.makedirs(directory, exist_ok=True)
    text = os.path.join(directory, "multi30k-train.txt")
    with open(text, "w", encoding="utf-8") as handle:
        for lang in ("en", "de"):
            with gzip.open(os.path.join(raw_dir(), f"train.{lang}.gz"), "rt", encoding="utf-8") as lines:
                handle.writelines(lines)
    prefix = os.path.join(directory, f"multi30k-sp{pieces}")
    spm.SentencePieceTrainer.train(
        input=text, model_prefix=prefix, vocab_size=pieces, character_coverage=1.0, minloglevel=2, num_threads=1
    )
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(3, sp.get_piece_size())]
    tokenizer = XLMRobertaTokenizer(vocab=vocab + [("<mask>", 0.0)])
    tokenizer.model_max_length = 512
    tokenizer.save_pretrained(out)
    return out


def build(directory: str, size: str, pieces: int = 0) -> str:
    """``directory/da-SIZE`` (``da-SIZE-pPIECES`` with ``pieces``): a regression_metric checkpoint
    (wmt22-comet-da's hyper-parameters) over a random encoder of ``size``; its encoder directory
    beside it; its tokenizer the tests' (300 pieces) or :func:`multi30k_tokenizer`'s."""
    import torch
    import yaml
    from transformers import XLMRobertaConfig, XLMRobertaModel

    sys.path.insert(0, os.getcwd())
    from tests.comet_tiny import build_encoder

    tokenizer_dir = multi30k_tokenizer(directory, pieces) if pieces else build_encoder(directory)
    size_name = f"{size}-p{pieces}" if pieces else size
    encoder_dir = os.path.join(directory, f"encoder-{size_name}")
    config = XLMRobertaConfig(
        vocab_size=XLMRobertaConfig.from_pretrained(tokenizer_dir).vocab_size,
        max_position_embeddings=514,
        type_vocab_size=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **SIZES[size],
    )
    torch.manual_seed(0)
    model = XLMRobertaModel(config, add_pooling_layer=False)
    model.save_pretrained(encoder_dir)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tokenizer_dir).save_pretrained(encoder_dir)
    hidden, layers = config.hidden_size, config.num_hidden_layers + 1
    state = {f"encoder.model.{k}": v for k, v in model.state_dict().items()}
    generator = torch.Generator().manual_seed(1)
    for i in range(layers):
        state[f"layerwise_attention.scalar_parameters.{i}"] = torch.randn(1, generator=generator)
    state["layerwise_attention.gamma"] = torch.ones(1)
    sizes = [6 * hidden, 3072, 1024, 1]
    for k in range(3):
        state[f"estimator.ff.{3 * k}.weight"] = torch.randn(sizes[k + 1], sizes[k], generator=generator) * 0.02
        state[f"estimator.ff.{3 * k}.bias"] = torch.zeros(sizes[k + 1])
    hparams = {
        "activations": "Tanh",
        "batch_size": 16,
        "class_identifier": "regression_metric",
        "dropout": 0.1,
        "encoder_model": "XLM-RoBERTa",
        "final_activation": None,
        "hidden_sizes": [3072, 1024],
        "layer": "mix",
        "layer_norm": False,
        "layer_transformation": "sparsemax",
        "pool": "avg",
        "pretrained_model": os.path.abspath(encoder_dir),
    }
    out = os.path.join(directory, f"da-{size_name}")
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    stored = {k: v for k, v in hparams.items() if k != "class_identifier"}
    checkpoint = {"state_dict": state, "hyper_parameters": stored, "pytorch-lightning_version": "2.5.0"}
    torch.save(checkpoint, os.path.join(out, "checkpoints", "model.ckpt"))
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(hparams, handle)
    return out


def raw_dir() -> str:
    """Multi30k task 1's raw text in the shared data beside the checkout."""
    raw = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data", "multi30k")
    return os.path.join(raw, "task1", "raw")


def segments(count: int):
    """(sources, hypotheses, references): the first ``count`` Multi30k test pairs; the
    hypothesis is the reference less its last word."""
    raw = raw_dir()
    with gzip.open(os.path.join(raw, "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as handle:
        src = [next(handle).strip() for _ in range(count)]
    with gzip.open(os.path.join(raw, "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as handle:
        ref = [next(handle).strip() for _ in range(count)]
    return src, [" ".join(r.split()[:-1]) for r in ref], ref


def run(engine: str, checkpoint: str, count: int, batch: int) -> dict:
    """Score the segments with ``engine``; the load and the scoring timed apart."""
    src, hyp, ref = segments(count)
    started = time.perf_counter()
    if engine == "comet":  # the peer's own loader needs full unpickling (its venv only, as scripts/comet_peer.py)
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"
        from comet import load_from_checkpoint

        model = load_from_checkpoint(os.path.join(checkpoint, "checkpoints", "model.ckpt"))
        loaded = time.perf_counter()
        data = [{"src": s, "mt": h, "ref": r} for s, h, r in zip(src, hyp, ref)]
        scores = list(model.predict(data, batch_size=batch, gpus=0, progress_bar=False).scores)
    else:
        from rerank.metrics.comet_kinds import load_comet

        comet = load_comet(checkpoint, batch=batch, device="cpu")
        loaded = time.perf_counter()
        scores = comet.score(src, hyp, ref).tolist()
    done = time.perf_counter()
    return {
        "engine": engine,
        "segments": count,
        "batch": batch,
        "load_seconds": loaded - started,
        "score_seconds": done - loaded,
        "scores": [float(s) for s in scores],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", metavar="DIR", help="build the checkpoint in DIR (rerank's python)")
    parser.add_argument("--size", choices=sorted(SIZES), default="base", help="the encoder's size (default base)")
    parser.add_argument(
        "--pieces",
        type=int,
        default=0,
        help="--build: a tokenizer of this many SentencePiece pieces trained on Multi30k (4000: about XLM-R's "
        "tokens per word), in DIR/da-SIZE-pPIECES (default: the tests' 300 pieces, DIR/da-SIZE)",
    )
    parser.add_argument("--engine", choices=["rerank", "comet"], help="score with this engine")
    parser.add_argument("--checkpoint", help="the checkpoint directory (--build's DIR/da-SIZE)")
    parser.add_argument("--segments", type=int, default=200, help="Multi30k test segments scored (default 200)")
    parser.add_argument("--batch", type=int, default=16, help="sentences per encoder call, both engines (default 16)")
    parser.add_argument("--out", help="the engine's JSON")
    parser.add_argument("--compare", nargs=2, metavar=("RERANK", "COMET"), help="two engines' JSON")
    args = parser.parse_args()
    guard_script(
        parser.prog,
        {"--checkpoint": args.checkpoint, "--compare": args.compare},
        {"--out": args.out},
    )
    if args.build:
        print(build(args.build, args.size, args.pieces))
    elif args.engine:
        result = run(args.engine, args.checkpoint, args.segments, args.batch)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
        print(f"{args.engine}: load {result['load_seconds']:.1f} s, score {result['score_seconds']:.1f} s")
    elif args.compare:
        ours, theirs = (json.load(open(path, encoding="utf-8")) for path in args.compare)
        difference = max(abs(a - b) for a, b in zip(ours["scores"], theirs["scores"]))
        print(
            f"{ours['segments']} segments, batch {ours['batch']}: rerank {ours['score_seconds']:.1f} s "
            f"(load {ours['load_seconds']:.1f} s), unbabel-comet {theirs['score_seconds']:.1f} s "
            f"(load {theirs['load_seconds']:.1f} s): {theirs['score_seconds'] / ours['score_seconds']:.2f}x; "
            f"max |difference| {difference:.2e}"
        )
    else:
        parser.error("give --build, --engine or --compare")


if __name__ == "__main__":
    main()
