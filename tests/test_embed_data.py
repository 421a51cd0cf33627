import gzip
import os

import numpy as np
import pytest

from features.data import (PAD, UNK, Vocabulary, align_images, batch_tokens, load_image_features, read_task2)
from nmt.data import preprocess_lines
from rerank.errors import InputError

SHARED = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "multi30k")


def _task2(root, n=3):
    os.makedirs(os.path.join(root, "task2", "raw"))
    os.makedirs(os.path.join(root, "task2", "image_splits"))
    with open(os.path.join(root, "task2", "image_splits", "val_images.txt"), "w") as out:
        out.write("".join(f"img{i}.jpg\n" for i in range(n)))
    for k in range(1, 6):
        for lang, word in (("en", "A dog"), ("de", "Ein Hund")):
            with gzip.open(os.path.join(root, "task2", "raw", f"val.{k}.{lang}.gz"), "wt") as out:
                out.write("".join(f"{word} {k}-{i}, runs.\n" for i in range(n)))


def test_read_task2_uses_the_shared_text_convention(tmp_path):
    _task2(str(tmp_path))
    split = read_task2(str(tmp_path), "val")
    assert split.images == ["img0.jpg", "img1.jpg", "img2.jpg"]
    assert len(split.sentences["en"]) == 15 and split.image_of.tolist() == [0, 1, 2] * 5
    assert split.sentences["de"][4] == preprocess_lines(["Ein Hund 2-1, runs."], "de")[0]
    assert split.sentences["en"][0] == split.sentences["en"][0].lower()


def test_read_task2_rejects_misaligned_descriptions(tmp_path):
    _task2(str(tmp_path))
    with gzip.open(os.path.join(tmp_path, "task2", "raw", "val.3.de.gz"), "wt") as out:
        out.write("nur eine zeile\n")
    with pytest.raises(InputError, match="val.3.de.gz: 1 descriptions but 3 images"):
        read_task2(str(tmp_path), "val")


def test_vocabulary_and_batches():
    vocab = Vocabulary.build(["a b b", "b c"], min_count=2)
    assert vocab.words == ["<pad>", "<unk>", "b"]
    tokens, lengths = batch_tokens(vocab, ["b a", "b", ""])
    assert lengths.tolist() == [2, 1, 1]
    assert tokens.tolist() == [[2, UNK], [2, PAD], [UNK, PAD]]


def test_image_features_alignment_and_errors(tmp_path):
    split = tmp_path / "split.txt"
    split.write_text("x.jpg\ny.jpg\n")
    np.save(tmp_path / "f.npy", np.arange(6, dtype=np.float16).reshape(2, 3))
    names, matrix = load_image_features(str(tmp_path / "f.npy"), str(split))
    feats, has = align_images(["y.jpg", "z.jpg", "x.jpg"], names, matrix)
    assert has.tolist() == [True, False, True]
    assert feats.tolist() == [[3, 4, 5], [0, 0, 0], [0, 1, 2]]
    with pytest.raises(InputError, match="images have no feature row"):
        align_images(["z.jpg"], names, matrix, require_all=True)
    np.save(tmp_path / "bad.npy", np.zeros((3, 3)))
    with pytest.raises(InputError, match="3 feature rows but 2 images"):
        load_image_features(str(tmp_path / "bad.npy"), str(split))
    np.save(tmp_path / "nan.npy", np.array([[0.0], [np.nan]]))
    with pytest.raises(InputError, match="non-finite"):
        load_image_features(str(tmp_path / "nan.npy"), str(split))


@pytest.mark.skipif(not os.path.isdir(SHARED), reason="no ../shared/data copy")
def test_the_real_resnet_features_align_with_task2_test_images():
    names, matrix = load_image_features(os.path.join(SHARED, "features", "test_2016_flickr-resnet50-avgpool.npy"),
                                        os.path.join(SHARED, "task1", "image_splits", "test_2016_flickr.txt"))
    assert matrix.shape == (1000, 2048)
    with open(os.path.join(SHARED, "task2", "image_splits", "test_2016_images.txt")) as handle:
        task2 = [line.strip() for line in handle]
    feats, has = align_images(task2, names, matrix, require_all=True)
    assert has.all() and np.abs(feats).sum() > 0
