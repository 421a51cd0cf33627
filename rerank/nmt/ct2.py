"""A fairseq translation model converted to CTranslate2, for fast beam search.

``rerank pack-system --ct2 int8`` converts a system's fairseq generator with CTranslate2's
own converter (``ctranslate2.converters.FairseqConverter``, the ``ct2-fairseq-converter``
of its docs) and ``rerank translate`` then decodes with it (:func:`beam_nbest`) in place of
``fairseq-generate``: the same preprocessing (:func:`rerank.nmt.generate.segment_text`),
the same beam, n-best size and length penalty, and the same columns as
:func:`rerank.nmt.generate.parse_generate_output`:

* ``NMT``: the summed natural-log token probabilities, end-of-sentence included, recovered
  from CTranslate2's length-normalised score (score × length^lenpen, the length counting
  the end-of-sentence token as fairseq's does);
* ``WordPenalty``: minus the word count after BPE removal;
* ``NMTNorm``: CTranslate2's score, the log-probability over length^lenpen (fairseq's
  ``H-`` score in natural log).

What differs from fairseq's search, and why the selections may (rarely) differ:

* the length limit: fairseq allows ``max_len_a × n + max_len_b`` tokens for the longest
  source of its batch (n counts the source's end-of-sentence) and then forces the end;
  here each sentence gets the limit of its own length, and a hypothesis that reaches it
  stops without an end-of-sentence token (its length then counts no end token);
* the first step: fairseq forbids an empty hypothesis by removing ``</s>`` after the
  softmax (the other tokens keep their probabilities); CTranslate2's ``min_decoding_length``
  would remove it before (renormalising the rest, which shifts every score of the sentence),
  so the search runs without it and an empty hypothesis, should one be found, is dropped
  (that segment then has one hypothesis fewer);
* arithmetic: CTranslate2's kernels (and, with ``int8``, 8-bit weights) give scores within
  about 1e-3 nats of fairseq's, enough to swap near-ties in the beam.

docs/benchmarks.md ("translate with CTranslate2") measures the speed and the BLEU difference.
Only architectures CTranslate2 converts (fairseq's transformers) can be packed this way:
the paper's GRU models cannot.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from rerank._native import cpu_count
from rerank.devices import DeviceSettings
from rerank.errors import InputError, one_line
from rerank.nbest import NBestList
from rerank.nmt import USER_DIR
from rerank.nmt.checkpoints import allow_fairseq_globals, check_checkpoint, loading, trusted
from rerank.nmt.generate import GenerateConfig, beam_list, reading_order
from rerank.nmt.subword import join_subwords

#: ``pack-system --ct2`` choices: CTranslate2's quantisations of the converted weights
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float32", "float16", "bfloat16")


def convert(
    checkpoint: str, dict_dir: str, out_dir: str, src: str, tgt: str, quantization: str = "int8"
) -> Dict[str, Any]:
    """Convert the fairseq translation model ``checkpoint`` (dictionaries in ``dict_dir``,
    languages ``src``→``tgt``) into the CTranslate2 model directory ``out_dir`` with its
    weights quantised to ``quantization`` (:data:`QUANTIZATIONS`).  The checkpoint is
    checked (:func:`rerank.nmt.checkpoints.check_checkpoint`) and loaded weights-only.
    Returns ``{"quantization", "ctranslate2"}`` (the version that converted it).

    Raises:
        InputError: no ctranslate2, an unknown quantisation, a model CTranslate2 does not
            convert (a GRU, an unsupported option), naming the checkpoint.
        UntrustedCheckpoint: a checkpoint naming classes beyond fairseq's own, unless trusted.
    """
    if quantization not in QUANTIZATIONS:
        raise InputError(f"--ct2 {quantization!r}: expected one of {', '.join(QUANTIZATIONS)}")
    try:
        import ctranslate2
        from ctranslate2.converters import FairseqConverter
    except ImportError:
        raise InputError("--ct2 needs ctranslate2: pip install 'nbest-rerank[hf]'") from None
    check_checkpoint(checkpoint)
    allow_fairseq_globals()
    converter = FairseqConverter(
        checkpoint, dict_dir, source_lang=src, target_lang=tgt, user_dir=USER_DIR, unsafe_deserialization=trusted()
    )
    log = logging.getLogger("fairseq")  # the converter loads the task: fairseq's INFO lines kept back
    level = log.level
    log.setLevel(logging.WARNING)
    try:
        with loading(path=checkpoint):
            converter.convert(out_dir, quantization=quantization)
    except (ValueError, NotImplementedError, KeyError, AttributeError, RuntimeError) as err:
        raise InputError(f"CTranslate2 cannot convert this model: {one_line(err)}", checkpoint) from None
    finally:
        log.setLevel(level)
    return {"quantization": quantization, "ctranslate2": ctranslate2.__version__}


def beam_nbest(
    model_dir: str,
    segmented: Sequence[str],
    config: GenerateConfig,
    direction: str = "forward",
    devices: Optional[DeviceSettings] = None,
    subword: str = "subword-nmt",
) -> NBestList:
    """The beam search n-best list of the subword sentences ``segmented`` (one string per
    sentence) under the CTranslate2 model ``model_dir``, with ``config``'s n-best size,
    beam, length penalty, length limit and batch size (module docstring for the columns).
    On the CPU, batches of ``config.batch_size`` sentences run side by side, one thread
    each (CTranslate2's ``inter_threads``: faster than one batch on several threads for
    models of this size, measured); sentences of one length limit share a call, and every
    call is queued at once.  ``direction`` ``r2l``: a right-to-left model's output is put
    in reading order.  ``subword``: the kind of subword step the output's subwords are
    removed by (:func:`rerank.nmt.subword.join_subwords`).

    Raises:
        InputError: a beam smaller than the n-best size, a model directory CTranslate2
            does not load.
    """
    import ctranslate2

    with _openmp_kept():
        return _beam_nbest(ctranslate2, model_dir, segmented, config, direction, devices, subword)


@contextlib.contextmanager
def _openmp_kept() -> Iterator[None]:
    """A block after which torch's intra-op threads are what they were before it:
    CTranslate2 sets the process's OpenMP threads to its ``intra_threads`` (1 here), which
    halved the speed of every torch scorer after it in one process (measured: the
    right-to-left model's forced decoding, 57 s → 121 s on 1,000 × 100 hypotheses)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - CTranslate2 without torch: nothing to keep
        yield
        return
    threads = torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _beam_nbest(ctranslate2, model_dir, segmented, config, direction, devices, subword) -> NBestList:
    """:func:`beam_nbest`'s search, ``ctranslate2`` imported."""
    beam = config.beam or config.nbest
    if beam < config.nbest:
        raise InputError(f"beam {beam} is smaller than nbest {config.nbest}")
    devices = devices or DeviceSettings()
    cuda = devices.device.startswith("cuda") or (devices.device == "auto" and ctranslate2.get_cuda_device_count() > 0)
    index = int(devices.device.partition(":")[2] or 0)
    threads = {} if cuda else {"inter_threads": cpu_count(), "intra_threads": 1}
    try:
        translator = ctranslate2.Translator(
            model_dir, device="cuda" if cuda else "cpu", device_index=index, compute_type="default", **threads
        )
    except (RuntimeError, ValueError) as err:
        raise InputError(f"not a CTranslate2 translation model: {one_line(err)}", model_dir) from None
    tokens = [line.split() for line in segmented]
    # fairseq's limit: max_len_a × (tokens + </s>) + max_len_b tokens before the forced </s>
    limits = [int(config.max_len_a * (len(t) + 1) + config.max_len_b) for t in tokens]
    groups: Dict[int, List[int]] = {}
    for k, limit in enumerate(limits):
        groups.setdefault(limit, []).append(k)
    pending = []
    for limit, members in sorted(groups.items()):
        results = translator.translate_batch(
            [tokens[k] for k in members],
            beam_size=beam,
            num_hypotheses=config.nbest,
            length_penalty=config.lenpen,
            max_decoding_length=limit + 1,
            min_decoding_length=0,  # CTranslate2's default (1) renormalises the first step without </s>
            max_batch_size=config.batch_size,
            return_scores=True,
            asynchronous=True,
        )
        pending += [(k, limit, result) for k, result in zip(members, results)]
    found: List[Any] = [None] * len(tokens)
    for k, limit, result in pending:
        found[k] = (limit, result.result())
    texts: List[str] = []
    sums: List[float] = []
    norms: List[float] = []
    offsets = [0]
    for limit, result in found:
        kept = [(h, score) for h, score in zip(result.hypotheses, result.scores) if h]
        # </s> first: fairseq's search never ends there (its min_len 1); kept only if alone
        for hypothesis, score in kept or list(zip(result.hypotheses, result.scores))[:1]:
            length = len(hypothesis) + (len(hypothesis) <= limit)  # + </s>, unless cut at the limit
            norms.append(score)
            sums.append(score * length**config.lenpen)
            text = " ".join(hypothesis)
            texts.append(reading_order(text, subword) if direction == "r2l" else join_subwords(hypothesis, subword))
        offsets.append(len(texts))
    return beam_list(texts, offsets, np.array(sums), np.array(norms), direction)
