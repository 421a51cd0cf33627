"""What a COMET checkpoint may hold before :class:`rerank.metrics.comet_model.CometModel`
builds anything from it: ``hparams.yaml`` read without aliases and size-capped, every
hyper-parameter rerank reads checked by type and allowed value, every tensor a tensor, the
estimator's and tagger's shapes chained from the encoder's hidden size, the encoder of the
kind ``encoder_model`` names.  A crafted or damaged checkpoint is refused in one line naming
the file (values echoed at most :data:`ECHO` characters), never a traceback.

The allowed values follow unbabel-comet 2.2.7: activations are built as
``getattr(torch.nn, name.title())()`` (``comet/modules/feedforward.py``), so only the
argument-free activations whose ``title()`` spelling torch.nn has (:data:`ACTIVATIONS`).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

from rerank.errors import InputError

#: the longest piece of a checkpoint's value echoed in a message
ECHO = 60
#: the largest hparams.yaml read (unbabel-comet's are about 1 KB)
MAX_HPARAMS_BYTES = 1 << 20
#: torch.nn activations, by the ``title()`` spelling COMET builds them with, that take no argument
ACTIVATIONS = (
    "Tanh",
    "Sigmoid",
    "Softplus",
    "Softsign",
    "Tanhshrink",
    "Softshrink",
    "Hardshrink",
    "Hardtanh",
    "Hardswish",
    "Hardsigmoid",
    "Mish",
    "Identity",
)
#: transformers' ``model_type`` of each ``encoder_model`` rerank runs
ENCODER_TYPES = {
    "XLM-RoBERTa": "xlm-roberta",
    "XLM-RoBERTa-XL": "xlm-roberta-xl",
    "BERT": "bert",
    "MiniLM": "bert",
    "RemBERT": "rembert",
}
#: the estimator's input width per kind, in encoder hidden sizes (unbabel-comet's feature sets)
ESTIMATOR_INPUTS = {
    "regression_metric": 6,
    "referenceless_regression_metric": 4,
    "unified_metric": 1,
    "xcomet_metric": 1,
}


def shown(value: Any) -> str:
    """``repr(value)`` cut at :data:`ECHO` characters (a YAML alias bomb is not printed whole)."""
    text = repr(value)
    return text if len(text) <= ECHO else text[:ECHO] + "…"


def checkpoint_files(directory: str) -> Tuple[str, str]:
    """(checkpoint, hparams.yaml) of a COMET checkpoint directory, unbabel-comet 2.x's layout:
    ``DIR/checkpoints/model.ckpt`` and ``DIR/hparams.yaml``; ``directory`` may also be the
    ``.ckpt`` file itself (its directory two levels up holds ``hparams.yaml``).

    Raises:
        InputError: naming ``directory``, when either file is missing.
    """
    given = directory
    if os.path.isfile(directory):  # the .ckpt file itself
        checkpoint = directory
        directory = os.path.dirname(os.path.dirname(os.path.abspath(directory)))
    else:
        checkpoint = os.path.join(directory, "checkpoints", "model.ckpt")
    if not os.path.isfile(checkpoint):
        raise InputError("comet: no checkpoints/model.ckpt: not a COMET checkpoint directory", given)
    hparams = os.path.join(directory, "hparams.yaml")
    if not os.path.isfile(hparams):
        where = "" if given == directory else f" (looked for {hparams}: DIR/checkpoints/model.ckpt's DIR)"
        raise InputError(f"comet: no hparams.yaml beside checkpoints/: not a COMET checkpoint directory{where}", given)
    return checkpoint, hparams


def read_hparams(path: str) -> Dict[str, Any]:
    """``hparams.yaml`` as a dict, read with ``yaml.safe_load`` after refusing what no
    unbabel-comet file holds: more than :data:`MAX_HPARAMS_BYTES`, YAML aliases (``*name``:
    the way to a billion-laughs expansion), a top level that is not a mapping.

    Raises:
        InputError: naming ``path``.
    """
    import yaml

    try:
        if os.path.getsize(path) > MAX_HPARAMS_BYTES:
            raise InputError(f"comet: hparams.yaml is over {MAX_HPARAMS_BYTES >> 20} MB: not COMET's", path)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if any(isinstance(token, yaml.AliasToken) for token in yaml.scan(text)):
            raise InputError("comet: hparams.yaml uses YAML aliases (*name), which no COMET file does: refused", path)
        hparams = yaml.safe_load(text) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as error:
        raise InputError(f"comet: unreadable hparams.yaml: {' '.join(str(error).split())[:120]}", path) from None
    if not isinstance(hparams, dict):
        raise InputError(f"comet: hparams.yaml is not a mapping of settings ({shown(hparams)})", path)
    return hparams


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_hparams(hparams: Dict[str, Any], path: str) -> None:
    """Every hyper-parameter rerank reads, by type and allowed value (absent ones take
    unbabel-comet's defaults later).

    Raises:
        InputError: the first wrong one, naming it and ``path``.
    """

    def refuse(key: str, wanted: str) -> None:
        raise InputError(f"comet: hparams {key}: {shown(hparams[key])} is not {wanted}", path)

    for key in ("class_identifier", "encoder_model", "pretrained_model"):
        if key in hparams and not isinstance(hparams[key], str):
            refuse(key, "a string")
    for key in ("layer", "sent_layer"):
        if key in hparams and hparams[key] != "mix" and not (_is_int(hparams[key]) and hparams[key] >= 0):
            refuse(key, "mix or a layer number")
    if "word_layer" in hparams and not (_is_int(hparams["word_layer"]) and hparams["word_layer"] >= 0):
        refuse("word_layer", "a layer number")
    if "layer_norm" in hparams and not isinstance(hparams["layer_norm"], bool):
        refuse("layer_norm", "true or false")
    if hparams.get("layer_transformation", "softmax") not in ("softmax", "sparsemax"):
        refuse("layer_transformation", "softmax or sparsemax")
    if hparams.get("pool", "avg") not in ("avg", "max", "cls", "default"):
        refuse("pool", "avg, max, cls or default")
    for key in ("activations", "final_activation"):
        value = hparams.get(key)
        if value in (None, "") and key == "final_activation":
            continue
        if key in hparams and not (isinstance(value, str) and value.title() in ACTIVATIONS):
            refuse(key, f"an activation COMET builds ({', '.join(ACTIVATIONS)})")
    segments = hparams.get("input_segments", ["mt", "src", "ref"])
    if not (isinstance(segments, list) and segments and all(s in ("mt", "src", "ref") for s in segments)):
        refuse("input_segments", "a list of mt, src and ref")
    labels = hparams.get("error_labels", ["minor", "major", "critical"])
    if not (isinstance(labels, list) and all(isinstance(label, str) for label in labels)):
        refuse("error_labels", "a list of names")


def check_tensors(weights: Dict[Any, Any], checkpoint: str) -> None:
    """Every entry of the state dict a named tensor.

    Raises:
        InputError: the first key that is not a string or value that is not a tensor.
    """
    import torch

    for key, value in weights.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise InputError(
                f"comet: state_dict entry {shown(key)} is not a named tensor ({type(value).__name__})", checkpoint
            )


def check_encoder_type(config: Any, encoder_model: str, source: str) -> None:
    """The encoder directory's ``model_type`` is the kind ``encoder_model`` names.

    Raises:
        InputError: another kind (a BERT directory for an XLM-R checkpoint), naming ``source``.
    """
    wanted = ENCODER_TYPES[encoder_model]
    found = getattr(config, "model_type", None)
    if found != wanted:
        raise InputError(
            f"comet: the encoder is a {shown(found)} model, the checkpoint's encoder_model {wanted}", source
        )


def check_estimator(linear: List[Any], biases: List[Any], kind: str, hidden: int, checkpoint: str) -> None:
    """The estimator's Linear layers (weights float[out, in], biases float[out]) chain:
    the first takes ``ESTIMATOR_INPUTS[kind] × hidden`` features, each the previous one's
    outputs, the last gives one score.

    Raises:
        InputError: a missing bias or a shape that breaks the chain, naming the layer.
    """
    width = ESTIMATOR_INPUTS[kind] * hidden
    for position, (weight, bias) in enumerate(zip(linear, biases)):
        name = f"estimator layer {position}"
        if bias is None:
            raise InputError(f"comet: {name} has no bias", checkpoint)
        if weight.dim() != 2 or weight.shape[1] != width or tuple(bias.shape) != (weight.shape[0],):
            raise InputError(
                f"comet: {name} has weights {tuple(weight.shape)} and bias {tuple(bias.shape)}; "
                f"expected (N, {width}) and (N,) after a width of {width}",
                checkpoint,
            )
        width = int(weight.shape[0])
    if width != 1:
        raise InputError(f"comet: the estimator ends in {width} outputs, not one score", checkpoint)


def check_scalar(tensor: Any, name: str, checkpoint: str) -> None:
    """``tensor`` holds one number (a layer-mix weight, its gamma).

    Raises:
        InputError: naming the weight."""
    if tensor.numel() != 1:
        raise InputError(f"comet: {name} has shape {tuple(tensor.shape)}, not one number", checkpoint)
