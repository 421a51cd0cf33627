"""Tiny COMET-family checkpoints built locally (no hub), for tests/core/test_comet.py and
scripts/comet_peer.py: a random 2-layer XLM-R encoder (hidden 32) with an XLM-R tokenizer over a
SentencePiece model trained on 1,000 Multi30k lines per language, and checkpoint directories in
unbabel-comet 2.x's layout — ``checkpoints/model.ckpt`` (``state_dict`` + ``hyper_parameters``,
plain tensors and Python values) and ``hparams.yaml`` — whose ``pretrained_model`` is the
encoder's directory.  Weights are seeded; :func:`weights_digest` names them, so that a number
saved by the peer is compared only with the very same weights."""

import hashlib
import os

from tests.tiny_models import train_sentencepiece

#: the checkpoints of the tests: name -> (class_identifier, settings); each class and the
#: layer-mix variants COMET uses (sparsemax without layer norm as wmt22-comet-da, softmax
#: with per-sentence layer norm, one fixed layer, max pooling)
CHECKPOINTS = {
    "da": ("regression_metric", {"layer_transformation": "sparsemax", "layer_norm": False, "pool": "avg"}),
    "da-norm": ("regression_metric", {"layer_transformation": "softmax", "layer_norm": True, "pool": "avg"}),
    "da-layer1-max": ("regression_metric", {"layer": 1, "pool": "max", "final_activation": "Sigmoid"}),
    # sparsemax weighs the top layer 0 (0.75, 0.25, 0): rerank drops that layer, comet runs it
    "da-sparse": ("regression_metric", {"layer_transformation": "sparsemax", "scalars": [1.0, 0.5, -1.0]}),
    "qe": ("referenceless_regression_metric", {"layer_transformation": "sparsemax", "layer_norm": False}),
    "kiwi": ("unified_metric", {"input_segments": ["mt", "src"], "layer_transformation": "sparsemax"}),
    "unite": ("unified_metric", {"input_segments": ["mt", "src", "ref"], "layer_transformation": "softmax"}),
    # xCOMET: the unified passes plus MQM from error spans tagged on layer 1
    "xcomet": ("xcomet_metric", {"layer_transformation": "sparsemax", "word_layer": 1}),
}

#: sentences scored by the equality test (English sources, German hypotheses and references)
SOURCES = ["a man is riding a bike .", "two dogs play in the snow .", "a woman in a red dress .", "people ."]
HYPOTHESES = ["ein mann fährt fahrrad .", "zwei hunde spielen im schnee .", "eine frau .", "leute leute leute ."]
#: one list of candidates for the MBR rows (its source is SOURCES[0])
MBR_LIST = ["ein mann fährt fahrrad .", "ein mann fährt ein fahrrad .", "ein mann .", "mann fahrrad fährt .", "ein"]
REFERENCES = ["ein mann fährt ein fahrrad .", "zwei hunde spielen im schnee .", "eine frau in rot .", "menschen ."]


#: the tiny encoder's sizes and special ids (XLM-R's; an XLM-R XL of the same sizes in
#: tests/core/test_comet_layers.py)
TINY_ENCODER = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=130,
    type_vocab_size=1,
    pad_token_id=1,
    bos_token_id=0,
    eos_token_id=2,
)


