"""Metrics as tuning objectives (issue 19): chrF, TER, METEOR, interpolations and external
segment scores (``seg:``) for the tuners, the oracle, evaluation and significance."""

import itertools
import json

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF, TER

from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics import make_metric, make_objective
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import bleu_stats
from rerank.signif import compare, resample_counts, score_system
from rerank.tuning._native import mert_envelope, mert_line_search
from rerank.tuning.base import Problem, corpus_score
from rerank.tuning.mert import Mert, MertConfig, sweep
from rerank.tuning.mira import Mira, MiraConfig
from rerank.tuning.oracle import oracle_select
from rerank.tuning.pro import Pro, ProConfig
from tests.conftest import one_line_error, random_corpus

BLEU_METRIC = BleuMetric()


def _nbest(num_segments, nbest, seed, num_features=2):
    """A random list with 2 features that see quality and length noisily, as test_tuners'."""
    refs, hyps, segment = random_corpus(num_segments, nbest, seed=seed)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    rng = np.random.default_rng(seed)
    bleu = bleu_stats(hyps, refs, segment)
    quality = bleu[:, 0] / np.maximum(bleu[:, 1], 1)
    features = np.stack(
        [quality + rng.normal(scale=0.3, size=len(hyps)), -bleu[:, 1] / 10.0 + rng.normal(scale=0.3, size=len(hyps))]
        + [rng.normal(size=len(hyps)) for _ in range(num_features - 2)],
        axis=1,
    )
    return refs, hyps, segment, offsets, features


def _stats(metric, hyps, refs, segment):
    return metric.hypothesis_stats(hyps, refs, segment, np.arange(len(hyps)))


# --- statistics: summed rows give the reference tools' corpus scores -------------------


@pytest.mark.parametrize(
    "name, reference", [("chrf", CHRF()), ("ter", TER()), ("bleu", BLEU(tokenize="none", force=True))]
)
def test_summed_hypothesis_statistics_equal_sacrebleu(name, reference):
    refs, hyps, segment, offsets, _ = _nbest(30, 6, seed=3)
    metric = make_metric(name, tokenize="none")
    stats = _stats(metric, hyps, refs, segment)
    for pick in (offsets[:-1], offsets[1:] - 1):  # the first and the last hypothesis of every segment
        expected = reference.corpus_score([hyps[i] for i in pick], [refs]).score
        assert float(metric.score(stats[pick].sum(0))) == pytest.approx(expected, abs=1e-9)


def test_meteor_hypothesis_statistics_equal_the_jar():
    from rerank.metrics.meteor import MeteorUnavailable

    try:
        metric = make_metric("meteor", lang="de")
    except MeteorUnavailable as err:
        pytest.skip(str(err))
    refs, hyps, segment, offsets, _ = _nbest(12, 3, seed=5)
    stats = _stats(metric, hyps, refs, segment)
    pick = offsets[:-1] + 1
    assert float(metric.score(stats[pick].sum(0))) == pytest.approx(metric.jar_score(stats[pick].sum(0)), abs=1e-4)


def test_metric_specifications_and_their_errors():
    assert make_metric("bleu-ter").name == "bleu-ter"
    inter = make_metric("0.5*bleu-0.5*ter", tokenize="none")
    refs, hyps, segment, offsets, _ = _nbest(10, 3, seed=1)
    stats = _stats(inter, hyps, refs, segment)[offsets[:-1]].sum(0)
    first = [hyps[i] for i in offsets[:-1]]
    bleu = BLEU(tokenize="none", force=True).corpus_score(first, [refs]).score
    ter = TER().corpus_score(first, [refs]).score
    assert float(inter.score(stats)) == pytest.approx(0.5 * bleu - 0.5 * ter)
    # Moses --sctype BLEU,TER --scconfig weights:0.5+0.5 scores 0.5*BLEU + 0.5*(1 - TER) on a 0-1 scale
    moses = 0.5 * bleu / 100 + 0.5 * (1 - ter / 100)
    assert float(inter.score(stats)) == pytest.approx(100 * (moses - 0.5))
    assert make_metric("seg:comet").higher_is_better and not make_metric("seg:metricx:lower").higher_is_better
    for bad, needle in (
        ("0.5*bleu+0.5*ter", "-ter"),
        ("-bleu", "+bleu"),
        ("bleu+length", "no better direction"),
        ("bleu*2", "cannot read"),
        ("nope", "unknown metric"),
        ("seg:a/b", "letters, digits"),
        ("seg:x:upper", "seg:NAME:lower"),
    ):
        with pytest.raises(InputError) as err:
            make_objective(bad)
        assert needle in str(err.value)
    with pytest.raises(InputError, match="cannot be optimised"):
        make_objective("length")


