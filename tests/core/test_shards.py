"""Shards (issues 44, 64): features add --num-shards N --shard-id K scores the blocks K, K+N, …
of the list (blocks of --block-hypotheses, each scored as one process scores it); rerank merge
joins the shards into the list one process writes, byte for byte, and refuses a missing,
duplicate or foreign shard in one line."""

import json

import pytest

from rerank.cli import main
from tests.conftest import write_split


def _add(d, *extra, out="full.nbest", nbest="val.nbest", block=20):
    """features add (MBR, length) on NBEST in blocks of --block-hypotheses BLOCK: the 8-best
    lists of write_split make blocks of 3 segments at 20."""
    source = str(d / nbest.replace(".nbest", ".de"))  # a per-segment input, sliced to each shard
    argv = ["features", "add", "--nbest", str(d / nbest), "--scorer", "mbr:bleu", "--scorer", "len:0.95"]
    argv += ["--source", source, "--block-hypotheses", str(block)]
    return main(argv + [*extra, "--out", str(d / out)])


def test_shards_merged_equal_the_unsharded_list(tmp_path, capsys):
    write_split(tmp_path, "val", 23, seed=1)  # 23 8-best segments: blocks of 3 (cut after 20 hypotheses) and 2
    assert _add(tmp_path) == 0
    for k in range(3):
        assert _add(tmp_path, "--num-shards", "3", "--shard-id", str(k), out=f"s{k}.nbest") == 0
    record = json.loads((tmp_path / "s1.nbest.json").read_text())["shard"]
    # shard 1 holds blocks 1, 4, 7 of the 8: segments 3-5, 12-14, 21-22
    assert (record["id"], record["of"], record["segments"]) == (1, 3, 23) and "first" not in record
    assert record["members"] == [3, 4, 5, 12, 13, 14, 21, 22]
    shards = [str(tmp_path / f"s{k}.nbest") for k in (2, 0, 1)]  # any order
    assert main(["merge", *shards, "--out", str(tmp_path / "merged.nbest")]) == 0
    assert (tmp_path / "merged.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    merged = json.loads((tmp_path / "merged.nbest.json").read_text())
    full = json.loads((tmp_path / "full.nbest.json").read_text())
    assert merged["feature_sets"] == full["feature_sets"] and merged["beam_feature"] == full["beam_feature"]
    assert "shard" not in merged and len(merged["merged_from"]) == 3 and full["block_hypotheses"] == 20
    # these scorers score a segment alone: the default block (the whole list here) gives the same list
    assert _add(tmp_path, out="whole.nbest", block=50_000) == 0
    assert (tmp_path / "whole.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    # a shard of another block size is a shard of another run
    assert _add(tmp_path, "--num-shards", "3", "--shard-id", "1", out="b1.nbest", block=8) == 0
    capsys.readouterr()
    mixed = [str(tmp_path / name) for name in ("s0.nbest", "b1.nbest", "s2.nbest")]
    assert main(["merge", *mixed, "--out", str(tmp_path / "x.nbest")]) == 1
    assert "a shard of another run (other block_hypotheses than" in capsys.readouterr().err


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


@pytest.mark.parametrize("shards", [1, 5, 7])
def test_one_shard_as_many_as_blocks_or_more(tmp_path, shards, capsys):
    """5 segments in blocks of one (--block-hypotheses 1): 1 shard, 5, or 7 (shards 5 and 6 are
    dealt no block: each writes an empty list, and the merge takes them)."""
    write_split(tmp_path, "val", 5, seed=4)
    assert _add(tmp_path, block=1) == 0
    for k in range(shards):
        assert _add(tmp_path, "--num-shards", str(shards), "--shard-id", str(k), out=f"s{k}.nbest", block=1) == 0
    paths = [str(tmp_path / f"s{k}.nbest") for k in range(shards)]
    assert main(["merge", *paths[::-1], "--out", str(tmp_path / "m.nbest")]) == 0
    assert (tmp_path / "m.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    if shards == 7:
        assert (tmp_path / "s6.nbest").read_bytes() == b""
        assert json.loads((tmp_path / "s6.nbest.json").read_text())["shard"]["members"] == []
    capsys.readouterr()


def test_crafted_shard_records_are_refused_in_one_line(tmp_path, capsys):
    """A shard record with a negative, string or huge shard count, ids or segments out of range,
    or shards that do not tile the list: one line each, no output, and no memory in proportion to
    a crafted count (issue 62: an empty output with exit 0, a TypeError, gigabytes)."""
    write_split(tmp_path, "val", 10, seed=2)
    assert _add(tmp_path) == 0
    _block_shards(tmp_path, [(0, 5), (5, 10)])
    assert main(["merge", str(tmp_path / "s1.nbest"), str(tmp_path / "s0.nbest"), "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m").read_bytes() == (tmp_path / "full.nbest").read_bytes()
    (tmp_path / "m").unlink()
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


def _block_shards(tmp_path, bounds):
    """Shards of blocks (as rerank generate writes them) cut by hand from full.nbest: shard k
    holds the segments bounds[k] = (first, last), numbered from 0."""
    import numpy as np

    from rerank.nbest import read_nbest, write_nbest

    full = read_nbest(str(tmp_path / "full.nbest"))
    signature = json.loads((tmp_path / "full.nbest.json").read_text())
    for k, (first, last) in enumerate(bounds):
        record = {"id": k, "of": len(bounds), "first": first, "last": last, "segments": full.num_segments}
        record.update(input_sha256="ab" * 32, kind="nbest")
        write_nbest(full.subset(np.arange(first, last)), str(tmp_path / f"s{k}.nbest"))
        (tmp_path / f"s{k}.nbest.json").write_text(json.dumps({**signature, "shard": record}))


def _batch_shards(tmp_path, groups):
    """Shards of batches (as rerank nmt nbest writes them) cut by hand from full.nbest and
    full.1best: shard k holds the segments groups[k], in ascending order, numbered from 0."""
    import numpy as np

    from rerank.nbest import read_nbest, write_nbest

    full = read_nbest(str(tmp_path / "full.nbest"))
    lines = (tmp_path / "full.1best").read_text().splitlines(keepends=True)
    signature = json.loads((tmp_path / "full.nbest.json").read_text())
    for k, members in enumerate(groups):
        record = {"id": k, "of": len(groups), "members": members, "segments": full.num_segments}
        record["input_sha256"] = "ab" * 32
        cut = np.minimum(members, full.num_segments - 1)  # a record may name a segment the list lacks
        write_nbest(full.subset(cut), str(tmp_path / f"b{k}.nbest"))
        (tmp_path / f"b{k}.nbest.json").write_text(json.dumps({**signature, "shard": {**record, "kind": "nbest"}}))
        (tmp_path / f"b{k}.1best").write_text("".join(lines[m] for m in cut))
        (tmp_path / f"b{k}.1best.json").write_text(json.dumps({"shard": {**record, "kind": "text"}}))


def test_shards_of_batches_interleave_into_the_unsharded_list(tmp_path, capsys):
    """rerank nmt nbest's shards hold fairseq's batches (segments anywhere in the subset, listed
    in their records' members): merged, they give the one-process list and 1-best, byte for
    byte; a segment in two shards or in none, members out of order or range, a crafted segment
    count, shards of blocks mixed in: one line each, no output."""
    write_split(tmp_path, "val", 10, seed=5)
    assert _add(tmp_path) == 0
    from rerank.nbest import read_nbest

    full = read_nbest(str(tmp_path / "full.nbest"))
    (tmp_path / "full.1best").write_text("".join(full.hypotheses[i] + "\n" for i in full.offsets[:-1]))
    _batch_shards(tmp_path, [[1, 4, 5, 9], [0, 2, 3], [6, 7, 8]])
    for kind in ("nbest", "1best"):
        shards = [str(tmp_path / f"b{k}.{kind}") for k in (2, 0, 1)]
        assert main(["merge", *shards, "--out", str(tmp_path / f"m.{kind}")]) == 0
        assert (tmp_path / f"m.{kind}").read_bytes() == (tmp_path / f"full.{kind}").read_bytes(), kind
    merged = json.loads((tmp_path / "m.nbest.json").read_text())
    assert "shard" not in merged and len(merged["merged_from"]) == 3
    _block_shards(tmp_path, [(0, 3), (3, 6), (6, 10)])
    capsys.readouterr()
    cases = [
        ([[1, 4, 5, 9], [0, 2, 3, 4], [6, 7, 8]], "the shards hold 11 segments of 10"),
        ([[1, 4, 5, 9], [0, 2, 4], [6, 7, 8]], "segment 4 is in shard 0 and in shard 1"),
        ([[1, 5, 4, 9], [0, 2, 3], [6, 7, 8]], "members must be ascending segment ids below 10"),
        ([[1, 4, 5, 9], [0, 2, 3], [6, 7, 10]], "members must be ascending segment ids below 10"),
    ]
    for groups, message in cases:
        _batch_shards(tmp_path, groups)
        assert main(["merge", *[str(tmp_path / f"b{k}.nbest") for k in range(3)], "--out", str(tmp_path / "x")]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, (groups, err)
        assert not (tmp_path / "x").exists()
    _batch_shards(tmp_path, [[1, 4, 5, 9], [0, 2, 3], [6, 7, 8]])
    record = json.loads((tmp_path / "b1.nbest.json").read_text())
    record["shard"]["segments"] = 10**12  # on every shard: refused before an array of that size
    for k in range(3):
        (tmp_path / f"b{k}.nbest.json").write_text(json.dumps({**record, "shard": {**record["shard"], "id": k}}))
    assert main(["merge", *[str(tmp_path / f"b{k}.nbest") for k in range(3)], "--out", str(tmp_path / "x")]) == 1
    assert "the shards hold" in capsys.readouterr().err
    _batch_shards(tmp_path, [[1, 4, 5, 9], [0, 2, 3], [6, 7, 8]])
    assert (
        main(
            ["merge", str(tmp_path / "b0.nbest"), str(tmp_path / "s1.nbest"), str(tmp_path / "b2.nbest")]
            + ["--out", str(tmp_path / "x")]
        )
        == 1
    )
    assert "of blocks and of batches" in capsys.readouterr().err
