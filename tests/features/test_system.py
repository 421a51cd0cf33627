"""A trained system in one directory and one command (rerank pack-system, rerank translate)
on a tiny fairseq system built here: the translation equals the step-by-step commands', the
directory moves, and a system that is incomplete, changed or from another release is refused
in one line."""

import gzip
import json
import os
import re
import shutil

import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.add import ScoringInputs, add_features  # noqa: E402
from rerank.features.provenance import Relocation, relocate_spec, trace  # noqa: E402
from rerank.features.system import detokenize, load_system, manifest_digest, pack_system, translate  # noqa: E402
from rerank.nmt.generate import GenerateConfig, generate_nbest, generate_nbest_from_text  # noqa: E402
from rerank.reranking import apply_file  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from rerank.tuning.files import TuningSetup, tune_file  # noqa: E402
from tests.nmt.test_nmt import _write_corpus  # noqa: E402


def tiny_tuned_system(root, train_config, config: GenerateConfig, bpe_merges: int = 40):
    """A tiny fairseq system under ``root``: the Multi30k-shaped corpus, a model trained with
    ``train_config``, its val n-best list (``config``) with mbr, len and ibm1 columns, and the test
    sources as raw text.  Returns ({root, bin, ckpt, specs, config, raw, data}, the record of
    weights tuned on that list)."""
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.train import train

    _write_corpus(str(root / "m30k"))
    data = root / "data"
    bin_dir = prepare(str(root / "m30k"), str(data), PrepareConfig(bpe_merges=bpe_merges), workers=1)
    ckpt = train(bin_dir, str(root / "model"), train_config)
    generate_nbest(bin_dir, ckpt, "valid", str(root / "val.nbest"), str(root / "val.1best"), config)
    specs = ["mbr:bleu", f"len:{data}", f"ibm1:{data}"]
    add_features(
        str(root / "val.nbest"), specs, str(root / "val.full.nbest"), ScoringInputs(source=str(data / "tok" / "val.en"))
    )
    record, _ = tune_file(str(root / "val.full.nbest"), str(data / "tok" / "val.de"), TuningSetup(tokenize="none"))
    raw = root / "test.en"
    with gzip.open(root / "m30k" / "task1" / "raw" / "test_2016_flickr.en.gz", "rt") as handle:
        raw.write_text(handle.read())
    system = {"root": root, "bin": bin_dir, "ckpt": ckpt, "specs": specs, "config": config, "raw": raw, "data": data}
    return system, record


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    from rerank.nmt.train import TrainConfig

    root = tmp_path_factory.mktemp("system")
    train_config = TrainConfig(max_update=4, max_epoch=1, max_tokens=1000, dropout=0.0)
    system, record = tiny_tuned_system(root, train_config, GenerateConfig(nbest=3, batch_size=4))
    for seed in (1, 2):  # two replicas' records: the system takes the one of the better tuning score
        record["tuning"]["score"] = float(seed)
        (root / f"w{seed}.json").write_text(json.dumps(record))
    shutil.copy(root / "w2.json", root / "w.json")
    return system


def test_the_provenance_of_a_tuned_list_leads_back_to_the_decoder(tuned):
    generation, steps = trace(str(tuned["root"] / "val.full.nbest"))
    assert steps == [tuned["specs"]]
    assert generation["checkpoint"] == os.path.abspath(tuned["ckpt"])
    assert generation["data_bin"] == os.path.abspath(tuned["bin"])
    with pytest.raises(InputError, match="no signature beside the list"):
        trace(str(tuned["root"] / "val.1best"))


