"""Every per-segment count is checked before any work, in every verb that takes a file of one
line (or segment) per segment beside an n-best list (issue 78): a mismatch is one line naming
the file and both counts, and the work — statistics, scoring, re-ranking, MBR — never starts
(here: the function that would do it raises if called).  ``rerank tune --nbest val.nbest --ref
test.de`` computed every statistic of the list, then refused."""

import pytest

from rerank.cli import main
from tests.conftest import one_line_error, write_split


class WorkStarted(AssertionError):
    """Raised by the function that does a verb's work: it must not have been called."""


def _never(*args, **kwargs):
    raise WorkStarted("the work began before the counts were checked")


@pytest.fixture
def lists(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write_split(tmp_path, "val", 6, seed=1)
    write_split(tmp_path, "short", 4, seed=2)
    (tmp_path / "short.en").write_text("a\nb\n")
    (tmp_path / "w.fold0.json").write_text('{"weights": {"NMT": 1.0}}')
    (tmp_path / "w.fold1.json").write_text('{"weights": {"NMT": 1.0}}')
    (tmp_path / "folds.tsv").write_text("".join(f"img{k}.jpg\t{k % 2}\n" for k in range(4)))
    return tmp_path


@pytest.mark.parametrize(
    "where, args, message",
    [
        (
            "rerank.tuning.data.iter_nbest",
            ["tune", "--ref", "short.de", "--out", "w.json"],
            "6 segments in the n-best list but 4 references",
        ),
        (
            "rerank.tuning.data.iter_nbest",
            ["oracle", "--ref", "short.de", "--out", "o.txt"],
            "6 segments in the n-best list but 4 references",
        ),
        (
            "rerank.tuning.data.iter_nbest",
            ["crossfit", "--ref", "val.de", "--folds", "folds.tsv", "--out", "c.txt", "--weights-out", "c.json"],
            "folds.tsv",
        ),
        (
            "rerank.reranking.iter_nbest",
            ["apply", "--weights", "w.fold{fold}.json", "--folds", "folds.tsv", "--out", "a.txt"],
            "4 segments in the folds file but 6 in the n-best list",
        ),
        (
            "rerank.mbr.decode.iter_nbest_pair",
            ["mbr", "--pseudo-refs", "short.nbest", "--metric", "bleu", "--out", "m.txt"],
            "4 segments in the pseudo-references but 6 in the candidates",
        ),
        (
            "rerank.features.add.iter_nbest",
            ["features add", "--source", "short.en", "--scorer", "len:2.0", "--out", "f.nbest"],
            "short.en: 2 lines but the n-best list has 6 segments",
        ),
    ],
    ids=["tune", "oracle", "crossfit", "apply", "mbr", "features add"],
)
def test_a_file_of_another_count_is_refused_before_the_list_is_read(lists, capsys, monkeypatch, where, args, message):
    monkeypatch.setattr(where, _never)
    status = main([*args[0].split(), "--nbest", "val.nbest", *args[1:]])
    assert status == 1
    one_line_error(capsys, message)


@pytest.mark.parametrize("verb", ["eval", "signif"])
def test_eval_and_signif_compare_counts_before_scoring(lists, capsys, monkeypatch, verb):
    monkeypatch.setattr("rerank.metrics.bleu.BleuMetric.stats", _never)
    monkeypatch.setattr("rerank.metrics.bleu.BleuMetric.hypothesis_stats", _never)
    args = ["--hyp", "val.1best"] if verb == "eval" else ["--baseline", "val.1best", "--system", "x=val.1best"]
    assert main([verb, "--ref", "short.de", *args]) == 1
    one_line_error(capsys, "val.1best: 6 lines but the reference has 4")
