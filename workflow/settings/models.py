"""The models of a run: the directories it writes (:func:`layout`), the translation models it
trains and their ``rerank nmt train`` arguments (:func:`models`), the model settings of one's
own (``GENERATOR``, ``R2L_MODEL``, ``CHANNEL_MODEL``, ``QE_CHECKPOINT``: checked, paths made
absolute) and each feature set's scorers (:func:`feature_scorers`, from the feature sets'
table).  A model setting is a component spec, ``KIND:PATH[,KEY=VALUE...]``, split by the
library's grammar (:mod:`settings.library`)."""

import os
from typing import Dict, List, Mapping, Optional, Tuple

from . import library
from .base import ROOT, SettingsError
from .corpus import raw_pairs
from .feature_sets import FEATURE_SETS, OWN_MODEL_SETS, RAW_TEXT_SETS

#: what a model directory of each kind holds, and what it is called
MODEL_MARKERS = {"hf": ("config.json", "Hugging Face model"), "ct2": ("model.bin", "CTranslate2 model")}


def subword_spec(config: Mapping, directory: str) -> str:
    """A scorer's ``bpe=`` value for a model trained here, in ``directory``: the prepared
    corpus' subword step (``SUBWORD``) and its file there (``rerank nmt prepare``'s layout),
    e.g. ``subword-nmt:DIR/bpe.codes``."""
    library.require("the subword step's files")
    kind = config.get("subword", "subword-nmt")
    return f"{kind}:{directory}/{library.SUBWORD_FILES[kind]}"


def model_options(value: str) -> Dict[str, str]:
    """{key: value} of a model setting's options ``KIND:PATH,KEY=VALUE,...`` (as written)."""
    library.require("a model setting's options")
    return dict(item.partition("=")[::2] for item in library.split_spec(value)[1][1:])


def _joined(kind: str, path: str, given: Mapping[str, str]) -> str:
    """The model setting ``KIND:PATH[,KEY=VALUE...]`` of its parts."""
    return ",".join([f"{kind}:{path}"] + [f"{key}={text}" for key, text in given.items()])


def _absolute(path: str) -> str:
    return os.path.normpath(os.path.join(ROOT, path))


def split_model(setting: str, value: str) -> Tuple[str, str, Dict[str, str]]:
    """(kind, absolute path, {option: value}) of a model setting ``KIND:PATH[,KEY=VALUE...]``,
    every path from the project root made absolute (PATH, ``bpe=KIND:PATH``'s, ``dict=DIR``)
    and PATH checked: a directory holding :data:`MODEL_MARKERS`' file (hf, ct2) or a
    checkpoint file (fairseq). SettingsError: one line naming the setting."""
    kind, items = library.split_spec(value)
    if not items or value.partition(":")[2].lstrip().startswith(","):
        raise SettingsError(f"{setting.upper()}: '{value}' names no model: KIND:PATH[,KEY=VALUE...]")
    path = _absolute(items[0])
    given: Dict[str, str] = {}
    for option in items[1:]:
        key, sep, text = option.partition("=")
        if not sep:
            raise SettingsError(f"{setting.upper()}: '{option}' is not KEY=VALUE")
        kind_of, sep, rest = text.partition(":")
        if key == "bpe" and sep and rest:  # bpe=KIND:PATH: the path from the project root, as every path
            text = f"{kind_of}:{_absolute(rest)}"
        elif key == "dict" and text:
            text = _absolute(text)
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


def check_generator(config: Dict, own: bool) -> None:
    """GENERATOR=hf:DIR|ct2:DIR|fairseq:CHECKPOINT: its path made absolute and checked to hold
    a model (a Hugging Face config.json, a CTranslate2 model.bin, a checkpoint file with its
    dictionaries dict.SRC.txt and dict.TGT.txt and a bpe=), the feature sets and the val guard
    checked against what raw text allows, and raw text to read (TRAIN/VALID/TEST or a local
    DATA). SettingsError: one line naming the setting."""
    if library.HAVE_RERANK:
        kind, path, given = split_model("generator", config["generator"])
        if kind == "fairseq":
            if "bpe" not in given:
                raise SettingsError(
                    "GENERATOR: say how raw text becomes the fairseq model's subwords: bpe=sentencepiece:MODEL, "
                    "bpe=subword-nmt:CODES or bpe=none"
                )
            given["dict"] = _absolute(given.get("dict") or os.path.dirname(path))
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
    if not own and library.HAVE_RERANK:
        raw_pairs(config)  # DATA holds every split's raw text in SRC and TGT


