"""An experiment's manifest ``EXP_DIR/experiment.json``: what ``rerank report`` compares.

:class:`Experiment` is written by the pipelines (``rerank experiment``, or
:meth:`Experiment.write` from Python) and read by the report; it is the one place that
knows the manifest's layout::

    {"reference": "data/tok/test_2016_flickr.de", "baseline": ["nbest/test.1best"],
     "nbest": "nbest/test.nbest", "bleu": {"tokenize": "none", "lowercase": false},
     "systems": [["+nmt", ["rerank/nmt/test.seed1.txt", ...]], ...],
     "caption": "...", "paper": {"table": "...tsv", "select": {"nbest": "20"}}}

and ``"metric": "chrf"`` where the oracle and the plots maximise and show another metric
than BLEU (absent: BLEU).

Paths are relative to ``EXP_DIR`` (or absolute); rows keep the manifest's order.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from rerank.errors import InputError
from rerank.metrics import Metric, make_objective
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.evaluate import check_system_names
from rerank.outputs import atomic_write
from rerank.textio import read_json

MANIFEST = "experiment.json"


@dataclass
class Experiment:
    """What a report compares.

    Attributes:
        reference: the reference file.
        baseline: the baseline's replica files (usually one: the beam's 1-best).
        systems: ``[(name, replica files)]`` in row order.
        nbest: the test n-best list (the oracle row), or None.
        bleu: the text settings (tokeniser, lowercasing) of every score of the experiment
            (tables, plots, oracle), as BLEU's.
        paper: published scores to print beside ours, ``{"table": TSV, "select": {column:
            value}}`` (:func:`rerank.report_sources.read_paper_table`), or None.
        caption: the protocol, printed above the table's footer.
        left_out: systems left out because their files do not exist yet (``partial``).
        metric: the specification (:func:`rerank.metrics.make_objective`) of the metric the
            oracle maximises and the plots show (default ``bleu``), built with ``bleu``'s text
            settings by :meth:`objective`.
    """

    reference: str
    baseline: List[str]
    systems: List[Tuple[str, List[str]]]
    nbest: Optional[str] = None
    bleu: BleuMetric = field(default_factory=BleuMetric)
    paper: Optional[Dict] = None
    caption: Optional[str] = None
    left_out: List[str] = field(default_factory=list)
    metric: str = "bleu"

    def objective(self, lang: Optional[str] = None) -> Metric:
        """The metric of the oracle and the plots (``metric`` with the experiment's text
        settings; ``lang``: METEOR's).  Raises :class:`InputError` for an unknown metric or
        one without a direction."""
        return make_objective(self.metric, self.bleu.tokenize, self.bleu.lowercase, lang)

    def to_json(self, exp_dir: str) -> Dict:
        """The manifest object, paths relative to ``exp_dir`` where they lie inside it."""

        def rel(path: str) -> str:
            full = os.path.abspath(path)
            inside = os.path.commonpath([full, os.path.abspath(exp_dir)]) == os.path.abspath(exp_dir)
            return os.path.relpath(full, exp_dir) if inside else full

        manifest = {
            "reference": rel(self.reference),
            "baseline": [rel(f) for f in self.baseline],
            "nbest": rel(self.nbest) if self.nbest else None,
            "bleu": {"tokenize": self.bleu.tokenize, "lowercase": self.bleu.lowercase},
            "systems": [[name, [rel(f) for f in files]] for name, files in self.systems],
        }
        if self.metric != "bleu":
            manifest["metric"] = self.metric
        if self.caption:
            manifest["caption"] = self.caption
        if self.paper:
            manifest["paper"] = {"table": rel(self.paper["table"]), "select": dict(self.paper.get("select", {}))}
        return manifest

    def write(self, exp_dir: str) -> bool:
        """Write ``exp_dir/experiment.json`` atomically, only when its content changes
        (so that reports newer than it stay valid).  Returns True if it was written.

        Raises:
            InputError: no system, an empty replica list, or duplicate system names.
        """
        self.check(os.path.join(exp_dir, MANIFEST))
        text = json.dumps(self.to_json(exp_dir), indent=2, ensure_ascii=False) + "\n"
        path = os.path.join(exp_dir, MANIFEST)
        try:
            with open(path, encoding="utf-8") as handle:
                if handle.read() == text:
                    return False
        except FileNotFoundError:
            pass
        with atomic_write(path) as out:
            out.write(text)
        return True

    def check(self, source: str) -> None:
        """Raise :class:`InputError` naming ``source`` for an empty baseline, no system, a
        system without replica files, or two systems of one name (or one named as the baseline)."""
        if not self.baseline:
            raise InputError('"baseline" lists no file', source)
        if not self.systems:
            raise InputError('"systems" lists no system', source)
        check_system_names("baseline", self.systems, source)
        try:
            self.objective()
        except InputError as err:
            raise InputError(f'"metric": {err.message}', source) from None
        for name, files in self.systems:
            if not files:
                raise InputError(f"system {name!r} lists no replica file", source)

    @classmethod
    def read(cls, exp_dir: str, partial: bool = False) -> "Experiment":
        """The experiment of ``exp_dir/experiment.json``.  Nothing named is left out
        silently: a missing file is an error, except that with ``partial`` a system whose
        replica files do not all exist yet is left out and named in ``left_out``.

        Raises:
            InputError: no or malformed manifest (duplicate keys included, no BLEU
                settings), an empty baseline or replica list, a missing reference,
                baseline, system or n-best file, no system, or duplicate names.
        """
        path = os.path.join(exp_dir, MANIFEST)
        if not os.path.exists(path):
            raise InputError("missing pipeline output (experiment.json: reference, baseline, systems)", path)
        manifest = read_json(path)
        try:
            ref = os.path.join(exp_dir, manifest["reference"])
            baseline = [os.path.join(exp_dir, f) for f in manifest["baseline"]]
            systems = [(str(name), [os.path.join(exp_dir, f) for f in files]) for name, files in manifest["systems"]]
            nbest = manifest.get("nbest")
            if "bleu" in manifest:
                bleu = BleuMetric.from_json(manifest["bleu"], path)
            elif "tokenize" in manifest:  # the first manifests' form
                bleu = BleuMetric(str(manifest["tokenize"]), bool(manifest.get("lowercase", False)))
            else:
                raise KeyError("bleu")
            paper = manifest.get("paper")
            if paper is not None:
                paper = {"table": os.path.join(exp_dir, paper["table"]), "select": dict(paper.get("select", {}))}
            caption = manifest.get("caption")
            metric = str(manifest.get("metric", "bleu"))
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise InputError(f"not an experiment manifest ({type(err).__name__}: {err})", path) from None
        nbest_path = os.path.join(exp_dir, nbest) if nbest else None
        experiment = cls(ref, baseline, systems, nbest_path, bleu, paper, caption, metric=metric)
        experiment.check(path)
        if partial:
            experiment.left_out = [name for name, files in systems if not all(os.path.exists(f) for f in files)]
            experiment.systems = [(name, files) for name, files in systems if name not in experiment.left_out]
            if not experiment.systems:
                raise InputError("no system has all its replica files yet", path)
        for needed in experiment.files():
            if not os.path.exists(needed):
                raise InputError(
                    f"missing file named in {path}"
                    + ("" if partial else " (--partial leaves out systems not run yet)"),
                    needed,
                )
        if paper is not None and not os.path.exists(paper["table"]):
            raise InputError("missing published table", paper["table"])
        return experiment

    def files(self) -> List[str]:
        """Every file the experiment reads: reference, baseline, replicas, n-best list."""
        return (
            [self.reference]
            + list(self.baseline)
            + [f for _, files in self.systems for f in files]
            + ([self.nbest] if self.nbest else [])
        )
