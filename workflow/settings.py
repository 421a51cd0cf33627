#!/usr/bin/env python3
"""The main job's settings: one schema (``config/schema.yaml``: type, help text and, where
every system shares it, the default of each setting), one file per system
(``config/transformer.yaml``, ``config/gru.yaml``: the rest), and what is generated from
them — the resolved configuration that ``workflow/Snakefile`` runs, ``run_pipeline.sh
--help`` and ``--settings``, the settings table of ``docs/usage/pipeline.md`` and the
``KEY=VALUE`` lines of ``OUT/settings.json`` (``scripts/pipeline_settings.py``).

A setting is named in lower case in the configuration (``snakemake --config nbest=50``) and
in capitals as an environment variable of ``run_pipeline.sh`` (``NBEST=50``); an
environment variable wins over the system's value, which wins over the schema's default.

    python workflow/settings.py help        # run_pipeline.sh --help
    python workflow/settings.py settings    # OUT=... and KEY=VALUE lines (run_pipeline.sh --settings)
    python workflow/settings.py config      # the resolved configuration, JSON (what Snakemake runs)
    python workflow/settings.py table       # the Markdown table of settings (docs/usage/pipeline.md)
    python workflow/settings.py preflight   # the checks before any work (models, OUT's settings)

Errors (an unknown system, a value of the wrong type, a feature set that does not exist,
an unknown setting in a configuration file) are one line, ``run_pipeline: error: ...``,
exit status 1. Needs PyYAML and jsonschema (Snakemake's own dependencies).
"""

import glob
import gzip
import json
import os
import re
import sys
import textwrap
import zlib
from typing import Any, Dict, List, Mapping, Optional, Tuple

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG_DIR = os.path.join(ROOT, "config")
SCHEMA_PATH = os.path.join(CONFIG_DIR, "schema.yaml")
#: the systems, each a file config/NAME.yaml; the first is the default
SYSTEMS = ("transformer", "gru", "tiny")
#: the order of settings.json's KEY=VALUE lines (the bash pipeline's; scripts/pipeline_settings.py
#: compares them with an earlier run's, so a run of the bash pipeline resumes)
RECORDED = (
    "preset variant max_epoch patience nbest r2l_nbest seed replicas aux_preset channel_vocab aux_epoch "
    "l2r2_epoch lm_epoch l2r2 features embed_epochs jobs tuners chrf_tuning arch aux_arch lm_arch max_tokens "
    "lr warmup bf16_autocast tune_metric src tgt train valid test generator max_length lowercase qe_checkpoint "
    "r2l_model channel_model subword block_hypotheses"
).split()


#: SUBWORD -> the file of that subword step in a prepared directory and the models trained on
#: it (rerank nmt prepare's layout, rerank.nmt.subword.SUBWORD_FILES; this module runs without rerank)
SUBWORD_FILES = {"subword-nmt": "bpe.codes", "sentencepiece": "spm.model"}


def subword_spec(config: Dict[str, Any], directory: str) -> str:
    """A scorer's ``bpe=`` value for a model trained here, in ``directory``: the prepared
    corpus' subword step (``SUBWORD``) and its file there, e.g. ``subword-nmt:DIR/bpe.codes``."""
    kind = config.get("subword", "subword-nmt")
    return f"{kind}:{directory}/{SUBWORD_FILES[kind]}"


class SettingsError(ValueError):
    """A setting that cannot be used; its message is one line naming the setting."""


