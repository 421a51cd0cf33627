"""A system whose lists came from ``rerank generate`` (a Hugging Face or CTranslate2 model,
no rerank training): pack-system follows that provenance, copies the model into the
system directory, and ``rerank translate`` replays generate → features add → apply on raw
text, equal to the step-by-step commands line for line, from wherever the directory moved."""

import json
import os
import shutil

import pytest

from tests.conftest import needs

pytestmark = needs("hf")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.system import load_system  # noqa: E402
from rerank.nbest import write_lines  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from tests.tiny_models import build_llama, build_marian, convert_ct2  # noqa: E402

VAL = [
    "a man in a blue shirt is standing on a ladder .",
    "two dogs play in the snow .",
    "a woman rides a bike .",
    "a child is eating .",
]
VAL_REFS = [
    "ein mann steht auf einer leiter .",
    "zwei hunde spielen im schnee .",
    "eine frau fährt rad .",
    "ein kind isst .",
]
TEST = ["two men ride bikes .", "a dog is standing in the snow .", "a woman is eating ."]


def _run(directory, command: str) -> None:
    """One rerank command, written as on the command line with ``{d}`` for ``directory``."""
    argv = command.format(d=directory).split()
    assert main(argv) == 0, argv


def _pack(d, model: str, nbest: int, listed: str) -> None:
    """Generate val's list with ``model``, tune on ``listed`` (the list, with columns added or
    not) and pack the system into ``d/system``."""
    _run(
        d,
        f"generate --model {model} --nbest {nbest} --max-length 12 --device cpu --input {{d}}/val.en "
        "--out-nbest {d}/val.nbest --out-1best {d}/val.1best",
    )
    if listed != "val.nbest":
        _run(d, f"features add --nbest {{d}}/val.nbest --source {{d}}/val.en {SCORERS} --out {{d}}/{listed}")
    _run(d, f"tune --nbest {{d}}/{listed} --ref {{d}}/val.de --tokenize none --out {{d}}/w.json")
    _run(d, f"pack-system --nbest {{d}}/{listed} --weights {{d}}/w.json --out {{d}}/system")


SCORERS = "--scorer mbr:bleu,feature=uniform --scorer len:1.1"


def _corpus(d):
    (d / "hf").mkdir()
    write_lines(VAL, str(d / "val.en"))
    write_lines(VAL_REFS, str(d / "val.de"))
    write_lines(TEST, str(d / "test.en"))
    return build_marian(str(d / "hf"))


def _model(tmp_path, kind: str, marian: str) -> str:
    """The generator spec of ``kind``: the tiny Marian model, its CTranslate2 conversion, or a
    tiny random Llama prompted as a decoder-only translator (its template a file of its own)."""
    if kind == "hf":
        return f"hf:{marian}"
    if kind == "ct2":
        return f"ct2:{convert_ct2(marian, str(tmp_path / 'ct2'))}"
    (tmp_path / "prompt").mkdir()
    prompt = tmp_path / "prompt" / "template.txt"
    prompt.write_text("Translate from English to German.\nEnglish: {source}\nGerman:\n")
    return f"hf-lm:{build_llama(str(tmp_path / 'hf'))},prompt={prompt}"


@pytest.mark.parametrize("kind", ["hf", "ct2", "hf-lm"])
def test_a_generated_system_packs_and_translates_as_the_step_by_step_commands(tmp_path, kind):
    model = _model(tmp_path, kind, _corpus(tmp_path))
    _pack(tmp_path, model, 3, "val.full.nbest")
    # the test set step by step: generate, the same scorers, the tuned weights
    _run(
        tmp_path,
        f"generate --model {model} --nbest 3 --max-length 12 --device cpu --input {{d}}/test.en "
        "--out-nbest {d}/test.nbest --out-1best {d}/test.1best",
    )
    _run(
        tmp_path, f"features add --nbest {{d}}/test.nbest --source {{d}}/test.en {SCORERS} --out {{d}}/test.full.nbest"
    )
    _run(tmp_path, "apply --nbest {d}/test.full.nbest --weights {d}/w.json --out {d}/test.reranked")
    system = tmp_path / "system"
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["decoder"]["kind"] == "generate" and manifest["decoder"]["nbest"] == 3
    assert manifest["decoder"]["model"].startswith(f"{kind}:@SYSTEM@/generator/")
    assert any(name.startswith("generator/") for name in manifest["files"])  # the model travels with it
    if kind == "hf-lm":  # and so does the prompt template
        assert ",prompt=@SYSTEM@/generator/" in manifest["decoder"]["model"]
    moved = tmp_path / "elsewhere" / "system"
    shutil.copytree(system, moved)
    shutil.rmtree(tmp_path / "hf")  # the original model is gone: the system has its own copy
    shutil.rmtree(tmp_path / "ct2", ignore_errors=True)
    shutil.rmtree(tmp_path / "prompt", ignore_errors=True)  # hf-lm's template travels too
    _run(tmp_path, "translate --system {d}/elsewhere/system --input {d}/test.en --out {d}/out.de")
    assert read_lines(str(tmp_path / "out.de")) == read_lines(str(tmp_path / "test.reranked"))


