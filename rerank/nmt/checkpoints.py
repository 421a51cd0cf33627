"""Loading checkpoints without running code from them: the trust boundary of a model file.

A torch checkpoint is a pickle, and a pickle can name any Python callable to run while it
loads (``os.system`` among them).  torch >= 2.6 loads with ``weights_only=True`` by
default: only tensors, containers, numbers and strings, plus the classes registered with
``torch.serialization.add_safe_globals``.  fairseq 0.12 checkpoints also hold an
``argparse.Namespace`` (the training arguments), which is why the usual advice is
``TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1`` — which loads *anything*.

rerank instead allows exactly the classes that checkpoints of fairseq and of rerank hold
(:data:`SAFE_GLOBALS`) and refuses any other in one line that names the class and the
opt-in: ``--trust-checkpoint`` on the command line, or ``RERANK_TRUST_CHECKPOINTS=1`` in
the environment (:data:`TRUST_ENV`), for a checkpoint whose source you trust.  Every path
of ours that loads a checkpoint goes through here: in this process (:func:`load_state`,
:func:`loading`) and in the fairseq processes we start (:func:`check_checkpoint` before the
start, :func:`fairseq_environ` for the process, and our ``--user-dir`` registers the same
classes there).  ``docs/security.md`` says what a checkpoint and a system directory are
trusted to do.

Follows torch's own guidance (``torch.load``'s documentation, "weights_only").
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import signal
import subprocess
from typing import Any, ContextManager, Dict, Iterator, List, Optional

from rerank.errors import InputError

#: the environment variable that trusts every checkpoint (as ``--trust-checkpoint``)
TRUST_ENV = "RERANK_TRUST_CHECKPOINTS"
#: torch's own switch to load anything; set only for a trusted checkpoint's fairseq process
TORCH_ANYTHING = "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"
#: the classes, beyond torch's own safe types, that fairseq and rerank checkpoints hold:
#: fairseq's training arguments, and numpy numbers and arrays (a validation score or
#: fairseq's meters saved as numpy; numeric dtypes only — torch's recipe for numpy)
SAFE_GLOBALS = ("argparse.Namespace", "numpy scalars, arrays and numeric dtypes")
#: what the refusal tells a user to do
OPT_IN = f"--trust-checkpoint (or {TRUST_ENV}=1)"


class UntrustedCheckpoint(InputError):
    """A checkpoint that names a class outside :data:`SAFE_GLOBALS`: loading it could run code."""


def trusted(trust: Optional[bool] = None) -> bool:
    """``trust`` when given, else whether :data:`TRUST_ENV` is set to 1/yes/true."""
    if trust is not None:
        return bool(trust)
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "yes", "true")


def _safe_objects() -> List[Any]:
    import argparse

    import numpy as np

    try:
        from numpy._core.multiarray import _reconstruct, scalar  # numpy 2
    except ImportError:  # pragma: no cover - numpy 1
        from numpy.core.multiarray import _reconstruct, scalar  # type: ignore[no-redef]
    dtypes = [type(np.dtype(name)) for name in ("float64", "float32", "float16", "int64", "int32", "bool")]
    return [argparse.Namespace, scalar, _reconstruct, np.ndarray, np.dtype, *dtypes]


def allow_fairseq_globals() -> None:
    """Register :data:`SAFE_GLOBALS` with torch (``add_safe_globals``; idempotent)."""
    import torch

    torch.serialization.add_safe_globals(_safe_objects())


def _refusal(path: str, names: List[str]) -> UntrustedCheckpoint:
    shown = ", ".join(sorted(set(names))[:5])
    return UntrustedCheckpoint(
        f"holds {shown}, which no fairseq or rerank checkpoint needs: loading it could run code. "
        f"Load it only if you trust its source: {OPT_IN}",
        path,
    )


def check_checkpoint(path: str, trust: Optional[bool] = None) -> None:
    """Refuse ``path`` unless every class its pickle names is safe (or it is trusted).
    Reads the pickle's opcodes only (``get_unsafe_globals_in_checkpoint``): nothing runs.

    Raises:
        InputError: no such file, or one that is neither a zip archive nor a pickle.
        UntrustedCheckpoint: a class outside :data:`SAFE_GLOBALS`, or a file that is not a
            ``torch.save`` zip archive (a legacy or crafted pickle), naming :data:`OPT_IN`.
    """
    if not os.path.isfile(path):
        raise InputError("no such checkpoint", path)
    if trusted(trust):
        return
    with open(path, "rb") as handle:
        magic = handle.read(2)
    if magic[:1] != b"\x80" and magic != b"PK":  # neither a pickle (torch's legacy format) nor a zip archive
        raise InputError("is not a torch checkpoint (truncated, or another kind of file)", path)
    import torch

    allow_fairseq_globals()
    try:
        unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    except Exception as error:  # not a zip archive: torch's legacy format, or no checkpoint at all
        raise UntrustedCheckpoint(
            f"is not a checkpoint of torch.save's zip format ({' '.join(str(error).split())[:120]}); "
            f"a legacy pickle is loaded only if you trust its source: {OPT_IN}",
            path,
        ) from None
    if unsafe:
        raise _refusal(path, unsafe)


def load_state(path: str, trust: Optional[bool] = None) -> Any:
    """``torch.load(path)`` on the CPU: ``weights_only`` with :data:`SAFE_GLOBALS` unless trusted.

    Raises:
        InputError, UntrustedCheckpoint: as :func:`check_checkpoint`; a file torch cannot read.
    """
    import torch

    check_checkpoint(path, trust)
    with loading(trust):
        try:
            return torch.load(path, map_location="cpu", weights_only=not trusted(trust))
        except (RuntimeError, EOFError, OSError) as error:
            raise InputError(f"cannot read the checkpoint: {' '.join(str(error).split())[:200]}", path) from None


@contextlib.contextmanager
def _environment(name: str, value: Optional[str]) -> Iterator[None]:
    """A block with the environment variable ``name`` set to ``value`` (None: unset),
    restored after it."""
    before = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


@contextlib.contextmanager
def loading(trust: Optional[bool] = None, path: str = "") -> Iterator[None]:
    """A block in which fairseq (or any ``torch.load`` without ``weights_only``) loads
    checkpoints as :func:`load_state` does; a refused class raises :class:`UntrustedCheckpoint`
    naming ``path``.  The process environment is restored after the block."""
    allow_fairseq_globals()
    try:
        with _environment(TORCH_ANYTHING, "1" if trusted(trust) else None):
            yield
    except pickle.UnpicklingError as error:
        names = re.findall(r"GLOBAL ([\w.]+)", str(error)) or ["a class outside the allow-list"]
        raise _refusal(path or "checkpoint", names) from None


def trusting(trust: bool) -> ContextManager[None]:
    """A block in which every checkpoint is trusted (:data:`TRUST_ENV` set) when ``trust``;
    the environment is restored after it (``--trust-checkpoint`` of the command line)."""
    return _environment(TRUST_ENV, "1") if trust else contextlib.nullcontext()


def run_fairseq(command: List[str], env: Dict[str, str], **streams: Any) -> "subprocess.CompletedProcess":
    """Run a fairseq process (``command``, ``env``: :func:`fairseq_environ`; ``streams``:
    ``stdout``/``stderr``/``text`` as :func:`subprocess.run` takes them) to its end and return it.
    It runs in a session of its own, so a Ctrl-C at the terminal reaches this process only, which
    kills the child's whole group (its data workers included) and raises KeyboardInterrupt: one
    line from rerank, never fairseq's own traceback.  The caller checks ``returncode``."""
    process = subprocess.Popen(command, env=env, start_new_session=True, **streams)
    try:
        out, err = process.communicate()
    except BaseException:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        raise
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def fairseq_environ(extra: Optional[Dict[str, str]] = None, trust: Optional[bool] = None) -> Dict[str, str]:
    """The environment of a fairseq process we start: this one's, with torch's switch to
    load anything (:data:`TORCH_ANYTHING`) set only for trusted checkpoints (and removed
    otherwise, wherever it came from), plus ``extra``.  The process's ``--user-dir`` (ours)
    registers :data:`SAFE_GLOBALS`.  ``PYTHONSAFEPATH=1`` (Python 3.11's ``-P``): ``python
    -m fairseq_cli.…`` does not put the working directory first on ``sys.path``, where a
    directory named ``rerank`` (the main job's tuning runs, ``OUT/rerank``) would hide the
    package."""
    env = dict(os.environ)
    env["PYTHONSAFEPATH"] = "1"
    env.pop(TORCH_ANYTHING, None)
    if trusted(trust):
        env[TORCH_ANYTHING] = "1"
        env[TRUST_ENV] = "1"
    env.update(extra or {})
    return env
