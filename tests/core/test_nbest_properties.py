"""Property-based tests of the Moses n-best reader and writer (hypothesis)."""

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.errors import InputError
from rerank.nbest import NBestList, read_nbest, write_nbest

# dense names: an underscore makes a one-valued name a sparse feature (Moses' rule; the sparse
# round trip is tested in test_sparse_features.py)
NAME = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="|\x00_"), min_size=1, max_size=8
).filter(lambda s: not any(ch.isspace() for ch in s))
HYPOTHESIS_TEXT = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r|\x00"), max_size=20
).filter(lambda s: s == s.strip())
VALUE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([5e-324, -5e-324, 2.2250738585072014e-308, 1e308, -1e308, -0.0, 0.0, 1e15, -1e16]),
)


@st.composite
def nbest_lists(draw):
    names = draw(st.lists(NAME, min_size=1, max_size=4, unique=True))
    counts = draw(st.lists(st.integers(1, 3), min_size=len(names), max_size=len(names)))
    columns = [name for name, k in zip(names, counts) for _ in range(k)]
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    M = sum(sizes)
    hyps = draw(st.lists(HYPOTHESIS_TEXT, min_size=M, max_size=M))
    values = draw(st.lists(VALUE, min_size=M * len(columns), max_size=M * len(columns)))
    totals = draw(st.lists(VALUE, min_size=M, max_size=M))
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return NBestList(offsets, hyps, np.array(values).reshape(M, len(columns)), columns, np.array(totals))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(nbest=nbest_lists())
def test_write_then_read_is_the_identity(tmp_path, nbest):
    path = str(tmp_path / "x.nbest")
    write_nbest(nbest, path)
    back = read_nbest(path, num_segments=nbest.num_segments)
    assert back.hypotheses == nbest.hypotheses
    assert back.feature_names == nbest.feature_names
    assert back.offsets.tolist() == nbest.offsets.tolist()
    assert back.features.tobytes() == nbest.features.tobytes()  # bit for bit: -0.0, subnormals
    assert [math.copysign(1, t) * abs(t) for t in back.totals] == [math.copysign(1, t) * abs(t) for t in nbest.totals]


LINE_PIECES = st.sampled_from(
    [
        "0",
        "1",
        "2",
        "-1",
        " ||| ",
        "|||",
        "F=",
        "G=",
        " ",
        "\t",
        "x",
        "1.5",
        "nan",
        "inf",
        "-0",
        "1e999",
        "=",
        "é",
        "\x1d",
        "\u2028",
        "\x00",
        "0x1",
        "",
        "\n",
    ]
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.lists(LINE_PIECES, max_size=40).map("".join), raw=st.binary(max_size=60))
def test_arbitrary_input_raises_nothing_but_input_error(tmp_path, text, raw):
    for data in (text.encode("utf-8"), raw, text.encode("utf-8") + raw):
        path = tmp_path / "in.nbest"
        path.write_bytes(data)
        try:
            nbest = read_nbest(str(path))
        except InputError as err:
            assert str(err).startswith(str(path))
            continue
        assert len(nbest.hypotheses) == nbest.offsets[-1] and np.all(np.isfinite(nbest.features))
