"""The report as one page people read: ``report/index.html``, a single self-contained file (no
server, no network, no script library): the significance table with its intervals, adjusted
p-values and rank clusters, the plots (embedded), and per system its buckets as bar charts (Δ with
its interval, inline SVG), the n-grams it produces more and less often than the baseline, and its
sentences ranked by gain with the baseline's and its own output side by side, the words that
differ highlighted.  Every system of the table links to its section, every sentence has an anchor
(``#s-SYSTEM-ID``)."""

from __future__ import annotations

import base64
import difflib
import html
import os
from typing import Any, Dict, List, Optional, Tuple

#: sentences shown each way (gains, losses) per system; the TSV/JSONL files hold them all
SHOWN = 50

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}th,td{border:1px solid #ccc;padding:4px 8px;vertical-align:top}
th{background:#f3f3f3}td.num{text-align:right;white-space:nowrap}.foot{color:#555;font-size:90%}
del{background:#fdd;text-decoration:none}ins{background:#dfd;text-decoration:none}
.sent td{font-size:92%}.gain{color:#070}.loss{color:#a00}:target{outline:3px solid #fc0}
svg text{font-size:11px}section{margin-top:2.5em}
"""


def _id(*parts: Any) -> str:
    """An HTML id from ``parts`` (letters, digits, ``-``, ``_``)."""
    text = "-".join(str(p) for p in parts)
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


def highlight(before: str, after: str) -> Tuple[str, str]:
    """(``before``, ``after``) as HTML, the words only one of them has in ``<del>``/``<ins>``
    (a word-level diff, :class:`difflib.SequenceMatcher`)."""
    a, b = before.split(), after.split()
    left: List[str] = []
    right: List[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        old, new = html.escape(" ".join(a[i1:i2])), html.escape(" ".join(b[j1:j2]))
        if op == "equal":
            left.append(old)
            right.append(new)
        else:
            if old:
                left.append(f"<del>{old}</del>")
            if new:
                right.append(f"<ins>{new}</ins>")
    return " ".join(left), " ".join(right)


def _table(result: Dict[str, Any]) -> str:
    """The significance table: a row per system (linked to its section), a cell per metric."""
    rows, meta = result["rows"], result["meta"]
    metrics = list(dict.fromkeys(r["metric"] for r in rows))
    labels = meta.get("labels", {})
    head = "".join(f"<th>{html.escape(labels.get(m, m))}</th>" for m in metrics)
    body = []
    for system in dict.fromkeys(r["system"] for r in rows):
        cells = []
        for metric in metrics:
            row = next(r for r in rows if r["system"] == system and r["metric"] == metric)
            digits = meta.get("decimals", {}).get(metric, 2)
            text = f"{row['score']:.{digits}f}"
            if row["p_value"] is not None:
                lo, hi = row.get("delta_ci") or (float("nan"), float("nan"))
                p = row.get("p_adjusted", row["p_value"])
                text += f" ({row['delta']:+.{digits}f}; Δ [{lo:.{digits}f}, {hi:.{digits}f}]; p {p:.4f})"
            elif row.get("ci"):
                text += f" [{row['ci'][0]:.{digits}f}, {row['ci'][1]:.{digits}f}]"
            if row.get("cluster"):
                text += f" #{row['cluster']}"
            cells.append(f'<td class="num">{html.escape(text)}</td>')
        link = f'<a href="#{_id("sys", system)}">{html.escape(system)}</a>'
        body.append(f"<tr><th>{link}</th>{''.join(cells)}</tr>")
    return f'<table id="significance"><tr><th>system</th>{head}</tr>{"".join(body)}</table>'


def _bars(buckets: List[Dict[str, Any]], metric: str) -> str:
    """One SVG bar chart per bucketing of ``metric``: each bucket's Δ with its interval."""
    charts = []
    for bucketing in dict.fromkeys(b["bucketing"] for b in buckets):
        part = [b for b in buckets if b["bucketing"] == bucketing and b["metric"] == metric]
        if not part:
            continue
        extent = max(1e-9, max(max(abs(b["delta_ci"][0]), abs(b["delta_ci"][1]), abs(b["delta"])) for b in part))
        width, row = 520, 18
        mid = 300
        scale = (width - mid - 10) / extent
        items = []
        for k, b in enumerate(part):
            y = 20 + k * row
            x0, x1 = sorted((mid, mid + b["delta"] * scale))
            lo, hi = mid + b["delta_ci"][0] * scale, mid + b["delta_ci"][1] * scale
            colour = "#3a3" if b["delta"] >= 0 else "#c33"
            label = html.escape(f"{b['bucket']} (n={b['count']}, p {b['p_adjusted']:.3f})")
            items.append(
                f'<text x="0" y="{y + 12}">{label}</text>'
                f'<rect x="{x0:.1f}" y="{y + 3}" width="{max(x1 - x0, 0.5):.1f}" height="{row - 6}" fill="{colour}"/>'
                f'<line x1="{lo:.1f}" x2="{hi:.1f}" y1="{y + row / 2}" y2="{y + row / 2}" stroke="#000"/>'
            )
        height = 30 + len(part) * row
        axis = f'<line x1="{mid}" x2="{mid}" y1="10" y2="{height - 5}" stroke="#888"/>'
        title = html.escape(f"{bucketing}: Δ{metric} (bar) and its interval (line)")
        charts.append(
            f'<figure><figcaption>{title}</figcaption><svg width="{width}" height="{height}" role="img">'
            f"{axis}{''.join(items)}</svg></figure>"
        )
    return "".join(charts)


def _sentences(name: str, sentences: List[Dict[str, Any]], metric: str) -> str:
    """The ranked sentences (the first and last :data:`SHOWN`), outputs side by side."""
    shown = sentences if len(sentences) <= 2 * SHOWN else sentences[:SHOWN] + sentences[-SHOWN:]
    rows = []
    for s in shown:
        base, own = highlight(s["baseline"], s["system"])
        kind = "gain" if s["gain"] > 0 else "loss" if s["gain"] < 0 else ""
        source = "" if s.get("source") is None else html.escape(s["source"])
        rank = "" if s.get("rank") is None else s["rank"]
        rows.append(
            f'<tr id="{_id("s", name, s["id"])}"><td class="num"><a href="#{_id("s", name, s["id"])}">{s["id"]}</a></td>'
            f'<td class="num {kind}">{s["gain"]:+.2f}</td><td class="num">{html.escape(s["improved_in"])}</td>'
            f'<td class="num">{rank}</td><td>{source}</td><td>{html.escape(s["reference"])}</td>'
            f"<td>{base}</td><td>{own}</td></tr>"
        )
    head = (
        f"<tr><th>id</th><th>gain ({html.escape(metric)})</th><th>improved in</th><th>n-best rank</th>"
        "<th>source</th><th>reference</th><th>baseline</th><th>system</th></tr>"
    )
    return f'<table class="sent">{head}{"".join(rows)}</table>'


def _ngrams(ngrams: Dict[str, List[Dict[str, Any]]]) -> str:
    parts = []
    for direction, title in (("over", "produced more often"), ("under", "produced less often")):
        rows = "".join(
            f"<tr><td>{html.escape(g['ngram'])}</td><td class='num'>{g['system']}</td>"
            f"<td class='num'>{g['baseline']}</td><td class='num'>{g['reference']}</td></tr>"
            for g in ngrams.get(direction, [])
        )
        parts.append(
            f"<table><caption>n-grams {title} than the baseline</caption>"
            f"<tr><th>n-gram</th><th>system</th><th>baseline</th><th>reference</th></tr>{rows}</table>"
        )
    return "".join(parts)


def _image(name: str, path: str) -> str:
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return f'<figure><img alt="{html.escape(name)}" src="data:image/png;base64,{data}"/></figure>'


def report_page(
    result: Dict[str, Any],
    footer: List[str],
    analysis: Optional[Dict[str, Dict[str, Any]]] = None,
    plots: Tuple[Tuple[str, str], ...] = (),
) -> str:
    """The page (module docstring) of a significance table ``result`` (:func:`rerank.report.significance_table`)
    with its ``footer`` lines (the text table's), its ``analysis`` (:func:`rerank.report_analysis.analyze`,
    or None: the table and plots only) and the PNG ``plots`` ((its name, e.g. gains.png, the file it
    is read from, perhaps still staged)) that exist, embedded."""
    metrics = list(dict.fromkeys(r["metric"] for r in result["rows"]))
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>rerank report</title>",
        f"<style>{STYLE}</style></head><body><h1>rerank report</h1>",
        _table(result),
        "<div class='foot'>" + "<br>".join(html.escape(line) for line in footer) + "</div>",
        "".join(_image(name, path) for name, path in plots if os.path.exists(path)),
    ]
    for name in dict.fromkeys(r["system"] for r in result["rows"]):
        parts.append(f'<section id="{_id("sys", name)}"><h2>{html.escape(name)}</h2>')
        part = (analysis or {}).get(name)
        if part is None:
            parts.append(
                "<p>No sentence analysis for this row (the baseline, or rerank report without --analysis).</p>"
            )
        else:
            first = metrics[0] if metrics and metrics[0] in {b["metric"] for b in part["buckets"]} else None
            first = first or (part["buckets"][0]["metric"] if part["buckets"] else "")
            parts.append(f"<p>Median replica: {part['replica']}.</p><h3>Buckets</h3>{_bars(part['buckets'], first)}")
            parts.append(f"<h3>n-grams</h3>{_ngrams(part['ngrams'])}")
            parts.append(f"<h3>Sentences by gain</h3>{_sentences(name, part['sentences'], first)}")
        parts.append("</section>")
    parts.append("</body></html>\n")
    return "\n".join(parts)
