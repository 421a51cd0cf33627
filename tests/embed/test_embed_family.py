"""The embedding family beside MLMME (rerank/embed/model.py): order embeddings (PIVOT /
PARALLEL-ASYM), MULE's shared branch, adversary and neighbourhood constraints, ImageVec's
bag-of-words encoder — each against hand computations on tiny tensors."""

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

import torch  # noqa: E402

from rerank.embed.config import OBJECTIVES, MLMMEConfig  # noqa: E402
from rerank.embed.evaluation import similarity_scores  # noqa: E402
from rerank.embed.model import (  # noqa: E402
    MLMME,
    SentenceEncoder,
    matched_scores,
    pair_scores,
    ranking_loss,
    reverse_gradient,
)
from rerank.embed.train import neighbour_rows  # noqa: E402
from rerank.errors import InputError  # noqa: E402


def test_order_similarity_by_hand():
    # S(x, y) = -||max(0, y - x)||^2: y = (1, 0) exceeds x = (0.5, 0.5) by 0.5 in the first
    # coordinate only -> -0.25; y = (0.2, 0.2) is below x everywhere -> 0 (the order holds)
    x = torch.tensor([[0.5, 0.5]])
    y = torch.tensor([[1.0, 0.0], [0.2, 0.2]])
    assert pair_scores(x, y, "order").flatten().tolist() == pytest.approx([-0.25, 0.0])
    assert matched_scores(x.expand(2, 2), y, "order").tolist() == pytest.approx([-0.25, 0.0])
    # asymmetric: swapping the sides changes the score
    assert pair_scores(y[:1], x, "order").item() == pytest.approx(-0.25)  # (0.5,0.5)-(1,0): 0, 0.5 -> -0.25
    assert pair_scores(y[1:], x, "order").item() == pytest.approx(-0.18)  # 0.3^2 + 0.3^2
    assert pair_scores(x, y, "cosine").flatten().tolist() == pytest.approx([0.5, 0.2])
    with pytest.raises(ValueError, match="unknown similarity"):
        pair_scores(x, y, "dot")


def test_ranking_loss_with_order_embeddings_by_hand():
    # images a, sentences b; S(a_i, b_j) = -||max(0, b_j - a_i)||^2
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    b = torch.tensor([[0.6, 0.0], [0.0, 0.8]])
    # S = [[0, -0.64], [-0.36, 0]]: positives 0; margin 0.5:
    # cost_b: a_0 vs b_1: 0.5 - 0 - 0.64 < 0; a_1 vs b_0: 0.5 - 0.36 = 0.14
    # cost_a: b_0 vs a_1: 0.5 + S(a_1, b_0) = 0.14; b_1 vs a_0: 0.5 - 0.64 < 0
    assert ranking_loss(a, b, 0.5, similarity="order").item() == pytest.approx(0.28)
    # numpy twin used by the evaluations: (S, I) = transpose of pair_scores(images, sentences)
    assert similarity_scores(a.numpy(), b.numpy(), "order", chunk=1) == pytest.approx(
        pair_scores(a, b, "order").t().numpy()
    )


def test_order_embeddings_are_non_negative_unit_vectors():
    config = MLMMEConfig(word_dim=4, hidden_dim=4, embed_dim=3, image_dim=5, similarity="order", dropout=0.0)
    model = MLMME({"en": 6, "de": 6}, config).eval()
    torch.manual_seed(0)
    images = model.encode_image(torch.randn(4, 5))
    text = model.encode_text("en", torch.tensor([[2, 3, 0], [4, 5, 1]]), torch.tensor([2, 3]))
    for v in (images, text):
        assert (v >= 0).all()
        assert v.norm(dim=1).tolist() == pytest.approx([1.0] * len(v))


def test_bag_of_words_encoder_is_the_projected_mean_of_its_words():
    config = MLMMEConfig(word_dim=2, embed_dim=2, encoder="bow", dropout=0.0)
    encoder = SentenceEncoder(4, config).eval()
    with torch.no_grad():
        encoder.embed.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [3.0, 4.0], [0.0, 2.0]]))
        encoder.proj.weight.copy_(torch.eye(2))
        encoder.proj.bias.zero_()
    # sentence [2, 3] (+ padding): mean (1.5, 3) -> unit (0.447, 0.894); padding never counts
    out = encoder(torch.tensor([[2, 3, 0], [1, 0, 0]]), torch.tensor([2, 1]))
    assert out[0].tolist() == pytest.approx([1.5 / 3.3541, 3 / 3.3541], rel=1e-4)
    assert out[1].tolist() == pytest.approx([1.0, 0.0])
    assert not hasattr(encoder, "gru")


