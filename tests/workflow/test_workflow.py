"""The main job's settings and rules (config/schema.yaml, config/SYSTEM.yaml,
workflow/settings/, workflow/Snakefile): a bad setting is one line naming it, the help is
generated from the schema, Snakemake's dry runs of both systems (and of the SLURM profile) plan
the jobs counted here by hand, and a tiny corpus runs end to end, then resumes with nothing to do."""

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT as ROOT_DIR

yaml = pytest.importorskip("yaml")
pytest.importorskip("jsonschema")

ROOT = Path(ROOT_DIR)
sys.path.insert(0, str(ROOT / "workflow"))
import settings  # noqa: E402  (workflow/settings/)

sys.path.remove(str(ROOT / "workflow"))
sys.path.insert(0, str(ROOT / "scripts"))
from pipeline_settings import ALL_FEATURES  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))


def _error(environ):
    with pytest.raises(settings.SettingsError) as raised:
        settings.from_environment(environ)
    return str(raised.value)


def test_every_setting_has_help_an_example_and_a_value_for_every_system():
    schema = settings.load_schema()
    systems = [settings.load_system(name) for name in settings.SYSTEMS]
    for name, spec in schema["properties"].items():
        assert spec.get("description") and "example" in spec, name
        # each value of the two systems in exactly one place: the schema's default, or both files;
        # the try-out system (tiny) sets every value without a default and overrides some for speed
        main = [settings.load_system(name) for name in ("transformer", "gru")]
        assert ("default" in spec) != all(name in s for s in main), name
        assert all(name in s for s in main) or not any(name in s for s in main), name
        assert "default" in spec or name in settings.load_system("tiny"), name
    for system in systems:  # a system file sets only settings the schema knows
        assert set(system) <= set(schema["properties"])
    # the feature sets, in their columns' order, are the ones pipeline_settings.py compares
    assert settings.feature_sets(schema) == list(ALL_FEATURES)


def test_the_environment_overrides_the_system_which_overrides_the_defaults(tmp_path):
    default = settings.from_environment({})
    assert (default["system"], default["arch"], default["nbest"], default["features"]) == (
        "transformer",
        "transformer-tiny",
        100,
        ["r2l", "mbr", "len", "ibm1"],
    )
    assert default["out"] == str(ROOT / "out" / "multi30k-transformer") and default["replicas"] == 3
    mixed = settings.from_environment(
        {"SYSTEM": "gru", "NBEST": "50", "FEATURES": "len+r2l", "OUT": str(tmp_path), "L2R2": "0", "LR": "0.001"}
    )
    assert (mixed["arch"], mixed["nbest"], mixed["features"], mixed["out"], mixed["lr"]) == (
        "gru",
        50,
        ["r2l", "len"],  # canonical order
        str(tmp_path),
        0.001,
    )
    assert settings.from_environment({"FEATURES": "all", "L2R2": "0"})["features"] == [
        f
        for f in ALL_FEATURES
        if f not in ("l2r2", "qe")  # qe is opt-in: it needs a checkpoint of one's own
    ]
    # every rule runs inside OUT: DATA is absolute (relative to the project root), and an empty
    # DATA is the shared Multi30k copy beside the project, as rerank nmt prepare finds it from
    # the root (a fresh clone's first run once downloaded instead: prepare ran inside OUT)
    assert settings.from_environment({"DATA": "data/m30k"})["data"] == str(ROOT / "data" / "m30k")
    local = os.path.normpath(ROOT / ".." / "shared" / "data" / "multi30k")
    assert default["data"] == (local if os.path.isdir(local) else "")
    lines = settings.recorded(settings.from_environment({"TUNERS": "mira"}))
    assert "FEATURES=r2l mbr len ibm1" in lines and "TUNERS=mira" in lines and "LR=0" in lines
    assert [line.split("=")[0].lower() for line in lines] == settings.RECORDED


def test_the_qe_feature_set_is_opt_in_and_skipped_with_one_line_without_a_checkpoint(tmp_path, capsys):
    skipped = settings.from_environment({"FEATURES": "mbr+qe"})
    assert skipped["features"] == ["mbr"]
    assert capsys.readouterr().err.strip() == (
        "run_pipeline: FEATURES: qe skipped: no QE_CHECKPOINT (a CometKiwi or COMET-QE checkpoint)"
    )
    # the library's checkpoint layout (rerank.metrics.comet_checks.checkpoint_files), its words
    with pytest.raises(settings.SettingsError, match=r"QE_CHECKPOINT: /nowhere: comet: no checkpoints/model.ckpt"):
        settings.from_environment({"FEATURES": "mbr+qe", "QE_CHECKPOINT": "/nowhere"})
    (tmp_path / "kiwi" / "checkpoints").mkdir(parents=True)
    (tmp_path / "kiwi" / "checkpoints" / "model.ckpt").write_bytes(b"")
    (tmp_path / "kiwi" / "hparams.yaml").write_text("class_identifier: unified_metric\n")
    given = settings.from_environment({"FEATURES": "qe+mbr", "QE_CHECKPOINT": str(tmp_path / "kiwi")})
    assert given["features"] == ["mbr", "qe"] and given["qe_checkpoint"] == str(tmp_path / "kiwi")
    assert f"QE_CHECKPOINT={tmp_path / 'kiwi'}" in settings.recorded(given)
    assert "qe" not in settings.from_environment({"FEATURES": "all"})["features"]


@pytest.mark.parametrize(
    "environ,message",
    [
        ({"NBEST": "fifty"}, "NBEST: 'fifty' is not a number"),
        ({"NBEST": "0"}, "NBEST: 0 is less than the minimum of 1"),
        ({"BF16_AUTOCAST": "yes"}, "BF16_AUTOCAST: 'yes' is not 0 or 1"),
        ({"ARCH": "lstm"}, "ARCH: 'lstm' is not one of ['gru', 'transformer-tiny', 'transformer-small']"),
        (
            {"FEATURES": "r2l+bert"},
            "FEATURES: unknown feature set 'bert' (choose from: " + " ".join(ALL_FEATURES) + ")",
        ),
        ({"TUNERS": "mira kbmira"}, "TUNERS: 'kbmira' is not one of ['mira', 'mert', 'pro']"),
        ({"SYSTEM": "lstm"}, "SYSTEM: unknown system 'lstm' (choose from: transformer gru tiny)"),
        ({"R2L_NBEST": "20", "FEATURES": "mbr"}, "R2L_NBEST=20 needs the r2l feature set in FEATURES (or R2L_NBEST=0)"),
        (
            {"TUNE_METRIC": "bleu+bleurt"},
            "TUNE_METRIC: unknown metric 'bleurt'; known: bertscore, bleu, chrf, comet, cometkiwi, length, meteor, ter",
        ),
        (
            {"TUNE_METRIC": "length"},
            "TUNE_METRIC: metric 'length' has no better direction: it cannot be optimised "
            "(choose one of bertscore, bleu, chrf, comet, cometkiwi, meteor, ter, seg:NAME or an interpolation)",
        ),
        (
            {"TUNE_METRIC": "seg:comet"},
            "TUNE_METRIC: 'seg:comet': seg:NAME reads scores beside a list the job does not have",
        ),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(environ, message):
    assert _error(environ) == message


def test_an_unknown_setting_or_wrong_type_in_a_configuration_file_is_one_line():
    with pytest.raises(settings.SettingsError, match=r"^unknown setting 'beam_size' \(settings: system out "):
        settings.complete({"system": "gru", "beam_size": 5})
    with pytest.raises(settings.SettingsError, match=r"^NBEST: 'twenty' is not of type 'integer'$"):
        settings.complete({"nbest": "twenty"})
    with pytest.raises(settings.SettingsError, match=r"^FEATURES: unknown feature set 'bleurt'"):
        settings.complete({"features": ["r2l", "bleurt"]})
    # Snakemake's --config features=r2l+mbr arrives as a string
    assert settings.complete({"features": "mbr+r2l"})["features"] == ["r2l", "mbr"]


def test_the_help_and_the_docs_table_are_generated_from_the_schema():
    help_text = settings.help_text()
    schema = settings.load_schema()
    for name in schema["properties"]:
        assert f"  {name.upper()} (" in help_text
        assert f"e.g. {name.upper()}=" in " ".join(help_text.split())
    # the system-dependent values and the defaults come from their one place
    flat = " ".join(help_text.split())
    assert "[transformer 27, gru 12, tiny 3; e.g. MAX_EPOCH=30]" in flat
    assert "[default 3; tiny 1; e.g. REPLICAS=5]" in flat
    table = settings.markdown_table()
    docs = (ROOT / "docs" / "usage" / "pipeline.md").read_text(encoding="utf-8")
    assert table in docs, "docs/usage/pipeline.md's settings table is stale: python workflow/settings table"


def _run_pipeline(*args, **env):
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "run_pipeline.sh"), *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
    )


