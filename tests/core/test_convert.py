"""rerank convert: fairseq-generate output, JSON lines and Marian n-best lists."""

import json
import math

import pytest

from rerank.cli import main
from rerank.nbest import read_list_info, read_nbest
from tests.conftest import one_line_error

FAIRSEQ = """S-1\tthe dog
T-1\tder hund
H-1\t-0.5\tder hund
D-1\t-0.5\tDer Hund
P-1\t-0.25 -0.5 -0.75
H-1\t-1.0\tein hund
D-1\t-1.0\tEin Hund
P-1\t-1.0 -1.5 -0.5
S-0\ta cat
H-0\t-0.2\teine katze
D-0\t-0.2\tEine Katze
P-0\t-0.1 -0.2 -0.3
2023-01-01 | INFO | fairseq_cli.generate | Translated 2 sentences
"""


def test_fairseq_generate_output(tmp_path):
    src, out = tmp_path / "gen.out", tmp_path / "t.nbest"
    src.write_text(FAIRSEQ)
    assert main(["convert", "--from", "fairseq", str(src), "--out", str(out)]) == 0
    nbest = read_nbest(str(out))
    assert list(nbest.hypotheses) == ["eine katze", "der hund", "ein hund"]  # sorted by id, rank order kept
    assert list(nbest.offsets) == [0, 1, 3] and nbest.feature_names == ["Fairseq", "FairseqSum", "FairseqLen"]
    ln2 = math.log(2)
    assert nbest.features[1] == pytest.approx([-0.5 * ln2, -1.5 * ln2, 3])  # base 2 -> natural logs
    assert read_list_info(str(out)).beam_feature == "Fairseq"
    assert main(["convert", "--from", "fairseq", str(src), "--out", str(tmp_path / "d.nbest"), "--text", "detok"]) == 0
    assert read_nbest(str(tmp_path / "d.nbest")).hypotheses[0] == "Eine Katze"


def test_jsonl_and_marian(tmp_path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text(
        json.dumps({"id": 1, "hypotheses": ["b", "c"], "scores": {"lp": [-1, -2], "len": [1, 1]}})
        + "\n"
        + json.dumps({"id": 0, "hypotheses": ["a"], "scores": {"lp": [-0.5], "len": [1]}})
        + "\n"
    )
    out = tmp_path / "j.nbest"
    assert main(["convert", "--from", "jsonl", str(src), "--out", str(out), "--beam-feature", "lp"]) == 0
    nbest = read_nbest(str(out))
    assert list(nbest.hypotheses) == ["a", "b", "c"] and nbest.features.tolist() == [[-0.5, 1], [-1, 1], [-2, 1]]
    assert read_list_info(str(out)).beam_feature == "lp"
    marian = tmp_path / "m.nbest"
    marian.write_text(
        "0 ||| ein haus ||| F0= -1.5 F1= -0.2 ||| -1.7\n0 ||| das haus ||| F0= -2 F1= -0.1 ||| -2.1\n"
        "1 ||| ja ||| F0= -0.1 F1= 0 ||| -0.1\n"
    )
    assert main(["convert", "--from", "marian", str(marian), "--out", str(tmp_path / "m2.nbest")]) == 0
    back = read_nbest(str(tmp_path / "m2.nbest"))
    assert back.feature_names == ["F0", "F1"] and list(back.totals) == [-1.7, -2.1, -0.1]
    # F0 never rises down a segment: the beam's column, recorded (issue 93, item 10)
    assert json.loads((tmp_path / "m2.nbest.json").read_text())["beam_feature"] == "F0"
    assert "2 segments" in capsys.readouterr().err


@pytest.mark.parametrize(
    "fmt, text, needle",
    [
        (
            "jsonl",
            '{"id": 0, "hypotheses": ["a"], "scores": {"x": [1]}}\n{"id": 0, "hypotheses": ["b"], '
            '"scores": {"x": [1]}}\n',
            "in.txt:2: id 0 seen twice",
        ),
        ("jsonl", '{"id": 0, "hypotheses": ["a"], "scores": {"x": [1, 2]}}\n', "in.txt:1: "),
        ("jsonl", '{"id": 0, "hypotheses": ["a"]\n', "in.txt:1: invalid JSON"),
        ("jsonl", '{"id": 1, "hypotheses": ["a"]}\n', "0 is missing"),
        ("fairseq", "H-0\tx\thallo\n", "in.txt:1: score: non-numeric value 'x'"),
        ("fairseq", "H-0\t-1\thallo\nP-0\t-1\nP-0\t-2\n", "1 hypotheses but 2 P- lines"),
        ("marian", "0 ||| a ||| F= 1 ||| 0\n2 ||| b ||| F= 1 ||| 0\n", "in.txt:2"),
    ],
)
def test_bad_input_is_one_line_naming_file_and_line(tmp_path, capsys, fmt, text, needle):
    (tmp_path / "in.txt").write_text(text)
    assert main(["convert", "--from", fmt, str(tmp_path / "in.txt"), "--out", str(tmp_path / "o.nbest")]) == 1
    one_line_error(capsys, needle)
    assert not (tmp_path / "o.nbest").exists()


def test_convert_reads_moses_lists_and_takes_input_as_an_option(tmp_path, capsys):
    """``--from moses`` (Marian writes Moses' format: one reader) and ``--input FILE`` beside
    the positional, exactly one of them (issue 61, item 7)."""
    from rerank.cli import main

    (tmp_path / "m.txt").write_text(
        "0 ||| a b ||| F= -1 G= 2 ||| -1\n0 ||| a c ||| F= -2 G= 1 ||| -2\n1 ||| d ||| F= -1 G= 0 ||| -1\n"
    )
    out = str(tmp_path / "m.nbest")
    assert (
        main(["convert", "--from", "moses", "--input", str(tmp_path / "m.txt"), "--out", out, "--beam-feature", "F"])
        == 0
    )
    assert read_nbest(out).hypotheses == ["a b", "a c", "d"] and read_list_info(out).beam_feature == "F"
    assert main(["convert", "--from", "moses", str(tmp_path / "m.txt"), "--out", str(tmp_path / "p.nbest")]) == 0
    assert (tmp_path / "p.nbest").read_text() == (tmp_path / "m.nbest").read_text()
    capsys.readouterr()
    both = ["convert", "--from", "moses", str(tmp_path / "m.txt"), "--input", str(tmp_path / "m.txt")]
    assert main(both + ["--out", str(tmp_path / "q.nbest")]) == 1
    assert "as the positional FILE or as --input FILE" in capsys.readouterr().err
    assert main(["convert", "--from", "moses", "--out", str(tmp_path / "q.nbest")]) == 1
