"""Crafted or damaged COMET checkpoints (issue 81, classes 5 and 12): hyper-parameters of the
wrong type, torch.nn names that are not activations COMET builds, shapes that do not chain,
missing tensors, non-tensors, an encoder of another kind and a YAML alias bomb are each
refused in one line naming the file (values echoed short), never a traceback; a ``.ckpt`` file
given in place of its directory is named as given."""

import os
import re
import shutil

import pytest

from tests.conftest import needs, one_line_error

pytestmark = needs("comet")

import torch  # noqa: E402

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.metrics.comet_kinds import load_comet  # noqa: E402


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    from tests.comet_tiny import build_checkpoint

    root = tmp_path_factory.mktemp("comet")
    return {name: build_checkpoint(str(root), name) for name in ("da", "xcomet")}


def crafted(good_dir, tmp_path, hparams=None, state=None, yaml_text=None):
    """A copy of ``good_dir`` with its stored hyper-parameters updated (``hparams``), its state
    dict edited (``state``: a function), or its hparams.yaml replaced (``yaml_text``)."""
    out = tmp_path / "crafted"
    shutil.copytree(good_dir, out)
    path = out / "checkpoints" / "model.ckpt"
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"].update(hparams or {})
    if state is not None:
        state(checkpoint["state_dict"])
    torch.save(checkpoint, path)
    if yaml_text is not None:
        (out / "hparams.yaml").write_text(yaml_text)
    return str(out)


def _drop(key):
    return lambda s: s.pop(key)


def _put(key, value):
    return lambda s: s.__setitem__(key, value)


HPARAMS = [
    ({"layer": "top"}, "hparams layer: 'top' is not mix or a layer number"),
    ({"layer": True}, "hparams layer: True is not mix or a layer number"),
    ({"layer_norm": "yes"}, "hparams layer_norm: 'yes' is not true or false"),
    ({"layer_transformation": 3}, "hparams layer_transformation: 3 is not softmax or sparsemax"),
    ({"pool": ["avg"]}, "hparams pool: ['avg'] is not avg, max, cls or default"),
    ({"activations": "Linear"}, "hparams activations: 'Linear' is not an activation COMET builds"),
    ({"activations": "Threshold"}, "hparams activations: 'Threshold' is not an activation COMET builds"),
    ({"activations": "NoSuchThing"}, "hparams activations: 'NoSuchThing' is not an activation"),
    ({"activations": 7}, "hparams activations: 7 is not an activation"),
    ({"final_activation": "Conv2d"}, "hparams final_activation: 'Conv2d' is not an activation"),
    ({"input_segments": "mt"}, "hparams input_segments: 'mt' is not a list of mt, src and ref"),
    ({"pretrained_model": 12}, "hparams pretrained_model: 12 is not a string"),
    (
        {"encoder_model": "ELECTRA"},
        "encoder_model 'ELECTRA': unbabel-comet 2.2.7 builds XLM-RoBERTa, XLM-RoBERTa-XL, BERT",
    ),
]

STATES = [
    (_drop("estimator.ff.3.bias"), "estimator layer 1 has no bias"),
    (
        lambda s: s.__setitem__("estimator.ff.0.weight", s["estimator.ff.0.weight"].T.contiguous()),
        "estimator layer 0 has weights (192, 16)",
    ),
    (
        lambda s: s.update({"estimator.ff.6.weight": torch.zeros(3, 8), "estimator.ff.6.bias": torch.zeros(3)}),
        "the estimator ends in 3 outputs, not one score",
    ),
    (_put("estimator.ff.6.bias", torch.zeros(2)), "estimator layer 2 has weights (1, 8) and bias (2,)"),
    (_put("layerwise_attention.gamma", torch.zeros(3)), "layerwise_attention.gamma has shape (3,), not one number"),
    (_put("layerwise_attention.scalar_parameters.1", torch.zeros(2, 2)), "scalar_parameters.1 has shape (2, 2)"),
    (_put("estimator.ff.0.bias", "not a tensor"), "state_dict entry 'estimator.ff.0.bias' is not a named tensor (str)"),
    (_put("estimator.ff.0.bias", [1.0, 2.0]), "is not a named tensor (list)"),
    (_drop("encoder.model.encoder.layer.0.attention.self.query.weight"), "the checkpoint lacks encoder weights"),
    (
        _put("encoder.model.embeddings.word_embeddings.weight", torch.zeros(5, 5)),
        "the encoder does not fit the checkpoint",
    ),
]


