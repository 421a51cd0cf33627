"""Significance tables (MultEval-like, and the paper's Tables 3-4 layout).

:func:`significance_table` turns systems given as replica files into rows
``{"system", "metric", "score", "s_sel", "s_opt", "p_value", ...}``;
:func:`format_table` renders them as text, Markdown, LaTeX, JSON or CSV.  Marks keep the
paper's meaning: † significantly *better* than the baseline (p < 0.05), ‡ significantly
better than the ``compare_to`` system; a significant *degradation* has its own marks, ↓
against the baseline and ⇓ against ``compare_to`` ("better" follows each metric's
direction: lower TER is better; length ratio has no direction and gets no marks).  The
difference to the baseline is shown in parentheses as in the paper.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rerank._version import __version__
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.experiment import Experiment
from rerank.metrics import DEFAULT_METRICS, make_metric, read_system
from rerank.metrics.evaluate import check_system_names, shared_stats
from rerank.metrics.meteor import METEOR_NOTE, MeteorUnavailable
from rerank.metrics.references import References, segment_count
from rerank.outputs import StagedOutputs
from rerank.progress import progress_bar
from rerank.report_analysis import AnalysisSettings, analyze, write_analysis
from rerank.report_page import report_page
from rerank.report_plots import plot_report
from rerank.report_rows import Tests, adjust_table, metric_rows
from rerank.report_sources import MARK, attach_marks, attach_paper, read_marks, read_paper_table
from rerank.report_thresholds import footer_lines
from rerank.signif import SignificanceSettings, warn_identical_replicas
from rerank.textio import read_lines, read_references
from rerank.tuning.oracle import oracle_file

FORMATS = ("text", "markdown", "latex", "json", "csv")
#: the level of the marks where a table's meta names none (tables written before ``--alpha``)
ALPHA = 0.05


def significance_table(
    ref_path: str,
    baseline: Sequence[str],
    systems: Sequence[Tuple[str, Sequence[str]]],
    settings: SignificanceSettings = SignificanceSettings(),
    keep: Optional[Dict[str, Any]] = None,
) -> Dict:
    """Score the baseline and each system (lists of replica files) on every metric:
    :func:`significance_of` on the files' texts, ``meta.reference`` the reference path.

    Returns ``{"rows": [...], "meta": {...}}``; each row has system, metric, score,
    s_sel, s_opt, p_value (None for the baseline), delta (score − baseline score),
    p_compare (against ``compare_to``; None where not applicable), replicas, the
    replica scores and the replicas' files.

    Raises:
        InputError: a file whose line count differs from the reference's, no reference
            segments, a system named twice or as the baseline, an unknown ``compare_to``.
    """
    refs = read_references(ref_path)
    if not segment_count(refs):
        raise InputError(
            "no reference segments: nothing to score", ref_path if isinstance(ref_path, str) else ref_path[0]
        )
    check_system_names(settings.baseline_name, systems)
    files = {settings.baseline_name: list(baseline), **{name: list(paths) for name, paths in systems}}
    texts = {name: [read_system(p, segment_count(refs)) for p in paths] for name, paths in files.items()}
    result = significance_of(refs, texts, settings, files, keep)
    result["meta"] = {"reference": ref_path, **result["meta"]}
    return result


def _checked_systems(refs: References, texts: Dict[str, List[List[str]]], settings: SignificanceSettings) -> List[str]:
    """The systems' names, the baseline first; every replica checked to hold one hypothesis per
    reference (identical replicas warned about).

    Raises:
        InputError: the first system is not the baseline, an unknown ``compare_to``, a replica
            of another length than the references."""
    names = list(texts)
    if not names or names[0] != settings.baseline_name:
        raise InputError(f"the first system must be the baseline {settings.baseline_name!r}")
    if settings.compare_to is not None and settings.compare_to not in names[1:]:
        raise InputError(f"--compare-to {settings.compare_to!r} is not one of the systems: {', '.join(names[1:])}")
    count = segment_count(refs)
    for name, replicas in texts.items():
        for k, hyps in enumerate(replicas):
            if len(hyps) != count:
                raise InputError(f"{name}: replica {k + 1} has {len(hyps)} hypotheses for {count} references")
        warn_identical_replicas(name, replicas)
    return names


def significance_of(
    refs: References,
    texts: Dict[str, List[List[str]]],
    settings: SignificanceSettings = SignificanceSettings(),
    files: Optional[Dict[str, List[str]]] = None,
    keep: Optional[Dict[str, Any]] = None,
) -> Dict:
    """:func:`significance_table` on texts held in memory (``keep``: a dict that receives each
    metric's statistics, {metric: {system: [replica statistics]}}, for the sentence analysis): ``texts`` maps each system (the
    baseline first, named ``settings.baseline_name``) to its replicas, each a list of N
    hypotheses for the N ``refs``. ``files`` (the replicas' paths, by system) are needed only
    by ``seg:`` metrics, which read each file's sidecar scores; rows carry them as ``files``.

    Raises:
        InputError: a replica of another length than the references, an unknown
            ``compare_to``, a ``seg:`` metric without files.
    """
    metrics, lang = settings.metrics, settings.lang
    shuffles, resamples, seed = settings.shuffles, settings.resamples, settings.seed
    compare_to, baseline_name = settings.compare_to, settings.baseline_name
    names = _checked_systems(refs, texts, settings)
    rows, signatures = [], {}
    labels: Dict[str, str] = {}
    decimals: Dict[str, int] = {}
    items = [(m, n) for m in metrics for n in names]
    bar = None
    if settings.progress:
        bar = progress_bar(total=len(items), desc="signif", unit="system·metric")
    unavailable = {}
    tests: Tests = {}
    for metric_name in metrics:
        try:
            metric = make_metric(metric_name, settings.tokenize, settings.lowercase, lang)
        except MeteorUnavailable as err:  # report it, run the other metrics
            unavailable[metric_name] = str(err)
            print(f"rerank: warning: {err}", file=sys.stderr)
            continue
        metric.streams(refs)  # the references per segment, which its signature names (nrefs:R)
        signatures[metric_name] = metric.signature()
        labels[metric_name] = metric.label  # titled as sacreBLEU names it (chrF2, BLEU, TER, COMET)
        if metric.decimals != 2:  # scores on a 0-1 scale (COMET, BERTScore)
            decimals[metric_name] = metric.decimals
        if not metric.from_text and files is None:
            raise InputError(
                f"{metric_name}: seg: scores are read from files beside the systems' outputs (rerank signif)"
            )
        try:
            stats = shared_stats(metric, texts, refs, files)
        except MeteorUnavailable as err:  # the jar failed on this text: the table keeps the other metrics
            unavailable[metric_name] = str(err)
            signatures.pop(metric_name, None)
            print(f"rerank: warning: {err}", file=sys.stderr)
            continue
        rows += metric_rows(metric, metric_name, stats, names, settings, files, bar, tests)
        if keep is not None:
            keep[metric_name] = stats
    if bar is not None:
        bar.close()
    adjusted = adjust_table(rows, tests, settings)
    meta = {
        "shuffles": shuffles,
        "resamples": resamples,
        "seed": seed,
        "compare_to": compare_to,
        "baseline": baseline_name,
        "signatures": signatures,
        "rerank": __version__,
        "alpha": settings.alpha,
        "test": settings.test,
        "bootstrap": settings.bootstrap,
        "confidence": settings.confidence,
        **adjusted,
        "unavailable": unavailable,
        **({"labels": labels} if labels else {}),
        **({"decimals": decimals} if decimals else {}),
    }
    if "|lang:de|" in str(signatures.get("meteor", "")):  # German's METEOR only: no paraphrase tables
        meta["meteor_note"] = METEOR_NOTE
    return {"rows": rows, "meta": meta}


#: (better, worse) marks against the baseline and against the compare_to system
MARKS = {"baseline": ("†", "↓"), "compare": ("‡", "⇓")}


def marks(row: Dict, alpha: float = ALPHA) -> str:
    """The significance marks of a :func:`significance_table` row (module docstring): each test's
    adjusted p (``p_adjusted``, the raw p where the table adjusts nothing) below ``alpha``."""
    direction = row.get("higher_is_better")
    if direction is None:
        return ""
    mark = ""
    for key, p, diff in (
        ("baseline", row.get("p_adjusted", row["p_value"]), row["delta"]),
        ("compare", row.get("p_compare_adjusted", row["p_compare"]), row.get("delta_compare")),
    ):
        if p is not None and p < alpha and diff:
            better = (diff > 0) == bool(direction)
            mark += MARKS[key][0 if better else 1]
    return mark


def _cell(row: Dict, digits: int = 2, alpha: float = ALPHA) -> str:
    """A table cell: score (difference) marks [s_sel/s_opt/p] and the interval of the difference
    (the baseline: of its score); ``digits``: the score's decimals (4 for scores on a 0-1 scale:
    COMET, BERTScore); p is the adjusted one where the table adjusts."""
    s_opt = "-" if row["s_opt"] is None else f"{row['s_opt']:.{digits - 1}f}"
    shown_p = row.get("p_adjusted", row["p_value"])
    p = "-" if shown_p is None else f"{shown_p:.4f}"
    delta = "" if row["p_value"] is None else f" ({row['delta']:+.{digits}f})"
    interval = row.get("delta_ci") if row["p_value"] is not None else row.get("ci")
    span = (
        f" {'Δ' if row['p_value'] is not None else ''}[{interval[0]:.{digits}f}, {interval[1]:.{digits}f}]"
        if interval
        else ""
    )
    paper = row.get("paper")
    beside = f" · paper {paper['score']:g}{paper['marks']}" if paper else ""
    cluster = f" #{row['cluster']}" if row.get("cluster") else ""
    return (
        f"{row['score']:.{digits}f}{delta}{marks(row, alpha)} [{row['s_sel']:.{digits - 1}f}/{s_opt}/{p}]"
        f"{span}{cluster}{beside}"
    )


def _titles(metrics: List[str], meta: Dict) -> Dict[str, str]:
    """Each metric's column title: its label, the name sacreBLEU and ``rerank eval`` print (``BLEU``,
    ``chrF2``, ``TER``, ``COMET`` for ``comet:DIR,source=FILE``) where no other column has that
    label, else its name in capitals."""
    labels = meta.get("labels", {})
    taken = list(labels.values())
    return {m: labels[m] if m in labels and taken.count(labels[m]) == 1 else m.upper() for m in metrics}


def _label(system: str, rows: List[Dict]) -> str:
    """The system's name in a table, with :data:`rerank.report_sources.MARK` where a marks file names it."""
    marked = any(r["system"] == system and r.get("mark") for r in rows)
    return f"{system} {MARK}" if marked else system


