"""Where neural models run: ``--device auto|cpu|cuda|cuda:N``, ``--dtype
float32|float16|bfloat16`` and ``--threads N`` of every command that runs a model (one settings
object, resolved by the layer that loads torch; the core never imports torch itself).

Threads: torch's CPU thread count is set once per process, to ``--threads`` (or a model's
``threads=`` setting) and by default to the CPUs this process may run on
(``os.sched_getaffinity``: a container or ``taskset`` limit counts; torch's own default is the
machine's cores, which oversubscribes a process confined to fewer: on 2 shared cores
CometKiwi took 102 s with torch's default, 11 s with one thread per core available)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional, Tuple

from rerank._native import cpu_count
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
THREADS_HELP = (
    "torch CPU threads of the models the verb runs (default: the CPUs this process may use, "
    "os.sched_getaffinity), e.g. --threads 1 beside other jobs"
)


def set_torch_threads(threads: Optional[int] = None) -> int:
    """Set torch's CPU threads to ``threads`` (default: :func:`rerank._native.cpu_count`, the
    CPUs this process may run on) where they differ; returns the count.  Loads torch."""
    import torch

    wanted = threads or cpu_count()
    if torch.get_num_threads() != wanted:
        torch.set_num_threads(wanted)
    return wanted


def native_bfloat16(device_type: str) -> bool:
    """Whether ``device_type`` ("cpu" or "cuda") runs bfloat16 matrix products natively:
    on CUDA ``torch.cuda.is_bf16_supported()``; on the CPU oneDNN's own test (true with
    AVX-512 BF16, AMX or plain AVX-512, where oneDNN converts in vector registers), else the
    CPU's flags (``avx512_bf16``/``amx_bf16`` in /proc/cpuinfo).  Without them (an AVX2-only
    CPU) torch emulates bfloat16: ``torch.autocast`` then makes a small transformer's linear
    layers ~20× slower than float32 (measured on a 2-core AMD EPYC with AVX2 only).  Loads torch."""
    import torch

    if device_type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch without the test: the CPU's flags
        try:
            with open("/proc/cpuinfo", encoding="utf-8") as handle:
                flags = handle.read()
        except OSError:
            return False
        return "avx512_bf16" in flags or "amx_bf16" in flags


def int8_linear_layers(module: Any, what: str) -> Any:
    """``module`` (a torch.nn.Module in eval mode) with every ``torch.nn.Linear``
    replaced, in place, by torch's dynamically quantised one: int8 weights per output channel,
    the activations quantised per call from their own range, int32 accumulation (fbgemm;
    ``torch.ao.quantization.quantize_dynamic`` with ``per_channel_dynamic_qconfig``, as
    PyTorch's dynamic quantisation tutorial for BERT).  Whole models at the published sizes
    ran 1.2× (Marian) to 1.6× (XLM-R large) faster on 2 cores of an Intel Xeon; the scores
    move (docs/usage/costs.md, "int8 on the CPU", says by how much).  Loads torch.

    Raises:
        InputError: naming ``what`` (e.g. ``comet``): a module not on the CPU, or a torch
            without dynamic quantisation.
    """
    import warnings

    import torch

    if any(p.device.type != "cpu" for p in module.parameters()):
        raise InputError(f"{what}: dtype=int8 runs on the CPU (torch's dynamic quantisation): give device cpu")
    try:
        from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic
    except ImportError:
        raise InputError(
            f"{what}: dtype=int8 needs torch's dynamic quantisation, which torch {torch.__version__} lacks"
        ) from None
    with warnings.catch_warnings():  # torch 2.13 announces the quantised tensors' move to torchao
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return quantize_dynamic(module, {torch.nn.Linear: per_channel_dynamic_qconfig}, inplace=True)


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
    threads: Optional[int] = None

    def __post_init__(self):
        device_name(self.device)
        if self.dtype not in DTYPES:
            raise InputError(f"--dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.threads is not None and (
            isinstance(self.threads, bool) or not isinstance(self.threads, int) or self.threads < 1
        ):
            raise InputError(f"--threads {self.threads!r}: expected a positive integer")

    def resolve(self) -> Tuple[Any, Any]:
        """(torch.device, torch.dtype); torch's CPU threads set (:func:`set_torch_threads`).
        Loads torch.

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
        set_torch_threads(self.threads)
        return torch.device(name), getattr(torch, self.dtype)

    def ct2_device(self, cuda_devices: int) -> Tuple[str, int]:
        """(device, device_index) as ``ctranslate2.Translator`` takes them, given the CUDA
        devices CTranslate2 sees (``ctranslate2.get_cuda_device_count()``): ``auto`` is CUDA
        where there is one.  The same checks as :meth:`resolve` without loading torch (a
        CTranslate2 model with ``bpe=`` needs none: its import alone took 1.25 s).

        Raises:
            InputError: CUDA asked for but CTranslate2 sees none (or not that index), or a half
                type on the CPU.
        """
        name = self.device
        if name == "auto":
            name = "cuda" if cuda_devices > 0 else "cpu"
        if name == "cpu":
            if self.dtype != "float32":
                raise InputError(f"--dtype {self.dtype} needs a CUDA device (the CPU runs float32)")
            return "cpu", 0
        index = int(name.split(":")[1]) if ":" in name else 0
        if index >= cuda_devices:
            raise InputError(f"--device {self.device}: CTranslate2 sees {cuda_devices} CUDA device(s)")
        return "cuda", index

    def is_cuda(self) -> bool:
        """Whether the resolved device is a GPU (loads torch)."""
        return self.resolve()[0].type == "cuda"
