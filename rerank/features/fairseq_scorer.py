"""``fairseq:CHECKPOINT``: any fairseq checkpoint — a translation model in any direction or a
language model, with its dictionaries and subword step — as a forced-decoding feature, scored
as :class:`~rerank.features.nmt_scorer.ForcedDecodingScorer` scores the models trained here
(equal to fairseq's own ``SequenceScorer``)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from dataclasses import dataclass

from rerank.config import option
from rerank.errors import InputError
from rerank.features.nmt_scorer import ForcedDecodingScorer, load_checkpoint
from rerank.features.scorer import SCORERS, given_settings
from rerank.nmt.subword import make_bpe

#: default role (column name) of a fairseq: scorer by direction
FAIRSEQ_ROLES = {"forward": "Fairseq", "backward": "FairseqChannel", "r2l": "FairseqR2L", "lm": "FairseqLM"}


@SCORERS.register("fairseq")
class FairseqScorer(ForcedDecodingScorer):
    """``fairseq:CHECKPOINT.pt,dict=DIR,bpe=…,direction=forward|backward|r2l|lm,name=NAME``:
    any fairseq checkpoint as a feature (module docstring); equal to fairseq's own
    ``SequenceScorer`` (``fairseq-generate --score-reference``, ``fairseq-eval-lm``).

    Raises:
        InputError: a missing ``bpe=``, an unknown direction, a checkpoint that does not
            load with those dictionaries, a language model given another direction (or the
            reverse).
    """

    #: the line of ``rerank features add --help`` and ``rerank --help``
    summary = "N, NNorm: any fairseq checkpoint"

    @dataclass
    class Config:
        checkpoint: str = option("", "the checkpoint file", positional=True, path="file")
        dict: str = option("", "the directory of its dictionaries (default: the checkpoint's)", path="dir")
        bpe: str = option(
            "", "how text becomes its subwords: subword-nmt:CODES, sentencepiece:MODEL or none", path=True
        )
        direction: str = option("forward", "what it scores", choices=tuple(FAIRSEQ_ROLES))
        name: str = option("", "the column (default by direction: Fairseq, FairseqChannel, …)")

    def __init__(self, config: "FairseqScorer.Config"):
        checkpoint, settings, arg = given_settings(config)
        spec = f"fairseq:{arg}"
        if not checkpoint:
            raise InputError(
                f"{spec}: give the checkpoint, e.g. fairseq:model/checkpoint_best.pt,dict=data-bin,"
                "bpe=subword-nmt:bpe.codes"
            )
        if "bpe" not in settings:
            raise InputError(
                f"{spec}: say how our text becomes the model's subwords: bpe=subword-nmt:CODES, "
                "bpe=sentencepiece:MODEL or bpe=none"
            )
        direction = settings.get("direction", "forward")
        if direction not in FAIRSEQ_ROLES:
            raise InputError(f"{spec}: direction must be one of {', '.join(FAIRSEQ_ROLES)}, not {direction!r}")
        bpe = make_bpe(settings["bpe"], spec)
        model, task = load_checkpoint(checkpoint, settings.get("dict") or os.path.dirname(checkpoint) or ".")
        is_lm = not hasattr(task, "src_dict")  # a translation task holds src_dict and tgt_dict
        if is_lm != (direction == "lm"):
            raise InputError(
                f"{spec}: a {'language' if is_lm else 'translation'} model: "
                f"{'give direction=lm' if is_lm else 'direction=lm is for language models'}",
                checkpoint,
            )
        role = settings.get("name") or FAIRSEQ_ROLES[direction]
        super().__init__(None, parts=(model, task, bpe, direction, role))

    @classmethod
    def pack(cls, config: "FairseqScorer.Config", directory: str) -> "FairseqScorer.Config":
        """The checkpoint, its dictionaries (``dict.*.txt`` of ``dict=``, else of the
        checkpoint's directory: not the other checkpoints there) and the ``bpe=`` file
        copied into ``directory``, the settings pointing at the copies."""
        os.makedirs(directory)
        checkpoint = os.path.join(directory, os.path.basename(config.checkpoint))
        shutil.copy2(config.checkpoint, checkpoint)
        dicts = config.dict or os.path.dirname(config.checkpoint) or "."
        for name in sorted(os.listdir(dicts)):
            if name.startswith("dict.") and name.endswith(".txt"):
                shutil.copy2(os.path.join(dicts, name), os.path.join(directory, name))
        bpe = config.bpe
        kind, sep, path = bpe.partition(":")
        if sep and os.path.isfile(path):
            os.makedirs(os.path.join(directory, "bpe"))
            bpe = f"{kind}:{shutil.copy2(path, os.path.join(directory, 'bpe', os.path.basename(path)))}"
        return dataclasses.replace(config, checkpoint=checkpoint, dict=directory, bpe=bpe)
