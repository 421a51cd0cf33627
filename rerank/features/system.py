"""A trained re-ranking system in one directory, and translation with it in one command.

:func:`pack_system` follows the provenance that every list's signature records
(``LIST.json``: which verb made it, from which input, with which settings) from a tuned list
back to the decoder run that started it:

    rerank nmt nbest | rerank generate  →  features add (scorers …)  →  …  →  the tuned list

and writes ``DIR/`` with everything a translation needs, copied so that the directory can
move: the generator (``generator/``: a fairseq decoder's checkpoint, ``train.json``, data
dictionaries and subword model, ``bpe.codes`` or ``spm.model``; or the ``hf:``/``ct2:``/``hf-lm:`` model directory of
``rerank generate``, with its settings and an ``hf-lm:`` model's prompt template), every file or directory a scorer reads (``models/``; the scorer chain kept
exactly as tuned — names, options, order — with its paths pointing into ``DIR``; a scorer
whose :meth:`~rerank.features.scorer.Scorer.pack` says so stores what it needs instead:
IBM Model 1's trained tables, a model directory's scoring checkpoint without the others), the
weights, and ``system.json``: the steps, the decoder settings, rerank's version and the
SHA-256 of every file.  Provenance and copying: :mod:`rerank.features.provenance`.

:func:`translate` checks that manifest (:mod:`rerank.features.manifest`: its digest, every
file present and unchanged, every path inside, the same rerank release), then decodes raw
text with the model's own preprocessing (:func:`rerank.nmt.generate.generate_nbest_from_text`;
a generated system's model takes the text as it is, :func:`rerank.features.generate.generate_file`,
and its output is not detokenised), adds the scorer chain's columns
(:func:`rerank.features.add.add_features`), applies the weights
(:func:`rerank.reranking.apply_file`) and writes the re-ranked 1-best, detokenised with
Moses' detokeniser (lowercasing cannot be undone; ``tokenized=True`` keeps the tokenised
text the weights were tuned and evaluated on).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from rerank._version import __version__
from rerank.config import parse_settings
from rerank.devices import DeviceSettings
from rerank.errors import InputError
from rerank.features.add import ScorerCache, ScoringInputs, add_features
from rerank.features.manifest import MANIFEST, PLACEHOLDER, load_system, manifest_digest
from rerank.features.provenance import Relocation, check_model_files, copy_path, is_generated, relocate_spec, trace
from rerank.features.scorer import SCORERS, make_scorer
from rerank.features.system_decode import decode_fairseq, generate_block
from rerank.nbest import BLOCK_HYPOTHESES, NBestWriter, iter_nbest
from rerank.nmt.checkpoints import check_checkpoint
from rerank.nmt.ct2 import convert
from rerank.nmt.generate import (
    read_source_text,
)
from rerank.nmt.subword import subword_spec
from rerank.outputs import StagedOutputs, atomic_write, staged_directory
from rerank.reranking import apply_file
from rerank.shards import Shard
from rerank.signature import signature, write_signed
from rerank.textio import file_digest as _sha256
from rerank.textio import read_json, read_lines
from rerank.tuning.weights import read_weights

#: where ``pack-system --ct2`` writes the converted generator, under ``generator/``
CT2_DIR = "ct2"
#: the quantisation of the scorers ``pack-system --ct2`` converts, whatever the generator's:
#: float32 keeps their columns within 1e-4 nats of the tuned ones (the main job's right-to-left
#: model on test_2016's 100-best list: max 6e-5, every segment's best R2LNorm the same), where
#: int8 moved them by up to 1 nat (25 of 1,000 best R2LNorm changed) and was not faster
#: (docs/benchmarks.md)
SCORER_QUANTIZATION = "float32"
#: ``translate --decoder`` choices
DECODERS = ("auto", "fairseq", "ct2")


def pack_system(
    nbest_path: str,
    weights_path: Union[str, Sequence[str]],
    out_dir: str,
    data_bin: Optional[str] = None,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    relocation: Optional[Relocation] = None,
    ct2: Optional[str] = None,
) -> Dict[str, Any]:
    """Write the system directory ``out_dir`` of the tuned list ``nbest_path`` and its
    weights (module docstring); of several weights files (optimiser replicas), the one
    whose record has the best tuning score (``tuning.score``, the metric's direction).
    ``data_bin``: the decoder's binarised data directory (``rerank nmt prepare``'s ``bin/``)
    where the decoder run did not record it.  ``relocation``: where the job directory went
    after its run (:class:`Relocation`), for every path the signatures record.  ``ct2``:
    also convert a fairseq generator to CTranslate2 with this quantisation
    (``generator/ct2/``, :func:`rerank.nmt.ct2.convert`; ``translate`` then decodes with it),
    and the chain's scorers that convert (:func:`_convert_scorers`: ``nmt:`` translation
    models, in :data:`SCORER_QUANTIZATION`; ``translate`` then scores with them).
    Returns the manifest.

    Raises:
        InputError: a provenance :func:`trace` refuses, weights that do not name the list's
            columns, a missing decoder file or scorer path, an ``out_dir`` that exists and
            is not empty; ``ct2`` for a ``rerank generate`` system or a model CTranslate2
            does not convert.
    """
    relocation = relocation or Relocation()
    generation, steps = trace(nbest_path, relocation)
    candidates = [weights_path] if isinstance(weights_path, str) else list(weights_path)
    weights_path, scores = _best_replica(candidates)
    weights = read_weights(weights_path)
    needed = None if is_generated(generation) else _fairseq_files(generation, data_bin)
    if ct2 and needed is None:
        raise InputError(
            f"--ct2 converts a fairseq generator; this system's generator is {generation['model']}, used as it is"
        )
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)):
        raise InputError("exists and is not an empty directory: a system is written into a new one", out_dir)
    conversion: Dict[str, Any] = {}  # the manifest's decoder.ct2
    with staged_directory(out_dir, replace=False) as tmp:  # the directory appears whole or not at all
        if needed is None:  # rerank generate's model, copied with its paths (as a scorer's)
            check_model_files(generation, relocation)
            decoder = {key: generation.get(key) for key in ("nbest", "beam", "sampling", "max_length")}
            decoder.update(kind="generate", model=relocate_spec(generation["model"], 0, tmp, relocation, "generator"))
        else:
            decoder = _copy_fairseq(generation, needed, os.path.join(tmp, "generator"))
            if ct2:
                conversion = _convert_generator(needed, os.path.join(tmp, "generator"), decoder["config"], ct2, say)
                decoder["ct2"] = conversion
        chain = [
            [relocate_spec(spec, 10 * k + j, tmp, relocation) for j, spec in enumerate(step)]
            for k, step in enumerate(steps)
        ]
        if ct2:  # a fairseq generator's conversion (refused above for another): the chain's models too
            conversion["scorers"] = _convert_scorers(chain, tmp, SCORER_QUANTIZATION, say)
        copy_path(weights_path, os.path.join(tmp, "weights.json"))
        files = {}
        for folder, _, names in os.walk(tmp):
            for name in sorted(names):
                path = os.path.join(folder, name)
                files[os.path.relpath(path, tmp)] = _sha256(path)
        manifest = {
            "rerank": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "decoder": decoder,
            "steps": chain,
            "weights": "weights.json",
            "weights_from": {"chosen": os.path.abspath(weights_path), "candidates": scores},
            "columns": list(weights),
            "tuned_on": os.path.abspath(nbest_path),
            "relocated": [{"old": old, "new": new} for old, new in relocation.pairs],
            "files": dict(sorted(files.items())),
            "signature": signature(["torch", "fairseq-fixed", "sacremoses", "subword-nmt"]),
        }
        manifest["digest"] = manifest_digest(manifest)
        with atomic_write(os.path.join(tmp, MANIFEST)) as out:
            json.dump(manifest, out, indent=2)
            out.write("\n")
    say(f"system: {len(files)} files, {sum(len(s) for s in chain)} scorers in {len(chain)} steps -> {out_dir}")
    say(f"system digest {manifest['digest']} (translate --system-digest checks a copy against it)")
    return manifest


def _fairseq_files(generation: Dict[str, Any], data_bin: Optional[str]) -> Dict[str, str]:
    """{what: path} of a ``rerank nmt nbest`` decoder's files: checkpoint, dictionaries, the
    subword step's file (``bpe.codes`` or ``spm.model``, :func:`rerank.nmt.subword.subword_spec`).

    Raises:
        InputError: no data directory recorded or given, a file that is missing.
    """
    data_bin = data_bin or generation.get("data_bin")
    if not data_bin:
        raise InputError("the decoder run records no data directory: give --data-bin (rerank nmt prepare's bin/)")
    config = generation["config"]
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    needed = {
        "checkpoint": generation["checkpoint"],
        "dict.src": os.path.join(data_bin, f"dict.{src}.txt"),
        "dict.tgt": os.path.join(data_bin, f"dict.{tgt}.txt"),
        "subwords": subword_spec(os.path.dirname(os.path.abspath(data_bin))).partition(":")[2],
    }
    for what, path in needed.items():
        if not os.path.isfile(path):
            raise InputError(f"the decoder's {what} is missing", path)
    return needed


def _copy_fairseq(generation: Dict[str, Any], needed: Dict[str, str], generator: str) -> Dict[str, Any]:
    """Copy a fairseq decoder's files (:func:`_fairseq_files`) into ``generator``; returns the
    manifest's ``decoder`` entry (its settings and direction)."""
    config = generation["config"]
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    copy_path(needed["checkpoint"], os.path.join(generator, "checkpoint.pt"))
    train_json = os.path.join(os.path.dirname(needed["checkpoint"]), "train.json")
    if os.path.isfile(train_json):
        copy_path(train_json, os.path.join(generator, "train.json"))
    copy_path(needed["dict.src"], os.path.join(generator, "bin", f"dict.{src}.txt"))
    copy_path(needed["dict.tgt"], os.path.join(generator, "bin", f"dict.{tgt}.txt"))
    copy_path(needed["subwords"], os.path.join(generator, os.path.basename(needed["subwords"])))
    return {"config": config, "direction": generation.get("direction", "forward")}


