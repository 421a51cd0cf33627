"""``OUT/timings.tsv`` from Snakemake's benchmark files (``OUT/benchmarks/STAGE.tsv``): one line
per stage, ``NAME<TAB>SECONDS<TAB>OUTPUT`` (the output's absolute path, symbolic links resolved,
so that a stage another run skipped because the output is shared can be looked up there:
``scripts/config_table.py``). A stage without a benchmark keeps its earlier line (a run of the
bash pipeline before it, or a stage skipped because its output existed).

Stages whose output exists but that have no benchmark in OUT (their output is shared with another
run: the model directories scripts/run_configs.sh links) are listed in ``OUT/skipped.tsv``
(``NAME<TAB>OUTPUT``), where ``scripts/config_table.py`` looks their time up in the other runs.

A benchmark file holds the wall seconds (``s``) of the rule's last sitting; a training that was
interrupted and resumed counts its last sitting only.
"""

import csv
import os
from typing import Dict, List, Tuple


def benchmark_seconds(path: str) -> float:
    """The wall seconds (column ``s``; the sum over repeats) of one Snakemake benchmark file."""
    with open(path, encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    return sum(float(row["s"]) for row in rows)


def write_timings(out: str, stages: Dict[str, str]) -> str:
    """Write ``OUT/timings.tsv`` for ``stages`` ({name: output path}) and return its path;
    lines of stages that have no benchmark file (yet) are kept as they were."""
    path = os.path.join(out, "timings.tsv")
    rows: List[Tuple[str, str]] = []
    known = set()
    for name, output in stages.items():
        benchmark = os.path.join(out, "benchmarks", f"{name}.tsv")
        if os.path.exists(benchmark):
            rows.append((name, f"{name}\t{round(benchmark_seconds(benchmark))}\t{os.path.realpath(output)}"))
            known.add(name)
    skipped = [
        f"{name}\t{os.path.realpath(output)}\n"
        for name, output in stages.items()
        if name not in known and os.path.exists(output)
    ]
    _write(os.path.join(out, "skipped.tsv"), "".join(skipped))
    earlier = []
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            earlier = [line.rstrip("\n") for line in handle if line.strip() and line.split("\t")[0] not in known]
    lines = earlier + [line for _, line in rows]
    if not lines:
        return path
    _write(path, "".join(line + "\n" for line in lines))
    return path


def _write(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole (a temporary, then a rename), or remove ``path`` when
    ``text`` is empty."""
    if not text:
        if os.path.exists(path):
            os.remove(path)
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(path + ".tmp", path)
