"""The COMET-family model behind ``comet:`` and ``cometkiwi:`` (:mod:`rerank.metrics.comet`,
whose docstring says what is computed and how it follows unbabel-comet 2.2.7): a checkpoint
directory read weights-only, its XLM-R encoder run with transformers, the layer mix, pooling,
the estimator, joint encoding for unified models, and the caches that make MBR's N×N
utilities cost N + 1 encoder calls."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.metrics.comet_checks import (
    check_encoder_type,
    check_estimator,
    check_hparams,
    check_scalar,
    check_tensors,
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
from rerank.remote_code import NO_REMOTE_CODE, no_prompt, refuse_remote_code

#: the COMET model classes rerank computes, by ``class_identifier``
KINDS = ("regression_metric", "referenceless_regression_metric", "unified_metric", "xcomet_metric")
#: the kinds that encode the hypothesis jointly with the source (and the reference)
JOINT = ("unified_metric", "xcomet_metric")
#: xCOMET's MQM penalty per error span of each severity (and the cap of a sentence's sum)
MQM_PENALTY, MQM_CAP = {"minor": 1, "major": 5, "critical": 10}, 25
#: xCOMET's weights of its three passes' scores and of the MQM score: (mt, src), (mt, ref),
#: (mt, src, ref), MQM; and of the passes' tag probabilities (unbabel-comet 2.2.7's constants)
XCOMET_SCORE_WEIGHTS, XCOMET_SPAN_WEIGHTS = (0.12, 0.33, 0.33, 0.22), (0.1667, 0.3333, 0.5)


def _one_line(error: BaseException) -> str:
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


class CometModel:
    """A COMET checkpoint directory ready to score (module docstring).

    Args:
        directory: the checkpoint directory (``checkpoints/model.ckpt`` and ``hparams.yaml``),
            or the ``.ckpt`` file inside it.
        encoder: the encoder's directory (config and tokenizer); "" reads ``pretrained_model``.
        batch: sentences (or joint sequences) per encoder call.
        device: ``auto`` (CUDA where torch sees one), ``cpu``, ``cuda``, ``cuda:1``.
        dtype: ``float32``, ``float16`` or ``bfloat16`` (the encoder's, half types on CUDA only;
            the layer mix and the estimator run in float32).
    Raises:
        InputError: one line each — no checkpoint or hparams.yaml, a checkpoint that is not plain
            weights, an unknown or unsupported model class (xCOMET), an encoder that cannot be
            found or does not fit the weights, torch/transformers missing.
    """

    def __init__(
        self, directory: str, encoder: str = "", batch: int = 64, device: str = "auto", dtype: str = "float32"
    ):
        try:
            import torch
            import transformers
            import yaml  # noqa: F401  (hparams.yaml: comet_checks.read_hparams)
            from transformers import AutoConfig, AutoTokenizer
            from transformers.utils import logging as transformers_logging
        except ImportError:
            raise InputError("comet: needs torch, transformers and PyYAML: pip install 'nbest-rerank[comet]'") from None
        transformers_logging.disable_progress_bar()
        given = directory
        if os.path.isfile(directory):  # the .ckpt file itself: its directory is two levels up
            checkpoint = directory
            directory = os.path.dirname(os.path.dirname(os.path.abspath(directory)))
        else:
            checkpoint = os.path.join(directory, "checkpoints", "model.ckpt")
        if not os.path.isfile(checkpoint):
            raise InputError("comet: no checkpoints/model.ckpt: not a COMET checkpoint directory", given)
        hparams_file = os.path.join(directory, "hparams.yaml")
        if not os.path.isfile(hparams_file):
            where = "" if given == directory else f" (looked for {hparams_file}: DIR/checkpoints/model.ckpt's DIR)"
            raise InputError(
                f"comet: no hparams.yaml beside checkpoints/: not a COMET checkpoint directory{where}", given
            )
        hparams = read_hparams(hparams_file)
        try:
            state = torch.load(checkpoint, map_location="cpu", weights_only=True)
        except Exception as error:  # an unpickling refusal, a truncated or foreign file
            raise InputError(
                f"comet: not a plain weights checkpoint (refused to unpickle: {_one_line(error)[:120]})", checkpoint
            ) from None
        if not isinstance(state, dict) or not isinstance(state.get("state_dict", state), dict):
            raise InputError("comet: the checkpoint holds no state_dict", checkpoint)
        stored = state.get("hyper_parameters")
        if isinstance(stored, dict):  # unbabel-comet reads the checkpoint's own (hparams.yaml: the class only)
            hparams = {**hparams, **stored}
        check_hparams(hparams, hparams_file if not isinstance(stored, dict) else checkpoint)
        check_tensors(state.get("state_dict", state), checkpoint)
        self.kind = str(hparams.get("class_identifier", ""))
        if self.kind not in KINDS:
            raise InputError(
                f"comet: unknown class_identifier {shown(self.kind)} (rerank reads {', '.join(KINDS)})", hparams_file
            )
        encoder_model = str(hparams.get("encoder_model", "XLM-RoBERTa"))
        encoder_class = ENCODERS.get(encoder_model)
        if encoder_class is None:
            raise InputError(
                f"comet: encoder_model {shown(encoder_model)}: unbabel-comet 2.2.7 builds {', '.join(ENCODERS)}",
                hparams_file,
            )
        if encoder_model == "BERT" and self.kind not in JOINT and hparams.get("pool") == "default":
            raise InputError(
                "comet: pool: default with a BERT encoder reads BERT's pooler, which unbabel-comet builds without "
                "(its score fails there): not a checkpoint comet can score",
                hparams_file,
            )
        self.separator = SEPARATORS.get(encoder_model, 2)
        self.token_types = encoder_model in TOKEN_TYPES
        self.directory, self.checkpoint, self.hparams = directory, checkpoint, hparams
        source = encoder or str(hparams.get("pretrained_model", ""))
        local = os.path.isdir(source)
        refuse_remote_code(source, "comet: the encoder")
        no_prompt()
        try:
            config = AutoConfig.from_pretrained(source, local_files_only=True, **NO_REMOTE_CODE)
            self.tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True, **NO_REMOTE_CODE)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as error:
            if local and sentencepiece_only(source) and not has_protobuf():
                raise InputError(
                    "comet: the encoder's tokenizer is a SentencePiece model without tokenizer.json: converting it "
                    "needs protobuf (pip install protobuf, or 'nbest-rerank[comet]')",
                    source,
                ) from None
            where = "" if local else " (not a local directory, nor in the Hugging Face cache: give encoder=DIR)"
            raise InputError(
                f"comet: cannot load the encoder {shown(source)}{where}: {_one_line(error)[:120]}"
            ) from None
        check_encoder_type(config, encoder_model, source)
        self.backend = repaired_backend(self.tokenizer, mask_lstrip=encoder_model != "BERT")
        weights = state.get("state_dict", state)
        try:
            self.encoder = getattr(transformers, encoder_class)(config, add_pooling_layer=False)
        except (ValueError, TypeError, AttributeError, RuntimeError) as error:
            raise InputError(f"comet: cannot build the encoder: {_one_line(error)[:160]}", source) from None
        prefix = "encoder.model."
        encoder_weights = {k[len(prefix) :]: v for k, v in weights.items() if k.startswith(prefix)}
        try:
            missing, _ = self.encoder.load_state_dict(encoder_weights, strict=False)
        except RuntimeError as error:
            raise InputError(
                f"comet: the encoder does not fit the checkpoint: {_one_line(error)[:160]}", source
            ) from None
        missing = [k for k in missing if not k.endswith("position_ids")]
        if missing:
            raise InputError(f"comet: the checkpoint lacks encoder weights ({missing[0]} …)", checkpoint)
        self.num_layers = int(config.num_hidden_layers) + 1
        self.max_positions = int(config.max_position_embeddings) - 2
        self.pad = int(self.tokenizer.pad_token_id)
        self.cls_id, self.sep_id = int(self.tokenizer.cls_token_id), int(self.tokenizer.sep_token_id)
        layer = (
            hparams.get("sent_layer", hparams.get("layer", "mix"))
            if self.kind in JOINT
            else hparams.get("layer", "mix")
        )
        self.layer = layer
        self.layer_norm = bool(hparams.get("layer_norm", False))
        if layer == "mix":
            scalars = [weights.get(f"layerwise_attention.scalar_parameters.{i}") for i in range(self.num_layers)]
            if any(s is None for s in scalars) or "layerwise_attention.gamma" not in weights:
                raise InputError(
                    "comet: layer: mix but the checkpoint lacks the layer-wise attention weights", checkpoint
                )
            for i, scalar in enumerate(scalars):
                check_scalar(scalar, f"layerwise_attention.scalar_parameters.{i}", checkpoint)
            check_scalar(weights["layerwise_attention.gamma"], "layerwise_attention.gamma", checkpoint)
            raw = torch.cat([s.float().reshape(1) for s in scalars])
            transform = str(hparams.get("layer_transformation", "softmax"))
            self.mix = sparsemax(raw) if transform == "sparsemax" else torch.softmax(raw, dim=0)
            self.gamma = weights["layerwise_attention.gamma"].float().reshape(())
        elif not (isinstance(layer, int) and 0 <= layer < self.num_layers):
            raise InputError(f"comet: invalid layer {layer!r} (mix or 0..{self.num_layers - 1})", hparams_file)
        self.pool = str(hparams.get("pool", "avg"))
        if self.pool not in ("avg", "max", "cls", "default"):
            raise InputError(f"comet: unknown pool {self.pool!r}", hparams_file)
        self.estimator = self._estimator(weights, hparams, checkpoint, self.kind, int(config.hidden_size))
        self.tagger = self._tagger(weights, hparams, checkpoint) if self.kind == "xcomet_metric" else None
        self._drop_unread_layers()
        self.batch = batch
        self.device, torch_dtype = DeviceSettings(device, dtype).resolve()
        self.encoder = self.encoder.to(self.device, torch_dtype).eval()
        self.estimator = self.estimator.to(self.device).eval()
        if self.tagger is not None:
            self.tagger = self.tagger.to(self.device).eval()
        default_inputs = ["mt", "src", "ref"]  # xCOMET's always
        self.inputs = (
            default_inputs if self.kind == "xcomet_metric" else list(hparams.get("input_segments", default_inputs))
        )
        self._cache: Dict[str, Any] = {}

    def _drop_unread_layers(self) -> None:
        """Drop the encoder's top layers that no score reads: above the chosen layer, or above
        the highest layer the mix weighs (sparsemax gives layers weight exactly 0). Exact: a
        zero-weighted layer adds nothing; ``pool: default`` reads the top layer, so it keeps all.
        Never past an encoder's final norm: XLM-R XL normalises the last layer's output, and
        with layers dropped that norm would land on a lower layer (up to 0.62 per segment off),
        so its layers are all kept. At least one layer runs (``layer: 0`` reads the embeddings,
        which transformers returns as hidden states only when a layer runs)."""
        import torch

        if self.pool == "default" or getattr(self.encoder.encoder, "LayerNorm", None) is not None:
            return
        top = int(self.layer) if self.layer != "mix" else int(torch.nonzero(self.mix).max())
        if self.tagger is not None:  # xCOMET's error tags read their own layer
            top = max(top, self.word_layer)
        if top < self.num_layers - 1:
            self.encoder.encoder.layer = self.encoder.encoder.layer[: max(top, 1)]
            if self.layer == "mix":
                self.mix = self.mix[: top + 1]

    def _tagger(self, weights: dict, hparams: dict, checkpoint: str):
        """xCOMET's error tagger ``hidden2tag`` (Linear: hidden -> O, I-minor, I-major,
        I-critical) over layer ``word_layer``.

        Raises:
            InputError: the weights are missing, other error labels, a layer out of range."""
        import torch

        labels = list(hparams.get("error_labels", ["minor", "major", "critical"]))
        if labels != list(MQM_PENALTY) or "hidden2tag.weight" not in weights:
            raise InputError("comet: an xcomet_metric without hidden2tag or with other error labels", checkpoint)
        self.word_layer = hparams.get("word_layer", 36)
        if not 0 <= self.word_layer < self.num_layers:
            raise InputError(f"comet: word_layer {self.word_layer} out of 0..{self.num_layers - 1}", checkpoint)
        self.labels = ["O"] + [f"I-{label}" for label in labels]
        tag_weight, tag_bias = weights["hidden2tag.weight"], weights.get("hidden2tag.bias")
        hidden = int(self.encoder.config.hidden_size)
        if (
            tuple(tag_weight.shape) != (len(self.labels), hidden)
            or tag_bias is None
            or tag_bias.numel() != len(self.labels)
        ):
            raise InputError(
                f"comet: hidden2tag has shape {tuple(tag_weight.shape)}, not ({len(self.labels)}, {hidden}) with a bias",
                checkpoint,
            )
        tagger = torch.nn.Linear(hidden, len(self.labels))
        with torch.no_grad():
            tagger.weight.copy_(weights["hidden2tag.weight"].float())
            tagger.bias.copy_(weights["hidden2tag.bias"].float())
        return tagger

    @staticmethod
    def _estimator(weights: dict, hparams: dict, checkpoint: str, kind: str, hidden: int):
        """COMET's ``FeedForward`` (``estimator.ff.K``): Linear, activation, dropout per hidden
        size, a final Linear to one unit, then ``final_activation`` if any."""
        import torch
        from torch import nn

        def activation(name: str) -> nn.Module:  # names checked by check_hparams
            return getattr(nn, name.title())()

        linear = sorted(
            (int(k.split(".")[2]), v)
            for k, v in weights.items()
            if k.startswith("estimator.ff.") and k.endswith(".weight")
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
        if self.kind == "xcomet_metric":  # the error tagger's layer
            self._word = layers[self.word_layer]
        if self.pool == "default":  # COMET's "sentemb": the top layer's <s>, whatever the mix
            self._top = layers[-1]
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

    #: the most sentence embeddings kept between calls (160 MB for XLM-R large's 1,024 dimensions)
    cache_size = 40_000

    def embed(self, texts: Sequence[str], stack: bool = True):
        """float32[len(texts), H] pooled sentence embeddings (regression models), each distinct
        text encoded once per call (and kept for the next call while fewer than
        :attr:`cache_size` are held), in batches sorted by length; ``stack=False``: only encode
        and keep them (None)."""
        import torch

        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if len(self._cache) + len(todo) > self.cache_size:
            self._cache = {}
            todo = list(dict.fromkeys(texts))
        tokens = self.tokens(todo) if todo else []
        order = sorted(range(len(todo)), key=lambda k: len(tokens[k]))
        with torch.inference_mode():
            for start in range(0, len(order), self.batch):
                rows = order[start : start + self.batch]
                embeddings, ids, mask = self._mixed([tokens[k] for k in rows])
                pooled = (self._top[:, 0, :] if self.pool == "default" else self._pool(embeddings, ids, mask)).cpu()
                for k, vector in zip(rows, pooled):
                    self._cache[todo[k]] = vector
        if not stack:
            return None
        return torch.stack([self._cache[t] for t in texts]) if len(texts) else torch.zeros(0)

    def estimate(self, src, mt, ref=None) -> np.ndarray:
        """float64[N] the estimator on sentence embeddings float32[N, H] (regression models)."""
        import torch

        if ref is None:
            features = torch.cat((mt, src, mt * src, torch.abs(mt - src)), dim=1)
        else:
            features = torch.cat((mt, ref, mt * ref, torch.abs(mt - ref), mt * src, torch.abs(mt - src)), dim=1)
        with torch.inference_mode():
            out = []
            for start in range(0, len(features), 65536):
                out.append(self.estimator(features[start : start + 65536].to(self.device)).view(-1).double().cpu())
        return torch.cat(out).numpy() if out else np.zeros(0)

    def estimate_pairs(self, embeddings, source, hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        """float64[P] COMET of hypothesis ``embeddings[hyp[k]]`` against pseudo-reference
        ``embeddings[ref[k]]`` with the one ``source`` embedding float32[H] (a regression model's
        MBR utilities): the estimator's first layer split by its six inputs, so that the terms of
        the hypothesis alone (h, h·s, |h−s|) and of the reference alone (r) are computed once per
        text and only h·r and |h−r| per pair — a third of the first layer's work per pair, the
        same function (to float rounding)."""
        import torch

        first, rest = self.estimator[0], self.estimator[1:]
        width = embeddings.shape[1]
        w_h, w_r, w_hr, w_dr, w_hs, w_ds = first.weight.split(width, dim=1)
        emb = embeddings.to(self.device)
        src = source.to(self.device).reshape(1, -1)
        hyp_t = torch.as_tensor(hyp, dtype=torch.long, device=self.device)
        ref_t = torch.as_tensor(ref, dtype=torch.long, device=self.device)
        out = []
        with torch.inference_mode():
            alone = emb @ w_h.T + (emb * src) @ w_hs.T + torch.abs(emb - src) @ w_ds.T + first.bias
            as_reference = emb @ w_r.T
            pairwise = torch.cat((w_hr, w_dr), dim=1).T
            for start in range(0, len(hyp_t), 65536):
                h, r = hyp_t[start : start + 65536], ref_t[start : start + 65536]
                eh, er = emb[h], emb[r]
                x = alone[h] + as_reference[r] + torch.cat((eh * er, torch.abs(eh - er)), dim=1) @ pairwise
                out.append(rest(x).view(-1).double().cpu())
        return torch.cat(out).numpy() if out else np.zeros(0)

    def _joint(self, parts: List[List[List[int]]]) -> List[List[int]]:
        """COMET's ``concat_sequences``: each part's pad ids removed (a text holding the literal
        pad string, ``<pad>``, loses those tokens as unbabel-comet's unpadding does), then
        ``<s> a </s></s> b </s>[</s></s> c </s>]`` per row (``[CLS] a [SEP] b [SEP]`` for
        encoders with one separator), cut at ``max_positions`` tokens where the parts are too
        long together."""
        joined = []
        special = 1 + len(parts) * self.separator
        between = [self.sep_id] * (self.separator - 1)
        pad = self.pad
        for row in range(len(parts[0])):
            inner = [[token for token in part[row] if token != pad][1:-1] for part in parts]
            sequence = [self.cls_id] + inner[0] + [self.sep_id]
            for piece in inner[1:]:
                sequence = sequence + between + piece + [self.sep_id]
            if sum(len(piece) for piece in inner) > self.max_positions - special:
                sequence = sequence[: self.max_positions]
            joined.append(sequence)
        return joined

    def unified(self, parts: List[List[List[int]]], tags: Optional[List[np.ndarray]] = None) -> np.ndarray:
        """float64[N] the estimator on the mixed ``<s>`` state of the joint sequences of ``parts``
        (token ids of hypothesis, source[, reference]) (unified models); with ``tags`` (xCOMET)
        also the error tags' probabilities float32[len(hypothesis), 4] of every hypothesis
        token, appended to it in order."""
        import torch

        sequences = self._joint(parts)
        first = [sum(1 for token in mt if token != self.pad) for mt in parts[0]]  # <s> mt </s>, unpadded
        order = sorted(range(len(sequences)), key=lambda k: len(sequences[k]))
        out = np.zeros(len(sequences))
        probs: List[Any] = [None] * len(sequences)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch):
                rows = order[start : start + self.batch]
                embeddings, _, _ = self._mixed([sequences[k] for k in rows], [first[k] for k in rows])
                out[rows] = self.estimator(embeddings[:, 0, :]).view(-1).double().cpu().numpy()
                if tags is not None and self.tagger is not None:
                    soft = torch.softmax(self.tagger(self._word), dim=2).cpu().numpy()
                    for k, row in zip(rows, soft):
                        probs[k] = row[: len(parts[0][k])]
        if tags is not None:
            tags.extend(probs)
        return out

    def mqm(self, probs: Sequence[np.ndarray]) -> np.ndarray:
        """float64[N] xCOMET's MQM score of each hypothesis from its tokens' tag probabilities:
        the argmax tag of each token, a span from an I- tag through the tokens up to the next O
        (its severity the first token's; a span still open at the end is not counted, as in
        unbabel-comet's ``decode``), 1/5/10 per minor/major/critical span, capped at 25, as
        (25 − penalty) / 25."""
        scores = np.zeros(len(probs))
        for k, token_probs in enumerate(probs):
            penalty, severity = 0, None
            for tag in np.argmax(token_probs, axis=1):
                label = self.labels[int(tag)]
                if label.startswith("I") and severity is None:
                    severity = label[2:]
                elif label == "O" and severity is not None:
                    penalty, severity = penalty + MQM_PENALTY[severity], None
            scores[k] = (MQM_CAP - min(penalty, MQM_CAP)) / MQM_CAP
        return scores

    def joint_scores(self, mt: List[List[int]], src: List[List[int]], ref: Optional[List[List[int]]]) -> np.ndarray:
        """float64[N] a unified model's or xCOMET's scores of token ids of hypotheses, sources and
        (None: reference-free) references, as unbabel-comet's ``predict_step``: unified, one
        pass of the hypothesis joined with what the checkpoint reads of source and reference
        (``input_segments``; mt, src, ref in that order whatever the order listed: (mt, src)
        reference-free, (mt, ref) for a model that reads no source), or with both the mean of
        the (mt, src), (mt, ref), (mt, src, ref) passes; xCOMET,
        the passes' scores (at most 1) weighted 0.12/0.33/0.33 and the MQM score of the
        passes' tag probabilities (weighted 0.1667/0.3333/0.5) weighted 0.22 — reference-free,
        the (mt, src) pass's score weighted 0.78 and its MQM score 0.22."""
        xcomet = self.kind == "xcomet_metric"
        use_src, use_ref = "src" in self.inputs, ref is not None and "ref" in self.inputs
        if not (use_src and use_ref):  # one pass: mt, then src and ref where read, in that order
            tags: List[np.ndarray] = []
            parts: List[List[List[int]]] = [mt]
            parts += [src] if use_src else []
            parts += [ref] if use_ref and ref is not None else []
            score = self.unified(parts, tags if xcomet else None)
            if not xcomet:
                return score
            weights = XCOMET_SCORE_WEIGHTS
            return np.minimum(score, 1.0) * sum(weights[:3]) + self.mqm(tags) * weights[3]
        assert ref is not None  # use_ref
        passes = ([mt, src], [mt, ref], [mt, src, ref])
        tag_sets: List[List[np.ndarray]] = [[], [], []]
        scores = [self.unified(joined, tag_sets[i] if xcomet else None) for i, joined in enumerate(passes)]
        if not xcomet:
            return (scores[0] + scores[1] + scores[2]) / 3.0
        regression = sum(np.minimum(s, 1.0) * w for s, w in zip(scores, XCOMET_SCORE_WEIGHTS[:3]))
        mixed = [
            tag_sets[0][k] * XCOMET_SPAN_WEIGHTS[0]
            + tag_sets[1][k] * XCOMET_SPAN_WEIGHTS[1]
            + tag_sets[2][k] * XCOMET_SPAN_WEIGHTS[2]
            for k in range(len(mt))
        ]
        return regression + self.mqm(mixed) * XCOMET_SCORE_WEIGHTS[3]

    # --- scores ---

    @property
    def uses_reference(self) -> bool:
        """Whether scores read a reference (regression; unified with ``ref`` among its inputs)."""
        return self.kind == "regression_metric" or (self.kind in JOINT and "ref" in self.inputs)

    def score(
        self, sources: Sequence[str], hypotheses: Sequence[str], references: Optional[Sequence[str]]
    ) -> np.ndarray:
        """float64[N] segment scores of ``hypotheses[k]`` with ``sources[k]`` (and
        ``references[k]``; None: reference-free), as unbabel-comet's ``predict``.

        Raises:
            InputError: no references for a regression model (it reads one)."""
        if not len(hypotheses):
            return np.zeros(0)
        if self.kind in JOINT:
            ref = None if references is None else self.tokens(references)
            return self.joint_scores(self.tokens(hypotheses), self.tokens(sources), ref)
        mt = self.embed(hypotheses)
        src = self.embed(sources)
        if self.kind == "referenceless_regression_metric":
            return self.estimate(src, mt)
        if references is None:
            raise InputError("comet: regression_metric scores against a reference: none was given", self.directory)
        return self.estimate(src, mt, self.embed(references))

    def fingerprint(self) -> str:
        """A short digest of hparams.yaml and the checkpoint's size (for signatures)."""
        with open(os.path.join(self.directory, "hparams.yaml"), "rb") as handle:
            digest = hashlib.sha256(handle.read() + str(os.path.getsize(self.checkpoint)).encode()).hexdigest()
        return digest[:10]
