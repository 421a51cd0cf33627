import random

import numpy as np
import pytest

WORDS = "ein mann eine frau hund rennt über die wiese im park mit einem ball spielt kind rote blaue jacke".split()


def random_corpus(num_segments: int, nbest: int, seed: int = 0):
    """References and n-best hypotheses that are perturbed copies of them (deterministic)."""
    rng = random.Random(seed)
    refs, hyps, segment = [], [], []
    for i in range(num_segments):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(3, 12))]
        refs.append(" ".join(ref))
        for k in range(nbest):
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