def check_own_model(config: Dict, name: str) -> None:
    """R2L_MODEL / CHANNEL_MODEL (feature set ``name``): unless ``train``, the model checked
    (:func:`split_model`), its path made absolute, and the settings it needs: the feature set
    in FEATURES, ``bpe=`` where the scorer cannot tokenise by itself, no ``direction=`` or
    ``name=`` (the feature set's), no R2L_NBEST (lists of a model trained here).
    SettingsError: one line naming the setting."""
    setting, _, column = OWN_MODEL_SETS[name]
    value = config[setting]
    if value == "train":
        return
    upper = setting.upper()
    if library.HAVE_RERANK:  # else the path and options are checked by .venv's python, before any work
        kind, path, given = split_model(setting, value)
    if name not in config["features"]:
        raise SettingsError(f"{upper}: the {name} feature set is not in FEATURES: add it (FEATURES=...+{name})")
    if library.HAVE_RERANK:
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
    if library.HAVE_RERANK:
        config[setting] = _joined(kind, path, given)


def check_qe(config: Dict) -> None:
    """The qe feature set: without QE_CHECKPOINT it is dropped with one line on stderr (it is
    opt-in); with one, the directory is made absolute and checked to be a COMET checkpoint
    directory (the library's layout). SettingsError: one line naming the setting."""
    import sys

    if "qe" not in config["features"]:
        return
    if not config["qe_checkpoint"]:
        print(
            "run_pipeline: FEATURES: qe skipped: no QE_CHECKPOINT (a CometKiwi or COMET-QE checkpoint)", file=sys.stderr
        )
        config["features"] = [f for f in config["features"] if f != "qe"]
        return
    path = _absolute(config["qe_checkpoint"])
    if library.HAVE_RERANK:
        try:
            library.checkpoint_files(path)
        except library.InputError as error:
            raise SettingsError(f"QE_CHECKPOINT: {error}") from None
    config["qe_checkpoint"] = path


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


def converted_generator(config: Mapping) -> Optional[Tuple[str, str]]:
    """(checkpoint, dictionary directory) of a GENERATOR=fairseq:CHECKPOINT, which the job
    converts to CTranslate2 once (``rerank nmt to-ct2``, into ``layout()["generator"]``);
    None for any other GENERATOR."""
    library.require("GENERATOR's spec")
    kind, items = library.split_spec(config["generator"])
    if kind != "fairseq":
        return None
    return items[0], model_options(config["generator"]).get("dict") or os.path.dirname(items[0])


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


def feature_scorers(config: Mapping) -> Dict[str, Tuple[str, List[str], Optional[str]]]:
    """{feature set: (its name in ``rerank tune --feature-sets``, its ``--scorer`` specs, the
    file its rule waits for or None)} of every feature set (:mod:`settings.feature_sets`):
    the table's templates over the run's directories; with a GENERATOR of one's own the raw
    text's scorers (length and IBM Model 1 from the raw training pair, MBR's distribution from
    the generator's column: its ``name=``, else ``HF``/``CT2`` as ``rerank generate`` names
    it); a model of one's own (R2L_MODEL, CHANNEL_MODEL) as :func:`own_scorer` gives it."""
    paths = {**layout(config), "qe_checkpoint": config["qe_checkpoint"]}
    raw: Dict[str, str] = {}
    if config["generator"] != "train":
        generator = generator_spec(config)
        train_src, train_tgt = raw_pairs(config)["train"]
        column = model_options(generator).get("name") or library.split_spec(generator)[0].upper()
        raw = {"train_src": train_src, "train_tgt": train_tgt, "column": column}
    table: Dict[str, Tuple[str, List[str], Optional[str]]] = {}
    for row in FEATURE_SETS:
        if raw and row.raw_scorers:
            table[row.name] = (row.column, [s.format(**raw) for s in row.raw_scorers], None)
        else:
            needs = row.needs.format(**paths) if row.needs else None
            table[row.name] = (row.column, [s.format(**paths) for s in row.scorers], needs)
        spec = own_scorer(config, row.name) if row.name in OWN_MODEL_SETS else None
        if spec:
            table[row.name] = (row.column, [spec], None)
    return table
