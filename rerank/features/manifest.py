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
from typing import Any, Callable, Dict, Optional, Tuple

from rerank._version import __version__
from rerank.config import parse_settings
from rerank.errors import InputError
from rerank.features.scorer import SCORERS
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
            raise InputError(f"the decoder setting {key}={config[key]!r} is not {what}", path)
    known = {f.name for f in dataclasses.fields(GenerateConfig)}
    return GenerateConfig(**{k: v for k, v in config.items() if k in known})


def _generator_settings(decoder: Dict[str, Any], root: str, path: str) -> Dict[str, Any]:
    """A ``rerank generate`` decoder's settings, checked: the model spec (``hf:``/``ct2:``,
    its paths confined to the system directory and resolved), the n-best size, beam,
    sampling and maximum length by type and range.

    Raises:
        InputError: naming the setting that is wrong.
    """
    model = decoder.get("model")
    if not isinstance(model, str) or model.partition(":")[0] not in ("hf", "ct2"):
        raise InputError(f"the generator model {model!r} is not an hf: or ct2: spec", path)

    def count(key: str, optional: bool = False) -> Optional[int]:
        value = decoder.get(key)
        if value is None and optional:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise InputError(f"the generator setting {key}={value!r} is not a positive integer", path)
        return value

    sampling = decoder.get("sampling")
    if sampling is not None:
        epsilon, seed = (sampling.get(k) for k in ("epsilon", "seed")) if isinstance(sampling, dict) else (None, None)
        if not isinstance(epsilon, float) or not 0 < epsilon < 1 or not isinstance(seed, int) or seed < 0:
            raise InputError(f"the generator's sampling {sampling!r} is not {{epsilon in (0, 1), seed ≥ 0}}", path)
    return {
        "model": _confined_step(model, root, path),
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
    decoder = manifest.get("decoder")
    if isinstance(decoder, dict) and decoder.get("kind") == "generate":  # rerank generate's hf:/ct2: model
        manifest["decoding"] = _generator_settings(decoder, system_dir, path)
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
                raise InputError(f"the decoder's ct2 entry {converted!r} is not {{model, quantization}}", path)
            _inside(system_dir, model, path, "the CTranslate2 model")
            needed.append(f"{model}/model.bin")
            manifest["ct2"] = {"model": model, "quantization": quantization}
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
