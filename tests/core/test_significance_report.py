"""Significance reports that tell the whole story (issue 94): the paired bootstrap test equal to
sacreBLEU's ``--paired-bs``, intervals of the difference that cover the true difference at
their nominal rate, adjusted p-values that keep the family-wise error, rank clusters."""

import json
import os

import numpy as np
import pytest

from rerank.cli import main
from rerank.nbest import write_lines
from rerank.signif import compare
from rerank.signif_adjust import NullSample, adjust, clusters, holm
from rerank.signif_bootstrap import paired_bootstrap
from tests.conftest import random_corpus


class MeanScore:
    """A metric whose statistics are [segment score, 1]: the corpus score is their mean, so the
    true difference of two systems is the mean difference of their segments' scores."""

    higher_is_better = True

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        return stats[..., 0] / stats[..., 1]


def _stats(values):
    return np.column_stack([values, np.ones(len(values))])


def _sacrebleu_paired_bs(refs, base, systems, resamples):
    """sacreBLEU 2.6's paired bootstrap (its API: its command line cannot write this test's JSON,
    a float32 it does not serialise), seed 12345 as ``SACREBLEU_SEED`` gives it."""
    from sacrebleu.metrics import BLEU, CHRF, TER
    from sacrebleu.significance import PairedTest

    named = [("base", base)] + [(f"sys{k}", s) for k, s in enumerate(systems)]
    metrics = {"BLEU": BLEU(tokenize="none"), "chrF2": CHRF(), "TER": TER()}
    _, scores = PairedTest(named, metrics, references=[refs], test_type="bs", n_samples=resamples)()
    return scores


