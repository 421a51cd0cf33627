"""The structure drawn from the imports (docs/reference/layout.md): the core's own floors —
foundations, the n-best data model and its I/O, metrics, tuning / significance / MBR, applying
and reporting — then the models (NMT, embeddings), the feature scorers, the command line and
the Python API, and the facade ``rerank`` on top.  No arrow from a lower floor to a higher one
(so no library module imports the package root), none between two groups of one floor, no
cycle, imports at module level, a core that loads neither torch nor fairseq, and module and
function sizes a reader can hold."""

import ast
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: (floor, group) of every module of rerank, by module-name prefix (the longest prefix wins)
FLOORS = {
    # 0: foundations, one group
    **{
        f"rerank.{name}": (0, "base")
        for name in (
            "_version",
            "defaults",
            "errors",
            "argtypes",
            "config",
            "registry",
            "progress",
            "devices",
            "textio",
            "outputs",
            "output_guard",
            "signature",
            "_native",
            "remote_code",
            "api_names",
        )
    },
    # 1: the n-best data model and its I/O
    "rerank.nbest": (1, "data"),
    "rerank.shards": (1, "data"),
    "rerank.folds": (1, "data"),
    "rerank.convert": (1, "data"),
    # 2: metrics own all text scoring
    "rerank.metrics": (2, "metrics"),
    # 3: what the statistics are for: tuning, significance, MBR, experiments
    "rerank.tuning": (3, "tuning"),
    "rerank.signif": (3, "signif"),
    "rerank.signif_bootstrap": (3, "signif"),
    "rerank.signif_adjust": (3, "signif"),
    "rerank.mbr": (3, "mbr"),
    "rerank.experiment": (3, "experiment"),
    # 4: applying tuned weights, reports
    "rerank.reranking": (4, "results"),
    "rerank.report": (4, "results"),
    "rerank.report_sources": (4, "results"),
    "rerank.report_plots": (4, "results"),
    "rerank.report_rows": (4, "results"),
    "rerank.report_analysis": (4, "results"),
    "rerank.report_page": (4, "results"),
    "rerank.report_thresholds": (4, "results"),
    "rerank.report_sets": (4, "results"),
    # 5-7: the models and the feature scorers
    "rerank.nmt": (5, "nmt"),
    "rerank.embed": (6, "embed"),
    "rerank.features": (7, "features"),
    # 8: the command line and the Python API, side by side
    "rerank.cli": (8, "cli"),
    "rerank.api": (8, "api"),
    "rerank.api_args": (8, "api"),
    "rerank.api_lists": (8, "api"),
    # 9: the facade (rerank/__init__.py): nothing below may import it
    "rerank": (9, "facade"),
}


def layer(module: str) -> tuple:
    """(floor, group) of ``module`` (:data:`FLOORS`, the longest matching prefix)."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        key = ".".join(parts[:k])
        if key in FLOORS:
            return FLOORS[key]
    raise KeyError(module)


def modules():
    """{module name: path} of every project module."""
    found = {}
    for package in ("rerank",):
        for folder, _, files in os.walk(os.path.join(ROOT, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(folder, name)
                    rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
                    found[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return found


MODULES = modules()


def imports(path):
    """[(imported module, line, module level?)] of the project's own modules in ``path``."""
    tree = ast.parse(open(path, encoding="utf-8").read())
    local = {
        id(n) for f in ast.walk(tree) if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)
    }
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module for a in node.names
            ]
        else:
            continue
        for target in targets:
            if target.split(".")[0] == "rerank":
                out.append((target, node.lineno, id(node) not in local))
    return out


EDGES = {name: imports(path) for name, path in MODULES.items()}


def test_every_module_has_a_floor():
    unknown = [name for name in MODULES if not any(name == k or name.startswith(k + ".") for k in FLOORS)]
    assert not unknown, unknown


