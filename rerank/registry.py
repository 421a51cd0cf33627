"""Name -> class registries, one shape for every pluggable component (metrics in
``rerank/metrics/``, feature scorers in ``rerank/features/``), after mbrs' registries.

A module adds a component with the ``@REGISTRY.register("name")`` decorator; a second
class under the same name is a programming error (``ValueError`` at import time); an
unknown name asked for by a user is an :class:`InputError` listing the known ones.
"""

from __future__ import annotations

import importlib
from typing import Callable, Dict, Iterable, List, TypeVar

from rerank.errors import InputError

T = TypeVar("T")


class Registry:
    """Classes of one ``kind`` by name; ``builtin`` modules are imported before the
    first lookup so that their decorators have run."""

    def __init__(self, kind: str, builtin: Iterable[str] = ()):
        self.kind = kind
        self._classes: Dict[str, type] = {}
        self._builtin = tuple(builtin)
        self._loaded = False

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator adding the class under ``name``.  Raises ValueError if taken."""

        def wrap(cls):
            if name in self._classes and self._classes[name] is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} is registered twice ({self._classes[name].__module__}, {cls.__module__})"
                )
            self._classes[name] = cls
            return cls

        return wrap

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtin:
                importlib.import_module(module)

    def get(self, name: str) -> type:
        """The class registered as ``name``.  Raises :class:`InputError` for an unknown name."""
        self._load()
        if name not in self._classes:
            raise InputError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._classes[name]

    def names(self) -> List[str]:
        """Registered names, sorted."""
        self._load()
        return sorted(self._classes)
