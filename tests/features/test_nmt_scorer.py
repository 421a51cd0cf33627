"""Forced-decoding scorers (nmt:, lm:) equal fairseq's own SequenceScorer on tiny models,
and the r2l / backward / LM training paths work end to end."""

import gzip
import importlib.util
import os

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

from rerank.errors import InputError  # noqa: E402
from rerank.features.prefix_tree import prefix_nodes, prefix_sharing, tree_pays  # noqa: E402
from rerank.features.scorer import make_scorer  # noqa: E402
from rerank.nbest import NBestList  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from tests.nmt.test_nmt import EN_DE, _write_corpus  # noqa: E402


def _write_task2(root, n=60, seed=1):
    import random

    rng = random.Random(seed)
    raw = os.path.join(root, "task2", "raw")
    os.makedirs(raw)
    os.makedirs(os.path.join(root, "task2", "image_splits"))
    words = list(EN_DE.values())
    for k in range(1, 6):
        lines = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 7))).capitalize() + "." for _ in range(n)]
        with gzip.open(os.path.join(raw, f"train.{k}.de.gz"), "wt", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.lm import LMConfig, train_lm
    from rerank.nmt.train import TrainConfig, train

    root = tmp_path_factory.mktemp("tiny")
    _write_corpus(str(root / "m30k"), n_train=200, n_val=12, n_test=6)
    _write_task2(str(root / "m30k"))
    data = str(root / "data")
    bin_dir = prepare(str(root / "m30k"), data, PrepareConfig(bpe_merges=40), workers=1)
    models = {}
    for direction in ("forward", "backward", "r2l"):
        models[direction] = str(root / direction)
        train(
            bin_dir,
            models[direction],
            TrainConfig(
                max_update=6,
                max_epoch=2,
                max_tokens=1000,
                dropout=0.0,
                direction=direction,
                role="L2R2" if direction == "forward" else "",
                threads=1,
            ),
        )
    models["backward-own"] = str(root / "backward-own")  # the channel model with an English-only output layer
    train(
        bin_dir,
        models["backward-own"],
        TrainConfig(
            max_update=6, max_epoch=2, max_tokens=1000, dropout=0.0, direction="backward", target_vocab="own", threads=1
        ),
    )
    models["lm"] = str(root / "lm")
    train_lm(
        data, models["lm"], LMConfig(embed_dim=16, hidden_size=16, max_epoch=2, threads=1), data_dir=str(root / "m30k")
    )
    return {"data": data, "bin": bin_dir, "models": models}


def _fairseq_scores(model_dir, data_dir, subset):
    """fairseq's own scores (:func:`_sequence_scorer`) of a model directory's best checkpoint."""
    return _sequence_scorer(os.path.join(model_dir, "checkpoint_best.pt"), data_dir, subset)


def _nbest_of(lines):
    return NBestList(np.arange(len(lines) + 1), list(lines), np.zeros((len(lines), 1)), ["NMT"])


@pytest.mark.parametrize(
    "direction,feature", [("forward", "L2R2"), ("backward", "Channel"), ("r2l", "R2L"), ("backward-own", "Channel")]
)
def test_translation_scorer_equals_fairseq(tiny, direction, feature):
    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    scorer = make_scorer(f"nmt:{tiny['models'][direction]}")
    assert scorer.names(False) == [feature, feature + "Norm"]
    data_dir = tiny["bin"] + {"r2l": ".r2l", "backward-own": ".vocab-en"}.get(direction, "")
    reference = _fairseq_scores(tiny["models"][direction], data_dir, "valid")
    out = scorer.score(_nbest_of(tgt), src, None)  # hypotheses = the German side
    assert out[feature] == pytest.approx([s for s, _ in reference], abs=1e-4)
    assert out[feature + "Norm"] == pytest.approx([s / n for s, n in reference], abs=1e-4)
    assert np.all(out[feature] < 0)


def test_scorer_batches_do_not_change_scores(tiny):
    from rerank.features.nmt_scorer import ForcedDecodingScorer

    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    one = ForcedDecodingScorer(tiny["models"]["forward"], max_nodes=1).score_pairs(src, tgt)[0]
    many = ForcedDecodingScorer(tiny["models"]["forward"], max_nodes=100000).score_pairs(src + src, tgt + tgt)[0]
    assert many == pytest.approx(np.concatenate([one, one]), abs=1e-5)


def test_a_right_to_left_model_decodes_its_own_nbest_in_reading_order(tiny, tmp_path):
    from rerank.nbest import read_list_info
    from rerank.nmt.generate import GenerateConfig, generate_nbest

    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))
    r2l = tiny["models"]["r2l"]
    out = str(tmp_path / "r2l.nbest")
    nb = generate_nbest(
        tiny["bin"],
        os.path.join(r2l, "checkpoint_best.pt"),
        "valid",
        out,
        str(tmp_path / "r2l.1best"),
        GenerateConfig(nbest=4, batch_size=4),
    )  # direction from train.json
    assert nb.feature_names == ["R2L", "WordPenalty", "R2LNorm"] and nb.num_segments == len(src)
    assert read_list_info(out).beam_feature == "R2LNorm"
    assert not any("@@" in h for h in nb.hypotheses)
    # the model's own scores are those of forced decoding of the reading-order text under
    # it (nmt: reverses the subword tokens again), where the beam chose the canonical BPE
    # of its text; in the wrong order almost none would be
    forced = make_scorer(f"nmt:{r2l}").score(nb, src, None)["R2L"]
    same = np.abs(forced - nb.features[:, 0]) < 1e-3
    assert same.mean() > 0.5, same.mean()
    backwards = NBestList(
        nb.offsets, [" ".join(reversed(h.split())) for h in nb.hypotheses], nb.features, nb.feature_names
    )
    wrong = make_scorer(f"nmt:{r2l}").score(backwards, src, None)["R2L"]
    assert (np.abs(wrong - nb.features[:, 0]) < 1e-3).mean() < same.mean() / 2
    with pytest.raises(InputError, match="direction forward given, but the model was trained r2l"):
        generate_nbest(
            tiny["bin"],
            os.path.join(r2l, "checkpoint_best.pt"),
            "valid",
            str(tmp_path / "x.nbest"),
            str(tmp_path / "x.1best"),
            GenerateConfig(nbest=2, direction="forward"),
        )
    assert not os.path.exists(tmp_path / "x.nbest")


