"""Cross-fitting by image (rerank/folds.py, rerank folds, rerank crossfit) and n-best
subsets (NBestList.rows_of / subset / head, rerank truncate)."""

import json

import numpy as np
import pytest

from rerank.cli import main
from rerank.errors import InputError
from rerank.folds import assign_folds, read_folds, write_folds
from rerank.nbest import NBestList, read_nbest, write_lines, write_nbest
from tests.cli.test_cli import tuning_files  # noqa: F401  (fixture)


def small_list():
    return NBestList([0, 2, 5, 6], ["a", "b", "c", "d", "e", "f"], np.arange(12.0).reshape(6, 2), ["X", "Y"])


def test_rows_of_subset_and_head_by_hand():
    nbest = small_list()
    assert nbest.rows_of([2, 0]).tolist() == [5, 0, 1]
    sub = nbest.subset([2, 0])
    assert sub.offsets.tolist() == [0, 1, 3] and sub.hypotheses == ["f", "a", "b"]
    assert sub.features[:, 0].tolist() == [10.0, 0.0, 2.0]
    head = nbest.head(2)
    assert head.offsets.tolist() == [0, 2, 4, 5] and head.hypotheses == ["a", "b", "c", "d", "f"]
    assert nbest.head(1).hypotheses == ["a", "c", "f"]


def test_folds_keep_an_image_together_and_are_balanced():
    images = [f"img{i % 37}.jpg" for i in range(100)]  # repeated images, as task 2's descriptions
    folds = assign_folds(images, 5, seed=3)
    by_image = {}
    for name, f in zip(images, folds.fold):
        assert by_image.setdefault(name, f) == f
    sizes = np.bincount(list(by_image.values()), minlength=5)
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 37
    # the assignment depends on the set of images and the seed, not on their order
    again = assign_folds(images[::-1], 5, seed=3).image_fold()
    assert again == folds.image_fold()
    assert assign_folds(images, 5, seed=4).image_fold() != folds.image_fold()
    assert folds.segments(0).tolist() == np.flatnonzero(folds.fold == 0).tolist()
    assert sorted(folds.segments(0).tolist() + folds.segments(0, held_out=False).tolist()) == list(range(100))


def test_folds_file_round_trip_and_errors(tmp_path):
    folds = assign_folds([f"i{k}" for k in range(10)], 3)
    write_folds(folds, str(tmp_path / "f.tsv"))
    back = read_folds(str(tmp_path / "f.tsv"), 10)
    assert back.images == folds.images and back.fold.tolist() == folds.fold.tolist() and back.k == 3
    with pytest.raises(InputError, match="11 in the n-best"):
        read_folds(str(tmp_path / "f.tsv"), 11)
    for text, message in (
        ("a\t0\nb\tx\n", "f.tsv:2: fold 'x' is not an integer"),
        ("a\t0\na\t1\n", "f.tsv:2: image a is in folds 0 and 1"),
        ("a\t0\nb\t2\n", "missing \\[1\\]"),
        ("a\t0\nb\t0\n", "missing"),
        ("a 0\n", "f.tsv:1: expected image<TAB>fold"),
    ):
        (tmp_path / "f.tsv").write_text(text)
        with pytest.raises(InputError, match=message):
            read_folds(str(tmp_path / "f.tsv"))
    with pytest.raises(InputError):
        assign_folds(["a", "b"], 3)


def test_crossfit_tunes_each_fold_on_the_others_only(tuning_files, capsys):  # noqa: F811
    tmp, refs, hyps, nbest, good = tuning_files
    images = [f"img{s // 2}.jpg" for s in range(nbest.num_segments)]  # two segments per image
    write_lines(images, str(tmp / "images.txt"))
    assert (
        main(["folds", "--segment-images", str(tmp / "images.txt"), "--k", "3", "--out", str(tmp / "folds.tsv")]) == 0
    )
    folds = read_folds(str(tmp / "folds.tsv"))
    out, weights_out = tmp / "test.crossfit", tmp / "weights.crossfit.json"
    assert (
        main(
            [
                "crossfit",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--folds",
                str(tmp / "folds.tsv"),
                "--out",
                str(out),
                "--weights-out",
                str(weights_out),
                "--seed",
                "2",
                "--mira-iterations",
                "5",
                "--quiet",
            ]
        )
        == 0
    )
    data = json.loads(weights_out.read_text())
    chosen = out.read_text().splitlines()
    assert len(chosen) == nbest.num_segments and data["crossfit"]["k"] == 3
    for k in range(3):
        seen, held = folds.segments(k, held_out=False), folds.segments(k)
        fold = data["folds"][k]
        assert fold["tuned_segments"] == len(seen) and fold["applied_segments"] == len(held)
        # the fold's weights are exactly what `rerank tune` finds on the other folds alone
        write_nbest(nbest.subset(seen), str(tmp / f"part{k}.nbest"))
        write_lines([refs[s] for s in seen], str(tmp / f"part{k}.ref"))
        assert (
            main(
                [
                    "tune",
                    "--init",
                    "zeros",
                    "--nbest",
                    str(tmp / f"part{k}.nbest"),
                    "--ref",
                    str(tmp / f"part{k}.ref"),
                    "--out",
                    str(tmp / f"part{k}.json"),
                    "--seed",
                    "2",
                    "--mira-iterations",
                    "5",
                    "--quiet",
                ]
            )
            == 0
        )
        alone = json.loads((tmp / f"part{k}.json").read_text())
        assert fold["weights"] == alone["weights"] and fold["bleu"] == pytest.approx(alone["tuning"]["bleu"])
        # and fold k's segments are selected with them
        w = np.array([fold["weights"]["Bad"], fold["weights"]["Good"]])
        sub = nbest.subset(held)
        assert [chosen[s] for s in held] == [sub.hypotheses[i] for i in sub.select(sub.features @ w)]