def _footer(meta: Dict, titles: Optional[Dict[str, str]] = None, rows: Optional[List[Dict]] = None) -> List[str]:
    alpha = meta["alpha"]
    lines = [meta["caption"]] if meta.get("caption") else []
    level = f"{100 * meta.get('confidence', 0.95):g} %"
    lines += [
        f"cells: score (difference to {meta['baseline']}) marks [s_sel/s_opt/p] Δ[{level} interval of the "
        f"difference] (the baseline: [{level} interval of its score])"
        + (" #rank cluster" if meta.get("pairs") is not None else "")
        + f"; † significantly better than {meta['baseline']}, ↓ significantly worse (p < {alpha})"
        + (
            f"; ‡ significantly better than {meta['compare_to']}, ⇓ significantly worse"
            if meta.get("compare_to")
            else ""
        )
        + "; better = higher BLEU/METEOR/chrF, lower TER; length has no marks"
    ]
    test = {"ar": "approximate randomisation", "bs": "paired bootstrap"}.get(meta.get("test", "ar"), "")
    adjust = meta.get("adjust", "none")
    if adjust != "none":
        how = {"holm": "Holm's step-down", "maxT": "Westfall-Young max-T (over the shared shuffles)"}[adjust]
        lines.append(
            f"p: {test}, adjusted by {how} across the table's {meta.get('family', 0)} tests (all rows and metrics)"
        )
    else:
        lines.append(f"p: {test}, each test alone (no multiple-comparison adjustment)")
    if meta.get("adjust_note"):
        lines.append(meta["adjust_note"])
    lines.extend(footer_lines(rows or [], titles or {}, alpha))
    lines.append(
        f"approximate randomisation: {meta['shuffles']} shuffles; bootstrap: {meta['resamples']} "
        f"resamples (s_sel), {meta.get('bootstrap', 1000)} paired resamples (intervals"
        + (", test" if meta.get("test") == "bs" else "")
        + f"); seed {meta['seed']}; rerank {meta['rerank']}"
    )
    titles = titles or {}
    lines.extend(f"{titles.get(m, m.upper())}: {sig}" for m, sig in meta["signatures"].items())
    if meta.get("paper"):
        lines.append(f"paper: the published value of the same row and metric with its marks: {meta['paper']}")
    if meta.get("marks"):
        lines.append(f"{MARK}: {meta['marks']['legend']} ({meta['marks']['source']})")
    if meta.get("meteor_note"):
        lines.append(meta["meteor_note"])
    lines.extend(f"{m.upper()}: {why}" for m, why in meta.get("unavailable", {}).items())
    if meta.get("left_out"):
        lines.append("left out (not run yet, --partial): " + ", ".join(meta["left_out"]))
    return lines


