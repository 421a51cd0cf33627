"""scripts/run_tables.sh end to end on a tiny corpus, from the lists on: both protocols
(cross-fitting over test_2016 folds, and the paper's with image features for every split).

The NMT stages are the main job's (tested in test_nmt.py); here the regular model's lists
are given, as the main job leaves them, and the script trains the embedding models, adds
their features, tunes, reports and writes the tables."""

import gzip
import json
import os
import subprocess

import numpy as np
import pytest

from tests.conftest import (
    ROOT,
    needs,  # noqa: E402
)

pytestmark = needs("nmt")

from rerank.cli import main  # noqa: E402
from rerank.nbest import NBestList, read_nbest, write_lines, write_nbest  # noqa: E402

WORDS = [("red", "rote"), ("blue", "blaue"), ("green", "grüne"), ("black", "schwarze")]


def _data(root, rng):
    """Task 1 and task 2 text for train/val/test_2016 whose colour word is visible in the
    image features (a one-hot of the colour plus noise), and features of every image."""
    names, rows = [], []
    for split, n in (("train", 40), ("val", 12), ("test_2016", 12)):
        images = [f"{split}{i}.jpg" for i in range(n)]
        concept = rng.integers(0, 4, size=n)
        names += images
        rows.append(np.eye(4)[concept] + 0.05 * rng.normal(size=(n, 4)))
        task1 = {"train": "train", "val": "val", "test_2016": "test_2016_flickr"}[split]
        for task, files in (("task1", [task1]), ("task2", [f"{split}.{k}" for k in range(1, 6)])):
            os.makedirs(os.path.join(root, task, "raw"), exist_ok=True)
            os.makedirs(os.path.join(root, task, "image_splits"), exist_ok=True)
            split_file = f"{task1}.txt" if task == "task1" else f"{split}_images.txt"
            write_lines(images, os.path.join(root, task, "image_splits", split_file))
            for stem in files:
                for lang in ("en", "de"):
                    template = "a {} dog runs .\n" if lang == "en" else "ein {} hund rennt .\n"
                    with gzip.open(os.path.join(root, task, "raw", f"{stem}.{lang}.gz"), "wt") as out:
                        out.write("".join(template.format(WORDS[c][lang == "de"]) for c in concept))
    np.save(os.path.join(root, "all.npy"), np.concatenate(rows).astype(np.float32))
    write_lines(names, os.path.join(root, "all.txt"))
    np.save(os.path.join(root, "test.npy"), np.concatenate(rows)[-12:].astype(np.float16))
    write_lines(names[-12:], os.path.join(root, "test.txt"))


def _main_job(main_dir, data, rng):
    """What the main job leaves: tokenised val/test text, the regular model's 4-best lists
    (with an R2L column, as its full lists) and 1-best, the text-only MLMME model."""
    tok = os.path.join(main_dir, "data", "tok")
    os.makedirs(tok)
    os.makedirs(os.path.join(main_dir, "nbest"))
    os.makedirs(os.path.join(main_dir, "model"))
    open(os.path.join(main_dir, "model", "train.done"), "w").close()
    for split, stem in (("val", "val"), ("test", "test_2016_flickr")):
        with gzip.open(os.path.join(data, "task1", "raw", f"{stem}.de.gz"), "rt") as handle:
            refs = handle.read().splitlines()
        with gzip.open(os.path.join(data, "task1", "raw", f"{stem}.en.gz"), "rt") as handle:
            write_lines(handle.read().splitlines(), os.path.join(tok, f"{stem}.en"))
        write_lines(refs, os.path.join(tok, f"{stem}.de"))
        hyps, features = [], []
        for ref in refs:  # the reference and three wrong colours; the beam prefers a wrong one
            colour = next(i for i, w in enumerate(WORDS) if w[1] in ref.split())
            order = [(colour + 1) % 4, colour, (colour + 2) % 4, (colour + 3) % 4]
            for rank, c in enumerate(order):
                hyps.append(f"ein {WORDS[c][1]} hund rennt .")
                features.append([-1.0 - rank, -5, -0.2 - rank / 5, rng.normal()])
        nbest = NBestList(
            np.arange(0, len(hyps) + 1, 4), hyps, np.array(features), ["NMT", "WordPenalty", "NMTNorm", "R2L"]
        )
        write_nbest(nbest, os.path.join(main_dir, "nbest", f"{split}.full.nbest"))
        with open(os.path.join(main_dir, "nbest", f"{split}.full.nbest.json"), "w") as out:
            json.dump(
                {
                    "beam_feature": "NMTNorm",
                    "feature_sets": {"beam": ["NMT", "WordPenalty", "NMTNorm"], "R2L": ["R2L"]},
                },
                out,
            )
        write_lines(hyps[::4], os.path.join(main_dir, "nbest", f"{split}.1best"))
    assert (
        main(
            [
                "embed",
                "train",
                "--data",
                data,
                "--task1",
                "--beta",
                "0",
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--threads",
                "1",
                "--out",
                os.path.join(main_dir, "embed"),
            ]
        )
        == 0
    )


