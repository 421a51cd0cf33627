"""The "Bring your own model" page (docs/usage/byom.md) runs as written, on tiny local models
laid out under the page's own names: rerank generate (ct2: epsilon sampling and beam search,
their union scored again) -> features add with hf: (channel direction), fairseq: (R2L) and
mbr:bleu -> convert -> tune -> apply -> signif; a fairseq transformer converted to
CTranslate2; shards; MBR decoding.  Then what the commands wrote is checked."""

import os
import shutil

import numpy as np

from tests.conftest import needs  # noqa: E402

pytestmark = needs("hf", "nmt")

from rerank.cli import main  # noqa: E402
from rerank.nbest import read_list_info, read_nbest, write_lines  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from tests.docs.test_docs import run_page  # noqa: E402
from tests.nmt.test_nmt import _write_corpus  # noqa: E402
from tests.tiny_models import build_marian, convert_ct2  # noqa: E402


def build(directory):
    """The files the page names, tiny: tokenised val/test sources and references, a random
    Marian model (``opus-mt-de-en``) and its CTranslate2 conversion (``opus-mt-en-de-ct2``), a
    right-to-left transformer-tiny trained for 4 updates with its dictionaries and BPE codes
    (``models/r2l.transformer-tiny/``, the same model as ``r2l/`` + ``bpe.codes``), and a
    fairseq-generate output (``gen.out``)."""
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.train import TrainConfig, train

    _write_corpus(str(directory / "m30k"), n_train=200, n_val=12, n_test=6)
    bin_dir = prepare(str(directory / "m30k"), str(directory / "data"), PrepareConfig(bpe_merges=40), workers=1)
    tok = directory / "data" / "tok"
    for split, prefix in (("val", "val"), ("test", "test_2016_flickr")):
        for lang in ("en", "de"):
            shutil.copy(tok / f"{prefix}.{lang}", directory / f"{split}.{lang}")
    model = directory / "models" / "r2l.transformer-tiny"
    config = TrainConfig(
        arch="transformer-tiny", direction="r2l", max_update=4, max_epoch=1, max_tokens=1000, dropout=0.0, threads=1
    )
    train(bin_dir, str(model), config)
    shutil.copy(model / "checkpoint_best.pt", model / "checkpoint_avg.pt")
    shutil.copy(directory / "data" / "bpe.codes", directory / "bpe.codes")
    if not (model / "bpe.codes").exists():
        shutil.copy(directory / "data" / "bpe.codes", model / "bpe.codes")
    (directory / "r2l").mkdir()
    for name in ("checkpoint_best.pt", "dict.en.txt", "dict.de.txt"):
        if not (model / name).exists():  # the dictionaries of the right-to-left data
            shutil.copy(os.path.join(bin_dir + ".r2l", name), model / name)
        shutil.copy(model / name, directory / "r2l" / name)
    (directory / "hf").mkdir()
    marian = build_marian(str(directory / "hf"))
    os.symlink(marian, directory / "opus-mt-de-en")
    convert_ct2(marian, str(directory / "opus-mt-en-de-ct2"))
    sources, refs = read_lines(str(directory / "val.en")), read_lines(str(directory / "val.de"))
    lines = []
    for i, (source, ref) in enumerate(zip(sources, refs)):
        lines += [f"S-{i}\t{source}", f"H-{i}\t-0.25\t{ref}", f"H-{i}\t-0.75\t{' '.join(ref.split()[:-1])}"]
    write_lines(lines, str(directory / "gen.out"))


