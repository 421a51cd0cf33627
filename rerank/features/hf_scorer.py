"""Forced decoding under the user's own Hugging Face and CTranslate2 models.

* ``hf:PATH[,direction=forward|backward][,name=NAME][,detok=moses:LANG][,source_detok=moses:LANG]
  [,src_lang=CODE][,tgt_lang=CODE][,batch=N]`` — an ``AutoModelForSeq2SeqLM`` (Marian/OPUS-MT,
  M2M100, NLLB, mBART, T5…) with its tokenizer saved beside it: ``forward`` scores
  log P(hypothesis | source), ``backward`` log P(source | hypothesis), the channel model of
  noisy-channel re-ranking (Yee et al. 2019).  ``src_lang``/``tgt_lang`` set the
  tokenizer's language codes (M2M100, NLLB, mBART): the target's language token that the
  tokenizer puts before the text (the forced BOS) is fed to the decoder but not scored, and
  ``rerank generate`` starts every search with it (without it NLLB translates into whatever
  language its first step prefers).
* ``hf-lm:PATH[,name=NAME][,detok=…][,batch=N][,prompt=FILE]`` — an ``AutoModelForCausalLM``:
  log P(hypothesis), the text preceded by the model's BOS (or EOS, as GPT-2 uses it) and
  followed by EOS; with ``prompt=FILE`` (a template holding ``{source}``: a decoder-only
  translator, Tower or EuroLLM prompted) log P(hypothesis EOS | BOS prompt(source)), the
  prompt's tokens fed but not scored — the scorer of ``rerank generate --model hf-lm:…``'s
  candidates.
* ``ct2:DIR[,direction=…][,name=NAME][,compute_type=TYPE][,bpe=…][,detok=…][,source_detok=…][,batch=N]
  [,threads=N][,src_lang=CODE][,tgt_lang=CODE]`` —
  the same with a CTranslate2 translation model (``ct2-transformers-converter``,
  ``ct2-fairseq-converter``) and its ``Translator.score_batch``: the Hugging Face
  tokenizer read from DIR (saved there by the converter's ``--copy_files`` or by hand),
  or for a model converted from fairseq ``bpe=subword-nmt:CODES|sentencepiece:MODEL|none``
  as the ``fairseq:`` scorer takes it (and ``direction=r2l`` for a right-to-left model);
  compute type ``int8`` on the CPU and ``float16`` on a GPU by default (decoder-only
  CTranslate2 exports are not covered yet: use ``hf-lm:``).  On the CPU, ``threads``
  batches (default: the CPUs this process may use) run side by side, one thread each
  (CTranslate2's ``inter_threads``; measured faster than one batch on several threads),
  in batches of ``batch`` (default 32 for ``ct2:``: the full-vocabulary scores of a large
  batch fall out of the cache).

(``ct2:`` lives in :mod:`rerank.features.ct2_scorer`, on this module's shared pair scorer.)

Columns ``NAME`` (the sum of natural-log token probabilities of the scored text,
end-of-sentence included) and ``NAMENorm`` (per token), as for ``nmt:``; default names
``HF``/``HFChannel``, ``HFLM``, ``CT2``/``CT2Channel``.  Feature set: ``NAME``.

Our n-best lists hold tokenised, lowercased text (``rerank nmt prepare``); a model trained
on raw text sees what it was trained on only after ``detok=moses:de`` (and
``source_detok=moses:en`` for the source) — sacremoses' detokeniser; casing cannot be
restored.  Pairs are scored once each, sorted by length into batches of ``batch``
(default 64; 32 for ``ct2:``) with padding that does not change any score (tested: a hypothesis alone
and in a padded batch score the same), on ``features add --device/--dtype``.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.argtypes import positive_int
from rerank.config import option
from rerank.devices import DeviceSettings, int8_linear_layers
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, given_settings
from rerank.nbest import NBestList
from rerank.remote_code import NO_REMOTE_CODE, load_errors, load_failure, no_prompt, refuse_remote_code
from rerank.textio import read_text

DIRECTIONS = ("forward", "backward")

#: the most output-layer cells (rows × positions × vocabulary floats) one batch computes: the
#: logits (and their log-softmax) over a large vocabulary — NLLB's 256,206 tokens, Marian's
#: 58,101 — are most of a batch's memory; 2^26 floats are 256 MB (issue 91: NLLB-600M's
#: forced decoding in batches of 64 rows held 3 GB of logits)
LOGIT_CELLS = 2**26


def import_transformers():
    """The ``transformers`` module.  torchaudio, which fairseq-fixed installs built for
    another torch, cannot load beside torch 2.13 CPU; transformers imports it whenever it
    is installed, so a torchaudio that fails to import is hidden from it first.

    Raises:
        InputError: transformers is not installed (the ``[hf]`` extra).
    """
    try:
        importlib.import_module("torchaudio")
    except Exception:  # an OSError for the missing CUDA libraries, or ImportError
        sys.modules["torchaudio"] = None  # type: ignore[assignment]  # find_spec now reports it absent
    try:
        import transformers
    except ImportError:
        raise InputError("hf: and hf-lm: need transformers: pip install 'nbest-rerank[hf]'") from None
    transformers.utils.logging.disable_progress_bar()  # loading bars on every model; ours say what runs
    no_prompt()
    return transformers


def detokenizer(value: Optional[str], spec: str):
    """A function detokenising tokenised text (``moses:LANG``: sacremoses), or None.

    Raises:
        InputError: a spec other than ``moses:LANG``.
    """
    if not value:
        return None
    kind, _, lang = value.partition(":")
    if kind != "moses" or not lang:
        raise InputError(f"{spec}: detok must be moses:LANG, e.g. detok=moses:de")
    from sacremoses import MosesDetokenizer

    moses = MosesDetokenizer(lang=lang)
    return lambda text: moses.detokenize(text.split())


#: the ``dtype=`` of the torch scorers: --dtype's types, or int8 (:func:`rerank.devices.int8_linear_layers`)
TORCH_DTYPES = ("float32", "float16", "bfloat16", "int8")
TORCH_DTYPE_HELP = (
    "the model's dtype (default: --dtype): float32, float16, bfloat16 (CUDA), or int8: its linear layers "
    "quantised, on the CPU (forced decoding and generation about 1.2x faster; scores move)"
)


@dataclass
class PairConfig:
    """The settings every pair scorer (``hf:``, ``ct2:``) has."""

    path: str = option("", "the model's directory", positional=True, path="dir:config.json")
    threads: Optional[int] = option(
        None, "torch CPU threads (default: --threads, else the CPUs this process may use)", type=positive_int
    )
    direction: str = option("", "forward (default), backward (the channel model), r2l (ct2: of fairseq exports)")
    name: str = option("", "the column (default by scorer and direction: HF, HFChannel, CT2, CT2R2L…)")
    detok: str = option("", "detokenise hypotheses first: moses:LANG")
    source_detok: str = option("", "detokenise sources first: moses:LANG")
    batch: Optional[int] = option(None, "hypotheses per batch (default: hf 64, ct2 32)", type=positive_int)


@dataclass
class LanguageConfig(PairConfig):
    """The pair settings plus the tokenizer's language codes (M2M100, NLLB, mBART)."""

    src_lang: str = option("", "the tokenizer's source language code (M2M100, NLLB, mBART)")
    tgt_lang: str = option("", "the tokenizer's target language code")


