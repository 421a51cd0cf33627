"""The samplers of ``rerank generate --sampling`` (and ``--pseudo-ref-sampling``): ancestral
sampling with a temperature and the truncations people draw MBR candidates with.

* temperature ``T``: logits / T before everything else (T < 1 sharpens, T > 1 flattens);
* top-k (Fan et al. 2018): only the ``k`` most probable tokens (ties at the k-th kept);
* nucleus, top-p (Holtzman et al. 2020): the smallest set of most probable tokens whose
  probability reaches ``p``;
* epsilon (Hewitt et al. 2022, "Truncation Sampling as Language Model Desmoothing"; the
  candidate generator of MBR and quality-aware decoding, Freitag et al. 2023): tokens of
  probability below ε removed;
* ancestral: none of them, the model's own distribution.

They combine, in Hugging Face ``generate``'s order (temperature, top-k, top-p, epsilon, each
on what the previous left, renormalised), and every step keeps at least the most probable
token.  Hugging Face runs them as its own ``LogitsWarper`` s (``do_sample=True`` with
``temperature``, ``top_k``, ``top_p``, ``epsilon_cutoff``); CTranslate2 gives next-token
logits and :func:`truncate` applies the same rule in numpy (tested equal to Hugging Face's
warpers on random logits).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence

import numpy as np

from rerank.argtypes import MAX_SEED, MIN_TEMPERATURE
from rerank.errors import InputError

#: the settings of ``--sampling`` (``ancestral`` is a word without a value)
SAMPLING_KEYS = ("epsilon", "top_p", "top_k", "temperature", "seed")


@dataclass(frozen=True)
class Sampling:
    """One sampler: ``epsilon`` (0 < ε < 1, or None), ``seed`` (≥ 0), ``top_p`` (0 < p < 1, or
    None), ``top_k`` (≥ 1, or None) and ``temperature`` (> 0).  ``Sampling()`` is epsilon
    sampling at ε = 0.02; with every truncation None it is ancestral sampling.

    Raises:
        InputError: a setting out of its range.
    """

    epsilon: Optional[float] = 0.02
    seed: int = 1
    top_p: Optional[float] = None
    top_k: Optional[int] = None
    temperature: float = 1.0

    def __post_init__(self) -> None:
        checks = (
            ("epsilon", self.epsilon is None or 0 < self.epsilon < 1, "in (0, 1)"),
            ("top_p", self.top_p is None or 0 < self.top_p < 1, "in (0, 1)"),
            ("top_k", self.top_k is None or self.top_k >= 1, "a positive integer"),
            ("temperature", MIN_TEMPERATURE <= self.temperature < np.inf, f"a finite number ≥ {MIN_TEMPERATURE}"),
            ("seed", 0 <= self.seed <= MAX_SEED, f"an integer from 0 to {MAX_SEED}"),
        )
        for key, good, what in checks:
            if not good:
                raise InputError(f"--sampling: {key} must be {what}, not {getattr(self, key)}")

    @property
    def method(self) -> str:
        """``epsilon``, ``nucleus``, ``top_k``, ``ancestral`` or, combined, the truncations
        joined by ``+`` (``top_k+nucleus``)."""
        parts = [
            name
            for name, value in (("top_k", self.top_k), ("nucleus", self.top_p), ("epsilon", self.epsilon))
            if value is not None
        ]
        return "+".join(parts) or "ancestral"

    @classmethod
    def parse(cls, text: str) -> "Sampling":
        """``epsilon=0.02,seed=3``, ``top_p=0.9``, ``top_k=10,temperature=0.7``, ``ancestral``
        -> Sampling.  Without a truncation (and without ``ancestral``) it is epsilon sampling
        at ε = 0.02, the first form's default.  Raises :class:`InputError`."""
        values: Dict[str, str] = {}
        ancestral = False
        for item in filter(None, text.split(",")):
            key, eq, value = item.partition("=")
            if item == "ancestral":
                ancestral = True
                continue
            if not eq or key not in SAMPLING_KEYS:
                raise InputError(
                    f"--sampling {text!r}: expected KEY=VALUE pairs of {', '.join(SAMPLING_KEYS)}, or ancestral"
                )
            values[key] = value
        truncations = [k for k in ("epsilon", "top_p", "top_k") if k in values]
        if ancestral and truncations:
            raise InputError(f"--sampling {text!r}: ancestral sampling has no {truncations[0]}")
        try:
            settings = (
                float(values["epsilon"]) if "epsilon" in values else (None if ancestral or truncations else 0.02),
                int(values.get("seed", 1)),
                float(values["top_p"]) if "top_p" in values else None,
                int(values["top_k"]) if "top_k" in values else None,
                float(values.get("temperature", 1.0)),
            )
        except ValueError:
            raise InputError(
                f"--sampling {text!r}: epsilon, top_p and temperature must be numbers, top_k and seed integers"
            ) from None
        return cls(*settings)

    def to_json(self) -> Dict[str, Any]:
        """The record of the sampler (``method`` and every setting), as signatures and system
        manifests keep it."""
        return {
            "method": self.method,
            "epsilon": self.epsilon,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "temperature": self.temperature,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, value: Any, source: str) -> "Sampling":
        """The sampler of a record of :meth:`to_json` (or of the first records, ``{"epsilon",
        "seed"}`` only).  Raises :class:`InputError` naming ``source``."""
        if not isinstance(value, dict):
            raise InputError(f"the generator's sampling {value!r} is not an object", source)
        numbers = {"epsilon": float, "top_p": float, "top_k": int, "temperature": float, "seed": int}
        settings = {}
        for key, kind in numbers.items():
            given = value.get(key)
            if given is None or isinstance(given, bool):
                continue
            if not isinstance(given, (int, float)) or (kind is int and not isinstance(given, int)):
                raise InputError(f"the generator's sampling {key}={given!r} is not a number", source)
            settings[key] = kind(given)
        if "seed" not in settings:
            raise InputError(f"the generator's sampling {value!r} has no seed", source)
        settings.setdefault("epsilon", None)  # type: ignore[arg-type]
        try:
            return cls(**settings)
        except InputError as err:
            raise InputError(err.message.replace("--sampling: ", "the generator's sampling: "), source) from None

    def hf_settings(self) -> Dict[str, Any]:
        """The keyword arguments of Hugging Face ``generate`` for this sampler (``top_k=0``
        and ``top_p=1.0`` switch off the defaults of a model's generation config)."""
        return {
            "do_sample": True,
            "temperature": self.temperature,
            "top_k": self.top_k or 0,
            "top_p": self.top_p if self.top_p is not None else 1.0,
            "epsilon_cutoff": self.epsilon if self.epsilon is not None else 0.0,
        }


