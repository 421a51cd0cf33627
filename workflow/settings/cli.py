"""What ``run_pipeline.sh`` and ``run_tables.sh`` print and run before Snakemake: the help
(:func:`help_text`), the docs' settings tables (:func:`markdown_table`), the checks before any
work (:func:`preflight`) and the command line (:func:`main`)::

    python workflow/settings help        # run_pipeline.sh --help
    python workflow/settings settings    # OUT=... and KEY=VALUE lines (run_pipeline.sh --settings)
    python workflow/settings config      # the resolved configuration, JSON (what Snakemake runs)
    python workflow/settings table       # the Markdown table of settings (docs/usage/pipeline.md)
    python workflow/settings preflight   # the checks before any work (models, OUT's settings)
    python workflow/settings --tables help|settings|config|table   # the same for run_tables.sh
"""

import json
import os
import sys
import textwrap
from typing import Dict, List, Mapping, Optional

from .base import ROOT, SYSTEMS, SettingsError, load_schema, load_system, load_tables_schema, text_of
from .models import layout, lm_args, models
from .resolve import from_environment, recorded
from .tables import tables_from_environment


def preflight(config: Mapping, python: str = sys.executable) -> None:
    """Before any work: a finished model directory (train.done) that holds a model trained with
    other settings is refused (``rerank nmt train --check``: a directory may be shared with a run
    of other settings), then OUT's settings are compared with an earlier run's and written
    (``scripts/pipeline_settings.py``). Exits with the failing command's status; its one-line
    error is on stderr. Last, METEOR for TGT (:func:`check_meteor`: a warning, not a refusal)."""
    import subprocess

    checks = [
        ["rerank", "nmt", "train", "--check", *args.split()]
        for d, args in models(config).items()
        if os.path.exists(os.path.join(d, "train.done"))
    ]
    if "lm" in config["features"] and os.path.exists(os.path.join(layout(config)["lm"], "train.done")):
        checks.append(["rerank", "nmt", "train-lm", "--check", *lm_args(config).split()])
    checks.append(
        [
            python,
            os.path.join(ROOT, "scripts", "pipeline_settings.py"),
            os.path.join(config["out"], "settings.json"),
            *recorded(config),
        ]
    )
    for command in checks:
        status = subprocess.run(command, stdout=subprocess.DEVNULL).returncode
        if status:
            sys.exit(status)
    check_meteor(config, python)


#: what :func:`check_meteor` runs in the project's python: METEOR as the report builds it
METEOR_CHECK = """import sys
from rerank.errors import InputError
from rerank.metrics.spec import make_metric
try:
    make_metric("meteor", lang=sys.argv[1])
except InputError as error:
    sys.exit(str(error))
"""


def check_meteor(config: Mapping, python: str = sys.executable) -> bool:
    """Before any work: whether the report can compute METEOR for TGT (java, the jar, modules
    the jar runs for the language: ``rerank.metrics.meteor.default_modules``); if not, one
    warning line now — the report then leaves METEOR out of its table and says why — rather
    than a surprise at the last rule."""
    import subprocess

    result = subprocess.run([python, "-c", METEOR_CHECK, config["tgt"]], capture_output=True, text=True)
    if result.returncode:
        reason = (result.stderr.strip().splitlines() or ["METEOR cannot run"])[-1]
        print(f"run_pipeline: warning: {reason[:300]}; the report's table will have no METEOR column", file=sys.stderr)
    return not result.returncode


MAIN_HELP = """\
The main job: NMT on Multi30k en->de (or any pair of its languages, or a corpus of your own:
TRAIN, VALID, TEST) -> n-best lists -> re-ranking features from independently trained models
-> tuning on the validation set with MIRA and MERT (REPLICAS seeds each), one feature set at a
time and all together -> the re-ranked test set -> BLEU/METEOR/TER/chrF/length table with
significance (rerank report) -> the trained system in OUT/system (rerank translate).
Rules: workflow/Snakefile (Snakemake, --cores JOBS); settings: config/schema.yaml and
config/SYSTEM.yaml (generated help: workflow/settings/).

  bash scripts/run_pipeline.sh              # SYSTEM=transformer, under out/multi30k-transformer
  SYSTEM=gru bash scripts/run_pipeline.sh   # the paper's GRU system, under out/multi30k
  SYSTEM=gru NBEST=50 OUT=out/gru50 bash scripts/run_pipeline.sh   # a setting overrides the system's
  SYSTEM=tiny TRAIN=c/train.en,c/train.cs VALID=c/dev.en,c/dev.cs TEST=c/test.en,c/test.cs \\
    SRC=en TGT=cs OUT=out/try-cs bash scripts/run_pipeline.sh   # the try-out job on your corpus (minutes)
  bash scripts/run_pipeline.sh --settings   # the resolved settings (KEY=VALUE), nothing run
  bash scripts/run_pipeline.sh --dry-run    # what would run (snakemake --dry-run)
  snakemake -n --configfile config/gru.yaml --config nbest=50   # the same rules, Snakemake's own way

Every rule skips when its output is newer than its inputs, so an interrupted run resumes where
it stopped (training resumes from its last checkpoint); OUT/benchmarks/ holds each rule's
Snakemake benchmark and OUT/timings.tsv their wall seconds. A run in an OUT that holds a run
with other settings is refused before any work (scripts/pipeline_settings.py): give a new OUT.
"""

