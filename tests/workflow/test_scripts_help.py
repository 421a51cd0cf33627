"""Every script in scripts/ answers ``--help`` with its help and does nothing else (issue 78):
exit 0, the text on standard output, no file created or changed in the checkout.
``scripts/setup_env.sh --help`` used to install, taking ``--help`` as the kind of install."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT as ROOT_DIR

ROOT = Path(ROOT_DIR)
SCRIPTS = sorted(p.name for p in (ROOT / "scripts").iterdir() if p.suffix in (".sh", ".py"))


def _tree(root: Path) -> dict:
    """{relative path: (size, mtime)} of every file under ``root`` but the linked .venv."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".venv"]
        for name in files:
            path = Path(folder) / name
            found[str(path.relative_to(root))] = (path.stat().st_size, path.stat().st_mtime_ns)
    return found


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """A copy of the checkout's scripts, settings and package metadata, its .venv linked."""
    root = tmp_path_factory.mktemp("checkout")
    for part in ("scripts", "workflow", "config"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))
    for name in ("pyproject.toml", "setup.py"):
        shutil.copy(ROOT / name, root / name)
    if (ROOT / ".venv").is_dir():
        (root / ".venv").symlink_to(ROOT / ".venv")
    return root


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_script_answers_help_and_does_nothing_else(checkout, script):
    before = _tree(checkout)
    path = checkout / "scripts" / script
    command = [sys.executable, str(path)] if script.endswith(".py") else ["bash", str(path)]
    # a script that installs would make this venv (setup_env.sh took --help as a kind of install)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "VENV": str(checkout / ".venv-probe")}
    run = subprocess.run([*command, "--help"], capture_output=True, text=True, env=env, cwd=checkout, timeout=120)
    assert run.returncode == 0, (script, run.stderr[-1000:])
    assert len(run.stdout.strip().splitlines()) >= 2, (script, run.stdout)
    assert _tree(checkout) == before, f"{script} --help created or changed files"
    assert not list(checkout.glob(".venv-*")) and not (checkout / "out").exists()


def test_setup_env_names_its_kinds_and_refuses_another(checkout):
    run = subprocess.run(["bash", str(checkout / "scripts" / "setup_env.sh"), "--help"], capture_output=True, text=True)
    assert "setup_env.sh core" in run.stdout and "setup_env.sh nmt" in run.stdout
    run = subprocess.run(
        ["bash", str(checkout / "scripts" / "setup_env.sh"), "everything"], capture_output=True, text=True
    )
    assert run.returncode == 2
    assert run.stderr.strip() == "setup_env: error: unknown kind of install 'everything' (core or nmt; --help)"