#: LaTeX for every character that is special there, and for the table's marks
TEX = {char: "\\" + char for char in "&%$#_{}"}
TEX.update({"\\": r"\textbackslash{}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"})
TEX.update({"†": r"$^\dagger$", "‡": r"$^\ddagger$", "↓": r"$^\downarrow$", "⇓": r"$^\Downarrow$"})


def tex(text: str) -> str:
    """``text`` as LaTeX source that prints it: every special character escaped (``& % $ # _ {
    } ~ ^ \\``), the marks as math symbols."""
    return "".join(TEX.get(char, char) for char in text)


def tex_number(cell: str) -> str:
    """A table cell as LaTeX (:func:`tex`) with a minus sign for a negative number's hyphen
    (``(-1.20)`` prints ``($-$1.20)``, as a minus, not a hyphen)."""
    return re.sub(r"-(?=\d)", "$-$", tex(cell))


def format_table(result: Dict, fmt: str = "text") -> str:
    """Render :func:`significance_table`'s result as text, markdown, latex, json or csv.

    Raises:
        InputError: an unknown format.
    """
    if not isinstance(result, dict) or not {"rows", "meta"} <= set(result):
        raise TypeError(
            f"format_table: expected significance()'s result ({{'rows', 'meta'}}), not {type(result).__name__}"
        )
    rows, meta = result["rows"], result["meta"]
    if fmt == "json":
        return json.dumps({"rows": rows, "meta": meta}, indent=2, ensure_ascii=False) + "\n"
    if fmt == "csv":
        out = io.StringIO()
        keys = ["system", "metric", "score", "delta", "s_sel", "s_opt", "p_value", "p_compare", "replicas"]
        writer = csv.DictWriter(out, fieldnames=keys, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
        return out.getvalue()
    systems = list(dict.fromkeys(r["system"] for r in rows))
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    digits = meta.get("decimals", {})
    alpha = meta.get("alpha", ALPHA)
    cell = {(r["system"], r["metric"]): _cell(r, digits.get(r["metric"], 2), alpha) for r in rows}
    titles = _titles(metrics, meta)
    header = ["system"] + [titles[m] for m in metrics]
    body = [[_label(s, rows)] + [cell[(s, m)] for m in metrics] for s in systems]
    if fmt == "markdown":
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(r) + " |" for r in body]
        return "\n".join(lines) + "\n\n" + "\n".join(f"- {line}" for line in _footer(meta, titles, rows)) + "\n"
    if fmt == "latex":
        lines = [
            r"\begin{tabular}{l" + "r" * len(metrics) + "}",
            r"\hline",
            " & ".join(map(tex, header)) + r" \\",
            r"\hline",
        ]
        lines += [" & ".join([tex(r[0])] + [tex_number(c) for c in r[1:]]) + r" \\" for r in body]
        lines += [r"\hline", r"\end{tabular}"]
        return "\n".join(lines) + "\n" + "\n".join("% " + line for line in _footer(meta, titles, rows)) + "\n"
    if fmt != "text":
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    widths = [max(len(x) for x in col) for col in zip(header, *body)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths))]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in body]
    return "\n".join(lines) + "\n\n" + "\n".join(_footer(meta, titles, rows)) + "\n"


