"""K MBR choices per segment (``rerank mbr --keep K --out-kbest FILE``; mbrs' ``nbest`` and
``diverse`` selectors): the K distinct candidates of the highest expected utility, or, with a
diversity weight λ > 0, the K distinct candidates that maximise

    mean expected utility of the set + λ · mean dissimilarity of its ordered pairs,

the dissimilarity of two candidates being minus their utility (mbrs' ``SelectorDiverse``
objective, Jinnai et al. 2024, "Generating Diverse and High-Quality Texts by Minimum Bayes
Risk Decoding", with the MBR utility as its diversity metric), found as mbrs finds it: a
greedy best-first set, then a seeded local search (:class:`LocalSearch`: each round takes
``neighbors`` members out at random and puts the best ones back, kept where the objective does
not fall).  The kept candidates are written best expected utility first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, List, Sequence, Tuple

import numpy as np

from rerank.argtypes import non_negative_int, positive_int
from rerank.argtypes import seed as seed_type
from rerank.config import check_config, option
from rerank.errors import InputError
from rerank.nbest import NBestList


@dataclass(frozen=True)
class LocalSearch:
    """The local search after the greedy diverse set (mbrs' ``SelectorDiverse.search_local``,
    its defaults): ``iterations`` rounds, each taking ``neighbors`` members of the set out
    (positions drawn as a permutation of the K members, the first ``neighbors``) and adding
    back, one at a time, the candidate that maximises the objective; a round that lowers the
    objective is undone.  ``draws="numpy"``: segment s's own stream, seeded by (seed, s);
    ``draws="mbrs"``: torch's ``randperm`` from a generator seeded by ``seed`` for every
    segment, as mbrs draws (its picks on the same utilities; needs torch)."""

    iterations: int = option(
        20, "rounds of the local search after the greedy set (0: greedy only)", type=non_negative_int
    )
    neighbors: int = option(1, "members taken out and put back each round", type=positive_int)
    seed: int = option(0, "seed of the draws", type=seed_type)
    draws: str = option(
        "numpy", "numpy (rerank's stream per segment) or mbrs (torch's randperm from seed for every segment, as mbrs)"
    )

    def check(self) -> None:
        """Raises InputError: a setting out of its type or range (as the command line's
        ``--local-search-*``), ``draws`` other than numpy or mbrs, or mbrs without torch."""
        check_config(self, "local search")
        if self.draws not in ("numpy", "mbrs"):
            raise InputError(f"--local-search-draws must be numpy or mbrs, not {self.draws!r}")
        if self.draws == "mbrs":
            try:
                import torch  # noqa: F401
            except ImportError:
                raise InputError("--local-search-draws mbrs needs torch (the [hf] extra)") from None

    def drawer(self, segment: int) -> Callable[[int], np.ndarray]:
        """A function of K giving each round's permutation of the K members, for one segment."""
        if self.draws == "numpy":
            rng = np.random.default_rng([self.seed, segment])
            return rng.permutation
        import torch

        generator = torch.Generator().manual_seed(self.seed)
        return lambda k: torch.randperm(k, generator=generator).numpy()


def keep_best(
    engine,
    candidates: NBestList,
    expected: np.ndarray,
    keep: int,
    diversity: float = 0.0,
    search: LocalSearch = LocalSearch(),
    first: int = 0,
) -> Tuple[NBestList, int]:
    """(the list of the kept candidates, segment by segment, best expected utility first, its
    one column the expected utility named as the engine's; the utilities computed for the
    dissimilarities: n·(n − 1) a segment of n distinct texts where ``diversity`` > 0).

    Args:
        engine: the MBR engine (:class:`rerank.mbr.engine.MBR`; its utility measures the
            candidates' similarity when ``diversity`` > 0).
        candidates: the list (a block of it, whose segment 0 is segment ``first`` of the list:
            the numpy draws of the local search follow the list's segment).
        expected: float64[M] every candidate's expected utility.
        keep: K ≥ 1 choices per segment (fewer where a segment has fewer distinct texts).
        diversity: λ ≥ 0.
        search: the local search after the greedy set (λ > 0 only)."""
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
            objective = _Objective(scores[distinct], -similarity, diversity)
            chosen = objective.greedy(min(keep, n))
            chosen = objective.local_search(chosen, search, search.drawer(first + s))
            picked = distinct[chosen]
        else:
            picked = distinct[np.argsort(-scores[distinct], kind="stable")[:keep]]
        order = np.argsort(-scores[picked], kind="stable")
        rows.append(c0 + picked[order])
    top = np.concatenate(rows)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])])
    kept = NBestList(offsets, [candidates.hypotheses[i] for i in top], expected[top][:, None], [engine.column])
    return kept, computed


class _Objective:
    """mbrs' diverse objective of a set S of k candidates: mean score over S + λ · the sum of
    the off-diagonal dissimilarities within S / k / max(k − 1, 1)."""

    def __init__(self, scores: np.ndarray, dissimilarity: np.ndarray, diversity: float):
        self.scores, self.diversity = scores, diversity
        self.off = dissimilarity.copy()  # float[n, n]
        np.fill_diagonal(self.off, 0.0)

    def of(self, selected: np.ndarray) -> float:
        """The objective of the set ``selected`` (bool[n])."""
        k = int(selected.sum())
        pairs = self.off[np.ix_(selected, selected)].sum()
        return float(self.scores[selected].sum() / k + self.diversity * pairs / k / max(k - 1, 1))

    def best_addition(self, selected: np.ndarray) -> int:
        """The candidate not in ``selected`` (bool[n]) whose addition gives the highest
        objective (the earlier on ties, as mbrs' strict comparison)."""
        k = int(selected.sum()) + 1
        off = self.off
        pairs = off[np.ix_(selected, selected)].sum()
        with_i = (self.scores[selected].sum() + self.scores) / k + self.diversity * (
            pairs + off[:, selected].sum(axis=1) + off[selected, :].sum(axis=0)
        ) / k / max(k - 1, 1)
        with_i[selected] = -np.inf
        return int(np.argmax(with_i))

    def greedy(self, keep: int) -> np.ndarray:
        """Greedy best-first choice of ``keep`` candidates: bool[n]."""
        selected = np.zeros(len(self.scores), dtype=bool)
        for _ in range(keep):
            selected[self.best_addition(selected)] = True
        return selected

    def local_search(self, selected: np.ndarray, search: LocalSearch, draw: Callable[[int], np.ndarray]) -> np.ndarray:
        """``selected`` (bool[n], K members) improved by ``search``'s rounds: bool[n]."""
        keep = int(selected.sum())
        neighbors = min(search.neighbors, keep)
        for _ in range(search.iterations):
            previous = selected.copy()
            members = np.flatnonzero(selected)
            selected[members[draw(keep)[:neighbors]]] = False
            for _ in range(neighbors):
                selected[self.best_addition(selected)] = True
            if self.of(previous) > self.of(selected):
                selected = previous
        return selected


__all__: Sequence[str] = ["LocalSearch", "keep_best"]