def test_lm_scorer_equals_fairseq(tiny):
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    scorer = make_scorer(f"lm:{tiny['models']['lm']}")
    reference = _fairseq_scores(tiny["models"]["lm"], os.path.join(tiny["models"]["lm"], "bin"), "valid")
    out = scorer.score(_nbest_of(tgt), None, None)
    assert out["LM"] == pytest.approx([s for s, _ in reference], abs=1e-4)
    assert out["LMNorm"] == pytest.approx([s / n for s, n in reference], abs=1e-4)
    # the LM was trained on task 1 + task 2 German of the training split only
    train_text = read_lines(os.path.join(tiny["models"]["lm"], "text", "train.de"))
    assert len(train_text) == 200 + 5 * 60


def test_scorer_kinds_and_sources_are_checked(tiny):
    with pytest.raises(InputError, match="lm model"):
        make_scorer(f"nmt:{tiny['models']['lm']}")
    with pytest.raises(InputError, match="translation model"):
        make_scorer(f"lm:{tiny['models']['forward']}")
    with pytest.raises(InputError, match="not a trained model directory"):
        make_scorer(f"nmt:{tiny['data']}")
    with pytest.raises(InputError, match="source"):
        make_scorer(f"nmt:{tiny['models']['backward']}").score(_nbest_of(["ein mann ."]), None, None)


