"""The one place the embedding layer loads torch: :mod:`rerank.embed.model` and
:mod:`rerank.embed.train` import torch at module level and are reached only through these
functions, on first use (the command line and the scorers import this module freely)."""

from __future__ import annotations

import importlib
from types import ModuleType


def train_module() -> ModuleType:
    """:mod:`rerank.embed.train` (imports torch)."""
    return importlib.import_module("rerank.embed.train")


def cnn_module() -> ModuleType:
    """:mod:`rerank.embed.cnn` (torch, torchvision / EfficientNet-Lite and pillow when a backbone is built)."""
    return importlib.import_module("rerank.embed.cnn")


def train_embeddings(*args, **kwargs):
    """:func:`rerank.embed.train.train_embeddings`."""
    return train_module().train_embeddings(*args, **kwargs)


def load_model(model_dir: str):
    """:func:`rerank.embed.saved.load_model`: (model in eval mode, {lang: Vocabulary})."""
    return importlib.import_module("rerank.embed.saved").load_model(model_dir)


def encode_sentences(*args, **kwargs):
    """:func:`rerank.embed.train.encode_sentences`: float32 (N, D) unit vectors."""
    return train_module().encode_sentences(*args, **kwargs)


def encode_images(*args, **kwargs):
    """:func:`rerank.embed.train.encode_images`: float32 (I, D) unit vectors."""
    return train_module().encode_images(*args, **kwargs)


def word_vectors(*args, **kwargs):
    """:func:`rerank.embed.train.word_vectors`: ``LANG_word`` -> float32 (D,)."""
    return train_module().word_vectors(*args, **kwargs)
