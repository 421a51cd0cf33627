"""Signatures: the settings and library versions stamped on every artifact."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Dict, Iterable

from rerank import __version__

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
