import json
import os
import subprocess
import sys

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank.cli import main
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.chrf import ChrfMetric
from rerank.metrics.ter import TerMetric
from rerank.nbest import write_lines
from rerank.signif import approximate_randomization, bootstrap_std, compare, exact_randomization, score_system
from tests.conftest import random_corpus


def test_exact_enumeration_by_hand():
    # TER statistics [edits, ref length]; A has 1, 0, 2 edits, B 2, 1, 2 on 4-word references.
    # Swapping changes the difference by ±1 edit on segments 1 and 2 (segment 3 is tied):
    # |Δ| = 2 edits when both keep or both swap (4 of 8 patterns), 0 otherwise -> p = 4/8.
    a = np.array([[1, 4], [0, 4], [2, 4]], dtype=float)
    b = np.array([[2, 4], [1, 4], [2, 4]], dtype=float)
    assert exact_randomization(TerMetric(), a, b) == pytest.approx(0.5)
    # one decisive segment of three: |Δ| is the same under every pattern -> p = 1
    c = np.array([[3, 4], [0, 4], [2, 4]], dtype=float)
    assert exact_randomization(TerMetric(), a, c) == pytest.approx(1.0)


def test_exact_enumeration_small_p():
    # 10 segments, B always one edit worse: only the identity and the full swap reach |Δ| = 10
    a = np.tile([[0.0, 5.0]], (10, 1))
    b = np.tile([[1.0, 5.0]], (10, 1))
    assert exact_randomization(TerMetric(), a, b) == pytest.approx(2 / 2**10)
    assert compare(TerMetric(), [a], [b]) == pytest.approx(2 / 2**10)  # 2^9 patterns <= 10,000 shuffles: exact


def _every_pattern(metric, a, b):
    """The exact test written out: all 2^n swap patterns, one row each (no halving, no chunks)."""
    n = len(a)
    swap = ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1).astype(bool)
    shuf_a = np.where(swap[:, :, None], b[None], a[None]).sum(1)
    shuf_b = np.where(swap[:, :, None], a[None], b[None]).sum(1)
    diff = np.abs(metric.score(shuf_a) - metric.score(shuf_b))
    observed = abs(float(metric.score(a.sum(0)) - metric.score(b.sum(0))))
    return float(np.mean(diff >= observed * (1 - 1e-12))), diff


@pytest.mark.parametrize("units", [1, 2, 9, 17])
def test_the_halved_chunked_enumeration_is_every_pattern(units):
    """exact_randomization scores the 2^(n-1) patterns that leave the last unit alone, in chunks
    (17 units: 4 chunks of EXACT_CHUNK = 2^14 patterns): its p is all 2^n patterns' p, and its
    null sample, each value counted for its complement too, is all patterns' differences."""
    refs, hyps_a, _ = random_corpus(units, 1, seed=units)
    _, hyps_b, _ = random_corpus(units, 1, seed=units + 100)
    metric = BleuMetric("none")
    a, b = metric.stats(hyps_a, refs), metric.stats(hyps_b, refs)
    expected_p, every = _every_pattern(metric, a, b)
    null: list = []
    assert exact_randomization(metric, a, b, null) == pytest.approx(expected_p, abs=1e-15)
    assert len(null[0]) == 2 ** (units - 1)
    np.testing.assert_allclose(np.sort(np.repeat(null[0], 2)), np.sort(every), rtol=1e-12, atol=1e-12)
    # pattern k swaps unit i where bit i of k is set: the first half of every pattern's, in order
    np.testing.assert_allclose(null[0], every[: 2 ** (units - 1)], rtol=1e-12, atol=1e-12)


def test_compare_enumerates_only_where_it_is_no_dearer_than_the_shuffles():
    refs, hyps_a, _ = random_corpus(15, 1, seed=3)
    _, hyps_b, _ = random_corpus(15, 1, seed=4)
    metric = BleuMetric("none")
    a, b = metric.stats(hyps_a, refs), metric.stats(hyps_b, refs)
    # 14 units: 2^13 = 8,192 patterns <= 10,000 shuffles, exact
    assert compare(metric, [a[:14]], [b[:14]]) == pytest.approx(_every_pattern(metric, a[:14], b[:14])[0])
    # 15 units: 16,384 patterns > 10,000 shuffles, approximate randomisation (sacrebleu's draws)
    assert compare(metric, [a], [b]) == approximate_randomization(metric, a, b, 10000)
    # unless as many shuffles are asked for
    assert compare(metric, [a], [b], shuffles=2**14) == pytest.approx(_every_pattern(metric, a, b)[0])


