"""Settings carried by objects: the experiment manifest (`rerank experiment`, `Experiment`),
list-level settings in an n-best list's signature (beam feature, feature sets), one BLEU
settings object, and tuner options generated from their configs."""

import json

import numpy as np
import pytest

from rerank.cli import main
from rerank.errors import InputError
from rerank.experiment import Experiment
from rerank.metrics.bleu import BleuMetric
from rerank.nbest import ListInfo, NBestList, read_list_info, read_nbest, write_lines, write_list_info, write_nbest
from rerank.tuning.files import TuningSetup, tune_file
from tests.conftest import one_line_error


@pytest.fixture
def listed(tmp_path):
    """A 3-segment list whose beam (NMTNorm) picks a wrong hypothesis and whose R2L column
    picks the reference, with its signature (beam feature and feature sets)."""
    refs = ["ein mann fährt rad heute", "eine frau liest ein buch", "zwei hunde spielen im park"]
    hyps, rows = [], []
    for ref in refs:
        for k, hyp in enumerate([ref.replace(ref.split()[1], "x"), ref]):
            hyps.append(hyp)
            rows.append([-1.0 - k, -5.0, -0.2 - k, float(k)])
    nbest = NBestList(np.array([0, 2, 4, 6]), hyps, np.array(rows), ["NMT", "WordPenalty", "NMTNorm", "R2L"])
    write_nbest(nbest, str(tmp_path / "dev.nbest"))
    write_lines(refs, str(tmp_path / "dev.ref"))
    info = ListInfo("NMTNorm", {"beam": ["NMT", "WordPenalty", "NMTNorm"], "R2L": ["R2L"]}, declared=True)
    write_list_info(str(tmp_path / "dev.nbest.json"), info, {"input": "test"})
    return tmp_path


def test_the_signature_travels_with_the_list(listed):
    nbest = read_nbest(str(listed / "dev.nbest"))
    assert nbest.info.beam_feature == "NMTNorm" and nbest.info.feature_sets["R2L"] == ["R2L"]
    assert nbest.subset(np.array([1])).info is nbest.info and nbest.head(1).info is nbest.info
    assert nbest.info.columns_of(["R2L", "beam"], "x") == ["R2L", "NMT", "WordPenalty", "NMTNorm"]
    assert (
        main(["truncate", "--nbest", str(listed / "dev.nbest"), "--size", "1", "--out", str(listed / "h.nbest")]) == 0
    )
    assert read_list_info(str(listed / "h.nbest")) == nbest.info
    assert read_list_info(str(listed / "missing.nbest")) == ListInfo()  # no signature: undeclared


def _tune(listed, *extra) -> int:
    """``rerank tune`` on the fixture's list and references, its weights in ``w.json``."""
    return main(
        [
            "tune",
            "--nbest",
            str(listed / "dev.nbest"),
            "--ref",
            str(listed / "dev.ref"),
            "--out",
            str(listed / "w.json"),
            *extra,
        ]
    )


def test_an_unreadable_signature_is_an_error_not_an_empty_one(listed, capsys):
    (listed / "dev.nbest.json").write_text('{"beam_feature": 3}')
    with pytest.raises(InputError, match="not an n-best signature"):
        read_list_info(str(listed / "dev.nbest"))
    (listed / "dev.nbest.json").write_text('{"beam_feature": "NMTNorm",')
    assert _tune(listed) == 1
    one_line_error(capsys, "dev.nbest.json", "not JSON")
    assert not (listed / "w.json").exists()


def test_tuning_without_a_signature_says_where_to_start(listed, capsys):
    (listed / "dev.nbest.json").unlink()
    # the list is written in rank order: its order names the beam column (NMT and NMTNorm both
    # order it, and both give the same 1-best; the first is taken), said in one line
    assert _tune(listed) == 0
    err = capsys.readouterr().err
    assert "no signature: the beam's column is NMT, the one whose values never rise down any of the 3 segments" in err
    assert "(NMTNorm too: the first is taken)" in err
    assert json.loads((listed / "w.json").read_text())["tuning"]["init"] == "beam"
    # written in no column's order, its beam is unknown: the error names the ways on
    nbest = read_nbest(str(listed / "dev.nbest"))
    order = np.array([1, 0, 2, 3, 5, 4])  # the first segment and the last upside down
    write_nbest(
        NBestList(nbest.offsets, [nbest.hypotheses[i] for i in order], nbest.features[order], nbest.feature_names),
        str(listed / "dev.nbest"),
    )
    assert _tune(listed) == 1
    one_line_error(capsys, "dev.nbest", "--init zeros")
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(listed / "dev.nbest"),
                "--ref",
                str(listed / "dev.ref"),
                "--init",
                "zeros",
                "--out",
                str(listed / "w.json"),
                "--quiet",
            ]
        )
        == 0
    )
    assert json.loads((listed / "w.json").read_text())["tuning"]["init"] == "zeros"
    capsys.readouterr()
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(listed / "dev.nbest"),
                "--ref",
                str(listed / "dev.ref"),
                "--feature-sets",
                "beam",
                "--init",
                "zeros",
                "--out",
                str(listed / "x.json"),
            ]
        )
        == 1
    )
    one_line_error(capsys, "no feature sets are known", "--features")