def build_encoder(directory: str) -> str:
    """``directory/encoder``: a random XLM-R (2 layers, hidden 32, 128 positions) and its
    tokenizer (tokenizer.json: XLM-R's ids <s>=0 <pad>=1 </s>=2 <unk>=3, then the pieces)."""
    import sentencepiece as spm
    import torch
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    out = os.path.join(directory, "encoder")
    if os.path.isdir(out):
        return out
    os.makedirs(directory, exist_ok=True)
    sp = spm.SentencePieceProcessor(model_file=train_sentencepiece(directory, "xlmr-sp"))
    vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)]
    vocab += [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(3, sp.get_piece_size())]
    vocab.append(("<mask>", 0.0))
    tokenizer = XLMRobertaTokenizer(vocab=vocab)
    tokenizer.model_max_length = 128
    config = XLMRobertaConfig(vocab_size=len(vocab), **TINY_ENCODER)
    torch.manual_seed(0)
    XLMRobertaModel(config, add_pooling_layer=False).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_checkpoint(directory: str, name: str, seed: int = 1) -> str:
    """``directory/NAME``: the COMET checkpoint ``CHECKPOINTS[name]`` over the tiny encoder
    (its weights re-drawn with ``seed``, the layer weights and estimator random), as
    unbabel-comet writes one."""
    import torch
    import yaml
    from transformers import XLMRobertaConfig, XLMRobertaModel

    kind, settings = CHECKPOINTS[name]
    settings = dict(settings)
    scalars = settings.pop("scalars", None)  # the layer mix's weights, where the test fixes them
    out = os.path.join(directory, name)
    if os.path.isfile(os.path.join(out, "checkpoints", "model.ckpt")):
        return out
    encoder = build_encoder(directory)
    config = XLMRobertaConfig.from_pretrained(encoder)
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = XLMRobertaModel(config, add_pooling_layer=False)
    state = {f"encoder.model.{k}": v.clone() for k, v in model.state_dict().items()}
    layers = config.num_hidden_layers + 1
    if settings.get("layer", "mix") == "mix":
        for i in range(layers):
            drawn = torch.randn(1, generator=generator) * 0.6
            state[f"layerwise_attention.scalar_parameters.{i}"] = torch.tensor([scalars[i]]) if scalars else drawn
        state["layerwise_attention.gamma"] = torch.tensor([1.3])
    width = {"regression_metric": 6, "referenceless_regression_metric": 4}.get(kind, 1) * 32
    if kind == "xcomet_metric":  # the error tagger: O, I-minor, I-major, I-critical (O favoured a little)
        state["hidden2tag.weight"] = torch.randn(4, 32, generator=generator)
        state["hidden2tag.bias"] = torch.tensor([2.0, 0.0, 0.0, 0.0])
    sizes = [width, 16, 8, 1]
    for k in range(3):
        state[f"estimator.ff.{3 * k}.weight"] = torch.randn(sizes[k + 1], sizes[k], generator=generator) * 0.4
        state[f"estimator.ff.{3 * k}.bias"] = torch.randn(sizes[k + 1], generator=generator) * 0.1
    hparams = {
        "nr_frozen_epochs": 0.3,
        "keep_embeddings_frozen": True,
        "optimizer": "AdamW",
        "encoder_model": "XLM-RoBERTa",
        "pretrained_model": os.path.abspath(encoder),
        "layer_transformation": "softmax",
        "layer_norm": False,
        "loss": "mse",
        "dropout": 0.1,
        "batch_size": 4,
        "hidden_sizes": [16, 8],
        "activations": "Tanh",
        "final_activation": None,
        "class_identifier": kind,
    }
    if kind in ("unified_metric", "xcomet_metric"):
        word_level = kind == "xcomet_metric"
        hparams.update({"sent_layer": "mix", "word_layer": 1, "word_level_training": word_level})
    else:
        hparams.update({"pool": "avg", "layer": "mix"})
    hparams.update(settings)
    if kind in ("unified_metric", "xcomet_metric") and "layer" in settings:
        hparams["sent_layer"] = hparams.pop("layer")
    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    stored = {k: v for k, v in hparams.items() if k != "class_identifier"}
    checkpoint = {"state_dict": state, "hyper_parameters": stored, "pytorch-lightning_version": "2.5.0", "epoch": 0}
    torch.save(checkpoint, os.path.join(out, "checkpoints", "model.ckpt"))
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(hparams, handle, sort_keys=True)
    return out


def weights_digest(checkpoint_dir: str) -> str:
    """SHA-256 (16 hex digits) of the checkpoint's tensors in key order and the encoder's
    tokenizer.json: equal digests, equal models."""
    import torch

    state = torch.load(os.path.join(checkpoint_dir, "checkpoints", "model.ckpt"), weights_only=True)["state_dict"]
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode() + state[key].float().numpy().tobytes())
    with open(os.path.join(os.path.dirname(checkpoint_dir), "encoder", "tokenizer.json"), "rb") as handle:
        digest.update(handle.read())
    return digest.hexdigest()[:16]