def truncate(logits: np.ndarray, sampling: Sampling) -> np.ndarray:
    """The next-token distributions float64[R, V] the sampler draws from, given logits
    float[R, V]: temperature, top-k, top-p and epsilon in Hugging Face's order (module
    docstring), each renormalised, at least the most probable token kept.  Rows sum to 1."""
    scores = np.asarray(logits, dtype=np.float64) / sampling.temperature
    if sampling.top_k is not None and sampling.top_k < scores.shape[1]:
        kth = np.partition(scores, -sampling.top_k, axis=1)[:, -sampling.top_k, None]
        scores = np.where(scores < kth, -np.inf, scores)
    if sampling.top_p is not None:
        order = np.argsort(scores, axis=1, kind="stable")  # ascending, as Hugging Face's
        ascending = np.take_along_axis(scores, order, axis=1)
        cumulative = np.cumsum(_softmax(ascending), axis=1)
        remove = cumulative <= 1 - sampling.top_p
        remove[:, -1] = False
        drop = np.zeros_like(remove)
        np.put_along_axis(drop, order, remove, axis=1)
        scores = np.where(drop, -np.inf, scores)
    if sampling.epsilon is not None:
        probs = _softmax(scores)
        top = scores.max(axis=1, keepdims=True)
        scores = np.where((probs < sampling.epsilon) & (scores < top), -np.inf, scores)
    return _softmax(scores)


def _softmax(scores: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        shifted = np.exp(scores - scores.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)


__all__: Sequence[str] = ["SAMPLING_KEYS", "Sampling", "truncate"]
