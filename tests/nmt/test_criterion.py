"""The fused label-smoothed cross-entropy (rerank/nmt/criterion.py) against fairseq's own loss
and a hand-computed case; its bf16 autocast; how nmt.train asks fairseq for it."""

import math
import os
import types

import pytest

from rerank.errors import InputError
from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

import torch  # noqa: E402
from fairseq.criterions.label_smoothed_cross_entropy import LabelSmoothedCrossEntropyCriterion, label_smoothed_nll_loss  # noqa: E402

from rerank.nmt.criterion import FusedLabelSmoothedCE, FusedLabelSmoothedCrossEntropyCriterion  # noqa: E402
from rerank.nmt.train import TrainConfig, train_command  # noqa: E402

PAD = 1


def test_hand_computed_uniform_logits():
    # V = 3, all logits 0: p = 1/3, ε = 0.1, ε_i = 0.05; per row nll = ln 3 and loss =
    # 0.85·ln 3 + 0.05·3·ln 3 = ln 3; gradient p − ε_i − 0.85·onehot = 0.2833 / −0.5667
    logits = torch.zeros(3, 3, requires_grad=True)
    target = torch.tensor([0, 2, PAD])  # the last row is padding
    loss, nll = FusedLabelSmoothedCE.apply(logits, target, 0.1, PAD)
    assert loss.item() == pytest.approx(2 * math.log(3), rel=1e-6)
    assert nll.item() == pytest.approx(2 * math.log(3), rel=1e-6)
    loss.backward()
    other, on_target = 1 / 3 - 0.05, 1 / 3 - 0.05 - 0.85
    assert logits.grad.tolist() == [
        pytest.approx([on_target, other, other], abs=1e-6),
        pytest.approx([other, other, on_target], abs=1e-6),
        [0.0, 0.0, 0.0],
    ]


@pytest.mark.parametrize("dtype,tol", [(torch.float64, 1e-10), (torch.float32, 1e-4)])
def test_equals_fairseqs_label_smoothed_nll_loss(dtype, tol):
    gen = torch.Generator().manual_seed(3)
    logits = (torch.randn(40, 50, generator=gen, dtype=dtype) * 4).requires_grad_()
    target = torch.randint(0, 50, (40,), generator=gen)
    target[::7] = PAD
    loss, nll = FusedLabelSmoothedCE.apply(logits, target, 0.1, PAD)
    loss.backward()
    grad = logits.grad.clone()
    logits.grad = None
    ref_loss, ref_nll = label_smoothed_nll_loss(torch.log_softmax(logits, -1), target, 0.1, ignore_index=PAD)
    ref_loss.backward()
    assert loss.item() == pytest.approx(ref_loss.item(), rel=tol)
    assert nll.item() == pytest.approx(ref_nll.item(), rel=tol)
    assert torch.allclose(grad, logits.grad, atol=tol)
    assert grad[::7].abs().max().item() == 0.0  # padding rows get no gradient