@pytest.mark.parametrize("protocol", ["crossfit", "paper"])
def test_run_tables_on_a_tiny_corpus(tmp_path, protocol, capsys):
    rng = np.random.default_rng(0)
    data = str(tmp_path / "m30k")
    _data(data, rng)
    main_dir = str(tmp_path / "main")
    _main_job(main_dir, data, rng)
    (tmp_path / "paper.tsv").write_text(
        "# published\nnbest\tvariant\tsystem\tBLEU\tBLEU_marks\tTER\tTER_marks\n"
        "4\tregular\tbaseline\t32.4\t\t51.9\t\n4\tregular\t+MLMME beta=1\t33.8\t†‡\t49.0\t‡\n"
    )
    out = tmp_path / "tables"
    env = {
        **os.environ,
        "OUT": str(out),
        "OUT_MAIN": main_dir,
        "DATA": data,
        "PROTOCOL": protocol,
        "PAPER_TABLE": str(tmp_path / "paper.tsv"),
        "VARIANTS": "regular",
        "SIZES": "4",
        "MAIN_NBEST": "4",
        "BETAS": "1 0.5",
        "K": "2",
        "REPLICAS": "2",
        "EMBED_STEPS": "2",
        "VSE_EPOCHS": "2",
        "VALID_IMAGES": "1",
        "METRICS": "bleu,ter",
        "MAIN_JOB": "0",
        "JOBS": "1",
    }
    if protocol == "crossfit":
        env.update(FEATS=os.path.join(data, "test.npy"), FEAT_SPLIT=os.path.join(data, "test.txt"))
    else:
        env.update(IMAGES=os.path.join(data, "all.npy"), IMAGE_NAMES=os.path.join(data, "all.txt"))
    run = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "run_tables.sh")], env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tables = (out / "tables.md").read_text()
    views = ["crossfit", "val"] if protocol == "crossfit" else ["paper"]
    for view in views:
        report = json.loads((out / "rerank" / f"regular.4.{view}" / "report" / "table.json").read_text())
        systems = list(dict.fromkeys(r["system"] for r in report["rows"]))
        expected = ["baseline", "+nmt"] + (["+VSE"] if view != "val" else []) + ["+MLMME beta=1", "+MLMME beta=0.5"]
        if view != "val":  # the s_i ablation, and a second report with ‡ against +nmt
            expected += ["+MLMME beta=1 (s_s only)", "+MLMME beta=0.5 (s_s only)"]
            versus = json.loads((out / "rerank" / f"regular.4.{view}" / "report-vs-nmt" / "table.json").read_text())
            assert versus["meta"]["compare_to"] == "+nmt"
            ablated = json.loads((out / "rerank" / f"regular.4.{view}" / "b1-ss" / "weights.seed1.json").read_text())
            tuned = ablated["crossfit" if view == "crossfit" else "tuning"]["features"]
            assert tuned == ["NMT", "WordPenalty", "NMTNorm", "MLMMEb1ss"]
            assert "(s_s only) | " in tables and "(s_s only) |" not in tables.split("### What the embedding")[0]
        assert systems == expected + ["+all", "oracle"]
        row = next(r for r in report["rows"] if r["system"] == "+MLMME beta=1" and r["metric"] == "bleu")
        assert row["paper"] == {"score": 33.8, "marks": "†‡"} and row["replicas"] == 2
        assert report["meta"]["compare_to"] == ("+nmt" if view == "val" else "+VSE")
    assert "(33.8†‡)" in tables and "Table 3" not in tables  # a 4-best list is neither table
    if protocol == "crossfit":
        folds = [line.split("\t") for line in (out / "folds.tsv").read_text().splitlines()]
        held = {k: sorted(name for name, f in folds if f == str(k)) for k in (0, 1)}
        for k in (0, 1):  # each fold's models held out exactly that fold's images
            for name in ("vse", "mlmme-b1", "mlmme-b0.5"):
                heldout = json.loads((out / "embed" / name / f"fold{k}" / "heldout.json").read_text())
                assert sorted(heldout["images"]) == held[k]
        assert "| vse | 2 |" in tables  # ISR of each fold's models on the fold's own images
        test = read_nbest(str(out / "lists" / "test.regular.4.si.nbest"))
        assert {"VSEsi", "MLMMEb1ss", "MLMMEb1si", "MLMMEb0.5ss", "MLMMEb0.5si", "R2L"} <= set(test.feature_names)
        weights = json.loads((out / "rerank" / "regular.4.crossfit" / "b1" / "weights.seed1.json").read_text())
        assert [f["fold"] for f in weights["folds"]] == [0, 1]
        assert weights["crossfit"]["features"] == ["NMT", "WordPenalty", "NMTNorm", "MLMMEb1ss", "MLMMEb1si"]
        for k in (0, 1):  # the val view: fold k tuned on val with the fold-k model's s_s only
            w = json.loads((out / "rerank" / "regular.4.val" / "b1" / f"weights.seed1.fold{k}.json").read_text())
            assert w["tuning"]["nbest"].endswith(f"val.regular.4.f{k}.nbest")
            assert w["tuning"]["features"] == ["NMT", "WordPenalty", "NMTNorm", "MLMMEb1ss"]
    else:
        assert not (out / "folds.tsv").exists()
        val = read_nbest(str(out / "lists" / "val.regular.4.si.nbest"))  # s_i on val: the paper's tuning
        assert {"VSEsi", "MLMMEb1si", "MLMMEb0.5si"} <= set(val.feature_names)
        log = (out / "embed" / "mlmme-b1.log").read_text()
        assert "images: 40 training images with features (train)" in log
        assert "12 validation images with features (val)" in log
        w = json.loads((out / "rerank" / "regular.4.paper" / "vse" / "weights.seed1.json").read_text())
        assert w["tuning"]["nbest"].endswith("val.regular.4.si.nbest") and "VSEsi" in w["tuning"]["features"]
    timings = (out / "timings.tsv").read_text()
    assert "embed-vse-f" in timings and "report-regular.4." in timings
