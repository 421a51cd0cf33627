"""A SentencePiece corpus end to end: ``rerank nmt prepare --subword sentencepiece`` carried
through training, n-best lists, forced decoding, a packed system and ``translate`` (fairseq
and CTranslate2 decoders)."""

import gzip
import json
import os

import numpy as np
import pytest

from rerank.nmt.subword import make_bpe, subword_spec
from tests.conftest import needs

pytestmark = needs("nmt", "hf")


def test_a_vocabulary_sentencepiece_cannot_learn_is_one_line_and_leaves_nothing(tmp_path):
    from rerank.errors import InputError
    from rerank.nmt.subword import learn_subwords

    with pytest.raises(InputError) as caught:
        learn_subwords("sentencepiece", ["a man rides a horse .\n"] * 3, str(tmp_path), 4)
    message = str(caught.value)
    assert message.startswith("SentencePiece cannot learn 4 pieces from this corpus (Vocabulary size is smaller")
    assert message.endswith("): give a larger --spm-vocab") and "\n" not in message
    assert os.listdir(tmp_path) == []
    assert learn_subwords("sentencepiece", ["a man rides a horse .\n"] * 3, str(tmp_path), 40) == (
        f"sentencepiece:{tmp_path / 'spm.model'}"
    )
    assert os.listdir(tmp_path) == ["spm.model"]
    bpe = make_bpe(subword_spec(str(tmp_path)), "test")
    pieces = bpe.process_line("a man rides a horse .").split()
    assert pieces[0].startswith("\u2581") and len(pieces) > 6 and bpe.decode(pieces) == "a man rides a horse ."


@pytest.mark.slow
def test_a_sentencepiece_corpus_trains_decodes_scores_packs_and_translates(tmp_path, capsys):
    """``prepare --subword sentencepiece``: spm.model instead of bpe.codes, its pieces decode
    to the tokenised text; a forward and a right-to-left transformer trained on it carry the
    model; their n-best lists hold words, not pieces; the R2L model scores the forward
    list (``nmt:``); the tuned list packs (``--ct2 float32``) and ``translate`` equals
    the step-by-step re-ranking with fairseq, and writes words with CTranslate2."""
    from rerank.cli import main
    from rerank.features.add import ScoringInputs, add_features
    from rerank.features.system import load_system, translate
    from rerank.nbest import read_nbest
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.generate import GenerateConfig, generate_nbest
    from rerank.nmt.train import TrainConfig, train
    from rerank.reranking import apply_file
    from rerank.textio import read_lines
    from rerank.tuning.files import TuningSetup, tune_file
    from tests.nmt.test_nmt import _write_corpus

    _write_corpus(str(tmp_path / "m30k"))
    data = tmp_path / "data"
    config = PrepareConfig(subword="sentencepiece", spm_vocab=80)
    bin_dir = prepare(str(tmp_path / "m30k"), str(data), config, workers=1)
    assert (data / "spm.model").is_file() and not (data / "bpe.codes").exists()
    assert json.loads((data / "prepare.json").read_text())["config"]["subword"] == "sentencepiece"
    pieces = read_lines(str(data / "bpe" / "train.en"))
    assert all(line.startswith("\u2581") for line in pieces)
    bpe = make_bpe(subword_spec(str(data)), "test")
    for split in ("train", "val"):
        for lang in ("en", "de"):
            segmented = read_lines(str(data / "bpe" / f"{split}.{lang}"))
            assert [bpe.decode(line.split()) for line in segmented] == read_lines(str(data / "tok" / f"{split}.{lang}"))
    models = {}
    for direction in ("forward", "r2l"):
        train_config = TrainConfig(
            arch="transformer-tiny",
            max_update=12,
            max_epoch=12,
            max_tokens=400,
            warmup=4,
            dropout=0.0,
            average=1,
            direction=direction,
        )
        models[direction] = train(bin_dir, str(tmp_path / direction), train_config)
        assert (tmp_path / direction / "spm.model").is_file() and not (tmp_path / direction / "bpe.codes").exists()
    lists = {}
    for direction, ckpt in models.items():
        out = tmp_path / f"val.{direction}.nbest"
        generate_nbest(bin_dir, ckpt, "valid", str(out), str(out) + ".1best", GenerateConfig(nbest=3, batch_size=4))
        lists[direction] = read_nbest(str(out))
        assert not any("\u2581" in text for text in lists[direction].hypotheses), direction
    assert lists["forward"].feature_names == ["NMT", "WordPenalty", "NMTNorm"]
    assert lists["r2l"].feature_names == ["R2L", "WordPenalty", "R2LNorm"]
    # the R2L model's forced decoding reads its spm.model: a list's words scored as its pieces
    listed = tmp_path / "val.full.nbest"
    source = ScoringInputs(source=str(data / "tok" / "val.en"))
    add_features(str(tmp_path / "val.forward.nbest"), [f"nmt:{tmp_path / 'r2l'}", "mbr:bleu"], str(listed), source)
    full = read_nbest(str(listed))
    assert full.feature_names[3:] == ["R2L", "R2LNorm", "MBRBLEU"]
    r2l = full.features[:, 3]
    assert np.all(r2l < 0) and np.all(np.isfinite(r2l))
    tokens = r2l / full.features[:, 4]  # pieces + </s> under the R2L model
    expected = [len(bpe.process_line(text).split()) + 1 for text in full.hypotheses]
    np.testing.assert_allclose(tokens, expected, atol=1e-3)
    record, _ = tune_file(str(listed), str(data / "tok" / "val.de"), TuningSetup(tokenize="none"))
    (tmp_path / "w.json").write_text(json.dumps(record))
    system = tmp_path / "system"
    assert main(["pack-system", "--nbest", str(listed), "--weights", str(tmp_path / "w.json"), "--out", str(system),
                 "--ct2", "float32"]) == 0  # fmt: skip
    manifest = load_system(str(system))
    assert "generator/spm.model" in manifest["files"] and "generator/bpe.codes" not in manifest["files"]
    raw = tmp_path / "test.en"
    with gzip.open(tmp_path / "m30k" / "task1" / "raw" / "test_2016_flickr.en.gz", "rt") as handle:
        raw.write_text(handle.read())
    outputs = {}
    for decoder in ("fairseq", "ct2"):
        out = tmp_path / f"{decoder}.tok"
        translate(str(system), str(raw), str(out), str(tmp_path / f"{decoder}.nbest"), tokenized=True,
                  decoder=decoder, say=lambda text: None)  # fmt: skip
        outputs[decoder] = read_lines(str(out))
        assert len(outputs[decoder]) == 10 and not any("\u2581" in line for line in outputs[decoder]), decoder
    # fairseq's decoding of the raw text, then the chain and weights: the step-by-step re-ranking
    step = tmp_path / "step"
    step.mkdir()
    from rerank.nmt.generate import generate_nbest_from_text

    generate_nbest_from_text(bin_dir, models["forward"], str(raw), str(step / "beam"), str(step / "1best"),
                             str(step / "src"), GenerateConfig(nbest=3, batch_size=4))  # fmt: skip
    add_features(str(step / "beam"), [f"nmt:{tmp_path / 'r2l'}", "mbr:bleu"], str(step / "full"),
                 ScoringInputs(source=str(step / "src")))  # fmt: skip
    apply_file(str(step / "full"), str(tmp_path / "w.json"), str(step / "best"))
    assert read_lines(str(step / "best")) == outputs["fairseq"]
    assert os.path.getsize(tmp_path / "ct2.nbest") > 0
