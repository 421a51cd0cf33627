"""Word vectors and word similarity (rerank/embed/words.py, rerank/embed/evaluation.py):
Spearman by hand, coverage, cross-lingual pairs, bad files."""

import numpy as np
import pytest

from rerank.embed.evaluation import average_ranks, cross_lingual_pairs, spearman, word_similarity
from rerank.embed.words import read_pairs, read_vectors, write_vectors
from rerank.errors import InputError


def test_average_ranks_and_spearman_by_hand():
    assert average_ranks([10, 30, 20, 30]).tolist() == [1.0, 3.5, 2.0, 3.5]
    # ranks x (1, 2, 3, 4), y (2, 1, 4, 3): d = (1, 1, 1, 1), rho = 1 - 6*4 / (4*15) = 0.6
    assert spearman([1, 2, 3, 4], [5, 1, 9, 7]) == pytest.approx(0.6)
    # with ties: x ranks (1, 2.5, 2.5, 4), y ranks (1, 2, 3, 4): Pearson of the ranks
    rx, ry = np.array([1, 2.5, 2.5, 4]), np.array([1, 2, 3, 4])
    expected = np.sum((rx - 2.5) * (ry - 2.5)) / np.sqrt(np.sum((rx - 2.5) ** 2) * np.sum((ry - 2.5) ** 2))
    assert spearman([0, 1, 1, 2], [3, 4, 5, 6]) == pytest.approx(expected)  # 4.5/sqrt(4.5*5) = 0.9487
    with pytest.raises(ValueError, match="at least 2"):
        spearman([1], [2])


def test_word_similarity_counts_coverage_and_ranks_cosines():
    vectors = {"en_a": np.array([1.0, 0.0]), "en_b": np.array([1.0, 1.0]), "en_c": np.array([0.0, 1.0])}
    pairs = [("en_a", "en_b", 7.0), ("en_a", "en_c", 1.0), ("en_b", "en_c", 8.0), ("en_a", "en_zzz", 5.0)]
    # cosines 0.707, 0, 0.707 against gold 7, 1, 8: ranks (2.5, 1, 2.5) vs (2, 1, 3)
    result = word_similarity(vectors, pairs)
    assert result["covered"] == 3 and result["pairs"] == 4 and result["coverage"] == 75.0
    assert result["spearman"] == pytest.approx(spearman([0.707, 0, 0.707], [7, 1, 8]))
    assert np.isnan(word_similarity(vectors, pairs[3:])["spearman"])


def test_cross_lingual_pairs_from_line_aligned_sets():
    en = [("en_old", "en_new", 1.0), ("en_smart", "en_clever", 9.0)]
    de = [("de_alt", "de_neu", 2.0), ("de_klug", "de_clever", 8.0)]
    assert cross_lingual_pairs(en, de) == [
        ("en_old", "de_neu", 1.5),
        ("de_alt", "en_new", 1.5),
        ("en_smart", "de_clever", 8.5),
        ("de_klug", "en_clever", 8.5),
    ]
    with pytest.raises(ValueError, match="not line-aligned"):
        cross_lingual_pairs(en, de[:1])


def test_vectors_round_trip_and_ragged_rows_are_refused(tmp_path):
    path = str(tmp_path / "v.txt")
    write_vectors(path, {"en_dog": np.array([0.5, -1.0]), "de_hund": np.array([0.25, 2.0])})
    assert open(path).read().splitlines()[0] == "2 2"
    back = read_vectors(path)
    assert list(back) == ["en_dog", "de_hund"] and back["de_hund"].tolist() == [0.25, 2.0]
    for text, message in (
        ("a 1 2\nb 1\n", r"v.txt:2: 1 values for 'b' but 2 on the first row \(ragged rows\)"),
        ("a 1 x\n", r"v.txt:1: a value of 'a' is not a number"),
        ("a 1 nan\n", r"v.txt:1: a value of 'a' is not finite"),
        ("a 1\na 2\n", r"v.txt:2: the word 'a' has a second row"),
        ("a\n", r"v.txt:1: the word 'a' has no values"),
        ("", r"v.txt: no word vectors"),
    ):
        (tmp_path / "v.txt").write_text(text)
        with pytest.raises(InputError, match=message):
            read_vectors(path)


def test_pairs_skip_a_header_and_refuse_rows_without_scores(tmp_path):
    path = tmp_path / "p.tsv"
    path.write_text("word 1\tword 2\tscore\nold\tnew\t0\nsmart\tclever\t9.5\n")
    assert read_pairs(str(path)) == [("old", "new", 0.0), ("smart", "clever", 9.5)]
    for text, message in (
        ("old\tnew\n", r"p.tsv:1: expected word1<TAB>word2<TAB>score, found 2 field\(s\)"),
        ("a\tb\t1\nold\tnew\thigh\n", r"p.tsv:2: the score 'high' is not a number"),
        ("w1\tw2\tscore\n", r"p.tsv: no word pairs"),
    ):
        path.write_text(text)
        with pytest.raises(InputError, match=message):
            read_pairs(str(path))