def _convert_generator(
    needed: Dict[str, str], generator: str, config: Dict[str, Any], quantization: str, say
) -> Dict[str, Any]:
    """The fairseq generator's files ``needed`` (:func:`_fairseq_files`) converted to
    CTranslate2 into ``generator/ct2``; returns the manifest's ``decoder.ct2`` entry (the
    model's path in the system, the quantisation, the converting version)."""
    say(f"system: converting the generator to CTranslate2 ({quantization})")
    src, tgt = config.get("src", "en"), config.get("tgt", "de")
    dicts = os.path.dirname(needed["dict.src"])
    record = convert(needed["checkpoint"], dicts, os.path.join(generator, CT2_DIR), src, tgt, quantization)
    return {"model": f"generator/{CT2_DIR}", **record}


def _convert_scorers(chain: List[List[str]], root: str, quantization: str, say) -> List[List[Any]]:
    """The manifest's ``decoder.ct2.scorers``: ``[step, position, spec]`` of every scorer of the
    packed ``chain`` (its paths :data:`~rerank.features.manifest.PLACEHOLDER` ones, the system
    being written in ``root``) that converts to CTranslate2
    (:meth:`~rerank.features.scorer.Scorer.ct2_spec`: the ``nmt:`` translation models), each
    conversion written into ``models/INDEX-NAME-ct2`` and the ``ct2:`` spec that ``translate``
    runs in its place, its paths placeholders too.  A model CTranslate2 cannot convert stays
    with fairseq, said in one line."""
    base = os.path.abspath(root)
    converted: List[List[Any]] = []
    for k, step in enumerate(chain):
        for j, spec in enumerate(step):
            name, _, arg = spec.partition(":")
            cls = SCORERS.get(name)
            if cls.Config is None:
                continue
            config = parse_settings(cls.Config, arg.replace(PLACEHOLDER, base), spec, {})
            target = os.path.join(base, "models", f"{10 * k + j}-{name}-ct2")
            try:
                replacement = cls.ct2_spec(config, target, quantization)
            except InputError as err:
                shutil.rmtree(target, ignore_errors=True)
                say(f"system: scorer {name} of step {k} stays with fairseq: {err}")
                continue
            if replacement:
                say(f"system: scorer {name} of step {k} converted to CTranslate2 ({quantization})")
                converted.append([k, j, replacement.replace(base, PLACEHOLDER)])
    return converted


