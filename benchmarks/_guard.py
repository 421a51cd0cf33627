"""The benchmarks' output guard where the script may run under a peer's python (unbabel-comet's or
mbrs' venv, without rerank): rerank's own (:func:`rerank.cli.guard_script`) where rerank is
importable, else only that the inputs exist."""

from __future__ import annotations

import os
import sys


def guard_script(prog: str, inputs: dict, outputs: dict) -> None:
    """Refuse a missing input (and, with rerank, an output that is an input) in one line.

    Raises:
        SystemExit: 1, after ``PROG: error: PATH: …``."""
    try:
        from rerank.cli import guard_script as guard
    except ImportError:
        for option, value in inputs.items():
            for path in [value] if isinstance(value, str) or value is None else value:
                if path and not os.path.exists(path):
                    sys.exit(f"{prog}: error: {path}: {option}: no such file or directory")
        return
    guard(prog, inputs, outputs)
