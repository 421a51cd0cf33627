"""Importing other tools' n-best lists (``rerank convert``): fairseq-generate output, JSON
lines and Marian/Moses n-best lists become rerank's Moses n-best list with its signature.

* ``fairseq``: the output of ``fairseq-generate --nbest N`` (``S-``, ``T-``, ``H-``, ``D-``,
  ``P-`` lines, sentences in batch order, a sentence's hypotheses in rank order).
  Columns: ``Fairseq`` (the ``H-`` score: the beam's length-normalised log-probability)
  and, when ``P-`` lines are there, ``FairseqSum`` (their sum: the log-probability
  including end-of-sentence) and ``FairseqLen`` (their count).  fairseq prints base-2
  logarithms (``score / math.log(2)``); they are converted to natural logarithms, the unit
  of every rerank model column.  Text: the ``H-`` hypothesis (tokenised, BPE removed when
  fairseq-generate had ``--remove-bpe``) or with ``text="detok"`` the ``D-`` one.  The
  beam feature is ``Fairseq``.
* ``jsonl``: one JSON object per line, ``{"id": 0, "hypotheses": ["…", …], "scores":
  {"NAME": [one number per hypothesis], …}}``; every line has the same score names.
* ``marian``: Marian's (Moses') n-best list ``ID ||| hypothesis ||| F0= … F1= … ||| total``,
  read with rerank's Moses reader (names kept: ``F0``, ``F1``…) and written back as
  rerank writes lists.

Ids must be 0..N-1, each once (in any order for fairseq and jsonl; they are sorted).
Every error names the file and line.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

from rerank.errors import InputError, paths_named
from rerank.nbest import ListInfo, NBestList, NBestWriter, rank_order, read_nbest, write_list_info
from rerank.outputs import StagedOutputs
from rerank.textio import finite_number, open_text

FORMATS = ("fairseq", "jsonl", "marian", "moses")
LN2 = math.log(2.0)


def _assemble(
    by_id: Dict[int, List[Tuple[str, List[float]]]], names: List[str], path: str, any_ids: bool = False
) -> NBestList:
    """The list of ``by_id``'s segments in ascending id order; ids must be 0..N-1 unless
    ``any_ids`` (a shard's segments: numbered from 0 in that order)."""
    ids = sorted(by_id)
    if not ids:
        raise InputError("no hypotheses", path)
    if (
        not any_ids and ids[-1] != len(ids) - 1
    ):  # distinct ids >= 0: the first gap, in O(N), nothing allocated from an id
        missing = next(k for k, sid in enumerate(ids) if sid != k)
        raise InputError(f"sentence ids must be 0..N-1, each present: {missing} is missing", path)
    hypotheses, rows, counts = [], [], []
    for i in ids:
        counts.append(len(by_id[i]))
        for text, values in by_id[i]:
            hypotheses.append(text)
            rows.append(values)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return NBestList(
        offsets, hypotheses, np.asarray(rows, dtype=np.float64).reshape(len(hypotheses), len(names)), list(names)
    )


def read_fairseq(path: str, text: str = "h") -> NBestList:
    """The n-best list in fairseq-generate output (module docstring); ``text``: ``h`` (the
    ``H-`` hypothesis) or ``detok`` (the ``D-`` one).

    Raises:
        InputError: naming file and line: a malformed ``H-``/``D-``/``P-`` line, a ``P-``
            line without its hypothesis, ids that are not 0..N-1, no hypotheses.
    """
    by_id, names = _read_fairseq_lines(path, text)
    return _assemble(by_id, names, path)


def read_fairseq_shard(path: str, text: str = "h") -> Tuple[NBestList, List[int]]:
    """(list, ids): the output of one shard of ``fairseq-generate --distributed-world-size N
    --distributed-rank K`` (its share of the subset's batches: any sentence ids), as
    :func:`read_fairseq` with the segments in ascending id order, numbered from 0; ``ids``:
    their sentence ids in the subset.

    Raises:
        InputError: as :func:`read_fairseq`, but for ids that are not 0..N-1.
    """
    by_id, names = _read_fairseq_lines(path, text)
    return _assemble(by_id, names, path, any_ids=True), sorted(by_id)


def _read_fairseq_lines(path: str, text: str) -> Tuple[Dict[int, List[Tuple[str, List[float]]]], List[str]]:
    """(hypotheses with their scores by sentence id, column names) of fairseq-generate output."""
    if text not in ("h", "detok"):
        raise InputError(f"fairseq text must be h or detok, not {text!r}")
    wanted = "H" if text == "h" else "D"
    by_id: Dict[int, List[Tuple[str, List[float]]]] = {}
    positional: Dict[int, List[List[float]]] = {}
    with_p = None
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            kind, dash, rest = line.partition("-")
            if not dash or kind not in ("H", "D", "P"):
                continue  # S-, T-, the log lines
            head, tab, body = rest.rstrip("\n").partition("\t")
            try:
                sid = int(head)
            except ValueError:
                raise InputError(f"{kind}- line without a sentence id", path, lineno) from None
            if sid < 0:
                raise InputError(f"negative sentence id {sid}", path, lineno)
            if kind == "P":
                values = [finite_number(v, "positional score", path, lineno) * LN2 for v in body.split()]
                positional.setdefault(sid, []).append(values)
                continue
            if kind != wanted:
                continue
            score, tab2, hyp = body.partition("\t")
            if not tab or not tab2:
                raise InputError(f"expected {kind}-ID<TAB>score<TAB>hypothesis", path, lineno)
            by_id.setdefault(sid, []).append((hyp, [finite_number(score, "score", path, lineno) * LN2]))
    if positional:
        with_p = True
        for sid, hyps in by_id.items():
            scores = positional.get(sid, [])
            if len(scores) != len(hyps):
                raise InputError(f"sentence {sid}: {len(hyps)} hypotheses but {len(scores)} P- lines", path)
            by_id[sid] = [(h, v + [float(sum(p)), float(len(p))]) for (h, v), p in zip(hyps, scores)]
    return by_id, ["Fairseq"] + (["FairseqSum", "FairseqLen"] if with_p else [])


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    """``json.loads``' object hook: a dict, refusing a key given twice (JSON keeps the last)."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_jsonl(path: str) -> NBestList:
    """The n-best list in JSON lines (module docstring).

    Raises:
        InputError: naming file and line: invalid JSON, a missing or non-integer ``id``,
            an id seen twice, ``hypotheses`` not a list of strings, ``scores`` names other
            than the first line's or lists of another length, non-finite scores.
    """
    by_id: Dict[int, List[Tuple[str, List[float]]]] = {}
    names: Optional[List[str]] = None
    with open_text(path) as handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                item = json.loads(line, object_pairs_hook=_unique_keys)
            except json.JSONDecodeError as err:
                raise InputError(f"invalid JSON: {err.msg}", path, lineno) from None
            except _DuplicateKey as err:
                raise InputError(f"the key {err.args[0]!r} appears twice in one object", path, lineno) from None
            if not isinstance(item, dict) or not isinstance(item.get("id"), int) or isinstance(item.get("id"), bool):
                raise InputError('expected {"id": INTEGER, "hypotheses": [...], "scores": {...}}', path, lineno)
            sid, hyps, scores = item["id"], item.get("hypotheses"), item.get("scores", {})
            if sid < 0:
                raise InputError(f"negative id {sid}", path, lineno)
            if sid in by_id:
                raise InputError(f"id {sid} seen twice", path, lineno)
            if not isinstance(hyps, list) or not hyps or not all(isinstance(h, str) for h in hyps):
                raise InputError('"hypotheses" must be a non-empty list of strings', path, lineno)
            if not isinstance(scores, dict):
                raise InputError('"scores" must be {"NAME": [one number per hypothesis]}', path, lineno)
            if names is None:
                names = list(scores)
            elif list(scores) != names:
                raise InputError(f"scores {list(scores)} differ from the first line's {names}", path, lineno)
            columns = []
            for name in names:
                values = scores[name]
                if not isinstance(values, list) or len(values) != len(hyps):
                    raise InputError(
                        f'scores["{name}"] must hold {len(hyps)} numbers, one per hypothesis', path, lineno
                    )
                columns.append([finite_number(str(v), f'scores["{name}"]', path, lineno) for v in values])
            for k, hyp in enumerate(hyps):
                if "\n" in hyp or "|||" in hyp:
                    raise InputError(f"hypothesis {k} holds a line break or '|||'", path, lineno)
            by_id[sid] = [(hyp, [c[k] for c in columns]) for k, hyp in enumerate(hyps)]
    return _assemble(by_id, names or [], path)


def _read_moses(path: str, fill_missing: Optional[float], say: Callable[[str], None]) -> NBestList:
    """A Moses (or Marian) n-best list; with ``fill_missing``, each skipped segment id given one
    empty hypothesis scored ``fill_missing`` in every column (the first line's columns), before
    the list is read (and checked) as any other."""
    if fill_missing is None:
        try:
            return read_nbest(path)
        except InputError as err:
            if "ids must be 0, 1, 2" not in err.message or int(err.message.split()[2]) <= int(
                err.message.split()[4][:-1]
            ):
                raise
            hint = "; a segment the decoder skipped: --fill-missing SCORE gives it an empty hypothesis"
            raise InputError(err.message + hint, err.path, err.line) from None
    if not math.isfinite(fill_missing):
        raise InputError(f"--fill-missing {fill_missing}: the score must be a finite number")
    with open_text(path) as handle:
        lines = handle.readlines()
    out, filled, expected, columns = [], [], 0, None
    for line in lines:
        head, bar, rest = line.partition("|||")
        if columns is None and bar:
            fields = rest.split("|||")
            columns = " ".join(
                t if t.endswith("=") else repr(fill_missing) for t in (fields[1] if len(fields) > 1 else "").split()
            )
        sid = int(head) if head.strip().isdigit() else None
        while sid is not None and expected < sid:
            out.append(f"{expected} |||  ||| {columns or ''} ||| {fill_missing!r}\n")
            filled.append(expected)
            expected += 1
        if sid is not None and sid == expected:
            expected += 1
        out.append(line if line.endswith("\n") else line + "\n")
    if filled:
        shown = ", ".join(map(str, filled[:10])) + (" …" if len(filled) > 10 else "")
        say(
            f"convert: {len(filled)} segment(s) the list skips filled with an empty hypothesis scored {fill_missing:g}: {shown}"
        )
    with tempfile.TemporaryDirectory(prefix="rerank-convert.") as tmp:
        copy = os.path.join(tmp, os.path.basename(path))
        with open(copy, "w", encoding="utf-8") as handle:
            handle.writelines(out)
        with paths_named({copy: path}):
            return read_nbest(copy)


def convert_file(
    fmt: str,
    path: str,
    out: str,
    beam_feature: Optional[str] = None,
    text: str = "h",
    say: Callable[[str], None] = lambda line: None,
    fill_missing: Optional[float] = None,
) -> NBestList:
    """Convert ``path`` (format ``fmt``: fairseq, jsonl, marian or moses) to rerank's n-best list
    ``out`` with its signature ``out.json`` (together or not at all).  The signature
    declares the beam feature: ``Fairseq`` for fairseq output, ``beam_feature`` when given
    (a column of the list), else the one column the list's order says the decoder ranked by
    (its values never rise down any segment: :func:`rerank.nbest.rank_order`, as ``rerank tune``
    infers it), said through ``say``; where no single column does, no signature is written and
    ``say`` says so (``rerank tune`` then asks for ``--init``).  ``fill_missing`` (Moses and Marian
    lists): a segment the decoder skipped (ids jumping from 2 to 4) gets one empty hypothesis whose
    every feature value and total is this score, said through ``say`` — the list stays
    line-aligned with its sources and references.  Returns the list.

    Raises:
        InputError: an unknown format, an unreadable input, a ``beam_feature`` that is
            not a column.
    """
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    nbest = {
        "fairseq": lambda: read_fairseq(path, text),
        "jsonl": lambda: read_jsonl(path),
        "marian": lambda: _read_moses(path, fill_missing, say),
        "moses": lambda: _read_moses(path, fill_missing, say),  # Marian writes Moses' format: one reader
    }[fmt]()
    beam = beam_feature or ("Fairseq" if fmt == "fairseq" else None)
    if beam is not None and beam not in nbest.feature_names:
        raise InputError(
            f"--beam-feature {beam!r} is not a column (the list has {' '.join(nbest.feature_names)})", path
        )
    if beam is None:
        ordering, _ = rank_order(nbest)
        if len(ordering) == 1:
            beam = ordering[0]
            say(
                f"convert: the beam's column is {beam}, the one whose values never rise down any segment: recorded "
                "in the signature (--beam-feature names another)"
            )
        else:
            which = f"{len(ordering)} columns order it ({', '.join(ordering)})" if ordering else "no column orders it"
            say(
                f"convert: no signature written: the beam's column is not known ({which}): give --beam-feature "
                "COLUMN, or rerank tune will ask for --init"
            )
    with StagedOutputs() as outputs:
        with outputs.open(out) as handle:
            NBestWriter(handle, out).write(nbest, 0, nbest.totals)
        if beam is not None:
            info = ListInfo(beam, {"beam": list(dict.fromkeys(nbest.feature_names))}, True)
            write_list_info(
                outputs.signature(out),
                info,
                {
                    "converted_from": path,
                    "format": fmt,
                    "segments": nbest.num_segments,
                    "hypotheses": len(nbest.hypotheses),
                },
            )
        else:  # no beam known: no signature, and none of an earlier list left beside this one
            outputs.drop_signature(out)
    return nbest
