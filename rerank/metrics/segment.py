"""External segment-level scores (``seg:NAME``): COMET, BLEURT, MetricX or any score
computed elsewhere, used as a metric — for evaluation, significance over replicas,
oracle selection and as a tuning objective.

The scores of a file ``F`` (an n-best list or a system output) are in the sidecar
``F.NAME``: one number per line, aligned with ``F`` (one per hypothesis of an n-best
list, one per segment of a system output).  Statistics are ``[score, 1]`` per line, so
the corpus score of summed rows is the mean score (as COMET and BLEURT report a system),
bootstrap resampling and approximate randomisation work on means of segment scores, and
the sentence-level score of a hypothesis is its own value.  ``seg:NAME`` is higher-is-
better; ``seg:NAME:lower`` declares a score where lower is better (MetricX, an error
rate).
"""

from __future__ import annotations

import re
from typing import List, Optional

import numpy as np

from rerank.errors import InputError
from rerank.metrics.base import Metric
from rerank.textio import finite_number, read_lines

#: the characters of a ``seg:`` name (it becomes a file suffix)
NAME_PATTERN = re.compile(r"[A-Za-z0-9_.]+")


def read_scores(path: str) -> np.ndarray:
    """float64[L] one finite number per line of ``path``.

    Raises:
        InputError: naming the file and line of an empty line, a non-number or a
            non-finite value.
    """
    lines = read_lines(path)
    values = np.empty(len(lines))
    for lineno, line in enumerate(lines, start=1):
        values[lineno - 1] = finite_number(line.strip(), "score (one number per line)", path, lineno)
    return values


class MeanOfSegments(Metric):
    """A segment-level metric whose statistics are ``[score, 1]`` per segment: the corpus
    score of summed rows is their mean, a hypothesis's sentence score is its own value (with
    the metric's sign), and there is no background (``seg:``, ``bertscore:``)."""

    width = 2

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(stats[..., 1] > 0, stats[..., 0] / stats[..., 1], 0.0)

    def background_gain(self, rows, background):
        """The hypothesis's own score (with the metric's sign): no background."""
        return self.sentence_score(rows)

    def sentence_score(self, rows):
        rows = np.asarray(rows, dtype=np.float64)
        return rows[..., 0] if self.higher_is_better else -rows[..., 0]


class SegmentMetric(MeanOfSegments):
    """``seg:NAME[:lower]``: scores read from the sidecar ``FILE.NAME`` of each scored
    file (module docstring).  Statistics float64[M, 2] = [score, 1]; score of summed
    rows = their mean.

    Raises:
        InputError: a name with characters other than letters, digits, ``_`` and ``.``.
    """

    from_text = False

    def __init__(self, key: str, higher_is_better: bool = True, path: Optional[str] = None):
        if not NAME_PATTERN.fullmatch(key):
            raise InputError(f"seg:{key}: a segment-score name holds letters, digits, '_' and '.' only")
        self.key = key
        self.higher_is_better = higher_is_better
        self.name = f"seg:{key}" + ("" if higher_is_better else ":lower")
        self.path = path
        self._values: Optional[np.ndarray] = None

    def bind(self, path: str) -> "SegmentMetric":
        """This metric reading ``path + '.' + NAME``."""
        return SegmentMetric(self.key, self.higher_is_better is not False, path)

    def bind_values(self, values, what: str = "scores") -> "SegmentMetric":
        """This metric over scores held in memory (``values``: one finite number per
        hypothesis or segment, in order), as the Python API passes them.

        Raises:
            InputError: a value that is not a finite number, naming ``what``.
        """
        try:
            array = np.asarray(values, dtype=np.float64).reshape(-1)
        except (TypeError, ValueError):
            raise InputError(f"{what}: expected a list of numbers") from None
        if not np.isfinite(array).all():
            raise InputError(f"{what}: score {int(np.flatnonzero(~np.isfinite(array))[0]) + 1} is not finite")
        bound = SegmentMetric(self.key, self.higher_is_better is not False, f"<{what}>")
        bound._values = array
        return bound

    def sidecars(self, path: str) -> List[str]:
        """``[PATH.NAME]``: the scores this metric reads for file ``path``."""
        return [f"{path}.{self.key}"]

    @property
    def sidecar(self) -> str:
        """The file of segment scores beside the bound file: ``FILE.KEY``.

        Raises:
            InputError: no file is bound (scores come from a file's sidecar).
        """
        if self.path is None:
            raise InputError(f"{self.name}: segment scores come from a file's sidecar; no file was given")
        return f"{self.path}.{self.key}"

    def values(self) -> np.ndarray:
        """float64[L] the scores of the bound file (read once).  Raises
        :class:`InputError` when the sidecar is missing or unreadable."""
        if self._values is None:
            self._values = read_scores(self.sidecar)
        return self._values

    def check_count(self, count: int) -> None:
        """Raise :class:`InputError` unless the sidecar has ``count`` scores."""
        if len(self.values()) != count:
            raise InputError(
                f"{len(self.values())} scores but {self.path} has {count} "
                f"{'hypotheses' if count else 'lines'} (one score per hypothesis or segment, in order)",
                self.sidecar,
            )

    def stats(self, hypotheses, references):
        """Rows of the whole bound file (its line count must be ``len(hypotheses)``)."""
        self.check_count(len(hypotheses))
        return self.hypothesis_stats(hypotheses, references, np.arange(len(hypotheses)), np.arange(len(hypotheses)))

    def hypothesis_stats(self, hypotheses, references, segment, lines):
        """float64[M, 2] rows [score, 1] of lines ``lines`` of the bound file.

        Raises:
            InputError: fewer scores than lines in the bound file.
        """
        values = self.values()
        lines = np.asarray(lines, dtype=np.int64)
        if len(lines) and lines.max() >= len(values):
            raise InputError(
                f"{len(values)} scores but {self.path} has more lines (one score per hypothesis or segment, in order)",
                self.sidecar,
            )
        return np.column_stack([values[lines], np.ones(len(lines))])

    def signature(self):
        return f"{self.name}|mean of segment scores from FILE.{self.key}"
