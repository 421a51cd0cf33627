"""What tuning, oracle selection and cross-fitting read: an n-best list with the
sufficient statistics of every hypothesis under the metric optimised (BLEU by default),
kept as numbers only.

The list is streamed block by block (:func:`rerank.nbest.iter_nbest`); each block's
statistics are computed against its segments' references and its hypotheses are packed
into one UTF-8 buffer (:class:`rerank.nbest.PackedStrings`), so a whole list costs its
features (8 bytes each), the statistics (BLEU: 9, 72 bytes) and the hypotheses' bytes — no Python
string per hypothesis.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import numpy as np

from rerank.bleu import BleuSettings, references_slice, segment_count
from rerank.errors import InputError
from rerank.metrics import Metric
from rerank.nbest import NBestList, PackedStrings, iter_nbest
from rerank.textio import read_references


def load_tuning_data(
    nbest_path: str,
    ref_path: Union[str, Sequence[str]],
    bleu: BleuSettings = BleuSettings(),
    metric: Optional[Metric] = None,
) -> Tuple[NBestList, List, np.ndarray]:
    """(n-best list with packed hypotheses, no totals and its :class:`~rerank.nbest.ListInfo`,
    references, statistics float64[M, K] of every hypothesis) of a tuning, oracle or
    cross-fitting run (``ref_path``: one reference file, or several: several references
    per segment, :func:`rerank.textio.read_references`): ``metric``'s statistics (bound to the list, so ``seg:NAME`` reads
    ``NBEST.NAME``, one score per hypothesis), or BLEU's under ``bleu`` when None.

    Raises:
        InputError: unreadable files, a segment count that differs from the references',
            a ``seg:`` sidecar of another line count.
    """
    bound = metric.bind(nbest_path) if metric is not None else None
    refs = read_references(ref_path)
    count = segment_count(refs)
    offsets, features, stats, packed = [np.zeros(1, np.int64)], [], [], []
    names, info, row = None, None, 0
    for first, block in iter_nbest(nbest_path):
        last = first + block.num_segments
        offsets.append(block.offsets[1:] + offsets[-1][-1])
        if last > count:  # count the rest only, to name the numbers
            continue
        part = references_slice(refs, first, last)
        if bound is None:
            stats.append(bleu.stats(block.hypotheses, part, block.segment))
        else:
            rows = np.arange(len(block.hypotheses)) + row
            stats.append(bound.hypothesis_stats(block.hypotheses, part, block.segment, rows))
        row += len(block.hypotheses)
        features.append(block.features)
        packed.append(PackedStrings.from_strings(block.hypotheses))
        names, info = block.feature_names, block.info
    segments = sum(len(o) for o in offsets) - 1
    if segments != count:
        raise InputError(f"{segments} segments in the n-best list but {count} references", nbest_path)
    if bound is not None:
        bound.check_count(row)
    hypotheses = PackedStrings.concat(packed)
    del packed
    nbest = NBestList(np.concatenate(offsets), hypotheses, _concat(features), names, info=info)
    return nbest, refs, _concat(stats)


def _concat(arrays: List[np.ndarray]) -> np.ndarray:
    """Concatenate and free the parts as it goes (peak: the result plus one part)."""
    out = np.empty((sum(len(a) for a in arrays),) + arrays[0].shape[1:], dtype=arrays[0].dtype)
    row = 0
    while arrays:
        part = arrays.pop(0)
        out[row : row + len(part)] = part
        row += len(part)
    return out
