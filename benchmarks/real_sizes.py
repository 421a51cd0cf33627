"""What every neural path of rerank costs at the sizes users bring, side by side with the
library a user would call instead (issue 91): the same work, the same settings, on this
machine, each run a process of its own (its peak resident memory from the kernel), rerank
and its peer alternated, every run a JSON record, and a Markdown table of them all.

    .venv/bin/python benchmarks/real_sizes.py                 # everything (hours on 2 cores; resumable)
    .venv/bin/python benchmarks/real_sizes.py --quick         # the smaller size, one run each (~minutes)
    .venv/bin/python benchmarks/real_sizes.py --cases gen-hf-marian,score-ct2-marian --runs 3
    .venv/bin/python benchmarks/real_sizes.py --table         # the table of the records made so far

Pretrained weights cannot be downloaded here, and cost does not depend on them: each model is
built once, with random weights, in its published configuration (layers, hidden size, heads,
feed-forward size, vocabulary size, positions), into ``WORK/models`` (``--work``, default
``out/real-sizes``):

* ``opus-mt-en-de``: MarianMT as Helsinki-NLP/opus-mt-en-de (6+6 layers, d 512, 8 heads, FFN
  2048, SiLU, 58,101 tokens, static positions, tied embeddings; 74 M parameters);
* ``nllb-600m``: M2M-100 as facebook/nllb-200-distilled-600M (12+12 layers, d 1024, 16 heads,
  FFN 4096, 256,206 tokens; 615 M parameters);
* ``comet-22``: Unbabel/wmt22-comet-da (XLM-R large: 24 layers, hidden 1024, 250,002 tokens;
  estimator 6144 → 3072 → 1024 → 1; sparsemax layer mix, mean pooling);
* ``cometkiwi-22``: Unbabel/wmt22-cometkiwi-da (InfoXLM large, the same shape; unified metric,
  (hypothesis, source) jointly encoded, estimator 1024 → 3072 → 1024 → 1);
* ``mbert``: bert-base-multilingual-cased (12 layers, hidden 768, 119,547 tokens), BERTScore
  on layer 9 (bert-score's choice for it);
* the CTranslate2 conversions of the two translation models, float32 and int8.

Their tokenizers cut text as often as the real ones do, on Multi30k: one SentencePiece model
(unigram, ``PIECES`` pieces) trained on Multi30k's training text, both languages (a BPE of as
many merges for NLLB's BPE tokenizer, WordPiece for mBERT), its pieces padded with unused
entries up to the published vocabulary size so that the embedding and output layers cost
what they cost.  The build record (``WORK/models/build.json``) states each tokenizer's tokens
per word on test_2016; the aim is the published tokenizers' rate on such text, about 1.3-1.5.

A model of random weights never chooses to end a sentence, so every search runs to its
length limit: ``MAX_TOKENS`` (24 tokens, about the longest of 20 hypotheses of a Multi30k
sentence) for rerank and the peer alike.  Scored candidates are the test_2016 references with
words dropped and swapped (K variants per sentence: lengths as real candidates have).

The pairs (``--cases``; ``--list`` prints them): ``rerank generate`` (hf:, ct2: float32 and
int8; beam 20 and sampling) against ``model.generate`` and ``Translator.translate_batch``;
forced decoding (``features add hf:/ct2:``) against transformers' per-token loss and
``score_batch``; ``comet:`` and ``cometkiwi:`` against unbabel-comet's ``predict`` (peer venv);
``bertscore:`` against bert-score's ``BERTScorer``; COMET-MBR (exact, aggregate, halving)
against mbrs' ``DecoderMBR`` with ``MetricCOMET`` (peer venv).  unbabel-comet and mbrs cannot
share rerank's environment (numpy < 2, transformers < 5); their venv (``--peer-python``,
default ``.venv-peers/bin/python``) is made with

    python3 -m venv .venv-peers
    .venv-peers/bin/pip install torch==2.13.0 unbabel-comet==2.2.7 'setuptools<81' mbrs==0.1.8

A case whose peer python is missing is skipped with the reason in the table.  Records are
``WORK/runs/CASE-SIZE-ENGINE-rK.json``: a run already recorded is not run again (delete it, or
``--again``), so an interrupted sitting resumes.  The table (``WORK/real_sizes.md``, and
``real_sizes.json``) gives per case and size the minimum and median seconds of the work (the
model's loading included, in both engines), hypotheses per second,
the ratio rerank/peer of the medians, each engine's peak resident memory, and the largest
difference of the scores (or the share of the same selections).  Everything runs on the
CPU (a GPU path is not written yet).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIECES = 8000
MAX_TOKENS = 24
SEED = 1

#: published configurations (config.json of each model on the hub, the fields that set the cost)
MARIAN = dict(
    vocab_size=58101,
    decoder_vocab_size=58101,
    d_model=512,
    encoder_layers=6,
    decoder_layers=6,
    encoder_attention_heads=8,
    decoder_attention_heads=8,
    encoder_ffn_dim=2048,
    decoder_ffn_dim=2048,
    activation_function="swish",
    max_position_embeddings=512,
    scale_embedding=True,
    static_position_embeddings=True,
    share_encoder_decoder_embeddings=True,
    pad_token_id=58100,
    eos_token_id=0,
    decoder_start_token_id=58100,
    forced_eos_token_id=0,
)
NLLB = dict(
    vocab_size=256206,
    d_model=1024,
    encoder_layers=12,
    decoder_layers=12,
    encoder_attention_heads=16,
    decoder_attention_heads=16,
    encoder_ffn_dim=4096,
    decoder_ffn_dim=4096,
    activation_function="relu",
    max_position_embeddings=1024,
    scale_embedding=True,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
    decoder_start_token_id=2,
    tokenizer_class="NllbTokenizer",
)
XLMR_LARGE = dict(
    vocab_size=250002,
    hidden_size=1024,
    num_hidden_layers=24,
    num_attention_heads=16,
    intermediate_size=4096,
    max_position_embeddings=514,
    type_vocab_size=1,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)
MBERT = dict(
    vocab_size=119547,
    hidden_size=768,
    num_hidden_layers=12,
    num_attention_heads=12,
    intermediate_size=3072,
    max_position_embeddings=512,
    type_vocab_size=2,
)

#: work sizes: (sentences, candidates per sentence); the first is --quick's
SIZES = {
    "marian": [(100, 20), (300, 20)],
    # rerank's CTranslate2 sampling runs a translate_batch per step over the whole prefix (~10 s
    # a sentence at 20 samples): smaller, so that its two sizes fit a sitting
    "marian-ct2-sampling": [(25, 20), (50, 20)],
    "nllb": [(25, 20), (50, 20)],
    "metric": [(50, 10), (100, 20)],
    "bertscore": [(100, 20), (200, 40)],
    "mbr": [(10, 20), (10, 40)],
}

#: case -> (what, model, size family, settings); engines "rerank" and "peer"
CASES: Dict[str, Tuple[str, str, str, Dict[str, Any]]] = {
    "gen-hf-marian-beam": ("generate", "opus-mt-en-de", "marian", {"kind": "hf", "mode": "beam"}),
    "gen-hf-marian-sample": ("generate", "opus-mt-en-de", "marian", {"kind": "hf", "mode": "sample"}),
    "gen-ct2-marian-beam-f32": (
        "generate",
        "opus-mt-en-de",
        "marian",
        {"kind": "ct2", "mode": "beam", "ct": "float32"},
    ),
    "gen-ct2-marian-beam-int8": ("generate", "opus-mt-en-de", "marian", {"kind": "ct2", "mode": "beam", "ct": "int8"}),
    "gen-ct2-marian-sample-int8": (
        "generate",
        "opus-mt-en-de",
        "marian-ct2-sampling",
        {"kind": "ct2", "mode": "sample", "ct": "int8"},
    ),
    "gen-hf-nllb-beam": ("generate", "nllb-600m", "nllb", {"kind": "hf", "mode": "beam"}),
    "gen-ct2-nllb-beam-int8": ("generate", "nllb-600m", "nllb", {"kind": "ct2", "mode": "beam", "ct": "int8"}),
    "score-hf-marian": ("score", "opus-mt-en-de", "marian", {"kind": "hf"}),
    "score-ct2-marian-f32": ("score", "opus-mt-en-de", "marian", {"kind": "ct2", "ct": "float32"}),
    "score-ct2-marian-int8": ("score", "opus-mt-en-de", "marian", {"kind": "ct2", "ct": "int8"}),
    "score-hf-nllb": ("score", "nllb-600m", "nllb", {"kind": "hf"}),
    "score-ct2-nllb-int8": ("score", "nllb-600m", "nllb", {"kind": "ct2", "ct": "int8"}),
    "comet-22": ("comet", "comet-22", "metric", {}),
    "cometkiwi-22": ("comet", "cometkiwi-22", "metric", {"qe": True}),
    "bertscore-mbert": ("bertscore", "mbert", "bertscore", {}),
    "mbr-comet-exact": ("mbr", "comet-22", "mbr", {"algorithm": "exact"}),
    "mbr-comet-aggregate": ("mbr", "comet-22", "mbr", {"algorithm": "aggregate"}),
    "mbr-comet-halving": ("mbr", "comet-22", "mbr", {"algorithm": "halving", "peer_algorithm": "exact"}),
}
# CASE-int8: rerank's model in int8 (dtype=int8: torch's dynamic quantisation), the peer as in CASE (float32)
for _case in (
    "gen-hf-marian-beam",
    "score-hf-marian",
    "comet-22",
    "cometkiwi-22",
    "bertscore-mbert",
    "mbr-comet-exact",
    "mbr-comet-halving",
):
    CASES[f"{_case}-int8"] = (*CASES[_case][:3], {**CASES[_case][3], "dtype": "int8"})
#: cases whose peer runs in the peer venv (unbabel-comet, mbrs)
PEER_VENV = {"comet", "mbr"}
SAMPLING = "epsilon=0.02,seed=1"  # hf: epsilon sampling (the MBR literature's); ct2: nucleus, which CTranslate2 has
CT2_SAMPLING = "top_p=0.9,seed=1"


# --------------------------------------------------------------------------------------- data
def raw(name: str) -> List[str]:
    """Multi30k task 1's raw lines ``name`` (e.g. ``test_2016_flickr.en``) from shared/data."""
    path = os.path.join(ROOT, "..", "shared", "data", "multi30k", "task1", "raw", name + ".gz")
    if not os.path.exists(path):
        sys.exit(f"real_sizes: error: {os.path.normpath(path)}: Multi30k's raw text is not there (shared/data)")
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [line.strip() for line in handle]


