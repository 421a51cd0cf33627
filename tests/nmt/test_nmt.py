"""NMT side: generate-output parsing (exact) and a tiny end-to-end smoke run on fairseq."""

import gzip
import json
import math
import os
import random

import numpy as np
import pytest

from rerank.errors import InputError
from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

from rerank.nmt.generate import GenerateConfig, generate_nbest, model_direction, parse_generate_output, reading_order  # noqa: E402

GENERATE_OUTPUT = """S-1\tsecond source
H-1\t-0.5\tzweite quelle
P-1\t-0.2500 -0.5000 -0.7500
H-1\t-0.9\tzweite
P-1\t-1.0000 -1.0000
S-0\tfirst source
H-0\t-0.1\tein mann
P-0\t-0.1000 -0.2000 -0.3000
"""


def test_parse_generate_output_sums_base2_scores_in_natural_log(tmp_path):
    path = tmp_path / "gen.txt"
    path.write_text(GENERATE_OUTPUT)
    nb = parse_generate_output(str(path), num_segments=2, nbest=2)
    assert nb.offsets.tolist() == [0, 1, 3]  # original order, not fairseq's
    assert nb.hypotheses == ["ein mann", "zweite quelle", "zweite"]
    assert nb.feature_names == ["NMT", "WordPenalty", "NMTNorm"]
    ln2 = math.log(2)
    assert nb.features[:, 0] == pytest.approx([-0.6 * ln2, -1.5 * ln2, -2.0 * ln2])
    assert nb.features[:, 1].tolist() == [-2, -2, -1]
    assert nb.features[:, 2] == pytest.approx([-0.1 * ln2, -0.5 * ln2, -0.9 * ln2])
    with pytest.raises(InputError, match="no hypotheses for 1 segment"):
        parse_generate_output(str(path), num_segments=3, nbest=2)


def test_a_right_to_left_output_is_put_back_in_reading_order(tmp_path):
    # [das, haus@@, es, .] reversed by the model; a mark left on the last word is dropped
    assert reading_order(". es haus@@ das") == "das hauses ."
    assert reading_order("haus@@  ein") == "ein haus"
    assert reading_order("a") == "a" and reading_order("") == ""
    path = tmp_path / "gen.txt"
    path.write_text("H-0\t-0.5\t. es haus@@ das\nP-0\t-0.5 -0.5 -0.5 -0.5 -0.5\n")
    nb = parse_generate_output(str(path), num_segments=1, nbest=1, direction="r2l")
    assert nb.hypotheses == ["das hauses ."] and nb.feature_names == ["R2L", "WordPenalty", "R2LNorm"]
    assert nb.features[0].tolist() == pytest.approx([-2.5 * math.log(2), -3, -0.5 * math.log(2)])


def test_the_decoding_direction_is_the_models(tmp_path):
    ckpt = str(tmp_path / "checkpoint_best.pt")
    assert model_direction(ckpt) == "forward"  # no train.json: forward
    assert model_direction(ckpt, "r2l") == "r2l"
    (tmp_path / "train.json").write_text('{"config": {"direction": "r2l"}}')
    assert model_direction(ckpt) == "r2l"
    with pytest.raises(InputError, match="train.json: direction forward given, but the model was trained r2l"):
        model_direction(ckpt, "forward")
    (tmp_path / "train.json").write_text('{"config": {"direction": "backward"}}')
    with pytest.raises(InputError, match="trained backward: only forward and r2l models decode n-best lists"):
        model_direction(ckpt)
    with pytest.raises(InputError, match="decoded forward or r2l"):
        model_direction(ckpt, "sideways")


EN_DE = {
    "a": "ein",
    "man": "mann",
    "woman": "frau",
    "dog": "hund",
    "runs": "rennt",
    "sits": "sitzt",
    "on": "auf",
    "the": "der",
    "grass": "wiese",
    "red": "rote",
    "ball": "ball",
    "with": "mit",
    "plays": "spielt",
    "child": "kind",
    "big": "große",
    "small": "kleine",
}


def _write_corpus(root, n_train=300, n_val=16, n_test=10, seed=0):
    rng = random.Random(seed)
    raw = os.path.join(root, "task1", "raw")
    os.makedirs(raw)
    words = list(EN_DE)
    for split, n in (("train", n_train), ("val", n_val), ("test_2016_flickr", n_test)):
        en, de = [], []
        for _ in range(n):
            sent = [rng.choice(words) for _ in range(rng.randint(3, 8))]
            en.append(" ".join(sent).capitalize() + ".")
            de.append(" ".join(EN_DE[w] for w in sent).capitalize() + ".")
        for lang, lines in (("en", en), ("de", de)):
            with gzip.open(os.path.join(raw, f"{split}.{lang}.gz"), "wt", encoding="utf-8") as handle:
                handle.write("\n".join(lines) + "\n")