def test_mule_shares_one_branch_and_keeps_word_embeddings_per_language(tmp_path):
    config = MLMMEConfig(word_dim=4, hidden_dim=4, embed_dim=4, shared=True, adversary=0.5)
    model = MLMME({"en": 7, "de": 9}, config)
    en, de = model.encoders["en"], model.encoders["de"]
    assert en.gru is de.gru and en.proj is de.proj and en.embed is not de.embed
    # parameters: two embedding tables, one GRU and projection, the image side, the classifier
    own = {id(p) for p in model.parameters()}
    assert len(own) == len(list(model.parameters()))
    assert sum(p.numel() for p in model.parameters()) == (
        7 * 4
        + 9 * 4
        + sum(p.numel() for p in en.gru.parameters())
        + 4 * 4
        + 4
        + 2048 * 4
        + 4
        + (4 * 4 + 4)
        + (4 * 2 + 2)
    )
    # a state dict saved and loaded gives the same shared model
    torch.save(model.state_dict(), tmp_path / "m.pt")
    again = MLMME({"en": 7, "de": 9}, config)
    again.load_state_dict(torch.load(tmp_path / "m.pt", weights_only=True))
    assert again.encoders["en"].gru is again.encoders["de"].gru
    assert torch.equal(again.encoders["de"].gru.weight_hh_l0, model.encoders["en"].gru.weight_hh_l0)


def test_gradient_reversal_by_hand():
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    y = reverse_gradient(x, 0.5)
    assert y.tolist() == [1.0, -2.0]
    (3 * y).sum().backward()
    assert x.grad.tolist() == [-1.5, -1.5]  # d(3y)/dx = 3, reversed and scaled by 0.5


def test_adversarial_language_term_by_hand():
    config = MLMMEConfig(word_dim=2, hidden_dim=2, embed_dim=2, shared=True, adversary=1.0)
    model = MLMME({"en": 3, "de": 3}, config)
    with torch.no_grad():
        model.encoders["en"].embed.weight.copy_(torch.tensor([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]]))
        model.encoders["de"].embed.weight.copy_(torch.tensor([[0.0, 0.0], [0.0, 1.0], [0.0, 3.0]]))
        first, last = model.language_classifier[0], model.language_classifier[2]
        first.weight.copy_(torch.eye(2))
        first.bias.zero_()
        last.weight.copy_(torch.eye(2))  # logits = relu(word): (x, y)
        last.bias.zero_()
    # en tokens [1, 2] (one padding), de tokens [2]: logits (1,0), (2,0) labelled 0; (0,3) labelled 1
    tokens = {"en": torch.tensor([[1, 2, 0]]), "de": torch.tensor([[2, 0, 0]])}
    ce = [np.log(1 + np.exp(-1.0)), np.log(1 + np.exp(-2.0)), np.log(1 + np.exp(-3.0))]
    loss = model.language_loss(tokens)
    assert loss.item() == pytest.approx(np.mean(ce), rel=1e-5)
    loss.backward()
    # the classifier descends, the word embeddings ascend: reversal flips their gradient
    word = model.encoders["en"].embed.weight.grad[1]
    # d ce_0 / d x for logits (x, 0) labelled 0 is -(1 - softmax_0) = -e^{-1}/(1+e^{-1}); mean over 3, reversed
    assert word[0].item() == pytest.approx(+(np.exp(-1) / (1 + np.exp(-1))) / 3, rel=1e-4)