def candidates(references: List[str], k: int) -> List[List[str]]:
    """K variants of each reference (itself, then words dropped or two swapped, seeded):
    candidates of a real list's lengths and overlap."""
    import random

    out = []
    for s, ref in enumerate(references):
        rng = random.Random(s)
        words, variants = ref.split(), [ref]
        while len(variants) < k:
            w = list(words)
            for _ in range(1 + len(variants) % 3):
                if len(w) > 2 and rng.random() < 0.5:
                    del w[rng.randrange(len(w))]
                elif len(w) > 1:
                    i, j = rng.randrange(len(w)), rng.randrange(len(w))
                    w[i], w[j] = w[j], w[i]
            variants.append(" ".join(w))
        out.append(variants)
    return out


# -------------------------------------------------------------------------------------- build
def _padded(pieces: List[Tuple[str, float]], size: int, prefix: str) -> List[Tuple[str, float]]:
    """``pieces`` followed by unused entries up to ``size`` (never matched by text)."""
    return pieces + [(f"<{prefix}{i}>", -100.0) for i in range(size - len(pieces))]


def _sentencepiece(models: str) -> str:
    import sentencepiece as spm

    prefix = os.path.join(models, f"multi30k-sp{PIECES}")
    if not os.path.exists(prefix + ".model"):
        text = os.path.join(models, "multi30k-train.txt")
        with open(text, "w", encoding="utf-8") as handle:
            for lang in ("en", "de"):
                handle.writelines(line + "\n" for line in raw(f"train.{lang}"))
        spm.SentencePieceTrainer.train(
            input=text, model_prefix=prefix, vocab_size=PIECES, character_coverage=1.0, minloglevel=2, num_threads=2
        )
    return prefix + ".model"


