import json

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

from rerank.embed.model import MLMMEConfig  # noqa: E402
from rerank.embed.train import EmbedTrainConfig, encode_images, encode_sentences, train_embeddings  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.scorer import make_scorer  # noqa: E402
from rerank.nbest import NBestList  # noqa: E402
from tests.embed.test_embed_train import planted  # noqa: E402


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("mlmme"))
    train, _ = planted(120, seed=1)
    config = EmbedTrainConfig(
        model=MLMMEConfig(word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.0), epochs=2, min_count=1, lr=5e-3
    )
    train_embeddings(train, train, config, out_dir=out)
    return out


def test_order_embedding_scorer_gives_the_order_violation_as_s_i(tmp_path):
    # a PARALLEL-ASYM model: s_i = -||max(0, v - d)||^2 (hypothesis v above image d), s_s cosine
    train, _ = planted(60, seed=1)
    mc = MLMMEConfig(word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.0, beta=0.5, similarity="order")
    train_embeddings(train, train, EmbedTrainConfig(model=mc, epochs=1, min_count=1), out_dir=str(tmp_path))
    scorer = make_scorer(f"parallel:{tmp_path}")
    nbest = NBestList(np.array([0, 2, 3]), ["k1 f2", "k3", "k2"], np.zeros((3, 1)), ["NMT"])
    images = np.random.default_rng(0).normal(size=(2, 24)).astype(np.float32)
    cols = scorer.score(nbest, ["c1 f2", "c2"], images)
    assert sorted(cols) == ["PARALLELsi", "PARALLELss"]
    hyp = encode_sentences(scorer.model, scorer.vocabs["de"], "de", nbest.hypotheses)
    src = encode_sentences(scorer.model, scorer.vocabs["en"], "en", ["c1 f2", "c2"])
    img = encode_images(scorer.model, images)
    seg = [0, 0, 1]
    by_hand = [-sum(max(0.0, float(v - d)) ** 2 for v, d in zip(hyp[m], img[seg[m]])) for m in range(3)]
    assert np.allclose(cols["PARALLELsi"], by_hand, atol=1e-6) and max(by_hand) <= 0
    assert np.allclose(cols["PARALLELss"], [hyp[m] @ src[seg[m]] for m in range(3)], atol=1e-6)
    assert (hyp >= 0).all() and (img >= 0).all()


def test_scorer_columns_align_with_nbest_rows(model_dir):
    scorer = make_scorer(f"mlmme:{model_dir}")
    nbest = NBestList(np.array([0, 2, 5]), ["k1 f2", "k3", "k2", "k2 f1", "k9 zz"], np.zeros((5, 1)), ["NMT"])
    sources = ["c1 f2", "c2"]
    images = np.random.default_rng(0).normal(size=(2, 24)).astype(np.float32)
    assert scorer.names(True) == ["MLMMEss", "MLMMEsi"] and scorer.names(False) == ["MLMMEss"]
    cols = scorer.score(nbest, sources, images)
    hyp = encode_sentences(scorer.model, scorer.vocabs["de"], "de", nbest.hypotheses)
    src = encode_sentences(scorer.model, scorer.vocabs["en"], "en", sources)
    img = encode_images(scorer.model, images)
    seg = [0, 0, 1, 1, 1]
    assert np.allclose(cols["MLMMEss"], [hyp[m] @ src[seg[m]] for m in range(5)], atol=1e-6)
    assert np.allclose(cols["MLMMEsi"], [hyp[m] @ img[seg[m]] for m in range(5)], atol=1e-6)
    assert np.all(np.abs(cols["MLMMEss"]) <= 1 + 1e-6)
    again = scorer.score(nbest, sources, images)  # deterministic
    assert np.array_equal(again["MLMMEss"], cols["MLMMEss"])