def test_identical_systems_have_p_one():
    refs, hyps, segment = random_corpus(50, 1, seed=0)
    stats = BleuMetric("none").stats(hyps, refs)
    assert approximate_randomization(BleuMetric("none"), stats, stats.copy(), 500) == 1.0
    assert exact_randomization(BleuMetric("none"), stats[:12], stats[:12]) == 1.0


def test_bootstrap_and_s_opt():
    refs, hyps, segment = random_corpus(80, 3, seed=1)
    metric = BleuMetric("none")
    replicas = [metric.stats([hyps[3 * i + k] for i in range(80)], refs) for k in range(3)]
    result = score_system(metric, replicas, resamples=500, seed=3)
    scores = [
        BLEU(tokenize="none", force=True).corpus_score([hyps[3 * i + k] for i in range(80)], [refs]).score
        for k in range(3)
    ]
    assert result.replica_scores == pytest.approx(scores)
    assert result.score == pytest.approx(np.mean(scores))
    assert result.s_opt == pytest.approx(np.std(scores, ddof=1))
    # s_sel: average of the replicas' bootstrap deviations, reproducible with the seed
    each = [bootstrap_std(metric, s, 500, 3) for s in replicas]
    assert result.s_sel == pytest.approx(np.mean(each))
    assert 0 < result.s_sel < 20
    assert score_system(metric, replicas[:1], resamples=10).s_opt is None


def test_bootstrap_std_matches_explicit_resampling():
    refs, hyps, segment = random_corpus(40, 1, seed=2)
    metric = TerMetric()
    stats = metric.stats(hyps, refs)
    rng = np.random.default_rng(7)
    picks = rng.integers(0, 40, size=(300, 40))  # the documented draw: N indices per resample
    explicit = [TER().corpus_score([hyps[i] for i in row], [[refs[i] for i in row]]).score for row in picks]
    assert bootstrap_std(metric, stats, 300, 7) == pytest.approx(np.std(explicit, ddof=1))


@pytest.mark.parametrize(
    "metric,reference", [(BleuMetric("13a"), BLEU()), (TerMetric(), TER()), (ChrfMetric(), CHRF())]
)
def test_corpus_scores_equal_sacrebleu(metric, reference):
    refs, hyps, segment = random_corpus(60, 1, seed=5)
    hyps = [h.capitalize() + "." for h in hyps]
    assert metric.corpus_score(hyps, refs) == pytest.approx(reference.corpus_score(hyps, [refs]).score, abs=1e-9)


def _sacrebleu_paired_ar(tmp_path, refs, base, systems, trials):
    write_lines(refs, str(tmp_path / "ref"))
    write_lines(base, str(tmp_path / "base"))
    files = [str(tmp_path / "base")]
    for k, sys_lines in enumerate(systems):
        write_lines(sys_lines, str(tmp_path / f"sys{k}"))
        files.append(str(tmp_path / f"sys{k}"))
    cmd = [
        sys.executable,
        "-m",
        "sacrebleu",
        str(tmp_path / "ref"),
        "-i",
        *files,
        "-m",
        "bleu",
        "ter",
        "--paired-ar",
        "--paired-ar-n",
        str(trials),
        "--format",
        "json",
        "--tokenize",
        "none",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "SACREBLEU_SEED": "12345"})
    return json.loads(out.stdout)


