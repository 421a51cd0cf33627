"""scripts/learning_curves.py: fairseq validation lines per epoch, the last sitting's line
of a repeated epoch, seconds per epoch within a sitting, one-line errors."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "learning_curves.py")

V = (
    "2026-11-24 02:43:50 | INFO | valid | epoch {e:03d} | valid on 'valid' subset | loss 5.689 | nll_loss {n} | "
    "ppl 20.69 | bleu {b} | wps 972.2 | wpb 2585.2 | bsz 169 | num_updates 620 | best_bleu {b}\n"
)
T = (
    "2026-11-24 03:41:19 | INFO | train | epoch {e:03d} | loss 4.058 | nll_loss 2.546 | ppl 5.84 | wps 1827.1 | "
    "num_updates 2356 | lr 0.00325748 | gnorm 0.603 | clip 2.4 | train_wall 216 | wall {w}\n"
)
R2L = (
    "2026-11-24 02:43:50 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.2 | nll_loss 7.007 | "
    "ppl 128.6 | wps 972.2 | wpb 2585.2 | bsz 169 | num_updates 240\n"
)


def test_epochs_sittings_and_seconds_per_epoch(tmp_path):
    log = tmp_path / "train.log"
    # sitting 1: epochs 1-3 (epoch 3 stopped before its validation); sitting 2 redoes epoch 3
    log.write_text(
        T.format(e=1, w=200)
        + V.format(e=1, n=8.13, b=1.74)
        + T.format(e=2, w=450)
        + V.format(e=2, n=6.985, b=5.44)
        + T.format(e=3, w=690)
        + "some other line\n"
        + T.format(e=3, w=260)
        + V.format(e=3, n=5.905, b=9.98)
        + T.format(e=4, w=500)
        + V.format(e=4, n=4.909, b=16.41)
    )
    r2l = tmp_path / "r2l.log"
    r2l.write_text(R2L)
    out = tmp_path / "curves"
    run = subprocess.run(
        [sys.executable, SCRIPT, f"base={log}", f"r2l={r2l}", "--out", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    data = json.loads((tmp_path / "curves.json").read_text())
    assert data["base"]["epochs"] == {
        "1": {"nll": 8.13, "bleu": 1.74},
        "2": {"nll": 6.985, "bleu": 5.44},
        "3": {"nll": 5.905, "bleu": 9.98},
        "4": {"nll": 4.909, "bleu": 16.41},
    }
    assert data["base"]["epoch_seconds"] == [250, 240, 240] and data["base"]["median_epoch_s"] == 240
    assert data["r2l"]["epochs"] == {"1": {"nll": 7.007}} and data["r2l"]["median_epoch_s"] is None
    table = (tmp_path / "curves.md").read_text().splitlines()
    assert table[0] == "| epoch | base NLL | base BLEU | r2l NLL | r2l BLEU |"
    assert table[2] == "| 1 | 8.130 | 1.74 | 7.007 | – |" and table[5] == "| 4 | 4.909 | 16.41 | – | – |"
    assert f"base: {log}, median 240 s per epoch" in table


def test_a_log_without_validation_lines_or_a_bad_argument_is_one_line(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    for args, message in (
        ([f"x={empty}"], f"{empty}: no fairseq validation lines"),
        ([str(empty)], f"{empty}: expected NAME=LOG"),
        ([f"x={tmp_path / 'absent'}"], "absent: no such file"),
    ):
        run = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
        assert run.returncode == 1 and len(run.stderr.strip().splitlines()) == 1 and message in run.stderr
