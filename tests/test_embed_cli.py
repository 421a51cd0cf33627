import gzip
import json
import os

import numpy as np
import pytest

if os.environ.get("RERANK_REQUIRE_NMT"):
    import torch  # noqa: F401
else:
    pytest.importorskip("torch")

from rerank.cli import main  # noqa: E402


def _corpus(root, rng):
    os.makedirs(os.path.join(root, "task2", "raw"))
    os.makedirs(os.path.join(root, "task2", "image_splits"))
    colours = ["red", "blue", "green", "black"]
    farben = ["rote", "blaue", "grüne", "schwarze"]
    for split, n in (("train", 40), ("val", 8), ("test_2016", 10)):
        images = [f"{split}{i}.jpg" for i in range(n)]
        concept = rng.integers(0, 4, size=n)
        with open(os.path.join(root, "task2", "image_splits", f"{split}_images.txt"), "w") as out:
            out.write("\n".join(images) + "\n")
        for k in range(1, 6):
            for lang, words in (("en", colours), ("de", farben)):
                with gzip.open(os.path.join(root, "task2", "raw", f"{split}.{k}.{lang}.gz"), "wt") as out:
                    out.write("".join(f"A {words[c]} thing.\n" for c in concept))
        if split == "test_2016":
            feats = np.eye(4)[concept] + 0.01 * rng.normal(size=(n, 4))
            np.save(os.path.join(root, "feats.npy"), feats.astype(np.float16))
            with open(os.path.join(root, "feat_split.txt"), "w") as out:
                out.write("\n".join(images) + "\n")


def test_embed_train_isr_sts(tmp_path, capsys):
    root = str(tmp_path / "m30k")
    _corpus(root, np.random.default_rng(0))
    model = str(tmp_path / "model")
    assert main(["embed", "train", "--data", root, "--image-features", os.path.join(root, "feats.npy"),
                 "--image-split", os.path.join(root, "feat_split.txt"), "--heldout-images", "3", "--valid-images", "2",
                 "--epochs", "2", "--batch-size", "16", "--image-rows", "4", "--out", model]) == 0
    out = capsys.readouterr().out
    assert "images: 5 for training, 2 for validation, 3 held out (test_2016)" in out
    held = json.load(open(os.path.join(model, "heldout.json")))
    assert held["images"] == ["test_20167.jpg", "test_20168.jpg", "test_20169.jpg"]
    config = json.load(open(os.path.join(model, "config.json")))
    assert config["config"]["model"]["image_dim"] == 4 and len(config["history"]) >= 1
    # model selection ranked the 2 validation images against their 10 descriptions
    assert config["history"][0]["image_to_sentence/r@10"] == 100.0
    assert config["config"]["lr"] == 2e-3 and config["config"]["model"]["init"] == "default"  # the cpu preset's
    assert main(["embed", "isr", "--model", model, "--data", root, "--image-features",
                 os.path.join(root, "feats.npy"), "--image-split", os.path.join(root, "feat_split.txt"),
                 "--json"]) == 0
    isr = json.loads(capsys.readouterr().out)
    assert isr["images"] == 3 and isr["sentences"] == 15 and isr["lang"] == "de"
    assert set(isr["image_to_sentence"]) == {"r@1", "r@5", "r@10", "mrank"}
    (tmp_path / "sts.tsv").write_text("4.5\tA red thing.\tA red thing.\n0.5\tA red thing.\tA blue thing.\n"
                                      "2.0\tA green thing.\tA black thing.\n")
    assert main(["embed", "sts", "--model", model, "--data", str(tmp_path / "sts.tsv"), "--json"]) == 0
    sts = json.loads(capsys.readouterr().out)
    assert sts["n"] == 3 and -1.0 <= sts["pearson"] <= 1.0
    (tmp_path / "bad.tsv").write_text("4.5\tonly one sentence\n")
    assert main(["embed", "sts", "--model", model, "--data", str(tmp_path / "bad.tsv")]) == 1
    assert f"{tmp_path / 'bad.tsv'}:1: expected score<TAB>sentence<TAB>sentence" in capsys.readouterr().err
