"""Shards (issue 44): features add --num-shards N --shard-id K scores one contiguous block of
segments; rerank merge joins the shards into the list one process writes, byte for byte,
and refuses a missing, duplicate or foreign shard in one line."""

import json

import pytest

from rerank.cli import main
from tests.conftest import write_split


def _add(d, *extra, out="full.nbest", nbest="val.nbest"):
    source = str(d / nbest.replace(".nbest", ".de"))  # a per-segment input, sliced to each shard
    argv = ["features", "add", "--nbest", str(d / nbest), "--scorer", "mbr:bleu", "--scorer", "len:0.95"]
    argv += ["--source", source]
    return main(argv + [*extra, "--out", str(d / out)])


def test_shards_merged_equal_the_unsharded_list(tmp_path, capsys):
    write_split(tmp_path, "val", 23, seed=1)  # 23 segments: shards of 7, 8, 8
    assert _add(tmp_path) == 0
    for k in range(3):
        assert _add(tmp_path, "--num-shards", "3", "--shard-id", str(k), out=f"s{k}.nbest") == 0
    record = json.loads((tmp_path / "s1.nbest.json").read_text())["shard"]
    assert (record["id"], record["of"], record["first"], record["last"], record["segments"]) == (1, 3, 7, 15, 23)
    shards = [str(tmp_path / f"s{k}.nbest") for k in (2, 0, 1)]  # any order
    assert main(["merge", *shards, "--out", str(tmp_path / "merged.nbest")]) == 0
    assert (tmp_path / "merged.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    merged = json.loads((tmp_path / "merged.nbest.json").read_text())
    full = json.loads((tmp_path / "full.nbest.json").read_text())
    assert merged["feature_sets"] == full["feature_sets"] and merged["beam_feature"] == full["beam_feature"]
    assert "shard" not in merged and len(merged["merged_from"]) == 3
    capsys.readouterr()


def test_bad_shards_are_refused_in_one_line(tmp_path, capsys):
    write_split(tmp_path, "val", 10, seed=2)
    write_split(tmp_path, "other", 10, seed=3)
    assert _add(tmp_path, "--num-shards", "2", "--shard-id", "2", out="x.nbest") == 1
    assert "--shard-id 2 of --num-shards 2: ids run 0..1" in capsys.readouterr().err
    assert _add(tmp_path, "--num-shards", "2", out="x.nbest") == 1
    assert "--num-shards and --shard-id go together" in capsys.readouterr().err
    for k in range(2):
        assert _add(tmp_path, "--num-shards", "2", "--shard-id", str(k), out=f"s{k}.nbest") == 0
    assert _add(tmp_path, "--num-shards", "2", "--shard-id", "1", out="o1.nbest", nbest="other.nbest") == 0
    capsys.readouterr()
    cases = [
        ([tmp_path / "s0.nbest"], "shard 1 of 2 is missing"),
        ([tmp_path / "s0.nbest", tmp_path / "s0.nbest"], "shard 0 is given twice"),
        ([tmp_path / "s0.nbest", tmp_path / "o1.nbest"], "a shard of another run (another input than"),
        ([tmp_path / "s0.nbest", tmp_path / "val.nbest"], "not a shard: its signature records no shard"),
    ]
    for shards, message in cases:
        assert main(["merge", *map(str, shards), "--out", str(tmp_path / "m.nbest")]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
        assert not (tmp_path / "m.nbest").exists()


@pytest.mark.parametrize("shards", [1, 5])
def test_one_shard_or_as_many_as_segments(tmp_path, shards, capsys):
    write_split(tmp_path, "val", 5, seed=4)
    assert _add(tmp_path) == 0
    for k in range(shards):
        assert _add(tmp_path, "--num-shards", str(shards), "--shard-id", str(k), out=f"s{k}.nbest") == 0
    assert (
        main(["merge", *[str(tmp_path / f"s{k}.nbest") for k in range(shards)], "--out", str(tmp_path / "m.nbest")])
        == 0
    )
    assert (tmp_path / "m.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    assert _add(tmp_path, "--num-shards", "6", "--shard-id", "0", out="x.nbest") == 1
    assert "shard 0 of 6 holds no segment (5 segments)" in capsys.readouterr().err


def test_crafted_shard_records_are_refused_in_one_line(tmp_path, capsys):
    """A shard record with a negative, string or huge shard count, ids or segments out of range,
    or shards that do not tile the list: one line each, no output, and no memory in proportion to
    a crafted count (issue 62: an empty output with exit 0, a TypeError, gigabytes)."""
    write_split(tmp_path, "val", 10, seed=2)
    for k in range(2):
        assert _add(tmp_path, "--num-shards", "2", "--shard-id", str(k), out=f"s{k}.nbest") == 0
    capsys.readouterr()
    good = json.loads((tmp_path / "s1.nbest.json").read_text())
    cases = [
        ({"of": -2}, "'of' must be a whole number ≥ 1, not -2"),
        ({"of": "2"}, "'of' must be a whole number ≥ 1, not '2'"),
        ({"of": 10**12}, "a shard of another run (another number of shards"),
        ({"id": 5}, "id 5 is not below its number of shards 2"),
        ({"first": 7, "last": 3}, "segments 7..3 are out of order or range"),
        ({"last": 99}, "segments 5..99 are out of order or range"),
        ({"first": 6}, "shard 1 starts at segment 6, where the shards before it end at 5"),
        ({"kind": "pdf"}, "kind must be nbest or text, not 'pdf'"),
    ]
    for change, message in cases:
        record = json.loads(json.dumps(good))
        record["shard"].update(change)
        (tmp_path / "s1.nbest.json").write_text(json.dumps(record))
        assert (
            main(["merge", str(tmp_path / "s0.nbest"), str(tmp_path / "s1.nbest"), "--out", str(tmp_path / "m.nbest")])
            == 1
        )
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, (change, err)
        assert not (tmp_path / "m.nbest").exists()
    # a huge count on every shard: the missing one is named without building a list of that size
    (tmp_path / "s1.nbest.json").write_text(json.dumps(good))
    for k in range(2):
        record = json.loads((tmp_path / f"s{k}.nbest.json").read_text())
        record["shard"]["of"] = 10**12
        (tmp_path / f"s{k}.nbest.json").write_text(json.dumps(record))
    assert (
        main(["merge", str(tmp_path / "s0.nbest"), str(tmp_path / "s1.nbest"), "--out", str(tmp_path / "m.nbest")]) == 1
    )
    assert "shard 2 of 1000000000000 is missing" in capsys.readouterr().err
