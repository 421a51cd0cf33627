"""What tuning, oracle selection and cross-fitting read: an n-best list with the BLEU
sufficient statistics of every hypothesis, kept as numbers only.

The list is streamed block by block (:func:`rerank.nbest.iter_nbest`); each block's
statistics are computed against its segments' references and its hypotheses are packed
into one UTF-8 buffer (:class:`rerank.nbest.PackedStrings`), so a whole list costs its
features (8 bytes each), 9 statistics (72 bytes) and the hypotheses' bytes — no Python
string per hypothesis.
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

from rerank.bleu import BleuSettings
from rerank.errors import InputError
from rerank.nbest import NBestList, PackedStrings, iter_nbest
from rerank.textio import read_lines


def load_tuning_data(nbest_path: str, ref_path: str, bleu: BleuSettings = BleuSettings()
                     ) -> Tuple[NBestList, List[str], np.ndarray]:
    """(n-best list with packed hypotheses, no totals and its :class:`~rerank.nbest.ListInfo`,
    references, BLEU statistics float64[M, 9] under ``bleu``) of a tuning, oracle or
    cross-fitting run.

    Raises:
        InputError: unreadable files, a segment count that differs from the references'.
    """
    refs = read_lines(ref_path)
    offsets, features, stats, packed = [np.zeros(1, np.int64)], [], [], []
    names, info = None, None
    for first, block in iter_nbest(nbest_path):
        last = first + block.num_segments
        offsets.append(block.offsets[1:] + offsets[-1][-1])
        if last > len(refs):  # count the rest only, to name the numbers
            continue
        stats.append(bleu.stats(block.hypotheses, refs[first:last], block.segment))
        features.append(block.features)
        packed.append(PackedStrings.from_strings(block.hypotheses))
        names, info = block.feature_names, block.info
    segments = sum(len(o) for o in offsets) - 1
    if segments != len(refs):
        raise InputError(f"{segments} segments in the n-best list but {len(refs)} references", nbest_path)
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
        out[row:row + len(part)] = part
        row += len(part)
    return out
