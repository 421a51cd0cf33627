"""The randomised equality test of issue 82: configurations drawn over unbabel-comet 2.2.7's
option space (class, encoder — XLM-R, XLM-R XL, BERT, MiniLM, RemBERT —, layer or layer mix,
pooling, activations, estimator sizes, input segments and their order, word-level training),
built with unbabel-comet's own classes and scored by its ``predict`` in the peer venv on 100
Multi30k segments and the edge cases of tests/comet_random.py (empty, blank, special-token
strings, sentences over the usable length, other scripts, emoji, duplicates):

    .venv/bin/python scripts/comet_peer.py --random 60 --peer-python .venv-comet/bin/python

Here every checkpoint is rebuilt from the record (tests/data/comet_random.json: its
hparams.yaml, stored hyper-parameters, state-dict shapes and seed; the weights' digest must be
the peer's) and scored by rerank in each role — ``comet:`` statistics (eval, signif) at batch
64 and at batch 3 in reverse order, tuning rows of a shuffled segment order, ``cometkiwi:``
statistics and the ``cometkiwi:`` feature, MBR's pair utilities — each within 1e-5 of comet's,
and refused (one line) exactly where comet fails."""

import json
import os

import pytest

from tests.conftest import ROOT, needs

pytestmark = needs("comet")

from rerank.errors import InputError  # noqa: E402
from rerank.metrics.comet_kinds import load_comet  # noqa: E402

RECORD = json.loads(open(os.path.join(ROOT, "tests", "data", "comet_random.json"), encoding="utf-8").read())


def test_the_record_covers_the_option_space():
    configs = [entry["config"] for entry in RECORD["configs"].values()]
    assert len(configs) >= 50 and RECORD["peer"] == "unbabel-comet 2.2.7"
    assert {c["kind"] for c in configs} == {
        "regression_metric",
        "referenceless_regression_metric",
        "unified_metric",
        "xcomet_metric",
    }
    assert {c["encoder_model"] for c in configs} == {"XLM-RoBERTa", "XLM-RoBERTa-XL", "BERT", "MiniLM", "RemBERT"}
    layers = [c["hparams"].get("layer", c["hparams"].get("sent_layer")) for c in configs]
    assert 0 in layers and "mix" in layers and any(isinstance(x, int) and x > 0 for x in layers)
    assert {c["hparams"]["pool"] for c in configs if "pool" in c["hparams"]} == {"avg", "max", "cls", "default"}
    segments = {tuple(c["hparams"]["input_segments"]) for c in configs if "input_segments" in c["hparams"]}
    assert any("src" not in s for s in segments) and any(len(s) == 3 for s in segments)
    assert any(s[0] != "mt" for s in segments)  # an order other than mt first
    assert any(c["hparams"].get("layer_norm") for c in configs)
    assert any(c["hparams"].get("layer_transformation") == "sparsemax" and max(c["scalars"]) == 2.0 for c in configs)
    # the texts hold the edge cases: empty, a literal <pad>, a sentence longer than 64 subwords
    hyp = RECORD["texts"]["hyp"]
    assert "" in hyp and any("<pad>" in h for h in hyp) and max(len(h.split()) for h in hyp) > 64


def test_every_drawn_checkpoint_scores_as_unbabel_comet_in_every_role(tmp_path):
    from tests.comet_random import replay

    found = replay(RECORD, str(tmp_path))
    assert set(found) == {name for name, entry in RECORD["configs"].items() if "error" not in entry}
    mismatches = [
        f"{name} {role}: {value}"
        for name, roles in found.items()
        for role, value in roles.items()
        if isinstance(value, str) and value.startswith("MISMATCH")
    ]
    assert not mismatches, mismatches
    worst = {
        f"{name} {role}": value
        for name, roles in found.items()
        for role, value in roles.items()
        if isinstance(value, float) and not value < 1e-5
    }
    assert not worst, worst
    scored = sum(isinstance(value, float) for roles in found.values() for value in roles.values())
    assert scored >= 100  # most roles are scored, not refused
    # the scores are not one constant: each role tells checkpoints and sentences apart
    spread = [
        max(r["scores"]) - min(r["scores"])
        for e in RECORD["configs"].values()
        for r in e.get("roles", {}).values()
        if "scores" in r
    ]
    assert sorted(spread)[len(spread) // 2] > 1e-3


def test_a_bert_checkpoint_pooled_by_bert_pooler_is_one_line(tmp_path):
    """unbabel-comet builds BERT without its pooler, so ``pool: default`` fails there: refused here."""
    from tests.comet_random import build_encoders, rebuild

    name, entry = next(
        (n, e) for n, e in RECORD["configs"].items() if "error" not in e and e["config"]["kind"] == "regression_metric"
    )
    encoders = build_encoders(str(tmp_path / "encoders"))
    entry = json.loads(json.dumps(entry))
    entry["hparams_yaml"] = entry["hparams_yaml"].replace(
        f"encoder_model: {entry['config']['encoder_model']}", "encoder_model: BERT"
    )
    entry["hyper_parameters"].update(encoder_model="BERT", pool="default")
    directory = rebuild(entry, str(tmp_path / name), encoders["BERT"])
    with pytest.raises(InputError, match="pool: default with a BERT encoder reads BERT's pooler"):
        load_comet(directory)


def test_a_sentencepiece_only_encoder_without_protobuf_is_one_line(tmp_path, monkeypatch):
    """RemBERT ships a SentencePiece model and no tokenizer.json: converting it needs protobuf
    (in the ``[comet]`` extra); without it, one line that says so (transformers blamed tiktoken)."""
    import subprocess
    import sys

    from tests.comet_random import build_encoders, rebuild

    name, entry = next(
        (n, e) for n, e in RECORD["configs"].items() if e["config"]["encoder_model"] == "RemBERT" and "error" not in e
    )
    encoders = build_encoders(str(tmp_path / "encoders"))
    directory = rebuild(entry, str(tmp_path / name), encoders["RemBERT"])
    assert sorted(os.listdir(encoders["RemBERT"])) == [
        "config.json",
        "model.safetensors",
        "sentencepiece.model",
        "tokenizer_config.json",
    ]
    load_comet(directory)  # converted, with protobuf
    # without it (a fresh interpreter, protobuf made unimportable): one line that names it
    probe = (
        "import sys; sys.modules['google.protobuf'] = None\n"
        "from rerank.errors import InputError\n"
        "from rerank.metrics.comet_kinds import load_comet\n"
        "try:\n    load_comet(sys.argv[1])\nexcept InputError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe, directory], capture_output=True, text=True, cwd=ROOT)
    assert "a SentencePiece model without tokenizer.json: converting it needs protobuf" in done.stdout, done.stderr[
        -800:
    ]
    assert "Traceback" not in done.stderr
