"""Adam and lazy Adam over an embedding model (rerank/embed/train.py EmbeddingOptimiser):
the first step against Adam's formula by hand, the rows lazy Adam leaves alone, global-norm
clipping of sparse gradients against torch's clipping of the same dense gradients."""

import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

import torch  # noqa: E402

from rerank.embed.config import MLMMEConfig  # noqa: E402
from rerank.embed.model import MLMME  # noqa: E402
from rerank.embed.train import EmbeddingOptimiser  # noqa: E402
from rerank.errors import InputError  # noqa: E402


def _model(seed=0):
    torch.manual_seed(seed)
    config = MLMMEConfig(word_dim=3, embed_dim=2, encoder="bow", beta=0.0, dropout=0.0)
    return MLMME({"en": 6, "de": 6}, config)


def _loss(model, en, de):
    """A loss whose gradient reaches only the rows of the words in ``en`` / ``de``."""
    lengths = torch.tensor([len(en)])
    a = model.encode_text("en", torch.tensor([en]), lengths)
    b = model.encode_text("de", torch.tensor([de]), lengths)
    return (a * torch.tensor([[1.0, -2.0]])).sum() + (b * torch.tensor([[0.5, 3.0]])).sum()


@pytest.mark.parametrize("kind", ["adam", "lazy-adam"])
def test_first_step_is_adams_by_hand_and_lazy_adam_leaves_unseen_rows(kind):
    model = _model()
    lr = 0.1
    opt = EmbeddingOptimiser(model, kind, lr, grad_clip=1e9)
    table = model.encoders["en"].embed.weight
    before = table.detach().clone()
    opt.zero_grad()
    _loss(model, [2, 3], [1, 4]).backward()
    grad = table.grad.to_dense() if table.grad.is_sparse else table.grad.clone()
    assert table.grad.is_sparse == (kind == "lazy-adam")
    opt.step()
    # Adam's first step: m^ = g, v^ = g^2 -> w - lr * g / (|g| + eps), eps = 1e-8
    expected = before - lr * grad / (grad.abs() + 1e-8)
    assert torch.allclose(table.detach(), expected, atol=1e-6)
    assert torch.equal(table.detach()[[0, 1, 4, 5]], before[[0, 1, 4, 5]])  # no gradient, no move
    # step 2 touches other words: Adam's momentum still moves rows 2 and 3, lazy Adam does not
    after_one = table.detach().clone()
    opt.zero_grad()
    _loss(model, [4, 5], [1, 4]).backward()
    opt.step()
    moved = ~torch.isclose(table.detach()[[2, 3]], after_one[[2, 3]], atol=0, rtol=0)
    assert moved.any() == (kind == "adam")
    assert not torch.equal(table.detach()[[4, 5]], after_one[[4, 5]])
    opt.close()
    assert not model.encoders["en"].embed.sparse and not model.encoders["de"].embed.sparse


def test_sparse_gradients_are_clipped_as_torch_clips_the_dense_ones():
    # the same model and loss twice: dense gradients clipped by torch, sparse ones by lazy Adam's
    # clipping (a word twice in the batch: its two row gradients summed before the norm)
    dense, lazy = _model(1), _model(1)
    for clip in (0.05, 1e9):  # clipped, then a norm below the cap (nothing changes)
        grads = {}
        for name, model in (("dense", dense), ("lazy", lazy)):
            opt = EmbeddingOptimiser(model, "adam" if name == "dense" else "lazy-adam", 1e-3, clip)
            opt.zero_grad()
            _loss(model, [2, 2, 3], [1, 4, 4]).backward()
            if name == "dense":
                raw = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]).norm()
            for o in opt.optimisers:  # clip without moving: lr 0
                o.param_groups[0]["lr"] = 0.0
            opt.step()
            grads[name] = [
                (p.grad.to_dense() if p.grad.is_sparse else p.grad).clone()
                for p in model.parameters()
                if p.grad is not None
            ]
            opt.close()
        for g_dense, g_lazy in zip(grads["dense"], grads["lazy"]):
            assert torch.allclose(g_dense, g_lazy, atol=1e-6)
        total = torch.cat([g.flatten() for g in grads["lazy"]]).norm()
        assert float(total) == pytest.approx(min(clip, float(raw)), rel=1e-4)


def test_unknown_optimizer_is_refused():
    with pytest.raises(InputError, match="unknown optimizer 'sgd'; known: adam, lazy-adam"):
        EmbeddingOptimiser(_model(), "sgd", 0.1, 1.0)
