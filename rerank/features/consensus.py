"""Consensus features: the expected utility of MBR decoding (Kumar & Byrne 2004,
"Minimum Bayes-Risk Decoding for Statistical Machine Translation").

``mbr:bleu`` -> ``MBRBLEU``, ``mbr:chrf`` -> ``MBRchrF``: for hypothesis h of a segment's
list H, ``E(h) = sum_{h' in H} p(h') · u(h, h')`` with ``p = softmax(NMT)`` over the list
(the model's log-probability column, natural log, temperature 1) and u sentence BLEU
(sacrebleu's ``BLEU(effective_order=True).sentence_score``, tokenisation 'none': the
lists are tokenised text) or sentence chrF (sacrebleu's ``CHRF().sentence_score``) of h
against h' as the reference.  The sum runs over the whole list, h itself included, as
in MBR decoding (mbrs' expected utility with the hypotheses as pseudo-references).
Optional settings after the metric: ``mbr:bleu,feature=NMTNorm,temperature=0.5``;
``feature=uniform`` weighs every candidate alike — the Monte-Carlo estimate for lists of
samples (``rerank generate --sampling``; Eikema & Aziz 2020).

``algorithm=aggregate`` (``rerank mbr --algorithm aggregate``) is reference aggregation
(Vamvas & Sennrich 2024, "Linear-time Minimum Bayes Risk Decoding with Reference
Aggregation"): the pseudo-references' n-gram counts are averaged, weighted by their
probability, into one aggregate reference, and each candidate is scored once against it
(chrF: character n-grams; BLEU: word n-grams, matches clipped by the aggregate's fractional
counts, its length the expected reference length) — O(N) utilities per segment instead of
O(N²); with one pseudo-reference it equals the exact utility.

``rerank mbr --algorithm pruned`` is confidence-based pruning (Cheng & Vlachos 2023, "Faster
Minimum Bayes Risk Decoding with Confidence-based Pruning"): utilities against a growing
sample of the pseudo-references (8, 16, 32, … of them), and after each step every candidate
whose bootstrap estimate of beating the current best falls below ``1 − alpha`` is dropped;
the survivors are ranked on every pseudo-reference drawn.

``algorithm=centroid`` (``rerank mbr --algorithm centroid``) is centroid MBR (Deguchi et al.
2024): the pseudo-references of a segment clustered by weighted k-means on their n-gram
counts, each centroid its cluster's aggregate reference, weighted by the cluster's mass.

The engine and its algorithms are :mod:`rerank.mbr` (one module per algorithm); the utility
is any registered metric with a pairwise utility (:mod:`rerank.metrics.utility`), so a new
metric module is a new ``mbr:NAME`` column.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, List

from rerank.argtypes import temperature as temperature_type
from rerank.config import option
from rerank.errors import InputError
from rerank.features.scorer import SCORERS, Scorer
from rerank.mbr import MBR
from rerank.mbr.decoders import DECODERS, make_decoder, setting_fields


def _config() -> Any:
    """The ``mbr:`` spec's Config: utility, distribution and algorithm, and the settings of
    every algorithm that gives a column, generated from their Configs
    (:mod:`rerank.mbr.decoders`: a new algorithm's settings appear here by themselves)."""
    decoders = DECODERS.classes()
    columns = "; ".join(f"{name}: {cls.summary}" for name, cls in decoders.items() if cls.gives_column)
    selectors = ", ".join(name for name, cls in decoders.items() if not cls.gives_column)
    fields: List[Any] = [
        (
            "utility",
            str,
            option(
                "",
                "the sentence utility: a metric with a pairwise utility (bleu, chrf, ter: minus sentence TER, "
                "comet:DIR, bertscore:DIR)",
                positional=True,
            ),
        ),
        (
            "feature",
            str,
            option(
                "",
                "the log-probability column of the distribution (default: the list's model column, the one "
                "its signature's beam feature normalises: NMT, HF…), or uniform (samples)",
            ),
        ),
        ("temperature", float, option(1.0, "softmax temperature", type=temperature_type)),
        (
            "algorithm",
            str,
            option(
                "exact",
                f"the MBR algorithm — {columns}; {selectors}: rerank mbr's alone (it selects, it gives no column)",
                choices=tuple(decoders),
            ),
        ),
    ]
    for name, field, owners in setting_fields(column_only=True):
        meta = {**field.metadata, "help": f"{', '.join(owners)}: {field.metadata.get('help', name)}"}
        fields.append((name, field.type, dataclasses.field(default=field.default, metadata=meta)))
    name_help = "the column's name (default: MBRBLEU, MBRchrF, MBRTER…), e.g. name=MBRchrFagg beside the exact one"
    fields.append(("name", str, option("", name_help)))  # last: positional Config(utility, feature, …) holds
    return dataclasses.make_dataclass("Config", fields)


class _Generated:
    """``ConsensusScorer.Config``, generated again when the registered algorithms change (an
    algorithm registered after import, by a user's module, takes part in ``mbr:`` too)."""

    def __init__(self) -> None:
        self._key: Any = None
        self._config: Any = None

    def __get__(self, instance: Any, owner: Any) -> Any:
        key = tuple(DECODERS.names())
        if key != self._key:
            self._key, self._config = key, _config()
        return self._config


@SCORERS.register("mbr")
class ConsensusScorer(Scorer, MBR):
    """Expected sentence-BLEU, chrF or minus TER (any metric with a pairwise utility) of each
    hypothesis against its list (MBR utility): :class:`rerank.mbr.MBR`'s column, by any
    registered algorithm that gives one (:mod:`rerank.mbr.decoders`).

    Args:
        config: :attr:`Config` (``mbr:bleu``, ``mbr:chrf,feature=uniform,temperature=0.5``,
            ``mbr:bleu,algorithm=centroid,clusters=16``).
    Raises:
        InputError: (from the spec) an unknown utility or setting, a non-positive temperature,
            an algorithm that gives no column (``pruned``).
    """

    summary = "MBRBLEU / MBRchrF / MBRTER: MBR expected utility (MBRTER: minus expected TER)"
    Config: ClassVar[Any] = _Generated()
    set_name = "MBR"

    def __init__(self, config: Any):
        settings = dataclasses.asdict(config)
        self.name = settings.pop("name") or ""
        decoder = make_decoder(settings.pop("algorithm"), **settings)
        if not decoder.gives_column:
            raise InputError(
                f"mbr: algorithm={decoder.name} selects one candidate per segment and scores no column: decode with "
                f"rerank mbr --algorithm {decoder.name}, or add a column with algorithm="
                + ", ".join(n for n, c in DECODERS.classes().items() if c.gives_column)
            )
        MBR.__init__(self, config.utility, config.feature, config.temperature, decoder)

    def names(self, has_images: bool) -> List[str]:
        return [self.name or self.column]

    def score(self, nbest, sources, images):
        self.begin_list(0, sources)  # COMET: u(h, r | s), the list's own sources unless the spec names a file
        return {self.name or self.column: self.expected_of(nbest)}
