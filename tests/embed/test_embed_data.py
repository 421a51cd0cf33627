import gzip
import os

import numpy as np
import pytest

from rerank.embed.data import PAD, UNK, Vocabulary, align_images, batch_tokens, load_image_features, read_task2
from rerank.errors import InputError
from rerank.nmt.data import preprocess_lines
from tests.conftest import ROOT

SHARED = os.path.join(ROOT, "..", "shared", "data", "multi30k")


def _task2(root, n=3):
    os.makedirs(os.path.join(root, "task2", "raw"))
    os.makedirs(os.path.join(root, "task2", "image_splits"))
    with open(os.path.join(root, "task2", "image_splits", "val_images.txt"), "w") as out:
        out.write("".join(f"img{i}.jpg\n" for i in range(n)))
    for k in range(1, 6):
        for lang, word in (("en", "A dog"), ("de", "Ein Hund")):
            with gzip.open(os.path.join(root, "task2", "raw", f"val.{k}.{lang}.gz"), "wt") as out:
                out.write("".join(f"{word} {k}-{i}, runs.\n" for i in range(n)))


@pytest.mark.nmt
def test_read_task2_uses_the_shared_text_convention(tmp_path):
    _task2(str(tmp_path))
    split = read_task2(str(tmp_path), "val")
    assert split.images == ["img0.jpg", "img1.jpg", "img2.jpg"]
    assert len(split.sentences["en"]) == 15 and split.image_of.tolist() == [0, 1, 2] * 5
    assert split.sentences["de"][4] == preprocess_lines(["Ein Hund 2-1, runs."], "de")[0]
    assert split.sentences["en"][0] == split.sentences["en"][0].lower()


@pytest.mark.nmt
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
    names, matrix = load_image_features(
        os.path.join(SHARED, "features", "test_2016_flickr-resnet50-avgpool.npy"),
        os.path.join(SHARED, "task1", "image_splits", "test_2016_flickr.txt"),
    )
    assert matrix.shape == (1000, 2048)
    with open(os.path.join(SHARED, "task2", "image_splits", "test_2016_images.txt")) as handle:
        task2 = [line.strip() for line in handle]
    feats, has = align_images(task2, names, matrix, require_all=True)
    assert has.all() and np.abs(feats).sum() > 0


@pytest.mark.nmt
def test_task1_pairs_merge_with_task2_images(tmp_path):
    import gzip

    from rerank.embed.data import merge_splits, read_task1, read_task2

    root = tmp_path
    (root / "task1" / "raw").mkdir(parents=True)
    (root / "task1" / "image_splits").mkdir(parents=True)
    (root / "task2" / "raw").mkdir(parents=True)
    (root / "task2" / "image_splits").mkdir(parents=True)
    images = ["a.jpg", "b.jpg"]
    (root / "task1" / "image_splits" / "train.txt").write_text("\n".join(images) + "\n")
    (root / "task2" / "image_splits" / "train_images.txt").write_text("\n".join(images) + "\n")
    for lang, lines in (("en", ["A dog.", "Two cats."]), ("de", ["Ein Hund.", "Zwei Katzen."])):
        with gzip.open(root / "task1" / "raw" / f"train.{lang}.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
        for k in range(1, 6):
            with gzip.open(root / "task2" / "raw" / f"train.{k}.{lang}.gz", "wt") as f:
                f.write("\n".join(f"{x} {k}" for x in lines) + "\n")
    t1 = read_task1(str(root), "train")
    assert t1.sentences["en"] == ["a dog .", "two cats ."] and t1.image_of.tolist() == [0, 1]
    merged = merge_splits(read_task2(str(root), "train"), t1)
    assert len(merged.sentences["de"]) == 12 and merged.image_of.tolist()[-2:] == [0, 1]
    assert merged.sentences["de"][-1] == "zwei katzen ."
    other = read_task1(str(root), "train")
    other.images = ["x.jpg", "y.jpg"]
    with pytest.raises(InputError, match="different images"):
        merge_splits(t1, other)
    with gzip.open(root / "task1" / "raw" / "train.de.gz", "wt") as f:
        f.write("Nur eine Zeile.\n")
    with pytest.raises(InputError, match=r"train.de.gz: 1 sentences but 2 images"):
        read_task1(str(root), "train")


SHARED = os.path.join(ROOT, "..", "shared", "data", "multi30k")


@pytest.mark.skipif(not os.path.isdir(os.path.join(SHARED, "task2", "raw")), reason="no local Multi30k copy")
@pytest.mark.nmt
def test_download_fetches_every_file_the_pipeline_reads(tmp_path, monkeypatch):
    # the public repository's layout, served from the local copy through file:// URLs
    import rerank.nmt.data as nd

    monkeypatch.setattr(nd, "MULTI30K_BASE", "file://" + os.path.abspath(SHARED) + "/")
    monkeypatch.chdir(ROOT)  # ../shared/data/multi30k is there: the library takes paths, it assumes none
    cache = tmp_path / "cache"
    assert nd.resolve_data_dir(None, str(cache)) == str(cache)
    assert sorted(p.name for p in (cache / "task1" / "raw").iterdir())[:2] == [
        "test_2016_flickr.de.gz",
        "test_2016_flickr.en.gz",
    ]
    assert not (cache / "task2").exists()  # task 2 only when asked for
    nd.resolve_data_dir(None, str(cache), task2=True)
    assert len(list((cache / "task2" / "raw").iterdir())) == 30
    split = read_task2(str(cache), "val", ["de"])
    assert len(split.images) == 1014 and len(split.sentences["de"]) == 5 * 1014
    (tmp_path / "only1" / "task1" / "raw").mkdir(parents=True)
    assert nd.resolve_data_dir(str(tmp_path / "only1"), str(cache)) == str(tmp_path / "only1")
    with pytest.raises(InputError, match="no task2/raw directory"):
        nd.resolve_data_dir(str(tmp_path / "only1"), str(cache), task2=True)


def test_resolve_data_dir_task2_only_copy(tmp_path):
    import rerank.nmt.data as nd

    (tmp_path / "t2" / "task2" / "raw").mkdir(parents=True)
    (tmp_path / "t2" / "task2" / "image_splits").mkdir(parents=True)
    given = str(tmp_path / "t2")
    # MLMME training without --task1 needs only task 2 ...
    assert nd.resolve_data_dir(given, str(tmp_path / "cache"), task2=True, task1=False) == given
    # ... but the NMT pipeline and --task1 need task 1's raw files
    with pytest.raises(InputError, match="no task1/raw directory"):
        nd.resolve_data_dir(given, str(tmp_path / "cache"), task2=True)
