"""COMET-family metrics run by rerank itself (Rei et al. 2020, "COMET: A Neural Framework for MT
Evaluation"; Rei et al. 2022, "CometKiwi"): checkpoints of unbabel-comet 2.x read from their
directory and computed with transformers' encoders (XLM-R, XLM-R XL, BERT, MiniLM, RemBERT), in every role — evaluation and
significance (``--metrics comet:DIR,source=FILE``), tuning objective (``--metric comet:DIR,…``,
``0.5*bleu+0.5*comet:DIR,…``), MBR utility (``rerank mbr --metric comet:DIR,source=FILE``,
``mbr:comet:DIR``) and the reference-free re-ranking feature (``cometkiwi:DIR``: a scorer of
:mod:`rerank.features.quality`).

unbabel-comet pins numpy < 2 and transformers < 5, so it cannot share rerank's environment: it
is a peer (its own venv; ``scripts/comet_peer.py`` saves its numbers) and this module follows
its 2.2.7 code, which it equals within 1e-5 on the tiny checkpoints of the tests and on 60
configurations drawn over its option space (tests/core/test_comet_random.py):

* a checkpoint directory holds ``checkpoints/model.ckpt`` (a PyTorch Lightning checkpoint:
  ``state_dict`` and ``hyper_parameters``) and ``hparams.yaml`` (``class_identifier``,
  ``pretrained_model``…); the checkpoint is read with ``torch.load(weights_only=True)`` — a
  file that needs code to unpickle is refused, never run;
* the encoder's config and tokenizer come from ``encoder=DIR``, else from
  ``pretrained_model`` as a local directory or a model in the Hugging Face cache (nothing is
  downloaded); its weights from the checkpoint (``encoder.model.*``);
* every layer's hidden states (embeddings included) are mixed by the layer-wise attention
  (``layer: mix``: sparsemax, or softmax, of the scalar weights, times gamma; with
  ``layer_norm`` each layer normalised per sentence over its unmasked tokens) or one layer is
  taken;
* ``regression_metric`` (COMET-DA, e.g. wmt22-comet-da): each of source, hypothesis and
  reference encoded alone and pooled (``avg`` over unmasked tokens, ``max``, ``cls``);
  the estimator (a feed-forward net) reads ``[h; r; h·r; |h−r|; h·s; |h−s|]``;
* ``referenceless_regression_metric`` (COMET-QE): ``[h; s; h·s; |h−s|]``;
* ``unified_metric`` (CometKiwi, UniTE-style): the hypothesis and the source (and the reference)
  encoded as one sequence ``<s> h </s></s> s </s>`` (``[CLS] h [SEP] s [SEP]`` for BERT and
  RemBERT; pad tokens of each part removed first); the estimator reads the mixed ``<s>``
  state; with a reference the score is the mean of the (h, s), (h, r) and (h, s, r) passes;
* ``xcomet_metric`` (xCOMET): the unified passes' scores (each at most 1) weighted 0.12, 0.33,
  0.33 plus 0.22 × an MQM score: each hypothesis token tagged O / minor / major / critical by
  ``hidden2tag`` on layer ``word_layer`` (the passes' probabilities weighted 0.1667, 0.3333,
  0.5), runs of error tags decoded into spans as unbabel-comet decodes them, 1/5/10 per span,
  capped at 25, as (25 − penalty) / 25; reference-free, the (h, s) pass weighted 0.78 and its
  MQM score 0.22.  XLM-R XL encoders (``encoder_model: XLM-RoBERTa-XL``) load too.

Speed: each distinct sentence of a call is encoded once (sentence embeddings of the
regression models), in batches sorted by length, so MBR's N×N utilities of a list cost N + 1
encoder calls and N² passes of the small estimator (as mbrs does), whose first layer is split
by its six inputs so that only h·r and |h−r| are computed per pair; the texts of up to 100
segments are encoded together (:meth:`CometUtility.prefetch`); unified models encode every
(hypothesis, pseudo-reference) pair jointly, N² encoder calls.  Statistics are ``[score, 1]``
per segment: the corpus score is the mean segment score (COMET's system score); bootstrap
resampling and approximate randomisation work on segment means as for chrF and ``seg:``.

Needs the ``[comet]`` extra (torch, transformers, sentencepiece, PyYAML).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from rerank.argtypes import positive_int
from rerank.config import option
from rerank.devices import set_torch_threads
from rerank.errors import InputError
from rerank.metrics.base import METRICS, Signature
from rerank.metrics.comet_kinds import RegressionMetric, load_comet
from rerank.metrics.comet_model import CometModel
from rerank.metrics.segment import MeanOfSegments
from rerank.metrics.utility import SourcedUtility
from rerank.textio import read_lines


class _CometMetric(MeanOfSegments):
    """What ``comet:`` and ``cometkiwi:`` share: the checkpoint (loaded on first use), the
    sources (``source=FILE`` or :meth:`with_sources`), statistics ``[score, 1]`` per segment."""

    model: str
    source: str
    encoder: str
    batch: int
    device: str
    dtype: str
    threads: Optional[int]
    #: whether the metric scores against references
    reference_based = True
    reads_source = True
    decimals = 4
    interpolation_scale = 100.0  # 0-1 scores: ×100 beside BLEU and chrF in an interpolation

    @dataclass
    class Config:
        model: str = option(
            "", "a COMET checkpoint directory (checkpoints/model.ckpt + hparams.yaml)", positional=True, path=True
        )
        source: str = option("", "the source sentences, one per segment (plain text)", path="file")
        encoder: str = option(
            "", "the encoder's directory (config + tokenizer); default: hparams' pretrained_model", path=True
        )
        batch: int = option(64, "sentences per encoder call (sorted by length: little padding)", type=positive_int)
        device: str = option("auto", "torch device (auto: CUDA where there is one; cpu, cuda, cuda:1)")
        dtype: str = option(
            "float32",
            "the encoder's dtype (float32, float16, bfloat16; int8: its linear layers quantised, on the CPU, "
            "about 1.5x faster, scores moved by 0.01 median, 0.06 at most, on random weights)",
        )
        threads: Optional[int] = option(
            None, "torch CPU threads (default: --threads, else the CPUs this process may use)", type=positive_int
        )

    def setup(self) -> None:
        if not self.model:
            raise InputError(f"{self.name}: give the checkpoint: {self.name}:DIR (a COMET checkpoint directory)")
        if not os.path.exists(self.model):
            raise InputError(f"{self.name}: no such checkpoint directory", self.model)
        self._model: Optional[CometModel] = None
        self.load_seconds = 0.0
        self._sources: Optional[List[str]] = None

    @property
    def loaded(self) -> Optional[CometModel]:
        """The checkpoint if :meth:`comet` has loaded it, else None."""
        return self._model

    def comet(self) -> CometModel:
        """The checkpoint, loaded on first use as its kind's class (:func:`load_comet`)."""
        if self._model is None:
            began = time.perf_counter()
            self._model = load_comet(self.model, self.encoder, self.batch, self.device, self.dtype)
            if self.threads:
                set_torch_threads(self.threads)
            self.check_kind(self._model)
            self.load_seconds = time.perf_counter() - began
        return self._model

    def check_kind(self, model: CometModel) -> None:
        """Raise :class:`InputError` for a checkpoint of the other mode."""

    @property
    def has_sources(self) -> bool:
        """Whether the sources are known: ``source=FILE`` or given with :meth:`with_sources`."""
        return bool(self.source) or self._sources is not None

    def with_sources(self, sources: Sequence[str]) -> "_CometMetric":
        """This metric with the source sentences held in memory (one per segment)."""
        self._sources = list(sources)
        return self

    def all_sources(self) -> List[str]:
        """The source sentences (``source=FILE``, read once, or those given).

        Raises:
            InputError: none given, an unreadable file.
        """
        if self._sources is None:
            if not self.source:
                raise InputError(f"{self.name}: needs the source sentences: {self.name}:DIR,source=FILE")
            self._sources = read_lines(self.source)
        return self._sources

    def sources(self, count: int) -> List[str]:
        """The ``count`` source sentences.

        Raises:
            InputError: none given, or a count that is not ``count``.
        """
        sources = self.all_sources()
        if len(sources) != count:
            where = self.source or "the sources given"
            raise InputError(f"{self.name}: {len(sources)} source sentences for {count} segments", where)
        return sources

    def segment_scores(self, sources, hypotheses, streams) -> np.ndarray:
        """float64[N]: the highest score over the reference streams (reference-free: one score)."""
        model = self.comet()
        if not model.uses_reference:
            return model.score(sources, hypotheses, None)
        return np.max([model.score(sources, hypotheses, stream) for stream in streams], axis=0)

    def stats(self, hypotheses, references):
        """float64[N, 2] [score, 1], the sources aligned with ``hypotheses``.

        Raises:
            InputError: no sources, or not one per hypothesis; a checkpoint that cannot load."""
        streams = self.streams(references)
        sources = self.sources(len(streams[0]))
        if len(hypotheses) != len(sources):
            raise InputError(f"{self.name}: {len(hypotheses)} hypotheses for {len(sources)} source sentences")
        scores = self.segment_scores(sources, list(hypotheses), streams)
        return np.column_stack([scores, np.ones(len(scores))])

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        """float64[M, 2] rows of hypotheses of segments ``segment`` (sources and references picked by segment)."""
        streams = self.streams(references)
        sources = self.sources(len(streams[0]))
        segment = np.asarray(segment, dtype=np.int64)
        picked = [[stream[s] for s in segment] for stream in streams]
        scores = self.segment_scores([sources[s] for s in segment], list(hypotheses), picked)
        return np.column_stack([scores, np.ones(len(scores))])

    def sidecars(self, path: str) -> List[str]:
        """The source file and hparams.yaml: inputs that key the tuning cache."""
        return [p for p in (self.source, os.path.join(self.model, "hparams.yaml")) if p]

    def signature(self) -> str:
        model = self.comet()
        fields = [
            ("model", os.path.basename(os.path.normpath(self.model))),
            ("class", model.kind),
            ("ckpt", model.fingerprint()),
            ("src", os.path.basename(self.source) if self.source else "given"),
            ("nrefs", self.num_refs if model.uses_reference else 0),
            *([("dtype", self.dtype)] if self.dtype != "float32" else []),
            ("", "rerank"),
        ]
        return str(Signature(self.name.split(":")[0], fields))


