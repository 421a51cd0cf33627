"""Metric settings from each metric's ``Config`` (``NAME:key=value``): chrF++ and other chrF
variants equal sacrebleu's, BLEU's tokeniser in the spec, bad settings refused in one line,
and the spec's name kept apart from the default metric's."""

import json
from dataclasses import dataclass

import numpy as np
import pytest
from sacrebleu.metrics import BLEU, CHRF

from rerank.cli import main
from rerank.config import option, parse_settings
from rerank.errors import InputError
from rerank.metrics import make_metric, make_objective
from tests.conftest import one_line_error, random_corpus, write_split


@pytest.mark.parametrize(
    "spec, reference",
    [
        ("chrf", CHRF()),
        ("chrf:word_order=2", CHRF(word_order=2)),  # chrF++
        ("chrf:beta=1,char_order=4", CHRF(beta=1, char_order=4)),
        ("chrf:word_order=2,lowercase=true", CHRF(word_order=2, lowercase=True)),
        ("bleu:tokenize=none", BLEU(tokenize="none")),
    ],
)
def test_metric_settings_equal_sacrebleus_metric(spec, reference):
    refs, hyps, _ = random_corpus(30, 1, seed=4)
    hyps = [h.capitalize() for h in hyps]  # casing differs, so lowercase=true matters
    metric = make_metric(spec)
    assert metric.corpus_score(hyps, refs) == pytest.approx(reference.corpus_score(hyps, [refs]).score, abs=1e-9)
    assert metric.name == spec if ":" in spec else metric.name == "chrf"


def test_chrf_plus_plus_is_a_tuning_objective_and_interpolates():
    refs, hyps, _ = random_corpus(20, 1, seed=5)
    metric = make_objective("0.5*bleu+0.5*chrf:word_order=2", tokenize="none")
    expected = 0.5 * BLEU(tokenize="none").corpus_score(hyps, [refs]).score
    expected += 0.5 * CHRF(word_order=2).corpus_score(hyps, [refs]).score
    assert metric.corpus_score(hyps, refs) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("chrf:order=3", "unknown setting 'order=3' (known: char_order=6"),
        ("chrf:word_order=x", "word_order=x"),
        ("chrf:beta=0", "not a positive integer"),
        ("chrf:beta=2,beta=3", "beta is set twice"),
        ("chrf:lowercase=maybe", "expected true or false"),
        ("ter:x=1", "metric 'ter' takes no settings"),
        ("bleu:tokenize=klingon", "klingon"),
    ],
)
def test_bad_settings_are_refused_naming_the_setting(spec, needle):
    with pytest.raises(InputError, match=None) as err:
        make_metric(spec)
    assert needle in str(err.value)


def test_parse_settings_reads_each_type_and_takes_defaults():
    @dataclass
    class Config:
        n: int = option(3, "a count")
        x: float = option(0.5, "a number")
        on: bool = option(False, "a switch")
        name: str = option("a", "a word")

    assert parse_settings(Config, "", "t") == Config()
    assert parse_settings(Config, "n=7, x=1e-3,on=yes,name=b", "t") == Config(7, 1e-3, True, "b")
    assert parse_settings(Config, "x=2", "t", defaults={"name": "c", "other": 1}) == Config(x=2.0, name="c")
    with pytest.raises(InputError, match="t: unknown setting 'y'"):
        parse_settings(Config, "y", "t")