def build_marian(models: str, out: str) -> None:
    import shutil

    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    os.makedirs(out, exist_ok=True)
    model_file = _sentencepiece(models)
    for name in ("source.spm", "target.spm"):
        shutil.copyfile(model_file, os.path.join(out, name))
    sp = spm.SentencePieceProcessor(model_file=model_file)
    vocab = {"</s>": 0, "<unk>": 1}
    for i in range(sp.get_piece_size()):
        vocab.setdefault(sp.id_to_piece(i), len(vocab)) if i > 2 else None
    real_entries = len(vocab)
    while len(vocab) < MARIAN["vocab_size"] - 1:
        vocab[f"<unused{len(vocab)}>"] = len(vocab)
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as handle:
        json.dump(vocab, handle, ensure_ascii=False)
    tokenizer = MarianTokenizer(
        os.path.join(out, "source.spm"), os.path.join(out, "target.spm"), os.path.join(out, "vocab.json")
    )
    tokenizer.save_pretrained(out)
    torch.manual_seed(SEED)
    model = MarianMTModel(MarianConfig(**MARIAN))
    # a random model would mostly emit the unused entries (which read back as many pieces each):
    # the output bias (zeros in the published model, the same cost) rules them out
    model.final_logits_bias[0, real_entries:] = -1e4
    model.save_pretrained(out)


def _bpe_tokenizer(models: str):
    """A BPE (Metaspace, as NLLB's) of PIECES tokens trained on Multi30k's training text."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tk_models

    path = os.path.join(models, f"multi30k-bpe{PIECES}.json")
    if not os.path.exists(path):
        tok = Tokenizer(tk_models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.BpeTrainer(vocab_size=PIECES, special_tokens=["<s>", "<pad>", "</s>", "<unk>"])
        tok.train_from_iterator(raw("train.en") + raw("train.de"), trainer)
        tok.save(path)
    return json.load(open(path, encoding="utf-8"))


def build_nllb(models: str, out: str) -> None:
    import torch
    from transformers import M2M100Config, M2M100ForConditionalGeneration, NllbTokenizer

    bpe = _bpe_tokenizer(models)["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in bpe["merges"]]
    tokenizer = NllbTokenizer(vocab=bpe["vocab"], merges=merges, src_lang="eng_Latn", tgt_lang="deu_Latn")
    tokenizer.save_pretrained(out)
    torch.manual_seed(SEED)
    model = M2M100ForConditionalGeneration(M2M100Config(**NLLB))
    # M2M-100 has no output bias: the decoder's last layer norm makes hidden unit 0 a constant 1
    # (gain 0, bias 1) and the (tied) output rows of the unused ids weigh it -1e4, so that a
    # random model emits the tokenizer's tokens only (the same cost)
    used = len(tokenizer)
    with torch.no_grad():
        model.model.decoder.layer_norm.weight[0] = 0.0
        model.model.decoder.layer_norm.bias[0] = 1.0
        model.model.shared.weight[:used, 0] = 0.0
        model.model.shared.weight[used:, 0] = -1e4
    model.save_pretrained(out)


def build_xlmr(models: str, out: str) -> None:
    """An XLM-R large encoder (random) with a tokenizer of the Multi30k pieces, padded to 250,002."""
    import sentencepiece as spm
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    sp = spm.SentencePieceProcessor(model_file=_sentencepiece(models))
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(3, sp.get_piece_size())]
    vocab = _padded(vocab, XLMR_LARGE["vocab_size"] - 1, "unused") + [("<mask>", 0.0)]
    tokenizer = XLMRobertaTokenizer(vocab=vocab)
    tokenizer.model_max_length = 512
    torch.manual_seed(SEED)
    XLMRobertaModel(XLMRobertaConfig(**XLMR_LARGE), add_pooling_layer=False).save_pretrained(out)
    tokenizer.save_pretrained(out)


def build_comet(encoder: str, out: str, qe: bool) -> None:
    """wmt22-comet-da's checkpoint (``qe``: wmt22-cometkiwi-da's) over ``encoder``'s weights,
    in unbabel-comet's layout (``checkpoints/model.ckpt``, ``hparams.yaml``)."""
    import torch
    import yaml
    from safetensors.torch import load_file

    weights = load_file(os.path.join(encoder, "model.safetensors"))
    state = {f"encoder.model.{k}": v for k, v in weights.items()}
    generator = torch.Generator().manual_seed(SEED + qe)
    for i in range(XLMR_LARGE["num_hidden_layers"] + 1):
        state[f"layerwise_attention.scalar_parameters.{i}"] = torch.randn(1, generator=generator)
    state["layerwise_attention.gamma"] = torch.ones(1)
    hidden = XLMR_LARGE["hidden_size"]
    sizes = [hidden if qe else 6 * hidden, 3072, 1024, 1]
    for k in range(3):
        state[f"estimator.ff.{3 * k}.weight"] = torch.randn(sizes[k + 1], sizes[k], generator=generator) * 0.02
        state[f"estimator.ff.{3 * k}.bias"] = torch.zeros(sizes[k + 1])
    hparams: Dict[str, Any] = {
        "activations": "Tanh",
        "batch_size": 16,
        "dropout": 0.1,
        "encoder_model": "XLM-RoBERTa",
        "final_activation": None,
        "hidden_sizes": [3072, 1024],
        "layer_norm": False,
        "layer_transformation": "sparsemax",
        "pretrained_model": os.path.abspath(encoder),
    }
    if qe:
        hparams.update(
            class_identifier="unified_metric",
            input_segments=["mt", "src"],
            sent_layer="mix",
            word_layer=24,
            word_level_training=False,
        )
    else:
        hparams.update(class_identifier="regression_metric", layer="mix", pool="avg")
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    stored = {k: v for k, v in hparams.items() if k != "class_identifier"}
    checkpoint = {"state_dict": state, "hyper_parameters": stored, "pytorch-lightning_version": "2.5.0", "epoch": 0}
    torch.save(checkpoint, os.path.join(out, "checkpoints", "model.ckpt"))
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(hparams, handle)


