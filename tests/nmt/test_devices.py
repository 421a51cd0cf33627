"""--device / --dtype: resolved once (rerank/devices.py), passed to fairseq as its own flags;
CUDA cases are skipped (not failed) without CUDA."""

import pytest

from rerank.cli import main
from rerank.devices import DeviceSettings
from rerank.errors import InputError
from tests.conftest import needs, one_line_error

pytestmark = needs("nmt")

import torch  # noqa: E402

CUDA = torch.cuda.is_available()


def test_auto_is_the_cpu_without_cuda_and_half_types_need_cuda():
    device, dtype = DeviceSettings().resolve()
    assert device.type == ("cuda" if CUDA else "cpu") and dtype == torch.float32
    if not CUDA:
        for settings, needle in (
            (DeviceSettings("cuda"), "no CUDA"),
            (DeviceSettings("cuda:1"), "no CUDA"),
            (DeviceSettings("cpu", "float16"), "needs a CUDA device"),
        ):
            with pytest.raises(InputError, match=needle):
                settings.resolve()
    for bad in ("gpu", "cuda:x", "CPU"):
        with pytest.raises(InputError):
            DeviceSettings(bad)


def test_fairseq_flags():
    from rerank.nmt import fairseq_device

    if not CUDA:
        assert fairseq_device("cpu") == (["--cpu"], {}) and fairseq_device("auto") == (["--cpu"], {})
        with pytest.raises(InputError, match="distributed-world-size 2"):
            fairseq_device("cpu", world_size=2)
    else:
        assert fairseq_device("cuda:0", "float16") == (["--fp16"], {"CUDA_VISIBLE_DEVICES": "0"})
        assert fairseq_device("cuda", "bfloat16")[0] == ["--bf16"]


@pytest.mark.skipif(CUDA, reason="checks the error without CUDA")
@pytest.mark.parametrize(
    "argv",
    [
        ["nmt", "train", "--data-bin", "{tmp}", "--save-dir", "{tmp}/m", "--device", "cuda"],
        ["embed", "train", "--out", "{tmp}/e", "--device", "cpu", "--dtype", "bfloat16"],
    ],
)
def test_verbs_refuse_a_device_they_cannot_have(tmp_path, capsys, argv):
    (tmp_path / "dict.de.txt").write_text("a 1\n")
    (tmp_path / "dict.en.txt").write_text("a 1\n")
    code = main([a.format(tmp=tmp_path) for a in argv])
    assert code == 1
    one_line_error(capsys, "CUDA")


@pytest.mark.skipif(not CUDA, reason="no CUDA device")
def test_cuda_resolves():
    device, dtype = DeviceSettings("cuda", "float16").resolve()
    assert device.type == "cuda" and dtype == torch.float16
