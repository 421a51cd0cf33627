"""Adding a metric, a scorer or a tuner is one new file: the registries find a module of
their package by its ``@REGISTRY.register`` decorator, so the command line (options, help,
choices) and the Python API use it with no other change.

The test copies the ``rerank`` package, adds three toy modules to the copy (one file each,
nothing else edited) and runs the CLI and the API of the copy in a fresh interpreter."""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from tests.conftest import ROOT, write_split

TOY_METRIC = '''
"""A toy metric: unigram recall, 100 · clipped matched words / reference words."""

from collections import Counter

import numpy as np

from rerank.metrics.base import METRICS, Metric


@METRICS.register("toyrecall")
class ToyRecall(Metric):
    """toyrecall: 100 · clipped matched words / reference words"""

    name = "toyrecall"
    width = 2
    size_column = 1

    def __init__(self, lowercase=False):
        self.lowercase = lowercase

    def stats(self, hypotheses, references):
        rows = []
        for h, r in zip(hypotheses, references):
            hyp, ref = Counter(h.split()), Counter(r.split())
            rows.append([sum(min(c, hyp[w]) for w, c in ref.items()), sum(ref.values())])
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), 2)

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        return np.where(stats[..., 1] > 0, 100.0 * stats[..., 0] / np.maximum(stats[..., 1], 1), 0.0)

    def signature(self):
        return "toyrecall|v1"
'''

TOY_SCORER = '''
"""A toy scorer: the hypothesis length in characters, or in words."""

from dataclasses import dataclass

import numpy as np

from rerank.config import option
from rerank.features.scorer import SCORERS, Scorer


@SCORERS.register("toychars")
class ToyChars(Scorer):
    """toychars: -> ToyChars, characters of the hypothesis"""

    summary = "ToyChars: the hypothesis length"

    @dataclass
    class Config:
        unit: str = option("chars", "what is counted", choices=("chars", "words"), positional=True)
        scale: float = option(1.0, "a factor")

    def __init__(self, config):
        self.config = config

    def names(self, has_images):
        return ["ToyChars"]

    def score(self, nbest, sources, images):
        count = len if self.config.unit == "chars" else (lambda h: len(h.split()))
        return {"ToyChars": self.config.scale * np.array([count(h) for h in nbest.hypotheses], dtype=np.float64)}
'''

TOY_TUNER = '''
"""A toy tuner: every column weighted the same."""

from dataclasses import dataclass

import numpy as np

from rerank import DEFAULT_SEED
from rerank.tuning.base import TUNERS, Tuner, option


@TUNERS.register("toy-uniform")
class ToyUniform(Tuner):
    """toy-uniform: one weight for every column"""

    @dataclass
    class Config:
        scale: float = option(1.0, "the weight of every column (default: 1.0)", "--toy-scale", float)
        seed: int = DEFAULT_SEED

    def search(self, problem, progress):
        weights = np.full(problem.features.shape[1], self.config.scale)
        return weights, {"toy_gain": float(problem.gain(weights))}
'''

DRIVER = """
import json, sys
import numpy as np
import rerank
from rerank.cli import main

assert rerank.__file__.startswith(sys.argv[1]), rerank.__file__  # the copy, not the checkout
# the command line
assert main(["eval", "--ref", "test.de", "--hyp", "test.1best", "--metrics", "toyrecall", "--json",
             "--out", "eval.json"]) == 0
assert main(["features", "add", "--nbest", "val.nbest", "--scorer", "toychars:", "--out", "val.toy.nbest"]) == 0
assert main(["tune", "--nbest", "val.toy.nbest", "--ref", "val.de", "--algorithm", "toy-uniform", "--toy-scale",
             "2", "--metric", "toyrecall", "--out", "w.json", "--quiet"]) == 0
# the Python API
val = rerank.add_features(rerank.read_nbest("val.nbest"), ["toychars:chars,scale=2"])
tuned = rerank.tune(val, rerank.read_lines("val.de"), algorithm="toy-uniform", scale=3.0, metric="toyrecall")
api_eval = rerank.evaluate(rerank.read_lines("test.1best"), rerank.read_lines("test.de"), metrics=["toyrecall"])
json.dump({"api_columns": val.feature_names, "api_chars": val.features[:, -1].tolist(),
           "api_config": tuned.details.get("config") if isinstance(tuned.details, dict) else None,
           "api_weights": tuned.weights, "api_metric": tuned.metric, "api_eval": api_eval},
          open("api.json", "w"))
"""


