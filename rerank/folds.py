"""K-fold cross-fitting by image: which segments a model or a tuner may see.

A *folds file* assigns each segment of a test set (one line per segment, in segment
order) to one of K folds, keyed by the segment's image::

    1007129816.jpg<TAB>3
    1009434119.jpg<TAB>0

All segments of one image share its fold.  Cross-fitting (Chernozhukov et al. 2018's
sample splitting; here as issue 9 of this project defines it for s_i, the image feature
of Calixto & Liu 2017): for fold k, the embedding model is trained with the images of the
other folds only, fold k's hypotheses are scored with that model, feature weights are
tuned on the other folds' lists and applied to fold k; the re-ranked test set is the
concatenation of the K folds in segment order.  No hypothesis is scored or selected by a
model or weights that saw its image or its reference.

The assignment is a seeded permutation of the distinct image names (sorted first, so the
order of the input does not matter) dealt round-robin into K folds: fold sizes differ by
at most one image.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from rerank.errors import InputError
from rerank.outputs import atomic_write
from rerank.textio import read_lines


@dataclass
class Folds:
    """Fold of every segment.

    Attributes:
        images: N image names, one per segment (segment order).
        fold: int64[N] fold index in 0..k-1 of each segment.
        k: number of folds K (every fold holds at least one segment).
    """

    images: List[str]
    fold: np.ndarray
    k: int

    def segments(self, fold: int, held_out: bool = True) -> np.ndarray:
        """int64 segment indices (ascending) of fold ``fold`` (``held_out``) or of all the
        other folds (``held_out=False``: the part a fold's model or tuner may see)."""
        mask = self.fold == fold
        return np.flatnonzero(mask if held_out else ~mask)

    def image_fold(self) -> Dict[str, int]:
        """image name -> fold."""
        return {name: int(f) for name, f in zip(self.images, self.fold)}


def assign_folds(images: Sequence[str], k: int, seed: int = 1) -> Folds:
    """Deal the distinct images of ``images`` (one per segment) into ``k`` folds (module
    docstring).

    Raises:
        InputError: k < 2, or fewer distinct images than folds.
    """
    if k < 2:
        raise InputError(f"cross-fitting needs at least 2 folds, not {k}")
    distinct = sorted(set(images))
    if len(distinct) < k:
        raise InputError(f"{len(distinct)} distinct images cannot fill {k} folds")
    order = np.random.RandomState(seed).permutation(len(distinct))
    of_image = {distinct[i]: rank % k for rank, i in enumerate(order)}
    return Folds(list(images), np.array([of_image[name] for name in images], dtype=np.int64), k)


def write_folds(folds: Folds, path: str) -> None:
    """Write ``image<TAB>fold`` per segment, atomically."""
    with atomic_write(path) as out:
        for name, f in zip(folds.images, folds.fold):
            out.write(f"{name}\t{int(f)}\n")


def read_folds(path: str, num_segments: Optional[int] = None) -> Folds:
    """Read a folds file.

    Raises:
        InputError: naming file and line, for a line that is not ``image<TAB>integer``, a
            negative fold, one image in two folds, folds 0..K-1 not all present, or a
            segment count different from ``num_segments``.
    """
    lines = read_lines(path)
    if not lines:
        raise InputError("no segments", path)
    images: List[str] = []
    fold: List[int] = []
    seen: Dict[str, int] = {}
    for lineno, line in enumerate(lines, start=1):
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0]:
            raise InputError("expected image<TAB>fold", path, lineno)
        try:
            value = int(parts[1])
        except ValueError:
            raise InputError(f"fold {parts[1]!r} is not an integer", path, lineno) from None
        if value < 0:
            raise InputError(f"fold {value} is negative", path, lineno)
        if seen.setdefault(parts[0], value) != value:
            raise InputError(f"image {parts[0]} is in folds {seen[parts[0]]} and {value}", path, lineno)
        images.append(parts[0])
        fold.append(value)
    k = max(fold) + 1
    missing = sorted(set(range(k)) - set(fold))
    if missing or k < 2:
        raise InputError(f"folds must be 0..K-1 with K ≥ 2, all present; missing {missing or 'a second fold'}", path)
    if num_segments is not None and len(images) != num_segments:
        raise InputError(f"{len(images)} segments in the folds file but {num_segments} in the n-best list", path)
    return Folds(images, np.asarray(fold, dtype=np.int64), k)
