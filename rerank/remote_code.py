"""No code from a model directory runs (``docs/security.md``): a Hugging Face directory whose
configuration names code of its own (``auto_map`` in ``config.json`` or
``tokenizer_config.json``, transformers' ``trust_remote_code`` mechanism) is refused in one
line before any transformers call, and every ``from_pretrained`` rerank makes passes
``trust_remote_code=False`` (:data:`NO_REMOTE_CODE`).

Without both, transformers asks "Do you wish to run the custom code? [y/N]" on standard input
for a directory whose model type it does not know, and a ``y`` piped in imports the
directory's module.  Libraries that call ``from_pretrained`` themselves (bert-score) get the
check before they run; :func:`no_prompt` also makes transformers refuse instead of asking.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple, Type

from rerank.errors import InputError

#: what rerank passes to every ``from_pretrained``
NO_REMOTE_CODE: Dict[str, Any] = {"trust_remote_code": False}

#: the files of a model directory in which transformers looks for ``auto_map``
CONFIG_FILES = (
    "config.json",
    "tokenizer_config.json",
    "processor_config.json",
    "preprocessor_config.json",
    "feature_extractor_config.json",
    "image_processor_config.json",
    "generation_config.json",
)

#: the largest configuration file read for the check (a real config.json is a few KB)
MAX_CONFIG_BYTES = 16 << 20


def refuse_remote_code(directory: str, what: str) -> None:
    """Raise :class:`InputError` if the model directory ``directory`` names code of its own.

    Args:
        directory: a Hugging Face model or tokenizer directory (a name that is not a
            directory, e.g. one in the Hugging Face cache, is left to ``trust_remote_code=False``).
        what: who reads it, for the message (``hf``, ``comet: the encoder``, ``bertscore``).

    Raises:
        InputError: one line naming the file and the code it names (``auto_map``).
    """
    if not isinstance(directory, str) or not os.path.isdir(directory):
        return
    for name in CONFIG_FILES:
        path = os.path.join(directory, name)
        try:
            if not os.path.isfile(path) or os.path.getsize(path) > MAX_CONFIG_BYTES:
                continue
            with open(path, encoding="utf-8") as handle:
                data = json.load(handle)
        except (OSError, ValueError, RecursionError):
            continue  # not ours to judge: transformers names an unreadable configuration itself
        if isinstance(data, dict) and ("auto_map" in data or "custom_pipelines" in data):
            named = data.get("auto_map") or data.get("custom_pipelines")
            classes = ", ".join(sorted(map(str, named)))[:120] if isinstance(named, dict) else str(named)[:120]
            raise InputError(
                f"{what}: the model directory names code of its own to run (auto_map: {classes}); rerank never "
                "runs a model directory's code: use a model of a class transformers ships",
                path,
            )


def no_prompt() -> None:
    """Make transformers refuse remote code instead of asking on standard input (its
    ``TIME_OUT_REMOTE_CODE`` at 0), for libraries that call ``from_pretrained`` without
    ``trust_remote_code``.  Harmless where transformers is absent or has no such setting."""
    try:
        from transformers import dynamic_module_utils
    except ImportError:
        return
    if hasattr(dynamic_module_utils, "TIME_OUT_REMOTE_CODE"):
        dynamic_module_utils.TIME_OUT_REMOTE_CODE = 0


def load_errors() -> Tuple[Type[BaseException], ...]:
    """What ``from_pretrained`` raises on a directory that is not a loadable model (a damaged or
    crafted one): its own errors plus the weight readers' (safetensors' ``SafetensorError`` for a
    ``model.safetensors`` that is no safetensors file — a symbolic link to a text file —, pickle's
    ``UnpicklingError`` for a ``pytorch_model.bin`` that weights-only loading refuses)."""
    import pickle

    errors: Tuple[Type[BaseException], ...] = (
        OSError,
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        ImportError,
        RuntimeError,
    )
    errors += (EOFError, pickle.UnpicklingError)
    try:
        from safetensors import SafetensorError
    except ImportError:
        return errors
    return errors + (SafetensorError,)


def broken_sentencepiece(directory: str) -> Optional[str]:
    """The first SentencePiece model of ``directory`` (``*.model``, ``*.spm``) that sentencepiece
    cannot load (empty, cut short, another file renamed), or None: what a failed tokenizer load
    is really about (transformers then tries other converters and names tiktoken)."""
    try:
        import sentencepiece
    except ImportError:
        return None
    if not os.path.isdir(directory):
        return None
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if name.endswith((".model", ".spm")) and os.path.isfile(path):
            try:
                sentencepiece.SentencePieceProcessor(model_file=path)
            except (OSError, RuntimeError, ValueError):
                return path
    return None


def load_failure(error: BaseException, directory: Optional[str] = None) -> str:
    """The reason of a failed ``from_pretrained`` of ``directory`` on one line: a corrupt
    SentencePiece model in it named (:func:`broken_sentencepiece`), a pickle that weights-only
    loading refuses said as such (no code from a model directory runs), else the library's
    message."""
    import pickle

    broken = broken_sentencepiece(directory) if directory else None
    if broken is not None:
        return f"{os.path.basename(broken)} is not a SentencePiece model sentencepiece can load (empty or corrupt)"
    if isinstance(error, pickle.UnpicklingError):
        return (
            "its pytorch_model.bin holds objects beyond tensors, which rerank never unpickles (weights only): "
            "save the model with safetensors (save_pretrained writes model.safetensors)"
        )
    text = " ".join(str(error).split())
    return text if len(text) <= 300 else text[:300] + "…"