# --- MERT: the exact optimum under any metric -------------------------------------------


def _exact_2d_optimum(metric, features, stats, offsets):
    """The best corpus gain over all 2-feature weight directions (test_tuners' construction):
    the model-best hypotheses change only where two lines of a segment swap order."""
    angles = [0.0]
    for s in range(len(offsets) - 1):
        h = features[offsets[s] : offsets[s + 1]]
        for i, j in itertools.combinations(range(len(h)), 2):
            d = h[i] - h[j]
            if np.any(d != 0):
                t = np.arctan2(-d[0], d[1])
                angles += [t % (2 * np.pi), (t + np.pi) % (2 * np.pi)]
    angles = np.unique(angles)
    mids = (angles + np.roll(angles, -1) + np.where(np.arange(len(angles)) == len(angles) - 1, 2 * np.pi, 0)) / 2
    problem = Problem(features, stats, offsets, np.zeros(2), metric)
    return max(problem.gain(np.array([np.cos(t), np.sin(t)])) for t in mids)


@pytest.mark.parametrize("name", ["chrf", "ter", "0.5*bleu+0.5*chrf"])
def test_mert_finds_the_exact_two_feature_optimum_of_any_metric(name):
    metric = make_objective(name, tokenize="none")
    refs, hyps, segment, offsets, features = _nbest(40, 8, seed=11)
    stats = _stats(metric, hyps, refs, segment)
    optimum = _exact_2d_optimum(metric, features, stats, offsets)
    problem = Problem(features, stats, offsets, np.zeros(2), metric)
    grid = max(problem.gain(np.array([np.cos(t), np.sin(t)])) for t in np.linspace(0, 2 * np.pi, 3601))
    assert optimum >= grid - 1e-9
    result = Mert(MertConfig(restarts=5, seed=1)).tune(features, stats, offsets, None, metric=metric)
    gain = result.score if metric.higher_is_better else -result.score
    assert gain == pytest.approx(optimum)
    assert result.score == pytest.approx(corpus_score(features, stats, offsets, result.vector, metric))
    assert result.metric == metric.name


def test_numpy_sweep_equals_the_c_line_search_on_bleu():
    refs, hyps, segment, offsets, features = _nbest(60, 10, seed=4, num_features=3)
    stats = bleu_stats(hyps, refs, segment)
    rng = np.random.default_rng(0)
    for _ in range(20):
        a, b = features @ rng.normal(size=3), features @ rng.normal(size=3)
        gamma_c, bleu_c, _ = mert_line_search(a, b, stats, offsets)
        gamma, bleu = sweep(BleuMetric("none"), stats, *mert_envelope(a, b, offsets))
        assert gamma == pytest.approx(gamma_c, abs=1e-12) and bleu == pytest.approx(bleu_c, abs=1e-9)


def test_mert_with_random_directions_only_from_enough_features():
    refs, hyps, segment, offsets, features = _nbest(20, 5, seed=2, num_features=3)
    stats = bleu_stats(hyps, refs, segment)
    few = Mert(MertConfig(restarts=2)).tune(features, stats, offsets, metric=BLEU_METRIC)
    always = Mert(MertConfig(restarts=2, random_min_features=1)).tune(features, stats, offsets, metric=BLEU_METRIC)
    assert few.details["random_directions"] == 0 and always.details["random_directions"] == 10
    assert few.details["line_searches"] < always.details["line_searches"]


# --- MIRA and PRO ---------------------------------------------------------------------


