"""Training of MLMME / VSE embeddings (Adam, in-batch contrastive terms, model selection
on a validation split) and batched sentence / image encoding.

Batches: a permutation of the training examples per epoch.  When only a few examples
have an image (here: the 800 test_2016 images among 145,000 text-only examples), every
batch is topped up to ``image_rows`` image-bearing examples drawn from a reshuffled
stream of them, so that R_MM sees more than the ~3 images a uniform batch would hold;
with enough images (the official features) batches stay uniform.  Contrastive terms:
the other rows of the batch (``contrastive='batch'``) or, as in the paper, a separate
random sample of training examples drawn the same way, resampled every epoch
(``contrastive='random'``).

Model selection: with validation images (and β > 0), the sum of the six image–sentence
ranking recalls (r@1/5/10, both directions, first language); without them, or for a
text-only model (β = 0, whose image projection is never trained), the same sum for
sentence–sentence ranking between the first two languages (on the validation data's
descriptions); with one language and no images, the validation loss.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from rerank.devices import DeviceSettings
from rerank.embed.config import OPTIMIZERS, EmbedTrainConfig, MLMMEConfig
from rerank.embed.data import EmbedData, Vocabulary, batch_tokens
from rerank.embed.evaluation import image_sentence_ranking
from rerank.embed.model import MLMME
from rerank.embed.saved import CHECKPOINT, load_model, resume, save_checkpoint, save_model
from rerank.errors import InputError
from rerank.progress import progress_bar as make_progress_bar


#: Adam learning rate of each preset (the paper's 2e-4; 2e-3 for the CPU preset, see MLMMEConfig)
def epoch_batches(has_row: np.ndarray, batch_size: int, image_rows: int, rng: np.random.Generator) -> List[np.ndarray]:
    """Row indices of the batches of one epoch (module docstring).

    Args:
        has_row: bool (N,), True for examples with an image.
        batch_size: rows per batch; image_rows: image-bearing rows guaranteed per batch
            (0: uniform batches).
    Returns:
        list of int64 arrays; every example without an image appears exactly once.
    """
    n = len(has_row)
    with_img, without = np.flatnonzero(has_row), np.flatnonzero(~has_row)
    if (
        image_rows <= 0
        or image_rows >= batch_size
        or not len(with_img)
        or not len(without)
        or len(with_img) * batch_size >= image_rows * n
    ):
        order = rng.permutation(n)
        return [order[s : s + batch_size] for s in range(0, n, batch_size)]
    text = rng.permutation(without)
    k = batch_size - image_rows
    count = -(-len(text) // k)
    stream = np.concatenate([rng.permutation(with_img) for _ in range(-(-count * image_rows // len(with_img)))])
    return [
        np.concatenate([text[t * k : (t + 1) * k], stream[t * image_rows : (t + 1) * image_rows]]) for t in range(count)
    ]


def neighbour_rows(image_of: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """For every row, another row describing the same image, drawn uniformly (MULE's
    neighbourhood constraints); a row whose image has no other description is its own.

    Args:
        image_of: int (N,) the image of each row.
    Returns:
        int64 (N,) row indices.
    """
    image_of = np.asarray(image_of)
    order = np.argsort(image_of, kind="stable")
    sorted_images = image_of[order]
    starts = np.flatnonzero(np.r_[True, sorted_images[1:] != sorted_images[:-1]])
    counts = np.diff(np.r_[starts, len(order)])
    group = np.repeat(np.arange(len(starts)), counts)
    position = np.arange(len(order)) - starts[group]
    size = counts[group]
    step = np.where(size > 1, rng.integers(1, np.maximum(size, 2)), 0)  # 1 .. size-1
    out = np.empty(len(order), dtype=np.int64)
    out[order] = order[starts[group] + (position + step) % size]
    return out


def encode_sentences(
    model: MLMME, vocab: Vocabulary, lang: str, sentences: List[str], batch_size: int = 512, progress: bool = False
) -> np.ndarray:
    """float32 (N, D) unit vectors, in the order of ``sentences``; each distinct sentence
    is encoded once, in length-sorted batches, under ``torch.no_grad()`` (deterministic:
    dropout is off).  ``progress``: a progress bar on stderr (:func:`rerank.progress.progress_bar`)."""
    unique = list(dict.fromkeys(sentences))
    order = sorted(range(len(unique)), key=lambda i: len(unique[i].split()))
    out = np.zeros((len(unique), model.config.embed_dim), dtype=np.float32)
    was_training = model.training
    model.eval()
    starts = range(0, len(order), batch_size)
    if progress:
        starts = make_progress_bar(starts, desc=f"encode {lang}", unit="batch")
    with torch.no_grad():
        for start in starts:
            rows = order[start : start + batch_size]
            tokens, lengths = batch_tokens(vocab, [unique[i] for i in rows])
            out[rows] = (
                model.encode_text(lang, torch.from_numpy(tokens).to(_device(model)), torch.from_numpy(lengths))
                .float()
                .cpu()
                .numpy()
            )
    model.train(was_training)
    index = {s: i for i, s in enumerate(unique)}
    return out[[index[s] for s in sentences]]


def _device(model: MLMME) -> torch.device:
    return next(model.parameters()).device


def encode_images(model: MLMME, features: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """float32 (I, D) unit image vectors d = W_I q."""
    was_training = model.training
    model.eval()
    with torch.no_grad():
        out = (
            np.concatenate(
                [
                    model.encode_image(
                        torch.from_numpy(np.asarray(features[s : s + batch_size], dtype=np.float32)).to(_device(model))
                    )
                    .float()
                    .cpu()
                    .numpy()
                    for s in range(0, len(features), batch_size)
                ]
            )
            if len(features)
            else np.zeros((0, model.config.embed_dim), dtype=np.float32)
        )
    model.train(was_training)
    return out


def validation_score(model: MLMME, vocabs: Dict[str, Vocabulary], data: EmbedData) -> Dict[str, float]:
    """Sum of recalls used for model selection (module docstring) and its parts."""
    langs = model.config.langs
    images_trained = model.config.beta > 0  # a text-only model (β = 0) never trains its image projection
    if images_trained and data.image_features is not None and data.has_image is not None and data.has_image.any():
        keep = data.has_image[data.image_of]
        images = np.flatnonzero(data.has_image)
        remap = np.full(len(data.has_image), -1)
        remap[images] = np.arange(len(images))
        sents = encode_sentences(
            model, vocabs[langs[0]], langs[0], [s for s, k in zip(data.sentences[langs[0]], keep) if k]
        )
        result = image_sentence_ranking(
            encode_images(model, data.image_features[images]),
            sents,
            remap[data.image_of[keep]],
            model.config.similarity,
        )
    elif len(langs) > 1:
        a = encode_sentences(model, vocabs[langs[0]], langs[0], data.sentences[langs[0]])
        b = encode_sentences(model, vocabs[langs[1]], langs[1], data.sentences[langs[1]])
        result = image_sentence_ranking(a, b, np.arange(len(a)))
    else:
        return {"rsum": 0.0}
    rsum = sum(v for direction in result.values() for k, v in direction.items() if k.startswith("r@"))
    return {"rsum": rsum, **{f"{d}/{k}": v for d, r in result.items() for k, v in r.items()}}


class EmbeddingOptimiser:
    """Adam over a model's weights, or lazy Adam (``kind='lazy-adam'``): each word-embedding
    table gives sparse gradients (the rows of the batch's words) to ``torch.optim.SparseAdam``,
    which updates only those rows' moments and weights (TensorFlow's LazyAdam); the other
    weights use ``torch.optim.Adam``.  Gradients are clipped to a global L2 norm (Pascanu et
    al. 2013, as ``torch.nn.utils.clip_grad_norm_``), the sparse ones coalesced first so that a
    word repeated in the batch counts once with its summed gradient.

    Raises:
        InputError: an unknown ``kind``.
    """

    def __init__(self, model: MLMME, kind: str, lr: float, grad_clip: float):
        if kind not in OPTIMIZERS:
            raise InputError(f"unknown optimizer {kind!r}; known: {', '.join(OPTIMIZERS)}")
        self.params = list(model.parameters())
        self.grad_clip = grad_clip
        self.lazy = kind == "lazy-adam"
        tables = [model.encoder(lang).embed for lang in model.encoders] if self.lazy else []
        for table in tables:
            table.sparse = True  # F.embedding then returns the batch's rows as a sparse gradient
        sparse_ids = {id(table.weight) for table in tables}
        dense = [p for p in self.params if id(p) not in sparse_ids]
        self.optimisers: List[torch.optim.Optimizer] = [torch.optim.Adam(dense, lr=lr)]
        if tables:
            self.optimisers.append(torch.optim.SparseAdam([table.weight for table in tables], lr=lr))
        self.tables = tables

    def zero_grad(self) -> None:
        """Drop every weight's gradient (before the next backward pass)."""
        for optimiser in self.optimisers:
            optimiser.zero_grad()

    def step(self) -> None:
        """Clip the gradients' global norm to ``grad_clip``, then update."""
        if not self.lazy:
            torch.nn.utils.clip_grad_norm_(self.params, self.grad_clip)
        else:
            for p in self.params:
                if p.grad is not None and p.grad.is_sparse:
                    p.grad = p.grad.coalesce()
            grads = [p.grad for p in self.params if p.grad is not None]
            squares = [(g.values() if g.is_sparse else g).float().pow(2).sum() for g in grads]
            total = torch.stack(squares).sum().sqrt() if squares else torch.tensor(0.0)
            scale = self.grad_clip / (float(total) + 1e-6)
            if scale < 1:
                for g in grads:
                    g.mul_(scale)
        for optimiser in self.optimisers:
            optimiser.step()

    def state_dict(self) -> List[dict]:
        """The optimisers' states (moments, step counts), Adam's first: for a checkpoint."""
        return [optimiser.state_dict() for optimiser in self.optimisers]

    def load_state_dict(self, states: List[dict]) -> None:
        """Restore :meth:`state_dict`'s states (an optimiser of the same kind over the same model)."""
        for optimiser, state in zip(self.optimisers, states):
            optimiser.load_state_dict(state)

    def close(self) -> None:
        """Give the embedding tables back their dense gradients (the model as it was built)."""
        for table in self.tables:
            table.sparse = False