def test_translate_shards_merge_into_the_unsharded_outputs(tmp_path, capsys):
    """translate --num-shards 2 over 3 sentences in blocks of one (uneven: 2 + 1), shards merged
    in any order give the unsharded translation and scored list byte for byte; a missing,
    duplicate or foreign shard, and a shard to standard output, are one line each."""
    marian = _corpus(tmp_path)
    _pack(tmp_path, f"hf:{marian}", 3, "val.full.nbest")
    translate = "translate --system {d}/system --device cpu --input {d}/test.en --block-sentences 1"
    _run(tmp_path, f"{translate} --out {{d}}/all.de --nbest-out {{d}}/all.nbest")
    for k in (1, 0):
        _run(tmp_path, f"{translate} --num-shards 2 --shard-id {k} --out {{d}}/s{k}.de --nbest-out {{d}}/s{k}.nbest")
    assert len(read_lines(str(tmp_path / "s0.de"))) == 2 and len(read_lines(str(tmp_path / "s1.de"))) == 1
    _run(tmp_path, "merge {d}/s1.de {d}/s0.de --out {d}/merged.de")
    _run(tmp_path, "merge {d}/s1.nbest {d}/s0.nbest --out {d}/merged.nbest")
    assert (tmp_path / "merged.de").read_bytes() == (tmp_path / "all.de").read_bytes()
    assert (tmp_path / "merged.nbest").read_bytes() == (tmp_path / "all.nbest").read_bytes()
    write_lines(VAL, str(tmp_path / "other.en"))  # 4 sentences: another input
    _run(
        tmp_path,
        "translate --system {d}/system --device cpu --input {d}/other.en --block-sentences 1 --num-shards 2 --shard-id 1 "
        "--out {d}/o1.de",
    )
    capsys.readouterr()
    for parts, message in (
        ("s0.de", "shard 1 of 2 is missing"),
        ("s0.de s0.de", "shard 0 is given twice"),
        ("s0.de o1.de", "a shard of another run (another input than"),
        ("s0.de s1.nbest", "a shard of another run (another"),
    ):
        argv = ["merge", *(str(tmp_path / p) for p in parts.split()), "--out", str(tmp_path / "x.de")]
        assert main(argv) == 1, parts
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    argv = [*translate.format(d=tmp_path).split(), "--num-shards", "2", "--shard-id", "0", "--out", "-"]
    assert main(argv) == 1
    assert "a shard's output must be a file" in capsys.readouterr().err


def test_a_system_packs_from_lists_joined_by_merge(tmp_path):
    """Lists generated and scored in shards (generate and features add --num-shards 2, each
    joined by rerank merge, as the main job's SHARDS does) pack into the system of the
    unsharded lists: pack-system follows a merged list's provenance through its shards."""
    marian = _corpus(tmp_path)
    model = f"hf:{marian}"
    generate = f"generate --model {model} --nbest 3 --max-length 12 --device cpu --input {{d}}/val.en"
    for k in range(2):
        shard = f"--num-shards 2 --shard-id {k}"
        _run(tmp_path, f"{generate} {shard} --out-nbest {{d}}/g{k}.nbest --out-1best {{d}}/g{k}.1best")
    _run(tmp_path, "merge {d}/g1.nbest {d}/g0.nbest --out {d}/val.nbest")
    for k in range(2):
        shard = f"--num-shards 2 --shard-id {k}"
        _run(
            tmp_path,
            f"features add --nbest {{d}}/val.nbest --source {{d}}/val.en {SCORERS} {shard} --out {{d}}/f{k}.nbest",
        )
    _run(tmp_path, "merge {d}/f0.nbest {d}/f1.nbest --out {d}/val.full.nbest")
    _run(tmp_path, "tune --nbest {d}/val.full.nbest --ref {d}/val.de --tokenize none --out {d}/w.json")
    _run(tmp_path, "pack-system --nbest {d}/val.full.nbest --weights {d}/w.json --out {d}/system")
    manifest = json.loads((tmp_path / "system" / "system.json").read_text())
    assert manifest["decoder"]["kind"] == "generate" and manifest["decoder"]["nbest"] == 3
    assert manifest["steps"] == [["mbr:bleu,feature=uniform", "len:1.1"]]
    _run(tmp_path, "translate --system {d}/system --device cpu --input {d}/test.en --out {d}/out.de")
    assert len(read_lines(str(tmp_path / "out.de"))) == len(TEST)