def test_gradient_is_the_numerical_one():
    gen = torch.Generator().manual_seed(5)
    logits = torch.randn(6, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    target = torch.tensor([0, 3, PAD, 6, 2, 2])
    assert torch.autograd.gradcheck(lambda x: FusedLabelSmoothedCE.apply(x, target, 0.2, PAD)[0], (logits,))


class _TinyDecoderModel(torch.nn.Module):
    """A stand-in fairseq model: logits = linear(embedding(prev_output_tokens)); records
    whether autocast was on in its forward pass."""

    def __init__(self, vocab=11, dim=8):
        super().__init__()
        torch.manual_seed(0)
        self.embed, self.out = torch.nn.Embedding(vocab, dim), torch.nn.Linear(dim, vocab)
        self.autocast_seen = []

    def forward(self, prev_output_tokens):
        self.autocast_seen.append(torch.is_autocast_enabled("cpu"))
        return self.out(self.embed(prev_output_tokens)), None

    def get_targets(self, sample, net_output):
        return sample["target"]

    def get_normalized_probs(self, net_output, log_probs, sample=None):
        return torch.log_softmax(net_output[0].float(), dim=-1)


def _loss_and_grads(criterion, model):
    sample = {
        "net_input": {"prev_output_tokens": torch.tensor([[2, 5, 7, 3], [2, 4, PAD, PAD]])},
        "target": torch.tensor([[5, 7, 3, 9], [4, 2, PAD, PAD]]),
        "ntokens": 6,
    }
    model.zero_grad()
    loss, sample_size, log = criterion(model, sample)
    loss.backward()
    return loss, log, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_criterion_equals_fairseqs_and_autocasts_in_bf16():
    task = types.SimpleNamespace(target_dictionary=types.SimpleNamespace(pad=lambda: PAD))
    model = _TinyDecoderModel()
    ref_loss, ref_log, ref_grads = _loss_and_grads(LabelSmoothedCrossEntropyCriterion(task, False, 0.1), model)
    loss, log, grads = _loss_and_grads(FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1), model)
    assert loss.item() == pytest.approx(ref_loss.item(), rel=1e-6)
    assert log["nll_loss"].item() == pytest.approx(ref_log["nll_loss"].item(), rel=1e-6)
    assert all(torch.allclose(grads[n], ref_grads[n], atol=1e-6) for n in grads)
    assert model.autocast_seen == [False, False]

    bf16, _, bf16_grads = _loss_and_grads(
        FusedLabelSmoothedCrossEntropyCriterion(task, False, 0.1, bf16_autocast=True), model
    )
    assert model.autocast_seen[-1] is True
    assert bf16.dtype == torch.float32 and all(g.dtype == torch.float32 for g in bf16_grads.values())
    assert bf16.item() != ref_loss.item() and bf16.item() == pytest.approx(ref_loss.item(), rel=2e-2)


def test_train_command_asks_for_the_fused_criterion_and_bf16_only_when_set_and_no_valid_bleu():
    cmd = train_command("bin", "save", TrainConfig(arch="transformer-tiny"))
    assert cmd[cmd.index("--criterion") + 1] == "fused_label_smoothed_cross_entropy"
    assert "--bf16-autocast" not in cmd
    assert "--bf16-autocast" in train_command("bin", "save", TrainConfig(arch="transformer-tiny", bf16_autocast=True))
    gru = train_command("bin", "save", TrainConfig())
    assert gru[gru.index("--criterion") + 1] == "cross_entropy"
    # the GRU baseline keeps its best checkpoint by validation BLEU; a transformer baseline
    # generates with its averaged checkpoint and validates by loss only
    assert "--eval-bleu" in gru and gru[gru.index("--best-checkpoint-metric") + 1] == "bleu"
    assert "--eval-bleu" not in cmd and "--best-checkpoint-metric" not in cmd
    with pytest.raises(InputError, match="bf16 autocast is for the transformers"):
        TrainConfig(arch="gru", bf16_autocast=True)


def test_bf16_autocast_runs_only_where_the_device_has_native_bfloat16(monkeypatch, capsys):
    # emulated bfloat16 made the default job's training ~20x slower on a CPU without AVX-512:
    # there the forward pass runs in float32, said in one line; the asked settings stay
    from rerank.devices import native_bfloat16
    from rerank.nmt import train as train_module

    asked = TrainConfig(arch="transformer-tiny", bf16_autocast=True)
    monkeypatch.setattr(train_module, "native_bfloat16", lambda device: False)
    run = train_module._with_native_precision(asked, "cpu")
    assert run.bf16_autocast is False and asked.bf16_autocast is True
    assert "--bf16-autocast" not in train_command("bin", "save", run)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bf16 autocast skipped" in err and "CPU has no native bfloat16" in err
    monkeypatch.setattr(train_module, "native_bfloat16", lambda device: True)
    assert train_module._with_native_precision(asked, "cpu") is asked and not capsys.readouterr().err
    plain = TrainConfig(arch="transformer-tiny")
    monkeypatch.setattr(train_module, "native_bfloat16", lambda device: pytest.fail("asked only for bf16"))
    assert train_module._with_native_precision(plain, "cpu") is plain

    # this machine's answer agrees with its CPU's flags where they decide it
    flags = open("/proc/cpuinfo").read() if os.path.exists("/proc/cpuinfo") else ""
    if "avx512_bf16" in flags or "amx_bf16" in flags:
        assert native_bfloat16("cpu") is True
    elif flags and "avx512" not in flags:
        assert native_bfloat16("cpu") is False
