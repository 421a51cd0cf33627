"""Attention NMT for Multi30k on fairseq: data preparation, the Bahdanau GRU model
(registered as a fairseq plugin under ``rerank/nmt/fairseq_user_dir``), training and
n-best generation.  Needs the ``[nmt]`` extra (torch, fairseq, sacremoses, subword-nmt).
"""

import os
from typing import Dict, List, Tuple

from rerank.devices import DeviceSettings
from rerank.errors import InputError

#: directory to pass to fairseq's ``--user-dir`` so that our models are registered
USER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fairseq_user_dir")


def fairseq_device(
    device: str = "auto", dtype: str = "float32", world_size: int = 1
) -> Tuple[List[str], Dict[str, str]]:
    """(fairseq-train / fairseq-generate arguments, environment) for a
    :class:`rerank.devices.DeviceSettings`: ``--cpu`` on the CPU; on CUDA ``--fp16`` /
    ``--bf16`` for half types, ``CUDA_VISIBLE_DEVICES`` for ``cuda:N``, and fairseq's own
    multi-GPU training (``--distributed-world-size``, torch.distributed) for
    ``world_size`` > 1.  Loads torch to resolve ``auto``.

    Raises:
        InputError: as :meth:`DeviceSettings.resolve`, or a world size above the GPUs torch sees.
    """
    import torch

    resolved, _ = DeviceSettings(device, dtype).resolve()
    if resolved.type == "cpu":
        if world_size > 1:
            raise InputError(f"--distributed-world-size {world_size} needs as many CUDA devices (torch sees none)")
        return ["--cpu"], {}
    args = {"float16": ["--fp16"], "bfloat16": ["--bf16"]}.get(dtype, [])
    env: Dict[str, str] = {}
    if world_size > 1:
        if world_size > torch.cuda.device_count():
            raise InputError(
                f"--distributed-world-size {world_size}: torch sees {torch.cuda.device_count()} CUDA device(s)"
            )
        args += ["--distributed-world-size", str(world_size)]
    elif resolved.index is not None:
        env["CUDA_VISIBLE_DEVICES"] = str(resolved.index)
    return args, env