def test_tiny_pipeline_prepare_train_nbest(tmp_path, capsys):
    from rerank.nbest import read_nbest
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.train import TrainConfig, train
    from rerank.textio import read_lines

    _write_corpus(str(tmp_path / "m30k"))
    bin_dir = prepare(str(tmp_path / "m30k"), str(tmp_path / "data"), PrepareConfig(bpe_merges=40), workers=1)
    tok = read_lines(str(tmp_path / "data" / "tok" / "val.de"))
    assert tok[0] == tok[0].lower() and tok[0].endswith(" .")  # lowercased, Moses-tokenised
    ckpt = train(
        bin_dir,
        str(tmp_path / "model"),
        TrainConfig(max_update=4, max_epoch=1, max_tokens=1000, dropout=0.0, valid_beam=2),
    )
    assert os.path.exists(ckpt)
    nb = generate_nbest(
        bin_dir,
        ckpt,
        "test",
        str(tmp_path / "test.nbest"),
        str(tmp_path / "test.1best"),
        GenerateConfig(nbest=3, batch_size=4),
    )
    again = read_nbest(str(tmp_path / "test.nbest"), num_segments=10)
    assert again.num_segments == 10 and np.all(np.diff(again.offsets) == 3)
    assert again.feature_names == ["NMT", "WordPenalty", "NMTNorm"]
    assert np.all(again.features[:, 0] < 0)
    # the beam's own order is by the normalised score: first hypothesis has the highest NMTNorm
    assert np.all(again.features[again.offsets[:-1], 2] >= again.features[again.offsets[:-1] + 1, 2] - 1e-3)
    assert again.features[:, 1].tolist() == [-float(len(h.split())) for h in again.hypotheses]
    assert not any("@@" in h for h in again.hypotheses)
    assert read_lines(str(tmp_path / "test.1best")) == [again.hypotheses[i] for i in again.offsets[:-1]]
    assert np.array_equal(again.features, nb.features)
    assert os.path.exists(str(tmp_path / "test.nbest.json"))
    # any test set: the raw test file, preprocessed by the model's own convention, decodes
    # to the same lists as the binarised test subset
    from rerank.nmt.generate import generate_nbest_from_text

    raw = tmp_path / "raw.en"
    with gzip.open(str(tmp_path / "m30k" / "task1" / "raw" / "test_2016_flickr.en.gz"), "rt") as handle:
        raw.write_text(handle.read())
    from_text = generate_nbest_from_text(
        bin_dir,
        ckpt,
        str(raw),
        str(tmp_path / "raw.nbest"),
        str(tmp_path / "raw.1best"),
        str(tmp_path / "raw.tok.en"),
        GenerateConfig(nbest=3, batch_size=4),
    )
    assert from_text.hypotheses == nb.hypotheses
    assert np.allclose(from_text.features, nb.features, atol=1e-6)
    assert read_lines(str(tmp_path / "raw.tok.en")) == read_lines(
        str(tmp_path / "data" / "tok" / "test_2016_flickr.en")
    )
    # shards (issues 44, 64): 3 shards of the subset's batches, and 2 of the raw text's,
    # merged in any order give the unsharded lists byte for byte (each sentence decoded in
    # the batch one process decodes it in; the same torch threads in every process)
    from rerank.cli import main
    from rerank.shards import merge_shards

    common = ["nmt", "nbest", "--data-bin", bin_dir, "--checkpoint", ckpt, "--nbest", "3", "--batch-size", "4"]
    for k in range(3):
        out = ["--out-nbest", str(tmp_path / f"s{k}.nbest"), "--out-1best", str(tmp_path / f"s{k}.1best")]
        assert main(common + ["--subset", "test", "--num-shards", "3", "--shard-id", str(k)] + out) == 0
    for k in range(2):
        out = ["--out-nbest", str(tmp_path / f"r{k}.nbest"), "--out-1best", str(tmp_path / f"r{k}.1best")]
        out += ["--out-source", str(tmp_path / f"r{k}.tok.en")]
        assert main(common + ["--input", str(raw), "--num-shards", "2", "--shard-id", str(k)] + out) == 0
    # 10 sentences make 3 batches of 4, 4 and 2 (fairseq's length order): one each
    members = [json.loads((tmp_path / f"s{k}.nbest.json").read_text())["shard"]["members"] for k in range(3)]
    assert sorted(map(len, members)) == [2, 4, 4] and sorted(sum(members, [])) == list(range(10))
    assert read_nbest(str(tmp_path / "s1.nbest")).num_segments == len(members[1])
    assert read_lines(str(tmp_path / "s1.1best")) == [read_lines(str(tmp_path / "test.1best"))[k] for k in members[1]]
    for parts, name, whole in (("s2 s0 s1", "subset", "test"), ("r1 r0", "text", "raw")):
        for kind in ("nbest", "1best"):
            merge_shards([str(tmp_path / f"{p}.{kind}") for p in parts.split()], str(tmp_path / f"{name}.{kind}"))
            assert (tmp_path / f"{name}.{kind}").read_bytes() == (tmp_path / f"{whole}.{kind}").read_bytes(), name
    merge_shards([str(tmp_path / "r0.tok.en"), str(tmp_path / "r1.tok.en")], str(tmp_path / "merged.tok.en"))
    assert (tmp_path / "merged.tok.en").read_text() == (tmp_path / "raw.tok.en").read_text()
    # more shards than batches (the workflow plans shards before it knows a subset's size): the
    # shard dealt no batch writes empty outputs, with a line saying so, and no decoding
    capsys.readouterr()
    x = ["--out-nbest", str(tmp_path / "x.nbest"), "--out-1best", str(tmp_path / "x.1best")]
    assert main(common + ["--subset", "test", "--num-shards", "4", "--shard-id", "3"] + x) == 0
    err = capsys.readouterr().err
    assert "shard 3 of 4 holds no batch (10 segments make 3 batch(es) of --batch-size 4): its outputs are empty" in err
    assert (tmp_path / "x.nbest").read_text() == "" and (tmp_path / "x.1best").read_text() == ""
    assert json.loads((tmp_path / "x.nbest.json").read_text())["shard"]["members"] == []
    with pytest.raises(InputError, match="shard 1 of 3 is missing"):
        merge_shards([str(tmp_path / "s0.nbest"), str(tmp_path / "s2.nbest")], str(tmp_path / "x.nbest"))
    with pytest.raises(InputError, match="another input than"):
        merge_shards([str(tmp_path / "r0.1best"), str(tmp_path / "s1.1best")], str(tmp_path / "x.1best"))

    raw.write_text("a man .\n\nthe dog .\n")
    with pytest.raises(InputError, match="raw.en:2: empty source line"):
        generate_nbest_from_text(bin_dir, ckpt, str(raw), str(tmp_path / "x.nbest"), str(tmp_path / "x.1best"))


