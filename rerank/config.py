"""Component settings: one nested ``Config`` dataclass per component (after mbrs), from which
the command line's options and the ``NAME:key=value`` specs are generated.

A field is made with :func:`option` (its help text, an older spelling of its command-line flag
where it had one, and a parser that range-checks the value). :func:`parse_settings`
reads the ``key=value,key=value`` part of a spec such as ``chrf:word_order=2,beta=1`` into the
Config, and :func:`settings_help` writes the line the help texts show.
"""

from __future__ import annotations

import argparse
import dataclasses
import numbers
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from rerank.errors import InputError


def option(
    default: Any,
    help: str,
    alias: Optional[str] = None,
    type: Optional[Callable[[str], Any]] = None,
    choices: Optional[Sequence[str]] = None,
    positional: bool = False,
    path: Union[bool, str] = False,
    check: Optional[Callable[[str], Any]] = None,
) -> Any:
    """A ``Config`` field with its help text, an older spelling of its command-line flag
    (``alias``, still accepted with a one-line note; the tuners' flags are ``--TUNER-FIELD``),
    argument type (a parser that range-checks, e.g. :func:`rerank.argtypes.positive_int`;
    default: the field's own type, ``int``, ``float``, ``str`` or ``bool``), the values it
    may take (``choices``), whether a spec gives it first without its key
    (``positional``: ``mbr:bleu`` for ``utility=bleu``, ``len:DIR`` for ``corpus=DIR``), and
    whether its value names a file or directory the component reads (``path``: what the
    output guard protects and a system directory confines, :mod:`rerank.features.spec_paths`;
    ``KIND:FILE`` values such as ``bpe=subword-nmt:CODES`` name the part after the colon).  A
    path's reader's rule, which ``pack-system`` applies to whatever it copies
    (:func:`check_path_setting`): ``path=True`` a file or a directory, ``"file"`` one regular
    file, ``"dir:MARKER"`` a directory holding the file ``MARKER`` (``dir:config.json``: a
    ``save_pretrained`` directory); ``check``: the reader's own validation of the path (raises
    :class:`~rerank.errors.InputError`), e.g. the prompt template's ``read_prompt``."""
    metadata = {"help": help, "alias": alias, "type": type, "choices": tuple(choices) if choices else None}
    return dataclasses.field(
        default=default, metadata={**metadata, "positional": positional, "path": path, "check": check}
    )


def check_path_setting(owner: str, field: dataclasses.Field, path: str) -> None:
    """Refuse ``path`` as the value of the path setting ``field`` of component ``owner`` unless
    it is what the component reads (:func:`option`'s ``path`` rule and ``check``): what a
    packed system may carry.

    Raises:
        InputError: a setting that names no file the component reads (not declared a path), a
            directory where one file is read, a file where a directory is, a directory without
            its marker file, or a path the reader's ``check`` refuses."""
    rule = field.metadata.get("path")
    where = f"{owner}: its {field.name}"
    if not rule:
        raise InputError(f"{where} is not a file the scorer reads: a packed system does not carry it", path)
    if rule == "file" and not os.path.isfile(path):
        raise InputError(f"{where} must be one file (a packed system carries nothing else)", path)
    if isinstance(rule, str) and rule.startswith("dir"):
        marker = rule.partition(":")[2]
        if not os.path.isdir(path):
            raise InputError(f"{where} must be a directory", path)
        if marker and not os.path.isfile(os.path.join(path, marker)):
            raise InputError(f"{where} is a directory without {marker}: not the model it names", path)
    check = field.metadata.get("check")
    if check is not None:
        check(path)


def setting_parser(field: dataclasses.Field) -> Callable[[str], Any]:
    """The function that turns a setting's text into the field's value (its ``type``, else
    ``int``, ``float``, a yes/no boolean or ``str`` by the field's type)."""
    given = field.metadata.get("type")
    if given is not None:
        return given
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
    if kind == "bool":
        return _boolean
    return {"int": int, "float": float}.get(kind, str)


#: what a field of each annotated type takes, and the test of a value
_KINDS: Dict[str, Tuple[str, Callable[[Any], bool]]] = {
    "int": ("an integer", lambda v: isinstance(v, numbers.Integral) and not isinstance(v, bool)),
    "float": ("a number", lambda v: isinstance(v, numbers.Real) and not isinstance(v, bool)),
    "bool": ("True or False", lambda v: isinstance(v, bool) or type(v).__name__ == "bool_"),
    "str": ("a string", lambda v: isinstance(v, str)),
}


def check_setting_types(config_class: type, values: Mapping[str, Any], owner: str) -> None:
    """Check settings given in Python (the API's ``**config``) against the fields' annotated
    types (``int``, ``float``, ``bool``, ``str``, ``Optional[…]`` of them) before the Config
    is built, so that ``iterations="x"`` is named as such rather than failing in a range check.

    Raises:
        InputError: ``owner: key=value is not an integer`` (or a number, a string, …).
    """
    kinds = {
        f.name: f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "")
        for f in dataclasses.fields(config_class)
    }
    for key, value in values.items():
        kind = kinds.get(key, "")
        if kind.startswith("Optional[") and kind.endswith("]"):
            if value is None:
                continue
            kind = kind[len("Optional[") : -1]
        wanted = _KINDS.get(kind)
        if wanted is not None and not wanted[1](value):
            raise InputError(f"{owner}: {key}={value!r} is not {wanted[0]}")


