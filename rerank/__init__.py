"""rerank: re-ranking of neural machine translation n-best lists.

One import name for the whole project (distribution ``nbest-rerank``): the core
(``rerank.nbest``, ``rerank.metrics``, ``rerank.signif``, …) and the tuners (``rerank.tuning``)
depend only on numpy and sacrebleu (plus small C files compiled at install); the NMT side
(``rerank.nmt``), the embeddings (``rerank.embed``) and the model scorers of
``rerank.features`` need the extras (torch, fairseq, transformers, …).

The Python API (:mod:`rerank.api`, docs/usage/python.md)::

    import rerank
    nbest = rerank.read_nbest("val.nbest")                     # NBestList
    nbest = rerank.add_features(nbest, ["mbr:bleu"])            # scorers as rerank features add --scorer
    tuned = rerank.tune(nbest, rerank.read_lines("val.de"), algorithm="mert", tokenize="none")
    best = rerank.apply(test_nbest, tuned)                      # the re-ranked 1-best
    rerank.evaluate(best, test_refs, metrics=["bleu", "chrf"])
    rerank.significance(test_refs, [beam_1best], {"+mbr": [best]})

``read_nbest``, ``write_nbest``, ``read_lines``, ``NBestList``, ``add_features``, ``tune``, ``Tuning``, ``apply``,
``evaluate``, ``significance`` and ``format_table`` are loaded on first use, so ``import rerank`` loads none of the
layers above the core.
"""

import importlib

from rerank._version import __version__
from rerank.api_names import API
from rerank.defaults import DEFAULT_SEED

__all__ = ["__version__", "DEFAULT_SEED", *API]


def __getattr__(name: str):
    """The API names, from :mod:`rerank.api` on first use (PEP 562)."""
    if name in API:
        return getattr(importlib.import_module("rerank.api"), name)
    raise AttributeError(f"module 'rerank' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(API))
