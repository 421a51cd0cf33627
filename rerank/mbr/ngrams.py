"""N-gram counts of one segment's texts, and the two products MBR takes from them: all pairs'
clipped matches by matrix products, and matches against aggregate references of fractional
counts (Vamvas & Sennrich 2024)."""

from __future__ import annotations

from typing import List, Optional, Tuple

import numpy as np

from rerank.metrics.bleu_stats import ngram_codes


class NgramCounts:
    """The n-gram counts of a few texts (one segment's candidates and pseudo-references), per
    order the triplets (text, n-gram, count).  Two products on them:

    * all pairs' clipped matches by matrix products (:meth:`matches`): for order n, column
      (g, t) of an indicator matrix is 1 where a text holds n-gram g at least t times, so
      ``sum_g min(c_a(g), c_b(g))`` is the dot product of the rows of texts a and b (exact:
      float32 holds integers below 2^24);
    * matches against aggregate references of fractional counts x(g) (Vamvas & Sennrich
      2024; :meth:`aggregate_matches`): ``sum_g min(c_a(g), x(g))`` over each text's
      triplets, linear in the n-grams.
    """

    #: the most indicator cells (float32) :meth:`matches` builds for one set of texts
    #: (~128 MB); a larger segment is scored pair by pair (:func:`rerank.metrics.bleu_stats.pair_matches`)
    max_cells = 32_000_000

    def __init__(self, ids: np.ndarray, lengths: np.ndarray, vocab_size: int, order: int):
        """Count the n-grams (orders 1..``order``) of the texts given flat as token ``ids``
        (int64[L], ids below ``vocab_size``) and ``lengths`` (int64[T])."""
        self.lengths = np.asarray(lengths, dtype=np.int64)
        codes = ngram_codes(ids, self.lengths, vocab_size, order)
        owner = np.repeat(np.arange(len(self.lengths)), self.lengths)
        #: per order (text int64[P], n-gram int64[P], count int64[P], n-grams), ordered by
        #: (n-gram, text); n-grams numbered in the order of their codes; None: no n-gram
        self.triplets: List[Optional[Tuple[np.ndarray, np.ndarray, np.ndarray, int]]] = []
        for k in range(order):
            valid = np.flatnonzero(codes[k] >= 0)
            if not len(valid):
                self.triplets.append(None)
                continue
            # one stable sort by code: the positions of an n-gram stay in text order, so its
            # runs of one (n-gram, text) are its counts (np.unique sorted twice)
            by_code = valid[np.argsort(codes[k][valid], kind="stable")]
            code, text = codes[k][by_code], owner[by_code]
            new_gram = np.concatenate([[True], code[1:] != code[:-1]])
            gram = np.cumsum(new_gram) - 1
            starts = np.flatnonzero(new_gram | np.concatenate([[True], text[1:] != text[:-1]]))
            count = np.diff(np.append(starts, len(code)))
            self.triplets.append((text[starts], gram[starts], count, int(gram[-1]) + 1))
        self._indicator: Optional[list] = None

    def _indicators(self) -> Optional[list]:
        """Per order the float32 indicator matrix [T, (n-gram, t) columns], or None where they
        would exceed :attr:`max_cells`."""
        if self._indicator is None:
            tops = []
            for part in self.triplets:
                if part is not None:
                    text, g, count, size = part
                    top = np.zeros(size, dtype=np.int64)
                    np.maximum.at(top, g, count)
                    tops.append(top)
            if len(self.lengths) * sum(int(t.sum()) for t in tops) > self.max_cells:
                return None
            self._indicator, per_order = [], iter(tops)
            for part in self.triplets:
                if part is None:
                    self._indicator.append(None)
                    continue
                text, g, count, _ = part
                base = np.concatenate([[0], np.cumsum(next(per_order))])
                matrix = np.zeros((len(self.lengths), int(base[-1])), dtype=np.float32)
                within = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
                matrix[np.repeat(text, count), np.repeat(base[g], count) + within] = 1.0
                self._indicator.append(matrix)
        return self._indicator

    def fits(self) -> bool:
        """Whether :meth:`matches` can build its matrices (:attr:`max_cells`)."""
        return self._indicators() is not None

    def matches(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float64[len(rows), len(cols), order] clipped matches of texts ``rows`` against
        ``cols``, by matrix products.  Raises ``MemoryError`` where :meth:`fits` is false."""
        indicator = self._indicators()
        if indicator is None:
            raise MemoryError("n-gram indicator matrices over NgramCounts.max_cells")
        out = np.zeros((len(rows), len(cols), len(indicator)))
        for k, matrix in enumerate(indicator):
            if matrix is not None:
                out[:, :, k] = matrix[rows] @ matrix[cols].T
        return out

    def aggregate_matches(self, rows: np.ndarray, refs: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """float64[len(rows), K, order] clipped matches of texts ``rows`` against K aggregate
        references: column j of ``weights`` (float64[len(refs), K]) averages the n-gram
        counts of the texts ``refs`` (Vamvas & Sennrich 2024's aggregate; a column per
        centroid for centroid MBR).  Linear in the texts' n-grams; ``rows`` distinct."""
        count_texts = len(self.lengths)
        out = np.zeros((len(rows), weights.shape[1], len(self.triplets)))
        where = np.full(count_texts, -1, dtype=np.int64)
        where[rows] = np.arange(len(rows))
        weight_of = np.zeros((count_texts, weights.shape[1]))
        np.add.at(weight_of, refs, weights)  # a text given twice among refs counts twice
        for k, part in enumerate(self.triplets):
            if part is None:
                continue
            text, g, count, size = part
            for j in range(weights.shape[1]):
                aggregate = np.bincount(g, weights=weight_of[text, j] * count, minlength=size)
                keep = where[text] >= 0
                out[:, j, k] = np.bincount(
                    where[text[keep]], weights=np.minimum(count[keep], aggregate[g[keep]]), minlength=len(rows)
                )
        return out

    def vectors(self):
        """[T, n-grams of all orders] each text's n-gram counts, the space in which centroid
        MBR clusters: a dense array up to 4M cells, else scipy.sparse CSR."""
        from scipy.sparse import csr_matrix

        rows, cols, values, offset = [], [], [], 0
        for part in self.triplets:
            if part is not None:
                text, g, count, size = part
                rows.append(text)
                cols.append(g + offset)
                values.append(count.astype(np.float64))
                offset += size
        if not rows:
            return np.zeros((len(self.lengths), 1))
        matrix = csr_matrix(
            (np.concatenate(values), (np.concatenate(rows), np.concatenate(cols))), shape=(len(self.lengths), offset)
        )
        return matrix.toarray() if len(self.lengths) * offset <= 4_000_000 else matrix