def test_scorer_errors(model_dir, tmp_path):
    with pytest.raises(
        InputError,
        match="unknown scorer 'bogus'.*known: cometkiwi, ct2, e5, fairseq, hf, hf-lm, ibm1, imagevec, len, lm, mbr, mlmme, mule, nmt, parallel, pivot, vse",
    ):
        make_scorer("bogus:whatever")
    with pytest.raises(InputError, match="no 'fr' encoder"):
        make_scorer(f"mlmme:{model_dir},target=fr")
    with pytest.raises(InputError, match="unknown setting 'lang=de'"):
        make_scorer(f"mlmme:{model_dir},lang=de")
    with pytest.raises(InputError, match="no config.json"):
        make_scorer(f"mlmme:{tmp_path}")
    scorer = make_scorer(f"mlmme:{model_dir}")
    nbest = NBestList(np.array([0, 1, 2]), ["a", "b"], np.zeros((2, 1)), ["NMT"])
    with pytest.raises(InputError, match="one source sentence per segment"):
        scorer.score(nbest, ["only one"], None)
    with pytest.raises(InputError, match="1 image rows but 2 segments"):
        scorer.score(nbest, ["x", "y"], np.zeros((1, 24), dtype=np.float32))


def test_features_add_cli_appends_columns_without_touching_existing_ones(model_dir, tmp_path, capsys):
    from rerank.cli import main
    from rerank.nbest import read_nbest, write_lines, write_nbest

    nbest = NBestList(
        np.array([0, 2, 3]),
        ["k1 f2", "k3", "k2"],
        np.array([[-1.25, -2.0], [-3.5, -1.0], [-0.5, -1.0]]),
        ["NMT", "WordPenalty"],
    )
    write_nbest(nbest, str(tmp_path / "in.nbest"))
    write_lines(["c1 f2", "c2"], str(tmp_path / "src"))
    write_lines(["a.jpg", "b.jpg"], str(tmp_path / "segment_images"))
    write_lines(["b.jpg", "a.jpg"], str(tmp_path / "split"))
    np.save(tmp_path / "feats.npy", np.random.default_rng(1).normal(size=(2, 24)).astype(np.float16))
    args = [
        "features",
        "add",
        "--nbest",
        str(tmp_path / "in.nbest"),
        "--scorer",
        f"mlmme:{model_dir}",
        "--source",
        str(tmp_path / "src"),
        "--images",
        str(tmp_path / "feats.npy"),
        "--image-split",
        str(tmp_path / "split"),
        "--segment-images",
        str(tmp_path / "segment_images"),
        "--out",
        str(tmp_path / "out.nbest"),
    ]
    assert main(args) == 0
    out = read_nbest(str(tmp_path / "out.nbest"))
    assert out.feature_names == ["NMT", "WordPenalty", "MLMMEss", "MLMMEsi"]
    assert np.array_equal(out.features[:, :2], nbest.features)
    # the image of segment 0 is a.jpg = row 1 of the matrix
    scorer = make_scorer(f"mlmme:{model_dir}")
    feats = np.load(tmp_path / "feats.npy").astype(np.float32)[[1, 0]]
    expected = scorer.score(nbest, ["c1 f2", "c2"], feats)
    assert np.allclose(out.features[:, 3], expected["MLMMEsi"])
    meta = json.loads((tmp_path / "out.nbest.json").read_text())
    assert meta["features"] == out.feature_names and meta["hypotheses"] == 3 and "torch" in meta["signature"]
    capsys.readouterr()
    # adding the same scorer again is refused, nothing written
    args[args.index("--nbest") + 1] = str(tmp_path / "out.nbest")
    args[-1] = str(tmp_path / "again.nbest")
    assert main(args) == 1
    assert "'MLMMEss' is already in the n-best list" in capsys.readouterr().err
    assert not (tmp_path / "again.nbest").exists()


def test_registries_reject_a_second_class_under_one_name():
    from rerank.features.scorer import SCORERS, Scorer
    from rerank.metrics import METRICS

    for registry in (SCORERS, METRICS):
        name = registry.names()[0]
        registry.get(name)  # its module imported: the name is taken
        with pytest.raises(ValueError, match="registered twice"):

            @registry.register(name)
            class Impostor(Scorer):  # noqa: F841
                pass

    with pytest.raises(TypeError):  # abstract interfaces cannot be instantiated half-done
        type("Half", (Scorer,), {"names": lambda self, h: []})()
