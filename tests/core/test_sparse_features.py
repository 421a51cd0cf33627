"""Sparse features (issue 93, item 12): Moses' ``name_key= value`` pairs that vary per line,
read as Moses' ``mert/Data.cpp`` reads them, kept sparse in memory by every verb, tuned by MIRA
and PRO as ``kbmira`` and ``mert --pro`` tune them, refused by MERT as Moses' mert does."""

import json

import numpy as np
import pytest
from conftest import one_line_error, skip_reason

import rerank
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics import make_objective
from rerank.nbest import iter_nbest, read_nbest, write_nbest
from rerank.nbest.moses import concat_blocks
from rerank.nbest.sparse import SparseFeatures
from rerank.tuning.base import make_tuner

#: the [pro] extra's tests (scikit-learn): marked, and skipped where it is not installed
PRO = [pytest.mark.pro, pytest.mark.skipif(bool(skip_reason("pro")), reason=str(skip_reason("pro")))]

LIST = (
    "0 ||| a b ||| LM0= -1 TM0= -2 -3 wp_the= 1 ||| -3\n"
    "0 ||| a c ||| LM0= -2 TM0= -1 -3 ||| -3\n"
    "1 ||| d ||| LM0= -1 tt_x_y= 2 TM0= -2 -3 wp_the= 0.5 ||| -3\n"
)


def test_sparse_features_are_read_as_moses_reads_them_and_written_back(tmp_path):
    (tmp_path / "s.nbest").write_text(LIST)
    nbest = read_nbest(str(tmp_path / "s.nbest"))
    assert nbest.feature_names == ["LM0", "TM0", "TM0"]  # dense: no underscore, or several values
    np.testing.assert_array_equal(nbest.features, [[-1, -2, -3], [-2, -1, -3], [-1, -2, -3]])
    assert isinstance(nbest.sparse, SparseFeatures) and nbest.sparse.names == ["wp_the", "tt_x_y"]
    np.testing.assert_array_equal(nbest.sparse.to_dense(), [[1, 0], [0, 0], [0.5, 2]])  # absent: 0
    assert len(nbest.sparse.values) == 3  # kept sparse: one value per feature that fires
    assert nbest.all_names == ["LM0", "TM0", "TM0", "wp_the", "tt_x_y"]
    np.testing.assert_allclose(nbest.scores([1, 0, 0, 10, 100]), [-1 + 10, -2, -1 + 5 + 200])
    write_nbest(nbest, str(tmp_path / "w.nbest"))
    lines = (tmp_path / "w.nbest").read_text().splitlines()
    assert lines[0] == "0 ||| a b ||| LM0= -1 TM0= -2 -3 wp_the= 1 ||| -3"
    assert lines[1] == "0 ||| a c ||| LM0= -2 TM0= -1 -3 ||| -3"
    assert lines[2] == "1 ||| d ||| LM0= -1 TM0= -2 -3 tt_x_y= 2 wp_the= 0.5 ||| -3"  # dense first, sparse as read
    again = read_nbest(str(tmp_path / "w.nbest"))
    assert again.sparse.names == nbest.sparse.names
    np.testing.assert_array_equal(again.sparse.to_dense(), nbest.sparse.to_dense())


def test_a_name_the_signature_declares_stays_dense(tmp_path):
    (tmp_path / "d.nbest").write_text("0 ||| a ||| my_lm= -1 ||| 0\n0 ||| b ||| my_lm= -2 ||| 0\n")
    assert read_nbest(str(tmp_path / "d.nbest")).feature_names == []  # Moses' rule: sparse
    (tmp_path / "d.nbest.json").write_text(json.dumps({"beam_feature": "my_lm", "feature_sets": {"beam": ["my_lm"]}}))
    nbest = read_nbest(str(tmp_path / "d.nbest"))
    assert nbest.feature_names == ["my_lm"] and nbest.sparse is None


def test_blocks_of_a_streamed_list_join_to_the_whole(tmp_path):
    (tmp_path / "s.nbest").write_text(LIST * 1 + LIST.replace("0 |||", "2 |||").replace("1 |||", "3 |||"))
    whole = read_nbest(str(tmp_path / "s.nbest"))
    joined = concat_blocks([block for _, block in iter_nbest(str(tmp_path / "s.nbest"), block_size=1)])
    np.testing.assert_array_equal(joined.sparse.to_dense(), whole.sparse.to_dense())
    assert joined.sparse.names == whole.sparse.names
    head = whole.head(1)  # the first hypothesis of each segment, sparse rows with it
    np.testing.assert_array_equal(head.sparse.to_dense(), whole.sparse.to_dense()[[0, 2, 3, 5]])