def load_schema() -> Dict:
    """The JSON schema of the settings (``config/schema.yaml``)."""
    with open(SCHEMA_PATH, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def feature_sets(schema: Optional[Dict] = None) -> List[str]:
    """Every feature set, in the order of their columns (the schema's ``features`` enum)."""
    schema = schema or load_schema()
    return list(schema["properties"]["features"]["items"]["enum"])


def load_system(system: str) -> Dict:
    """The settings of ``config/SYSTEM.yaml``; raises SettingsError for a system that does
    not exist."""
    if system not in SYSTEMS:
        raise SettingsError(f"SYSTEM: unknown system '{system}' (choose from: {' '.join(SYSTEMS)})")
    with open(os.path.join(CONFIG_DIR, f"{system}.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _parse(name: str, text: str, spec: Dict, schema: Dict):
    """An environment variable's text as the schema's type of setting ``name``."""
    kind = spec.get("type")
    var = name.upper()
    if kind == "integer":
        try:
            value = int(text)
        except ValueError:
            if "enum" in spec:
                choices = " or ".join(str(c) for c in spec["enum"])
                raise SettingsError(f"{var}: '{text}' is not {choices}") from None
            raise SettingsError(f"{var}: '{text}' is not a number") from None
        return value
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise SettingsError(f"{var}: '{text}' is not a number") from None
        return int(value) if value.is_integer() and "." not in text and "e" not in text.lower() else value
    if kind == "array":
        items = text.replace("+", " ").replace(",", " ").split()
        return [_parse(name, item, spec["items"], schema) for item in items]
    return text


#: the feature sets FEATURES=all leaves out: they need a model the user brings (QE_CHECKPOINT)
OPT_IN_SETS = ("qe",)


def normalise(config: Dict, schema: Dict) -> Dict:
    """``config`` with the schema's defaults filled in, ``features`` as a list in the
    columns' order (``all``: every set; ``l2r2`` dropped when ``l2r2`` is 0) and strings of
    lists (``--config features=r2l+mbr``) split."""
    config = dict(config)
    for name, spec in schema["properties"].items():
        if name not in config and "default" in spec:
            config[name] = spec["default"]
        if spec.get("type") == "array" and isinstance(config.get(name), (str, int, float)):
            config[name] = _parse(name, str(config[name]), spec, schema)
    features = config.get("features")
    if isinstance(features, list):
        if features == ["all"]:
            features = [f for f in feature_sets(schema) if f not in OPT_IN_SETS]
        order = feature_sets(schema)
        unknown = [f for f in features if f not in order]
        if unknown:
            raise SettingsError(f"FEATURES: unknown feature set '{unknown[0]}' (choose from: {' '.join(order)})")
        config["features"] = [f for f in order if f in features and (f != "l2r2" or config.get("l2r2", 1) == 1)]
    return config


def _check_metric(spec) -> None:
    """Raise SettingsError unless ``spec`` (TUNE_METRIC) is a metric the tuners can maximise."""
    if spec is None:
        return
    try:
        from rerank.errors import InputError
        from rerank.metrics.spec import make_objective
    except ImportError:  # a python without rerank (the machine's, for --help or --settings before the
        return  # install): run_pipeline.sh checks the settings again with .venv's before any work

    if "seg:" in spec:
        raise SettingsError(f"TUNE_METRIC: '{spec}': seg:NAME reads scores beside a list the job does not have")
    try:
        make_objective(spec)
    except InputError as error:
        raise SettingsError(f"TUNE_METRIC: {error.message}") from None


def validate(config: Dict, schema: Dict, cross: bool = True) -> None:
    """Raise SettingsError (one line naming the setting) unless ``config`` satisfies the
    schema, and the cross-setting rule (``r2l_nbest`` needs the ``r2l`` feature set)."""
    import jsonschema

    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(config), key=lambda e: list(e.path))
    if errors:
        error = errors[0]
        where = next((str(p) for p in error.path if isinstance(p, str)), "config")
        if error.validator == "additionalProperties":
            names = sorted(set(config) - set(schema["properties"]))
            raise SettingsError(f"unknown setting '{names[0]}' (settings: {' '.join(schema['properties'])}; --help)")
        raise SettingsError(f"{where.upper()}: {error.message}")
    _check_metric(config.get("tune_metric"))
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    if src == tgt:
        raise SettingsError(f"TGT: the target language is the source's ({src})")
    if (src, tgt) != ("en", "de") and "mlmme" in config.get("features", []):
        raise SettingsError(f"FEATURES: mlmme is the paper's English-German embedding, not for {src}-{tgt}: drop it")
    if cross and config["r2l_nbest"] != 0 and "r2l" not in config["features"]:
        raise SettingsError(f"R2L_NBEST={config['r2l_nbest']} needs the r2l feature set in FEATURES (or R2L_NBEST=0)")


def complete(config: Mapping, schema: Optional[Dict] = None) -> Dict:
    """A configuration as Snakemake gives it (a system file, perhaps with ``--config``
    overrides; empty: the default system's) resolved and validated: the system's file under
    it, the schema's defaults, ``out`` and ``data`` absolute (relative to the project root:
    every rule runs inside OUT); an empty ``data`` is ``../shared/data/multi30k`` beside the
    project when it exists (``rerank nmt prepare``'s default, seen from the root), else stays
    empty (the public repository is downloaded)."""
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
    own = _own_corpus(merged)
    if own and cased_by_default:
        merged["lowercase"] = 0
    if own:
        if "lm" in merged["features"] or "mlmme" in merged["features"]:
            raise SettingsError("FEATURES: lm and mlmme read Multi30k's task 2 and images: not with TRAIN/VALID/TEST")
    else:
        _check_languages_in_data(merged)
    _check_qe(merged)
    if merged["generator"] != "train":
        _check_generator(merged, own)
    for name in OWN_MODEL_SETS:
        _check_own_model(merged, name)
    check_shell_safe(merged)
    return merged


#: the settings that are paths, or model specs holding paths (made absolute by :func:`complete`)
PATH_SETTINGS = ("out", "data", "train", "valid", "test", "generator", "r2l_model", "channel_model", "qe_checkpoint")
#: what no path may hold: whitespace, control characters and the shell's metacharacters break
#: the rules' commands, or extend them (``$(…)`` ran when the rule ran)
PATH_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f`$;&|<>()\\'\"*?\[\]{}!#~^]")
#: what no other text setting may hold: the rules quote them ('…'), so no quote, escape or control
QUOTED_UNSAFE = re.compile(r"[\x00-\x1f\x7f`$\\'\"]")


def check_shell_safe(config: Mapping) -> None:
    """Before any rule is built: every path setting (:data:`PATH_SETTINGS`, absolute by now)
    holds only characters a shell command carries as they are, every other text setting no
    quote, backslash, ``$``, backquote or control character (SettingsError: one line naming
    the setting and the character)."""
    for key, value in config.items():
        if not isinstance(value, str):
            continue
        found = (PATH_UNSAFE if key in PATH_SETTINGS else QUOTED_UNSAFE).search(value)
        if found:
            shown = value if len(value) <= 120 else value[:120] + "…"
            raise SettingsError(
                f"{key.upper()}: {shown!r} holds {found.group()!r}, which the job's shell commands cannot carry: "
                "use a path of letters, digits and - _ . / : , = @ + % (move or link the files)"
            )


def _check_qe(config: Dict) -> None:
    """The qe feature set: without QE_CHECKPOINT it is dropped with one line on stderr (it is
    opt-in); with one, the directory is made absolute and checked to be a COMET checkpoint
    directory. SettingsError: one line naming the setting."""
    if "qe" not in config["features"]:
        return
    if not config["qe_checkpoint"]:
        print(
            "run_pipeline: FEATURES: qe skipped: no QE_CHECKPOINT (a CometKiwi or COMET-QE checkpoint)", file=sys.stderr
        )
        config["features"] = [f for f in config["features"] if f != "qe"]
        return
    path = os.path.normpath(os.path.join(ROOT, config["qe_checkpoint"]))
    for needed in ("checkpoints/model.ckpt", "hparams.yaml"):
        if not os.path.isfile(os.path.join(path, needed)):
            raise SettingsError(f"QE_CHECKPOINT: {path} holds no {needed}: not a COMET checkpoint directory")
    config["qe_checkpoint"] = path


#: the feature sets a generator of one's own can have: those that need no model trained on the
#: prepared (tokenised, BPE) corpus, and read raw text
RAW_TEXT_SETS = ("mbr", "len", "ibm1", "e5", "qe")


#: {feature set: (its setting, the scorer's direction, its column)}: the sets whose model may be
#: one the user has (R2L_MODEL, CHANNEL_MODEL) instead of one trained here
OWN_MODEL_SETS = {"r2l": ("r2l_model", "r2l", "R2L"), "channel": ("channel_model", "backward", "Channel")}

#: what a model directory of each kind holds, and what it is called
MODEL_MARKERS = {"hf": ("config.json", "Hugging Face model"), "ct2": ("model.bin", "CTranslate2 model")}


def model_options(value: str) -> Dict[str, str]:
    """{key: value} of a model setting's options ``KIND:PATH,KEY=VALUE,...`` (as written)."""
    return dict(o.partition("=")[::2] for o in filter(None, value.partition(",")[2].split(",")))


def _joined(kind: str, path: str, given: Mapping[str, str]) -> str:
    """The model setting ``KIND:PATH[,KEY=VALUE...]`` of its parts."""
    return ",".join([f"{kind}:{path}"] + [f"{key}={text}" for key, text in given.items()])


def _split_model(setting: str, value: str) -> Tuple[str, str, Dict[str, str]]:
    """(kind, absolute path, {option: value}) of a model setting ``KIND:PATH[,KEY=VALUE...]``,
    every path from the project root made absolute (PATH, ``bpe=KIND:PATH``'s, ``dict=DIR``)
    and PATH checked: a directory holding :data:`MODEL_MARKERS`' file (hf, ct2) or a
    checkpoint file (fairseq). SettingsError: one line naming the setting."""
    kind, _, rest = value.partition(":")
    path, _, options = rest.partition(",")
    path = os.path.normpath(os.path.join(ROOT, path))
    given: Dict[str, str] = {}
    for option in filter(None, options.split(",")):
        key, sep, text = option.partition("=")
        if not sep:
            raise SettingsError(f"{setting.upper()}: '{option}' is not KEY=VALUE")
        kind_of, sep, rest = text.partition(":")
        if key == "bpe" and sep and rest:  # bpe=KIND:PATH: the path from the project root, as every path
            text = f"{kind_of}:{os.path.normpath(os.path.join(ROOT, rest))}"
        elif key == "dict" and text:
            text = os.path.normpath(os.path.join(ROOT, text))
        given[key] = text
    if kind == "fairseq":
        if not os.path.isfile(path):
            raise SettingsError(f"{setting.upper()}: no such checkpoint file {path}")
        return kind, path, given
    marker, what = MODEL_MARKERS[kind]
    if not os.path.isdir(path):
        raise SettingsError(f"{setting.upper()}: no such model directory {path}")
    if not os.path.isfile(os.path.join(path, marker)):
        raise SettingsError(f"{setting.upper()}: {path} holds no {marker}: not a {what} directory")
    return kind, path, given


def _check_generator(config: Dict, own: bool) -> None:
    """GENERATOR=hf:DIR|ct2:DIR|fairseq:CHECKPOINT: its path made absolute and checked to hold
    a model (a Hugging Face config.json, a CTranslate2 model.bin, a checkpoint file with its
    dictionaries dict.SRC.txt and dict.TGT.txt and a bpe=), the feature sets and the val guard
    checked against what raw text allows, and raw text to read (TRAIN/VALID/TEST or a local
    DATA). SettingsError: one line naming the setting."""
    kind, path, given = _split_model("generator", config["generator"])
    if kind == "fairseq":
        if "bpe" not in given:
            raise SettingsError(
                "GENERATOR: say how raw text becomes the fairseq model's subwords: bpe=sentencepiece:MODEL, "
                "bpe=subword-nmt:CODES or bpe=none"
            )
        given["dict"] = os.path.normpath(os.path.join(ROOT, given.get("dict") or os.path.dirname(path)))
        for lang in (config["src"], config["tgt"]):
            if not os.path.isfile(os.path.join(given["dict"], f"dict.{lang}.txt")):
                raise SettingsError(f"GENERATOR: {given['dict']} holds no dict.{lang}.txt: give dict=DIR")
    config["generator"] = _joined(kind, path, given)
    trained = [
        name
        for name in config["features"]
        if name not in RAW_TEXT_SETS and config.get(OWN_MODEL_SETS.get(name, ("",))[0], "train") == "train"
    ]
    if trained:
        own_sets = ", ".join(f"{name} with {OWN_MODEL_SETS[name][0].upper()}" for name in OWN_MODEL_SETS)
        raise SettingsError(
            f"FEATURES: {trained[0]} needs a model trained here on the prepared corpus: with a GENERATOR of "
            f"your own the feature sets are {', '.join(RAW_TEXT_SETS)}, and {own_sets} of your own"
        )
    if config["guard"]:
        raise SettingsError("GUARD: the val guard folds Multi30k's val by image: not with a GENERATOR of your own")
    if not own and not (config["data"] and os.path.isdir(os.path.join(config["data"], "task1", "raw"))):
        raise SettingsError(
            "GENERATOR: a model of your own reads raw text: give TRAIN/VALID/TEST or a local Multi30k as DATA"
        )


def _check_own_model(config: Dict, name: str) -> None:
    """R2L_MODEL / CHANNEL_MODEL (feature set ``name``): unless ``train``, the model checked
    (:func:`_split_model`), its path made absolute, and the settings it needs: the feature set
    in FEATURES, ``bpe=`` where the scorer cannot tokenise by itself, no ``direction=`` or
    ``name=`` (the feature set's), no R2L_NBEST (lists of a model trained here).
    SettingsError: one line naming the setting."""
    setting, _, column = OWN_MODEL_SETS[name]
    value = config[setting]
    if value == "train":
        return
    kind, path, given = _split_model(setting, value)
    upper = setting.upper()
    if name not in config["features"]:
        raise SettingsError(f"{upper}: the {name} feature set is not in FEATURES: add it (FEATURES=...+{name})")
    for key in ("direction", "name"):
        if key in given:
            raise SettingsError(f"{upper}: {key}= is the {name} feature set's ({column}): leave it out")
    if "bpe" not in given and (kind == "fairseq" or name == "r2l"):
        raise SettingsError(
            f"{upper}: say how the lists' text becomes the model's subwords: bpe=subword-nmt:CODES, "
            "bpe=sentencepiece:MODEL or bpe=none"
        )
    if name == "r2l" and config["r2l_nbest"] != 0:
        raise SettingsError(
            f"{upper}: R2L_NBEST decodes with an R2L model trained here: R2L_NBEST=0 with a model of your own"
        )
    config[setting] = _joined(kind, path, given)


def converted_generator(config: Mapping) -> Optional[Tuple[str, str]]:
    """(checkpoint, dictionary directory) of a GENERATOR=fairseq:CHECKPOINT, which the job
    converts to CTranslate2 once (``rerank nmt to-ct2``, into ``layout()["generator"]``);
    None for any other GENERATOR."""
    kind, _, rest = config["generator"].partition(":")
    if kind != "fairseq":
        return None
    path = rest.partition(",")[0]
    return path, model_options(config["generator"]).get("dict") or os.path.dirname(path)


def generator_spec(config: Mapping) -> str:
    """The model ``rerank generate`` runs for GENERATOR: as given (hf:, ct2:), or a fairseq
    checkpoint's CTranslate2 conversion with the settings given but ``dict=``
    (``ct2:OUT/generator.ct2,bpe=...``)."""
    if converted_generator(config) is None:
        return str(config["generator"])
    kept = {key: text for key, text in model_options(config["generator"]).items() if key != "dict"}
    return _joined("ct2", layout(config)["generator"], kept)


def own_scorer(config: Mapping, name: str) -> Optional[str]:
    """The ``--scorer`` of feature set ``name`` (:data:`OWN_MODEL_SETS`) when its model is one
    the user has (R2L_MODEL / CHANNEL_MODEL), else None: the user's spec with the set's
    ``direction=`` and ``name=``, and for an ``hf:``/``ct2:`` model without ``bpe=`` reading
    the prepared (Moses-tokenised) lists of a baseline trained here, ``detok=moses:TGT`` and
    ``source_detok=moses:SRC`` unless given."""
    setting, direction, column = OWN_MODEL_SETS[name]
    value = config.get(setting, "train")
    if value == "train":
        return None
    given = model_options(value)
    extra = {"direction": direction, "name": column}
    if config.get("generator", "train") == "train" and not value.startswith("fairseq:") and "bpe" not in given:
        extra.update(detok=f"moses:{config['tgt']}", source_detok=f"moses:{config['src']}")
    return ",".join([value] + [f"{key}={text}" for key, text in extra.items() if key not in given])


#: Multi30k's raw files of each split (DATA/task1/raw/NAME.LANG.gz)
MULTI30K_SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}


def raw_pairs(config: Mapping) -> Dict[str, List[str]]:
    """{"train"|"val"|"test": [source file, target file]}: the raw (untokenised) text of each
    split, what a GENERATOR of one's own reads and its scores compare with: TRAIN, VALID and
    TEST when given, else DATA's Multi30k files (``task1/raw/*.gz``) of SRC and TGT."""
    if config.get("train"):
        return {
            split: str(config[key]).split(",")
            for split, key in (("train", "train"), ("val", "valid"), ("test", "test"))
        }
    raw = os.path.join(config["data"], "task1", "raw")
    return {
        split: [os.path.join(raw, f"{name}.{config[lang]}.gz") for lang in ("src", "tgt")]
        for split, name in MULTI30K_SPLITS.items()
    }


def _count_lines(path: str) -> int:
    """Lines of a plain or .gz text file as rerank's readers split them (``rerank.textio``:
    UTF-8, a last line without its newline counted). A carriage return that does not end a
    line (``\\r`` before anything but ``\\n``) is refused: the readers split lines there
    too (universal newlines), so a pair with one on each side, at different lines, would count
    alike and pair the lines between with the wrong partners. SettingsError naming the line;
    OSError, EOFError or zlib.error for a file that cannot be read."""
    opener: Any = gzip.open if path.endswith(".gz") else open
    lines = 0
    with opener(path, "rb") as handle:
        for lines, raw in enumerate(handle, start=1):
            text = raw[:-1] if raw.endswith(b"\n") else raw
            if b"\r" in (text[:-1] if text.endswith(b"\r") else text):
                raise SettingsError(
                    f"{path}:{lines}: a carriage return inside the line, which rerank's readers take as a line "
                    "break: remove it (e.g. tr '\\r' ' ')"
                )
            try:
                (raw[3:] if lines == 1 and raw.startswith(b"\xef\xbb\xbf") else raw).decode("utf-8")
            except UnicodeDecodeError as error:
                raise SettingsError(f"{path}:{lines}: not UTF-8 text (byte {error.start + 1} of the line)") from None
    return lines


def _own_corpus(config: Dict) -> bool:
    """Whether TRAIN/VALID/TEST name a corpus of one's own; each pair made absolute and
    checked to exist (SettingsError: one missing, or one of them without the others; their
    lines: :func:`check_pairs`)."""
    given = [key for key in ("train", "valid", "test") if config.get(key)]
    if not given:
        return False
    if len(given) != 3:
        missing = next(key for key in ("train", "valid", "test") if key not in given)
        raise SettingsError(f"{missing.upper()}: a corpus of your own needs TRAIN, VALID and TEST (SRC_FILE,TGT_FILE)")
    for key in given:
        pair = [part.strip() for part in str(config[key]).split(",")]
        if len(pair) != 2 or not all(pair):
            raise SettingsError(f"{key.upper()}: '{config[key]}' is not SRC_FILE,TGT_FILE")
        pair = [os.path.normpath(os.path.join(ROOT, part)) for part in pair]
        for path in pair:
            if not os.path.isfile(path):
                raise SettingsError(f"{key.upper()}: no such file {path}")
        config[key] = ",".join(pair)
    return True


def check_pairs(config: Mapping) -> None:
    """Before any work: each TRAIN/VALID/TEST pair of a completed configuration is read once
    and must be line-aligned and not empty (SettingsError naming the setting and both files;
    also for a file that cannot be read). Not part of :func:`complete`, which the Snakefile
    runs in every job: this reads whole corpora, once per run (:func:`from_environment`, the
    Snakefile's ``onstart``)."""
    for key in ("train", "valid", "test"):
        if not config.get(key):
            continue
        pair = str(config[key]).split(",")
        try:
            same = os.path.samefile(pair[0], pair[1])
        except OSError:  # named below, when it is read
            same = False
        if same:
            raise SettingsError(
                f"{key.upper()}: {pair[0]} is given as both sides (the source and the target are two files)"
            )
        counts = []
        for path in pair:
            try:
                counts.append(_count_lines(path))
            except SettingsError as error:  # naming the file and line
                raise SettingsError(f"{key.upper()}: {error}") from None
            except (OSError, EOFError, zlib.error) as error:
                raise SettingsError(
                    f"{key.upper()}: cannot read {path}: {' '.join(str(error).split())[:160]}"
                ) from None
        if counts[0] != counts[1]:
            raise SettingsError(
                f"{key.upper()}: {pair[0]} has {counts[0]} lines but {pair[1]} {counts[1]}: not line-aligned"
            )
        if not counts[0]:
            raise SettingsError(f"{key.upper()}: {pair[0]} and {pair[1]} are empty")


def _check_languages_in_data(config: Mapping) -> None:
    """Raise SettingsError when DATA (a local copy) lacks task 1's files of SRC or TGT."""
    raw = os.path.join(config["data"], "task1", "raw")
    if not config["data"] or not os.path.isdir(raw):
        return  # downloaded, or refused by rerank nmt prepare
    for key in ("src", "tgt"):
        lang = config.get(key, "en" if key == "src" else "de")
        if not any(os.path.exists(os.path.join(raw, f"train.{lang}{ext}")) for ext in (".gz", "")):
            raise SettingsError(f"{key.upper()}: {config['data']} has no task1/raw/train.{lang}.gz (language {lang})")


#: what a run of this pipeline leaves in OUT (the lock, the settings, the prepared data, a
#: trained model — run_configs.sh links the main job's models into a new configuration's OUT)
RUN_MARKERS = (".snakemake", "settings.json", "data/prepare.json", "model.*/train.json", "models/*/train.json")


def check_out(out: str) -> None:
    """Raise SettingsError for an OUT the run's files must not go into: the repository itself,
    a directory inside it other than under ``out/``, one that holds the repository, something
    that is not a directory, or a non-empty directory that holds no run of this pipeline
    (none of :data:`RUN_MARKERS`): a run never mixes its files with a user's."""
    real, root = os.path.realpath(out), os.path.realpath(ROOT)
    runs = os.path.join(root, "out")
    if os.path.commonpath([real, root]) == real:
        raise SettingsError(f"OUT: {out} is the repository or holds it: give a directory under out/ or outside it")
    if os.path.commonpath([real, root]) == root and os.path.commonpath([real, runs]) != runs:
        raise SettingsError(f"OUT: {out} is inside the repository: give a directory under out/ or outside it")
    if real == runs:
        raise SettingsError(f"OUT: {out} holds every run: give one directory under it, e.g. out/my-run")
    if os.path.exists(real) and not os.path.isdir(real):
        raise SettingsError(f"OUT: {out} is not a directory")
    if (
        os.path.isdir(real)
        and os.listdir(real)
        and not any(glob.glob(os.path.join(glob.escape(real), m)) for m in RUN_MARKERS)
    ):
        raise SettingsError(
            f"OUT: {out} is a non-empty directory that holds no run of this pipeline (no settings.json): "
            "give a new or empty directory"
        )


def from_environment(environ: Mapping[str, str], schema: Optional[Dict] = None) -> Dict:
    """The configuration of ``run_pipeline.sh``: ``SYSTEM``'s file, then every setting that
    is set as an environment variable (its name in capitals), resolved and validated, the
    corpus' pairs checked line for line (:func:`check_pairs`)."""
    schema = schema or load_schema()
    system = environ.get("SYSTEM") or SYSTEMS[0]
    config = load_system(system)
    for name, spec in schema["properties"].items():
        if name == "system":
            continue
        text = environ.get(name.upper())
        if text is not None and text != "":
            config[name] = _parse(name, text, spec, schema)
        elif text == "" and name == "data":
            config[name] = ""
    config = complete(config, schema)
    check_pairs(config)
    return config


TABLES_SCHEMA_PATH = os.path.join(CONFIG_DIR, "tables.schema.yaml")
#: the settings of the tables' grid that name files or directories (made absolute, relative to the root)
TABLES_PATHS = ("out", "out_main", "data", "feats", "feat_split", "paper_table", "images", "image_names")


def load_tables_schema() -> Dict:
    """The JSON schema of the paper's tables' settings (``config/tables.schema.yaml``)."""
    with open(TABLES_SCHEMA_PATH, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


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
    config = {}
    for name, spec in schema["properties"].items():
        text = environ.get(name.upper())
        if text:
            config[name] = _parse(name, text, spec, schema)
    return tables_complete(config, schema)


def layout(config: Mapping) -> Dict[str, str]:
    """The run's directories (absolute): data, the baseline's model, n-best lists, tuning runs,
    re-ranking models (named by their settings: models/r2l.transformer-tiny, models/channel.small-own),
    the MLMME model."""
    out = config["out"]
    aux = config["aux_preset"] if config["aux_arch"] == "gru" else config["aux_arch"]
    return {
        "out": out,
        "data": f"{out}/data",
        "model": f"{out}/model" + ("" if config["arch"] == "gru" else f".{config['arch']}"),
        "nbest": f"{out}/nbest",
        "rerank": f"{out}/rerank",
        "models": f"{out}/models",
        "embed": f"{out}/embed",
        "r2l": f"{out}/models/r2l.{aux}",
        "channel": f"{out}/models/channel.{aux}" + ("-own" if config["channel_vocab"] == "own" else ""),
        "l2r2": f"{out}/models/l2r2",
        "lm": f"{out}/models/lm" + ("" if config["lm_arch"] == "lstm" else f".{config['lm_arch']}"),
        "generator": f"{out}/generator.ct2",  # a fairseq GENERATOR of one's own, converted
    }


def _train_args(config: Mapping, preset: str, save_dir: str, extra: str) -> str:
    """rerank nmt train's arguments for a model of ``preset`` (a GRU preset or a transformer
    architecture) in ``save_dir``: the run's shared settings, then the model's own (``extra``)."""
    arch = "gru"
    if preset.startswith("transformer-"):
        arch, preset = preset, "cpu"
    args = (
        f"--data-bin {config['out']}/data/bin --save-dir {save_dir} --arch {arch} --preset {preset} "
        f"--variant {config['variant']} --patience {config['patience']} --max-tokens {config['max_tokens']} "
        f"--lr {config['lr']} {extra}"
    )
    if arch != "gru":  # the GRU's Adam has no warm-up
        args += f" --warmup {config['warmup']}"
        if config["bf16_autocast"]:
            args += " --bf16-autocast"
    return args


def models(config: Mapping) -> Dict[str, str]:
    """{model directory: rerank nmt train's arguments} of every translation model this run
    trains (the baseline unless GENERATOR is a model of one's own, and the right-to-left,
    channel and second left-to-right models its feature sets need), in the order they are
    checked."""
    paths = layout(config)
    aux = config["aux_preset"] if config["aux_arch"] == "gru" else config["aux_arch"]
    seed = config["seed"]
    base = config["preset"] if config["arch"] == "gru" else config["arch"]
    every = {
        "baseline": (paths["model"], base, f"--max-epoch {config['max_epoch']} --seed {seed}"),
        "channel": (
            paths["channel"],
            aux,
            f"--direction backward --target-vocab {config['channel_vocab']} --max-epoch {config['aux_epoch']} "
            f"--patience 2 --seed {seed}",
        ),
        "r2l": (paths["r2l"], aux, f"--direction r2l --max-epoch {config['aux_epoch']} --patience 2 --seed {seed}"),
        "l2r2": (
            paths["l2r2"],
            config["preset"],
            f"--role L2R2 --max-epoch {config['l2r2_epoch']} --patience 2 --seed {seed + 1}",
        ),
    }
    return {
        directory: _train_args(config, preset, directory, extra)
        for name, (directory, preset, extra) in every.items()
        if (name == "baseline" and config.get("generator", "train") == "train")
        or (name in config["features"] and config.get(OWN_MODEL_SETS.get(name, ("",))[0], "train") == "train")
    }


def lm_args(config: Mapping) -> str:
    """rerank nmt train-lm's arguments of the target-side LM (its language: TGT, from the prepared data)."""
    paths = layout(config)
    return f"--prepared {paths['data']} --save-dir {paths['lm']} --max-epoch {config['lm_epoch']} --arch {config['lm_arch']}"


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


def _text(value) -> str:
    """A setting's value as settings.json and --settings write it."""
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value)


def recorded(config: Mapping) -> List[str]:
    """The ``KEY=VALUE`` lines of ``OUT/settings.json`` (``scripts/pipeline_settings.py``)."""
    return [f"{name.upper()}={_text(config[name])}" for name in RECORDED]


MAIN_HELP = """\
The main job: NMT on Multi30k en->de (or any pair of its languages, or a corpus of your own:
TRAIN, VALID, TEST) -> n-best lists -> re-ranking features from independently trained models
-> tuning on the validation set with MIRA and MERT (REPLICAS seeds each), one feature set at a
time and all together -> the re-ranked test set -> BLEU/METEOR/TER/chrF/length table with
significance (rerank report) -> the trained system in OUT/system (rerank translate).
Rules: workflow/Snakefile (Snakemake, --cores JOBS); settings: config/schema.yaml and
config/SYSTEM.yaml (generated help: workflow/settings.py).

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
            values.append(f"default {_text(spec['default']) or '(empty)'}")
            given = [f"{s} {_text(systems[s][name])}" for s in SYSTEMS if name in systems.get(s, {})]
            values.extend(given)  # a system that sets it (SYSTEM=tiny: REPLICAS=1)
        else:
            values.append(", ".join(f"{s} {_text(systems[s].get(name, ''))}" for s in SYSTEMS))
        body = f"{spec['description']} [{'; '.join(values)}; e.g. {name.upper()}={_text(spec['example'])}]"
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
            rows.append(f"| `{name.upper()}` | `{_text(spec['default']) or '(empty)'}` | {description} |")
        return "\n".join(rows)
    schema = schema or load_schema()
    systems = {name: load_system(name) for name in SYSTEMS}
    rows = ["| setting | " + " | ".join(SYSTEMS) + " | what it sets |", "|---|" + "---|" * len(SYSTEMS) + "---|"]
    for name, spec in schema["properties"].items():
        if name == "system":
            cells = [f"`{SYSTEMS[0]}` (default)"] + [f"`{s}`" for s in SYSTEMS[1:]]
        else:
            cells = [f"`{_text(systems[s].get(name, spec.get('default')))}`" for s in SYSTEMS]
        description = " ".join(spec["description"].split()).replace("|", "\\|")
        rows.append(f"| `{name.upper()}` | {' | '.join(cells)} | {description} |")
    return "\n".join(rows)


def main(argv: List[str]) -> int:
    tables = bool(argv) and argv[0] == "--tables"
    argv = argv[1:] if tables else argv
    verbs = ("help", "settings", "config", "table") + (() if tables else ("preflight",))
    if len(argv) != 1 or argv[0] not in verbs:
        print("usage: settings.py [--tables] help|settings|config|table|preflight", file=sys.stderr)
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
                print("\n".join(f"{name.upper()}={_text(value)}" for name, value in config.items()))
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
