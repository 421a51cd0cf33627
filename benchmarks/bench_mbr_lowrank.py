"""Low-rank MBR (``--algorithm lowrank``) against exact MBR on lists of random edits: how often
it picks exact MBR's candidate and how much expected utility it loses, per reduction and rank.

The lists: the first ``--sentences`` Multi30k test_2016 German references, each with
``--candidates`` copies carrying 0-4 random word substitutions, deletions or insertions (seeded);
the utility chrF, the candidates their own uniformly weighted pseudo-references.  Such a
utility matrix is a distance matrix, far from low rank: the worst case of the method, not
a translation system's samples.  Writes JSON (``--out``) and prints one line per setting.

    .venv/bin/python benchmarks/bench_mbr_lowrank.py --out out/bench/mbr_lowrank.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import time

import numpy as np


def edit_lists(path: str, sentences: int, candidates: int, seed: int):
    """The n-best list of random edits (module docstring)."""
    from rerank.nbest import NBestList

    with gzip.open(path, "rt", encoding="utf-8") as handle:
        refs = [line.strip() for line in handle][:sentences]
    rng = np.random.default_rng(seed)
    vocab = sorted({w for r in refs for w in r.split()})
    hyps = []
    for ref in refs:
        for _ in range(candidates):
            words = ref.split()
            for _ in range(int(rng.integers(1, 6))):
                op, j = int(rng.integers(0, 3)), int(rng.integers(0, len(words)))
                if op == 0:
                    words[j] = str(rng.choice(vocab))
                elif op == 1 and len(words) > 2:
                    del words[j]
                else:
                    words.insert(j, str(rng.choice(vocab)))
            hyps.append(" ".join(words))
    offsets = np.arange(0, candidates * len(refs) + 1, candidates)
    return NBestList(offsets, hyps, np.zeros((len(hyps), 1)), ["NMT"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default="../shared/data/multi30k/task1/raw/test_2016_flickr.de.gz")
    parser.add_argument("--sentences", type=int, default=60, help="segments (default: 60)")
    parser.add_argument("--candidates", type=int, default=40, help="candidates per segment (default: 40)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the edits (default: 1)")
    parser.add_argument("--out", help="the JSON record (default: none)")
    args = parser.parse_args(argv)
    from rerank.cli import guard_script

    guard_script(parser.prog, {"--data": args.data}, {"--out": args.out})
    from rerank.mbr import MBR
    from rerank.mbr.lowrank import lowrank_expected

    nbest = edit_lists(args.data, args.sentences, args.candidates, args.seed)
    engine = MBR("chrf", "uniform")
    p = engine.distribution(nbest)
    began = time.perf_counter()
    exact = engine.expected(nbest, nbest, p)
    rows = [{"reduction": 1, "rank": None, "seconds": round(time.perf_counter() - began, 3), "agreement": 1.0}]
    picks = nbest.select(exact)
    for reduction in (2, 4, 8, 16):
        for rank in (4, 8):
            began = time.perf_counter()
            estimate, computed = lowrank_expected(engine, nbest, nbest, p, reduction=reduction, rank=rank)
            chosen = nbest.select(estimate)
            row = {
                "reduction": reduction,
                "rank": rank,
                "utilities": computed,
                "seconds": round(time.perf_counter() - began, 3),
                "agreement": float(np.mean(chosen == picks)),
                "chance": float(np.mean(1 / np.diff(nbest.offsets))),
                "expected_chrf_lost": float(np.mean(exact[picks] - exact[chosen])),
            }
            rows.append(row)
            print(json.dumps(row))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as handle:
            json.dump({"settings": vars(args), "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