def test_feature_sets_choose_the_columns_and_the_start_is_the_beam(listed):
    record, result = tune_file(
        str(listed / "dev.nbest"),
        str(listed / "dev.ref"),
        TuningSetup("mert", feature_sets=["beam", "R2L"], tokenize="none"),
    )
    assert record["tuning"]["init"] == "beam" and record["tuning"]["features"] == [
        "NMT",
        "WordPenalty",
        "NMTNorm",
        "R2L",
    ]
    assert result.initial_score < 50 and result.score == pytest.approx(100.0)  # R2L finds every reference
    assert record["bleu_settings"]["tokenize"] == "none" and "tok:none" in record["bleu_signature"]
    record, _ = tune_file(
        str(listed / "dev.nbest"), str(listed / "dev.ref"), TuningSetup("mira", feature_sets=["beam"])
    )
    assert record["weights"]["R2L"] == 0.0 and record["tuning"]["features"] == ["NMT", "WordPenalty", "NMTNorm"]
    with pytest.raises(InputError, match="no feature set 'LM'"):
        tune_file(str(listed / "dev.nbest"), str(listed / "dev.ref"), TuningSetup(feature_sets=["LM"]))


@pytest.mark.pro
def test_an_option_of_another_tuner_is_refused(listed, capsys):
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(listed / "dev.nbest"),
                "--ref",
                str(listed / "dev.ref"),
                "--mert-restarts",
                "3",
                "--out",
                str(listed / "w.json"),
            ]
        )
        == 1
    )
    one_line_error(capsys, "--mert-restarts is an option of mert, not of mira")
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(listed / "dev.nbest"),
                "--ref",
                str(listed / "dev.ref"),
                "--algorithm",
                "pro",
                "--pro-threshold",
                "0.2",
                "--out",
                str(listed / "w.json"),
                "--quiet",
            ]
        )
        == 0
    )
    config = json.loads((listed / "w.json").read_text())["config"]
    assert config["threshold"] == 0.2 and config["samples"] == 5000 and config["seed"] == 12345


def test_rerank_experiment_writes_the_manifest_that_report_reads(tmp_path, capsys):
    exp = tmp_path / "exp"
    (exp / "rerank" / "b1").mkdir(parents=True)
    write_lines(["a b c d", "e f g h"], str(exp / "ref.txt"))
    write_lines(["a b c x", "e f g x"], str(exp / "base.txt"))
    for k in (1, 2):
        write_lines(["a b c d", "e f g x"], str(exp / "rerank" / "b1" / f"test.seed{k}.txt"))
    args = [
        "experiment",
        str(exp),
        "--reference",
        str(exp / "ref.txt"),
        "--baseline",
        str(exp / "base.txt"),
        "--tokenize",
        "none",
        "--replicas",
        "2",
        "--caption",
        "tiny",
        "--system",
        "+MLMME beta=1",
        str(exp / "rerank" / "b1" / "test.seed{replica}.txt"),
    ]
    assert main(args) == 0
    assert "written" in capsys.readouterr().err
    manifest = json.loads((exp / "experiment.json").read_text())
    assert manifest["systems"] == [["+MLMME beta=1", ["rerank/b1/test.seed1.txt", "rerank/b1/test.seed2.txt"]]]
    assert manifest["bleu"] == {"tokenize": "none", "lowercase": False} and manifest["reference"] == "ref.txt"
    before = (exp / "experiment.json").stat().st_mtime_ns
    assert main(args) == 0  # unchanged: not rewritten (reports newer than it stay valid)
    assert "unchanged" in capsys.readouterr().err and (exp / "experiment.json").stat().st_mtime_ns == before
    experiment = Experiment.read(str(exp))
    assert experiment.bleu == BleuMetric("none") and experiment.caption == "tiny"
    assert main(args + ["--system", "+MLMME beta=1", str(exp / "base.txt")]) == 1
    one_line_error(capsys, "'+MLMME beta=1' is given to two systems")