def test_neural_feature_shards_merge_into_the_unsharded_list_byte_for_byte(tmp_path):
    """features add --num-shards with a neural scorer (hf: forced decoding, which batches a
    call's hypotheses together): in blocks of one segment (--block-hypotheses 3 on 3-best
    lists), 3 shards of the 4 segments (blocks 0+3, 1, 2) merged are the unsharded list byte
    for byte, every block scored in the call one process makes for it (issue 64)."""
    marian = _corpus(tmp_path)
    _run(
        tmp_path,
        f"generate --model hf:{marian} --nbest 3 --max-length 12 --device cpu --input {{d}}/val.en "
        "--out-nbest {d}/val.nbest --out-1best {d}/val.1best",
    )
    add = f"features add --nbest {{d}}/val.nbest --source {{d}}/val.en --scorer hf:{marian},name=Forced,batch=2 --device cpu"
    add += " --block-hypotheses 3"
    _run(tmp_path, f"{add} --out {{d}}/full.nbest")
    for k in range(3):
        _run(tmp_path, f"{add} --num-shards 3 --shard-id {k} --out {{d}}/f{k}.nbest")
    members = [json.loads((tmp_path / f"f{k}.nbest.json").read_text())["shard"]["members"] for k in range(3)]
    assert members == [[0, 3], [1], [2]]
    _run(tmp_path, "merge {d}/f2.nbest {d}/f0.nbest {d}/f1.nbest --out {d}/merged.nbest")
    assert (tmp_path / "merged.nbest").read_bytes() == (tmp_path / "full.nbest").read_bytes()


def test_a_generated_systems_model_cannot_point_outside(tmp_path):
    from rerank.features.manifest import manifest_digest

    marian = _corpus(tmp_path)
    _pack(tmp_path, f"hf:{marian}", 2, "val.nbest")
    system = tmp_path / "system"
    assert load_system(str(system))["decoding"]["model"].startswith(f"hf:{system}/generator/")
    for model, message in (
        (f"hf:{marian}", "is a path outside the system directory"),
        ("hf:@SYSTEM@/../hf/marian", "points outside the system directory"),
        ("fairseq:@SYSTEM@/x.pt", "is not a spec of hf, ct2, hf-lm"),
    ):
        manifest = json.loads((system / "system.json").read_text())
        manifest["decoder"]["model"] = model
        manifest["digest"] = manifest_digest(manifest)
        (tmp_path / "crafted").mkdir(exist_ok=True)
        shutil.rmtree(tmp_path / "crafted")
        shutil.copytree(system, tmp_path / "crafted")
        (tmp_path / "crafted" / "system.json").write_text(json.dumps(manifest))
        with pytest.raises(InputError, match=message):
            load_system(str(tmp_path / "crafted"))


def _edit_signature(path, **changes) -> None:
    """A list's signature with ``changes`` made to its record (re-signed where it is signed)."""
    from rerank.signature import write_signed

    record = json.loads(open(path).read())
    record.update(changes)
    record.pop("digest", None)
    write_signed(path, record) if "digest" in json.loads(open(path).read()) else open(path, "w").write(
        json.dumps(record)
    )


