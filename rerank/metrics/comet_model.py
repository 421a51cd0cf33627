"""The COMET-family models behind ``comet:`` and ``cometkiwi:`` (:mod:`rerank.metrics.comet`,
whose docstring says what is computed and how it follows unbabel-comet 2.2.7): what every
kind shares — a checkpoint directory read weights-only (:func:`read_checkpoint`), its encoder
run with transformers, the layer mix, pooling and the estimator (:class:`CometModel`).  One
class per ``class_identifier`` builds on it, as unbabel-comet has one per model
(:mod:`rerank.metrics.comet_kinds`: :func:`~rerank.metrics.comet_kinds.load_comet` reads a
checkpoint as its class)."""

from __future__ import annotations

import hashlib
import os
import re
import zipfile
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

import numpy as np

from rerank.devices import DeviceSettings, int8_linear_layers
from rerank.errors import InputError
from rerank.metrics.comet_checks import (
    check_encoder_type,
    check_estimator,
    check_hparams,
    check_scalar,
    check_tensors,
    checkpoint_files,
    read_hparams,
    shown,
)
from rerank.metrics.comet_encoders import (
    ENCODERS,
    SEPARATORS,
    TOKEN_TYPES,
    has_protobuf,
    repaired_backend,
    sentencepiece_only,
)
from rerank.progress import Stages
from rerank.remote_code import NO_REMOTE_CODE, broken_sentencepiece, load_errors, no_prompt, refuse_remote_code


def one_line(error: BaseException) -> str:
    """A library's error message on one line, at most 200 characters."""
    return " ".join(str(error).split())[:200]


def sparsemax(weights):
    """Sparsemax (Martins & Astudillo 2016) of a 1-D tensor: the Euclidean projection onto the
    probability simplex (entmax's ``sparsemax``, which COMET's layer mix uses)."""
    import torch

    z, _ = torch.sort(weights, descending=True)
    k = torch.arange(1, len(z) + 1, dtype=weights.dtype, device=weights.device)
    cumulative = torch.cumsum(z, 0)
    support = (1 + k * z) > cumulative
    size = int(support.nonzero().max()) + 1
    tau = (cumulative[size - 1] - 1) / size
    return torch.clamp(weights - tau, min=0)


class Checkpoint(NamedTuple):
    """A COMET checkpoint as read (:func:`read_checkpoint`): its directory, the ``.ckpt`` file,
    ``hparams.yaml``, the hyper-parameters (the checkpoint's own over the file's) and the
    weights (``state_dict``)."""

    directory: str
    checkpoint: str
    hparams_file: str
    hparams: Dict[str, Any]
    weights: Dict[str, Any]


def read_checkpoint(directory: str) -> Checkpoint:
    """The checkpoint of ``directory`` (or of the ``.ckpt`` file itself), weights-only, its
    hyper-parameters and tensors checked (:mod:`rerank.metrics.comet_checks`).

    Raises:
        InputError: one line each — torch, transformers or PyYAML missing, no checkpoint or
            hparams.yaml, a checkpoint that is not plain weights, a hyper-parameter or tensor
            refused.
    """
    try:
        import torch
        import transformers  # noqa: F401  (the encoder: CometModel)
        import yaml  # noqa: F401  (hparams.yaml: comet_checks.read_hparams)
    except ImportError:
        raise InputError("comet: needs torch, transformers and PyYAML: pip install 'nbest-rerank[comet]'") from None
    checkpoint, hparams_file = checkpoint_files(directory)
    hparams = read_hparams(hparams_file)
    try:  # a zip checkpoint (torch.save's format since 1.6) memory-mapped: no second copy of the weights
        state = torch.load(checkpoint, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(checkpoint))
    except Exception as error:  # an unpickling refusal, a truncated or foreign file
        raise InputError(
            f"comet: not a plain weights checkpoint (refused to unpickle: {one_line(error)[:120]})", checkpoint
        ) from None
    if not isinstance(state, dict) or not isinstance(state.get("state_dict", state), dict):
        raise InputError("comet: the checkpoint holds no state_dict", checkpoint)
    stored = state.get("hyper_parameters")
    if isinstance(stored, dict):  # unbabel-comet reads the checkpoint's own (hparams.yaml: the class only)
        hparams = {**hparams, **stored}
    check_hparams(hparams, hparams_file if not isinstance(stored, dict) else checkpoint)
    weights = state.get("state_dict", state)
    check_tensors(weights, checkpoint)
    return Checkpoint(os.path.dirname(hparams_file), checkpoint, hparams_file, hparams, weights)


