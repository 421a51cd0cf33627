"""scripts/pipeline_settings.py: a pipeline run in an OUT that holds a run with other
settings is refused before any work (its skipped stages would reuse the other run's outputs);
settings that only add stages may change."""
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pipeline_settings.py"
RUN = ["NBEST=20", "ARCH=gru", "MAX_EPOCH=12", "JOBS=2", "TUNERS=mira mert", "REPLICAS=3"]


def _settings(path, *pairs):
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *pairs], capture_output=True, text=True)


def test_first_run_writes_the_settings_and_versions(tmp_path):
    path = tmp_path / "settings.json"
    assert _settings(path, *RUN).returncode == 0
    written = json.loads(path.read_text())
    assert written["settings"] == {"NBEST": "20", "ARCH": "gru", "MAX_EPOCH": "12", "JOBS": "2",
                                   "TUNERS": "mira mert", "REPLICAS": "3"}
    assert written["script"] == "scripts/run_pipeline.sh" and "sacrebleu" in written["signature"]


def test_the_same_settings_or_additive_changes_resume(tmp_path):
    path = tmp_path / "settings.json"
    _settings(path, *RUN)
    assert _settings(path, *RUN).returncode == 0
    changed = ["NBEST=20", "ARCH=gru", "MAX_EPOCH=12", "JOBS=1", "TUNERS=mira", "REPLICAS=5"]
    assert _settings(path, *changed).returncode == 0
    assert json.loads(path.read_text())["settings"]["REPLICAS"] == "5"


def test_another_configuration_in_the_same_out_is_refused_and_nothing_written(tmp_path):
    path = tmp_path / "settings.json"
    _settings(path, *RUN)
    before = path.read_text()
    run = _settings(path, "NBEST=50", "ARCH=transformer-tiny", "MAX_EPOCH=12", "JOBS=2")
    assert run.returncode == 1 and path.read_text() == before
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"pipeline_settings: error: {path}: this directory holds a run with "
                               "NBEST=20 (this run: 50) and 1 more;")
    assert "use another OUT=" in lines[0]


def test_settings_an_older_run_did_not_record_are_not_compared(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"settings": {"NBEST": "20"}}))
    assert _settings(path, "NBEST=20", "ARCH=transformer-tiny").returncode == 0


def test_a_file_that_is_not_ours_is_refused_in_one_line(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text("{not json")
    run = _settings(path, *RUN)
    assert run.returncode == 1 and path.read_text() == "{not json"
    assert run.stderr.strip() == f"pipeline_settings: error: {path}: not a pipeline settings file; " \
                                 "use another OUT= or remove it"