@METRICS.register("comet")
class CometMetric(_CometMetric):
    """``comet:DIR,source=FILE``: a reference-based COMET checkpoint (regression_metric, a
    unified_metric with references, xcomet_metric) — module docstring.  Statistics
    float64[N, 2] = [score, 1]; with several references the highest score (COMET defines one).

    Raises:
        InputError: no checkpoint, no sources, a reference-free checkpoint (``cometkiwi:``).
    """

    name = "comet"

    @property
    def label(self) -> str:
        return "COMET"

    def check_kind(self, model: CometModel) -> None:
        if not model.uses_reference:
            raise InputError(f"comet: {model.kind} reads no reference: score it with cometkiwi:DIR", self.model)

    def utility(self) -> "CometUtility":
        """COMET of hypothesis against pseudo-reference with the segment's source: ``MBRCOMET``."""
        return CometUtility("MBRCOMET", self)


@METRICS.register("cometkiwi")
class CometKiwiMetric(_CometMetric):
    """``cometkiwi:DIR,source=FILE``: a reference-free (QE) checkpoint — CometKiwi
    (unified_metric of mt and src) or COMET-QE (referenceless_regression_metric); references
    are not read.  Statistics float64[N, 2] = [score, 1].  It has no MBR utility (a score
    without a reference ranks a list by itself: use it as the ``cometkiwi:`` feature).

    Raises:
        InputError: no checkpoint, no sources, a reference-based regression checkpoint.
    """

    name = "cometkiwi"
    reference_based = False

    @property
    def label(self) -> str:
        return "CometKiwi"

    def check_kind(self, model: CometModel) -> None:
        if model.kind == "regression_metric":
            raise InputError("cometkiwi: regression_metric needs a reference: score it with comet:DIR", self.model)
        if not model.sentence_embeddings and "src" not in model.inputs:  # unbabel-comet refuses it without refs too
            raise InputError(
                f"cometkiwi: this {model.kind} reads no source (input_segments {', '.join(model.inputs)}): it "
                "scores against references: score it with comet:DIR",
                self.model,
            )
        model.inputs = [k for k in model.inputs if k != "ref"]  # reference-free: the (mt, src) pass alone

    def segment_scores(self, sources, hypotheses, streams) -> np.ndarray:
        return self.comet().score(sources, hypotheses, None)


