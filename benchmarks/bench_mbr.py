"""MBR decoding on a real n-best list: exact (every candidate against every pseudo-reference,
N² utilities per segment) against reference aggregation (Vamvas & Sennrich 2024: one aggregate
reference per segment, N utilities), centroid MBR (Deguchi et al. 2024: the aggregates of
``--clusters`` k-means clusters, N·k utilities) and confidence-based pruning (Cheng & Vlachos
2023, alpha 0.99), for sentence BLEU and chrF — wall time (best of
``--repeats``), peak memory of the process, how often the two select the same candidate, and
the corpus BLEU / chrF of each selection against the references (sacrebleu, tokenize none).

    python benchmarks/bench_mbr.py --nbest out/multi30k-transformer/nbest/test.nbest \
        --ref out/multi30k-transformer/data/tok/test_2016_flickr.de --json out/bench_mbr.json

The distribution is the softmax of the list's ``NMT`` column (``--feature``), as
``rerank mbr``'s default; ``--feature uniform`` for a list of samples (e.g. 256 epsilon
samples per sentence from ``rerank generate --sampling``). Issue 44's goal for the aggregate algorithm: linear time in the list
size at no loss of quality against exact MBR.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time

import numpy as np
from sacrebleu.metrics import BLEU, CHRF

from rerank.mbr import MBR
from rerank.mbr.decoders import make_decoder
from rerank.nbest import read_nbest
from rerank.textio import read_lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nbest", required=True, help="the candidates (and pseudo-references), e.g. test.nbest")
    parser.add_argument("--ref", required=True, help="the references, for the selections' corpus scores")
    parser.add_argument(
        "--feature", dest="weights_from", default="NMT", help="the distribution's column (default: NMT)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per timing, best kept (default: 1)")
    parser.add_argument("--clusters", type=int, default=8, help="centroid MBR's k (default: 8)")
    parser.add_argument("--json", help="also write the results as JSON, e.g. out/bench_mbr.json")
    args = parser.parse_args(argv)
    nbest = read_nbest(args.nbest)
    refs = read_lines(args.ref)
    rows = []
    for metric in ("bleu", "chrf"):
        selections = {}
        for algorithm in ("exact", "aggregate", "centroid", "pruned"):
            scorer = MBR(metric, args.weights_from, 1.0, make_decoder(algorithm, clusters=args.clusters))
            p = scorer.distribution(nbest)
            best = float("inf")
            for _ in range(args.repeats):
                start = time.perf_counter()
                chosen, utilities, _ = scorer.select(nbest, nbest, p)
                best = min(best, time.perf_counter() - start)
            selections[algorithm] = chosen
            hyps = [nbest.hypotheses[i] for i in chosen]
            rows.append(
                {
                    "utility": metric,
                    "algorithm": algorithm,
                    "seconds": round(best, 3),
                    "hypotheses_per_s": round(len(nbest.hypotheses) / best),
                    "utilities": utilities,
                    "bleu": round(BLEU(tokenize="none").corpus_score(hyps, [refs]).score, 2),
                    "chrf": round(CHRF().corpus_score(hyps, [refs]).score, 2),
                }
            )
        for k, algorithm in ((-3, "aggregate"), (-2, "centroid"), (-1, "pruned")):
            rows[k]["same_selection_as_exact"] = round(float(np.mean(selections["exact"] == selections[algorithm])), 4)
    beam = [nbest.hypotheses[o] for o in nbest.offsets[:-1]]
    result = {
        "nbest": args.nbest,
        "segments": nbest.num_segments,
        "hypotheses": len(nbest.hypotheses),
        "beam": {
            "bleu": round(BLEU(tokenize="none").corpus_score(beam, [refs]).score, 2),
            "chrf": round(CHRF().corpus_score(beam, [refs]).score, 2),
        },
        "rows": rows,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
    }
    print("| utility | algorithm | seconds | hypotheses/s | utilities | BLEU | chrF | same selection as exact |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        same = r.get("same_selection_as_exact", "")
        print(
            f"| {r['utility']} | {r['algorithm']} | {r['seconds']} | {r['hypotheses_per_s']:,} | {r['utilities']:,} | "
            f"{r['bleu']} | "
            f"{r['chrf']} | {same} |"
        )
    print(f"beam: BLEU {result['beam']['bleu']}, chrF {result['beam']['chrf']}; peak RSS {result['peak_rss_mb']} MB")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
