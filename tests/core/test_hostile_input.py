"""Reliability round 4 (issue 81) on the core: the output guard counts what a verb reads and
writes beyond its file options (class 2), a system directory's confinement reads the specs
nested in its steps (class 3), decoder settings have bounds (class 6), JSON side files that
Python's parser cannot hold are one line (class 7), a manifest's field types and the
generator's checksums are enforced (class 10), and shards merge through rerank's text reader
with their optional fields optional (class 11).  Each case: one line naming the file, exit 1,
nothing lost."""

import json
import os
import re

import pytest

from rerank._version import __version__
from rerank.cli import main
from rerank.errors import InputError
from rerank.features.manifest import MANIFEST, load_system, manifest_digest
from tests.conftest import one_line_error, write_split


def _apply(tmp_path, weights):
    """``rerank apply`` of ``tmp_path/test.nbest`` with ``weights``, before its outputs."""
    return ["apply", "--nbest", str(tmp_path / "test.nbest"), "--weights", str(weights)]


def _weights(path, columns=("NMT",)):
    path.write_text(json.dumps({"weights": {c: 1.0 for c in columns}}))
    return str(path)


# --- class 2: the files a verb reads beyond its options, and the side files it writes ---


def test_a_spec_s_training_files_are_inputs_the_output_cannot_replace(tmp_path, capsys):
    write_split(tmp_path, "val", 6, seed=1)
    (tmp_path / "train.en").write_text("a b c\nd e\n")
    (tmp_path / "train.de").write_text("a b\nd e f\n")
    before = (tmp_path / "train.de").read_bytes()
    (tmp_path / "val.en").write_text("".join(f"s{k}\n" for k in range(6)))
    spec = f"len:src={tmp_path / 'train.en'},tgt={tmp_path / 'train.de'}"
    add = ["features", "add", "--nbest", str(tmp_path / "val.nbest"), "--source", str(tmp_path / "val.en")]
    assert main(add + ["--scorer", spec, "--out", str(tmp_path / "train.de")]) == 1
    one_line_error(capsys, "is the same file as input (a file a spec names)", "train.de")
    assert (tmp_path / "train.de").read_bytes() == before
    assert main(add + ["--scorer", spec, "--out", str(tmp_path / "ok.nbest")]) == 0
    assert (tmp_path / "ok.nbest").exists()