def build_mbert(models: str, out: str) -> None:
    import torch
    from tokenizers import BertWordPieceTokenizer
    from transformers import BertConfig, BertModel, BertTokenizer

    os.makedirs(out, exist_ok=True)
    wordpiece = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    wordpiece.train_from_iterator(raw("train.en") + raw("train.de"), vocab_size=PIECES)
    vocab = [t for t, _ in sorted(wordpiece.get_vocab().items(), key=lambda item: item[1])]
    vocab += [f"[unused{i}]" for i in range(MBERT["vocab_size"] - len(vocab))]
    vocab_file = os.path.join(out, "vocab.txt")
    with open(vocab_file, "w", encoding="utf-8") as handle:
        handle.writelines(t + "\n" for t in vocab)
    BertTokenizer(vocab_file, do_lower_case=False, model_max_length=512).save_pretrained(out)
    torch.manual_seed(SEED)
    BertModel(BertConfig(**MBERT), add_pooling_layer=False).save_pretrained(out)


def convert_ct2(source: str, out: str, quantization: str) -> None:
    import ctranslate2  # noqa: F401  (after transformers: its converters import it)
    from ctranslate2.converters import TransformersConverter

    files = [f for f in os.listdir(source) if "token" in f or f.endswith((".spm", "vocab.json"))]
    TransformersConverter(source, copy_files=files).convert(out, quantization=quantization, force=True)


def tokens_per_word(model_dir: str) -> Dict[str, float]:
    """The tokenizer's tokens per whitespace word on test_2016 (specials left out), per language."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    rates = {}
    for lang in ("en", "de"):
        lines = raw(f"test_2016_flickr.{lang}")
        pieces = sum(len(tok(line, add_special_tokens=False)["input_ids"]) for line in lines)
        rates[lang] = round(pieces / sum(len(line.split()) for line in lines), 3)
    return rates


def build(models: str) -> Dict[str, Any]:
    """Every model in ``models`` (each once: a directory holding ``.built`` is kept)."""
    sys.path.insert(0, ROOT)
    from rerank.features.hf_scorer import import_transformers

    import_transformers()  # torchaudio hidden first, as rerank does
    os.makedirs(models, exist_ok=True)
    record_path = os.path.join(models, "build.json")
    record = json.load(open(record_path, encoding="utf-8")) if os.path.exists(record_path) else {}
    steps = [
        ("opus-mt-en-de", lambda out: build_marian(models, out)),
        ("nllb-600m", lambda out: build_nllb(models, out)),
        ("xlmr-large", lambda out: build_xlmr(models, out)),
        ("comet-22", lambda out: build_comet(os.path.join(models, "xlmr-large"), out, False)),
        ("cometkiwi-22", lambda out: build_comet(os.path.join(models, "xlmr-large"), out, True)),
        ("mbert", lambda out: build_mbert(models, out)),
    ]
    for base in ("opus-mt-en-de", "nllb-600m"):
        for q in ("float32", "int8"):
            steps.append((f"{base}-ct2-{q}", lambda out, b=base, q=q: convert_ct2(os.path.join(models, b), out, q)))
    for name, make in steps:
        out = os.path.join(models, name)
        if os.path.exists(os.path.join(out, ".built")):
            continue
        print(f"real_sizes: building {name} (random weights, the published configuration)", file=sys.stderr)
        began = time.perf_counter()
        make(out)
        entry: Dict[str, Any] = {"seconds": round(time.perf_counter() - began, 1)}
        if name in ("opus-mt-en-de", "nllb-600m", "xlmr-large", "mbert"):
            entry["tokens_per_word"] = tokens_per_word(out)
            entry["parameters"] = _parameters(out)
        record[name] = entry
        open(os.path.join(out, ".built"), "w").close()
        with open(record_path, "w", encoding="utf-8") as handle:
            json.dump(record, handle, indent=1)
    return record


def _parameters(model_dir: str) -> int:
    from safetensors import safe_open

    with safe_open(os.path.join(model_dir, "model.safetensors"), "pt") as handle:
        return sum(_numel(handle.get_slice(k).get_shape()) for k in handle.keys())


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


# ---------------------------------------------------------------------------------------- jobs
def _lang(model: str) -> Dict[str, str]:
    """NLLB's language codes (English to German); none for Marian."""
    return {"src_lang": "eng_Latn", "tgt_lang": "deu_Latn"} if model.startswith("nllb") else {}


