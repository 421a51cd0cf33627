"""Ctrl-C stops the native loops within a fraction of a second: the C kernels run without
the GIL and cannot see a signal, so the long ones are called in chunks of bounded work
(rerank.metrics.bleu_stats.CHUNK_WORK) and Python raises KeyboardInterrupt between them.
Before, chrF MBR over one segment of 3,000 long candidates took 14–26 s to stop."""

import subprocess
import sys
import textwrap

import numpy as np

from rerank.metrics import bleu_stats
from rerank.metrics.bleu_stats import pair_matches


def _texts(count, length, seed=0):
    rng = np.random.default_rng(seed)
    lengths = rng.integers(length // 2, length, size=count)
    ids = rng.integers(0, 30, size=int(lengths.sum()))
    return ids, lengths


def test_chunked_matching_equals_one_call(monkeypatch):
    ids, lengths = _texts(60, 80, seed=1)
    hyp, ref = np.divmod(np.arange(60 * 60), 60)
    whole = pair_matches(ids, lengths, 30, hyp, ref, 6)
    calls = []
    kernel = bleu_stats.clipped_matches
    monkeypatch.setattr(bleu_stats, "clipped_matches", lambda *a, **k: calls.append(len(a[1])) or kernel(*a, **k))
    monkeypatch.setattr(bleu_stats, "CHUNK_WORK", 5_000)
    chunked = pair_matches(ids, lengths, 30, hyp, ref, 6)
    assert np.array_equal(chunked, whole)
    assert len(calls) > 100 and max(calls) <= 5_000 // (2 * 6 * 40) + 1  # each call bounded by its work
    # a pair matched against itself counts every n-gram of the text
    k = 7
    assert whole[k * 60 + k].tolist() == [max(lengths[k] - n, 0) for n in range(6)]


def test_ctrl_c_stops_a_long_matching_call_within_two_seconds(tmp_path):
    """A SIGINT one second into ~25 s of chrF-sized matching (1,500 texts of ~380
    characters, every pair) is raised within 2 s of arriving."""
    script = textwrap.dedent(
        """
        import signal, time
        import numpy as np
        from rerank.metrics.bleu_stats import pair_matches
        rng = np.random.default_rng(0)
        lengths = rng.integers(250, 500, size=1500)
        ids = rng.integers(0, 30, size=int(lengths.sum()))
        hyp, ref = np.divmod(np.arange(1500 * 1500), 1500)
        signal.setitimer(signal.ITIMER_REAL, 1.0)
        signal.signal(signal.SIGALRM, signal.default_int_handler)  # as Ctrl-C: KeyboardInterrupt
        start = time.perf_counter()
        try:
            pair_matches(ids, lengths, 30, hyp, ref, 6)
            print("finished", time.perf_counter() - start)
        except KeyboardInterrupt:
            print("interrupted", time.perf_counter() - start - 1.0)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    what, seconds = done.stdout.split()
    assert what == "interrupted", done.stdout + done.stderr
    assert float(seconds) < 2.0
