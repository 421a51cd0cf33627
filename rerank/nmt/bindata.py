"""The binarised data the auxiliary models train on, derived from the baseline's
(``rerank nmt prepare``'s ``bin/``) without binarising again: every target sentence reversed
(right-to-left models, :func:`reverse_targets`) or one side re-indexed with a dictionary of
its own (channel models with their own vocabulary, :func:`own_target_vocabulary`); what is
unchanged is linked, relatively, and each directory is written whole or not at all
(:func:`rerank.outputs.staged_directory`)."""

from __future__ import annotations

import os

from rerank.errors import InputError
from rerank.outputs import staged_directory


def _link_target(path: str, link_dir: str) -> str:
    """The target of a link in ``link_dir`` to ``path``: relative, so that a copy of the
    data (``bin.r2l``, ``bin.vocab-*``) still finds its linked files after the output
    folder holding both is moved or renamed.  The link may be made in a sibling of
    ``link_dir`` (its ``.tmp``) first: the relative path is the same there."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(link_dir))


def reverse_targets(bin_dir: str, out_dir: str, src: str, tgt: str) -> str:
    """Write ``out_dir``: a copy of the fairseq data ``bin_dir`` in which every target
    sentence's tokens are reversed (end-of-sentence stays last); sources and
    dictionaries are linked (relative links).  Skipped when ``out_dir/reverse.done`` exists."""
    import torch
    from fairseq.data import Dictionary, data_utils, indexed_dataset

    done = os.path.join(out_dir, "reverse.done")
    if os.path.exists(done):
        return out_dir
    with staged_directory(out_dir) as tmp:
        dictionary = Dictionary.load(os.path.join(bin_dir, f"dict.{tgt}.txt"))
        for name in sorted(os.listdir(bin_dir)):
            path = os.path.join(bin_dir, name)
            if name.endswith(f".{src}-{tgt}.{tgt}.idx"):
                prefix = path[:-4]
                data = data_utils.load_indexed_dataset(prefix, dictionary)
                builder = indexed_dataset.make_builder(
                    os.path.join(tmp, name[:-4] + ".bin"), impl="mmap", vocab_size=len(dictionary)
                )
                for item in data:
                    body = item[:-1] if len(item) and int(item[-1]) == dictionary.eos() else item
                    builder.add_item(torch.cat([body.flip(0), item[len(body) :]]))
                builder.finalize(os.path.join(tmp, name))
            elif not name.endswith(f".{src}-{tgt}.{tgt}.bin"):
                os.symlink(_link_target(path, out_dir), os.path.join(tmp, name))
        open(os.path.join(tmp, "reverse.done"), "w").close()
    return out_dir


def own_target_vocabulary(bin_dir: str, out_dir: str, lang: str) -> str:
    """Write ``out_dir``: a copy of the fairseq data ``bin_dir`` whose ``lang`` side has
    its own dictionary, the subword types of ``lang`` in the training split only (counts
    from it, fairseq's order: special symbols, then by count; padded to a multiple of 8
    as fairseq-preprocess does); every ``lang`` dataset is re-indexed (types of the other
    splits unseen in training become <unk>), the rest is linked (relative links).  Skipped when
    ``out_dir/vocab.done`` exists.

    Raises:
        InputError: ``bin_dir`` has no training data for ``lang``.
    """
    import numpy as np
    import torch
    from fairseq.data import Dictionary, data_utils, indexed_dataset

    done = os.path.join(out_dir, "vocab.done")
    if os.path.exists(done):
        return out_dir
    joint = Dictionary.load(os.path.join(bin_dir, f"dict.{lang}.txt"))
    names = sorted(os.listdir(bin_dir))
    ours = [name[:-4] for name in names if name.endswith(f".{lang}.idx") and "-" in name]
    train = [prefix for prefix in ours if prefix.startswith("train.")]
    if not train:
        raise InputError(f"no training data for {lang!r} to build its dictionary from", bin_dir)
    counts = np.zeros(len(joint), dtype=np.int64)
    for prefix in train:
        for item in data_utils.load_indexed_dataset(os.path.join(bin_dir, prefix), joint):
            counts += np.bincount(item.numpy(), minlength=len(joint))
    own = Dictionary()  # <s>, <pad>, </s>, <unk> as in the joint dictionary
    for index in np.flatnonzero(counts[joint.nspecial :]) + joint.nspecial:
        own.add_symbol(joint[int(index)], n=int(counts[index]))
    own.finalize(padding_factor=8)
    lookup = torch.tensor([own.index(joint[i]) for i in range(len(joint))], dtype=torch.long)
    with staged_directory(out_dir) as tmp:
        own.save(os.path.join(tmp, f"dict.{lang}.txt"))
        for prefix in ours:
            data = data_utils.load_indexed_dataset(os.path.join(bin_dir, prefix), joint)
            builder = indexed_dataset.make_builder(os.path.join(tmp, prefix + ".bin"), impl="mmap", vocab_size=len(own))
            for item in data:
                builder.add_item(lookup[item.long()])
            builder.finalize(os.path.join(tmp, prefix + ".idx"))
        for name in names:
            if name != f"dict.{lang}.txt" and name[:-4] not in ours and not name.endswith(".done"):
                os.symlink(_link_target(os.path.join(bin_dir, name), out_dir), os.path.join(tmp, name))
        open(os.path.join(tmp, "vocab.done"), "w").close()
    return out_dir