def test_mira_numpy_loop_equals_the_c_loop_on_bleu():
    refs, hyps, segment, offsets, features = _nbest(50, 8, seed=7, num_features=3)
    stats = bleu_stats(hyps, refs, segment)
    config = MiraConfig(iterations=8, seed=3)
    c_loop = Mira(config).tune(features, stats, offsets, metric=BLEU_METRIC)
    numpy_tuner = Mira(config)
    numpy_tuner.numpy_loop = True
    numpy_loop = numpy_tuner.tune(features, stats, offsets, metric=BLEU_METRIC)
    assert np.allclose(numpy_loop.vector, c_loop.vector, rtol=1e-9, atol=1e-12)
    assert numpy_loop.details["epoch_updates"] == c_loop.details["epoch_updates"]
    assert numpy_loop.score == pytest.approx(c_loop.score)


def test_a_mira_epoch_in_blocks_of_segments_is_the_epoch_in_one_call():
    """Each epoch runs a block of segments per call (so an interrupt waits for one block):
    blocks of 7 segments give exactly the one-call epoch, for the C and the numpy loop."""
    refs, hyps, segment, offsets, features = _nbest(50, 8, seed=7, num_features=3)
    stats = bleu_stats(hyps, refs, segment)
    config = MiraConfig(iterations=5, seed=3)
    for numpy_loop in (False, True):
        whole, blocks = Mira(config), Mira(config)
        whole.numpy_loop = blocks.numpy_loop = numpy_loop
        blocks.BLOCK = 7
        a, b = (
            whole.tune(features, stats, offsets, metric=BLEU_METRIC),
            blocks.tune(features, stats, offsets, metric=BLEU_METRIC),
        )
        assert np.array_equal(a.weights, b.weights)
        assert a.details["epoch_updates"] == b.details["epoch_updates"]
        assert a.details["epoch_score"] == b.details["epoch_score"]


def _chrf_versus_bleu_list():
    """Every segment: hypothesis A (the beam's: right words, wrong content, BLEU 29.0 chrF
    48.6) and B (the content with wrong inflections: BLEU 4.9, chrF 54.1)."""
    ref = "eine frau in einem roten kleid spielt gitarre auf der straße"
    a = "eine frau in einem blauen hemd spielt flöte auf der bühne"
    b = "eine frauen in einen rotem kleide spielen gitarren auf den straßen"
    n = 6
    refs, hyps = [ref] * n, [a, b] * n
    segment = np.repeat(np.arange(n), 2)
    offsets = np.arange(0, 2 * n + 1, 2)
    features = np.tile(np.array([[1.0, 0.0], [0.0, 1.0]]), (n, 1))  # F0: is A (the beam), F1: is B
    return refs, hyps, segment, offsets, features


@pytest.mark.parametrize(
    "tuner",
    [
        Mira(MiraConfig()),
        Mert(MertConfig(restarts=3)),
        pytest.param(Pro(ProConfig()), marks=[pytest.mark.filterwarnings("ignore"), pytest.mark.pro]),
    ],
)
def test_tuning_for_chrf_raises_chrf_where_bleu_tuning_does_not(tuner):
    refs, hyps, segment, offsets, features = _chrf_versus_bleu_list()
    chrf, bleu = make_objective("chrf"), make_objective("bleu", tokenize="none")
    init = np.array([1.0, 0.0])
    chrf_stats, bleu_stats_ = _stats(chrf, hyps, refs, segment), _stats(bleu, hyps, refs, segment)
    by_bleu = tuner.tune(features, bleu_stats_, offsets, init, metric=bleu)
    by_chrf = tuner.tune(features, chrf_stats, offsets, init, metric=chrf)
    beam_chrf = corpus_score(features, chrf_stats, offsets, init, chrf)
    assert beam_chrf == pytest.approx(CHRF().corpus_score([hyps[0]] * 6, [refs]).score)
    assert corpus_score(features, chrf_stats, offsets, by_bleu.vector, chrf) == pytest.approx(beam_chrf)
    assert by_chrf.score == pytest.approx(CHRF().corpus_score([hyps[1]] * 6, [refs]).score)
    assert by_chrf.score > beam_chrf + 5 and by_chrf.initial_score == pytest.approx(beam_chrf)