@pytest.mark.parametrize("hparams, message", HPARAMS)
def test_hyper_parameters_of_the_wrong_type_or_value_are_refused(good, tmp_path, hparams, message):
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        load_comet(crafted(good["da"], tmp_path, hparams=hparams))
    assert "\n" not in str(caught.value) and "crafted" in str(caught.value)


@pytest.mark.parametrize("state, message", STATES)
def test_tensors_missing_of_other_types_or_shapes_are_refused(good, tmp_path, state, message):
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        load_comet(crafted(good["da"], tmp_path, state=state))
    message = str(caught.value)  # naming the checkpoint, or the encoder it does not fit
    assert "\n" not in message and ("model.ckpt" in message or message.split(":")[0].endswith("encoder"))


def test_xcomet_s_tagger_shapes_are_checked(good, tmp_path):
    with pytest.raises(InputError, match=r"hidden2tag has shape \(4, 7\), not \(4, 32\)"):
        load_comet(crafted(good["xcomet"], tmp_path, state=_put("hidden2tag.weight", torch.zeros(4, 7))))


def test_an_encoder_of_another_kind_is_refused(good, tmp_path):
    from tests.tiny_models import build_bert

    bert = build_bert(str(tmp_path))
    with pytest.raises(InputError, match="the encoder is a 'bert' model, the checkpoint's encoder_model xlm-roberta"):
        load_comet(good["da"], encoder=bert)


def test_a_yaml_alias_bomb_is_refused_without_echoing_it(good, tmp_path, capsys):
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + k)}: &{chr(98 + k)} [*{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}, *{chr(97 + k)}]\n"
        for k in range(8)
    )
    bomb += "class_identifier: *i\n"
    directory = crafted(good["da"], tmp_path, yaml_text=bomb)
    (tmp_path / "h.txt").write_text("ein mann .\n")
    (tmp_path / "s.txt").write_text("a man .\n")
    status = main(
        ["eval", "--hyp", str(tmp_path / "h.txt"), "--ref", str(tmp_path / "h.txt")]
        + ["--metrics", f"comet:{directory},source={tmp_path / 's.txt'}"]
    )
    assert status == 1
    err = one_line_error(capsys, "hparams.yaml uses YAML aliases")
    assert len(err) < 500


def test_a_checkpoint_file_is_named_as_given(good, tmp_path):
    copy = tmp_path / "elsewhere" / "model.ckpt"
    copy.parent.mkdir()
    shutil.copy(os.path.join(good["da"], "checkpoints", "model.ckpt"), copy)
    with pytest.raises(InputError) as caught:
        load_comet(str(copy))
    message = str(caught.value)
    assert message.startswith(f"{copy}: comet: no hparams.yaml beside checkpoints/"), message
    assert os.path.join(str(tmp_path), "hparams.yaml") in message  # where it looked
    assert load_comet(os.path.join(good["da"], "checkpoints", "model.ckpt")).kind == "regression_metric"


@pytest.mark.parametrize("algorithm", ["exact", "aggregate", "pruned"])
def test_a_nan_weight_is_refused_by_mbr_naming_the_utility_and_segment(good, tmp_path, capsys, algorithm):
    """Issue 92, class 5: a COMET checkpoint with a NaN weight made every segment pick its first
    candidate, rc 0; every MBR algorithm now refuses a non-finite utility in one line."""

    def poison(state):
        state["estimator.ff.6.bias"][0] = float("nan")

    checkpoint = crafted(good["da"], tmp_path, state=poison)
    (tmp_path / "src.en").write_text("a man\na dog\n")
    lines = ["0 ||| ein mann ||| NMT= -1 ||| 0", "0 ||| ein hund ||| NMT= -2 ||| 0", "0 ||| mann ||| NMT= -3 ||| 0"]
    lines += ["1 ||| ein hund ||| NMT= -1 ||| 0", "1 ||| hund ||| NMT= -2 ||| 0", "1 ||| ein ||| NMT= -3 ||| 0"]
    (tmp_path / "c.nbest").write_text("\n".join(lines) + "\n")
    out = tmp_path / "picks"
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", f"comet:{checkpoint},source={tmp_path}/src.en"]
    assert main(argv + ["--algorithm", algorithm, "--out", str(out)]) == 1
    one_line_error(capsys, "utilities are not finite (NaN or infinite) in segment 0", "no selection is made")
    assert not out.exists()


