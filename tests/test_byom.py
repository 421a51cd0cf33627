"""The README's "Bring your own model" walk, end to end on tiny local models: rerank
generate (ct2, epsilon sampling; its union with the beam's list, scored again) -> features
add with hf: (channel direction), ct2:, fairseq: and mbr:bleu -> tune -> apply -> signif."""

import os

import numpy as np

from tests.conftest import needs  # noqa: E402

pytestmark = needs("hf", "nmt")

from rerank.cli import main  # noqa: E402
from rerank.nbest import read_list_info, read_nbest  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from tests.test_nmt_scorer import TINY_TRANSFORMER, _train_fairseq, tiny  # noqa: E402,F401
from tests.tiny_models import build_marian, convert_ct2  # noqa: E402


def test_bring_your_own_model_walk(tiny, tmp_path, capsys):  # noqa: F811
    marian = build_marian(str(tmp_path))
    ct2 = convert_ct2(marian, str(tmp_path / "ct2"))
    fairseq_ckpt = _train_fairseq(
        tiny["bin"],
        str(tmp_path / "tf"),
        "--arch",
        "transformer",
        "--task",
        "translation",
        "--source-lang",
        "en",
        "--target-lang",
        "de",
        *TINY_TRANSFORMER,
    )
    tok = os.path.join(tiny["data"], "tok")
    bpe = os.path.join(tiny["data"], "bpe.codes")
    split = {"val": "val", "test": "test_2016_flickr"}
    for name, prefix in split.items():
        # 1. candidates: CTranslate2, epsilon sampling
        assert (
            main(
                [
                    "generate",
                    "--model",
                    f"ct2:{ct2}",
                    "--input",
                    f"{tok}/{prefix}.en",
                    "--nbest",
                    "4",
                    "--sampling",
                    "epsilon=0.02,seed=1",
                    "--max-length",
                    "16",
                    "--device",
                    "cpu",
                    "--out-nbest",
                    str(tmp_path / f"{name}.nbest"),
                    "--out-1best",
                    str(tmp_path / f"{name}.1best"),
                ]
            )
            == 0
        )
        # 2. features: the channel model (hf:), CTranslate2 (ct2:), a fairseq transformer (fairseq:), MBR
        assert (
            main(
                [
                    "features",
                    "add",
                    "--nbest",
                    str(tmp_path / f"{name}.nbest"),
                    "--source",
                    f"{tok}/{prefix}.en",
                    "--device",
                    "cpu",
                    "--scorer",
                    f"hf:{marian},direction=backward",
                    "--scorer",
                    f"ct2:{ct2},name=CT2i8",
                    "--scorer",
                    f"fairseq:{fairseq_ckpt},dict={tiny['bin']},bpe=subword-nmt:{bpe},name=FS",
                    "--scorer",
                    "mbr:bleu,feature=uniform",
                    "--out",
                    str(tmp_path / f"{name}.full.nbest"),
                ]
            )
            == 0
        )
    # 1b. joined with the model's beam search (rerank union: each distinct hypothesis once), scored
    # again by the model, whose columns are declared the union's beam
    val_en = f"{tok}/val.en"
    assert (
        main(
            [
                "generate",
                "--model",
                f"ct2:{ct2}",
                "--input",
                val_en,
                "--nbest",
                "4",
                "--beam",
                "4",
                "--max-length",
                "16",
                "--device",
                "cpu",
                "--out-nbest",
                str(tmp_path / "beam.nbest"),
                "--out-1best",
                str(tmp_path / "beam.1best"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "union",
                "--nbest",
                str(tmp_path / "val.nbest"),
                "--nbest",
                str(tmp_path / "beam.nbest"),
                "--out",
                str(tmp_path / "union.nbest"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(tmp_path / "union.nbest"),
                "--source",
                val_en,
                "--device",
                "cpu",
                "--scorer",
                f"ct2:{ct2}",
                "--beam-feature",
                "CT2Norm",
                "--beam-set",
                "CT2,WordPenalty,CT2Norm",
                "--out",
                str(tmp_path / "union.ct2.nbest"),
            ]
        )
        == 0
    )
    union, sampled = read_nbest(str(tmp_path / "union.ct2.nbest")), read_nbest(str(tmp_path / "val.nbest"))
    assert read_list_info(str(tmp_path / "union.ct2.nbest")).beam_feature == "CT2Norm"
    own = {(s, h): sampled.features[r, 0] for r, (s, h) in enumerate(zip(sampled.segment, sampled.hypotheses))}
    again = [
        (own[s, h], union.features[r, 1])
        for r, (s, h) in enumerate(zip(union.segment, union.hypotheses))
        if (s, h) in own
    ]
    assert len(again) == len(own)  # every sampled hypothesis is in the union, scored as before
    assert np.allclose(*zip(*again), atol=1e-3)
    full = read_nbest(str(tmp_path / "val.full.nbest"))
    assert full.feature_names == [
        "CT2",
        "CT2Norm",
        "HFChannel",
        "HFChannelNorm",
        "CT2i8",
        "CT2i8Norm",
        "FS",
        "FSNorm",
        "MBRBLEU",
    ]
    assert read_list_info(str(tmp_path / "val.full.nbest")).beam_feature == "CT2Norm"
    assert np.all(np.isfinite(full.features))
    # 3. tune from the generator's own ranking, 4. apply, 5. significance
    weights = str(tmp_path / "w.json")
    assert (
        main(
            [
                "tune",
                "--nbest",
                str(tmp_path / "val.full.nbest"),
                "--ref",
                f"{tok}/val.de",
                "--tokenize",
                "none",
                "--algorithm",
                "mert",
                "--mert-restarts",
                "3",
                "--out",
                weights,
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(tmp_path / "test.full.nbest"),
                "--weights",
                weights,
                "--out",
                str(tmp_path / "test.rr"),
            ]
        )
        == 0
    )
    assert len(read_lines(str(tmp_path / "test.rr"))) == len(read_lines(f"{tok}/test_2016_flickr.de"))
    capsys.readouterr()
    assert (
        main(
            [
                "signif",
                "--ref",
                f"{tok}/test_2016_flickr.de",
                "--baseline",
                str(tmp_path / "test.1best"),
                "--system",
                f"reranked={tmp_path / 'test.rr'}",
                "--metrics",
                "bleu,chrf",
                "--tokenize",
                "none",
                "--resamples",
                "100",
                "--shuffles",
                "100",
            ]
        )
        == 0
    )
    assert "reranked" in capsys.readouterr().out