def test_mira_tunes_for_ter_and_never_ends_worse_than_its_start():
    metric = make_objective("ter")
    refs, hyps, segment, offsets, features = _nbest(40, 8, seed=9)
    stats = _stats(metric, hyps, refs, segment)
    result = Mira(MiraConfig(iterations=15)).tune(features, stats, offsets, np.array([0.0, 1.0]), metric=metric)
    assert result.score <= result.initial_score  # TER: lower is better
    assert result.score < result.initial_score - 1
    assert result.length_ratio is None and result.metric == "ter"


# --- oracle -----------------------------------------------------------------------------


def test_the_oracle_of_each_metric_maximises_that_metric():
    refs, hyps, segment, offsets, _ = _chrf_versus_bleu_list()
    chrf, bleu = make_objective("chrf"), make_objective("bleu", tokenize="none")
    assert list(oracle_select(_stats(chrf, hyps, refs, segment), offsets, chrf)) == list(offsets[1:] - 1)
    assert list(oracle_select(_stats(bleu, hyps, refs, segment), offsets, bleu)) == list(offsets[:-1])
    refs, hyps, segment, offsets, _ = _nbest(40, 8, seed=6)
    ter = make_objective("ter")
    pick = oracle_select(_stats(ter, hyps, refs, segment), offsets, ter)
    score = lambda rows: TER().corpus_score([hyps[i] for i in rows], [refs]).score  # noqa: E731
    assert score(pick) < score(offsets[:-1]) and score(pick) <= min(score(offsets[:-1] + k) for k in range(8))


# --- seg: external segment scores ---------------------------------------------------------


def test_seg_significance_equals_a_hand_computation(tmp_path):
    values = {"base": [0.5, 0.7, 0.2, 0.9, 0.4], "sys": [0.6, 0.9, 0.1, 0.95, 0.8]}
    metric = make_metric("seg:comet")
    stats = {}
    for name, scores in values.items():
        path = tmp_path / name
        path.write_text("x\n" * 5)
        (tmp_path / f"{name}.comet").write_text("".join(f"{v}\n" for v in scores))
        bound = metric.bind(str(path))
        bound.check_count(5)
        stats[name] = bound.hypothesis_stats(["x"] * 5, ["r"] * 5, np.arange(5), np.arange(5))
    # exact randomisation by hand: every swap pattern of the 5 pairs
    a, b = np.array(values["base"]), np.array(values["sys"])
    observed = abs(a.mean() - b.mean())
    hits = 0
    for pattern in itertools.product([0, 1], repeat=5):
        keep = np.array(pattern, dtype=bool)
        a2, b2 = np.where(keep, a, b), np.where(keep, b, a)
        hits += abs(a2.mean() - b2.mean()) >= observed * (1 - 1e-12)
    assert compare(metric, [stats["base"]], [stats["sys"]]) == pytest.approx(hits / 32)
    # bootstrap s_sel by hand: the standard deviation of resampled means
    counts = resample_counts(5, 200, 7)
    means = [np.repeat(b, counts[r].astype(int)).mean() for r in range(200)]
    result = score_system(metric, [stats["sys"]], resamples=200, seed=7)
    assert result.score == pytest.approx(b.mean()) and result.s_sel == pytest.approx(np.std(means, ddof=1))


def test_seg_approximate_randomisation_equals_a_hand_computation():
    from rerank.signif import approximate_randomization, swap_matrix

    rng = np.random.default_rng(1)
    a, b = rng.random(30), rng.random(30) + 0.1
    metric = make_metric("seg:x")
    rows = lambda v: np.column_stack([v, np.ones(len(v))])  # noqa: E731
    swaps = swap_matrix(30, 500, 3)
    observed = abs(a.mean() - b.mean())
    count = sum(abs(np.where(k, a, b).mean() - np.where(k, b, a).mean()) > observed for k in swaps)
    assert approximate_randomization(metric, rows(a), rows(b), 500, 3) == pytest.approx((count + 1) / 501)


def _write(path, lines):
    path.write_text("".join(f"{line}\n" for line in lines))
    return str(path)


