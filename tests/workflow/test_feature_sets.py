"""The one table of feature sets (workflow/settings/feature_sets.py): what the rules run for
each set is read from it (hand-written here for the default system and for a generator of
one's own), and a new feature set is one row — the row docs/extending.md shows: the schema's
choices, the help, the settings' checks and Snakemake's plan all take it from that row alone."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT as ROOT_DIR

pytest.importorskip("yaml")
pytest.importorskip("jsonschema")

ROOT = Path(ROOT_DIR)
sys.path.insert(0, str(ROOT / "workflow"))
import settings  # noqa: E402  (workflow/settings/)

sys.path.remove(str(ROOT / "workflow"))


def test_the_default_systems_scorers_come_from_the_table(tmp_path):
    config = settings.complete({"out": str(tmp_path / "out")})
    out, r2l = str(tmp_path / "out"), str(tmp_path / "out" / "models" / "r2l.transformer-tiny")
    table = settings.feature_scorers(config)
    assert list(table) == settings.feature_sets()
    assert {name: table[name] for name in config["features"]} == {
        "r2l": ("R2L", [f"nmt:{r2l}"], f"{r2l}/train.done"),
        "mbr": ("MBR", ["mbr:bleu", "mbr:chrf"], None),
        "len": ("Len", [f"len:{out}/data"], f"{out}/data/prepare.json"),
        "ibm1": ("IBM1", [f"ibm1:{out}/data"], f"{out}/data/prepare.json"),
    }
    assert settings.TORCH_SETS == ("mlmme", "r2l", "channel", "lm", "l2r2", "e5", "qe")


def test_a_generator_of_ones_own_reads_raw_text_through_the_tables_raw_scorers(tmp_path):
    model = tmp_path / "opus"
    model.mkdir()
    (model / "config.json").write_text("{}")
    pairs = {}
    for split in ("train", "valid", "test"):
        for side, text in (("src", "a b\n"), ("tgt", "x y\n")):
            (tmp_path / f"{split}.{side}").write_text(text)
        pairs[split.upper()] = f"{tmp_path / f'{split}.src'},{tmp_path / f'{split}.tgt'}"
    environ = {
        "SYSTEM": "tiny",
        "OUT": str(tmp_path / "out"),
        "GENERATOR": f"hf:{model},name=OPUS",
        "CHANNEL_MODEL": f"hf:{model}",
        "FEATURES": "mbr+len+ibm1+channel",
        **pairs,
    }
    table = settings.feature_scorers(settings.from_environment(environ))
    train = f"src={tmp_path / 'train.src'},tgt={tmp_path / 'train.tgt'}"
    assert {name: table[name] for name in ("channel", "mbr", "len", "ibm1")} == {
        "channel": ("Channel", [f"hf:{model},direction=backward,name=Channel"], None),
        "mbr": ("MBR", ["mbr:bleu,feature=OPUS", "mbr:chrf,feature=OPUS"], None),
        "len": ("Len", [f"len:{train}"], None),
        "ibm1": ("IBM1", [f"ibm1:{train}"], None),
    }


def _documented_row() -> str:
    """The row docs/extending.md shows (its indented block), as the table's last row."""
    page = (ROOT / "docs" / "extending.md").read_text(encoding="utf-8")
    (row,) = [line.strip() for line in page.splitlines() if line.startswith("    FeatureSet(")]
    return f"\nFEATURE_SETS = FEATURE_SETS + ({row},)\n"


@pytest.mark.workflow
@pytest.mark.skipif(
    shutil.which("snakemake") is None and not (ROOT / ".venv" / "bin" / "snakemake").exists(),
    reason="snakemake is not installed (the [workflow] extra)",
)
def test_a_new_feature_set_is_one_row(tmp_path):
    checkout = tmp_path / "checkout"
    for part in ("workflow", "config", "scripts"):
        shutil.copytree(ROOT / part, checkout / part, ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))
    table = checkout / "workflow" / "settings" / "feature_sets.py"
    source = table.read_text()
    marker = "\n#: {name: its row}"
    table.write_text(
        source.replace(marker, _documented_row() + marker, 1)
    )  # the row, before what is derived from the table
    python = [sys.executable, str(checkout / "workflow" / "settings")]
    env = {**os.environ, "OUT": str(checkout / "out" / "toy"), "FEATURES": "r2l+toy", "DATA": str(tmp_path / "m30k")}
    shown = subprocess.run([*python, "help"], capture_output=True, text=True, env=env)
    assert shown.returncode == 0 and "toy: a toy set of length features" in " ".join(shown.stdout.split())
    config = subprocess.run([*python, "config"], capture_output=True, text=True, env=env)
    assert config.returncode == 0, config.stderr
    assert json.loads(config.stdout)["features"] == ["r2l", "toy"]
    refused = subprocess.run([*python, "config"], capture_output=True, text=True, env={**env, "FEATURES": "tyo"})
    assert refused.returncode == 1 and "unknown feature set 'tyo'" in refused.stderr and "toy" in refused.stderr
    (tmp_path / "config.json").write_text(config.stdout)
    exe = shutil.which("snakemake") or str(ROOT / ".venv" / "bin" / "snakemake")
    plan = subprocess.run(
        [
            exe,
            "-n",
            "-p",
            "-s",
            str(checkout / "workflow" / "Snakefile"),
            "--configfile",
            str(tmp_path / "config.json"),
        ],
        capture_output=True,
        text=True,
        cwd=checkout,
    )
    assert plan.returncode == 0, plan.stderr + plan.stdout
    out = checkout / "out" / "toy"
    for split in ("val", "test"):
        assert (
            f"rerank features add --nbest {out}/nbest/{split}.r2l.nbest --scorer len:{out}/data" in plan.stdout
            and f"--out {out}/nbest/{split}.toy.nbest" in plan.stdout
        )
    assert "--feature-sets beam,Toy" in plan.stdout


def test_the_runs_own_rerank_directory_does_not_stand_in_for_the_library(tmp_path):
    """A job that Snakemake's SLURM executor starts (``python -m snakemake``) runs in OUT with
    OUT first on its path, and OUT holds the run's ``rerank/`` (its tuning runs): the settings
    still import the library's rules, not that directory as an empty namespace package."""
    pytest.importorskip("rerank.nmt.data")  # the rules are the library's: a python with rerank
    for row in ("nmt", "mbr"):  # what OUT/rerank/ holds: a directory per tuned row
        (tmp_path / "rerank" / row).mkdir(parents=True)
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import settings.library as rules; "
        "print(rules.HAVE_RERANK, rules.SUBWORD_FILES['sentencepiece']); import rerank; print(rerank.__file__)"
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(ROOT / "workflow")], capture_output=True, text=True, cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    shown = run.stdout.split()
    assert shown[:2] == ["True", "spm.model"] and shown[2].endswith(os.path.join("rerank", "__init__.py")), run.stdout