def wrong_arrows(edges) -> list:
    """The imports of ``edges`` ({module: [(target, line, top)]}) that go up a floor or across
    groups of one floor."""
    wrong = []
    for name, found in edges.items():
        floor, group = layer(name)
        for target, line, _ in found:
            to_floor, to_group = layer(target)
            if to_floor > floor or (to_floor == floor and to_group != group):
                wrong.append(
                    f"{MODULES.get(name, name)}:{line}: {name} ({floor} {group}) imports {target} ({to_floor} {to_group})"
                )
    return wrong


def test_no_arrow_from_a_lower_layer_to_a_higher_one():
    wrong = wrong_arrows(EDGES)
    assert not wrong, "\n".join(wrong)


def test_the_layer_rules_see_an_import_of_the_facade_and_a_skipped_floor():
    """The knot this test once missed (issue 59): ``nbest → signature → rerank ⇢ api → nbest``,
    a library module importing ``__version__`` from the package root; and metrics importing tuning."""
    assert wrong_arrows({"rerank.signature": [("rerank", 10, True)]})
    assert wrong_arrows({"rerank.metrics.bleu": [("rerank.tuning.base", 3, True)]})
    assert wrong_arrows({"rerank.tuning.mira": [("rerank.mbr.engine", 3, True)]})  # one floor, two groups
    assert not wrong_arrows({"rerank.tuning.mira": [("rerank.metrics", 3, True), ("rerank.tuning.base", 4, True)]})


def test_no_library_module_imports_the_package_root():
    found = [
        f"{MODULES[name]}:{line}"
        for name, edges in EDGES.items()
        if name != "rerank"
        for t, line, _ in edges
        if t == "rerank"
    ]
    assert not found, found


#: the most lines of one module and of one function (issue 59's measure)
MAX_MODULE_LINES, MAX_FUNCTION_LINES = 500, 100


def _tool_modules():
    """The Python files of workflow/ and scripts/ (run as scripts, outside the package)."""
    found = []
    for folder in ("workflow", "scripts"):
        for directory, _, names in os.walk(os.path.join(ROOT, folder)):
            found += [os.path.join(directory, n) for n in sorted(names) if n.endswith(".py")]
    return found


