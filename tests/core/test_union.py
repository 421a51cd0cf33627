"""``rerank union``: n-best lists of the same segments joined (each distinct hypothesis once,
first list first), and ``rerank features add --beam-feature/--beam-set`` declaring the
columns that rank the union again."""

import json
import os

import numpy as np
import pytest

from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import read_list_info, read_nbest
from rerank.reranking import union_files
from tests.conftest import one_line_error

# the left-to-right model's list (3 segments) and the right-to-left model's (its own columns)
L2R = (
    "0 ||| ein mann läuft ||| NMT= -1.5 WordPenalty= -3 NMTNorm= -0.4 ||| -0.4\n"
    "0 ||| ein mann rennt ||| NMT= -2.5 WordPenalty= -3 NMTNorm= -0.6 ||| -0.6\n"
    "1 ||| der hund ||| NMT= -1 WordPenalty= -2 NMTNorm= -0.3 ||| -0.3\n"
    "1 ||| der hund ||| NMT= -1.2 WordPenalty= -2 NMTNorm= -0.35 ||| -0.35\n"  # a BPE variant: same text
    "2 ||| ein kind ||| NMT= -0.5 WordPenalty= -2 NMTNorm= -0.2 ||| -0.2\n"
)
R2L = (
    "0 ||| ein mann rennt ||| R2L= -1.1 WordPenalty= -3 R2LNorm= -0.3 ||| -0.3\n"
    "0 ||| ein mann läuft schnell ||| R2L= -1.9 WordPenalty= -4 R2LNorm= -0.4 ||| -0.4\n"
    "1 ||| ein hund ||| R2L= -0.9 WordPenalty= -2 R2LNorm= -0.3 ||| -0.3\n"
    "2 ||| ein kind ||| R2L= -0.4 WordPenalty= -2 R2LNorm= -0.1 ||| -0.1\n"
    "2 ||| das kind ||| R2L= -0.8 WordPenalty= -2 R2LNorm= -0.2 ||| -0.2\n"
)


@pytest.fixture
def lists(tmp_path):
    (tmp_path / "l2r.nbest").write_text(L2R)
    (tmp_path / "r2l.nbest").write_text(R2L)
    (tmp_path / "src.txt").write_text("a man runs\nthe dog\na child\n")
    return tmp_path


def test_union_holds_each_distinct_hypothesis_once_first_list_first(lists):
    out = str(lists / "u.nbest")
    added = union_files([str(lists / "l2r.nbest"), str(lists / "r2l.nbest")], out)
    union = read_nbest(out)
    assert union.offsets.tolist() == [0, 3, 5, 7]
    assert union.hypotheses == [
        "ein mann läuft",
        "ein mann rennt",
        "ein mann läuft schnell",
        "der hund",
        "ein hund",
        "ein kind",
        "das kind",
    ]
    assert added == [4, 3]  # the repeated "der hund" once; "ein mann rennt" and "ein kind" already there
    # model scores of one list do not describe the other's hypotheses: WordPenalty only
    assert union.feature_names == ["WordPenalty"]
    assert union.features[:, 0].tolist() == [-3, -3, -4, -2, -2, -2, -2]
    info = read_list_info(out)
    assert info.declared and info.beam_feature is None and info.feature_sets == {}
    record = json.loads((lists / "u.nbest.json").read_text())
    assert record["added"] == [4, 3] and record["hypotheses"] == 7 and record["segments"] == 3
    # in blocks: the same list whatever the block size
    import rerank.reranking as reranking

    old, reranking.UNION_BLOCK = reranking.UNION_BLOCK, 2
    try:
        union_files([str(lists / "l2r.nbest"), str(lists / "r2l.nbest")], str(lists / "u2.nbest"))
    finally:
        reranking.UNION_BLOCK = old
    assert (lists / "u2.nbest").read_text() == (lists / "u.nbest").read_text()


def test_union_refuses_lists_of_other_segment_counts_and_a_single_list(lists, capsys):
    (lists / "short.nbest").write_text(R2L.split("2 |||")[0])  # segments 0 and 1 only
    with pytest.raises(InputError, match=r"short.nbest: 2 segments, but .*l2r.nbest has more"):
        union_files([str(lists / "l2r.nbest"), str(lists / "short.nbest")], str(lists / "u.nbest"))
    assert (
        main(
            [
                "union",
                "--nbest",
                str(lists / "short.nbest"),
                "--nbest",
                str(lists / "l2r.nbest"),
                "--out",
                str(lists / "u.nbest"),
            ]
        )
        == 1
    )
    one_line_error(capsys, "short.nbest: 2 segments, but", "l2r.nbest has more")
    assert not os.path.exists(lists / "u.nbest") and not os.path.exists(lists / "u.nbest.json")
    assert main(["union", "--nbest", str(lists / "l2r.nbest"), "--out", str(lists / "u.nbest")]) == 1
    one_line_error(capsys, "at least two n-best lists")
    assert (
        main(
            [
                "union",
                "--nbest",
                str(lists / "l2r.nbest"),
                "--nbest",
                str(lists / "r2l.nbest"),
                "--out",
                str(lists / "r2l.nbest"),
            ]
        )
        == 1
    )
    one_line_error(capsys, "refusing to overwrite")
    assert (lists / "r2l.nbest").read_text() == R2L


