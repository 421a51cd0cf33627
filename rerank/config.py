"""Component settings: one nested ``Config`` dataclass per component (after mbrs), from which
the command line's options and the ``NAME:key=value`` specs are generated.

A field is made with :func:`option` (its help text, its command-line flag where the component
has options of its own, and a parser that range-checks the value). :func:`parse_settings`
reads the ``key=value,key=value`` part of a spec such as ``chrf:word_order=2,beta=1`` into the
Config, and :func:`settings_help` writes the line the help texts show.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Dict, Optional

from rerank.errors import InputError


def option(default: Any, help: str, flag: Optional[str] = None, type: Optional[Callable[[str], Any]] = None) -> Any:
    """A ``Config`` field with its help text, flag (tuners: default ``--TUNER-FIELD``) and
    argument type (a parser that range-checks, e.g. :func:`rerank.argtypes.positive_int`;
    default: the field's own type, ``int``, ``float``, ``str`` or ``bool``)."""
    return dataclasses.field(default=default, metadata={"help": help, "flag": flag, "type": type})


def _parser(field: dataclasses.Field) -> Callable[[str], Any]:
    """The function that turns a setting's text into the field's value."""
    given = field.metadata.get("type")
    if given is not None:
        return given
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", "str")
    if kind == "bool":
        return _boolean
    return {"int": int, "float": float}.get(kind, str)


def _boolean(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, not {text!r}")


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
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or key not in fields:
            raise InputError(f"{spec}: unknown setting {item!r} (known: {settings_help(config_class)})")
        if key in seen:
            raise InputError(f"{spec}: {key} is set twice")
        seen.add(key)
        try:
            values[key] = _parser(fields[key])(value.strip())
        except (ValueError, TypeError, argparse.ArgumentTypeError) as err:
            raise InputError(f"{spec}: {key}={value}: {err}") from None
    try:
        return config_class(**values)
    except (ValueError, TypeError) as err:
        raise InputError(f"{spec}: {err}") from None


def settings_help(config_class: type) -> str:
    """``key=default (help), …`` of every field, for help texts and error messages."""
    parts = []
    for f in dataclasses.fields(config_class):
        default = f.default if f.default is not dataclasses.MISSING else "…"
        text = f.metadata.get("help")
        parts.append(f"{f.name}={default}" + (f" ({text})" if text else ""))
    return ", ".join(parts)
