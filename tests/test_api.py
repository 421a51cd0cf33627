"""The Python API (rerank/api.py): the README's "From Python" example runs, and each call
equals its command-line verb."""

import json
import os
import re

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import ListInfo, NBestList, write_list_info, write_nbest, write_lines
from tests.conftest import random_corpus

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")


def _split(directory, name, segments, seed):
    """NAME.nbest (+ its signature: beam feature NMT), NAME.de, NAME.1best: 8-best lists
    whose NMT feature sees sentence quality through noise."""
    refs, hyps, segment = random_corpus(segments, 8, seed=seed)
    bleu = BLEU(tokenize="none", effective_order=True)
    quality = np.array([bleu.sentence_score(h, [refs[s]]).score for h, s in zip(hyps, segment)])
    nmt = quality / 20 + np.random.default_rng(seed).normal(scale=2.0, size=len(hyps))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    nbest = NBestList(offsets, hyps, nmt[:, None], ["NMT"],
                      info=ListInfo("NMT", {"beam": ["NMT"]}, declared=True))
    path = str(directory / f"{name}.nbest")
    write_nbest(nbest, path)
    write_list_info(path + ".json", nbest.info, {"made_by": "tests/test_api.py"})
    write_lines(refs, str(directory / f"{name}.de"))
    write_lines([hyps[i] for i in nbest.select(nmt)], str(directory / f"{name}.1best"))
    return nbest, refs


def test_the_readmes_from_python_example_runs(tmp_path, monkeypatch, capsys):
    text = open(README, encoding="utf-8").read()
    section = text[text.index("## From Python"):]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    _split(tmp_path, "val", 40, seed=1)
    _split(tmp_path, "test", 30, seed=2)
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(code, "README.md (From Python)", "exec"), namespace)
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
    nbest, refs = _split(tmp_path, "val", 30, seed=3)
    weights = tmp_path / "w.json"
    assert main(["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de"), "--out",
                 str(weights), "--tokenize", "none", "--algorithm", "mert", "--restarts", "3", "--seed", "4",
                 "--quiet", "--metric", "chrf"]) == 0
    record = json.loads(weights.read_text())
    tuned = rerank.tune(rerank.read_nbest(str(tmp_path / "val.nbest")), refs, algorithm="mert", restarts=3, seed=4,
                        tokenize="none", metric="chrf")
    assert tuned.weights == pytest.approx(record["weights"]) and tuned.score == pytest.approx(record["tuning"]["score"])
    out = tmp_path / "best.txt"
    assert main(["apply", "--nbest", str(tmp_path / "val.nbest"), "--weights", str(weights), "--out", str(out)]) == 0
    assert rerank.apply(nbest, record["weights"]) == out.read_text().splitlines()
    scores = rerank.evaluate(out.read_text().splitlines(), refs, metrics=["bleu", "chrf"], tokenize="none")
    assert scores["chrf"] == pytest.approx(CHRF().corpus_score(out.read_text().splitlines(), [refs]).score)


def test_api_errors_are_input_errors():
    nbest, refs = NBestList(np.array([0, 2]), ["a b", "a c"], np.array([[1.0], [0.0]]), ["F"]), ["a b"]
    with pytest.raises(InputError, match="beam's feature is unknown"):
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
