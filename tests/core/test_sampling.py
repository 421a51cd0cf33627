"""The samplers of rerank generate (rerank.features.sampling): their specifications, records
and truncations against hand-computed distributions.  Hugging Face's own warpers are the
peer in tests/features/test_hf_scorer.py."""

import numpy as np
import pytest

from rerank.errors import InputError
from rerank.features.sampling import Sampling, truncate

P = np.array([0.5, 0.3, 0.15, 0.05])
LOGITS = np.log(P)[None, :] + 3.0  # a shift changes nothing


@pytest.mark.parametrize(
    "text, expected",
    [
        ("epsilon=0.02,seed=3", Sampling(0.02, 3)),
        ("seed=4", Sampling(0.02, 4)),  # no truncation: epsilon 0.02, the first form's default
        ("top_p=0.9", Sampling(None, 1, top_p=0.9)),
        ("top_k=10,temperature=0.7", Sampling(None, 1, top_k=10, temperature=0.7)),
        ("ancestral,seed=2", Sampling(None, 2)),
        ("ancestral,temperature=1.5", Sampling(None, 1, temperature=1.5)),
        ("top_k=5,top_p=0.8,epsilon=0.01", Sampling(0.01, 1, top_p=0.8, top_k=5)),
    ],
)
def test_a_specification_is_one_sampler_and_its_record_reads_back(text, expected):
    sampling = Sampling.parse(text)
    assert sampling == expected
    assert Sampling.from_json(sampling.to_json(), "sys.json") == sampling


def test_the_method_names_the_truncations():
    assert Sampling().method == "epsilon" and Sampling(None).method == "ancestral"
    assert Sampling(None, top_p=0.9).method == "nucleus" and Sampling(None, top_k=3).method == "top_k"
    assert Sampling(0.02, top_p=0.9, top_k=3).method == "top_k+nucleus+epsilon"
    # the first records held epsilon and seed only
    assert Sampling.from_json({"method": "epsilon", "epsilon": 0.02, "seed": 7}, "s.json") == Sampling(0.02, 7)


@pytest.mark.parametrize(
    "text, message",
    [
        ("epsilon=1.5", "epsilon must be in (0, 1), not 1.5"),
        ("top_p=1", "top_p must be in (0, 1), not 1.0"),
        ("top_k=0", "top_k must be a positive integer, not 0"),
        ("temperature=0", "temperature must be a finite number ≥ 0.0001, not 0.0"),
        ("temperature=nan", "temperature must be a finite number ≥ 0.0001"),
        ("seed=-1", "seed must be an integer from 0 to 4294967295"),
        ("top_k=2.5", "top_k and seed integers"),
        ("beam=3", "expected KEY=VALUE pairs of epsilon, top_p, top_k, temperature, seed, or ancestral"),
        ("ancestral,top_p=0.9", "ancestral sampling has no top_p"),
    ],
)
def test_bad_specifications_are_one_line(text, message):
    with pytest.raises(InputError, match=None) as err:
        Sampling.parse(text)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_a_bad_record_names_its_file():
    with pytest.raises(InputError) as err:
        Sampling.from_json({"epsilon": 2.0, "seed": 1}, "system.json")
    assert str(err.value) == "system.json: the generator's sampling: epsilon must be in (0, 1), not 2.0"
    with pytest.raises(InputError, match="has no seed"):
        Sampling.from_json({"epsilon": 0.1}, "system.json")
    with pytest.raises(InputError, match="top_k='3' is not a number"):
        Sampling.from_json({"top_k": "3", "seed": 1}, "system.json")


@pytest.mark.parametrize(
    "sampling, expected",
    [
        (Sampling(None), P),  # ancestral: the model's distribution
        (Sampling(None, top_k=2), [0.5 / 0.8, 0.3 / 0.8, 0, 0]),
        (Sampling(None, top_k=1), [1, 0, 0, 0]),
        # nucleus: ascending cumulative 0.05, 0.20, 0.50, 1.00; removed where ≤ 1 - p
        (Sampling(None, top_p=0.7), [0.5 / 0.8, 0.3 / 0.8, 0, 0]),
        (Sampling(None, top_p=0.85), [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]),
        (Sampling(None, top_p=0.01), [1, 0, 0, 0]),  # at least the most probable token
        (Sampling(0.1), [0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95, 0]),
        (Sampling(0.9), [1, 0, 0, 0]),  # every token below ε: the most probable one
        (Sampling(None, temperature=2.0), np.sqrt(P) / np.sqrt(P).sum()),
        # top-k first (0.625, 0.375), then epsilon on what is left: 0.375 ≥ 0.3 stays
        (Sampling(0.3, top_k=2), [0.5 / 0.8, 0.3 / 0.8, 0, 0]),
        (Sampling(0.4, top_k=2), [1, 0, 0, 0]),
    ],
)
def test_truncations_by_hand(sampling, expected):
    got = truncate(LOGITS, sampling)
    assert got.shape == (1, 4) and np.allclose(got[0], expected, atol=1e-12)


def test_ties_at_the_kth_token_are_kept():
    got = truncate(np.log([[0.4, 0.2, 0.2, 0.2]]), Sampling(None, top_k=2))
    assert np.allclose(got[0], [0.4, 0.2, 0.2, 0.2])
