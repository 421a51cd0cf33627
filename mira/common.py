"""What every tuner checks and converts first."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from rerank.bleu import NUM_STATS


def tuning_arrays(features, stats, offsets, init: Optional[np.ndarray] = None
                  ) -> Tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(features float64[M, F], stats float64[M, 9], offsets int64[N + 1], initial weights
    float64[F]) as contiguous arrays; ``init`` None means zeros.

    Raises:
        ValueError: the three arrays do not describe one n-best list (an empty segment,
            offsets not from 0 to M, statistics of another shape), or ``init`` has the
            wrong shape.
    """
    features = np.ascontiguousarray(features, dtype=np.float64)
    stats = np.ascontiguousarray(stats, dtype=np.float64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    M, F = features.shape
    if stats.shape != (M, NUM_STATS) or offsets[0] != 0 or offsets[-1] != M or np.any(np.diff(offsets) < 1):
        raise ValueError("features, stats and offsets do not describe the same n-best list")
    w = np.zeros(F) if init is None else np.array(init, dtype=np.float64)
    if w.shape != (F,):
        raise ValueError(f"initial weights have shape {w.shape}, expected ({F},)")
    return features, stats, offsets, w
