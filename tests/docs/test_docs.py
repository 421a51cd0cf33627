"""Every shell and Python block of the documentation runs (README.md and docs/).

A page's blocks run in order in one fresh directory that holds small lists of the kind the
quick start describes (``val`` and ``test``: ``NAME.nbest`` with its signature, ``NAME.de``,
``NAME.1best``; ``val.nbest.comet``, one score per hypothesis standing in for a user's own
metric), in a subprocess: ``python`` blocks share one namespace, ``bash`` blocks run with
``bash -e -o pipefail``. Blocks in other languages (``text``: syntax, output, file contents)
are not run. An HTML comment right before a block directs it:

* ``<!-- docs-test: check=help -->``: commands that need hours or the main job's trained
  models (the pipelines, benchmarks on real data, recipes over ``out/``): each command of the
  block is run with ``--help`` from the repository root, so its verb and script exist and
  parse; the block itself is not run.

A page whose Python blocks register components (``docs/extending.md``) runs its ``rerank``
commands in the same process as those blocks (``<!-- docs-test: inprocess -->`` anywhere
on the page), as a user's script that imports its module before ``rerank.cli.main`` would.

A page whose blocks need trained models of a kind the tests can build (``docs/usage/byom.md``:
a CTranslate2 model, a Hugging Face channel model, fairseq right-to-left models) names the
test that builds tiny ones under the page's own file names and runs the page with
:func:`run_page` (``<!-- docs-test: run-by=tests/features/test_byom.py -->`` anywhere on the page);
that test then checks what the page's commands wrote.
"""

import argparse
import glob
import json
import os
import re
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.conftest import ROOT, write_split

PAGES = sorted(
    os.path.relpath(p, ROOT)
    for p in [os.path.join(ROOT, "README.md"), *glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)]
)
RUN = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
BLOCK = re.compile(
    r"(?:^<!-- docs-test: (?P<directive>[^>]*?) -->\n)?^```(?P<lang>[\w-]*)[^\n]*\n(?P<code>.*?)^```", re.S | re.M
)


def blocks(page: str):
    """[(language, code, directive, line)] of the fenced blocks of ``page``."""
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    return [
        (m["lang"], m["code"], (m["directive"] or "").strip(), text.count("\n", 0, m.start("code")) + 1)
        for m in BLOCK.finditer(text)
    ]


def commands(code: str):
    """The commands of a shell block: continuation lines joined, comments and blank lines
    dropped, each split as the shell would (``shlex``)."""
    out = []
    for line in code.replace("\\\n", " ").split("\n"):
        words = shlex.split(line, comments=True)
        if words:
            out.append(words)
    return out


def help_command(words):
    """The ``--help`` form of a command: leading ``VAR=value`` words dropped, the program and
    its verbs (the words before the first option or path argument) kept; None for a line
    that only sets variables."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return None
    if os.path.basename(words[0]) in ("python", "python3", "bash"):  # .venv/bin/python too
        return [sys.executable if "python" in words[0] else "bash", words[1], "--help"]
    head = [words[0]]
    for word in words[1:]:
        if word.startswith("-") or "/" in word or "." in word or "$" in word:
            break
        head.append(word)
    return head + ["--help"]


def test_the_block_parser_finds_directives_and_languages():
    assert commands("rerank tune --nbest a \\\n    --ref b  # tune\n\n# comment\nX=1 y") == [
        ["rerank", "tune", "--nbest", "a", "--ref", "b"],
        ["X=1", "y"],
    ]
    assert help_command(["T=out/x", "rerank", "nmt", "nbest", "--data-bin", "d"]) == [
        "rerank",
        "nmt",
        "nbest",
        "--help",
    ]
    assert help_command(["python", "benchmarks/bench_mira.py", "--x"]) == [
        sys.executable,
        "benchmarks/bench_mira.py",
        "--help",
    ]
    assert help_command(["O=out/multi30k-transformer;"]) is None or help_command(["O=out"]) is None


RUNNABLE = [p for p in PAGES if any(lang in RUN for lang, _, _, _ in blocks(p))]


def test_every_page_with_code_is_checked():
    """The pages this test runs include the README, the quick start and the Python page."""
    assert {"README.md", "docs/usage/quickstart.md", "docs/usage/python.md", "docs/extending.md"} <= set(RUNNABLE)


DRIVER = r"""
import json, os, shlex, subprocess, sys
sys.path.insert(0, os.environ["DOCS_ROOT"])
from tests.docs.test_docs import commands
steps, inprocess = json.load(open(sys.argv[1]))
namespace = {"__name__": "__docs__"}
for lang, code, where in steps:
    print(f"== {where}", flush=True)
    if lang == "python":
        exec(compile(code, where, "exec"), namespace)
    elif inprocess:
        from rerank.cli import main
        for words in commands(code):
            assert words[0] == "rerank", f"{where}: only rerank commands run in-process: {words}"
            code_ = main(words[1:])
            assert code_ == 0, f"{where}: {shlex.join(words)} exited {code_}"
    else:
        subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], check=True)
