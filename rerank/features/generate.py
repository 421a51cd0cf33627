"""Candidates from the user's own models (``rerank generate``): n-best lists by beam
search or sampling with a Hugging Face (``hf:PATH``) or CTranslate2 (``ct2:DIR``)
translation model, or a prompted decoder-only translator (``hf-lm:PATH,prompt=FILE``: the
continuation of each source's prompt, its first line), written as ``rerank nmt nbest``
writes them.

* beam search: ``transformers``' ``generate(num_beams=B, num_return_sequences=N)`` or
  CTranslate2's ``translate_batch(beam_size=B, num_hypotheses=N)``, length penalty 1
  (hypotheses ranked by per-token log-probability);
* sampling (:mod:`rerank.features.sampling`: epsilon, nucleus, top-k, temperature,
  ancestral): at every step the sampler's truncation of the next-token distribution,
  renormalised, and one token drawn; N independent samples per sentence (duplicates kept:
  they are Monte-Carlo samples).  Hugging Face: ``generate(do_sample=True, …)`` with the
  sampler's settings, one sentence per call, seeded with ``torch.manual_seed`` from (seed,
  sentence id).  CTranslate2 has no epsilon sampling, so for every sampler the steps run
  here (one rule for all): one ``translate_batch(target_prefix=…, return_logits_vocab=True)``
  per step gives every sample's next-token logits (a block of rows per call: CTranslate2
  returns the logits of every prefix position), the truncation
  (:func:`rerank.features.sampling.truncate`) and the draw are numpy's
  (``numpy.random.default_rng`` seeded by (seed, sentence id)).

Every candidate is then scored by forced decoding with the same model and scorer as
``features add --scorer hf:/ct2:`` (columns ``NAME`` and ``NAMENorm``: the log-probability
with end-of-sentence and its per-token mean), so a generated list and a scored list agree —
except where CTranslate2's beam search has computed that number already: a candidate it ended
with end-of-sentence, whose text the scorer tokenises into the same tokens, in a model without
a target prefix, keeps the search's sum (:func:`_search_scores`; equal within float32 noise).
Within a segment candidates are ordered by ``NAMENorm`` (best first); the ``.1best`` is
the first; the signature declares ``NAMENorm`` as the beam feature (what beam search with
length penalty 1 ranks by) and the set ``beam``.
"""

from __future__ import annotations

import contextlib
import io
import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.features.ct2_scorer import CT2Scorer
from rerank.features.hf_scorer import HFCausalLMScorer, HFSeq2SeqScorer
from rerank.features.sampling import Sampling, truncate
from rerank.features.scorer import make_scorer
from rerank.features.spec_paths import file_digests
from rerank.nbest import ListInfo, NBestList, NBestWriter, write_list_info
from rerank.outputs import StagedOutputs
from rerank.progress import progress_bar
from rerank.shards import Shard
from rerank.signature import write_signed
from rerank.textio import file_digest, read_lines

#: a generator's candidates ([[text] per source]) and, where the search computed them, their
#: forced-decoding (sum, tokens) (None: every candidate is scored by forced decoding)
Candidates = Tuple[List[List[str]], Optional[List[List[Optional[Tuple[float, int]]]]]]


def _search(beam: int, sampling: Optional[Sampling], sentence: int) -> Dict[str, Any]:
    """The keyword arguments of Hugging Face ``generate``: beam search of ``beam`` (length
    penalty 1), or the sampler, torch's generator then seeded by (seed, ``sentence``) — one
    sentence a call, so the samples do not depend on chunks or shards."""
    if sampling is None:
        return {"num_beams": beam, "length_penalty": 1.0, "do_sample": False}
    import torch

    torch.manual_seed(int(np.random.SeedSequence([sampling.seed, sentence]).generate_state(1)[0]))
    return {**sampling.hf_settings(), "num_beams": 1}


