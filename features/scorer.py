"""The Scorer interface shared by every re-ranking feature, and its registry.

A :class:`Scorer` turns an n-best list (plus the source sentences and, where it needs
them, one CNN feature vector per segment) into named feature columns, one value per
hypothesis.  ``rerank features add --scorer NAME:ARG`` builds scorers with
:func:`make_scorer` and appends their columns to a Moses n-best list.

Registered scorers:

* ``mlmme:MODEL_DIR`` -> ``MLMMEss`` (s_s: cosine of source and hypothesis embeddings)
  and, with images, ``MLMMEsi`` (s_i: cosine of image and hypothesis embeddings);
* ``vse:MODEL_DIR`` -> ``VSEsi`` (the one-language model's s_i);
* ``nmt:MODEL_DIR`` -> ``ROLE``, ``ROLENorm`` (R2L, Channel, L2R2: forced decoding under
  another translation model) and ``lm:MODEL_DIR`` -> ``LM``, ``LMNorm``
  (``features/nmt_scorer.py``);
* ``mbr:bleu`` / ``mbr:chrf`` -> ``MBRBLEU`` / ``MBRchrF``, the expected utility of MBR
  decoding (``features/consensus.py``);
* ``e5:`` -> ``E5ss``, multilingual-E5 source–hypothesis similarity
  (``features/text_embedding.py``);
* ``len:PREPARED_DIR`` -> ``LenRatio``, ``LenDev`` (``features/length.py``).
"""

from __future__ import annotations

import json
import os
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.nbest import NBestList

REGISTRY: Dict[str, Callable[[str], "Scorer"]] = {}


def register(name: str):
    """Class decorator: make the scorer available as ``name:ARG``."""
    def wrap(cls):
        REGISTRY[name] = cls
        return cls
    return wrap


class Scorer:
    """Interface.  ``names(has_images)`` lists the columns ``score`` returns;
    ``score(nbest, sources, images)`` returns {name: float64[M]} aligned with the rows of
    ``nbest``.  ``sources``: N preprocessed source sentences (or None); ``images``: float
    (N, D) CNN features, one row per segment (or None).  ``progress``: show tqdm bars
    on stderr while scoring."""

    progress: bool = False

    def names(self, has_images: bool) -> List[str]:
        raise NotImplementedError

    def score(self, nbest: NBestList, sources: Optional[Sequence[str]],
              images: Optional[np.ndarray]) -> Dict[str, np.ndarray]:
        raise NotImplementedError


#: modules whose scorers register themselves on import (imported by :func:`make_scorer`;
#: none imports torch or fairseq before a scorer is built)
BUILTIN_MODULES = ("features.consensus", "features.length", "features.nmt_scorer", "features.text_embedding")


def make_scorer(spec: str) -> Scorer:
    """``NAME:ARG`` -> a registered scorer.  Raises :class:`InputError` for an unknown name."""
    import importlib

    for module in BUILTIN_MODULES:
        importlib.import_module(module)
    name, _, arg = spec.partition(":")
    if name not in REGISTRY:
        raise InputError(f"unknown scorer {name!r} in {spec!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name](arg)


def load_model(model_dir: str):
    """(MLMME model in eval mode, {lang: Vocabulary}) from a ``train_embeddings`` output directory."""
    import torch

    from features.data import Vocabulary
    from features.mlmme import MLMME, MLMMEConfig

    path = os.path.join(model_dir, "config.json")
    if not os.path.exists(path):
        raise InputError("not an embedding model directory (no config.json)", model_dir)
    with open(path, encoding="utf-8") as handle:
        config = MLMMEConfig(**json.load(handle)["config"]["model"])
    vocabs = {lang: Vocabulary.load(os.path.join(model_dir, f"vocab.{lang}.json")) for lang in config.langs}
    model = MLMME({lang: len(v) for lang, v in vocabs.items()}, config)
    model.load_state_dict(torch.load(os.path.join(model_dir, "model.pt"), map_location="cpu", weights_only=True))
    model.eval()
    return model, vocabs


class _EmbeddingScorer(Scorer):
    prefix = "MLMME"

    def __init__(self, model_dir: str, target: str = "de", source: str = "en"):
        self.model, self.vocabs = load_model(model_dir)
        self.target, self.source = target, source
        if target not in self.vocabs:
            raise InputError(f"the model has no {target!r} encoder", model_dir)

    def _has_source(self) -> bool:
        return self.source in self.vocabs and self.source != self.target

    def names(self, has_images: bool) -> List[str]:
        out = [f"{self.prefix}ss"] if self._has_source() else []
        return out + ([f"{self.prefix}si"] if has_images and self.model.config.beta > 0 else [])

    def score(self, nbest, sources, images):
        from features.train import encode_images, encode_sentences

        hyp = encode_sentences(self.model, self.vocabs[self.target], self.target, nbest.hypotheses,
                               progress=self.progress)
        seg = nbest.segment
        out = {}
        if self._has_source():
            if sources is None or len(sources) != nbest.num_segments:
                raise InputError(f"{self.prefix}ss needs one source sentence per segment ({nbest.num_segments})")
            src = encode_sentences(self.model, self.vocabs[self.source], self.source, list(sources),
                                   progress=self.progress)
            out[f"{self.prefix}ss"] = np.einsum("md,md->m", hyp, src[seg]).astype(np.float64)
        if images is not None and f"{self.prefix}si" in self.names(True):
            if len(images) != nbest.num_segments:
                raise InputError(f"{len(images)} image rows but {nbest.num_segments} segments")
            img = encode_images(self.model, np.asarray(images, dtype=np.float32))
            out[f"{self.prefix}si"] = np.einsum("md,md->m", hyp, img[seg]).astype(np.float64)
        return out


@register("mlmme")
class MLMMEScorer(_EmbeddingScorer):
    """s_s and s_i of an MLMME model (source English, target German)."""

    prefix = "MLMME"


@register("vse")
class VSEScorer(_EmbeddingScorer):
    """s_i of a one-language VSE model of the target language."""

    prefix = "VSE"
