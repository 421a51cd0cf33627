"""N-best lists: the data model (:mod:`rerank.nbest.model`: :class:`NBestList`, its packed
hypotheses and list-level settings) and the Moses n-best format, rerank's lingua franca
(:mod:`rerank.nbest.moses`: streaming reader and writer).  Everything is importable from
here: ``from rerank.nbest import NBestList, read_nbest, write_nbest``."""

from rerank.nbest.count import count_segments
from rerank.nbest.model import (
    SEPARATOR,
    ListInfo,
    NBestList,
    PackedStrings,
    finite_scores,
    rank_order,
    read_list_info,
    select_best,
    write_list_info,
)
from rerank.nbest.moses import (
    BLOCK_HYPOTHESES,
    NBestWriter,
    check_writable,
    concat_blocks,
    format_column,
    format_value,
    iter_nbest,
    iter_nbest_pair,
    read_nbest,
    write_lines,
    write_nbest,
    write_signed_nbest,
)

__all__ = [
    "SEPARATOR",
    "ListInfo",
    "NBestList",
    "PackedStrings",
    "finite_scores",
    "rank_order",
    "read_list_info",
    "select_best",
    "write_list_info",
    "BLOCK_HYPOTHESES",
    "NBestWriter",
    "check_writable",
    "concat_blocks",
    "count_segments",
    "format_column",
    "format_value",
    "iter_nbest",
    "iter_nbest_pair",
    "read_nbest",
    "write_lines",
    "write_nbest",
    "write_signed_nbest",
]
