"""One class per COMET model kind (``class_identifier``), as unbabel-comet has one per model,
over the shared encoder of :class:`~rerank.metrics.comet_model.CometModel`:
:class:`RegressionMetric` (COMET-DA: pooled sentence embeddings of hypothesis, source and
reference through the estimator), :class:`ReferencelessRegressionMetric` (COMET-QE: no
reference), :class:`UnifiedMetric` (COMET-22's and CometKiwi's class: the hypothesis encoded
jointly with source and reference) and :class:`XCometMetric` (a unified model with an error
tagger and MQM).  :func:`load_comet` reads a checkpoint as its class (:data:`COMET_MODELS`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Type

import numpy as np

from rerank.errors import InputError
from rerank.metrics.comet_checks import shown
from rerank.metrics.comet_model import Checkpoint, CometModel, read_checkpoint
from rerank.progress import progress_bar, showing_progress

#: xCOMET's MQM penalty per error span of each severity (and the cap of a sentence's sum)
MQM_PENALTY, MQM_CAP = {"minor": 1, "major": 5, "critical": 10}, 25
#: xCOMET's weights of its three passes' scores and of the MQM score: (mt, src), (mt, ref),
#: (mt, src, ref), MQM; and of the passes' tag probabilities (unbabel-comet 2.2.7's constants)
XCOMET_SCORE_WEIGHTS, XCOMET_SPAN_WEIGHTS = (0.12, 0.33, 0.33, 0.22), (0.1667, 0.3333, 0.5)


class RegressionMetric(CometModel):
    """``regression_metric`` (COMET-DA, wmt20/22-comet-da): the estimator on pooled sentence
    embeddings of hypothesis, reference and source; each distinct text is encoded once and
    cached, so MBR's N×N utilities cost N + 1 encoder calls (:meth:`estimate_pairs`)."""

    kind = "regression_metric"
    sentence_embeddings = True

    @property
    def uses_reference(self) -> bool:
        return True

    def score(
        self, sources: Sequence[str], hypotheses: Sequence[str], references: Optional[Sequence[str]]
    ) -> np.ndarray:
        """float64[N] (the base class); raises InputError without references."""
        if not len(hypotheses):
            return np.zeros(0)
        mt = self.embed(hypotheses)
        src = self.embed(sources)
        if not self.uses_reference:
            return self.estimate(src, mt)
        if references is None:
            raise InputError("comet: regression_metric scores against a reference: none was given", self.directory)
        return self.estimate(src, mt, self.embed(references))

    def pair_scores(self, texts: Sequence[str], source: str, hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        embeddings = self.embed(list(texts) + [source])
        return self.estimate_pairs(embeddings[:-1], embeddings[-1], hyp, ref)

    def prefetch(self, texts: Sequence[str]) -> None:
        """Encode and cache ``texts`` at once, sorted by length across segments (less padding),
        while they fit half the cache."""
        if len(texts) <= self.cache_size // 2:
            self.embed(texts, stack=False)

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
        batches = range(0, len(order), self.batch)
        with torch.inference_mode(), self.work.measure("encoder", len(todo)):
            for start in progress_bar(batches, desc="comet: encoder", unit="batch", enabled=showing_progress()):
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
        with torch.inference_mode(), self.work.measure("estimator", len(features)):
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
        with torch.inference_mode(), self.work.measure("estimator", len(hyp_t)):
            alone = emb @ w_h.T + (emb * src) @ w_hs.T + torch.abs(emb - src) @ w_ds.T + first.bias
            as_reference = emb @ w_r.T
            pairwise = torch.cat((w_hr, w_dr), dim=1).T
            for start in range(0, len(hyp_t), 65536):
                h, r = hyp_t[start : start + 65536], ref_t[start : start + 65536]
                eh, er = emb[h], emb[r]
                x = alone[h] + as_reference[r] + torch.cat((eh * er, torch.abs(eh - er)), dim=1) @ pairwise
                out.append(rest(x).view(-1).double().cpu())
        return torch.cat(out).numpy() if out else np.zeros(0)


class ReferencelessRegressionMetric(RegressionMetric):
    """``referenceless_regression_metric`` (COMET-QE): the estimator on hypothesis and source
    embeddings alone."""

    kind = "referenceless_regression_metric"

    @property
    def uses_reference(self) -> bool:
        return False


class UnifiedMetric(CometModel):
    """``unified_metric`` (COMET-22's UniTE class, CometKiwi): the estimator on the mixed ``<s>``
    state of the hypothesis encoded jointly with what ``input_segments`` reads of source and
    reference (:meth:`joint_scores`)."""

    kind = "unified_metric"

    @staticmethod
    def sentence_layer(hparams: Dict[str, Any]) -> Any:
        """``sent_layer`` (unified models' name for it), else ``layer``."""
        return hparams.get("sent_layer", hparams.get("layer", "mix"))

    @property
    def uses_reference(self) -> bool:
        return "ref" in self.inputs

    def score(
        self, sources: Sequence[str], hypotheses: Sequence[str], references: Optional[Sequence[str]]
    ) -> np.ndarray:
        if not len(hypotheses):
            return np.zeros(0)
        ref = None if references is None else self.tokens(references)
        return self.joint_scores(self.tokens(hypotheses), self.tokens(sources), ref)

    def pair_scores(self, texts: Sequence[str], source: str, hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        distinct = list(dict.fromkeys(texts))
        tokens = dict(zip(distinct, self.tokens(distinct)))
        src = self.tokens([source])[0]
        mt = [tokens[texts[i]] for i in hyp]
        pr = [tokens[texts[j]] for j in ref]
        return self.joint_scores(mt, [src] * len(hyp), pr)

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
        batches = range(0, len(order), self.batch)
        with torch.inference_mode(), self.work.measure("joint", len(sequences)):
            for start in progress_bar(batches, desc="comet: encoder", unit="batch", enabled=showing_progress()):
                rows = order[start : start + self.batch]
                embeddings, _, _ = self._mixed([sequences[k] for k in rows], [first[k] for k in rows])
                out[rows] = self.estimator(embeddings[:, 0, :]).view(-1).double().cpu().numpy()
                if tags is not None:
                    for k, row in zip(rows, self._tag_probabilities()):
                        probs[k] = row[: len(parts[0][k])]
        if tags is not None:
            tags.extend(probs)
        return out

    def passes(
        self, mt: List[List[int]], src: List[List[int]], ref: Optional[List[List[int]]]
    ) -> List[List[List[List[int]]]]:
        """The joint sequences' parts a score reads, as unbabel-comet's ``predict_step``: one
        pass of the hypothesis joined with what the checkpoint reads of source and reference
        (``input_segments``; mt, src, ref in that order whatever the order listed: (mt, src)
        reference-free, (mt, ref) for a model that reads no source), or with both the three
        passes (mt, src), (mt, ref), (mt, src, ref)."""
        use_src, use_ref = "src" in self.inputs, ref is not None and "ref" in self.inputs
        if use_src and use_ref and ref is not None:
            return [[mt, src], [mt, ref], [mt, src, ref]]
        parts: List[List[List[int]]] = [mt]
        parts += [src] if use_src else []
        parts += [ref] if use_ref and ref is not None else []
        return [parts]

    def joint_scores(self, mt: List[List[int]], src: List[List[int]], ref: Optional[List[List[int]]]) -> np.ndarray:
        """float64[N] the scores of token ids of hypotheses, sources and (None: reference-free)
        references: the one pass's (:meth:`passes`), or the mean of the three passes'."""
        scores = [self.unified(parts) for parts in self.passes(mt, src, ref)]
        return scores[0] if len(scores) == 1 else (scores[0] + scores[1] + scores[2]) / 3.0

    def _tag_probabilities(self) -> np.ndarray:
        """float32[B, T, 4] the error tags' probabilities over the last encoder call's tokens."""
        raise NotImplementedError(f"{self.kind} tags no errors")


class XCometMetric(UnifiedMetric):
    """``xcomet_metric`` (xCOMET): a unified model whose error tagger (``hidden2tag`` over layer
    ``word_layer``) marks minor, major and critical spans; its score mixes the passes' scores
    with the MQM score of the tags (:meth:`UnifiedMetric.joint_scores`)."""

    kind = "xcomet_metric"

    @staticmethod
    def input_segments(hparams: Dict[str, Any]) -> List[str]:
        """xCOMET reads all three, whatever ``input_segments`` says."""
        return ["mt", "src", "ref"]

    def _heads(self, weights: dict, hparams: dict, checkpoint: str) -> None:
        self.tagger = self._tagger(weights, hparams, checkpoint)

    def _place_heads(self) -> None:
        self.tagger = self.tagger.to(self.device).eval()

    def _top_layer_read(self) -> int:
        return max(super()._top_layer_read(), self.word_layer)  # the error tags read their own layer

    def _keep_layers(self, layers: List[Any]) -> None:
        super()._keep_layers(layers)
        self._word = layers[self.word_layer]

    def _tag_probabilities(self) -> np.ndarray:
        import torch

        return torch.softmax(self.tagger(self._word), dim=2).cpu().numpy()

    def joint_scores(self, mt: List[List[int]], src: List[List[int]], ref: Optional[List[List[int]]]) -> np.ndarray:
        """float64[N] xCOMET's scores, as unbabel-comet's ``predict_step``: the passes' scores
        (:meth:`UnifiedMetric.passes`, each at most 1) weighted 0.12/0.33/0.33 and the MQM score
        of the passes' tag probabilities (weighted 0.1667/0.3333/0.5) weighted 0.22 —
        reference-free, the (mt, src) pass's score weighted 0.78 and its MQM score 0.22."""
        passes = self.passes(mt, src, ref)
        tag_sets: List[List[np.ndarray]] = [[] for _ in passes]
        scores = [self.unified(parts, tag_sets[i]) for i, parts in enumerate(passes)]
        if len(passes) == 1:
            weights = XCOMET_SCORE_WEIGHTS
            return np.minimum(scores[0], 1.0) * sum(weights[:3]) + self.mqm(tag_sets[0]) * weights[3]
        regression = sum(np.minimum(s, 1.0) * w for s, w in zip(scores, XCOMET_SCORE_WEIGHTS[:3]))
        mixed = [
            tag_sets[0][k] * XCOMET_SPAN_WEIGHTS[0]
            + tag_sets[1][k] * XCOMET_SPAN_WEIGHTS[1]
            + tag_sets[2][k] * XCOMET_SPAN_WEIGHTS[2]
            for k in range(len(mt))
        ]
        return regression + self.mqm(mixed) * XCOMET_SCORE_WEIGHTS[3]

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


#: the model classes rerank computes, by ``class_identifier``
COMET_MODELS: Dict[str, Type[CometModel]] = {
    cls.kind: cls for cls in (RegressionMetric, ReferencelessRegressionMetric, UnifiedMetric, XCometMetric)
}


def load_comet(
    directory: str, encoder: str = "", batch: int = 64, device: str = "auto", dtype: str = "float32"
) -> CometModel:
    """The COMET checkpoint ``directory`` (or its ``.ckpt`` file) as the class its
    ``class_identifier`` names (:data:`COMET_MODELS`), ready to score; the other arguments as
    :class:`~rerank.metrics.comet_model.CometModel`'s.

    Raises:
        InputError: one line each — as :func:`~rerank.metrics.comet_model.read_checkpoint`, an
            unknown or unsupported model class (COMET's ranking models), and as the class.
    """
    loaded: Checkpoint = read_checkpoint(directory)
    kind = str(loaded.hparams.get("class_identifier", ""))
    if kind not in COMET_MODELS:
        raise InputError(
            f"comet: unknown class_identifier {shown(kind)} (rerank reads {', '.join(COMET_MODELS)})",
            loaded.hparams_file,
        )
    return COMET_MODELS[kind](loaded, encoder, batch, device, dtype)
