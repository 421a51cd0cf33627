"""rerank mbr against mbrs (naist-nlp/mbrs, the MBR library people reach for) on the same n-best
list: exact MBR with the candidates as their own pseudo-references, weighed uniformly (mbrs'
``DecoderMBR``), sentence chrF and BLEU (both libraries on sacrebleu's formulas) — wall time,
and whether the two select the same candidate for every segment.

mbrs is a peer, never a dependency: it runs in its own virtual environment, this script once
in each (``--engine``), each run writing its selections (0-based index within the segment) and
time as JSON; ``--compare`` reads both.

    python3 -m venv /tmp/mbrs-venv && /tmp/mbrs-venv/bin/pip install torch==2.13.0 mbrs==0.1.8
    /tmp/mbrs-venv/bin/pip install fastchrf==0.2.1   # mbrs' Rust chrF (--fastchrf)
    /tmp/mbrs-venv/bin/python benchmarks/bench_mbrs.py --engine mbrs --nbest test.nbest --out mbrs.json
    .venv/bin/python benchmarks/bench_mbrs.py --engine rerank --nbest test.nbest --out rerank.json
    .venv/bin/python benchmarks/bench_mbrs.py --compare rerank.json mbrs.json

COMET-MBR (``--metrics comet``): the utility is a COMET checkpoint (``--checkpoint DIR``; a tiny
one is built with ``--build-checkpoint DIR``: tests/comet_tiny.py's ``da``, wmt22-comet-da's
layout), each segment's source from ``--source``; mbrs runs it through unbabel-comet (its
``MetricCOMET``, CPU), so its venv needs unbabel-comet 2.2.7 too:

    /tmp/mbrs-venv/bin/pip install unbabel-comet==2.2.7 'setuptools<81'
    .venv/bin/python benchmarks/bench_mbrs.py --build-checkpoint /tmp/comet-tiny
    /tmp/mbrs-venv/bin/python benchmarks/bench_mbrs.py --engine mbrs --metrics comet --checkpoint /tmp/comet-tiny/da \
        --source test.de --nbest test.nbest --out mbrs.json
    .venv/bin/python benchmarks/bench_mbrs.py --engine rerank --metrics comet --checkpoint /tmp/comet-tiny/da \
        --source test.de --nbest test.nbest --out rerank.json

``--algorithm aggregate|pruned`` runs both libraries' other decoders (``centroid``: rerank's
only; mbrs' centroid decoder clusters embeddings of neural metrics); ``--fastchrf`` gives mbrs
its Rust chrF; ``--metrics chrf`` one utility.

The list is read as Moses n-best text (``id ||| hypothesis ||| features ||| score``) by both.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import List

from _guard import guard_script


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


def run_mbrs(
    segments,
    metric: str,
    algorithm: str = "exact",
    fastchrf: bool = False,
    checkpoint="",
    sources=None,
    batch=64,
    keep: int = 1,
    diversity: float = 0.0,
):
    """mbrs' selections (0-based within each segment): ``DecoderMBR`` (exact),
    ``DecoderAggregateMBR``, ``DecoderPruningMBR`` (alpha 0.99, its default schedule) or
    ``DecoderProbabilisticMBR`` (low rank, its defaults), the
    candidates as their own uniformly weighted pseudo-references; chrF with
    ``fastchrf=True`` is mbrs' Rust chrF (its fastest setting for chrF).  With ``keep`` > 1
    the ``keep`` choices of every segment (a list each, best expected utility first): its
    ``nbest`` selector, or with ``diversity`` λ > 0 its ``diverse`` selector (the utility as
    the diversity metric, its local search at its defaults: 20 rounds, 1 neighbour, seed 0)."""
    from mbrs.decoders import DecoderAggregateMBR, DecoderMBR, DecoderProbabilisticMBR, DecoderPruningMBR
    from mbrs.metrics import MetricBLEU, MetricChrF
    from mbrs.selectors import SelectorDiverse

    if metric == "comet":  # a local checkpoint directory: comet's download_model would ask the hub
        import mbrs.metrics.comet as comet_module

        comet_module.download_model = lambda model: os.path.join(model, "checkpoints", "model.ckpt")
        scorer = comet_module.MetricCOMET(comet_module.MetricCOMET.Config(model=checkpoint, batch_size=batch, cpu=True))
    elif metric == "chrf":
        scorer = MetricChrF(MetricChrF.Config(fastchrf=fastchrf))
    else:  # sentence BLEU as rerank's mbr:bleu: tokenize none, effective order
        scorer = MetricBLEU(MetricBLEU.Config(tokenize="none", effective_order=True))
    decoder = {
        "exact": DecoderMBR,
        "aggregate": DecoderAggregateMBR,
        "pruned": DecoderPruningMBR,
        "lowrank": DecoderProbabilisticMBR,  # reduction_factor 8, rank 8, as rerank's lowrank defaults
    }[algorithm]
    if diversity > 0:
        selector = SelectorDiverse(
            SelectorDiverse.Config(
                diversity_metric=metric, diversity_metric_config=scorer.cfg, diversity_lambda=diversity
            )
        )
        decoder = decoder(decoder.Config(), scorer, selector=selector)
    else:
        decoder = decoder(decoder.Config(), scorer)
    chosen = []
    for k, hyps in enumerate(segments):
        source = sources[k] if sources is not None else None
        idx = [int(i) for i in decoder.decode(hyps, hyps, source=source, nbest=keep).idx]
        chosen.append(idx if keep > 1 else idx[0])
    return chosen


def run_rerank(
    nbest,
    metric: str,
    algorithm: str = "exact",
    checkpoint="",
    sources=None,
    batch=64,
    keep=1,
    diversity=0.0,
    dtype="float32",
):
    """rerank's selections (0-based within each segment) of the list ``nbest`` (read before the
    clock starts, as mbrs gets its lists) by ``rerank mbr``'s engine
    (:func:`rerank.mbr.mbr_decode`'s algorithms), uniform weights; with ``keep`` > 1 its
    ``--keep`` choices (``--diversity`` λ, the local search with mbrs' draws), as ``run_mbrs``;
    ``dtype`` the COMET encoder's (``int8``: quantised on the CPU)."""
    from rerank.mbr import MBR
    from rerank.mbr.kbest import LocalSearch, keep_best

    utility = f"comet:{checkpoint},device=cpu,batch={batch},dtype={dtype}" if metric == "comet" else metric
    scorer = MBR(utility, "uniform", 1.0, algorithm)
    scorer.begin_list(0, sources)  # COMET: the list's sources
    p = scorer.distribution(nbest)
    if keep == 1:
        chosen, _, _ = scorer.select(nbest, nbest, p)
        return [int(i - o) for i, o in zip(chosen, nbest.offsets[:-1])]
    expected, _ = scorer.decoder.estimates(scorer, nbest, nbest, p)
    listed, _ = keep_best(scorer, nbest, expected, keep, diversity, LocalSearch(draws="mbrs"))
    picks = []
    for s in range(nbest.num_segments):
        texts = list(nbest.hypotheses[nbest.offsets[s] : nbest.offsets[s + 1]])
        picks.append([texts.index(t) for t in listed.hypotheses[listed.offsets[s] : listed.offsets[s + 1]]])
    return picks


def _texts(segment: List[str], chosen):
    """The text of a choice, or the set of texts of K choices."""
    return segment[chosen] if isinstance(chosen, int) else {segment[i] for i in chosen}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["rerank", "mbrs"], help="which library decodes")
    parser.add_argument("--nbest", help="the n-best list (Moses format), e.g. test.nbest")
    parser.add_argument("--segments", type=int, default=0, help="only the first N segments (default: all)")
    parser.add_argument(
        "--metrics", default="chrf,bleu", help="the utilities, comma-separated (default: chrf,bleu), e.g. chrf"
    )
    parser.add_argument(
        "--algorithm",
        default="exact",
        choices=["exact", "aggregate", "pruned", "centroid", "lowrank", "halving"],
        help="the decoder (default: exact; centroid, halving: rerank only; lowrank: mbrs' probabilistic_mbr, the cells "
        "drawn by each library's own generator, so the picks agree only in part), e.g. aggregate",
    )
    parser.add_argument(
        "--keep", type=int, default=1, help="choices per segment: mbrs' nbest selector (default: 1, the MBR pick)"
    )
    parser.add_argument(
        "--diversity",
        type=float,
        default=0.0,
        help="with --keep: λ of mbrs' diverse selector, rerank mbr --diversity (default: 0), e.g. 0.1",
    )
    parser.add_argument("--fastchrf", action="store_true", help="mbrs: its Rust chrF (MetricChrF fastchrf=True)")
    parser.add_argument("--checkpoint", default="", help="--metrics comet: a COMET checkpoint directory")
    parser.add_argument("--source", help="--metrics comet: the source sentences, one per segment")
    parser.add_argument(
        "--batch", type=int, default=64, help="--metrics comet: sentences per encoder call, both engines (default: 64)"
    )
    parser.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "int8"],
        help="--metrics comet, rerank: the encoder's dtype (default: float32; int8: quantised), e.g. int8",
    )
    parser.add_argument(
        "--build-checkpoint", metavar="DIR", help="build the tests' tiny COMET checkpoint in DIR/da (rerank's venv)"
    )
    parser.add_argument("--out", help="the selections and times as JSON")
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two --out files")
    args = parser.parse_args(argv)
    guard_script(
        parser.prog,
        {"--nbest": args.nbest, "--checkpoint": args.checkpoint, "--source": args.source, "--compare": args.compare},
        {"--out": args.out},
    )
    if args.build_checkpoint:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from tests.comet_tiny import build_checkpoint

        print(build_checkpoint(args.build_checkpoint, "da"))
        return 0
    if args.compare:
        a, b = (json.load(open(p, encoding="utf-8")) for p in args.compare)
        segments = read_segments(a["nbest"])
        for metric in [m for m in ("chrf", "bleu", "comet") if m in a and m in b]:
            # K choices: as sets of texts (mbrs orders ties of expected utility its own way)
            pairs = [
                (x, y) if isinstance(x, int) else (sorted(x), sorted(y))
                for x, y in zip(a[metric]["chosen"], b[metric]["chosen"])
            ]
            same = sum(x == y for x, y in pairs) / len(pairs)
            # ties between identical hypotheses: rerank takes the earlier (Moses), mbrs may not
            text = sum(_texts(segments[s], x) == _texts(segments[s], y) for s, (x, y) in enumerate(pairs)) / len(pairs)
            print(
                f"{metric}: {a['engine']} {a.get('algorithm', 'exact')} {a[metric]['seconds']:.1f} s, "
                f"{b['engine']} {b.get('algorithm', 'exact')} {b[metric]['seconds']:.1f} s "
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
    result = {
        "engine": args.engine,
        "algorithm": args.algorithm,
        "fastchrf": args.fastchrf,
        "nbest": path,
        "segments": len(segments),
        "batch": args.batch,
        "dtype": args.dtype,
        "keep": args.keep,
        "diversity": args.diversity,
    }
    if args.engine == "rerank":
        from rerank.nbest import read_nbest

        nbest = read_nbest(path)
        if args.algorithm == "centroid":  # imported before the clock starts, as mbrs' modules
            import sklearn.cluster  # noqa: F401
        if "comet" in args.metrics:  # as mbrs' modules import comet's, transformers' and torch's
            import transformers.models.xlm_roberta.modeling_xlm_roberta  # noqa: F401
            import yaml  # noqa: F401
    sources = None
    if args.source:
        with open(args.source, encoding="utf-8") as handle:
            sources = [line.rstrip("\n") for line in handle][: len(segments)]
    for metric in args.metrics.split(","):
        start = time.perf_counter()
        if args.engine == "mbrs":
            chosen = run_mbrs(
                segments,
                metric,
                args.algorithm,
                args.fastchrf,
                args.checkpoint,
                sources,
                args.batch,
                args.keep,
                args.diversity,
            )
        else:
            chosen = run_rerank(
                nbest,
                metric,
                args.algorithm,
                args.checkpoint,
                sources,
                args.batch,
                args.keep,
                args.diversity,
                args.dtype,
            )
        result[metric] = {"seconds": round(time.perf_counter() - start, 3), "chosen": chosen}
        print(f"{args.engine} {args.algorithm} {metric}: {result[metric]['seconds']} s", file=sys.stderr)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(result, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main())
