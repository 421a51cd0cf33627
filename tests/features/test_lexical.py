"""IBM Model 1 lexical features (``ibm1:``) against hand computation and a loop-by-loop EM."""

import json
import math
from collections import defaultdict

import numpy as np
import pytest

from rerank.cli import main
from rerank.config import parse_settings
from rerank.errors import InputError
from rerank.features.lexical import NULL, Model1, Model1Scorer, pair_index
from rerank.features.scorer import make_scorer
from rerank.nbest import NBestList, read_nbest
from tests.conftest import one_line_error, random_corpus

EN = [["the", "house"], ["the", "book"], ["a", "book"]]
DE = [["das", "haus"], ["das", "buch"], ["ein", "buch"]]


def test_pair_index_lists_every_source_target_position():
    # two pairs sharing source 0 (positions 0-2), one with source 1 (positions 3-4)
    src_pos, tgt_pos = pair_index(np.array([0, 0, 3]), np.array([3, 3, 2]), np.array([1, 2, 1]))
    assert list(zip(src_pos.tolist(), tgt_pos.tolist())) == [(0, 0), (1, 0), (2, 0)] + [
        (0, 1),
        (0, 2),
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
    ] + [(3, 3), (4, 3)]


def test_one_em_pass_by_hand():
    # from a uniform table each target word's posterior is 1/3 over NULL and the two words:
    # c(the, das) = 2/3, c(the, haus) = c(the, buch) = 1/3, so t(das | the) = (2/3) / (4/3)
    model = Model1.train(EN, DE, iterations=1)
    t = dict(zip(model.keys.tolist(), model.t.tolist()))

    def prob(src, tgt):
        return t[model.src_vocab.index[src] * len(model.tgt_vocab) + model.tgt_vocab.index[tgt]]

    assert (prob("the", "das"), prob("the", "haus"), prob("the", "buch")) == pytest.approx((0.5, 0.25, 0.25))
    assert (prob(NULL, "das"), prob(NULL, "haus"), prob(NULL, "buch"), prob(NULL, "ein")) == pytest.approx(
        (1 / 3, 1 / 6, 1 / 3, 1 / 6)
    )
    assert (prob("book", "buch"), prob("book", "das"), prob("book", "ein")) == pytest.approx((0.5, 0.25, 0.25))
    assert len(model.keys) == 4 + 3 + 3 + 2 + 2  # NULL, the, book, house, a: the pairs that co-occur
    # log p(das buch | the book) = 2 log(1/3 + 1/2 + 1/4) - 2 log 3 (NULL, the, book for each word)
    got = model.log_prob([["the", "book"]], np.array([0, 0, 0]), [["das", "buch"], ["xyz"], []])
    assert got[0] == pytest.approx(2 * math.log(13 / 12) - 2 * math.log(3))
    # a word never seen costs the floor for each of the three source positions: log(3 floor / 3)
    assert got[1] == pytest.approx(math.log(1e-7))
    assert got[2] == 0.0


def _loop_em(sources, targets, iterations):
    """IBM Model 1 EM one word pair at a time (Brown et al. 1993, eq. 16-17)."""
    t = defaultdict(lambda: 1.0)
    for _ in range(iterations):
        count, total = defaultdict(float), defaultdict(float)
        for f_words, e_words in zip(sources, targets):
            src = [NULL] + f_words
            for e in e_words:
                z = sum(t[(f, e)] for f in src)
                for f in src:
                    count[(f, e)] += t[(f, e)] / z
                    total[f] += t[(f, e)] / z
        t = defaultdict(float, {(f, e): c / total[f] for (f, e), c in count.items()})
    return t


def _loop_log_prob(t, source, target, floor):
    src = [NULL] + source
    return sum(math.log(sum(max(t.get((f, e), 0.0), floor) for f in src)) for e in target) - len(target) * math.log(
        len(src)
    )


def test_vectorised_em_and_scores_equal_the_loops():
    refs, hyps, segment = random_corpus(30, 4, seed=5)
    sources = [r.split()[::-1] + ["src"] for r in refs]  # some "source" side for each reference
    targets = [r.split() for r in refs]
    model = Model1.train(sources, targets, iterations=3, floor=1e-6)
    table = _loop_em(sources, targets, 3)
    keys = [(f, e) for f in model.src_vocab.index for e in model.tgt_vocab.index if (f, e) in table]
    ids = np.array([model.src_vocab.index[f] * len(model.tgt_vocab) + model.tgt_vocab.index[e] for f, e in keys])
    assert sorted(ids.tolist()) == model.keys.tolist()
    order = np.argsort(ids)
    assert model.t == pytest.approx(np.array([table[keys[k]] for k in order]), rel=1e-12)
    hyp_words = [h.split() for h in hyps]
    got = model.log_prob(sources, segment, hyp_words)
    want = [_loop_log_prob(table, sources[s], h, 1e-6) for s, h in zip(segment, hyp_words)]
    assert got == pytest.approx(want, rel=1e-12)
    # batches of a few pairs give the same scores
    assert model.log_prob(sources, segment, hyp_words, batch_pairs=7) == pytest.approx(got, rel=1e-12)