def test_bootstrap_p_values_equal_sacrebleu_paired_bs_on_one_replica(tmp_path, capsys):
    refs, hyps, _ = random_corpus(120, 3, seed=4)
    base = [hyps[3 * i] for i in range(120)]
    systems = [[hyps[3 * i + k] for i in range(120)] for k in (1, 2)]
    theirs = _sacrebleu_paired_bs(refs, base, systems, 1000)
    for name, lines in [("ref", refs), ("base", base), ("sys0", systems[0]), ("sys1", systems[1])]:
        write_lines(lines, str(tmp_path / name))
    argv = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "base"), "--tokenize", "none"]
    argv += ["--system", f"sys0={tmp_path / 'sys0'}", "--system", f"sys1={tmp_path / 'sys1'}"]
    argv += ["--metrics", "bleu,chrf,ter", "--resamples", "10", "--test", "bs", "--format", "json"]
    assert main(argv) == 0
    ours = {(r["system"], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    for metric, key in (("bleu", "BLEU"), ("chrf", "chrF2"), ("ter", "TER")):
        for k in range(2):
            row, sacre = ours[(f"sys{k}", metric)], theirs[key][k + 1]
            assert row["score"] == pytest.approx(sacre.score, abs=1e-9)
            assert row["p_value"] == pytest.approx(sacre.p_value, abs=1e-12), (k, metric)  # the same draws
            lo, hi = row["ci"]  # the system's own interval: around sacreBLEU's mean ± ci
            assert lo < sacre.mean < hi and hi - lo == pytest.approx(2 * sacre.ci, rel=0.05)


def test_the_interval_of_the_difference_covers_the_true_difference_at_its_rate():
    rng = np.random.default_rng(2024)
    metric, true, covered = MeanScore(), 0.1, 0
    for k in range(1000):
        a = rng.normal(size=200)
        b = a + true + rng.normal(size=200)
        lo, hi = paired_bootstrap(metric, [_stats(a)], [_stats(b)], 1000, seed=k).delta_ci
        covered += lo <= true <= hi
    assert covered >= 940  # measured: 949 of 1,000 at 95 %


def _null_table(rng, segments=60, systems=6, shuffles=500, seed=0):
    """Every system against one baseline on two correlated metrics, with no true difference:
    each system's segment scores drawn as the baseline's are.  Returns (p-values, null samples)."""
    base = rng.normal(size=segments)
    base2 = base + 0.5 * rng.normal(size=segments)
    p, samples = [], []
    for _ in range(systems):
        own = rng.normal(size=segments)
        for a, b in ((base, own), (base2, own + 0.5 * rng.normal(size=segments))):
            held: list = []
            p.append(compare(MeanScore(), [_stats(a)], [_stats(b)], shuffles, seed, held))
            samples.append(held[0])
    return np.array(p), samples


def test_max_t_and_holm_keep_the_family_wise_error_on_null_tables():
    """On 2,000 null tables of twelve tests each, the share of tables with any adjusted p < 0.05
    (the family-wise error) stays within Monte Carlo error of α for max-T (its exact level: α, the
    shuffles being sign flips shared by every test) and below α for Holm, where the tests alone
    find a false effect in more than a fifth of the tables."""
    rng = np.random.default_rng(1)
    any_raw = any_holm = any_max = 0
    tables = 2000
    for k in range(tables):
        p, samples = _null_table(rng, shuffles=500, seed=999 + k)
        any_raw += bool((p < 0.05).any())
        any_holm += bool((adjust(p, "holm") < 0.05).any())
        adjusted = adjust(p, "maxT", samples)
        assert (adjusted >= p).all()
        any_max += bool((adjusted < 0.05).any())
    rates = {name: count / tables for name, count in (("none", any_raw), ("holm", any_holm), ("maxT", any_max))}
    print(f"family-wise error on {tables} null tables of 12 tests: {rates}")  # measured: 0.286, 0.028, 0.052
    assert rates["none"] > 0.2
    assert rates["holm"] <= 0.05
    assert rates["maxT"] <= 0.05 + 2.5 * np.sqrt(0.05 * 0.95 / tables)  # α within 2.5 standard errors
    assert rates["maxT"] >= rates["holm"]  # max-T uses the tests' dependence: less conservative than Holm


def test_holm_and_clusters_by_hand():
    assert holm([0.01, 0.04, 0.03, 0.005]).tolist() == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]).tolist() == [1.0, 1.0]  # 2 × 0.5 capped at 1; monotone
    scores = {"a": 30.0, "b": 29.5, "c": 27.0, "d": 26.8}
    p = {("a", "b"): 0.4, ("a", "c"): 0.001, ("c", "d"): 0.7, ("b", "c"): 0.01, ("a", "d"): 0.001}
    assert clusters(scores, True, p, 0.05) == {"a": 1, "b": 1, "c": 2, "d": 2}
    assert clusters({k: -v for k, v in scores.items()}, False, p, 0.05) == {"a": 1, "b": 1, "c": 2, "d": 2}


def test_max_t_by_hand():
    """Two tests over four shuffles.  Test 0's null [1, −1, 3.5, −1] has standard deviation
    1.84, test 1's [1, −1, 1, −1] has 1; the largest standardised statistic per shuffle is
    [1, −0.54, 1.90, −0.54].  Test 0 (3 / 1.84 = 1.63) is passed once: p = (1 + 1)/(4 + 1) = 0.4;
    test 1 (0.5) twice: p = (2 + 1)/5 = 0.6."""
    unit = np.array([1.0, -1.0, 1.0, -1.0])
    samples = [NullSample(3.0, np.array([1.0, -1.0, 3.5, -1.0])), NullSample(0.5, unit)]
    assert adjust([0.2, 0.3], "maxT", samples).tolist() == pytest.approx([0.4, 0.6])
    assert adjust([0.2, 0.7], "maxT", samples).tolist() == pytest.approx([0.4, 0.7])  # never below the test's own


