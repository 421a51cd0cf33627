"""A trained re-ranking system in one directory, and translation with it in one command.

:func:`pack_system` follows the provenance that every list's signature records
(``LIST.json``: which verb made it, from which input, with which settings) from a tuned list
back to the decoder run that started it:

    rerank nmt nbest  →  features add (scorers …)  →  features add (…)  →  the tuned list

and writes ``DIR/`` with everything a translation needs, copied so that the directory can
move: the generator (checkpoint, ``train.json``, the data dictionaries, the BPE codes:
``generator/``), every file or directory a scorer reads (``models/``; the scorer chain kept
exactly as tuned — names, options, order — with its paths pointing into ``DIR``), the
weights, and ``system.json``: the steps, the decoder settings, rerank's version and the
SHA-256 of every file.

:func:`translate` checks that manifest (every file present and unchanged, the same rerank
release), then decodes raw text with the model's own preprocessing
(:func:`rerank.nmt.generate.generate_nbest_from_text`), adds the scorer chain's columns
(:func:`rerank.features.add.add_features`), applies the weights
(:func:`rerank.reranking.apply_file`) and writes the re-ranked 1-best, detokenised with
Moses' detokeniser (lowercasing cannot be undone; ``tokenized=True`` keeps the tokenised
text the weights were tuned and evaluated on).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from rerank._version import __version__
from rerank.config import parse_settings
from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.features.add import ScoringInputs, add_features
from rerank.features.scorer import SCORERS, given_settings
from rerank.nmt.checkpoints import check_checkpoint
from rerank.nmt.generate import GenerateConfig, generate_nbest_from_text
from rerank.outputs import StagedOutputs, atomic_write
from rerank.reranking import apply_file
from rerank.signature import signature
from rerank.textio import file_digest as _sha256
from rerank.textio import read_json, read_lines
from rerank.tuning.weights import read_weights

#: the manifest of a system directory
MANIFEST = "system.json"
#: what a scorer's path inside a system directory starts with, replaced by the directory
#: when the system is loaded (so that the directory can move)
PLACEHOLDER = "@SYSTEM@"


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


def _recorded(path: str, relocation: "Relocation", side: str, what: str) -> str:
    """The recorded ``path`` of ``what`` (relocated), checked to exist.

    Raises:
        InputError: it does not exist, naming the signature ``side`` that records it and,
            where a move explains it, the ``--relocate`` that would find it.
    """
    moved = relocation(path)
    if os.path.exists(moved):
        return moved
    shown = path if moved == path else f"{path} (relocated: {moved})"
    hint = _moved_hint(path, side) if moved == path else ""
    raise InputError(f"{what} {shown} does not exist{hint}", side)


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
            steps.insert(0, list(record["scorers"]))
            recorded = record.get("input")
            if not isinstance(recorded, str):
                raise InputError("the signature names no input list", side)
            path = _recorded(recorded, relocation, side, "its input list")
            continue
        if "checkpoint" in record and isinstance(record.get("config"), dict):
            record = dict(record)
            if isinstance(record.get("checkpoint"), str):
                record["checkpoint"] = _recorded(record["checkpoint"], relocation, side, "the decoder's checkpoint")
            if isinstance(record.get("data_bin"), str):  # checked by pack_system (--data-bin may replace it)
                record["data_bin"] = relocation(record["data_bin"])
            return record, steps
        what = "a union of lists" if "inputs" in record else "no rerank nmt nbest run"
        raise InputError(f"the list's provenance stops at {what}: a system starts from rerank nmt nbest", side)


def _copy(source: str, target: str) -> None:
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if os.path.isdir(source):
        shutil.copytree(source, target)
    else:
        shutil.copy2(source, target)


def _relocate(spec: str, index: int, out_dir: str, relocation: Optional[Relocation] = None) -> str:
    """``spec`` with every path among its settings copied into ``out_dir/models/`` and
    replaced by its :data:`PLACEHOLDER` path (a value that names an existing file or
    directory, or ``KIND:PATH`` such as ``bpe=subword-nmt:codes``), read where
    ``relocation`` moved it."""
    name, _, arg = spec.partition(":")
    cls = SCORERS.get(name)
    if cls.Config is None:
        return spec
    config = parse_settings(cls.Config, arg, spec, {})
    relocation = relocation or Relocation()
    changed = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if not isinstance(value, str) or not value:
            continue
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
        relative = os.path.join("models", f"{index}-{name}-{f.name}", os.path.basename(os.path.normpath(path)))
        _copy(path, os.path.join(out_dir, relative))
        changed[f.name] = prefix + os.path.join(PLACEHOLDER, relative)
    if not changed:
        return spec
    config = dataclasses.replace(config, **changed)
    return f"{name}:{given_settings(config)[2]}"


def pack_system(
    nbest_path: str,
    weights_path: Union[str, Sequence[str]],
    out_dir: str,
    data_bin: Optional[str] = None,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    relocation: Optional[Relocation] = None,
) -> Dict[str, Any]:
    """Write the system directory ``out_dir`` of the tuned list ``nbest_path`` and its
    weights (module docstring); of several weights files (optimiser replicas), the one
    whose record has the best tuning score (``tuning.score``, the metric's direction).
    ``data_bin``: the decoder's binarised data directory (``rerank nmt prepare``'s ``bin/``)
    where the decoder run did not record it.  ``relocation``: where the job directory went
    after its run (:class:`Relocation`), for every path the signatures record.  Returns
    the manifest.

    Raises:
        InputError: a provenance :func:`trace` refuses, weights that do not name the list's
            columns, a missing decoder file or scorer path, an ``out_dir`` that exists and
            is not empty.
    """
    relocation = relocation or Relocation()
    generation, steps = trace(nbest_path, relocation)
    candidates = [weights_path] if isinstance(weights_path, str) else list(weights_path)
    weights_path, scores = _best_replica(candidates)
    weights = read_weights(weights_path)
    data_bin = data_bin or generation.get("data_bin")
    if not data_bin:
        raise InputError("the decoder run records no data directory: give --data-bin (rerank nmt prepare's bin/)")
    checkpoint = generation["checkpoint"]
    config = generation["config"]
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    needed = {
        "checkpoint": checkpoint,
        "dict.src": os.path.join(data_bin, f"dict.{src}.txt"),
        "dict.tgt": os.path.join(data_bin, f"dict.{tgt}.txt"),
        "bpe.codes": os.path.join(os.path.dirname(os.path.abspath(data_bin)), "bpe.codes"),
    }
    for what, path in needed.items():
        if not os.path.isfile(path):
            raise InputError(f"the decoder's {what} is missing", path)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise InputError("exists and is not an empty directory: a system is written into a new one", out_dir)
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".system.", dir=parent)  # the directory appears whole or not at all
    try:
        generator = os.path.join(tmp, "generator")
        _copy(checkpoint, os.path.join(generator, "checkpoint.pt"))
        train_json = os.path.join(os.path.dirname(checkpoint), "train.json")
        if os.path.isfile(train_json):
            _copy(train_json, os.path.join(generator, "train.json"))
        _copy(needed["dict.src"], os.path.join(generator, "bin", f"dict.{src}.txt"))
        _copy(needed["dict.tgt"], os.path.join(generator, "bin", f"dict.{tgt}.txt"))
        _copy(needed["bpe.codes"], os.path.join(generator, "bpe.codes"))
        chain = [
            [_relocate(spec, 10 * k + j, tmp, relocation) for j, spec in enumerate(step)]
            for k, step in enumerate(steps)
        ]
        _copy(weights_path, os.path.join(tmp, "weights.json"))
        files = {}
        for folder, _, names in os.walk(tmp):
            for name in sorted(names):
                path = os.path.join(folder, name)
                files[os.path.relpath(path, tmp)] = _sha256(path)
        manifest = {
            "rerank": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "decoder": {"config": config, "direction": generation.get("direction", "forward")},
            "steps": chain,
            "weights": "weights.json",
            "weights_from": {"chosen": os.path.abspath(weights_path), "candidates": scores},
            "columns": list(weights),
            "tuned_on": os.path.abspath(nbest_path),
            "relocated": [{"old": old, "new": new} for old, new in relocation.pairs],
            "files": dict(sorted(files.items())),
            "signature": signature(["torch", "fairseq-fixed", "sacremoses", "subword-nmt"]),
        }
        manifest["digest"] = manifest_digest(manifest)
        with atomic_write(os.path.join(tmp, MANIFEST)) as out:
            json.dump(manifest, out, indent=2)
            out.write("\n")
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    say(f"system: {len(files)} files, {sum(len(s) for s in chain)} scorers in {len(chain)} steps -> {out_dir}")
    say(f"system digest {manifest['digest']} (translate --system-digest checks a copy against it)")
    return manifest


def _best_replica(paths: Sequence[str]) -> Tuple[str, Dict[str, Optional[float]]]:
    """(the weights file of the best tuning score, {path: score}); one file is itself.

    Raises:
        InputError: several files of which one records no tuning score.
    """
    scores: Dict[str, Optional[float]] = {}
    lower_is_better = False
    for path in paths:
        record = read_json(path)
        tuning = record.get("tuning", {}) if isinstance(record, dict) else {}
        score = tuning.get("score") if isinstance(tuning, dict) else None
        if len(paths) > 1 and not isinstance(score, (int, float)):
            raise InputError("records no tuning score (tuning.score): cannot choose among replicas", path)
        metric = str(tuning.get("metric", ""))
        lower_is_better = lower_is_better or metric == "ter" or metric.endswith(":lower")
        scores[os.path.abspath(path)] = score
    if len(paths) == 1:
        return paths[0], scores
    pick = (min if lower_is_better else max)(
        range(len(paths)), key=lambda k: float(scores[os.path.abspath(paths[k])] or 0.0)
    )  # every score is a number here (checked above)
    return paths[pick], scores


def manifest_digest(manifest: Dict[str, Any]) -> str:
    """``sha256:HEX`` of every field of ``manifest`` but ``digest`` (canonical JSON: sorted
    keys, no spaces): edits to the steps, the weights' path or the decoder settings change it."""
    body = {k: v for k, v in manifest.items() if k != "digest"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return "sha256:" + hashlib.sha256(text.encode("ascii")).hexdigest()


def _inside(root: str, name: Any, path: str, what: str) -> str:
    """The real path of ``name`` (relative to the system directory ``root``), checked to stay in it.

    Raises:
        InputError: not a relative path, or one that leaves ``root`` (``..``, a symbolic link
            pointing out), naming the manifest ``path``.
    """
    if not isinstance(name, str) or not name or os.path.isabs(name) or "\0" in name:
        raise InputError(f"{what} {name!r} is not a path relative to the system directory", path)
    real_root = os.path.realpath(root)
    full = os.path.realpath(os.path.join(real_root, name))
    if os.path.commonpath([real_root, full]) != real_root:
        raise InputError(f"{what} {name} points outside the system directory: refused", path)
    return full


def _confined_step(spec: Any, root: str, path: str) -> str:
    """A scorer ``spec`` of the manifest with :data:`PLACEHOLDER` replaced by ``root``, every
    path among its settings checked to stay inside the system directory.

    Raises:
        InputError: a spec that is not a string or names no scorer, a setting that is an
            absolute path, holds ``..`` or names an existing path outside the directory.
    """
    if not isinstance(spec, str):
        raise InputError(f"a step's scorer {spec!r} is not a scorer spec", path)
    name, _, arg = spec.partition(":")
    cls = SCORERS.get(name)
    if cls.Config is not None:
        config = parse_settings(cls.Config, arg, spec, {})
        for f in dataclasses.fields(config):
            value = getattr(config, f.name)
            if not isinstance(value, str) or not value:
                continue
            for part in {value, value.partition(":")[2]} - {""}:
                if part.startswith(PLACEHOLDER):
                    _inside(root, part[len(PLACEHOLDER) :].lstrip("/") or ".", path, f"scorer {name}'s {f.name}")
                elif os.path.isabs(part) or ".." in part.split("/") or os.path.exists(part):
                    raise InputError(
                        f"scorer {name}'s {f.name} {part} is a path outside the system directory: refused", path
                    )
    return spec.replace(PLACEHOLDER, os.path.abspath(root))


#: the decoder settings a manifest may hold, with what each must be
_DECODER_CHECKS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    **{
        k: (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1, "a positive integer")
        for k in ("nbest", "batch_size")
    },
    **{
        k: (lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0, "a non-negative integer")
        for k in ("beam", "max_len_b")
    },
    **{
        k: (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v), "a finite number")
        for k in ("max_len_a", "lenpen")
    },
    **{
        k: (
            lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,31}", v) is not None,
            "a language code such as en",
        )
        for k in ("src", "tgt")
    },
    "direction": (lambda v: v in ("forward", "r2l", "auto"), "forward, r2l or auto"),
    **{k: (lambda v: isinstance(v, str), "a string") for k in ("device", "dtype")},
}


