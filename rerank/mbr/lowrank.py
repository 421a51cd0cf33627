"""Low-rank (probabilistic) MBR (Trabelsi et al. 2024, "Efficient Minimum Bayes Risk Decoding
using Low-Rank Matrix Completion Algorithms"; mbrs' ``probabilistic_mbr``): of a segment's
n × m utility matrix only ``ceil(n·m / reduction)`` cells are computed, drawn uniformly without
replacement; the matrix is completed by alternating least squares (ALS) with ``rank`` factors
and L2 weight ``regularization``, and every candidate's expected utility is read off the
completed matrix (as mbrs does: the reconstruction, observed cells included).  Any pairwise
utility; ``reduction`` 1 (or less) computes every cell: exact MBR.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Tuple

import numpy as np

from rerank.argtypes import positive_float, positive_int, ranged
from rerank.argtypes import seed as seed_type
from rerank.config import option
from rerank.defaults import DEFAULT_SEED
from rerank.errors import InputError
from rerank.mbr.decoders import DECODERS, Decoder
from rerank.mbr.exact import ExactDecoder
from rerank.mbr.pairs import same_segments
from rerank.nbest import NBestList

#: the smallest L2 weight of the factors: a row of no observed cell solves ``ridge`` alone, which
#: must stay invertible in float32 (mbrs' precision); 1e-300 was a singular-matrix traceback
MIN_REGULARIZATION = 1e-6
#: the largest rank of the factors: each row's ALS solve holds a rank × rank Gram matrix per
#: candidate (100,000 ran out of memory); an n-best matrix of a few hundred rows needs far less
MAX_RANK = 256
rank_type = ranged(int, lambda v: 1 <= v <= MAX_RANK, f"a rank from 1 to {MAX_RANK}")
regularization_type = ranged(
    float, lambda v: math.isfinite(v) and v >= MIN_REGULARIZATION, f"a finite number ≥ {MIN_REGULARIZATION}"
)


def als_complete(
    observed: np.ndarray,
    mask: np.ndarray,
    rank: int,
    regularization: float,
    iterations: int,
    rng: np.random.Generator,
    tolerance: float = 1e-4,
) -> np.ndarray:
    """The low-rank completion float64[n, m] X·Yᵀ of ``observed`` (float[n, m], read where
    ``mask`` bool[n, m] is True) by alternating least squares (Trabelsi et al. 2024, Algorithm 1;
    as mbrs' ``MatrixFactorizationALS``): X (n × rank) and Y (m × rank) start uniform in
    [0, (n·rank)^-½) and [0, (m·rank)^-½), then each row of X, then of Y, solves its ridge
    problem over its observed cells, for ``iterations`` rounds or until the loss (squared error
    on the observed cells + ``regularization`` · (‖X‖² + ‖Y‖²)) falls by at most ``tolerance``."""
    n, m = observed.shape
    values = np.where(mask, observed, 0.0)
    weight = mask.astype(np.float64)
    x = rng.random((n, rank)) * (n * rank) ** -0.5
    y = rng.random((m, rank)) * (m * rank) ** -0.5
    ridge = regularization * np.eye(rank)
    previous = np.inf  # mbrs starts at 1e5: on 0-100 utilities (chrF, BLEU) it stops after one round
    for _ in range(iterations):
        # each row's normal equations (Yᵀ diag(mask_i) Y + λI) x_i = Yᵀ (mask_i ⊙ u_i), all rows at once:
        # the Gram matrices as one product of the mask with every row's outer product y_j y_jᵀ
        x = np.linalg.solve(_grams(weight, y) + ridge, (values @ y)[:, :, None])[:, :, 0]
        y = np.linalg.solve(_grams(weight.T, x) + ridge, (values.T @ x)[:, :, None])[:, :, 0]
        loss = float(((weight * (values - x @ y.T)) ** 2).sum() + regularization * ((x**2).sum() + (y**2).sum()))
        if previous - loss <= tolerance:
            break
        previous = loss
    return x @ y.T


def _grams(weight: np.ndarray, factors: np.ndarray) -> np.ndarray:
    """float64[n, r, r]: Σ_j weight[i, j] · factors[j] factors[j]ᵀ for every row i of ``weight``
    (float[n, m]; ``factors`` float[m, r]), by one matrix product."""
    m, rank = factors.shape
    outer = (factors[:, :, None] * factors[:, None, :]).reshape(m, rank * rank)
    return (weight @ outer).reshape(len(weight), rank, rank)


def _torch_cells(cells: int, budget: int, seed: int) -> np.ndarray:
    """mbrs' draw of the observed cells: ``torch.randperm`` seeded by ``seed``, the first ``budget``."""
    try:
        import torch
    except ImportError:
        raise InputError("mbr: lowrank draws=mbrs needs torch (the [hf] extra)") from None
    return torch.randperm(cells, generator=torch.Generator().manual_seed(seed))[:budget].numpy()


def mbrs_complete(
    observed: np.ndarray, mask: np.ndarray, rank: int, regularization: float, iterations: int, seed: int
) -> np.ndarray:
    """:func:`als_complete` as mbrs' ``MatrixFactorizationALS.factorize`` runs it: float32, X and Y
    drawn by ``torch.rand`` from a generator seeded by ``seed``, the loss starting at 1e5 (so on
    0–100 utilities it stops after one round), tolerance 1e-4."""
    import torch

    matrix = torch.from_numpy(np.where(mask, observed, 0.0).astype(np.float32))
    weight = torch.from_numpy(mask.astype(np.float32))
    n, m = matrix.shape
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand((n, rank), generator=generator) * (n * rank) ** -0.5
    y = torch.rand((m, rank), generator=generator) * (m * rank) ** -0.5
    ridge = regularization * torch.eye(rank)
    previous = 1e5
    for _ in range(iterations):
        # row by row, in mbrs' order and precision (a batched solve rounds otherwise, and rows of
        # few observed cells are ill-conditioned: the picks would differ)
        for i in range(n):
            x[i, :] = torch.linalg.solve(y.T @ (y * weight[i, :, None]) + ridge, y.T @ matrix[i, :])
        for j in range(m):
            y[j, :] = torch.linalg.solve(x.T @ (x * weight[:, j, None]) + ridge, x.T @ matrix[:, j])
        residual = (weight * (matrix - x @ y.T)) ** 2
        loss = float(residual.sum() + regularization * (x.norm() ** 2 + y.norm() ** 2))
        if previous - loss <= 1e-4:
            break
        previous = loss
    return (x @ y.T).double().numpy()


def lowrank_expected(
    engine,
    candidates: NBestList,
    refs: NBestList,
    p_refs: np.ndarray,
    reduction: float = 8.0,
    rank: int = 8,
    regularization: float = 0.1,
    iterations: int = 10,
    seed: int = DEFAULT_SEED,
    first: int = 0,
    draws: str = "numpy",
) -> Tuple[np.ndarray, int]:
    """(float64[M] every candidate's expected utility read off its segment's completed matrix,
    the utilities computed): per segment ``ceil(n·m / reduction)`` cells drawn without
    replacement from the stream seeded by (seed, first + s), computed by ``engine``
    (:meth:`~rerank.mbr.pairs.PairUtilities.pair_utilities_of`, only the cells asked), the
    matrix completed by :func:`als_complete` (whose start draws from the same stream) and
    weighed by ``p_refs`` (float64[R]).  ``reduction`` ≤ 1: every cell, exact MBR.
    ``draws="mbrs"``: mbrs' ``probabilistic_mbr`` exactly — the cells and the start drawn by
    torch's generator seeded by ``seed`` for every segment, the ALS in float32 with its loss
    starting at 1e5 (:func:`mbrs_complete`) — so that the same matrix and seed give its picks.

    Raises:
        InputError: lists of different segment counts; ``draws="mbrs"`` without torch."""
    same_segments(candidates, refs)
    if reduction <= 1:
        expected = ExactDecoder().expected(engine, candidates, refs, p_refs, first)
        return expected, int((np.diff(candidates.offsets) * np.diff(refs.offsets)).sum())
    expected = np.zeros(len(candidates.hypotheses))
    computed = 0
    for s in range(candidates.num_segments):
        c0, c1 = int(candidates.offsets[s]), int(candidates.offsets[s + 1])
        r0, r1 = int(refs.offsets[s]), int(refs.offsets[s + 1])
        n, m = c1 - c0, r1 - r0
        budget = math.ceil(n * m / reduction)
        if draws == "numpy":  # the cells and the ALS start from segment s's own stream
            rng = np.random.default_rng([seed, first + s])
            cells = rng.permutation(n * m)[:budget]
        else:  # mbrs' draws: torch's generator seeded by seed alone, for every segment
            cells = _torch_cells(n * m, budget, seed)
        hyp, ref = cells // m, cells % m
        gather = engine.pair_utilities_of(
            list(candidates.hypotheses[c0:c1]) + list(refs.hypotheses[r0:r1]), every_pair=False, segment=s
        )
        observed = np.zeros((n, m))
        observed[hyp, ref] = gather(hyp, n + ref)
        mask = np.zeros((n, m), dtype=bool)
        mask[hyp, ref] = True
        if draws == "numpy":
            completed = als_complete(observed, mask, rank, regularization, iterations, rng)
        else:
            completed = mbrs_complete(observed, mask, rank, regularization, iterations, seed)
        expected[c0:c1] = completed @ p_refs[r0:r1]
        computed += len(cells)
    return expected, computed


@DECODERS.register("lowrank")
class LowRankDecoder(Decoder):
    """Low-rank (probabilistic) MBR (Trabelsi et al. 2024; mbrs' ``probabilistic_mbr``):
    :func:`lowrank_expected`; its column is the completed matrix's expected utility."""

    name = "lowrank"
    summary = "low-rank matrix completion (ALS) from 1/reduction of the utilities (Trabelsi et al. 2024)"
    estimate = "low-rank estimated"

    @dataclass
    class Config:
        reduction: float = option(
            8.0,
            "compute 1/reduction of each segment's utilities (mbrs' reduction_factor); 1: all, exact",
            type=positive_float,
        )
        rank: int = option(8, f"rank of the completed matrix's factors (1..{MAX_RANK})", type=rank_type)
        regularization: float = option(0.1, "L2 weight of the factors (at least 1e-6)", type=regularization_type)
        iterations: int = option(10, "alternating least-squares rounds at most", type=positive_int)
        seed: int = option(DEFAULT_SEED, "seed of the draws (rerank's seed of every draw)", type=seed_type)
        draws: str = option(
            "numpy",
            "numpy (rerank's stream per segment) or mbrs (its probabilistic_mbr exactly: torch's draws from seed for "
            "every segment, float32 ALS; its picks with --seed 0)",
        )

    def advice(self, candidates, references):
        c = self.config
        if c.reduction <= 1 or not len(references):
            return None
        observed = float(np.median(references)) / c.reduction  # cells drawn per candidate's row
        if c.rank >= observed:
            return (
                f"lowrank: rank {c.rank} ≥ the {observed:.1f} cells observed per candidate row (median "
                f"{np.median(references):.0f} pseudo-references / reduction {c.reduction:g}): the completion is "
                "underdetermined and its picks drift from exact's (7.6 % agreement seen on a 20-best list): "
                "--algorithm exact, a smaller --rank or a smaller --reduction"
            )
        return None

    def check(self, engine) -> None:
        super().check(engine)
        if self.config.draws not in ("numpy", "mbrs"):
            raise InputError(f"mbr: lowrank draws must be numpy or mbrs, not {self.config.draws!r}")

    def estimates(self, engine, candidates, refs, p_refs, first=0):
        c = self.config
        expected, computed = lowrank_expected(
            engine,
            candidates,
            refs,
            p_refs,
            c.reduction,
            c.rank,
            c.regularization,
            c.iterations,
            c.seed,
            first,
            c.draws,
        )
        return engine.check_finite(expected, candidates, first), computed

    def expected(self, engine, candidates, refs, p_refs, first=0):
        return self.estimates(engine, candidates, refs, p_refs, first)[0]