def test_the_model_files_of_metric_specs_nested_or_not_are_inputs_too(tmp_path, capsys):
    write_split(tmp_path, "val", 6, seed=1)
    checkpoint = tmp_path / "comet-da"
    (checkpoint / "checkpoints").mkdir(parents=True)
    (checkpoint / "hparams.yaml").write_text("class_identifier: regression_metric\n")
    (checkpoint / "checkpoints" / "model.ckpt").write_bytes(b"weights")
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text("{}")
    tune = ["tune", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de")]
    cases = [
        (tune + ["--metric", f"comet:{checkpoint}"], checkpoint / "checkpoints" / "model.ckpt"),
        (tune + ["--metric", f"0.5*bleu+0.5*comet:model={checkpoint}"], checkpoint / "checkpoints" / "model.ckpt"),
        (tune + ["--metric", f"bertscore:{tmp_path / 'bert'}"], tmp_path / "bert" / "config.json"),
        (
            ["features", "add", "--nbest", str(tmp_path / "val.nbest"), "--scorer", f"mbr:comet:{checkpoint}"],
            checkpoint / "checkpoints" / "model.ckpt",
        ),
    ]
    for args, target in cases:
        before = target.read_bytes()
        assert main(args + ["--out", str(target)]) == 1
        one_line_error(capsys, "is the same file as input (a file a spec names)", str(target))
        assert target.read_bytes() == before


def test_a_shard_s_record_cannot_replace_the_weights_it_reads(tmp_path, capsys):
    write_split(tmp_path, "test", 6, seed=2)
    weights = _weights(tmp_path / "w.json")
    before = (tmp_path / "w.json").read_bytes()
    args = [
        *_apply(tmp_path, weights),
        "--num-shards",
        "2",
        "--shard-id",
        "0",
    ]
    assert main(args + ["--out", str(tmp_path / "w")]) == 1
    one_line_error(capsys, "--out (its shard record) is the same file as input --weights", "w.json")
    assert (tmp_path / "w.json").read_bytes() == before and not (tmp_path / "w").exists()
    assert main(args + ["--out", str(tmp_path / "s0.txt")]) == 0  # elsewhere it is written, with its record
    assert json.loads((tmp_path / "s0.txt.json").read_text())["shard"]["id"] == 0


def test_translate_cannot_write_into_its_system(tmp_path, capsys):
    system = tmp_path / "system"
    system.mkdir()
    weights = _weights(system / "weights.json")
    (system / MANIFEST).write_text("{}")
    (tmp_path / "in.en").write_text("a man .\n")
    before = (system / "weights.json").read_bytes()
    for target in (weights, str(system / MANIFEST)):
        assert main(["translate", "--system", str(system), "--input", str(tmp_path / "in.en"), "--out", target]) == 1
        one_line_error(capsys, "is the same file as input --system (its files)")
    assert (system / "weights.json").read_bytes() == before


# --- classes 3, 6, 10: a system directory someone else packed ---


def fake_system(root, edit=None, steps=None):
    """A system directory of a ``rerank generate`` decoder (an hf: model directory), written by
    hand: the generator's files, weights and the manifest with its digest (``edit`` changes the
    manifest before it is signed, as a crafter can)."""
    from rerank.textio import file_digest

    system = root / "system"
    (system / "generator").mkdir(parents=True, exist_ok=True)
    (system / "generator" / "config.json").write_text("{}")
    (system / "generator" / "model.safetensors").write_text("weights")
    _weights(system / "weights.json")
    files = {
        os.path.relpath(os.path.join(folder, name), system): file_digest(os.path.join(folder, name))
        for folder, _, names in os.walk(system)
        for name in names
        if name != MANIFEST
    }
    manifest = {
        "rerank": __version__,
        "decoder": {"kind": "generate", "model": "hf:@SYSTEM@/generator", "nbest": 4, "beam": 4, "max_length": 64},
        "steps": steps if steps is not None else [["mbr:bleu"]],
        "weights": "weights.json",
        "files": files,
    }
    if edit is not None:
        edit(manifest)
    manifest["digest"] = manifest_digest(manifest)
    (system / MANIFEST).write_text(json.dumps(manifest))
    return str(system)


def test_the_fake_system_itself_loads(tmp_path):
    manifest = load_system(fake_system(tmp_path))
    assert manifest["decoding"]["nbest"] == 4 and manifest["decoding"]["model"].endswith("/system/generator")


@pytest.mark.parametrize(
    "step, message",
    [
        ("mbr:comet:model=/etc", "scorer comet's model /etc is a path outside the system directory"),
        ("mbr:comet:model=../elsewhere", "scorer comet's model ../elsewhere is a path outside"),
        ("mbr:comet:model=@SYSTEM@/../outside", "scorer comet's model ../outside points outside"),
        ("len:src=/etc/hosts,tgt=@SYSTEM@/weights.json", "scorer len's src /etc/hosts is a path outside"),
        ("hf:@SYSTEM@-evil", "@SYSTEM@ stands for the system directory only as @SYSTEM@ or @SYSTEM@/PATH"),
        ("len:src=x@SYSTEM@/a,tgt=@SYSTEM@/b", "@SYSTEM@ stands for the system directory only"),
    ],
)
def test_nested_and_sibling_paths_of_a_step_are_confined(tmp_path, step, message):
    (tmp_path / "system-evil").mkdir()
    system = fake_system(tmp_path, steps=[[step]])
    with pytest.raises(InputError, match=re.escape(message)):
        load_system(system)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda m: m["decoder"].update(nbest=10**9), "nbest=1000000000 is not a positive integer up to 4096"),
        (lambda m: m["decoder"].update(beam=10**9), "beam=1000000000 is not a positive integer up to 4096"),
        (lambda m: m["decoder"].update(max_length=10**9), "max_length=1000000000 is not a positive integer"),
        (lambda m: m.update(weights=["weights.json"]), "the weights ['weights.json'] are not among the checksummed"),
        (lambda m: m.update(files=[1, 2]), "not a system manifest"),
        (lambda m: m["files"].update({"x": 5}), "the manifest's files are not {name: checksum} strings"),
        (
            lambda m: m["files"].pop("generator/model.safetensors"),
            "the system's file generator/model.safetensors is read but not checksummed",
        ),
    ],
)
def test_decoder_bounds_field_types_and_generator_checksums_are_enforced(tmp_path, edit, message):
    with pytest.raises(InputError, match=re.escape(message)):
        load_system(fake_system(tmp_path, edit))


