"""Lexical translation features (``ibm1:``): IBM Model 1 in both directions, trained by EM
on the training corpus — the lexical features of Och et al. 2004 ("A Smorgasbord of
Features for Statistical Machine Translation", sec. 3: "IBM Model 1 ... in both
directions"), the cheapest channel model there is.

``ibm1:PREPARED_DIR`` (a ``rerank nmt prepare`` directory) or ``ibm1:src=TRAIN.SRC,tgt=TRAIN.TGT``
(any parallel corpus, any language pair: two line-aligned files, plain or ``.gz``, tokenised
as the n-best lists are) -> for a hypothesis e of source f (tokenised text):

* ``IBM1Norm`` = log p(e | f) / m, the direct model per hypothesis word:
  ``log p(e | f) = sum_j log(sum_{i=0..l} t(e_j | f_i)) − m·log(l + 1)`` over the m hypothesis
  words, with ``f_0`` the empty word NULL and l source words (Brown et al. 1993, eq. 15,
  without the constant length term ε);
* ``IBM1InvNorm`` = log p(f | e) / l, the same under the inverse table t(f | e) per source
  word — the channel direction: it asks whether every source word is accounted for by
  the hypothesis.

Word counts are at least 1.  ``form=sum`` gives the sums instead (``IBM1``, ``IBM1Inv``, as
``NMT`` beside ``NMTNorm``), ``form=both`` all four columns.  The per-word form is the
default because it re-ranked best on held-out data: 5-fold cross-fitted MIRA on the main
job's val lists (README, Results, "What changed last: IBM Model 1 features"), where the sums, whose size grows with the
hypothesis's length, drifted to longer output.

Natural logs.  A pair never seen in training (and a trained t below it) gets t = ``floor``
(default 1e-7), so a hypothesis word outside the training vocabulary costs exactly
``log floor``, not −∞.  The tables are trained afresh when the scorer is built (``iterations``
EM passes from uniform t, default 5; ~15 s on Multi30k's 29,000 pairs), so
the scores of a list depend only on the corpus and the settings.  ``ibm1:tables=FILE.npz``
reads tables trained already instead (:meth:`Model1Scorer.save`; ``rerank pack-system``
stores them so, and a system does not train them at every ``translate``): the same scores,
bit for bit.

Everything is vectorised over the (i, j) word pairs of a batch of sentence pairs
(:func:`pair_index`): the t table is a sorted array of pair keys ``src_id · V_tgt + tgt_id``
with a value each, looked up with ``np.searchsorted``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple

import numpy as np

from rerank.argtypes import open_unit_interval, positive_int
from rerank.config import option
from rerank.errors import InputError, one_line
from rerank.features.scorer import SCORERS, Scorer, VocabularyCheck, training_pairs
from rerank.outputs import atomic_write
from rerank.shards import cost_ranges

NULL = "<NULL>"


class Vocabulary:
    """Word -> id, with id 0 for NULL; a word never seen encodes as −1."""

    def __init__(self, sentences: Sequence[Sequence[str]]):
        self.index: Dict[str, int] = {NULL: 0}
        for words in sentences:
            for word in words:
                self.index.setdefault(word, len(self.index))

    @classmethod
    def from_words(cls, words: Sequence[str]) -> "Vocabulary":
        """The vocabulary whose ids are the positions in ``words`` (NULL first), as
        :attr:`words` lists them.  Raises ValueError: NULL not first, a word twice."""
        vocab = cls(())
        if not len(words) or words[0] != NULL:
            raise ValueError("a vocabulary's words start with NULL")
        vocab.index = {word: i for i, word in enumerate(words)}
        if len(vocab.index) != len(words):
            raise ValueError("a vocabulary's words are distinct")
        return vocab

    @property
    def words(self) -> List[str]:
        """The words in id order (NULL first)."""
        return list(self.index)

    def __len__(self) -> int:
        return len(self.index)

    def encode(self, sentences: Sequence[Sequence[str]], null: bool = False) -> Tuple[np.ndarray, np.ndarray]:
        """(ids int64[total words], lengths int64[len(sentences)]) of the sentences one after
        the other, −1 for unknown words; with ``null`` each sentence starts with NULL (id 0)."""
        get, head = self.index.get, [NULL] if null else []
        ids = np.fromiter((get(w, -1) for words in sentences for w in (*head, *words)), dtype=np.int64)
        return ids, np.array([len(words) + len(head) for words in sentences], dtype=np.int64)


def pair_index(src_start: np.ndarray, src_len: np.ndarray, tgt_len: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    """Every (source position i, target position j) of K sentence pairs.

    Args:
        src_start, src_len: int64[K] where each pair's source starts in the array of source
            words and its length (NULL included; pairs may share a source: a segment's
            hypotheses).
        tgt_len: int64[K] target lengths m; the targets lie one after the other.
    Returns:
        (src_pos int64[P], tgt_pos int64[P]) with P = sum l·m: the position of each entry's
        source word in the source array and of its target word in the targets.
    """
    n = src_len * tgt_len
    pair = np.repeat(np.arange(len(n)), n)
    local = np.arange(int(n.sum())) - np.repeat(np.cumsum(n) - n, n)
    m = tgt_len[pair]
    return src_start[pair] + local // m, (np.cumsum(tgt_len) - tgt_len)[pair] + local % m


class Model1:
    """An IBM Model 1 table t(tgt | src) (Brown et al. 1993, sec. 4.1).

    ``keys``: sorted int64[P] of ``src_id · V_tgt + tgt_id`` over the pairs that co-occur in
    training; ``t``: float64[P] their probabilities (each source word's sum to 1 over its
    co-occurring target words).
    """

    def __init__(self, src_vocab: Vocabulary, tgt_vocab: Vocabulary, keys: np.ndarray, t: np.ndarray, floor: float):
        self.src_vocab, self.tgt_vocab, self.keys, self.t, self.floor = src_vocab, tgt_vocab, keys, t, floor

    @classmethod
    def train(
        cls,
        sources: Sequence[Sequence[str]],
        targets: Sequence[Sequence[str]],
        iterations: int = 5,
        floor: float = 1e-7,
        batch_pairs: int = 8_000_000,
    ) -> "Model1":
        """EM from a uniform table (Brown et al. 1993, eq. 16–17): each pass adds the
        posterior ``t(e_j|f_i) / sum_i' t(e_j|f_i')`` of every (i, j), NULL included, to the
        count of (f_i, e_j) and renormalises the counts per source word.

        The (i, j) pairs (sum (l + 1)·m: ~5.6 M on Multi30k's training set) are built in
        batches of sentence pairs holding at most ~``batch_pairs`` of them (one pair alone
        may hold more; ~80 bytes per pair of a batch while it is built), and each pair's
        parameter and target position are kept for the EM passes (16 bytes per pair), plus
        ~24 bytes per distinct co-occurring word pair.

        Raises:
            ValueError: sources and targets of different lengths, or no target word at all.
        """
        if len(sources) != len(targets):
            raise ValueError("Model1.train needs as many sources as targets")
        src_vocab, tgt_vocab = Vocabulary(sources), Vocabulary(targets)
        src_ids, src_len = src_vocab.encode(sources, null=True)
        tgt_ids, tgt_len = tgt_vocab.encode(targets)
        if not len(tgt_ids):
            raise ValueError("Model1.train: the targets hold no word")
        src_start, tgt_start = np.cumsum(src_len) - src_len, np.cumsum(tgt_len) - tgt_len
        batches = cost_ranges(np.cumsum(src_len * tgt_len), batch_pairs)

        # each batch's distinct pair keys and, per (i, j), the index of its key among them;
        # then every pair's parameter in the global table, kept for every EM pass
        batch_keys, index = [], []
        for first, last in batches:
            src_pos, tgt_pos = pair_index(src_start[first:last], src_len[first:last], tgt_len[first:last])
            local, inverse = np.unique(
                src_ids[src_pos] * len(tgt_vocab) + tgt_ids[tgt_start[first] + tgt_pos], return_inverse=True
            )
            batch_keys.append(local)
            index.append((inverse, tgt_pos, int(tgt_len[first:last].sum())))
        keys = np.unique(np.concatenate(batch_keys))
        index = [
            (np.searchsorted(keys, local)[inverse], tgt_pos, words)
            for local, (inverse, tgt_pos, words) in zip(batch_keys, index)
        ]
        param_src = keys // len(tgt_vocab)
        t = np.ones(len(keys))
        for _ in range(iterations):
            counts = np.zeros(len(keys))
            for param, tgt_pos, words in index:
                value = t[param]
                total = np.bincount(tgt_pos, weights=value, minlength=words)
                counts += np.bincount(param, weights=value / total[tgt_pos], minlength=len(keys))
            t = counts / np.bincount(param_src, weights=counts, minlength=len(src_vocab))[param_src]
        return cls(src_vocab, tgt_vocab, keys, t, floor)

    def lookup(self, src: np.ndarray, tgt: np.ndarray) -> np.ndarray:
        """float64[P] t(tgt | src) of id pairs (−1: unknown word), ``floor`` for pairs never
        seen (and for a trained t below it)."""
        key = src * len(self.tgt_vocab) + tgt
        at = np.minimum(np.searchsorted(self.keys, key), len(self.keys) - 1)
        found = (src >= 0) & (tgt >= 0) & (self.keys[at] == key)
        return np.where(found, np.maximum(self.t[at], self.floor), self.floor)

    def log_prob(
        self,
        sources: Sequence[Sequence[str]],
        source_of: np.ndarray,
        targets: Sequence[Sequence[str]],
        batch_pairs: int = 2_000_000,
    ) -> np.ndarray:
        """float64[K] log p(target_k | sources[source_of[k]]) (natural log), K = len(targets):
        ``sum_j log(sum_i t(e_j | f_i)) − m·log(l + 1)`` with f_0 = NULL.

        Targets are scored in batches of at most ~``batch_pairs`` (i, j) pairs (one target
        alone may hold more); an empty target scores 0 (log 1)."""
        source_of = np.asarray(source_of, dtype=np.int64)
        if len(source_of) != len(targets):
            raise ValueError(f"log_prob: {len(source_of)} source indices for {len(targets)} targets")
        src_ids, src_len = self.src_vocab.encode(sources, null=True)
        src_start = np.cumsum(src_len) - src_len
        tgt_ids, tgt_len = self.tgt_vocab.encode(targets)
        tgt_start = np.cumsum(tgt_len) - tgt_len
        pair_len = src_len[source_of]
        cost = np.cumsum(pair_len * tgt_len)
        out = np.zeros(len(targets))
        for first, last in cost_ranges(cost, batch_pairs):
            sl = slice(first, last)
            src_pos, tgt_pos = pair_index(src_start[source_of[sl]], pair_len[sl], tgt_len[sl])
            words = int(tgt_len[sl].sum())
            t = self.lookup(src_ids[src_pos], tgt_ids[tgt_start[first] + tgt_pos])
            total = np.bincount(tgt_pos, weights=t, minlength=words)
            word_of = np.repeat(np.arange(last - first), tgt_len[sl])
            out[sl] = np.bincount(word_of, weights=np.log(total), minlength=last - first) - tgt_len[sl] * np.log(
                pair_len[sl]
            )
        return out


def _packed_words(words: Sequence[str]) -> np.ndarray:
    """uint8[bytes]: the words' UTF-8, one per line (a word of ``str.split`` holds no
    whitespace), as :meth:`Model1Scorer.save` stores a vocabulary."""
    return np.frombuffer("\n".join(words).encode("utf-8"), dtype=np.uint8)


def _unpacked_words(data: np.ndarray) -> List[str]:
    """The words of :func:`_packed_words`.  Raises UnicodeDecodeError, ValueError: not such bytes."""
    if data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError("a vocabulary is stored as UTF-8 bytes")
    return data.tobytes().decode("utf-8").split("\n")


@SCORERS.register("ibm1")
class Model1Scorer(Scorer):
    """``IBM1Norm`` = log p(hypothesis | source) per hypothesis word and ``IBM1InvNorm`` =
    log p(source | hypothesis) per source word (``form=sum``: ``IBM1``, ``IBM1Inv``, the sums;
    ``form=both``: all four),
    under IBM Model 1 tables trained on a ``rerank nmt prepare`` directory's tokenised
    training pairs, or on any two parallel files (see the module docstring).

    Args:
        config: :attr:`Config` (``ibm1:PREPARED_DIR``, ``ibm1:src=TRAIN.SRC,tgt=TRAIN.TGT`` or
            ``ibm1:tables=FILE.npz``, then ``[,form=word|sum|both][,iterations=N][,floor=X]``).
    Raises:
        InputError: no corpus, a corpus and tables, tables that are not :meth:`save`'s,
            not a prepare directory, parallel files that are not
            line-aligned (:func:`rerank.features.scorer.training_pairs`), an unknown form, a
            setting that is not a positive integer / a probability in (0, 1).
    """

    summary = "IBM1Norm, IBM1InvNorm (form=sum: IBM1, IBM1Inv): IBM Model 1 log p(hyp|src), log p(src|hyp) per word"

    @dataclass
    class Config:
        corpus: str = option("", "the rerank nmt prepare directory of the training pairs", positional=True, path=True)
        src: str = option(
            "", "or the training pairs as two parallel files: the source side (plain or .gz)", path="file"
        )
        tgt: str = option("", "… and the target side, line-aligned with src", path="file")
        form: str = option("word", "the columns: per word, sums or both", choices=("word", "sum", "both"))
        iterations: int = option(5, "EM passes from uniform", type=positive_int)
        floor: float = option(1e-7, "the probability of a word pair never seen", type=open_unit_interval)
        tables: str = option("", "or the tables trained already (.npz of pack-system) instead of a corpus", path="file")

    set_name = "IBM1"
    #: the tables of both directions (trained, or read from ``tables=``)
    direct: "Model1"
    inverse: "Model1"
    #: the columns of each form
    FORMS = {
        "word": ["IBM1Norm", "IBM1InvNorm"],
        "sum": ["IBM1", "IBM1Inv"],
        "both": ["IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"],
    }

    def __init__(self, config: "Model1Scorer.Config"):
        path = config.corpus or config.src
        self.iterations, self.floor, self.form = config.iterations, config.floor, config.form
        spec = "ibm1:" + ",".join(
            f"{k}={v}"
            for k, v in (("corpus", config.corpus), ("src", config.src), ("tgt", config.tgt), ("tables", config.tables))
            if v
        )
        if config.tables:
            if path or config.tgt:
                raise InputError("ibm1: give the training corpus or tables=, not both")
            self._load(config.tables)
            self.vocabulary = VocabularyCheck(spec, config.tables, self.direct.tgt_vocab.words)
            return
        sources, targets = training_pairs("ibm1", config.corpus, config.src, config.tgt)
        src_words = [line.split() for line in sources]
        tgt_words = [line.split() for line in targets]
        if not any(src_words) or not any(tgt_words):
            raise InputError("the training corpus holds no words", path)
        self.direct = Model1.train(src_words, tgt_words, self.iterations, self.floor)
        self.inverse = Model1.train(tgt_words, src_words, self.iterations, self.floor)
        self.vocabulary = VocabularyCheck(spec, config.tgt or config.corpus, self.direct.tgt_vocab.words)

    def save(self, path: str) -> None:
        """Write both trained tables to ``path`` (compressed ``.npz``, no pickled objects; ~18 MB
        for Multi30k's training set, read in 0.2 s): the two
        vocabularies' words and each direction's keys and t, float64 as trained, so that a
        scorer loaded from it (``ibm1:tables=PATH``) scores exactly as this one."""
        with atomic_write(path, "wb") as out:
            np.savez_compressed(
                out,
                src_words=_packed_words(self.direct.src_vocab.words),
                tgt_words=_packed_words(self.direct.tgt_vocab.words),
                direct_keys=self.direct.keys,
                direct_t=self.direct.t,
                inverse_keys=self.inverse.keys,
                inverse_t=self.inverse.t,
                iterations=np.array(self.iterations),
            )

    def _load(self, path: str) -> None:
        """Both tables from a file of :meth:`save`.  Raises :class:`InputError`: not such a file."""
        names = ("src_words", "tgt_words", "direct_keys", "direct_t", "inverse_keys", "inverse_t")
        try:
            with np.load(path, allow_pickle=False) as saved:
                arrays = {name: saved[name] for name in names}
                self.iterations = int(saved["iterations"]) if "iterations" in saved.files else self.iterations
            src_vocab = Vocabulary.from_words(_unpacked_words(arrays["src_words"]))
            tgt_vocab = Vocabulary.from_words(_unpacked_words(arrays["tgt_words"]))
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as err:
            raise InputError(f"not IBM Model 1 tables of rerank (pack-system's): {one_line(err)}", path) from None
        for direction in ("direct", "inverse"):
            if arrays[f"{direction}_keys"].shape != arrays[f"{direction}_t"].shape:
                raise InputError(f"not IBM Model 1 tables: {direction} keys and t differ in length", path)
        self.direct = Model1(src_vocab, tgt_vocab, arrays["direct_keys"], arrays["direct_t"], self.floor)
        self.inverse = Model1(tgt_vocab, src_vocab, arrays["inverse_keys"], arrays["inverse_t"], self.floor)

    @classmethod
    def pack(cls, config: "Model1Scorer.Config", directory: str) -> "Model1Scorer.Config":
        """The tables trained once (or the saved ones) written to ``directory/tables.npz``:
        a system scores with them instead of training on the corpus at every call."""
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "tables.npz")
        cls(config).save(path)
        return cls.Config(tables=path, form=config.form, floor=config.floor)

    def names(self, has_images: bool) -> List[str]:
        return list(self.FORMS[self.form])

    def score(self, nbest, sources, images):
        if sources is None or len(sources) != nbest.num_segments:
            raise InputError(f"ibm1: needs one source sentence per segment ({nbest.num_segments}): --source")
        self.vocabulary.check(nbest.hypotheses)
        src_words = [s.split() for s in sources]
        hyp_words = [h.split() for h in nbest.hypotheses]
        segment = np.asarray(nbest.segment, dtype=np.int64)
        direct = self.direct.log_prob(src_words, segment, hyp_words)
        # p(source | hypothesis): each hypothesis is the "source" of its segment's sentence
        inverse = self.inverse.log_prob(hyp_words, np.arange(len(hyp_words)), [src_words[s] for s in segment])
        hyp_len = np.array([max(len(h), 1) for h in hyp_words], dtype=np.float64)
        src_len = np.array([max(len(s), 1) for s in src_words], dtype=np.float64)[segment]
        columns = {"IBM1": direct, "IBM1Norm": direct / hyp_len, "IBM1Inv": inverse, "IBM1InvNorm": inverse / src_len}
        return {name: columns[name] for name in self.FORMS[self.form]}
