"""The subword step (rerank/nmt/subword.py): removing subwords as fairseq does, finding a
directory's step, refusing a bad one.  End to end: test_subword_system.py."""

import os

import pytest

from rerank.errors import InputError
from rerank.nmt.generate import reading_order
from rerank.nmt.subword import join_subwords, make_bpe, subword_spec


def test_subwords_are_removed_as_fairseq_removes_them():
    # fairseq's post_process: "@@ " joins; SentencePiece's pieces joined, "▁" a space
    assert join_subwords("das haus@@ es .".split(), "subword-nmt") == "das hauses ."
    assert join_subwords("ein haus@@".split(), "subword-nmt") == "ein haus"  # a mark at the end goes too
    assert join_subwords(["\u2581das", "\u2581haus", "es", "\u2581."], "sentencepiece") == "das hauses ."
    assert join_subwords(["a", "b"], "none") == "a b"
    with pytest.raises(InputError, match="unknown subword step 'bpe'"):
        join_subwords(["a"], "bpe")
    # a right-to-left model's reversed output in reading order, either step
    assert reading_order(". es haus@@ das") == "das hauses ."
    assert reading_order("\u2581. es \u2581haus \u2581das", "sentencepiece") == "das hauses ."
    assert reading_order("", "sentencepiece") == ""


def test_a_directory_without_a_subword_file_and_a_bad_spec_are_one_line(tmp_path):
    with pytest.raises(InputError, match="no bpe.codes or spm.model: not a directory of rerank nmt prepare's layout"):
        subword_spec(str(tmp_path))
    (tmp_path / "spm.model").write_bytes(b"")
    assert subword_spec(str(tmp_path)) == f"sentencepiece:{tmp_path / 'spm.model'}"
    (tmp_path / "bpe.codes").write_text("#version: 0.2\n")
    assert subword_spec(str(tmp_path)) == f"subword-nmt:{tmp_path / 'bpe.codes'}"  # the paper's first
    with pytest.raises(InputError, match="bpe must be subword-nmt:CODES, sentencepiece:MODEL or none"):
        make_bpe("wordpiece:x", "here")


def test_a_directory_prepared_with_the_other_subword_step_is_refused_before_any_work(tmp_path):
    from rerank.nmt.data import PrepareConfig, prepare

    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "bpe.codes").write_text("#version: 0.2\n")
    with pytest.raises(
        InputError,
        match="holds bpe.codes, prepared with subword-nmt: prepare --subword sentencepiece into a new directory",
    ):
        prepare(str(tmp_path / "nowhere"), str(tmp_path / "out"), PrepareConfig(subword="sentencepiece"))
    assert os.listdir(tmp_path / "out") == ["bpe.codes"]