def _best_replica(paths: Sequence[str]) -> Tuple[str, Dict[str, Optional[float]]]:
    """(the weights file of the best tuning score, {path: score}); one file is itself.

    Raises:
        InputError: several files of which one records no tuning score.
    """
    scores: Dict[str, Optional[float]] = {}
    lower_is_better = False
    for path in paths:
        record = read_json(path)
        tuning = record.get("tuning", {}) if isinstance(record, dict) else {}
        score = tuning.get("score") if isinstance(tuning, dict) else None
        if len(paths) > 1 and not isinstance(score, (int, float)):
            raise InputError("records no tuning score (tuning.score): cannot choose among replicas", path)
        direction = tuning.get("higher_is_better") if isinstance(tuning, dict) else None
        if isinstance(direction, bool):  # the metric's own direction, recorded by rerank tune
            lower_is_better = lower_is_better or not direction
        else:  # a record from before it was recorded: TER and seg:NAME:lower are the metrics better lower
            metric = str(tuning.get("metric", ""))
            lower_is_better = lower_is_better or metric == "ter" or metric.endswith(":lower")
        scores[os.path.abspath(path)] = score
    if len(paths) == 1:
        return paths[0], scores
    pick = (min if lower_is_better else max)(
        range(len(paths)), key=lambda k: float(scores[os.path.abspath(paths[k])] or 0.0)
    )  # every score is a number here (checked above)
    return paths[pick], scores


