"""Reference-free quality estimation as a re-ranking feature (``cometkiwi:DIR``) -> ``CometKiwi``:
the score of a CometKiwi or COMET-QE checkpoint (:mod:`rerank.metrics.comet`) for the source and
each hypothesis — QE re-ranking (Fernandes et al. 2022, "Quality-Aware Decoding for Neural
Machine Translation").  Each distinct sentence is encoded once (regression models); unified
models (CometKiwi) encode each (hypothesis, source) pair.  Settings as the metric's:
``cometkiwi:DIR,encoder=DIR,batch=64``; ``--device``/``--dtype`` of ``features add``.
A reference-based COMET checkpoint is no feature (it needs a reference): use it as the MBR
utility, ``mbr:comet:DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from rerank.argtypes import positive_int
from rerank.config import option
from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer
from rerank.metrics.comet import CometKiwiMetric
from rerank.progress import progress_bar


@SCORERS.register("cometkiwi")
class CometKiwiScorer(Scorer):
    """``CometKiwi``: the reference-free score of (source, hypothesis).

    Raises:
        InputError: (when built) no checkpoint directory, a checkpoint that needs a reference,
            any refusal of :class:`rerank.metrics.comet.CometModel`; (when scoring) no sources.
    """

    summary = "CometKiwi: reference-free COMET (CometKiwi, COMET-QE) of source and hypothesis"
    uses_device = True
    set_name = "QE"

    @dataclass
    class Config:
        model: str = option("", "a reference-free COMET checkpoint directory", positional=True, path=True)
        encoder: str = option(
            "", "the encoder's directory (config + tokenizer); default: hparams' pretrained_model", path=True
        )
        batch: int = option(64, "sentences per encoder call", type=positive_int)
        dtype: str = option(
            "",
            "the encoder's dtype (default: --dtype); int8: its linear layers quantised, on the CPU (faster; scores move)",
        )
        threads: Optional[int] = option(
            None, "torch CPU threads (default: --threads, else the CPUs this process may use)", type=positive_int
        )

    def __init__(self, config: "CometKiwiScorer.Config", devices: DeviceSettings = DeviceSettings()):
        if not config.model:
            raise InputError("cometkiwi: give the checkpoint: cometkiwi:DIR")
        self.metric = CometKiwiMetric(
            config.model,
            encoder=config.encoder,
            batch=config.batch,
            device=devices.device,
            dtype=config.dtype or devices.dtype,
            threads=config.threads or devices.threads,
        )
        self.metric.comet()  # refuses a bad checkpoint before any list is read

    def names(self, has_images: bool) -> List[str]:
        return ["CometKiwi"]

    def score(self, nbest, sources, images):
        if sources is None or len(sources) != nbest.num_segments:
            raise InputError(f"CometKiwi needs one source sentence per segment ({nbest.num_segments}): --source")
        model = self.metric.comet()
        values = []
        step = 4096
        hyps = list(nbest.hypotheses)
        srcs = [sources[s] for s in nbest.segment]
        for start in progress_bar(range(0, len(hyps), step), desc="cometkiwi", unit="block", enabled=self.progress):
            values.append(model.score(srcs[start : start + step], hyps[start : start + step], None))
        return {"CometKiwi": np.concatenate(values) if values else np.zeros(0)}