class _BatchEncoder:
    """The sentences (and images) of a batch's rows encoded by the model: ``{"sentences":
    {lang: [B, D]}, "images": [B', D] or None, "has_image", "image_ids", "tokens"}``."""

    def __init__(self, model, vocabs, train: EmbedData, langs, device, feats, has_image, image_of):
        self.model, self.vocabs, self.train, self.langs, self.device = model, vocabs, train, langs, device
        self.feats, self.has_image, self.image_of = feats, has_image, image_of

    def __call__(self, rows: np.ndarray) -> Dict:
        out: Dict[str, Any] = {
            "sentences": {},
            "images": None,
            "has_image": None,
            "image_ids": self.image_of[rows],
            "tokens": {},
        }
        for lang in self.langs:
            tokens, lengths = batch_tokens(self.vocabs[lang], [self.train.sentences[lang][i] for i in rows])
            out["tokens"][lang] = torch.from_numpy(tokens).to(self.device)
            out["sentences"][lang] = self.model.encode_text(lang, out["tokens"][lang], torch.from_numpy(lengths))
        if self.feats is not None:
            out["has_image"] = self.has_image[rows]
            if out["has_image"].any():
                out["images"] = self.model.encode_image(self.feats[self.image_of[rows]])
        return out


def _resume_settings(config: EmbedTrainConfig, train: EmbedData, vocabs: Dict[str, Vocabulary]) -> Dict:
    """What a resumed run must share with the killed one: the settings but where the work
    runs (device, threads) and for how long (max_minutes), and the data's size and vocabularies."""
    settings = {k: v for k, v in asdict(config).items() if k not in ("device", "threads", "max_minutes")}
    data = {"examples": len(train.image_of), "vocabulary": {lang: len(v) for lang, v in vocabs.items()}}
    return {"config": settings, "data": data}