def _system_for(system_dir: str, decoder: str, expected_digest: Optional[str]) -> Tuple[Dict[str, Any], Any]:
    """(the system's manifest, its CTranslate2 conversion to decode with or None), every
    checkpoint of the system checked before any work (docs/security.md).

    Raises:
        InputError: an unknown ``decoder``, ``ct2`` for a system without a conversion, a
            system :func:`load_system` refuses.
        UntrustedCheckpoint: as :func:`translate`."""
    if decoder not in DECODERS:
        raise InputError(f"--decoder {decoder!r}: expected one of {', '.join(DECODERS)}")
    manifest = load_system(system_dir, expected_digest=expected_digest)
    converted = manifest.get("ct2")
    if decoder == "ct2" and not converted:
        raise InputError("--decoder ct2: the system holds no CTranslate2 model (pack it with --ct2 int8)", system_dir)
    for name in sorted(manifest["files"]):
        if name.endswith(".pt"):
            check_checkpoint(os.path.join(system_dir, name))
    return manifest, converted if decoder != "fairseq" else None


def _shard_blocks(
    shard: Shard, blocks: List[Tuple[int, int]], outputs: Sequence[Optional[str]], input_path: str, per_block: int
) -> List[Tuple[int, int]]:
    """The blocks ``shard`` translates, its outputs checked first.

    Raises:
        InputError: an output on standard output, a shard dealt no block."""
    for path in outputs:
        shard.check_output(path)
    mine = list(shard.deal(blocks))
    if not mine:
        raise InputError(
            f"shard {shard.id} of {shard.of} holds no block: {sum(hi - lo for lo, hi in blocks)} sentences make "
            f"{len(blocks)} block(s) of --block-sentences {per_block}",
            input_path,
        )
    return mine


