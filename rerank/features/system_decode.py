"""The first step of a packed system's translation (:func:`rerank.features.system.translate`):
the n-best list of a block of raw text — by ``fairseq-generate`` on the system's checkpoint
(:func:`decode_fairseq`), by its CTranslate2 conversion (:func:`decode_ct2`: the same
preprocessing and list format) or by the ``rerank generate`` model a system was packed with
(:func:`generate_block`)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict

from rerank.devices import DeviceSettings
from rerank.features.generate import generate_file
from rerank.features.sampling import Sampling
from rerank.nmt.ct2 import beam_nbest
from rerank.nmt.generate import (
    GenerateConfig,
    generate_nbest_from_text,
    model_direction,
    read_source_text,
    segment_text,
    write_beam_list,
)
from rerank.nmt.subword import subword_spec
from rerank.outputs import atomic_write


def decode_fairseq(
    system_dir, config: GenerateConfig, input_path, nbest, source, devices, batch_size, say, ct2=None
) -> None:
    """A fairseq system's n-best list of raw ``input_path`` (its own preprocessing) into
    ``nbest``: by ``fairseq-generate``, or with the CTranslate2 conversion ``ct2`` (the
    manifest's ``ct2`` entry, :func:`decode_ct2`)."""
    generator = os.path.join(system_dir, "generator")
    if devices is not None:
        config.device, config.dtype = devices.device, devices.dtype
    if batch_size:
        config.batch_size = batch_size
    how = f"CTranslate2 {ct2['quantization']}" if ct2 else "fairseq"
    say(f"translate: decoding {input_path} ({config.nbest}-best, beam {config.beam or config.nbest}, {how})")
    if ct2:
        decode_ct2(generator, os.path.join(system_dir, ct2["model"]), config, input_path, nbest, source, devices)
        return
    generate_nbest_from_text(
        os.path.join(generator, "bin"),
        os.path.join(generator, "checkpoint.pt"),
        input_path,
        nbest,
        nbest + ".1best",
        source,
        config,
        quiet=True,  # a user translating sees rerank's lines, not fairseq's INFO log
    )


def decode_ct2(generator, model, config: GenerateConfig, input_path, nbest, source, devices) -> None:
    """:func:`decode_fairseq` with the generator's CTranslate2 conversion ``model``: the same
    preprocessing (:func:`rerank.nmt.generate.segment_text`), beam search by
    :func:`rerank.nmt.ct2.beam_nbest`, the list written as ``fairseq-generate``'s is."""
    raw = read_source_text(input_path)
    subword = subword_spec(generator)
    tokenised, segmented = segment_text(raw, config, subword)
    direction = model_direction(os.path.join(generator, "checkpoint.pt"), config.direction)
    listing = beam_nbest(model, segmented, config, direction, devices, subword.partition(":")[0])
    record = {
        "config": dataclasses.asdict(config),
        "direction": direction,
        "decoder": "ct2",
        "model": os.path.abspath(model),
        "input": os.path.abspath(input_path),
        "segments": listing.num_segments,
    }
    write_beam_list(listing, nbest, nbest + ".1best", record, ["ctranslate2"])
    with atomic_write(source) as handle:
        handle.writelines(line + "\n" for line in tokenised)


def generate_block(settings: Dict[str, Any], input_path, nbest, one_best, devices, say, first: int = 0) -> None:
    """A ``rerank generate`` system's n-best list of ``input_path`` (text as its model takes
    it), the input's sentences from ``first`` on (a sampled sentence's seed is its place in the
    whole input)."""
    sampling = settings["sampling"]
    say(f"translate: generating {settings['nbest']} candidates per sentence of {input_path} with {settings['model']}")
    generate_file(
        settings["model"],
        input_path,
        nbest,
        one_best,
        settings["nbest"],
        None if sampling else settings["beam"],
        Sampling.from_json(sampling, "the system's generator") if sampling else None,
        devices or DeviceSettings(),
        settings["max_length"],
        first_sentence=first,
    )
