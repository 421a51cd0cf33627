"""Every bad input gets one line naming the file (and line), exit status 1, no output."""

import gzip
import json

import numpy as np
import pytest
from conftest import one_line_error as _one_line_error

from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList, read_nbest, write_lines, write_nbest

NBEST = "0 ||| ein mann ||| F= 1 G= 2 ||| 0\n0 ||| eine frau ||| F= 0 G= 1 ||| 0\n1 ||| ein hund ||| F= 3 G= 0 ||| 0\n"


@pytest.fixture
def files(tmp_path):
    (tmp_path / "dev.nbest").write_text(NBEST)
    (tmp_path / "dev.ref").write_text("ein mann\nein hund\n")
    (tmp_path / "w.json").write_text(json.dumps({"weights": {"F": 1.0, "G": 0.5}}))
    (tmp_path / "corrupt.gz").write_bytes(b"this is not gzip data at all")
    good = gzip.compress(NBEST.encode())
    (tmp_path / "truncated.gz").write_bytes(good[: len(good) // 2])
    (tmp_path / "adir").mkdir()
    (tmp_path / "afile").write_text("x\n")
    return tmp_path


BAD_PATHS = [
    ("missing", "no such file"),
    ("adir", "is a directory"),
    ("afile/x", "afile/x"),
    ("corrupt.gz", "not a valid gzip file"),
    ("truncated.gz", "truncated"),
]


@pytest.mark.parametrize("option", ["--nbest", "--ref", "--init"])
@pytest.mark.parametrize("bad,message", BAD_PATHS)
def test_tune_inputs(files, capsys, option, bad, message):
    args = {"--nbest": str(files / "dev.nbest"), "--ref": str(files / "dev.ref"), "--out": str(files / "out.json")}
    args[option] = str(files / bad)
    argv = ["tune"] + [x for kv in args.items() for x in kv]
    assert main(argv) == 1
    _one_line_error(capsys, str(files / bad), message if option != "--init" or not bad.endswith(".gz") else "")
    assert not (files / "out.json").exists()


@pytest.mark.parametrize("bad,message", BAD_PATHS)
def test_apply_eval_signif_inputs(files, capsys, bad, message):
    path = str(files / bad)
    assert main(["apply", "--nbest", path, "--weights", str(files / "w.json"), "--out", str(files / "o")]) == 1
    _one_line_error(capsys, path, message)
    assert main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", path, "--out", str(files / "o")]) == 1
    _one_line_error(capsys, path)
    assert main(["eval", "--ref", str(files / "dev.ref"), "--hyp", path]) == 1
    _one_line_error(capsys, path)
    assert (
        main(
            [
                "signif",
                "--ref",
                path,
                "--baseline",
                str(files / "dev.ref"),
                "--system",
                f"x={files / 'dev.ref'}",
                "--metrics",
                "bleu",
                "--shuffles",
                "10",
                "--resamples",
                "10",
            ]
        )
        == 1
    )
    _one_line_error(capsys, path)
    assert not (files / "o").exists()


def test_unwritable_output(files, capsys):
    out = str(files / "afile" / "out.txt")  # a path under a file
    assert main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out", out]) == 1
    _one_line_error(capsys, "afile")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "adir"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "adir")


def test_non_utf8_names_file_and_line(files, capsys):
    (files / "bad.nbest").write_bytes(NBEST.encode() + b"1 ||| ein \xff hund ||| F= 1 G= 0 ||| 0\n")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "bad.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "bad.nbest:4:", "not UTF-8", "0xff")
    (files / "bad.ref").write_bytes(b"ein mann\n\xc3\x28 hund\n")
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(files / "dev.nbest"),
                "--ref",
                str(files / "bad.ref"),
                "--out",
                str(files / "w2.json"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "bad.ref:2:", "not UTF-8")
    (files / "bad.json").write_bytes(b'{"weights":\n {"F": 1, "G": "\xfe"}}')
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "bad.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "bad.json:2:", "not UTF-8")
    gz = files / "bad.nbest.gz"
    gz.write_bytes(gzip.compress(b"0 ||| \xe9 ||| F= 1 G= 2 ||| 0\n"))
    with pytest.raises(InputError, match=r"bad.nbest.gz:1: not UTF-8"):
        read_nbest(str(gz))


@pytest.mark.parametrize(
    "value", ["null", "{}", '"1.0"', "true", "NaN", "Infinity", "-Infinity", "[]", "[1, null]", "[1, NaN]"]
)
def test_weights_must_be_finite_numbers(files, capsys, value):
    (files / "w.json").write_text('{"weights": {"F": 1.0, "G": ' + value + "}}")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "w.json", "'G'", "finite number")
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(files / "dev.nbest"),
                "--ref",
                str(files / "dev.ref"),
                "--init",
                str(files / "w.json"),
                "--out",
                str(files / "t.json"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "w.json")
    assert not (files / "o").exists() and not (files / "t.json").exists()


