"""scripts/family_table.py: the embedding family's table from run_family.sh's files — train and
evaluation time, mean recall (MULE's mR: the mean of both directions' r@1/5/10), STS, word
similarity with coverage; a missing file leaves its cell empty."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "family_table.py")


def write(path, value):
    path.write_text(json.dumps(value), encoding="utf-8")


def model_dir(root, name, eval_seconds=None):
    d = root / name
    d.mkdir()
    model = {"objective": "mule", "langs": ["en", "de"], "beta": 0.5, "margin": 0.2}
    model.update(similarity="cosine", encoder="gru")
    history = [{"step": 300, "rsum": 10.0}, {"step": 600, "rsum": 12.5}, {"step": 700, "rsum": 11.0}]
    write(d / "config.json", {"config": {"model": model}, "history": history})
    write(d / "train_seconds", 600)
    if eval_seconds is not None:
        write(d / "eval_seconds", eval_seconds)
    isr = {
        "image_to_sentence": {"r@1": 10.0, "r@5": 30.0, "r@10": 50.0, "mrank": 10.0},
        "sentence_to_image": {"r@1": 20.0, "r@5": 40.0, "r@10": 60.0, "mrank": 8.0},
    }
    write(d / "isr.de.json", isr)
    write(d / "sts.en.json", {"pearson": 0.8123, "n": 750})
    words = {p: {"spearman": 0.25, "coverage": 52.9} for p in ("en", "de", "en-de")}
    write(d / "simlex.json", words)
    return d


def test_train_and_evaluation_time_and_means(tmp_path):
    model_dir(tmp_path, "timed", eval_seconds=25)
    model_dir(tmp_path, "untimed")
    run = subprocess.run(
        [sys.executable, SCRIPT, str(tmp_path), "timed", "untimed", "absent"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    rows = json.loads((tmp_path / "family_table.json").read_text(encoding="utf-8"))
    assert [r["model"] for r in rows] == ["timed", "untimed"]  # a model without config.json has no row
    assert rows[0]["eval_seconds"] == 25 and rows[1]["eval_seconds"] is None
    assert rows[0]["best_step"] == 600 and rows[0]["steps"] == 700
    assert rows[0]["isr_de"]["mean_recall"] == (10 + 30 + 50 + 20 + 40 + 60) / 6  # 35.0
    table = (tmp_path / "family_table.md").read_text(encoding="utf-8").splitlines()
    assert "| train min | eval s |" in table[2]
    # 600 s = 10.0 min; 25 s; German ISR; no English ISR file; STS; SimLex; no WordSim-353 file
    assert table[4] == (
        "| timed | β 0.5, cosine, gru, margin 0.2 | 10.0 | 25 | 10.0/30.0/50.0 | 20.0/40.0/60.0 | 35.0 | – "
        "| 0.812 | 0.250 (53) | 0.250 (53) | 0.250 (53) | – | – | – |"
    )
    assert table[5].startswith("| untimed | β 0.5, cosine, gru, margin 0.2 | 10.0 | – |")
    readme = (tmp_path / "family_readme.md").read_text(encoding="utf-8").splitlines()
    assert readme[0].count("|") == readme[1].count("|") == readme[2].count("|")
    assert readme[2].startswith("| timed | 0.812 | – | 0.250 | – | 10 | 25 | ")
