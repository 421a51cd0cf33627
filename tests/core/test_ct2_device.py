"""``ct2:`` resolves ``--device``/``--dtype`` from the CUDA devices CTranslate2 sees
(:meth:`rerank.devices.DeviceSettings.ct2_device`), with the checks of ``resolve`` and without
loading torch."""

import pytest

from rerank.devices import DeviceSettings
from rerank.errors import InputError


@pytest.mark.parametrize(
    "device, cuda_devices, expected",
    [
        ("auto", 0, ("cpu", 0)),
        ("auto", 2, ("cuda", 0)),
        ("cpu", 2, ("cpu", 0)),
        ("cuda", 1, ("cuda", 0)),
        ("cuda:1", 2, ("cuda", 1)),
    ],
)
def test_the_device_and_index_ctranslate2_takes(device, cuda_devices, expected):
    assert DeviceSettings(device).ct2_device(cuda_devices) == expected


@pytest.mark.parametrize(
    "settings, cuda_devices, needle",
    [
        (DeviceSettings("cuda"), 0, "CTranslate2 sees 0 CUDA device"),
        (DeviceSettings("cuda:2"), 2, "CTranslate2 sees 2 CUDA device"),
        (DeviceSettings("cpu", "float16"), 1, "needs a CUDA device"),
        (DeviceSettings("auto", "bfloat16"), 0, "needs a CUDA device"),
    ],
)
def test_a_device_ctranslate2_cannot_have_is_refused(settings, cuda_devices, needle):
    with pytest.raises(InputError, match=needle):
        settings.ct2_device(cuda_devices)
