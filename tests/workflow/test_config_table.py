"""scripts/config_table.py (issue 20's configuration table) on two hand-made pipeline
directories: a main job that trained everything (timings of both the legacy two-field and
the three-field form) and a configuration that shared its models (its pipeline.log names
the skipped stages; their outputs resolve through its links into the main job)."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = os.path.join(ROOT, "scripts", "config_table.py")


def _report(out, beam, system, gain, p, meteor, ter, oracle):
    rows = [
        {"system": "baseline", "metric": "bleu", "score": beam, "delta": 0.0, "p_value": None, "replicas": 1},
        {"system": system, "metric": "bleu", "score": beam + gain, "delta": gain, "p_value": p, "replicas": 3},
        {"system": system, "metric": "meteor", "score": 50 + meteor, "delta": meteor, "p_value": p},
        {"system": system, "metric": "ter", "score": 40 + ter, "delta": ter, "p_value": p},
        {"system": "oracle", "metric": "bleu", "score": oracle, "delta": oracle - beam, "p_value": 0.0001},
    ]
    os.makedirs(out / "report")
    (out / "report" / "table.json").write_text(json.dumps({"rows": rows, "meta": {}}))


def _weights(out, name, seed, start, score, metric="bleu"):
    os.makedirs(out / "rerank" / name, exist_ok=True)
    (out / "rerank" / name / f"weights.seed{seed}.json").write_text(
        json.dumps({"tuning": {"metric": metric, "initial_score": start, "score": score}})
    )


def test_rows_times_looked_up_through_shared_outputs(tmp_path):
    main, config = tmp_path / "multi30k", tmp_path / "configs" / "tiny"
    for d in ("data", "models/r2l.small", "model", "embed"):
        os.makedirs(main / d)
    os.makedirs(config / "model.transformer-tiny")
    (main / "settings.json").write_text(
        json.dumps({"settings": {"ARCH": "gru", "AUX_ARCH": "gru", "LM_ARCH": "lstm", "NBEST": "20"}})
    )
    (config / "settings.json").write_text(
        json.dumps(
            {
                "settings": {
                    "ARCH": "transformer-tiny",
                    "AUX_ARCH": "gru",
                    "LM_ARCH": "lstm",
                    "NBEST": "50",
                    "FEATURES": "r2l channel lm mbr e5 len",
                }
            }
        )
    )
    r2l_done = os.path.realpath(main / "models" / "r2l.small") + "/train.done"
    # the main job: prepare and train (legacy lines), r2l (with its path), embed, features, tune
    (main / "timings.tsv").write_text(
        f"prepare\t20\ntrain\t1000\ntrain-r2l\t300\t{r2l_done}\n"
        f"train-channel\t400\nembed-train\t500\nfeatures-r2l-val\t10\n"
    )
    for d in ("data", "models", "embed"):
        os.symlink(main / d, config / d)
    (config / "timings.tsv").write_text(
        "train\t700\t/x/model.transformer-tiny/train.done\nnbest-val\t50\t/x/v\ntune-all-seed1\t5\t/x/w\n"
    )
    (config / "pipeline.log").write_text(
        f"== prepare: done ({config}/data/prepare.json exists), skipped\n"
        f"== train-r2l: done ({config}/models/r2l.small/train.done exists), skipped\n"
        f"== train-channel: done ({config}/models/channel.small-own/train.done exists), skipped\n"
        f"== embed-train: done ({config}/embed/heldout.json exists), skipped\n"
        f"== train-lm: done (/elsewhere/lm/train.done exists), skipped\n"
        "== nbest-val\n"
    )
    _report(main, 35.71, "+all", 2.23, 0.0001, 2.32, -2.18, 50.08)
    _report(config, 38.0, "+all", 2.5, 0.0002, 1.0, -1.5, 55.0)
    _weights(main, "all", 1, 37.0, 39.7)
    _weights(main, "all", 2, 37.0, 36.9)  # below its start
    _weights(config, "all.chrf", 1, 60.0, 61.0, "chrf")
    _weights(config, "ter", 1, 45.0, 44.0, "ter")  # TER: lower is better, so reached
    out = tmp_path / "table"
    run = subprocess.run(
        [sys.executable, SCRIPT, str(main), str(config), "--out", str(out)], capture_output=True, text=True, check=True
    )
    rows = json.loads((tmp_path / "table.json").read_text())["rows"]
    assert run.stdout == (tmp_path / "table.md").read_text()
    a, b = rows
    assert (a["beam_bleu"], a["bleu"], a["gain"], a["p"], a["replicas"]) == (35.71, 35.71 + 2.23, 2.23, 0.0001, 3)
    assert (a["meteor_delta"], a["ter_delta"], a["oracle_bleu"]) == (2.32, -2.18, 50.08)
    assert a["tuning_at_least_beam"] == [1, 2] and b["tuning_at_least_beam"] == [2, 2]
    assert a["compute_s"] == 20 + 1000 + 300 + 400 + 500 + 10 and a["unknown_stages"] == []
    # chain A (train 1000 + channel 400) beside chain B (r2l 300 + embed 500); the rest in turn
    assert a["wall_estimate_s"] == 20 + 10 + max(1400, 800)
    # the configuration: its own stages, and the shared ones from the main job (prepare by name, a
    # legacy line under the directory that holds the path; r2l by path; embed by name)
    # (the main job's legacy train-channel line is not taken: a model's time is found only by
    # its path, since a name alone could be another model's, e.g. another AUX_ARCH's)
    assert b["stage_seconds"] == {
        "train": 700,
        "nbest-val": 50,
        "tune-all-seed1": 5,
        "prepare": 20,
        "train-r2l": 300,
        "embed-train": 500,
    }
    assert b["unknown_stages"] == ["train-channel", "train-lm"]  # no path of theirs is known
    assert b["wall_estimate_s"] == 20 + 5 + max(700 + 50, 300 + 500)
    # an older run: every set there was then (all but ibm1)
    assert "| multi30k | gru | 4000/– | gru | lstm | all but ibm1 | 20 | 35.71 |" in run.stdout
    assert (
        "| tiny | transformer-tiny | 4000/1000 | gru | lstm | r2l,channel,lm,mbr,e5,len | 50 | 38.00 | 40.50 | +2.50 | 0.0002 | +1.00 | -1.50 | 55.00 | "
        "2/2 |" in run.stdout
    )
    assert "(train-channel, train-lm unknown)" in run.stdout


def test_a_malformed_timings_line_is_one_error(tmp_path):
    (tmp_path / "timings.tsv").write_text("train\tlong\n")
    run = subprocess.run([sys.executable, SCRIPT, str(tmp_path)], capture_output=True, text=True)
    assert run.returncode != 0 and run.stderr.strip().endswith("timings.tsv:1: expected NAME<TAB>SECONDS[<TAB>OUTPUT]")
    run = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "absent")], capture_output=True, text=True)
    assert run.returncode != 0 and "not a directory" in run.stderr


def test_a_model_that_no_feature_set_needs_is_shown_as_not_trained():
    # run_pipeline.sh trains R2L/channel only for those sets and the LM only for lm: the
    # table shows "–" rather than the architecture setting of a model that never existed
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from config_table import models_used

    settings = {"ARCH": "transformer-tiny", "AUX_ARCH": "transformer-tiny", "LM_ARCH": "transformer-tiny"}
    assert models_used({**settings, "FEATURES": "r2l mbr len"}) == ("transformer-tiny", "–")
    assert models_used({**settings, "FEATURES": "lm mbr"}) == ("–", "transformer-tiny")
    assert models_used({**settings, "FEATURES": "channel lm"}) == ("transformer-tiny", "transformer-tiny")
    # a run from before FEATURES was recorded computed every set
    assert models_used({"AUX_ARCH": "gru", "LM_ARCH": "lstm"}) == ("gru", "lstm")


def test_the_feature_sets_column_names_all_and_the_gru_systems_sets():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from config_table import feature_sets

    every = "mlmme r2l channel lm l2r2 mbr e5 len"
    assert feature_sets({"FEATURES": every + " ibm1"}) == "all"
    assert feature_sets({"FEATURES": every}) == "all but ibm1"
    assert feature_sets({}) == "all but ibm1"  # a run from before FEATURES was recorded
    assert feature_sets({"FEATURES": "r2l mbr len ibm1"}) == "r2l,mbr,len,ibm1"


def test_the_schedule_column_names_batch_warm_up_and_a_learning_rate_that_is_not_the_architectures():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from config_table import schedule

    assert schedule({"ARCH": "transformer-tiny"}) == "4000/1000"  # an older run: the defaults
    assert schedule({"ARCH": "transformer-tiny", "MAX_TOKENS": "2000", "LR": "0", "WARMUP": "500"}) == "2000/500"
    assert (
        schedule({"ARCH": "transformer-tiny", "MAX_TOKENS": "2000", "LR": "2e-3", "WARMUP": "0"})
        == "2000/1000, lr 2e-3"
    )
    assert schedule({"ARCH": "gru", "MAX_TOKENS": "4000", "LR": "0", "WARMUP": "0"}) == "4000/–"


def test_a_union_with_the_r2l_models_lists_is_named_and_its_decoding_runs_in_the_r2l_chain():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    from config_table import list_sizes, wall_estimate

    assert list_sizes({"NBEST": "100"}) == "100"  # before R2L_NBEST was recorded: no union
    assert list_sizes({"NBEST": "50", "R2L_NBEST": "0"}) == "50"
    assert list_sizes({"NBEST": "50", "R2L_NBEST": "50"}) == "50 ∪ R2L 50"
    # chain A: baseline 1000 + its lists 150 + 150; chain B: R2L 1100 + its lists 140 + 130; then the rest
    seconds = {
        "prepare": 20,
        "train": 1000,
        "nbest-val": 150,
        "nbest-test": 150,
        "train-r2l": 1100,
        "nbest-r2l-val": 140,
        "nbest-r2l-test": 130,
        "union-val": 1,
        "rescore-val": 44,
    }
    assert wall_estimate(seconds) == 20 + 1 + 44 + max(1300, 1370)