def train_embeddings(
    train: EmbedData, valid: EmbedData, config: EmbedTrainConfig, out_dir: Optional[str] = None, progress: bool = False
):
    """Train an MLMME model; returns (model with the best validation weights, vocabularies,
    per-epoch history).  ``config.init_model`` starts from a trained model (its vocabularies
    and sizes, and every weight whose name and shape match: e.g. a VSE or β > 0 model
    fine-tuned from the text-only model); ``config.max_steps`` caps the batches and
    ``config.max_minutes`` the wall time (counted from this call, a resumed run's included).  With
    ``out_dir``, writes ``model.pt``, ``vocab.{lang}.json`` and ``config.json`` (settings,
    history, signature), and after each epoch but the last ``checkpoint.pt`` (weights, optimiser
    and random states, history): a run killed in between resumes after its last finished epoch
    when started again with the same settings and ``out_dir`` (and gives the same model as one
    run), and the checkpoint is removed when the training ends.

    Raises:
        InputError: an unknown contrastive sampling or optimizer, a checkpoint in ``out_dir`` of
            other settings, β = 1 without image features, a start model without an
            encoder this training needs.
    """
    config.model.check()
    if config.contrastive not in ("batch", "random"):
        raise InputError(f"unknown contrastive sampling {config.contrastive!r}; known: batch, random")
    device, mixed = _placement(config)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    mc = config.model
    model, vocabs = _build_model(train, config)
    model.to(device)
    optimiser = EmbeddingOptimiser(model, config.optimizer, config.lr, config.grad_clip)
    train, has_row, feats = _image_rows(train, mc, device)
    has_image, image_of = torch.from_numpy(has_row).to(device), torch.from_numpy(train.image_of).to(device)
    encode = _BatchEncoder(model, vocabs, train, mc.langs, device, feats, has_image, image_of)
    history, best, best_state, bad, step = [], -np.inf, None, 0, 0
    done, first_epoch, started = False, 1, time.monotonic()
    checkpoint = os.path.join(out_dir, CHECKPOINT) if out_dir is not None else None
    if checkpoint is not None and os.path.exists(checkpoint):  # a run killed after an epoch: resume it
        saved = resume(checkpoint, _resume_settings(config, train, vocabs), model, optimiser, rng, device)
        history, best, best_state, bad, step = (saved[k] for k in ("history", "best", "best_state", "bad", "step"))
        first_epoch = saved["epoch"] + 1
        if progress:
            print(f"resuming after epoch {saved['epoch']} (step {step}) from {checkpoint}", flush=True)
    for epoch in range(first_epoch, config.epochs + 1):
        model.train()
        batches = epoch_batches(has_row, config.batch_size, config.image_rows, rng)
        random = config.contrastive == "random"
        negatives = epoch_batches(has_row, config.batch_size, config.image_rows, rng) if random else None
        progress_bar = make_progress_bar(batches, desc=f"epoch {epoch}", unit="batch") if progress else batches
        neighbours = neighbour_rows(train.image_of, rng) if mc.neighbour > 0 else None
        total, count = 0.0, 0
        for t, rows in enumerate(progress_bar):
            with mixed:
                batch = encode(rows)
                neg = encode(negatives[t % len(negatives)]) if negatives is not None else None
                near = encode(neighbours[rows])["sentences"] if neighbours is not None else None
                loss = model.loss(
                    batch["sentences"], batch["images"], batch["has_image"], batch["image_ids"], neg, near
                )["loss"]
                if mc.adversary > 0:
                    loss = loss + mc.adversary * model.language_loss(batch["tokens"])
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total, count, step = total + loss.item(), count + 1, step + 1
            capped = (bool(config.max_steps) and step >= config.max_steps) or (
                config.max_minutes > 0 and time.monotonic() - started >= 60 * config.max_minutes
            )
            last = t == len(batches) - 1 or capped
            if last or (config.validate_every and step % config.validate_every == 0):
                score = validation_score(model, vocabs, valid)
                model.train()
                history.append({"epoch": epoch, "step": step, "train_loss": total / count, **score})
                if progress:
                    print(
                        f"epoch {epoch} step {step}: train loss {total / count:.2f}, rsum {score['rsum']:.2f}",
                        flush=True,
                    )
                improved = score["rsum"] > best
                if improved:
                    best, bad, best_state = score["rsum"], 0, _cpu_state(model)
                else:
                    bad += 1
                if (not improved and bad >= config.patience) or capped:
                    done = True
                    break
        if done:
            break
        if checkpoint is not None and epoch < config.epochs:  # the state after this epoch, for a resume
            progress_state = {"epoch": epoch, "step": step, "history": history, "best": best, "bad": bad}
            save_checkpoint(
                checkpoint,
                _resume_settings(config, train, vocabs),
                _cpu_state(model),
                best_state,
                optimiser,
                rng,
                device,
                progress_state,
            )
    optimiser.close()
    return _finished(model, best_state, out_dir, vocabs, config, history), vocabs, history


