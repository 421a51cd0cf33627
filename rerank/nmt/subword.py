"""The subword step between our text (Moses-tokenised, as ``rerank nmt prepare`` writes
``tok/``) and a fairseq model's vocabulary.

``rerank nmt prepare --subword`` learns one of two, jointly on both sides' training text:

* ``subword-nmt`` (the default, the paper's): BPE merges (Sennrich et al. 2016) in
  ``bpe.codes``, ``@@`` marking a subword that the next one continues;
* ``sentencepiece``: a SentencePiece unigram model (Kudo 2018) in ``spm.model``, ``▁``
  (U+2581) marking a word's first piece, learned on the tokenised text with the identity
  normalisation so that decoding gives that text back.

Every model directory trained on the data carries the same file (``rerank nmt train``,
``train-lm``), and everything that reads one finds the step there
(:func:`subword_spec`): a scorer's ``bpe=KIND:PATH`` (``subword-nmt:CODES``,
``sentencepiece:MODEL`` or ``none``, :func:`make_bpe`), raw text's segmentation before
decoding, and the removal of subwords from a decoder's output (:func:`join_subwords`, as
fairseq's ``--remove-bpe`` and ``--remove-bpe sentencepiece`` do).
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Iterable, Sequence

from rerank.errors import InputError
from rerank.outputs import atomic_write

#: the subword step's kind -> the file a prepared directory and its models keep it in
SUBWORD_FILES = {"subword-nmt": "bpe.codes", "sentencepiece": "spm.model"}


def join_subwords(tokens: Sequence[str], kind: str) -> str:
    """The text of subword ``tokens``: ``subword-nmt``'s ``@@`` joins removed, or
    ``sentencepiece``'s pieces joined and ``▁`` made a space; ``none`` joins them by spaces.
    As fairseq's ``post_process`` (``--remove-bpe``, ``--remove-bpe sentencepiece``).

    Raises:
        InputError: an unknown kind.
    """
    if kind == "subword-nmt":
        return (" ".join(tokens) + " ").replace("@@ ", "").rstrip()
    if kind == "sentencepiece":
        return "".join(tokens).replace("\u2581", " ").strip()
    if kind == "none":
        return " ".join(tokens)
    raise InputError(f"unknown subword step {kind!r}: expected {', '.join(SUBWORD_FILES)} or none")


class _NoBPE:
    """Text that is already in the model's subwords."""

    @staticmethod
    def process_line(text: str) -> str:
        """The text as it is."""
        return text

    @staticmethod
    def decode(tokens: Sequence[str]) -> str:
        """The text of a model's output tokens: joined by spaces."""
        return join_subwords(tokens, "none")


class _SubwordNMT:
    """subword-nmt's BPE (``@@ `` marks a word that goes on), as fairseq's ``--bpe subword_nmt``."""

    def __init__(self, handle):
        from subword_nmt.apply_bpe import BPE

        self.bpe = BPE(handle)

    def process_line(self, text: str) -> str:
        """The BPE segmentation of a line of tokenised text."""
        return self.bpe.process_line(text)

    @staticmethod
    def decode(tokens: Sequence[str]) -> str:
        """The text of a model's output subwords: ``@@`` joins removed (fairseq's ``--remove-bpe``)."""
        return join_subwords(tokens, "subword-nmt")


class _SentencePieceBPE:
    """A SentencePiece model as the subword step: pieces joined by spaces."""

    def __init__(self, path: str):
        import sentencepiece

        if not os.path.isfile(path):
            raise InputError("no such SentencePiece model", path)
        self.model = sentencepiece.SentencePieceProcessor(model_file=path)

    def process_line(self, text: str) -> str:
        """The pieces of a line, joined by spaces."""
        return " ".join(self.model.encode(text, out_type=str))

    def decode(self, tokens: Sequence[str]) -> str:
        """The text of a model's output pieces (SentencePiece's own decoding)."""
        return self.model.decode_pieces(list(tokens))


