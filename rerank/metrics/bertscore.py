"""BERTScore (Zhang et al. 2020, "BERTScore: Evaluating Text Generation with BERT") with the
bert-score library, as a metric in every role: evaluation and significance (``--metrics
bertscore:MODEL_DIR``), tuning objective (``--metric bertscore:MODEL_DIR``,
``0.5*bleu+0.5*bertscore:…``) and MBR utility (``rerank mbr --metric bertscore:MODEL_DIR``).

``bertscore:MODEL_DIR[,layers=L][,batch=B][,lowercase=1]``: a Hugging Face encoder directory
with its tokenizer (BERT, RoBERTa, XLM-R…; nothing is downloaded); ``layers``: the layer
whose token embeddings are matched (default: the model's last, as no tuned layer is known for
a model of one's own).  The score of a hypothesis is bert-score's F1 (greedy cosine matching
of token embeddings, no idf, no baseline rescaling); with several references its highest F1
(bert-score's rule).  Statistics are ``[F1, 1]`` per segment, so the corpus score is the mean
F1 — bert-score's system score — and bootstrap resampling and approximate randomisation
work on segment means, as for ``seg:`` scores.  As an MBR utility, each call encodes each
distinct sentence once (bert-score deduplicates) and matches every pair.

Needs the ``[bertscore]`` extra (bert-score, torch, transformers).
"""

from __future__ import annotations

import importlib.metadata
import os
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence

import numpy as np

from rerank.argtypes import non_negative_int, positive_int
from rerank.config import option
from rerank.devices import int8_linear_layers, set_torch_threads
from rerank.errors import InputError
from rerank.metrics.base import METRICS, Signature
from rerank.metrics.segment import MeanOfSegments
from rerank.metrics.utility import PairwiseUtility
from rerank.progress import progress_bar, showing_progress
from rerank.remote_code import NO_REMOTE_CODE, no_prompt, refuse_remote_code

#: model types whose position ids start after the padding index (RoBERTa's scheme): two of
#: their ``max_position_embeddings`` are not usable by text
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "longformer", "data2vec-text")


def usable_positions(config: Any) -> int:
    """The most tokens, special ones included, a sentence may have under the encoder's
    ``config``: ``max_position_embeddings``, less 2 for RoBERTa-style encoders (514 → 512), or
    512 where the configuration says nothing."""
    longest = int(getattr(config, "max_position_embeddings", 512) or 512)
    if getattr(config, "model_type", "") in OFFSET_POSITIONS:
        longest -= 2
    return longest


