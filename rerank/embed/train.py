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
import json
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
from rerank.errors import InputError
from rerank.nmt.checkpoints import UntrustedCheckpoint, load_state
from rerank.outputs import atomic_write
from rerank.progress import progress_bar as make_progress_bar
from rerank.signature import write_signed


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


#: the state after the last finished epoch of a training that has not ended (in its --out)
CHECKPOINT = "checkpoint.pt"


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
    if config.threads:
        torch.set_num_threads(config.threads)
    device, dtype = DeviceSettings(config.device, config.dtype).resolve()
    mixed = (
        torch.autocast(device_type="cuda", dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()
    )  # half types are CUDA-only (DeviceSettings checks)
    torch.manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    mc = config.model
    model, vocabs = _build_model(train, config)
    model.to(device)
    optimiser = EmbeddingOptimiser(model, config.optimizer, config.lr, config.grad_clip)
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
    has_image = torch.from_numpy(has_row).to(device)
    image_of = torch.from_numpy(train.image_of).to(device)

    def encode(rows: np.ndarray) -> Dict:
        out: Dict[str, Any] = {
            "sentences": {},
            "images": None,
            "has_image": None,
            "image_ids": image_of[rows],
            "tokens": {},
        }
        for lang in mc.langs:
            tokens, lengths = batch_tokens(vocabs[lang], [train.sentences[lang][i] for i in rows])
            out["tokens"][lang] = torch.from_numpy(tokens).to(device)
            out["sentences"][lang] = model.encode_text(lang, out["tokens"][lang], torch.from_numpy(lengths))
        if use_images and feats is not None:
            out["has_image"] = has_image[rows]
            if out["has_image"].any():
                out["images"] = model.encode_image(feats[image_of[rows]])
        return out

    def resume_settings() -> Dict:
        """What a resumed run must share with the killed one: the settings but where the work
        runs (device, threads) and for how long (max_minutes), and the data's size and vocabularies."""
        settings = {k: v for k, v in asdict(config).items() if k not in ("device", "threads", "max_minutes")}
        data = {"examples": len(train.image_of), "vocabulary": {lang: len(v) for lang, v in vocabs.items()}}
        return {"config": settings, "data": data}

    history, best, best_state, bad, step = [], -np.inf, None, 0, 0
    done, first_epoch, started = False, 1, time.monotonic()
    checkpoint = os.path.join(out_dir, CHECKPOINT) if out_dir is not None else None
    if checkpoint is not None and os.path.exists(checkpoint):  # a run killed after an epoch: resume it
        saved = _resume(checkpoint, resume_settings(), model, optimiser, rng, device)
        history, best, best_state, bad, step = (saved[k] for k in ("history", "best", "best_state", "bad", "step"))
        first_epoch = saved["epoch"] + 1
        if progress:
            print(f"resuming after epoch {saved['epoch']} (step {step}) from {checkpoint}", flush=True)
    for epoch in range(first_epoch, config.epochs + 1):
        model.train()
        batches = epoch_batches(has_row, config.batch_size, config.image_rows, rng)
        negatives = (
            epoch_batches(has_row, config.batch_size, config.image_rows, rng)
            if config.contrastive == "random"
            else None
        )
        progress_bar = batches
        if progress:
            progress_bar = make_progress_bar(batches, desc=f"epoch {epoch}", unit="batch")
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
                        f"epoch {epoch} step {step}: train loss {total / count:.2f}, validation rsum "
                        f"{score['rsum']:.2f}",
                        flush=True,
                    )
                if score["rsum"] > best:
                    best, bad = score["rsum"], 0
                    best_state = _cpu_state(model)
                else:
                    bad += 1
                    if bad >= config.patience:
                        done = True
                        break
                if capped:
                    done = True
                    break
        if done:
            break
        if checkpoint is not None and epoch < config.epochs:  # the state after this epoch, for a resume
            progress_state = {"epoch": epoch, "step": step, "history": history, "best": best, "bad": bad}
            _save_checkpoint(
                checkpoint, resume_settings(), _cpu_state(model), best_state, optimiser, rng, device, progress_state
            )
    optimiser.close()
    model.to("cpu")  # the model is returned and saved on the CPU, where the scorers load it
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    if out_dir is not None:
        _save_model(out_dir, model, vocabs, config, history)
    return model, vocabs, history


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


def _resume(checkpoint: str, settings: Dict, model, optimiser, rng, device) -> Dict:
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


def _save_checkpoint(checkpoint: str, settings: Dict, weights, best_state, optimiser, rng, device, state: Dict) -> None:
    """Write ``checkpoint`` atomically: the settings, ``weights`` (on the CPU), the optimiser's
    and the random generators' states and ``state`` (``epoch``, ``step``, ``history``, ``best``,
    ``bad``), what :func:`_resume` restores."""
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


def _save_model(out_dir: str, model, vocabs: Dict[str, Vocabulary], config: EmbedTrainConfig, history) -> None:
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


def load_model(model_dir: str):
    """(MLMME model in eval mode, {lang: Vocabulary}) from a :func:`train_embeddings`
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
