"""The Python API (rerank/api.py): the README's "From Python" example runs, and each call
equals its command-line verb."""

import json
import os
import re

import numpy as np
import pytest
from sacrebleu.metrics import CHRF

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList
from tests.conftest import ROOT, write_split

PYTHON_PAGE = os.path.join(ROOT, "docs", "usage", "python.md")


def test_the_docs_from_python_example_runs(tmp_path, monkeypatch, capsys):
    text = open(PYTHON_PAGE, encoding="utf-8").read()
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    write_split(tmp_path, "val", 40, seed=1)
    write_split(tmp_path, "test", 30, seed=2)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "docs/usage/python.md", "exec"), namespace)
    tuned, best, table = namespace["tuned"], namespace["best"], namespace["table"]
    assert tuned.metric == "bleu" and tuned.score >= tuned.initial_score
    assert set(tuned.weights) == {"NMT", "MBRBLEU", "MBRchrF"}
    refs = (tmp_path / "test.de").read_text().splitlines()
    assert len(best) == 30
    systems = {r["system"] for r in table["rows"]}
    assert systems == {"baseline", "+mbr"}
    chrf = [r for r in table["rows"] if r["system"] == "+mbr" and r["metric"] == "chrf"][0]
    assert chrf["score"] == pytest.approx(CHRF().corpus_score(best, [refs]).score)
    out = capsys.readouterr().out
    assert "tuning BLEU" in out and "+mbr" in out


def test_api_calls_equal_the_command_line(tmp_path, capsys):
    nbest, refs = write_split(tmp_path, "val", 30, seed=3)
    weights = tmp_path / "w.json"
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(tmp_path / "val.nbest"),
                "--ref",
                str(tmp_path / "val.de"),
                "--out",
                str(weights),
                "--tokenize",
                "none",
                "--algorithm",
                "mert",
                "--mert-restarts",
                "3",
                "--seed",
                "4",
                "--quiet",
                "--metric",
                "chrf",
            ]
        )
        == 0
    )
    record = json.loads(weights.read_text())
    tuned = rerank.tune(
        rerank.read_nbest(str(tmp_path / "val.nbest")),
        refs,
        algorithm="mert",
        restarts=3,
        seed=4,
        tokenize="none",
        metric="chrf",
    )
    assert tuned.weights == pytest.approx(record["weights"]) and tuned.score == pytest.approx(record["tuning"]["score"])
    out = tmp_path / "best.txt"
    assert main(["apply", "--nbest", str(tmp_path / "val.nbest"), "--weights", str(weights), "--out", str(out)]) == 0
    assert rerank.apply(nbest, record["weights"]) == out.read_text().splitlines()
    scores = rerank.evaluate(out.read_text().splitlines(), refs, metrics=["bleu", "chrf"], tokenize="none")
    assert scores["chrf"] == pytest.approx(CHRF().corpus_score(out.read_text().splitlines(), [refs]).score)


def test_api_errors_are_input_errors():
    # written in no column's order (F rises down the list): its beam is unknown
    nbest, refs = NBestList(np.array([0, 2]), ["a c", "a b"], np.array([[0.0], [1.0]]), ["F"]), ["a b"]
    with pytest.raises(InputError, match="beam's feature is unknown: name its column .*beam_feature=COLUMN in Python"):
        rerank.tune(nbest, refs)
    with pytest.raises(InputError, match="no_such"):
        rerank.tune(nbest, refs, init="zeros", no_such=1)
    with pytest.raises(InputError, match="2 references"):
        rerank.tune(nbest, refs * 2, init="zeros")
    with pytest.raises(InputError):
        rerank.apply(nbest, {"G": 1.0})
    with pytest.raises(InputError, match="unknown scorer"):
        rerank.add_features(nbest, ["nope:"])
    assert rerank.tune(nbest, refs, init="zeros", tokenize="none", iterations=2).weights.keys() == {"F"}