def test_the_command_line_keeps_chrf_and_chrf_plus_plus_apart(tmp_path, capsys):
    _, refs = write_split(tmp_path, "test", 12, seed=2)
    out = tmp_path / "eval.json"
    argv = ["eval", "--ref", str(tmp_path / "test.de"), "--hyp", str(tmp_path / "test.1best"), "--tokenize", "none"]
    assert main(argv + ["--metrics", "chrf,chrf:word_order=2", "--json", "--out", str(out)]) == 0
    rows = {r["metric"]: r["score"] for r in json.loads(out.read_text())}
    hyps = (tmp_path / "test.1best").read_text().splitlines()
    assert rows["chrf"] == pytest.approx(CHRF().corpus_score(hyps, [refs]).score, abs=1e-4)
    assert rows["chrf:word_order=2"] == pytest.approx(CHRF(word_order=2).corpus_score(hyps, [refs]).score, abs=1e-4)
    capsys.readouterr()
    assert main(argv + ["--metrics", "chrf:char_order=0"]) == 1
    one_line_error(capsys, "chrf:char_order=0", "not a positive integer")


def test_tuning_for_chrf_plus_plus_records_it(tmp_path):
    write_split(tmp_path, "val", 15, seed=1)
    out = tmp_path / "w.json"
    argv = ["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de"), "--quiet"]
    assert main(argv + ["--metric", "chrf:word_order=2", "--out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["tuning"]["metric"] == "chrf:word_order=2"
    assert "nw:2" in record["metric_signature"]
    assert record["tuning"]["score"] >= record["tuning"]["initial_score"]
    # the objective's own settings, enough to build it again; no BLEU settings for a chrF tuning
    settings = record["metric_settings"]
    assert settings == {"metric": "chrf:word_order=2", "tokenize": "13a", "lowercase": False, "lang": None}
    assert "bleu_settings" not in record and "bleu_signature" not in record
    assert make_objective(**{"spec": settings.pop("metric"), **settings}).signature() == record["metric_signature"]


def test_unknown_tokeniser_lists_the_choices():
    from rerank.metrics.bleu import BleuMetric

    with pytest.raises(InputError, match=r"unknown sacrebleu tokeniser 'foo'; known: none, zh, 13a, intl"):
        BleuMetric("foo")


def test_tokenised_text_under_a_tokeniser_is_warned_once(monkeypatch):
    from rerank.metrics import bleu_stats as bleu

    monkeypatch.setattr(bleu, "_WARNED_TOKENISED", [])
    said = []
    tokenised = ["a house ."] * 100
    assert not bleu.warn_if_tokenised(tokenised[:99], "13a", said.append)  # sacrebleu's threshold: 100 lines
    assert not bleu.warn_if_tokenised(tokenised, "none", said.append)  # tokenised text scored as it is
    assert bleu.warn_if_tokenised(tokenised + ["a house."], "13a", said.append)
    assert said == [
        "rerank: warning: 100 of 101 hypotheses end in a tokenised period (' .'): the text looks tokenised, and "
        "BLEU's '13a' tokeniser tokenises it again; give --tokenize none (tokenize='none') to score tokenised "
        "text as it is (sacrebleu warns the same)"
    ]
    assert not bleu.warn_if_tokenised(tokenised, "13a", said.append) and len(said) == 1  # once per process


def test_ter_edits_in_blocks_equal_one_call(monkeypatch):
    # blocks let Ctrl-C / SIGTERM act between C calls; the edit counts stay sacrebleu's
    from sacrebleu.metrics import TER

    from rerank import _native

    refs, hyps, segment = random_corpus(12, 3, seed=9)
    pairs_h = [h.split() for h in hyps]
    pairs_r = [refs[s].split() for s in segment]
    whole = _native.ter_edits(pairs_h, pairs_r)
    monkeypatch.setattr(_native, "TER_BLOCK", 5)
    assert np.array_equal(_native.ter_edits(pairs_h, pairs_r), whole)
    ter = TER()
    expected = [
        ter._compute_segment_statistics(h, ter._extract_reference_info([refs[s]]))[0] for h, s in zip(hyps, segment)
    ]
    assert whole.tolist() == pytest.approx(expected)


def test_length_controlled_bleu_by_hand_and_as_a_tuning_objective(tmp_path, capsys):
    from rerank.metrics.bleu import BleuMetric
    from rerank.metrics.bleu_stats import bleu_from_stats
    from rerank.tuning.base import Problem

    metric = make_objective("bleu:length_penalty=0.5,length_target=1.0")
    # summed statistics: matches/totals of 4 orders and the reference length (Moses layout)
    stats = np.array([8, 10, 6, 9, 4, 8, 2, 7, 8], dtype=float)  # 10 hypothesis words, 8 reference words
    plain = float(bleu_from_stats(stats))
    assert float(metric.score(stats)) == pytest.approx(plain - 0.5 * 100 * abs(10 / 8 - 1.0))
    assert "length_penalty:0.5|length_target:1" in metric.signature()
    # the tuners do not take BLEU's compiled fast paths (they would ignore the penalty)
    problem = Problem(np.zeros((1, 1)), stats[None, :], np.array([0, 1]), np.zeros(1), metric=metric)
    assert problem.kernel is None and BleuMetric().fast_kernel == "bleu"
    write_split(tmp_path, "val", 30, seed=5)
    argv = ["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de"), "--tokenize", "none"]
    assert main(argv + ["--metric", "bleu:length_penalty=0.5", "--out", str(tmp_path / "w.json"), "--quiet"]) == 0
    record = json.loads((tmp_path / "w.json").read_text())["tuning"]
    assert record["metric"] == "bleu:length_penalty=0.5" and record["score"] >= record["initial_score"]
    capsys.readouterr()
    with pytest.raises(InputError, match="length_penalty"):
        make_objective("bleu:length_penalty=-1")


def test_sacrebleus_metric_names_are_read_as_ours(tmp_path, capsys):
    """``--metrics chrF,chrF++,BLEU,TER`` (sacrebleu's names) score as chrf, chrf:word_order=2,
    bleu and ter (issue 61, item 8); a ``seg:`` name keeps its case (it names a file)."""
    import json

    from sacrebleu.metrics import CHRF

    from rerank.cli import main
    from rerank.metrics.spec import make_metric, sacrebleu_names

    assert sacrebleu_names("0.5*BLEU+0.5*chrF") == "0.5*bleu+0.5*chrf"
    assert sacrebleu_names("chrf++") == sacrebleu_names("chrF2++") == "chrf:word_order=2"
    assert sacrebleu_names("seg:chrF") == "seg:chrF" and make_metric("seg:BLEU:lower").name == "seg:BLEU:lower"
    hyps, refs = ["the cat sat on the mat", "a dog"], ["the cat is on the mat", "the dog"]
    (tmp_path / "h").write_text("\n".join(hyps) + "\n")
    (tmp_path / "r").write_text("\n".join(refs) + "\n")
    args = ["eval", "--ref", str(tmp_path / "r"), "--hyp", str(tmp_path / "h"), "--json", "--tokenize", "none"]
    assert main(args + ["--metrics", "chrF,chrF++,BLEU,TER"]) == 0
    rows = {r["metric"]: r["score"] for r in json.loads(capsys.readouterr().out)}
    assert main(args + ["--metrics", "chrf,chrf:word_order=2,bleu,ter"]) == 0
    ours = {r["metric"]: r["score"] for r in json.loads(capsys.readouterr().out)}
    assert list(rows.values()) == list(ours.values())
    assert rows["chrF++"] == pytest.approx(CHRF(word_order=2).corpus_score(hyps, [refs]).score, abs=1e-4)


def test_a_signature_is_sacrebleus_form():
    """rerank.metrics.base.Signature (issue 77: one class, as sacrebleu's): name, then key:value
    fields, bare words where the key is empty, booleans yes/no."""
    from rerank.metrics.base import Signature

    fields = [("model", "bert"), ("layer", "last"), ("", "F1"), ("lc", False), ("nrefs", 2)]
    assert str(Signature("bertscore", fields)) == "bertscore|model:bert|layer:last|F1|lc:no|nrefs:2"
    assert str(Signature("meteor-1.5", [("lc", True)])) == "meteor-1.5|lc:yes" and str(Signature("x")) == "x"
