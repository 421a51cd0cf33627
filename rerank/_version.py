"""rerank's version, the one source: ``pyproject.toml`` reads it (``[tool.setuptools.dynamic]``),
``rerank.__version__``, signatures, reports and the tuning cache's key take it from here."""

__version__ = "0.1.0"