def test_crossfit_refuses_a_folds_file_of_another_test_set(tuning_files, capsys):  # noqa: F811
    tmp = tuning_files[0]
    (tmp / "folds.tsv").write_text("a\t0\nb\t1\n")
    assert (
        main(
            [
                "crossfit",
                "--init",
                "zeros",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--ref",
                str(tmp / "dev.ref"),
                "--folds",
                str(tmp / "folds.tsv"),
                "--out",
                str(tmp / "o.txt"),
                "--weights-out",
                str(tmp / "w.json"),
            ]
        )
        == 1
    )
    assert "2 segments in the folds file but 60" in capsys.readouterr().err
    assert not (tmp / "o.txt").exists() and not (tmp / "w.json").exists()


def test_truncate_keeps_the_head_and_the_beam_feature(tmp_path):
    write_nbest(small_list(), str(tmp_path / "n.nbest"))
    (tmp_path / "n.nbest.json").write_text(json.dumps({"beam_feature": "Y"}))
    assert main(["truncate", "--nbest", str(tmp_path / "n.nbest"), "--size", "2", "--out", str(tmp_path / "h")]) == 0
    head = read_nbest(str(tmp_path / "h"))
    assert head.hypotheses == ["a", "b", "c", "d", "f"] and head.offsets.tolist() == [0, 2, 4, 5]
    assert json.loads((tmp_path / "h.json").read_text())["beam_feature"] == "Y"


def test_apply_with_one_weights_file_per_fold(tuning_files, capsys):  # noqa: F811
    tmp, refs, hyps, nbest, good = tuning_files
    folds = assign_folds([f"img{s}" for s in range(nbest.num_segments)], 2, seed=5)
    write_folds(folds, str(tmp / "folds.tsv"))
    (tmp / "w.fold0.json").write_text(json.dumps({"weights": {"Bad": 1.0, "Good": 0.0}}))
    (tmp / "w.fold1.json").write_text(json.dumps({"weights": {"Bad": 0.0, "Good": 1.0}}))
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--weights",
                str(tmp / "w.fold{fold}.json"),
                "--folds",
                str(tmp / "folds.tsv"),
                "--out",
                str(tmp / "out.txt"),
            ]
        )
        == 0
    )
    chosen = (tmp / "out.txt").read_text().splitlines()
    by_bad, by_good = nbest.select(nbest.features[:, 0]), nbest.select(nbest.features[:, 1])
    for s in range(nbest.num_segments):
        assert chosen[s] == hyps[(by_bad if folds.fold[s] == 0 else by_good)[s]]
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(tmp / "dev.nbest"),
                "--weights",
                str(tmp / "w.fold0.json"),
                "--folds",
                str(tmp / "folds.tsv"),
                "--out",
                str(tmp / "o2.txt"),
            ]
        )
        == 1
    )
    assert "needs {fold}" in capsys.readouterr().err and not (tmp / "o2.txt").exists()


def _two_way_lists(tmp, main_segments=4, extra_segments=12):
    """A val list whose references are every segment's first hypothesis (A: F1 = 1, F2 = 0)
    and a list of other segments whose references are the second (B: F1 = 0, F2 = 1).  One
    weight vector picks A everywhere (w1 > w2) or B everywhere: tuned on val alone, A; with
    the 12 extra segments beside any val segments, B wins corpus BLEU (12 exact of 14–16)."""

    def write(name, segments, ref_of):
        hyps = [h for s in range(segments) for h in (f"a{s} b c d e", f"v{s} w x y z")]
        nbest = NBestList(
            np.arange(0, 2 * segments + 1, 2), hyps, np.tile([[1.0, 0.0], [0.0, 1.0]], (segments, 1)), ["F1", "F2"]
        )
        write_nbest(nbest, str(tmp / f"{name}.nbest"))
        write_lines([hyps[2 * s + ref_of] for s in range(segments)], str(tmp / f"{name}.ref"))
        return nbest

    write("val", main_segments, 0)
    write("extra", extra_segments, 1)
    (tmp / "folds.tsv").write_text("".join(f"img{s}\t{s % 2}\n" for s in range(main_segments)))


TUNE = ["--init", "zeros", "--seed", "1", "--mira-iterations", "5", "--quiet"]


def _tune(nbest, ref, out, *more):
    """``rerank tune`` with :data:`TUNE`'s settings; its weights record."""
    assert main(["tune", "--nbest", str(nbest), "--ref", str(ref), *more, *TUNE, "--out", str(out)]) == 0
    return json.loads(out.read_text())


