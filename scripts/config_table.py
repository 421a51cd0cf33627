"""The configuration table of issue 20: one row per main-job directory (``run_pipeline.sh``'s
OUT, e.g. each ``out/configs/NAME`` of ``scripts/run_configs.sh``) — baseline, the models'
batch size and warm-up, re-ranking models, n-best size -> beam BLEU, re-ranked BLEU (mean
of the tuning replicas), gain, its AR p-value, METEOR and TER deltas, the oracle, whether
every tuning run reached its beam's tuning-set score, and time.

    python scripts/config_table.py out/multi30k out/configs/* --out out/configs/table

Settings come from ``OUT/settings.json`` (written by run_pipeline.sh). Scores come from
``OUT/report/table.json`` (``rerank report``: test_2016, 3 replicas). Times come from
``OUT/timings.tsv`` (name, seconds, output path; written from Snakemake's benchmark files by
``workflow/timings.py``, or by the bash pipeline before it).
A stage that a directory skipped because its output is shared with another run (the
trained models of run_configs.sh) is named in ``OUT/skipped.tsv`` (``NAME<TAB>PATH``), or in
an older run's ``OUT/pipeline.log`` (``== NAME: done (PATH exists), skipped``); its time is looked up by PATH in the timings of every directory given,
so each row's time is what the configuration costs from scratch.  ``compute`` sums every
stage; ``wall`` estimates a fresh run on 2 cores: the stages of the two training chains side
by side (the baseline's chain and the R2L model's, as the bash pipeline ran them; Snakemake's
``--cores 2`` runs them side by side too), everything else one after the other.
Writes ``OUT.md`` (Markdown) and ``OUT.json``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import re
import sys
from typing import Dict, List, Optional, Tuple

from pipeline_settings import (  # scripts/ is on sys.path (run as a script)
    ALL_FEATURES,
    OPT_IN,
    PAPER_FEATURES,
    recorded_later,
)

#: run_pipeline.sh's two training chains (stage names), run side by side
CHAIN_A = ("train", "nbest-val", "nbest-test", "train-channel", "train-lm")
CHAIN_B = ("train-r2l", "nbest-r2l-val", "nbest-r2l-test", "train-l2r2", "embed-train")
SKIPPED = re.compile(r"^== (\S+): done \((.+) exists\), skipped$")


def read_timings(out: str) -> List[Tuple[str, int, Optional[str]]]:
    """(name, seconds, resolved output path or None) of every line of ``OUT/timings.tsv``
    (lines of two fields predate the path column)."""
    path = os.path.join(out, "timings.tsv")
    if not os.path.exists(path):
        return []
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            fields = line.rstrip("\n").split("\t")
            if not line.strip():
                continue
            if len(fields) not in (2, 3) or not fields[1].isdigit():
                sys.exit(f"config_table: error: {path}:{number}: expected NAME<TAB>SECONDS[<TAB>OUTPUT]")
            rows.append((fields[0], int(fields[1]), fields[2] if len(fields) == 3 else None))
    return rows


def skipped_stages(out: str) -> Dict[str, str]:
    """{stage name: resolved output path} of the stages ``OUT/skipped.tsv`` (or an older run's
    ``OUT/pipeline.log``) says were skipped because their output existed."""
    found: Dict[str, str] = {}
    listed = os.path.join(out, "skipped.tsv")
    if os.path.exists(listed):
        with open(listed, encoding="utf-8") as handle:
            for line in handle:
                name, _, output = line.rstrip("\n").partition("\t")
                if output:
                    found[name] = os.path.realpath(output)
    path = os.path.join(out, "pipeline.log")
    if os.path.exists(path):
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                match = SKIPPED.match(line.strip())
                if match:
                    found[match.group(1)] = os.path.realpath(match.group(2))
    return found


def timing_index(dirs: List[str]) -> Dict:
    """Where skipped stages are looked up: {resolved output path: seconds}, and for lines
    of two fields (no path) {(resolved directory, stage name): seconds}."""
    index: Dict = {}
    for out in dirs:
        for name, seconds, path in read_timings(out):
            index.setdefault(path if path is not None else (os.path.realpath(out), name), seconds)
    return index


def stage_seconds(out: str, index: Dict) -> Tuple[Dict[str, int], List[str]]:
    """({stage: seconds}, [stages whose time is unknown]) for one directory: its own
    timings, plus each skipped stage found by its output path in ``index`` (or, for a
    two-field line, by name in the directory that holds that path, except a training
    stage: its model directory is named by its settings, so the name alone may be another
    model's time — ``train-r2l`` of a GRU R2L is not a transformer R2L's)."""
    seconds = {name: value for name, value, _ in read_timings(out)}
    unknown = []
    for name, path in skipped_stages(out).items():
        if name in seconds:
            continue
        holders = [
            key
            for key in index
            if isinstance(key, tuple)
            and key[1] == name
            and not name.startswith("train")
            and path.startswith(key[0] + os.sep)
        ]
        if path in index:
            seconds[name] = index[path]
        elif holders:
            seconds[name] = index[holders[0]]
        else:
            unknown.append(name)
    return seconds, unknown


def wall_estimate(seconds: Dict[str, int]) -> int:
    """Seconds of a fresh run on 2 cores: the two chains side by side, the rest in turn."""
    a = sum(v for k, v in seconds.items() if k in CHAIN_A)
    b = sum(v for k, v in seconds.items() if k in CHAIN_B)
    rest = sum(v for k, v in seconds.items() if k not in CHAIN_A and k not in CHAIN_B)
    return rest + max(a, b)


def report_rows(out: str) -> Dict[Tuple[str, str], Dict]:
    """{(system, metric): row} of ``OUT/report/table.json``."""
    path = os.path.join(out, "report", "table.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as handle:
        table = json.load(handle)
    return {(row["system"], row["metric"]): row for row in table["rows"]}


def tuning_reached_beam(out: str) -> Tuple[int, int]:
    """(runs whose tuning-set score is at least the start's, runs) over ``OUT/rerank/*/
    weights.seed*.json`` (TER: at most)."""
    ok = total = 0
    for path in glob.glob(os.path.join(out, "rerank", "*", "weights.seed*.json")):
        with open(path, encoding="utf-8") as handle:
            tuning = json.load(handle)["tuning"]
        start = tuning.get("initial_score", tuning.get("initial_bleu"))
        score = tuning.get("score", tuning.get("bleu"))
        lower = tuning.get("metric", "bleu") == "ter"
        total += 1
        ok += (score <= start + 1e-9) if lower else (score >= start - 1e-9)
    return ok, total


def config_row(out: str, system: str, index: Dict) -> Dict:
    """One row of the table for the pipeline directory ``out`` (dict; see the module)."""
    settings = {}
    if os.path.exists(os.path.join(out, "settings.json")):
        with open(os.path.join(out, "settings.json"), encoding="utf-8") as handle:
            settings = json.load(handle).get("settings", {})
    rows = report_rows(out)
    seconds, unknown = stage_seconds(out, index)
    ok, runs = tuning_reached_beam(out)

    def get(name: str, metric: str, key: str):
        row = rows.get((name, metric))
        return None if row is None else row.get(key)

    baseline = next(
        (r["system"] for r in rows.values() if r.get("p_value") is None and r["system"] != "oracle"), "baseline"
    )
    return {
        "config": os.path.basename(os.path.normpath(out)),
        "dir": out,
        "settings": settings,
        "beam_bleu": get(baseline, "bleu", "score"),
        "bleu": get(system, "bleu", "score"),
        "gain": get(system, "bleu", "delta"),
        "p": get(system, "bleu", "p_value"),
        "replicas": get(system, "bleu", "replicas"),
        "meteor_delta": get(system, "meteor", "delta"),
        "ter_delta": get(system, "ter", "delta"),
        "oracle_bleu": get("oracle", "bleu", "score"),
        "tuning_at_least_beam": [ok, runs],
        "stage_seconds": seconds,
        "unknown_stages": unknown,
        "compute_s": sum(seconds.values()),
        "wall_estimate_s": wall_estimate(seconds),
    }


def _num(value, fmt: str) -> str:
    return "–" if value is None else format(value, fmt)


def run_sets(settings: Dict[str, str]) -> List[str]:
    """The run's feature sets (``FEATURES``; an older run's from ``recorded_later``)."""
    return settings.get("FEATURES", recorded_later(settings)["FEATURES"]).split()


def feature_sets(settings: Dict[str, str]) -> str:
    """``all`` when the run computed every feature set, ``all but ibm1`` for the GRU system's
    sets (every set before ibm1 came), else its sets, comma-separated."""
    sets = run_sets(settings)
    if sets == [f for f in ALL_FEATURES if f not in OPT_IN]:  # all: every set but the opt-in ones
        return "all"
    return "all but ibm1" if sets == list(PAPER_FEATURES) else ",".join(sets)


def models_used(settings: Dict[str, str]) -> Tuple[str, str]:
    """(R2L/channel architecture, LM architecture) of the run, "–" for a model that none of
    its feature sets needs (run_pipeline.sh does not train it)."""
    sets = run_sets(settings)
    aux = settings.get("AUX_ARCH", "?") if {"r2l", "channel"} & set(sets) else "–"
    return aux, settings.get("LM_ARCH", "?") if "lm" in sets else "–"


def schedule(settings: Dict[str, str]) -> str:
    """The translation models' batch size and warm-up, ``TOKENS/WARMUP`` (``–`` for a GRU
    baseline: no warm-up), with ``, lr LR`` when not the architecture's; an older run's
    from ``recorded_later`` (4000 tokens, the architecture's 1,000 updates)."""
    s = {**recorded_later(settings), **settings}
    warmup = "–" if s.get("ARCH", "gru") == "gru" else (s["WARMUP"] if s["WARMUP"] != "0" else "1000")
    return f"{s['MAX_TOKENS']}/{warmup}" + (f", lr {s['LR']}" if s["LR"] != "0" else "")


def list_sizes(settings: Dict[str, str]) -> str:
    """The n-best cell: ``NBEST``, or ``NBEST ∪ R2L R2L_NBEST`` for a union with the R2L
    model's own lists (``R2L_NBEST``; 0 or unrecorded: none)."""
    r2l = settings.get("R2L_NBEST", "0")
    return settings.get("NBEST", "?") + ("" if r2l == "0" else f" ∪ R2L {r2l}")


def markdown(rows: List[Dict], system: str) -> str:
    """The table as Markdown."""
    lines = [
        f"| config | baseline | batch/warm-up | R2L/channel | LM | features | n-best | beam BLEU | "
        f"{system} BLEU | gain | p | METEOR Δ | TER Δ | oracle | tuning ≥ beam | compute h | wall h (est.) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["settings"]
        note = f" ({', '.join(r['unknown_stages'])} unknown)" if r["unknown_stages"] else ""
        aux, lm = models_used(s)
        lines.append(
            f"| {r['config']} | {s.get('ARCH', '?')} | {schedule(s)} | {aux} | {lm} | "
            f"{feature_sets(s)} | {list_sizes(s)} | {_num(r['beam_bleu'], '.2f')} | {_num(r['bleu'], '.2f')} | "
            f"{_num(r['gain'], '+.2f')} | {_num(r['p'], '.4f')} | {_num(r['meteor_delta'], '+.2f')} | "
            f"{_num(r['ter_delta'], '+.2f')} | {_num(r['oracle_bleu'], '.2f')} | "
            f"{r['tuning_at_least_beam'][0]}/{r['tuning_at_least_beam'][1]} | {r['compute_s'] / 3600:.2f} | "
            f"{r['wall_estimate_s'] / 3600:.2f}{note} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        epilog="example: python scripts/config_table.py out/multi30k out/configs/* --out out/configs/table",
    )
    parser.add_argument("dirs", nargs="+", help="main-job output directories (run_pipeline.sh's OUT)")
    parser.add_argument("--system", default="+all", help="the re-ranked row to tabulate (default: +all)")
    parser.add_argument("--out", help="write OUT.md and OUT.json (default: print the Markdown only)")
    args = parser.parse_args()
    for out in args.dirs:
        if not os.path.isdir(out):
            sys.exit(f"config_table: error: {out}: not a directory")
    index = timing_index(args.dirs)
    rows = [config_row(out, args.system, index) for out in args.dirs]
    table = markdown(rows, args.system)
    print(table, end="")
    if args.out:
        for ext, text in (("md", table), ("json", json.dumps({"system": args.system, "rows": rows}, indent=2))):
            with open(f"{args.out}.{ext}.tmp", "w", encoding="utf-8") as handle:
                handle.write(text)
            os.replace(f"{args.out}.{ext}.tmp", f"{args.out}.{ext}")


if __name__ == "__main__":
    main()
