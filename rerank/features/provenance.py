"""Where a list came from, and how its files travel: the provenance that every list's
signature records (``LIST.json``: the verb, its input, its settings), followed back from a
tuned list to the decoder run that started it (:func:`trace`), read where a job directory
moved (:class:`Relocation`, ``--relocate OLD=NEW``), and a scorer's files copied into a
system directory (:func:`relocate_spec`) — what ``rerank pack-system``
(:mod:`rerank.features.system`) is built on.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Any, Dict, List, Optional, Sequence, Tuple

from rerank.config import check_path_setting, parse_settings
from rerank.errors import InputError
from rerank.features.generate import GENERATORS
from rerank.features.manifest import PLACEHOLDER
from rerank.features.scorer import SCORERS, given_settings
from rerank.textio import file_digest, read_json


@dataclasses.dataclass(frozen=True)
class Relocation:
    """Where a job directory went after its run: every absolute path that a signature
    records under ``old`` is read under ``new`` instead (``rerank pack-system --relocate
    OLD=NEW``).  Signatures record absolute paths, so a list whose job directory moved (or
    was copied to another machine) leads back to paths that no longer exist.

    Args:
        pairs: ((old, new), …) absolute, normalised directories; the first ``old`` that
            contains a path applies.  Relative recorded paths are left as they are.
    """

    pairs: Tuple[Tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, values: Optional[Sequence[str]]) -> "Relocation":
        """From ``OLD=NEW`` strings.

        Raises:
            InputError: a value without ``=`` or with an empty side, a relative OLD, a NEW
                that is not an existing directory.
        """
        pairs = []
        for value in values or ():
            old, sep, new = value.partition("=")
            if not sep or not old or not new:
                raise InputError(f"--relocate {value!r}: expected OLD=NEW, e.g. /old/job=/new/job")
            if not os.path.isabs(old):
                raise InputError(f"--relocate {value!r}: OLD is an absolute path, as signatures record them")
            if not os.path.isdir(new):
                raise InputError(f"--relocate {value!r}: NEW is not an existing directory", new)
            pairs.append((os.path.normpath(old), os.path.abspath(new)))
        return cls(tuple(pairs))

    def __call__(self, path: str) -> str:
        """``path`` read under its new directory (``path`` itself outside every ``old``)."""
        if not os.path.isabs(path):
            return path
        path = os.path.normpath(path)
        for old, new in self.pairs:
            if path == old:
                return new
            if path.startswith(old.rstrip(os.sep) + os.sep):
                return os.path.join(new, os.path.relpath(path, old))
        return path


def _moved_hint(recorded: str, beside: str) -> str:
    """`` (… give --relocate OLD=NEW)`` that would find the missing ``recorded`` path, guessed
    from a file ``beside`` that exists (the signature that recorded it): the directories of
    the two, less every trailing directory they share (the directory that moved); '' when
    that guess does not find the file."""
    old, new = os.path.dirname(os.path.normpath(recorded)), os.path.dirname(os.path.abspath(beside))
    while os.path.basename(old) and os.path.basename(old) == os.path.basename(new):
        old, new = os.path.dirname(old), os.path.dirname(new)
    if old == new or not os.path.exists(Relocation(((old, new),))(recorded)):
        return ""
    return f" (the job directory moved? give --relocate {old}={new})"


def _recorded(path: str, relocation: "Relocation", side: str, what: str, base: Any = None) -> str:
    """The recorded ``path`` of ``what`` (relative: read from ``base``, the working directory
    the signature records; then relocated), checked to exist.

    Raises:
        InputError: it does not exist, naming the signature ``side`` that records it and,
            where a move explains it, the ``--relocate`` that would find it.
    """
    path = anchored(path, base)
    moved = relocation(path)
    if os.path.exists(moved):
        return moved
    shown = path if moved == path else f"{path} (relocated: {moved})"
    hint = _moved_hint(path, side) if moved == path else ""
    raise InputError(f"{what} {shown} does not exist{hint}", side)


def anchored(path: str, base: Any) -> str:
    """A recorded ``path`` read from the working directory ``base`` its signature records (a
    relative path as given on the command line; absolute ones, and records older than ``cwd``,
    as they are)."""
    if isinstance(base, str) and os.path.isabs(base) and not os.path.isabs(path):
        return os.path.normpath(os.path.join(base, path))
    return path


def anchored_spec(spec: str, base: Any) -> str:
    """``spec`` with every relative path setting its Config declares (``len:src=train.en``,
    ``bpe=subword-nmt:codes``) read from ``base``, the working directory of the run that
    recorded it (:func:`anchored`), where the path exists there; other settings as they are."""
    name, _, arg = spec.partition(":")
    cls = SCORERS.get(name)
    if cls.Config is None or not isinstance(base, str):
        return spec
    config = parse_settings(cls.Config, arg, spec, {})
    changed = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if not f.metadata.get("path") or not isinstance(value, str) or not value or os.path.isabs(value):
            continue
        kind, sep, rest = value.partition(":")
        if os.path.exists(anchored(value, base)):
            changed[f.name] = anchored(value, base)
        elif sep and rest and not os.path.isabs(rest) and os.path.exists(anchored(rest, base)):
            changed[f.name] = kind + sep + anchored(rest, base)
    return f"{name}:{given_settings(dataclasses.replace(config, **changed))[2]}" if changed else spec


def trace(nbest_path: str, relocation: Optional[Relocation] = None) -> Tuple[Dict[str, Any], List[List[str]]]:
    """(the decoder run's signature record, the scorer specs of every ``features add``
    step in order) of the list ``nbest_path``, from the signatures along its provenance.
    ``relocation``: where the job directory went (:class:`Relocation`); the record's
    ``checkpoint`` and ``data_bin`` and each step's input are returned relocated, the
    scorer specs as recorded.

    Raises:
        InputError: a list without a signature, a recorded input that does not exist (with
            the ``--relocate`` that finds it where the job directory moved), a step no
            system can replay (a union of lists, image features, folds), or provenance that
            does not reach a decoder run of ``rerank nmt nbest``, naming the signature where
            it stops.
    """
    relocation = relocation or Relocation()
    steps: List[List[str]] = []
    path = nbest_path
    seen = set()
    while True:
        side = path + ".json"
        if not os.path.isfile(side):
            raise InputError("no signature beside the list: its provenance is unknown", path)
        if os.path.abspath(side) in seen:
            raise InputError("the list's provenance loops", side)
        seen.add(os.path.abspath(side))
        record = read_json(side)
        if not isinstance(record, dict):
            raise InputError("not a list signature", side)
        if "scorers" in record:
            for key, what in (("images", "image features"), ("folds", "folds")):
                if record.get(key):
                    raise InputError(f"a step scored with {what}: a system cannot replay it on new text", side)
            if record.get("beam"):
                raise InputError("a step declared a beam feature (a rescored union): not replayable yet", side)
            base = record.get("cwd")
            steps.insert(0, [anchored_spec(spec, base) for spec in record["scorers"]])
            recorded = record.get("input")
            shards = record.get("merged_from")
            if recorded is None and isinstance(shards, list) and shards and isinstance(shards[0], str):
                # shards joined by rerank merge: they share the input list, which each records
                first = _recorded(shards[0], relocation, side, "its first shard", base)
                side = first + ".json"
                shard = read_json(side) if os.path.isfile(side) else None
                recorded = shard.get("input") if isinstance(shard, dict) else None
                base = shard.get("cwd") if isinstance(shard, dict) else None
            if not isinstance(recorded, str):
                raise InputError("the signature names no input list", side)
            path = _recorded(recorded, relocation, side, "its input list", base)
            continue
        if is_generated(record):  # rerank generate: an hf:, ct2: or hf-lm: model, read from its run's directory
            return {**record, "model": anchored_spec(record["model"], record.get("cwd"))}, steps
        if "checkpoint" in record and isinstance(record.get("config"), dict):
            record = dict(record)
            if isinstance(record.get("checkpoint"), str):
                checkpoint = record["checkpoint"]
                record["checkpoint"] = _recorded(
                    checkpoint, relocation, side, "the decoder's checkpoint", record.get("cwd")
                )
            if isinstance(record.get("data_bin"), str):  # checked by pack_system (--data-bin may replace it)
                record["data_bin"] = relocation(anchored(record["data_bin"], record.get("cwd")))
            return record, steps
        what = "a union of lists" if "inputs" in record else "no decoder run"
        raise InputError(
            f"the list's provenance stops at {what}: a system starts from rerank nmt nbest or rerank generate", side
        )


def is_generated(record: Dict[str, Any]) -> bool:
    """Whether a signature record is ``rerank generate``'s (an n-best list of one of its
    :data:`~rerank.features.generate.GENERATORS`: an ``hf:``, ``ct2:`` or ``hf-lm:`` model)."""
    model = record.get("model")
    return isinstance(model, str) and model.partition(":")[0] in GENERATORS and "nbest" in record


def check_model_files(generation: Dict[str, Any], relocation: Relocation) -> None:
    """Refuse to pack a ``rerank generate`` model whose one-file settings (its prompt template)
    changed since the list was generated: their SHA-256 now against the signature's
    ``model_files`` (read where ``relocation`` moved them).

    Raises:
        InputError: a recorded file that is missing or differs, naming the setting and the list's
            signature's digest."""
    recorded = generation.get("model_files") or {}
    if not isinstance(recorded, dict):
        raise InputError("the list's signature: model_files is not a {setting: digest} record")
    name, _, arg = str(generation["model"]).partition(":")
    config_class = SCORERS.get(name).Config
    if config_class is None:
        return
    config = parse_settings(config_class, arg, generation["model"], {})
    for field, digest in recorded.items():
        path = relocation(str(getattr(config, field, "") or ""))
        if not os.path.isfile(path):
            raise InputError(f"the generator's {field} is missing (the list was generated with it)", path)
        if file_digest(path) != digest:
            raise InputError(
                f"the generator's {field} changed after the list was generated (sha256 {digest[:12]}… recorded): "
                "generate and tune again, or restore it",
                path,
            )