def report_files(exp_dir: str, out_dir: Optional[str] = None, plots: bool = True) -> Dict[str, str]:
    """{kind: path} of what :func:`experiment_report` writes (``oracle`` only when the
    manifest names an n-best list; the plots only with ``plots``)."""
    out_dir = out_dir or os.path.join(exp_dir, "report")
    names = ("gains.png", "null.png") if plots else ()
    written = {name: os.path.join(out_dir, name) for name in names}
    written.update(
        {
            fmt: os.path.join(out_dir, f"table.{ext}")
            for fmt, ext in (("markdown", "md"), ("latex", "tex"), ("json", "json"), ("text", "txt"))
        }
    )
    written["oracle"] = os.path.join(out_dir, "test.oracle")
    written["html"] = os.path.join(out_dir, "index.html")
    return written


def experiment_report(
    exp_dir: str,
    out_dir: Optional[str] = None,
    metrics: Sequence[str] = DEFAULT_METRICS,
    shuffles: int = 10000,
    resamples: int = 10000,
    seed: int = DEFAULT_SEED,
    compare_to: Optional[str] = None,
    partial: bool = False,
    plots: bool = True,
    marks: Optional[str] = None,
    lang: Optional[str] = None,
    testing: Optional[Dict[str, Any]] = None,
    analysis: Optional[Dict[str, Optional[str]]] = None,
) -> Dict[str, str]:
    """Collect a pipeline directory into the paper's Table 3/4 layout (baseline, each
    re-ranked feature set with its replicas, oracle) as Markdown, LaTeX, JSON and text,
    plus the plots of :func:`plot_report` when ``plots`` (the caller checks
    :func:`plots_available` first: the tables never wait on matplotlib).  Returns {kind: path}.

    What is compared comes from ``EXP_DIR/experiment.json`` (:meth:`Experiment.read`):
    computing is :func:`significance_table`, formatting :func:`format_table`; this
    function only reads the manifest and writes every file or none (staged).  ``marks``: a
    marks file (:func:`rerank.report_sources.read_marks`) whose rows are marked; ``lang``: the target language
    (METEOR's); ``testing``: the :class:`~rerank.signif.SignificanceSettings` of the tests
    (``test``, ``bootstrap``, ``confidence``, ``adjust``, ``alpha``, ``pairs``; default: max-T
    over the table, the report's); ``analysis``: None (no sentence analysis) or
    ``{"source": PATH, "train_source": PATH}`` (either None): :func:`rerank.report_analysis.analyze`
    of every system, written under ``report/analysis/`` and shown on ``index.html``, which is
    written in any case (:func:`rerank.report_page.report_page`).
    """
    experiment = Experiment.read(exp_dir, partial)  # validates before anything is written
    marked = read_marks(marks) if marks else None
    ref, baseline, systems, nbest = experiment.reference, experiment.baseline, experiment.systems, experiment.nbest
    written = report_files(exp_dir, out_dir, plots)
    oracle_path = written.pop("oracle")
    objective = experiment.objective(lang)
    with tempfile.TemporaryDirectory() as tmp, StagedOutputs() as outputs:  # every file or none
        listed = None  # the list as the oracle read it (from the statistics cache): the analysis' picked ranks
        if nbest is not None:
            computed = os.path.join(tmp, "test.oracle")
            listed = oracle_file(nbest, ref, computed, objective)[1]
            systems = systems + [("oracle", [computed])]
        settings = SignificanceSettings(
            metrics=tuple(metrics),
            tokenize=experiment.bleu.tokenize,
            lowercase=experiment.bleu.lowercase,
            lang=lang,
            shuffles=shuffles,
            resamples=resamples,
            seed=seed,
            compare_to=compare_to,
            progress=True,
            **{"adjust": "maxT", **(testing or {})},
        )
        kept: Dict[str, Any] = {}
        result = significance_table(ref, baseline, systems, settings, kept)
        if experiment.paper is not None:
            published, source = read_paper_table(experiment.paper["table"], experiment.paper["select"])
            attach_paper(result, published, source + " " + json.dumps(experiment.paper["select"]))
        if marked is not None and marks is not None:
            attach_marks(result, *marked, marks)
        if experiment.caption:
            result["meta"]["caption"] = experiment.caption
        if experiment.left_out:
            result["meta"]["left_out"] = experiment.left_out
        staged = {name: outputs.stage(written[name]) for name in ("gains.png", "null.png")} if plots else {}
        if plots:
            plot_report(
                result, ref, {"gains": staged["gains.png"], "null": staged["null.png"]}, objective, seed, shuffles
            )
        if nbest is not None:
            for row in result["rows"]:
                if row["system"] == "oracle":
                    row["files"] = [oracle_path]
            shutil.copyfile(computed, outputs.stage(oracle_path))
            written["oracle"] = oracle_path
        for fmt in ("markdown", "latex", "json", "text"):
            with outputs.open(written[fmt]) as out:
                out.write(format_table(result, fmt))
        files = {settings.baseline_name: list(baseline), **{name: list(paths) for name, paths in systems}}
        _write_page(result, written, outputs, (analysis, files, kept), settings, listed, tuple(staged.items()))
    return written


