"""The Scorer interface shared by every re-ranking feature, and its registry.

A :class:`Scorer` turns an n-best list (plus the source sentences and, where it needs
them, one CNN feature vector per segment) into named feature columns, one value per
hypothesis.  ``rerank features add --scorer NAME:ARG`` builds scorers with
:func:`make_scorer` and appends their columns to a Moses n-best list.

Registered scorers:

* ``mlmme:MODEL_DIR`` -> ``MLMMEss`` (s_s: cosine of source and hypothesis embeddings)
  and, with images, ``MLMMEsi`` (s_i: cosine of image and hypothesis embeddings);
  ``vse:MODEL_DIR`` -> ``VSEsi`` (the one-language model's s_i) (``rerank/features/mlmme_scorer.py``);
* ``nmt:MODEL_DIR`` -> ``ROLE``, ``ROLENorm`` (R2L, Channel, L2R2: forced decoding under
  another translation model) and ``lm:MODEL_DIR`` -> ``LM``, ``LMNorm``
  (``rerank/features/nmt_scorer.py``);
* ``mbr:bleu`` / ``mbr:chrf`` -> ``MBRBLEU`` / ``MBRchrF``, the expected utility of MBR
  decoding (``rerank/features/consensus.py``);
* ``e5:`` -> ``E5ss``, multilingual-E5 source–hypothesis similarity
  (``rerank/features/text_embedding.py``);
* ``len:PREPARED_DIR`` -> ``LenRatio``, ``LenDev`` (``rerank/features/length.py``);
* ``ibm1:PREPARED_DIR`` -> ``IBM1Norm``, ``IBM1InvNorm``: IBM Model 1 in both directions,
  per word (``rerank/features/lexical.py``).
"""

from __future__ import annotations

import abc
import dataclasses
import os
import re
import sys
from typing import Any, ClassVar, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from rerank.config import parse_settings as config_settings
from rerank.config import spec_help
from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.nbest import NBestList
from rerank.registry import Registry
from rerank.textio import read_json, read_lines

#: every scorer by name; the modules of rerank.features register themselves, and the one that
#: registers a name is imported when it is first asked for (none imports torch or fairseq
#: before a scorer is built)
SCORERS: Registry["Scorer"] = Registry("scorer", "rerank.features", "SCORERS")


class Scorer(abc.ABC):
    """Interface.  ``names(has_images)`` lists the columns ``score`` returns;
    ``score(nbest, sources, images)`` returns {name: float64[M]} aligned with the rows of
    ``nbest``.  ``sources``: N preprocessed source sentences (or None); ``images``: float
    (N, D) CNN features, one row per segment (or None).  ``progress``: show tqdm bars
    on stderr while scoring.  A scorer class is built from the text after ``NAME:``.

    Feature sets: the columns are recorded in the list's signature under the scorer's
    :meth:`feature_sets` (default ``{set_name: names}``; ``set_name`` defaults to the first
    column), so that ``rerank tune --feature-sets beam,R2L`` selects them by name."""

    progress: bool = False
    #: the name of the scorer's feature set (None: its first column's name)
    set_name: Optional[str] = None
    #: whether the class runs a neural model and takes ``devices=`` (a
    #: :class:`rerank.devices.DeviceSettings`: ``features add --device/--dtype``)
    uses_device: bool = False
    #: one line for the help texts: ``columns: what it is`` for a scorer with a ``Config``
    #: (the spec is generated from it), ``NAME:ARG -> columns: what it is`` without one
    summary: str = ""
    #: the scorer's settings: a dataclass of :func:`rerank.config.option` fields, read from
    #: ``NAME:VALUE,key=value,…`` (one field may be ``positional``) and passed to ``__init__``;
    #: None: ``__init__`` takes the text after ``NAME:`` as it is
    Config: ClassVar[Optional[type]] = None

    def __init__(self, config: Any = None, devices: Optional[DeviceSettings] = None) -> None:  # noqa: B027
        """A scorer is built from its ``Config`` (:func:`make_scorer`), and with ``devices``
        where it declares ``uses_device``; each scorer's own constructor says what it loads."""

    @abc.abstractmethod
    def names(self, has_images: bool) -> List[str]:
        """Column names ``score`` returns."""

    def feature_sets(self, has_images: bool) -> Dict[str, List[str]]:
        """{set name: columns} of the columns this scorer adds."""
        names = self.names(has_images)
        return {self.set_name or names[0]: names} if names else {}

    @abc.abstractmethod
    def score(
        self, nbest: NBestList, sources: Optional[Sequence[str]], images: Optional[np.ndarray]
    ) -> Dict[str, np.ndarray]:
        """{column name: float64[M]} for the M hypotheses of ``nbest``."""

    @classmethod
    def pack(cls, config: Any, directory: str) -> Optional[Any]:
        """What ``rerank pack-system`` stores for this scorer: a ``Config`` that scores the
        same from files this method writes into the new directory ``directory`` (IBM Model 1's
        trained tables instead of the corpus they are trained on), or None (the default): the
        files ``config`` names are copied as they are.  ``config``'s paths are local ones."""
        return None

    @classmethod
    def ct2_spec(cls, config: Any, directory: str, quantization: str) -> Optional[str]:
        """What ``rerank pack-system --ct2`` runs in place of this scorer when ``translate``
        uses CTranslate2: the spec of a ``ct2:`` scorer giving the same columns from a
        conversion of the scorer's model (quantised to ``quantization``) that this method
        writes into the new directory ``directory``; or None (the default): nothing to convert,
        the scorer runs as packed.  ``config`` is the packed scorer's (its paths local ones).

        Raises:
            InputError: a model CTranslate2 cannot convert, naming it."""
        return None


