"""Training of MLMME / VSE embeddings (Adam, in-batch contrastive terms, model selection
on a validation split) and batched sentence / image encoding.

Model selection: with validation images, the sum of the six image–sentence ranking
recalls (r@1/5/10, both directions, first language); without them, the same sum for
sentence–sentence ranking between the first two languages; with one language and no
images, the validation loss.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch

from features.data import Vocabulary, batch_tokens
from features.evaluation import image_sentence_ranking
from features.mlmme import MLMME, MLMMEConfig
from rerank.errors import atomic_write
from rerank.signature import signature


@dataclass
class EmbedData:
    """Sentences of several languages describing images.

    Attributes:
        sentences: lang -> N sentences (preprocessed text); row i of every language is example i.
        image_of: int64[N] image index of each example.
        image_features: float32 (I, D) CNN features, or None.
        has_image: bool (I,): images with real features (R_MM only uses these).
    """

    sentences: Dict[str, List[str]]
    image_of: np.ndarray
    image_features: Optional[np.ndarray] = None
    has_image: Optional[np.ndarray] = None


@dataclass
class EmbedTrainConfig:
    """Training settings (serialised into ``config.json`` beside the model)."""

    model: MLMMEConfig = field(default_factory=MLMMEConfig)
    epochs: int = 10
    batch_size: int = 128
    lr: float = 2e-4
    grad_clip: float = 2.0
    min_count: int = 2
    patience: int = 3
    seed: int = 1


def encode_sentences(model: MLMME, vocab: Vocabulary, lang: str, sentences: List[str],
                     batch_size: int = 512) -> np.ndarray:
    """float32 (N, D) unit vectors, in the order of ``sentences``; each distinct sentence
    is encoded once, in length-sorted batches, under ``torch.no_grad()``."""
    unique = list(dict.fromkeys(sentences))
    order = sorted(range(len(unique)), key=lambda i: len(unique[i].split()))
    out = np.zeros((len(unique), model.config.embed_dim), dtype=np.float32)
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            tokens, lengths = batch_tokens(vocab, [unique[i] for i in rows])
            out[rows] = model.encode_text(lang, torch.from_numpy(tokens), torch.from_numpy(lengths)).numpy()
    model.train(was_training)
    index = {s: i for i, s in enumerate(unique)}
    return out[[index[s] for s in sentences]]


def encode_images(model: MLMME, features: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """float32 (I, D) unit image vectors d = W_I q."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = np.concatenate([model.encode_image(torch.from_numpy(np.asarray(features[s:s + batch_size],
                                                                              dtype=np.float32))).numpy()
                              for s in range(0, len(features), batch_size)]) if len(features) else \
            np.zeros((0, model.config.embed_dim), dtype=np.float32)
    model.train(was_training)
    return out


def validation_score(model: MLMME, vocabs: Dict[str, Vocabulary], data: EmbedData) -> Dict[str, float]:
    """Sum of recalls used for model selection (module docstring) and its parts."""
    langs = model.config.langs
    if data.image_features is not None and data.has_image is not None and data.has_image.any():
        keep = data.has_image[data.image_of]
        images = np.flatnonzero(data.has_image)
        remap = np.full(len(data.has_image), -1)
        remap[images] = np.arange(len(images))
        sents = encode_sentences(model, vocabs[langs[0]], langs[0],
                                 [s for s, k in zip(data.sentences[langs[0]], keep) if k])
        result = image_sentence_ranking(encode_images(model, data.image_features[images]), sents,
                                        remap[data.image_of[keep]])
    elif len(langs) > 1:
        a = encode_sentences(model, vocabs[langs[0]], langs[0], data.sentences[langs[0]])
        b = encode_sentences(model, vocabs[langs[1]], langs[1], data.sentences[langs[1]])
        result = image_sentence_ranking(a, b, np.arange(len(a)))
    else:
        return {"rsum": 0.0}
    rsum = sum(v for direction in result.values() for k, v in direction.items() if k.startswith("r@"))
    return {"rsum": rsum, **{f"{d}/{k}": v for d, r in result.items() for k, v in r.items()}}


def train_embeddings(train: EmbedData, valid: EmbedData, config: EmbedTrainConfig,
                     out_dir: Optional[str] = None, progress: bool = False):
    """Train an MLMME model; returns (model with the best validation weights, vocabularies,
    per-epoch history).  With ``out_dir``, writes ``model.pt``, ``vocab.{lang}.json`` and
    ``config.json`` (settings, history, signature)."""
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    mc = config.model
    vocabs = {lang: Vocabulary.build(train.sentences[lang], config.min_count) for lang in mc.langs}
    if train.image_features is not None:
        mc.image_dim = int(train.image_features.shape[1])
    model = MLMME({lang: len(v) for lang, v in vocabs.items()}, mc)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    n = len(train.image_of)
    feats = torch.from_numpy(train.image_features) if train.image_features is not None else None
    has_image = torch.from_numpy(train.has_image) if train.has_image is not None else None
    history, best, best_state, bad = [], -np.inf, None, 0
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = rng.permutation(n)
        batches = range(0, n, config.batch_size)
        if progress:
            from tqdm import tqdm

            batches = tqdm(batches, desc=f"epoch {epoch}", unit="batch", mininterval=2)
        total = 0.0
        for start in batches:
            rows = order[start:start + config.batch_size]
            vectors = {}
            for lang in mc.langs:
                tokens, lengths = batch_tokens(vocabs[lang], [train.sentences[lang][i] for i in rows])
                vectors[lang] = model.encode_text(lang, torch.from_numpy(tokens), torch.from_numpy(lengths))
            images = mask = None
            if feats is not None and mc.beta > 0:
                img_rows = torch.from_numpy(train.image_of[rows])
                mask = has_image[img_rows]
                if mask.any():
                    images = model.encode_image(feats[img_rows])
            loss = model.loss(vectors, images, mask)["loss"]
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
            optimiser.step()
            total += loss.item()
        score = validation_score(model, vocabs, valid)
        history.append({"epoch": epoch, "train_loss": total / max(1, len(range(0, n, config.batch_size))), **score})
        if score["rsum"] > best:
            best, bad = score["rsum"], 0
            best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        else:
            bad += 1
            if bad >= config.patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    if out_dir is not None:
        os.makedirs(out_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(out_dir, "model.pt.tmp"))
        os.replace(os.path.join(out_dir, "model.pt.tmp"), os.path.join(out_dir, "model.pt"))
        for lang, vocab in vocabs.items():
            vocab.save(os.path.join(out_dir, f"vocab.{lang}.json"))
        with atomic_write(os.path.join(out_dir, "config.json")) as out:
            json.dump({"config": asdict(config), "history": history,
                       "signature": signature(["torch", "numpy", "sacremoses"])}, out, indent=2)
    return model, vocabs, history
