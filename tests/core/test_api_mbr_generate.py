"""rerank.mbr_decode and rerank.generate, the Python API of `rerank mbr` and `rerank generate`: the
same picks and lists as the command line on the same input, and a hand-checked pick."""

import numpy as np
import pytest

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.nbest import ListInfo, NBestList, write_signed_nbest
from rerank.textio import read_lines

SEGMENTS = [
    # segment 0: two candidates agree, the third is alone: exact MBR picks the shared one
    ["a man is riding a bike .", "a man rides a bike .", "a man is riding a bike .", "dogs ."],
    # segment 1: the decoder's first is an outlier
    ["zzz qqq", "two dogs play in the snow .", "two dogs play in snow .", "two dogs are playing in the snow ."],
]


def _list() -> NBestList:
    hypotheses = [h for segment in SEGMENTS for h in segment]
    offsets = np.cumsum([0] + [len(segment) for segment in SEGMENTS])
    scores = np.array([[-1.0], [-1.2], [-1.1], [-3.0], [-0.5], [-1.0], [-1.1], [-1.3]])
    return NBestList(offsets, hypotheses, scores, ["NMT"], info=ListInfo("NMT", {"beam": ["NMT"]}, True))


def test_mbr_picks_what_rerank_mbr_picks(tmp_path):
    nbest = _list()  # a list whose signature names its model column (NMT): MBR's weights
    write_signed_nbest(nbest, str(tmp_path / "c.nbest"))
    for algorithm, settings, flags in [
        ("exact", {}, []),
        ("aggregate", {}, []),
        ("pruned", {"seed": 3}, ["--seed", "3"]),
    ]:
        result = rerank.mbr_decode(nbest, "chrf", algorithm=algorithm, **settings)
        out = tmp_path / f"{algorithm}.txt"
        argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", "chrf", "--algorithm", algorithm]
        assert main(argv + flags + ["--out", str(out)]) == 0
        assert result.picks == read_lines(str(out)), algorithm
        assert result.summary["segments"] == 2 and result.kbest is None
    exact = rerank.mbr_decode(nbest, "chrf")
    assert exact.picks[0] == "a man is riding a bike ." and exact.picks[1] != "zzz qqq"  # by hand
    assert exact.summary["utilities"] == 4 * 4 * 2
    kbest = rerank.mbr_decode(nbest, "chrf", keep=2).kbest
    assert kbest is not None and kbest.num_segments == 2 and list(np.diff(kbest.offsets)) == [2, 2]
    assert kbest.hypotheses[0] == exact.picks[0] and kbest.hypotheses[2] == exact.picks[1]
    with pytest.raises(InputError, match="unknown"):
        rerank.mbr_decode(nbest, "chrf", algorithm="nonesuch")
    with pytest.raises(TypeError, match="the exact algorithm has no setting 'clusters'"):
        rerank.mbr_decode(nbest, "chrf", clusters=2)


def test_generate_gives_the_list_rerank_generate_writes(tmp_path):
    pytest.importorskip("transformers")
    pytest.importorskip("sentencepiece")
    from tests.tiny_models import build_marian

    (tmp_path / "hf").mkdir()
    model = f"hf:{build_marian(str(tmp_path / 'hf'))}"
    sources = ["two dogs play in the snow .", "a woman rides a bike ."]
    (tmp_path / "src.en").write_text("".join(s + "\n" for s in sources))
    for sampling, flags in [(None, []), ("top_k=5,seed=2", ["--sampling", "top_k=5,seed=2"])]:
        listed = rerank.generate(model, sources, 3, sampling=sampling, max_length=12, device="cpu")
        out = tmp_path / "cli.nbest"
        argv = ["generate", "--model", model, "--input", str(tmp_path / "src.en"), "--nbest", "3", "--max-length"]
        assert (
            main(
                argv
                + ["12", "--device", "cpu", *flags, "--out-nbest", str(out), "--out-1best", str(tmp_path / "cli.1best")]
            )
            == 0
        )
        cli = rerank.read_nbest(str(out))
        assert listed.hypotheses == cli.hypotheses and np.array_equal(listed.offsets, cli.offsets)
        assert np.allclose(listed.features, cli.features) and listed.feature_names == ["HF", "HFNorm"]