def _forced_start(scorer: HFSeq2SeqScorer) -> Dict[str, Any]:
    """``generate``'s setting that starts every hypothesis with the target language's token
    (``tgt_lang=``): ``forced_bos_token_id``. InputError: a tokenizer that forces more than one token."""
    if len(scorer.forced) != 1:
        raise InputError(
            f"{scorer.spec}: its tokenizer starts a target with {len(scorer.forced)} tokens; "
            "rerank generate can force one (a language code)"
        )
    return {"forced_bos_token_id": scorer.forced[0]}


def _hf_candidates(
    scorer: HFSeq2SeqScorer,
    sources: List[str],
    nbest: int,
    beam: int,
    sampling: Optional[Sampling],
    max_length: int,
    first: int = 0,
) -> Candidates:
    import torch

    tok, model = scorer.tokenizer, scorer.model
    out: List[List[str]] = []
    # sampling: one sentence per call, sentence i seeded by (seed, i), so the samples do not
    # depend on chunks or shards
    # beam search: sentences per call within the logits budget (beam × vocabulary scores a step)
    vocabulary = scorer.output_rows
    step = scorer.rows_within(max(beam, nbest), vocabulary) if sampling is None else 1
    forced = _forced_start(scorer) if scorer.forced else {}  # NLLB, M2M100, mBART: the target language first
    with torch.inference_mode():
        for start in progress_bar(range(0, len(sources), step), desc="generate", unit="batch", enabled=scorer.progress):
            enc = tok(sources[start : start + step], return_tensors="pt", padding=True).to(scorer.device)
            how = {**_search(beam, sampling, first + start), **forced}
            ids = model.generate(**enc, **how, num_return_sequences=nbest, max_new_tokens=max_length)
            texts = tok.batch_decode(ids, skip_special_tokens=True)
            out += [texts[k : k + nbest] for k in range(0, len(texts), nbest)]
    return out, None


def _lm_candidates(
    scorer: HFCausalLMScorer,
    sources: List[str],
    nbest: int,
    beam: int,
    sampling: Optional[Sampling],
    max_length: int,
    first: int = 0,
) -> Candidates:
    """A decoder-only translator's candidates: ``generate`` continues each source's prompt
    (:meth:`HFCausalLMScorer.prompt_ids`, one sentence per call: no padding before a prompt),
    stopping at EOS; a candidate is the continuation's first line, stripped."""
    import torch

    model = scorer.model
    out: List[List[str]] = []
    with torch.inference_mode():
        for k in progress_bar(range(len(sources)), desc="generate", unit="sent", enabled=scorer.progress):
            prompt = torch.tensor([scorer.prompt_ids(sources[k])], device=scorer.device)
            how = _search(beam, sampling, first + k)
            room = max_length if scorer.positions is None else min(max_length, scorer.positions - prompt.shape[1])
            ids = model.generate(  # never past the model's positions (a candidate is cut there, as at max_length)
                input_ids=prompt,
                attention_mask=torch.ones_like(prompt),
                num_return_sequences=nbest,
                max_new_tokens=room,
                eos_token_id=scorer.end,
                pad_token_id=scorer.end,
                **how,
            )
            texts = scorer.tokenizer.batch_decode(ids[:, prompt.shape[1] :], skip_special_tokens=True)
            out.append([(text.strip().split("\n") or [""])[0].strip() for text in texts])
    return out, None