def _spec(kind: str, path: str, model: str, ct: str = "", dtype: str = "") -> str:
    settings = [f"{k}={v}" for k, v in _lang(model).items()]
    if ct:
        settings.append(f"compute_type={ct}")
    if dtype:  # hf: dtype=int8, the model's linear layers quantised
        settings.append(f"dtype={dtype}")
    return ",".join([f"{kind}:{path}"] + settings)


def job_generate(job: Dict[str, Any]) -> Dict[str, Any]:
    """Candidates for the first N test_2016 sources: beam K (K hypotheses) or K samples."""
    n, k, s = job["sentences"], job["candidates"], job["settings"]
    sources = raw("test_2016_flickr.en")[:n]
    path = os.path.join(job["models"], job["model"] + (f"-ct2-{s['ct']}" if s["kind"] == "ct2" else ""))
    began = time.perf_counter()
    if job["engine"] == "rerank":
        from rerank.features.generate import generate_file
        from rerank.features.sampling import Sampling

        source = os.path.join(job["tmp"], "input.en")
        with open(source, "w", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in sources)
        nbest = os.path.join(job["tmp"], "out.nbest")
        sampling = Sampling.parse(SAMPLING if s["kind"] == "hf" else CT2_SAMPLING) if s["mode"] == "sample" else None
        record = generate_file(
            _spec(s["kind"], path, job["model"], s.get("ct", ""), s.get("dtype", "")),
            source,
            nbest,
            None,
            k,
            None if sampling else k,
            sampling,
            max_length=MAX_TOKENS,
        )
        from rerank.nbest import read_nbest

        listed = read_nbest(nbest)
        best = [listed.hypotheses[o] for o in listed.offsets[:-1]]
        hyps = len(listed.hypotheses)
    elif s["kind"] == "hf":
        import torch
        import transformers

        tok = transformers.AutoTokenizer.from_pretrained(path, **_lang(job["model"]))
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        how: Dict[str, Any] = {"num_return_sequences": k, "max_new_tokens": MAX_TOKENS}
        if s["mode"] == "beam":
            how.update(num_beams=k, length_penalty=1.0, do_sample=False)
        else:
            how.update(do_sample=True, epsilon_cutoff=0.02, top_k=0, num_beams=1)
            torch.manual_seed(SEED)
        if _lang(job["model"]):
            how["forced_bos_token_id"] = tok.convert_tokens_to_ids("deu_Latn")
        best, hyps, batch = [], 0, 64
        with torch.inference_mode():
            for start in range(0, n, batch):
                enc = tok(sources[start : start + batch], return_tensors="pt", padding=True)
                texts = tok.batch_decode(model.generate(**enc, **how), skip_special_tokens=True)
                hyps += len(texts)
                best += texts[::k]  # beam: the best; sampling: the first sample (the peer ranks none)
    else:
        import ctranslate2
        import transformers

        tok = transformers.AutoTokenizer.from_pretrained(path, **_lang(job["model"]))
        translator = ctranslate2.Translator(path, device="cpu", compute_type=s["ct"])
        tokens = [tok.convert_ids_to_tokens(ids) for ids in tok(sources)["input_ids"]]
        prefix = [["deu_Latn"]] * n if _lang(job["model"]) else None
        common: Dict[str, Any] = {"max_decoding_length": MAX_TOKENS, "num_hypotheses": k, "max_batch_size": 32}
        if s["mode"] == "beam":
            results = translator.translate_batch(
                tokens, target_prefix=prefix, beam_size=k, length_penalty=1.0, return_scores=True, **common
            )
        else:
            ctranslate2.set_random_seed(SEED)
            results = translator.translate_batch(
                tokens, target_prefix=prefix, beam_size=1, sampling_topk=0, sampling_topp=0.9, **common
            )
        strip = 1 if prefix else 0
        best = [tok.convert_tokens_to_string(r.hypotheses[0][strip:]) for r in results]
        hyps = sum(len(r.hypotheses) for r in results)
    result = {"seconds": time.perf_counter() - began, "hypotheses": hyps, "best": best}
    if job["engine"] == "rerank":  # how many candidates kept the search's score (the rest forced-decoded)
        result["scores_from_search"] = record["scores_from_search"]
    return result


def _pairs(job: Dict[str, Any]) -> Tuple[List[str], List[str], List[str]]:
    """(sources, hypotheses, references) of N sentences × K candidates, flattened."""
    n, k = job["sentences"], job["candidates"]
    src, ref = raw("test_2016_flickr.en")[:n], raw("test_2016_flickr.de")[:n]
    cands = candidates(ref, k)
    return (
        [src[s] for s in range(n) for _ in range(k)],
        [c for cs in cands for c in cs],
        [ref[s] for s in range(n) for _ in range(k)],
    )


