"""The Python API checks its arguments at its edge: a path where a list or an n-best list is
expected, a None item, an empty list, settings of the wrong type or range — each is one
TypeError or InputError naming the argument, never an AttributeError from deep inside."""

import pathlib

import pytest

import rerank
from rerank.errors import InputError

NBEST = "0 ||| a b ||| F= -1 G= 1 ||| -1\n0 ||| a c ||| F= -2 G= 0 ||| -2\n1 ||| d ||| F= -1 G= 0 ||| -1\n"
REFS = ["a b", "d"]


@pytest.fixture()
def nbest(tmp_path):
    path = tmp_path / "l.nbest"
    path.write_text(NBEST)
    return rerank.read_nbest(path)  # a pathlib.Path is a path too


CASES = {
    "tune a path": (lambda nb: rerank.tune("l.nbest", REFS), TypeError, "nbest: expected an NBestList"),
    "tune a None reference": (lambda nb: rerank.tune(nb, ["a b", None]), TypeError, "references: item 1 is NoneType"),
    "tune no references": (lambda nb: rerank.tune(nb, []), InputError, "0 references but the n-best list has 2"),
    "tune a None stream": (lambda nb: rerank.tune(nb, [REFS, None]), TypeError, "references: expected a list"),
    "tune no algorithm": (lambda nb: rerank.tune(nb, REFS, algorithm=None), TypeError, "algorithm: expected"),
    "tune init 5": (lambda nb: rerank.tune(nb, REFS, init=5), TypeError, "init: expected 'beam', 'zeros'"),
    "tune a text setting": (
        lambda nb: rerank.tune(nb, REFS, iterations="x"),
        InputError,
        "mira: iterations='x' is not an integer",
    ),
    "tune a bool as a number": (lambda nb: rerank.tune(nb, REFS, C=True), InputError, "mira: C=True is not a number"),
    "tune a column list of numbers": (lambda nb: rerank.tune(nb, REFS, features=[1]), TypeError, "features"),
    "apply a path": (lambda nb: rerank.apply("l.nbest", {"F": 1}), TypeError, "nbest: expected an NBestList"),
    "apply a list of weights": (lambda nb: rerank.apply(nb, [1, 2]), TypeError, "weights: expected"),
    "decoder_1best a path": (lambda nb: rerank.decoder_1best("x"), TypeError, "nbest: expected an NBestList"),
    "evaluate a None hypothesis": (lambda nb: rerank.evaluate(["a", None], REFS), TypeError, "hypotheses: item 1"),
    "evaluate no references": (lambda nb: rerank.evaluate(["a", "b"], None), TypeError, "references: expected"),
    "evaluate metrics None": (lambda nb: rerank.evaluate(["a", "b"], REFS, metrics=None), TypeError, "metrics"),
    "evaluate no metrics": (lambda nb: rerank.evaluate(["a", "b"], REFS, metrics=[]), InputError, "an empty list"),
    "signif negative shuffles": (
        lambda nb: rerank.significance(REFS, [REFS], {"x": [REFS]}, shuffles=-1),
        InputError,
        "significance: shuffles=-1 must be at least 1",
    ),
    "signif text shuffles": (
        lambda nb: rerank.significance(REFS, [REFS], {"x": [REFS]}, shuffles="x"),
        InputError,
        "shuffles='x' is not an integer",
    ),
    "signif a negative seed": (
        lambda nb: rerank.significance(REFS, [REFS], {"x": [REFS]}, seed=-2),
        InputError,
        "seed=-2 must be at least 0",
    ),
    "signif systems as a list": (lambda nb: rerank.significance(REFS, [REFS], [REFS]), TypeError, "systems"),
    "signif a None hypothesis": (
        lambda nb: rerank.significance(REFS, [["a b", None]], {"x": [REFS]}),
        TypeError,
        "baseline, replica 1: item 1 is NoneType",
    ),
    "add_features a path": (lambda nb: rerank.add_features("x", ["len:"]), TypeError, "nbest: expected"),
    "add_features None": (lambda nb: rerank.add_features(nb, None), TypeError, "scorers: expected"),
    "add_features no scorer": (lambda nb: rerank.add_features(nb, []), InputError, "scorers: an empty list"),
    "add_features a text as sources": (  # a string is the path of a file of sources
        lambda nb: rerank.add_features(nb, ["mbr:bleu"], sources="a dog"),
        InputError,
        "sources: no such file (give a list of sentences, or the path of a file of them)",
    ),
    "add_features sources of another type": (
        lambda nb: rerank.add_features(nb, ["mbr:bleu"], sources=5),
        TypeError,
        "sources: expected a list of strings, not int",
    ),
    "read_nbest None": (lambda nb: rerank.read_nbest(None), TypeError, "read_nbest: path: expected a file path"),
    "read_lines 5": (lambda nb: rerank.read_lines(5), TypeError, "expected a file path"),
    "write_nbest swapped": (lambda nb: rerank.write_nbest("out.nbest", nb), TypeError, "write_nbest(nbest, path)"),
    "format_table None": (lambda nb: rerank.format_table(None), TypeError, "format_table: expected"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_wrong_argument_is_named_at_the_edge(case, nbest):
    call, error, message = CASES[case]
    with pytest.raises(error) as caught:
        call(nbest)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_paths_may_be_pathlib_paths(nbest, tmp_path):
    rerank.write_nbest(nbest, tmp_path / "copy.nbest")
    (tmp_path / "refs").write_text("a b\nd\n")
    assert rerank.read_lines(pathlib.Path(tmp_path / "refs")) == REFS
    assert rerank.read_nbest(tmp_path / "copy.nbest").num_segments == 2
    assert rerank.tune(nbest, REFS, features="F", init="zeros").weights["G"] == 0.0  # one name is a list of one


@pytest.mark.parametrize(
    "blocked,argv,extra",
    [
        ("torch", ["embed", "train", "--data", "x", "--out", "o"], "nmt"),
        (
            "fairseq",
            ["features", "add", "--nbest", "l.nbest", "--out", "o", "--scorer", "fairseq:c.pt,bpe=none"],
            "nmt",
        ),
        ("subword_nmt", ["nmt", "prepare", "--out", "o"], "nmt"),
        ("sentencepiece", ["nmt", "prepare", "--subword", "sentencepiece", "--out", "o"], "hf"),
    ],
)
def test_a_missing_optional_package_names_its_extra(tmp_path, blocked, argv, extra):
    """As on a core-only install: the verb's import of the package fails; one line names the
    package and the extra, exit 1, no traceback, nothing written."""
    import subprocess
    import sys

    (tmp_path / "l.nbest").write_text(NBEST)
    script = f"import sys; sys.modules[{blocked!r}] = None; from rerank.cli import main; sys.exit(main({argv!r}))"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().endswith(
        f"error: this needs {blocked}, which is not installed: pip install 'nbest-rerank[{extra}]'"
    )
    assert "Traceback" not in done.stderr and "\n" not in done.stderr.strip()
    assert not (tmp_path / "o").exists()
