"""Minimum Bayes-risk decoding (Kumar & Byrne 2004) over n-best lists: the engine
(:class:`~rerank.mbr.engine.MBR`), one module per algorithm — exact (:mod:`~rerank.mbr.exact`),
reference aggregation (:mod:`~rerank.mbr.aggregate`, Vamvas & Sennrich 2024), centroid
(:mod:`~rerank.mbr.centroid`, Deguchi et al. 2024), confidence-based pruning
(:mod:`~rerank.mbr.pruned`, Cheng & Vlachos 2023) — pre-filters that keep the top K
candidates first (:mod:`~rerank.mbr.prefilter`: coarse-to-fine, QE) and ``rerank mbr``'s
decoding (:mod:`~rerank.mbr.decode`).

The utility is any registered metric with a pairwise utility (:mod:`rerank.metrics.utility`):
BLEU, chrF and TER today; a new one is one metric module.  The ``mbr:`` feature
(:class:`rerank.features.consensus.ConsensusScorer`) is the same engine's exact column.
"""

from rerank.mbr.decode import mbr_decode
from rerank.mbr.engine import MBR, make_utility, mbr_utilities
from rerank.mbr.pairs import list_pairs, list_softmax, pair_groups

__all__ = ["MBR", "make_utility", "mbr_decode", "mbr_utilities", "list_pairs", "list_softmax", "pair_groups"]
