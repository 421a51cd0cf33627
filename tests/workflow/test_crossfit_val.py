"""scripts/crossfit_val.sh: held-out (cross-fitted) val BLEU of column subsets on a
hand-made pipeline directory, checked against rerank eval of its own outputs."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
from sacrebleu.metrics import BLEU

from rerank.cli import main
from tests.conftest import ROOT, random_corpus

SCRIPT = Path(ROOT) / "scripts" / "crossfit_val.sh"


def _pipeline_out(tmp_path):
    refs, hyps, segment = random_corpus(60, 8, seed=11)
    bleu = BLEU(effective_order=True)
    out = tmp_path / "out"
    (out / "nbest").mkdir(parents=True)
    (out / "data" / "tok").mkdir(parents=True)
    (out / "data" / "tok" / "val.de").write_text("".join(r + "\n" for r in refs))
    (out / "data" / "tok" / "val.en").write_text("".join(r + "\n" for r in refs))
    rng = np.random.default_rng(0)
    lines = []
    for h, s in zip(hyps, segment):
        # Noise: a random column; Good: the hypothesis's own sentence BLEU (an oracle column)
        lines.append(
            f"{s} ||| {h} ||| Noise= {rng.normal():.4f} Good= {bleu.sentence_score(h, [refs[s]]).score:.4f} ||| 0\n"
        )
    (out / "nbest" / "raw.nbest").write_text("".join(lines))
    # features add writes the list's signature, which rerank tune/crossfit want
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(out / "nbest" / "raw.nbest"),
                "--scorer",
                "len:1.0",
                "--source",
                str(out / "data" / "tok" / "val.en"),
                "--out",
                str(out / "nbest" / "val.full.nbest"),
            ]
        )
        == 0
    )
    images = tmp_path / "val_images.txt"
    images.write_text("".join(f"{i}.jpg\n" for i in range(60)))
    return out, images, refs


def _run(*args, **env):
    # the rerank command of the Python running the tests first on PATH (a venv's bin/)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env={**os.environ, "PATH": path, **env}
    )


def test_cross_fitted_bleu_of_two_subsets(tmp_path):
    out, images, refs = _pipeline_out(tmp_path)
    run = _run(str(out), "noise=Noise,LenRatio", "good=Good,LenRatio", IMAGES=str(images), K="3", REPLICAS="2")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [l.split("\t")[0] for l in lines] == ["noise", "good"]
    bleu = BLEU(tokenize="none")
    means = {}
    for line in lines:
        name, mean, seeds, ter, length, columns = line.split("\t")
        assert columns == {"noise": "Noise,LenRatio@bleu", "good": "Good,LenRatio@bleu"}[name]
        hyps = [(out / "crossfit" / name / f"val.seed{s}.txt").read_text().splitlines() for s in (1, 2)]
        scores = [bleu.corpus_score(h, [refs]) for h in hyps]
        assert abs(float(length.split()[1]) - np.mean([round(100 * b.sys_len / b.ref_len, 2) for b in scores])) < 0.006
        assert ter.startswith("TER ")
        want = [
            bleu.corpus_score((out / "crossfit" / name / f"val.seed{s}.txt").read_text().splitlines(), [refs]).score
            for s in (1, 2)
        ]
        assert seeds == "seeds " + " ".join(f"{w:.2f}" for w in want)
        means[name] = float(mean.split()[1])
        assert abs(means[name] - np.mean([round(w, 2) for w in want])) < 0.006
        weights = json.loads((out / "crossfit" / name / "weights.seed1.json").read_text())
        assert len(weights["folds"]) == 3
    assert means["good"] > means["noise"] + 5  # the oracle column wins on folds it never saw
    assert (out / "crossfit" / "results.tsv").read_text().splitlines() == lines
    # resumed: nothing recomputed, the same lines again; another column list under a name is refused
    stamp = (out / "crossfit" / "good" / "val.seed1.txt").stat().st_mtime_ns
    again = _run(str(out), "good=Good,LenRatio", IMAGES=str(images), K="3", REPLICAS="2")
    assert again.stdout.splitlines() == lines[1:]
    assert (out / "crossfit" / "good" / "val.seed1.txt").stat().st_mtime_ns == stamp
    other = _run(str(out), "good=Good", IMAGES=str(images), K="3", REPLICAS="2")
    assert other.returncode == 1 and other.stderr.strip().endswith(
        "holds a run of other columns, folds or options; give another NAME"
    )
    # every column (all) tuned for another metric (@METRIC: rerank tune --metric)
    other = _run(str(out), "lp=all@bleu:length_penalty=1", IMAGES=str(images), K="3", REPLICAS="1")
    assert other.returncode == 0, other.stderr
    assert other.stdout.split("\t")[-1].strip() == "all@bleu:length_penalty=1"
    tuned = json.loads((out / "crossfit" / "lp" / "weights.seed1.json").read_text())
    assert "length_penalty" in json.dumps(tuned)
    # a tuner setting (TUNE_ARGS) reaches rerank crossfit and is recorded with the NAME
    strong = _run(str(out), "c1=Good,LenRatio", IMAGES=str(images), K="3", REPLICAS="1", TUNE_ARGS="--mira-C 0.5")
    assert strong.returncode == 0, strong.stderr
    assert json.loads((out / "crossfit" / "c1" / "weights.seed1.json").read_text())["config"]["C"] == 0.5
    assert (out / "crossfit" / "c1" / "columns").read_text().strip().endswith("fold_seed=1 --mira-C 0.5")


def test_the_replicas_averaged_weights_re_rank_each_held_out_fold(tmp_path):
    """AVERAGE=1: in each fold the seeds' weights, each divided by its L1 norm, averaged
    (rerank average), re-rank that fold's segments; checked against a re-ranking by hand."""
    out, images, refs = _pipeline_out(tmp_path)
    run = _run(str(out), "good=Good,Noise,LenRatio", IMAGES=str(images), K="3", REPLICAS="2", AVERAGE="1")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert [l.split("\t")[0] for l in lines] == ["good", "good/avg"]
    name, mean, seeds, ter, length, columns = lines[1].split("\t")
    assert seeds == "seeds averaged" and columns == "Good,Noise,LenRatio@bleu"
    hyps = (out / "crossfit" / "good" / "val.avg.txt").read_text().splitlines()
    assert mean == f"mean {BLEU(tokenize='none').corpus_score(hyps, [refs]).score:.2f}"
    # by hand: the folds file, each seed's fold weights over L1, their mean, the best per segment
    fold_of = [int(l.split("\t")[1]) for l in (out / "crossfit" / "val.folds.k3.seed1.tsv").read_text().splitlines()]
    runs = [json.loads((out / "crossfit" / "good" / f"weights.seed{s}.json").read_text()) for s in (1, 2)]
    averaged = {}
    for k in range(3):
        vectors = []
        for run_weights in runs:
            w = next(f["weights"] for f in run_weights["folds"] if f["fold"] == k)
            vectors.append({c: v / sum(abs(x) for x in w.values()) for c, v in w.items()})
        averaged[k] = {c: np.mean([v[c] for v in vectors]) for c in vectors[0]}
    from rerank.nbest import read_nbest

    nbest = read_nbest(str(out / "nbest" / "val.full.nbest"))
    expected = []
    for s in range(nbest.num_segments):
        rows = range(nbest.offsets[s], nbest.offsets[s + 1])
        w = averaged[fold_of[s]]
        score = [sum(w.get(c, 0.0) * nbest.features[r, j] for j, c in enumerate(nbest.feature_names)) for r in rows]
        expected.append(nbest.hypotheses[nbest.offsets[s] + int(np.argmax(score))])
    assert hyps == expected
    bad = _run(str(out), "g=Good", IMAGES=str(images), K="3", REPLICAS="1", AVERAGE="1")
    assert bad.returncode == 1 and bad.stderr.strip() == "crossfit_val: error: AVERAGE=1 needs REPLICAS >= 2"