def scorer_summaries() -> Dict[str, str]:
    """{name: one line} of every registered scorer: each class's ``summary`` (its spec, the
    columns it adds, what it is), for ``rerank --help`` and ``rerank features add --help``.
    Imports the scorer modules (none loads torch or fairseq)."""
    return {
        name: f"{spec_help(name, cls.Config)} -> {cls.summary}" if cls.Config else cls.summary
        for name, cls in SCORERS.classes().items()
    }


def given_settings(config) -> Tuple[str, Dict[str, Any], str]:
    """(the positional field's value, the other settings given — not empty —, the argument
    as a user writes it: ``VALUE,key=value,…``) of a scorer's ``Config`` instance, for
    scorers whose checks tell a setting given from one left out."""
    main, settings = "", {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.metadata.get("positional"):
            main = value
        elif value not in ("", None) and value != f.default:
            settings[f.name] = value
    return main, settings, ",".join(([main] if main else []) + [f"{k}={v}" for k, v in settings.items()])


def make_scorer(spec: str, devices: Optional[DeviceSettings] = None) -> Scorer:
    """``NAME:ARG`` -> the scorer registered as NAME, built from ARG (model scorers on
    ``devices``, default :class:`DeviceSettings`: auto device, float32).  Raises
    :class:`InputError` for an unknown name or an ARG the scorer refuses, naming ``spec``
    where the scorer's own message does not (``mbr:foo: unknown metric 'foo'``)."""
    name, _, arg = spec.partition(":")
    cls = SCORERS.get(name)
    try:
        if cls.Config is not None:
            arg = config_settings(cls.Config, arg, spec)
        if cls.uses_device:
            return cls(arg, devices=devices or DeviceSettings())
        return cls(arg)
    except InputError as err:
        if err.path is not None or spec in err.message or err.message.startswith(f"{name}:"):
            raise
        raise InputError(f"scorer {spec}: {err.message}") from None


def training_pairs(name: str, corpus: str, src: str, tgt: str) -> Tuple[List[str], List[str]]:
    """(source lines, target lines) of a scorer's training corpus, given either way: a
    ``rerank nmt prepare`` directory (``corpus``, :func:`prepared_training_pairs`) or two
    line-aligned parallel files (``src``, ``tgt``: plain or ``.gz``, one sentence per line,
    tokenised as the n-best lists are) — any corpus, any language pair.  ``name``: the
    scorer's, for messages, which show both forms.

    Raises:
        InputError: neither or both forms, one file of the pair without the other, a
            corpus that is not a prepare directory, files of different line counts or empty.
    """
    forms = f"{name}:PREPARED_DIR (rerank nmt prepare) or {name}:src=TRAIN.SRC,tgt=TRAIN.TGT (parallel files)"
    if src or tgt:
        if corpus:
            raise InputError(f"{name}: give the training corpus one way: {forms}")
        if not (src and tgt):
            raise InputError(f"{name}: src= and tgt= go together (the two sides of the parallel corpus): {forms}")
        return aligned_pairs(src, tgt)
    if not corpus:
        raise InputError(f"{name}: needs the training corpus: {forms}")
    if not os.path.isfile(os.path.join(corpus, "prepare.json")):
        raise InputError(f"not a 'rerank nmt prepare' directory (no prepare.json): give {forms}", corpus)
    return prepared_training_pairs(corpus)


#: a token with punctuation glued to its end (``mann.``, ``hunde,``): text not Moses-tokenised
GLUED = re.compile(r"\w[.,!?;:]+$")


def text_style(words: Iterable[str]) -> Tuple[float, float]:
    """(share of words holding an upper-case letter, share ending in glued punctuation) of
    ``words``: how a text is cased and tokenised."""
    count = cased = glued = 0
    for word in words:
        count += 1
        cased += word != word.lower()
        glued += bool(GLUED.search(word))
    return (cased / count, glued / count) if count else (0.0, 0.0)


def style_difference(listed: Tuple[float, float], trained: Tuple[float, float]) -> str:
    """Where a list's casing or tokenisation (:func:`text_style`) differs from a training text's:
    one is lowercased (under 1 % of its words with a capital) and the other not (over 10 %), or
    one is tokenised (under 1 % glued punctuation) and the other not (over 5 %); "" where both
    agree."""
    parts = []
    if (listed[0] < 0.01) != (trained[0] < 0.01) and max(listed[0], trained[0]) > 0.10:
        parts.append(
            "the list is lowercased and the training text cased"
            if listed[0] < 0.01
            else "the training text is lowercased and the list cased"
        )
    if (listed[1] < 0.01) != (trained[1] < 0.01) and max(listed[1], trained[1]) > 0.05:
        parts.append(
            "the list is tokenised and the training text's punctuation is glued to its words"
            if listed[1] < 0.01
            else "the training text is tokenised and the list's punctuation glued"
        )
    return "; ".join(parts)


class VocabularyCheck:
    """The words of a scorer's training text, against which the first list it scores is
    checked once: when most of the list's words are not among them — raw cased text against
    tokenised lowercased lists, say — the scorer's tables mostly score words they never saw,
    and one warning line says so with the numbers (the columns are still written).

    Args:
        spec: the scorer, for the message (``ibm1:src=…``).
        source: the training text's file or directory, for the message.
        words: the training text's target-side words.
    """

    #: the share of the list's words (tokens) that must be known for no warning
    known_share = 0.5
    #: the list's words checked: those of its first hypotheses, up to this many
    sample = 100_000

    def __init__(self, spec: str, source: str, words: Iterable[str]):
        self.spec, self.source, self.words, self.checked = spec, source, set(words), False

    def check(self, hypotheses: Sequence[str]) -> Optional[float]:
        """The share of known words among the first hypotheses' (once; None after), with the
        warning on stderr when it is below :attr:`known_share`."""
        if self.checked:
            return None
        self.checked = True
        tokens: List[str] = []
        for hypothesis in hypotheses:
            tokens.extend(hypothesis.split())
            if len(tokens) >= self.sample:
                break
        if not tokens:
            return None
        known = sum(token in self.words for token in tokens) / len(tokens)
        differs = style_difference(text_style(tokens), text_style(self.words))
        if known < self.known_share or differs:
            why = f"; {differs}" if differs else ""
            print(
                f"rerank: warning: {self.spec}: {1 - known:.0%} of the list's words ({len(tokens):,} checked) are not "
                f"in the training text {self.source}{why}: tokenise and case it as the list is (rerank tokenize "
                "--input TEXT --lang LANG --out TEXT.tok: Moses' tokeniser, lowercased, as rerank nmt prepare)",
                file=sys.stderr,
            )
        return known


def prepared_training_pairs(path: str) -> Tuple[List[str], List[str]]:
    """The tokenised training pairs of a ``rerank nmt prepare`` directory:
    (source lines, target lines) of ``tok/train.{src,tgt}``, languages from ``prepare.json``.

    Raises:
        InputError: not a directory, no prepare.json or one without the languages, files
            of different lengths or empty.
    """
    meta = os.path.join(path, "prepare.json")
    if not os.path.isdir(path) or not os.path.exists(meta):
        raise InputError("not a 'rerank nmt prepare' directory (no prepare.json)", path)
    config = read_json(meta)
    config = config.get("config") if isinstance(config, dict) else None
    if not isinstance(config, dict) or not all(isinstance(config.get(k), str) for k in ("src", "tgt")):
        raise InputError("not a 'rerank nmt prepare' signature (no config.src / config.tgt)", meta)
    src_path, tgt_path = (os.path.join(path, "tok", f"train.{config[k]}") for k in ("src", "tgt"))
    return aligned_pairs(src_path, tgt_path)


def aligned_pairs(src_path: str, tgt_path: str) -> Tuple[List[str], List[str]]:
    """(source lines, target lines) of two line-aligned files (plain or ``.gz``).

    Raises:
        InputError: files of different line counts (naming both), an empty corpus.
    """
    sources, targets = read_lines(src_path), read_lines(tgt_path)
    if len(sources) != len(targets):
        raise InputError(f"{len(sources)} lines here but {len(targets)} in {tgt_path}: not line-aligned", src_path)
    if not sources:
        raise InputError("the training corpus is empty", src_path)
    return sources, targets
