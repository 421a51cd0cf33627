"""``ct2:DIR,...``: forced decoding under a CTranslate2 translation model (its
``Translator.score_batch``), the CTranslate2 half of :mod:`rerank.features.hf_scorer` (whose
docstring describes both spellings): the Hugging Face tokenizer read from DIR, or ``bpe=`` for a
model converted from fairseq; ``src_lang``/``tgt_lang`` as ``hf:``'s; batches bounded by
:data:`rerank.features.hf_scorer.LOGIT_CELLS`."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np

from rerank._native import cpu_count
from rerank.argtypes import positive_int
from rerank.config import option
from rerank.devices import DeviceSettings
from rerank.errors import InputError, one_line
from rerank.features.hf_scorer import LanguageConfig, PairScorer, import_transformers
from rerank.features.scorer import SCORERS
from rerank.nmt.subword import make_bpe
from rerank.remote_code import NO_REMOTE_CODE, load_errors, load_failure, refuse_remote_code

#: CTranslate2's compute types (``ctranslate2.Translator(compute_type=…)``); unset: int8 on the CPU, float16 on CUDA
CT2_COMPUTE_TYPES = "default auto int8 int8_float32 int8_float16 int8_bfloat16 int16 float16 bfloat16 float32".split()


@SCORERS.register("ct2")
class CT2Scorer(PairScorer):
    """``ct2:DIR,...``: forced decoding with CTranslate2's ``score_batch`` (module
    docstring); within 0.05 nats per sentence of ``hf:`` in float32 on the same model
    (tested)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "CT2, CT2Norm: a CTranslate2 translation model"

    @dataclass
    class Config(LanguageConfig):
        path: str = option("", "the converted model's directory", positional=True, path="dir:model.bin")
        compute_type: str = option(
            "",
            "CTranslate2's compute type (default int8 on the CPU, float16 on CUDA; the device may support fewer)",
            choices=CT2_COMPUTE_TYPES,
        )
        bpe: str = option(
            "", "for models converted from fairseq: subword-nmt:CODES, sentencepiece:MODEL or none", path=True
        )
        threads: Optional[int] = option(
            None, "batches side by side on the CPU (default: the CPUs available)", type=positive_int
        )

    default_name = "CT2"
    kind = "ct2"
    directions = ("forward", "backward", "r2l")
    default_batch = 32

    def __init__(self, config: "CT2Scorer.Config", devices: DeviceSettings = DeviceSettings()):
        super().__init__(config, devices)
        self.bpe = make_bpe(self.settings["bpe"], self.spec) if "bpe" in self.settings else None
        if self.direction == "r2l" and self.bpe is None:
            raise InputError(f"{self.spec}: direction=r2l is for models converted from fairseq (give bpe=)")
        if self.bpe is None:
            import_transformers()  # first: ctranslate2's converters import transformers too
        try:
            import ctranslate2
        except ImportError:
            raise InputError("ct2: needs ctranslate2: pip install 'nbest-rerank[hf]'") from None
        if devices.dtype != "float32" and "compute_type" not in self.settings:
            raise InputError(f"{self.spec}: CTranslate2 takes compute_type=, not --dtype")
        self.ct2_device, index = devices.ct2_device(ctranslate2.get_cuda_device_count())
        self.threads = config.threads or cpu_count()
        threads = {"inter_threads": self.threads, "intra_threads": 1} if self.ct2_device == "cpu" else {}
        compute = self.settings.get("compute_type", "float16" if self.ct2_device == "cuda" else "int8")
        self.tokenizer = None
        if self.bpe is None:  # a model converted from Hugging Face: its tokenizer lies beside it
            transformers = import_transformers()
            refuse_remote_code(self.path, self.spec)
            try:
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, **NO_REMOTE_CODE)
            except load_errors() as err:
                raise InputError(
                    f"no tokenizer beside the CTranslate2 model (save it there, or give bpe= for a "
                    f"model converted from fairseq): {load_failure(err, self.path)}",
                    self.path,
                ) from None
            self.set_languages()
        elif "src_lang" in self.settings or "tgt_lang" in self.settings:
            raise InputError(f"{self.spec}: src_lang/tgt_lang are for models with a Hugging Face tokenizer, not bpe=")
        else:
            self.forced, self.prefix = [], 0
        try:
            self.model = ctranslate2.Translator(
                self.path, device=self.ct2_device, device_index=index, compute_type=compute, **threads
            )
        except (RuntimeError, ValueError) as err:
            raise InputError(f"not a CTranslate2 translation model: {one_line(err)}", self.path) from None
        self.compute_type = compute

    @property
    def vocabulary(self) -> List[str]:
        """The target vocabulary (:func:`ct2_vocabulary`), read once."""
        if not hasattr(self, "_vocabulary"):
            self._vocabulary = ct2_vocabulary(self.path)
        return self._vocabulary

    @property
    def vocabulary_size(self) -> int:
        """The target vocabulary's size."""
        return len(self.vocabulary)

    @property
    def target_prefix(self) -> List[str]:
        """The tokens every target starts with (the target language's, NLLB and M2M100): a
        search's ``target_prefix``, fed but not scored; empty for other models."""
        return self.tokenizer.convert_ids_to_tokens(self.forced) if self.forced else []

    def source_tokens(self, inputs: Sequence[str]) -> List[List[str]]:
        """The sources as CTranslate2 takes them (:meth:`tokens`'s first half): the Hugging
        Face tokenizer's tokens with its </s>, or the subwords of ``bpe=``."""
        if self.bpe is not None:
            return [self.bpe.process_line(text).split() for text in inputs]
        tok = self.tokenizer
        return [tok.convert_ids_to_tokens(ids) for ids in tok(list(inputs))["input_ids"]]

    @property
    def eos_token(self) -> str:
        """The target vocabulary's end-of-sentence token (fairseq's ``</s>`` for ``bpe=`` models)."""
        return "</s>" if self.bpe is not None else self.tokenizer.eos_token

    def detokenize(self, tokens: Sequence[str]) -> str:
        """The text of output tokens (without end-of-sentence): the tokenizer's
        ``convert_tokens_to_string``, or the subword step's decoding for ``bpe=`` models."""
        if self.bpe is not None:
            return self.bpe.decode(tokens)
        return self.tokenizer.convert_tokens_to_string(list(tokens))

    def tokens(self, inputs, outputs):
        """(source tokens, target tokens) as CTranslate2 takes them: the Hugging Face
        tokenizer's (source with its </s>, target without: ``score_batch`` appends it), or
        for a fairseq model the subwords of ``bpe=`` (CTranslate2 adds the source's </s>
        itself, as fairseq does; targets reversed for ``r2l``)."""
        return self.source_tokens(inputs), self.target_tokens(outputs)

    def target_tokens(self, outputs: Sequence[str]) -> List[List[str]]:
        """The targets as CTranslate2 takes them (:meth:`tokens`'s second half)."""
        if self.bpe is not None:
            target = [self.bpe.process_line(text).split() for text in outputs]
            return [t[::-1] for t in target] if self.direction == "r2l" else target
        tok = self.tokenizer
        target = [tok.convert_ids_to_tokens(ids) for ids in tok(text_target=list(outputs))["input_ids"]]
        eos = tok.eos_token
        return [t[:-1] if t and t[-1] == eos else t for t in target]

    def score_unique(self, inputs, outputs):
        source, target = self.tokens(inputs, outputs)
        sums, lengths = np.zeros(len(outputs)), np.zeros(len(outputs), dtype=np.int64)
        # CTranslate2 sorts by length and splits into batches itself; handing it many at once
        # lets its ``threads`` workers run them side by side.  A batch's rows: ``batch``, fewer
        # where the full-vocabulary scores of its longest hypothesis pass LOGIT_CELLS
        order, chunk = np.argsort([len(t) for t in target], kind="stable"), self.batch * self.threads * 8
        vocabulary = self.vocabulary_size
        for start in range(0, len(order), chunk):
            rows = order[start : start + chunk]
            per_batch = self.rows_within(len(target[rows[-1]]) + 1, vocabulary)
            try:
                results = self.model.score_batch(
                    [source[r] for r in rows], [target[r] for r in rows], max_batch_size=per_batch
                )
            except RuntimeError as err:  # a hypothesis longer than the model's positions
                if "position" not in str(err):
                    raise
                longest = max(len(target[r]) for r in rows)
                raise InputError(
                    f"ct2:{self.path}: a hypothesis of {longest} tokens is too long for the model ({err}); "
                    "shorter hypotheses (rerank generate --max-length) or a model of more positions"
                ) from None
            for r, result in zip(rows, results):  # the forced language token is not scored
                sums[r] = float(np.sum(result.log_probs[self.prefix :]))
                lengths[r] = len(result.log_probs) - self.prefix
        return sums, lengths


def ct2_vocabulary(path: str) -> List[str]:
    """The target vocabulary of the CTranslate2 model ``path`` (its ``target_vocabulary.json``
    or ``shared_vocabulary.json``; a fairseq conversion's ``.txt``).

    Raises:
        InputError: none of them in the directory."""
    for name in ("target_vocabulary", "shared_vocabulary"):
        if os.path.exists(os.path.join(path, name + ".json")):
            with open(os.path.join(path, name + ".json"), encoding="utf-8") as handle:
                return json.load(handle)
        if os.path.exists(os.path.join(path, name + ".txt")):
            with open(os.path.join(path, name + ".txt"), encoding="utf-8") as handle:
                return [line.rstrip("\n") for line in handle]
    raise InputError("no target_vocabulary.json or shared_vocabulary.json in the CTranslate2 model", path)