def test_a_toy_metric_scorer_and_tuner_are_one_file_each(tmp_path):
    copy = tmp_path / "site"
    shutil.copytree(
        os.path.join(ROOT, "rerank"), copy / "rerank", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    added = {
        "rerank/metrics/toyrecall.py": TOY_METRIC,
        "rerank/features/toychars.py": TOY_SCORER,
        "rerank/tuning/toyuniform.py": TOY_TUNER,
    }
    for path, code in added.items():
        (copy / path).write_text(textwrap.dedent(code))
    work = tmp_path / "work"
    work.mkdir()
    write_split(work, "val", 12, seed=1)
    write_split(work, "test", 10, seed=2)
    env = {**os.environ, "PYTHONPATH": str(copy)}

    # the checkout itself does not know them (the copy's new files are what adds them)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "rerank.cli",
            "eval",
            "--ref",
            "test.de",
            "--hyp",
            "test.1best",
            "--metrics",
            "toyrecall",
        ],
        cwd=work,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1 and "unknown metric 'toyrecall'" in done.stderr, done.stderr

    # the help texts name them, generated from the registries and the tuner's Config
    for argv, needles in (
        (["tune", "--help"], ["toy-uniform", "--toy-scale", "the weight of every column"]),
        (["features", "add", "--help"], ["toychars:chars|words[,scale=1.0] -> ToyChars: the hypothesis length"]),
        (["eval", "--help"], ["toyrecall"]),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rerank.cli", *argv], cwd=work, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        flat = " ".join(done.stdout.split())
        for needle in needles:
            assert needle in flat, (argv, needle)

    done = subprocess.run([sys.executable, "-c", DRIVER, str(copy)], cwd=work, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]

    # the metric: unigram recall of the 1-best, by hand
    hyps = (work / "test.1best").read_text().splitlines()
    refs = (work / "test.de").read_text().splitlines()
    matched = sum(sum(min(r.split().count(w), h.split().count(w)) for w in set(r.split())) for h, r in zip(hyps, refs))
    expected = 100.0 * matched / sum(len(r.split()) for r in refs)
    (row,) = json.loads((work / "eval.json").read_text())
    assert row["metric"] == "toyrecall" and row["signature"] == "toyrecall|v1"
    assert abs(row["score"] - expected) < 1e-4, (row, expected)
    # the scorer: one column of character counts
    lines = (work / "val.toy.nbest").read_text().splitlines()
    first = lines[0].split(" ||| ")
    assert f"ToyChars= {len(first[1])}" in first[2]
    # the tuner: its Config from the command line, the metric it was asked to maximise
    record = json.loads((work / "w.json").read_text())
    assert record["config"]["scale"] == 2.0 and record["tuning"]["metric"] == "toyrecall"
    assert record["metric_signature"] == "toyrecall|v1"
    assert set(record["weights"]) == {"NMT", "ToyChars"}
    # the API: the same three components by keyword
    api = json.loads((work / "api.json").read_text())
    assert api["api_columns"] == ["NMT", "ToyChars"] and api["api_metric"] == "toyrecall"
    assert api["api_chars"][0] == 2 * len(first[1])
    assert abs(api["api_eval"]["toyrecall"] - expected) < 1e-9


TOY_UTILITY = '''
"""A toy metric with an MBR utility: word-set overlap (Jaccard), 100 · |h ∩ r| / |h ∪ r|."""

import numpy as np

from rerank.metrics.base import METRICS, Metric
from rerank.metrics.utility import PairwiseUtility


def jaccard(h, r):
    h, r = set(h.split()), set(r.split())
    return 100.0 * len(h & r) / max(len(h | r), 1)


class OverlapUtility(PairwiseUtility):
    def pairs(self, texts, hyp, ref):
        return np.array([jaccard(texts[i], texts[j]) for i, j in zip(hyp, ref)], dtype=np.float64)


@METRICS.register("toyoverlap")
class ToyOverlap(Metric):
    """toyoverlap: mean word-set overlap (Jaccard) · 100"""

    name = "toyoverlap"
    width = 2

    def stats(self, hypotheses, references):
        rows = [[jaccard(h, r), 1.0] for h, r in zip(hypotheses, references)]
        return np.asarray(rows, dtype=np.float64).reshape(len(rows), 2)

    def score(self, stats):
        stats = np.asarray(stats, dtype=np.float64)
        return stats[..., 0] / np.maximum(stats[..., 1], 1.0)

    def signature(self):
        return "toyoverlap|v1"

    def utility(self):
        return OverlapUtility("MBRtoyoverlap")
'''


def test_a_toy_mbr_utility_is_one_file(tmp_path):
    """A metric module whose metric has a pairwise utility is an MBR utility of ``rerank mbr``
    and of the ``mbr:`` scorer, with no other file edited (issue 59): expected utilities and
    selections by hand."""
    copy = tmp_path / "site"
    shutil.copytree(
        os.path.join(ROOT, "rerank"), copy / "rerank", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    (copy / "rerank" / "metrics" / "toyoverlap.py").write_text(textwrap.dedent(TOY_UTILITY))
    (tmp_path / "c.nbest").write_text(
        "0 ||| a b c ||| NMT= 0 ||| 0\n0 ||| a b d ||| NMT= 0 ||| 0\n0 ||| x y ||| NMT= 0 ||| 0\n"
        "1 ||| p q ||| NMT= 0 ||| 0\n1 ||| p r ||| NMT= 0 ||| 0\n"
    )
    env = {**os.environ, "PYTHONPATH": str(copy)}

    def rerank(*argv):
        return subprocess.run(
            [sys.executable, "-m", "rerank.cli", *argv], cwd=tmp_path, env=env, capture_output=True, text=True
        )

    done = rerank("mbr", "--nbest", "c.nbest", "--metric", "toyoverlap", "--feature", "uniform", "--out", "o.txt")
    assert done.returncode == 0, done.stderr
    # segment 0: E(a b c) = (100 + 50 + 0) / 3 = E(a b d) > E(x y) = 100 / 3; the first on ties
    assert (tmp_path / "o.txt").read_text() == "a b c\np q\n"
    done = rerank(
        "features", "add", "--nbest", "c.nbest", "--scorer", "mbr:toyoverlap,feature=uniform", "--out", "f.nbest"
    )
    assert done.returncode == 0, done.stderr
    values = [
        float(line.split(" ||| ")[2].split("MBRtoyoverlap= ")[1])
        for line in (tmp_path / "f.nbest").read_text().splitlines()
    ]
    third = 100.0 / 3.0
    assert values == [pytest.approx(v) for v in (150 / 3, 150 / 3, third, (100 + third) / 2, (100 + third) / 2)]
    # an algorithm that needs n-gram counts is refused for a utility that has none, in one line
    done = rerank("mbr", "--nbest", "c.nbest", "--metric", "toyoverlap", "--algorithm", "aggregate", "--out", "a.txt")
    assert done.returncode != 0 and "needs an n-gram utility" in done.stderr and "Traceback" not in done.stderr
    # a metric without a pairwise utility is refused in one line naming those that have one
    done = rerank("mbr", "--nbest", "c.nbest", "--metric", "length", "--out", "l.txt")
    assert done.returncode != 0 and "has no pairwise utility" in done.stderr and "toyoverlap" in done.stderr


TOY_DECODER = '''
"""A toy MBR algorithm: a candidate's number is its own probability, plus a bonus."""

from dataclasses import dataclass

import numpy as np

from rerank.config import option
from rerank.mbr.decoders import DECODERS, Decoder


@DECODERS.register("toymode")
class ToyMode(Decoder):
    name = "toymode"
    summary = "the most probable candidate, a toy"
    estimate = "toy-probability"

    @dataclass
    class Config:
        bonus: float = option(0.0, "added to every candidate's number")

    def expected(self, engine, candidates, refs, p_refs, first=0):
        return engine.distribution(candidates) + self.config.bonus

    def references_per_segment(self, refs):
        return np.zeros(refs.num_segments, dtype=np.int64)
'''


def test_a_toy_mbr_algorithm_is_one_file(tmp_path):
    """An MBR algorithm is a component (issue 77): one module in rerank/mbr/ registering a
    class with its Config, and ``rerank mbr --algorithm``, its generated setting option, the
    ``mbr:`` feature's ``algorithm=`` and its setting take it, with no other file edited."""
    import numpy as np

    copy = tmp_path / "site"
    shutil.copytree(
        os.path.join(ROOT, "rerank"), copy / "rerank", ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    (copy / "rerank" / "mbr" / "toymode.py").write_text(textwrap.dedent(TOY_DECODER))
    work = tmp_path / "work"
    work.mkdir()
    nmt = [[-1.0, -0.2, -3.0], [-0.5, -2.0, -0.1]]
    texts = [["a b c", "a b d", "x y"], ["one two", "one three", "two two"]]
    lines = [f"{s} ||| {texts[s][k]} ||| NMT= {nmt[s][k]} ||| 0" for s in range(2) for k in range(3)]
    (work / "l.nbest").write_text("\n".join(lines) + "\n")
    env = {**os.environ, "PYTHONPATH": str(copy)}

    def run(*argv):
        return subprocess.run(
            [sys.executable, "-m", "rerank.cli", *argv], cwd=work, env=env, capture_output=True, text=True
        )

    shown = run("mbr", "--help")
    flat = " ".join(shown.stdout.split())
    assert "toymode: the most probable candidate, a toy" in flat and "--bonus BONUS --algorithm toymode" in flat
    done = run(
        "mbr", "--nbest", "l.nbest", "--feature", "NMT", "--algorithm", "toymode", "--bonus", "1", "--out", "best.txt"
    )
    assert done.returncode == 0, done.stderr
    assert (work / "best.txt").read_text().splitlines() == ["a b d", "two two"]  # the highest NMT of each
    p = [np.exp(row) / np.exp(row).sum() for row in nmt]
    assert f"mean toy-probability chrf of the selections {(p[0][1] + p[1][2] + 2) / 2:.2f}" in done.stderr
    done = run(
        "features",
        "add",
        "--nbest",
        "l.nbest",
        "--scorer",
        "mbr:chrf,algorithm=toymode,bonus=0.5,feature=NMT",
        "--out",
        "f.nbest",
    )
    assert done.returncode == 0, done.stderr
    column = [float(line.split("MBRchrF= ")[1].split()[0]) for line in (work / "f.nbest").read_text().splitlines()]
    assert np.allclose(column, np.concatenate(p) + 0.5, atol=1e-6)
    # the checkout itself does not know it
    done = subprocess.run(
        [sys.executable, "-m", "rerank.cli", "mbr", "--nbest", "l.nbest", "--feature", "NMT", "--algorithm", "toymode"]
        + ["--out", "b.txt"],
        cwd=work,
        env={**os.environ, "PYTHONPATH": ROOT},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2 and "invalid choice: 'toymode'" in done.stderr
