"""Metric specifications as users write them (``--metric``, ``--metrics``): a registered
name (``bleu``, ``chrf``, ``ter``, ``meteor``, ``length``), external segment scores
(``seg:NAME``, ``seg:NAME:lower``) or an interpolation of those (``0.5*bleu+0.5*chrf``,
``bleu-ter``, ``bleu+0.2*seg:comet``)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from rerank.errors import InputError
from rerank.metrics.base import METRICS, Metric
from rerank.metrics.interpolated import InterpolatedMetric
from rerank.metrics.segment import SegmentMetric

_TERM = re.compile(
    r"\s*([+-]?)\s*(?:(\d+(?:\.\d*)?(?:e-?\d+)?|\.\d+)\s*\*\s*)?"
    r"(seg:[A-Za-z0-9_.]+(?::lower)?|[a-z0-9_]+(?::[a-z_]+=[^,+*\s]+(?:,[a-z_]+=[^,+*\s]+)*)?)\s*"
)

#: the one default metric set of every verb and API function that reports several metrics
#: (eval, signif, report; rerank.evaluate, rerank.significance): sacrebleu's three, in
#: sacrebleu's order; METEOR (a jar and java) and MultEval's length are asked for by name
DEFAULT_METRICS = ("bleu", "chrf", "ter")

#: what ``--metric`` accepts, for help texts (the registered names are read from the modules
#: of rerank.metrics: a new metric module appears here with no other change)
METRIC_HELP = (
    f"a metric: {', '.join(METRICS.names())} (settings as NAME:key=value,…, e.g. chrf:word_order=2 for "
    "chrF++); seg:NAME (segment scores computed elsewhere, one per line in the "
    "sidecar FILE.NAME of each scored file; seg:NAME:lower where lower is better); or an interpolation "
    "such as 0.5*bleu+0.5*chrf or bleu-ter (lower-is-better metrics enter with a minus sign)"
)


def split_metrics(text: str) -> List[str]:
    """The metric specs of a comma-separated ``--metrics`` value: a piece ``key=value`` after a
    spec with settings is one more of its settings, so ``bleu,comet:DIR,source=test.en,chrf``
    is three metrics.  Empty pieces are dropped."""
    specs: List[str] = []
    for piece in text.split(","):
        if specs and ":" in specs[-1] and re.match(r"[a-z_]+=", piece.strip()):
            specs[-1] += "," + piece.strip()
        elif piece.strip():
            specs.append(piece.strip())
    return specs


def _single(name: str, tokenize: Optional[str], lowercase: bool, lang: Optional[str]) -> Metric:
    """One metric: ``seg:KEY[:lower]`` or a registered ``NAME[:key=value,…]``."""
    if name.startswith("seg:"):
        key, _, direction = name[4:].partition(":")
        if direction not in ("", "lower"):
            raise InputError(f"{name!r}: expected seg:NAME or seg:NAME:lower")
        return SegmentMetric(key, higher_is_better=direction != "lower")
    base, _, settings = name.partition(":")
    return METRICS.get(base).create(tokenize=tokenize, lowercase=lowercase, lang=lang, settings=settings, spec=name)


#: the largest coefficient of an interpolation: scores of 0-100 (TER: a few hundred) times
#: it stay far from the float range, so tuning results can always be written
MAX_COEFFICIENT = 1e6


def parse_terms(spec: str) -> List[Tuple[float, str]]:
    """[(coefficient, metric name)] of an expression such as ``0.5*bleu-0.5*ter``.
    Raises :class:`InputError` naming the part that does not parse."""
    terms: List[Tuple[float, str]] = []
    position = 0
    while position < len(spec):
        match = _TERM.match(spec, position)
        if not match or match.end() == position or (terms and not match.group(1)):
            raise InputError(f"metric {spec!r}: cannot read {spec[position:]!r} (expected e.g. 0.5*bleu+0.5*chrf)")
        sign, number, name = match.groups()
        value = float(number) if number else 1.0
        if not value <= MAX_COEFFICIENT:
            raise InputError(
                f"metric {spec!r}: coefficient {number} is beyond {MAX_COEFFICIENT:g} (scores would overflow)"
            )
        terms.append((-value if sign == "-" else value, name))
        position = match.end()
    if not terms:
        raise InputError("empty metric name")
    return terms


#: sacrebleu's names of its metrics (``sacrebleu -m bleu chrf ter``, its signatures' ``chrF2``,
#: ``chrF2++``) and what they are here: users write either
SACREBLEU_NAMES = (
    (re.compile(r"(?<![\w:.])chr[fF]2?\+\+(?![\w+])"), "chrf:word_order=2"),
    (re.compile(r"(?<![\w:.])chr[fF]2?(?![\w+:])"), "chrf"),
    (re.compile(r"(?<![\w:.])BLEU(?![\w:])"), "bleu"),
    (re.compile(r"(?<![\w:.])TER(?![\w:])"), "ter"),
)


def sacrebleu_names(spec: str) -> str:
    """``spec`` with sacrebleu's metric names (``chrF``, ``chrF2``, ``chrF++``, ``chrf++``,
    ``BLEU``, ``TER``) in ours (``chrf``, ``chrf:word_order=2``, ``bleu``, ``ter``); ``seg:``
    names are left as written."""
    for pattern, name in SACREBLEU_NAMES:
        spec = pattern.sub(name, spec)
    return spec


def make_metric(
    spec: str, tokenize: Optional[str] = None, lowercase: bool = False, lang: Optional[str] = None
) -> Metric:
    """The metric ``spec`` names: a registered name, ``seg:NAME[:lower]`` or an
    interpolation (module docstring).

    ``tokenize`` applies to BLEU and length only (sacrebleu's default '13a' when None);
    ``lowercase`` to every text metric; ``lang`` to METEOR only.  Raises
    :class:`InputError` for an unknown name or an expression that does not parse.
    sacrebleu's names are read as ours (:func:`sacrebleu_names`: ``chrF``, ``chrF++``).
    """
    spec = sacrebleu_names(spec.strip())
    if re.fullmatch(r"seg:[^+*\s]+|[a-z0-9_]+(?::[^+*\s]*)?", spec):
        return _single(spec, tokenize, lowercase, lang)
    terms = parse_terms(spec)
    if len(terms) == 1 and terms[0][0] == 1.0:
        return _single(terms[0][1], tokenize, lowercase, lang)
    return InterpolatedMetric([(c, _single(name, tokenize, lowercase, lang)) for c, name in terms])


def make_objective(
    spec: str, tokenize: Optional[str] = None, lowercase: bool = False, lang: Optional[str] = None
) -> Metric:
    """:func:`make_metric` for tuning and oracle selection: the metric must have a
    direction (``length`` has none).  Raises :class:`InputError`."""
    metric = make_metric(spec, tokenize, lowercase, lang)
    if not metric.tunable:
        raise InputError(
            f"metric {spec!r} has no better direction: it cannot be optimised (choose one of "
            f"{', '.join(n for n in METRICS.names() if n != spec)}, seg:NAME or an interpolation)"
        )
    return metric
