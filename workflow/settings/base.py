"""The settings' schema and systems: where they live, reading them, an environment variable's
text as its setting's type, defaults and lists filled in, and validation (one line naming the
setting: :class:`SettingsError`)."""

import os
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

from . import library
from .feature_sets import FEATURE_SETS, NAMES, OPT_IN_SETS

#: the project root (workflow/settings/ is two levels below it)
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG_DIR = os.path.join(ROOT, "config")
SCHEMA_PATH = os.path.join(CONFIG_DIR, "schema.yaml")
TABLES_SCHEMA_PATH = os.path.join(CONFIG_DIR, "tables.schema.yaml")
#: the systems, each a file config/NAME.yaml; the first is the default
SYSTEMS = ("transformer", "gru", "tiny")


class SettingsError(ValueError):
    """A setting that cannot be used; its message is one line naming the setting."""


def _read_yaml(path: str) -> Dict:
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def load_schema() -> Dict:
    """The JSON schema of the settings (``config/schema.yaml``), the ``features`` choices and
    each set's help from the feature sets' table (:mod:`settings.feature_sets`)."""
    schema = _read_yaml(SCHEMA_PATH)
    features = schema["properties"]["features"]
    features["items"]["enum"] = list(NAMES)
    features["description"] += " " + "; ".join(f"{f.name}: {f.help}" for f in FEATURE_SETS)
    return schema


def load_tables_schema() -> Dict:
    """The JSON schema of the paper's tables' settings (``config/tables.schema.yaml``)."""
    return _read_yaml(TABLES_SCHEMA_PATH)


def feature_sets(schema: Optional[Dict] = None) -> List[str]:
    """Every feature set, in the order of their columns (the schema's ``features`` enum)."""
    schema = schema or load_schema()
    return list(schema["properties"]["features"]["items"]["enum"])


def load_system(system: str) -> Dict:
    """The settings of ``config/SYSTEM.yaml``; raises SettingsError for a system that does
    not exist."""
    if system not in SYSTEMS:
        raise SettingsError(f"SYSTEM: unknown system '{system}' (choose from: {' '.join(SYSTEMS)})")
    return _read_yaml(os.path.join(CONFIG_DIR, f"{system}.yaml"))


def parse_value(name: str, text: str, spec: Dict) -> Any:
    """An environment variable's text as the schema's type (``spec``) of setting ``name``."""
    kind = spec.get("type")
    var = name.upper()
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            if "enum" in spec:
                choices = " or ".join(str(c) for c in spec["enum"])
                raise SettingsError(f"{var}: '{text}' is not {choices}") from None
            raise SettingsError(f"{var}: '{text}' is not a number") from None
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise SettingsError(f"{var}: '{text}' is not a number") from None
        return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    if kind == "array":
        items = text.replace("+", " ").replace(",", " ").split()
        return [parse_value(name, item, spec["items"]) for item in items]
    return text


def normalise(config: Dict, schema: Dict) -> Dict:
    """``config`` with the schema's defaults filled in, ``features`` as a list in the
    columns' order (``all``: every set but the opt-in ones; ``l2r2`` dropped when ``l2r2`` is
    0) and strings of lists (``--config features=r2l+mbr``) split."""
    config = dict(config)
    for name, spec in schema["properties"].items():
        if name not in config and "default" in spec:
            config[name] = spec["default"]
        if spec.get("type") == "array" and isinstance(config.get(name), (str, int, float)):
            config[name] = parse_value(name, str(config[name]), spec)
    features = config.get("features")
    if isinstance(features, list):
        order = feature_sets(schema)
        if features == ["all"]:
            features = [f for f in order if f not in OPT_IN_SETS]
        unknown = [f for f in features if f not in order]
        if unknown:
            raise SettingsError(f"FEATURES: unknown feature set '{unknown[0]}' (choose from: {' '.join(order)})")
        config["features"] = [f for f in order if f in features and (f != "l2r2" or config.get("l2r2", 1) == 1)]
    return config


def check_metric(spec: Optional[str]) -> None:
    """Raise SettingsError unless ``spec`` (TUNE_METRIC) is a metric the tuners can maximise
    (the library's objective; skipped on a python without rerank)."""
    if spec is None or not library.HAVE_RERANK:
        return
    if "seg:" in spec:
        raise SettingsError(f"TUNE_METRIC: '{spec}': seg:NAME reads scores beside a list the job does not have")
    try:
        library.make_objective(spec)
    except library.InputError as error:
        raise SettingsError(f"TUNE_METRIC: {error.message}") from None


def validate(config: Dict, schema: Dict, cross: bool = True) -> None:
    """Raise SettingsError (one line naming the setting) unless ``config`` satisfies the
    schema, and the cross-setting rules (``r2l_nbest`` needs the ``r2l`` feature set)."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(config), key=lambda e: list(e.path))
    if errors:
        error = errors[0]
        where = next((str(p) for p in error.path if isinstance(p, str)), "config")
        if error.validator == "additionalProperties":
            names = sorted(set(config) - set(schema["properties"]))
            raise SettingsError(f"unknown setting '{names[0]}' (settings: {' '.join(schema['properties'])}; --help)")
        raise SettingsError(f"{where.upper()}: {error.message}")
    check_metric(config.get("tune_metric"))
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    if src == tgt:
        raise SettingsError(f"TGT: the target language is the source's ({src})")
    if (src, tgt) != ("en", "de") and "mlmme" in config.get("features", []):
        raise SettingsError(f"FEATURES: mlmme is the paper's English-German embedding, not for {src}-{tgt}: drop it")
    if cross and config["r2l_nbest"] != 0 and "r2l" not in config["features"]:
        raise SettingsError(f"R2L_NBEST={config['r2l_nbest']} needs the r2l feature set in FEATURES (or R2L_NBEST=0)")


def text_of(value: Any) -> str:
    """A setting's value as settings.json and --settings write it (a list: space-separated)."""
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def from_variables(environ: Mapping[str, str], schema: Dict, config: Dict, empty: Tuple[str, ...] = ()) -> Dict:
    """``config`` with every setting of ``schema`` that is set in ``environ`` (its name in
    capitals) parsed over it; of the settings in ``empty``, an empty variable sets the empty
    value (``DATA=""``), of the others it is not set."""
    config = dict(config)
    for name, spec in schema["properties"].items():
        if name == "system":
            continue
        text = environ.get(name.upper())
        if text:
            config[name] = parse_value(name, text, spec)
        elif text == "" and name in empty:
            config[name] = ""
    return config