def test_a_resumed_training_equals_the_uninterrupted_one(tmp_path):
    # fairseq 0.12 alone builds a resumed process's batches under seed + (its first epoch):
    # other batches, another model. rerank/nmt/fairseq_user_dir builds them as in epoch 1, so 2
    # epochs + a resumed 3rd give the weights of 3 epochs in one go, bit for bit.
    import torch

    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.train import TrainConfig, train

    _write_corpus(str(tmp_path / "m30k"))
    bin_dir = prepare(str(tmp_path / "m30k"), str(tmp_path / "data"), PrepareConfig(bpe_merges=40), workers=1)
    config = dict(arch="transformer-tiny", max_tokens=200, warmup=10, valid_beam=2, average=1)
    train(bin_dir, str(tmp_path / "straight"), TrainConfig(max_epoch=3, **config))
    train(bin_dir, str(tmp_path / "resumed"), TrainConfig(max_epoch=2, **config))
    train(bin_dir, str(tmp_path / "resumed"), TrainConfig(max_epoch=3, **config))

    straight, resumed = (
        torch.load(str(tmp_path / run / "checkpoint_last.pt"), map_location="cpu", weights_only=False)
        for run in ("straight", "resumed")
    )
    assert sorted(straight["model"]) == sorted(resumed["model"])
    assert all(torch.equal(straight["model"][k], resumed["model"][k]) for k in straight["model"])
    assert resumed["extra_state"]["train_iterator"] == straight["extra_state"]["train_iterator"]
    record = json.loads((tmp_path / "resumed" / "train.json").read_text())
    assert record["forward_pass"] == "float32" and record["config"]["max_epoch"] == 3


def test_prepare_takes_any_direction_and_checks_the_languages_first(tmp_path):
    from rerank.errors import InputError
    from rerank.nmt.data import PrepareConfig, prepare, prepared_languages

    _write_corpus(str(tmp_path / "m30k"))
    data = tmp_path / "data"
    for config, message in (
        (PrepareConfig(src="fr", tgt="en"), "missing Multi30k file of language fr"),
        (PrepareConfig(src="EN", tgt="de"), "source language 'EN': expected a language code"),
        (PrepareConfig(src="de", tgt="de"), "source and target language are both de"),
    ):
        with pytest.raises(InputError, match=message):
            prepare(str(tmp_path / "m30k"), str(data), config, workers=1)
        assert not data.exists()  # refused before any work
    bin_dir = prepare(str(tmp_path / "m30k"), str(data), PrepareConfig(src="de", tgt="en", bpe_merges=40), workers=1)
    assert prepared_languages(bin_dir) == prepared_languages(str(data)) == ("de", "en")
    assert prepared_languages(str(tmp_path)) == ("en", "de")  # data without a prepare.json: the paper's
    english = set(EN_DE) | {"."}
    assert set((data / "tok" / "test_2016_flickr.en").read_text().split()) <= english
    assert (data / "bin" / "dict.de.txt").exists() and (data / "bin" / "test.de-en.de.idx").exists()


