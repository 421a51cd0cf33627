"""Build tiny random COMET-family and BERTScore checkpoints, to try the neural metrics offline.

Nothing can be downloaded in some places (and COMET-22 is 2.3 GB where it can): these are the
tests' checkpoints — a random 2-layer XLM-R encoder (hidden 32) with a SentencePiece tokenizer
trained on 1,000 Multi30k lines per language, and COMET checkpoint directories in
unbabel-comet 2.x's layout over it (``checkpoints/model.ckpt``, ``hparams.yaml``), seeded —
and a random 2-layer BERT for ``bertscore:``. They score the way the real models compute,
not how well: no accuracy claim is possible with them.

    .venv/bin/python scripts/tiny_checkpoints.py models/tiny            # da, kiwi and bert
    .venv/bin/python scripts/tiny_checkpoints.py models/tiny --kinds da,qe,kiwi,unite,xcomet

Then ``comet:models/tiny/da``, ``cometkiwi:models/tiny/kiwi``, ``bertscore:models/tiny/bert``
(docs/usage/neural-metrics.md). Needs the ``[comet]`` extra, and text to train the tokenizer
on: ``--text FILE`` (any text, one sentence per line, plain or .gz; its first 2,000 lines), by
default Multi30k's training text in ../shared/data beside the repository, as the tests use.
"""

from __future__ import annotations

import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: the kinds it builds: the tests' COMET checkpoints (tests/comet_tiny.py's CHECKPOINTS) and bert
KINDS = ("da", "da-norm", "da-layer1-max", "da-sparse", "qe", "kiwi", "unite", "xcomet", "bert")


def main(argv=None) -> int:
    sys.path.insert(0, ROOT)
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: .venv/bin/python scripts/tiny_checkpoints.py models/tiny --kinds da,kiwi",
    )
    parser.add_argument("out", help="the directory to build them in (made if missing), e.g. models/tiny")
    parser.add_argument(
        "--kinds",
        default="da,kiwi,bert",
        help=f"comma-separated: {', '.join(KINDS[:-1])} (COMET-family classes and layer settings) and bert "
        "(BERTScore's encoder) (default: da,kiwi,bert)",
    )
    parser.add_argument(
        "--text",
        metavar="FILE",
        help="train the tokenizers on this text (one sentence per line, plain or .gz) instead of Multi30k's "
        "training text in ../shared/data (default: that), e.g. --text my_corpus.en",
    )
    args = parser.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        parser.error(f"unknown kind {unknown[0]!r} (choose from {', '.join(KINDS)})")
    from rerank.errors import InputError
    from tests import tiny_models
    from tests.comet_tiny import CHECKPOINTS, build_checkpoint
    from tests.tiny_models import build_bert

    tiny_models.TEXT_FILE = args.text

    assert set(KINDS[:-1]) == set(CHECKPOINTS), "KINDS is tests/comet_tiny.py's CHECKPOINTS and bert"
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        print(
            f"tiny_checkpoints: error: {args.out}: OUT is a file; give a directory (made if missing)", file=sys.stderr
        )
        return 1
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as err:
        print(f"tiny_checkpoints: error: {args.out}: cannot make the directory: {err.strerror or err}", file=sys.stderr)
        return 1
    for kind in kinds:
        try:
            built = build_bert(args.out, "bert") if kind == "bert" else build_checkpoint(args.out, kind)
        except InputError as err:
            print(f"tiny_checkpoints: error: {err}", file=sys.stderr)
            return 1
        print(f"tiny_checkpoints: {kind} -> {built}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
