"""MLMME / VSE model and losses (rerank/embed/model.py) on tiny hand-checkable tensors."""

import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

import torch  # noqa: E402

from rerank.embed.model import MLMME, MLMMEConfig, SentenceEncoder, ranking_loss, vse_config  # noqa: E402


def test_ranking_loss_by_hand():
    # scores a_i·b_j = [[0.8, 0], [0.96, 0.8]], margin 0.2:
    # a_1 against b_0: 0.2 - 0.8 + 0.96 = 0.36; b_0 against a_1: 0.2 - 0.8 + 0.96 = 0.36; others < 0
    a = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    b = torch.tensor([[0.8, 0.6], [0.0, 1.0]])
    assert ranking_loss(a, b, 0.2).item() == pytest.approx(0.72)
    # swapped pairs: every one of the 4 contrastive terms is 0.2 - 0 + 1
    eye = torch.eye(2)
    assert ranking_loss(eye, eye.flip(0), 0.2).item() == pytest.approx(4.8)
    assert ranking_loss(eye, eye, 0.2).item() == 0.0
    assert ranking_loss(eye[:1], eye[:1], 0.2).item() == 0.0  # no contrastive item


def test_ranking_loss_equals_the_equation_term_by_term():
    torch.manual_seed(0)
    a = torch.nn.functional.normalize(torch.randn(5, 4), dim=1)
    b = torch.nn.functional.normalize(torch.randn(5, 4), dim=1)
    expected = 0.0
    for i in range(5):
        for j in range(5):
            if i != j:
                expected += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[i] @ b[j]))
                expected += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[j] @ b[i]))
    assert ranking_loss(a, b, 0.2).item() == pytest.approx(expected, rel=1e-5)


def test_sentence_vector_is_the_state_after_the_last_real_token():
    torch.manual_seed(0)
    enc = SentenceEncoder(20, MLMMEConfig(word_dim=8, hidden_dim=6, embed_dim=5, dropout=0.0)).eval()
    long = torch.tensor([[3, 4, 5, 6]])
    short = torch.tensor([[7, 8]])
    batch = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    other_padding = torch.tensor([[3, 4, 5, 6], [7, 8, 9, 9]])  # junk after the end must not matter
    lengths = torch.tensor([4, 2])
    with torch.no_grad():
        together = enc(batch, lengths)
        assert torch.allclose(together[0], enc(long, torch.tensor([4]))[0], atol=1e-6)
        assert torch.allclose(together[1], enc(short, torch.tensor([2]))[0], atol=1e-6)
        assert torch.allclose(enc(other_padding, lengths), together, atol=1e-6)
        assert torch.allclose(together.norm(dim=1), torch.ones(2))


def _vectors(seed=0, n=4, d=3):
    g = torch.Generator().manual_seed(seed)
    return torch.nn.functional.normalize(torch.randn(n, d, generator=g), dim=1)


def test_beta_extremes_and_missing_images():
    sentences = {"en": _vectors(1), "de": _vectors(2)}
    images = _vectors(3)
    model = MLMME({"en": 10, "de": 10}, MLMMEConfig(beta=1.0, word_dim=4, hidden_dim=4, embed_dim=3, image_dim=6))
    mm = ranking_loss(images, sentences["en"], 0.2) + ranking_loss(images, sentences["de"], 0.2)
    ml = ranking_loss(sentences["en"], sentences["de"], 0.2)
    out = model.loss(sentences, images)
    assert out["loss"].item() == pytest.approx(mm.item()) and out["r_ml"].item() == 0.0
    model.config.beta = 0.0
    out = model.loss(sentences, images)
    assert out["loss"].item() == pytest.approx(ml.item()) and out["r_mm"].item() == 0.0
    model.config.beta = 0.25
    assert model.loss(sentences, images)["loss"].item() == pytest.approx(0.25 * mm.item() + 0.75 * ml.item())
    # R_MM only over the examples that have an image; R_ML over all
    has = torch.tensor([True, False, True, True])
    out = model.loss(sentences, images, has)
    mm_sub = ranking_loss(images[has], sentences["en"][has], 0.2) + ranking_loss(images[has], sentences["de"][has], 0.2)
    assert out["r_mm"].item() == pytest.approx(mm_sub.item())
    assert out["r_ml"].item() == pytest.approx(ml.item())
    # no image at all: R_ML alone, weighted by (1 - beta)
    assert model.loss(sentences, None)["loss"].item() == pytest.approx(0.75 * ml.item())


def test_vse_is_mlmme_with_one_language_and_beta_one():
    config = vse_config("de", word_dim=4, hidden_dim=4, embed_dim=3, image_dim=6)
    assert config.langs == ["de"] and config.beta == 1.0
    model = MLMME({"de": 10}, config)
    s, d = _vectors(5), _vectors(6)
    assert model.loss({"de": s}, d)["loss"].item() == pytest.approx(ranking_loss(d, s, 0.2).item())