class CometUtility(SourcedUtility):
    """MBR's COMET utility u(h, r | s): each distinct text of a segment embedded once, the
    estimator on every pair (regression models); unified models encode each pair jointly."""

    def __init__(self, column: str, metric: CometMetric):
        super().__init__(column)
        self.metric = metric

    @property
    def has_sources(self) -> bool:
        """Whether the metric was given its sources (``source=FILE`` or in memory)."""
        return self.metric.has_sources

    def set_sources(self, sources: Sequence[str]) -> None:
        if not self.metric.has_sources:
            self.metric.with_sources(sources)

    def accounting(self) -> Dict[str, Any]:
        """The work of the COMET model so far: {"load_seconds", "seconds" {part: seconds},
        "counts" {part: items}} of its parts — ``encoder`` (texts encoded, each distinct text of
        a segment once), ``estimator`` (rows through the estimator: MBR's pairs, or one a
        candidate with an aggregate reference) or ``joint`` (unified models: a pair's joint
        sequence through both); {} before the model is loaded."""
        model = self.metric.loaded
        if model is None:
            return {}
        seconds = model.work.rounded()
        return {
            "load_seconds": round(self.metric.load_seconds, 3),
            "seconds": seconds,
            "counts": dict(model.work.counts),
        }

    def prefetch(self, texts: Sequence[str], segments: Sequence[int]) -> None:
        """Encode the texts of several segments (and their sources) at once, sorted by length
        across the segments: less padding than a segment at a time (regression models, while
        they fit the model's cache)."""
        model = self.metric.comet()
        if not model.sentence_embeddings or not self.has_sources:
            return
        sources = self.metric.all_sources()
        model.prefetch(
            list(dict.fromkeys(texts)) + [sources[self.offset + s] for s in segments if self.offset + s < len(sources)]
        )

    def aggregate_utilities(
        self, segment: int, candidates: Sequence[str], references: Sequence[str], weights: np.ndarray
    ) -> np.ndarray:
        """COMET of each candidate against aggregate references — weighted means of the
        pseudo-references' sentence embeddings — with segment ``segment``'s source: ``weights``
        float64[R] (summing to 1) gives one aggregate and float64[n] utilities (reference
        aggregation, Vamvas & Sennrich 2024; mbrs' ``aggregate_mbr`` for COMET: N estimator
        passes instead of N·R); float64[R, K] (columns summing to 1) gives K aggregates and
        float64[n, K] utilities (the centroids of centroid MBR, Deguchi et al. 2024).

        Raises:
            InputError: a unified model or xCOMET (they encode each pair jointly: no sentence
                embedding to average), no sources."""
        import torch

        model = self._regression("aggregate")
        source = self.segment_source(segment)
        embeddings = model.embed(list(candidates) + list(references) + [source])
        n, r = len(candidates), len(references)
        columns = np.asarray(weights, dtype=np.float32).reshape(r, -1)
        aggregates = torch.from_numpy(np.ascontiguousarray(columns.T)).to(embeddings.device) @ embeddings[n : n + r]
        values = np.stack(
            [model.estimate(embeddings[-1:].expand(n, -1), embeddings[:n], row.expand(n, -1)) for row in aggregates],
            axis=1,
        )
        return values[:, 0] if np.ndim(weights) == 1 else values

    def reference_embeddings(self, references: Sequence[str]) -> np.ndarray:
        """float32[R, H] the pseudo-references' sentence embeddings (what centroid MBR clusters).

        Raises:
            InputError: a model that encodes each pair jointly (no sentence embeddings)."""
        return self._regression("centroid").embed(list(references)).float().cpu().numpy()

    def _regression(self, algorithm: str) -> RegressionMetric:
        """The COMET model where it has sentence embeddings (a regression model).

        Raises:
            InputError: a unified model or xCOMET, naming ``algorithm``."""
        model = self.metric.comet()
        if not isinstance(model, RegressionMetric):
            raise InputError(
                f"mbr: {algorithm} averages sentence embeddings; this {model.kind} encodes each pair jointly and has "
                "none: use --algorithm exact"
            )
        return model

    def segment_source(self, segment: int) -> str:
        """The source of segment ``segment`` of the current block (its offset added).

        Raises:
            InputError: no sources, or none for that segment."""
        if not self.metric.has_sources:
            raise InputError("mbr: the comet utility needs the source sentences: comet:DIR,source=FILE (or --source)")
        sources = self.metric.all_sources()
        segment += self.offset
        if segment >= len(sources):
            raise InputError(f"mbr: segment {segment + 1} has no source sentence ({len(sources)} given)")
        return sources[segment]

    def segment_pairs(self, segment: int, texts: Sequence[str], hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        source = self.segment_source(segment)
        hyp, ref = np.asarray(hyp, dtype=np.int64), np.asarray(ref, dtype=np.int64)
        return self.metric.comet().pair_scores(list(texts), source, hyp, ref)
