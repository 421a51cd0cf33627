"""Where neural models run: ``--device auto|cpu|cuda|cuda:N`` and ``--dtype
float32|float16|bfloat16`` of every command that runs a model (one settings object,
resolved by the layer that loads torch; the core never imports torch itself)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Tuple

from rerank.errors import InputError

DEVICE_HELP = (
    "where models run: auto (CUDA when torch sees a GPU, else the CPU), cpu, cuda, cuda:N "
    "(default: auto), e.g. --device cuda:1"
)
DTYPE_HELP = (
    "floating-point type of the model's weights and activations: float32, float16, bfloat16 (default: "
    "float32; half types need CUDA), e.g. --dtype float16"
)
DTYPES = ("float32", "float16", "bfloat16")


def device_name(text: str) -> str:
    """argparse type of ``--device``.  Raises :class:`InputError` for another spelling."""
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", text):
        raise InputError(f"--device {text!r}: expected auto, cpu, cuda or cuda:N")
    return text


@dataclass(frozen=True)
class DeviceSettings:
    """``device`` (auto, cpu, cuda, cuda:N) and ``dtype`` (float32, float16, bfloat16).

    Raises:
        InputError: an unknown spelling.
    """

    device: str = "auto"
    dtype: str = "float32"

    def __post_init__(self):
        device_name(self.device)
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")

    def resolve(self) -> Tuple[Any, Any]:
        """(torch.device, torch.dtype).  Loads torch.

        Raises:
            InputError: CUDA asked for but torch sees none (or not that index), or a half
                type on the CPU.
        """
        import torch

        name = self.device
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        if name.startswith("cuda"):
            if not torch.cuda.is_available():
                raise InputError(f"--device {self.device}: torch sees no CUDA device (torch {torch.__version__})")
            index = int(name.split(":")[1]) if ":" in name else 0
            if index >= torch.cuda.device_count():
                raise InputError(f"--device {self.device}: torch sees {torch.cuda.device_count()} CUDA device(s)")
        elif self.dtype != "float32":
            raise InputError(f"--dtype {self.dtype} needs a CUDA device (the CPU runs float32)")
        return torch.device(name), getattr(torch, self.dtype)

    def is_cuda(self) -> bool:
        """Whether the resolved device is a GPU (loads torch)."""
        return self.resolve()[0].type == "cuda"