class PairScorer(Scorer):
    """Shared by every model scorer here: settings, de-duplication, length batching,
    the two columns.  Subclasses implement :meth:`score_unique` on distinct pairs."""

    uses_device = True
    directions: Tuple[str, ...] = DIRECTIONS
    default_name = "HF"
    kind = "hf"
    needs_source = True

    default_batch = 64

    def __init__(self, config, devices: DeviceSettings = DeviceSettings()):
        path, settings, arg = given_settings(config)
        spec = f"{self.kind}:{arg}"
        if not path:
            raise InputError(f"{spec}: give the model's directory, e.g. {self.kind}:models/opus-mt-en-de")
        if not os.path.isdir(path):
            raise InputError("not a directory", path)
        if not os.path.exists(os.path.join(path, "config.json")):
            raise InputError(
                f"no config.json: not a model directory for {self.kind}: (save_pretrained writes one; "
                "so do CTranslate2's converters)",
                path,
            )
        threads = getattr(config, "threads", None)
        if threads and self.kind != "ct2":  # torch's threads (ct2's threads= are CTranslate2's own)
            devices = dataclasses.replace(devices, threads=threads)
        self.path, self.spec, self.devices = path, spec, devices
        self.direction = settings.get("direction", "forward")
        if self.direction not in self.directions:
            raise InputError(f"{spec}: direction must be {' or '.join(self.directions)}, not {self.direction!r}")
        suffix = {"backward": "Channel", "r2l": "R2L"}.get(self.direction, "") if self.needs_source else ""
        self.name = settings.get("name") or self.default_name + suffix
        self.set_name = self.name
        self.detok = detokenizer(settings.get("detok"), spec)
        self.source_detok = detokenizer(settings.get("source_detok"), spec)
        self.batch = config.batch or self.default_batch
        self.settings = settings

    def names(self, has_images: bool) -> List[str]:
        return [self.name, f"{self.name}Norm"]

    def load_model(self, auto_class: str, what: str) -> None:
        """``self.tokenizer`` and ``self.model`` (transformers' ``auto_class``) from the
        directory, on the resolved device and type, in eval mode.  Raises
        :class:`InputError` naming the directory when either cannot be loaded."""
        transformers = import_transformers()
        dtype = self.settings.get("dtype") or self.devices.dtype
        self.int8 = dtype == "int8"
        self.device, self.dtype = dataclasses.replace(self.devices, dtype="float32" if self.int8 else dtype).resolve()
        refuse_remote_code(self.path, self.spec)
        try:
            self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path, **NO_REMOTE_CODE)
            self.model = getattr(transformers, auto_class).from_pretrained(
                self.path, dtype=self.dtype, **NO_REMOTE_CODE
            )
        except load_errors() as err:
            raise InputError(
                f"not a Hugging Face {what} with its tokenizer: {load_failure(err, self.path)}", self.path
            ) from None
        self.model.to(self.device).eval()
        if self.int8:
            self.model = int8_linear_layers(self.model, self.spec)

    def set_languages(self) -> None:
        """The tokenizer's ``src_lang``/``tgt_lang`` from the settings, and ``self.forced``:
        the target-language token ids the tokenizer puts before a target's text (M2M100,
        NLLB, mBART; none for Marian), which a decoder is given, not scored, and which a
        search must start with (transformers' ``forced_bos_token_id``, CTranslate2's
        ``target_prefix``).

        Raises:
            InputError: a language setting this tokenizer does not have.
        """
        for key in ("src_lang", "tgt_lang"):
            if key in self.settings:
                if not hasattr(self.tokenizer, key):
                    raise InputError(f"{self.spec}: this tokenizer ({type(self.tokenizer).__name__}) has no {key}")
                setattr(self.tokenizer, key, self.settings[key])
        empty = self.tokenizer(text_target="")["input_ids"]
        eos = self.tokenizer.eos_token_id
        self.forced: List[int] = empty[: len(empty) - (1 if empty and empty[-1] == eos else 0)]
        self.prefix = len(self.forced)  # forced language token(s), not scored

    def score(self, nbest: NBestList, sources: Optional[Sequence[str]], images) -> Dict[str, np.ndarray]:
        hyps = list(nbest.hypotheses)
        if self.detok is not None:
            hyps = [self.detok(h) for h in hyps]
        if self.needs_source:
            if sources is None:
                raise InputError(f"{self.spec} needs the source sentences: give --source")
            srcs = [sources[s] for s in nbest.segment]
            if self.source_detok is not None:
                cache: Dict[str, str] = {}
                srcs = [cache[s] if s in cache else cache.setdefault(s, self.source_detok(s)) for s in srcs]
            inputs, outputs = (hyps, srcs) if self.direction == "backward" else (srcs, hyps)
        else:
            inputs, outputs = [""] * len(hyps), hyps
        total, length = self.score_pairs(inputs, outputs)
        return {self.name: total, f"{self.name}Norm": total / np.maximum(length, 1)}

    def score_pairs(self, inputs: Sequence[str], outputs: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(sum float64[K], tokens int64[K]) of log P(outputs[k] | inputs[k]), each distinct
        pair scored once."""
        keys: Dict[Tuple[str, str], int] = {}
        where = np.array([keys.setdefault((i, o), len(keys)) for i, o in zip(inputs, outputs)], dtype=np.int64)
        unique = list(keys)
        sums, lengths = self.score_unique([i for i, _ in unique], [o for _, o in unique])
        return sums[where], lengths[where]

    def score_unique(self, inputs: List[str], outputs: List[str]) -> Tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def rows_within(self, positions: int, vocabulary: int) -> int:
        """Rows per batch of ``positions`` output positions each over ``vocabulary`` tokens:
        at most ``batch``, and at most :data:`LOGIT_CELLS` logits (at least one row)."""
        return self.rows_fitting(np.full(self.batch, positions), vocabulary)

    def rows_fitting(self, widths: np.ndarray, vocabulary: int) -> int:
        """How many of the next rows, of non-decreasing ``widths`` (positions), make one batch:
        as many as keep (rows × the widest) × ``vocabulary`` within :data:`LOGIT_CELLS`, at
        most ``batch``, at least one."""
        count = np.arange(1, min(len(widths), self.batch) + 1)
        return max(1, int(np.sum(count * widths[: len(count)] * vocabulary <= LOGIT_CELLS)))

    @property
    def output_rows(self) -> int:
        """The rows of the model's output layer: the scores it computes per position (its
        weight is a method once quantised, :func:`rerank.devices.int8_linear_layers`)."""
        head = self.model.get_output_embeddings()
        weight = head.weight() if callable(head.weight) else head.weight
        return int(weight.shape[0])

    def batches(self, lengths: Sequence[int]):
        """Index batches of at most ``batch`` items, sorted by length (little padding)."""
        order = np.argsort(np.asarray(lengths), kind="stable")
        for start in range(0, len(order), self.batch):
            yield order[start : start + self.batch]


@SCORERS.register("hf")
class HFSeq2SeqScorer(PairScorer):
    """``hf:PATH,...``: forced decoding under a Hugging Face sequence-to-sequence model
    (module docstring); equal to transformers' own per-token cross-entropy (tested)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "HF, HFNorm: a Hugging Face seq2seq model"

    @dataclass
    class Config(LanguageConfig):
        dtype: str = option("", TORCH_DTYPE_HELP, choices=TORCH_DTYPES)

    def __init__(self, config: "HFSeq2SeqScorer.Config", devices: DeviceSettings = DeviceSettings()):
        super().__init__(config, devices)
        self.load_model("AutoModelForSeq2SeqLM", "sequence-to-sequence model")
        self.set_languages()

    def score_unique(self, inputs, outputs):
        """Rows sorted by target length into batches; each distinct source is tokenised
        once, encoded once per batch, and its encoder states shared by its hypotheses in
        the batch (1.3-1.5x the throughput of encoding every pair; ``logsumexp`` instead of
        the log-softmax measured slower on the CPU)."""
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        sums, lengths = np.zeros(len(outputs)), np.zeros(len(outputs), dtype=np.int64)
        distinct: Dict[str, int] = {}
        source_of = [distinct.setdefault(text, len(distinct)) for text in inputs]
        distinct_ids = self.tokenizer(list(distinct))["input_ids"]
        target_ids = self.tokenizer(text_target=list(outputs))["input_ids"]
        pad = self.tokenizer.pad_token_id
        encoder = self.model.get_encoder()
        order = sorted(range(len(outputs)), key=lambda r: (len(target_ids[r]), len(distinct_ids[source_of[r]])))
        vocabulary = self.output_rows
        start, widths = 0, np.array([len(target_ids[r]) for r in order])
        with torch.inference_mode():
            while start < len(order):
                rows = order[start : start + self.rows_fitting(widths[start : start + self.batch], vocabulary)]
                start += len(rows)
                sources = sorted({source_of[r] for r in rows})
                slot = {s: i for i, s in enumerate(sources)}
                src = [distinct_ids[s] for s in sources]
                tgt = [target_ids[r] for r in rows]
                width_s, width_t = max(map(len, src)), max(map(len, tgt))
                input_ids = torch.tensor([s + [pad] * (width_s - len(s)) for s in src], device=self.device)
                mask = torch.tensor([[1] * len(s) + [0] * (width_s - len(s)) for s in src], device=self.device)
                states = encoder(input_ids=input_ids, attention_mask=mask).last_hidden_state
                which = torch.tensor([slot[source_of[r]] for r in rows], device=self.device)
                labels = torch.tensor([t + [-100] * (width_t - len(t)) for t in tgt], device=self.device)
                shared = {
                    "encoder_outputs": BaseModelOutput(last_hidden_state=states[which]),
                    "attention_mask": mask[which],
                }
                if hasattr(self.model, "prepare_decoder_input_ids_from_labels"):  # no loss computed
                    shared["decoder_input_ids"] = self.model.prepare_decoder_input_ids_from_labels(labels=labels)
                else:
                    shared["labels"] = labels
                logits = self.model(**shared).logits.float()
                safe = labels.clamp(min=0)
                token = torch.log_softmax(logits, dim=-1).gather(-1, safe[..., None])[..., 0]
                keep = labels != -100
                keep[:, : self.prefix] = False
                sums[rows] = (token * keep).sum(-1).double().cpu().numpy()
                lengths[rows] = keep.sum(-1).cpu().numpy()
        return sums, lengths


