"""The reference pages generated from the code, kept in the repository and checked current.

Between ``<!-- rerank-cli-reference -->`` and ``<!-- /rerank-cli-reference -->`` a page holds
the ``--help`` text of ``rerank`` and of every verb (``rerank.cli.build_parser``); between
``<!-- rerank-component-settings -->`` and ``<!-- /rerank-component-settings -->`` every
registered scorer's, metric's and tuner's settings, from their ``Config`` classes. The text
is rendered into docs/reference/cli.md and scorers.md themselves, so the pages read the same
on the repository's web view as on the built site; ``tests/docs/test_docs.py`` checks they
are current, and

    .venv/bin/python docs/hooks.py        # renders them again after a change of the code

writes them. As an MkDocs hook it renders every page at build time too, so the site cannot
drift from the code, and a new component appears with no edit here.
"""

import argparse
import os
import re
import sys

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


def _end(mark: str) -> str:
    return mark.replace("<!-- ", "<!-- /")


def render(markdown: str) -> str:
    """``markdown`` with each marked section (module docstring) holding the generated text:
    between its begin and end marks (an end mark is added after a lone begin mark)."""
    for mark, make in ((MARK, cli_reference), (SETTINGS, component_settings)):
        if mark not in markdown:
            continue
        body = f"{mark}\n\n{make().rstrip()}\n\n{_end(mark)}"
        span = re.compile(re.escape(mark) + r".*?" + re.escape(_end(mark)), re.S).search(markdown)
        if span:
            markdown = markdown[: span.start()] + body + markdown[span.end() :]
        else:
            markdown = markdown.replace(mark, body, 1)
    return markdown


#: the pages that hold generated sections
PAGES = ("docs/reference/cli.md", "docs/reference/scorers.md")


def on_page_markdown(markdown, page, config, files):
    return render(markdown)


def main() -> int:
    """Render the generated sections into :data:`PAGES` (run from anywhere)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path.insert(0, root)
    for page in PAGES:
        path = os.path.join(root, page)
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        rendered = render(text)
        if rendered != text:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(rendered)
            print(f"hooks: {page} rendered again", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
