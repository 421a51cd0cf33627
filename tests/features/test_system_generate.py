"""A system whose lists came from ``rerank generate`` (a Hugging Face or CTranslate2 model,
no rerank training): pack-system follows that provenance, copies the model into the
system directory, and ``rerank translate`` replays generate → features add → apply on raw
text, equal to the step-by-step commands line for line, from wherever the directory moved."""

import json
import shutil

import pytest

from tests.conftest import needs

pytestmark = needs("hf")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.system import load_system  # noqa: E402
from rerank.nbest import write_lines  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from tests.tiny_models import build_marian, convert_ct2  # noqa: E402

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


def _run(*argv):
    assert main([*argv]) == 0, argv


@pytest.mark.parametrize("kind", ["hf", "ct2"])
def test_a_generated_system_packs_and_translates_as_the_step_by_step_commands(tmp_path, kind):
    (tmp_path / "hf").mkdir()
    marian = build_marian(str(tmp_path / "hf"))
    model = f"hf:{marian}" if kind == "hf" else f"ct2:{convert_ct2(marian, str(tmp_path / 'ct2'))}"
    write_lines(VAL, str(tmp_path / "val.en"))
    write_lines(VAL_REFS, str(tmp_path / "val.de"))
    write_lines(TEST, str(tmp_path / "test.en"))
    generate = ["generate", "--model", model, "--nbest", "3", "--max-length", "12", "--device", "cpu"]
    scorers = ["--scorer", "mbr:bleu,feature=uniform", "--scorer", "len:1.1"]
    for split in ("val", "test"):
        _run(
            *generate,
            "--input",
            str(tmp_path / f"{split}.en"),
            "--out-nbest",
            str(tmp_path / f"{split}.nbest"),
            "--out-1best",
            str(tmp_path / f"{split}.1best"),
        )
        _run(
            "features",
            "add",
            "--nbest",
            str(tmp_path / f"{split}.nbest"),
            "--source",
            str(tmp_path / f"{split}.en"),
            *scorers,
            "--out",
            str(tmp_path / f"{split}.full.nbest"),
        )
    _run(
        "tune",
        "--nbest",
        str(tmp_path / "val.full.nbest"),
        "--ref",
        str(tmp_path / "val.de"),
        "--tokenize",
        "none",
        "--out",
        str(tmp_path / "w.json"),
    )
    _run(
        "apply",
        "--nbest",
        str(tmp_path / "test.full.nbest"),
        "--weights",
        str(tmp_path / "w.json"),
        "--out",
        str(tmp_path / "test.reranked"),
    )
    system = tmp_path / "system"
    _run(
        "pack-system",
        "--nbest",
        str(tmp_path / "val.full.nbest"),
        "--weights",
        str(tmp_path / "w.json"),
        "--out",
        str(system),
    )
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["decoder"]["kind"] == "generate" and manifest["decoder"]["nbest"] == 3
    assert manifest["decoder"]["model"].startswith(f"{kind}:@SYSTEM@/generator/")
    assert any(name.startswith("generator/") for name in manifest["files"])  # the model travels with it
    moved = tmp_path / "elsewhere" / "system"
    shutil.copytree(system, moved)
    shutil.rmtree(tmp_path / "hf")  # the original model is gone: the system has its own copy
    shutil.rmtree(tmp_path / "ct2", ignore_errors=True)
    _run("translate", "--system", str(moved), "--input", str(tmp_path / "test.en"), "--out", str(tmp_path / "out.de"))
    assert read_lines(str(tmp_path / "out.de")) == read_lines(str(tmp_path / "test.reranked"))


def test_a_generated_systems_model_cannot_point_outside(tmp_path):
    from rerank.features.manifest import manifest_digest

    (tmp_path / "hf").mkdir()
    marian = build_marian(str(tmp_path / "hf"))
    write_lines(VAL, str(tmp_path / "val.en"))
    write_lines(VAL_REFS, str(tmp_path / "val.de"))
    _run(
        "generate",
        "--model",
        f"hf:{marian}",
        "--nbest",
        "2",
        "--max-length",
        "8",
        "--device",
        "cpu",
        "--input",
        str(tmp_path / "val.en"),
        "--out-nbest",
        str(tmp_path / "val.nbest"),
        "--out-1best",
        str(tmp_path / "val.1best"),
    )
    _run(
        "tune",
        "--nbest",
        str(tmp_path / "val.nbest"),
        "--ref",
        str(tmp_path / "val.de"),
        "--tokenize",
        "none",
        "--out",
        str(tmp_path / "w.json"),
    )
    system = tmp_path / "system"
    _run(
        "pack-system",
        "--nbest",
        str(tmp_path / "val.nbest"),
        "--weights",
        str(tmp_path / "w.json"),
        "--out",
        str(system),
    )
    assert load_system(str(system))["decoding"]["model"].startswith(f"hf:{system}/generator/")
    for model, message in (
        (f"hf:{marian}", "is a path outside the system directory"),
        ("hf:@SYSTEM@/../hf/marian", "points outside the system directory"),
        ("fairseq:@SYSTEM@/x.pt", "is not an hf: or ct2: spec"),
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