def _ct2_candidates(
    scorer: CT2Scorer,
    sources: List[str],
    nbest: int,
    beam: int,
    sampling: Optional[Sampling],
    max_length: int,
    first: int = 0,
) -> Candidates:
    source_tokens = scorer.source_tokens(sources)
    start = scorer.target_prefix  # NLLB, M2M100: the target language's token, fed first
    if sampling is None:
        # sentences per batch within the logits budget, as forced decoding's: beam × vocabulary
        # scores a step each (NLLB's 256,206 tokens at beam 20: 13 sentences; Marian's: batch)
        results = scorer.model.translate_batch(
            source_tokens,
            target_prefix=[start] * len(source_tokens) if start else None,
            beam_size=beam,
            num_hypotheses=nbest,
            max_decoding_length=max_length,
            length_penalty=1.0,
            max_batch_size=scorer.rows_within(max(beam, nbest), scorer.vocabulary_size),
            return_scores=True,
            return_end_token=True,
        )
        return _search_scores(scorer, source_tokens, results, start)
    vocabulary = scorer.vocabulary
    eos = scorer.eos_token
    # sentence i (``first`` + its index here) draws from a stream of its own, seeded by
    # (seed, i): the samples do not depend on chunks or shards
    streams = [np.random.default_rng([sampling.seed, first + s]) for s in range(len(sources))]
    rows = [s for s in range(len(sources)) for _ in range(nbest)]
    prefixes: List[List[str]] = [list(start) for _ in rows]
    done = np.zeros(len(rows), dtype=bool)
    for step in progress_bar(range(max_length), desc="sampling steps", unit="step", enabled=scorer.progress):
        live = np.flatnonzero(~done)
        if not len(live):
            break
        # CTranslate2 returns the logits of every position of the prefix (rows × step ×
        # vocabulary floats): a block of rows per call, keeping only each row's last
        # position, truncated and drawn from before the next block
        block = scorer.batch * getattr(scorer, "threads", 1)
        uniform = np.array([streams[rows[i]].random() for i in live])
        draws = np.empty(len(live), dtype=np.int64)
        for b in range(0, len(live), block):
            part = live[b : b + block]
            results = scorer.model.translate_batch(
                [source_tokens[rows[i]] for i in part],
                target_prefix=[prefixes[i] for i in part],
                max_decoding_length=len(start) + step + 1,
                beam_size=1,
                return_logits_vocab=True,
                max_batch_size=scorer.batch,
            )
            logits = np.stack([np.asarray(r.logits[0][-1], dtype=np.float64) for r in results])
            del results
            kept = truncate(logits, sampling)
            draws[b : b + len(part)] = (kept.cumsum(axis=1) > uniform[b : b + len(part), None]).argmax(axis=1)
        for i, token_id in zip(live, draws):
            token = vocabulary[token_id]
            if token == eos:
                done[i] = True
            else:
                prefixes[i].append(token)
    texts = [scorer.detokenize(p[len(start) :]) for p in prefixes]
    return [texts[k : k + nbest] for k in range(0, len(texts), nbest)], None


def _search_scores(scorer: CT2Scorer, source_tokens, results, start: List[str]) -> Candidates:
    """The beam's candidates, and the forced-decoding score (sum, tokens) of each that the
    search has computed already: one that ended with end-of-sentence and whose tokens are
    those the scorer's tokenisation gives its text (else forced decoding sees other tokens),
    in a list without a target prefix.  The search ranked by score = sum / tokens (length
    penalty 1, end-of-sentence counted) after CTranslate2's first step, which excludes
    end-of-sentence (``min_decoding_length`` 1), renormalised the first token's probability:
    the sum forced decoding gives is score × tokens + log(1 − P(</s> first)), that probability
    read by one decoder step per source (``score_batch`` of an empty target).  Equal to
    forced decoding within float32 noise (measured: 2e-5 nats at most, the default job's
    transformer on 150 candidates); the others are scored by forced decoding."""
    eos = scorer.eos_token
    texts = [[scorer.detokenize(_without(h[len(start) :], eos)) for h in r.hypotheses] for r in results]
    if start:  # the prefix's own tokens and the first step: not reused
        return texts, None
    first_eos = [r.log_probs[0] for r in scorer.model.score_batch(source_tokens, [[] for _ in source_tokens])]
    known: List[List[Optional[Tuple[float, int]]]] = []
    for s, result in enumerate(results):
        canonical = scorer.target_tokens(texts[s])
        mine: List[Optional[Tuple[float, int]]] = []
        for tokens, score, kept in zip(result.hypotheses, result.scores, canonical):
            ended = bool(tokens) and tokens[-1] == eos
            if ended and tokens[:-1] == kept:
                mine.append((score * len(tokens) + float(np.log1p(-np.exp(first_eos[s]))), len(tokens)))
            else:
                mine.append(None)
        known.append(mine)
    return texts, known


def _without(tokens: List[str], eos: str) -> List[str]:
    """``tokens`` without the end-of-sentence token a search returned at their end."""
    return tokens[:-1] if tokens and tokens[-1] == eos else tokens


