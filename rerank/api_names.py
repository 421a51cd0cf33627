"""The names of the public Python API, listed once: ``rerank/__init__.py`` loads them from
:mod:`rerank.api` on first use (``import rerank`` stays light) and :mod:`rerank.api` exports
them (its ``__all__``)."""

#: the public API, defined in rerank/api.py (the top floor, beside the command line)
API = (
    "read_nbest",
    "write_nbest",
    "read_lines",
    "NBestList",
    "add_features",
    "tune",
    "Tuning",
    "apply",
    "oracle",
    "truncate",
    "read_weights",
    "write_weights",
    "decoder_1best",
    "evaluate",
    "Score",
    "significance",
    "format_table",
    "mbr_decode",
    "MBRResult",
    "generate",
)
