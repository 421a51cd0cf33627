"""scripts/pipeline_settings.py: a pipeline run in an OUT that holds a run with other
settings is refused before any work (its skipped stages would reuse the other run's outputs);
settings that only add stages may change."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

SCRIPT = Path(ROOT) / "scripts" / "pipeline_settings.py"
RUN = ["NBEST=20", "ARCH=gru", "MAX_EPOCH=12", "JOBS=2", "TUNERS=mira mert", "REPLICAS=3"]


def _settings(path, *pairs):
    return subprocess.run([sys.executable, str(SCRIPT), str(path), *pairs], capture_output=True, text=True)


def test_first_run_writes_the_settings_and_versions(tmp_path):
    path = tmp_path / "settings.json"
    assert _settings(path, *RUN).returncode == 0
    written = json.loads(path.read_text())
    assert written["settings"] == {
        "NBEST": "20",
        "ARCH": "gru",
        "MAX_EPOCH": "12",
        "JOBS": "2",
        "TUNERS": "mira mert",
        "REPLICAS": "3",
    }
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
    assert lines[0].startswith(
        f"pipeline_settings: error: {path}: this directory holds a run with NBEST=20 (this run: 50) and 1 more;"
    )
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
    assert (
        run.stderr.strip() == f"pipeline_settings: error: {path}: not a pipeline settings file; "
        "use another OUT= or remove it"
    )


def test_feature_sets_of_an_older_run_that_did_not_record_them_are_all_of_them(tmp_path):
    # pipelines before FEATURES computed every set (l2r2 only with L2R2=1): a run with fewer
    # sets in that OUT would reuse the old lists, whose +all has every column
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"settings": {"NBEST": "20", "L2R2": "0"}}))
    every = "mlmme r2l channel lm mbr e5 len"
    assert _settings(path, "NBEST=20", "L2R2=0", f"FEATURES={every}").returncode == 0
    path.write_text(json.dumps({"settings": {"NBEST": "20", "L2R2": "0"}}))
    run = _settings(path, "NBEST=20", "L2R2=0", "FEATURES=r2l mbr len")
    assert run.returncode == 1
    assert f"this directory holds a run with FEATURES={every} (this run: r2l mbr len);" in run.stderr


def test_an_older_run_trained_with_the_default_batch_and_schedule(tmp_path):
    # before MAX_TOKENS/LR/WARMUP were settings every model had 4000-token batches and its
    # architecture's schedule: an OUT of such a run is refused for a faster schedule
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    assert _settings(path, "NBEST=50", "MAX_TOKENS=4000", "LR=0", "WARMUP=0").returncode == 0
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    run = _settings(path, "NBEST=50", "MAX_TOKENS=2000", "LR=0", "WARMUP=500")
    assert run.returncode == 1
    assert "this directory holds a run with MAX_TOKENS=4000 (this run: 2000) and 1 more;" in run.stderr
    # and trained in float32 (BF16_AUTOCAST came later)
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    assert _settings(path, "NBEST=50", "BF16_AUTOCAST=0").returncode == 0
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    run = _settings(path, "NBEST=50", "BF16_AUTOCAST=1")
    assert run.returncode == 1 and "this directory holds a run with BF16_AUTOCAST=0 (this run: 1);" in run.stderr
    # and re-ranked the baseline's list alone (R2L_NBEST came later)
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    assert _settings(path, "NBEST=50", "R2L_NBEST=0").returncode == 0
    path.write_text(json.dumps({"settings": {"NBEST": "50"}}))
    run = _settings(path, "NBEST=50", "R2L_NBEST=50")
    assert run.returncode == 1 and "this directory holds a run with R2L_NBEST=0 (this run: 50);" in run.stderr


PIPELINE = SCRIPT.parent / "run_pipeline.sh"


def test_an_unknown_feature_set_is_refused_in_one_line_before_any_work(tmp_path):
    out = tmp_path / "out"
    run = subprocess.run(
        ["bash", str(PIPELINE)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "OUT": str(out), "FEATURES": "r2l+bleurt+len"},
    )
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == (
        "run_pipeline: error: FEATURES: unknown feature set 'bleurt' "
        "(choose from: mlmme r2l channel lm l2r2 mbr e5 len ibm1 qe)"
    )


def _resolved(**env):
    run = subprocess.run(
        ["bash", str(PIPELINE), "--settings"], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", **env}
    )
    assert run.returncode == 0, run.stderr
    return dict(line.split("=", 1) for line in run.stdout.splitlines())


def test_the_default_system_is_the_transformer_and_gru_is_the_papers(tmp_path):
    # issue 20: the default is the strongest configuration measured within 2 hours
    default = _resolved()
    keys = (
        "ARCH",
        "MAX_EPOCH",
        "PATIENCE",
        "AUX_ARCH",
        "AUX_EPOCH",
        "LM_ARCH",
        "FEATURES",
        "NBEST",
        "R2L_NBEST",
        "BF16_AUTOCAST",
    )
    assert {k: default[k] for k in keys} == {
        "ARCH": "transformer-tiny",
        "MAX_EPOCH": "27",
        "PATIENCE": "10",
        "AUX_ARCH": "transformer-tiny",
        "AUX_EPOCH": "28",
        "LM_ARCH": "transformer-tiny",
        "FEATURES": "r2l mbr len ibm1",
        "NBEST": "100",
        "R2L_NBEST": "0",
        "BF16_AUTOCAST": "1",
    }
    assert default["OUT"] == str(PIPELINE.parents[1] / "out" / "multi30k-transformer")
    gru = _resolved(SYSTEM="gru")
    assert {k: gru[k] for k in keys} == {
        "ARCH": "gru",
        "MAX_EPOCH": "12",
        "PATIENCE": "3",
        "AUX_ARCH": "gru",
        "AUX_EPOCH": "16",
        "LM_ARCH": "lstm",
        "FEATURES": "mlmme r2l channel lm l2r2 mbr e5 len",
        "NBEST": "20",
        "R2L_NBEST": "0",
        "BF16_AUTOCAST": "0",
    }
    assert gru["OUT"] == str(PIPELINE.parents[1] / "out" / "multi30k")
    # a variable that is set wins over its system's default; FEATURES in canonical order
    mixed = _resolved(SYSTEM="gru", ARCH="transformer-tiny", FEATURES="len+r2l", OUT=str(tmp_path))
    assert (mixed["ARCH"], mixed["MAX_EPOCH"], mixed["FEATURES"], mixed["OUT"]) == (
        "transformer-tiny",
        "12",
        "r2l len",
        str(tmp_path),
    )
    assert _resolved(AUX_EPOCH="8")["AUX_EPOCH"] == "8"
    # FEATURES=all: every set, also on top of the transformer system
    assert _resolved(FEATURES="all")["FEATURES"] == "mlmme r2l channel lm l2r2 mbr e5 len ibm1"


@pytest.mark.parametrize(
    "env,message",
    [
        ({"R2L_NBEST": "fifty"}, "run_pipeline: error: R2L_NBEST: 'fifty' is not a number"),
        (
            {"R2L_NBEST": "20", "FEATURES": "mbr+len"},
            "run_pipeline: error: R2L_NBEST=20 needs the r2l feature set in FEATURES (or R2L_NBEST=0)",
        ),
    ],
)
def test_an_r2l_list_without_its_model_is_refused_in_one_line_before_any_work(tmp_path, env, message):
    out = tmp_path / "out"
    run = subprocess.run(
        ["bash", str(PIPELINE)], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "OUT": str(out), **env}
    )
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == message
    assert _resolved(FEATURES="mbr", R2L_NBEST="0")["R2L_NBEST"] == "0"


def test_an_unknown_system_or_argument_is_refused_in_one_line_before_any_work(tmp_path):
    out = tmp_path / "out"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out)}
    run = subprocess.run(["bash", str(PIPELINE)], capture_output=True, text=True, env={**env, "SYSTEM": "lstm"})
    assert run.returncode == 1 and not out.exists()
    assert (
        run.stderr.strip() == "run_pipeline: error: SYSTEM: unknown system 'lstm' (choose from: transformer gru tiny)"
    )
    run = subprocess.run(["bash", str(PIPELINE), "--nbest", "50"], capture_output=True, text=True, env=env)
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == (
        "run_pipeline: error: unknown argument '--nbest' (settings are environment variables: --help)"
    )
    run = subprocess.run(["bash", str(PIPELINE)], capture_output=True, text=True, env={**env, "BF16_AUTOCAST": "yes"})
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == "run_pipeline: error: BF16_AUTOCAST: 'yes' is not 0 or 1"


# --- a finished model directory shared with a run of other settings ---------------------


def _trained(save_dir, config):
    """A model directory as rerank nmt train leaves it, as far as the check reads it."""
    from dataclasses import asdict

    save_dir.mkdir(parents=True)
    (save_dir / "train.json").write_text(json.dumps({"config": asdict(config), "kind": "translation"}))
    (save_dir / "train.done").touch()


def test_a_model_trained_with_other_settings_is_refused_by_name(tmp_path):
    import pytest

    from rerank.errors import InputError
    from rerank.nmt.lm import LMConfig
    from rerank.nmt.train import TrainConfig, check_settings

    model = tmp_path / "model"
    _trained(model, TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, seed=1, threads=1))
    check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, seed=1))  # agree
    # how a training runs (threads, device) is not part of the model
    check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, threads=2, device="cpu"))
    with pytest.raises(InputError) as caught:
        check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=60, patience=10, seed=2))
    assert str(caught.value) == (
        f"{model}: holds a model trained with other settings (max_epoch 30 → 60; "
        "seed 1 → 2): remove its train.done to train it on with these settings, "
        "or use another directory"
    )
    # training on in the same directory may take more epochs, not another model
    check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=60, patience=3), resuming=True)
    with pytest.raises(InputError, match=r"arch transformer-tiny → gru"):
        check_settings(str(model), TrainConfig(arch="gru", max_epoch=60, patience=10), resuming=True)
    # a setting the model's train.json lacks (older than it) counts as its default
    stored = json.loads((model / "train.json").read_text())
    del stored["config"]["target_vocab"]
    (model / "train.json").write_text(json.dumps(stored))
    check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10))
    with pytest.raises(InputError, match=r"target_vocab joint → own"):
        check_settings(
            str(model),
            TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, direction="r2l", target_vocab="own"),
        )
    # LMs too; no train.json: nothing to compare
    lm = tmp_path / "lm"
    _trained(lm, LMConfig(max_epoch=3))
    with pytest.raises(InputError, match=r"arch lstm → transformer-tiny"):
        check_settings(str(lm), LMConfig(max_epoch=3, arch="transformer-tiny"))
    check_settings(str(tmp_path / "new"), TrainConfig())
    # a warm-up is a transformer's (0: its architecture's); the GRU has none
    with pytest.raises(InputError, match=r"warm-up 500: .* for transformers only"):
        TrainConfig(arch="gru", warmup=500)
    with pytest.raises(InputError, match=r"warm-up -1"):
        TrainConfig(arch="transformer-tiny", warmup=-1)
    with pytest.raises(InputError, match=r"warmup 0 → 500"):  # older models: the default, 0
        check_settings(str(model), TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, warmup=500))


def _nmt_venv_is_set_up() -> bool:
    """Whether scripts/setup_env.sh nmt has run for this pyproject.toml and setup.py (else
    the pipeline would install torch and fairseq first)."""
    import hashlib

    root = PIPELINE.parents[1]
    key = hashlib.sha1((root / "pyproject.toml").read_bytes() + (root / "setup.py").read_bytes() + b"\n").hexdigest()[
        :12
    ]
    return (root / ".venv" / f".rerank-nmt-{key}").exists()


def test_the_pipeline_refuses_a_shared_model_of_other_settings_before_any_work(tmp_path):
    # run_configs.sh links a configuration's model directories to the main job's: a
    # configuration with MAX_EPOCH=60 must not reuse a 30-epoch baseline as its own
    import pytest

    from rerank.nmt.train import TrainConfig

    if not _nmt_venv_is_set_up():
        pytest.skip("the project's .venv with the [nmt] extra (scripts/setup_env.sh nmt) is not set up")
    out = tmp_path / "out"
    (out / "data").mkdir(parents=True)
    (out / "data" / "prepare.json").write_text("{}")  # prepare: done
    _trained(
        out / "model.transformer-tiny",
        TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10, seed=1, threads=1),
    )
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "SYSTEM": "transformer", "PATIENCE": "10", "BF16_AUTOCAST": "0"}
    run = subprocess.run(["bash", str(PIPELINE)], capture_output=True, text=True, env={**env, "MAX_EPOCH": "60"})
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        f"rerank nmt: error: {out}/model.transformer-tiny: holds a model trained with other settings "
        "(max_epoch 30 → 60): remove its train.done to train it on with these settings, or use another directory"
    ]
    assert not (out / "settings.json").exists() and not (out / "nbest").exists() and not (out / "train.log").exists()
    # the R2L model is checked too (its settings: AUX_EPOCH, patience 2, direction r2l)
    _trained(
        out / "models" / "r2l.transformer-tiny",
        TrainConfig(arch="transformer-tiny", direction="r2l", max_epoch=16, patience=2, seed=1),
    )
    run = subprocess.run(
        ["bash", str(PIPELINE)],
        capture_output=True,
        text=True,
        env={**env, "MAX_EPOCH": "30", "AUX_EPOCH": "8", "OUT": str(out)},
    )
    assert (
        run.returncode == 1
        and "r2l.transformer-tiny: holds a model trained with other settings (max_epoch 16 → 8)" in run.stderr
    )
    # and the batch size and warm-up (MAX_TOKENS, WARMUP) of every model
    run = subprocess.run(
        ["bash", str(PIPELINE)],
        capture_output=True,
        text=True,
        env={**env, "MAX_EPOCH": "30", "MAX_TOKENS": "2000", "WARMUP": "500", "OUT": str(out)},
    )
    assert run.returncode == 1 and run.stderr.strip().splitlines() == [
        f"rerank nmt: error: {out}/model.transformer-tiny: holds a model trained with other settings "
        "(warmup 0 → 500; max_tokens 4000 → 2000): remove its train.done to train it on with these settings, "
        "or use another directory"
    ]
    # and the precision (BF16_AUTOCAST) of the transformers
    run = subprocess.run(
        ["bash", str(PIPELINE)],
        capture_output=True,
        text=True,
        env={**env, "MAX_EPOCH": "30", "BF16_AUTOCAST": "1", "OUT": str(out)},
    )
    assert run.returncode == 1 and run.stderr.strip().splitlines() == [
        f"rerank nmt: error: {out}/model.transformer-tiny: holds a model trained with other settings "
        "(bf16_autocast False → True): remove its train.done to train it on with these settings, "
        "or use another directory"
    ]


@pytest.mark.nmt
def test_rerank_nmt_train_check_and_resume_refuse_another_model_in_one_line(tmp_path, capsys):
    from rerank.cli import main
    from rerank.nmt.train import TrainConfig

    model = tmp_path / "model"
    _trained(model, TrainConfig(arch="transformer-tiny", max_epoch=30, patience=10))
    common = ["nmt", "train", "--data-bin", str(tmp_path / "bin"), "--save-dir", str(model)]
    assert main([*common, "--check", "--arch", "transformer-tiny", "--max-epoch", "30", "--patience", "10"]) == 0
    capsys.readouterr()
    assert main([*common, "--check", "--arch", "transformer-tiny", "--max-epoch", "20", "--patience", "10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"rerank nmt: error: {model}: holds a model trained with other settings (max_epoch 30 → 20): "
        "remove its train.done to train it on with these settings, or use another directory"
    ]
    # resuming (training on) in it with another architecture: refused before fairseq runs
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "dict.de.txt").write_text("ein 1\n")
    before = (model / "train.json").read_text()
    assert main([*common, "--arch", "gru", "--max-epoch", "30", "--patience", "10"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert (
        len(err) == 1
        and "holds a model trained with other settings (" in err[0]
        and "arch transformer-tiny → gru" in err[0]
        and err[0].endswith("): use another directory")
    )
    assert (model / "train.json").read_text() == before and sorted(p.name for p in model.iterdir()) == [
        "train.done",
        "train.json",
    ]
