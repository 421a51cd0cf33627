"""No silent minutes (issue 78): every step of scripts/setup_env.sh, scripts/slurm_cluster.sh
and the pipeline's preparation that takes more than a few seconds says what it does, and about
how long it takes, in one line before it starts — a user can tell slow from hung.  Before,
setup_env.sh ran pip with -q (nothing for the whole torch and fairseq install) and
slurm_cluster.sh printed one line, then nothing through apt-get."""

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT as ROOT_DIR

ROOT = Path(ROOT_DIR)


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_setup_env_names_each_phase_before_it_starts(tmp_path):
    """A stand-in venv whose pip logs its calls: each phase's line (with its estimate) comes
    before the pip call it announces, and pip's own lines are let through."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    log = tmp_path / "calls"
    _stub(venv / "bin", "pip", f'echo "pip $*" >> {log}; echo "Collecting something"\n')
    _stub(venv / "bin", "python", 'case "$*" in *"import rerank"*) exit 0 ;; esac; exit 1\n')
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "setup_env.sh"), "nmt"],
        capture_output=True,
        text=True,
        env={**os.environ, "VENV": str(venv)},
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    expected = [
        "setup_env: updating pip, wheel and setuptools (seconds)",
        "setup_env: installing torch 2.13.0, CPU build (about 1 min from the cache, several from the network)",
        "setup_env: installing rerank with every extra: fairseq builds from source the first time (about 5 min on 2 "
        "idle cores; under a minute once its wheel is cached), then transformers, CTranslate2, Snakemake, … (1-3 min)",
    ]
    assert [line for line in lines if line in expected] == expected, lines
    assert lines[-1].startswith("setup_env: done in ") and lines[-1].endswith(f" s: {venv}")
    calls = log.read_text().splitlines()
    assert [c.split()[-1] for c in calls] == ["setuptools", "torch==2.13.0", f"{ROOT}[all,test,dev]"]
    assert not any(" -q " in c for c in calls[1:])  # the long installs speak
    assert run.stdout.count("Collecting something") == len(calls)  # pip's own lines let through


def test_slurm_cluster_names_apt_get_and_what_it_unpacks(tmp_path):
    """apt-get stood in by a stub that unpacks two packages, then fails: the update and the
    install are each announced with an estimate, every unpacked package is named, and the
    failure is one line (exit 2: this machine cannot host a cluster)."""
    if os.geteuid() != 0:
        pytest.skip("slurm_cluster.sh installs only as root")
    stubs = tmp_path / "bin"
    stubs.mkdir()
    _stub(
        stubs,
        "apt-get",
        'case "$1" in update) echo "Hit:1 deb.debian.org"; exit 0 ;; esac\n'
        'echo "Unpacking slurm-wlm (23.02.6-1) ..."; echo "Unpacking munge (0.5.15-2) ..."; exit 100\n',
    )
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "slurm_cluster.sh"), "start", str(tmp_path / "state")],
        capture_output=True,
        text=True,
        env={"PATH": f"{stubs}:/usr/bin:/bin", "RERANK_SLURM_CONF": str(tmp_path / "slurm.conf")},
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.splitlines()
    assert (
        lines[0]
        == f"slurm_cluster: apt-get update: Debian's package lists (under a minute; its log: {tmp_path / 'state'}/apt.log)"
    )
    assert (
        lines[1] == "slurm_cluster: apt-get install slurm-wlm munge (1-3 min; every package it unpacks is named below)"
    )
    assert lines[2:4] == ["slurm_cluster:   unpacking slurm-wlm", "slurm_cluster:   unpacking munge"]
    assert lines[4].startswith("slurm_cluster: cannot host a cluster here: apt-get install slurm-wlm munge failed")
    assert not (tmp_path / "slurm.conf").exists()


def test_prepare_names_its_long_phases(tmp_path):
    pytest.importorskip("fairseq")
    from tests.nmt.test_nmt import _write_corpus

    _write_corpus(str(tmp_path / "m30k"))
    rerank = Path(os.environ.get("VIRTUAL_ENV", "")) / "bin" / "rerank"
    rerank = rerank if rerank.is_file() else ROOT / ".venv" / "bin" / "rerank"
    run = subprocess.run(
        [str(rerank), "nmt", "prepare", "--data", str(tmp_path / "m30k"), "--out", str(tmp_path / "data")]
        + ["--bpe-merges", "40", "--workers", "1"],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    phases = [line for line in run.stderr.splitlines() if line.startswith("prepare: ")]
    assert phases[0].startswith(
        "prepare: learning the subword step (subword-nmt, 40 merges) on 600 training lines (about "
    )
    assert sum(line.startswith("prepare: applying the subword step to ") for line in phases) == 6
    assert (
        phases[-1]
        == "prepare: binarising train, val, test_2016_flickr with fairseq-preprocess (seconds per 10,000 lines)"
    )