def _write_page(result, written, outputs, asked, settings, nbest, plots) -> None:
    """``index.html`` of the report (with the plots staged beside it), after the sentence
    analysis of every system when ``asked`` = (the analysis' inputs, {system: replica files})
    asks for it (its files added to ``written``); ``nbest``: the experiment's list, read, or None."""
    found = None
    analysis, files, kept = asked
    if analysis is not None:
        refs = read_references(result["meta"]["reference"])
        count = segment_count(refs)
        texts = {name: [read_system(p, count) for p in paths] for name, paths in files.items()}
        metrics = tuple(m for m in settings.metrics if m != "length") or ("bleu",)
        chosen = AnalysisSettings(metrics, settings.tokenize, settings.lowercase, settings.lang, settings.bootstrap)
        sources = read_lines(analysis["source"]) if analysis.get("source") else None
        train = read_lines(analysis["train_source"]) if analysis.get("train_source") else None
        found = analyze(refs, texts, chosen, sources, nbest, train, kept)
        out_dir = os.path.join(os.path.dirname(written["html"]), "analysis")
        written.update({f"analysis/{k}": v for k, v in write_analysis(found, out_dir, outputs).items()})
    titles = _titles(list(dict.fromkeys(r["metric"] for r in result["rows"])), result["meta"])
    with outputs.open(written["html"]) as out:
        out.write(report_page(result, _footer(result["meta"], titles, result["rows"]), found, plots))
