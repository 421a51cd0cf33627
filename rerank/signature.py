"""Signatures: the settings and library versions stamped on every artifact."""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from typing import Any, Dict, Iterable, Optional

from rerank._version import __version__
from rerank.outputs import atomic_write

CORE_PACKAGES = ("numpy", "sacrebleu")


def signature(packages: Iterable[str] = CORE_PACKAGES) -> Dict[str, str]:
    """Return ``{"rerank": version, "python": version, <package>: version or "absent"}``."""
    sig = {"rerank": __version__, "python": platform.python_version()}
    for name in packages:
        try:
            sig[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            sig[name] = "absent"
    return sig


def write_signed(path: Optional[str], record: Dict[str, Any], packages: Iterable[str] = CORE_PACKAGES) -> None:
    """Write ``record`` plus ``"cwd"`` (the working directory, against which the relative paths
    the record holds as given — ``--nbest val.nbest``, ``len:src=train.en`` — are read again
    from anywhere: :func:`rerank.features.provenance.trace`) and ``"signature":
    signature(packages)`` as indented JSON to ``path``, atomically (a temp file renamed into
    place: an interrupted run leaves no partial file).  ``path`` None (an output with no file
    beside it to sign: standard output, a device): nothing is written."""
    if path is None:
        return
    with atomic_write(path) as out:
        json.dump({**record, "cwd": record.get("cwd", os.getcwd()), "signature": signature(packages)}, out, indent=2)