def test_significance_works_in_memory_and_names_the_system(tmp_path, monkeypatch):
    """No temporary files: a replica of the wrong length is named by its system, seg: metrics
    (scores beside files) are refused, and the result holds no file paths."""
    import tempfile

    made = []
    monkeypatch.setattr(tempfile, "mkstemp", lambda *a, **k: made.append(a) or (_ for _ in ()).throw(AssertionError))
    refs = ["a b c d e", "f g h i j", "k l m n o"]
    beam = [["a b c d x", "f g h i y", "k l m n z"]]
    with pytest.raises(InputError, match=r"\+r2l: replica 2 has 2 hypotheses for 3 references"):
        rerank.significance(refs, beam, {"+r2l": [refs, refs[:2]]}, tokenize="none")
    with pytest.raises(InputError, match="seg: scores are read from files"):
        rerank.significance(refs, beam, {"+r2l": [refs]}, metrics=["seg:comet"])
    table = rerank.significance(refs, beam, {"+r2l": [refs]}, metrics=["bleu"], tokenize="none", shuffles=100)
    (row,) = [r for r in table["rows"] if r["system"] == "+r2l"]
    assert row["score"] == pytest.approx(100.0) and "files" not in row and "reference" not in table["meta"]
    assert not made


def test_components_by_keyword_equal_their_specs(tmp_path):
    """(name, {setting: value}) pairs of a Config's fields mean what the spec means, through
    the same parser: a scorer, a metric to evaluate and a metric to tune for."""
    val, refs = write_split(tmp_path, "val", 12, seed=1)
    by_spec = rerank.add_features(val, ["mbr:chrf,temperature=0.5"])
    by_keyword = rerank.add_features(val, [("mbr", {"utility": "chrf", "temperature": 0.5})])
    assert by_keyword.feature_names == by_spec.feature_names == ["NMT", "MBRchrF"]
    assert np.array_equal(by_keyword.features, by_spec.features)
    hyps = (tmp_path / "val.1best").read_text().splitlines()
    scores = rerank.evaluate(hyps, refs, metrics=[("chrf", {"word_order": 2}), "bleu"], tokenize="none")
    assert scores["chrf:word_order=2"] == pytest.approx(CHRF(word_order=2).corpus_score(hyps, [refs]).score)
    assert rerank.evaluate(hyps, refs, metrics="bleu", tokenize="none") == {"bleu": scores["bleu"]}
    tuned = rerank.tune(by_spec, refs, metric=("chrf", {"word_order": 2}), tokenize="none")
    assert tuned.metric == "chrf:word_order=2" and tuned.score >= tuned.initial_score
    with pytest.raises(InputError, match="unknown setting 'beta2=1'"):
        rerank.evaluate(hyps, refs, metrics=[("chrf", {"beta2": 1})])
    with pytest.raises(InputError, match="holds a comma"):
        rerank.add_features(val, [("mbr", {"utility": "bleu,chrf"})])
    with pytest.raises(TypeError, match="spec string or a"):
        rerank.evaluate(hyps, refs, metrics=[("chrf", "word_order=2", 1)])


def test_the_decoders_1best_is_the_first_hypothesis_of_every_segment(tmp_path):
    """``rerank.decoder_1best``: the baseline of a re-ranking from Python, as ``rerank truncate
    --out-1best`` writes it (issue 61, item 10)."""
    from rerank.cli import main
    from rerank.nbest import write_nbest

    nbest = NBestList(np.array([0, 2, 3, 6]), ["a", "b", "c", "d", "e", "f"], np.zeros((6, 1)), ["F"])
    assert rerank.decoder_1best(nbest) == ["a", "c", "d"]
    write_nbest(nbest, str(tmp_path / "l.nbest"))
    assert main(["truncate", "--nbest", str(tmp_path / "l.nbest"), "--out-1best", str(tmp_path / "b")]) == 0
    assert (tmp_path / "b").read_text().splitlines() == rerank.decoder_1best(
        rerank.read_nbest(str(tmp_path / "l.nbest"))
    )