#: how each kind of model gives its candidates: ``(scorer, sources, nbest, beam, sampling,
#: max_length, first_sentence) -> Candidates``
GENERATORS: Dict[str, Callable[..., Candidates]] = {
    "hf": _hf_candidates,
    "ct2": _ct2_candidates,
    "hf-lm": _lm_candidates,
}


def _generator_kind(model: str) -> str:
    """The kind of ``--model`` (:data:`GENERATORS`). InputError: another kind."""
    kind = model.partition(":")[0]
    if kind not in GENERATORS:
        raise InputError(f"--model {model!r}: rerank generate runs hf:PATH, hf-lm:PATH,prompt=FILE or ct2:DIR models")
    return kind


def _checked_beam(nbest: int, beam: Optional[int], sampling: Optional[Sampling]) -> int:
    """The beam (default ``nbest``). InputError: both a beam and a sampler, a beam under ``nbest``."""
    if sampling is not None and beam is not None:
        raise InputError("--beam and --sampling exclude each other")
    beam = nbest if beam is None else beam
    if sampling is None and beam < nbest:
        raise InputError(f"--beam {beam} is smaller than --nbest {nbest}")
    return beam


def _generator_scorer(model: str, kind: str, devices: DeviceSettings) -> Any:
    """The model's scorer (``hf:``, ``ct2:``, ``hf-lm:``, with their own generation methods).
    InputError: a model that is not a forward one, a causal LM without its prompt."""
    scorer: Any = make_scorer(model, devices)
    if getattr(scorer, "direction", "forward") != "forward":
        raise InputError(f"--model {model!r}: candidates come from a forward model (direction=forward)")
    if kind == "hf-lm" and scorer.template is None:
        raise InputError(f"--model {model!r}: a causal LM translates from a prompt: hf-lm:PATH,prompt=FILE")
    return scorer