def test_a_fairseq_decoder_s_settings_have_bounds(tmp_path):
    from rerank.features.manifest import _decoder_config

    for key, value in (
        ("nbest", 10**9),
        ("beam", 10**9),
        ("batch_size", 10**7),
        ("max_len_b", 10**9),
        ("max_len_a", 1e9),
    ):
        with pytest.raises(InputError, match=f"the decoder setting {key}="):
            _decoder_config({"decoder": {"config": {key: value}}}, "system.json")
    assert _decoder_config({"decoder": {"config": {"nbest": 100, "beam": 100}}}, "system.json").nbest == 100


# --- class 7: JSON that Python's parser cannot hold ---


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        ('{"weights": {"NMT": ' + "9" * 5000 + "}}", "not a JSON rerank reads"),
    ],
)
def test_json_too_deep_or_too_long_a_number_is_one_line(tmp_path, capsys, text, message):
    write_split(tmp_path, "test", 4, seed=3)
    (tmp_path / "w.json").write_text(text)
    _weights(tmp_path / "v.json")
    for weights, bad in (("w.json", "w.json"), ("v.json", "test.nbest.json")):
        if bad == "test.nbest.json":
            (tmp_path / bad).write_text(text)  # a list's signature, read by every verb
        apply = ["apply", "--nbest", str(tmp_path / "test.nbest"), "--weights", str(tmp_path / weights)]
        assert main(apply + ["--out", str(tmp_path / "o")]) == 1
        one_line_error(capsys, message, bad)
    assert not (tmp_path / "o").exists()


# --- class 11: shards merged through rerank's reader ---


def _text_shards(tmp_path, capsys):
    write_split(tmp_path, "test", 6, seed=4)
    weights = _weights(tmp_path / "w.json")
    for k in range(2):
        args = [
            *_apply(tmp_path, weights),
            "--out",
            str(tmp_path / f"s{k}"),
        ]
        assert main(args + ["--num-shards", "2", "--shard-id", str(k)]) == 0
    assert main([*_apply(tmp_path, weights), "--out", str(tmp_path / "full")]) == 0
    capsys.readouterr()
    return [str(tmp_path / "s0"), str(tmp_path / "s1")]


def test_a_text_shard_with_a_byte_that_is_not_utf8_is_one_line(tmp_path, capsys):
    shards = _text_shards(tmp_path, capsys)
    with open(shards[1], "ab") as handle:
        handle.write(b"\xff\n")
    assert main(["merge", *shards, "--out", str(tmp_path / "m")]) == 1
    one_line_error(capsys, "not UTF-8 text", "s1:")
    assert not (tmp_path / "m").exists()


def test_a_shard_record_without_its_optional_segment_count_merges(tmp_path, capsys):
    shards = _text_shards(tmp_path, capsys)
    for path in shards:
        record = json.loads(open(path + ".json").read())
        del record["shard"]["segments"]
        with open(path + ".json", "w") as handle:
            json.dump(record, handle)
    assert main(["merge", *shards, "--out", str(tmp_path / "m")]) == 0
    assert (tmp_path / "m").read_text() == (tmp_path / "full").read_text()


def test_only_settings_that_name_files_count_as_inputs(tmp_path, capsys, monkeypatch):
    """BLEU's ``tokenize=none`` is no path, even where a directory ``none`` exists: replacing a
    file in it is no overwrite of an input (the settings that name files are declared)."""
    write_split(tmp_path, "val", 6, seed=1)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "w.json").write_text("{}")
    args = ["tune", "--nbest", "val.nbest", "--ref", "val.de", "--metric", "bleu:tokenize=none", "--out", "none/w.json"]
    assert main(args) == 0, capsys.readouterr().err
    assert "weights" in json.loads((tmp_path / "none" / "w.json").read_text())
