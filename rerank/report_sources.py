"""What a significance report prints beside its own numbers: published scores
(:func:`read_paper_table`, ``rerank report --paper``) and marks that a check outside the
report puts on some rows (:func:`read_marks`, ``rerank report --marks``: the main job's val
guard), each attached to a :func:`rerank.report.significance_table` result."""

from __future__ import annotations

from typing import Dict, Tuple

from rerank.errors import InputError
from rerank.textio import read_json, read_lines


def read_paper_table(path: str, select: Dict[str, str]) -> Tuple[Dict[Tuple[str, str], Dict], str]:
    """Published scores to print beside ours: a TSV whose header names key columns
    (``system`` and e.g. ``nbest``, ``variant``), metric columns and ``METRIC_marks``
    columns (``../shared/reference/calixto2017_tables3-4.tsv``); ``#`` lines are comments.
    Rows whose key columns equal ``select`` are kept.

    Returns ({(system, metric lower-case): {"score", "marks"}}, the first comment line).
    Raises:
        InputError: naming file and line, for a missing ``system`` column, an unknown
            ``select`` column, a row with another field count, or a non-numeric score.
    """
    lines = read_lines(path)
    comments = [line.lstrip("# ").strip() for line in lines if line.startswith("#")]
    body = [(n, line) for n, line in enumerate(lines, start=1) if line.strip() and not line.startswith("#")]
    if not body:
        raise InputError("no header line", path)
    header_line, header = body[0][0], body[0][1].split("\t")
    if "system" not in header:
        raise InputError("no 'system' column", path, header_line)
    unknown = [key for key in select if key not in header]
    if unknown:
        raise InputError(f"no column {unknown[0]!r} to select on", path, header_line)
    metrics = [h for h in header if h + "_marks" in header]
    out: Dict[Tuple[str, str], Dict] = {}
    for lineno, line in body[1:]:
        fields = line.split("\t")
        fields += [""] * (len(header) - len(fields))  # trailing empty marks
        if len(fields) != len(header):
            raise InputError(f"{len(fields)} fields but {len(header)} columns", path, lineno)
        row = dict(zip(header, fields))
        if any(row[key] != str(value) for key, value in select.items()):
            continue
        for metric in metrics:
            try:
                score = float(row[metric])
            except ValueError:
                raise InputError(f"{metric} {row[metric]!r} is not a number", path, lineno) from None
            out[(row["system"], metric.lower())] = {"score": score, "marks": row[metric + "_marks"].strip()}
    return out, comments[0] if comments else path


def attach_paper(result: Dict, paper: Dict[Tuple[str, str], Dict], source: str) -> Dict:
    """Add ``row["paper"]`` (published score and marks) to every row of a
    :func:`significance_table` result that ``paper`` has, and ``meta["paper"]``."""
    for row in result["rows"]:
        value = paper.get((row["system"], row["metric"]))
        if value is not None:
            row["paper"] = value
    result["meta"]["paper"] = source
    return result


#: the mark of a row a marks file names (``rerank report --marks``)
MARK = "§"


def read_marks(path: str) -> Tuple[Dict[str, str], str]:
    """(the marked rows: {system: why}, the legend) of a marks file: JSON
    ``{"marks": {system: why}, "legend": "what the mark means"}`` — what a check outside the
    report (the main job's val guard, ``scripts/val_guard.py``) says about some rows.

    Raises:
        InputError: unreadable JSON, no ``marks`` object of strings, no ``legend`` string.
    """
    data = read_json(path)
    marks = data.get("marks") if isinstance(data, dict) else None
    if not isinstance(marks, dict) or not all(isinstance(v, str) for v in marks.values()):
        raise InputError('no "marks" object (system -> why the row is marked)', path)
    legend = data.get("legend")
    if not isinstance(legend, str) or not legend.strip():
        raise InputError('no "legend" string (what the mark means)', path)
    return marks, legend


def attach_marks(result: Dict, marks: Dict[str, str], legend: str, source: str) -> Dict:
    """Mark (:data:`MARK`) every system of ``result`` that ``marks`` names: ``row["mark"]``
    holds why, ``meta["marks"]`` the legend and the file.  Returns ``result``.

    Raises:
        InputError: a mark for a system the table does not hold (another run's file).
    """
    systems = {row["system"] for row in result["rows"]}
    unknown = sorted(set(marks) - systems)
    if unknown:
        raise InputError(f"marks for systems the report does not hold: {', '.join(unknown)}", source)
    for row in result["rows"]:
        if row["system"] in marks:
            row["mark"] = marks[row["system"]]
    result["meta"]["marks"] = {"legend": legend, "source": source}
    return result
