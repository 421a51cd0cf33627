"""``rerank generate ct2:`` against CTranslate2's ``translate_batch`` on a *trained* model:
a main job's system's generator (``rerank pack-system``'s ``generator/``: the fairseq
transformer and its BPE codes), converted to CTranslate2 once, decodes the first
``--sentences`` raw test sources with beam ``--nbest`` (``--nbest`` candidates each), once
through ``rerank generate`` (``generate_file``: the search, then the scores of the list) and
once through ``Translator.translate_batch`` called directly with the same settings (beam,
hypotheses, length penalty 1, longest candidate, batch 32), alternated, ``--runs`` each.

Why (issue 91): on random weights no candidate ends with end-of-sentence, so ``rerank
generate ct2:`` forced-decodes every candidate again after the search, and
``benchmarks/real_sizes.py`` measured 1.7-2.3x CTranslate2's time.  A trained model's
candidates end with end-of-sentence, and the search's own sums stand for forced decoding
(``rerank.features.generate._search_scores``); this measures how many do
(``scores_from_search``) and what the ratio is then.  Seconds include the model's load; the
sources are Moses-tokenised (the system's settings) before either clock starts.

    python benchmarks/bench_generate_trained.py --system out/multi30k-transformer/system \\
        --sentences 300 --nbest 20 --json out/bench_generate_trained.json

Reports, per engine, the seconds of every run (min / median), the ratio of the medians
(rerank / CTranslate2), the candidates whose score the search gave, and on how many sentences
the two candidate sets and the two 1-best are the same.  The machine should be otherwise idle.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "..", "shared", "data", "multi30k", "task1", "raw")


def _raw(path: str) -> List[str]:
    opener: Any = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line.rstrip("\n") for line in handle]


def convert_generator(system: str, work: str) -> str:
    """The system's generator converted to CTranslate2 (float32 weights; the compute type is
    chosen at load) in ``work/ct2``, converted once."""
    from rerank.nmt.ct2 import convert

    out = os.path.join(work, "ct2")
    if not os.path.exists(os.path.join(out, "model.bin")):
        manifest = json.load(open(os.path.join(system, "system.json"), encoding="utf-8"))
        config = manifest["decoder"]["config"]
        generator = os.path.join(system, "generator")
        convert(
            os.path.join(generator, "checkpoint.pt"),
            os.path.join(generator, "bin"),
            out,
            config["src"],
            config["tgt"],
            "float32",
        )
    return out


def run_rerank(spec: str, source: str, nbest: int, max_length: int, tmp: str) -> Dict[str, Any]:
    """``rerank generate`` (in process): seconds, each sentence's candidates, the 1-best,
    the record's count of candidates whose score the search gave."""
    from rerank.features.generate import generate_file
    from rerank.nbest import read_nbest

    out = os.path.join(tmp, "out.nbest")
    began = time.perf_counter()
    record = generate_file(spec, source, out, None, nbest, nbest, None, max_length=max_length)
    seconds = time.perf_counter() - began
    listed = read_nbest(out)
    sets = [sorted(listed.hypotheses[a:b]) for a, b in zip(listed.offsets[:-1], listed.offsets[1:])]
    best = [listed.hypotheses[o] for o in listed.offsets[:-1]]
    return {"seconds": seconds, "sets": sets, "best": best, "scores_from_search": record["scores_from_search"]}


def run_ctranslate2(
    model: str, tokens: List[List[str]], bpe: Any, nbest: int, max_length: int, compute_type: str
) -> Dict[str, Any]:
    """``Translator.translate_batch`` called directly: seconds (load and search), each
    sentence's candidates (BPE undone as rerank's scorer undoes it) and the 1-best."""
    import ctranslate2

    began = time.perf_counter()
    translator = ctranslate2.Translator(model, device="cpu", compute_type=compute_type)
    results = translator.translate_batch(
        tokens,
        beam_size=nbest,
        num_hypotheses=nbest,
        max_decoding_length=max_length,
        length_penalty=1.0,
        return_scores=True,
        max_batch_size=32,
    )
    seconds = time.perf_counter() - began
    texts = [[bpe.decode([t for t in h if t != "</s>"]) for h in r.hypotheses] for r in results]
    return {"seconds": seconds, "sets": [sorted(t) for t in texts], "best": [t[0] for t in texts]}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--system", required=True, help="a packed system (rerank pack-system's OUT) with generator/")
    parser.add_argument("--sentences", type=int, default=300, help="the first N test sources (default: 300)")
    parser.add_argument("--nbest", type=int, default=20, help="beam size and candidates per sentence (default: 20)")
    parser.add_argument("--runs", type=int, default=2, help="runs per engine, alternated (default: 2)")
    parser.add_argument("--compute-type", default="int8", help="CTranslate2's compute type (default: int8)")
    parser.add_argument("--max-length", type=int, default=256, help="longest candidate in tokens (default: 256)")
    parser.add_argument(
        "--input", help="raw source sentences (default: Multi30k test_2016 in the system's source language)"
    )
    parser.add_argument(
        "--work", default="out/bench-generate-trained", help="the conversion's cache (default: %(default)s)"
    )
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    sys.path.insert(0, ROOT)
    from rerank.nmt.data import preprocess_lines
    from rerank.nmt.subword import make_bpe

    manifest = json.load(open(os.path.join(args.system, "system.json"), encoding="utf-8"))
    config = manifest["decoder"]["config"]
    raw = _raw(args.input or os.path.join(DATA, f"test_2016_flickr.{config['src']}.gz"))[: args.sentences]
    tokenised = preprocess_lines(raw, config["src"], lowercase=config.get("lowercase", True))
    model = convert_generator(args.system, args.work)
    codes = os.path.join(args.system, "generator", "bpe.codes")
    spec = f"ct2:{model},bpe=subword-nmt:{codes},compute_type={args.compute_type}"
    bpe = make_bpe(f"subword-nmt:{codes}", spec)
    tokens = [bpe.process_line(line).split() for line in tokenised]
    runs: Dict[str, List[Dict[str, Any]]] = {"rerank": [], "ctranslate2": []}
    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "input.txt")
        with open(source, "w", encoding="utf-8") as handle:
            handle.writelines(line + "\n" for line in tokenised)
        for r in range(args.runs):
            for engine in ("rerank", "ctranslate2") if r % 2 == 0 else ("ctranslate2", "rerank"):
                if engine == "rerank":
                    result = run_rerank(spec, source, args.nbest, args.max_length, tmp)
                else:
                    result = run_ctranslate2(model, tokens, bpe, args.nbest, args.max_length, args.compute_type)
                runs[engine].append(result)
                print(f"run {r + 1}, {engine}: {result['seconds']:.1f} s", file=sys.stderr)
    ours, theirs = runs["rerank"][-1], runs["ctranslate2"][-1]
    median = {e: statistics.median(x["seconds"] for x in runs[e]) for e in runs}
    report = {
        "system": args.system,
        "sentences": len(raw),
        "nbest": args.nbest,
        "compute_type": args.compute_type,
        "max_length": args.max_length,
        "seconds": {e: [round(x["seconds"], 2) for x in runs[e]] for e in runs},
        "ratio_of_medians": round(median["rerank"] / median["ctranslate2"], 3),
        "hypotheses": sum(len(s) for s in ours["sets"]),
        "scores_from_search": ours["scores_from_search"],
        "same_candidate_sets": sum(a == b for a, b in zip(ours["sets"], theirs["sets"])),
        "same_1best": sum(a == b for a, b in zip(ours["best"], theirs["best"])),
    }
    text = json.dumps(report, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
