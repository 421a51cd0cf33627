"""Metrics over per-segment sufficient statistics, one module per metric (sacrebleu's
``metrics/`` layout): :mod:`~rerank.metrics.base` (the :class:`Metric` interface, the
registry; a metric is also a tuning objective), ``bleu``, ``length``, ``ter``, ``chrf``,
``meteor``, ``segment`` (``seg:NAME``: external segment scores), ``interpolated``
(``0.5*bleu+0.5*chrf``); :mod:`~rerank.metrics.spec` reads what users write
(:func:`make_metric`); :mod:`~rerank.metrics.evaluate` scores files.  Adding a metric is one module that
registers itself (and its name in ``METRICS``' builtin list).

BLEU statistics are :mod:`rerank.metrics.bleu_stats`'s (the layer tuning and oracle use); TER and chrF
statistics are sacrebleu's own per-segment statistics (TER's edit counts in C), and their
vectorised ``score`` reproduces sacrebleu's ``_compute_score_from_stats``; METEOR runs
the real jar.
"""

from rerank.metrics.base import METRICS, Metric, Score
from rerank.metrics.evaluate import evaluate_files, format_table, read_system, system_stats
from rerank.metrics.spec import DEFAULT_METRICS, METRIC_HELP, make_metric, make_objective, split_metrics

__all__ = [
    "METRICS",
    "Metric",
    "Score",
    "make_metric",
    "make_objective",
    "split_metrics",
    "METRIC_HELP",
    "DEFAULT_METRICS",
    "evaluate_files",
    "format_table",
    "read_system",
    "system_stats",
]
