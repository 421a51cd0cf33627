"""rerank mbr against mbrs (naist-nlp/mbrs, the MBR library people reach for) on the same n-best
list: exact MBR with the candidates as their own pseudo-references, weighed uniformly (mbrs'
``DecoderMBR``), sentence chrF and BLEU (both libraries on sacrebleu's formulas) — wall time,
and whether the two select the same candidate for every segment.

mbrs is a peer, never a dependency: it runs in its own virtual environment, this script once
in each (``--engine``), each run writing its selections (0-based index within the segment) and
time as JSON; ``--compare`` reads both.

    python3 -m venv /tmp/mbrs-venv && /tmp/mbrs-venv/bin/pip install torch==2.13.0 mbrs==0.1.8
    /tmp/mbrs-venv/bin/python benchmarks/bench_mbrs.py --engine mbrs --nbest test.nbest --out mbrs.json
    .venv/bin/python benchmarks/bench_mbrs.py --engine rerank --nbest test.nbest --out rerank.json
    .venv/bin/python benchmarks/bench_mbrs.py --compare rerank.json mbrs.json

The list is read as Moses n-best text (``id ||| hypothesis ||| features ||| score``) by both.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import List


def read_segments(path: str) -> List[List[str]]:
    """The hypotheses of every segment of a Moses n-best list, in order (plain parsing, so that
    mbrs' environment needs nothing of ours)."""
    segments: List[List[str]] = []
    last = None
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split(" ||| ")
            if fields[0] != last:
                segments.append([])
                last = fields[0]
            segments[-1].append(fields[1])
    return segments


def run_mbrs(segments, metric: str):
    from mbrs.decoders import DecoderMBR
    from mbrs.metrics import MetricBLEU, MetricChrF

    if metric == "chrf":
        scorer = MetricChrF(MetricChrF.Config())
    else:
        try:  # sentence BLEU as rerank's mbr:bleu: tokenize none, effective order
            config = MetricBLEU.Config(tokenize="none", effective_order=True)
        except TypeError:
            config = MetricBLEU.Config(tokenize="none")
        scorer = MetricBLEU(config)
    decoder = DecoderMBR(DecoderMBR.Config(), scorer)
    chosen = []
    for hyps in segments:
        chosen.append(int(decoder.decode(hyps, hyps, source=None, nbest=1).idx[0]))
    return chosen


def run_rerank(path: str, metric: str):
    from rerank.features.consensus import ConsensusScorer
    from rerank.nbest import read_nbest

    nbest = read_nbest(path)
    scorer = ConsensusScorer(ConsensusScorer.Config(metric, "uniform"))
    values = scorer._expected(nbest, scorer.distribution(nbest))[scorer.names(False)[0]]
    return [int(i - o) for i, o in zip(nbest.select(values), nbest.offsets[:-1])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["rerank", "mbrs"], help="which library decodes")
    parser.add_argument("--nbest", help="the n-best list (Moses format), e.g. test.nbest")
    parser.add_argument("--segments", type=int, default=0, help="only the first N segments (default: all)")
    parser.add_argument("--out", help="the selections and times as JSON")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --out files")
    args = parser.parse_args(argv)
    if args.compare:
        a, b = (json.load(open(p, encoding="utf-8")) for p in args.compare)
        segments = read_segments(a["nbest"])
        for metric in ("chrf", "bleu"):
            pairs = list(zip(a[metric]["chosen"], b[metric]["chosen"]))
            same = sum(x == y for x, y in pairs) / len(pairs)
            # ties between identical hypotheses: rerank takes the earlier (Moses), mbrs may not
            text = sum(segments[s][x] == segments[s][y] for s, (x, y) in enumerate(pairs)) / len(pairs)
            print(
                f"{metric}: {a['engine']} {a[metric]['seconds']:.1f} s, {b['engine']} {b[metric]['seconds']:.1f} s "
                f"({b[metric]['seconds'] / max(a[metric]['seconds'], 1e-9):.1f}x); the same candidate in {same:.2%} "
                f"of {len(pairs)} segments, the same text in {text:.2%}"
            )
        return 0
    path = args.nbest
    segments = read_segments(path)
    if args.segments:
        segments = segments[: args.segments]
        trimmed = path + f".first{args.segments}"
        with open(path, encoding="utf-8") as handle, open(trimmed, "w", encoding="utf-8") as out:
            keep = {str(i) for i in range(args.segments)}
            out.writelines(line for line in handle if line.split(" ||| ", 1)[0] in keep)
        path = trimmed
    if args.engine == "mbrs":  # imported before the clock starts (mbrs loads torch and COMET's modules)
        import mbrs.decoders  # noqa: F401
        import mbrs.metrics  # noqa: F401
    result = {"engine": args.engine, "nbest": args.nbest, "segments": len(segments)}
    for metric in ("chrf", "bleu"):
        start = time.perf_counter()
        chosen = run_mbrs(segments, metric) if args.engine == "mbrs" else run_rerank(path, metric)
        result[metric] = {"seconds": round(time.perf_counter() - start, 3), "chosen": chosen}
        print(f"{args.engine} {metric}: {result[metric]['seconds']} s", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