@METRICS.register("bertscore")
class BertScoreMetric(MeanOfSegments):
    """BERTScore F1 by bert-score (module docstring).  Statistics float64[N, 2] = [F1, 1].

    Raises:
        InputError: no model directory, one without a model and tokenizer (when first used),
            bert-score not installed.
    """

    name = "bertscore"
    decimals = 4
    interpolation_scale = 100.0  # 0-1 scores: ×100 beside BLEU and chrF in an interpolation
    # the settings' types, for the type checker (declared, with defaults and help, in Config)
    model: str
    layers: int
    batch: int
    dtype: str
    threads: Optional[int]

    @dataclass
    class Config:
        model: str = option("", "a Hugging Face encoder directory with its tokenizer", positional=True, path=True)
        layers: int = option(0, "the layer of the matched embeddings (0: the model's last)", type=non_negative_int)
        batch: int = option(64, "sentences per batch", type=positive_int)
        lowercase: bool = option(False, "lowercase before scoring")
        dtype: str = option(
            "float32",
            "the encoder's dtype: float32, or int8 (its linear layers quantised, on the CPU, about 1.5x faster; "
            "F1 moved by 0.002 at most on random weights)",
            choices=("float32", "int8"),
        )
        threads: Optional[int] = option(
            None, "torch CPU threads (default: --threads, else the CPUs this process may use)", type=positive_int
        )

    @property
    def label(self) -> str:
        return "BERTScore"

    def setup(self) -> None:
        if not self.model:
            raise InputError("bertscore: give the encoder: bertscore:MODEL_DIR (a Hugging Face model directory)")
        if not os.path.isdir(self.model):
            raise InputError("bertscore: not a model directory", self.model)
        self._scorer: Any = None

    def scorer(self) -> Any:
        """bert-score's ``BERTScorer`` for the model (built on first use).

        Raises:
            InputError: bert-score not installed, a directory transformers cannot load.
        """
        if self._scorer is None:
            try:
                from bert_score import BERTScorer
                from transformers import AutoConfig
                from transformers.utils import logging as transformers_logging
            except ImportError:
                raise InputError("bertscore: needs bert-score: pip install 'nbest-rerank[bertscore]'") from None
            transformers_logging.disable_progress_bar()  # rerank's own lines, not a bar per load
            set_torch_threads(self.threads)
            refuse_remote_code(self.model, "bertscore")  # bert-score's own from_pretrained takes no trust setting
            no_prompt()
            try:
                config = AutoConfig.from_pretrained(self.model, **NO_REMOTE_CODE)
                layers = self.layers or int(config.num_hidden_layers)
                if not 1 <= layers <= int(config.num_hidden_layers):
                    raise InputError(
                        f"bertscore: layers={layers}, but the model has {config.num_hidden_layers} layers "
                        f"(1..{config.num_hidden_layers}; 0: the last)",
                        self.model,
                    )
                scorer = BERTScorer(model_type=self.model, num_layers=layers, batch_size=self.batch)
            except InputError:
                raise
            except Exception as error:  # bert-score and transformers raise anything (AssertionError)
                message = f"bertscore: cannot load the model: {' '.join(str(error).split())[:200]}"
                raise InputError(message, self.model) from None
            if self.dtype == "int8":
                scorer._model = int8_linear_layers(scorer._model, "bertscore")
            tokenizer = scorer._tokenizer
            longest = usable_positions(config)
            if not tokenizer.model_max_length or tokenizer.model_max_length > longest:
                tokenizer.model_max_length = longest  # a tokenizer saved without it would overflow
            self._scorer = scorer
        return self._scorer

    def f1(self, hypotheses: Sequence[str], references: Sequence[str]) -> np.ndarray:
        """float64[N] bert-score F1 of ``hypotheses[k]`` against ``references[k]``; 0 where
        either is empty or blank, as bert-score defines it ("Empty candidate sentence
        detected; setting raw BERTscores to 0": its F1 is 0/0, set to 0) — computed here, as
        bert-score 0.3.13 fails on an empty text under transformers 5.  Pairs go to bert-score
        in blocks of max(2048, 16 × batch), with a progress line per block where
        :func:`rerank.progress.showing_progress` is on (the command line's ``mbr``, ``eval``,
        ``tune``) and there is more than one."""
        if not len(hypotheses):
            return np.zeros(0)
        fold = (lambda t: t.lower()) if self.lowercase else (lambda t: t)
        scores = np.zeros(len(hypotheses))
        kept = [k for k, (h, r) in enumerate(zip(hypotheses, references)) if h.strip() and r.strip()]
        if kept:
            hyps = [fold(hypotheses[k]) for k in kept]
            refs = [fold(references[k]) for k in kept]
            scorer, step = self.scorer(), max(2048, 16 * self.batch)
            chunks = range(0, len(kept), step)
            shown = showing_progress() and len(chunks) > 1  # the command line's long calls (mbr, eval, tune)
            values = np.zeros(len(kept))
            for lo in progress_bar(chunks, desc="bertscore", unit="block", enabled=shown):
                values[lo : lo + step] = scorer.score(hyps[lo : lo + step], refs[lo : lo + step])[2].double().numpy()
            scores[kept] = values
        return scores

    def stats(self, hypotheses, references):
        """float64[N, 2] [F1, 1]: the highest F1 over the references of each segment."""
        streams = self.streams(references)
        best = np.max([self.f1(list(hypotheses), stream) for stream in streams], axis=0)
        return np.column_stack([best, np.ones(len(best))])

    def utility(self) -> "BertScoreUtility":
        """Sentence BERTScore F1, MBR's ``MBRBERTScore``."""
        return BertScoreUtility("MBRBERTScore", self)

    def signature(self) -> str:
        try:  # the installed distribution's: bert-score 0.3.13's __version__ still says 0.3.12
            version = importlib.metadata.version("bert-score")
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        fields = [
            ("model", os.path.basename(os.path.normpath(self.model))),
            ("layer", self.layers or "last"),
            ("", "F1"),
            ("", "no-idf"),
            ("lc", self.lowercase),
            ("nrefs", self.num_refs),
            *([("dtype", self.dtype)] if self.dtype != "float32" else []),
            ("version", version),
        ]
        return str(Signature(self.name, fields))


class BertScoreUtility(PairwiseUtility):
    """MBR's BERTScore utility: F1 of hypothesis against pseudo-reference, pair by pair (each
    distinct sentence of a call encoded once)."""

    def __init__(self, column: str, metric: BertScoreMetric):
        super().__init__(column)
        self.metric = metric

    def pairs(self, texts: Sequence[str], hyp: np.ndarray, ref: np.ndarray) -> np.ndarray:
        texts = list(texts)
        hyps: List[str] = [texts[i] for i in np.asarray(hyp, dtype=np.int64)]
        refs: List[str] = [texts[j] for j in np.asarray(ref, dtype=np.int64)]
        return self.metric.f1(hyps, refs)