def test_em_never_lowers_the_training_likelihood():
    refs, _, _ = random_corpus(40, 1, seed=9)
    sources = [r.split()[1:] + ["x"] for r in refs]
    targets = [r.split() for r in refs]
    likelihood = [
        Model1.train(sources, targets, iterations=k).log_prob(sources, np.arange(40), targets).sum()
        for k in range(1, 6)
    ]
    assert all(b >= a - 1e-9 for a, b in zip(likelihood, likelihood[1:]))
    assert likelihood[-1] > likelihood[0]


def _prepared(tmp_path):
    (tmp_path / "tok").mkdir(parents=True)
    (tmp_path / "prepare.json").write_text('{"config": {"src": "en", "tgt": "de"}}')
    (tmp_path / "tok" / "train.en").write_text("".join(" ".join(s) + "\n" for s in EN))
    (tmp_path / "tok" / "train.de").write_text("".join(" ".join(s) + "\n" for s in DE))
    return tmp_path


def test_the_scorer_gives_both_directions_and_their_per_word_forms(tmp_path):
    prepared = _prepared(tmp_path)
    scorer = make_scorer(f"ibm1:{prepared},iterations=1,form=both")
    nbest = NBestList(np.array([0, 2, 3]), ["das buch", "buch", "das haus"], np.zeros((3, 1)), ["NMT"])
    out = scorer.score(nbest, ["the book", "the house"], None)
    assert list(out) == ["IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"] == scorer.names(False)
    assert out["IBM1"][0] == pytest.approx(2 * math.log(13 / 12) - 2 * math.log(3))
    assert out["IBM1Norm"] == pytest.approx(out["IBM1"] / np.array([2, 1, 2]))
    # the inverse direction: p(the book | das buch) under t(en | de), trained with the roles swapped
    inverse = Model1.train(DE, EN, iterations=1)
    assert out["IBM1Inv"] == pytest.approx(
        inverse.log_prob(
            [["das", "buch"], ["buch"], ["das", "haus"]], np.arange(3), [["the", "book"]] * 2 + [["the", "house"]]
        )
    )
    assert out["IBM1InvNorm"] == pytest.approx(out["IBM1Inv"] / 2)
    # t(house | haus) after one pass: haus is seen once, with the and house
    assert out["IBM1Inv"][2] > out["IBM1Inv"][1]
    assert scorer.feature_sets(False) == {"IBM1": ["IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"]}
    # the default form: the per-word columns only; form=sum: the sums only
    default = make_scorer(f"ibm1:{prepared},iterations=1").score(nbest, ["the book", "the house"], None)
    assert list(default) == ["IBM1Norm", "IBM1InvNorm"]
    assert default["IBM1Norm"] == pytest.approx(out["IBM1Norm"])
    assert default["IBM1InvNorm"] == pytest.approx(out["IBM1InvNorm"])
    sums = make_scorer(f"ibm1:{prepared},iterations=1,form=sum").score(nbest, ["the book", "the house"], None)
    assert list(sums) == ["IBM1", "IBM1Inv"] and sums["IBM1Inv"] == pytest.approx(out["IBM1Inv"])


def test_any_parallel_corpus_trains_the_same_tables_as_a_prepare_directory(tmp_path):
    """ibm1:src=…,tgt=… (plain or .gz, any language pair) equals ibm1:PREPARED_DIR on the
    same tokenised pairs; the reversed pair (src=DE, tgt=EN) is the inverse model."""
    import gzip

    prepared = _prepared(tmp_path / "data")
    en, de = prepared / "tok" / "train.en", prepared / "tok" / "train.de"
    with gzip.open(tmp_path / "train.de.gz", "wt") as out:
        out.write(de.read_text())
    nbest = NBestList(np.array([0, 2, 3]), ["das buch", "buch", "das haus"], np.zeros((3, 1)), ["NMT"])
    sources = ["the book", "the house"]
    expected = make_scorer(f"ibm1:{prepared},form=both").score(nbest, sources, None)
    got = make_scorer(f"ibm1:src={en},tgt={tmp_path / 'train.de.gz'},form=both").score(nbest, sources, None)
    assert list(got) == list(expected)
    for name in expected:
        assert np.array_equal(got[name], expected[name])
    reverse = NBestList(np.array([0, 1, 2]), ["the book", "the house"], np.zeros((2, 1)), ["NMT"])
    reversed_out = make_scorer(f"ibm1:src={de},tgt={en},form=both").score(reverse, ["das buch", "das haus"], None)
    assert reversed_out["IBM1"] == pytest.approx(
        Model1.train(DE, EN, 5).log_prob(
            [["das", "buch"], ["das", "haus"]], np.arange(2), [["the", "book"], ["the", "house"]]
        )
    )


