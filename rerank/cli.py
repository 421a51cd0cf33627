"""``rerank`` command line: ``rerank <verb>`` with files in and out.

Each layer owns its verbs, parser beside handler: ``tune`` (``mira/commands.py``),
``apply``, ``eval``, ``oracle``, ``signif``, ``report`` (``rerank/commands.py``), ``embed``
and ``features`` (``features/commands.py``), ``nmt prepare|train|train-lm|nbest``
(``nmt/commands.py``; needs the ``[nmt]`` extra to run).  Errors in the input are printed
on one line naming file and line, and the exit status is 1; nothing partial is written.
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from rerank import __version__
from rerank.errors import InputError


def build_parser() -> argparse.ArgumentParser:
    """The ``rerank`` parser with every layer's verbs."""
    import features.commands
    import mira.commands
    import nmt.commands
    import rerank.commands

    parser = argparse.ArgumentParser(prog="rerank", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True)
    for module in (mira.commands, rerank.commands, features.commands, nmt.commands):
        module.add_parsers(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    """Run one ``rerank`` verb.  Bad input (:class:`InputError`, a file that cannot be
    read or written) prints one line naming the file and returns 1; any other exception
    is a bug of ours and keeps its traceback."""
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
    except InputError as err:
        print(f"rerank {args.verb}: error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 1
    except OSError as err:  # e.g. an output path in a missing or read-only place
        where = f"{err.filename}: " if err.filename else ""
        print(f"rerank {args.verb}: error: {where}{err.strerror or err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
