"""The main job's settings: one schema (``config/schema.yaml``: type, help text and, where
every system shares it, the default of each setting), one file per system
(``config/transformer.yaml``, ``config/gru.yaml``, ``config/tiny.yaml``: the rest), one table of
feature sets (:mod:`settings.feature_sets`), and what is generated from them — the resolved
configuration that ``workflow/Snakefile`` runs, ``run_pipeline.sh --help`` and
``--settings``, the settings table of ``docs/usage/pipeline.md`` and the ``KEY=VALUE`` lines
of ``OUT/settings.json`` (``scripts/pipeline_settings.py``).

A setting is named in lower case in the configuration (``snakemake --config nbest=50``) and
in capitals as an environment variable of ``run_pipeline.sh`` (``NBEST=50``); an
environment variable wins over the system's value, which wins over the schema's default.

The modules: :mod:`~settings.base` (schema, systems, types, validation),
:mod:`~settings.feature_sets` (the table), :mod:`~settings.library` (the library's rules,
imported from rerank), :mod:`~settings.corpus` (raw text, a corpus of one's own, OUT),
:mod:`~settings.models` (directories, trainings, models of one's own, each set's scorers),
:mod:`~settings.resolve` (a configuration resolved), :mod:`~settings.tables` (the paper's
tables' grid) and :mod:`~settings.cli` (help, docs tables, the checks before any work)::

    python workflow/settings help        # run_pipeline.sh --help
    python workflow/settings settings    # OUT=... and KEY=VALUE lines (run_pipeline.sh --settings)
    python workflow/settings config      # the resolved configuration, JSON (what Snakemake runs)

Errors (an unknown system, a value of the wrong type, a feature set that does not exist,
an unknown setting in a configuration file) are one line, ``run_pipeline: error: ...``,
exit status 1. Needs PyYAML and jsonschema (Snakemake's own dependencies); ``help`` and
``settings`` run on a python without rerank (:mod:`settings.library`).
"""

from .base import (
    ROOT,
    SYSTEMS,
    SettingsError,
    feature_sets,
    load_schema,
    load_system,
    load_tables_schema,
    normalise,
    validate,
)
from .cli import check_meteor, help_text, main, markdown_table, preflight
from .corpus import RUN_MARKERS, check_out, check_pairs, check_shell_safe, raw_pairs
from .feature_sets import FEATURE_SETS, OPT_IN_SETS, OWN_MODEL_SETS, RAW_TEXT_SETS, TORCH_SETS
from .models import (
    converted_generator,
    feature_scorers,
    generator_spec,
    layout,
    lm_args,
    model_options,
    models,
    own_scorer,
    subword_spec,
)
from .resolve import RECORDED, complete, from_environment, recorded
from .tables import tables_complete, tables_from_environment

__all__ = [
    "FEATURE_SETS",
    "OPT_IN_SETS",
    "OWN_MODEL_SETS",
    "RAW_TEXT_SETS",
    "RECORDED",
    "ROOT",
    "RUN_MARKERS",
    "SYSTEMS",
    "SettingsError",
    "TORCH_SETS",
    "check_meteor",
    "check_out",
    "check_pairs",
    "check_shell_safe",
    "complete",
    "converted_generator",
    "feature_scorers",
    "feature_sets",
    "from_environment",
    "generator_spec",
    "help_text",
    "layout",
    "lm_args",
    "load_schema",
    "load_system",
    "load_tables_schema",
    "main",
    "markdown_table",
    "model_options",
    "models",
    "normalise",
    "own_scorer",
    "preflight",
    "raw_pairs",
    "recorded",
    "subword_spec",
    "tables_complete",
    "tables_from_environment",
    "validate",
]