def test_a_packed_system_carries_only_what_its_readers_read(tmp_path, capsys):
    """Issue 92, class 1: whatever a list's signature names is checked by its reader's rule
    before pack-system copies it (a template is one UTF-8 file holding {source}, a model a
    directory with its config.json), and a template changed after generation is refused."""
    model = _model(tmp_path, "hf-lm", _corpus(tmp_path))
    _pack(tmp_path, model, 2, "val.nbest")
    capsys.readouterr()
    record = json.loads((tmp_path / "val.nbest.json").read_text())
    prompt = str(tmp_path / "prompt" / "template.txt")
    assert list(record["model_files"]) == ["prompt"]
    secrets = tmp_path / "keys"
    secrets.mkdir()
    (secrets / "id_rsa").write_text("secret")
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "notes.txt").write_text("x")
    llama = model.split(":", 1)[1].split(",")[0]
    for spec, needle in (
        (model.replace(prompt, str(secrets)), "its prompt must be one file"),
        (model.replace(prompt, str(tmp_path / "val.de")), "holds no {source}"),
        (model.replace(llama, str(bare)), "a directory without config.json"),
        (model.replace(llama, str(tmp_path / "val.de")), "its path must be a directory"),
    ):
        shutil.copy(tmp_path / "val.nbest.json", tmp_path / "saved.json")
        _edit_signature(tmp_path / "val.nbest.json", model=spec, model_files={})
        shutil.rmtree(tmp_path / "system2", ignore_errors=True)
        argv = f"pack-system --nbest {tmp_path}/val.nbest --weights {tmp_path}/w.json --out {tmp_path}/system2"
        assert main(argv.split()) == 1, spec
        err = capsys.readouterr().err
        assert needle in err and err.strip().count("\n") == 0, err
        assert not (tmp_path / "system2").exists()
        shutil.copy(tmp_path / "saved.json", tmp_path / "val.nbest.json")
    with open(prompt, "a") as handle:  # the template edited after the list was generated and tuned
        handle.write("Answer:\n")
    argv = f"pack-system --nbest {tmp_path}/val.nbest --weights {tmp_path}/w.json --out {tmp_path}/system3"
    assert main(argv.split()) == 1
    assert "generator's prompt changed after the list was generated" in capsys.readouterr().err
    assert not (tmp_path / "system3").exists()


def test_a_system_packed_into_its_generators_folder_is_refused(tmp_path, capsys):
    """Issue 92, class 4: the output inside a directory the system copies (no copy of itself)."""
    marian = _corpus(tmp_path)
    _run(
        tmp_path,
        f"generate --model hf:{marian} --nbest 2 --max-length 12 --device cpu --input {{d}}/val.en "
        "--out-nbest {d}/val.nbest --out-1best {d}/val.1best",
    )
    _run(tmp_path, "tune --nbest {d}/val.nbest --ref {d}/val.de --tokenize none --out {d}/w.json")
    capsys.readouterr()
    before = sorted(p.name for p in (tmp_path / "hf").rglob("*"))
    argv = f"pack-system --nbest {tmp_path}/val.nbest --weights {tmp_path}/w.json --out {marian}/system"
    assert main(argv.split()) == 1
    err = capsys.readouterr().err
    assert "the output is being written inside this directory, which it copies" in err and marian in err, err
    assert sorted(p.name for p in (tmp_path / "hf").rglob("*")) == before


def test_a_system_packs_from_another_directory_than_its_lists_were_made_in(tmp_path, monkeypatch):
    """Issue 92, class 11: signatures recorded relative inputs and specs (``len:src=…``) as given,
    so pack-system run elsewhere could not find them; every signature records its working
    directory, against which relative paths are read."""
    marian = _corpus(tmp_path)
    (tmp_path / "train.en").write_text("a man walks .\ntwo dogs run .\n")
    (tmp_path / "train.de").write_text("ein mann geht .\nzwei hunde rennen .\n")
    monkeypatch.chdir(tmp_path)
    model = f"hf:{os.path.relpath(marian, tmp_path)}"
    assert (
        main(
            f"generate --model {model} --nbest 2 --max-length 12 --device cpu --input val.en "
            "--out-nbest val.nbest --out-1best val.1best".split()
        )
        == 0
    )
    assert (
        main(
            "features add --nbest val.nbest --source val.en --scorer len:src=train.en,tgt=train.de "
            "--out val.full.nbest".split()
        )
        == 0
    )
    assert main("tune --nbest val.full.nbest --ref val.de --tokenize none --out w.json".split()) == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    argv = ["pack-system", "--nbest", str(tmp_path / "val.full.nbest"), "--weights", str(tmp_path / "w.json")]
    assert main(argv + ["--out", "system"]) == 0
    manifest = json.loads((elsewhere / "system" / "system.json").read_text())
    assert manifest["decoder"]["model"].startswith("hf:@SYSTEM@/generator/")
    assert any("len" in spec and "@SYSTEM@" in spec for step in manifest["steps"] for spec in step)