def test_seg_cli_eval_signif_tune_oracle(tmp_path, capsys):
    refs, hyps, segment, offsets, features = _nbest(12, 4, seed=8)
    ref = _write(tmp_path / "ref", refs)
    # an external score that prefers the *last* hypothesis of every segment
    position = np.arange(len(hyps)) - offsets[segment]
    seg_scores = 0.1 * position + 0.01 * np.arange(len(hyps)) / len(hyps)
    nbest = _write(
        tmp_path / "dev.nbest",
        [
            f"{s} ||| {h} ||| F0= {f[0]:.6f} F1= {f[1]:.6f} P= {p:.1f} ||| 0"
            for s, h, f, p in zip(segment, hyps, features, position)
        ],
    )
    _write(tmp_path / "dev.nbest.comet", [f"{v:.6f}" for v in seg_scores])
    weights = tmp_path / "w.json"
    assert (
        main(
            [
                "tune",
                "--nbest",
                nbest,
                "--ref",
                ref,
                "--out",
                str(weights),
                "--init",
                "zeros",
                "--quiet",
                "--metric",
                "seg:comet",
                "--algorithm",
                "mert",
                "--mert-restarts",
                "2",
                "--tokenize",
                "none",
            ]
        )
        == 0
    )
    tuning = json.loads(weights.read_text())["tuning"]
    best = offsets[1:] - 1
    assert tuning["metric"] == "seg:comet" and tuning["score"] == pytest.approx(seg_scores[best].mean())
    assert "bleu" not in tuning
    # oracle: the last hypothesis of every segment
    out = tmp_path / "oracle.txt"
    assert main(["oracle", "--nbest", nbest, "--ref", ref, "--out", str(out), "--metric", "seg:comet", "--json"]) == 0
    assert out.read_text().splitlines() == [hyps[i] for i in best]
    assert json.loads(capsys.readouterr().out)["oracle_score"] == pytest.approx(seg_scores[best].mean())
    # eval and signif read FILE.comet beside every system file
    base = _write(tmp_path / "base.txt", [hyps[i] for i in offsets[:-1]])
    _write(tmp_path / "base.txt.comet", [f"{v:.6f}" for v in seg_scores[offsets[:-1]]])
    assert (
        main(["eval", "--ref", ref, "--hyp", f"O={out}", "--hyp", f"B={base}", "--metrics", "seg:comet,chrf", "--json"])
        == 1
    )  # oracle.txt has no sidecar yet
    one_line_error(capsys, "oracle.txt.comet")
    _write(tmp_path / "oracle.txt.comet", [f"{v:.6f}" for v in seg_scores[best]])
    assert (
        main(["eval", "--ref", ref, "--hyp", f"O={out}", "--hyp", f"B={base}", "--metrics", "seg:comet,chrf", "--json"])
        == 0
    )
    rows = {(r["system"], r["metric"]): r["score"] for r in json.loads(capsys.readouterr().out)}
    assert rows[("O", "seg:comet")] == pytest.approx(seg_scores[best].mean(), abs=1e-4)
    assert (
        main(
            [
                "signif",
                "--ref",
                ref,
                "--baseline",
                base,
                "--system",
                f"O={out}",
                "--metrics",
                "seg:comet",
                "--format",
                "json",
                "--resamples",
                "20",
            ]
        )
        == 0
    )
    table = json.loads(capsys.readouterr().out)
    row = [r for r in table["rows"] if r["system"] == "O"][0]
    assert row["score"] == pytest.approx(seg_scores[best].mean()) and row["p_value"] < 0.05 and row["higher_is_better"]


