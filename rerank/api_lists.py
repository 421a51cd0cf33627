"""The Python API's verbs on n-best lists held in memory beyond tuning and applying
(:mod:`rerank.api`): the oracle (``rerank oracle``) and truncation (``rerank truncate``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from rerank.api_args import _nbest, _one_or_streams, _references
from rerank.argtypes import positive_int
from rerank.config import spec_of
from rerank.errors import InputError, expect
from rerank.metrics import make_objective
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.nbest import NBestList
from rerank.tuning.oracle import oracle_select


def oracle(
    nbest: NBestList,
    references: Any,
    metric: Union[str, Tuple[str, Dict[str, Any]]] = "bleu",
    tokenize: str = DEFAULT_TOKENIZE,
    lowercase: bool = False,
    lang: Optional[str] = None,
) -> List[str]:
    """The oracle hypothesis of every segment: the selection that maximises the corpus
    ``metric`` against ``references`` (greedy coordinate ascent, as ``rerank oracle``:
    :func:`rerank.tuning.oracle.oracle_select`).  ``references``: one list of strings, or R
    such lists (sacrebleu's form).

    Raises:
        InputError: references of another count, a metric without a direction or unknown;
        TypeError: arguments of the wrong type."""
    nbest = _nbest(nbest)
    streams = _references(references)
    if len(streams[0]) != nbest.num_segments:
        raise InputError(f"{len(streams[0])} references but the n-best list has {nbest.num_segments} segments")
    objective = make_objective(spec_of(metric, "metric"), tokenize, lowercase, lang)
    index = np.arange(len(nbest.hypotheses))
    stats = objective.hypothesis_stats(list(nbest.hypotheses), _one_or_streams(streams), nbest.segment, index)
    return [nbest.hypotheses[i] for i in oracle_select(stats, nbest.offsets, objective)]


def truncate(nbest: NBestList, size: int) -> NBestList:
    """The first ``size`` hypotheses of every segment (``rerank truncate --size``: a 20-best
    list from a 50-best one), columns and list settings kept.

    Raises:
        InputError: a size that is not a positive integer; TypeError: not an NBestList."""
    nbest = _nbest(nbest)
    expect(size, int, "size", "a positive integer")
    try:
        positive_int(str(size))
    except Exception:
        raise InputError(f"truncate(): size must be a positive integer, not {size!r}") from None
    rank = np.arange(len(nbest.hypotheses)) - np.repeat(nbest.offsets[:-1], np.diff(nbest.offsets))
    return nbest.keep(np.flatnonzero(rank < size).astype(np.int64))