def test_translate_equals_the_step_by_step_commands_and_the_system_moves(tuned, tmp_path, capfd):
    root = tuned["root"]
    system = tmp_path / "system"
    assert (
        main(
            [
                "pack-system",
                "--nbest",
                str(root / "val.full.nbest"),
                "--weights",
                str(root / "w.json"),
                "--out",
                str(system),
            ]
        )
        == 0
    )
    # of several replicas, the one of the best tuning score
    other = tmp_path / "system2"
    argv = ["pack-system", "--nbest", str(root / "val.full.nbest"), "--weights", str(root / "w1.json")]
    assert main(argv + ["--weights", str(root / "w2.json"), "--out", str(other)]) == 0
    chosen = json.loads((other / "system.json").read_text())["weights_from"]
    assert chosen["chosen"] == str(root / "w2.json") and len(chosen["candidates"]) == 2
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["steps"][0][0] == "mbr:bleu" and manifest["steps"][0][1].startswith("len:@SYSTEM@/models/")
    # IBM Model 1: its tables trained once at packing, not the corpus (translate does not train them)
    assert manifest["steps"][0][2] == "ibm1:tables=@SYSTEM@/models/2-ibm1/tables.npz"
    assert not [name for name in manifest["files"] if name.startswith("models/2-ibm1") and "tables" not in name]
    assert "generator/checkpoint.pt" in manifest["files"] and "weights.json" in manifest["files"]
    # step by step, as docs/usage/any-test-set.md did it
    step = tmp_path / "step"
    step.mkdir()
    generate_nbest_from_text(
        tuned["bin"],
        tuned["ckpt"],
        str(tuned["raw"]),
        str(step / "n"),
        str(step / "1"),
        str(step / "src"),
        tuned["config"],
    )
    add_features(str(step / "n"), tuned["specs"], str(step / "full"), ScoringInputs(source=str(step / "src")))
    apply_file(str(step / "full"), str(root / "w.json"), str(step / "best"))
    expected = read_lines(str(step / "best"))
    # one command; the directory moved first (the system's paths are its own)
    moved = tmp_path / "elsewhere" / "sys"
    os.makedirs(moved.parent)
    shutil.move(str(system), str(moved))
    out = tmp_path / "out.tok"
    capfd.readouterr()  # what the step-by-step commands printed (nmt nbest shows fairseq's log)
    assert (
        main(
            [
                "translate",
                "--system",
                str(moved),
                "--input",
                str(tuned["raw"]),
                "--out",
                str(out),
                "--tokenized",
                "--json",
            ]
        )
        == 0
    )
    assert read_lines(str(out)) == expected
    captured = capfd.readouterr()
    throughput = json.loads(captured.out)
    # fairseq's INFO log and torch's warnings stay in the subprocess (issue 61, item 10)
    assert "| INFO |" not in captured.err and "pin_memory" not in captured.err, captured.err[-2000:]
    assert throughput["segments"] == len(expected) and throughput["sentences_per_second"] > 0
    assert list(throughput["stages"]) == ["decode", "step0 (mbr len ibm1)"]
    result = translate(
        str(moved), str(tuned["raw"]), str(tmp_path / "out.de"), str(tmp_path / "out.nbest"), say=lambda t: None
    )
    assert read_lines(str(tmp_path / "out.de")) == detokenize(expected, "de")
    assert result["segments"] == len(expected)
    assert (tmp_path / "out.nbest").exists() and (tmp_path / "out.nbest.json").exists()