def test_image_projection_accepts_any_feature_size_and_presets():
    for dim in (2048, 4096, 7):
        model = MLMME({"en": 5}, MLMMEConfig(langs=["en"], image_dim=dim, word_dim=4, hidden_dim=4, embed_dim=3)).eval()
        out = model.encode_image(torch.randn(2, dim))
        assert out.shape == (2, 3) and torch.allclose(out.norm(dim=1), torch.ones(2))
    paper = MLMMEConfig.from_preset("paper")
    assert (paper.word_dim, paper.hidden_dim, paper.embed_dim) == (620, 1024, 2048)
    with pytest.raises(ValueError):
        MLMMEConfig.from_preset("huge")
    with pytest.raises(ValueError):
        MLMMEConfig.from_preset("cpu", beta=1.5)


def test_same_image_items_are_not_contrastive():
    # rows 0 and 1 describe the same image: with the mask, only the pairs with row 2 count
    torch.manual_seed(1)
    a = torch.nn.functional.normalize(torch.randn(3, 4), dim=1)
    b = torch.nn.functional.normalize(torch.randn(3, 4), dim=1)
    ids = torch.tensor([7, 7, 9])
    same = ids.unsqueeze(1) == ids.unsqueeze(0)
    expected = 0.0
    for i in range(3):
        for j in range(3):
            if ids[i] != ids[j]:
                expected += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[i] @ b[j]))
                expected += max(0.0, 0.2 - float(a[i] @ b[i]) + float(a[j] @ b[i]))
    assert ranking_loss(a, b, 0.2, same).item() == pytest.approx(expected, rel=1e-5)
    assert ranking_loss(a, b, 0.2, same).item() < ranking_loss(a, b, 0.2).item() or expected == 0


def test_sampled_contrastive_terms_by_hand():
    # one pair (a, b) = (e0, e0); sampled items neg_a = [e1], neg_b = [e1 * 0.5 + e0 * sqrt(.75)]
    a = torch.tensor([[1.0, 0.0]])
    b = torch.tensor([[1.0, 0.0]])
    neg_b = torch.tensor([[0.75**0.5, 0.5]])
    neg_a = torch.tensor([[0.0, 1.0]])
    # a·neg_b = 0.866 -> 0.2 - 1 + 0.866 = 0.066; b·neg_a = 0 -> 0.2 - 1 + 0 < 0
    assert ranking_loss(a, b, 0.2, neg_a=neg_a, neg_b=neg_b).item() == pytest.approx(0.2 - 1 + 0.75**0.5)
    # a sampled item of the same image is left out
    assert ranking_loss(a, b, 0.2, torch.tensor([[True]]), neg_a, neg_b).item() == 0.0
    with pytest.raises(ValueError):
        ranking_loss(a, b, 0.2, neg_a=neg_a)


def test_model_loss_with_sampled_negatives_matches_the_parts():
    torch.manual_seed(2)
    model = MLMME({"en": 5, "de": 5}, MLMMEConfig(beta=0.25, word_dim=4, hidden_dim=4, embed_dim=3, dropout=0.0))
    s = {"en": _vectors(1), "de": _vectors(2)}
    n = {"en": _vectors(3, n=5), "de": _vectors(4, n=5)}
    img, nimg = _vectors(5), _vectors(6, n=5)
    has, nhas = torch.tensor([True, True, False, True]), torch.tensor([True, False, True, True, False])
    ids, nids = torch.tensor([0, 1, 2, 3]), torch.tensor([1, 5, 6, 7, 8])
    out = model.loss(s, img, has, ids, {"sentences": n, "images": nimg, "has_image": nhas, "image_ids": nids})
    same_mm = ids[has].unsqueeze(1) == nids[nhas].unsqueeze(0)
    r_mm = sum(ranking_loss(img[has], s[k][has], 0.2, same_mm, nimg[nhas], n[k][nhas]) for k in ("en", "de"))
    r_ml = ranking_loss(s["en"], s["de"], 0.2, ids.unsqueeze(1) == nids.unsqueeze(0), n["en"], n["de"])
    assert out["r_mm"].item() == pytest.approx(r_mm.item())
    assert out["r_ml"].item() == pytest.approx(r_ml.item())
    assert out["loss"].item() == pytest.approx(0.25 * r_mm.item() + 0.75 * r_ml.item())


def test_unknown_init_is_rejected():
    with pytest.raises(ValueError, match="init"):
        MLMMEConfig.from_preset("cpu", init="xavier")
    # the CPU preset keeps PyTorch's initialisation (embedding weights ~ N(0, 1)), the paper preset
    # draws N(0, 0.01) with orthogonal recurrent blocks
    assert MLMMEConfig.from_preset("cpu").init == "default" and MLMMEConfig.from_preset("paper").init == "paper"
    torch.manual_seed(0)
    enc = SentenceEncoder(50, MLMMEConfig.from_preset("cpu", word_dim=8, hidden_dim=8, embed_dim=4))
    paper = SentenceEncoder(50, MLMMEConfig.from_preset("cpu", init="paper", word_dim=8, hidden_dim=8, embed_dim=4))
    assert enc.embed.weight.std().item() > 0.5 and paper.embed.weight.std().item() < 0.02
    w_hr = paper.gru.weight_hh_l0[:8]  # the reset gate's recurrent block is orthogonal
    assert torch.allclose(w_hr @ w_hr.t(), torch.eye(8), atol=1e-5)
