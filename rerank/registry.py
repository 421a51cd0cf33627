"""Name -> class registries, one shape for every pluggable component (metrics in
``rerank/metrics/``, feature scorers in ``rerank/features/``, tuners in ``rerank/tuning/``),
after mbrs' registries.

A module adds a component with the ``@REGISTRY.register("name")`` decorator, and that is
all: the registry finds its package's modules by reading their source for that decorator
(no list of modules to keep in step), and imports a module only when one of its names is
asked for — so asking for ``mbr:`` imports neither the fairseq nor the Hugging Face scorer
module, and a component that needs torch costs nothing until it is used. A second class
under the same name is a programming error (``ValueError`` at import time); an unknown name
asked for by a user is an :class:`InputError` listing the known ones.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
from typing import Callable, Dict, Generic, List, Type, TypeVar

from rerank.errors import InputError

T = TypeVar("T")


class Registry(Generic[T]):
    """Classes of one ``kind`` by name, registered by the modules of ``package`` with the
    decorator ``@VARIABLE.register("name")`` (``variable``: the name this registry is bound
    to in those modules, e.g. ``METRICS``).

    Args:
        kind: what a component is, for messages (``metric``, ``scorer``, ``tuner``).
        package: the dotted package whose modules register here (``rerank.metrics``).
        variable: the registry's name in those modules.
    """

    def __init__(self, kind: str, package: str, variable: str):
        self.kind = kind
        self.package = package
        self._pattern = re.compile(r"^@" + re.escape(variable) + r"\.register\(\s*['\"]([^'\"]+)['\"]", re.M)
        self._classes: Dict[str, Type[T]] = {}
        self._index: Dict[str, str] = {}  # name -> module that registers it (from the source)
        self._indexed = False

    def register(self, name: str) -> Callable[[Type[T]], Type[T]]:
        """Class decorator adding the class under ``name``.  Raises ValueError if taken."""

        def wrap(cls: Type[T]) -> Type[T]:
            if name in self._classes and self._classes[name] is not cls:
                raise ValueError(
                    f"{self.kind} {name!r} is registered twice ({self._classes[name].__module__}, {cls.__module__})"
                )
            self._classes[name] = cls
            return cls

        return wrap

    def modules(self) -> Dict[str, str]:
        """{name: module} of every component the package's modules register, read from
        their source once (no module is imported)."""
        if not self._indexed:
            self._indexed = True
            spec = importlib.util.find_spec(self.package)
            if spec is None:  # the package itself is missing: nothing registers
                return self._index
            for info in pkgutil.iter_modules(list(spec.submodule_search_locations or [])):
                if info.ispkg or info.name.startswith("_"):
                    continue
                path = os.path.join(getattr(info.module_finder, "path", ""), info.name + ".py")
                try:
                    with open(path, encoding="utf-8") as source:
                        names = self._pattern.findall(source.read())
                except OSError:  # a compiled module without its source
                    continue
                for name in names:
                    self._index.setdefault(name, f"{self.package}.{info.name}")
        return self._index

    def get(self, name: str) -> Type[T]:
        """The class registered as ``name`` (its module imported on first use).

        Raises:
            InputError: an unknown name, naming the known ones.
        """
        if name not in self._classes and name in self.modules():
            importlib.import_module(self.modules()[name])
        if name not in self._classes:
            raise InputError(f"unknown {self.kind} {name!r}; known: {', '.join(self.names())}")
        return self._classes[name]

    def names(self) -> List[str]:
        """Every name, sorted: those the package's modules register and any registered
        from elsewhere (a user's module imported before the command line)."""
        return sorted(set(self.modules()) | set(self._classes))

    def classes(self) -> Dict[str, Type[T]]:
        """{name: class} of every component, importing the modules that define them."""
        return {name: self.get(name) for name in self.names()}
