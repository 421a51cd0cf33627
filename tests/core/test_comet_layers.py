"""Dropping the encoder layers no score reads never changes a score (issue 82, items 1-2):
rerank runs only the layers up to the highest one a checkpoint reads — exact for XLM-R, whose
layers feed nothing back — but an XLM-R XL encoder normalises its last layer's output, so
there no layer may be dropped (0.62 per segment off before), and ``layer: 0`` (the
embeddings) still needs one layer to run for transformers to return hidden states (a
traceback before).  Each is compared with the same checkpoint scored with every layer run."""

import shutil

import numpy as np
import pytest

from tests.conftest import needs

pytestmark = needs("comet")

import torch  # noqa: E402

from rerank.metrics.comet_kinds import load_comet  # noqa: E402
from rerank.metrics.comet_model import CometModel  # noqa: E402
from tests.comet_tiny import HYPOTHESES, REFERENCES, SOURCES, TINY_ENCODER, build_checkpoint  # noqa: E402


def _full(directory, monkeypatch):
    """The checkpoint scored with every encoder layer run (no layer dropped)."""
    with monkeypatch.context() as patch:
        patch.setattr(CometModel, "_drop_unread_layers", lambda self: None)
        return load_comet(directory).score(SOURCES, HYPOTHESES, REFERENCES)


def _variant(good: str, out, hparams=None, encoder=None):
    """A copy of checkpoint ``good`` with hyper-parameters updated and, with ``encoder`` (a
    (directory, state dict) pair), another encoder's weights and directory."""
    shutil.copytree(good, out)
    path = out / "checkpoints" / "model.ckpt"
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"].update(hparams or {})
    if encoder is not None:
        directory, state = encoder
        kept = {k: v for k, v in checkpoint["state_dict"].items() if not k.startswith("encoder.model.")}
        checkpoint["state_dict"] = {**kept, **{f"encoder.model.{k}": v for k, v in state.items()}}
        checkpoint["hyper_parameters"].update(encoder_model="XLM-RoBERTa-XL", pretrained_model=str(directory))
    torch.save(checkpoint, path)
    return str(out)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("comet-layers")
    return root, build_checkpoint(str(root), "da-layer1-max")


def _xl_encoder(root):
    """A random 2-layer XLM-R XL (hidden 32) with the tiny XLM-R's tokenizer."""
    from transformers import AutoTokenizer, XLMRobertaConfig, XLMRobertaXLConfig, XLMRobertaXLModel

    out = root / "encoder-xl"
    vocab_size = XLMRobertaConfig.from_pretrained(root / "encoder").vocab_size
    config = XLMRobertaXLConfig(vocab_size=vocab_size, **TINY_ENCODER)
    torch.manual_seed(3)
    model = XLMRobertaXLModel(config, add_pooling_layer=False)
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(root / "encoder").save_pretrained(out)
    return out, model.state_dict()


def test_an_xl_encoder_reading_a_lower_layer_scores_as_with_every_layer(built, tmp_path, monkeypatch):
    root, good = built
    xl = _variant(good, tmp_path / "xl", encoder=_xl_encoder(root))
    model = load_comet(xl)
    assert len(model.encoder.encoder.layer) == 2  # layer 1 is read, and still both layers run
    assert np.allclose(model.score(SOURCES, HYPOTHESES, REFERENCES), _full(xl, monkeypatch), atol=1e-6)


def test_layer_0_reads_the_embeddings(built, tmp_path, monkeypatch):
    _, good = built
    zero = _variant(good, tmp_path / "zero", hparams={"layer": 0})
    model = load_comet(zero)
    assert len(model.encoder.encoder.layer) == 1
    scores = model.score(SOURCES, HYPOTHESES, REFERENCES)
    assert np.allclose(scores, _full(zero, monkeypatch), atol=1e-6) and np.isfinite(scores).all()


def test_a_unified_model_that_reads_no_source_scores_one_mt_ref_pass(built, tmp_path):
    """input_segments [mt, ref] (issue 82, item 3): unbabel-comet's unified model joins what it
    reads — the hypothesis, then the source and the reference where listed, in that order — and
    runs one pass unless it reads both; rerank ran the three passes with the source (0.077 per
    segment off), and cometkiwi: took such a model, which scores against references only."""
    from rerank.errors import InputError
    from rerank.metrics import make_metric

    root, _ = built
    kiwi = build_checkpoint(str(root), "kiwi")
    for order in (["mt", "ref"], ["ref", "mt"]):
        directory = _variant(kiwi, tmp_path / "-".join(order), hparams={"input_segments": order})
        model = load_comet(directory)
        expected = model.unified([model.tokens(HYPOTHESES), model.tokens(REFERENCES)])
        assert np.allclose(model.score(SOURCES, HYPOTHESES, REFERENCES), expected, atol=1e-6)
        metric = make_metric(f"cometkiwi:{directory}")
        with pytest.raises(InputError, match=r"reads no source \(input_segments .*\): it scores against references"):
            metric.with_sources(SOURCES).stats(HYPOTHESES, REFERENCES)
