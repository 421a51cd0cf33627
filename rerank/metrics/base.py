"""The :class:`Metric` interface and the metric registry.

Each :class:`Metric` extracts statistics once per system (``stats``: float[N, K], one
row per segment) and scores any stack of summed rows (``score``: float[..., K] ->
float[...]) without touching text again, as sacrebleu's ``metrics/base.py`` and
MultEval do: evaluation, bootstrap resampling and approximate randomisation share it.
A metric is one module of this package registered with ``@METRICS.register(name)``.

The same object is the tuning objective (Moses ``mert/``'s ``StatisticsBasedScorer``):
tuners, the oracle and cross-fitting keep one statistics row per hypothesis and ask the
metric for

* :meth:`Metric.gain` — the corpus value to maximise, from summed rows (the score, or
  minus the score for a metric where lower is better, such as TER);
* :meth:`Metric.background_gain` — the smoothed sentence-level gain of MIRA's hope and
  fear: the gain of the row added to a background pseudo-document, as a fraction, times
  the document's reference length (kbmira's ``sentenceLevelBackgroundBleu`` for BLEU;
  minus the smoothed edit count for TER);
* :meth:`Metric.sentence_score` — the sentence-level score (0-1 scale) that PRO's pairs
  are drawn on (BLEU+1 for BLEU).

Metrics that are not computed from text (``seg:NAME``: scores computed elsewhere, read
from a sidecar file) are :meth:`bind`-ed to the file they score before
:meth:`hypothesis_stats` is asked for.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import ClassVar, List, Optional, Sequence

import numpy as np

from rerank.config import parse_settings, settings_help
from rerank.errors import InputError
from rerank.metrics.references import References, reference_streams
from rerank.metrics.utility import PairwiseUtility
from rerank.registry import Registry


@dataclasses.dataclass(frozen=True)
class Signature:
    """A metric's signature as sacrebleu writes one (its ``Signature`` classes): the metric's
    name, then its settings as ``key:value`` fields, ``|``-separated; a field whose key is
    empty is a bare word (``F1``, ``rerank``).  Booleans are ``yes``/``no``.  ``str()`` gives
    the text that tables, weights records and manifests carry, e.g.
    ``bertscore|model:bert|layer:last|F1|no-idf|lc:no|nrefs:1|version:0.3.13``."""

    name: str
    fields: Sequence = ()

    def __str__(self) -> str:
        parts = [self.name]
        for key, value in self.fields:
            text = ("yes" if value else "no") if isinstance(value, bool) else str(value)
            parts.append(f"{key}:{text}" if key else text)
        return "|".join(parts)


class Score(float):
    """A corpus score that is a float — it compares, sums, formats and serialises as one —
    and also carries its metric's ``name`` and sacrebleu-style ``signature``, as
    sacrebleu's score objects do: ``str(score)`` is ``BLEU = 38.75`` and
    ``score.format(signature=True)`` adds the signature."""

    name: str
    signature: str
    #: the name as sacrebleu prints it (``chrF2``), where the metric gave one
    label: str

    def __new__(cls, value: float, name: str, signature: str, label: Optional[str] = None) -> "Score":
        score = super().__new__(cls, value)
        score.name, score.signature = name, signature
        score.label = label or (name.upper() if name.isalpha() else name)
        return score

    def format(self, width: int = 2, signature: bool = False) -> str:
        """``BLEU = 38.75`` (``width`` decimals), with `` (SIGNATURE)`` when asked."""
        return f"{self.label} = {float(self):.{width}f}" + (f" ({self.signature})" if signature else "")

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"Score({self.name}={float(self)!r}, signature={self.signature!r})"

    def __reduce__(self):
        return (Score, (float(self), self.name, self.signature, self.label))


#: every metric by name; the modules of this package register themselves (rerank.registry)
METRICS: Registry["Metric"] = Registry("metric", "rerank.metrics", "METRICS")


class Metric(abc.ABC):
    """Interface: ``name``, ``higher_is_better`` (True, False, or None when neither
    direction is better), ``stats(hyps, refs)``, ``score(stats)``, ``signature()``, and
    :meth:`create` building the metric from the command line's options and a spec's
    settings.

    A metric's settings are declared once, as its nested ``Config`` dataclass (fields made
    with :func:`rerank.config.option`): the constructor takes them (positionally in field
    order, or by name; the dataclass' defaults), sets them as attributes and calls
    :meth:`setup` for what derives from them.  Users set them in specs as
    ``NAME:key=value,…`` (``chrf:word_order=2`` is chrF++). Fields named ``tokenize``,
    ``lowercase`` and ``lang`` take the command line's ``--tokenize``, ``--lowercase`` and
    ``--lang`` unless the spec sets them. A metric without a ``Config`` takes no settings but
    ``lowercase`` (``cls(lowercase=…)``)."""

    name = "metric"
    higher_is_better: Optional[bool] = True
    #: whether :meth:`stats` depends on the text only (so equal (hypothesis, reference)
    #: pairs have equal rows and may be computed once); False for ``seg:`` scores
    from_text = True
    #: whether a row depends on the segment's source sentence as well (COMET): equal
    #: (hypothesis, reference) pairs of different segments are then not one row
    reads_source = False
    #: column of a statistics row holding the reference length that scales
    #: :meth:`background_gain` (None: the metric defines :meth:`background_gain` itself)
    size_column: Optional[int] = None
    #: number of statistics per row (K)
    width: int = 0
    #: the metric's settings (a dataclass), or None
    Config: ClassVar[Optional[type]] = None
    #: references per segment of the last statistics computed (signatures say ``nrefs:``)
    num_refs: int = 1
    #: lowercasing before scoring (every text metric has it; a setting of most)
    lowercase: bool = False
    #: decimals a score is printed with in significance tables (4 for 0-1 scales: COMET)
    decimals: int = 2
    #: the factor that puts the score on the 0-100 scale sacreBLEU reports BLEU, chrF and TER
    #: on (METEOR too), applied to the metric's term in an interpolation
    #: (:class:`~rerank.metrics.interpolated.InterpolatedMetric`): 100 for a 0-1 metric (COMET,
    #: CometKiwi, BERTScore), so that ``0.5*bleu+0.5*comet:…`` weighs both alike
    interpolation_scale: float = 1.0
    #: the name of a compiled kernel the tuners have for this metric's statistics and gain
    #: (``"bleu"``: MIRA's epoch and MERT's line search in C, :mod:`rerank.tuning._native`),
    #: or None: the tuners run on :meth:`gain` in numpy.  A metric says it; nothing tests its type.
    fast_kernel: Optional[str] = None

    def __init__(self, *args, **kwargs):
        """Settings as ``Config`` declares them (class docstring), then :meth:`setup`.

        Raises:
            TypeError: a setting the metric does not declare.
        """
        if self.Config is not None:
            config = self.Config(*args, **kwargs)
            for item in dataclasses.fields(config):
                setattr(self, item.name, getattr(config, item.name))
        else:
            lowercase = kwargs.pop("lowercase", False)
            if args or kwargs:
                raise TypeError(f"metric {self.name!r} takes no settings but lowercase")
            self.lowercase = lowercase
        self.setup()

    def setup(self) -> None:  # noqa: B027 (a hook; most metrics derive nothing)
        """What derives from the settings (a sacrebleu object, a jar's parameters); raises
        :class:`InputError` for a value the metric refuses."""

    def streams(self, references) -> List[List[str]]:
        """The R reference streams of ``references`` (one stream, or R of them:
        :func:`rerank.metrics.references.reference_streams`); records R for the signature."""
        streams = reference_streams(references)
        self.num_refs = len(streams)
        return streams

    @classmethod
    def create(
        cls,
        tokenize: Optional[str] = None,
        lowercase: bool = False,
        lang: Optional[str] = None,
        settings: str = "",
        spec: Optional[str] = None,
    ) -> "Metric":
        """The metric for the command line's options and the ``settings`` of a spec
        (``key=value,…``, the text after ``NAME:``; see the class docstring).

        Raises:
            InputError: a setting the metric does not have or a value it refuses.
        """
        if cls.Config is None:
            if settings.strip():
                raise InputError(f"{spec or cls.name}: metric {cls.name!r} takes no settings")
            return cls(lowercase=lowercase)
        defaults = {"lowercase": lowercase, **({"tokenize": tokenize} if tokenize is not None else {})}
        if lang is not None:
            defaults["lang"] = lang
        config = parse_settings(cls.Config, settings, spec or cls.name, defaults)
        metric = cls(**dataclasses.asdict(config))
        if settings.strip():  # rows, weights files and tables name it as written: chrF and chrF++ stay apart
            metric.name = f"{cls.name}:{settings.strip()}"
        return metric

    @classmethod
    def settings_help(cls) -> str:
        """``NAME[:key=default (help), …]`` for help texts."""
        return cls.name + (f"[:{settings_help(cls.Config)}]" if cls.Config else "")

    @abc.abstractmethod
    def stats(self, hypotheses: Sequence[str], references: References) -> np.ndarray:
        """float64[N, K] per-segment statistics: ``references`` one string per segment, or
        R streams of them (several references per segment, sacrebleu's convention)."""
        raise NotImplementedError

    @abc.abstractmethod
    def score(self, stats: np.ndarray) -> np.ndarray:
        """Corpus score(s) of summed statistics float[..., K] -> float64[...]."""
        raise NotImplementedError

    @abc.abstractmethod
    def signature(self) -> str:
        """A sacrebleu-style signature string naming the settings and versions."""
        raise NotImplementedError

    def corpus_score(self, hypotheses: Sequence[str], references: References) -> float:
        """Corpus score of one system."""
        return float(self.score(self.stats(hypotheses, references).sum(axis=0)))

    @property
    def label(self) -> str:
        """The name as sacrebleu prints it: ``BLEU``, ``chrF2``, ``chrF2++``, ``TER``; ``METEOR``,
        ``LENGTH``; others as written."""
        return self.name.upper() if self.name.isalpha() else self.name

    def describe(self, summed: np.ndarray) -> str:
        """sacrebleu's score line of summed statistics float[K]: ``LABEL = 38.75`` (BLEU's with
        its n-gram precisions, brevity penalty and lengths)."""
        return f"{self.label} = {float(self.score(summed)):.{self.decimals}f}"

    # --- statistics of hypotheses in files (n-best lists, system outputs) ---

    def bind(self, path: str) -> "Metric":
        """This metric for the hypotheses of file ``path`` (an n-best list or a system
        output): metrics computed from text return themselves; ``seg:`` metrics read the
        scores of that file (:mod:`rerank.metrics.segment`)."""
        return self

    def hypothesis_stats(
        self, hypotheses: Sequence[str], references: References, segment: np.ndarray, lines: np.ndarray
    ) -> np.ndarray:
        """float64[M, K] statistics of M hypotheses, hypothesis i of segment
        ``segment[i]`` (an index into ``references``) and line (row) ``lines[i]`` of the
        file the metric is bound to (0-based; used by metrics that read per-line data)."""
        segment = np.asarray(segment, dtype=np.int64)
        picked = [[stream[s] for s in segment] for stream in self.streams(references)]
        return self.stats(hypotheses, picked if len(picked) > 1 else picked[0])

    def sidecars(self, path: str) -> List[str]:
        """The files of per-line data this metric reads for the hypotheses of file ``path``
        (``seg:NAME``: ``PATH.NAME``): inputs that key the tuning cache and that verbs protect
        and check.  None for metrics computed from text."""
        return []

    def check_count(self, count: int) -> None:  # noqa: B027 (a hook; text metrics check nothing)
        """Check per-line data of the bound file against its ``count`` lines (nothing for
        metrics computed from text).  Raises :class:`InputError`."""

    # --- the metric as MBR's utility ---

    def utility(self) -> Optional[PairwiseUtility]:
        """The metric's sentence-level utility for MBR (:mod:`rerank.metrics.utility`), or None
        where it has none (``mbr:NAME`` and ``rerank mbr --metric NAME`` refuse it)."""
        return None

    # --- the metric as a tuning objective ---

    @property
    def tunable(self) -> bool:
        """Whether the metric declares a direction (length ratio does not)."""
        return self.higher_is_better is not None

    def gain(self, stats: np.ndarray) -> np.ndarray:
        """The corpus value tuning maximises, of summed rows float[..., K] -> float64[...]:
        the score, or minus it where lower is better.

        Raises:
            InputError: a metric without a direction (length ratio).
        """
        if self.higher_is_better is None:
            raise InputError(f"metric {self.name!r} has no better direction: it cannot be a tuning objective")
        score = self.score(stats)
        return score if self.higher_is_better else -score

    def background_gain(self, rows: np.ndarray, background: np.ndarray) -> np.ndarray:
        """MIRA's smoothed sentence-level gain of rows float[M, K] against a background
        pseudo-document float[K] (Chiang et al. 2008; Cherry & Foster 2012): the gain of
        ``rows + background`` on a 0-1 scale times that document's reference length
        (column :attr:`size_column`).  float64[M]."""
        document = np.asarray(rows, dtype=np.float64) + np.asarray(background, dtype=np.float64)
        return self.gain(document) / 100.0 * document[..., self.size_column]

    def sentence_score(self, rows: np.ndarray) -> np.ndarray:
        """Sentence-level gain of each row float[M, K], 0-1 scale (PRO's pair sampling,
        the oracle's start): ``gain / 100``.  float64[M]."""
        return self.gain(rows) / 100.0

    def sentence_level(self, rows: np.ndarray) -> np.ndarray:
        """float64[N] each segment's own score from its statistics row float[N, K], on the scale
        the metric is reported on: what sacreBLEU's ``--sentence-level`` prints (``rerank eval
        --sentence-level``); by default the corpus formula on one row (chrF, TER, METEOR, COMET's
        mean of one)."""
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            return np.asarray(self.score(np.asarray(rows, dtype=np.float64)), dtype=np.float64)

    def length_ratio(self, summed: np.ndarray) -> Optional[float]:
        """Hypothesis / reference length of summed statistics in the metric's units (words
        for BLEU and METEOR, characters for chrF); None where the statistics hold no
        hypothesis length (TER, ``seg:``)."""
        return None


class SacrebleuStatsMetric(Metric):
    """Statistics from a sacrebleu metric object's per-segment extraction."""

    @abc.abstractmethod
    def _make(self):
        """The sacrebleu metric object."""

    def setup(self) -> None:
        self.metric = self._make()

    def stats(self, hypotheses, references):
        rows = self.metric._extract_corpus_statistics(list(hypotheses), self.streams(references))
        return np.asarray(rows, dtype=np.float64).reshape(len(hypotheses), -1)

    def signature(self):
        self.metric.num_refs = self.num_refs  # set by corpus_score() in sacrebleu; we score without it
        return str(self.metric.get_signature())