def test_single_replica_p_values_equal_sacrebleu_paired_ar(tmp_path, capsys):
    refs, hyps, segment = random_corpus(150, 3, seed=8)
    base = [hyps[3 * i] for i in range(150)]
    systems = [[hyps[3 * i + k] for i in range(150)] for k in (1, 2)]
    theirs = _sacrebleu_paired_ar(tmp_path, refs, base, systems, 2000)
    assert (
        main(
            [
                "signif",
                "--ref",
                str(tmp_path / "ref"),
                "--baseline",
                str(tmp_path / "base"),
                "--system",
                f"sys0={tmp_path / 'sys0'}",
                "--system",
                f"sys1={tmp_path / 'sys1'}",
                "--metrics",
                "bleu,ter",
                "--tokenize",
                "none",
                "--shuffles",
                "2000",
                "--resamples",
                "100",
                "--format",
                "json",
            ]
        )
        == 0
    )
    ours = {(r["system"], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    for k, entry in enumerate(theirs[1:]):
        name = f"sys{k}"
        for metric in ("bleu", "ter"):
            sacre = entry[metric.upper()] if metric.upper() in entry else entry[metric]
            assert ours[(name, metric)]["score"] == pytest.approx(sacre["score"], abs=1e-9)
            assert ours[(name, metric)]["p_value"] == pytest.approx(sacre["p_value"], abs=1e-12)  # same swaps, same p


def test_signif_cli_formats_and_replicas(tmp_path, capsys):
    refs, hyps, segment = random_corpus(40, 4, seed=9)
    write_lines(refs, str(tmp_path / "ref"))
    files = []
    for k in range(4):
        write_lines([hyps[4 * i + k] for i in range(40)], str(tmp_path / f"r{k}"))
        files.append(str(tmp_path / f"r{k}"))
    args = [
        "signif",
        "--ref",
        str(tmp_path / "ref"),
        "--baseline",
        files[0],
        "--system",
        f"A={files[1]},{files[2]}",
        "--system",
        f"B={files[3]}",
        "--compare-to",
        "B",
        "--metrics",
        "bleu,ter,chrf",
        "--tokenize",
        "none",
        "--shuffles",
        "300",
        "--resamples",
        "100",
    ]
    assert main(args + ["--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = result["rows"]
    assert result["meta"]["shuffles"] == 300 and result["meta"]["compare_to"] == "B"  # report's JSON schema
    assert {r["system"] for r in rows} == {"baseline", "A", "B"}
    assert all(set(r) >= {"system", "metric", "score", "s_sel", "s_opt", "p_value"} for r in rows)
    assert [r["p_value"] for r in rows if r["system"] == "baseline"] == [None, None, None]
    a_bleu = next(r for r in rows if r["system"] == "A" and r["metric"] == "bleu")
    assert a_bleu["replicas"] == 2 and a_bleu["s_opt"] is not None and a_bleu["p_compare"] is not None
    for fmt, needle in (
        ("text", "s_sel/s_opt/p"),
        ("markdown", "| system |"),
        ("latex", r"\begin{tabular}"),
        ("csv", "system,metric,score"),
    ):
        assert main(args + ["--format", fmt]) == 0
        out = capsys.readouterr().out
        assert needle in out
        if fmt != "csv":
            assert "300 shuffles" in out and "seed 12345" in out and "nrefs:1" in out


def test_signif_rejects_bad_input(tmp_path, capsys):
    write_lines(["a b", "c d", "e f"], str(tmp_path / "ref"))
    write_lines(["a b", "c d", "e f"], str(tmp_path / "ok"))
    write_lines(["a b", "c d"], str(tmp_path / "short"))
    base = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "ok"), "--metrics", "bleu"]
    assert main(base + ["--system", f"S={tmp_path / 'ok'},{tmp_path / 'short'}"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'short'}: 2 lines but the reference has 3" in err
    assert main(base + ["--system", "S"]) == 1
    assert "expected NAME=FILE" in capsys.readouterr().err
    assert main(base + ["--system", f"S={tmp_path / 'ok'}", "--compare-to", "VSE"]) == 1
    assert "not one of the systems" in capsys.readouterr().err
    three = ",".join([str(tmp_path / "ok")] * 3)
    assert (
        main(
            [
                "signif",
                "--ref",
                str(tmp_path / "ref"),
                "--baseline",
                str(tmp_path / "ok"),
                str(tmp_path / "ok"),
                "--system",
                f"S={three}",
                "--metrics",
                "bleu",
            ]
        )
        == 1
    )
    assert "2 baseline replicas but 3 system replicas" in capsys.readouterr().err


@pytest.mark.meteor
def test_meteor_statistics_recombine_to_the_jars_corpus_score(tmp_path):
    from rerank.metrics.meteor import METEOR_NOTE, MeteorMetric, find_jar

    metric = MeteorMetric(lang="de")
    assert (metric.alpha, metric.beta, metric.gamma, metric.delta) == (0.95, 1.0, 0.55, 0.55)  # the jar's 'de'
    refs = [
        "ein mann fährt rad .",
        "zwei hunde spielen im schnee",
        "zwei kinder spielen im großen park",
        "eine frau mit roten haaren läuft",
    ]
    hyps = [
        "ein mann fährt fahrrad .",
        "zwei hunde spielen",
        "kinder spielen im park mit einem ball",
        "eine frau mit roten haaren läuft",
    ]
    stats = metric.stats(hyps, refs)
    assert stats.shape == (4, 23)
    # per segment and for every subset, our formula equals the jar's EVAL of the summed statistics
    for rows in ([0], [1], [2], [3], [0, 1, 2], [0, 1, 2, 3]):
        assert metric.score(stats[rows].sum(0)) == pytest.approx(metric.jar_score(stats[rows].sum(0)), abs=1e-9)
    # and the corpus score equals the jar's own file-mode "Final score"
    write_lines(hyps, str(tmp_path / "h"))
    write_lines(refs, str(tmp_path / "r"))
    out = subprocess.run(
        [
            "java",
            "-jar",
            find_jar(),
            str(tmp_path / "h"),
            str(tmp_path / "r"),
            "-l",
            "de",
            "-m",
            "exact stem",
            "-w",
            "1.0 0.8",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    final = float(out.split("Final score:")[1].split()[0])
    assert metric.corpus_score(hyps, refs) == pytest.approx(100 * final, abs=1e-9)
    assert "exact stem" in METEOR_NOTE and "paraphrase" in METEOR_NOTE


@pytest.mark.meteor
def test_the_meteor_note_comes_with_german_only(tmp_path):
    """The note on German METEOR's modules (no paraphrase tables here) is printed with a
    German report, not with an English one, whose METEOR has every module."""
    from rerank.report import format_table, significance_table
    from rerank.signif import SignificanceSettings

    refs, hyps, _ = random_corpus(20, 2, seed=3)
    write_lines(refs, str(tmp_path / "r"))
    write_lines(hyps[0::2], str(tmp_path / "b"))
    write_lines(hyps[1::2], str(tmp_path / "s"))
    for lang, noted in (("de", True), ("en", False)):
        settings = SignificanceSettings(metrics=("bleu", "meteor"), lang=lang, shuffles=50, resamples=20)
        table = format_table(
            significance_table(str(tmp_path / "r"), [str(tmp_path / "b")], [("S", [str(tmp_path / "s")])], settings)
        )
        assert f"meteor-1.5|lang:{lang}|" in table
        assert ("German: modules 'exact stem'" in table) is noted, lang


@pytest.mark.report
def test_report_from_a_pipeline_directory(tmp_path, capsys):
    from rerank.nbest import NBestList, write_nbest

    refs, hyps, segment = random_corpus(30, 4, seed=12)
    exp = tmp_path / "exp"
    for d in ("data/tok", "nbest", "rerank/nmt"):
        (exp / d).mkdir(parents=True)
    write_lines(refs, str(exp / "data/tok/test_2016_flickr.de"))
    write_lines([hyps[4 * i] for i in range(30)], str(exp / "nbest/test.1best"))
    for k in (1, 2, 3):
        write_lines([hyps[4 * i + k] for i in range(30)], str(exp / f"rerank/nmt/test.seed{k}.txt"))
    offsets = np.arange(0, 121, 4)
    write_nbest(NBestList(offsets, hyps, np.zeros((120, 1)), ["NMT"]), str(exp / "nbest/test.nbest"))
    args = ["report", str(exp), "--metrics", "bleu,ter", "--shuffles", "200", "--resamples", "50"]
    assert main(args) == 1  # no manifest: the report knows no directory layout
    assert "experiment.json" in capsys.readouterr().err
    assert not (exp / "report").exists()
    (exp / "experiment.json").write_text(
        json.dumps(
            {
                "reference": "data/tok/test_2016_flickr.de",
                "baseline": ["nbest/test.1best"],
                "nbest": "nbest/test.nbest",
                "tokenize": "none",
                "systems": [
                    ["+nmt", [f"rerank/nmt/test.seed{k}.txt" for k in (1, 2, 3)]],
                    ["+later", ["rerank/later/test.seed1.txt"]],
                ],
            }
        )
    )  # not run yet
    assert main(args) == 1  # a system named in the manifest is never left out silently
    assert "rerank/later/test.seed1.txt" in capsys.readouterr().err and not (exp / "report").exists()
    assert main(args + ["--partial"]) == 0  # ... only when asked, and then named in the table
    text = capsys.readouterr().out
    assert "+nmt" in text and "oracle" in text and "baseline" in text
    assert "left out (not run yet, --partial): +later" in text and "\n+later" not in text
    assert text.index("baseline") < text.index("+nmt") < text.index("oracle")
    for name in ("table.md", "table.tex", "table.json", "table.txt", "gains.png", "null.png"):
        assert (exp / "report" / name).stat().st_size > 0
    # the page embeds both plots under their names, not the staged files' (so that it is the same every run)
    page = (exp / "report" / "index.html").read_text()
    assert page.count('<img alt="gains.png"') == 1 and page.count('<img alt="null.png"') == 1, page[:300]
    data = json.loads((exp / "report/table.json").read_text())
    nmt = [r for r in data["rows"] if r["system"] == "+nmt"]
    assert all(r["replicas"] == 3 for r in nmt)
    oracle_bleu = next(r["score"] for r in data["rows"] if r["system"] == "oracle" and r["metric"] == "bleu")
    assert oracle_bleu > max(r["score"] for r in data["rows"] if r["metric"] == "bleu" and r["system"] != "oracle")


@pytest.mark.report
def test_report_prints_the_papers_value_beside_ours(tmp_path, capsys):
    from rerank.errors import InputError
    from rerank.report_sources import read_paper_table

    refs, hyps, segment = random_corpus(20, 2, seed=3)
    exp = tmp_path / "exp"
    exp.mkdir()
    write_lines(refs, str(exp / "ref"))
    write_lines([hyps[2 * i] for i in range(20)], str(exp / "base"))
    write_lines([hyps[2 * i + 1] for i in range(20)], str(exp / "vse"))
    (tmp_path / "paper.tsv").write_text(
        "# Calixto & Liu (2017), Tables 3 and 4\n"
        "nbest\tvariant\tsystem\tBLEU\tBLEU_marks\tTER\tTER_marks\n"
        "20\tweak\tbaseline\t25.7\t\t56.1\t\n20\tweak\t+VSE\t25.8\t†\t56.1\n"
        "20\tregular\t+VSE\t32.2\t\t52.6\t‡\n"
    )
    published, source = read_paper_table(str(tmp_path / "paper.tsv"), {"nbest": "20", "variant": "weak"})
    assert published == {
        ("baseline", "bleu"): {"score": 25.7, "marks": ""},
        ("baseline", "ter"): {"score": 56.1, "marks": ""},
        ("+VSE", "bleu"): {"score": 25.8, "marks": "†"},
        ("+VSE", "ter"): {"score": 56.1, "marks": ""},
    }
    assert source == "Calixto & Liu (2017), Tables 3 and 4"
    with pytest.raises(InputError, match="no column 'beam'"):
        read_paper_table(str(tmp_path / "paper.tsv"), {"beam": "20"})
    (exp / "experiment.json").write_text(
        json.dumps(
            {
                "reference": "ref",
                "baseline": ["base"],
                "nbest": None,
                "tokenize": "none",
                "systems": [["+VSE", ["vse"]]],
                "caption": "protocol: cross-fitted, 5 folds",
                "paper": {"table": str(tmp_path / "paper.tsv"), "select": {"nbest": 20, "variant": "weak"}},
            }
        )
    )
    assert main(["report", str(exp), "--metrics", "bleu,ter", "--shuffles", "100", "--resamples", "20"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("system")
    lines = text.splitlines()
    assert "· paper 25.8†" in next(line for line in lines if line.startswith("+VSE"))
    assert "· paper 56.1" in next(line for line in lines if line.startswith("baseline"))
    assert "protocol: cross-fitted, 5 folds" in text and "paper: the published value" in text
    rows = json.loads((exp / "report/table.json").read_text())["rows"]
    assert next(r for r in rows if r["system"] == "+VSE" and r["metric"] == "bleu")["paper"] == {
        "score": 25.8,
        "marks": "†",
    }


def test_ter_edit_counts_equal_sacrebleu_including_long_and_degenerate_lines():
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(12)]  # few types: many repeated words, many shift candidates
    hyps, refs = [], []
    for _k in range(400):
        ref = list(rng.choice(words, size=rng.integers(0, 90)))
        hyp = list(ref)
        for _ in range(rng.integers(0, 12)):
            i = int(rng.integers(0, len(hyp) + 1))
            choice = rng.random()
            if choice < 0.3 and hyp:
                j = int(rng.integers(0, len(hyp)))
                block = hyp[j : j + int(rng.integers(1, 6))]
                del hyp[j : j + len(block)]
                hyp[i:i] = block  # a block shift
            elif choice < 0.6 and hyp:
                del hyp[min(i, len(hyp) - 1)]
            else:
                hyp.insert(i, str(rng.choice(words)))
        hyps.append(" ".join(hyp))
        refs.append(" ".join(ref))
    hyps += ["", "a b c", "x " * 120, "A B. c"]  # empty hypothesis, empty reference, length ratio > 50
    refs += ["a b", "", "x", "a b . C"]
    ours = TerMetric().stats(hyps, refs)
    theirs = np.asarray(TER()._extract_corpus_statistics(hyps, [refs]), dtype=float)
    assert np.array_equal(ours, theirs)


def test_length_ratio_as_multeval():
    from rerank.metrics import make_metric

    metric = make_metric("length", "none")
    stats = metric.stats(["a b c", "a", "x y z w"], ["a b", "a b c", "x y z w"])
    assert stats.tolist() == [[3, 2], [1, 3], [4, 4]]
    assert metric.corpus_score(["a b c", "a", "x y z w"], ["a b", "a b c", "x y z w"]) == pytest.approx(100 * 8 / 9)


def test_meteor_unavailable_is_reported_and_other_metrics_still_run(tmp_path, capsys, monkeypatch):
    import shutil

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None if name == "java" else real_which(name, *a, **k))
    write_lines(["a b c", "d e f"], str(tmp_path / "ref"))
    write_lines(["a b c", "d e"], str(tmp_path / "b"))
    write_lines(["a b", "d e f"], str(tmp_path / "s"))
    assert (
        main(
            [
                "signif",
                "--ref",
                str(tmp_path / "ref"),
                "--baseline",
                str(tmp_path / "b"),
                "--system",
                f"S={tmp_path / 's'}",
                "--metrics",
                "bleu,meteor,ter",
                "--lang",
                "de",
                "--resamples",
                "10",
                "--format",
                "text",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "METEOR unavailable: no 'java' on PATH" in captured.err
    assert "BLEU" in captured.out and "TER" in captured.out and "METEOR unavailable" in captured.out


def test_marks_distinguish_improvement_from_degradation():
    from rerank.report import marks

    row = {"higher_is_better": True, "p_value": 0.01, "delta": 0.5, "p_compare": 0.2, "delta_compare": 0.1}
    assert marks(row) == "†"
    assert marks({**row, "delta": -0.5}) == "↓"  # significantly worse: not the paper's dagger
    assert marks({**row, "p_compare": 0.001, "delta_compare": -0.3}) == "†⇓"
    assert marks({**row, "higher_is_better": False, "delta": 0.5}) == "↓"  # TER went up
    assert marks({**row, "higher_is_better": False, "delta": -0.5, "p_compare": 0.01, "delta_compare": -0.1}) == "†‡"
    assert marks({**row, "higher_is_better": None}) == ""  # length: no direction
    assert marks({**row, "p_value": 0.2}) == ""


@pytest.mark.parametrize("why", ["--no-plots", "no matplotlib"])
def test_report_writes_its_tables_without_plots(tmp_path, capsys, monkeypatch, why):
    """Without matplotlib (a core install) or with --no-plots the tables are written, the
    plots are skipped (said in one line, before the work, when matplotlib is missing), and
    no PNG is written; runs in a core-only install too."""
    import rerank.cli.scoring

    refs, hyps, _ = random_corpus(20, 2, seed=13)
    exp = tmp_path / "exp"
    exp.mkdir()
    write_lines(refs, str(exp / "ref.de"))
    write_lines([hyps[2 * i] for i in range(20)], str(exp / "beam.txt"))
    write_lines([hyps[2 * i + 1] for i in range(20)], str(exp / "sys.txt"))
    manifest = {"reference": "ref.de", "baseline": ["beam.txt"], "tokenize": "none", "systems": [["+x", ["sys.txt"]]]}
    (exp / "experiment.json").write_text(json.dumps(manifest))
    args = ["report", str(exp), "--metrics", "bleu,ter", "--shuffles", "100", "--resamples", "20"]
    if why == "--no-plots":
        args.append("--no-plots")
    else:
        monkeypatch.setattr(rerank.cli.scoring, "plots_available", lambda: False)
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # an import would fail
    assert main(args) == 0
    err = capsys.readouterr().err
    assert ("plots skipped: matplotlib is not installed" in err) == (why == "no matplotlib")
    names = sorted(p.name for p in (exp / "report").iterdir())
    assert names == ["index.html", "table.json", "table.md", "table.tex", "table.txt"]  # the page: always
    rows = json.loads((exp / "report" / "table.json").read_text())["rows"]
    assert {r["system"] for r in rows} == {"baseline", "+x"}


def test_identical_replicas_are_named_in_one_warning(tmp_path, capsys):
    """The same replica given three times counts as three optimiser runs (issue 61, item 9):
    the test says so, naming the system and the replicas; distinct replicas pass in silence."""
    from rerank.cli import main
    from rerank.signif import identical_replicas

    assert identical_replicas([["a"], ["b"], ["a"], ["a"], ["b"]]) == [(1, 3), (1, 4), (2, 5)]
    assert identical_replicas([["a"], ["b"]]) == []
    refs, hyps, _ = random_corpus(30, 3, seed=4)
    write_lines(refs, str(tmp_path / "ref"))
    for k in range(3):
        write_lines([hyps[3 * i + k] for i in range(30)], str(tmp_path / f"r{k}"))
    base, one, two = (str(tmp_path / f"r{k}") for k in range(3))
    common = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", base, "--metrics", "bleu", "--tokenize", "none"]
    common += ["--shuffles", "50", "--resamples", "10"]
    assert main(common + ["--system", f"same={one},{one},{one}"]) == 0
    err = capsys.readouterr().err
    assert "rerank: warning: same: replicas 1 and 2, 1 and 3 are identical" in err
    assert main(common + ["--system", f"distinct={one},{two}"]) == 0
    assert "identical" not in capsys.readouterr().err


def test_latex_tables_escape_every_special_character_of_a_system_name(tmp_path, capsys):
    """``signif --format latex``: a system name with ``& % $ # _ { } ~ ^ \\`` prints as itself
    in LaTeX (issue 62: ``& \\ $ { } ~ ^`` went through raw)."""
    import re

    from rerank.cli import main
    from rerank.report import tex

    assert tex(r"a&b%c$d#e_f{g}h~i^j\k") == (
        r"a\&b\%c\$d\#e\_f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )
    refs, hyps, _ = random_corpus(20, 2, seed=5)
    write_lines(refs, str(tmp_path / "ref"))
    for k in range(2):
        write_lines([hyps[2 * i + k] for i in range(20)], str(tmp_path / f"r{k}"))
    name = r"A&B_{x}~^$\%#"
    args = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "r0"), "--metrics", "bleu"]
    assert (
        main(
            args
            + ["--system", f"{name}={tmp_path / 'r1'}", "--format", "latex", "--shuffles", "20", "--resamples", "5"]
        )
        == 0
    )
    table = capsys.readouterr().out
    row = next(line for line in table.splitlines() if line.startswith("A"))
    assert row.startswith(tex(name) + " & ")
    # nothing special is left unescaped in the row's name
    assert not re.search(
        r"(?<!\\)[&%$#_{}~^]",
        tex(name).replace(r"\textasciitilde{}", "").replace(r"\textasciicircum{}", "").replace(r"\textbackslash{}", ""),
    )
