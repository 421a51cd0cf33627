"""Embedding scorers: ``mlmme:MODEL_DIR`` -> ``MLMMEss`` (s_s, cosine of source and
hypothesis embeddings) and, with images, ``MLMMEsi`` (s_i: the model's image–sentence
similarity of image and hypothesis, cosine or order embeddings' −‖max(0, v − d)‖²);
``vse:MODEL_DIR`` -> ``VSEsi``; the same columns under the family's prefix for ``pivot:``,
``parallel:`` (Gella et al. 2017), ``mule:`` (Kim et al. 2020) and ``imagevec:`` (Singhal
et al. 2019), models of ``rerank embed train --objective``.  Options ``,source=LANG`` and
``,target=LANG`` pick the model's encoders (default en, de), ``,name=PREFIX`` renames the
columns (``PREFIXss``, ``PREFIXsi``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

import numpy as np

from rerank.config import option
from rerank.embed.lazy import encode_images, encode_sentences, load_model
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer, given_settings


class _EmbeddingScorer(Scorer):
    """``KIND:MODEL_DIR[,source=en][,target=de][,name=PREFIX]``: the languages of the
    model's encoders that embed the source sentences and the hypotheses (defaults:
    Multi30k's en -> de), and the prefix of the column names (default MLMME / VSE)."""

    prefix = "MLMME"

    @dataclass
    class Config:
        model_dir: str = option("", "a rerank embed train directory", positional=True, path=True)
        source: str = option("en", "the source language's encoder")
        target: str = option("de", "the target language's encoder")
        name: str = option("", "the columns' prefix (default MLMME / VSE): NAMEss, NAMEsi")

    def __init__(self, config: "_EmbeddingScorer.Config"):
        kind = self.prefix.lower()
        model_dir, settings, arg = given_settings(config)
        if not model_dir:
            raise InputError(f"the {kind} scorer needs a model directory ({kind}:MODEL_DIR)")
        name = settings.get("name", self.prefix)
        if not name or any(ch.isspace() or ch in "=|" for ch in name):
            raise InputError(f"{kind}:{arg}: name={name!r} cannot be a column name")
        self.prefix = name  # columns NAMEss / NAMEsi, e.g. name=MLMMEb0.5 for several models in one list
        self.model, self.vocabs = load_model(model_dir)
        self.target, self.source = settings.get("target", "de"), settings.get("source", "en")
        if self.target not in self.vocabs:
            raise InputError(
                f"the model has no {self.target!r} encoder (its languages: {', '.join(self.vocabs)}); set target=LANG",
                model_dir,
            )

    def _has_source(self) -> bool:
        return self.source in self.vocabs and self.source != self.target

    def names(self, has_images: bool) -> List[str]:
        out = [f"{self.prefix}ss"] if self._has_source() else []
        return out + ([f"{self.prefix}si"] if has_images and self.model.config.beta > 0 else [])

    def feature_sets(self, has_images: bool) -> Dict[str, List[str]]:
        """``PREFIX`` (s_s and s_i) and its parts ``PREFIX/ss``, ``PREFIX/si`` (the s_i ablation)."""
        names = self.names(has_images)
        sets = {self.prefix: names}
        sets.update({f"{self.prefix}/{name[len(self.prefix) :]}": [name] for name in names})
        return sets

    def score(self, nbest, sources, images):
        hyp = encode_sentences(
            self.model, self.vocabs[self.target], self.target, nbest.hypotheses, progress=self.progress
        )
        seg = nbest.segment
        out = {}
        if self._has_source():
            if sources is None or len(sources) != nbest.num_segments:
                raise InputError(f"{self.prefix}ss needs one source sentence per segment ({nbest.num_segments})")
            src = encode_sentences(
                self.model, self.vocabs[self.source], self.source, list(sources), progress=self.progress
            )
            out[f"{self.prefix}ss"] = np.einsum("md,md->m", hyp, src[seg]).astype(np.float64)
        if images is not None and f"{self.prefix}si" in self.names(True):
            if len(images) != nbest.num_segments:
                raise InputError(f"{len(images)} image rows but {nbest.num_segments} segments")
            img = encode_images(self.model, np.asarray(images, dtype=np.float32))[seg]
            if self.model.config.similarity == "order":  # image d below sentence v: −‖max(0, v − d)‖²
                si = -np.square(np.maximum(hyp.astype(np.float64) - img, 0.0)).sum(1)
            else:
                si = np.einsum("md,md->m", hyp, img)
            out[f"{self.prefix}si"] = si.astype(np.float64)
        return out


@SCORERS.register("mlmme")
class MLMMEScorer(_EmbeddingScorer):
    """s_s and s_i of an MLMME model (``mlmme:MODEL_DIR[,source=en][,target=de]``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "MLMMEss (MLMMEsi with --images): MLMME s_s and s_i"

    prefix = "MLMME"


@SCORERS.register("vse")
class VSEScorer(_EmbeddingScorer):
    """s_i of a one-language VSE model of the target language (``vse:MODEL_DIR[,target=de]``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "VSEsi: VSE s_i (--images)"

    prefix = "VSE"


@SCORERS.register("pivot")
class PivotScorer(_EmbeddingScorer):
    """s_s and s_i of a PIVOT model (Gella et al. 2017; ``rerank embed train --objective pivot[-asym]``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "PIVOTss (PIVOTsi with --images): PIVOT s_s and s_i (Gella et al. 2017)"

    prefix = "PIVOT"


@SCORERS.register("parallel")
class ParallelScorer(_EmbeddingScorer):
    """s_s and s_i of a PARALLEL model (Gella et al. 2017; ``--objective parallel[-asym]``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "PARALLELss (PARALLELsi with --images): PARALLEL s_s and s_i (Gella et al. 2017)"

    prefix = "PARALLEL"


@SCORERS.register("mule")
class MULEScorer(_EmbeddingScorer):
    """s_s and s_i of a MULE model (Kim et al. 2020; ``--objective mule``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "MULEss (MULEsi with --images): MULE s_s and s_i (Kim et al. 2020)"

    prefix = "MULE"


@SCORERS.register("imagevec")
class ImageVecScorer(_EmbeddingScorer):
    """s_s and s_i of an ImageVec bag-of-words model (Singhal et al. 2019; ``--objective imagevec``)."""

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "IMAGEVECss (IMAGEVECsi with --images): ImageVec s_s and s_i (Singhal et al. 2019)"

    prefix = "IMAGEVEC"