def test_translate_shards_of_a_fairseq_system_merge_byte_for_byte(tuned, tmp_path, capsys):
    """translate --num-shards deals its blocks of sentences (rerank.shards), each decoded by
    fairseq-generate, scored and re-ranked as one process does it: 3 shards of the 10 test
    sentences in blocks of 3 (blocks 0+3, 1, 2), merged in any order, are the unsharded
    translation and scored list byte for byte; a 5th shard would hold no block."""
    root = tuned["root"]
    system = tmp_path / "system"
    argv = ["pack-system", "--nbest", str(root / "val.full.nbest"), "--weights", str(root / "w.json")]
    assert main(argv + ["--out", str(system)]) == 0
    translate_argv = ["translate", "--system", str(system), "--input", str(tuned["raw"]), "--batch-size", "2"]
    translate_argv += ["--block-sentences", "3"]
    assert main(translate_argv + ["--out", str(tmp_path / "one.de"), "--nbest-out", str(tmp_path / "one.nbest")]) == 0
    for k in range(3):
        outputs = ["--out", str(tmp_path / f"s{k}.de"), "--nbest-out", str(tmp_path / f"s{k}.nbest")]
        assert main(translate_argv + ["--num-shards", "3", "--shard-id", str(k)] + outputs) == 0
    members = [json.loads((tmp_path / f"s{k}.de.json").read_text())["shard"]["members"] for k in range(3)]
    assert members == [[0, 1, 2, 9], [3, 4, 5], [6, 7, 8]]
    for kind in ("de", "nbest"):
        assert (
            main(["merge", *[str(tmp_path / f"s{k}.{kind}") for k in (1, 2, 0)], "--out", str(tmp_path / f"m.{kind}")])
            == 0
        )
        assert (tmp_path / f"m.{kind}").read_bytes() == (tmp_path / f"one.{kind}").read_bytes(), kind
    capsys.readouterr()
    assert main(translate_argv + ["--num-shards", "5", "--shard-id", "4", "--out", str(tmp_path / "x.de")]) == 1
    err = capsys.readouterr().err
    assert "shard 4 of 5 holds no block: 10 sentences make 4 block(s) of --block-sentences 3" in err
    assert not (tmp_path / "x.de").exists()


