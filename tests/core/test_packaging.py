"""The distribution installs one import name, ``rerank``, and works beside PyPI's packages
named ``features``, ``nmt``, ``mira``, ``embed`` (which the old layout's top-level packages
collided with)."""

import glob
import os
import re
import subprocess
import sys
import zipfile

import pytest

from tests.conftest import ROOT

GENERIC = ("features", "nmt", "tuning", "embed", "mbr", "nbest")


@pytest.mark.slow
def test_the_wheel_installs_one_import_name(tmp_path):
    """A wheel built from the checkout holds ``rerank/`` (with the tuners, NMT, embeddings and
    features as its subpackages, and both C extensions) and its metadata, nothing else."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), ROOT],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith("nbest_rerank-")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"rerank", wheel.name.split("-")[0] + "-" + wheel.name.split("-")[1] + ".dist-info"}, tops
    for sub in GENERIC:
        assert f"rerank/{sub}/__init__.py" in names
    assert any(n.startswith("rerank/_kernels") and n.endswith(".so") for n in names)
    assert "rerank/py.typed" in names  # PEP 561: type checkers read the annotations
    assert any(n.startswith("rerank/tuning/_kernels") and n.endswith(".so") for n in names)
    entry = [n for n in names if n.endswith("entry_points.txt")]
    assert "rerank = rerank.cli:main" in zipfile.ZipFile(wheel).read(entry[0]).decode()


def test_rerank_works_beside_packages_named_like_its_subpackages(tmp_path):
    """Packages called features, nmt, tuning, embed, mbr and nbest first on the path (as PyPI's
    would be installed): rerank's verbs and subpackages are unaffected, and the user's ``import
    features`` still gets the other package."""
    shadow = tmp_path / "site"
    for name in GENERIC:
        (shadow / name).mkdir(parents=True)
        (shadow / name / "__init__.py").write_text(f"OWNER = 'not rerank: {name}'\n")
    (tmp_path / "val.nbest").write_text(
        "0 ||| a b c d ||| F= 1 G= 0 ||| 0\n0 ||| w x y z ||| F= 0 G= 1 ||| 0\n"
        "1 ||| e f g h ||| F= 1 G= 0 ||| 0\n1 ||| p q r s ||| F= 0 G= 1 ||| 0\n"
    )
    (tmp_path / "val.de").write_text("a b c d\ne f g h\n")
    code = f"""
import sys
import features, nmt, tuning, embed, mbr, nbest
from rerank.cli import main
assert main(["features", "add", "--nbest", "val.nbest", "--scorer", "mbr:bleu,feature=uniform", "--out", "m.nbest"]) == 0
assert main(["tune", "--nbest", "m.nbest", "--ref", "val.de", "--init", "zeros", "--tokenize", "none",
             "--out", "w.json", "--quiet"]) == 0
import rerank.tuning, rerank.tuning.mira, rerank.features.scorer, rerank.embed.config
assert rerank.tuning.Mira.__module__ == "rerank.tuning.mira"
for module in (features, nmt, tuning, embed, mbr, nbest):
    assert module.OWNER.startswith("not rerank"), module
    assert module.__file__.startswith({str(shadow)!r}), module.__file__
print("ok")
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(shadow), ROOT])}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    weights = (tmp_path / "w.json").read_text()
    assert '"F"' in weights and '"G"' in weights


def test_every_install_hint_names_the_distribution():
    """Messages that tell a user to install an extra name the distribution, ``nbest-rerank[EXTRA]``
    (``rerank[EXTRA]`` is another project on PyPI; ``pip install -e .`` works in a checkout only)."""
    import re

    extras = set(
        __import__("tomllib").load(open(os.path.join(ROOT, "pyproject.toml"), "rb"))["project"]["optional-dependencies"]
    )
    hints, wrong = [], []
    for folder, _, files in os.walk(os.path.join(ROOT, "rerank")):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                for lineno, line in enumerate(open(path, encoding="utf-8"), start=1):
                    for hint in re.findall(r"pip install [^\"`)]*", line):
                        if "[" not in hint or "{" in hint:  # another package, the checkout's install, a template
                            continue
                        hints.append(hint)
                        named = re.findall(r"'nbest-rerank\[([a-z0-9]+)\]'", hint)
                        if (
                            not named
                            or any(extra not in extras for extra in named)
                            or re.search(r"(?<!nbest-)rerank\[|-e \.", hint)
                        ):
                            wrong.append(f"{path}:{lineno}: {hint}")
    assert len(hints) >= 8 and not wrong, wrong
    from rerank.cli import OPTIONAL_MODULES  # the template's extras: a missing optional package's hint

    assert set(OPTIONAL_MODULES.values()) <= extras


def test_no_install_line_asks_pypi_for_the_unpublished_distribution():
    """The package is not on PyPI yet: no install command in the README or docs/ asks pip for
    ``nbest-rerank`` by name (``No matching distribution found``, issue 78); they install from
    the checkout (``scripts/setup_env.sh``, ``pip install -e .``, a wheel built there)."""
    pages = [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True)
    )
    by_name = re.compile(r"^\s*(?:\$\s*)?pip install\s+(?:-\S+\s+)*['\"]?nbest-rerank\b", re.M)
    found = [
        f"{os.path.relpath(page, ROOT)}: {m.group().strip()}"
        for page in pages
        for m in by_name.finditer(open(page, encoding="utf-8").read())
    ]
    assert not found, found
    readme = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()
    assert "not on PyPI yet" in readme and "bash scripts/setup_env.sh core" in readme