def test_a_scored_union_declares_its_beam_again_and_tunes_from_it(lists, capsys):
    assert (
        main(
            [
                "union",
                "--nbest",
                str(lists / "l2r.nbest"),
                "--nbest",
                str(lists / "r2l.nbest"),
                "--out",
                str(lists / "u.nbest"),
            ]
        )
        == 0
    )
    assert "7 distinct hypotheses (4 from" in capsys.readouterr().err
    scored = str(lists / "s.nbest")
    # len:2.0: LenRatio = hypothesis words / source words (a cheap stand-in for the model's forced decoding)
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(lists / "u.nbest"),
                "--source",
                str(lists / "src.txt"),
                "--scorer",
                "len:2.0",
                "--beam-feature",
                "LenRatio",
                "--beam-set",
                "WordPenalty,LenRatio",
                "--out",
                scored,
            ]
        )
        == 0
    )
    info = read_list_info(scored)
    assert info.beam_feature == "LenRatio" and info.feature_sets["beam"] == ["WordPenalty", "LenRatio"]
    assert info.feature_sets["Len"] == ["LenRatio", "LenDev"]
    assert read_nbest(scored).features[:3, 1].tolist() == [1.0, 1.0, 4 / 3]
    # rerank tune starts from the declared beam: 1 on LenRatio, 0 elsewhere
    (lists / "ref.txt").write_text("ein mann läuft schnell\nein hund\ndas kind\n")
    assert (
        main(
            [
                "tune",
                "--nbest",
                scored,
                "--ref",
                str(lists / "ref.txt"),
                "--feature-sets",
                "beam",
                "--mira-iterations",
                "1",
                "--quiet",
                "--out",
                str(lists / "w.json"),
            ]
        )
        == 0
    )
    weights = json.loads((lists / "w.json").read_text())["weights"]
    assert weights["LenDev"] == 0 and weights["LenRatio"] != 0  # tuned: the beam set only
    assert "(beam)" in capsys.readouterr().err


@pytest.mark.parametrize(
    "extra,needle",
    [
        (["--beam-feature", "NMTNorm", "--beam-set", "NMTNorm"], "'NMTNorm' is not a column of the result"),
        (["--beam-feature", "LenRatio", "--beam-set", "WordPenalty"], "--beam-set must include the beam feature"),
        (["--beam-feature", "LenRatio"], "--beam-feature and --beam-set go together"),
    ],
)
def test_beam_declarations_that_do_not_fit_are_refused(lists, capsys, extra, needle):
    union_files([str(lists / "l2r.nbest"), str(lists / "r2l.nbest")], str(lists / "u.nbest"))
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(lists / "u.nbest"),
                "--source",
                str(lists / "src.txt"),
                "--scorer",
                "len:2.0",
                *extra,
                "--out",
                str(lists / "s.nbest"),
            ]
        )
        == 1
    )
    one_line_error(capsys, needle)
    assert not os.path.exists(lists / "s.nbest") and not os.path.exists(lists / "s.nbest.json")


def test_a_list_with_a_beam_feature_keeps_it(lists, capsys):
    (lists / "l2r.nbest.json").write_text(
        json.dumps({"beam_feature": "NMTNorm", "feature_sets": {"beam": ["NMT", "WordPenalty", "NMTNorm"]}})
    )
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(lists / "l2r.nbest"),
                "--source",
                str(lists / "src.txt"),
                "--scorer",
                "len:2.0",
                "--beam-feature",
                "LenRatio",
                "--beam-set",
                "LenRatio",
                "--out",
                str(lists / "s.nbest"),
            ]
        )
        == 1
    )
    one_line_error(capsys, "l2r.nbest: the list already declares beam feature 'NMTNorm'")
    assert not os.path.exists(lists / "s.nbest")
    assert np.array_equal(read_nbest(str(lists / "l2r.nbest")).features[:, 0], [-1.5, -2.5, -1, -1.2, -0.5])
