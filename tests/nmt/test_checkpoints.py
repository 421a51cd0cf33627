"""The trust boundary of a model file (rerank.nmt.checkpoints): a checkpoint whose pickle
names a callable beyond fairseq's own classes is refused in one line before anything of it
runs — by the Python API, by every verb that loads one, and inside the fairseq processes we
start — and runs only with the opt-in (--trust-checkpoint, RERANK_TRUST_CHECKPOINTS=1)."""

import argparse
import os

import pytest

from tests.conftest import needs

pytestmark = needs("nmt")

import torch  # noqa: E402

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.nmt.checkpoints import (  # noqa: E402
    TRUST_ENV,
    UntrustedCheckpoint,
    check_checkpoint,
    fairseq_environ,
    load_state,
    loading,
)


class _CreatesAFile:
    """What a crafted checkpoint holds: unpickling it runs ``os.system`` (here: touch a file)."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def crafted_checkpoint(path, marker, base=None):
    """A fairseq-shaped checkpoint (``base``'s state, or a minimal one) whose ``args`` run
    code when unpickled; returns ``path``."""
    state = dict(base) if base is not None else {"model": {"w": torch.zeros(2)}, "cfg": {}}
    state["args"] = _CreatesAFile(marker)
    torch.save(state, path)
    return str(path)


def test_a_checkpoint_of_fairseqs_own_classes_loads_weights_only(tmp_path):
    path = tmp_path / "ok.pt"
    torch.save({"model": {"w": torch.ones(3)}, "args": argparse.Namespace(arch="x"), "best": 1.5}, path)
    check_checkpoint(str(path))
    state = load_state(str(path))
    assert state["args"].arch == "x" and state["model"]["w"].tolist() == [1.0, 1.0, 1.0]


def test_a_crafted_checkpoint_is_refused_before_it_runs(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # the old advice does not open the door
    marker = tmp_path / "pwned"
    path = crafted_checkpoint(tmp_path / "evil.pt", marker)
    with pytest.raises(UntrustedCheckpoint, match=r"holds posix\.system, .*could run code.*--trust-checkpoint"):
        check_checkpoint(path)
    with pytest.raises(UntrustedCheckpoint):
        load_state(path)
    with pytest.raises(UntrustedCheckpoint, match="posix.system"):  # fairseq's own torch.load, in this process
        with loading(path=path):
            torch.load(path, map_location="cpu")
    assert os.environ["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"  # restored after the block
    assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD" not in fairseq_environ()  # nor passed to fairseq
    assert not marker.exists()


def test_the_opt_in_loads_a_crafted_checkpoint(tmp_path, monkeypatch):
    marker = tmp_path / "ran"
    path = crafted_checkpoint(tmp_path / "evil.pt", marker)
    load_state(path, trust=True)
    assert marker.exists()  # what trusting a file means
    os.remove(marker)
    monkeypatch.setenv(TRUST_ENV, "1")
    check_checkpoint(path)
    assert fairseq_environ()["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"] == "1"


def test_a_legacy_or_foreign_file_is_refused(tmp_path):
    legacy = tmp_path / "legacy.pt"
    torch.save({"model": {}}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(UntrustedCheckpoint, match="not a checkpoint of torch.save's zip format"):
        check_checkpoint(str(legacy))
    with pytest.raises(InputError, match="no such checkpoint"):
        check_checkpoint(str(tmp_path / "missing.pt"))
    (tmp_path / "notes.pt").write_text("not a model\n")
    with pytest.raises(InputError, match="is not a torch checkpoint") as caught:
        check_checkpoint(str(tmp_path / "notes.pt"))
    assert not isinstance(caught.value, UntrustedCheckpoint)


def test_the_fairseq_scorer_refuses_a_crafted_checkpoint(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    from rerank.features.nmt_scorer import load_checkpoint

    marker = tmp_path / "pwned"
    path = crafted_checkpoint(tmp_path / "evil.pt", marker)
    with pytest.raises(UntrustedCheckpoint):
        load_checkpoint(path, str(tmp_path))
    nbest = tmp_path / "l.nbest"
    nbest.write_text("0 ||| ein hund ||| F= -1 ||| -1\n")
    (tmp_path / "src").write_text("a dog\n")
    argv = ["features", "add", "--nbest", str(nbest), "--source", str(tmp_path / "src"), "--out", str(tmp_path / "o")]
    assert main([*argv, "--scorer", f"fairseq:{path},dict={tmp_path},bpe=none"]) == 1
    err = capsys.readouterr().err.strip()
    assert "posix.system" in err and "--trust-checkpoint" in err and "\n" not in err
    assert not marker.exists() and not (tmp_path / "o").exists()


def test_training_does_not_resume_from_a_crafted_checkpoint(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    from rerank.nmt.train import TrainConfig, average_checkpoints, train

    save = tmp_path / "model"
    save.mkdir()
    marker = tmp_path / "pwned"
    crafted_checkpoint(save / "checkpoint_last.pt", marker)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "dict.de.txt").write_text("")
    with pytest.raises(UntrustedCheckpoint, match="checkpoint_last.pt"):
        train(str(bin_dir), str(save), TrainConfig(max_update=1))
    with pytest.raises(UntrustedCheckpoint):
        average_checkpoints([str(save / "checkpoint_last.pt")], str(tmp_path / "avg.pt"))
    assert not marker.exists()


def test_a_fairseq_process_ignores_a_rerank_directory_in_its_working_directory(tmp_path):
    """The main job's tuning runs live in OUT/rerank, and its rules run inside OUT: ``python -m
    fairseq_cli.…`` would import that directory as the package (no rerank.nmt: the user dir
    fails to load) unless the process's environment keeps the working directory off sys.path."""
    import subprocess
    import sys

    from rerank.nmt.checkpoints import fairseq_environ

    (tmp_path / "rerank" / "nmt").mkdir(parents=True)  # what the tuning stages leave in OUT (rerank/nmt: +nmt)
    probe = [sys.executable, "-c", "import rerank.nmt.checkpoints"]
    shadowed = subprocess.run(
        probe, cwd=tmp_path, capture_output=True, text=True, env={**fairseq_environ(), "PYTHONSAFEPATH": ""}
    )
    assert shadowed.returncode != 0 and "No module named 'rerank.nmt.checkpoints'" in shadowed.stderr
    done = subprocess.run(probe, cwd=tmp_path, capture_output=True, text=True, env=fairseq_environ())
    assert done.returncode == 0, done.stderr