TABLES_HELP = """\
The paper's Tables 3 and 4 (Calixto & Liu 2017): NMT variants weak / regular / optimised x 20-
and 50-best lists x re-rankers +VSE (s_i) and +MLMME beta = 1 / 0.75 / 0.5 / 0.25 (s_s and s_i),
with the baseline, +nmt, +all (the main job's features, where its lists are shared) and oracle
rows, the paper's value beside ours in every cell (docs/usage/paper-tables.md: the protocols).
Rules: workflow/tables.smk (Snakemake, --cores JOBS); settings: config/tables.schema.yaml.

  bash scripts/run_tables.sh                  # everything under out/tables (about 8 h on 2 CPU cores)
  K=10 OUT=out/tables-k10 bash scripts/run_tables.sh
  bash scripts/run_tables.sh --dry-run        # what would run (snakemake --dry-run)
  snakemake -n -s workflow/tables.smk --config k=10   # the same rules, Snakemake's own way

It runs SYSTEM=gru scripts/run_pipeline.sh into OUT_MAIN first (MAIN_JOB=0 skips that: the files
must exist). Every rule skips when its output is newer than its inputs; OUT/timings.tsv holds the
wall seconds of every stage (from OUT/benchmarks/).
"""


def help_text(schema: Optional[Dict] = None, tables: bool = False) -> str:
    """``run_pipeline.sh --help`` (``tables``: ``run_tables.sh --help``): usage, then every
    setting with its help text, each system's value or the default, and an example."""
    if tables:
        schema, systems, head = schema or load_tables_schema(), {}, TABLES_HELP
    else:
        schema, head = schema or load_schema(), MAIN_HELP
        systems = {name: load_system(name) for name in SYSTEMS}
    lines = head.splitlines() + [
        "",
        "Settings (environment variables; in a configuration file or --config, the same name in lower case):",
    ]
    for name, spec in schema["properties"].items():
        kind = spec.get("type")
        if "enum" in spec:
            kind = "|".join(str(c) for c in spec["enum"])
        elif kind == "array":
            items = spec["items"]
            kind = "list of " + ("|".join(str(c) for c in items["enum"]) if "enum" in items else items["type"])
        values = []
        if name == "system":
            values.append(f"default {SYSTEMS[0]}")
        elif "default" in spec:
            values.append(f"default {text_of(spec['default']) or '(empty)'}")
            given = [f"{s} {text_of(systems[s][name])}" for s in SYSTEMS if name in systems.get(s, {})]
            values.extend(given)  # a system that sets it (SYSTEM=tiny: REPLICAS=1)
        else:
            values.append(", ".join(f"{s} {text_of(systems[s].get(name, ''))}" for s in SYSTEMS))
        body = f"{spec['description']} [{'; '.join(values)}; e.g. {name.upper()}={text_of(spec['example'])}]"
        lines.append(f"  {name.upper()} ({kind})")
        lines.extend(
            textwrap.wrap(body, width=96, initial_indent="      ", subsequent_indent="      ", break_on_hyphens=False)
        )
    return "\n".join(lines)


def markdown_table(schema: Optional[Dict] = None, tables: bool = False) -> str:
    """The settings table of ``docs/usage/pipeline.md`` (``tables``: of
    ``docs/usage/paper-tables.md``; one row per setting)."""
    if tables:
        schema = schema or load_tables_schema()
        rows = ["| setting | default | what it sets |", "|---|---|---|"]
        for name, spec in schema["properties"].items():
            description = " ".join(spec["description"].split()).replace("|", "\\|")
            rows.append(f"| `{name.upper()}` | `{text_of(spec['default']) or '(empty)'}` | {description} |")
        return "\n".join(rows)
    schema = schema or load_schema()
    systems = {name: load_system(name) for name in SYSTEMS}
    rows = ["| setting | " + " | ".join(SYSTEMS) + " | what it sets |", "|---|" + "---|" * len(SYSTEMS) + "---|"]
    for name, spec in schema["properties"].items():
        if name == "system":
            cells = [f"`{SYSTEMS[0]}` (default)"] + [f"`{s}`" for s in SYSTEMS[1:]]
        else:
            cells = [f"`{text_of(systems[s].get(name, spec.get('default')))}`" for s in SYSTEMS]
        description = " ".join(spec["description"].split()).replace("|", "\\|")
        rows.append(f"| `{name.upper()}` | {' | '.join(cells)} | {description} |")
    return "\n".join(rows)


def main(argv: List[str]) -> int:
    """The command line (the module docstring); 0, 1 for a bad setting (one line on stderr),
    2 for a usage error."""
    tables = bool(argv) and argv[0] == "--tables"
    argv = argv[1:] if tables else argv
    verbs = ("help", "settings", "config", "table") + (() if tables else ("preflight",))
    if len(argv) != 1 or argv[0] not in verbs:
        print("usage: python workflow/settings [--tables] help|settings|config|table|preflight", file=sys.stderr)
        return 2
    prefix = "run_tables.sh" if tables else "run_pipeline"
    try:
        if argv[0] == "help":
            print(help_text(tables=tables))
        elif argv[0] == "table":
            print(markdown_table(tables=tables))
        elif tables:
            config = tables_from_environment(os.environ)
            if argv[0] == "settings":
                print("\n".join(f"{name.upper()}={text_of(value)}" for name, value in config.items()))
            else:
                print(json.dumps(config, indent=1))
        else:
            config = from_environment(os.environ)
            if argv[0] == "preflight":
                preflight(config)
            elif argv[0] == "settings":
                print(f"OUT={config['out']}")
                print("\n".join(recorded(config)))
            else:
                print(json.dumps(config, indent=1))
    except SettingsError as error:
        print(f"{prefix}: error: {error}", file=sys.stderr)
        return 1
    return 0