def test_bad_arguments_are_refused_in_one_line(tmp_path):
    run = _run(str(tmp_path))
    assert run.returncode == 1 and run.stderr.strip() == "crossfit_val: error: no NAME=COLUMNS given (--help)"
    run = _run(str(tmp_path), "justcolumns")
    assert (
        run.returncode == 1 and run.stderr.strip() == "crossfit_val: error: 'justcolumns' is not NAME=COLUMNS[@METRIC]"
    )
    run = _run(str(tmp_path), "a=NMT")
    assert (
        run.returncode == 1
        and run.stderr.strip()
        == f"crossfit_val: error: {tmp_path}/nbest/val.full.nbest: no such file (a run_pipeline.sh OUT?)"
    )
    assert not (tmp_path / "crossfit").exists()
    assert _run("--help").returncode == 0 and "cross-fitted" in _run("--help").stdout


def _guard(tmp_path, rows):
    """The val guard on a planted job whose rows (name, columns) are tuned on its val list."""
    out, images, refs = _pipeline_out(tmp_path)
    firsts, seen = [], set()
    for line in (out / "nbest" / "val.full.nbest").read_text().splitlines():
        segment = line.split(" ||| ")[0]
        if segment not in seen:
            seen.add(segment)
            firsts.append(line.split(" ||| ")[1])
    assert len(firsts) == 60
    (out / "nbest" / "val.1best").write_text("".join(h + "\n" for h in firsts))
    systems = []
    for name, columns in rows:
        directory = out / "rerank" / name[1:]
        directory.mkdir(parents=True)
        argv = ["tune", "--nbest", str(out / "nbest" / "val.full.nbest"), "--ref", str(out / "data" / "tok" / "val.de")]
        argv += ["--tokenize", "none", "--features", columns, "--quiet", "--out", str(directory / "weights.seed1.json")]
        assert main(argv) == 0
        systems.append([name, [f"rerank/{name[1:]}/test.seed{{replica}}.txt"]])
    (out / "experiment.json").write_text(
        json.dumps({"reference": "data/tok/val.de", "baseline": ["nbest/val.1best"], "systems": systems})
    )
    script = Path(ROOT) / "scripts" / "val_guard.py"
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    run = subprocess.run(
        [sys.executable, str(script), str(out), "--k", "3", "--images", str(images)],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
    )
    assert run.returncode == 0, run.stderr
    return out, refs