def job_score(job: Dict[str, Any]) -> Dict[str, Any]:
    """Forced decoding: the sum of log-probabilities of every candidate given its source."""
    import numpy as np

    s = job["settings"]
    sources, hyps, _ = _pairs(job)
    path = os.path.join(job["models"], job["model"] + (f"-ct2-{s['ct']}" if s["kind"] == "ct2" else ""))
    began = time.perf_counter()
    if job["engine"] == "rerank":
        from rerank.devices import DeviceSettings
        from rerank.features.scorer import make_scorer

        spec = _spec(s["kind"], path, job["model"], s.get("ct", ""), s.get("dtype", ""))
        scorer = make_scorer(spec, DeviceSettings("cpu"))
        sums, _ = scorer.score_pairs(sources, hyps)
    elif s["kind"] == "hf":
        import torch
        import transformers

        tok = transformers.AutoTokenizer.from_pretrained(path, **_lang(job["model"]))
        model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path).eval()
        skip = 1 if _lang(job["model"]) else 0  # NLLB's target language token: fed, not scored
        sums = np.zeros(len(hyps))
        lengths = [len(tok(text_target=h)["input_ids"]) for h in hyps]
        order = np.argsort(lengths, kind="stable")
        with torch.inference_mode():
            for start in range(0, len(order), 64):
                rows = order[start : start + 64]
                enc = tok(
                    [sources[r] for r in rows], text_target=[hyps[r] for r in rows], return_tensors="pt", padding=True
                )
                labels = enc.pop("labels")
                labels[labels == tok.pad_token_id] = -100
                logits = model(**enc, labels=labels).logits
                loss = torch.nn.functional.cross_entropy(
                    logits.transpose(1, 2), labels, ignore_index=-100, reduction="none"
                )
                sums[rows] = -loss[:, skip:].sum(-1).double().numpy()
    else:
        import ctranslate2
        import transformers

        tok = transformers.AutoTokenizer.from_pretrained(path, **_lang(job["model"]))
        translator = ctranslate2.Translator(path, device="cpu", compute_type=s["ct"])
        src = [tok.convert_ids_to_tokens(ids) for ids in tok(sources)["input_ids"]]
        tgt = [tok.convert_ids_to_tokens(ids)[:-1] for ids in tok(text_target=hyps)["input_ids"]]
        skip = 1 if _lang(job["model"]) else 0
        results = translator.score_batch(src, tgt, max_batch_size=32)
        sums = np.array([float(np.sum(r.log_probs[skip:])) for r in results])
    return {"seconds": time.perf_counter() - began, "hypotheses": len(hyps), "scores": [float(x) for x in sums]}


def job_comet(job: Dict[str, Any]) -> Dict[str, Any]:
    """COMET-22 (src, mt, ref) or CometKiwi-22 (src, mt) of every candidate, batch 16 both."""
    qe = job["settings"].get("qe", False)
    sources, hyps, refs = _pairs(job)
    path = os.path.join(job["models"], job["model"])
    began = time.perf_counter()
    if job["engine"] == "rerank":
        from rerank.metrics.comet_kinds import load_comet

        comet = load_comet(path, batch=16, device="cpu", dtype=job["settings"].get("dtype", "float32"))
        scores = comet.score(sources, hyps, None if qe else refs).tolist()
    else:
        os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] = "1"  # the peer's own loader, in its own venv only
        from comet import load_from_checkpoint

        model = load_from_checkpoint(os.path.join(path, "checkpoints", "model.ckpt"))
        data = [{"src": a, "mt": b} if qe else {"src": a, "mt": b, "ref": c} for a, b, c in zip(sources, hyps, refs)]
        scores = list(model.predict(data, batch_size=16, gpus=0, progress_bar=False).scores)
    return {"seconds": time.perf_counter() - began, "hypotheses": len(hyps), "scores": [float(x) for x in scores]}


def job_bertscore(job: Dict[str, Any]) -> Dict[str, Any]:
    """BERTScore F1 of every candidate against its reference (mBERT, layer 9, batch 64)."""
    _, hyps, refs = _pairs(job)
    path = os.path.join(job["models"], job["model"])
    began = time.perf_counter()
    if job["engine"] == "rerank":
        from rerank.metrics.spec import make_metric

        metric: Any = make_metric(f"bertscore:{path},layers=9,dtype={job['settings'].get('dtype', 'float32')}")
        scores = metric.f1(hyps, refs).tolist()
    else:
        from bert_score import BERTScorer

        scores = BERTScorer(model_type=path, num_layers=9, batch_size=64).score(hyps, refs)[2].tolist()
    return {"seconds": time.perf_counter() - began, "hypotheses": len(hyps), "scores": [float(x) for x in scores]}


def job_mbr(job: Dict[str, Any]) -> Dict[str, Any]:
    """COMET-MBR of N lists of K candidates (uniform weights, the candidates as their own
    pseudo-references) by benchmarks/bench_mbrs.py's two engines."""
    n, k = job["sentences"], job["candidates"]
    src, ref = raw("test_2016_flickr.en")[:n], raw("test_2016_flickr.de")[:n]
    nbest, source = os.path.join(job["tmp"], "list.nbest"), os.path.join(job["tmp"], "source.en")
    with open(nbest, "w", encoding="utf-8") as handle:
        for s, cands in enumerate(candidates(ref, k)):
            handle.writelines(f"{s} ||| {c} ||| NMT= {-j} ||| {-j}\n" for j, c in enumerate(cands))
    with open(source, "w", encoding="utf-8") as handle:
        handle.writelines(line + "\n" for line in src)
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import bench_mbrs

    algorithm = (
        job["settings"]["algorithm"]
        if job["engine"] == "rerank"
        else job["settings"].get("peer_algorithm", job["settings"]["algorithm"])
    )
    out = os.path.join(job["tmp"], "mbr.json")
    began = time.perf_counter()
    engine = "rerank" if job["engine"] == "rerank" else "mbrs"
    bench_mbrs.main(
        ["--engine", engine, "--metrics", "comet", "--checkpoint", os.path.join(job["models"], job["model"])]
        + ["--source", source, "--nbest", nbest, "--algorithm", algorithm, "--batch", "16", "--out", out]
        + (["--dtype", job["settings"].get("dtype", "float32")] if engine == "rerank" else [])
    )
    seconds = time.perf_counter() - began
    lists = candidates(ref, k)
    chosen = json.load(open(out, encoding="utf-8"))["comet"]["chosen"]  # the texts: a repeated candidate ties
    return {"seconds": seconds, "hypotheses": n * k, "chosen": [lists[s][i] for s, i in enumerate(chosen)]}