@pytest.mark.parametrize(
    "line, message",
    [
        ("0 ||| a ||| LM0= -1 wp_a= 1 wp_a= 2 ||| 0\n", "a sparse feature name occurs twice on the line"),
        ("0 ||| a ||| LM0= -1 wp_a= nan ||| 0\n", "feature 'wp_a'"),
    ],
)
def test_bad_sparse_features_are_refused_naming_file_and_line(tmp_path, line, message):
    (tmp_path / "b.nbest").write_text("0 ||| z ||| LM0= 0 ||| 0\n" + line)
    with pytest.raises(InputError, match=message) as error:
        read_nbest(str(tmp_path / "b.nbest"))
    assert "b.nbest:2: " in str(error.value)


def _problem(seed=0, segments=60, size=8, sparse_width=20):
    rng = np.random.default_rng(seed)
    M = segments * size
    offsets = np.arange(0, M + 1, size)
    dense = rng.normal(size=(M, 3))
    values = rng.random((M, sparse_width)) * (rng.random((M, sparse_width)) < 0.2)
    sparse = SparseFeatures.from_rows(
        [[(f"sp_{k}", values[m, k]) for k in range(sparse_width) if values[m, k]] for m in range(M)]
    )
    words = list("abcdefgh")
    hypotheses = [" ".join(rng.choice(words, size=rng.integers(3, 8))) for _ in range(M)]
    references = [" ".join(rng.choice(words, size=6)) for _ in range(segments)]
    metric = make_objective("bleu", "13a", False, None)
    stats = metric.hypothesis_stats(hypotheses, [references], np.repeat(np.arange(segments), size), np.arange(M))
    return dense, sparse, stats, offsets, metric


@pytest.mark.parametrize("numpy_loop", [True, False])
def test_mira_on_sparse_features_equals_mira_on_the_same_features_written_out(numpy_loop):
    dense, sparse, stats, offsets, metric = _problem()
    tuner = make_tuner("mira")
    sparse_result = tuner.tune(dense, stats, offsets, metric=metric, sparse=sparse)
    tuner.numpy_loop = numpy_loop  # the dense reference: numpy loop or BLEU's C loop
    dense_result = tuner.tune(np.hstack([dense, sparse.to_dense()]), stats, offsets, metric=metric)
    np.testing.assert_allclose(sparse_result.vector, dense_result.vector, atol=1e-9)
    assert sparse_result.details["best_epoch"] == dense_result.details["best_epoch"] > 0
    assert (
        sparse_result.score == pytest.approx(dense_result.score) and sparse_result.score > sparse_result.initial_score
    )


@PRO[0]
@PRO[1]
def test_pro_on_sparse_features_equals_pro_on_the_same_features_written_out():
    dense, sparse, stats, offsets, metric = _problem(seed=1)
    tuner = make_tuner("pro")
    sparse_result = tuner.tune(dense, stats, offsets, metric=metric, sparse=sparse)
    dense_result = tuner.tune(np.hstack([dense, sparse.to_dense()]), stats, offsets, metric=metric)
    np.testing.assert_allclose(sparse_result.vector, dense_result.vector, atol=1e-6)
    assert sparse_result.details["pairs"] == dense_result.details["pairs"] > 0


def test_mert_refuses_sparse_features_as_moses_mert_does():
    dense, sparse, stats, offsets, metric = _problem()
    with pytest.raises(InputError, match="mert tunes dense features only.*20 sparse feature"):
        make_tuner("mert").tune(dense, stats, offsets, metric=metric, sparse=sparse)


def _learnable(tmp_path):
    """A list whose beam (LM0) picks a wrong hypothesis in every segment while the one equal to
    the reference fires ``hit_<k>``: only the sparse features can find it."""
    lines, refs = [], []
    for s in range(30):
        ref = f"the man number {s} rides a horse"
        refs.append(ref)
        for j, text in enumerate([f"a dog sits {s}", ref, f"the cat {s} sleeps on a mat"]):
            hit = f" hit_{s % 5}= 1" if j == 1 else f" miss_{s % 3}= 1"
            lines.append(f"{s} ||| {text} ||| LM0= {-j} WordPenalty0= {-len(text.split())}{hit} ||| {-j}\n")
    (tmp_path / "t.nbest").write_text("".join(lines))
    (tmp_path / "t.ref").write_text("\n".join(refs) + "\n")
    return tmp_path / "t.nbest", tmp_path / "t.ref"


