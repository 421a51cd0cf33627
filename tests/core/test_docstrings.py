"""One docstring rule for the package, read from the source (no imports, so a core-only
install checks the torch modules too): every public class and function, and every public
method of a class, has a docstring; a method may rely on the docstring of the interface it
implements (a method of the same name documented on some class of the package: ``Scorer.score``,
``Metric.stats``, ``Tuner.search``…), and framework hooks (``forward``, ``backward``, fairseq's
``reorder_*``…) on their framework's; the CLI's ``cmd_*`` handlers are documented by their
parsers' help.  A function that raises ``InputError`` itself says what it refuses (a
``Raises:`` section, or the words refuse/raise/error in the text)."""

import ast
import glob
import os

from tests.conftest import ROOT

#: methods whose contract is a framework's (torch autograd and modules, fairseq models and criteria)
FRAMEWORK_HOOKS = {
    "forward",
    "backward",
    "reorder_encoder_out",
    "reorder_incremental_state",
    "max_positions",
    "add_args",
    "build_model",
    "compute_loss",
    "process_line",
}


def _modules():
    for path in sorted(glob.glob(os.path.join(ROOT, "rerank", "**", "*.py"), recursive=True)):
        with open(path, encoding="utf-8") as handle:
            yield os.path.relpath(path, ROOT), ast.parse(handle.read())


def _raises_input_error(node) -> bool:
    return any(
        isinstance(x, ast.Raise) and isinstance(x.exc, ast.Call) and getattr(x.exc.func, "id", "") == "InputError"
        for x in ast.walk(node)
    )


def test_every_public_class_function_and_method_has_a_docstring():
    items, documented_methods = [], set()
    for path, tree in _modules():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                items.append((path, node, None))
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef):
                        if ast.get_docstring(member):
                            documented_methods.add(member.name)
                        if not member.name.startswith("_") and not node.name.startswith("_"):
                            items.append((path, member, node.name))
    assert len(items) > 400  # the walk found the package
    missing = [
        f"{path}:{node.lineno} {cls + '.' if cls else ''}{node.name}"
        for path, node, cls in items
        if not ast.get_docstring(node)
        and not (cls and (node.name in documented_methods or node.name in FRAMEWORK_HOOKS))
        and not (node.name.startswith("cmd_") and "/cli/" in path)
    ]
    assert not missing, "no docstring:\n" + "\n".join(missing)


def test_a_function_that_refuses_input_says_what_it_refuses():
    silent = []
    for path, tree in _modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                doc = ast.get_docstring(node)
                if (
                    doc
                    and _raises_input_error(node)
                    and not any(w in doc.lower() for w in ("raise", "refuse", "error"))
                ):
                    silent.append(f"{path}:{node.lineno} {node.name}")
    assert not silent, "raises InputError, its docstring does not say so:\n" + "\n".join(silent)
