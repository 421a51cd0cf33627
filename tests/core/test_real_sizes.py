"""benchmarks/real_sizes.py's own arithmetic (issue 91): the candidates it scores and the table it
writes from its run records — minimum and median per engine, the ratio of the medians, the
largest score difference or the share of the same outputs, errors shown, not hidden."""

import json
import os
import sys

import pytest

from tests.conftest import ROOT

sys.path.insert(0, os.path.join(str(ROOT), "benchmarks"))
import real_sizes  # noqa: E402

sys.path.remove(os.path.join(str(ROOT), "benchmarks"))


def test_candidates_are_the_reference_and_variants_of_its_words():
    refs = ["ein mann fährt ein rotes fahrrad .", "zwei hunde ."]
    cands = real_sizes.candidates(refs, 5)
    assert [len(c) for c in cands] == [5, 5]
    assert [c[0] for c in cands] == refs
    for ref, variants in zip(refs, cands):
        words = ref.split()
        for v in variants:  # words dropped or swapped, never new ones
            assert all(v.split().count(w) <= words.count(w) for w in v.split())
            assert len(v.split()) >= min(2, len(words))
    assert real_sizes.candidates(refs, 5) == cands  # seeded


def _record(work, case, engine, run, seconds, **out):
    record = {
        "case": case,
        "engine": engine,
        "run": run,
        "sentences": 2,
        "candidates": 3,
        "seconds": seconds,
        "hypotheses": 6,
        "peak_gb": 1.0 + run,
        **out,
    }
    with open(os.path.join(work, "runs", f"{case}-2x3-{engine}-r{run}.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle)


def test_the_table_gives_min_median_ratio_peak_and_differences(tmp_path):
    work = str(tmp_path)
    os.makedirs(os.path.join(work, "runs"))
    for run, (ours, theirs) in enumerate([(10.0, 20.0), (14.0, 30.0), (12.0, 40.0)], start=1):
        _record(work, "comet-22", "rerank", run, ours, scores=[0.5, 0.25, 0.125])
        _record(work, "comet-22", "peer", run, theirs, scores=[0.5, 0.25 + 1e-6, 0.125])
    _record(work, "gen-hf-marian-beam", "rerank", 1, 5.0, best=["a", "b"])
    _record(work, "gen-hf-marian-beam", "peer", 1, 4.0, best=["a", "c"])
    _record(work, "mbr-comet-exact", "rerank", 1, 3.0, chosen=["x", "y"])
    with open(os.path.join(work, "runs", "mbr-comet-exact-2x3-peer-r1.json"), "w", encoding="utf-8") as handle:
        json.dump({"case": "mbr-comet-exact", "engine": "peer", "run": 1, "sentences": 2, "candidates": 3,
                   "error": "no peer python /x (see --help)"}, handle)  # fmt: skip
    text = real_sizes.table(work)
    rows = {row["case"]: row for row in json.load(open(os.path.join(work, "real_sizes.json")))["rows"]}
    comet = rows["comet-22"]
    assert comet["rerank"]["min"] == 10.0 and comet["rerank"]["median"] == 12.0
    assert comet["peer"]["min"] == 20.0 and comet["peer"]["median"] == 30.0
    assert comet["ratio"] == pytest.approx(0.4) and comet["rerank"]["per_second"] == 0.5
    assert comet["rerank"]["peak_gb"] == 4.0 and comet["rerank"]["runs"] == 3
    assert comet["difference"] == "1.00e-06"
    assert rows["gen-hf-marian-beam"]["difference"] == "1/2 same 1-best"
    assert rows["gen-hf-marian-beam"]["ratio"] == 1.25
    assert "ratio" not in rows["mbr-comet-exact"] and "no peer python" in rows["mbr-comet-exact"]["peer"]["error"]
    assert "| comet-22 | 2 × 3 | 10.0 / 12.0 | 20.0 / 30.0 | 0.4 |" in text
    assert "no peer python" in text
    assert comet["rerank"]["per_1000_sentences"] == 6000  # 12 s for 2 sentences
    assert "| comet-22 | 3 | 2 | 6,000 | 4.0 | 15,000 |" in text
    assert text == open(os.path.join(work, "real_sizes.md"), encoding="utf-8").read()


def test_the_sitting_builds_the_models_in_a_process_of_its_own(tmp_path, monkeypatch):
    # on Linux a child's peak (wait4's ru_maxrss) starts at its parent's resident memory at the
    # fork: a sitting that built NLLB-600M in its own process gave every run 4.7 GB as a floor
    import subprocess

    commands = []

    def run(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(real_sizes.subprocess, "run", run)
    monkeypatch.setattr(
        real_sizes, "build", lambda models: pytest.fail("the models were built in the sitting's process")
    )
    jobs = []
    monkeypatch.setattr(real_sizes, "_child", lambda python, job, work, timeout=0: jobs.append(job) or {"error": "x"})
    real_sizes.main(["--work", str(tmp_path), "--cases", "score-hf-marian", "--size", "1x2", "--runs", "1"])
    script = os.path.abspath(real_sizes.__file__)
    assert commands == [[sys.executable, script, "--build-only", "--models", str(tmp_path / "models")]]
    assert [(job["engine"], job["sentences"], job["candidates"]) for job in jobs] == [("rerank", 1, 2), ("peer", 1, 2)]
    record = json.load(open(tmp_path / "runs" / "score-hf-marian-1x2-peer-r1.json", encoding="utf-8"))
    assert record["error"] == "x" and record["engine"] == "peer"