class CometModel:
    """What every COMET model kind shares: the encoder (transformers, the checkpoint's
    ``encoder.model.*`` weights), the layer mix or chosen layer, pooling, the estimator
    (``estimator.ff.*``) and token ids as COMET truncates them.  A kind is a subclass
    (:mod:`rerank.metrics.comet_kinds`) that says how it scores: sentence embeddings through
    the estimator (regression models) or joint sequences (unified models, xCOMET).

    Args:
        loaded: the checkpoint (:func:`read_checkpoint`).
        encoder: the encoder's directory (config and tokenizer); "" reads ``pretrained_model``.
        batch: sentences (or joint sequences) per encoder call.
        device: ``auto`` (CUDA where torch sees one), ``cpu``, ``cuda``, ``cuda:1``.
        dtype: ``float32``, ``float16`` or ``bfloat16`` (the encoder's, half types on CUDA only;
            the layer mix and the estimator run in float32), or ``int8``: the encoder's linear
            layers dynamically quantised on the CPU (:func:`rerank.devices.int8_linear_layers`).
    Raises:
        InputError: one line each — an encoder unbabel-comet does not build, one that cannot be
            found or does not fit the weights, a layer or pool out of range, no estimator.
    """

    #: the ``class_identifier`` of the kind
    kind = ""
    #: whether the kind scores pooled sentence embeddings (regression models), which MBR can
    #: cache per text, average (reference aggregation) and cluster (centroid MBR); unified
    #: models encode each pair jointly and have none
    sentence_embeddings = False
    #: the most sentence embeddings kept between calls (160 MB for XLM-R large's 1,024 dimensions)
    cache_size = 40_000
    #: the encoder (a transformers model) and the estimator (torch.nn.Sequential)
    encoder: Any
    estimator: Any

    def __init__(
        self, loaded: Checkpoint, encoder: str = "", batch: int = 64, device: str = "auto", dtype: str = "float32"
    ):
        hparams, weights, checkpoint = loaded.hparams, loaded.weights, loaded.checkpoint
        encoder_model = str(hparams.get("encoder_model", "XLM-RoBERTa"))
        encoder_class = ENCODERS.get(encoder_model)
        if encoder_class is None:
            raise InputError(
                f"comet: encoder_model {shown(encoder_model)}: unbabel-comet 2.2.7 builds {', '.join(ENCODERS)}",
                loaded.hparams_file,
            )
        if encoder_model == "BERT" and self.sentence_embeddings and hparams.get("pool") == "default":
            raise InputError(
                "comet: pool: default with a BERT encoder reads BERT's pooler, which unbabel-comet builds without "
                "(its score fails there): not a checkpoint comet can score",
                loaded.hparams_file,
            )
        self.separator = SEPARATORS.get(encoder_model, 2)
        self.token_types = encoder_model in TOKEN_TYPES
        self.directory, self.checkpoint, self.hparams = loaded.directory, checkpoint, hparams
        source = encoder or str(hparams.get("pretrained_model", ""))
        config = self._load_encoder(source, encoder_model)
        self._load_encoder_weights(weights, checkpoint, source, config, encoder_class)
        self.num_layers = int(config.num_hidden_layers) + 1
        self.max_positions = int(config.max_position_embeddings) - 2
        self.pad = int(self.tokenizer.pad_token_id)
        self.cls_id, self.sep_id = int(self.tokenizer.cls_token_id), int(self.tokenizer.sep_token_id)
        self.layer = self.sentence_layer(hparams)
        self.layer_norm = bool(hparams.get("layer_norm", False))
        self._layer_mix(weights, loaded)
        self.pool = str(hparams.get("pool", "avg"))
        if self.pool not in ("avg", "max", "cls", "default"):
            raise InputError(f"comet: unknown pool {self.pool!r}", loaded.hparams_file)
        self.estimator = self._estimator(weights, hparams, checkpoint, self.kind, int(config.hidden_size))
        self._heads(weights, hparams, checkpoint)
        self._drop_unread_layers()
        self.batch = batch
        self.int8 = dtype == "int8"
        self.device, torch_dtype = DeviceSettings(device, "float32" if self.int8 else dtype).resolve()
        self.encoder = self.encoder.to(self.device, torch_dtype).eval()
        if self.int8:
            self.encoder = int8_linear_layers(self.encoder, "comet")
        self.estimator = self.estimator.to(self.device).eval()
        self._place_heads()
        self.inputs = self.input_segments(hparams)
        self._cache: Dict[str, Any] = {}
        #: the work done: texts through the encoder (``encoder``), rows through the estimator
        #: (``estimator``) or joint sequences through both (``joint``), with their seconds
        self.work = Stages()

    # --- what a kind may change ---

    @staticmethod
    def sentence_layer(hparams: Dict[str, Any]) -> Any:
        """The layer the sentence states come from: ``layer`` (``mix`` or an index)."""
        return hparams.get("layer", "mix")

    @staticmethod
    def input_segments(hparams: Dict[str, Any]) -> List[str]:
        """What a score reads, of ``mt``, ``src``, ``ref`` (``input_segments``)."""
        return list(hparams.get("input_segments", ["mt", "src", "ref"]))

    def _heads(self, weights: dict, hparams: dict, checkpoint: str) -> None:
        """Build the kind's heads beside the estimator (xCOMET: its error tagger)."""

    def _place_heads(self) -> None:
        """Move the kind's heads to :attr:`device`."""

    def _top_layer_read(self) -> int:
        """The highest encoder layer a score reads."""
        import torch

        return int(self.layer) if self.layer != "mix" else int(torch.nonzero(self.mix).max())

    def _keep_layers(self, layers: List[Any]) -> None:
        """Keep what a score reads of an encoder call's hidden states beside the mix
        (``pool: default``: the top layer's ``<s>``)."""
        if self.pool == "default":  # COMET's "sentemb": the top layer's <s>, whatever the mix
            self._top = layers[-1]

    @property
    def uses_reference(self) -> bool:
        """Whether scores read a reference."""
        raise NotImplementedError

    def score(
        self, sources: Sequence[str], hypotheses: Sequence[str], references: Optional[Sequence[str]]
    ) -> np.ndarray:
        """float64[N] segment scores of ``hypotheses[k]`` with ``sources[k]`` (and
        ``references[k]``; None: reference-free), as unbabel-comet's ``predict``."""
        raise NotImplementedError

    def pair_scores(self, texts: Sequence[str], source: str, hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """float64[P] the score of ``texts[hyp[k]]`` against pseudo-reference ``texts[ref[k]]``
        with the one ``source`` (MBR's utilities of a segment), each distinct text encoded once."""
        raise NotImplementedError

    def prefetch(self, texts: Sequence[str]) -> None:
        """Encode ``texts`` ahead of the segments that read them (a kind with a sentence cache)."""

    # --- building ---

    def _load_encoder(self, source: str, encoder_model: str):
        """The encoder's config and tokenizer from ``source``; its config.

        Raises:
            InputError: no such encoder locally, a tokenizer that needs protobuf, an encoder of
                another kind than ``encoder_model``."""
        from transformers import AutoConfig, AutoTokenizer
        from transformers.utils import logging as transformers_logging

        transformers_logging.disable_progress_bar()
        local = os.path.isdir(source)
        refuse_remote_code(source, "comet: the encoder")
        no_prompt()
        broken = broken_sentencepiece(source) if local else None
        if broken is not None:  # transformers may build some other tokenizer without it, silently
            raise InputError("comet: the encoder's SentencePiece model is empty or corrupt", broken)
        try:
            config = AutoConfig.from_pretrained(source, local_files_only=True, **NO_REMOTE_CODE)
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **NO_REMOTE_CODE)
        except load_errors() as error:
            if local and sentencepiece_only(source) and not has_protobuf():
                raise InputError(
                    "comet: the encoder's tokenizer is a SentencePiece model without tokenizer.json: converting it "
                    "needs protobuf (pip install protobuf, or 'nbest-rerank[comet]')",
                    source,
                ) from None
            where = "" if local else " (not a local directory, nor in the Hugging Face cache: give encoder=DIR)"
            raise InputError(
                f"comet: cannot load the encoder {shown(source)}{where}: {one_line(error)[:120]}"
            ) from None
        check_encoder_type(config, encoder_model, source)
        for role in ("pad", "cls", "sep"):  # every segment is padded and framed with them
            if not isinstance(getattr(self.tokenizer, f"{role}_token_id", None), int):
                raise InputError(
                    f"comet: the encoder's tokenizer has no {role} token (its tokenizer_config.json sets none or "
                    "null): COMET pads and frames every segment with it",
                    source,
                )
        self.backend = repaired_backend(self.tokenizer, mask_lstrip=encoder_model != "BERT")
        return config

    def _load_encoder_weights(self, weights: dict, checkpoint: str, source: str, config, encoder_class: str) -> None:
        """The encoder (``encoder_class`` of ``config``) built with the checkpoint's
        ``encoder.model.*`` weights by ``from_pretrained`` from that state dict: no random
        initialisation of weights that are then overwritten (a second or more at XLM-R large's size).

        Raises:
            InputError: an encoder transformers cannot build, weights that do not fit, or missing ones."""
        import torch
        import transformers

        model_class = getattr(transformers, encoder_class)
        try:
            with torch.device("meta"):  # the encoder's tensors named and shaped, none allocated
                expected = model_class(config, add_pooling_layer=False).state_dict()
        except (ValueError, TypeError, AttributeError, RuntimeError) as error:
            raise InputError(f"comet: cannot build the encoder: {one_line(error)[:160]}", source) from None
        prefix = "encoder.model."
        # what the encoder does not hold (a pooler, older buffers) is left out, as unbabel-comet does
        encoder_weights = {
            k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix) and k[len(prefix) :] in expected
        }
        missing = [k for k in expected if k not in encoder_weights and not k.endswith("position_ids")]
        if missing:
            raise InputError(f"comet: the checkpoint lacks encoder weights ({missing[0]} …)", checkpoint)
        for name, tensor in encoder_weights.items():
            if tuple(tensor.shape) != tuple(expected[name].shape):
                raise InputError(
                    f"comet: the encoder does not fit the checkpoint: {name} has shape {tuple(tensor.shape)} in the "
                    f"checkpoint, {tuple(expected[name].shape)} in the encoder",
                    source,
                )
        try:
            self.encoder = model_class.from_pretrained(
                None, config=config, state_dict=encoder_weights, add_pooling_layer=False, dtype=torch.float32
            )
        except (ValueError, TypeError, AttributeError, RuntimeError) as error:
            raise InputError(f"comet: cannot build the encoder: {one_line(error)[:160]}", source) from None

    def _layer_mix(self, weights: dict, loaded: Checkpoint) -> None:
        """``layer: mix``: the layer-wise attention's weights (sparsemax or softmax of the
        scalars) and gamma; else the chosen layer checked.

        Raises:
            InputError: the mix's weights missing or not scalars, a layer out of range."""
        import torch

        layer, checkpoint = self.layer, loaded.checkpoint
        if layer == "mix":
            scalars = [weights.get(f"layerwise_attention.scalar_parameters.{i}") for i in range(self.num_layers)]
            if any(s is None for s in scalars) or "layerwise_attention.gamma" not in weights:
                raise InputError(
                    "comet: layer: mix but the checkpoint lacks the layer-wise attention weights", checkpoint
                )
            for i, scalar in enumerate(scalars):
                check_scalar(scalar, f"layerwise_attention.scalar_parameters.{i}", checkpoint)
            check_scalar(weights["layerwise_attention.gamma"], "layerwise_attention.gamma", checkpoint)
            raw = torch.cat(
                [
                    weights[f"layerwise_attention.scalar_parameters.{i}"].float().reshape(1)
                    for i in range(self.num_layers)
                ]
            )
            transform = str(loaded.hparams.get("layer_transformation", "softmax"))
            self.mix = sparsemax(raw) if transform == "sparsemax" else torch.softmax(raw, dim=0)
            self.gamma = weights["layerwise_attention.gamma"].float().reshape(())
        elif not (isinstance(layer, int) and 0 <= layer < self.num_layers):
            raise InputError(f"comet: invalid layer {layer!r} (mix or 0..{self.num_layers - 1})", loaded.hparams_file)

    @staticmethod
    def _estimator(weights: dict, hparams: dict, checkpoint: str, kind: str, hidden: int):
        """COMET's ``FeedForward`` (``estimator.ff.K``): Linear, activation, dropout per hidden
        size, a final Linear to one unit, then ``final_activation`` if any."""
        import torch
        from torch import nn

        def activation(name: str) -> nn.Module:  # names checked by check_hparams
            return getattr(nn, name.title())()

        layers = {
            k: re.fullmatch(r"estimator\.ff\.(\d+)\.(weight|bias)", k) for k in weights if k.startswith("estimator.")
        }
        odd = sorted(k for k, match in layers.items() if match is None)
        if odd:
            raise InputError(
                f"comet: an estimator weight that is not estimator.ff.N.weight or .bias: {odd[0]}", checkpoint
            )
        linear = sorted(
            (int(match.group(1)), weights[k]) for k, match in layers.items() if match and match.group(2) == "weight"
        )
        if not linear:
            raise InputError("comet: the checkpoint holds no estimator (estimator.ff.*)", checkpoint)
        biases = [weights.get(f"estimator.ff.{index}.bias") for index, _ in linear]
        check_estimator([weight for _, weight in linear], biases, kind, hidden, checkpoint)
        modules: List[nn.Module] = []
        for position, (index, weight) in enumerate(linear):
            layer = nn.Linear(weight.shape[1], weight.shape[0])
            with torch.no_grad():
                layer.weight.copy_(weight.float())
                layer.bias.copy_(weights[f"estimator.ff.{index}.bias"].float())
            modules.append(layer)
            if position < len(linear) - 1:
                modules.append(activation(str(hparams.get("activations", "Tanh"))))
        if hparams.get("final_activation"):
            modules.append(activation(str(hparams["final_activation"])))
        return nn.Sequential(*modules)

    def _drop_unread_layers(self) -> None:
        """Drop the encoder's top layers that no score reads: above the chosen layer, or above
        the highest layer the mix weighs (sparsemax gives layers weight exactly 0). Exact: a
        zero-weighted layer adds nothing; ``pool: default`` reads the top layer, so it keeps all.
        Never past an encoder's final norm: XLM-R XL normalises the last layer's output, and
        with layers dropped that norm would land on a lower layer (up to 0.62 per segment off),
        so its layers are all kept. At least one layer runs (``layer: 0`` reads the embeddings,
        which transformers returns as hidden states only when a layer runs)."""
        if self.pool == "default" or getattr(self.encoder.encoder, "LayerNorm", None) is not None:
            return
        top = self._top_layer_read()
        if top < self.num_layers - 1:
            self.encoder.encoder.layer = self.encoder.encoder.layer[: max(top, 1)]
            if self.layer == "mix":
                self.mix = self.mix[: top + 1]

    # --- encoding ---

    def tokens(self, texts: Sequence[str]) -> List[List[int]]:
        """Token ids with ``<s> … </s>`` of each text, truncated as COMET does (its tokenizer
        call with ``truncation=True, max_length=max_positions - 2``), by the tokenizer's Rust
        backend directly (:func:`repaired_backend`)."""
        backend = self.backend
        if backend is None:  # a tokenizer without a Rust backend
            return self.tokenizer(list(texts), truncation=True, max_length=self.max_positions - 2)["input_ids"]
        if backend.truncation is None or backend.truncation.get("max_length") != self.max_positions - 2:
            backend.enable_truncation(max_length=self.max_positions - 2)
        if backend.padding is not None:
            backend.no_padding()
        return [encoding.ids for encoding in backend.encode_batch(list(texts), add_special_tokens=True)]

    def _mixed(self, sequences: List[List[int]], first: Optional[List[int]] = None):
        """(mixed or chosen layer float32[B, T, H], ids int64[B, T], mask[B, T]) of padded
        sequences; ``first``: joint sequences' token types for a BERT encoder, 0 over each
        row's first ``first[k]`` tokens and 1 after (unbabel-comet's ``concat_sequences``)."""
        import torch

        lengths = np.array([len(s) for s in sequences])
        padded = np.full((len(sequences), int(lengths.max())), self.pad, dtype=np.int64)
        padded[np.arange(padded.shape[1])[None, :] < lengths[:, None]] = np.concatenate(sequences)
        ids = torch.from_numpy(padded).to(self.device)
        mask = torch.from_numpy((np.arange(padded.shape[1])[None, :] < lengths[:, None]).astype(np.int64))
        mask = mask.to(self.device)
        extra = {}
        if first is not None and self.token_types:
            types = (np.arange(padded.shape[1])[None, :] >= np.array(first)[:, None]).astype(np.int64)
            extra["token_type_ids"] = torch.from_numpy(types).to(self.device)
        output = self.encoder(input_ids=ids, attention_mask=mask, output_hidden_states=True, return_dict=True, **extra)
        layers = [h.float() for h in output.hidden_states]
        self._keep_layers(layers)
        if self.layer != "mix":
            return layers[int(self.layer)], ids, mask
        mixed = 0
        for weight, hidden in zip(self.mix.tolist(), layers):
            if weight == 0:  # sparsemax's zeros: nothing to add
                continue
            if self.layer_norm:
                hidden = self._normalise(hidden, mask)
            mixed = mixed + weight * hidden
        return self.gamma.to(self.device) * mixed, ids, mask

    @staticmethod
    def _normalise(hidden, mask):
        """COMET's per-sentence layer norm over unmasked tokens (one mean and variance per sentence)."""
        import torch

        batch, _, width = hidden.shape
        broadcast = mask.float().unsqueeze(-1)
        count = mask.float().sum(1) * width
        masked = hidden * broadcast
        mean = (masked.view(batch, -1).sum(1) / count).view(batch, 1, 1)
        variance = (((masked - mean) * broadcast) ** 2).view(batch, -1).sum(1) / count
        return (hidden - mean) / torch.sqrt(variance + 1e-12).view(batch, 1, 1)

    def _pool(self, embeddings, ids, mask):
        if self.pool == "cls":
            return embeddings[:, 0, :]
        padding = ids.eq(self.pad).unsqueeze(-1)
        if self.pool == "max":
            return embeddings.masked_fill(padding, float("-inf")).max(dim=1)[0]
        summed = embeddings.masked_fill(padding, 0.0).sum(1)
        return summed / mask.unsqueeze(-1).expand(embeddings.size()).float().sum(1)

    def fingerprint(self) -> str:
        """A short digest of hparams.yaml and the checkpoint's size (for signatures)."""
        with open(os.path.join(self.directory, "hparams.yaml"), "rb") as handle:
            digest = hashlib.sha256(handle.read() + str(os.path.getsize(self.checkpoint)).encode()).hexdigest()
        return digest[:10]
