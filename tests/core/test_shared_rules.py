"""The library's rules that the main job's settings import instead of copying
(workflow/settings/library.py): the line count of a corpus (``count_lines``), a spec's items
(``split_spec``) and a COMET checkpoint directory's layout (``checkpoint_files``), each against
hand-made files and hand-counted values."""

import gzip

import pytest

from rerank.config import split_spec
from rerank.errors import InputError
from rerank.metrics.comet_checks import checkpoint_files
from rerank.textio import count_lines


def test_count_lines_counts_as_the_readers_split(tmp_path):
    cases = {
        b"": 0,
        b"one": 1,  # a last line without its newline counts
        b"one\ntwo\n": 2,
        b"one\r\ntwo\r\n": 2,  # Windows line ends are line ends
        b"\xef\xbb\xbfone\ntwo": 2,  # a byte-order mark is no line
        b"one\n\nthree\n": 3,  # an empty line is a line
        b"one\ntwo\r": 2,  # a carriage return that ends the file ends its line
    }
    for k, (data, lines) in enumerate(cases.items()):
        (tmp_path / f"{k}.txt").write_bytes(data)
        with gzip.open(tmp_path / f"{k}.txt.gz", "wb") as handle:
            handle.write(data)
        assert count_lines(str(tmp_path / f"{k}.txt")) == lines, data
        assert count_lines(str(tmp_path / f"{k}.txt.gz")) == lines, data


def test_count_lines_refuses_a_carriage_return_inside_and_bytes_not_utf8(tmp_path):
    (tmp_path / "cr").write_bytes(b"one\ntw\ro\nthree\n")
    with pytest.raises(InputError) as error:
        count_lines(str(tmp_path / "cr"))
    assert (error.value.path, error.value.line) == (str(tmp_path / "cr"), 2)
    assert error.value.message.startswith("a carriage return inside the line")
    (tmp_path / "latin1").write_bytes(b"one\ntwo\nf\xfcnf\n")
    with pytest.raises(InputError) as error:
        count_lines(str(tmp_path / "latin1"))
    assert error.value.line == 3 and "not UTF-8" in error.value.message
    with pytest.raises(InputError, match="no such file"):
        count_lines(str(tmp_path / "absent"))


def test_split_spec_is_the_grammar_of_every_component():
    assert split_spec("hf:models/opus,bpe=none,name=HF") == ("hf", ["models/opus", "bpe=none", "name=HF"])
    assert split_spec("e5:") == ("e5", [])
    assert split_spec("mbr") == ("mbr", [])
    assert split_spec("len:src=a.en , tgt=a.de,") == ("len", ["src=a.en", "tgt=a.de"])
    assert split_spec("nmt:x,bpe=subword-nmt:codes") == ("nmt", ["x", "bpe=subword-nmt:codes"])


def test_checkpoint_files_is_unbabel_comets_layout(tmp_path):
    directory = tmp_path / "kiwi"
    with pytest.raises(InputError, match="no checkpoints/model.ckpt: not a COMET checkpoint directory"):
        checkpoint_files(str(directory))
    (directory / "checkpoints").mkdir(parents=True)
    (directory / "checkpoints" / "model.ckpt").write_bytes(b"")
    with pytest.raises(InputError) as error:
        checkpoint_files(str(directory))
    assert error.value.path == str(directory) and "no hparams.yaml beside checkpoints/" in error.value.message
    with pytest.raises(InputError, match="looked for .*hparams.yaml: DIR/checkpoints/model.ckpt's DIR"):
        checkpoint_files(str(directory / "checkpoints" / "model.ckpt"))
    (directory / "hparams.yaml").write_text("class_identifier: unified_metric\n")
    expected = (str(directory / "checkpoints" / "model.ckpt"), str(directory / "hparams.yaml"))
    assert checkpoint_files(str(directory)) == expected
    assert checkpoint_files(expected[0]) == expected  # the .ckpt file itself