def test_the_val_guard_marks_a_row_that_only_fits_val(tmp_path):
    # two rows tuned on this val list: one on an oracle column (Good), one on noise (Noise):
    # cross-fitted on val, the first gains significantly over the beam, the second does not
    out, refs = _guard(tmp_path, (("+good", "Good,LenRatio"), ("+noise", "Noise")))
    table = (out / "report" / "val_guard.md").read_text()
    good = next(line for line in table.splitlines() if line.startswith("| +good |"))
    noise = next(line for line in table.splitlines() if line.startswith("| +noise |"))
    assert good.endswith("| gain |") and not noise.endswith("| gain |")
    verdicts = json.loads((out / "report" / "val_guard.verdicts.json").read_text())["verdicts"]
    assert verdicts["+good"] == "gain" and verdicts["+noise"] != "gain"
    marks = json.loads((out / "report" / "val_guard.marks.json").read_text())  # what rerank report --marks marks
    assert marks["marks"] == {"+noise": verdicts["+noise"]} and marks["legend"].startswith("the val guard does not")
    # the cross-fitted outputs are those of rerank crossfit with the row's own columns
    weights = json.loads((out / "crossfit" / "guard" / "good" / "weights.seed1.json").read_text())
    assert weights["crossfit"]["features"] == ["Good", "LenRatio"] and len(weights["folds"]) == 3
    result = json.loads((out / "report" / "val_guard.json").read_text())
    assert result["bases"] == {"+good": "", "+noise": ""}  # neither row's columns hold the other's
    bleu = BLEU(tokenize="none")
    hyps = (out / "crossfit" / "guard" / "good" / "val.seed1.txt").read_text().splitlines()
    row = next(r for r in result["rows"] if r["system"] == "+good" and r["metric"] == "bleu")
    assert abs(row["score"] - bleu.corpus_score(hyps, [refs]).score) < 1e-9


def test_the_val_guard_marks_a_feature_set_that_adds_nothing_to_its_base_row(tmp_path):
    # +good-noise adds a noise column to +good's: it gains over the beam (through Good), but the
    # added column carries none of it, so the guard marks it against its base row, +good
    out, refs = _guard(tmp_path, (("+good", "Good,LenRatio"), ("+good-noise", "Good,LenRatio,Noise")))
    result = json.loads((out / "report" / "val_guard.json").read_text())
    assert result["bases"] == {"+good": "", "+good-noise": "+good"}
    verdicts = json.loads((out / "report" / "val_guard.verdicts.json").read_text())["verdicts"]
    assert verdicts == {"+good": "gain", "+good-noise": "no significant gain over +good on val"}
    # the objective (BLEU here) against the beam and against the base, by hand from the outputs
    bleu = BLEU(tokenize="none")
    score = {
        name: bleu.corpus_score(
            (out / "crossfit" / "guard" / name / "val.seed1.txt").read_text().splitlines(), [refs]
        ).score
        for name in ("good", "good-noise")
    }
    beam = bleu.corpus_score((out / "nbest" / "val.1best").read_text().splitlines(), [refs]).score
    row = next(r for r in result["rows"] if r["system"] == "+good-noise" and r["metric"] == "bleu")
    assert abs(row["delta"] - (score["good-noise"] - beam)) < 1e-9 and row["p_value"] < 0.05
    assert abs(row["delta_compare"] - (score["good-noise"] - score["good"])) < 1e-9 and row["p_compare"] >= 0.05
    line = next(
        l for l in (out / "report" / "val_guard.md").read_text().splitlines() if l.startswith("| +good-noise |")
    )
    assert f"| +good | {row['delta_compare']:+.2f} ({row['p_compare']:.4f}) |" in line