def test_neighbourhood_term_is_the_ranking_loss_over_every_language_pair():
    torch.manual_seed(1)
    config = MLMMEConfig(word_dim=2, hidden_dim=2, embed_dim=3, beta=0.0, neighbour=2.0)
    model = MLMME({"en": 3, "de": 3}, config)
    unit = lambda n: torch.nn.functional.normalize(torch.randn(n, 3), dim=1)  # noqa: E731
    sents = {"en": unit(4), "de": unit(4)}
    near = {"en": unit(4), "de": unit(4)}
    image_ids = torch.tensor([0, 1, 2, 0])  # rows 0 and 3 share an image: never contrastive
    out = model.loss(sents, image_ids=image_ids, neighbours=near)
    same = image_ids.unsqueeze(1) == image_ids.unsqueeze(0)
    expected = sum(ranking_loss(sents[k], near[l], 0.2, same) for k in ("en", "de") for l in ("en", "de"))
    assert out["r_nb"].item() == pytest.approx(expected.item())
    assert out["loss"].item() == pytest.approx(out["r_ml"].item() + 2.0 * expected.item())
    # by hand for one pair: rows 0/3 are excluded from each other's contrastive terms
    a, b = sents["en"], near["de"]
    by_hand = 0.0
    for i in range(4):
        for j in range(4):
            if i != j and image_ids[i] != image_ids[j]:
                by_hand += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[i] @ b[j]))
                by_hand += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[j] @ b[i]))
    assert ranking_loss(a, b, 0.2, same).item() == pytest.approx(by_hand, rel=1e-5)


def test_neighbour_rows_describe_the_same_image():
    image_of = np.array([3, 1, 3, 3, 0, 1])
    rng = np.random.default_rng(0)
    for _ in range(20):
        out = neighbour_rows(image_of, rng)
        assert (image_of[out] == image_of).all()
        assert out[4] == 4  # image 0 has one description: its own
        assert all(out[i] != i for i in (0, 1, 2, 3, 5))
    # every other description of image 3 is drawn
    drawn = {int(neighbour_rows(image_of, np.random.default_rng(s))[0]) for s in range(40)}
    assert drawn == {2, 3}


def test_objectives_fix_their_settings_and_bad_settings_are_refused():
    assert OBJECTIVES["pivot-asym"] == {"beta": 1.0, "similarity": "order"}
    assert MLMMEConfig.from_preset("cpu", **OBJECTIVES["mule"], objective="mule").shared
    for bad, message in (
        ({"similarity": "dot"}, "unknown similarity 'dot'; known: cosine, order"),
        ({"encoder": "lstm"}, "unknown encoder 'lstm'; known: gru, bow"),
        ({"objective": "clip"}, "unknown objective 'clip'; known: mlmme, vse, pivot"),
        ({"adversary": -1.0}, "adversary must be >= 0"),
    ):
        with pytest.raises(InputError, match=message):
            MLMMEConfig.from_preset("cpu", **bad)


def test_a_text_only_model_is_selected_on_sentence_ranking_even_with_validation_images():
    from rerank.embed.evaluation import image_sentence_ranking
    from rerank.embed.train import EmbedTrainConfig, encode_sentences, train_embeddings, validation_score
    from tests.embed.test_embed_train import planted

    train, _ = planted(80, seed=1)
    valid, _ = planted(20, seed=2)  # has image features: a β = 0 model never trains on them
    mc = MLMMEConfig(word_dim=8, hidden_dim=8, embed_dim=8, dropout=0.0, beta=0.0)
    model, vocabs, _ = train_embeddings(train, valid, EmbedTrainConfig(model=mc, epochs=1, min_count=1))
    score = validation_score(model, vocabs, valid)
    a = encode_sentences(model, vocabs["en"], "en", valid.sentences["en"])
    b = encode_sentences(model, vocabs["de"], "de", valid.sentences["de"])
    expected = image_sentence_ranking(a, b, np.arange(len(a)))
    assert score["rsum"] == pytest.approx(sum(v for d in expected.values() for k, v in d.items() if k.startswith("r@")))


def test_word_vectors_of_both_kinds():
    from rerank.embed.data import Vocabulary
    from rerank.embed.train import encode_sentences, word_vectors

    config = MLMMEConfig(word_dim=3, embed_dim=2, encoder="bow", dropout=0.0)
    model = MLMME({"en": 4, "de": 4}, config).eval()
    vocabs = {"en": Vocabulary(["dog", "cat"]), "de": Vocabulary(["hund", "katze"])}
    joint = word_vectors(model, vocabs)
    assert sorted(joint) == ["de_hund", "de_katze", "en_cat", "en_dog"]
    assert np.allclose(joint["en_dog"], encode_sentences(model, vocabs["en"], "en", ["dog"])[0])
    rows = word_vectors(model, vocabs, kind="input")
    assert np.allclose(rows["de_katze"], model.encoders["de"].embed.weight[3].detach().numpy())
    with pytest.raises(InputError, match="unknown word-vector kind 'raw'; known: joint, input"):
        word_vectors(model, vocabs, kind="raw")