def test_a_system_incomplete_changed_or_from_another_release_is_refused(tuned, tmp_path, capsys):
    root = tuned["root"]
    system = tmp_path / "s"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(system), say=lambda t: None)
    with pytest.raises(InputError, match="exists and is not an empty directory"):
        pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(system), say=lambda t: None)
    model_file = next(
        name for name in json.loads((system / "system.json").read_text())["files"] if name.startswith("models/")
    )
    shutil.copy(system / model_file, tmp_path / "keep")
    os.remove(system / model_file)
    argv = ["translate", "--system", str(system), "--input", str(tuned["raw"]), "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert f"the system's file {model_file} is missing" in err and "\n" not in err
    (system / model_file).write_text("edited")
    with pytest.raises(InputError, match=f"the system's file {model_file} changed since it was packed"):
        load_system(str(system))
    shutil.copy(tmp_path / "keep", system / model_file)
    manifest = json.loads((system / "system.json").read_text())
    manifest["rerank"] = "0.0.1"
    (system / "system.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="written by rerank 0.0.1, this is"):
        load_system(str(system))
    with pytest.raises(InputError, match="not a system directory"):
        load_system(str(tmp_path))
    assert not (tmp_path / "o").exists()


def test_a_moved_job_directory_is_packed_with_relocate(tuned, tmp_path, capsys):
    """Signatures record absolute paths: after the job directory moves, pack-system names the
    missing input and the --relocate that finds it; with it, the system equals the one packed
    in place (the same files, byte for byte, and the same scorer chain)."""
    root = tuned["root"]
    in_place = tmp_path / "in-place"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(in_place), say=lambda t: None)
    moved = tmp_path / "moved" / root.name
    os.makedirs(moved.parent)
    shutil.move(str(root), str(moved))
    try:
        argv = ["pack-system", "--nbest", str(moved / "val.full.nbest"), "--weights", str(moved / "w.json")]
        assert main(argv + ["--out", str(tmp_path / "refused")]) == 1
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"its input list {root / 'val.nbest'} does not exist" in err
        assert f"give --relocate {root.parent}={moved.parent}" in err and str(moved / "val.full.nbest.json") in err
        assert not (tmp_path / "refused").exists()
        assert main(argv + ["--relocate", f"{root}={moved}", "--out", str(tmp_path / "system")]) == 0
        capsys.readouterr()
        manifest = json.loads((tmp_path / "system" / "system.json").read_text())
        expected = json.loads((in_place / "system.json").read_text())
        assert manifest["files"] == expected["files"] and manifest["steps"] == expected["steps"]
        assert manifest["relocated"] == [{"old": str(root), "new": str(moved)}] and expected["relocated"] == []
        # the relocation applies under OLD only, and bad values are one line each
        relocation = Relocation.parse([f"{root}={moved}"])
        assert relocation(str(root / "a" / "b")) == str(moved / "a" / "b") and relocation(str(root)) == str(moved)
        assert relocation(str(root) + "x/a") == str(root) + "x/a" and relocation("rel/a") == "rel/a"
        for bad, message in (
            ("nothing", "expected OLD=NEW"),
            (f"rel={moved}", "OLD is an absolute path"),
            (f"{root}={tmp_path / 'nowhere'}", "NEW is not an existing directory"),
        ):
            assert main(argv + ["--relocate", bad, "--out", str(tmp_path / "bad")]) == 1
            err = capsys.readouterr().err.strip()
            assert message in err and "\n" not in err
        # a relocation that misses the decoder, and a scorer's path that does not exist: named
        lists = tmp_path / "lists"  # the lists alone, without the models
        lists.mkdir()
        for name in ("val.nbest", "val.nbest.json", "val.full.nbest", "val.full.nbest.json"):
            shutil.copy(moved / name, lists / name)
        with pytest.raises(InputError, match=f"the decoder's checkpoint {tuned['ckpt']} \\(relocated: {lists}/"):
            trace(str(lists / "val.full.nbest"), Relocation.parse([f"{root}={lists}"]))
        with pytest.raises(InputError, match=f"scorer len: its .* {root / 'data'} does not exist"):
            relocate_spec(f"len:{root / 'data'}", 0, str(tmp_path / "y"))
        assert not (tmp_path / "y").exists()
    finally:
        shutil.move(str(moved), str(root))


def test_a_model_directory_is_packed_with_the_checkpoint_that_scores_only(tmp_path):
    """nmt:/lm: model directories keep every checkpoint of their training; a system holds
    the one that scores (train.json's, else checkpoint_best.pt), the rest of the directory
    as it is, and its spec points inside the system."""
    model = tmp_path / "r2l"
    (model / "bin").mkdir(parents=True)
    (model / "train.json").write_text('{"checkpoint": "checkpoint_avg.pt"}')
    for name in ("checkpoint_avg.pt", "checkpoint_best.pt", "checkpoint3.pt", "dict.en.txt", "bpe.codes", "bin/d.txt"):
        (model / name).write_text(name)
    out = tmp_path / "system"
    assert relocate_spec(f"nmt:{model}", 0, str(out)) == "nmt:@SYSTEM@/models/0-nmt"
    packed = sorted(str(p.relative_to(out / "models" / "0-nmt")) for p in (out / "models" / "0-nmt").rglob("*"))
    assert packed == ["bin", "bin/d.txt", "bpe.codes", "checkpoint_avg.pt", "dict.en.txt", "train.json"]
    (model / "train.json").write_text('{"checkpoint": "../elsewhere/checkpoint.pt"}')
    with pytest.raises(InputError, match="names the checkpoint '../elsewhere/checkpoint.pt': a file of the directory"):
        relocate_spec(f"nmt:{model}", 2, str(out))
    (model / "train.json").write_text("{}")
    (model / "checkpoint_best.pt").unlink()
    with pytest.raises(InputError, match="needs train.json and the checkpoint it names, checkpoint_best.pt by default"):
        relocate_spec(f"lm:{model}", 1, str(out))
    # fairseq:CHECKPOINT: the checkpoint, its dictionaries (beside it: not its siblings) and bpe=
    (model / "codes").write_text("codes")
    spec = relocate_spec(
        f"fairseq:{model / 'checkpoint_avg.pt'},bpe=subword-nmt:{model / 'codes'},direction=r2l", 3, str(out)
    )
    place = "@SYSTEM@/models/3-fairseq"
    assert spec == f"fairseq:{place}/checkpoint_avg.pt,dict={place},bpe=subword-nmt:{place}/bpe/codes,direction=r2l"
    packed = sorted(str(p.relative_to(out / "models" / "3-fairseq")) for p in (out / "models" / "3-fairseq").rglob("*"))
    assert packed == ["bpe", "bpe/codes", "checkpoint_avg.pt", "dict.en.txt"]


def _resign(system, edit):
    """Edit ``system``'s manifest and give it the digest of the edit (as a crafter can)."""
    manifest = json.loads((system / "system.json").read_text())
    edit(manifest)
    manifest["digest"] = manifest_digest(manifest)
    (system / "system.json").write_text(json.dumps(manifest))


def test_a_system_manifest_is_checksummed_and_cannot_point_outside(tuned, tmp_path):
    root = tuned["root"]
    system = tmp_path / "s"
    said = []
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(system), say=said.append)
    digest = json.loads((system / "system.json").read_text())["digest"]
    assert digest.startswith("sha256:") and any(digest in line for line in said)
    assert load_system(str(system), expected_digest=digest)["decoding"].nbest == 3
    with pytest.raises(InputError, match="not the sha256:00 expected"):
        load_system(str(system), expected_digest="sha256:00")
    pristine = (system / "system.json").read_text()
    manifest = json.loads(pristine)
    manifest["decoder"]["config"]["nbest"] = 50  # an edit without the digest
    (system / "system.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="the manifest changed since it was packed"):
        load_system(str(system))
    outside = tmp_path / "outside.json"
    shutil.copy(system / "weights.json", outside)
    (system / "models" / "link").symlink_to(outside)
    crafted = {
        "points outside the system directory": lambda m: m["files"].update(
            {"../outside.json": m["files"]["weights.json"]}
        ),
        "is not a path relative": lambda m: m["files"].update({str(outside): m["files"]["weights.json"]}),
        "models/link points outside": lambda m: m["files"].update({"models/link": m["files"]["weights.json"]}),
        "are not among the checksummed files": lambda m: m.update(weights="../outside.json"),
        "is a path outside the system directory": lambda m: m["steps"][0].append(f"len:{tuned['data']}"),
        "scorer len's corpus ../data points outside": lambda m: m["steps"][0].append("len:@SYSTEM@/../data"),
        "src='../../etc' is not a language code": lambda m: m["decoder"]["config"].update(src="../../etc"),
        "nbest='many' is not a positive integer": lambda m: m["decoder"]["config"].update(nbest="many"),
        "lenpen='high' is not a finite number": lambda m: m["decoder"]["config"].update(lenpen="high"),
        "lowercase='yes' is not true or false": lambda m: m["decoder"]["config"].update(lowercase="yes"),
        "does not checksum generator/checkpoint.pt": lambda m: m["files"].pop("generator/checkpoint.pt"),
    }
    for message, edit in crafted.items():
        (system / "system.json").write_text(pristine)
        _resign(system, edit)
        with pytest.raises(InputError, match=re.escape(message)):
            load_system(str(system))


def test_translate_refuses_a_crafted_generator_checkpoint(tuned, tmp_path, capsys, monkeypatch):
    from rerank.nmt.checkpoints import TRUST_ENV, load_state
    from rerank.textio import file_digest
    from tests.nmt.test_checkpoints import crafted_checkpoint

    monkeypatch.delenv(TRUST_ENV, raising=False)
    root = tuned["root"]
    system = tmp_path / "s"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(system), say=lambda t: None)
    checkpoint = system / "generator" / "checkpoint.pt"
    marker = tmp_path / "pwned"
    crafted_checkpoint(checkpoint, marker, base=load_state(str(checkpoint)))
    _resign(system, lambda m: m["files"].update({"generator/checkpoint.pt": file_digest(str(checkpoint))}))
    argv = ["translate", "--system", str(system), "--input", str(tuned["raw"]), "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    err = capsys.readouterr().err.strip()
    assert "checkpoint.pt: holds posix.system" in err and "--trust-checkpoint" in err and "\n" not in err
    assert not marker.exists() and not (tmp_path / "o").exists()
