"""``rerank pack-system`` and ``rerank translate``: a trained re-ranking system in one
directory, and raw text translated with it in one command (:mod:`rerank.features.system`)."""

from __future__ import annotations

import argparse
import json

from rerank.argtypes import positive_int
from rerank.cli.options import device_options, device_settings, shard_option_value, shard_options, signature_option
from rerank.features.system import DECODERS, Relocation, pack_system, translate
from rerank.nmt.ct2 import QUANTIZATIONS
from rerank.outputs import signature_path


def cmd_pack(args) -> None:
    pack_system(
        args.nbest, args.weights, args.out, args.data_bin, relocation=Relocation.parse(args.relocate), ct2=args.ct2
    )


def cmd_translate(args) -> None:
    result = translate(
        args.system,
        args.input,
        args.out,
        args.nbest_out,
        device_settings(args),
        args.tokenized,
        args.batch_size,
        expected_digest=args.system_digest,
        shard=shard_option_value(args),
        decoder=args.decoder,
        block_sentences=args.block_sentences,
    )
    if args.json:
        print(json.dumps(result))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``pack-system`` and ``translate`` to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "pack-system",
        help="write a system directory from a tuned list and its weights: the decoder, the scorer chain as tuned, "
        "the weights, a manifest with checksums",
        epilog="example: rerank pack-system --nbest out/multi30k-transformer/nbest/val.full.nbest "
        "--weights out/multi30k-transformer/rerank/all/weights.seed1.json --out system",
    )
    p.add_argument(
        "--nbest",
        required=True,
        help="the tuned list (its signatures lead back to the decoder run: rerank nmt nbest or rerank generate)",
    )
    p.add_argument(
        "--weights",
        required=True,
        action="append",
        help="the weights tuned on it (rerank tune --out); repeat for the replicas: the one of the best tuning "
        "score is taken, e.g. --weights w.seed1.json --weights w.seed2.json",
    )
    p.add_argument(
        "--data-bin",
        help="the decoder's data directory (rerank nmt prepare's bin/) where the decoder run did not record it "
        "(default: the recorded one), e.g. out/multi30k-transformer/data/bin",
    )
    p.add_argument(
        "--relocate",
        action="append",
        metavar="OLD=NEW",
        help="the job directory moved after its run: read every path the signatures record under OLD "
        "(absolute) under NEW instead; repeat for several (default: none, the recorded paths), "
        "e.g. --relocate /scratch/me/job=out/job",
    )
    p.add_argument(
        "--ct2",
        choices=QUANTIZATIONS,
        help="also convert a fairseq generator (a transformer) to CTranslate2 with this quantisation, "
        "which translate then decodes with: several times faster on the CPU (docs/benchmarks.md); and the "
        "chain's nmt: translation models (R2L, channel), in float32 whatever this says (their columns as tuned, "
        "within 1e-4 nats), which translate then scores with (a model CTranslate2 cannot convert stays with "
        "fairseq); default: no conversion, e.g. --ct2 int8",
    )
    p.add_argument("--out", required=True, help="the system directory to write (new or empty)")
    p.set_defaults(func=cmd_pack, paths=lambda a: ({"--nbest": a.nbest, "--weights": a.weights}, {}))

    p = sub.add_parser(
        "translate",
        help="translate raw text with a system directory: decode, add the scorers' columns, re-rank, detokenise",
        epilog="example: rerank translate --system system --input my_test.en --out my_test.de",
    )
    p.add_argument("--system", required=True, help="a directory written by rerank pack-system")
    p.add_argument("--input", required=True, help="raw source text, one sentence per line")
    p.add_argument("--out", required=True, help="the re-ranked translations, one per line (detokenised)")
    p.add_argument("--nbest-out", help="also write the scored n-best list here (with its signature)")
    p.add_argument(
        "--tokenized",
        action="store_true",
        help="write the tokenised, lowercased text the weights were tuned on instead of detokenising "
        "(default: detokenised with Moses' detokeniser)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, help="sentences per decoding batch (default: the system's), e.g. 64"
    )
    p.add_argument(
        "--system-digest",
        help="refuse the system unless its manifest has this digest (the sha256:… pack-system printed; "
        "default: the manifest's own digest is checked, which catches edits but not a replaced directory)",
    )
    p.add_argument(
        "--decoder",
        choices=DECODERS,
        default="auto",
        help="what runs a fairseq system's models: its checkpoints under fairseq (the search and the nmt: "
        "scorers, as tuned), or the CTranslate2 conversions of pack-system --ct2; auto: the conversions where "
        "there are some (default: auto), e.g. --decoder fairseq",
    )
    p.add_argument(
        "--block-sentences",
        type=positive_int,
        help="translate the input in blocks of this many sentences, each decoded, scored and re-ranked on its "
        "own (memory; shards deal the blocks, so the shards and the unsharded run of one input take the same "
        "value) (default: as many as make 50000 candidates at the system's n-best, 500 for 100-best), "
        "e.g. --block-sentences 250",
    )
    p.add_argument("--json", action="store_true", help="print the throughput as JSON (default: a line on stderr)")
    device_options(p)
    shard_options(p, "sentences of the input", parts="blocks (--block-sentences), dealt round-robin, of")
    signature_option(p, "--nbest-out")
    p.set_defaults(
        func=cmd_translate,
        paths=lambda a: (
            {"--input": a.input},
            {"--out": a.out, "--nbest-out": a.nbest_out, "--nbest-out (signature)": signature_path(a.nbest_out)},
        ),
    )
