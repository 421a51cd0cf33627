import gzip

import numpy as np
import pytest

from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import NBestList, read_nbest, select_best, write_nbest
from rerank.tuning.weights import weights_dict, weights_vector

GOOD = (
    "0 ||| ein mann ||| NMT= -1.5 LM= -3 -4 WordPenalty= -2 ||| -1.5\n"
    "0 ||| ein mann . ||| NMT= -2.25 LM= -3.5 -4 WordPenalty= -3 ||| -2.25\n"
    "1 ||| eine frau ||| NMT= -0.5 LM= -1 -2 WordPenalty= -2 ||| -0.5\n"
)


def write(tmp_path, text, name="in.nbest"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_read_flat_table(tmp_path):
    nb = read_nbest(write(tmp_path, GOOD))
    assert nb.offsets.tolist() == [0, 2, 3]
    assert nb.hypotheses == ["ein mann", "ein mann .", "eine frau"]
    assert nb.feature_names == ["NMT", "LM", "LM", "WordPenalty"]
    assert nb.groups() == [("NMT", 1), ("LM", 2), ("WordPenalty", 1)]
    assert nb.features[1].tolist() == [-2.25, -3.5, -4, -3]
    assert nb.segment.tolist() == [0, 0, 1]


def test_round_trip_is_exact(tmp_path):
    nb = read_nbest(write(tmp_path, GOOD))
    out = str(tmp_path / "out.nbest")
    write_nbest(nb, out)
    assert open(out, encoding="utf-8").read() == GOOD
    values = np.array([[0.1 + 0.2], [1e-300], [-123456.789012345]])
    nb2 = nb.add_feature("X", values)
    write_nbest(nb2, out)
    again = read_nbest(out)
    assert np.array_equal(again.features, nb2.features)  # repr() round-trips float64 exactly


def test_gzip_input(tmp_path):
    path = tmp_path / "in.nbest.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(GOOD)
    assert len(read_nbest(str(path)).hypotheses) == 3


@pytest.mark.parametrize(
    "text,line,message",
    [
        ("0 ||| a ||| F= 1\n", 1, "expected 4 fields"),
        ("0 ||| a ||| F= 1 ||| 0 ||| extra\n", 1, "expected 4 fields"),
        ("0 ||| a ||| F= x ||| 0\n", 1, "non-numeric"),
        ("0 ||| a ||| F= nan ||| 0\n", 1, "not finite"),
        ("0 ||| a ||| F= inf ||| 0\n", 1, "not finite"),
        ("0 ||| a ||| F= 1 ||| 0\n2 ||| b ||| F= 1 ||| 0\n", 2, "ids must be 0, 1, 2"),
        ("1 ||| a ||| F= 1 ||| 0\n", 1, "ids must be 0, 1, 2"),
        ("0 ||| a ||| F= 1 ||| 0\n1 ||| b ||| F= 1 ||| 0\n0 ||| c ||| F= 1 ||| 0\n", 3, "ids must be 0, 1, 2"),
        ("0 ||| a ||| F= 1 G= 2 ||| 0\n0 ||| b ||| F= 1 ||| 0\n", 2, "differ from the first line"),
        ("0 ||| a ||| F= 1 G= 2 ||| 0\n0 ||| b ||| G= 2 F= 1 ||| 0\n", 2, "differ from the first line"),
        ("0 ||| a ||| F= 1 2 ||| 0\n0 ||| b ||| F= 1 ||| 0\n", 2, "differ from the first line"),
        ("0 ||| a ||| F= ||| 0\n", 1, "has no value"),
        ("0 ||| a ||| 3 F= 1 ||| 0\n", 1, "before any feature name"),
        ("x ||| a ||| F= 1 ||| 0\n", 1, "not an integer"),
        ("0 ||| a ||| F= 1 ||| zero\n", 1, "total"),
        ("0 ||| a ||| F= 1 F= 2 ||| 0\n", 1, "occurs twice"),
        ("0 ||| a ||| F= 1 ||| 0\n\n", 2, "empty line"),
    ],
)
def test_malformed_input_names_file_and_line(tmp_path, text, line, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        read_nbest(path)
    assert str(err.value).startswith(f"{path}:{line}: ")
    assert message in str(err.value)


def test_segment_count_must_match_references(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(InputError, match="2 segments in the n-best list but 3 references"):
        read_nbest(path, num_segments=3)


def test_empty_file(tmp_path):
    with pytest.raises(InputError, match="no hypotheses"):
        read_nbest(write(tmp_path, ""))


def test_cli_prints_one_line_and_exits_nonzero_without_output(tmp_path, capsys):
    bad = write(tmp_path, GOOD.replace("-0.5 LM", "abc LM"))
    weights = write(tmp_path, '{"weights": {"NMT": 1, "LM": [0, 0], "WordPenalty": 0}}', "w.json")
    out = tmp_path / "out.txt"
    assert main(["apply", "--nbest", bad, "--weights", weights, "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:3:" in err and "non-numeric" in err
    assert not out.exists()
    assert list(tmp_path.glob(".out.txt*")) == []  # no temporary file left behind


def test_select_best_is_per_segment_argmax_with_first_index_on_ties():
    offsets = np.array([0, 3, 4, 7])
    scores = np.array([1.0, 3.0, 3.0, -5.0, 0.0, -1.0, 0.0])
    assert select_best(scores, offsets).tolist() == [1, 3, 4]


def test_weights_alignment_errors(tmp_path):
    nb = read_nbest(write(tmp_path, GOOD))
    w = weights_vector({"NMT": 1.0, "LM": [0.5, 0.25], "WordPenalty": -1}, nb)
    assert w.tolist() == [1.0, 0.5, 0.25, -1.0]
    assert weights_dict(w, nb) == {"NMT": 1.0, "LM": [0.5, 0.25], "WordPenalty": -1.0}
    with pytest.raises(InputError, match="no weight for n-best feature"):
        weights_vector({"NMT": 1.0, "LM": [0.5, 0.25]}, nb)
    with pytest.raises(InputError, match="not in the n-best list: MLMMEss"):
        weights_vector({"NMT": 1.0, "LM": [0.5, 0.25], "WordPenalty": 0, "MLMMEss": 1}, nb)
    with pytest.raises(InputError, match="2 value"):
        weights_vector({"NMT": 1.0, "LM": 0.5, "WordPenalty": 0}, nb)


def test_add_feature_rejects_duplicates(tmp_path):
    nb = read_nbest(write(tmp_path, GOOD))
    with pytest.raises(ValueError):
        nb.add_feature("NMT", np.zeros(3))
    assert isinstance(nb.add_feature("New", np.zeros(3)), NBestList)


def test_outputs_get_the_usual_permissions(tmp_path):
    import os
    import stat

    from rerank.outputs import atomic_write

    umask = os.umask(0o022)
    try:
        with atomic_write(str(tmp_path / "out.txt")) as out:
            out.write("x\n")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "out.txt").st_mode) == 0o644