"""


def run_page(page: str, directory, setup=None) -> None:
    """Run every block of ``page`` as the module docstring says, in ``directory`` (the quick
    start's small lists written first); ``setup(directory)`` then lays out whatever else the
    page names (tiny models)."""
    found = blocks(page)
    text = open(os.path.join(ROOT, page), encoding="utf-8").read()
    env = {
        **os.environ,
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")]),
        "DOCS_ROOT": ROOT,
        "PYTHONPATH": ROOT,
        "COLUMNS": "100",
    }
    steps, checked = [], 0
    for lang, code, directive, line in found:
        if lang not in RUN:
            continue
        where = f"{page}:{line}"
        if directive == "check=help":
            for words in commands(code):
                argv = help_command(words)
                if argv is None:
                    continue
                if shutil.which(argv[0], path=env["PATH"]) is None and not os.path.isabs(argv[0]):
                    if os.environ.get("RERANK_REQUIRE_EXTRAS"):
                        pytest.fail(f"{where}: {argv[0]} is not installed")
                    continue  # a tool of an extra that is not installed (ct2-fairseq-converter)
                done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
                assert done.returncode == 0, f"{where}: {shlex.join(argv)}: {done.stderr[-2000:]}"
                checked += 1
            continue
        assert not directive, f"{where}: unknown directive {directive!r}"
        steps.append((RUN[lang], code, where))
    if steps:
        write_split(directory, "val", 40, seed=1)
        write_split(directory, "test", 30, seed=2)
        hypotheses = sum(1 for _ in open(directory / "val.nbest", encoding="utf-8"))
        rng = np.random.default_rng(0)
        (directory / "val.nbest.comet").write_text("".join(f"{x:.4f}\n" for x in rng.random(hypotheses)))
        if setup is not None:
            setup(directory)
        (directory / "steps.json").write_text(json.dumps([steps, "<!-- docs-test: inprocess -->" in text]))
        (directory / "driver.py").write_text(DRIVER)
        done = subprocess.run(
            [sys.executable, str(directory / "driver.py"), str(directory / "steps.json")],
            cwd=directory,
            env=env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, f"{page}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert steps or checked, f"{page}: nothing was run"


RUN_BY = re.compile(r"^<!-- docs-test: run-by=(?P<test>\S+) -->$", re.M)


def run_by(page: str):
    """The test file that runs ``page`` with the tiny models it names (``<!-- docs-test:
    run-by=tests/test_X.py -->`` anywhere on the page), or None."""
    found = RUN_BY.search(open(os.path.join(ROOT, page), encoding="utf-8").read())
    return found and found["test"]


def test_pages_that_need_models_are_run_by_the_test_they_name():
    """A page whose blocks need trained models names the test that builds tiny ones and runs
    the page through :func:`run_page`; that test exists and does."""
    owned = {page: run_by(page) for page in RUNNABLE if run_by(page)}
    assert "docs/usage/byom.md" in owned
    for page, test in owned.items():
        source = open(os.path.join(ROOT, test), encoding="utf-8").read()
        assert f'run_page("{page}"' in source, f"{page}: {test} does not run it"


@pytest.mark.parametrize("page", [p for p in RUNNABLE if not run_by(p)])
def test_the_pages_code_runs(page, tmp_path):
    run_page(page, tmp_path)


def test_the_generated_reference_sections_are_rendered_in_the_repository_and_current():
    """docs/reference/cli.md and scorers.md hold the text generated from the parsers and the
    components' Configs (issue 78: the repository's pages were stubs, filled only when the site
    was built, while the README links them as every option of every verb)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rerank_docs_hooks", os.path.join(ROOT, "docs", "hooks.py"))
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    for page in hooks.PAGES:
        text = open(os.path.join(ROOT, page), encoding="utf-8").read()
        assert hooks.render(text) == text, f"{page} is stale: .venv/bin/python docs/hooks.py renders it again"
    cli = open(os.path.join(ROOT, "docs", "reference", "cli.md"), encoding="utf-8").read()
    assert "### `rerank features add`" in cli and "--block-hypotheses BLOCK_HYPOTHESES" in cli
    scorers = open(os.path.join(ROOT, "docs", "reference", "scorers.md"), encoding="utf-8").read()
    assert "### `cometkiwi:`" in scorers and "### `bertscore`" in scorers


def test_the_reference_says_what_the_code_does():
    """Statements a newcomer met that the code had outgrown (issue 78), each checked against
    what the code does now."""
    from rerank.cli import build_parser

    def page(name):
        return " ".join(open(os.path.join(ROOT, "docs", *name.split("/")), encoding="utf-8").read().split())

    scorers = page("reference/scorers.md")
    assert "still come in as `seg:NAME` scores computed elsewhere" not in scorers
    assert "| `cometkiwi:CHECKPOINT_DIR" in scorers  # the feature the code registers
    formats = page("reference/formats.md")
    assert "which is an error telling you" not in formats  # tune finds the beam column itself
    for what in ("fairseq-generate --nbest N", "`jsonl`", "`marian`"):  # what quickstart.md sends readers there for
        assert what in formats, what
    verbs = {}
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            verbs = action.choices
    help_of = {verb: " ".join(verbs[verb].format_help().split()) for verb in ("pack-system", "mbr")}
    assert "rerank nmt nbest or rerank generate" in help_of["pack-system"]
    assert "comet:DIR" in help_of["mbr"] and "bertscore:DIR" in help_of["mbr"]
