"""The report's two plots (``rerank report``, the ``[report]`` extra): per-sentence gains
over the baseline and the approximate-randomisation null distribution, under the
experiment's metric (:func:`plot_report`); matplotlib is loaded here, its one place."""

from __future__ import annotations

from typing import Any, Dict

import numpy as np

from rerank.defaults import DEFAULT_SEED
from rerank.metrics import Metric
from rerank.signif import approximate_randomization
from rerank.textio import read_lines


def plot_report(
    result: Dict,
    ref_path: str,
    paths: Dict[str, str],
    metric: Metric,
    seed: int = DEFAULT_SEED,
    shuffles: int = 10000,
) -> None:
    """Two PNG plots, written to ``paths["gains"]`` and ``paths["null"]``: per-sentence
    gains under ``metric`` (a text metric with sentence scores: the experiment's,
    :meth:`rerank.experiment.Experiment.objective`; BLEU by default) of each system's first replica over
    the baseline (sorted), and the distribution of the metric's |Δ| under the null (AR shuffles)
    with the observed difference.  matplotlib is loaded here, its one place."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    refs = read_lines(ref_path)
    label = metric.label
    first = result["rows"][0]["metric"]
    rows = [r for r in result["rows"] if r["metric"] == first]  # one row per system
    base = metric.stats(read_lines(rows[0]["files"][0]), refs)
    fig, ax = plt.subplots(figsize=(7, 4))
    fig2, ax2 = plt.subplots(figsize=(7, 4))
    for row in rows[1:]:
        stats = metric.stats(read_lines(row["files"][0]), refs)
        gains = np.sort(metric.score(stats) - metric.score(base))[::-1]
        ax.plot(np.arange(len(gains)), gains, label=f"{row['system']} (mean {gains.mean():+.2f})")
        null: list = []
        approximate_randomization(metric, base, stats, shuffles, seed, null=null)
        observed = abs(float(metric.score(stats.sum(0)) - metric.score(base.sum(0))))
        patches: Any = ax2.hist(null[0], bins=60, alpha=0.5, label=f"{row['system']}: null |Δ{label}|")[2]
        ax2.axvline(
            observed, color=patches[0].get_facecolor(), linestyle="--", label=f"observed {observed:.2f} (replica 1)"
        )
    ax.axhline(0, color="grey", linewidth=0.5)
    ax.set_xlabel("test sentences, sorted by gain")
    ax.set_ylabel(f"sentence {label} − baseline sentence {label}")
    ax.set_title("Per-sentence gains over the baseline (first replica)")
    ax.legend(fontsize=8)
    ax2.set_xlabel(f"|corpus {label} difference| under random swaps")
    ax2.set_ylabel("shuffles")
    ax2.set_title(f"Approximate randomisation null distribution ({shuffles} shuffles)")
    ax2.legend(fontsize=8)
    for figure, name in ((fig, "gains"), (fig2, "null")):
        figure.tight_layout()
        figure.savefig(paths[name], dpi=110, format="png")
        plt.close(figure)


def plots_available() -> bool:
    """Whether matplotlib (the ``[report]`` extra) can be imported, without importing it."""
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None