def test_saved_tables_score_bit_for_bit_as_the_trained_ones(tmp_path):
    """Model1Scorer.pack (what pack-system stores): the tables trained once and written to
    tables.npz; ibm1:tables= scores every column as the scorer trained on the corpus, to the
    bit, with a word outside the vocabulary and unicode words; form and floor are kept."""
    prepared = _prepared(tmp_path / "data")
    (prepared / "tok" / "train.de").write_text("das haus\ndas buch\nein bücher-\u00dfbuch\n")
    spec = f"ibm1:{prepared},form=both,iterations=3,floor=1e-5"
    trained = make_scorer(spec)
    config = parse_settings(Model1Scorer.Config, spec[len("ibm1:") :], spec, {})
    packed = Model1Scorer.pack(config, str(tmp_path / "system" / "ibm1"))
    assert packed.tables == str(tmp_path / "system" / "ibm1" / "tables.npz")
    assert (packed.form, packed.floor, packed.corpus, packed.src) == ("both", 1e-5, "", "")
    loaded = make_scorer(f"ibm1:tables={packed.tables},form=both,floor=1e-5")
    assert loaded.iterations == 3  # the tables' own record
    nbest = NBestList(
        np.array([0, 3, 5]),
        ["das buch", "ein bücher-\u00dfbuch", "unbekannt", "", "das haus"],
        np.zeros((5, 1)),
        ["NMT"],
    )
    sources = ["the book", "a book zebra"]
    expected, got = trained.score(nbest, sources, None), loaded.score(nbest, sources, None)
    assert list(got) == list(expected) == ["IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"]
    for name in expected:
        assert np.array_equal(got[name], expected[name]), name
    # an unknown word: the floor at each of the l + 1 = 3 source positions, over l + 1
    assert got["IBM1"][2] == pytest.approx(math.log(3 * 1e-5) - math.log(3))
    # the tables hold no pickled objects and refuse being given with a corpus
    with np.load(packed.tables, allow_pickle=False) as saved:
        assert sorted(saved.files) == sorted(
            ["src_words", "tgt_words", "direct_keys", "direct_t", "inverse_keys", "inverse_t", "iterations"]
        )
    with pytest.raises(InputError, match="give the training corpus or tables=, not both"):
        make_scorer(f"ibm1:{prepared},tables={packed.tables}")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not IBM Model 1 tables of rerank"):
        make_scorer(f"ibm1:tables={tmp_path / 'bad.npz'}")


def test_features_add_with_ibm1_writes_the_columns_and_the_set(tmp_path):
    prepared = _prepared(tmp_path / "data")
    (tmp_path / "l.nbest").write_text(
        "0 ||| das buch ||| NMT= -1 ||| -1\n0 ||| das haus ||| NMT= -2 ||| -2\n1 ||| ein buch ||| NMT= -1 ||| -1\n"
    )
    (tmp_path / "src.en").write_text("the book\na book\n")
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(tmp_path / "l.nbest"),
                "--scorer",
                f"ibm1:{prepared},form=both",
                "--source",
                str(tmp_path / "src.en"),
                "--out",
                str(tmp_path / "o.nbest"),
            ]
        )
        == 0
    )
    nbest = read_nbest(str(tmp_path / "o.nbest"))
    assert nbest.feature_names == ["NMT", "IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"]
    direct = Model1.train(EN, DE, iterations=5)
    assert nbest.features[:, 1] == pytest.approx(
        direct.log_prob(
            [["the", "book"], ["a", "book"]], np.array([0, 0, 1]), [["das", "buch"], ["das", "haus"], ["ein", "buch"]]
        ),
        rel=1e-9,
    )
    # the right translation beats the wrong noun under both directions
    assert nbest.features[0, 1] > nbest.features[1, 1] and nbest.features[0, 3] > nbest.features[1, 3]
    info = json.loads((tmp_path / "o.nbest.json").read_text())
    assert info["feature_sets"]["IBM1"] == ["IBM1", "IBM1Norm", "IBM1Inv", "IBM1InvNorm"]


