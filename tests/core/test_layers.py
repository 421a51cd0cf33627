"""The structure drawn from the imports (the README's layout): one layer per floor, no
arrow from a lower layer to a higher one, no cycle, imports at module level, and a core
that loads neither torch nor fairseq."""

import ast
import os
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

#: the subpackages of ``rerank`` that are layers of their own, by floor
FLOORS = {"mira": 1, "nmt": 1, "embed": 2, "features": 3, "cli": 4}


def layer(module: str) -> tuple:
    """(floor, package): rerank's core 0; rerank.mira and rerank.nmt 1; rerank.embed 2;
    rerank.features 3; the CLI (rerank.cli) and the Python API (rerank/api.py) 4."""
    if module == "rerank.api":
        return 4, "api"
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in FLOORS:
        return FLOORS[parts[1]], parts[1]
    return 0, "rerank"


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


def test_no_arrow_from_a_lower_layer_to_a_higher_one():
    wrong = []
    for name, edges in EDGES.items():
        floor, package = layer(name)
        for target, line, _ in edges:
            to_floor, to_package = layer(target)
            if to_package != package and to_floor >= floor:
                wrong.append(f"{MODULES[name]}:{line}: {name} ({package}) imports {target} ({to_package})")
    assert not wrong, "\n".join(wrong)


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
        "rerank, rerank.mira, rerank.mira.tuning, rerank.report, rerank.experiment, rerank.reranking, rerank.oracle, rerank.metrics",
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