JOBS = {"generate": job_generate, "score": job_score, "comet": job_comet, "bertscore": job_bertscore, "mbr": job_mbr}


def run_job(path: str) -> None:
    """The child: one job (its JSON at ``path``), its result beside it (``.result``)."""
    job = json.load(open(path, encoding="utf-8"))
    sys.path.insert(0, ROOT)
    if job["engine"] == "rerank" or job["what"] in ("generate", "score", "bertscore"):
        from rerank.features.hf_scorer import import_transformers

        import_transformers()  # torchaudio hidden first (it cannot load beside this torch)
    result = JOBS[job["what"]](job)
    with open(path + ".result", "w", encoding="utf-8") as handle:
        json.dump(result, handle)


# -------------------------------------------------------------------------------------- sitting
def _child(python: str, job: Dict[str, Any], work: str, timeout: float = 0) -> Dict[str, Any]:
    """Run ``job`` in a process of its own: its result with the wall seconds and the peak
    resident GB; killed after ``timeout`` seconds (0: never), an error then."""
    import tempfile

    tmp = tempfile.mkdtemp(prefix="job-", dir=os.path.join(work, "tmp"))
    job = {**job, "tmp": tmp}
    path = os.path.join(tmp, "job.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(job, handle)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TOKENIZERS_PARALLELISM"] = "false"
    began = time.perf_counter()
    proc = subprocess.Popen([python, os.path.abspath(__file__), "--job", path], env=env, cwd=ROOT)
    timer = threading.Timer(timeout, proc.kill) if timeout else None
    if timer:
        timer.start()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - began
    if timer:
        timer.cancel()
    if timeout and wall >= timeout:
        return {"error": f"over {timeout:.0f} s (--timeout)", "wall": round(wall, 2)}
    if status != 0 or not os.path.exists(path + ".result"):
        return {"error": f"exit status {os.waitstatus_to_exitcode(status)}", "wall": round(wall, 2)}
    result = json.load(open(path + ".result", encoding="utf-8"))
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    return {**result, "wall": round(wall, 2), "peak_gb": round(usage.ru_maxrss / 1024**2, 3)}


def sitting(args) -> None:
    work = args.work
    os.makedirs(os.path.join(work, "runs"), exist_ok=True)
    os.makedirs(os.path.join(work, "tmp"), exist_ok=True)
    models = args.models or os.path.join(work, "models")
    # built in a process of its own, never in this one: on Linux a child's peak resident memory
    # (wait4's ru_maxrss) starts at its parent's resident memory when it was forked, so a sitting
    # that had built NLLB-600M itself gave every run its 4.7 GB as a floor
    subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--build-only", "--models", os.path.abspath(models)],
        check=True,
        cwd=ROOT,
    )
    cases = args.cases.split(",") if args.cases else list(CASES)
    for case in cases:
        if case not in CASES:
            sys.exit(f"real_sizes: error: unknown case {case!r} (--list)")
    pythons = {"rerank": sys.executable}
    for case in cases:
        what, model, family, settings = CASES[case]
        peer = args.peer_python if what in PEER_VENV else sys.executable
        sizes = SIZES[family][:1] if args.quick else SIZES[family]
        if args.size:  # a smoke test of every path: N × K of your own
            sizes = [tuple(int(x) for x in args.size.lower().split("x"))]
        for n, k in sizes:
            for r in range(1, args.runs + 1):
                engines = ["rerank", "peer"] if r % 2 else ["peer", "rerank"]  # alternated
                for engine in engines:
                    record_path = os.path.join(work, "runs", f"{case}-{n}x{k}-{engine}-r{r}.json")
                    if os.path.exists(record_path) and not args.again:
                        continue
                    python = pythons["rerank"] if engine == "rerank" else peer
                    job = {
                        "case": case,
                        "what": what,
                        "model": model,
                        "settings": settings,
                        "engine": engine,
                        "sentences": n,
                        "candidates": k,
                        "run": r,
                        "models": os.path.abspath(models),
                    }
                    if not os.path.exists(python):
                        result: Dict[str, Any] = {"error": f"no peer python {python} (see --help)"}
                    else:
                        print(f"real_sizes: {case} {n}x{k} {engine} run {r}", file=sys.stderr, flush=True)
                        result = _child(python, job, work, args.timeout)
                    record = {**job, **result, "machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M")}
                    record.pop("models")
                    with open(record_path, "w", encoding="utf-8") as handle:
                        json.dump(record, handle)
                    if "error" in result:
                        print(f"real_sizes: {case} {engine}: {result['error']}", file=sys.stderr)
    table(work)


def machine() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cores} cores, {cpu}"


# ---------------------------------------------------------------------------------------- table
def _difference(ours: Dict[str, Any], theirs: Dict[str, Any]) -> str:
    """The largest |score difference|, or the share of the same 1-best / selections."""
    if "scores" in ours and "scores" in theirs:
        return f"{max(abs(a - b) for a, b in zip(ours['scores'], theirs['scores'])):.2e}"
    key = "best" if "best" in ours else "chosen"
    if key in ours and key in theirs:
        same = sum(a == b for a, b in zip(ours[key], theirs[key]))
        return f"{same}/{len(ours[key])} same {'1-best' if key == 'best' else 'picks'}"
    return ""


