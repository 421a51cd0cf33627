"""What the documentation tells a newcomer works on their machine (issue 78): no absolute path
of a maintainer's machine anywhere a user reads or copies from (docs/, the README, scripts/'
defaults and help, the recorded peer command), and the tiny checkpoints neural-metrics.md
offers for an offline try are built by the command it gives and score."""

import json
import math
import os
import re
import subprocess
import sys

from tests.conftest import ROOT, needs

#: a path that names one machine's directories (a user's home, a maintainer's work tree), not a
#: system location every machine has (``/tmp``, ``/etc/slurm``, ``/usr/bin``)
MACHINE_PATH = re.compile(r"(?<![\w.$}/-])/(?:work|home|root|Users|mnt|opt)/[\w.-]+")
WHERE = ("docs", "scripts", "config", "workflow", "profiles", os.path.join("tests", "data"))


def _files():
    yield os.path.join(ROOT, "README.md")
    for top in WHERE:
        for folder, dirs, names in os.walk(os.path.join(ROOT, top)):
            dirs[:] = [d for d in dirs if d not in ("__pycache__", ".snakemake")]
            yield from (
                os.path.join(folder, n) for n in names if n.endswith((".md", ".py", ".sh", ".json", ".yaml", ".smk"))
            )


def test_no_absolute_path_of_a_maintainers_machine():
    found = []
    for path in _files():
        with open(path, encoding="utf-8") as handle:
            for lineno, line in enumerate(handle, start=1):
                found += [f"{os.path.relpath(path, ROOT)}:{lineno}: {m.group()}" for m in MACHINE_PATH.finditer(line)]
    assert not found, found


def test_the_tiny_checkpoints_command_builds_checkpoints_that_score(tmp_path):
    needs("comet", "bertscore")
    built = tmp_path / "models" / "tiny"
    run = subprocess.run(
        [sys.executable, os.path.join(ROOT, "scripts", "tiny_checkpoints.py"), str(built)],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert sorted(p.name for p in built.iterdir() if p.is_dir()) == ["bert", "da", "encoder", "kiwi"]
    (tmp_path / "hyp.de").write_text("ein mann fährt fahrrad .\nzwei hunde .\n")
    (tmp_path / "ref.de").write_text("ein mann fährt ein fahrrad .\nzwei hunde spielen .\n")
    (tmp_path / "src.en").write_text("a man rides a bike .\ntwo dogs play .\n")
    metrics = (
        f"comet:{built / 'da'},source={tmp_path / 'src.en'},cometkiwi:{built / 'kiwi'},source={tmp_path / 'src.en'}"
    )
    metrics += f",bertscore:{built / 'bert'}"
    rerank = os.path.join(os.path.dirname(sys.executable), "rerank")
    run = subprocess.run(
        [
            rerank,
            "eval",
            "--hyp",
            str(tmp_path / "hyp.de"),
            "--ref",
            str(tmp_path / "ref.de"),
            "--metrics",
            metrics,
            "--json",
        ],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(run.stdout)
    assert [row["label"] for row in rows] == ["COMET", "CometKiwi", "BERTScore"], rows
    assert all(math.isfinite(row["score"]) for row in rows)