def make_bpe(spec: str, source: str):
    """``subword-nmt:CODES``, ``sentencepiece:MODEL`` or ``none`` -> an object with
    ``process_line(text) -> subword text`` and ``decode(tokens) -> text``.

    Raises:
        InputError: another spec (naming ``source``), a missing file.
        ImportError: its package (subword-nmt, sentencepiece) not installed.
    """
    kind, _, path = spec.partition(":")
    if kind == "none" and not path:
        return _NoBPE()
    if kind == "sentencepiece" and path:
        return _SentencePieceBPE(path)
    if kind == "subword-nmt" and path:
        if not os.path.isfile(path):
            raise InputError("no such BPE codes file", path)
        with open(path, encoding="utf-8") as handle:
            return _SubwordNMT(handle)
    raise InputError(f"{source}: bpe must be subword-nmt:CODES, sentencepiece:MODEL or none, not {spec!r}")


def subword_spec(directory: str) -> str:
    """``KIND:PATH`` of the subword step a ``rerank nmt prepare`` directory, a model directory
    trained on one, or a system's ``generator/`` keeps (:data:`SUBWORD_FILES`).

    Raises:
        InputError: neither file there (not prepare's layout).
    """
    for kind, name in SUBWORD_FILES.items():
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return f"{kind}:{path}"
    raise InputError(
        f"no {' or '.join(SUBWORD_FILES.values())}: not a directory of rerank nmt prepare's layout", directory
    )


def require(kind: str) -> None:
    """Import the package of the subword step ``kind`` (``rerank nmt prepare`` asks before any
    work).

    Raises:
        ImportError: subword-nmt or sentencepiece not installed (the CLI names its extra).
    """
    if kind == "sentencepiece":
        import sentencepiece  # noqa: F401
    else:
        import subword_nmt.learn_bpe  # noqa: F401


def learn_subwords(kind: str, texts: Iterable[str], out_dir: str, size: int, min_frequency: int = 2) -> str:
    """Learn the subword step ``kind`` on the lines ``texts`` (both sides' tokenised training
    text) into ``out_dir/FILE`` (:data:`SUBWORD_FILES`), written whole or not at all; returns
    its ``KIND:PATH``.  ``size``: the merges of ``subword-nmt`` (with ``min_frequency``), the
    vocabulary of ``sentencepiece`` (an upper bound: a small corpus gets fewer pieces).
    SentencePiece runs on one thread, without sampling the corpus: the same text gives
    the same model.

    Raises:
        InputError: an unknown kind, a SentencePiece vocabulary it cannot learn (fewer pieces
            than the corpus has characters).
        ImportError: its package (subword-nmt, sentencepiece) not installed.
    """
    if kind not in SUBWORD_FILES:
        raise InputError(f"unknown subword step {kind!r}: expected {' or '.join(SUBWORD_FILES)}")
    path = os.path.join(out_dir, SUBWORD_FILES[kind])
    if kind == "subword-nmt":
        from subword_nmt.learn_bpe import learn_bpe

        print(f"learning {size} joint BPE merges", file=sys.stderr)
        with atomic_write(path) as out:
            learn_bpe(list(texts), out, size, min_frequency=min_frequency)
        return f"{kind}:{path}"
    import sentencepiece

    print(f"learning a joint SentencePiece model of at most {size} pieces", file=sys.stderr)
    prefix = os.path.join(out_dir, ".spm.partial")
    try:
        sentencepiece.SentencePieceTrainer.train(
            sentence_iterator=(line.rstrip("\n") for line in texts),
            model_prefix=prefix,
            vocab_size=size,
            hard_vocab_limit=False,
            character_coverage=1.0,
            normalization_rule_name="identity",
            num_threads=1,
            input_sentence_size=0,
            shuffle_input_sentence=False,
            bos_id=-1,
            eos_id=-1,
            minloglevel=2,
        )
    except RuntimeError as err:  # e.g. fewer pieces than the corpus has characters
        for leftover in (prefix + ".model", prefix + ".vocab"):
            if os.path.exists(leftover):
                os.remove(leftover)
        detail = ". ".join(str(err).split("] ")[-1].split(". ")[:2])  # its own options' advice left out
        raise InputError(
            f"SentencePiece cannot learn {size} pieces from this corpus ({' '.join(detail.split())}): give a larger --spm-vocab"
        ) from None
    os.remove(prefix + ".vocab")
    try:
        with atomic_write(path, "wb") as out, open(prefix + ".model", "rb") as model:
            shutil.copyfileobj(model, out)
    finally:
        os.remove(prefix + ".model")
    return f"{kind}:{path}"
