"""A configuration resolved: a system's file, the overrides (Snakemake's ``--config`` or
``run_pipeline.sh``'s environment variables), the schema's defaults, paths made absolute,
every check (:func:`complete`, :func:`from_environment`), and the ``KEY=VALUE`` lines an
``OUT/settings.json`` records (:func:`recorded`)."""

import os
from typing import Dict, List, Mapping, Optional

from .base import ROOT, SYSTEMS, SettingsError, from_variables, load_schema, load_system, normalise, text_of, validate
from .corpus import check_languages_in_data, check_out, check_pairs, check_shell_safe, own_corpus
from .feature_sets import OWN_MODEL_SETS
from .models import check_generator, check_own_model, check_qe

#: the order of settings.json's KEY=VALUE lines (the bash pipeline's; scripts/pipeline_settings.py
#: compares them with an earlier run's, so a run of the bash pipeline resumes)
RECORDED = (
    "preset variant max_epoch patience nbest r2l_nbest seed replicas aux_preset channel_vocab aux_epoch "
    "l2r2_epoch lm_epoch l2r2 features embed_epochs jobs tuners chrf_tuning arch aux_arch lm_arch max_tokens "
    "lr warmup bf16_autocast tune_metric src tgt train valid test generator max_length lowercase qe_checkpoint "
    "r2l_model channel_model subword block_hypotheses"
).split()


def complete(config: Mapping, schema: Optional[Dict] = None) -> Dict:
    """A configuration as Snakemake gives it (a system file, perhaps with ``--config``
    overrides; empty: the default system's) resolved and validated: the system's file under
    it, the schema's defaults, ``out`` and ``data`` absolute (relative to the project root:
    every rule runs inside OUT); an empty ``data`` is ``../shared/data/multi30k`` beside the
    project when it exists (``rerank nmt prepare``'s default, seen from the root), else stays
    empty (the public repository is downloaded). SettingsError: one line naming the setting."""
    schema = schema or load_schema()
    system = config.get("system", SYSTEMS[0])
    merged = {**load_system(system), **dict(config)}
    cased_by_default = "lowercase" not in merged  # a corpus of one's own keeps its case unless told
    merged = normalise(merged, schema)
    validate(merged, schema)
    check_shell_safe(merged)  # as given; again below, made absolute (the project's own path counts too)
    merged["out"] = os.path.normpath(os.path.join(ROOT, merged["out"]))
    check_out(merged["out"])
    local = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
    if merged["data"]:
        merged["data"] = os.path.normpath(os.path.join(ROOT, merged["data"]))
    elif os.path.isdir(local):
        merged["data"] = local
    own = own_corpus(merged)
    if own and cased_by_default:
        merged["lowercase"] = 0
    if own:
        if "lm" in merged["features"] or "mlmme" in merged["features"]:
            raise SettingsError("FEATURES: lm and mlmme read Multi30k's task 2 and images: not with TRAIN/VALID/TEST")
    else:
        check_languages_in_data(merged)
    check_qe(merged)
    if merged["generator"] != "train":
        check_generator(merged, own)
    for name in OWN_MODEL_SETS:
        check_own_model(merged, name)
    check_shell_safe(merged)
    return merged


def from_environment(environ: Mapping[str, str], schema: Optional[Dict] = None) -> Dict:
    """The configuration of ``run_pipeline.sh``: ``SYSTEM``'s file, then every setting that
    is set as an environment variable (its name in capitals), resolved and validated, the
    corpus' pairs checked line for line (:func:`check_pairs`)."""
    schema = schema or load_schema()
    config = from_variables(environ, schema, load_system(environ.get("SYSTEM") or SYSTEMS[0]), empty=("data",))
    config = complete(config, schema)
    check_pairs(config)
    return config


def recorded(config: Mapping) -> List[str]:
    """The ``KEY=VALUE`` lines of ``OUT/settings.json`` (``scripts/pipeline_settings.py``)."""
    return [f"{name.upper()}={text_of(config[name])}" for name in RECORDED]
