"""The settings of a scorer or metric spec that may name files, nested specs included: what
the output guard counts as a verb's inputs (:func:`spec_inputs`) and what a system
directory's confinement checks (:mod:`rerank.features.manifest`).

A spec is parsed by its component's own ``Config`` (:func:`rerank.config.parse_settings`), so
``mbr:comet:model=DIR`` yields the MBR scorer's ``utility`` — itself the metric spec
``comet:model=DIR`` — and that metric's ``model``; an interpolation (``0.5*bleu+0.5*comet:DIR``)
yields each of its terms.  Every non-empty string setting without fixed choices is yielded,
marked ``path`` where its Config declares that it names a file or directory the component
reads (:func:`rerank.config.option`'s ``path=True``); its value, and the part after ``KIND:``
(``bpe=subword-nmt:CODES``), are the candidate paths.  The output guard takes the declared
paths that exist (:func:`spec_inputs`); a system directory's confinement checks every
setting, the declared paths most strictly (:mod:`rerank.features.manifest`).
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterator, List, NamedTuple, Union

from rerank.config import parse_settings
from rerank.errors import InputError
from rerank.features.scorer import SCORERS
from rerank.metrics.base import METRICS
from rerank.metrics.spec import parse_terms, sacrebleu_names
from rerank.textio import file_digest

#: how deep specs may nest (``mbr:comet:…`` is 2); deeper is refused rather than followed
MAX_DEPTH = 4


class Setting(NamedTuple):
    """One string setting of a (nested) spec: the component's name, the field, its value, and
    whether the field names a file or directory the component reads (its rule,
    :func:`rerank.config.option`'s ``path``: True, ``"file"``, ``"dir:MARKER"``)."""

    owner: str
    field: str
    value: str
    path: Union[bool, str] = False


def _component_settings(registry, name: str, arg: str, spec: str, depth: int) -> Iterator[Setting]:
    cls = registry.get(name)
    config_class = getattr(cls, "Config", None)
    if config_class is None:
        return
    config = parse_settings(config_class, arg, spec, {})
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if not isinstance(value, str) or not value or f.metadata.get("choices"):
            continue
        nested = _nested_registry(value)
        if nested is not None:
            yield from _settings(nested, value, depth + 1)
        else:
            yield Setting(name, f.name, value, f.metadata.get("path") or False)


def _nested_registry(value: str):
    """The registry a setting's value is a spec of (``comet:DIR`` in ``mbr:``), or None."""
    head = re.match(r"([a-z][a-z0-9_-]*):", value)
    if head and head.group(1) in METRICS.names():
        return METRICS
    return None


def _settings(registry, spec: str, depth: int) -> Iterator[Setting]:
    if depth > MAX_DEPTH:
        raise InputError(f"{spec!r}: specs nested more than {MAX_DEPTH} deep")
    if registry is METRICS:
        text = sacrebleu_names(spec.strip())
        terms = [text] if re.fullmatch(r"[a-z0-9_]+(?::[^+*\s]*)?", text) else [n for _, n in parse_terms(text)]
        for term in terms:
            if term.startswith("seg:"):
                continue
            name, _, arg = term.partition(":")
            yield from _component_settings(METRICS, name, arg, term, depth)
        return
    name, _, arg = spec.partition(":")
    yield from _component_settings(SCORERS, name, arg, spec, depth)


def scorer_settings(spec: str) -> List[Setting]:
    """Every string setting of the scorer ``spec``, nested metric specs expanded.

    Raises:
        InputError: an unknown scorer or metric, a setting its Config refuses, specs nested
            deeper than :data:`MAX_DEPTH`.
    """
    return list(_settings(SCORERS, spec, 0))


def metric_settings(spec: str) -> List[Setting]:
    """Every string setting of the metric ``spec`` (an interpolation: of each term).

    Raises:
        InputError: as :func:`scorer_settings`.
    """
    return list(_settings(METRICS, spec, 0))


def candidate_paths(value: str) -> List[str]:
    """The paths a setting's value may name: itself, and the part after ``KIND:``
    (``subword-nmt:CODES``, ``moses:de``)."""
    return sorted({value, value.partition(":")[2]} - {""})


def existing_files(path: str, limit: int = 10000) -> List[str]:
    """``path`` itself for a file; for a directory every file under it (at most ``limit``,
    symbolic links not followed): what a model directory's reader may read."""
    if os.path.isfile(path):
        return [path]
    found: List[str] = []
    for folder, _, names in os.walk(path):
        found.extend(os.path.join(folder, name) for name in names)
        if len(found) >= limit:
            break
    return found[:limit]


def settings_inputs(settings: List[Setting]) -> List[str]:
    """The existing files the path ``settings`` name (a directory: the files under it)."""
    files: List[str] = []
    for setting in settings:
        if not setting.path:
            continue
        for path in candidate_paths(setting.value):
            if os.path.exists(path):
                files.extend(existing_files(path))
    return files


def file_digests(spec: str) -> Dict[str, str]:
    """``{setting: SHA-256 hex}`` of the one-file settings (``path="file"``) of the scorer
    ``spec`` that exist: what ``rerank generate`` records of its prompt template, and
    ``pack-system`` compares before it packs the template (a template edited after the list
    was generated is not the system that was tuned)."""
    return {
        s.field: file_digest(s.value) for s in scorer_settings(spec) if s.path == "file" and os.path.isfile(s.value)
    }


def spec_inputs(scorers: List[str], metrics: List[str]) -> List[str]:
    """Every existing file the scorer and metric specs name, for the output guard
    (:func:`rerank.output_guard.check_paths`): ``len:src=train.en`` reads ``train.en``,
    ``mbr:comet:DIR`` every file of ``DIR``.  A spec that does not parse adds nothing: the verb
    refuses it in its own words."""
    settings: List[Setting] = []
    for spec, parse in [(s, scorer_settings) for s in scorers] + [(m, metric_settings) for m in metrics]:
        try:
            settings.extend(parse(spec))
        except InputError:
            continue
    return settings_inputs(settings)
