import gzip
import json
import os

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

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
    assert (
        main(
            [
                "embed",
                "train",
                "--data",
                root,
                "--image-features",
                os.path.join(root, "feats.npy"),
                "--image-split",
                os.path.join(root, "feat_split.txt"),
                "--heldout-images",
                "3",
                "--valid-images",
                "2",
                "--epochs",
                "2",
                "--batch-size",
                "16",
                "--image-rows",
                "4",
                "--out",
                model,
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "images: 5 for training, 2 for validation, 3 held out (test_2016)" in out
    held = json.load(open(os.path.join(model, "heldout.json")))
    assert held["images"] == ["test_20167.jpg", "test_20168.jpg", "test_20169.jpg"]
    config = json.load(open(os.path.join(model, "config.json")))
    assert config["config"]["model"]["image_dim"] == 4 and len(config["history"]) >= 1
    # model selection ranked the 2 validation images against their 10 descriptions
    assert config["history"][0]["image_to_sentence/r@10"] == 100.0
    assert config["config"]["lr"] == 2e-3 and config["config"]["model"]["init"] == "default"  # the cpu preset's
    assert (
        main(
            [
                "embed",
                "isr",
                "--model",
                model,
                "--data",
                root,
                "--image-features",
                os.path.join(root, "feats.npy"),
                "--image-split",
                os.path.join(root, "feat_split.txt"),
                "--json",
            ]
        )
        == 0
    )
    isr = json.loads(capsys.readouterr().out)
    assert isr["images"] == 3 and isr["sentences"] == 15 and isr["lang"] == "de"
    assert set(isr["image_to_sentence"]) == {"r@1", "r@5", "r@10", "mrank"}
    (tmp_path / "sts.tsv").write_text(
        "4.5\tA red thing.\tA red thing.\n0.5\tA red thing.\tA blue thing.\n2.0\tA green thing.\tA black thing.\n"
    )
    assert main(["embed", "sts", "--model", model, "--data", str(tmp_path / "sts.tsv"), "--json"]) == 0
    sts = json.loads(capsys.readouterr().out)
    assert sts["n"] == 3 and -1.0 <= sts["pearson"] <= 1.0
    (tmp_path / "bad.tsv").write_text("4.5\tonly one sentence\n")
    assert main(["embed", "sts", "--model", model, "--data", str(tmp_path / "bad.tsv")]) == 1
    assert f"{tmp_path / 'bad.tsv'}:1: expected score<TAB>sentence<TAB>sentence" in capsys.readouterr().err


def _refused(capsys, root, out, message, *extra):
    """``embed train`` with ``extra`` exits 1 with one line ending in ``message``, writing nothing."""
    capsys.readouterr()
    assert _train(root, out, *extra, "--heldout-images", "3") == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith(message) and "\n" not in err
    assert not os.path.exists(out)


def _train(root, out, *extra):
    return main(
        [
            "embed",
            "train",
            "--data",
            root,
            "--image-features",
            os.path.join(root, "feats.npy"),
            "--image-split",
            os.path.join(root, "feat_split.txt"),
            "--epochs",
            "2",
            "--batch-size",
            "16",
            "--image-rows",
            "4",
            "--threads",
            "1",
            "--out",
            out,
            *extra,
        ]
    )


def test_cross_fitted_training_never_uses_the_held_out_fold(tmp_path, capsys):
    import torch

    from rerank.folds import assign_folds, write_folds

    root = str(tmp_path / "m30k")
    _corpus(root, np.random.default_rng(0))
    images = [f"test_2016{i}.jpg" for i in range(10)]
    folds = assign_folds(images, 2, seed=1)
    write_folds(folds, str(tmp_path / "folds.tsv"))
    held = [name for name, f in zip(images, folds.fold) if f == 1]
    args = ["--folds", str(tmp_path / "folds.tsv"), "--fold", "1", "--valid-images", "1", "--beta", "0.5"]
    assert _train(root, str(tmp_path / "a"), *args) == 0
    assert (
        f"images: {10 - len(held) - 1} for training, 1 for validation, fold 1 of 2 held out" in capsys.readouterr().out
    )
    assert json.load(open(tmp_path / "a" / "heldout.json"))["images"] == held
    # other features for the held-out images (and only for them): the same model, bit for bit
    feats = np.load(os.path.join(root, "feats.npy"))
    for i, name in enumerate(images):
        if name in held:
            feats[i] = np.float16(7.0)
    np.save(os.path.join(root, "feats.npy"), feats)
    assert _train(root, str(tmp_path / "b"), *args) == 0
    a = torch.load(tmp_path / "a" / "model.pt", weights_only=True)
    b = torch.load(tmp_path / "b" / "model.pt", weights_only=True)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert _train(root, str(tmp_path / "c"), "--folds", str(tmp_path / "folds.tsv"), "--fold", "2") == 1
    assert "--fold 2: the folds file has folds 0..1" in capsys.readouterr().err


def test_warm_start_keeps_the_start_models_vocabularies_and_weights(tmp_path, capsys):
    import torch

    root = str(tmp_path / "m30k")
    _corpus(root, np.random.default_rng(0))
    assert (
        main(
            [
                "embed",
                "train",
                "--data",
                root,
                "--beta",
                "0",
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--threads",
                "1",
                "--out",
                str(tmp_path / "text"),
            ]
        )
        == 0
    )
    assert (
        _train(
            root,
            str(tmp_path / "ft"),
            "--init-model",
            str(tmp_path / "text"),
            "--beta",
            "0.75",
            "--heldout-images",
            "3",
            "--max-steps",
            "1",
            "--lr",
            "1e-9",
        )
        == 0
    )
    history = json.load(open(tmp_path / "ft" / "config.json"))["history"]
    assert [row["step"] for row in history] == [1]
    for lang in ("en", "de"):
        assert (tmp_path / "ft" / f"vocab.{lang}.json").read_text() == (
            tmp_path / "text" / f"vocab.{lang}.json"
        ).read_text()
    start = torch.load(tmp_path / "text" / "model.pt", weights_only=True)
    tuned = torch.load(tmp_path / "ft" / "model.pt", weights_only=True)
    for key, value in start.items():
        if key.startswith("encoders."):
            assert torch.allclose(tuned[key], value, atol=1e-6), key  # one step of lr 1e-9
    # VSE (one language) from the bilingual start: only its German encoder is taken
    assert (
        _train(
            root,
            str(tmp_path / "vse"),
            "--init-model",
            str(tmp_path / "text"),
            "--langs",
            "de",
            "--beta",
            "1",
            "--heldout-images",
            "3",
            "--max-steps",
            "1",
        )
        == 0
    )
    assert set(torch.load(tmp_path / "vse" / "model.pt", weights_only=True)) == {
        k for k in start if not k.startswith("encoders.en.")
    }


def test_papers_protocol_features_for_every_split(tmp_path, capsys):
    """Image features for train and val (as the official Multi30k features): every training
    image is used, selection ranks the validation images, and no test image is trained on."""
    root = str(tmp_path / "m30k")
    rng = np.random.default_rng(1)
    _corpus(root, rng)
    names, rows = [], []
    for split, n in (("train", 40), ("val", 8)):
        names += [f"{split}{i}.jpg" for i in range(n)]
        rows.append(rng.normal(size=(n, 4)))
    np.save(os.path.join(root, "all.npy"), np.concatenate(rows).astype(np.float32))
    with open(os.path.join(root, "all.txt"), "w") as out:
        out.write("\n".join(names) + "\n")
    assert (
        main(
            [
                "embed",
                "train",
                "--data",
                root,
                "--image-features",
                os.path.join(root, "all.npy"),
                "--image-split",
                os.path.join(root, "all.txt"),
                "--image-task2-split",
                "none",
                "--beta",
                "1",
                "--epochs",
                "1",
                "--batch-size",
                "16",
                "--threads",
                "1",
                "--out",
                str(tmp_path / "m"),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "images: 40 training images with features (train)" in out
    assert "images: 8 validation images with features (val)" in out and "test_2016" not in out
    history = json.load(open(tmp_path / "m" / "config.json"))["history"]
    assert "image_to_sentence/r@1" in history[0]  # selection by image-sentence ranking on val


def test_family_objectives_train_evaluate_and_refuse_contradictions(tmp_path, capsys):
    root = str(tmp_path / "m30k")
    _corpus(root, np.random.default_rng(0))
    model = str(tmp_path / "asym")
    assert _train(root, model, "--objective", "parallel-asym", "--margin", "0.05", "--heldout-images", "3") == 0
    settings = json.load(open(os.path.join(model, "config.json")))["config"]["model"]
    assert (settings["objective"], settings["similarity"], settings["beta"], settings["margin"]) == (
        "parallel-asym",
        "order",
        0.5,
        0.05,
    )
    capsys.readouterr()
    isr_args = ["--data", root, "--image-features", os.path.join(root, "feats.npy")]
    isr_args += ["--image-split", os.path.join(root, "feat_split.txt"), "--json"]
    assert main(["embed", "isr", "--model", model, *isr_args]) == 0
    assert json.loads(capsys.readouterr().out)["images"] == 3
    # an option that contradicts the objective: one line, nothing written
    bad = str(tmp_path / "bad")
    _refused(
        capsys, root, bad, "--objective pivot fixes beta=1.0; drop --beta 0.5", "--objective", "pivot", "--beta", "0.5"
    )
    with pytest.raises(SystemExit):
        _train(root, bad, "--objective", "clip")
    assert "invalid choice: 'clip'" in capsys.readouterr().err and not os.path.exists(bad)
    # MULE trains with its shared branch, adversary and neighbours
    mule = str(tmp_path / "mule")
    assert _train(root, mule, "--objective", "mule", "--heldout-images", "3") == 0
    settings = json.load(open(os.path.join(mule, "config.json")))["config"]["model"]
    assert settings["shared"] and settings["adversary"] == 0.1 and settings["neighbour"] == 1.0
    capsys.readouterr()
    # word vectors of the model, then word similarity on a tiny set (words of the corpus)
    words = str(tmp_path / "words.txt")
    assert main(["embed", "words", "--model", mule, "--out", words]) == 0
    assert capsys.readouterr().out.startswith("14 word vectors (en 7, de 7) -> ")
    vectors = open(words).read().splitlines()
    assert vectors[0].split()[1] == str(settings["embed_dim"]) and any(v.startswith("de_rote ") for v in vectors)
    (tmp_path / "en.tsv").write_text("w1\tw2\tscore\nred\tblue\t3\nred\tthing\t1\nblue\tgreen\t4\nred\tunseen\t2\n")
    (tmp_path / "de.tsv").write_text("w1\tw2\tscore\nrote\tblaue\t5\nrote\tthing\t1\nblaue\tgrüne\t2\nrote\tx\t2\n")
    pairs = ["--pairs", str(tmp_path / "en.tsv"), "--lang", "en", "--pairs2", str(tmp_path / "de.tsv")]
    assert main(["embed", "wordsim", "--vectors", words, *pairs, "--lang2", "de", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {"en", "de", "en-de"}
    assert (result["en"]["covered"], result["en"]["pairs"]) == (3, 4)  # 'unseen' has no vector
    assert (result["en-de"]["covered"], result["en-de"]["pairs"]) == (6, 8)
    # the same through --model (vectors computed, not read) gives the same numbers
    assert main(["embed", "wordsim", "--model", mule, *pairs, "--lang2", "de", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["en-de"]["spearman"] == pytest.approx(result["en-de"]["spearman"], abs=1e-4)
    # bad inputs: one line each
    (tmp_path / "ragged.txt").write_text("en_red 1 2\nen_blue 1\n")
    assert main(["embed", "wordsim", "--vectors", str(tmp_path / "ragged.txt"), *pairs[:4]]) == 1
    assert "ragged.txt:2: 1 values for 'en_blue' but 2 on the first row (ragged rows)" in capsys.readouterr().err
    assert main(["embed", "wordsim", "--vectors", words, *pairs]) == 1
    assert "--pairs2 needs --lang2" in capsys.readouterr().err


def test_size_options_override_the_preset_and_are_refused_beside_a_warm_start(tmp_path, capsys):
    import torch

    root = str(tmp_path / "m30k")
    _corpus(root, np.random.default_rng(0))
    model = str(tmp_path / "bow")
    sizes = ["--encoder", "bow", "--beta", "0", "--word-dim", "12", "--embed-dim", "6"]
    assert _train(root, model, *sizes, "--heldout-images", "3", "--max-steps", "1") == 0
    settings = json.load(open(os.path.join(model, "config.json")))["config"]["model"]
    # the sizes given, the preset's for the one not given (cpu: 512-d GRU state)
    assert (settings["word_dim"], settings["hidden_dim"], settings["embed_dim"]) == (12, 512, 6)
    state = torch.load(os.path.join(model, "model.pt"), weights_only=True)
    assert state["encoders.en.embed.weight"].shape[1] == 12 and state["encoders.de.proj.weight"].shape == (6, 12)
    # a warm start keeps its model's sizes: sizes beside it are one line, nothing written
    bad = str(tmp_path / "bad")
    message = "a warm start keeps its model's sizes; drop --word-dim or --init-model"
    _refused(capsys, root, bad, message, "--init-model", model, "--word-dim", "16")
    with pytest.raises(SystemExit):
        _train(root, bad, "--embed-dim", "0")
    assert "--embed-dim" in capsys.readouterr().err and not os.path.exists(bad)
    with pytest.raises(SystemExit):
        _train(root, bad, "--max-minutes", "-5")
    assert "--max-minutes" in capsys.readouterr().err and not os.path.exists(bad)
    # lazy Adam trains the same model, recorded in its config; the saved model is an ordinary one
    lazy = str(tmp_path / "lazy")
    lazy_args = ("--optimizer", "lazy-adam", "--heldout-images", "3", "--max-steps", "2", "--max-minutes", "30")
    assert _train(root, lazy, *sizes, *lazy_args) == 0
    recorded = json.load(open(os.path.join(lazy, "config.json")))["config"]
    assert (recorded["optimizer"], recorded["max_minutes"]) == ("lazy-adam", 30.0)
    from rerank.embed.lazy import load_model

    loaded, _ = load_model(lazy)
    assert not loaded.encoders["en"].embed.sparse
    assert not torch.equal(
        torch.load(os.path.join(lazy, "model.pt"), weights_only=True)["encoders.en.embed.weight"],
        state["encoders.en.embed.weight"],
    )
