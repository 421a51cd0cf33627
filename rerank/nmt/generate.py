"""Beam search n-best generation with fairseq-generate, written as Moses n-best lists.

Features of each hypothesis:

* ``NMT=``: the model's log-probability of the hypothesis, natural log, summed over
  all target tokens *including* the end-of-sentence token (fairseq prints per-token
  scores in base 2 on its ``P-`` lines; we sum them and multiply by ln 2);
* ``WordPenalty=``: minus the number of words of the hypothesis after BPE removal
  (Moses' sign convention: ``WordPenalty0= -7`` for 7 words);
* ``NMTNorm=``: the beam search's own score, the log-probability divided by the number
  of target tokens including end-of-sentence (to the power ``lenpen``), natural log
  (fairseq's ``H-`` score times ln 2).  A linear model over NMT and WordPenalty alone
  cannot express this length normalisation, so without it re-ranking could not even
  reproduce the baseline's choice.

Hypotheses are written in the original sentence order, BPE removed, in fairseq's beam
order (best length-normalised score first); the 1-best file holds the first of each.

A right-to-left model (``direction="r2l"``, trained on targets with their subword tokens
reversed, :func:`rerank.nmt.bindata.reverse_targets`) decodes its own n-best list: each hypothesis's
subword tokens are put back in reading order before BPE removal, and its columns are named
``R2L``, ``WordPenalty``, ``R2LNorm`` (the same values the ``nmt:`` scorer gives that model's
forced decoding).  With :func:`rerank.reranking.union_files` such a list joins the
left-to-right model's into one list of hypotheses from both directions (Liu et al. 2016,
"Agreement on Target-bidirectional Neural Machine Translation", NAACL).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.convert import read_fairseq, read_fairseq_shard
from rerank.errors import InputError
from rerank.nbest import ListInfo, NBestList, write_lines, write_list_info, write_nbest
from rerank.nmt import USER_DIR, fairseq_device
from rerank.nmt.checkpoints import check_checkpoint, fairseq_environ, run_fairseq
from rerank.nmt.data import fairseq_preprocess, preprocess_lines
from rerank.nmt.subword import join_subwords, make_bpe, subword_spec
from rerank.outputs import StagedOutputs
from rerank.shards import Shard
from rerank.signature import write_signed
from rerank.textio import read_json, read_lines

#: direction -> the name of the model's score columns (``NAME``, ``NAMENorm``); ``NAMENorm``,
#: what fairseq's beam search ranks by, is declared the list's beam feature so that
#: ``rerank tune`` can start from the weights that reproduce the beam's 1-best
DIRECTION_COLUMNS = {"forward": "NMT", "r2l": "R2L"}


@dataclass
class GenerateConfig:
    """Settings of :func:`generate_nbest`; ``beam`` 0 means ``beam = nbest``; ``direction``
    ``forward``, ``r2l`` or ``auto`` (the model's, as the ``train.json`` beside the
    checkpoint records it; forward without one)."""

    nbest: int = 20
    beam: int = 0
    batch_size: int = 32
    max_len_a: float = 1.2
    max_len_b: int = 10
    lenpen: float = 1.0
    src: str = "en"
    tgt: str = "de"
    device: str = "auto"
    dtype: str = "float32"
    direction: str = "auto"
    #: raw text's preprocessing lowercases it (as the data was prepared: ``prepare.json``)
    lowercase: bool = True


def model_direction(checkpoint: str, direction: str = "auto") -> str:
    """The direction to decode ``checkpoint`` in: ``direction`` when given, checked against
    the ``train.json`` beside the checkpoint (``rerank nmt train``'s record), else that
    record's (forward when there is none).

    Raises:
        InputError: a direction other than forward / r2l / auto, one that contradicts
            ``train.json``, or a model whose direction cannot decode en→de n-best lists
            (backward: the channel model).
    """
    if direction not in ("auto", *DIRECTION_COLUMNS):
        raise InputError(f"direction {direction!r}: n-best lists are decoded forward or r2l (or auto)")
    record_path = os.path.join(os.path.dirname(os.path.abspath(checkpoint)), "train.json")
    trained = None
    if os.path.exists(record_path):
        config = read_json(record_path)
        config = config.get("config") if isinstance(config, dict) else None
        trained = config.get("direction") if isinstance(config, dict) else None
    if trained is not None and trained not in DIRECTION_COLUMNS:
        raise InputError(
            f"the model was trained {trained}: only forward and r2l models decode n-best lists", record_path
        )
    if direction == "auto":
        return trained or "forward"
    if trained is not None and trained != direction:
        raise InputError(f"direction {direction} given, but the model was trained {trained}", record_path)
    return direction


def reading_order(text: str, subword: str = "subword-nmt") -> str:
    """A right-to-left model's output (subword tokens, reversed) in reading order with the
    subwords removed as fairseq's ``--remove-bpe`` does (:func:`rerank.nmt.subword.join_subwords`):
    ``". es haus@@ das"`` → ``"das hauses ."``, ``"▁. es ▁haus ▁das"`` → ``"das hauses ."``
    (``subword="sentencepiece"``).  A continuation mark left on the last token (the model
    ended inside a word) is dropped."""
    return " ".join(join_subwords(list(reversed(text.split())), subword).split())


def parse_generate_output(
    path: str, num_segments: int, nbest: int, direction: str = "forward", subword: str = "subword-nmt"
) -> NBestList:
    """fairseq-generate output (``H-`` and ``P-`` lines; :func:`rerank.convert.read_fairseq`)
    as our beam's n-best list: columns ``NMT`` (the summed natural-log token scores,
    end-of-sentence included), ``WordPenalty`` (minus the word count) and ``NMTNorm``
    (fairseq's length-normalised beam score), totals = ``NMTNorm``; the first ``nbest``
    hypotheses of each segment, whitespace normalised.  ``direction="r2l"``: the ``H-``
    texts are subword tokens (of the ``subword`` step) in reverse (:func:`reading_order`), the columns ``R2L``,
    ``WordPenalty``, ``R2LNorm``.

    Raises:
        InputError: no ``P-`` lines, or a segment count other than ``num_segments``.
    """
    return _beam_of(read_fairseq(path), path, num_segments, nbest, direction, subword)


def parse_generate_shard(
    path: str, num_segments: int, nbest: int, direction: str = "forward", subword: str = "subword-nmt"
) -> Tuple[NBestList, List[int]]:
    """(list, ids): as :func:`parse_generate_output`, the output of one shard of
    fairseq-generate's batches (``--distributed-world-size``/``--distributed-rank``,
    :mod:`rerank.shards`): its ``num_segments`` segments in ascending sentence id, numbered
    from 0, and those ids.

    Raises:
        InputError: as :func:`parse_generate_output`.
    """
    listing, ids = read_fairseq_shard(path)
    return _beam_of(listing, path, num_segments, nbest, direction, subword), ids


def _beam_of(listing: NBestList, path: str, num_segments: int, nbest: int, direction: str, subword: str) -> NBestList:
    """fairseq-generate's list read by :mod:`rerank.convert` as our beam's list
    (:func:`parse_generate_output`); raises its :class:`InputError`."""
    if "FairseqSum" not in listing.feature_names:
        raise InputError("fairseq-generate printed no P- lines (positional scores)", path)
    if listing.num_segments != num_segments:
        raise InputError(
            f"fairseq-generate gave no hypotheses for {num_segments - listing.num_segments} "
            f"segment(s) of {num_segments}",
            path,
        )
    listing = listing.head(nbest)
    texts = [reading_order(t, subword) for t in listing.hypotheses] if direction == "r2l" else listing.hypotheses
    names = listing.feature_names
    return beam_list(
        texts,
        listing.offsets,
        listing.features[:, names.index("FairseqSum")],
        listing.features[:, names.index("Fairseq")],
        direction,
    )


def _generate_command(
    bin_dir: str, checkpoint: str, subset: str, config: GenerateConfig, bpe_args: List[str], shard: Optional[Shard]
) -> List[str]:
    """fairseq-generate's command line for ``subset`` of ``bin_dir`` under ``checkpoint``: beam
    search of ``config``, the subword removal ``bpe_args``, and with a ``shard`` fairseq's own
    dealing of the batches (shard K decodes batches K, K+N, ...)."""
    beam = config.beam or config.nbest
    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.generate",
        bin_dir,
        "--user-dir",
        USER_DIR,
        "--path",
        checkpoint,
        "--task",
        "translation",
        "--source-lang",
        config.src,
        "--target-lang",
        config.tgt,
        "--gen-subset",
        subset,
        "--beam",
        str(beam),
        "--nbest",
        str(config.nbest),
        *bpe_args,
        "--batch-size",
        str(config.batch_size),
        "--required-batch-size-multiple",
        "1",
        "--max-len-a",
        str(config.max_len_a),
        "--max-len-b",
        str(config.max_len_b),
        "--lenpen",
        str(config.lenpen),
        "--num-workers",
        "0",
    ]
    if shard is not None:  # fairseq deals the batches: shard K decodes batches K, K+N, ...
        cmd += ["--distributed-world-size", str(shard.of), "--distributed-rank", str(shard.id)]
    if shard is not None:
        cmd += ["--distributed-world-size", str(shard.of), "--distributed-rank", str(shard.id)]
    return cmd


def _shard_batches(shard: Shard, num_segments: int, batch_size: int, outputs: Sequence[str]) -> int:
    """How many segments ``shard`` decodes (:meth:`rerank.shards.Shard.batch_segments`),
    its outputs checked first; a shard dealt no batch says so on stderr (its outputs are
    empty: the workflow plans shards before it knows a subset's size).
    InputError: an output on standard output."""
    expected = shard.batch_segments(num_segments, batch_size)
    if not expected:
        batches = -(-num_segments // batch_size)
        print(
            f"rerank nmt nbest: shard {shard.id} of {shard.of} holds no batch ({num_segments} segments make "
            f"{batches} batch(es) of --batch-size {batch_size}): its outputs are empty",
            file=sys.stderr,
        )
    for path in outputs:
        shard.check_output(path)
    return expected


def generate_nbest(
    bin_dir: str,
    checkpoint: str,
    subset: str,
    out_nbest: str,
    out_1best: str,
    config: GenerateConfig = GenerateConfig(),
    provenance: Optional[dict] = None,
    shard: Optional[Shard] = None,
    quiet: bool = False,
    subword: Optional[str] = None,
    shard_input: Optional[str] = None,
) -> NBestList:
    """Run beam search on ``subset`` ('valid' or 'test') of ``bin_dir`` and write the n-best
    list (Moses format) and the 1-best file.  Returns the n-best list.

    A signature ``out_nbest + '.json'`` records the settings, the data directory, the
    checkpoint and versions (``provenance`` overrides entries: the raw-text route records
    its input and the model's own data directory, not its temporary one; a ``shard``
    entry there marks both outputs as a shard, the 1-best with a signature of its own).
    ``quiet``: fairseq's log lines and torch's warnings are kept back (shown when it fails).
    ``shard``: only that shard of the subset's batches (fairseq's, of ``batch_size``
    sentences sorted by length, dealt round-robin: :mod:`rerank.shards`), each sentence
    decoded in the batch one process would decode it in, so the merged shards equal one
    process's lists byte for byte (with the same torch threads); the outputs hold the
    shard's sentences in subset order and the record lists them (``members``; the SHA-256
    of ``shard_input``, default the subset's binarised source); a shard dealt no batch
    writes empty outputs (a line on stderr says so), which ``rerank merge`` takes.
    ``subword``: the subword
    step's kind (:data:`rerank.nmt.subword.SUBWORD_FILES`) that the output's subwords are
    removed by (default: the one beside ``bin_dir``, prepare's layout).

    Raises:
        InputError: no such subset, a beam smaller than the n-best size, a direction
            :func:`model_direction` refuses, a shard written to standard output.
        UntrustedCheckpoint: a checkpoint naming classes beyond fairseq's own
            (:mod:`rerank.nmt.checkpoints`), unless trusted.
    """
    from fairseq.data import data_utils

    prefix = os.path.join(bin_dir, f"{subset}.{config.src}-{config.tgt}.{config.src}")
    if not os.path.exists(prefix + ".idx"):
        raise InputError(f"no binarised subset {subset!r}", bin_dir)
    num_segments = len(data_utils.load_indexed_dataset(prefix, None))
    beam = config.beam or config.nbest
    if beam < config.nbest:
        raise InputError(f"beam {beam} is smaller than nbest {config.nbest}")
    direction = model_direction(checkpoint, config.direction)
    check_checkpoint(checkpoint)  # before fairseq loads it (docs/security.md)
    if shard is not None:
        expected = _shard_batches(shard, num_segments, config.batch_size, (out_nbest, out_1best))
    subword = subword or subword_spec(os.path.dirname(os.path.abspath(bin_dir))).partition(":")[0]
    # a right-to-left model's subword tokens are put in reading order before BPE removal
    remove = ["--remove-bpe"] + (["sentencepiece"] if subword == "sentencepiece" else [])
    bpe_args = remove if direction == "forward" else []
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, "generate.txt")
        cmd = _generate_command(bin_dir, checkpoint, subset, config, bpe_args, shard)
        device_args, device_env = fairseq_device(config.device, config.dtype)
        log = subprocess.PIPE if quiet else None  # fairseq's INFO lines and torch's warnings: kept back when quiet
        if shard is None or expected:
            with open(raw, "w", encoding="utf-8") as out:
                done = run_fairseq(cmd + device_args, fairseq_environ(device_env), stdout=out, stderr=log, text=True)
            if done.returncode:
                if quiet and done.stderr:
                    sys.stderr.write(done.stderr[-4000:])
                raise subprocess.CalledProcessError(done.returncode, cmd)
        if shard is None:
            nbest = parse_generate_output(raw, num_segments, config.nbest, direction, subword)
        else:
            nbest, members = (
                parse_generate_shard(raw, expected, config.nbest, direction, subword)
                if expected
                else (beam_list([], [0], [], [], direction), [])
            )
            entry = shard.member_record(num_segments, shard_input or prefix + ".bin", members)
            provenance = {**(provenance or {}), "shard": entry}
    record = {
        "config": asdict(config),
        "direction": direction,
        "subset": subset,
        "checkpoint": os.path.abspath(checkpoint),
        "data_bin": os.path.abspath(bin_dir),
        "segments": nbest.num_segments,
        **(provenance or {}),
    }
    write_beam_list(nbest, out_nbest, out_1best, record, ["torch", "fairseq-fixed"])
    return nbest


def write_beam_list(
    nbest: NBestList, out_nbest: str, out_1best: str, record: Dict[str, Any], packages: Sequence[str]
) -> None:
    """Write a beam search's n-best list (columns ``ROLE``, ``WordPenalty``, ``ROLENorm``),
    its 1-best (the first hypothesis of each segment) and the list's signature (``record``,
    the versions of ``packages``, ``ROLENorm`` declared the beam feature) together; a
    ``shard`` entry in ``record`` gives the 1-best a signature of its own."""
    with StagedOutputs() as outputs:  # the list, the 1-best and the signature appear together
        write_nbest(nbest, outputs.stage(out_nbest))
        write_lines((nbest.hypotheses[i] for i in nbest.offsets[:-1]), outputs.stage(out_1best))
        info = ListInfo(nbest.feature_names[2], {"beam": list(dict.fromkeys(nbest.feature_names))}, declared=True)
        write_list_info(outputs.signature(out_nbest), info, record, list(packages))
        if "shard" in record:
            write_signed(outputs.signature(out_1best), {**record, "shard": {**record["shard"], "kind": "text"}})


def beam_list(texts: Sequence[str], offsets, sums, norms, direction: str) -> NBestList:
    """The n-best list of a beam search's hypotheses: ``texts`` (BPE removed, in reading
    order; whitespace is normalised here), segment ``offsets`` (int[S+1]), their summed log-probabilities
    ``sums`` and length-normalised scores ``norms`` (float[K], natural log) as the columns
    ``ROLE``, ``WordPenalty`` (minus the word count) and ``ROLENorm`` of
    :data:`DIRECTION_COLUMNS` ``[direction]``; totals = ``ROLENorm``."""
    texts = [" ".join(text.split()) for text in texts]
    words = np.array([len(text.split()) for text in texts], dtype=np.float64)
    features = np.column_stack([np.asarray(sums, dtype=np.float64), -words, np.asarray(norms, dtype=np.float64)])
    role = DIRECTION_COLUMNS[direction]
    return NBestList(
        np.asarray(offsets, dtype=np.int64),
        texts,
        features,
        [role, "WordPenalty", role + "Norm"],
        totals=features[:, 2].copy(),
    )


def read_source_text(input_path: str) -> List[str]:
    """The raw sentences of ``input_path`` (one per line).

    Raises:
        InputError: no line, or an empty line (naming it).
    """
    raw = read_lines(input_path)
    if not raw:
        raise InputError("no sentences", input_path)
    empty = next((k for k, line in enumerate(raw) if not line.strip()), None)
    if empty is not None:
        raise InputError("empty source line (every line must hold a sentence)", input_path, empty + 1)
    return raw


def segment_text(raw: Sequence[str], config: GenerateConfig, subword: str) -> Tuple[List[str], List[str]]:
    """(tokenised, subword) lines of raw source sentences, as the model's data was prepared:
    :func:`rerank.nmt.data.preprocess_lines` (``config.src``'s Moses rules, lowercased
    when ``config.lowercase``), then the subword step ``subword`` (``KIND:PATH``,
    :func:`rerank.nmt.subword.subword_spec`).  Raises :class:`InputError` as :func:`make_bpe`."""
    tokenised = preprocess_lines(raw, config.src, lowercase=config.lowercase)
    bpe = make_bpe(subword, subword)
    return tokenised, [bpe.process_line(line) for line in tokenised]


def generate_nbest_from_text(
    bin_dir: str,
    checkpoint: str,
    input_path: str,
    out_nbest: str,
    out_1best: str,
    out_source: Optional[str] = None,
    config: GenerateConfig = GenerateConfig(),
    shard: Optional[Shard] = None,
    quiet: bool = False,
) -> NBestList:
    """n-best lists for any raw source text (one sentence per line), with the model's own
    preprocessing: the text convention of :func:`rerank.nmt.data.preprocess_lines` (Moses
    normalisation, tokenisation, lowercasing) and the BPE codes of the prepared data
    directory (``bin_dir/..``, ``rerank nmt prepare``'s layout), binarised with the
    model's dictionaries into a temporary directory and decoded as :func:`generate_nbest`.
    ``out_source`` receives the preprocessed source (what ``rerank features add
    --source`` expects).  ``shard``: only that shard of the input's batches (as
    :func:`generate_nbest`: every line is preprocessed, the shard's lines decoded), every
    output marked as that shard and holding its lines.

    Raises:
        InputError: a missing or empty input line, or ``bin_dir`` not in prepare's layout; a
            shard written to standard output.
    """
    codes = subword_spec(os.path.dirname(os.path.abspath(bin_dir)))
    dicts = [os.path.join(bin_dir, f"dict.{lang}.txt") for lang in (config.src, config.tgt)]
    for path in dicts:
        if not os.path.exists(path):
            raise InputError("missing: --data-bin must be the bin/ directory of 'rerank nmt prepare'", path)
    raw = read_source_text(input_path)
    provenance: Dict[str, Any] = {
        "data_bin": os.path.abspath(bin_dir),
        "input": os.path.abspath(input_path),
        "subset": None,
    }
    if shard is not None:
        for output in (out_nbest, out_1best, out_source):
            shard.check_output(output)
    tokenised, segmented = segment_text(raw, config, codes)
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "test")
        for lang in (config.src, config.tgt):  # the target side is a placeholder: decoding ignores it
            write_lines(segmented, f"{prefix}.{lang}")
        data = os.path.join(tmp, "bin")
        options = ["--source-lang", config.src, "--target-lang", config.tgt, "--testpref", prefix]
        fairseq_preprocess(data, options + ["--srcdict", dicts[0], "--tgtdict", dicts[1]], quiet=True)
        nbest = generate_nbest(
            data,
            checkpoint,
            "test",
            out_nbest,
            out_1best,
            config,
            provenance,
            shard=shard,
            quiet=quiet,
            subword=codes.partition(":")[0],
            shard_input=input_path,
        )
    if out_source:
        with StagedOutputs() as outputs:
            if shard is None:
                write_lines(tokenised, outputs.stage(out_source))
            else:  # the shard's lines: those its list holds, as its signature records them
                entry = read_json(out_nbest + ".json")["shard"]
                write_lines([tokenised[k] for k in entry["members"]], outputs.stage(out_source))
                write_signed(outputs.signature(out_source), {"shard": {**entry, "kind": "text"}})
    return nbest
