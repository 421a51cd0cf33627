"""MkDocs hook: the command-line reference generated from the parsers.

``<!-- rerank-cli-reference -->`` in a page is replaced by the ``--help`` text of ``rerank``
and of every verb (``rerank.cli.build_parser``), so the reference cannot drift from the code.
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


def on_page_markdown(markdown, page, config, files):
    if MARK in markdown:
        return markdown.replace(MARK, cli_reference())
    return markdown