def test_apply_writes_both_outputs_or_neither(files, capsys):
    out, out_nbest = files / "o.txt", files / "afile" / "o.nbest"  # the second cannot be written
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(out),
                "--out-nbest",
                str(out_nbest),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "afile")
    assert not out.exists()
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(out),
                "--out-nbest",
                str(files / "o.nbest"),
            ]
        )
        == 0
    )
    assert out.read_text() == "ein mann\nein hund\n" and (files / "o.nbest").exists()


def test_report_validates_before_creating_anything(files, capsys):
    out = files / "report-out"
    assert main(["report", str(files / "adir"), "--out", str(out)]) == 1
    _one_line_error(capsys, "missing pipeline output")
    assert not out.exists()


def test_eval_of_empty_files_is_an_error(files, capsys):
    (files / "empty").write_text("")
    assert main(["eval", "--ref", str(files / "empty"), "--hyp", str(files / "empty")]) == 1
    _one_line_error(capsys, "empty", "no reference segments")
    assert (
        main(
            [
                "signif",
                "--ref",
                str(files / "empty"),
                "--baseline",
                str(files / "empty"),
                "--system",
                f"x={files / 'empty'}",
                "--metrics",
                "bleu,chrf",
            ]
        )
        == 1
    )
    _one_line_error(capsys, "no reference segments")


def test_internal_errors_keep_their_traceback(files, monkeypatch):
    import rerank.reranking

    def broken(*args, **kwargs):
        raise ValueError("a bug of ours")

    monkeypatch.setattr(rerank.reranking, "iter_nbest", broken)
    with pytest.raises(ValueError, match="a bug of ours"):
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )


@pytest.mark.parametrize(
    "names,hyps",
    [
        (["a b"], ["x"]),
        (["a\x1db"], ["x"]),
        ([""], ["x"]),
        (["a|||"], ["x"]),
        (["F"], [" x"]),
        (["F"], ["x\t"]),
        (["F"], ["a\nb"]),
        (["F"], ["a\rb"]),
        (["F"], ["a ||| b"]),
        (["F", "G", "F"], ["x"]),
        (["F"], ["a\x00b"]),
    ],
)
def test_writer_refuses_what_the_reader_would_change(tmp_path, names, hyps):
    nbest = NBestList(np.array([0, 1]), hyps, np.zeros((1, len(names))), names)
    with pytest.raises(InputError):
        write_nbest(nbest, str(tmp_path / "x.nbest"))
    assert not (tmp_path / "x.nbest").exists()
    with pytest.raises(InputError, match="finite"):
        write_nbest(NBestList(np.array([0, 1]), ["x"], np.array([[np.nan]]), ["F"]), str(tmp_path / "y.nbest"))
    write_lines(["x"], str(tmp_path / "ok.txt"))


def test_average_keeps_weights_near_the_float_range(tmp_path):
    """``rerank average`` of replicas with weights of 1e308 lost them (the L1 norm overflowed to
    inf; issue 62): the direction is kept."""
    import json

    from rerank.reranking import average_weights

    (tmp_path / "a.json").write_text(json.dumps({"weights": {"F": 1e308, "G": -1e308}}))
    (tmp_path / "b.json").write_text(json.dumps({"weights": {"F": 1.0, "G": -1.0}}))
    out = average_weights([str(tmp_path / "a.json"), str(tmp_path / "b.json")])["weights"]
    assert out["F"] == pytest.approx(0.5) and out["G"] == pytest.approx(-0.5)
