"""A tiny MLMME training run on a planted signal beats chance on held-out images."""

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

from rerank.embed.evaluation import image_sentence_ranking  # noqa: E402
from rerank.embed.model import MLMMEConfig  # noqa: E402
from rerank.embed.train import EmbedData, EmbedTrainConfig, encode_images, encode_sentences, train_embeddings  # noqa: E402


def planted(n_images, seed, feature_dim=24, with_images=True):
    """Each image has a concept k (of 12); its features are a noisy concept prototype and
    its sentences name the concept among random filler words."""
    rng = np.random.default_rng(seed)
    proto = np.random.default_rng(99).normal(size=(12, feature_dim))
    concept = rng.integers(0, 12, size=n_images)
    feats = (proto[concept] + 0.3 * rng.normal(size=(n_images, feature_dim))).astype(np.float32)
    en, de, image_of = [], [], []
    for _rep in range(2):
        for i, k in enumerate(concept):
            filler = " ".join(f"f{x}" for x in rng.integers(0, 30, size=3))
            en.append(f"{filler} c{k} {filler}")
            de.append(f"{filler} k{k}")
            image_of.append(i)
    return EmbedData(
        {"en": en, "de": de},
        np.array(image_of),
        feats if with_images else None,
        np.ones(n_images, dtype=bool) if with_images else None,
    ), concept


def test_tiny_training_beats_chance_on_held_out_images():
    train, _ = planted(300, seed=1)
    valid, _ = planted(60, seed=2)
    test, _ = planted(60, seed=3)
    model_config = MLMMEConfig(beta=0.5, word_dim=16, hidden_dim=32, embed_dim=16, dropout=0.0)
    config = EmbedTrainConfig(model=model_config, epochs=8, batch_size=32, lr=5e-3, min_count=1, seed=1)
    model, vocabs, history = train_embeddings(train, valid, config)
    assert len(history) >= 1 and all("rsum" in h for h in history)
    images = encode_images(model, test.image_features)
    sents = encode_sentences(model, vocabs["en"], "en", test.sentences["en"])
    result = image_sentence_ranking(images, sents, test.image_of)
    # 60 images, 12 concepts: the best possible r@5 for retrieval is 100, chance is 5/60 = 8.3
    assert result["sentence_to_image"]["r@5"] > 40
    assert result["image_to_sentence"]["r@5"] > 40
    # the two languages share the space: the German sentence retrieves its English twin's concept
    de = encode_sentences(model, vocabs["de"], "de", test.sentences["de"])
    assert float(np.mean(np.sum(de * sents, axis=1))) > 0.5


def test_encode_sentences_encodes_each_distinct_sentence_once_in_input_order():
    train, _ = planted(40, seed=4)
    config = EmbedTrainConfig(
        model=MLMMEConfig(word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.0), epochs=1, min_count=1
    )
    model, vocabs, _ = train_embeddings(train, train, config)
    sents = ["f1 c3 f1", "f2 c1", "f1 c3 f1", "unknown words here"]
    out = encode_sentences(model, vocabs["en"], "en", sents, batch_size=2)
    assert out.shape == (4, 8) and np.allclose(out[0], out[2]) and not np.allclose(out[0], out[1])
    single = encode_sentences(model, vocabs["en"], "en", [sents[1]])
    assert np.allclose(single[0], out[1], atol=1e-6)


