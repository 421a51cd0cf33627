"""Property test over the importers (issue 43): any input either converts or is refused with
one line naming the file — never a traceback, never much more memory than the input."""

import os
import tempfile
import tracemalloc

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rerank.convert import read_fairseq, read_jsonl
from rerank.errors import InputError
from rerank.nbest import NBestList, read_nbest

IDS = st.one_of(st.integers(-3, 6), st.integers(-(10**12), 10**12), st.sampled_from(["", "x", "1.5", "01", "-0"]))
NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.sampled_from(["", "x", "1e999", "-", "nan", "0x10"]),
)
WORDS = st.text(alphabet=st.sampled_from(list('ab |\t\\"{}[]:,\u00e9\x00')), max_size=12)

FAIRSEQ_LINE = st.one_of(
    st.tuples(st.sampled_from(["H", "D", "P", "S", "T"]), IDS, NUMBERS, WORDS).map(
        lambda t: f"{t[0]}-{t[1]}\t{t[2]}\t{t[3]}"
    ),
    st.tuples(IDS, st.lists(NUMBERS, max_size=4)).map(lambda t: f"P-{t[0]}\t{' '.join(t[1])}"),
    WORDS,
)
JSON_LINE = st.one_of(
    st.tuples(IDS, st.lists(WORDS, max_size=3), st.lists(NUMBERS, max_size=3), st.sampled_from(["x", "y"])).map(
        lambda t: (
            '{"id": %s, "hypotheses": [%s], "scores": {"%s": [%s]}}'
            % (
                t[0] or "null",
                ", ".join('"%s"' % w.replace("\\", "").replace('"', "") for w in t[1]),
                t[3],
                ", ".join(t[2]),
            )
        )
    ),
    st.sampled_from(['{"id": 0, "hypotheses": ["a"], "scores": {"x": [1], "x": [2]}}', "{", "[]", "null", ""]),
    WORDS,
)
MOSES_LINE = st.one_of(
    st.tuples(
        IDS, WORDS, st.lists(st.tuples(st.sampled_from(["F=", "G=", "F", "="]), NUMBERS), max_size=3), NUMBERS
    ).map(lambda t: f"{t[0]} ||| {t[1]} ||| {' '.join(f'{n} {v}' for n, v in t[2])} ||| {t[3]}"),
    WORDS,
)


def _check(reader, lines):
    text = "\n".join(lines) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "in.txt")
        with open(path, "w", encoding="utf-8") as out:
            out.write(text)
        tracemalloc.start()
        try:
            result = reader(path)
        except InputError as err:
            message = str(err)
            assert message.startswith(path) and "\n" not in message, message
            result = None
        finally:
            _, peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        # a small multiple of the input (plus the interpreter's fixed costs of one parse)
        assert peak < 2_000_000 + 200 * len(text.encode("utf-8")), (peak, len(text))
        if result is not None:
            assert isinstance(result, NBestList) and result.num_segments >= 1


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(FAIRSEQ_LINE, min_size=1, max_size=8))
def test_fairseq_output_converts_or_is_refused_in_one_line(lines):
    _check(read_fairseq, lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(JSON_LINE, min_size=1, max_size=6))
def test_json_lines_convert_or_are_refused_in_one_line(lines):
    _check(read_jsonl, lines)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(MOSES_LINE, min_size=1, max_size=6))
def test_moses_and_marian_lists_read_or_are_refused_in_one_line(lines):
    _check(read_nbest, lines)