def _decoder_config(manifest: Dict[str, Any], path: str) -> "GenerateConfig":
    """The manifest's decoder settings as a :class:`GenerateConfig`, each checked by type
    and range (unknown keys are ignored: newer releases may add some).

    Raises:
        InputError: no settings, or one of the wrong type or range.
    """
    decoder = manifest.get("decoder")
    config = decoder.get("config") if isinstance(decoder, dict) else None
    if not isinstance(config, dict):
        raise InputError("the manifest has no decoder settings", path)
    for key, (check, what) in _DECODER_CHECKS.items():
        if key in config and not check(config[key]):
            raise InputError(f"the decoder setting {key}={config[key]!r} is not {what}", path)
    known = {f.name for f in dataclasses.fields(GenerateConfig)}
    return GenerateConfig(**{k: v for k, v in config.items() if k in known})


def load_system(system_dir: str, check_files: bool = True, expected_digest: Optional[str] = None) -> Dict[str, Any]:
    """The manifest of ``system_dir`` with its scorer paths resolved, after checking it:
    its own digest (:func:`manifest_digest`; ``expected_digest``, the one pack-system printed,
    pins a copy to it), the rerank release, every file's SHA-256, every path confined to
    the directory (symbolic links resolved), the decoder settings' types.  A system
    directory is trusted no further than this (``docs/security.md``).

    Raises:
        InputError: no manifest, another rerank release, a manifest edited since it was
            packed or other than ``expected_digest``, a file missing or changed (moved
            without its models, edited), a path leaving the directory, a bad setting,
            naming what is wrong.
    """
    path = os.path.join(system_dir, MANIFEST)
    if not os.path.isfile(path):
        raise InputError(f"not a system directory (no {MANIFEST}; rerank pack-system writes one)", system_dir)
    manifest = read_json(path)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        raise InputError("not a system manifest", path)
    made_by = str(manifest.get("rerank", "?"))
    if made_by.split(".")[:2] != __version__.split(".")[:2]:
        raise InputError(f"written by rerank {made_by}, this is {__version__}: pack the system again", path)
    if manifest.get("digest") != manifest_digest(manifest):
        raise InputError("the manifest changed since it was packed (its digest differs): pack the system again", path)
    if expected_digest is not None and manifest["digest"] != expected_digest:
        raise InputError(f"the system's digest is {manifest['digest']}, not the {expected_digest} expected", path)
    files = manifest["files"]
    manifest["generate"] = config = _decoder_config(manifest, path)
    needed = ["generator/checkpoint.pt", "generator/bpe.codes"]
    needed += [f"generator/bin/dict.{lang}.txt" for lang in (config.src, config.tgt)]
    for name in needed:
        if name not in files:
            raise InputError(f"the manifest does not checksum {name}", path)
    if manifest.get("weights") not in files:
        raise InputError(f"the weights {manifest.get('weights')!r} are not among the checksummed files", path)
    for name, digest in files.items():
        full = _inside(system_dir, name, path, "the file")
        if check_files:
            if not os.path.isfile(full):
                raise InputError(f"the system's file {name} is missing (a directory moved without its models?)", path)
            if _sha256(full) != digest:
                raise InputError(f"the system's file {name} changed since it was packed (its checksum differs)", path)
    steps = manifest.get("steps")
    if not isinstance(steps, list) or not all(isinstance(step, list) for step in steps):
        raise InputError("the manifest's steps are not lists of scorer specs", path)
    manifest["steps"] = [[_confined_step(spec, system_dir, path) for spec in step] for step in steps]
    return manifest