def test_the_bring_your_own_model_page_runs_on_tiny_models(tmp_path):
    run_page("docs/usage/byom.md", tmp_path, setup=build)
    segments = len(read_lines(str(tmp_path / "val.en")))
    # the union holds every sampled hypothesis, scored again by the same model as before
    union, sampled = read_nbest(str(tmp_path / "val.nbest")), read_nbest(str(tmp_path / "val.samples.nbest"))
    assert read_list_info(str(tmp_path / "val.nbest")).beam_feature == "CT2Norm"
    assert union.num_segments == sampled.num_segments == segments
    own = {(s, h): sampled.features[r, 0] for r, (s, h) in enumerate(zip(sampled.segment, sampled.hypotheses))}
    again = [
        (own[s, h], union.features[r, union.feature_names.index("CT2")])
        for r, (s, h) in enumerate(zip(union.segment, union.hypotheses))
        if (s, h) in own
    ]
    assert len(again) == len(own)
    assert np.allclose(*zip(*again), atol=1e-3)
    # every model's columns, in the chain's order, all finite
    full = read_nbest(str(tmp_path / "val.full.nbest"))
    names = full.feature_names
    assert {"CT2", "CT2Norm"} <= set(names) and names[-1] == "MBRBLEU"
    assert {"HFChannel", "HFChannelNorm"} <= set(names)
    assert np.all(np.isfinite(full.features))
    # the R2L transformer converted to CTranslate2 scores as fairseq: scores it (the same checkpoint)
    r2l_ct2 = read_nbest(str(tmp_path / "val.r2l-ct2.nbest"))
    assert {"FairseqR2L", "FairseqR2LNorm"} <= set(names)
    ours = full.features[:, names.index("FairseqR2L")]
    theirs = r2l_ct2.features[:, r2l_ct2.feature_names.index("CT2R2L")]
    # the same checkpoint, reversal and BPE, in float32: on these long random hypotheses (~400
    # pieces, ~1,400 nats each) CTranslate2 differs from fairseq by 1e-8 (median, relative), 4e-8 at
    # most, with MKL and with oneDNN alike; its CPU default, int8, by 0.04 % (MKL) to 2 % (oneDNN,
    # AMD); the forward ct2 model's column differs from it by 72 %
    assert np.allclose(ours, theirs, rtol=1e-6, atol=0)
    # the imported list, the re-ranked test set, the merged shards, MBR
    assert read_nbest(str(tmp_path / "val.fairseq.nbest")).num_segments == segments
    assert len(read_lines(str(tmp_path / "test.reranked"))) == len(read_lines(str(tmp_path / "test.de")))
    one = str(tmp_path / "test.chrf.one.nbest")
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(tmp_path / "test.nbest"),
                "--scorer",
                "mbr:chrf,feature=CT2",
                "--out",
                one,
            ]
        )
        == 0
    )
    assert (tmp_path / "test.chrf.nbest").read_bytes() == open(one, "rb").read()
    for name in ("test.mbr.de", "test.mbr-agg.de", "test.mbr-pruned.de", "test.mbr-centroid.de"):
        assert len(read_lines(str(tmp_path / name))) == len(read_lines(str(tmp_path / "test.en")))
    # the text shards merged: what one process writes (MBR on test.nbest: the chrF default;
    # generate: beam search over test.en)
    assert (
        main(
            ["mbr", "--nbest", str(tmp_path / "test.nbest"), "--feature", "CT2"]
            + ["--out", str(tmp_path / "one.mbr.de")]
        )
        == 0
    )
    assert (tmp_path / "test.mbr.merged.de").read_bytes() == (tmp_path / "one.mbr.de").read_bytes()
    argv = ["generate", "--model", f"ct2:{tmp_path / 'opus-mt-en-de-ct2'}", "--input", str(tmp_path / "test.en")]
    argv += [
        "--nbest",
        "8",
        "--max-length",
        "64",
        "--out-nbest",
        str(tmp_path / "one.nbest"),
        "--out-1best",
        str(tmp_path / "one.1best"),
    ]
    assert main(argv) == 0
    assert (
        read_nbest(str(tmp_path / "test.beam.nbest")).hypotheses == read_nbest(str(tmp_path / "one.nbest")).hypotheses
    )
    assert (tmp_path / "test.beam.1best").read_bytes() == (tmp_path / "one.1best").read_bytes()
