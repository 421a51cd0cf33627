"""Issue 93, item 2: torch-backed models run on the CPUs this process may use (its affinity),
or on ``--threads`` / a model's ``threads=``, set once per process."""

import os

import pytest

from tests.conftest import needs

pytestmark = needs("hf")

import torch  # noqa: E402

from rerank.devices import DeviceSettings, set_torch_threads  # noqa: E402
from rerank.errors import InputError  # noqa: E402


@pytest.fixture(autouse=True)
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_the_default_is_the_affinity_not_the_machine(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})  # a process confined to one CPU
    torch.set_num_threads(2)
    DeviceSettings("cpu").resolve()
    assert torch.get_num_threads() == 1
    DeviceSettings("cpu", threads=2).resolve()
    assert torch.get_num_threads() == 2
    assert set_torch_threads(None) == 1 and torch.get_num_threads() == 1


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_threads_are_a_positive_integer(bad):
    with pytest.raises(InputError, match="--threads"):
        DeviceSettings("cpu", threads=bad)


def test_a_scorers_threads_setting_and_the_verbs_option_reach_torch(tmp_path, capsys):
    from rerank.cli import main
    from tests.tiny_models import build_marian

    (tmp_path / "hf").mkdir()
    marian = build_marian(str(tmp_path / "hf"))
    (tmp_path / "src.en").write_text("a man\n")
    (tmp_path / "c.nbest").write_text("0 ||| ein mann ||| F= 0 ||| 0\n")
    base = ["features", "add", "--nbest", str(tmp_path / "c.nbest"), "--source", str(tmp_path / "src.en")]
    torch.set_num_threads(2)
    assert main(base + ["--scorer", f"hf:{marian},threads=1", "--device", "cpu", "--out", str(tmp_path / "a")]) == 0
    assert torch.get_num_threads() == 1
    argv = base + ["--scorer", f"hf:{marian}", "--device", "cpu", "--threads", "2", "--out", str(tmp_path / "b")]
    assert main(argv) == 0
    assert torch.get_num_threads() == 2
    assert (tmp_path / "a").read_text() == (tmp_path / "b").read_text()  # the same scores either way


def test_int8_refuses_a_model_off_the_cpu_and_quantises_one_on_it():
    """dtype=int8's one check (rerank.devices.int8_linear_layers): a model whose weights are not
    on the CPU (here the meta device, as a CUDA one would be) is refused, naming the caller."""
    from rerank.devices import int8_linear_layers

    with torch.device("meta"):
        elsewhere = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(InputError, match="comet: dtype=int8 runs on the CPU"):
        int8_linear_layers(elsewhere, "comet")
    quantised = int8_linear_layers(torch.nn.Sequential(torch.nn.Linear(4, 4)).eval(), "comet")
    assert type(quantised[0]).__module__ == "torch.ao.nn.quantized.dynamic.modules.linear"
