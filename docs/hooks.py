"""MkDocs hook: the reference pages generated from the code.

``<!-- rerank-cli-reference -->`` in a page is replaced by the ``--help`` text of ``rerank``
and of every verb (``rerank.cli.build_parser``); ``<!-- rerank-component-settings -->`` by
every registered scorer's, metric's and tuner's settings, from their ``Config`` classes. So
the reference cannot drift from the code, and a new component appears with no edit here.
"""

import argparse
import os

MARK = "<!-- rerank-cli-reference -->"


def _verbs(parser: argparse.ArgumentParser, prog: str):
    """(command, help text) of ``parser`` and of its subcommands, depth first."""
    yield prog, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _verbs(sub, f"{prog} {name}")


def cli_reference() -> str:
    """Markdown: a section per command with its help text in a ``text`` block."""
    os.environ["COLUMNS"] = "110"  # argparse wraps to the terminal: the same width on every machine
    from rerank.cli import build_parser

    parts = []
    for command, text in _verbs(build_parser(), "rerank"):
        depth = command.count(" ")
        parts.append(f"{'#' * min(depth + 1, 4)} `{command}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(parts)


SETTINGS = "<!-- rerank-component-settings -->"


def _settings_table(config_class) -> str:
    import dataclasses

    rows = ["| setting | default | what |", "|---|---|---|"]
    for f in dataclasses.fields(config_class):
        choices = f.metadata.get("choices")
        what = (f.metadata.get("help") or "") + (f" ({', '.join(choices)})" if choices else "")
        default = "(first, without its key)" if f.metadata.get("positional") else f"`{f.default}`"
        rows.append(f"| `{f.name}` | {default} | {what} |")
    return "\n".join(rows)


def component_settings() -> str:
    """Markdown: each scorer's spec and settings, each metric's and each tuner's settings."""
    from rerank.config import spec_help
    from rerank.features.scorer import SCORERS
    from rerank.metrics.base import METRICS
    from rerank.tuning.base import TUNERS

    parts = ["## Scorer settings (`rerank features add --scorer`)\n"]
    for name, cls in SCORERS.classes().items():
        if cls.Config is None:
            parts.append(f"### `{name}:`\n\n{cls.summary}\n")
            continue
        parts.append(
            f"### `{name}:`\n\n`{spec_help(name, cls.Config)}` → {cls.summary}\n\n{_settings_table(cls.Config)}\n"
        )
    parts.append("## Metric settings (`--metric`, `--metrics`: `NAME:key=value,…`)\n")
    for name, cls in METRICS.classes().items():
        body = _settings_table(cls.Config) if cls.Config else "No settings."
        parts.append(f"### `{name}`\n\n{(cls.__doc__ or '').strip().splitlines()[0]}\n\n{body}\n")
    parts.append("## Tuner settings (`rerank tune --algorithm`)\n")
    for name, cls in TUNERS.classes().items():
        parts.append(
            f"### `{name}`\n\n{(cls.__doc__ or '').strip().splitlines()[0]}\n\n{_settings_table(cls.Config)}\n"
        )
    return "\n".join(parts)


def on_page_markdown(markdown, page, config, files):
    if MARK in markdown:
        markdown = markdown.replace(MARK, cli_reference())
    if SETTINGS in markdown:
        markdown = markdown.replace(SETTINGS, component_settings())
    return markdown