def table(work: str) -> str:
    """WORK/real_sizes.md and .json from the records made so far."""
    runs = os.path.join(work, "runs")
    records = [json.load(open(os.path.join(runs, f), encoding="utf-8")) for f in sorted(os.listdir(runs))]
    rows, out = [], []
    groups: Dict[Tuple[str, int, int], Dict[str, List[Dict[str, Any]]]] = {}
    for rec in records:
        groups.setdefault((rec["case"], rec["sentences"], rec["candidates"]), {}).setdefault(rec["engine"], []).append(
            rec
        )
    order = list(CASES)
    for (case, n, k), engines in sorted(
        groups.items(), key=lambda g: (order.index(g[0][0]) if g[0][0] in order else 99, g[0][1] * g[0][2])
    ):
        row: Dict[str, Any] = {"case": case, "sentences": n, "candidates": k}
        for engine in ("rerank", "peer"):
            good = [r for r in engines.get(engine, []) if "error" not in r]
            if good:
                secs = sorted(r["seconds"] for r in good)
                row[engine] = {
                    "runs": len(good),
                    "min": round(secs[0], 2),
                    "median": round(statistics.median(secs), 2),
                    "per_second": round(good[0]["hypotheses"] / statistics.median(secs), 1),
                    "peak_gb": round(max(r["peak_gb"] for r in good), 2),
                }
            elif engines.get(engine):
                row[engine] = {"error": engines[engine][0]["error"]}
        if "median" in row.get("rerank", {}) and "median" in row.get("peer", {}):
            row["ratio"] = round(row["rerank"]["median"] / row["peer"]["median"], 3)
            ours = next(r for r in engines["rerank"] if "error" not in r)
            theirs = next(r for r in engines["peer"] if "error" not in r)
            row["difference"] = _difference(ours, theirs)
        rows.append(row)

    def cell(row, engine, key):
        value = row.get(engine, {})
        return value.get("error", "–") if key == "median" and "error" in value else value.get(key, "–")

    where = next((r["machine"] for r in records if "machine" in r), machine())
    out.append(f"Measured on {where}; seconds: the work with the model's loading, min / median of the runs.\n")
    out.append(
        "| case | N × K | rerank s (min / med) | peer s (min / med) | rerank/peer | hyp/s rerank | "
        "peak GB rerank / peer | difference |"
    )
    out.append("|---|---|---|---|---|---|---|---|")
    for row in rows:
        ours, theirs = row.get("rerank", {}), row.get("peer", {})
        out.append(
            f"| {row['case']} | {row['sentences']} × {row['candidates']} | "
            f"{ours.get('min', '–')} / {cell(row, 'rerank', 'median')} | {theirs.get('min', '–')} / "
            f"{cell(row, 'peer', 'median')} | {row.get('ratio', '–')} | {ours.get('per_second', '–')} | "
            f"{ours.get('peak_gb', '–')} / {theirs.get('peak_gb', '–')} | {row.get('difference', '')} |"
        )
    out.append("\nWhat it costs with rerank, per 1,000 sentences (the median run's seconds scaled linearly):\n")
    out.append(
        "| case | candidates K | measured on N sentences | rerank s per 1,000 sentences | peak GB | peer s per 1,000 sentences |"
    )
    out.append("|---|---|---|---|---|---|")
    for row in rows:
        ours, theirs = row.get("rerank", {}), row.get("peer", {})
        if "median" in ours:
            scale = 1000 / row["sentences"]
            row["rerank"]["per_1000_sentences"] = round(ours["median"] * scale)
            peer = round(theirs["median"] * scale) if "median" in theirs else "–"
            out.append(
                f"| {row['case']} | {row['candidates']} | {row['sentences']} | {round(ours['median'] * scale):,} | "
                f"{ours['peak_gb']} | "
                f"{peer if isinstance(peer, str) else f'{peer:,}'} |"
            )
    text = "\n".join(out) + "\n"
    with open(os.path.join(work, "real_sizes.md"), "w", encoding="utf-8") as handle:
        handle.write(text)
    with open(os.path.join(work, "real_sizes.json"), "w", encoding="utf-8") as handle:
        json.dump({"machine": machine(), "rows": rows}, handle, indent=1)
    print(text)
    return text


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--work", default=os.path.join("out", "real-sizes"), help="models, records, tables (default: out/real-sizes)"
    )
    parser.add_argument("--models", default="", help="where the models are built (default: WORK/models)")
    parser.add_argument("--quick", action="store_true", help="the smaller size of each case, one run each")
    parser.add_argument("--cases", default="", help="comma-separated cases (default: all; --list)")
    parser.add_argument("--runs", type=int, default=2, help="runs per engine, alternated (default 2; --quick 1)")
    parser.add_argument("--size", default="", help="every case at this N×K instead, e.g. 2x4 (a smoke test)")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds a run may take before it is stopped (default 1800)"
    )
    parser.add_argument("--again", action="store_true", help="run cases already recorded again")
    parser.add_argument(
        "--peer-python",
        default=os.path.join(ROOT, ".venv-peers", "bin", "python"),
        help="the python of unbabel-comet and mbrs (default: .venv-peers/bin/python)",
    )
    parser.add_argument("--build-only", action="store_true", help="build the models, nothing else")
    parser.add_argument("--table", action="store_true", help="the table of the records so far, nothing run")
    parser.add_argument("--list", action="store_true", help="the cases and their sizes")
    parser.add_argument("--job", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.job:
        run_job(args.job)
    elif args.list:
        for case, (what, model, family, settings) in CASES.items():
            print(f"{case}: {what} with {model} {settings or ''} at {SIZES[family]} (sentences, candidates)")
    elif args.table:
        table(args.work)
    elif args.build_only:
        print(json.dumps(build(args.models or os.path.join(args.work, "models")), indent=1))
    else:
        if args.quick and args.runs == 2:
            args.runs = 1
        sitting(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