@SCORERS.register("hf-lm")
class HFCausalLMScorer(PairScorer):
    """``hf-lm:PATH,...``: log P(hypothesis) under a Hugging Face causal language model
    (module docstring)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "HFLM, HFLMNorm: a Hugging Face causal LM"

    @dataclass
    class Config:
        path: str = option("", "the model's directory (save_pretrained)", positional=True, path="dir:config.json")
        threads: Optional[int] = option(
            None, "torch CPU threads (default: --threads, else the CPUs this process may use)", type=positive_int
        )
        dtype: str = option("", TORCH_DTYPE_HELP, choices=TORCH_DTYPES)
        name: str = option("", "the column (default HFLM)")
        detok: str = option("", "detokenise hypotheses first: moses:LANG")
        batch: Optional[int] = option(None, "hypotheses per batch (default 64)", type=positive_int)
        prompt: str = option(
            "",
            "a prompt template file holding {source}: log P(hypothesis | prompt) of a decoder-only translator "
            "(default: none, log P(hypothesis))",
            path="file",
            check=lambda path: read_prompt(path),
        )

    default_name = "HFLM"
    kind = "hf-lm"
    needs_source = False

    def __init__(self, config: "HFCausalLMScorer.Config", devices: DeviceSettings = DeviceSettings()):
        super().__init__(config, devices)
        self.template: Optional[str] = None
        self.prompt_path: Optional[str] = config.prompt or None
        if config.prompt:
            self.template = read_prompt(config.prompt)
            self.needs_source = True  # the prompt holds the source
        self.load_model("AutoModelForCausalLM", "causal language model")
        tok = self.tokenizer
        self.start = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        self.end = tok.eos_token_id
        if self.start is None or self.end is None:
            raise InputError(f"{self.spec}: the tokenizer has neither a BOS nor an EOS token to start and end with")

    def token_ids(self, text: str) -> List[int]:
        """[start] + the text's tokens + [EOS] (the tokenizer's own specials removed)."""
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return [self.start] + ids + [self.end]

    @property
    def positions(self) -> Optional[int]:
        """The longest sequence the model takes (its config's ``max_position_embeddings`` or
        GPT-2's ``n_positions``), or None where it declares none (rotary models may)."""
        config = self.model.config
        for key in ("max_position_embeddings", "n_positions"):
            value = getattr(config, key, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    def prompt_ids(self, source: str) -> List[int]:
        """[start] + the tokens of the prompt of ``source`` (the template with ``{source}``
        filled), what the model continues with a translation; [start] without a template.

        Raises:
            InputError: a prompt that leaves the model no position to continue in (longer than
                its :attr:`positions` less one), naming the template and the source's length."""
        if self.template is None:
            return [self.start]
        ids = [self.start] + self.tokenizer(self.template.replace("{source}", source), add_special_tokens=False)[
            "input_ids"
        ]
        self.check_positions(len(ids) + 1, f"the prompt of a source of {len(source)} characters")
        return ids

    def check_positions(self, length: int, what: str) -> None:
        """Refuse a sequence of ``length`` tokens over the model's :attr:`positions` (transformers
        only warns, then indexes past its position table: a traceback or garbage).

        Raises:
            InputError: naming ``what``, the lengths and the template."""
        limit = self.positions
        if limit is not None and length > limit:
            raise InputError(
                f"{self.spec}: {what} needs {length} tokens, over the model's {limit} positions "
                "(shorten the prompt template or the sentence)",
                self.prompt_path,
            )

    def score_unique(self, inputs, outputs):
        import torch

        sums, lengths = np.zeros(len(outputs)), np.zeros(len(outputs), dtype=np.int64)
        prompts = [self.prompt_ids(source) for source in inputs]
        ids = [p + self.token_ids(text)[1:] for p, text in zip(prompts, outputs)]
        longest = max(range(len(ids)), key=lambda r: len(ids[r]), default=None)
        if longest is not None:
            self.check_positions(len(ids[longest]), f"hypothesis {longest + 1} with its prompt")
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.end
        with torch.inference_mode():
            for rows in self.batches([len(i) for i in ids]):
                seqs = [ids[r] for r in rows]
                width = max(map(len, seqs))
                input_ids = torch.tensor([s + [pad] * (width - len(s)) for s in seqs], device=self.device)
                mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs], device=self.device)
                logits = self.model(input_ids=input_ids, attention_mask=mask).logits.float()
                logp = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, input_ids[:, 1:, None])[..., 0]
                # the prompt's tokens (after the first) are fed, not scored: the hypothesis and its EOS are
                scored = torch.tensor(
                    [[0] * (len(prompts[r]) - 1) + [1] * (width - len(prompts[r])) for r in rows], device=self.device
                )
                keep = mask[:, 1:].bool() & scored.bool()
                sums[rows] = (logp * keep).sum(-1).double().cpu().numpy()
                lengths[rows] = keep.sum(-1).cpu().numpy()
        return sums, lengths


#: the largest prompt template read (a few-shot prompt is a few KB; a model's context far less than this)
MAX_PROMPT_BYTES = 1 << 20


def read_prompt(path: str) -> str:
    """The prompt template of ``path``: its UTF-8 text, which may span lines (``Translate from
    English to German.\\nEnglish: {source}\\nGerman:``), the file's final newline removed.

    Raises:
        InputError: not a regular file (a directory, ``/dev/zero``), over
            :data:`MAX_PROMPT_BYTES`, unreadable, or a template without ``{source}``."""
    if not os.path.isfile(path):
        raise InputError("the prompt template must be a regular file (not a directory or device)", path)
    if os.path.getsize(path) > MAX_PROMPT_BYTES:
        raise InputError(f"the prompt template is over {MAX_PROMPT_BYTES >> 10} KB: not a prompt", path)
    text = read_text(path).removesuffix("\n")
    if "{source}" not in text:
        raise InputError("the prompt template holds no {source}", path)
    return text