@pytest.mark.parametrize("role", ["pad", "cls", "sep"])
def test_an_encoder_tokenizer_without_a_special_token_is_refused(good, tmp_path, capsys, role):
    """Issue 92, class 8: a null pad or cls token in the encoder's tokenizer_config.json was an
    int(None) traceback; it is one line naming the encoder directory and the token."""
    import json

    checkpoint = crafted(good["da"], tmp_path)
    encoder = tmp_path / "encoder"
    shutil.copytree(os.path.join(os.path.dirname(good["da"]), "encoder"), encoder)
    config = json.loads((encoder / "tokenizer_config.json").read_text())
    config[f"{role}_token"] = None
    (encoder / "tokenizer_config.json").write_text(json.dumps(config))
    (tmp_path / "src.en").write_text("a man\n")
    (tmp_path / "hyp.de").write_text("ein mann\n")
    spec = f"comet:{checkpoint},source={tmp_path}/src.en,encoder={encoder}"
    assert main(["eval", "--ref", str(tmp_path / "hyp.de"), "--hyp", str(tmp_path / "hyp.de"), "--metrics", spec]) == 1
    one_line_error(capsys, str(encoder), f"has no {role} token")


def test_an_estimator_key_out_of_comets_pattern_is_refused(good, tmp_path, capsys):
    checkpoint = crafted(good["da"], tmp_path, state=_put("estimator.ff.x.weight", torch.zeros(2)))
    with pytest.raises(
        InputError, match="an estimator weight that is not estimator.ff.N.weight or .bias: estimator.ff.x"
    ):
        load_comet(checkpoint)


def test_an_empty_sentencepiece_model_in_the_encoder_is_refused_not_replaced(good, tmp_path, capsys):
    """Issue 92, class 8: with tokenizer.json gone and an empty sentencepiece.bpe.model, COMET
    scored through some other tokenizer transformers built, silently; it is refused naming the file."""
    checkpoint = crafted(good["da"], tmp_path)
    encoder = tmp_path / "encoder"
    shutil.copytree(os.path.join(os.path.dirname(good["da"]), "encoder"), encoder)
    (encoder / "tokenizer.json").unlink()
    (encoder / "sentencepiece.bpe.model").write_bytes(b"")
    (tmp_path / "src.en").write_text("a man\n")
    (tmp_path / "hyp.de").write_text("ein mann\n")
    spec = f"comet:{checkpoint},source={tmp_path}/src.en,encoder={encoder}"
    assert main(["eval", "--ref", str(tmp_path / "hyp.de"), "--hyp", str(tmp_path / "hyp.de"), "--metrics", spec]) == 1
    one_line_error(capsys, str(encoder / "sentencepiece.bpe.model"), "empty or corrupt")


@pytest.mark.parametrize("verb", ["mbr", "eval"])
def test_comet_work_inside_a_verb_says_how_far_it_is(good, tmp_path, capsys, monkeypatch, verb):
    """Issue 93, item 3: rerank mbr --metric comet: printed nothing for minutes; the encoder's
    batches now show the progress line every verb shows (here every 0 s), the API none."""
    import rerank.progress

    monkeypatch.setattr(rerank.progress.LineProgress.__init__, "__defaults__", (None, None, "", "it", 0.0, None))
    (tmp_path / "src.en").write_text("a man\na dog\n")
    (tmp_path / "hyp.de").write_text("ein mann\nein hund\n")
    lines = [
        f"{s} ||| {h} ||| NMT= -{k} ||| 0"
        for s, hyps in enumerate([["ein mann", "mann"], ["ein hund", "hund"]])
        for k, h in enumerate(hyps)
    ]
    (tmp_path / "c.nbest").write_text("\n".join(lines) + "\n")
    spec = f"comet:{good['da']},source={tmp_path}/src.en"
    if verb == "mbr":
        argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", spec, "--out", str(tmp_path / "o")]
    else:
        argv = ["eval", "--ref", str(tmp_path / "hyp.de"), "--hyp", str(tmp_path / "hyp.de"), "--metrics", spec]
    assert main(argv) == 0
    assert "comet: encoder: " in capsys.readouterr().err
    from rerank.metrics import make_metric

    metric = make_metric(spec)
    metric.stats(["ein mann", "ein hund"], ["ein mann", "ein hund"])  # the API: quiet
    assert "comet: encoder" not in capsys.readouterr().err