def generate_file(
    model: str,
    input_path: str,
    out_nbest: str,
    out_1best: Optional[str],
    nbest: int,
    beam: Optional[int] = None,
    sampling: Optional[Sampling] = None,
    devices: DeviceSettings = DeviceSettings(),
    max_length: int = 256,
    progress: bool = False,
    chunk_rows: int = 2048,
    shard: Optional[Shard] = None,
    first_sentence: int = 0,
    chunk_sentences: Optional[int] = None,
) -> Dict:
    """Write the ``nbest`` candidates of every line of ``input_path`` (text as the model
    expects it) under ``model`` (``hf:PATH,...`` or ``ct2:DIR,...``, the scorer
    specifications of ``features add``) to ``out_nbest`` (+ its signature ``.json``) and
    ``out_1best`` (None: not written), all together or none (module docstring).  ``beam`` (default ``nbest``)
    or ``sampling``.  The input is decoded, scored and written in chunks of
    ``chunk_sentences`` sentences (default: as many as make ``chunk_rows`` candidates at
    ``nbest``): memory is bounded by a chunk, not by the input.  Sentence i of a sampled run
    draws from a random stream of its own, seeded by (seed, i) (i counted from
    ``first_sentence``: the place of the input's first line in a larger input that ``rerank
    translate`` cuts into blocks): the samples are the same whatever the chunks or shards.
    ``shard``: only chunks K, K+N, … (:mod:`rerank.shards`), each generated and scored as one
    process does it (a model batches a chunk's sentences together, so the last digits depend
    on the chunk), both outputs with signatures recording its sentences (``members``); a
    shard dealt no chunk writes empty outputs, which ``rerank merge`` takes.
    Returns the signature's record (``segments``, ``hypotheses``, ``features``, ...).

    Raises:
        InputError: another model kind, ``beam < nbest``, both beam and sampling, an
            empty input, a model that cannot be loaded, a shard written to standard output.
    """
    kind = _generator_kind(model)
    beam = _checked_beam(nbest, beam, sampling)
    sources = read_lines(input_path)
    if not sources:
        raise InputError("no source sentences", input_path)
    per_chunk = chunk_sentences or max(1, chunk_rows // nbest)
    chunks: Iterable[int] = range(0, len(sources), per_chunk)
    if shard is not None:
        chunks = list(shard.deal(chunks))
        shard.check_output(out_nbest)
        if out_1best is not None:
            shard.check_output(out_1best)
    began = time.perf_counter()
    scorer: Any = _generator_scorer(model, kind, devices)
    scorer.progress = progress
    generate = GENERATORS[kind]
    names = [scorer.name, f"{scorer.name}Norm"]
    info = ListInfo(names[1], {"beam": names}, True)
    hypotheses = searched = 0
    members: List[int] = []
    with StagedOutputs() as staged:
        best_file = staged.open(out_1best) if out_1best is not None else contextlib.nullcontext(io.StringIO())
        with staged.open(out_nbest) as handle, best_file as best:
            writer = NBestWriter(handle, out_nbest)
            for start in chunks:
                part = sources[start : start + per_chunk]
                candidates, known = generate(scorer, part, nbest, beam, sampling, max_length, first_sentence + start)
                block = _scored(scorer, part, candidates, names, info, known)
                writer.write(block, len(members))
                members += range(start, start + len(part))
                best.write("".join(block.hypotheses[o] + "\n" for o in block.offsets[:-1]))
                hypotheses += len(block.hypotheses)
                searched += sum(k is not None for row in known or [] for k in row)
        record = {
            "model": model,
            "model_files": file_digests(model),
            "input": input_path,
            "input_sha256": file_digest(input_path) if os.path.isfile(input_path) else None,
            "nbest": nbest,
            "beam": None if sampling else beam,
            "sampling": None if sampling is None else sampling.to_json(),
            "max_length": max_length,
            "chunk_sentences": per_chunk,
            "devices": {"device": devices.device, "dtype": devices.dtype},
            "segments": len(members),
            "hypotheses": hypotheses,
            # candidates whose NAME the search gave (CTranslate2's beam), the rest forced-decoded
            "scores_from_search": searched,
            "features": names,
            "seconds": round(time.perf_counter() - began, 3),
        }
        packages = ["torch", "transformers", "ctranslate2", "numpy"]
        if shard is not None:
            record["shard"] = shard.member_record(len(sources), input_path, members)
        if shard is not None and out_1best is not None:
            write_signed(
                staged.signature(out_1best),
                {**record, "shard": shard.member_record(len(sources), input_path, members, "text")},
            )
        write_list_info(staged.signature(out_nbest), info, record, packages)
    return record


def _scored(
    scorer,
    sources: List[str],
    candidates: List[List[str]],
    names: List[str],
    info: ListInfo,
    known: Optional[List[List[Optional[Tuple[float, int]]]]] = None,
) -> NBestList:
    """The candidates of ``sources`` scored by forced decoding (``NAME``, ``NAMENorm``), each
    segment's ordered by ``NAMENorm``, best first (the earlier on ties); ``known``: the
    (sum, tokens) of the candidates whose forced-decoding score the search gave (None: not)."""
    inputs = [sources[s] for s, cands in enumerate(candidates) for _ in cands]
    outputs = [c for cands in candidates for c in cands]
    given = [k for row in known for k in row] if known is not None else [None] * len(outputs)
    missing = [i for i, k in enumerate(given) if k is None]
    total, length = np.zeros(len(outputs)), np.zeros(len(outputs), dtype=np.int64)
    if missing:
        total[missing], length[missing] = scorer.score_pairs(
            [inputs[i] for i in missing], [outputs[i] for i in missing]
        )
    for i, k in enumerate(given):
        if k is not None:
            total[i], length[i] = k
    norm = total / np.maximum(length, 1)
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in candidates])]).astype(np.int64)
    order = np.concatenate(
        [offsets[s] + np.argsort(-norm[offsets[s] : offsets[s + 1]], kind="stable") for s in range(len(sources))]
    )
    features = np.column_stack([total[order], norm[order]])
    return NBestList(offsets, [outputs[i] for i in order], features, names, info=info)


__all__: Sequence[str] = ["generate_file"]