@pytest.mark.parametrize("algorithm", ["mira", pytest.param("pro", marks=PRO)])
def test_tune_and_apply_on_a_moses_list_with_sparse_features(tmp_path, monkeypatch, capsys, algorithm):
    monkeypatch.setenv("RERANK_CACHE", str(tmp_path / "cache"))
    nbest, ref = _learnable(tmp_path)
    weights = tmp_path / "w.json"
    argv = ["tune", "--nbest", str(nbest), "--ref", str(ref), "--beam-feature", "LM0", "--algorithm", algorithm]
    for _ in range(2):  # the second run reads the cached tuning data: the same weights
        assert main(argv + ["--out", str(weights), "--quiet"]) == 0
        record = json.loads(weights.read_text())
        assert record["tuning"]["sparse_features"] == 8  # hit_0..4, miss_0..2
        assert record["tuning"]["score"] == pytest.approx(100.0)  # the references, found by hit_*
        assert all(record["weights"][f"hit_{k}"] > 0 for k in range(5))
    out = tmp_path / "o.txt"
    assert main(["apply", "--nbest", str(nbest), "--weights", str(weights), "--out", str(out)]) == 0
    assert out.read_text() == ref.read_text()
    # a list that never fires most tuned sparse features, and fires one never tuned, takes the
    # same weights (absent or untuned: 0)
    (tmp_path / "u.nbest").write_text(
        "0 ||| x ||| LM0= 0 WordPenalty0= -1 miss_0= 1 new_one= 5 ||| 0\n"
        "0 ||| y ||| LM0= 0 WordPenalty0= -1 hit_0= 1 ||| 0\n"
    )
    assert main(["apply", "--nbest", str(tmp_path / "u.nbest"), "--weights", str(weights), "--out", str(out)]) == 0
    assert out.read_text() == "y\n"
    # a dense selection tunes only its columns; --feature-sets sparse adds the sparse ones
    assert main(argv + ["--features", "LM0,WordPenalty0", "--out", str(weights), "--quiet"]) == 0
    assert not any(name.startswith(("hit_", "miss_")) for name in json.loads(weights.read_text())["weights"])
    assert main(argv + ["--features", "LM0", "--feature-sets", "sparse", "--out", str(weights), "--quiet"]) == 0
    tuned = json.loads(weights.read_text())["weights"]
    assert tuned["WordPenalty0"] == 0.0 and tuned["hit_0"] > 0


def test_mert_on_a_list_with_sparse_features_says_what_to_do_in_one_line(tmp_path, capsys):
    nbest, ref = _learnable(tmp_path)
    argv = ["tune", "--nbest", str(nbest), "--ref", str(ref), "--beam-feature", "LM0", "--algorithm", "mert"]
    assert main(argv + ["--out", str(tmp_path / "w.json")]) == 1
    one_line_error(capsys, "mert tunes dense features only", "use --algorithm mira or pro")
    assert main(argv + ["--features", "LM0,WordPenalty0", "--out", str(tmp_path / "w.json")]) == 0


def test_every_verb_that_writes_the_list_keeps_its_sparse_features(tmp_path):
    nbest, ref = _learnable(tmp_path)
    first = nbest.read_text().splitlines()[1]  # the hypothesis with hit_0
    assert main(["truncate", "--nbest", str(nbest), "--size", "2", "--out", str(tmp_path / "t2.nbest")]) == 0
    assert (tmp_path / "t2.nbest").read_text().splitlines()[1] == first
    args = ["--nbest", str(nbest), "--scorer", "mbr:chrf,feature=LM0", "--out", str(tmp_path / "f.nbest")]
    assert main(["features", "add", *args]) == 0
    line = (tmp_path / "f.nbest").read_text().splitlines()[1]
    assert line.startswith("0 ||| the man number 0 rides a horse ||| LM0= -1 WordPenalty0= -7 MBRchrF= ")
    assert line.endswith(" hit_0= 1 ||| -1")
    assert main(["convert", "--input", str(nbest), "--from", "moses", "--out", str(tmp_path / "c.nbest")]) == 0
    assert read_nbest(str(tmp_path / "c.nbest")).sparse.names == read_nbest(str(nbest)).sparse.names


def test_the_api_tunes_and_applies_sparse_features(tmp_path):
    nbest_path, ref = _learnable(tmp_path)
    nbest = rerank.read_nbest(str(nbest_path))
    references = ref.read_text().splitlines()
    result = rerank.tune(nbest, references, beam_feature="LM0")
    assert result.weights["hit_3"] > 0 and result.score == pytest.approx(100.0)
    assert rerank.apply(nbest, result) == references


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

SPARSE_NAME = st.text("abxyz_", min_size=1, max_size=4).map(lambda s: "f_" + s)
FIRED = st.lists(st.tuples(SPARSE_NAME, st.floats(-1e6, 1e6, allow_nan=False)), max_size=4, unique_by=lambda p: p[0])


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(FIRED, min_size=1, max_size=8))
def test_sparse_write_then_read_is_the_identity(rows, tmp_path_factory):
    path = str(tmp_path_factory.mktemp("sparse") / "s.nbest")
    M = len(rows)
    nbest = rerank.NBestList([0, M], [f"h{m}" for m in range(M)], np.arange(M, dtype=float)[:, None], ["LM0"])
    nbest.sparse = SparseFeatures.from_rows(rows)
    write_nbest(nbest, path)
    back = read_nbest(path)
    assert back.feature_names == ["LM0"] and back.features.tolist() == nbest.features.tolist()
    fired = [dict(row) for row in rows]
    read = [dict(back.sparse.row(m)) if back.sparse is not None else {} for m in range(M)]
    assert read == fired  # every value bit for bit (repr round trip), absent ones absent