def copy_path(source: str, target: str) -> None:
    """Copy the file or directory ``source`` to ``target``, its parent directories made.

    Raises:
        InputError: ``target`` inside the directory ``source`` (a system packed into the folder
            of a model it copies would copy itself until the disk fills)."""
    inside = os.path.realpath(source)
    if os.path.isdir(source) and os.path.commonpath([inside, os.path.realpath(target)]) == inside:
        raise InputError(
            "the output is being written inside this directory, which it copies: write it elsewhere", source
        )
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def relocate_spec(
    spec: str, index: int, out_dir: str, relocation: Optional[Relocation] = None, folder: str = "models"
) -> str:
    """``spec`` with every path among its settings copied into ``out_dir/FOLDER/`` and
    replaced by its :data:`PLACEHOLDER` path (a value that names an existing file or
    directory, or ``KIND:PATH`` such as ``bpe=subword-nmt:codes``), read where
    ``relocation`` moved it; or, for a scorer whose :meth:`~rerank.features.scorer.Scorer.pack`
    writes what it needs (IBM Model 1's tables), the settings it returns."""
    name, _, arg = spec.partition(":")
    cls = SCORERS.get(name)
    if cls.Config is None:
        return spec
    config = parse_settings(cls.Config, arg, spec, {})
    local = _local_paths(name, config, relocation or Relocation())
    target = os.path.abspath(os.path.join(out_dir, folder, f"{index}-{name}"))
    packed = cls.pack(dataclasses.replace(config, **{k: p + path for k, (p, path) in local.items()}), target)
    if packed is not None:
        root = os.path.abspath(target)
        changed = {}
        for f in dataclasses.fields(packed):
            value = getattr(packed, f.name)
            if not isinstance(value, str):
                continue
            kind, sep, rest = value.partition(":")  # a path, or KIND:PATH (bpe=subword-nmt:codes)
            for prefix, path in [("", value)] + ([(kind + sep, rest)] if sep else []):
                if os.path.isabs(path) and os.path.commonpath([root, os.path.abspath(path)]) == root:
                    changed[f.name] = prefix + os.path.join(PLACEHOLDER, os.path.relpath(path, out_dir))
                    break
        return f"{name}:{given_settings(dataclasses.replace(packed, **changed))[2]}"
    changed = {}
    for key, (prefix, path) in local.items():
        relative = os.path.join(folder, f"{index}-{name}-{key}", os.path.basename(os.path.normpath(path)))
        copy_path(path, os.path.join(out_dir, relative))
        changed[key] = prefix + os.path.join(PLACEHOLDER, relative)
    if not changed:
        return spec
    return f"{name}:{given_settings(dataclasses.replace(config, **changed))[2]}"