def translate(
    system_dir: str,
    input_path: str,
    out: str,
    nbest_out: Optional[str] = None,
    devices: Optional[DeviceSettings] = None,
    tokenized: bool = False,
    batch_size: Optional[int] = None,
    say: Callable[[str], None] = lambda text: print(text, file=sys.stderr),
    expected_digest: Optional[str] = None,
    shard: Optional[Shard] = None,
    decoder: str = "auto",
    block_sentences: Optional[int] = None,
) -> Dict[str, Any]:
    """Translate raw source text (one sentence per line) with the system of ``system_dir``
    (module docstring) into ``out`` (and the scored n-best list into ``nbest_out``).
    Returns {"segments", "seconds", "sentences_per_second", "stages", "blocks"} (the seconds
    of decoding, loading and preprocessing included, and of each scorer step: ``step0
    (nmt)``).  ``expected_digest``: the system digest pack-system printed (:func:`load_system`).
    ``decoder`` (:data:`DECODERS`): what runs a fairseq system's models: ``fairseq`` (the
    checkpoints: ``fairseq-generate`` searches, the ``nmt:`` scorers as tuned), ``ct2`` (the
    conversions of ``pack-system --ct2``: the search, :mod:`rerank.nmt.ct2`, and the converted
    scorers, :func:`scorer_steps`), ``auto`` (the conversions where the system has them).

    The input is translated in blocks of ``block_sentences`` sentences (default: as many as
    make :data:`rerank.nbest.BLOCK_HYPOTHESES` candidates at the system's n-best, 500 of a
    100-best system: the blocks ``features add`` scores a list in), each decoded, scored and
    re-ranked on its own, so memory is bounded by a block.  ``shard``: only blocks K, K+N, …
    (:mod:`rerank.shards`), each translated as one process translates it; ``out`` and
    ``nbest_out`` then carry signatures recording its sentences (``members``), and ``rerank
    merge`` joins the shards' outputs into what one process writes, byte for byte (given the
    same torch threads per process).

    Raises:
        InputError: a system :func:`load_system` refuses, no input line or an empty one, a
            shard holding no block or written to standard output, an unknown ``decoder`` or
            ``ct2`` for a system packed without ``--ct2``.
        UntrustedCheckpoint: a checkpoint of the system (generator or scorer) naming classes
            beyond fairseq's own (:mod:`rerank.nmt.checkpoints`), unless trusted; refused
            before any decoding starts.
    """
    start = time.perf_counter()
    manifest, use_ct2 = _system_for(system_dir, decoder, expected_digest)
    decoding = manifest["decoding"]
    raw = read_source_text(input_path)
    candidates = decoding["nbest"] if isinstance(decoding, dict) else decoding.nbest
    per_block = block_sentences or max(1, -(-BLOCK_HYPOTHESES // max(1, candidates)))
    blocks = [(lo, min(lo + per_block, len(raw))) for lo in range(0, len(raw), per_block)]
    mine = blocks if shard is None else _shard_blocks(shard, blocks, (out, nbest_out), input_path, per_block)
    stages: Dict[str, float] = {}
    scorers = ScorerCache(lambda spec: make_scorer(spec, devices))  # every model loaded once, for every block
    with tempfile.TemporaryDirectory() as tmp:
        lists: List[str] = []
        lines: List[str] = []
        members: List[int] = []
        for k, (lo, hi) in enumerate(mine):
            block_input = input_path
            if len(blocks) > 1:  # a block: a file of its own, decoded as one process decodes it
                say(f"translate: block {lo // per_block + 1} of {len(blocks)}: sentences {lo + 1}-{hi} of {input_path}")
                block_input = os.path.join(tmp, f"input{k}")
                with open(block_input, "w", encoding="utf-8") as handle:
                    handle.writelines(line + "\n" for line in raw[lo:hi])
            models = (devices, scorers)
            listed, best, text = _translate_block(
                system_dir, manifest, block_input, os.path.join(tmp, f"block{k}"), models, batch_size, say, use_ct2, lo
            )
            for stage, seconds in listed.pop("stages").items():
                stages[stage] = stages.get(stage, 0.0) + seconds
            lists.append(listed["nbest"])
            lines += best
            members += range(lo, hi)
        tokenized = tokenized or text  # rerank generate's model writes text as it takes it
        if not tokenized:
            lines = detokenize(lines, decoding.tgt)
        records = {}
        if shard is not None:
            records = {kind: shard.member_record(len(raw), input_path, members, kind) for kind in ("text", "nbest")}
        with StagedOutputs() as outputs:  # the translation and the scored list appear together
            with outputs.open(out) as handle:
                handle.writelines(line + "\n" for line in lines)
            if records:  # a shard: its record beside the translation, for rerank merge
                record = {"system": manifest["digest"], "tokenized": tokenized, "shard": records["text"]}
                write_signed(outputs.signature(out), record)
            if nbest_out:
                _write_scored_list(lists, outputs, nbest_out, records.get("nbest"))
    segments = len(lines)
    seconds = time.perf_counter() - start
    result = {
        "segments": segments,
        "seconds": round(seconds, 3),
        "sentences_per_second": segments / max(seconds, 1e-9),
        "stages": {stage: round(took, 3) for stage, took in stages.items()},
        "blocks": len(mine),
    }
    say(f"translate: {segments} sentences in {seconds:.1f} s ({result['sentences_per_second']:.2f}/s) -> {out}")
    return result


def _translate_block(
    system_dir, manifest, input_path, prefix, models, batch_size, say, use_ct2, first: int = 0
) -> Tuple[Dict[str, Any], List[str], bool]:
    """One block of :func:`translate`, the input's sentences from ``first`` on: its n-best
    list decoded (``prefix``.nbest), scored by every step of the chain (``models`` = (devices,
    the :class:`ScorerCache` of every block)) and re-ranked.  Returns ({"nbest": the scored list, "stages":
    seconds per stage}, the best hypothesis of every sentence, whether the model writes text
    as it takes it: a ``rerank generate`` system, whose lines are not detokenised)."""
    began = time.perf_counter()
    devices, scorers = models
    decoding = manifest["decoding"]
    nbest, source = prefix + ".nbest", prefix + ".source"
    if isinstance(decoding, dict):  # rerank generate's model: raw text in, text out
        generate_block(decoding, input_path, nbest, prefix + ".1best", devices, say, first)
        source, text = input_path, True
    else:
        decode_fairseq(system_dir, decoding, input_path, nbest, source, devices, batch_size, say, use_ct2)
        text = False
    stages = {"decode": time.perf_counter() - began}
    for k, step in enumerate(scorer_steps(manifest, use_ct2)):
        scored = f"{prefix}.step{k}"
        begun = time.perf_counter()
        add_features(
            nbest, step, scored, ScoringInputs(source=source), say=lambda text: None, devices=devices, scorers=scorers
        )
        kinds = " ".join(spec.partition(":")[0] for spec in step)
        stages[f"step{k} ({kinds})"] = time.perf_counter() - begun
        nbest = scored
    best = prefix + ".best"
    apply_file(nbest, os.path.join(system_dir, manifest["weights"]), best)
    return {"nbest": nbest, "stages": stages}, read_lines(best), text


def scorer_steps(manifest: Dict[str, Any], ct2: Optional[Dict[str, Any]]) -> List[List[str]]:
    """The scorer chain ``translate`` runs: the manifest's steps (paths resolved,
    :func:`~rerank.features.manifest.load_system`), with ``ct2`` (the manifest's CTranslate2
    entry, when the system decodes with it) every converted scorer replaced by its ``ct2:``
    spec (``pack-system --ct2``: the same columns)."""
    steps = [list(step) for step in manifest["steps"]]
    for k, j, spec in (ct2 or {}).get("scorers", []):
        steps[k][j] = spec
    return steps


def _write_scored_list(lists: Sequence[str], outputs: StagedOutputs, path: str, shard: Optional[Dict]) -> None:
    """``translate --nbest-out``: the blocks' scored lists ``lists`` joined (ids renumbered)
    into ``path`` staged in ``outputs``, with the first block's signature (its ``shard``
    record replaced by ``shard``, where given)."""
    if len(lists) == 1:
        shutil.copyfile(lists[0], outputs.stage(path))
    else:
        with outputs.open(path) as handle:
            writer = NBestWriter(handle, path)
            written = 0
            for listed in lists:
                for _, block in iter_nbest(listed):
                    writer.write(block, written)
                    written += block.num_segments
    side = outputs.signature(path)
    if side is not None:
        record = read_json(lists[0] + ".json")
        if len(lists) > 1:
            record["blocks"] = len(lists)
        if shard is not None:
            record["shard"] = shard
        with atomic_write(side) as handle:
            json.dump(record, handle, indent=2)


def detokenize(lines: List[str], lang: str) -> List[str]:
    """Moses' detokeniser (sacremoses) of tokenised lines: the tokenisation of the project's
    text convention undone; lowercasing is not (it cannot be)."""
    from sacremoses import MosesDetokenizer

    detok = MosesDetokenizer(lang=lang)
    return [detok.detokenize(line.split()) for line in lines]