def test_epoch_batches_top_up_image_rows_and_cover_text_once():
    from rerank.embed.train import epoch_batches

    has = np.zeros(1000, dtype=bool)
    has[[3, 500, 999, 10, 20]] = True
    batches = epoch_batches(has, 32, 8, np.random.default_rng(0))
    text = np.concatenate([b[~has[b]] for b in batches])
    assert sorted(text.tolist()) == np.flatnonzero(~has).tolist()  # every text-only example exactly once
    assert all(has[b].sum() == 8 for b in batches[:-1])  # 24 text + 8 image rows per full batch
    assert len(batches) == -(-995 // 24)
    # enough images (≥ 8 of 32 per batch on average): plain uniform batches over everything
    many = np.arange(1000) % 3 == 0
    plain = epoch_batches(many, 32, 8, np.random.default_rng(0))
    assert sorted(np.concatenate(plain).tolist()) == list(range(1000))
    # image_rows 0: uniform as well
    assert sorted(np.concatenate(epoch_batches(has, 32, 0, np.random.default_rng(0))).tolist()) == list(range(1000))


def test_random_contrastive_sampling_trains_too():
    train, _ = planted(300, seed=1)
    valid, _ = planted(60, seed=2)
    test, _ = planted(60, seed=3)
    model_config = MLMMEConfig(beta=0.5, word_dim=16, hidden_dim=32, embed_dim=16, dropout=0.0)
    config = EmbedTrainConfig(
        model=model_config,
        epochs=8,
        batch_size=32,
        lr=5e-3,
        min_count=1,
        seed=1,
        contrastive="random",
        validate_every=5,
        patience=100,
    )
    model, vocabs, history = train_embeddings(train, valid, config)
    assert any(h["step"] == 5 for h in history)  # validated mid-epoch
    result = image_sentence_ranking(
        encode_images(model, test.image_features),
        encode_sentences(model, vocabs["en"], "en", test.sentences["en"]),
        test.image_of,
    )
    assert result["sentence_to_image"]["r@5"] > 40
    with pytest.raises(ValueError, match="contrastive"):
        train_embeddings(train, valid, EmbedTrainConfig(model=model_config, epochs=1, contrastive="hard"))


def test_a_killed_training_resumes_after_its_last_epoch_and_gives_the_same_model(tmp_path, monkeypatch):
    import os

    import torch

    import rerank.embed.train as train_module
    from rerank.errors import InputError

    train, _ = planted(80, seed=5)
    valid, _ = planted(20, seed=6)

    def config(**kw):
        mc = MLMMEConfig(beta=0.5, word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.5)
        return EmbedTrainConfig(
            model=mc, **{"epochs": 3, "batch_size": 16, "lr": 5e-3, "min_count": 1, "seed": 3, **kw}
        )

    whole = str(tmp_path / "whole")
    _, _, history = train_embeddings(train, valid, config(), out_dir=whole)
    assert not os.path.exists(os.path.join(whole, "checkpoint.pt"))  # finished: nothing to resume

    def kill_at_epoch(n):  # the run dies when epoch n starts drawing its batches
        real, calls = train_module.epoch_batches, []

        def dying(*args):
            calls.append(1)
            if len(calls) == n:
                raise KeyboardInterrupt
            return real(*args)

        monkeypatch.setattr(train_module, "epoch_batches", dying)

    killed = str(tmp_path / "killed")
    kill_at_epoch(3)
    with pytest.raises(KeyboardInterrupt):
        train_embeddings(train, valid, config(), out_dir=killed)
    monkeypatch.undo()
    assert os.listdir(killed) == ["checkpoint.pt"]  # after epoch 2: no model yet, only the state
    assert torch.load(os.path.join(killed, "checkpoint.pt"), weights_only=False)["epoch"] == 2
    # another thread count is no other setting; the dropout, batch order and Adam state carry on
    # (nor is a time limit: a resumed run is often given the time that is left)
    _, _, resumed = train_embeddings(train, valid, config(threads=1, max_minutes=600.0), out_dir=killed)
    assert resumed == history
    a = torch.load(os.path.join(whole, "model.pt"), weights_only=True)
    b = torch.load(os.path.join(killed, "model.pt"), weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert not os.path.exists(os.path.join(killed, "checkpoint.pt"))
    # a checkpoint of other settings is refused, and kept
    other = str(tmp_path / "other")
    kill_at_epoch(2)
    with pytest.raises(KeyboardInterrupt):
        train_embeddings(train, valid, config(), out_dir=other)
    monkeypatch.undo()
    with pytest.raises(InputError, match="holds an unfinished training of other settings") as error:
        train_embeddings(train, valid, config(lr=1e-3), out_dir=other)
    assert error.value.path == os.path.join(other, "checkpoint.pt")
    assert os.listdir(other) == ["checkpoint.pt"]
    # a file that is no checkpoint of ours: one line naming it
    with open(os.path.join(other, "checkpoint.pt"), "wb") as out:
        out.write(b"not a checkpoint")
    with pytest.raises(InputError, match="is not a training checkpoint") as error:
        train_embeddings(train, valid, config(), out_dir=other)
    assert error.value.path == os.path.join(other, "checkpoint.pt") and "\n" not in str(error.value)


def test_a_time_limit_stops_the_training_validates_there_and_writes_the_model(tmp_path, monkeypatch):
    import os

    import rerank.embed.train as train_module

    train, _ = planted(80, seed=5)  # 160 rows: 10 batches of 16 per epoch
    valid, _ = planted(20, seed=6)
    clock = iter(range(0, 10_000, 10))  # a clock that moves 10 s each time it is read
    monkeypatch.setattr(train_module.time, "monotonic", lambda: next(clock))
    mc = MLMMEConfig(beta=0.5, word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.0)
    config = EmbedTrainConfig(model=mc, epochs=3, batch_size=16, lr=5e-3, min_count=1, seed=3, max_minutes=0.5)
    out = str(tmp_path / "m")
    _, _, history = train_embeddings(train, valid, config, out_dir=out)
    # read at the start (0 s) and after each batch (10, 20, 30 s): 30 s = 0.5 min is reached after batch 3
    assert [h["step"] for h in history] == [3] and history[0]["epoch"] == 1
    assert sorted(os.listdir(out)) == ["config.json", "model.pt", "vocab.de.json", "vocab.en.json"]
