"""scripts/stage.sh: a stage's recorded wall time covers all its sittings, including one that
failed or was killed, and a finished stage is skipped."""

import os
import signal
import subprocess
import time
from pathlib import Path

STAGE_SH = Path(__file__).resolve().parents[1] / "scripts" / "stage.sh"

SCRIPT = f"""set -euo pipefail
TIMINGS=$PWD/timings.tsv; touch "$TIMINGS"
source {STAGE_SH}
STAGE_HEARTBEAT=1
work() {{ sleep "$1"; [ "$2" = ok ] || return 1; touch out; }}
stage work out work "$@"
"""


def _run(tmp_path, *args):
    return subprocess.run(["bash", "-c", SCRIPT, "stage-test", *args], cwd=tmp_path, capture_output=True, text=True)


def _table(path):
    if not path.exists():
        return {}
    return {line.split("\t")[0]: line.split("\t")[1:] for line in path.read_text().splitlines()}


def test_a_failed_sitting_counts_when_the_stage_is_resumed(tmp_path):
    first = _run(tmp_path, "2.5", "fail")
    assert first.returncode != 0 and not (tmp_path / "out").exists()
    assert "work" not in _table(tmp_path / "timings.tsv")
    earlier = int(_table(tmp_path / "timings.tsv.partial")["work"][0])
    assert 1 <= earlier <= 3  # the heartbeat wrote it during the sitting (every second)

    second = _run(tmp_path, "1", "ok")
    assert second.returncode == 0, second.stderr
    assert f"resumed; {earlier} s in earlier sittings" in second.stdout
    seconds, output = _table(tmp_path / "timings.tsv")["work"]
    assert earlier + 1 <= int(seconds) <= earlier + 3  # this sitting's second added to the earlier ones
    assert output == str(tmp_path / "out")
    assert "work" not in _table(tmp_path / "timings.tsv.partial")  # nothing left over for a later run

    third = _run(tmp_path, "5", "ok")
    assert "work: done" in third.stdout and _table(tmp_path / "timings.tsv")["work"][0] == seconds


def test_a_killed_sitting_counts_and_its_heartbeat_ends(tmp_path):
    process = subprocess.Popen(
        ["bash", "-c", SCRIPT, "stage-test", "30", "ok"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    partial = tmp_path / "timings.tsv.partial"
    deadline = time.monotonic() + 20
    while int(_table(partial).get("work", ["0"])[0]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGKILL)  # the whole job, as Ctrl-C or a lost session would
    process.wait()
    earlier = int(_table(partial)["work"][0])
    assert earlier >= 2
    time.sleep(1.5)  # no heartbeat survives the kill to overwrite the file
    assert int(_table(partial)["work"][0]) == earlier

    resumed = _run(tmp_path, "0", "ok")
    assert resumed.returncode == 0, resumed.stderr
    assert earlier <= int(_table(tmp_path / "timings.tsv")["work"][0]) <= earlier + 1