def test_prepare_keeps_the_case_when_told_and_records_it(tmp_path):
    """rerank nmt prepare --cased: the tokenised text keeps its case (Moses' rules unchanged),
    prepare.json records lowercase false, and nbest/translate read it back (a record without
    it: lowercased, the paper's protocol)."""
    from rerank.cli import main
    from rerank.nmt.data import prepared_lowercase, preprocess_lines

    # Moses' normaliser moves the full stop inside the quotes (English) and the tokeniser splits 's
    assert preprocess_lines(["A Man's \u201cDog\u201d."], "en") == ['a man \'s " dog . "']
    assert preprocess_lines(["A Man's \u201cDog\u201d."], "en", lowercase=False) == ['A Man \'s " Dog . "']
    _write_corpus(str(tmp_path / "m30k"))
    raw = tmp_path / "m30k" / "task1" / "raw"
    own = []
    for flag, split in (("--train", "train"), ("--valid", "val"), ("--test", "test_2016_flickr")):
        pair = []
        for lang in ("en", "de"):
            with gzip.open(raw / f"{split}.{lang}.gz", "rt", encoding="utf-8") as handle:
                lines = [line[:1].upper() + line[1:] for line in handle]
            (tmp_path / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
            pair.append(str(tmp_path / f"{split}.{lang}"))
        own += [flag, ",".join(pair)]
    base = ["nmt", "prepare", *own, "--bpe-merges", "40", "--workers", "1"]
    assert main([*base, "--cased", "--out", str(tmp_path / "cased")]) == 0
    assert main([*base, "--out", str(tmp_path / "lower")]) == 0
    first = (tmp_path / "cased" / "tok" / "val.de").read_text(encoding="utf-8").splitlines()[0]
    assert first[0].isupper() and first.lower() == (tmp_path / "lower" / "tok" / "val.de").read_text().splitlines()[0]
    assert prepared_lowercase(str(tmp_path / "cased" / "bin")) is False
    assert prepared_lowercase(str(tmp_path / "lower")) is True and prepared_lowercase(str(tmp_path)) is True
    meta = tmp_path / "cased" / "prepare.json"
    meta.write_text(meta.read_text().replace('"lowercase": false', '"lowercase": "no"'))
    with pytest.raises(InputError, match="config.lowercase is 'no', not true or false"):
        prepared_lowercase(str(tmp_path / "cased"))


def test_prepare_takes_a_corpus_of_ones_own(tmp_path, capsys):
    """--train/--valid/--test: any two line-aligned files per split (plain or .gz), checked
    before any work; the result equals preparing the same text laid out as Multi30k."""
    from rerank.cli import main
    from rerank.nmt.data import PrepareConfig, prepare

    _write_corpus(str(tmp_path / "m30k"))
    raw = tmp_path / "m30k" / "task1" / "raw"
    pairs = {
        "--train": f"{raw / 'train.de.gz'},{raw / 'train.en.gz'}",
        "--valid": f"{raw / 'val.de.gz'},{raw / 'val.en.gz'}",
        "--test": f"{raw / 'test_2016_flickr.de.gz'},{raw / 'test_2016_flickr.en.gz'}",
    }
    own = [x for flag, pair in pairs.items() for x in (flag, pair)]
    base = ["nmt", "prepare", "--src", "de", "--tgt", "en", "--bpe-merges", "40", "--workers", "1"]
    (tmp_path / "short.en").write_text("one line\n")
    bad = {
        "--test": f"{raw / 'test_2016_flickr.de.gz'},{tmp_path / 'short.en'}",
    }
    assert main([*base, *own[:4], "--test", bad["--test"], "--out", str(tmp_path / "x")]) == 1
    assert "10 lines here but 1 in" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main([*base, *own[:4], "--out", str(tmp_path / "x")]) == 1
    assert "test_2016_flickr is missing" in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main([*base, *own, "--data", str(tmp_path / "m30k"), "--out", str(tmp_path / "x")]) == 1
    assert "not both" in capsys.readouterr().err
    assert main([*base, *own, "--out", str(tmp_path / "own")]) == 0
    prepare(
        str(tmp_path / "m30k"), str(tmp_path / "m30k-prepared"), PrepareConfig(src="de", tgt="en", bpe_merges=40), 1
    )
    for name in ("tok/train.de", "tok/val.en", "tok/test_2016_flickr.de", "bpe.codes", "bpe/val.de"):
        assert (tmp_path / "own" / name).read_text() == (tmp_path / "m30k-prepared" / name).read_text(), name
