"""Applying weights and cutting lists, streamed block by block (:func:`rerank.nbest.iter_nbest`):
memory is bounded by a block, not the list.  ``rerank apply`` and ``rerank truncate``."""

from __future__ import annotations

import contextlib
from typing import Optional

import numpy as np

from rerank.errors import InputError
from rerank.folds import read_folds
from rerank.nbest import NBestWriter, finite_scores, iter_nbest, read_weights, weights_vector, write_list_info
from rerank.outputs import StagedOutputs


def apply_file(nbest_path: str, weights_path: str, out: str, out_nbest: Optional[str] = None,
               folds_path: Optional[str] = None) -> int:
    """Write the best hypothesis of every segment of ``nbest_path`` under the weights of
    ``weights_path`` to ``out`` (and, with ``out_nbest``, the list with totals = weighted
    scores).  With ``folds_path`` (:mod:`rerank.folds`), fold k's segments use the weights
    file whose path has ``{fold}`` replaced by k.  Outputs appear together or not at all.
    Returns the number of segments.

    Raises:
        InputError: unreadable files, weights that name no column or overflow, a folds
            file of another segment count, ``folds_path`` without ``{fold}`` in ``weights_path``.
    """
    folds = None
    if folds_path:
        if "{fold}" not in weights_path:
            raise InputError("--folds needs {fold} in the --weights path (one weights file per fold)")
        folds = read_folds(folds_path)
        sources = [weights_path.replace("{fold}", str(k)) for k in range(folds.k)]
    else:
        sources = [weights_path]
    weights = [read_weights(path) for path in sources]  # every weights file checked before the list is read
    vectors = None
    segments = 0
    with StagedOutputs() as outputs:
        with outputs.open(out) as handle, contextlib.ExitStack() as stack:
            writer = NBestWriter(stack.enter_context(outputs.open(out_nbest))) if out_nbest else None
            for first, block in iter_nbest(nbest_path):
                if vectors is None:
                    vectors = np.stack([weights_vector(w, block, path) for w, path in zip(weights, sources)])
                with np.errstate(over="ignore", invalid="ignore"):
                    table = block.features @ vectors.T  # float[M, folds]
                if folds is None:
                    scores = table[:, 0]
                else:
                    last = first + block.num_segments
                    if last > len(folds.fold):
                        raise InputError(f"more than {len(folds.fold)} segments in the n-best list "
                                         "(the folds file's count)", nbest_path)
                    scores = table[np.arange(len(table)), folds.fold[first:last][block.segment]]
                finite_scores(scores, nbest_path, sources[0] if folds is None else weights_path)
                best = block.select(scores)
                handle.write("".join(block.hypotheses[i] + "\n" for i in best))
                if writer is not None:
                    writer.write(block, first, scores)
                segments = first + block.num_segments
        if folds is not None and segments != len(folds.fold):
            raise InputError(f"{len(folds.fold)} segments in the folds file but {segments} in the n-best list",
                             folds_path)
    return segments


def truncate_file(nbest_path: str, size: int, out: str) -> int:
    """Write the first ``size`` hypotheses of every segment of ``nbest_path`` to ``out``
    with its signature ``out.json`` (list settings carried on).  Returns the hypotheses written."""
    names, hypotheses, info = None, 0, None
    with StagedOutputs() as outputs:  # the list and its signature together
        with outputs.open(out) as handle:
            writer = NBestWriter(handle)
            for first, block in iter_nbest(nbest_path):
                block = block.head(size)
                writer.write(block, first)
                names, hypotheses, info = block.feature_names, hypotheses + len(block.hypotheses), block.info
        write_list_info(outputs.stage(out + ".json"), info,
                        {"input": nbest_path, "head": size, "features": names, "hypotheses": hypotheses})
    return hypotheses