def test_run_pipeline_help_and_settings_are_the_generated_ones(tmp_path):
    run = _run_pipeline("--help")
    assert run.returncode == 0 and run.stdout.strip() == settings.help_text().strip()
    run = _run_pipeline("--settings", SYSTEM="gru", NBEST="50", OUT=str(tmp_path))
    assert run.returncode == 0
    assert run.stdout.splitlines() == [f"OUT={tmp_path}"] + settings.recorded(
        settings.from_environment({"SYSTEM": "gru", "NBEST": "50", "OUT": str(tmp_path)})
    )
    out = tmp_path / "new"
    run = _run_pipeline(SYSTEM="gru", NBEST="fifty", OUT=str(out))
    assert run.returncode == 1 and not out.exists()
    assert run.stderr.strip() == "run_pipeline: error: NBEST: 'fifty' is not a number"


def test_out_is_refused_where_a_run_would_mix_with_other_files(tmp_path):
    """OUT is checked before anything is created: the repository, a directory inside it
    other than under out/, out/ itself and a non-empty directory that holds no run are
    refused in one line; a new or empty directory, or one with an earlier run, is taken."""
    unrelated = tmp_path / "thesis"
    unrelated.mkdir()
    (unrelated / "chapter1.tex").write_text("my work\n")
    refused = {
        str(ROOT): "is the repository or holds it",
        str(ROOT.parent): "is the repository or holds it",
        str(ROOT / "rerank"): "is inside the repository",
        str(ROOT / "out"): "holds every run",
        str(unrelated): "is a non-empty directory that holds no run of this pipeline",
        str(unrelated / "chapter1.tex"): "is not a directory",
    }
    for out, message in refused.items():
        before = sorted(os.listdir(out)) if os.path.isdir(out) else None
        run = _run_pipeline("--dry-run", OUT=out)
        assert run.returncode == 1, out
        assert run.stderr.strip() == f"run_pipeline: error: OUT: {out} {message}" + run.stderr.strip().split(message)[1]
        assert "\n" not in run.stderr.strip()
        assert (sorted(os.listdir(out)) if os.path.isdir(out) else None) == before  # nothing created
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    (earlier / "settings.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new", tmp_path / "empty", earlier, ROOT / "out" / "a-run-of-mine"):
        settings.check_out(str(out))  # taken
    assert "chapter1.tex" in os.listdir(unrelated)


