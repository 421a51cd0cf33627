"""The settings of the paper's Tables 3 and 4 (``workflow/tables.smk``,
``scripts/run_tables.sh``): ``config/tables.schema.yaml`` resolved and validated."""

import os
from typing import Dict, Mapping, Optional

from .base import ROOT, SettingsError, from_variables, load_tables_schema, normalise, validate

#: the settings of the tables' grid that name files or directories (made absolute, relative to the root)
TABLES_PATHS = ("out", "out_main", "data", "feats", "feat_split", "paper_table", "images", "image_names")


def tables_complete(config: Mapping, schema: Optional[Dict] = None) -> Dict:
    """The tables' configuration (Snakemake's, perhaps with ``--config`` overrides) resolved
    and validated: defaults, lists from strings, FEATS and FEAT_SPLIT derived from DATA when
    empty, paths absolute; PROTOCOL=paper needs IMAGES and IMAGE_NAMES."""
    schema = schema or load_tables_schema()
    merged = normalise(dict(config), schema)
    validate(merged, schema, cross=False)
    data = merged["data"]
    merged["feats"] = merged["feats"] or f"{data}/features/test_2016_flickr-resnet50-avgpool.npy"
    merged["feat_split"] = merged["feat_split"] or f"{data}/task1/image_splits/test_2016_flickr.txt"
    if merged["protocol"] == "paper" and not (merged["images"] and merged["image_names"]):
        raise SettingsError("PROTOCOL=paper needs IMAGES and IMAGE_NAMES (features of train, val and test)")
    for name in TABLES_PATHS:
        if merged[name]:
            merged[name] = os.path.normpath(os.path.join(ROOT, merged[name]))
    return merged


def tables_from_environment(environ: Mapping[str, str], schema: Optional[Dict] = None) -> Dict:
    """The configuration of ``run_tables.sh``: every setting set as an environment variable (its
    name in capitals) over the schema's defaults, resolved and validated."""
    schema = schema or load_tables_schema()
    return tables_complete(from_variables(environ, schema, {}), schema)
