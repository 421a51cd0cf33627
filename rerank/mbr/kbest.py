"""K MBR choices per segment (``rerank mbr --keep K --out-kbest FILE``; mbrs' ``nbest`` and
``diverse`` selectors): the K distinct candidates of the highest expected utility, or, with a
diversity weight λ > 0, the K distinct candidates chosen greedily best-first to maximise

    mean expected utility of the set + λ · mean dissimilarity of its ordered pairs,

the dissimilarity of two candidates being minus their utility (mbrs' ``SelectorDiverse``
objective, Jinnai et al. 2024, "Generating Diverse and High-Quality Texts by Minimum Bayes
Risk Decoding", with the MBR utility as its diversity metric; mbrs then runs a seeded local
search, which is left out here: the greedy set is returned).  The first choice is always the
MBR choice; the kept candidates are written best expected utility first.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

import numpy as np

from rerank.nbest import NBestList


def keep_best(
    engine, candidates: NBestList, expected: np.ndarray, keep: int, diversity: float = 0.0
) -> Tuple[NBestList, int]:
    """(the list of the kept candidates, segment by segment, best expected utility first, its
    one column the expected utility named as the engine's; the utilities computed for the
    dissimilarities: n·(n − 1) a segment of n distinct texts where ``diversity`` > 0).

    Args:
        engine: the MBR engine (:class:`rerank.mbr.engine.MBR`; its utility measures the
            candidates' similarity when ``diversity`` > 0).
        candidates: the list (a block of it).
        expected: float64[M] every candidate's expected utility.
        keep: K ≥ 1 choices per segment (fewer where a segment has fewer distinct texts).
        diversity: λ ≥ 0."""
    rows: List[np.ndarray] = []
    computed = 0
    for s in range(candidates.num_segments):
        c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
        texts = list(candidates.hypotheses[c0:c1])
        first_of: Dict[str, int] = {}
        for i, text in enumerate(texts):
            first_of.setdefault(text, i)
        distinct = np.array(sorted(first_of.values()), dtype=np.int64)  # each text once, its first row
        scores = expected[c0:c1]
        if diversity > 0 and len(distinct) > 1:
            n = len(distinct)
            gather = engine.pair_utilities_of([texts[i] for i in distinct], segment=s)
            similarity = gather(np.repeat(np.arange(n), n), np.tile(np.arange(n), n)).reshape(n, n)
            computed += n * (n - 1)
            chosen = _greedy(scores[distinct], -similarity, min(keep, n), diversity)
            picked = distinct[chosen]
        else:
            picked = distinct[np.argsort(-scores[distinct], kind="stable")[:keep]]
        order = np.argsort(-scores[picked], kind="stable")
        rows.append(c0 + picked[order])
    top = np.concatenate(rows)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    kept = NBestList(offsets, [candidates.hypotheses[i] for i in top], expected[top][:, None], [engine.column])
    return kept, computed


def _greedy(scores: np.ndarray, dissimilarity: np.ndarray, keep: int, diversity: float) -> List[int]:
    """Greedy best-first choice of ``keep`` indices maximising mean score + ``diversity`` ·
    mean off-diagonal ``dissimilarity`` (float[n, n]) of the set (the earlier on ties)."""
    off = dissimilarity.copy()
    np.fill_diagonal(off, 0.0)
    chosen: List[int] = []
    for k in range(1, keep + 1):
        taken = np.zeros(len(scores), dtype=bool)
        taken[chosen] = True
        base_score = scores[chosen].sum()
        base_pairs = off[np.ix_(chosen, chosen)].sum() if chosen else 0.0
        # adding i: its score, and its dissimilarity to and from every chosen one
        with_i = (base_score + scores) / k + diversity * (
            base_pairs + off[:, chosen].sum(axis=1) + off[chosen, :].sum(axis=0)
        ) / k / max(k - 1, 1)
        with_i[taken] = -np.inf
        chosen.append(int(np.argmax(with_i)))
    return chosen


__all__: Sequence[str] = ["keep_best"]