def test_signif_gives_intervals_adjusted_p_all_pairs_and_clusters(tmp_path, capsys):
    refs, hyps, _ = random_corpus(80, 4, seed=5)
    write_lines(refs, str(tmp_path / "ref"))
    for k in range(4):
        write_lines([hyps[4 * i + k] for i in range(80)], str(tmp_path / f"s{k}"))
    argv = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "s0"), "--tokenize", "none"]
    argv += [f"--system=a={tmp_path / 's1'}", f"--system=b={tmp_path / 's2'}", f"--system=c={tmp_path / 's3'}"]
    argv += ["--metrics", "bleu,chrf", "--shuffles", "500", "--resamples", "50", "--bootstrap", "300"]
    assert main(argv + ["--adjust", "holm", "--pairs", "all", "--format", "json"]) == 0
    table = json.loads(capsys.readouterr().out)
    rows, meta = table["rows"], table["meta"]
    assert meta["adjust"] == "holm" and meta["family"] == 12  # 6 pairs × 2 metrics
    assert len(meta["pairs"]) == 12 and {p["a"] for p in meta["pairs"]} == {"baseline", "a", "b"}
    raw = [p["p"] for p in meta["pairs"]]
    assert [p["p_adjusted"] for p in meta["pairs"]] == pytest.approx(holm(raw).tolist())
    for row in rows:
        lo, hi = row["ci"]
        assert lo <= row["score"] <= hi
        if row["system"] != "baseline":
            assert row["delta_ci"][0] <= row["delta"] <= row["delta_ci"][1]
            assert row["p_adjusted"] >= row["p_value"]
        assert row["cluster"] >= 1
    best = max((r for r in rows if r["metric"] == "bleu"), key=lambda r: r["score"])
    assert best["cluster"] == 1
    assert main(argv + ["--adjust", "maxT"]) == 0
    text = capsys.readouterr().out
    assert (
        "Δ[" in text
        and "adjusted by Westfall-Young max-T (over the shared shuffles) across the table's 6 tests" in text
    )
    assert main(argv + ["--adjust", "none"]) == 0
    assert "each test alone (no multiple-comparison adjustment)" in capsys.readouterr().out


def test_bad_test_settings_are_one_line(tmp_path, capsys):
    (tmp_path / "r").write_text("a\n")
    argv = ["signif", "--ref", str(tmp_path / "r"), "--baseline", str(tmp_path / "r"), f"--system=x={tmp_path / 'r'}"]
    with pytest.raises(SystemExit):
        main(argv + ["--confidence", "1.5"])
    assert "argument --confidence: '1.5' is not in (0, 1)" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(argv + ["--adjust", "bonferroni"])
    assert "invalid choice" in capsys.readouterr().err


def _experiment(tmp_path):
    """A pipeline directory: a baseline, one system of three replicas, the n-best list they came from."""
    from rerank.nbest import NBestList, write_nbest

    refs, hyps, _ = random_corpus(40, 4, seed=12)
    exp = tmp_path / "exp"
    for d in ("data", "nbest", "rerank/nmt"):
        (exp / d).mkdir(parents=True)
    write_lines(refs, str(exp / "data/test.de"))
    write_lines([f"source {i} <&> words" for i in range(40)], str(exp / "data/test.en"))
    write_lines([hyps[4 * i] for i in range(40)], str(exp / "nbest/test.1best"))
    for k in (1, 2, 3):
        write_lines([hyps[4 * i + k] for i in range(40)], str(exp / f"rerank/nmt/test.seed{k}.txt"))
    write_nbest(NBestList(np.arange(0, 161, 4), hyps, np.zeros((160, 1)), ["NMT"]), str(exp / "nbest/test.nbest"))
    manifest = {
        "reference": "data/test.de",
        "baseline": ["nbest/test.1best"],
        "nbest": "nbest/test.nbest",
        "tokenize": "none",
        "systems": [["+nmt", [f"rerank/nmt/test.seed{k}.txt" for k in (1, 2, 3)]]],
    }
    (exp / "experiment.json").write_text(json.dumps(manifest))
    return exp, refs, hyps