def test_own_target_vocabulary_holds_the_training_types_of_its_language(tiny):
    from fairseq.data import Dictionary, data_utils

    own_dir = tiny["bin"] + ".vocab-en"
    joint = Dictionary.load(os.path.join(tiny["bin"], "dict.en.txt"))
    own = Dictionary.load(os.path.join(own_dir, "dict.en.txt"))
    train_types = {w for line in read_lines(os.path.join(tiny["data"], "bpe", "train.en")) for w in line.split()}
    real = {own[i] for i in range(own.nspecial, len(own)) if not own[i].startswith("madeupword")}
    assert real == train_types and len(own) < len(joint) and len(own) % 8 == 0
    assert [own[i] for i in range(4)] == [joint[i] for i in range(4)]  # <s> <pad> </s> <unk>
    # the model directory scores with the same dictionaries it was trained on
    assert (
        open(os.path.join(tiny["models"]["backward-own"], "dict.en.txt")).read()
        == open(os.path.join(own_dir, "dict.en.txt")).read()
    )
    for subset in ("train", "valid"):  # re-indexed sentences read back as the same subwords (unseen: <unk>)
        before = data_utils.load_indexed_dataset(os.path.join(tiny["bin"], f"{subset}.en-de.en"), joint)
        after = data_utils.load_indexed_dataset(os.path.join(own_dir, f"{subset}.en-de.en"), own)
        assert len(before) == len(after)
        for a, b in zip(before, after):
            expected = [w if w in train_types else "<unk>" for w in joint.string(a).split()]
            assert own.string(b).split() == expected
    # the German side is the joint data, linked
    assert os.path.realpath(os.path.join(own_dir, "train.en-de.de.bin")) == os.path.realpath(
        os.path.join(tiny["bin"], "train.en-de.de.bin")
    )


def test_derived_data_still_reads_after_the_output_folder_is_moved(tiny, tmp_path):
    """bin.r2l and bin.vocab-en link the files they share with bin: a moved (or
    renamed) output folder keeps working (absolute links pointed into the old one)."""
    import shutil

    from fairseq.data import Dictionary, data_utils

    data = tiny["data"]
    linked = [
        os.path.join(data, d, n)
        for d in ("bin.r2l", "bin.vocab-en")
        for n in os.listdir(os.path.join(data, d))
        if os.path.islink(os.path.join(data, d, n))
    ]
    assert {os.path.basename(os.path.dirname(p)) for p in linked} == {"bin.r2l", "bin.vocab-en"}
    moved = str(tmp_path / "moved")
    shutil.copytree(data, moved, symlinks=True)  # the links are copied as links, not followed
    for derived in ("bin.r2l", "bin.vocab-en"):
        for name in os.listdir(os.path.join(moved, derived)):
            path = os.path.join(moved, derived, name)
            if os.path.islink(path):
                assert os.path.realpath(path) == os.path.join(os.path.realpath(moved), "bin", name)
    joint = Dictionary.load(os.path.join(moved, "bin.r2l", "dict.de.txt"))
    sources = data_utils.load_indexed_dataset(os.path.join(moved, "bin.r2l", "valid.en-de.en"), joint)
    assert len(sources) == 12


def test_baseline_keeps_the_joint_dictionary():
    from rerank.nmt.train import TrainConfig

    with pytest.raises(InputError, match="joint dictionary"):
        TrainConfig(target_vocab="own")
    with pytest.raises(InputError, match="unknown target vocabulary"):
        TrainConfig(direction="backward", target_vocab="english")
    assert TrainConfig(direction="r2l", target_vocab="own").target_vocab == "own"


def test_only_orders_0_to_n_minus_1_are_narrowed():
    import torch

    from rerank.nmt.bahdanau import _is_leading_rows

    assert _is_leading_rows(torch.tensor([0, 1, 2]), 5) and _is_leading_rows(torch.tensor([0]), 1)
    for order in ([1, 2], [0, 2], [0, 0, 1], [0, 1, 2, 3, 4, 5], []):
        assert not _is_leading_rows(torch.tensor(order, dtype=torch.long), 5)