def test_modules_and_functions_stay_small():
    large = []
    for path in list(MODULES.values()) + _tool_modules():
        source = open(path, encoding="utf-8").read()
        if source.count("\n") > MAX_MODULE_LINES:
            large.append(f"{path}: {source.count(chr(10))} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = node.end_lineno - node.lineno + 1
                if size > MAX_FUNCTION_LINES:
                    large.append(f"{path}:{node.lineno}: {node.name} has {size} lines")
    assert not large, "\n".join(large)


def test_no_function_local_import_of_our_own_modules():
    local = [
        f"{MODULES[name]}:{line}: {target}" for name, edges in EDGES.items() for target, line, top in edges if not top
    ]
    assert not local, "\n".join(local)


def test_no_import_cycle():
    graph = {
        name: sorted({t for t, _, top in edges if top and t in MODULES and t != name}) for name, edges in EDGES.items()
    }
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(" -> ".join(stack[stack.index(nxt) :] + [nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    real = cycles
    assert not real, "\n".join(real)


@pytest.mark.parametrize(
    "modules",
    [
        "rerank, rerank.tuning, rerank.tuning.files, rerank.report, rerank.experiment, rerank.reranking, rerank.tuning.oracle, rerank.metrics",
        "rerank.cli",  # the command line: every verb's parser, and no model loaded before a verb needs one
        "rerank.api",  # the Python API: no model loaded before a scorer is asked for
    ],
)
def test_the_core_loads_neither_torch_nor_fairseq(modules):
    code = (
        f"import sys, importlib\nfor m in '{modules}'.split(', '): importlib.import_module(m)\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'fairseq', 'sklearn', 'matplotlib'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[]", done.stdout


def test_import_rerank_loads_the_api_only_when_used():
    code = (
        "import sys, rerank\nbefore = sorted(m for m in sys.modules if m.split('.')[:2] in (['rerank', 'mira'], "
        "['rerank', 'features']) or m == 'rerank.api')\nrerank.tune\nprint(before, 'rerank.api' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout.strip() == "[] True", done.stdout


def test_a_new_tuner_is_one_class(tmp_path):
    """docs/extending.md's tuner, the documentation's own code: a registered Tuner subclass
    gets its ``rerank tune`` options from its Config and runs from the command line."""
    page = open(os.path.join(ROOT, "docs", "extending.md"), encoding="utf-8").read()
    (tuner,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "@TUNERS.register" in b]
    code = tuner + "\nimport sys\nfrom rerank.cli import main\n\nsys.exit(main(sys.argv[1:]))\n"
    (tmp_path / "dev.ref").write_text("a b c d\ne f g h\n")
    (tmp_path / "dev.nbest").write_text(
        "0 ||| w x y z ||| F= 1 G= 0 ||| 0\n0 ||| a b c d ||| F= 0 G= 1 ||| 0\n"
        "1 ||| e f g h ||| F= 0 G= 1 ||| 0\n1 ||| p q r s ||| F= 1 G= 0 ||| 0\n"
    )
    (tmp_path / "run.py").write_text(code)
    done = subprocess.run(
        [
            sys.executable,
            str(tmp_path / "run.py"),
            "tune",
            "--algorithm",
            "best-column",
            "--bc-top",
            "2",
            "--init",
            "zeros",
            "--nbest",
            str(tmp_path / "dev.nbest"),
            "--ref",
            str(tmp_path / "dev.ref"),
            "--out",
            str(tmp_path / "w.json"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert done.returncode == 0, done.stderr
    import json

    record = json.loads((tmp_path / "w.json").read_text())
    assert record["weights"] == {"F": 0.0, "G": 1.0} and record["tuning"]["bleu"] == pytest.approx(100.0)
    assert record["config"] == {"top": 2, "seed": 12345} and record["tuning"]["column_bleu"][1] == pytest.approx(100.0)


#: the registry each folder's components register in (docs/extending.md's "Saved as" files)
SAVED_REGISTRIES = {
    "rerank/mbr/": ("DECODERS", "rerank.mbr.decoders"),
    "rerank/tuning/": ("TUNERS", "rerank.tuning.base"),
    "rerank/features/": ("SCORERS", "rerank.features.scorer"),
}


def test_extending_examples_work_as_files_saved_where_the_page_says(tmp_path):
    """Each component of docs/extending.md that the page says to save as ``rerank/…/NAME.py``
    (issue 77): written there in a copy of the package, a fresh interpreter's registry finds it
    by name, its command's help lists it, and it imports no floor above its folder's (neither
    the package root, the API nor the command line)."""
    import shutil

    page = open(os.path.join(ROOT, "docs", "extending.md"), encoding="utf-8").read()
    saved = re.findall(r"as\s+`(rerank/[\w/]+\.py)`", page)
    assert sorted(saved) == ["rerank/features/words.py", "rerank/mbr/mode.py", "rerank/tuning/best_column.py"]
    blocks = re.findall(r"```python\n(.*?)```", page, re.S)
    shutil.copytree(os.path.join(ROOT, "rerank"), tmp_path / "rerank", ignore=shutil.ignore_patterns("__pycache__"))
    checks = []
    for path in saved:
        folder = path.rsplit("/", 1)[0] + "/"
        registry, home = SAVED_REGISTRIES[folder]
        (block,) = [b for b in blocks if f"@{registry}.register" in b]
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module != "rerank" and not node.module.startswith(("rerank.api", "rerank.cli")), path
        (tmp_path / path).write_text(block, encoding="utf-8")
        name = re.search(rf"@{registry}\.register\(\"([\w-]+)\"\)", block).group(1)
        checks.append((home, registry, name))
    code = "\n".join(
        f"from {home} import {registry}; assert {name!r} in {registry}.names()" for home, registry, name in checks
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(tmp_path), env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    for argv, name in (
        (["mbr", "--help"], "mode:"),
        (["tune", "--help"], "best-column"),
        (["features", "add", "--help"], "words:"),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rerank.cli", *argv], capture_output=True, text=True, cwd=str(tmp_path), env=env
        )
        assert done.returncode == 0 and name in done.stdout, (argv, done.stderr[-2000:])
