"""Forced-decoding scorers: the log-probability of every hypothesis under another
fairseq model (``fairseq:CHECKPOINT``, and its shorthands ``nmt:MODEL_DIR``, ``lm:MODEL_DIR``).

``fairseq:CHECKPOINT.pt,dict=DIR,bpe=subword-nmt:CODES|sentencepiece:MODEL|none,
direction=forward|backward|r2l|lm,name=NAME`` scores with any checkpoint of an
architecture fairseq ships (transformer, lstm, fconv, transformer_lm…) or of ours:
``dict`` is the directory of its dictionaries (``dict.SRC.txt``/``dict.TGT.txt`` of a
translation task, ``dict.txt`` of a language model; default: the checkpoint's
directory), ``bpe`` how our lists' (tokenised) text becomes its subwords.  A ``rerank
nmt train`` / ``train-lm`` directory (checkpoints, dictionaries, ``bpe.codes`` or ``spm.model``,
``train.json``) is the shorthand ``nmt:DIR`` / ``lm:DIR``, whose direction and role come
from ``train.json``.  The direction decides what is scored, and the role (``name=``)
names the two columns, ``ROLE`` and ``ROLENorm``:

* ``forward`` (role ``L2R2``, or any name given at training): log P(hypothesis | source);
* ``r2l`` (``R2L``): log P(reversed hypothesis | source), subword tokens reversed as in
  training, end-of-sentence last (Sennrich et al. 2016);
* ``backward`` (``Channel``): log P(source | hypothesis), the channel model of
  noisy-channel re-ranking (Yee et al. 2019; Li & Jurafsky 2016's MMI);
* ``lm`` (``LM``): log P(hypothesis), the target-side language model.

``ROLE`` is the sum of the natural-log token probabilities over the scored sequence's
BPE tokens *including* end-of-sentence (as ``NMT=`` of ``rerank nmt nbest``), ``ROLENorm``
that sum divided by the number of tokens (the per-token mean).  Scores are what fairseq's
``SequenceScorer`` (``fairseq-generate --score-reference``, ``fairseq-eval-lm``)
computes by teacher forcing: the source left-padded, the decoder fed
``</s> y_1 … y_{T-1}`` and scored on ``y_1 … y_T </s>``, log-probabilities in float32
(logit − logsumexp, without writing the whole log-softmax; the tests check equality with
fairseq's own per-token scores).  Each distinct (input,
output) pair is scored once, and each distinct (input, target prefix) is decoded once,
over the prefix tree with the decoder's incremental state (beam-search n-best lists
share most prefixes: 2.5–2.7× faster than padded whole sequences on Multi30k 20-best
lists) — except under a transformer's decoder where the tree's levels cost more than the
rows it saves (long targets that share little: :mod:`rerank.features.prefix_tree`), which teacher-forces
whole sequences in padded batches instead.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.config import option
from rerank.errors import InputError
from rerank.features.prefix_tree import tree_chunks, tree_pays
from rerank.features.scorer import SCORERS, Scorer
from rerank.nmt import USER_DIR
from rerank.nmt.checkpoints import check_checkpoint, loading
from rerank.nmt.ct2 import convert
from rerank.nmt.subword import make_bpe, subword_spec
from rerank.textio import read_json


def load_checkpoint(checkpoint: str, dict_dir: str):
    """(model in eval mode, task) of a fairseq checkpoint whose dictionaries are in
    ``dict_dir``, loaded weights-only with fairseq's own classes
    (:mod:`rerank.nmt.checkpoints`).

    Raises:
        InputError: naming the file when it cannot be loaded.
        UntrustedCheckpoint: it names other classes (loading it could run code), unless trusted.
    """
    import argparse

    from fairseq import checkpoint_utils, utils

    check_checkpoint(checkpoint)
    utils.import_user_module(argparse.Namespace(user_dir=USER_DIR))
    try:
        with loading(path=checkpoint):
            models, _cfg, task = checkpoint_utils.load_model_ensemble_and_task(
                [checkpoint], arg_overrides={"data": dict_dir}
            )
    except (FileNotFoundError, KeyError, RuntimeError, AttributeError) as err:
        raise InputError(
            f"cannot load it as a fairseq checkpoint with the dictionaries of {dict_dir}: "
            f"{' '.join(str(err).split())[:300]}",
            checkpoint,
        ) from None
    model = models[0]
    model.eval()
    return model, task


def _load_fairseq_model(model_dir: str):
    """(model in eval mode, task, train.json record) of a ``rerank nmt train`` directory."""
    meta, ckpt = _scoring_checkpoint(model_dir)
    model, task = load_checkpoint(ckpt, model_dir)
    return model, task, meta


def _scoring_checkpoint(model_dir: str) -> Tuple[Dict[str, Any], str]:
    """(train.json's record, the path of the checkpoint that scores) of a ``rerank nmt train``
    / ``train-lm`` directory: ``checkpoint_best.pt``, or the averaged one train.json names.

    Raises:
        InputError: no train.json, no such checkpoint, or one named by a path (a crafted
            train.json must not load a file outside the directory).
    """
    meta_path = os.path.join(model_dir, "train.json")
    meta = read_json(meta_path) if os.path.exists(meta_path) else None
    name = str(meta.get("checkpoint", "checkpoint_best.pt")) if isinstance(meta, dict) else "checkpoint_best.pt"
    if name != os.path.basename(name) or name in ("", ".", ".."):
        raise InputError(f"train.json names the checkpoint {name!r}: a file of the directory, not a path", meta_path)
    ckpt = os.path.join(model_dir, name)
    if not isinstance(meta, dict) or not os.path.isfile(ckpt):
        raise InputError(
            "not a trained model directory (needs train.json and the checkpoint it names, checkpoint_best.pt "
            "by default)",
            model_dir,
        )
    return meta, ckpt


def pack_model_dir(model_dir: str, directory: str) -> None:
    """Copy into the new ``directory`` what scoring with the ``rerank nmt train`` /
    ``train-lm`` directory ``model_dir`` reads (``rerank pack-system``): everything but the
    checkpoints other than the one that scores (:func:`_scoring_checkpoint`; a training keeps
    several, ~46 MB each for transformer-tiny).  Raises :class:`InputError` as that does."""
    _, ckpt = _scoring_checkpoint(model_dir)
    os.makedirs(directory)
    for name in sorted(os.listdir(model_dir)):
        path, target = os.path.join(model_dir, name), os.path.join(directory, name)
        if os.path.isdir(path):  # train-lm's bin/: its dictionary
            shutil.copytree(path, target)
        elif not name.endswith(".pt") or name == os.path.basename(ckpt):
            shutil.copy2(path, target)


class ForcedDecodingScorer(Scorer):
    """Scores hypotheses with a fairseq translation model or language model.

    Args:
        model_dir: ``rerank nmt train`` / ``train-lm`` output directory (the ``nmt:`` /
            ``lm:`` shorthand), or None with ``parts``.
        max_tokens: padded target tokens per batch of :meth:`_score_sequences` (memory:
            max_tokens × vocabulary floats).
        expect_kind: "translation" or "lm": the kind the scorer name promises.
        max_nodes: sequences decoded together over the prefix tree (memory: at most
            max_nodes × vocabulary floats per step).
        parts: ``(model, task, bpe, direction, role)`` of a checkpoint loaded by
            :class:`~rerank.features.fairseq_scorer.FairseqScorer`.
    Raises:
        InputError: not a model directory, or a model of the other kind.
    """

    def __init__(
        self,
        model_dir: Optional[str],
        max_tokens: int = 6000,
        expect_kind: str = "translation",
        max_nodes: int = 2048,
        parts: Optional[tuple] = None,
    ):
        self.max_tokens, self.max_nodes = max_tokens, max_nodes
        if parts is not None:
            self.model, self.task, self.bpe, self.direction, self.role = parts
            self.kind = "lm" if self.direction == "lm" else "translation"
        else:
            if not model_dir:
                raise InputError(
                    f"the {'lm' if expect_kind == 'lm' else 'nmt'} scorer needs a model directory "
                    f"({'lm' if expect_kind == 'lm' else 'nmt'}:MODEL_DIR)"
                )
            self.model, self.task, meta = _load_fairseq_model(model_dir)
            self.kind = meta.get("kind", "translation")
            if self.kind != expect_kind:
                raise InputError(
                    f"a {self.kind} model, not a {expect_kind} model: use the "
                    f"{'lm' if self.kind == 'lm' else 'nmt'}: scorer",
                    model_dir,
                )
            config = meta["config"]
            self.direction = "lm" if self.kind == "lm" else config["direction"]
            self.role = config["role"]
            self.bpe = make_bpe(subword_spec(model_dir), model_dir)
        if self.kind == "lm":
            self.src_dict: Any = None
            self.tgt_dict = self.task.dictionary
        else:
            self.src_dict, self.tgt_dict = self.task.source_dictionary, self.task.target_dictionary

    def names(self, has_images: bool) -> List[str]:
        return [self.role, f"{self.role}Norm"]

    @classmethod
    def pack(cls, config: Any, directory: str) -> Optional[Any]:
        """``nmt:``/``lm:``: the model directory without the checkpoints that do not score
        (:func:`pack_model_dir`); ``fairseq:`` files are copied as given (None)."""
        model_dir = getattr(config, "model_dir", "")
        if not model_dir:
            return None
        pack_model_dir(model_dir, directory)
        return dataclasses.replace(config, model_dir=directory)

    def _ids(self, texts: Sequence[str], dictionary, reverse: bool = False) -> List:
        """BPE-encode each distinct text once and map it to token ids ending in </s>."""
        import torch

        cache: Dict[str, object] = {}
        out = []
        for text in texts:
            ids = cache.get(text)
            if ids is None:
                # fairseq's Dictionary.encode_line fills its tensor one token at a time (a
                # tensor copy per token: 10 % of channel scoring); index() then one tensor
                words = [dictionary.index(word) for word in self.bpe.process_line(text).split()]
                if reverse:
                    words.reverse()
                ids = torch.tensor(words + [dictionary.eos()], dtype=torch.long)
                cache[text] = ids
            out.append(ids)
        return out

    def score_pairs(self, inputs: Optional[Sequence[str]], outputs: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
        """(sum float64[K], length int64[K]) of log P(outputs[k] | inputs[k]) in natural log
        (``inputs`` None for a language model); length counts tokens incl. </s>.

        Each distinct pair is scored once, and every distinct (input, prefix) is decoded
        once, level by level with the decoder's incremental state
        (:meth:`_score_prefix_tree`): the hypotheses of a 20-best list share most of their
        prefixes (on Multi30k val, 36 % of the target tokens remain as distinct prefixes
        under a left-to-right model, 63 % under the right-to-left one, all under the channel
        model), and even without sharing the level-wise batches carry no padding.  Under a
        transformer's decoder, whose levels cost more than a recurrent one's, the pairs are
        teacher-forced as whole sequences in padded batches (:meth:`_score_sequences`) where
        the tree would not pay (:func:`~rerank.features.prefix_tree.tree_pays`: long targets sharing little, such as a
        random model's or a document's).  The tests check the two against each other and
        against fairseq's own scores."""
        reverse = self.direction == "r2l"
        tgt = self._ids(outputs, self.tgt_dict, reverse=reverse)
        src = self._ids(inputs, self.src_dict) if inputs is not None else None
        keys: Dict[tuple, int] = {}
        where = np.empty(len(tgt), dtype=np.int64)
        for k in range(len(tgt)):
            where[k] = keys.setdefault((outputs[k], inputs[k] if inputs is not None else None), k)
        unique = np.fromiter(keys.values(), dtype=np.int64, count=len(keys))
        lengths = np.array([len(t) for t in tgt], dtype=np.int64)
        sums = np.zeros(len(tgt))
        if tree_pays(self.model.decoder, src, tgt, unique, self.max_nodes):
            sums[unique] = self._score_prefix_tree(src, tgt, unique)
        else:
            sums[unique] = self._score_sequences(src, tgt, unique)
        return sums[where], lengths

    def _score_sequences(self, src, tgt, unique) -> np.ndarray:
        """Summed log-probabilities of the pairs ``unique``, whole sequences teacher-forced
        in padded batches (longest first) of at most ``max_tokens`` target tokens."""
        import torch
        from fairseq.data import data_utils

        order = unique[np.argsort(-np.array([len(tgt[k]) for k in unique]), kind="stable")]
        out: Dict[int, Any] = {}
        pad, eos = self.tgt_dict.pad(), self.tgt_dict.eos()
        start = 0
        with torch.inference_mode():
            while start < len(order):
                width = len(tgt[order[start]])
                batch = order[start : start + max(1, self.max_tokens // max(width, 1))]
                start += len(batch)
                targets = [tgt[k] for k in batch]
                target = data_utils.collate_tokens(targets, pad, eos, left_pad=False)
                prev = data_utils.collate_tokens(targets, pad, eos, left_pad=False, move_eos_to_beginning=True)
                if src is None:
                    net_output = self.model(prev)
                else:
                    sources = [src[k] for k in batch]
                    src_tokens = data_utils.collate_tokens(
                        sources, self.src_dict.pad(), self.src_dict.eos(), left_pad=True
                    )
                    net_output = self.model(src_tokens, torch.tensor([len(x) for x in sources]), prev)
                lprobs = self.model.get_normalized_probs(net_output, log_probs=True)
                token = lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1).masked_fill(target.eq(pad), 0.0)
                out.update(zip(batch.tolist(), token.sum(-1).double().tolist()))
        return np.array([out[k] for k in unique.tolist()])

    def _score_prefix_tree(self, src, tgt, unique, max_nodes: Optional[int] = None) -> np.ndarray:
        """Summed log-probabilities of the pairs ``unique``, decoding every distinct
        (input, target prefix) once: the pairs, grouped by input, are cut into chunks of at
        most ``max_nodes`` sequences; within a chunk, level t holds the distinct prefixes of
        length t, each fed its last token (</s> for the empty prefix) with its parent's
        incremental decoder state, and every sequence takes the log-probability of its
        token t from its prefix's distribution.  Inputs of similar length share a chunk
        (less padding), and a chunk's longest targets come first, so where nothing is
        shared (the channel model) the live prefixes are always the leading rows and the
        states are narrowed in place of being copied (``rerank/nmt/bahdanau.py``).  The decoder
        gets each prefix whole (it feeds the last token and numbers positions by the
        prefix's length, as fairseq's incremental decoding does)."""
        import torch
        from fairseq.data import data_utils

        eos = self.tgt_dict.eos()
        plain_softmax = getattr(self.model.decoder, "adaptive_softmax", None) is None
        out: Dict[int, Any] = {}
        with torch.inference_mode():
            for chunk in tree_chunks(src, tgt, unique, max_nodes or self.max_nodes):
                # longest targets first: when nothing is shared (the channel model) the live
                # prefixes are always the first rows, and the states are narrowed, not copied
                chunk.sort(key=lambda k: -len(tgt[k]))
                seqs = [tgt[k].tolist() for k in chunk]
                roots: Dict[object, int] = {}
                node = [roots.setdefault(None if src is None else id(src[k]), len(roots)) for k in chunk]
                root_keys = list(roots)
                encoder_out = None
                if src is not None:
                    first: Dict[Any, Any] = {id(src[k]): src[k] for k in chunk}
                    sources = [first[key] for key in root_keys]
                    src_tokens = data_utils.collate_tokens(
                        sources, self.src_dict.pad(), self.src_dict.eos(), left_pad=True
                    )
                    encoder_out = self.model.encoder(src_tokens, src_lengths=torch.tensor([len(x) for x in sources]))
                tokens = torch.full((len(roots), 1), eos, dtype=torch.long)
                state: Dict = {}
                totals = [0.0] * len(chunk)
                for t in range(max(len(x) for x in seqs)):
                    if src is None:
                        net_output = self.model.decoder(tokens, incremental_state=state)
                    else:
                        net_output = self.model.decoder(tokens, encoder_out=encoder_out, incremental_state=state)
                    alive = [i for i, x in enumerate(seqs) if len(x) > t]
                    rows = torch.tensor([node[i] for i in alive])
                    cols = torch.tensor([seqs[i][t] for i in alive])
                    if plain_softmax:  # log p = logit − logsumexp, in place: no second (nodes × vocabulary) array
                        logits = net_output[0][:, -1, :].float()
                        picked = logits[rows, cols]
                        top = logits.amax(dim=-1, keepdim=True)
                        lse = logits.sub_(top).exp_().sum(dim=-1).log_() + top.squeeze(-1)
                        picked = picked - lse[rows]
                    else:
                        lprobs = self.model.get_normalized_probs(net_output, log_probs=True)[:, -1, :]
                        picked = lprobs[rows, cols]
                    for i, value in zip(alive, picked.double().tolist()):
                        totals[i] += value
                    children: Dict[tuple, int] = {}
                    parents, last = [], []
                    for i in alive:
                        if len(seqs[i]) > t + 1:
                            key = (node[i], seqs[i][t])
                            if key not in children:
                                children[key] = len(children)
                                parents.append(node[i])
                                last.append(seqs[i][t])
                            node[i] = children[key]
                    if not children:
                        break
                    # each node's whole prefix: fairseq decoders take the full history with an
                    # incremental state, feed only its last token and number positions by its
                    # length (a transformer's positional embeddings)
                    step = torch.tensor(last, dtype=torch.long).unsqueeze(1)
                    if len(parents) == tokens.size(0) and parents == list(range(len(parents))):
                        tokens = torch.cat([tokens, step], dim=1)  # same rows: no reordering
                        continue
                    order = torch.tensor(parents, dtype=torch.long)
                    self._reorder_state(state, order)
                    if encoder_out is not None:
                        encoder_out = self.model.encoder.reorder_encoder_out(encoder_out, order)
                    tokens = torch.cat([tokens[order], step], dim=1)
                out.update(zip(chunk, totals))
        return np.array([out[k] for k in unique.tolist()])

    def _reorder_state(self, state: Dict, order) -> None:
        """The decoder's incremental ``state`` reordered to the rows ``order`` (int64[rows]).
        fairseq's ``MultiheadAttention.reorder_incremental_state`` leaves an encoder-decoder
        attention's cached keys and values as they are when they hold as many rows as
        ``order`` (in its beam search, an encoder output expanded to the beams already); the
        prefix tree's rows hold several sources, so those are reordered here too (else a
        level as wide as the one before, in another order, attended to other sources)."""
        if not hasattr(self, "_cross_attention"):
            self._cross_attention = [
                module for module in self.model.decoder.modules() if getattr(module, "encoder_decoder_attention", False)
            ]
        kept = []
        for module in self._cross_attention:  # those fairseq will skip, found before it runs
            cached = [value for value in module._get_input_buffer(state).values() if value is not None]
            if cached and cached[0].size(0) * getattr(module, "beam_size", 1) == order.size(0):
                kept.append(module)
        self.model.decoder.reorder_incremental_state_scripting(state, order)
        for module in kept:
            buffer = module._get_input_buffer(state)
            for key, value in buffer.items():
                if value is not None:
                    buffer[key] = value.index_select(0, order)
            module._set_input_buffer(state, buffer)

    def score(self, nbest, sources, images):
        hyps = nbest.hypotheses
        if self.kind == "lm":
            total, length = self.score_pairs(None, hyps)
        else:
            if sources is None or len(sources) != nbest.num_segments:
                raise InputError(f"{self.role} needs one source sentence per segment ({nbest.num_segments}): --source")
            src = [sources[s] for s in nbest.segment]
            if self.direction == "backward":  # P(source | hypothesis)
                total, length = self.score_pairs(hyps, src)
            else:
                total, length = self.score_pairs(src, hyps)
        return {self.role: total, f"{self.role}Norm": total / length}


@SCORERS.register("nmt")
class NMTScorer(ForcedDecodingScorer):
    """``nmt:MODEL_DIR``: a translation model (forward, r2l or backward) as a feature."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "ROLE, ROLENorm: forced decoding under a rerank nmt train model (R2L, Channel, L2R2)"

    @dataclass
    class Config:
        model_dir: str = option("", "a rerank nmt train directory", positional=True, path=True)

    def __init__(self, config: "NMTScorer.Config"):
        super().__init__(config.model_dir, expect_kind="translation")

    @classmethod
    def ct2_spec(cls, config: "NMTScorer.Config", directory: str, quantization: str) -> Optional[str]:
        """``rerank pack-system --ct2``: the model directory's scoring checkpoint
        (:func:`_scoring_checkpoint`) converted by CTranslate2's fairseq converter
        (:func:`rerank.nmt.ct2.convert`, in the model's own languages: a channel model's are
        the task's swapped) into ``directory``, and the ``ct2:`` spec that scores with it as
        this scorer does: the directory's subword step, its direction (targets reversed for
        ``r2l``), its role as the column name, the conversion's own compute type.  In float32
        its sums are within 1e-3 nats of this scorer's (tested); CTranslate2's
        ``score_batch`` encodes the source once per hypothesis and shares no prefixes.

        Raises:
            InputError: a model CTranslate2 does not convert (the paper's GRUs), naming it."""
        meta, checkpoint = _scoring_checkpoint(config.model_dir)
        trained = meta["config"]
        direction, role = trained["direction"], trained["role"]
        src, tgt = trained.get("src", "en"), trained.get("tgt", "de")
        if direction == "backward":  # the model reads the task's target language
            src, tgt = tgt, src
        convert(checkpoint, config.model_dir, directory, src, tgt, quantization)
        bpe = subword_spec(config.model_dir)
        return f"ct2:{directory},bpe={bpe},direction={direction},name={role},compute_type=default"


@SCORERS.register("lm")
class LMScorer(ForcedDecodingScorer):
    """``lm:MODEL_DIR``: a target-side language model as a feature."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "LM, LMNorm: a rerank nmt train-lm language model"

    @dataclass
    class Config:
        model_dir: str = option("", "a rerank nmt train-lm directory", positional=True, path=True)

    def __init__(self, config: "LMScorer.Config"):
        super().__init__(config.model_dir, expect_kind="lm")
