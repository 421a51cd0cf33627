"""What a training of :mod:`rerank.embed.train` leaves on disk and reads back: the checkpoint
of an unfinished run (:func:`save_checkpoint`, :func:`resume`: the model, optimiser and random
states after the last finished epoch, refused for other settings) and the finished model
directory (:func:`save_model`, :func:`load_model`: ``model.pt``, ``vocab.LANG.json``, the
signed ``config.json``), every file written atomically."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import Any, Dict

import torch

from rerank.embed.config import MLMMEConfig
from rerank.embed.data import Vocabulary
from rerank.embed.model import MLMME
from rerank.errors import InputError
from rerank.nmt.checkpoints import UntrustedCheckpoint, load_state
from rerank.outputs import atomic_write
from rerank.signature import write_signed

#: the state after the last finished epoch of a training that has not ended (in its --out)
CHECKPOINT = "checkpoint.pt"


def resume(checkpoint: str, settings: Dict, model, optimiser, rng, device) -> Dict:
    """Restore the model, optimiser and random states of a killed run's ``checkpoint``; returns
    the checkpoint (``epoch``, ``step``, ``history``, ``best``, ``best_state``, ``bad``).

    Raises:
        InputError: not a checkpoint of ours, or one of other ``settings``.
    """
    try:
        saved = load_state(checkpoint)
        recorded = saved["settings"]
    except UntrustedCheckpoint:
        raise
    except Exception as error:  # not a checkpoint of ours (truncated, another file)
        raise InputError(f"is not a training checkpoint ({type(error).__name__}); remove it", checkpoint) from None
    if recorded != settings:
        raise InputError(
            "holds an unfinished training of other settings (remove it, or give those settings or another --out)",
            checkpoint,
        )
    model.load_state_dict(saved["model"])
    optimiser.load_state_dict(saved["optimiser"])
    rng.bit_generator.state = saved["numpy_rng"]
    torch.set_rng_state(saved["torch_rng"])
    if saved["cuda_rng"] is not None and device.type == "cuda":
        torch.cuda.set_rng_state(saved["cuda_rng"], device)
    return saved


def save_checkpoint(checkpoint: str, settings: Dict, weights, best_state, optimiser, rng, device, state: Dict) -> None:
    """Write ``checkpoint`` atomically: the settings, ``weights`` (on the CPU), the optimiser's
    and the random generators' states and ``state`` (``epoch``, ``step``, ``history``, ``best``,
    ``bad``), what :func:`resume` restores."""
    os.makedirs(os.path.dirname(checkpoint) or ".", exist_ok=True)
    record = {
        "settings": settings,
        "epoch": state["epoch"],
        "step": state["step"],
        "model": weights,
        "optimiser": optimiser.state_dict(),
        "numpy_rng": rng.bit_generator.state,
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "history": state["history"],
        "best": state["best"],
        "best_state": best_state,
        "bad": state["bad"],
    }
    with atomic_write(checkpoint, "wb") as handle:
        torch.save(record, handle)


def save_model(out_dir: str, model, vocabs: Dict[str, Vocabulary], config: Any, history) -> None:
    """Write ``model.pt``, ``vocab.{lang}.json`` and the signed ``config.json`` to ``out_dir``
    (the weights atomically), and remove the finished run's checkpoint."""
    os.makedirs(out_dir, exist_ok=True)
    with atomic_write(os.path.join(out_dir, "model.pt"), "wb") as handle:
        torch.save(model.state_dict(), handle)
    for lang, vocab in vocabs.items():
        vocab.save(os.path.join(out_dir, f"vocab.{lang}.json"))
    write_signed(
        os.path.join(out_dir, "config.json"),
        {"config": asdict(config), "history": history},
        ["torch", "numpy", "sacremoses"],
    )
    checkpoint = os.path.join(out_dir, CHECKPOINT)
    if os.path.exists(checkpoint):
        os.remove(checkpoint)  # finished: nothing to resume


def load_model(model_dir: str):
    """(MLMME model in eval mode, {lang: Vocabulary}) from a :func:`rerank.embed.train.train_embeddings`
    output directory.  Raises :class:`InputError` for a directory without ``config.json``."""
    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise InputError("not an embedding model directory (no config.json)", model_dir)
    with open(path, encoding="utf-8") as handle:
        config = MLMMEConfig(**json.load(handle)["config"]["model"])
    vocabs = {lang: Vocabulary.load(os.path.join(model_dir, f"vocab.{lang}.json")) for lang in config.langs}
    model = MLMME({lang: len(v) for lang, v in vocabs.items()}, config)
    model.load_state_dict(torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu", weights_only=True))
    model.eval()
    return model, vocabs
