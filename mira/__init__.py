"""k-best batch MIRA (Cherry & Foster 2012), following Moses ``kbmira``."""

from mira.kbmira import MiraConfig, MiraResult, tune

__all__ = ["MiraConfig", "MiraResult", "tune"]