def _local_paths(name: str, config: Any, relocation: Relocation) -> Dict[str, Tuple[str, str]]:
    """{setting: (prefix, path)} of a scorer's path settings (declared by its Config,
    :func:`rerank.config.option`) that name an existing file or directory where ``relocation``
    puts it (a value ``KIND:PATH`` such as ``bpe=subword-nmt:codes`` gives prefix ``KIND:``, any
    other prefix ``""``), each checked by its reader's rule
    (:func:`rerank.config.check_path_setting`): what a packed system may carry.

    Raises:
        InputError: a path its reader's rule refuses (a directory as a prompt template, a model
            directory without its marker file);
        InputError: an absolute path that does not exist (the job directory moved: the
            message names ``--relocate``).
    """
    found = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if not isinstance(value, str) or not value or not f.metadata.get("path"):
            continue  # only a setting its Config declares a path is ever copied
        kind, sep, rest = value.partition(":")
        if sep and os.path.isabs(rest) and not os.path.isabs(value):
            value, rest = kind + sep + relocation(rest), relocation(rest)
        else:
            value = relocation(value)
        path, prefix = (rest, kind + sep) if sep and os.path.exists(rest) and not os.path.exists(value) else (value, "")
        if not os.path.exists(path):
            for missing in (value, rest if sep else ""):
                if os.path.isabs(missing):  # a path, not a name: the scorer would not find it
                    raise InputError(
                        f"scorer {name}: its {f.name} {missing} does not exist "
                        "(the job directory moved? give --relocate OLD=NEW)"
                    )
            continue
        check_path_setting(f"scorer {name}", f, path)
        found[f.name] = (prefix, path)
    return found
