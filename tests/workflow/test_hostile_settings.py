"""Reliability round 4 (issue 81) on the main job's settings: paths that a shell command cannot
carry are refused in one line naming the setting, nothing run (class 4); a corpus of one's own
is read line for line as rerank's readers read it — carriage returns inside lines, corrupt
gzip and one file given as both sides refused (class 8); METEOR for a target language other
than en/de runs with modules the shipped jar has, is checked before any work, and a report
that cannot compute it keeps its table (class 13)."""

import gzip
import os
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


def _error(environ):
    with pytest.raises(settings.SettingsError) as raised:
        settings.from_environment(environ)
    message = str(raised.value)
    assert "\n" not in message
    return message


def _pair(directory: Path, lines=("a b", "c d", "e f")):
    directory.mkdir(parents=True, exist_ok=True)
    for side in ("src", "tgt"):
        (directory / f"corpus.{side}").write_text("".join(f"{line} {side}\n" for line in lines))
    return f"{directory / 'corpus.src'},{directory / 'corpus.tgt'}"


def _own(pair: str, **more):
    return {"TRAIN": pair, "VALID": pair, "TEST": pair, "FEATURES": "len", **more}


# --- class 4: paths the rules' shell commands cannot carry ---


@pytest.mark.parametrize("name", ["my corpus", "$(touch PWNED)", "a;b", "it's", "new\nline", "tab\there"])
def test_a_corpus_path_a_shell_cannot_carry_is_refused_naming_the_setting(tmp_path, name):
    pair = _pair(tmp_path / name)
    message = _error({"OUT": str(tmp_path / "out"), **_own(pair)})
    assert message.startswith("TRAIN: ") and "which the job's shell commands cannot carry" in message, message
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_out_and_model_paths_are_checked_too(tmp_path):
    pair = _pair(tmp_path / "ok")
    assert _error({"OUT": str(tmp_path / "my out"), **_own(pair)}).startswith("OUT: ")
    assert _error({"OUT": str(tmp_path / "out"), "GENERATOR": "hf:$(id)", **_own(pair)}).startswith("GENERATOR: ")
    assert settings.from_environment({"OUT": str(tmp_path / "out"), **_own(pair)})["train"].endswith("corpus.tgt")


def test_run_pipeline_refuses_a_hostile_corpus_directory_before_anything_runs(tmp_path):
    marker = tmp_path / "PWNED"
    pair = _pair(tmp_path / f"$(touch {marker})")
    run = subprocess.run(
        ["bash", str(ROOT / "scripts" / "run_pipeline.sh"), "--dry-run"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), **_own(pair)},
    )
    assert run.returncode == 1 and run.stderr.strip().startswith("run_pipeline: error: TRAIN: "), run.stderr
    assert "\n" not in run.stderr.strip() and not marker.exists() and not (tmp_path / "out").exists()


# --- class 8: the pairs read as the readers read them ---


def test_carriage_returns_inside_lines_are_refused_where_counts_would_agree(tmp_path):
    (tmp_path / "a.src").write_bytes(b"one\ntw\ro\nthree\nfour\n")  # the readers see 5 lines
    (tmp_path / "a.tgt").write_bytes(b"eins\nzwei\ndr\rei\nvier\n")  # 5 too: lines 2-3 would pair wrongly
    pair = f"{tmp_path / 'a.src'},{tmp_path / 'a.tgt'}"
    message = _error({"OUT": str(tmp_path / "out"), **_own(pair)})
    assert message == (
        f"TRAIN: {tmp_path / 'a.src'}:2: a carriage return inside the line, which is read as a line break: "
        "remove it (e.g. tr '\\r' ' ')"
    )
    (tmp_path / "b.src").write_bytes(b"one\r\ntwo\r\n")  # Windows line ends are line ends
    (tmp_path / "b.tgt").write_bytes(b"eins\nzwei")
    pair = f"{tmp_path / 'b.src'},{tmp_path / 'b.tgt'}"
    assert settings.from_environment({"OUT": str(tmp_path / "out"), **_own(pair)})["train"] == pair