def test_seg_sidecar_errors_name_the_file_and_line(tmp_path, capsys):
    refs, hyps, segment, offsets, features = _nbest(3, 2, seed=1)
    ref = _write(tmp_path / "ref", refs)
    nbest = _write(tmp_path / "n.nbest", [f"{s} ||| {h} ||| F= 1 ||| 0" for s, h in zip(segment, hyps)])
    out = str(tmp_path / "w.json")
    args = ["tune", "--nbest", nbest, "--ref", ref, "--out", out, "--init", "zeros", "--metric", "seg:q", "--quiet"]
    assert main(args) == 1
    one_line_error(capsys, "n.nbest.q")
    _write(tmp_path / "n.nbest.q", ["0.5"] * (len(hyps) - 1))
    assert main(args) == 1
    one_line_error(capsys, f"{len(hyps) - 1} scores", "n.nbest.q")
    _write(tmp_path / "n.nbest.q", ["0.5"] * 3 + ["nan?"] + ["0.1"] * (len(hyps) - 4))
    assert main(args) == 1
    one_line_error(capsys, "n.nbest.q:4")
    assert not (tmp_path / "w.json").exists()
    assert main(["tune", "--nbest", nbest, "--ref", ref, "--out", out, "--init", "zeros", "--metric", "length"]) == 1
    one_line_error(capsys, "cannot be optimised")


def test_crossfit_for_ter_tunes_every_fold_for_ter(tmp_path):
    refs, hyps, segment, offsets, features = _nbest(30, 5, seed=12)
    ref = _write(tmp_path / "ref", refs)
    nbest = _write(
        tmp_path / "t.nbest",
        [f"{s} ||| {h} ||| A= {f[0]:.6f} B= {f[1]:.6f} ||| 0" for s, h, f in zip(segment, hyps, features)],
    )
    folds = _write(tmp_path / "folds.tsv", [f"img{s}.jpg\t{s % 3}" for s in range(30)])
    weights = tmp_path / "w.json"
    assert (
        main(
            [
                "crossfit",
                "--nbest",
                nbest,
                "--ref",
                ref,
                "--folds",
                folds,
                "--out",
                str(tmp_path / "out"),
                "--weights-out",
                str(weights),
                "--init",
                "zeros",
                "--metric",
                "ter",
                "--algorithm",
                "mert",
                "--mert-restarts",
                "3",
                "--quiet",
            ]
        )
        == 0
    )
    record = json.loads(weights.read_text())
    ter = make_objective("ter")
    stats = _stats(ter, hyps, refs, segment)
    for fold in record["folds"]:
        assert fold["metric"] == "ter" and fold["score"] <= fold["initial_score"]
        seen = np.array([s for s in range(30) if s % 3 != fold["fold"]])
        rows = np.concatenate([np.arange(offsets[s], offsets[s + 1]) for s in seen])
        w = np.array([fold["weights"]["A"], fold["weights"]["B"]])
        part_offsets = np.concatenate([[0], np.cumsum(np.diff(offsets)[seen])])
        assert fold["score"] == pytest.approx(corpus_score(features[rows], stats[rows], part_offsets, w, ter))
    assert "ter" in record["metric_signature"].lower()


def test_statistics_of_a_long_tuning_show_progress(tmp_path, capsys, monkeypatch):
    """While the tuning data's statistics are computed (chrF's and TER's take minutes on a
    large list), ``rerank tune`` reports progress, a line every few seconds off a terminal;
    ``--quiet`` says nothing (issue 61, item 10)."""
    from rerank import progress
    from rerank.cli import main
    from rerank.nbest import NBestList, write_lines, write_nbest

    class Every(progress.LineProgress):  # a line at every update, instead of every 10 s
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **{**kwargs, "interval": 0.0})

    monkeypatch.setattr(progress, "LineProgress", Every)
    refs, hyps, segment = random_corpus(30, 4, seed=2)
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    write_nbest(
        NBestList(offsets, hyps, np.random.default_rng(1).normal(size=(len(hyps), 2)), ["F", "G"]),
        str(tmp_path / "l.nbest"),
    )
    write_lines(refs, str(tmp_path / "r"))
    args = [
        "tune",
        "--nbest",
        str(tmp_path / "l.nbest"),
        "--ref",
        str(tmp_path / "r"),
        "--init",
        "zeros",
        "--metric",
        "chrf",
    ]
    assert main(args + ["--out", str(tmp_path / "w.json")]) == 0
    assert "chrf statistics: 30/30 segment" in capsys.readouterr().err
    assert main(args + ["--out", str(tmp_path / "w2.json"), "--quiet"]) == 0
    assert "statistics" not in capsys.readouterr().err