@pytest.mark.parametrize("kind", ["forward", "r2l", "backward", "backward-own", "lm"])
def test_prefix_tree_equals_whole_sequences(tiny, kind):
    from rerank.features.nmt_scorer import ForcedDecodingScorer

    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))[:6]
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))[:6]
    # n-best-like lists: each reference with shared prefixes, cut and extended variants
    hyps, inputs = [], []
    for s, t in zip(src, tgt):
        words = t.split()
        for variant in (words, words[:-1], words[:2] + ["mann"], words + ["hund"], words[:1]):
            hyps.append(" ".join(variant) or "hund")
            inputs.append(s)
    scorer = ForcedDecodingScorer(
        tiny["models"][kind], max_tokens=50, expect_kind="lm" if kind == "lm" else "translation"
    )
    reverse = scorer.direction == "r2l"
    if kind.startswith("backward"):  # the channel model reads the hypotheses
        inputs, hyps = hyps, inputs
    if kind == "lm":
        inputs = None
    tgt_ids = scorer._ids(hyps, scorer.tgt_dict, reverse=reverse)
    src_ids = scorer._ids(inputs, scorer.src_dict) if inputs is not None else None
    unique = np.arange(len(hyps))
    whole = scorer._score_sequences(src_ids, tgt_ids, unique)
    tree = scorer._score_prefix_tree(src_ids, tgt_ids, unique, max_nodes=7)  # several chunks
    assert tree == pytest.approx(whole, abs=1e-4)
    sharing = prefix_sharing(src_ids, tgt_ids, unique)
    if kind in ("forward", "lm"):  # these variants share prefixes (reversed, they share suffixes)
        assert sharing < 0.8
    if kind.startswith("backward"):  # every hypothesis is a different input: nothing to share
        assert sharing == pytest.approx(1.0)
    total, _ = scorer.score_pairs(inputs, hyps)
    assert total == pytest.approx(whole, abs=1e-4)