def test_a_corrupt_gzip_or_one_file_for_both_sides_is_one_line(tmp_path):
    good = _pair(tmp_path / "good")
    with gzip.open(tmp_path / "c.gz", "wb") as handle:
        handle.write(b"ein mann\n" * 2000)
    data = bytearray((tmp_path / "c.gz").read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"\x00\xff\x00\xff\x00\xff\x00\xff"
    (tmp_path / "c.gz").write_bytes(bytes(data))
    source = good.split(",")[0]
    message = _error({"OUT": str(tmp_path / "out"), **_own(good, VALID=f"{source},{tmp_path / 'c.gz'}")})
    assert message.startswith(f"VALID: {tmp_path / 'c.gz'}: not a valid gzip file (CRC check failed"), message
    message = _error({"OUT": str(tmp_path / "out"), **_own(good, TEST=f"{source},{source}")})
    assert message == f"TEST: {source} is given as both sides (the source and the target are two files)"
    os.link(source, tmp_path / "hard-link")
    assert _error({"OUT": str(tmp_path / "out"), **_own(good, TEST=f"{source},{tmp_path / 'hard-link'}")})


def test_prepare_refuses_the_same_on_its_own(tmp_path):
    pytest.importorskip("sacremoses")
    from rerank.errors import InputError
    from rerank.nmt.data import PrepareConfig, own_corpus

    good = _pair(tmp_path / "good").split(",")
    (tmp_path / "a.tgt").write_bytes(b"x\ny\rz\n")
    (tmp_path / "a.src").write_bytes(b"x\ny\nz\n")
    files = {"train": good, "val": good, "test_2016_flickr": good}
    with pytest.raises(InputError, match=r"a\.tgt:2: a carriage return inside the line"):
        own_corpus(PrepareConfig(files={**files, "val": [str(tmp_path / "a.src"), str(tmp_path / "a.tgt")]}))
    with pytest.raises(InputError, match="test_2016_flickr: the same file is given as source and target"):
        own_corpus(PrepareConfig(files={**files, "test_2016_flickr": [good[0], good[0]]}))


# --- class 13: METEOR for any target language ---


def test_meteor_runs_for_languages_beyond_en_and_de_with_modules_the_jar_has():
    pytest.importorskip("pycocoevalcap")
    from rerank.metrics import make_metric

    hyps, refs = ["le chat est noir", "un chien"], ["le chat est noir", "le chien"]
    expected = {"fr": "exact stem", "es": "exact stem", "cs": "exact", "xx": "exact", "de": "exact stem"}
    for lang, modules in expected.items():
        metric = make_metric("meteor", lang=lang)
        assert f"|lang:{lang}|modules:{modules}|" in metric.signature(), metric.signature()
        stats = metric.stats(hyps, refs)
        assert stats.shape == (2, 23) and metric.score(stats.sum(0)) > 40, lang
    assert "synonym paraphrase" in make_metric("meteor", lang="en").signature()  # English keeps its four


def test_the_settings_step_warns_when_meteor_cannot_run_for_the_target(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pycocoevalcap")
    assert settings.check_meteor({"tgt": "fr"}) is True
    monkeypatch.setenv("PATH", str(tmp_path))  # no java
    assert settings.check_meteor({"tgt": "fr"}, sys.executable) is False
    err = capsys.readouterr().err.strip()
    assert err.startswith("run_pipeline: warning: METEOR unavailable: no 'java' on PATH") and "\n" not in err
    assert err.endswith("the report's table will have no METEOR column")


def test_a_report_that_cannot_compute_meteor_keeps_its_table(tmp_path, capsys, monkeypatch):
    from rerank.metrics.meteor import MeteorMetric, MeteorUnavailable
    from rerank.report import significance_of
    from rerank.signif import SignificanceSettings

    def fails(self, hypotheses, references):
        raise MeteorUnavailable("METEOR jar failed: modules the jar cannot run for 'xx'")

    pytest.importorskip("pycocoevalcap")
    monkeypatch.setattr(MeteorMetric, "stats", fails)
    refs = ["ein mann fährt", "zwei hunde"]
    texts = {"baseline": [["ein mann", "zwei hunde"]], "+all": [["ein mann fährt", "zwei hunde"]]}
    table = significance_of(
        refs, texts, SignificanceSettings(metrics=["bleu", "meteor", "chrf"], shuffles=50, resamples=50, lang="de")
    )
    assert {row["metric"] for row in table["rows"]} == {"bleu", "chrf"}
    assert "modules the jar cannot run" in table["meta"]["unavailable"]["meteor"]
    assert "METEOR jar failed" in capsys.readouterr().err


def test_every_numeric_setting_has_a_sensible_bound():
    """Issue 92, class 7: NBEST=10**23 passed --settings; every integer and number of the schema
    declares its maximum (a seed's is 2^32 − 1, what every generator takes)."""
    schema = settings.load_schema()
    unbounded = [
        name
        for name, spec in schema["properties"].items()
        if spec.get("type") in ("integer", "number") and "enum" not in spec and "maximum" not in spec
    ]
    assert unbounded == []
    assert schema["properties"]["seed"]["maximum"] == 2**32 - 1


@pytest.mark.parametrize(
    "name, value, needle",
    [
        ("NBEST", "1" + "0" * 23, "NBEST: 100000000000000000000000 is greater than the maximum of 10000"),
        ("SEED", str(2**32), "SEED: 4294967296 is greater than the maximum of 4294967295"),
        ("LR", "1e400", "LR: inf is greater than the maximum"),
        ("JOBS", "99999999", "JOBS: 99999999 is greater than the maximum"),
    ],
)
def test_a_number_beyond_its_bound_is_refused_naming_the_setting(tmp_path, name, value, needle):
    assert needle in _error({"OUT": str(tmp_path / "out"), name: value})