def test_the_report_marks_the_rows_the_val_guard_does_not_pass(tmp_path, capsys):
    """rerank report --marks FILE (the val guard's, issue 46): a row the file names is marked §
    in every table format, with its legend and the file in the footer; bad files are one line."""
    exp = tmp_path / "exp"
    for name in ("good", "bad"):
        (exp / "rerank" / name).mkdir(parents=True)
    write_lines(["a b c d", "e f g h"], str(exp / "ref.txt"))
    write_lines(["a b c x", "e f g x"], str(exp / "base.txt"))
    for name in ("good", "bad"):
        write_lines(["a b c d", "e f g x"], str(exp / "rerank" / name / "test.seed1.txt"))
    argv = ["experiment", str(exp), "--ref", str(exp / "ref.txt"), "--baseline", str(exp / "base.txt")]
    argv += ["--tokenize", "none", "--replicas", "1"]
    argv += ["--system", f"+good={exp}/rerank/good/test.seed{{replica}}.txt"]
    argv += ["--system", f"+bad={exp}/rerank/bad/test.seed{{replica}}.txt"]
    assert main(argv) == 0
    verdicts = tmp_path / "val_guard.marks.json"
    legend = "the val guard does not pass the row"
    verdicts.write_text(json.dumps({"marks": {"+bad": "worse than the beam on val (TER)"}, "legend": legend}))
    report = ["report", str(exp), "--metrics", "bleu", "--shuffles", "50", "--resamples", "50", "--no-plots"]
    assert main(report + ["--marks", str(verdicts)]) == 0
    capsys.readouterr()
    table = (exp / "report" / "table.md").read_text()
    assert "| +bad § |" in table and "| +good |" in table and "| baseline |" in table
    assert f"§: the val guard does not pass the row ({verdicts})" in table
    rows = json.loads((exp / "report" / "table.json").read_text())["rows"]
    assert {r["system"]: r.get("mark") for r in rows} == {
        "baseline": None,
        "+good": None,
        "+bad": "worse than the beam on val (TER)",
    }
    assert "+bad §" in (exp / "report" / "table.txt").read_text()
    # without --marks: no marks
    assert main(report) == 0
    assert "§" not in (exp / "report" / "table.md").read_text()
    capsys.readouterr()
    for content, message in (
        ("{", "val_guard.marks.json:1: not JSON"),
        (json.dumps({"other": 1}), 'no "marks" object'),
        (json.dumps({"marks": {"+bad": "x"}}), 'no "legend" string'),
        (json.dumps({"marks": {"+other": "x"}, "legend": "y"}), "marks for systems the report does not hold: +other"),
    ):
        verdicts.write_text(content)
        assert main(report + ["--marks", str(verdicts)]) == 1
        one_line_error(capsys, message)


def test_the_oracle_and_the_plots_take_the_experiments_metric(tmp_path, capsys):
    """An experiment's ``metric`` (``rerank experiment --oracle-metric``, issue 77): the report's
    oracle row maximises it, not BLEU; ``rerank signif --oracle-metric`` the same; a metric
    without a direction is refused naming the manifest.  The two lists differ under BLEU and
    chrF (asserted), so the test tells the metrics apart."""
    from rerank.metrics import make_objective
    from rerank.tuning.oracle import oracle_select

    refs = ["the black dog runs across the green field", "a woman reads a long book"]
    cands = [
        ["the black dog runs", "the blacks dogs running across the greens fields", "a dog"],
        ["a woman reads", "a women reading a longer books", "book"],
    ]
    hyps = [h for c in cands for h in c]
    offsets = np.array([0, 3, 6])
    picks = {}
    for spec in ("bleu", "chrf"):
        metric = make_objective(spec, "none")
        picks[spec] = [
            hyps[i] for i in oracle_select(metric.stats(hyps, [refs[0]] * 3 + [refs[1]] * 3), offsets, metric)
        ]
    assert picks["bleu"] != picks["chrf"]
    exp = tmp_path / "exp"
    exp.mkdir()
    nbest = NBestList(offsets, hyps, np.zeros((6, 1)), ["NMT"])
    write_nbest(nbest, str(exp / "test.nbest"))
    write_lines(refs, str(exp / "ref.txt"))
    write_lines([c[0] for c in cands], str(exp / "base.txt"))
    argv = ["experiment", str(exp), "--ref", str(exp / "ref.txt"), "--baseline", str(exp / "base.txt")]
    argv += ["--tokenize", "none", "--replicas", "1", "--nbest", str(exp / "test.nbest")]
    argv += ["--system", f"+b={exp}/base.txt"]
    report = ["report", str(exp), "--metrics", "bleu,chrf", "--shuffles", "20", "--resamples", "0", "--no-plots"]
    for spec in ("bleu", "chrf"):
        assert main(argv + (["--oracle-metric", spec] if spec != "bleu" else [])) == 0
        manifest = json.loads((exp / "experiment.json").read_text())
        assert manifest.get("metric") == (None if spec == "bleu" else spec)  # BLEU's manifests stay as they were
        assert main(report) == 0
        assert (exp / "report" / "test.oracle").read_text().splitlines() == picks[spec]
    signif = ["signif", "--ref", str(exp / "ref.txt"), "--baseline", str(exp / "base.txt"), "--tokenize", "none"]
    signif += ["--nbest", str(exp / "test.nbest"), "--metrics", "chrf", "--shuffles", "20", "--resamples", "0"]
    capsys.readouterr()
    for spec in ("bleu", "chrf"):
        assert main(signif + ["--oracle-metric", spec, "--format", "json"]) == 0
        rows = json.loads(capsys.readouterr().out)["rows"]
        oracle = make_objective("chrf", "none")
        want = oracle.corpus_score(picks[spec], refs)
        assert [r["score"] for r in rows if r["system"] == "oracle"] == [pytest.approx(want, abs=1e-9)]
    manifest["metric"] = "length"  # no direction: cannot be maximised
    (exp / "experiment.json").write_text(json.dumps(manifest))
    assert main(report) == 1
    one_line_error(capsys, 'experiment.json: "metric": ')