def test_extra_tuning_data_is_tuned_on_in_every_fold_and_never_selected(tmp_path, capsys):
    _two_way_lists(tmp_path)
    val = ["--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.ref")]
    extra = ["--extra-nbest", str(tmp_path / "extra.nbest"), "--extra-ref", str(tmp_path / "extra.ref")]
    folds = ["--folds", str(tmp_path / "folds.tsv")]

    def crossfit(name, *more):
        out, weights = tmp_path / f"{name}.txt", tmp_path / f"{name}.json"
        assert main(["crossfit", *val, *folds, *more, *TUNE, "--out", str(out), "--weights-out", str(weights)]) == 0
        return out.read_text().splitlines(), json.loads(weights.read_text())

    alone, _ = crossfit("alone")
    assert alone == [f"a{s} b c d e" for s in range(4)]  # val's own preference
    chosen, record = crossfit("extra", *extra)
    assert chosen == [f"v{s} w x y z" for s in range(4)]  # the extra data's, on every held-out segment
    assert record["crossfit"]["segments"] == 4 and record["crossfit"]["extra"][0]["segments"] == 12
    # each fold is tuned on the other fold's 2 val segments and all 12 extra ones: exactly what
    # `rerank tune` finds on that list written out by hand (val segments first, then the extra)
    extra_lines = (tmp_path / "extra.nbest").read_text().splitlines()
    val_lines = (tmp_path / "val.nbest").read_text().splitlines()
    refs, extra_refs = (
        (tmp_path / "val.ref").read_text().splitlines(),
        (tmp_path / "extra.ref").read_text().splitlines(),
    )
    for k in range(2):
        fold = record["folds"][k]
        assert fold["tuned_segments"] == 14 and fold["applied_segments"] == 2
        seen = [s for s in range(4) if s % 2 != k]
        lines = [line for line in val_lines if int(line.split(" ||| ")[0]) in seen]
        lines += extra_lines
        renumbered, ids = [], {}
        for line in lines:
            head, rest = line.split(" ||| ", 1)
            key = (len(renumbered) >= 2 * len(seen), head)
            ids.setdefault(key, len(ids))
            renumbered.append(f"{ids[key]} ||| {rest}")
        write_lines(renumbered, str(tmp_path / f"by-hand{k}.nbest"))
        write_lines([refs[s] for s in seen] + extra_refs, str(tmp_path / f"by-hand{k}.ref"))
        by_hand = _tune(tmp_path / f"by-hand{k}.nbest", tmp_path / f"by-hand{k}.ref", tmp_path / f"by-hand{k}.json")
        assert fold["weights"] == by_hand["weights"]
        assert fold["weights"]["F2"] > fold["weights"]["F1"]
    # rerank tune --extra-nbest: the weights of the two lists written one after the other
    tuned = _tune(tmp_path / "val.nbest", tmp_path / "val.ref", tmp_path / "tuned.json", *extra)
    write_lines(
        val_lines + [f"{int(l.split(' ||| ')[0]) + 4} ||| {l.split(' ||| ', 1)[1]}" for l in extra_lines],
        str(tmp_path / "both.nbest"),
    )
    write_lines(refs + extra_refs, str(tmp_path / "both.ref"))
    both = _tune(tmp_path / "both.nbest", tmp_path / "both.ref", tmp_path / "both.json")
    assert tuned["weights"] == both["weights"]
    assert tuned["tuning"]["segments"] == 4 and tuned["tuning"]["tuned_segments"] == 16


def test_extra_tuning_data_of_other_columns_or_without_references_is_one_line(tmp_path, capsys):
    _two_way_lists(tmp_path)
    other = NBestList([0, 1], ["x y z"], np.array([[1.0, 2.0]]), ["F2", "F1"])
    write_nbest(other, str(tmp_path / "other.nbest"))
    write_lines(["x y z"], str(tmp_path / "other.ref"))
    base = [
        "tune",
        "--nbest",
        str(tmp_path / "val.nbest"),
        "--ref",
        str(tmp_path / "val.ref"),
        *TUNE,
        "--out",
        str(tmp_path / "w.json"),
    ]
    assert (
        main([*base, "--extra-nbest", str(tmp_path / "other.nbest"), "--extra-ref", str(tmp_path / "other.ref")]) == 1
    )
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        "other.nbest: its columns (F2 F1) are not those of "
        + str(tmp_path / "val.nbest")
        + " (F1 F2): more tuning data must have the same columns in the same order"
    )
    assert len(err.splitlines()) == 1
    assert main([*base, "--extra-nbest", str(tmp_path / "extra.nbest")]) == 1
    assert "--extra-nbest given 1 time(s) but --extra-ref 0" in capsys.readouterr().err
    assert main([*base, "--extra-nbest", str(tmp_path / "extra.nbest"), "--extra-ref", str(tmp_path / "val.ref")]) == 1
    assert "12 segments in the n-best list but 4 references" in capsys.readouterr().err
    assert not (tmp_path / "w.json").exists()
