"""The manifest of a system directory (``system.json``, :mod:`rerank.features.system`) and what
loading a system checks before any work — the trust boundary of a directory someone else
packed (``docs/security.md``): the manifest's own digest over every field, every file's
SHA-256, every path confined to the directory (symbolic links resolved), the decoder's
settings by type and range, and the rerank release that wrote it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

from rerank._version import __version__
from rerank.errors import InputError
from rerank.features.generate import GENERATORS
from rerank.features.sampling import Sampling
from rerank.features.spec_paths import candidate_paths, existing_files, scorer_settings
from rerank.nmt.generate import GenerateConfig
from rerank.nmt.subword import SUBWORD_FILES
from rerank.textio import file_digest as _sha256
from rerank.textio import read_json

#: the manifest of a system directory
MANIFEST = "system.json"
#: what a scorer's path inside a system directory starts with, replaced by the directory
#: when the system is loaded (so that the directory can move)
PLACEHOLDER = "@SYSTEM@"


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


def _confined_step(spec: Any, root: str, path: str, referenced: Optional[List[str]] = None) -> str:
    """A scorer ``spec`` of the manifest with :data:`PLACEHOLDER` replaced by ``root``, every
    path among its settings — nested specs parsed too (``mbr:comet:model=…``,
    :mod:`rerank.features.spec_paths`) — checked to stay inside the system directory;
    ``referenced`` collects the real paths inside the directory that the spec names.

    Raises:
        InputError: a spec that is not a string or names no scorer, a setting that is an
            absolute path or holds ``..``, a path setting that names an existing path outside
            the directory, :data:`PLACEHOLDER` other than as ``@SYSTEM@`` or ``@SYSTEM@/PATH``.
    """
    if not isinstance(spec, str):
        raise InputError(f"a step's scorer {spec!r} is not a scorer spec", path)
    for setting in scorer_settings(spec):
        what = f"scorer {setting.owner}'s {setting.field}"
        for part in candidate_paths(setting.value):
            if part == setting.value and part.partition(":")[2].startswith(PLACEHOLDER):
                continue  # KIND:@SYSTEM@/FILE (bpe=subword-nmt:…): its part after KIND: is checked
            rest = part[len(PLACEHOLDER) :] if part.startswith(PLACEHOLDER) else None
            if PLACEHOLDER in part and (rest is None or (rest and not rest.startswith("/"))):
                raise InputError(
                    f"{what} {part[:200]}: {PLACEHOLDER} stands for the system directory only as {PLACEHOLDER} "
                    f"or {PLACEHOLDER}/PATH: refused",
                    path,
                )
            if rest is not None:
                full = _inside(root, rest.lstrip("/") or ".", path, what)
                if referenced is not None:
                    referenced.append(full)
            elif os.path.isabs(part) or ".." in part.split("/") or (setting.path and os.path.exists(part)):
                raise InputError(f"{what} {part[:200]} is a path outside the system directory: refused", path)
    return spec.replace(PLACEHOLDER, os.path.abspath(root))


def _converted_scorers(
    scorers: Any, steps: List[List[str]], root: str, path: str, referenced: List[str]
) -> List[List[Any]]:
    """The manifest's ``decoder.ct2.scorers`` (``pack-system --ct2``): ``[step, position,
    spec]`` triples, each position a scorer of ``steps``, each spec a ``ct2:`` one confined to
    the system directory (:func:`_confined_step`) and resolved.

    Raises:
        InputError: not a list of such triples, a position outside the steps, a spec of
            another scorer, naming the manifest."""
    if not isinstance(scorers, list):
        raise InputError(f"the decoder's converted scorers {str(scorers)[:80]} are not a list", path)
    resolved: List[List[Any]] = []
    for entry in scorers:
        k, j, spec = entry if isinstance(entry, list) and len(entry) == 3 else (None, None, None)
        if not (isinstance(k, int) and isinstance(j, int) and 0 <= k < len(steps) and 0 <= j < len(steps[k])):
            raise InputError(f"the converted scorer {str(entry)[:80]} is not [step, position, spec] of a step", path)
        if not isinstance(spec, str) or not spec.startswith("ct2:"):
            raise InputError(f"the converted scorer {str(spec)[:80]} is not a ct2: spec", path)
        resolved.append([k, j, _confined_step(spec, root, path, referenced)])
    return resolved


def _check_referenced(root: str, referenced: List[str], files: Dict[str, Any], path: str) -> None:
    """Every file under a path the steps or the generator read is among the manifest's
    checksummed ``files``: a model file left out of the list could change unseen.

    Raises:
        InputError: naming the first file the manifest does not checksum.
    """
    real_root = os.path.realpath(root)
    for full in referenced:
        for name in existing_files(full):
            relative = os.path.relpath(os.path.realpath(name), real_root)
            if relative not in files:
                raise InputError(f"the system's file {relative} is read but not checksummed by the manifest", path)


#: the largest n-best size, beam, batch and output length a system may ask for: far beyond any
#: published setting (n-best lists of 1,024 samples, beams of 200), far below an allocation
#: that cannot succeed (10^9 of either was accepted, then died in torch)
MAX_DECODER_SIZE = 4096


#: the decoder settings a manifest may hold, with what each must be
_DECODER_CHECKS: Dict[str, Tuple[Callable[[Any], bool], str]] = {
    **{
        k: (
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_DECODER_SIZE,
            f"a positive integer up to {MAX_DECODER_SIZE}",
        )
        for k in ("nbest", "batch_size")
    },
    **{
        k: (
            lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= MAX_DECODER_SIZE,
            f"a non-negative integer up to {MAX_DECODER_SIZE}",
        )
        for k in ("beam", "max_len_b")
    },
    "max_len_a": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v <= 16,
        "a number in 0..16 (output tokens per source token)",
    ),
    "lenpen": (
        lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
        "a finite number",
    ),
    **{
        k: (
            lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,31}", v) is not None,
            "a language code such as en",
        )
        for k in ("src", "tgt")
    },
    "direction": (lambda v: v in ("forward", "r2l", "auto"), "forward, r2l or auto"),
    "lowercase": (lambda v: isinstance(v, bool), "true or false"),
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
            raise InputError(f"the decoder setting {key}={repr(config[key])[:40]} is not {what}", path)
    known = {f.name for f in dataclasses.fields(GenerateConfig)}
    return GenerateConfig(**{k: v for k, v in config.items() if k in known})


def _generator_settings(decoder: Dict[str, Any], root: str, path: str, referenced: List[str]) -> Dict[str, Any]:
    """A ``rerank generate`` decoder's settings, checked: the model spec (``hf:``/``ct2:``/``hf-lm:``,
    its paths confined to the system directory and resolved), the n-best size, beam,
    sampling and maximum length by type and range.

    Raises:
        InputError: naming the setting that is wrong.
    """
    model = decoder.get("model")
    if not isinstance(model, str) or model.partition(":")[0] not in GENERATORS:
        raise InputError(f"the generator model {model!r} is not a spec of {', '.join(GENERATORS)}", path)

    def count(key: str, optional: bool = False) -> Optional[int]:
        value = decoder.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_DECODER_SIZE:
            raise InputError(
                f"the generator setting {key}={repr(value)[:40]} is not a positive integer up to {MAX_DECODER_SIZE}",
                path,
            )
        return value

    sampling = decoder.get("sampling")
    if sampling is not None:
        Sampling.from_json(sampling, path)  # its settings in range (InputError naming the manifest)
    return {
        "model": _confined_step(model, root, path, referenced),
        "nbest": count("nbest"),
        "beam": count("beam", optional=True),
        "sampling": sampling,
        "max_length": count("max_length"),
    }


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
    if not all(isinstance(name, str) and isinstance(digest, str) for name, digest in files.items()):
        raise InputError("the manifest's files are not {name: checksum} strings", path)
    referenced: List[str] = []
    decoder = manifest.get("decoder")
    if isinstance(decoder, dict) and decoder.get("kind") == "generate":  # rerank generate's hf:/ct2:/hf-lm: model
        manifest["decoding"] = _generator_settings(decoder, system_dir, path, referenced)
        needed = []
    else:
        manifest["decoding"] = config = _decoder_config(manifest, path)
        subwords = [f"generator/{name}" for name in SUBWORD_FILES.values()]  # the one the generator was trained with
        needed = ["generator/checkpoint.pt", next((name for name in subwords if name in files), subwords[0])]
        needed += [f"generator/bin/dict.{lang}.txt" for lang in (config.src, config.tgt)]
        converted = decoder.get("ct2") if isinstance(decoder, dict) else None
        if converted is not None:  # pack-system --ct2: the generator converted to CTranslate2
            model = converted.get("model") if isinstance(converted, dict) else None
            quantization = converted.get("quantization") if isinstance(converted, dict) else None
            if not isinstance(model, str) or not isinstance(quantization, str):
                raise InputError(f"the decoder's ct2 entry {str(converted)[:80]} is not {{model, quantization}}", path)
            referenced.append(_inside(system_dir, model, path, "the CTranslate2 model"))
            needed.append(f"{model}/model.bin")
            manifest["ct2"] = {"model": model, "quantization": quantization}
            scorers = converted.get("scorers", [])
            if scorers:  # the converted scorers (rerank.features.system.scorer_steps): checked with the steps below
                manifest["ct2"]["scorers"] = scorers
    for name in needed:
        if name not in files:
            raise InputError(f"the manifest does not checksum {name}", path)
    if not isinstance(manifest.get("weights"), str) or manifest["weights"] not in files:
        raise InputError(f"the weights {repr(manifest.get('weights'))[:80]} are not among the checksummed files", path)
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
    manifest["steps"] = [[_confined_step(spec, system_dir, path, referenced) for spec in step] for step in steps]
    if "scorers" in manifest.get("ct2", {}):
        manifest["ct2"]["scorers"] = _converted_scorers(
            manifest["ct2"]["scorers"], manifest["steps"], system_dir, path, referenced
        )
    if check_files:
        _check_referenced(system_dir, referenced, files, path)
    return manifest