def test_settings_need_no_rerank_in_the_machines_python(tmp_path):
    """A fresh checkout (no .venv) on a machine whose python3 has PyYAML and jsonschema but not
    rerank (many have): ``run_pipeline.sh --settings`` and ``--help`` work with that python,
    which skips the one check that needs rerank (TUNE_METRIC; run_pipeline.sh repeats the
    settings with .venv's python before any work)."""
    import yaml  # noqa: F401  (the test's python has them: they are what the stand-in imports)

    root = tmp_path / "checkout"
    for part in ("scripts", "workflow", "config"):
        shutil.copytree(ROOT / part, root / part, ignore=shutil.ignore_patterns("__pycache__", ".snakemake"))
    # the machine's python3: this interpreter, with a rerank that cannot be imported first on its path
    hidden = tmp_path / "no-rerank"
    (hidden / "rerank").mkdir(parents=True)
    (hidden / "rerank" / "__init__.py").write_text("raise ImportError('rerank is not installed here')\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nPYTHONPATH={hidden} exec {sys.executable} "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "OUT": str(tmp_path / "out"), "TUNE_METRIC": "0.5*bleu-0.5*ter"}
    run = subprocess.run(
        ["bash", str(root / "scripts" / "run_pipeline.sh"), "--settings"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0, run.stderr
    assert "TUNE_METRIC=0.5*bleu-0.5*ter" in run.stdout and not (root / ".venv").exists()
    run = subprocess.run(
        ["bash", str(root / "scripts" / "run_pipeline.sh"), "--help"], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0 and "TUNE_METRIC" in run.stdout and not (root / ".venv").exists()


# --- Snakemake --------------------------------------------------------------------------

snakemake_missing = shutil.which("snakemake") is None and not (ROOT / ".venv" / "bin" / "snakemake").exists()


def _snakemake(*args, cwd=ROOT, env=None):
    exe = shutil.which("snakemake") or str(ROOT / ".venv" / "bin" / "snakemake")
    return subprocess.run(
        [exe, "--snakefile", str(ROOT / "workflow" / "Snakefile"), *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def _job_counts(stdout):
    """{rule: jobs} of a dry run's job stats table."""
    lines = stdout.splitlines()
    start = lines.index("Job stats:") + 3
    counts = {}
    for line in lines[start:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


@pytest.mark.workflow
@pytest.mark.skipif(snakemake_missing, reason="snakemake is not installed (the [workflow] extra)")
def test_dry_runs_of_both_systems_plan_every_stage(tmp_path):
    run = _snakemake("-n", "--configfile", str(ROOT / "config" / "transformer.yaml"), "--config", f"out={tmp_path}/t")
    assert run.returncode == 0, run.stderr + run.stdout
    # 6 feature sets to tune (nmt, r2l, mbr, len, ibm1, all) x 2 tuners x 3 replicas, + 3 chrF-tuned
    assert _job_counts(run.stdout) == {
        "prepare": 1,
        "train": 1,
        "train_r2l": 1,
        "nbest": 2,
        "features": 8,  # 4 feature sets x 2 splits
        "full_list": 2,
        "tune": 39,
        "apply": 39,
        "experiment": 1,
        "oracle": 1,
        "eval": 1,
        "report": 1,
        "system": 1,
        "all": 1,
        "total": 99,
    }
    assert not (tmp_path / "t").exists()  # a dry run writes nothing
    run = _snakemake("-n", "--configfile", str(ROOT / "config" / "gru.yaml"), "--config", f"out={tmp_path}/g")
    assert run.returncode == 0, run.stderr + run.stdout
    counts = _job_counts(run.stdout)
    # every model of the paper's system; 8 sets -> 10 tuned sets x 2 tuners x 3 + 3
    assert {k: counts[k] for k in ("train", "train_r2l", "train_channel", "train_l2r2", "train_lm", "embed_train")} == {
        k: 1 for k in ("train", "train_r2l", "train_channel", "train_l2r2", "train_lm", "embed_train")
    }
    assert (counts["features"], counts["tune"], counts["apply"]) == (16, 63, 63)
    # a setting that changes the plan: R2L's own lists joined to the baseline's; 4 shards per feature
    # rule, each dealt blocks of 10,000 hypotheses (BLOCK_HYPOTHESES)
    run = _snakemake(
        "-n",
        "-p",
        "--configfile",
        str(ROOT / "config" / "transformer.yaml"),
        "--config",
        f"out={tmp_path}/t",
        "r2l_nbest=50",
        "shards=4",
        "block_hypotheses=10000",
        "tuners=[mira]",
        "chrf_tuning=0",
    )
    assert run.returncode == 0, run.stderr + run.stdout
    counts = _job_counts(run.stdout)
    assert (counts["nbest_r2l"], counts["union"], counts["rescore"]) == (2, 2, 2)
    assert (counts["features_shard"], counts["features"], counts["tune"]) == (32, 8, 18)
    assert run.stdout.count("--block-hypotheses 10000 --num-shards 4 --shard-id 3") == 8, run.stdout[-3000:]
    assert "system" not in counts  # a rescored union is not replayable by rerank translate
    # the val guard (GUARD=1) is one more job after tuning, none by default
    run = _snakemake(
        "-n", "--configfile", str(ROOT / "config" / "transformer.yaml"), "--config", f"out={tmp_path}/t", "guard=1"
    )
    assert run.returncode == 0, run.stderr + run.stdout
    counts = _job_counts(run.stdout)
    assert (counts["val_guard"], counts["tune"], counts["total"]) == (1, 39, 100)
    # TUNE_METRIC (the default system's 0.5*bleu-0.5*ter): every row tuned for it with its tuner
    # and feature sets, +all/chrF-tuned for it with chrF in BLEU's place; bleu: no --metric option
    for metric, rows, chrf in (
        ("0.5*bleu-0.5*ter", "--metric '0.5*bleu-0.5*ter'", "--metric '0.5*chrf-0.5*ter'"),
        ("bleu", None, "--metric chrf"),
    ):
        run = _snakemake(
            "-n",
            "-p",
            "--configfile",
            str(ROOT / "config" / "transformer.yaml"),
            "--config",
            f"out={tmp_path}/t",
            f"tune_metric={metric}",
        )
        assert run.returncode == 0, run.stderr + run.stdout
        tunes = [line for line in run.stdout.splitlines() if line.startswith("Shell command: rerank tune ")]
        assert len(tunes) == 39
        assert sum(chrf in line and "/all.chrf/" in line for line in tunes) == 3
        others = [line for line in tunes if "/all.chrf/" not in line]
        assert all(line.count("--metric") == (1 if rows else 0) for line in others)
        assert sum(f"--algorithm mert --feature-sets beam,IBM1 {rows or '--nbest'}" in line for line in others) == 3
    # a bad setting given to Snakemake directly
    run = _snakemake("-n", "--config", f"out={tmp_path}/t", "features=r2l+bleurt")
    assert run.returncode != 0 and "FEATURES: unknown feature set 'bleurt'" in run.stderr + run.stdout


@pytest.mark.workflow
@pytest.mark.skipif(snakemake_missing, reason="snakemake is not installed (the [workflow] extra)")
def test_a_channel_model_of_ones_own_is_scored_and_not_trained(tmp_path):
    """CHANNEL_MODEL=hf:DIR beside a baseline trained here: the dry run trains the baseline and
    the R2L model only, and the channel feature rule scores the prepared lists with the model,
    detokenised, as the Channel column."""
    model = tmp_path / "opus-mt-de-en"
    model.mkdir()
    (model / "config.json").write_text("{}")
    config = (f"out={tmp_path}/t", "features=r2l+channel+mbr", f"channel_model=hf:{model}")
    run = _snakemake("-n", "-p", "--configfile", str(ROOT / "config" / "transformer.yaml"), "--config", *config)
    assert run.returncode == 0, run.stderr + run.stdout
    counts = _job_counts(run.stdout)
    assert (counts["train"], counts["train_r2l"], counts["features"]) == (1, 1, 6) and "train_channel" not in counts
    scorer = f"--scorer hf:{model},direction=backward,name=Channel,detok=moses:de,source_detok=moses:en"
    assert run.stdout.count(scorer) == 2, run.stdout  # val and test


@pytest.mark.workflow
@pytest.mark.skipif(snakemake_missing, reason="snakemake is not installed (the [workflow] extra)")
def test_the_slurm_profile_plans_the_gru_system(tmp_path):
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["executor"] == "slurm" and profile["rerun-triggers"] == "mtime"
    run = _snakemake(
        "--profile",
        str(ROOT / "profiles" / "slurm"),
        "--dry-run",
        "--configfile",
        str(ROOT / "config" / "gru.yaml"),
        "--config",
        f"out={tmp_path}/g",
        "shards=2",
    )
    assert run.returncode == 0, run.stderr + run.stdout
    counts = _job_counts(run.stdout)
    assert (counts["features_shard"], counts["features"], counts["train"]) == (32, 16, 1)
    # n-best generation too: 2 shards of each split, each joined by rerank merge
    assert (counts["nbest_shard"], counts["nbest"]) == (4, 2)
    # every rule the profile names exists
    rules = _snakemake("--list-rules", "--configfile", str(ROOT / "config" / "gru.yaml"), "--config", "shards=2")
    names = set(rules.stdout.split())
    assert set(profile["set-resources"]) | set(profile["set-threads"]) <= names


def _tiny_corpus(root: Path):
    from tests.nmt.test_nmt import _write_corpus

    _write_corpus(str(root), n_train=300, n_val=16, n_test=10)


TINY_JOB_ENV = {"RERANK_CACHE": "off"}
#: the settings of the tiny jobs on a corpus of one's own: one epoch, 10-best, one MIRA replica
TINY_OWN_JOB = {
    "max_epoch": 1,
    "patience": 1,
    "nbest": 10,
    "tuners": ["mira"],
    "replicas": 1,
    "chrf_tuning": 0,
    "max_tokens": 1000,
    "bf16_autocast": 0,
}


@pytest.fixture(scope="module")
def tiny_job(tmp_path_factory):
    """The default main job's rules on a tiny corpus (every default feature set: r2l, mbr, len,
    ibm1; MIRA, 2 replicas; 100-best lists as the default job's, so that the documentation's
    step-by-step commands run as written; blocks of 100 hypotheses, one segment, so that the
    sharded run deals them out and must equal this one): (its OUT, its configuration file)."""
    if snakemake_missing:
        pytest.skip("snakemake is not installed (the [workflow] extra)")
    pytest.importorskip("fairseq")
    root = tmp_path_factory.mktemp("tiny-job")
    corpus = root / "m30k"
    _tiny_corpus(corpus)
    out = root / "out"
    config = root / "tiny.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "system": "transformer",
                "out": str(out),
                "data": str(corpus),
                "max_epoch": 1,
                "aux_epoch": 1,
                "patience": 1,
                "nbest": 100,
                "tuners": ["mira"],
                "replicas": 2,
                "chrf_tuning": 0,
                "max_tokens": 1000,
                "bf16_autocast": 0,
                "block_hypotheses": 100,
            }
        )
    )
    out.mkdir()
    run = _snakemake("--cores", "2", "--configfile", str(config), "--directory", str(out), env=TINY_JOB_ENV)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    return out, config


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_a_tiny_main_job_runs_end_to_end_then_resumes_with_nothing_to_do(tiny_job):
    out, config = tiny_job
    table = (out / "report" / "table.txt").read_text()
    for row in ("+nmt", "+r2l", "+mbr", "+len", "+ibm1", "+all", "oracle"):
        assert row in table
    # the lists' columns: the beam's, then each feature set's, in FEATURES' order
    signature = json.loads((out / "nbest" / "test.full.nbest.json").read_text())
    assert "R2L" in json.dumps(signature) and "len" in json.dumps(signature).lower()
    # settings.json (scripts/pipeline_settings.py) and the system for rerank translate
    recorded = json.loads((out / "settings.json").read_text())
    assert recorded["settings"]["NBEST"] == "100" and recorded["settings"]["FEATURES"] == "r2l mbr len ibm1"
    assert (out / "system" / "system.json").exists()
    # timings.tsv from the benchmark files: one line per stage that ran, with its output
    timings = {line.split("\t")[0]: line.split("\t") for line in (out / "timings.tsv").read_text().splitlines()}
    assert {"prepare", "train", "train-r2l", "nbest-val", "features-r2l-test", "tune-all-seed2", "report"} <= set(
        timings
    )
    assert timings["train"][2] == os.path.realpath(out / "model.transformer-tiny" / "train.done")
    # a second run has nothing to do and leaves the table as it was
    again = _snakemake("--cores", "2", "--configfile", str(config), "--directory", str(out), env=TINY_JOB_ENV)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
    assert (out / "report" / "table.txt").read_text() == table
    # another setting in the same OUT is refused before any work (pipeline_settings.py)
    changed = config.parent / "changed.yaml"
    changed.write_text(config.read_text().replace("nbest: 100", "nbest: 99"))
    refused = _snakemake("--cores", "2", "--configfile", str(changed), "--directory", str(out), env=TINY_JOB_ENV)
    assert refused.returncode != 0 and "NBEST=100 (this run: 99)" in refused.stderr + refused.stdout


#: what the SLURM run must reproduce byte for byte: the lists, the re-ranked outputs, the tables
SAME_AS_LOCAL = (
    "nbest/val.nbest",
    "nbest/test.full.nbest",
    "nbest/val.full.nbest",
    "nbest/test.1best",
    "rerank/all/test.seed1.txt",
    "rerank/all/test.seed2.txt",
    "rerank/nmt/test.seed1.txt",
    "rerank/test.oracle",
    "results.txt",
    "report/table.txt",
)
#: the options a cluster without an accounting database needs (scripts/slurm_cluster.sh's), and
#: quick status checks for a job of seconds
SLURM_OPTIONS = (
    *("--slurm-status-command", "squeue", "--slurm-no-account", "--slurm-keep-successful-logs"),
    *("--slurm-init-seconds-before-status-checks", "1", "--seconds-between-status-checks", "2"),
    *("--default-resources", "mem_mb=2000", "runtime=30"),
    *("--slurm-array-jobs", "features,tune,apply"),  # a rule's several jobs as one SLURM array
)


def _squeue():
    """{SLURM job id: (its comment, rule_NAME…; its state)} of every job squeue lists."""
    done = subprocess.run(["squeue", "--noheader", "--states=all", "--format=%i|%k|%T"], capture_output=True, text=True)
    rows = [line.split("|") for line in done.stdout.splitlines() if line.count("|") == 2]
    return {job: (comment, state) for job, comment, state in rows}


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_the_tiny_main_job_in_shards_writes_the_unsharded_lists_and_tables(tiny_job, tmp_path):
    """SHARDS=2 with the tiny job's blocks of 100 hypotheses (BLOCK_HYPOTHESES=100: 1 segment
    of its 100-best lists): the n-best generation (fairseq's batches dealt) and every feature
    rule (its blocks dealt; R2L forced decoding among them) run as 2 jobs each, joined by rerank
    merge; the lists, the re-ranked outputs and the tables are the unsharded tiny job's byte for
    byte (from its trained models: a decoding shard here has JOBS/2 = 1 torch thread against the
    unsharded rule's 2, which the tiny model's lists do not depend on — a larger model's last
    digits can, docs/usage/cluster.md)."""
    local, config = tiny_job
    job = yaml.safe_load(config.read_text())
    assert job["block_hypotheses"] == 100
    sharded = tmp_path / "two"
    # the tiny job's prepared data and trained models (copied with their times), the rest anew
    shutil.copytree(local, sharded, symlinks=True)
    for name in ("nbest", "rerank", "report", "system", "benchmarks", "settings.json", "timings.tsv", "results.txt"):
        path = sharded / name
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    (sharded / "job.yaml").write_text(yaml.safe_dump({**job, "shards": 2, "out": str(sharded)}))
    argv = ("--cores", "2", "--rerun-triggers", "mtime", "--configfile", str(sharded / "job.yaml"))
    run = _snakemake(*argv, "--directory", str(sharded), env=TINY_JOB_ENV)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert "rule train:" not in run.stdout + run.stderr  # the models were the tiny job's
    assert any((sharded / "nbest" / "shards").glob("val.r2l.1-of-2.nbest"))
    assert any((sharded / "nbest" / "shards").glob("test.1-of-2.nbest"))
    for name in SAME_AS_LOCAL:
        assert (sharded / name).read_bytes() == (local / name).read_bytes(), name


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_the_tiny_main_job_runs_on_a_real_slurm_cluster_and_resumes_after_scancel(tiny_job, tmp_path):
    """scripts/slurm_cluster.sh starts a real single-node cluster (slurmctld, slurmd, MUNGE;
    Debian's packages, installed when missing); the tiny main job runs through
    profiles/slurm, every rule a SLURM job, a rule's several jobs (features, tune, apply) as
    SLURM arrays where they are ready together. Its baseline's training is cancelled (scancel)
    while it runs: that run fails, the next invocation resumes, and the lists, outputs and
    tables are the local run's, byte for byte."""
    local, config = tiny_job
    state = tmp_path / "slurm"
    cluster = ["bash", str(ROOT / "scripts" / "slurm_cluster.sh")]
    started = subprocess.run([*cluster, "start", str(state)], capture_output=True, text=True)
    if started.returncode == 2:
        pytest.skip(started.stderr.strip().splitlines()[-1])
    assert started.returncode == 0, started.stderr
    try:
        out = tmp_path / "out"
        out.mkdir()
        job = yaml.safe_load(config.read_text())
        (tmp_path / "tiny.yaml").write_text(yaml.safe_dump({**job, "out": str(out)}))
        exe = shutil.which("snakemake") or str(ROOT / ".venv" / "bin" / "snakemake")
        argv = [exe, "--snakefile", str(ROOT / "workflow" / "Snakefile"), "--profile", str(ROOT / "profiles" / "slurm")]
        argv += ["--configfile", str(tmp_path / "tiny.yaml"), "--directory", str(out), *SLURM_OPTIONS]
        env = {**os.environ, **TINY_JOB_ENV}
        first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        cancelled = None
        for _ in range(600):
            running = [j for j, (comment, st) in _squeue().items() if comment == "rule_train" and st == "RUNNING"]
            if running:
                cancelled = running[0]
                subprocess.run(["scancel", cancelled], check=True)
                break
            if first.poll() is not None:
                break
            time.sleep(0.5)
        log = first.communicate(timeout=900)[0]
        assert cancelled is not None, log[-3000:]
        assert first.returncode != 0 and f"SLURM-job '{cancelled}' failed" in log, log[-3000:]
        assert _squeue()[cancelled][1] == "CANCELLED"
        again = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
        assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
        # every rule ran as a SLURM job (its log under .snakemake/slurm_logs/rule_NAME/)
        rules = {p.name for p in (out / ".snakemake" / "slurm_logs").iterdir()}
        for rule in ("prepare", "train", "train_r2l", "nbest", "features", "tune", "apply", "report", "system"):
            assert f"rule_{rule}" in rules, sorted(rules)
        # the replicas' tunings went as one SLURM array (--slurm-array-jobs): task logs JOBID_TASK.log
        tasks = [p.name for p in (out / ".snakemake" / "slurm_logs" / "rule_tune").rglob("*.log")]
        assert sum(bool(re.fullmatch(r"\d+_\d+\.log", name)) for name in tasks) >= 2, tasks
        for name in SAME_AS_LOCAL:
            assert (out / name).read_bytes() == (local / name).read_bytes(), name
    finally:
        subprocess.run([*cluster, "stop", str(state)], capture_output=True)
    # its configuration goes with it: one naming a stopped controller makes every scontrol, and so
    # every snakemake start after this test (the SLURM plugin asks for MinJobAge), wait 9 s
    conf = Path(os.environ.get("RERANK_SLURM_CONF", "/etc/slurm/slurm.conf"))
    assert not conf.exists() or "written by scripts/slurm_cluster.sh" not in conf.read_text()


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_the_main_job_runs_in_the_reverse_direction_on_a_corpus_of_ones_own(tmp_path):
    """SRC=de TGT=en on the tiny corpus given as files of one's own (TRAIN, VALID, TEST; .gz
    and plain; MBR, length and IBM Model 1 features, one replica), prepared with SentencePiece
    (SUBWORD=sentencepiece): every stage reads the direction and the subword step — the
    prepared data, the English references, the model's decoding direction, METEOR's
    language, the system — and its system translates raw German into words, not pieces."""
    if snakemake_missing:
        pytest.skip("snakemake is not installed (the [workflow] extra)")
    pytest.importorskip("fairseq")
    corpus = tmp_path / "m30k"
    _tiny_corpus(corpus)
    out = tmp_path / "out"
    settings_file = tmp_path / "de-en.yaml"
    raw = corpus / "task1" / "raw"
    import gzip

    with gzip.open(raw / "val.en.gz", "rt", encoding="utf-8") as handle:  # a plain file as well as .gz
        (tmp_path / "dev.en").write_text(handle.read())
    job = {
        "system": "transformer",
        "out": str(out),
        "train": f"{raw / 'train.de.gz'},{raw / 'train.en.gz'}",
        "valid": f"{raw / 'val.de.gz'},{tmp_path / 'dev.en'}",
        "test": f"{raw / 'test_2016_flickr.de.gz'},{raw / 'test_2016_flickr.en.gz'}",
        "src": "de",
        "tgt": "en",
        "features": ["mbr", "len", "ibm1"],
        **TINY_OWN_JOB,
        "subword": "sentencepiece",
    }
    settings_file.write_text(yaml.safe_dump(job))
    out.mkdir()
    run = _snakemake("--cores", "2", "--configfile", str(settings_file), "--directory", str(out), env=TINY_JOB_ENV)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    prepared = json.loads((out / "data" / "prepare.json").read_text())["config"]
    assert (prepared["src"], prepared["tgt"]) == ("de", "en")
    assert prepared["files"]["val"] == [str(raw / "val.de.gz"), str(tmp_path / "dev.en")]
    assert prepared["subword"] == "sentencepiece" and (out / "data" / "spm.model").is_file()
    assert not (out / "data" / "bpe.codes").exists()
    assert json.loads((out / "settings.json").read_text())["settings"]["SUBWORD"] == "sentencepiece"
    assert json.loads((out / "experiment.json").read_text())["reference"].endswith("tok/test_2016_flickr.en")
    decoded = json.loads((out / "nbest" / "test.nbest.json").read_text())["config"]
    assert (decoded["src"], decoded["tgt"]) == ("de", "en")  # the baseline decodes German into English
    table = (out / "report" / "table.txt").read_text()
    for row in ("+nmt", "+mbr", "+len", "+ibm1", "+all", "oracle"):
        assert row in table
    decoder = json.loads((out / "system" / "system.json").read_text())["decoder"]["config"]
    assert (decoder["src"], decoder["tgt"]) == ("de", "en")
    with gzip.open(corpus / "task1" / "raw" / "test_2016_flickr.de.gz", "rt", encoding="utf-8") as handle:
        (tmp_path / "my_test.de").write_text(handle.read())
    translate = [
        *("translate --system", str(out / "system"), "--input", str(tmp_path / "my_test.de")),
        *("--out", str(tmp_path / "my_test.en"), "--tokenized"),
    ]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "rerank"), *" ".join(translate).split()], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    translated = (tmp_path / "my_test.en").read_text().splitlines()
    assert len(translated) == 10 and not any("\u2581" in line for line in translated)
    assert (out / "system" / "generator" / "spm.model").is_file()
    nbest = (out / "nbest" / "test.nbest").read_text()
    assert "\u2581" not in nbest and "@@" not in nbest


@pytest.mark.workflow
@pytest.mark.hf
@pytest.mark.slow
def test_the_own_data_page_runs_the_main_job_on_a_model_of_ones_own_without_training(tmp_path):
    """docs/usage/own-data.md as written, its corpus the tiny one (training pair .gz, dev and
    test plain) and its model a tiny random Marian model with its SentencePiece tokenizer,
    built here. The job (GENERATOR=hf:DIR) prepares and trains nothing: rerank generate writes
    raw-text lists, length and IBM Model 1 come from the raw training pair, BLEU uses 13a; its
    system is a generate system. The step-by-step system translates as the step-by-step
    commands re-ranked, line for line."""
    if snakemake_missing:
        pytest.skip("snakemake is not installed (the [workflow] extra)")
    from tests.conftest import skip_reason

    if skip_reason("hf"):
        pytest.skip(skip_reason("hf"))
    from tests.docs.test_docs import run_page
    from tests.tiny_models import build_marian

    source = tmp_path / "m30k"
    _tiny_corpus(source)
    raw = source / "task1" / "raw"
    (tmp_path / "hf").mkdir()
    marian = build_marian(str(tmp_path / "hf"))
    (tmp_path / "hf-channel").mkdir()
    channel = build_marian(str(tmp_path / "hf-channel"), seed=1)  # random weights: either direction
    page = tmp_path / "page"

    def setup(directory):
        corpus = directory / "corpus"
        corpus.mkdir()
        for lang in ("en", "de"):
            shutil.copyfile(raw / f"train.{lang}.gz", corpus / f"train.{lang}.gz")
            for split, name in (("val", "dev"), ("test_2016_flickr", "test")):
                with gzip.open(raw / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
                    (corpus / f"{name}.{lang}").write_text(handle.read(), encoding="utf-8")
        (directory / "models").mkdir()
        os.symlink(marian, directory / "models" / "my-en-de")
        os.symlink(channel, directory / "models" / "my-de-en")
        (directory / "scripts").mkdir()  # the page's `bash scripts/run_pipeline.sh`, from the project root
        (directory / "scripts" / "run_pipeline.sh").write_text(f'exec bash {ROOT}/scripts/run_pipeline.sh "$@"\n')

    page.mkdir()
    run_page("docs/usage/own-data.md", page, setup=setup)
    tried = page / "out" / "try"  # the try-out job, SYSTEM=tiny: trained here, 20-best, one replica
    settings_json = json.loads((tried / "settings.json").read_text())["settings"]
    assert (settings_json["MAX_EPOCH"], settings_json["NBEST"], settings_json["REPLICAS"]) == ("3", "20", "1")
    assert "+all" in (tried / "report" / "table.txt").read_text() and (tried / "system" / "system.json").is_file()
    out = page / "out" / "my-en-de"
    assert not (out / "data").exists() and not (out / "model.transformer-tiny").exists()  # nothing trained
    assert not list(out.rglob("train.done"))  # the channel model neither
    generated = json.loads((out / "nbest" / "test.nbest.json").read_text())
    assert generated["model"] == f"hf:{page / 'models' / 'my-en-de'}" and generated["nbest"] == 8
    experiment = json.loads((out / "experiment.json").read_text())
    assert experiment["reference"] == str(page / "corpus" / "test.de") and experiment["bleu"]["tokenize"] == "13a"
    table = (out / "report" / "table.txt").read_text()
    for row in ("baseline", "+nmt", "+channel", "+mbr", "+len", "+ibm1", "+all", "oracle"):
        assert row in table
    scored = json.loads((out / "nbest" / "test.channel.nbest.json").read_text())
    assert scored["scorers"] == [f"hf:{page / 'models' / 'my-de-en'},direction=backward,name=Channel"], scored
    assert " Channel= " in (out / "nbest" / "test.channel.nbest").read_text().splitlines()[0]
    assert json.loads((out / "system" / "system.json").read_text())["decoder"]["kind"] == "generate"
    translated = (page / "test.translated.de").read_text(encoding="utf-8").splitlines()
    assert translated == (page / "test.reranked.de").read_text(encoding="utf-8").splitlines()
    assert len(translated) == 10


def test_a_corpus_of_ones_own_keeps_its_case_unless_told(tmp_path):
    corpus = tmp_path / "m30k"
    (corpus / "task1" / "raw").mkdir(parents=True)
    for lang in ("en", "de"):
        (corpus / "task1" / "raw" / f"train.{lang}.gz").write_bytes(b"")
    (tmp_path / "a").write_text("x\n")
    (tmp_path / "b").write_text("y\n")
    own = {"TRAIN": f"{tmp_path / 'a'},{tmp_path / 'b'}", "VALID": f"{tmp_path / 'a'},{tmp_path / 'b'}"}
    own["TEST"] = own["VALID"]
    base = {"OUT": str(tmp_path / "o"), "DATA": str(corpus)}
    assert settings.from_environment(base)["lowercase"] == 1  # Multi30k: the paper's lc.norm.tok protocol
    assert settings.from_environment({**base, **own})["lowercase"] == 0
    assert settings.from_environment({**base, **own, "LOWERCASE": "1"})["lowercase"] == 1
    assert _error({**base, "LOWERCASE": "yes"}) == "LOWERCASE: 'yes' is not 0 or 1"


def test_a_generator_of_ones_own_is_checked_before_any_work(tmp_path):
    corpus = tmp_path / "m30k"
    (corpus / "task1" / "raw").mkdir(parents=True)
    for lang in ("en", "de"):
        for stem in ("train", "val"):  # test_2016_flickr's en is missing: refused below, before any work
            (corpus / "task1" / "raw" / f"{stem}.{lang}.gz").write_bytes(b"")
    (corpus / "task1" / "raw" / "test_2016_flickr.de").write_bytes(b"")  # plain text is read too
    model = tmp_path / "model"
    model.mkdir()
    base = {"OUT": str(tmp_path / "o"), "DATA": str(corpus), "FEATURES": "mbr+len"}
    refused = {
        f"GENERATOR: no such model directory {tmp_path / 'nowhere'}": {"GENERATOR": f"hf:{tmp_path / 'nowhere'}"},
        f"GENERATOR: {model} holds no config.json: not a Hugging Face model directory": {"GENERATOR": f"hf:{model}"},
        f"GENERATOR: {model} holds no model.bin: not a CTranslate2 model directory": {"GENERATOR": f"ct2:{model}"},
        "GENERATOR: 'nmt:x' does not match": {"GENERATOR": "nmt:x"},
        f"GENERATOR: no such checkpoint file {tmp_path / 'x.pt'}": {"GENERATOR": f"fairseq:{tmp_path / 'x.pt'}"},
    }
    for message, env in refused.items():
        with pytest.raises(settings.SettingsError) as caught:
            settings.from_environment({**base, **env})
        assert str(caught.value).startswith(message), str(caught.value)
    (model / "config.json").write_text("{}")
    given = {**base, "GENERATOR": f"hf:{model},src_lang=en"}
    with pytest.raises(settings.SettingsError) as caught:
        settings.from_environment({**given, "FEATURES": "r2l+mbr"})
    assert str(caught.value).startswith("FEATURES: r2l needs a model trained here on the prepared corpus")
    with pytest.raises(settings.SettingsError) as caught:
        settings.from_environment({**given, "GUARD": "1"})
    assert str(caught.value).startswith("GUARD: the val guard folds Multi30k's val by image")
    with pytest.raises(settings.SettingsError) as caught:  # the raw text it reads: rerank.nmt.data.raw_path
        settings.from_environment(given)
    missing = corpus / "task1" / "raw" / "test_2016_flickr.en"
    assert str(caught.value) == f"DATA: {missing}: missing Multi30k file of language en (neither .gz nor plain)"
    missing.write_bytes(b"")
    taken = settings.from_environment(given)
    assert settings.raw_pairs(taken)["test"] == [str(missing), str(corpus / "task1" / "raw" / "test_2016_flickr.de")]
    assert taken["generator"] == f"hf:{model},src_lang=en" and str(model) not in settings.models(taken)
    assert settings.raw_pairs(taken)["val"] == [
        str(corpus / "task1" / "raw" / f"val.{lang}.gz") for lang in ("en", "de")
    ]
    assert settings.models(taken) == {}


def test_right_to_left_and_channel_models_of_ones_own_are_checked_and_replace_training(tmp_path):
    """R2L_MODEL / CHANNEL_MODEL: a model the user has scores the r2l / channel feature set
    (direction and column set by the job, detokenised text for hf:/ct2: on prepared lists)
    and is not trained; a bad one is one line before any work."""
    corpus = tmp_path / "m30k"
    (corpus / "task1" / "raw").mkdir(parents=True)
    for lang in ("en", "de"):
        for stem in ("train", "val", "test_2016_flickr"):  # a generator of one's own reads each split's raw text
            (corpus / "task1" / "raw" / f"{stem}.{lang}.gz").write_bytes(b"")
    hf, ct2, checkpoint = tmp_path / "opus-mt-de-en", tmp_path / "r2l-ct2", tmp_path / "r2l.pt"
    hf.mkdir()
    ct2.mkdir()
    base = {"OUT": str(tmp_path / "o"), "DATA": str(corpus), "FEATURES": "r2l+channel+mbr"}
    refused = {
        f"CHANNEL_MODEL: no such model directory {tmp_path / 'nowhere'}": {
            "CHANNEL_MODEL": f"hf:{tmp_path / 'nowhere'}"
        },
        f"CHANNEL_MODEL: {hf} holds no config.json: not a Hugging Face model directory": {"CHANNEL_MODEL": f"hf:{hf}"},
        f"R2L_MODEL: {ct2} holds no model.bin: not a CTranslate2 model directory": {"R2L_MODEL": f"ct2:{ct2},bpe=none"},
        f"R2L_MODEL: no such checkpoint file {checkpoint}": {"R2L_MODEL": f"fairseq:{checkpoint},bpe=none"},
        "R2L_MODEL: 'hf:x' does not match": {"R2L_MODEL": "hf:x"},
    }
    for message, env in refused.items():
        assert _error({**base, **env}).startswith(message), _error({**base, **env})
    (hf / "config.json").write_text("{}")
    (ct2 / "model.bin").write_bytes(b"")
    checkpoint.write_bytes(b"")
    refused = {
        "CHANNEL_MODEL: the channel feature set is not in FEATURES: add it": {
            "CHANNEL_MODEL": f"hf:{hf}",
            "FEATURES": "r2l+mbr",
        },
        "CHANNEL_MODEL: direction= is the channel feature set's (Channel): leave it out": {
            "CHANNEL_MODEL": f"hf:{hf},direction=forward"
        },
        "R2L_MODEL: say how the lists' text becomes the model's subwords": {"R2L_MODEL": f"ct2:{ct2}"},
        "CHANNEL_MODEL: say how the lists' text becomes the model's subwords": {
            "CHANNEL_MODEL": f"fairseq:{checkpoint}"
        },
        "R2L_MODEL: R2L_NBEST decodes with an R2L model trained here": {
            "R2L_MODEL": f"fairseq:{checkpoint},bpe=none",
            "R2L_NBEST": "20",
        },
        "CHANNEL_MODEL: 'x' is not KEY=VALUE": {"CHANNEL_MODEL": f"hf:{hf},x"},
    }
    for message, env in refused.items():
        assert _error({**base, **env}).startswith(message), _error({**base, **env})
    taken = settings.from_environment({**base, "CHANNEL_MODEL": f"hf:{hf},batch=8"})
    assert settings.own_scorer(taken, "channel") == (
        f"hf:{hf},batch=8,direction=backward,name=Channel,detok=moses:de,source_detok=moses:en"
    )
    assert settings.own_scorer(taken, "r2l") is None
    trained = {os.path.basename(d) for d in settings.models(taken)}
    assert any(d.startswith("r2l") for d in trained) and not any(d.startswith("channel") for d in trained), trained
    taken = settings.from_environment({**base, "R2L_MODEL": f"fairseq:{checkpoint},dict={tmp_path},bpe=none"})
    assert settings.own_scorer(taken, "r2l") == f"fairseq:{checkpoint},dict={tmp_path},bpe=none,direction=r2l,name=R2L"
    assert not any(os.path.basename(d).startswith("r2l") for d in settings.models(taken))
    assert "R2L_MODEL=" + taken["r2l_model"] in settings.recorded(taken)
    # a generator of one's own: its lists are raw text, no detokenisation; the sets are allowed
    generator = {"GENERATOR": f"hf:{hf}", "FEATURES": "channel+mbr"}
    assert _error({**base, **generator}).startswith(
        "FEATURES: channel needs a model trained here on the prepared corpus: with a GENERATOR of your own the "
        "feature sets are mbr, e5, len, ibm1, qe, and r2l with R2L_MODEL, channel with CHANNEL_MODEL of your own"
    )
    taken = settings.from_environment({**base, **generator, "CHANNEL_MODEL": f"ct2:{ct2}"})
    assert settings.own_scorer(taken, "channel") == f"ct2:{ct2},direction=backward,name=Channel"
    assert settings.models(taken) == {}
    # GENERATOR=fairseq:CHECKPOINT: its subword step and dictionaries checked, converted once by the job
    mbr = {**base, "FEATURES": "mbr"}
    model = tmp_path / "fairseq-en-de"
    model.mkdir()
    checkpoint = model / "checkpoint_best.pt"
    checkpoint.write_bytes(b"")
    fairseq = f"fairseq:{checkpoint}"
    assert _error({**mbr, "GENERATOR": fairseq}).startswith("GENERATOR: say how raw text becomes the fairseq model's")
    bpe = ",bpe=sentencepiece:spm.model"
    assert _error({**mbr, "GENERATOR": fairseq + bpe}) == f"GENERATOR: {model} holds no dict.en.txt: give dict=DIR"
    for lang in ("en", "de"):
        (tmp_path / f"dict.{lang}.txt").write_text("a 1\n")
    taken = settings.from_environment({**mbr, "GENERATOR": f"{fairseq}{bpe},dict={tmp_path},compute_type=int8"})
    assert settings.converted_generator(taken) == (str(checkpoint), str(tmp_path))
    assert settings.generator_spec(taken) == (
        f"ct2:{tmp_path / 'o' / 'generator.ct2'},bpe=sentencepiece:{ROOT / 'spm.model'},compute_type=int8"
    )
    assert settings.models(taken) == {}
    taken = settings.from_environment({**base, "GENERATOR": f"hf:{hf}", "FEATURES": "mbr"})
    assert settings.generator_spec(taken) == f"hf:{hf}" and settings.converted_generator(taken) is None


def test_a_direction_the_data_or_the_features_cannot_serve_is_refused(tmp_path):
    corpus = tmp_path / "m30k"
    (corpus / "task1" / "raw").mkdir(parents=True)
    for lang in ("en", "de"):
        (corpus / "task1" / "raw" / f"train.{lang}.gz").write_bytes(b"")
    base = {"OUT": str(tmp_path / "o"), "DATA": str(corpus)}
    refused = {
        "SRC: {data} has no task1/raw/train.fr.gz (language fr)": {"SRC": "fr"},
        "TGT: the target language is the source's (de)": {"SRC": "de"},
        "FEATURES: mlmme is the paper's English-German embedding, not for de-en: drop it": {
            "SRC": "de",
            "TGT": "en",
            "FEATURES": "mlmme+mbr",
        },
        "SRC: 'EN' does not match": {"SRC": "EN"},
        "VALID: a corpus of your own needs TRAIN, VALID and TEST": {"TRAIN": "a,b"},
        "TRAIN: no such file": {"TRAIN": "nowhere.de,nowhere.en", "VALID": "a,b", "TEST": "a,b"},
        "TRAIN: 'one-file' is not SRC_FILE,TGT_FILE": {"TRAIN": "one-file", "VALID": "a,b", "TEST": "a,b"},
        "VALID: {tmp}/three.de has 3 lines but {tmp}/two.en.gz 2: not line-aligned": {
            "TRAIN": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
            "VALID": f"{tmp_path / 'three.de'},{tmp_path / 'two.en.gz'}",
            "TEST": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
        },
        "TEST: {tmp}/empty.de and {tmp}/empty.en are empty": {
            "TRAIN": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
            "VALID": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
            "TEST": f"{tmp_path / 'empty.de'},{tmp_path / 'empty.en'}",
        },
        "TRAIN: {tmp}/broken.en.gz: not a valid gzip file": {
            "TRAIN": f"{tmp_path / 'three.de'},{tmp_path / 'broken.en.gz'}",
            "VALID": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
            "TEST": f"{tmp_path / 'three.de'},{tmp_path / 'three.en.gz'}",
        },
    }
    (tmp_path / "three.de").write_text("a\nb\nc")  # the last line without its newline counts
    (tmp_path / "three.en.gz").write_bytes(gzip.compress(b"x\ny\nz\n"))
    (tmp_path / "two.en.gz").write_bytes(gzip.compress(b"x\ny\n"))
    (tmp_path / "broken.en.gz").write_bytes(b"not gzip\n")
    (tmp_path / "empty.de").write_text("")
    (tmp_path / "empty.en").write_text("")
    for message, env in refused.items():
        with pytest.raises(settings.SettingsError) as caught:
            settings.from_environment({**base, **env})
        assert str(caught.value).startswith(message.format(data=corpus, tmp=tmp_path)), str(caught.value)
    taken = settings.from_environment({**base, "SRC": "de", "TGT": "en"})
    assert (taken["src"], taken["tgt"]) == ("de", "en")


def test_snakemake_run_directly_refuses_a_misaligned_pair_before_any_work(tmp_path):
    """Without run_pipeline.sh, the Snakefile's onstart reads the corpus' pairs (the settings it
    completes in every job do not): a dev pair one line short is one line, and nothing runs."""
    if snakemake_missing:
        pytest.skip("snakemake is not installed (the [workflow] extra)")
    (tmp_path / "four.en").write_text("a\nb\nc\nd\n")
    (tmp_path / "four.de").write_text("w\nx\ny\nz\n")
    (tmp_path / "three.de").write_text("x\ny\nz\n")
    job = {
        "out": str(tmp_path / "out"),
        "train": f"{tmp_path / 'four.en'},{tmp_path / 'four.de'}",
        "valid": f"{tmp_path / 'four.en'},{tmp_path / 'three.de'}",
        "test": f"{tmp_path / 'four.en'},{tmp_path / 'four.de'}",
        "features": ["len"],
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(job))
    run = _snakemake("--cores", "1", "--configfile", str(tmp_path / "job.yaml"), env={"RERANK_PREFLIGHT_DONE": ""})
    message = f"config: VALID: {tmp_path / 'four.en'} has 4 lines but {tmp_path / 'three.de'} 3: not line-aligned"
    assert run.returncode != 0 and message in run.stderr, run.stderr[-2000:]
    assert not (tmp_path / "out" / "data").exists() and "rule prepare" not in run.stdout + run.stderr


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.hf
@pytest.mark.slow
def test_fairseq_models_of_ones_own_generate_and_score_and_nothing_is_trained(tiny_job, tmp_path):
    """GENERATOR=fairseq:CHECKPOINT and R2L_MODEL=fairseq:CHECKPOINT — the tiny job's two
    transformers, as a user brings models trained elsewhere — on the tiny corpus' raw files:
    the job converts the generator once (rerank nmt to-ct2), generates the lists with the
    conversion, scores R2L under the user's checkpoint, trains and prepares nothing, reports,
    and packs a system that translates as the job's +all replica did."""
    from tests.conftest import skip_reason

    if skip_reason("hf"):
        pytest.skip(skip_reason("hf"))
    local, _ = tiny_job
    raw = local.parent / "m30k" / "task1" / "raw"
    data, r2l = local / "data", local / "models" / "r2l.transformer-tiny"
    generator = local / "model.transformer-tiny"
    checkpoints = {
        d: d / json.loads((d / "train.json").read_text()).get("checkpoint", "checkpoint_best.pt")
        for d in (generator, r2l)
    }
    out = tmp_path / "out"
    env = {
        "OUT": str(out),
        "TRAIN": f"{raw / 'train.en.gz'},{raw / 'train.de.gz'}",
        "VALID": f"{raw / 'val.en.gz'},{raw / 'val.de.gz'}",
        "TEST": f"{raw / 'test_2016_flickr.en.gz'},{raw / 'test_2016_flickr.de.gz'}",
        "GENERATOR": f"fairseq:{checkpoints[generator]},dict={data / 'bin'},bpe=subword-nmt:{data / 'bpe.codes'}",
        "R2L_MODEL": f"fairseq:{checkpoints[r2l]},bpe=subword-nmt:{r2l / 'bpe.codes'}",
        "FEATURES": "r2l+mbr+len",
        "NBEST": "4",
        "MAX_LENGTH": "32",
        "TUNERS": "mira",
        "REPLICAS": "1",
        "CHRF_TUNING": "0",
        "JOBS": "2",
        **TINY_JOB_ENV,
    }
    run = _run_pipeline(**env)
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    assert not (out / "data").exists() and not list(out.rglob("train.done"))  # nothing prepared or trained
    assert json.loads((out / "generator.ct2" / "convert.json").read_text())["checkpoint"] == str(checkpoints[generator])
    generated = json.loads((out / "nbest" / "test.nbest.json").read_text())
    assert generated["model"].startswith(f"ct2:{out / 'generator.ct2'},bpe=subword-nmt:") and generated["nbest"] == 4
    scored = json.loads((out / "nbest" / "test.r2l.nbest.json").read_text())
    assert scored["scorers"] == [env["R2L_MODEL"] + ",direction=r2l,name=R2L"]
    table = (out / "report" / "table.txt").read_text()
    for row in ("baseline", "+nmt", "+r2l", "+mbr", "+len", "+all", "oracle"):
        assert row in table
    test_source = tmp_path / "test.en"
    with gzip.open(raw / "test_2016_flickr.en.gz", "rt", encoding="utf-8") as handle:
        test_source.write_text(handle.read())
    translate = [
        "translate",
        "--system",
        str(out / "system"),
        "--input",
        str(test_source),
        "--out",
        str(tmp_path / "t"),
    ]
    done = subprocess.run([str(Path(sys.executable).parent / "rerank"), *translate], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "t").read_text() == (out / "rerank" / "all" / "test.seed1.txt").read_text()


def _raw_test_text(directory, out):
    """``my_test.en``: the tiny corpus' raw English test sentences (what a user would bring)."""
    import gzip

    corpus = out.parent / "m30k" / "task1" / "raw" / "test_2016_flickr.en.gz"
    with gzip.open(corpus, "rt", encoding="utf-8") as handle:
        (directory / "my_test.en").write_text(handle.read(), encoding="utf-8")


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_the_any_test_set_page_runs_on_the_tiny_jobs_system(tiny_job, tmp_path):
    """docs/usage/any-test-set.md as written, with ``out/multi30k-transformer`` the tiny job's
    OUT: rerank translate equals the step-by-step commands line for line (tokenised output)."""
    from tests.docs.test_docs import run_page

    out, _ = tiny_job

    def setup(directory):
        (directory / "out").mkdir()
        os.symlink(out, directory / "out" / "multi30k-transformer")
        _raw_test_text(directory, out)

    run_page("docs/usage/any-test-set.md", tmp_path, setup=setup)
    translated = (tmp_path / "my_test.tok.de").read_text(encoding="utf-8").splitlines()
    assert translated == (tmp_path / "my.reranked.de").read_text(encoding="utf-8").splitlines()
    assert len(translated) == len((tmp_path / "my_test.en").read_text(encoding="utf-8").splitlines())
    assert json.loads((tmp_path / "my-system" / "system.json").read_text())["weights"]


def test_timings_come_from_the_benchmark_files_and_skipped_stages_are_listed(tmp_path):
    sys.path.insert(0, str(ROOT / "workflow"))
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from config_table import read_timings, skipped_stages
        from timings import write_timings
    finally:
        sys.path.remove(str(ROOT / "workflow"))
        sys.path.remove(str(ROOT / "scripts"))
    out = tmp_path / "out"
    (out / "benchmarks").mkdir(parents=True)
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    (out / "benchmarks" / "train.tsv").write_text(header + "4356.4\t1:12:36\t900\t1\t1\t1\t1\t1\t99\t4300\n")
    (out / "benchmarks" / "nbest-val.tsv").write_text(header + "258.6\t0:04:18\t900\t1\t1\t1\t1\t1\t99\t250\n")
    (out / "timings.tsv").write_text("prepare\t22\t/old/prepare.json\ntrain\t1\t/old/train.done\n")  # a bash run's
    shared = tmp_path / "shared" / "r2l" / "train.done"  # a model another run trained (a link to it)
    shared.parent.mkdir(parents=True)
    shared.write_text("")
    (out / "models").mkdir()
    os.symlink(shared.parent, out / "models" / "r2l")
    stages = {
        "prepare": str(out / "data" / "prepare.json"),
        "train": str(out / "model" / "train.done"),
        "nbest-val": str(out / "nbest" / "val.nbest"),
        "train-r2l": str(out / "models" / "r2l" / "train.done"),
        "report": str(out / "report" / "table.txt"),
    }
    write_timings(str(out), stages)
    # the bash run's prepare line stays; train is the benchmark's (rounded), not the old line
    assert read_timings(str(out)) == [
        ("prepare", 22, "/old/prepare.json"),
        ("train", 4356, os.path.realpath(stages["train"])),
        ("nbest-val", 259, os.path.realpath(stages["nbest-val"])),
    ]
    # the R2L model existed (shared) and ran nowhere here: config_table looks it up by its real path
    assert skipped_stages(str(out)) == {"train-r2l": str(shared.resolve())}


def test_the_tables_settings_their_help_and_their_errors():
    config = settings.tables_from_environment({"BETAS": "1+0.5", "SIZES": "4", "VARIANTS": "regular", "K": "2"})
    assert (config["betas"], config["sizes"], config["variants"], config["k"]) == ([1, 0.5], [4], ["regular"], 2)
    assert config["feats"] == os.path.join(config["data"], "features", "test_2016_flickr-resnet50-avgpool.npy")
    assert config["out"] == str(ROOT / "out" / "tables")
    for environ, message in (
        ({"K": "1"}, "K: 1 is less than the minimum of 2"),
        ({"VARIANTS": "strong"}, "VARIANTS: 'strong' is not one of ['weak', 'regular', 'optimised']"),
        ({"BETAS": "1 x"}, "BETAS: 'x' is not a number"),
        ({"PROTOCOL": "paper"}, "PROTOCOL=paper needs IMAGES and IMAGE_NAMES (features of train, val and test)"),
    ):
        with pytest.raises(settings.SettingsError) as raised:
            settings.tables_from_environment(environ)
        assert str(raised.value) == message
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run_tables.sh"), "--help"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0 and run.stdout.strip() == settings.help_text(tables=True).strip()
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run_tables.sh")],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "K": "1"},
    )
    assert run.returncode == 1 and run.stderr.strip() == "run_tables.sh: error: K: 1 is less than the minimum of 2"
    docs = (ROOT / "docs" / "usage" / "paper-tables.md").read_text(encoding="utf-8")
    assert settings.markdown_table(tables=True) in docs, (
        "paper-tables.md's table is stale: python workflow/settings --tables table"
    )


@pytest.mark.workflow
@pytest.mark.nmt
@pytest.mark.slow
def test_a_job_whose_target_is_neither_english_nor_german_reaches_its_table(tmp_path):
    """SRC=en TGT=fr on a corpus of one's own (the tiny corpus' German side, labelled French):
    every stage runs for fr, and the report — whose METEOR once died at the last rule asking
    the shipped jar for French paraphrases it does not have — writes its table, METEOR with
    the modules the jar runs for French (exact stem), as its signature says (issue 81)."""
    if snakemake_missing:
        pytest.skip("snakemake is not installed (the [workflow] extra)")
    pytest.importorskip("fairseq")
    corpus = tmp_path / "m30k"
    _tiny_corpus(corpus)
    raw = corpus / "task1" / "raw"
    out = tmp_path / "out"
    job = {
        "system": "transformer",
        "out": str(out),
        "train": f"{raw / 'train.en.gz'},{raw / 'train.de.gz'}",
        "valid": f"{raw / 'val.en.gz'},{raw / 'val.de.gz'}",
        "test": f"{raw / 'test_2016_flickr.en.gz'},{raw / 'test_2016_flickr.de.gz'}",
        "src": "en",
        "tgt": "fr",
        "features": ["mbr", "len"],
        **TINY_OWN_JOB,
    }
    (tmp_path / "en-fr.yaml").write_text(yaml.safe_dump(job))
    out.mkdir()
    run = _snakemake(
        "--cores", "2", "--configfile", str(tmp_path / "en-fr.yaml"), "--directory", str(out), env=TINY_JOB_ENV
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-3000:]
    table = (out / "report" / "table.txt").read_text()
    for row in ("+nmt", "+mbr", "+len", "+all", "oracle"):
        assert row in table
    assert "METEOR" in table
    report = json.loads((out / "report" / "table.json").read_text())
    assert "|lang:fr|modules:exact stem|weights:1.0 0.2|" in report["meta"]["signatures"]["meteor"]
    assert not report["meta"]["unavailable"]
