"""``rerank generate``: candidates (n-best lists) from the user's own Hugging Face or
CTranslate2 model, by beam search or sampling (:mod:`rerank.features.generate`,
:mod:`rerank.features.sampling`)."""

from __future__ import annotations

import argparse
import sys

from rerank.argtypes import positive_int
from rerank.cli.options import device_options, device_settings, shard_option_value, shard_options, signature_option
from rerank.errors import InputError
from rerank.features.generate import generate_file
from rerank.features.sampling import Sampling
from rerank.outputs import signature_path


def cmd_generate(args) -> None:
    _check_pseudo_refs(args)

    def run(out_nbest, out_1best, count, beam, sampling):
        return generate_file(
            args.model,
            args.input,
            out_nbest,
            out_1best,
            count,
            beam,
            sampling,
            device_settings(args),
            args.max_length,
            progress=True,  # a bar on a terminal, a line every few seconds elsewhere
            shard=shard_option_value(args),
            chunk_sentences=args.chunk_sentences,
        )

    sampling = Sampling.parse(args.sampling) if args.sampling is not None else None
    record = run(args.out_nbest, args.out_1best, args.nbest, args.beam, sampling)
    print(
        f"{record['segments']} segments, {record['hypotheses']} candidates "
        f"({' '.join(record['features'])}) -> {args.out_nbest}, {args.out_1best}",
        file=sys.stderr,
    )
    if args.pseudo_ref_sampling is None:
        return
    # the pseudo-references: another sampler (and count) over the same input, a list of its own
    # (``rerank mbr --pseudo-refs``); its seeds are its own, so it does not repeat the candidates
    references = run(
        args.out_pseudo_refs, None, args.pseudo_refs or args.nbest, None, Sampling.parse(args.pseudo_ref_sampling)
    )
    print(
        f"{references['segments']} segments, {references['hypotheses']} pseudo-references "
        f"({references['sampling']['method']}) -> {args.out_pseudo_refs}",
        file=sys.stderr,
    )


def _check_pseudo_refs(args) -> None:
    """--pseudo-ref-sampling, --pseudo-refs and --out-pseudo-refs go together."""
    if args.pseudo_ref_sampling is None and (args.pseudo_refs or args.out_pseudo_refs):
        raise InputError("--pseudo-refs and --out-pseudo-refs need --pseudo-ref-sampling")
    if args.pseudo_ref_sampling is not None and not args.out_pseudo_refs:
        raise InputError("--pseudo-ref-sampling needs --out-pseudo-refs FILE (the pseudo-references' list)")
    if args.pseudo_ref_sampling is not None:
        Sampling.parse(args.pseudo_ref_sampling)  # refused before the candidates are generated


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """Add ``generate`` to the ``rerank`` sub-commands."""
    p = sub.add_parser(
        "generate",
        help="n-best lists from your own model (hf:PATH, ct2:DIR): beam search or sampling (epsilon, nucleus, "
        "top-k, temperature, ancestral)",
        description="Writes the same .nbest, .1best and signed .nbest.json as rerank nmt nbest: columns NAME (the "
        "model's log-probability with end-of-sentence, natural log) and NAMENorm (per token), candidates "
        "of a segment ordered by NAMENorm, the signature's beam feature NAMENorm.",
        epilog="example: rerank generate --model ct2:models/opus-mt-en-de-ct2 --input test.en --nbest 20 "
        "--sampling epsilon=0.02,seed=1 --out-nbest test.nbest --out-1best test.1best",
    )
    p.add_argument(
        "--model",
        required=True,
        help="hf:PATH (AutoModelForSeq2SeqLM with its tokenizer), ct2:DIR (a CTranslate2 translation "
        "model with the tokenizer beside it) or hf-lm:PATH,prompt=FILE (a causal LM continuing a prompt "
        "template that holds {source}: Tower, EuroLLM), with the settings of features add's scorers "
        "(name=, src_lang=, tgt_lang=, compute_type=, batch=), e.g. hf:models/opus-mt-en-de",
    )
    p.add_argument("--input", required=True, help="source sentences, one per line, as the model expects them")
    p.add_argument("--nbest", type=positive_int, required=True, help="candidates per sentence, e.g. --nbest 20")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--beam", type=positive_int, help="beam size, at least --nbest (default: --nbest)")
    how.add_argument(
        "--sampling",
        help="sampling instead of beam search: KEY=VALUE pairs of epsilon=E (Hewitt et al. 2022), top_p=P "
        "(nucleus), top_k=K, temperature=T, seed=S (default 1), or the word ancestral; truncations combine "
        "(Hugging Face's order: temperature, top-k, top-p, epsilon); without one, epsilon=0.02 "
        "(default: none, beam search; e.g. --sampling epsilon=0.02,seed=1 or --sampling top_p=0.9,temperature=0.8)",
    )
    p.add_argument("--max-length", type=positive_int, default=256, help="longest candidate in tokens (default: 256)")
    device_options(p)
    p.add_argument(
        "--chunk-sentences",
        type=positive_int,
        help="generate and score the input in chunks of this many sentences (memory; a model batches a "
        "chunk's sentences together and shards deal the chunks, so the shards and the unsharded run of one "
        "input take the same value) (default: as many as make 2048 candidates at --nbest, 20 for 100-best), "
        "e.g. --chunk-sentences 8",
    )
    shard_options(p, "sentences of the input", parts="chunks (--chunk-sentences), dealt round-robin, of")
    p.add_argument("--out-nbest", required=True, help="the n-best list (and OUT_NBEST.json, its signature)")
    p.add_argument("--out-1best", required=True, help="the first candidate of every sentence")
    p.add_argument(
        "--pseudo-ref-sampling",
        help="also draw pseudo-references for MBR with another sampler (the --sampling forms), written as a list "
        "of their own to --out-pseudo-refs for rerank mbr --pseudo-refs (ZurichNLP mbr's references_config) "
        "(default: none), e.g. --pseudo-ref-sampling epsilon=0.02,seed=2",
    )
    p.add_argument(
        "--pseudo-refs",
        type=positive_int,
        help="pseudo-references per sentence (default: --nbest), e.g. --pseudo-refs 64",
    )
    p.add_argument("--out-pseudo-refs", help="the pseudo-references' n-best list (and its signature .json)")
    signature_option(p, "--out-nbest")
    p.set_defaults(
        func=cmd_generate,
        paths=lambda a: (
            {"--input": a.input},
            {
                "--out-nbest": a.out_nbest,
                "--out-nbest (signature)": signature_path(a.out_nbest),
                "--out-1best": a.out_1best,
                "--out-pseudo-refs": a.out_pseudo_refs,
                "--out-pseudo-refs (signature)": signature_path(a.out_pseudo_refs) if a.out_pseudo_refs else None,
            },
        ),
    )
