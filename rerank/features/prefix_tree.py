"""The bookkeeping of forced decoding over the prefix tree
(:meth:`rerank.features.nmt_scorer.ForcedDecodingScorer.score_pairs`): its chunks, the decoder
states it decodes (distinct (input, target prefix) pairs), and whether it costs less than whole
sequences teacher-forced in padded batches.  Targets are token-id tensors (``tgt[k]``, </s>
last); inputs are compared by identity (``id(src[k])``: the scorer makes one tensor per
distinct text), ``src`` None for a language model."""

from __future__ import annotations

from typing import Any, Dict, List

#: what one decoder call of the prefix tree (a level of a chunk: every layer run for one
#: token, the incremental state reordered) costs, in target rows of one teacher-forced pass
#: of a transformer.  Measured on 2 idle CPU cores (2026-12-03): the default job's R2L
#: transformer-tiny, 3,000 hypotheses of test_2016's 100-best list (37,102 tokens, 48 % of
#: them distinct prefixes, ~60 levels): the tree 2.3 s, whole sequences 4.4 s; a tiny random
#: model's 40 sampled hypotheses of ~310 tokens (49 % distinct, 322 levels): the tree 2.8 s,
#: whole sequences 0.5 s — about 8 ms a level against 40–120 µs a row, so 128 rows a level.
TREE_CALL_ROWS = 128


def tree_chunks(src, tgt, unique, max_nodes: int) -> List[List[int]]:
    """The prefix tree's chunks of the pairs ``unique`` (int64[K]): grouped by input, inputs
    of similar length together (little padding in the encoder and attention), at most
    ``max_nodes`` pairs each."""
    by_source: Dict[object, List[int]] = {}
    for k in unique.tolist():
        by_source.setdefault(None if src is None else id(src[k]), []).append(k)
    groups = list(by_source.values())
    if src is not None:
        groups.sort(key=lambda members: len(src[members[0]]))
    chunks: List[List[int]] = [[]]
    for members in groups:
        for start in range(0, len(members), max_nodes):
            part = members[start : start + max_nodes]
            if chunks[-1] and len(chunks[-1]) + len(part) > max_nodes:
                chunks.append([])
            chunks[-1].extend(part)
    return chunks


def prefix_nodes(src, tgt, unique) -> int:
    """The distinct (input, target prefix) decoder states of the pairs ``unique``: what the
    prefix tree decodes (a trie of the targets, one root per distinct input)."""
    trie: Dict[tuple, int] = {}
    roots = set()
    for k in unique.tolist():
        node: Any = ("root", None if src is None else id(src[k]))
        roots.add(node)
        for token in tgt[k].tolist()[:-1]:
            node = trie.setdefault((node, token), len(trie))
    return len(roots) + len(trie)


def prefix_sharing(src, tgt, unique) -> float:
    """Distinct (input, target prefix) decoder states over target tokens, for the pairs
    ``unique`` (1: nothing shared)."""
    tokens = sum(len(tgt[k]) for k in unique.tolist())
    return prefix_nodes(src, tgt, unique) / max(tokens, 1)


def tree_pays(decoder, src, tgt, unique, max_nodes: int) -> bool:
    """Whether the prefix tree costs less than whole sequences for the pairs ``unique`` under
    the fairseq ``decoder``: always for a recurrent one (no positional embeddings: it runs a
    step per token either way); for a transformer's (one pass for every position), when the
    rows the tree saves (target tokens − distinct prefixes) outweigh its levels (every chunk's
    longest target), each costing :data:`TREE_CALL_ROWS` rows."""
    if getattr(decoder, "embed_positions", None) is None:
        return True
    tokens = sum(len(tgt[k]) for k in unique.tolist())
    levels = sum(max(len(tgt[k]) for k in chunk) for chunk in tree_chunks(src, tgt, unique, max_nodes))
    if tokens <= TREE_CALL_ROWS * levels:  # it cannot save that many rows: no trie to build
        return False
    return tokens - prefix_nodes(src, tgt, unique) > TREE_CALL_ROWS * levels