def _placement(config: EmbedTrainConfig) -> Tuple[Any, Any]:
    """(the torch device, the autocast context of a half dtype, else a null context): half
    types are CUDA-only (:class:`rerank.devices.DeviceSettings` checks); torch's CPU threads set."""
    if config.threads:
        torch.set_num_threads(config.threads)
    device, dtype = DeviceSettings(config.device, config.dtype).resolve()
    mixed = torch.autocast(device_type="cuda", dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
    return device, mixed


def _finished(model, best_state, out_dir: Optional[str], vocabs, config: EmbedTrainConfig, history: List[Dict]):
    """The trained model on the CPU (where the scorers load it) with its best validation
    weights, in eval mode, saved to ``out_dir`` where one is given."""
    model.to("cpu")
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    if out_dir is not None:
        save_model(out_dir, model, vocabs, config, history)
    return model


def _image_rows(train: EmbedData, mc: MLMMEConfig, device) -> Tuple[EmbedData, np.ndarray, Any]:
    """(the training data, bool[examples] whether each example has an image the loss reads,
    the image features on ``device`` or None where no image is read: β = 0 or none given);
    with β = 1 and no neighbours, only the examples with an image (the others add nothing).

    Raises:
        InputError: β = 1 without image features."""
    feats = torch.from_numpy(train.image_features).to(device) if train.image_features is not None else None
    use_images = feats is not None and mc.beta > 0
    if mc.beta == 1 and not use_images:
        raise InputError("beta = 1 trains on images only, but there are no image features")
    has_row = (
        train.has_image[train.image_of]
        if use_images and train.has_image is not None
        else np.full(len(train.image_of), use_images)
    )
    if mc.beta == 1 and mc.neighbour == 0 and not has_row.all():
        train, has_row = _rows_with_images(train, has_row, mc.langs)
    return train, has_row, feats if use_images else None


def _cpu_state(model) -> Dict[str, torch.Tensor]:
    """A copy of the model's weights on the CPU (the best so far, a checkpoint's)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def _build_model(train: EmbedData, config: EmbedTrainConfig) -> Tuple[MLMME, Dict[str, Vocabulary]]:
    """(the model, its vocabularies): new ones of ``train``, or ``config.init_model``'s
    vocabularies, sizes and every weight whose name and shape match (a warm start); the image
    size from ``train``'s features.  Sets those sizes in ``config.model``.

    Raises:
        InputError: a start model without an encoder this training needs.
    """
    mc = config.model
    start_state = None
    if config.init_model:  # warm start: the start model's vocabularies, sizes and matching weights
        start, start_vocabs = load_model(config.init_model)
        missing = [lang for lang in mc.langs if lang not in start_vocabs]
        if missing:
            raise InputError(f"the start model has no {', '.join(missing)} encoder", config.init_model)
        vocabs = {lang: start_vocabs[lang] for lang in mc.langs}
        for key in ("word_dim", "hidden_dim", "embed_dim", "preset", "init"):
            setattr(mc, key, getattr(start.config, key))
        start_state = start.state_dict()
    else:
        vocabs = {lang: Vocabulary.build(train.sentences[lang], config.min_count) for lang in mc.langs}
    if train.image_features is not None:
        mc.image_dim = int(train.image_features.shape[1])
    model = MLMME({lang: len(v) for lang, v in vocabs.items()}, mc)
    if start_state is not None:
        own = model.state_dict()
        model.load_state_dict(
            {k: v for k, v in start_state.items() if k in own and own[k].shape == v.shape}, strict=False
        )
    return model, vocabs


def _rows_with_images(train: EmbedData, has_row: np.ndarray, langs: Sequence[str]) -> Tuple[EmbedData, np.ndarray]:
    """``train`` and ``has_row`` (bool[examples]) kept to the examples with an image: without
    R_ML (β = 1, no neighbours), examples without an image add nothing to the loss."""
    keep = np.flatnonzero(has_row)
    kept = EmbedData(
        {lang: [train.sentences[lang][i] for i in keep] for lang in langs},
        train.image_of[keep],
        train.image_features,
        train.has_image,
    )
    return kept, has_row[keep]


def word_vectors(
    model: MLMME, vocabs: Dict[str, Vocabulary], progress: bool = False, kind: str = "joint"
) -> Dict[str, np.ndarray]:
    """``LANG_word`` -> float32 vector of every vocabulary word of every language, padding
    and the unknown word left out: ``kind='joint'`` (embed_dim,) the word encoded as a
    one-word sentence (:mod:`rerank.embed.words`: the model's joint space); ``'input'``
    (word_dim,) the row of the language's word-embedding table (one space for all
    languages only where they share a branch: MULE's universal word space).

    Raises:
        InputError: another ``kind``.
    """
    if kind not in ("joint", "input"):
        raise InputError(f"unknown word-vector kind {kind!r}; known: joint, input")
    out: Dict[str, np.ndarray] = {}
    for lang in model.config.langs:
        words = vocabs[lang].words[2:]
        if kind == "joint":
            vectors = encode_sentences(model, vocabs[lang], lang, words, progress=progress)
        else:
            vectors = model.encoder(lang).embed.weight.detach().float().cpu().numpy()[2:]
        out.update({f"{lang}_{w}": v for w, v in zip(words, vectors)})
    return out