@pytest.mark.parametrize(
    "spec, needle",
    [
        ("ibm1:", "needs the training corpus"),
        ("ibm1:{tmp}/nowhere", "no prepare.json): give ibm1:PREPARED_DIR (rerank nmt prepare) or ibm1:src="),
        ("ibm1:{data}/tok/train.en", "no prepare.json): give ibm1:PREPARED_DIR (rerank nmt prepare) or ibm1:src="),
        ("ibm1:src={data}/tok/train.en", "src= and tgt= go together"),
        ("ibm1:{data},src={data}/tok/train.en,tgt={data}/tok/train.de", "give the training corpus one way"),
        ("ibm1:src={data}/tok/train.en,tgt={tmp}/src.en", "3 lines here but 1 in"),
        ("ibm1:{data},iterations=0", "iterations=0: '0' is not a positive integer"),
        ("ibm1:{data},iterations=two", "iterations=two: 'two' is not a number"),
        ("ibm1:{data},floor=1.5", "floor=1.5: '1.5' is not in (0, 1)"),
        ("ibm1:{data},smoothing=1", "unknown setting"),
        ("ibm1:{data},form=mean", "form must be one of word, sum, both"),
    ],
)
def test_bad_settings_are_refused_in_one_line(tmp_path, capsys, spec, needle):
    prepared = _prepared(tmp_path / "data")
    (tmp_path / "l.nbest").write_text("0 ||| das buch ||| NMT= -1 ||| -1\n")
    (tmp_path / "src.en").write_text("the book\n")
    spec = spec.format(tmp=tmp_path, data=prepared)
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                str(tmp_path / "l.nbest"),
                "--scorer",
                spec,
                "--source",
                str(tmp_path / "src.en"),
                "--out",
                str(tmp_path / "o.nbest"),
            ]
        )
        != 0
    )
    one_line_error(capsys, needle)
    assert not (tmp_path / "o.nbest").exists()


def test_a_corpus_of_unequal_sides_and_missing_sources_are_refused(tmp_path):
    prepared = _prepared(tmp_path)
    (tmp_path / "tok" / "train.de").write_text("das haus\n")
    with pytest.raises(InputError, match="3 lines here but 1 in"):
        make_scorer(f"ibm1:{prepared}")
    (tmp_path / "tok" / "train.de").write_text("".join(" ".join(s) + "\n" for s in DE))
    nbest = NBestList(np.array([0, 1]), ["das buch"], np.zeros((1, 1)), ["NMT"])
    with pytest.raises(InputError, match="one source sentence per segment"):
        make_scorer(f"ibm1:{prepared}").score(nbest, None, None)


def test_training_in_batches_gives_the_same_table():
    refs, _, _ = random_corpus(50, 1, seed=4)
    sources = [r.split()[::2] + ["y"] for r in refs]
    targets = [r.split() for r in refs]
    whole = Model1.train(sources, targets, iterations=4)
    batched = Model1.train(sources, targets, iterations=4, batch_pairs=10)  # a few sentence pairs a batch
    assert batched.keys.tolist() == whole.keys.tolist()
    assert batched.t == pytest.approx(whole.t, rel=1e-12)


def test_a_corpus_without_words_is_refused(tmp_path):
    prepared = _prepared(tmp_path)
    (tmp_path / "tok" / "train.de").write_text("\n\n\n")
    with pytest.raises(InputError, match="holds no words"):
        make_scorer(f"ibm1:{prepared}")
    with pytest.raises(ValueError, match="no word"):
        Model1.train(EN, [[], [], []])


@pytest.mark.parametrize(
    "meta, needle",
    [
        (
            '{"config": {"src": "en"}}',
            "prepare.json: not a 'rerank nmt prepare' signature (no config.src / config.tgt)",
        ),
        ('["en", "de"]', "prepare.json: not a 'rerank nmt prepare' signature"),
        ('{"config": ', "prepare.json:1"),  # not JSON: file and line
    ],
)
def test_a_prepare_signature_without_the_languages_is_refused_in_one_line(tmp_path, meta, needle):
    prepared = _prepared(tmp_path)
    (prepared / "prepare.json").write_text(meta)
    with pytest.raises(InputError) as error:
        make_scorer(f"ibm1:{prepared}")
    assert needle in str(error.value) and "\n" not in str(error.value)