def check_config(config: Any, owner: str) -> Any:
    """``config`` (a Config dataclass built in Python: the API's settings) when every field holds
    what the command line would accept: its annotated type (:func:`check_setting_types`), its
    choices and its parser's range (``positive_int``, ``seed``… applied to the value's text),
    so that the API and the command line share one validation path.

    Raises:
        InputError: ``owner: key=value: why`` for the first field out of type or range."""
    values = {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    check_setting_types(type(config), values, owner)
    for f in dataclasses.fields(config):
        value, parser, choices = values[f.name], f.metadata.get("type"), f.metadata.get("choices")
        if value is None:
            continue
        if choices and value not in choices:
            raise InputError(f"{owner}: {f.name} must be one of {', '.join(choices)} (not {value!r})")
        if parser is not None:
            try:
                parser(repr(value) if isinstance(value, float) else str(value))
            except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
                raise InputError(f"{owner}: {f.name}={value!r}: {err}") from None
    return config


def _boolean(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, not {text!r}")


def split_spec(spec: str) -> Tuple[str, List[str]]:
    """A component spec's name and setting items: ``KIND:ITEM,ITEM,...`` -> (``KIND``, the
    non-empty items, stripped), each item ``key=value`` or, first, a positional value
    (``hf:DIR,bpe=none`` -> ``("hf", ["DIR", "bpe=none"])``).  The grammar every
    component's settings follow (:func:`parse_settings`); the main job's model settings
    (``workflow/settings``) split theirs with it."""
    name, _, text = spec.partition(":")
    return name, [item for item in (part.strip() for part in text.split(",")) if item]


def parse_settings(config_class: type, text: str, spec: str, defaults: Optional[Dict[str, Any]] = None) -> Any:
    """``config_class`` built from ``key=value,key=value`` (``text``; empty: the defaults).

    Args:
        config_class: a dataclass whose fields are the settings.
        text: the settings as written after ``NAME:``.
        spec: the whole spec, for messages.
        defaults: values for fields the text does not set (e.g. the command line's
            ``--tokenize`` for BLEU's ``tokenize``); keys that are not fields are ignored.

    Raises:
        InputError: an unknown key (the known ones listed), a setting without ``=``, a key
            given twice or a value the field's parser refuses.
    """
    fields = {f.name: f for f in dataclasses.fields(config_class)}
    values = {k: v for k, v in (defaults or {}).items() if k in fields}
    seen = set()
    first = [f.name for f in fields.values() if f.metadata.get("positional")]
    for k, item in enumerate(split_spec(":" + text)[1]):
        key, eq, value = item.partition("=")
        if k == 0 and first and (not eq or key.strip() not in fields):  # NAME:VALUE,…: the positional field
            key, eq, value = first[0], "=", item
        key = key.strip()
        if not eq or key not in fields:
            raise InputError(f"{spec}: unknown setting {item!r} (known: {settings_help(config_class)})")
        if key in seen:
            raise InputError(f"{spec}: {key} is set twice")
        seen.add(key)
        choices = fields[key].metadata.get("choices")
        if choices and value.strip() not in choices:
            raise InputError(f"{spec}: {key} must be one of {', '.join(choices)} (not {value.strip()!r})")
        try:
            values[key] = setting_parser(fields[key])(value.strip())
        except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
            raise InputError(f"{spec}: {key}={value}: {err}") from None
    try:
        return config_class(**values)
    except (ValueError, TypeError) as err:
        raise InputError(f"{spec}: {err}") from None


def spec_of(item: Any, what: str) -> str:
    """The spec a user writes, from the Python API's forms: ``"chrf:word_order=2"`` as it is,
    or ``("chrf", {"word_order": 2})`` (a name and its ``Config`` fields as keywords; the
    positional field by its name too: ``("mbr", {"utility": "chrf"})``), so both go through
    the one parser and its validation.

    Raises:
        InputError: neither form, or a value holding a comma.
        TypeError: ``item`` is not a string or a (name, settings) pair.
    """
    if isinstance(item, str):
        return item
    if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str) and isinstance(item[1], dict)):
        raise TypeError(f"a {what} is a spec string or a (name, {{setting: value}}) pair, not {item!r}")
    name, settings = item
    for key, value in settings.items():
        if "," in str(value):
            raise InputError(f"{what} {name}: {key}={value!r} holds a comma, which a spec cannot")
    return f"{name}:" + ",".join(f"{k}={v}" for k, v in settings.items())


def settings_help(config_class: type) -> str:
    """``key=default (help), …`` of every field, for help texts and error messages."""
    parts = []
    for f in dataclasses.fields(config_class):
        default = f.default if f.default not in (dataclasses.MISSING, None) else "…"
        text = f.metadata.get("help")
        choices = f.metadata.get("choices")
        text = f"{text}: {'|'.join(choices)}" if text and choices else text
        parts.append(f"{f.name}={default}" + (f" ({text})" if text else ""))
    return ", ".join(parts)


def spec_help(name: str, config_class: type) -> str:
    """The spec a user writes, from the Config: ``mbr:UTILITY[,feature=NMT][,temperature=1.0]``
    (the positional field in capitals, or its choices)."""
    head, rest = f"{name}:", []
    for f in dataclasses.fields(config_class):
        choices = f.metadata.get("choices")
        if f.metadata.get("positional"):
            head += "|".join(choices) if choices else f.name.upper()
            continue
        default = f.default if f.default not in (dataclasses.MISSING, "", None) else f.name.upper()
        rest.append(f"{f.name}={'|'.join(choices) if choices else default}")
    if not rest:
        return head
    return head + ("[," if head.endswith(":") is False else "[") + "][,".join(rest) + "]"
