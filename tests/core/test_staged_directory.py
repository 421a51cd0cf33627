"""Every write of the library goes through rerank/outputs.py (issue 77, item 3): files by
``atomic_write`` / ``StagedOutputs``, directories (models, binarised data, packed systems) by
``staged_directory`` — whole or not at all, locked while written, a killed run's temporary
swept by the next — and no module renames a fixed-name ``.tmp`` by hand any more."""

import ast
import fcntl
import os
import pathlib

import pytest

from rerank.errors import InputError
from rerank.outputs import PARTIAL_SUFFIX, staged_directory
from tests.conftest import ROOT


def test_a_staged_directory_appears_whole_and_replaces_the_old_one(tmp_path):
    target = tmp_path / "bin"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with staged_directory(str(target)) as tmp:
        assert os.path.dirname(tmp) == str(tmp_path) and tmp.endswith(PARTIAL_SUFFIX)
        assert (target / "old.txt").read_text() == "old"  # untouched while the new one is written
        (pathlib.Path(tmp) / "dict.txt").write_text("new")
        os.symlink("dict.txt", os.path.join(tmp, "link.txt"))  # relative links keep pointing inside
    assert sorted(os.listdir(target)) == ["dict.txt", "link.txt"] and (target / "link.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == ["bin"]  # no temporary, no old copy left
    # fresh: the writer makes the directory itself (CTranslate2's converter refuses an existing one)
    with staged_directory(str(tmp_path / "ct2"), replace=False, fresh=True) as model:
        assert not os.path.exists(model) and os.path.isdir(os.path.dirname(model))
        os.makedirs(model)
        (pathlib.Path(model) / "model.bin").write_bytes(b"1")
    assert sorted(os.listdir(tmp_path)) == ["bin", "ct2"] and os.listdir(tmp_path / "ct2") == ["model.bin"]


def test_a_failed_write_leaves_the_old_directory_and_no_temporary(tmp_path):
    target = tmp_path / "bin"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError):
        with staged_directory(str(target)) as tmp:
            (pathlib.Path(tmp) / "half.bin").write_bytes(b"\0" * 10)
            raise RuntimeError("fairseq-preprocess died")
    assert os.listdir(tmp_path) == ["bin"] and os.listdir(target) == ["old.txt"]
    # a directory that must be new: a non-empty one is refused, and kept
    with pytest.raises(InputError, match="exists and is not an empty directory"):
        with staged_directory(str(target), replace=False) as tmp:
            (pathlib.Path(tmp) / "model.bin").write_bytes(b"1")
    assert os.listdir(tmp_path) == ["bin"] and os.listdir(target) == ["old.txt"]


def test_a_killed_writers_temporary_is_swept_and_a_live_ones_is_not(tmp_path):
    dead = tmp_path / f".bin.dead0000{PARTIAL_SUFFIX}"
    dead.mkdir()
    (dead / "half.bin").write_bytes(b"\0")
    live = tmp_path / f".other.live0000{PARTIAL_SUFFIX}"
    live.mkdir()
    fd = os.open(live, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another run still writing it
    try:
        with staged_directory(str(tmp_path / "bin")) as tmp:
            (pathlib.Path(tmp) / "x").write_text("x")
        assert sorted(os.listdir(tmp_path)) == sorted(["bin", live.name])
    finally:
        os.close(fd)


def test_no_module_renames_a_temporary_by_hand():
    """``os.replace``/``os.rename`` and ``.tmp`` names appear in rerank/outputs.py only."""
    found = []
    for path in sorted(pathlib.Path(ROOT, "rerank").rglob("*.py")):
        if path.name == "outputs.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in ("replace", "rename"):
                if isinstance(node.value, ast.Name) and node.value.id == "os":
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} os.{node.attr}")
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith(".tmp"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not found, found
