"""The run's text and where it goes: the raw pairs of each split (:func:`raw_pairs`), a corpus
of one's own (TRAIN/VALID/TEST) checked to exist and to be line-aligned by the library's rule
(:func:`check_pairs`), DATA's languages, OUT (:func:`check_out`) and the characters the
rules' shell commands can carry (:func:`check_shell_safe`)."""

import glob
import os
import re
from typing import Dict, List, Mapping

from . import library
from .base import ROOT, SettingsError

#: the job's split -> ``rerank nmt prepare``'s (:data:`rerank.nmt.data.SPLITS`): the job
#: tunes on val and tests on test_2016_flickr
JOB_SPLITS = {"train": "train", "val": "val", "test": "test_2016_flickr"}
#: the settings naming a corpus of one's own, each SRC_FILE,TGT_FILE (the job's splits in order)
CORPUS_SETTINGS = ("train", "valid", "test")
#: the settings that are paths, or model specs holding paths (made absolute by settings.complete)
PATH_SETTINGS = ("out", "data", "train", "valid", "test", "generator", "r2l_model", "channel_model", "qe_checkpoint")
#: what no path may hold: whitespace, control characters and the shell's metacharacters break
#: the rules' commands, or extend them (``$(…)`` ran when the rule ran)
PATH_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f`$;&|<>()\\'\"*?\[\]{}!#~^]")
#: what no other text setting may hold: the rules quote them ('…'), so no quote, escape or control
QUOTED_UNSAFE = re.compile(r"[\x00-\x1f\x7f`$\\'\"]")
#: what a run of this pipeline leaves in OUT (the lock, the settings, the prepared data, a
#: trained model — run_configs.sh links the main job's models into a new configuration's OUT)
RUN_MARKERS = (".snakemake", "settings.json", "data/prepare.json", "model.*/train.json", "models/*/train.json")


def raw_pairs(config: Mapping) -> Dict[str, List[str]]:
    """{"train"|"val"|"test": [source file, target file]}: the raw (untokenised) text of each
    split, what a GENERATOR of one's own reads and its scores compare with: TRAIN, VALID and
    TEST when given, else DATA's Multi30k files (``task1/raw/*``, the library's
    :func:`rerank.nmt.data.raw_path`) of SRC and TGT. SettingsError: a file DATA lacks."""
    if config.get("train"):
        return {split: str(config[key]).split(",") for split, key in zip(JOB_SPLITS, CORPUS_SETTINGS)}
    library.require("Multi30k's raw files")
    pairs = {}
    for split, ours in JOB_SPLITS.items():
        try:
            pairs[split] = [
                library.raw_path(config["data"], library.SPLITS[ours][0], config[lang]) for lang in ("src", "tgt")
            ]
        except library.InputError as error:
            raise SettingsError(f"DATA: {error}") from None
    return pairs


def own_corpus(config: Dict) -> bool:
    """Whether TRAIN/VALID/TEST name a corpus of one's own; each pair made absolute and
    checked to exist (SettingsError: one missing, or one of them without the others; their
    lines: :func:`check_pairs`)."""
    given = [key for key in CORPUS_SETTINGS if config.get(key)]
    if not given:
        return False
    if len(given) != 3:
        missing = next(key for key in CORPUS_SETTINGS if key not in given)
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
    and must be line-aligned (the library's :func:`rerank.textio.count_lines`: UTF-8, no
    carriage return inside a line) and not empty; SettingsError naming the setting and the
    file (and line). Not part of :func:`settings.complete`, which the Snakefile runs in every
    job: this reads whole corpora, once per run. Skipped on a python without rerank
    (:mod:`settings.library`)."""
    if not library.HAVE_RERANK:
        return
    for key in CORPUS_SETTINGS:
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
        try:
            counts = [library.count_lines(path) for path in pair]
        except library.InputError as error:  # naming the file and line
            raise SettingsError(f"{key.upper()}: {error}") from None
        if counts[0] != counts[1]:
            raise SettingsError(
                f"{key.upper()}: {pair[0]} has {counts[0]} lines but {pair[1]} {counts[1]}: not line-aligned"
            )
        if not counts[0]:
            raise SettingsError(f"{key.upper()}: {pair[0]} and {pair[1]} are empty")


def check_languages_in_data(config: Mapping) -> None:
    """Raise SettingsError when DATA (a local copy) lacks task 1's training file of SRC or TGT
    (skipped on a python without rerank)."""
    if not config["data"] or not os.path.isdir(os.path.join(config["data"], "task1", "raw")):
        return  # downloaded, or refused by rerank nmt prepare
    if not library.HAVE_RERANK:
        return
    for key in ("src", "tgt"):
        lang = config.get(key, "en" if key == "src" else "de")
        try:
            library.raw_path(config["data"], library.SPLITS["train"][0], lang)
        except library.InputError:
            raise SettingsError(
                f"{key.upper()}: {config['data']} has no task1/raw/train.{lang}.gz (language {lang})"
            ) from None


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