def _train_fairseq(bin_dir, save_dir, *args):
    """A fairseq architecture of fairseq's own, trained for a few updates (CPU)."""
    import subprocess
    import sys

    from rerank.nmt import USER_DIR  # numpy.compat for fairseq 0.12's language-model datasets

    cmd = [
        sys.executable,
        "-m",
        "fairseq_cli.train",
        bin_dir,
        "--user-dir",
        USER_DIR,
        "--save-dir",
        save_dir,
        "--cpu",
        "--max-update",
        "4",
        "--max-tokens",
        "1000",
        "--optimizer",
        "adam",
        "--lr",
        "0.001",
        "--no-epoch-checkpoints",
        "--dropout",
        "0.0",
        "--seed",
        "1",
        "--log-format",
        "none",
        "--num-workers",
        "0",
        *args,
    ]
    subprocess.run(
        cmd,
        check=True,
        capture_output=True,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    return os.path.join(save_dir, "checkpoint_last.pt")


def _sequence_scorer(checkpoint, data_dir, subset):
    """fairseq's SequenceScorer (--score-reference, eval-lm) on a checkpoint's binarised subset."""
    import torch
    from fairseq.sequence_scorer import SequenceScorer

    from rerank.features.nmt_scorer import load_checkpoint

    model, task = load_checkpoint(checkpoint, data_dir)
    task.load_dataset(subset)
    scorer = SequenceScorer(task.target_dictionary)
    itr = task.get_batch_iterator(dataset=task.dataset(subset), max_sentences=4).next_epoch_itr(shuffle=False)
    out = {}
    with torch.no_grad():
        for sample in itr:
            for sid, hypos in zip(sample["id"].tolist(), scorer.generate([model], sample)):
                out[sid] = (float(hypos[0]["positional_scores"].sum()), len(hypos[0]["positional_scores"]))
    return [out[k] for k in sorted(out)]


TINY_TRANSFORMER = [
    "--encoder-layers",
    "1",
    "--decoder-layers",
    "1",
    "--encoder-embed-dim",
    "16",
    "--decoder-embed-dim",
    "16",
    "--encoder-ffn-embed-dim",
    "32",
    "--decoder-ffn-embed-dim",
    "32",
    "--encoder-attention-heads",
    "2",
    "--decoder-attention-heads",
    "2",
]


def test_fairseq_transformer_checkpoint_equals_fairseqs_own_scores(tiny, tmp_path):
    ckpt = _train_fairseq(
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
    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    bpe = os.path.join(tiny["data"], "bpe.codes")
    scorer = make_scorer(f"fairseq:{ckpt},dict={tiny['bin']},bpe=subword-nmt:{bpe},name=TF")
    out = scorer.score(_nbest_of(tgt), src, None)
    reference = _sequence_scorer(ckpt, tiny["bin"], "valid")
    assert out["TF"] == pytest.approx([s for s, _ in reference], abs=1e-4)
    assert out["TFNorm"] == pytest.approx([s / n for s, n in reference], abs=1e-4)
    # the same checkpoint converted for CTranslate2 (ct2-fairseq-converter) scores alike
    if importlib.util.find_spec("ctranslate2") is not None:
        from rerank.features.hf_scorer import import_transformers

        import_transformers()  # before ctranslate2.converters imports transformers (a broken torchaudio hidden)
        import ctranslate2

        from rerank.nmt import USER_DIR

        ct2_dir = str(tmp_path / "tf-ct2")
        ctranslate2.converters.FairseqConverter(
            ckpt, tiny["bin"], source_lang="en", target_lang="de", user_dir=USER_DIR
        ).convert(ct2_dir)
        ct2 = make_scorer(f"ct2:{ct2_dir},bpe=subword-nmt:{bpe},compute_type=float32,name=TF").score(
            _nbest_of(tgt), src, None
        )
        assert ct2["TF"] == pytest.approx(out["TF"], abs=1e-3)
        assert ct2["TFNorm"] == pytest.approx(out["TFNorm"], abs=1e-4)
    # our own model directory through fairseq: equals its nmt: shorthand
    model_dir = tiny["models"]["forward"]
    long_form = make_scorer(
        f"fairseq:{model_dir}/checkpoint_best.pt,bpe=subword-nmt:{model_dir}/bpe.codes,name=L2R2"
    ).score(_nbest_of(tgt), src, None)
    assert long_form["L2R2"] == pytest.approx(make_scorer(f"nmt:{model_dir}").score(_nbest_of(tgt), src, None)["L2R2"])


def test_the_prefix_tree_reorders_the_cross_attention_of_a_level_as_wide_as_the_last(tiny, tmp_path):
    """A level of the prefix tree as wide as the one before it but in another order, over two
    sources: fairseq's ``MultiheadAttention.reorder_incremental_state`` leaves an
    encoder-decoder attention's cached keys and values as they are when they hold as many
    rows as the new order (a beam search's encoder output, expanded to the beams already), so
    the tree reorders them itself.  Before, the second hypothesis of source b went on
    attending to source a (on the main job's test_2016 100-best list, 1,068 of 99,981
    right-to-left scores were off, by up to 35 nats)."""
    ckpt = _train_fairseq(
        tiny["bin"], str(tmp_path / "tf"), "--arch", "transformer", "--task", "translation",
        "--source-lang", "en", "--target-lang", "de", *TINY_TRANSFORMER,
    )  # fmt: skip
    scorer = make_scorer(f"fairseq:{ckpt},dict={tiny['bin']},bpe=none")
    a, b = read_lines(os.path.join(tiny["data"], "tok", "val.en"))[:2]
    w = read_lines(os.path.join(tiny["data"], "tok", "val.de"))[0].split()
    # longest first: b's two hypotheses (rows 0, 1 from the start), then a's; after the first
    # word a's hypothesis ends and b's branch into two: two rows again, both b's
    hyps, inputs = [f"{w[0]} {w[1]} {w[2]}", f"{w[0]} {w[3]} {w[2]}", w[0]], [b, b, a]
    tgt_ids, src_ids = scorer._ids(hyps, scorer.tgt_dict), scorer._ids(inputs, scorer.src_dict)
    unique = np.arange(len(hyps))
    whole = scorer._score_sequences(src_ids, tgt_ids, unique)
    assert scorer._score_prefix_tree(src_ids, tgt_ids, unique) == pytest.approx(whole, abs=1e-4)
    assert scorer.score_pairs(inputs, hyps)[0] == pytest.approx(whole, abs=1e-4)
    # which path score_pairs takes under a transformer (prefix_tree.TREE_CALL_ROWS = 128 a level):
    # 600 hypotheses of one source sharing 10 words, then 25 × 24 pairs of words: 13 tokens
    # each with </s>, 7,800 in all; 1 + 10 + 25 + 600 distinct prefixes; 13 levels: the tree
    # saves 7,164 rows for 1,664
    vocabulary = [word for word in scorer.tgt_dict.symbols[scorer.tgt_dict.nspecial :] if not word.endswith("@@")]
    assert len(vocabulary) >= 25
    prefix = (vocabulary * 10)[:10]
    ends = [[x, y] for x in vocabulary[:25] for y in vocabulary[:24]]
    hyps = [" ".join(prefix + end) for end in ends]
    tgt_ids, src_ids = scorer._ids(hyps, scorer.tgt_dict), scorer._ids([a] * len(hyps), scorer.src_dict)
    unique = np.arange(len(hyps))
    distinct = {(id(src_ids[k]), tuple(tgt_ids[k].tolist()[:t])) for k in unique for t in range(len(tgt_ids[k]))}
    assert prefix_nodes(src_ids, tgt_ids, unique) == len(distinct) == 636
    assert tree_pays(scorer.model.decoder, src_ids, tgt_ids, unique, scorer.max_nodes)
    # 5 targets of 300 tokens drawn at random: the tree's 301 levels would save a few rows
    rng = np.random.default_rng(0)
    long = [" ".join(rng.choice(vocabulary, 300)) for _ in range(5)]
    inputs = [a, b, a, b, a]
    tgt_ids, src_ids = scorer._ids(long, scorer.tgt_dict), scorer._ids(inputs, scorer.src_dict)
    unique = np.arange(len(long))
    assert not tree_pays(scorer.model.decoder, src_ids, tgt_ids, unique, scorer.max_nodes)
    whole = scorer._score_sequences(src_ids, tgt_ids, unique)
    assert scorer.score_pairs(inputs, long)[0] == pytest.approx(whole, abs=1e-4)
    assert scorer._score_prefix_tree(src_ids, tgt_ids, unique) == pytest.approx(whole, abs=1e-3)


def test_fairseq_transformer_lm_equals_eval_lm(tiny, tmp_path):
    lm_bin = os.path.join(tiny["models"]["lm"], "bin")
    ckpt = _train_fairseq(
        lm_bin,
        str(tmp_path / "tlm"),
        "--task",
        "language_modeling",
        "--arch",
        "transformer_lm",
        "--decoder-layers",
        "1",
        "--decoder-embed-dim",
        "16",
        "--decoder-ffn-embed-dim",
        "32",
        "--decoder-attention-heads",
        "2",
        "--tokens-per-sample",
        "64",
        "--sample-break-mode",
        "eos",
    )
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    bpe = os.path.join(tiny["models"]["lm"], "bpe.codes")
    out = make_scorer(f"fairseq:{ckpt},dict={lm_bin},bpe=subword-nmt:{bpe},direction=lm").score(
        _nbest_of(tgt), None, None
    )
    reference = _sequence_scorer(ckpt, lm_bin, "valid")
    assert out["FairseqLM"] == pytest.approx([s for s, _ in reference], abs=1e-4)


def test_fairseq_scorer_settings_are_checked(tiny, tmp_path):
    model_dir = tiny["models"]["forward"]
    ckpt = os.path.join(model_dir, "checkpoint_best.pt")
    for arg, needle in (
        (f"{ckpt}", "bpe="),
        (f"{ckpt},bpe=bytes", "bpe must be"),
        (f"{ckpt},bpe=none,direction=sideways", "direction must be"),
        (f"{ckpt},bpe=none,direction=lm", "translation model"),
        (f"{tmp_path}/none.pt,bpe=none", "no such checkpoint"),
        (f"{ckpt},bpe=none,dict={tmp_path}", "cannot load"),
    ):
        with pytest.raises(InputError, match=needle):
            make_scorer(f"fairseq:{arg}")


def test_transformer_tiny_trains_averages_and_scores_as_fairseq(tiny, tmp_path):
    import torch

    from rerank.devices import native_bfloat16
    from rerank.nmt.train import TrainConfig, train, train_command

    save = str(tmp_path / "tt")
    config = TrainConfig(
        arch="transformer-tiny",
        max_epoch=3,
        max_tokens=1000,
        average=2,
        direction="r2l",
        threads=1,
        warmup=3,
        bf16_autocast=True,
    )
    assert config.dropout == 0.3 and config.lr == 5e-3 and config.l2 == 1e-4
    avg = train(tiny["bin"], save, config)
    # the schedule fairseq ran: --warmup, and the architecture's 1000 when it is 0; our
    # criterion with the forward pass in bfloat16 where the CPU has it natively (else float32,
    # rerank.devices.native_bfloat16), the weights kept in float32
    last = torch.load(os.path.join(save, "checkpoint_last.pt"), weights_only=False)
    assert last["cfg"]["lr_scheduler"]["warmup_updates"] == 3
    assert last["cfg"]["criterion"]["_name"] == "fused_label_smoothed_cross_entropy"
    assert last["cfg"]["criterion"]["bf16_autocast"] is native_bfloat16("cpu")
    assert last["cfg"]["criterion"]["label_smoothing"] == 0.1
    assert all(v.dtype == torch.float32 for v in last["model"].values() if v.is_floating_point())
    default = train_command(tiny["bin"], save, TrainConfig(arch="transformer-tiny"))
    assert default[default.index("--warmup-updates") + 1] == "1000"
    assert os.path.basename(avg) == "checkpoint_avg.pt"
    meta = __import__("json").load(open(os.path.join(save, "train.json")))
    assert meta["checkpoint"] == "checkpoint_avg.pt" and meta["averaged"] == ["checkpoint2.pt", "checkpoint3.pt"]
    states = [torch.load(os.path.join(save, f"checkpoint{e}.pt"), weights_only=False)["model"] for e in (2, 3)]
    averaged = torch.load(avg, weights_only=False)["model"]
    key = "decoder.layers.0.fc1.weight"
    assert torch.allclose(averaged[key], (states[0][key] + states[1][key]) / 2, atol=1e-6)
    assert not torch.equal(states[0][key], states[1][key])
    # the nmt: shorthand scores with the averaged model, as fairseq does
    src = read_lines(os.path.join(tiny["data"], "tok", "val.en"))
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    out = make_scorer(f"nmt:{save}").score(_nbest_of(tgt), src, None)
    reference = _sequence_scorer(avg, tiny["bin"] + ".r2l", "valid")
    assert out["R2L"] == pytest.approx([s for s, _ in reference], abs=1e-4)
    # packed into a system (pack-system): the scoring checkpoint only, the same scores to the bit
    from rerank.features.nmt_scorer import NMTScorer

    packed = NMTScorer.pack(NMTScorer.Config(model_dir=save), str(tmp_path / "packed"))
    assert packed.model_dir == str(tmp_path / "packed")
    assert [name for name in sorted(os.listdir(packed.model_dir)) if name.endswith(".pt")] == ["checkpoint_avg.pt"]
    assert np.array_equal(make_scorer(f"nmt:{packed.model_dir}").score(_nbest_of(tgt), src, None)["R2L"], out["R2L"])
    # converted for CTranslate2, the right-to-left model scores the same through features add's path
    if importlib.util.find_spec("ctranslate2") is not None:
        from rerank.features.hf_scorer import import_transformers

        import_transformers()
        import ctranslate2

        from rerank.nmt import USER_DIR

        ct2_dir = str(tmp_path / "tt-ct2")
        ctranslate2.converters.FairseqConverter(
            avg, save, source_lang="en", target_lang="de", user_dir=USER_DIR
        ).convert(ct2_dir)
        ct2 = make_scorer(f"ct2:{ct2_dir},bpe=subword-nmt:{save}/bpe.codes,direction=r2l,compute_type=float32")
        assert ct2.score(_nbest_of(tgt), src, None)["CT2R2L"] == pytest.approx(out["R2L"], abs=1e-3)


def test_transformer_lm_tiny_trains_and_scores_as_eval_lm(tiny, tmp_path):
    from rerank.nmt.lm import LMConfig, train_lm

    save = str(tmp_path / "tlm")
    m30k = os.path.join(os.path.dirname(tiny["data"]), "m30k")
    train_lm(tiny["data"], save, LMConfig(arch="transformer-tiny", max_epoch=2, threads=1), data_dir=m30k)
    tgt = read_lines(os.path.join(tiny["data"], "tok", "val.de"))
    out = make_scorer(f"lm:{save}").score(_nbest_of(tgt), None, None)
    reference = _sequence_scorer(os.path.join(save, "checkpoint_best.pt"), os.path.join(save, "bin"), "valid")
    assert out["LM"] == pytest.approx([s for s, _ in reference], abs=1e-4)
    from rerank.features.nmt_scorer import LMScorer

    packed = LMScorer.pack(LMScorer.Config(model_dir=save), str(tmp_path / "packed"))
    assert [name for name in sorted(os.listdir(packed.model_dir)) if name.endswith(".pt")] == ["checkpoint_best.pt"]
    assert np.array_equal(make_scorer(f"lm:{packed.model_dir}").score(_nbest_of(tgt), None, None)["LM"], out["LM"])
    with pytest.raises(InputError, match="unknown LM architecture"):
        LMConfig(arch="gpt")