def translate(
    system_dir: str,
    input_path: str,
    out: str,
    nbest_out: Optional[str] = None,
    devices: Optional[DeviceSettings] = None,
    tokenized: bool = False,
    batch_size: Optional[int] = None,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    expected_digest: Optional[str] = None,
) -> Dict[str, Any]:
    """Translate raw source text (one sentence per line) with the system of ``system_dir``
    (module docstring) into ``out`` (and the scored n-best list into ``nbest_out``).
    Returns {"segments", "seconds", "sentences_per_second"}.  ``expected_digest``: the
    system digest pack-system printed (:func:`load_system`).

    Raises:
        InputError: a system :func:`load_system` refuses, an empty input line.
        UntrustedCheckpoint: a generator checkpoint naming classes beyond fairseq's own
            (:mod:`rerank.nmt.checkpoints`), unless trusted.
    """
    start = time.perf_counter()
    manifest = load_system(system_dir, expected_digest=expected_digest)
    generator = os.path.join(system_dir, "generator")
    check_checkpoint(os.path.join(generator, "checkpoint.pt"))  # before any work (docs/security.md)
    config = manifest["generate"]
    if devices is not None:
        config.device, config.dtype = devices.device, devices.dtype
    if batch_size:
        config.batch_size = batch_size
    with tempfile.TemporaryDirectory() as tmp:
        nbest = os.path.join(tmp, "nbest")
        source = os.path.join(tmp, "source")
        say(f"translate: decoding {input_path} ({config.nbest}-best, beam {config.beam or config.nbest})")
        generate_nbest_from_text(
            os.path.join(generator, "bin"),
            os.path.join(generator, "checkpoint.pt"),
            input_path,
            nbest,
            os.path.join(tmp, "1best"),
            source,
            config,
            quiet=True,  # a user translating sees rerank's lines, not fairseq's INFO log
        )
        for k, step in enumerate(manifest["steps"]):
            scored = os.path.join(tmp, f"step{k}")
            add_features(nbest, step, scored, ScoringInputs(source=source), say=lambda text: None, devices=devices)
            nbest = scored
        best = os.path.join(tmp, "best")
        segments = apply_file(nbest, os.path.join(system_dir, manifest["weights"]), best)
        lines = read_lines(best)
        if not tokenized:
            lines = detokenize(lines, config.tgt)
        with StagedOutputs() as outputs:  # the translation and the scored list appear together
            with outputs.open(out) as handle:
                handle.writelines(line + "\n" for line in lines)
            if nbest_out:
                shutil.copyfile(nbest, outputs.stage(nbest_out))
                side = outputs.signature(nbest_out)
                if side is not None:
                    shutil.copyfile(nbest + ".json", side)
    seconds = time.perf_counter() - start
    result = {"segments": segments, "seconds": round(seconds, 3), "sentences_per_second": segments / max(seconds, 1e-9)}
    say(f"translate: {segments} sentences in {seconds:.1f} s ({result['sentences_per_second']:.2f}/s) -> {out}")
    return result


def detokenize(lines: List[str], lang: str) -> List[str]:
    """Moses' detokeniser (sacremoses) of tokenised lines: the tokenisation of the project's
    text convention undone; lowercasing is not (it cannot be)."""
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split()) for line in lines]