def test_report_writes_the_analysis_and_a_self_contained_page(tmp_path, capsys):
    exp, refs, hyps = _experiment(tmp_path)
    argv = ["report", str(exp), "--metrics", "bleu,chrf,length", "--shuffles", "200", "--resamples", "20"]
    argv += ["--bootstrap", "200", "--no-plots", "--analysis", "--source", str(exp / "data/test.en")]
    assert main(argv + ["--train-source", str(exp / "data/test.en")]) == 0
    table = json.loads((exp / "report/table.json").read_text())
    assert table["meta"]["adjust"] == "maxT"  # the report's default, stated in its footer
    assert "adjusted by Westfall-Young max-T" in (exp / "report/table.txt").read_text()
    analysis = json.loads((exp / "report/analysis/analysis.json").read_text())
    assert set(analysis) == {"+nmt", "oracle"}
    part = analysis["+nmt"]
    assert part["replica"] in (1, 2, 3) and part["sentences"] == "+nmt/sentences.jsonl"
    lines = (exp / "report/analysis" / part["sentences"]).read_text().splitlines()
    sentences = [json.loads(line) for line in lines]
    gains = [s["gain"] for s in sentences]
    assert gains == sorted(gains, reverse=True) and len(sentences) == 40
    picked = [hyps[4 * s["id"] + part["replica"]] for s in sentences]
    assert [s["system"] for s in sentences] == picked  # the median replica's outputs, seed k: hypothesis k
    assert all(hyps[4 * s["id"] + s["rank"] - 1] == s["system"] and s["rank"] <= part["replica"] + 1 for s in sentences)
    assert {s["improved_in"].split(" of ")[1] for s in sentences} == {"3"}
    bucketings = {b["bucketing"] for b in part["buckets"]}
    assert bucketings >= {"reference length", "length ratio", "baseline score decile", "picked n-best rank"}
    assert "source word frequency" in bucketings and "1-best changed" in bucketings
    # a bucket's Δ is the corpus-level difference on its segments
    changed = next(b for b in part["buckets"] if b["bucketing"] == "1-best changed" and b["metric"] == "bleu")
    assert changed["count"] == sum(1 for s in sentences if s["baseline"] != s["system"])
    assert (
        changed["delta_ci"][0] <= changed["delta"] <= changed["delta_ci"][1] and changed["p_adjusted"] >= changed["p"]
    )
    rows = (exp / "report/analysis/+nmt/sentences.tsv").read_text().splitlines()
    assert len(rows) == 41 and rows[0].startswith("id\tgain\timproved_in\trank\tsource")
    page = (exp / "report/index.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and 'id="significance"' in page
    assert 'href="#sys-_nmt"' in page and 'id="s-_nmt-' in page
    assert "source 0 &lt;&amp;&gt; words" in page  # escaped
    assert "http" not in page.replace("http-equiv", "")  # nothing fetched from anywhere


def test_buckets_resampled_together_equal_a_paired_bootstrap_per_bucket():
    """Buckets that hold the same segments for several systems are resampled once for all of them;
    every record still equals the paired bootstrap of its own bucket (same draws, same numbers)."""
    from rerank.metrics import make_metric
    from rerank.metrics.evaluate import shared_stats
    from rerank.report_analysis import AnalysisSettings, bucket_tables

    refs, hyps, _ = random_corpus(60, 3, seed=5)
    texts = {name: [[hyps[3 * i + k] for i in range(60)]] for k, name in enumerate(("baseline", "+a", "+b"))}
    texts["+b"][0][:30] = texts["baseline"][0][:30]  # +b kept the 1-best on its bucket "same"
    metrics = {m: make_metric(m, "none") for m in ("bleu", "chrf", "ter")}
    stats = {m: shared_stats(metric, texts, refs, None) for m, metric in metrics.items()}
    shared = np.array(["short" if len(r.split()) < 8 else "long" for r in refs], dtype=object)
    own = {
        "+a": np.array([str(i % 3) for i in range(60)], dtype=object),
        "+b": np.array(["same" if i < 30 else "changed" for i in range(60)], dtype=object),
    }
    systems = {
        name: ({m: stats[m][name][0] for m in metrics}, {"length": shared, "own": own[name]}) for name in ("+a", "+b")
    }
    settings = AnalysisSettings(bootstrap=300, seed=9)
    tables = bucket_tables(metrics, {m: stats[m]["baseline"][0] for m in metrics}, systems, settings)
    for name, (_, labels) in systems.items():
        assert len(tables[name]) == 3 * (2 + len(set(labels["own"])))
        for record in tables[name]:
            rows = np.flatnonzero(labels[record["bucketing"]] == record["bucket"])
            m = record["metric"]
            boot = paired_bootstrap(metrics[m], [stats[m]["baseline"][0][rows]], [stats[m][name][0][rows]], 300, 9)
            assert record["count"] == len(rows)
            assert record["delta"] == pytest.approx(boot.delta, abs=1e-9)
            assert record["delta_ci"] == pytest.approx(list(boot.delta_ci), abs=1e-9)
            assert record["p"] == boot.p_value
    same = [r for r in tables["+b"] if r["bucket"] == "same"]
    assert len(same) == 3 and all(r["delta"] == 0 and r["delta_ci"] == [0, 0] and r["p"] == 1 for r in same)


def test_percentiles_equal_numpys_quantile_bit_for_bit():
    from rerank.signif_bootstrap import percentile_interval, percentiles

    rng = np.random.default_rng(1)
    for n in (1, 2, 7, 1000, 1001):
        for confidence in (0.5, 0.9, 0.95, 0.99):
            rows = rng.normal(size=(3, n))
            lo, hi = percentiles(rows, confidence)
            expected = np.quantile(rows, [(1 - confidence) / 2, (1 + confidence) / 2], axis=1)
            assert (lo == expected[0]).all() and (hi == expected[1]).all()
            assert percentile_interval(rows[0], confidence) == (expected[0][0], expected[1][0])


def test_the_page_highlights_the_words_that_differ():
    from rerank.report_page import highlight

    before, after = highlight("a man rides a <horse>", "a woman rides a <horse> fast")
    assert before == "a <del>man</del> rides a &lt;horse&gt;"
    assert after == "a <ins>woman</ins> rides a &lt;horse&gt; <ins>fast</ins>"


def test_how_much_a_delta_matters_mt_thresholds_and_the_smallest_detectable_delta(tmp_path, capsys):
    from rerank.report_thresholds import accuracy, calibrated, detectable

    # MT-Thresholds' published fit a · σ(b · Δ): BLEU +1 → 88.33 / (1 + e^-0.9664) = 63.99 %
    assert accuracy(1.0, "bleu") == pytest.approx(88.3333 / (1 + np.exp(-0.96639)), abs=1e-3)
    assert accuracy(-1.0, "bleu") == accuracy(1.0, "bleu")  # the sign's agreement, either way
    assert accuracy(0.0, "chrf") == pytest.approx(93.0 / 2)
    assert calibrated("bleu", "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0") == ("bleu", 1.0)
    assert calibrated("bleu", "nrefs:1|case:mixed|eff:no|tok:none|smooth:exp|version:2.6.0") is None
    assert calibrated("bleu", "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:2.6.0") is None
    assert calibrated("chrf:beta=1", "nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no") is None
    # the smallest detectable Δ: the 95 % quantile of the null's |Δ|
    assert detectable(NullSample(0.0, np.arange(101.0)), 0.05) == pytest.approx(95.0)
    refs, hyps, _ = random_corpus(60, 2, seed=3)
    write_lines(refs, str(tmp_path / "ref"))
    write_lines([hyps[2 * i] for i in range(60)], str(tmp_path / "b"))
    write_lines([hyps[2 * i + 1] for i in range(60)], str(tmp_path / "s"))
    argv = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "b"), f"--system=x={tmp_path / 's'}"]
    argv += ["--metrics", "bleu,chrf,ter", "--shuffles", "1000", "--resamples", "10", "--format", "json"]
    assert main(argv + ["--tokenize", "13a"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"] if r["system"] == "x"}
    assert rows["bleu"]["accuracy"] == pytest.approx(accuracy(rows["bleu"]["delta"], "bleu"))
    assert rows["chrf"]["accuracy"] is not None and rows["ter"]["accuracy"] is None  # TER: not calibrated
    assert all(r["detectable"] > 0 for r in rows.values())
    assert main(argv + ["--tokenize", "none"]) == 0
    rows = {r["metric"]: r for r in json.loads(capsys.readouterr().out)["rows"] if r["system"] == "x"}
    assert rows["bleu"]["accuracy"] is None  # BLEU on tokenised text is not the BLEU the fit knows


def test_the_count_of_test_sets_on_which_an_effect_holds():
    from rerank.report_sets import replicability_count

    # partial conjunctions (N − u + 1) · p_(u): 0.03, 0.06, 0.2 → one set; 0.003, 0.02, 0.02 → three
    assert replicability_count([0.03, 0.2, 0.01], 0.05) == 1
    assert replicability_count([0.02, 0.001, 0.01], 0.05) == 3
    assert replicability_count([0.5, 0.6], 0.05) == 0


def test_one_report_over_several_test_sets(tmp_path, capsys):
    first, _, _ = _experiment(tmp_path / "a")
    second, _, _ = _experiment(tmp_path / "b")
    os.rename(second, tmp_path / "b" / "flickr2017")
    second = tmp_path / "b" / "flickr2017"
    argv = ["report", str(first), str(second), "--metrics", "bleu,chrf", "--shuffles", "200", "--resamples", "20"]
    assert main(argv + ["--bootstrap", "100", "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "holds in" in out and "Δ exp" in out and "Δ flickr2017" in out
    combined = json.loads((first / "report/sets/sets.json").read_text())
    assert combined["meta"]["sets"] == ["exp", "flickr2017"]
    for row in combined["replicability"]:
        p = [
            row["p_adjusted"][s] if (row["deltas"][s] > 0) == (row["metric"] != "ter") else 1.0
            for s in ("exp", "flickr2017")
        ]
        from rerank.report_sets import replicability_count

        assert row["holds_in"] == replicability_count(p, 0.05) and 0 <= row["holds_in"] <= row["better_in"] <= 2
    for directory in (first, second):
        assert (directory / "report/table.txt").exists() and (directory / "report/index.html").exists()
    assert main(argv + ["--out", str(tmp_path / "x")]) == 1
    assert "several test sets" in capsys.readouterr().err


def test_picked_ranks_find_whole_hypotheses_only():
    """The first hypothesis equal to the output, by bytes within its segment: not a prefix, not a
    text across two hypotheses, not another segment's; empty and non-ASCII texts alike."""
    from rerank.nbest import NBestList, PackedStrings
    from rerank.report_analysis import PickedRanks

    hyps = ["a b c", "a b", "a b", "", "ä", "b", "c", "x", "y"]
    offsets = np.array([0, 4, 7, 9])  # segment 0: 4 hypotheses, 1: 3, 2: 2
    outputs = ["a b", "c", "x y"]  # rank 2 (not the prefix of "a b c"); 3; "x" + "y" is no hypothesis
    for strings in (hyps, PackedStrings.from_strings(hyps)):
        nbest = NBestList(offsets, strings, np.zeros((9, 1)), ["F"], np.zeros(9))
        picked = PickedRanks(nbest)
        assert picked.of(outputs) == [2, 3, None]
        assert [picked.rank(0, ""), picked.rank(1, "ä"), picked.rank(1, "a b"), picked.rank(2, "y")] == [4, 1, None, 2]


def test_ngram_differences_by_hand():
    """compare-mt's smoothed ratio (c_sys + 1) / (c_sys + c_base + 2) over the whole outputs, though
    only the changed segments are counted."""
    from rerank.report_analysis import ngram_differences

    baseline = ["a b", "c d", "a a"]
    system = ["a b", "c e", "a"]  # "d" → "e", one "a" fewer; bigrams "c d" → "c e", "a a" gone
    refs = ["a b", "c e", "a b"]
    found = ngram_differences(baseline, system, refs, (1, 2), 10)
    over = {(g["ngram"], g["ratio"], g["system"], g["baseline"], g["reference"]) for g in found["over"]}
    under = [(g["ngram"], g["ratio"], g["system"], g["baseline"], g["reference"]) for g in found["under"]]
    assert over == {("e", 2 / 3, 1, 0, 1), ("c e", 2 / 3, 1, 0, 1)}
    # ratio ascending, then more occurrences first, then the n-gram: "a" (2 of 3 kept) comes last
    assert under == [("a a", 1 / 3, 0, 1, 0), ("c d", 1 / 3, 0, 1, 0), ("d", 1 / 3, 0, 1, 0), ("a", 3 / 7, 2, 3, 2)]
