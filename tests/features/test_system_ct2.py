"""``pack-system --ct2``: a tiny fairseq transformer system converted to CTranslate2, whose
beam search ``translate`` then runs (rerank/nmt/ct2.py).  Its n-best lists hold most of
the hypotheses fairseq's beam search finds, with the columns fairseq's scores give (float32
conversion: within 1e-4 nats of forced decoding under the checkpoint); the translation is the step-by-step re-ranking of that list;
a model CTranslate2 cannot convert, and a CTranslate2 decoder asked of a system without one,
are refused in one line."""

import json
import os
import shutil

import numpy as np
import pytest

from tests.conftest import needs  # noqa: E402

pytestmark = needs("nmt", "hf")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.add import ScoringInputs, add_features  # noqa: E402
from rerank.features.system import load_system, pack_system, translate  # noqa: E402
from rerank.nbest import NBestList, read_nbest, write_nbest  # noqa: E402
from rerank.nmt.data import preprocess_lines  # noqa: E402
from rerank.nmt.generate import GenerateConfig, generate_nbest  # noqa: E402
from rerank.reranking import apply_file  # noqa: E402
from rerank.textio import read_lines  # noqa: E402
from rerank.tuning.files import TuningSetup, tune_file  # noqa: E402
from tests.features.test_system import _resign, tiny_tuned_system  # noqa: E402
from tests.nmt.test_nmt import _write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def transformer(tmp_path_factory):
    """A tiny transformer trained a few updates, its 4-best val list with mbr and len
    columns and weights tuned on it, and the test sources as raw text."""
    from rerank.nmt.train import TrainConfig

    root = tmp_path_factory.mktemp("ct2system")
    train_config = TrainConfig(
        arch="transformer-tiny", max_update=30, max_epoch=30, max_tokens=400, warmup=10, dropout=0.0, average=1
    )
    system, record = tiny_tuned_system(root, train_config, GenerateConfig(nbest=4, batch_size=4), bpe_merges=60)
    (root / "w.json").write_text(json.dumps(record))
    return system


def test_the_converted_generator_finds_fairseqs_hypotheses_with_fairseqs_scores(transformer, tmp_path, capfd):
    root = transformer["root"]
    system = tmp_path / "system"
    argv = ["pack-system", "--nbest", str(root / "val.full.nbest"), "--weights", str(root / "w.json")]
    assert main(argv + ["--out", str(system), "--ct2", "float32"]) == 0
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["decoder"]["ct2"]["model"] == "generator/ct2"
    assert manifest["decoder"]["ct2"]["quantization"] == "float32"
    assert "generator/ct2/model.bin" in manifest["files"] and "generator/checkpoint.pt" in manifest["files"]
    assert load_system(str(system))["ct2"] == {"model": "generator/ct2", "quantization": "float32"}
    capfd.readouterr()
    lists = {}
    for decoder in ("fairseq", "ct2"):
        out = tmp_path / f"{decoder}.tok"
        translate(
            str(system),
            str(transformer["raw"]),
            str(out),
            str(tmp_path / f"{decoder}.nbest"),
            tokenized=True,
            decoder=decoder,
            say=lambda text: None,
        )
        lists[decoder] = read_nbest(str(tmp_path / f"{decoder}.nbest"))
    fairseq, ct2 = lists["fairseq"], lists["ct2"]
    segments = len(read_lines(str(transformer["raw"])))
    assert ct2.feature_names == fairseq.feature_names and ct2.num_segments == fairseq.num_segments == segments
    # an untrained model often puts </s> first: fairseq removes it after the softmax, the
    # conversion drops that empty hypothesis (one fewer, never an empty line)
    sizes = np.diff(ct2.offsets)
    assert sizes.min() >= 3 and sizes.max() == 4 and all(text.strip() for text in ct2.hypotheses)
    # the same search: most of fairseq's hypotheses (this barely trained model's near-ties aside)
    ours = set(zip(ct2.segment.tolist(), ct2.hypotheses))
    theirs = set(zip(fairseq.segment.tolist(), fairseq.hypotheses))
    assert len(ours & theirs) >= 0.7 * len(theirs)
    # the columns are fairseq's: a hypothesis both searches found has fairseq's NMT (the
    # log-probability, </s> included) and NMTNorm to 1e-4 nats; NMT / NMTNorm is its token count
    names = ct2.feature_names
    nmt, norm = names.index("NMT"), names.index("NMTNorm")
    where = {key: k for k, key in enumerate(zip(fairseq.segment.tolist(), fairseq.hypotheses))}
    shared = [(k, where[key]) for k, key in enumerate(zip(ct2.segment.tolist(), ct2.hypotheses)) if key in where]
    mine, its = np.array([k for k, _ in shared]), np.array([j for _, j in shared])
    np.testing.assert_allclose(ct2.features[mine][:, [nmt, norm]], fairseq.features[its][:, [nmt, norm]], atol=1e-4)
    tokens = ct2.features[:, nmt] / ct2.features[:, norm]
    np.testing.assert_allclose(tokens, np.round(tokens), atol=1e-4)
    assert np.all(np.round(tokens) >= 1 - ct2.features[:, names.index("WordPenalty")])
    words = [-len(text.split()) for text in ct2.hypotheses]
    assert ct2.features[:, names.index("WordPenalty")].tolist() == words
    # the beam order: best NMTNorm first within each segment
    for s in range(segments):
        norms = ct2.features[ct2.offsets[s] : ct2.offsets[s + 1], names.index("NMTNorm")]
        assert np.all(np.diff(norms) <= 1e-9)
    # the translation is the step-by-step re-ranking of the CTranslate2 list
    step = tmp_path / "step"
    step.mkdir()
    (step / "src").write_text(
        "".join(line + "\n" for line in preprocess_lines(read_lines(str(transformer["raw"])), "en"))
    )
    beam = NBestList(ct2.offsets, ct2.hypotheses, ct2.features[:, :3], names[:3], totals=ct2.features[:, 2])
    write_nbest(beam, str(step / "beam"))
    add_features(str(step / "beam"), transformer["specs"], str(step / "full"), ScoringInputs(source=str(step / "src")))
    apply_file(str(step / "full"), str(root / "w.json"), str(step / "best"))
    assert read_lines(str(step / "best")) == read_lines(str(tmp_path / "ct2.tok"))


def test_an_int8_conversion_is_what_translate_decodes_with_by_default(transformer, tmp_path):
    root = transformer["root"]
    system = tmp_path / "system"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(system), say=lambda t: None, ct2="int8")
    out = tmp_path / "int8.tok"
    import torch

    torch.set_num_threads(2)  # CTranslate2 sets the process's OpenMP threads to 1: restored after it
    said = []
    result = translate(str(system), str(transformer["raw"]), str(out), tokenized=True, say=said.append)
    assert torch.get_num_threads() == 2
    assert any("beam 4, CTranslate2 int8)" in line for line in said)
    segments = len(read_lines(str(transformer["raw"])))
    assert result["segments"] == segments and len(read_lines(str(out))) == segments
    assert load_system(str(system))["ct2"]["quantization"] == "int8"


def test_translate_shards_with_ctranslate2_merge_byte_for_byte(transformer, tmp_path):
    """translate --num-shards with the CTranslate2 conversion: 3 shards of the 10 test sentences
    in blocks of 4 (4, 4, 2), merged in any order, give the unsharded translation and scored list
    byte for byte."""
    root = transformer["root"]
    system = tmp_path / "system"
    argv = ["pack-system", "--nbest", str(root / "val.full.nbest"), "--weights", str(root / "w.json")]
    assert main(argv + ["--out", str(system), "--ct2", "int8"]) == 0
    translate_argv = ["translate", "--system", str(system), "--input", str(transformer["raw"]), "--batch-size", "2"]
    translate_argv += ["--block-sentences", "4"]
    assert main(translate_argv + ["--out", str(tmp_path / "one.de"), "--nbest-out", str(tmp_path / "one.nbest")]) == 0
    for k in range(3):
        outputs = ["--out", str(tmp_path / f"s{k}.de"), "--nbest-out", str(tmp_path / f"s{k}.nbest")]
        assert main(translate_argv + ["--num-shards", "3", "--shard-id", str(k)] + outputs) == 0
    assert json.loads((tmp_path / "s1.de.json").read_text())["shard"]["members"] == [4, 5, 6, 7]
    for kind in ("de", "nbest"):
        shards = [str(tmp_path / f"s{k}.{kind}") for k in (2, 0, 1)]
        assert main(["merge", *shards, "--out", str(tmp_path / f"m.{kind}")]) == 0
        assert (tmp_path / f"m.{kind}").read_bytes() == (tmp_path / f"one.{kind}").read_bytes(), kind


def test_a_model_ctranslate2_cannot_convert_and_a_missing_conversion_are_one_line(transformer, tmp_path, capsys):
    root = transformer["root"]
    plain = tmp_path / "plain"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(plain), say=lambda t: None)
    argv = ["translate", "--system", str(plain), "--input", str(transformer["raw"]), "--out", str(tmp_path / "o")]
    assert main(argv + ["--decoder", "ct2"]) == 1
    err = capsys.readouterr().err.strip()
    assert "--decoder ct2: the system holds no CTranslate2 model (pack it with --ct2 int8)" in err and "\n" not in err
    assert not (tmp_path / "o").exists()
    # a conversion whose path leaves the directory is refused before any work
    converted = tmp_path / "converted"
    pack_system(str(root / "val.full.nbest"), str(root / "w.json"), str(converted), say=lambda t: None, ct2="int8")
    _resign(converted, lambda m: m["decoder"]["ct2"].update(model="../plain/generator"))
    with pytest.raises(
        InputError, match="the CTranslate2 model ../plain/generator points outside the system directory"
    ):
        load_system(str(converted))


def test_a_fairseq_model_of_ones_own_generates_as_its_ct2_conversion_and_packs(transformer, tmp_path, capsys):
    """A fairseq model the user has (here the tiny transformer, as if trained elsewhere),
    converted once (rerank nmt to-ct2), is a generator of
    one's own: ``generate --model ct2:DIR,bpe=subword-nmt:CODES`` writes the n-best lists
    (the subwords joined back), features, tuning and pack-system follow, and the system
    translates as the step-by-step commands, line for line."""
    data = transformer["data"]
    convert = ["nmt", "to-ct2", "--checkpoint", str(transformer["ckpt"]), "--dict", str(transformer["bin"])]
    convert += ["--src", "en", "--tgt", "de", "--out", str(tmp_path / "mine")]
    assert main(convert) == 0
    record = json.loads((tmp_path / "mine" / "convert.json").read_text())
    assert record["checkpoint"] == os.path.abspath(transformer["ckpt"]) and record["quantization"] == "float32"
    assert main(convert) == 1  # written into a new directory only
    assert "exists: the CTranslate2 model is written into a new directory" in capsys.readouterr().err
    model = f"ct2:{tmp_path / 'mine'},bpe=subword-nmt:{data / 'bpe.codes'},compute_type=float32"
    scorers = "--scorer mbr:bleu,feature=CT2 --scorer len:1.1"
    runs = {"val": data / "tok" / "val.en", "test": data / "tok" / "test_2016_flickr.en"}
    for split, source in runs.items():
        argv = f"generate --model {model} --nbest 3 --max-length 16 --device cpu --input {source}"
        assert main([*argv.split(), "--out-nbest", str(tmp_path / f"{split}.nbest"), "--out-1best", "-"]) == 0
        argv = f"features add --nbest {tmp_path / f'{split}.nbest'} --source {source} {scorers}"
        assert main([*argv.split(), "--out", str(tmp_path / f"{split}.full.nbest")]) == 0
    listed = read_nbest(str(tmp_path / "val.full.nbest"))
    assert listed.feature_names[:2] == ["CT2", "CT2Norm"] and np.all(np.diff(listed.offsets) == 3)
    assert not any("@@" in text for text in listed.hypotheses)  # subwords joined, as the references are
    record, _ = tune_file(str(tmp_path / "val.full.nbest"), str(data / "tok" / "val.de"), TuningSetup(tokenize="none"))
    (tmp_path / "w.json").write_text(json.dumps(record))
    apply_file(str(tmp_path / "test.full.nbest"), str(tmp_path / "w.json"), str(tmp_path / "test.reranked"))
    argv = ["pack-system", "--nbest", str(tmp_path / "val.full.nbest"), "--weights", str(tmp_path / "w.json")]
    assert main(argv + ["--out", str(tmp_path / "system")]) == 0
    manifest = json.loads((tmp_path / "system" / "system.json").read_text())
    assert manifest["decoder"]["kind"] == "generate"
    generator = manifest["decoder"]["model"]
    assert generator.startswith("ct2:@SYSTEM@/generator/0-ct2-path/mine,"), generator
    assert "bpe=subword-nmt:@SYSTEM@/generator/0-ct2-bpe/bpe.codes" in generator.split(","), generator
    argv = ["translate", "--system", str(tmp_path / "system"), "--device", "cpu", "--input", str(runs["test"])]
    assert main(argv + ["--out", str(tmp_path / "out.de")]) == 0
    assert read_lines(str(tmp_path / "out.de")) == read_lines(str(tmp_path / "test.reranked"))


def test_a_ct2_model_with_bpe_generates_without_loading_torch(transformer, tmp_path):
    """``generate --model ct2:DIR,bpe=…`` on the CPU needs neither torch nor transformers:
    the device comes from CTranslate2's own CUDA count (torch's import alone took 1.25 s and
    most of the process's memory)."""
    import subprocess
    import sys

    data = transformer["data"]
    convert = ["nmt", "to-ct2", "--checkpoint", str(transformer["ckpt"]), "--dict", str(transformer["bin"])]
    assert main([*convert, "--src", "en", "--tgt", "de", "--out", str(tmp_path / "mine")]) == 0
    model = f"ct2:{tmp_path / 'mine'},bpe=subword-nmt:{data / 'bpe.codes'}"
    argv = ["generate", "--model", model, "--nbest", "2", "--max-length", "8", "--input"]
    argv += [
        str(data / "tok" / "val.en"),
        "--out-nbest",
        str(tmp_path / "val.nbest"),
        "--out-1best",
        str(tmp_path / "val.1best"),
    ]
    script = f"import sys; from rerank.cli import main; code = main({argv!r}); print(code, sorted(m for m in ('torch', 'transformers') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.split("\n")[-2] == "0 []", done.stderr
    assert len(read_nbest(str(tmp_path / "val.nbest")).offsets) > 1


def test_a_gru_generator_is_refused_in_one_line(tmp_path, capsys):
    from rerank.nmt.data import PrepareConfig, prepare
    from rerank.nmt.train import TrainConfig, train

    _write_corpus(str(tmp_path / "m30k"))
    data = tmp_path / "data"
    bin_dir = prepare(str(tmp_path / "m30k"), str(data), PrepareConfig(bpe_merges=40), workers=1)
    ckpt = train(bin_dir, str(tmp_path / "model"), TrainConfig(max_update=2, max_epoch=1, max_tokens=1000, dropout=0.0))
    config = GenerateConfig(nbest=2, batch_size=4)
    generate_nbest(bin_dir, ckpt, "valid", str(tmp_path / "val.nbest"), str(tmp_path / "val.1best"), config)
    record, _ = tune_file(str(tmp_path / "val.nbest"), str(data / "tok" / "val.de"), TuningSetup(tokenize="none"))
    (tmp_path / "w.json").write_text(json.dumps(record))
    argv = ["pack-system", "--nbest", str(tmp_path / "val.nbest"), "--weights", str(tmp_path / "w.json")]
    assert main(argv + ["--out", str(tmp_path / "s"), "--ct2", "int8"]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "CTranslate2 cannot convert this model" in err and os.path.basename(ckpt) in err
    assert not (tmp_path / "s").exists()


def _with_r2l(transformer, tmp_path, arch):
    """The fixture's tuned list with the column of a right-to-left model of ``arch`` trained a
    few updates on the same data, tuned again: (the list, its weights)."""
    from rerank.nmt.train import TrainConfig, train

    root, data = transformer["root"], transformer["data"]
    r2l = tmp_path / f"r2l-{arch}"
    average = {"average": 1} if arch != "gru" else {}  # a transformer averages its last epochs' checkpoints
    config = TrainConfig(
        arch=arch, direction="r2l", max_update=4, max_epoch=1, max_tokens=1000, dropout=0.0, threads=1, **average
    )
    train(transformer["bin"], str(r2l), config)
    tuned = tmp_path / f"val.{arch}.nbest"
    source = ScoringInputs(source=str(data / "tok" / "val.en"))
    add_features(str(root / "val.full.nbest"), [f"nmt:{r2l}"], str(tuned), source, say=lambda text: None)
    record, _ = tune_file(str(tuned), str(data / "tok" / "val.de"), TuningSetup(tokenize="none"))
    (tmp_path / f"w.{arch}.json").write_text(json.dumps(record))
    return tuned, tmp_path / f"w.{arch}.json"


def test_pack_system_ct2_converts_the_r2l_scorer_and_translate_scores_with_it(transformer, tmp_path):
    """``pack-system --ct2`` converts the chain's ``nmt:`` translation models too, in float32
    whatever the generator's quantisation; ``translate`` with the conversions runs them through
    CTranslate2's ``score_batch`` (the same columns, within 1e-3 nats of forced decoding under
    the checkpoint), and ``--decoder fairseq`` runs the chain as tuned."""
    from rerank.features.scorer import make_scorer

    tuned, weights = _with_r2l(transformer, tmp_path, "transformer-tiny")
    system, said = tmp_path / "system", []
    pack_system(str(tuned), str(weights), str(system), say=said.append, ct2="int8")
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["steps"][1] == ["nmt:@SYSTEM@/models/10-nmt"]
    spec = "ct2:@SYSTEM@/models/10-nmt-ct2,bpe=subword-nmt:@SYSTEM@/models/10-nmt/bpe.codes,direction=r2l,name=R2L"
    assert manifest["decoder"]["ct2"]["scorers"] == [[1, 0, spec + ",compute_type=default"]]
    assert "models/10-nmt-ct2/model.bin" in manifest["files"]
    assert "system: scorer nmt of step 1 converted to CTranslate2 (float32)" in said  # the generator: int8
    runs = {}
    for decoder in ("ct2", "fairseq"):
        out = tmp_path / f"{decoder}.tok"
        runs[decoder] = translate(
            str(system), str(transformer["raw"]), str(out), str(tmp_path / f"{decoder}.nbest"), tokenized=True,
            decoder=decoder, say=lambda text: None,
        )  # fmt: skip
    assert "step1 (ct2)" in runs["ct2"]["stages"] and "step1 (nmt)" in runs["fairseq"]["stages"]
    listed = read_nbest(str(tmp_path / "ct2.nbest"))
    sources = preprocess_lines(read_lines(str(transformer["raw"])), "en")
    again = make_scorer(f"nmt:{system}/models/10-nmt").score(listed, sources, None)
    for column in ("R2L", "R2LNorm"):
        found = listed.features[:, listed.feature_names.index(column)]
        np.testing.assert_allclose(found, again[column], atol=1e-3)
    # the re-ranking of that list by the weights is the translation
    apply_file(str(tmp_path / "ct2.nbest"), str(weights), str(tmp_path / "best"))
    assert read_lines(str(tmp_path / "best")) == read_lines(str(tmp_path / "ct2.tok"))
    # a converted scorer's entry that is not a ct2: spec of a step's scorer is refused
    crafted = tmp_path / "crafted"
    shutil.copytree(system, crafted)
    for entry, needle in (
        ([2, 0, spec], "is not \\[step, position, spec\\] of a step"),
        ([1, 0, "nmt:@SYSTEM@/models/10-nmt"], "is not a ct2: spec"),
        ([1, 0, "ct2:../elsewhere,bpe=none"], "outside the system directory"),
    ):
        _resign(crafted, lambda m, entry=entry: m["decoder"]["ct2"].update(scorers=[entry]))
        with pytest.raises(InputError, match=needle):
            load_system(str(crafted))


def test_a_scorer_ctranslate2_cannot_convert_stays_with_fairseq(transformer, tmp_path):
    """A right-to-left GRU (the paper's models) beside a transformer generator: ``pack-system
    --ct2`` converts the generator, says in one line that the GRU stays with fairseq, and
    ``translate`` scores with it under fairseq."""
    tuned, weights = _with_r2l(transformer, tmp_path, "gru")
    system, said = tmp_path / "system", []
    pack_system(str(tuned), str(weights), str(system), say=said.append, ct2="int8")
    manifest = json.loads((system / "system.json").read_text())
    assert manifest["decoder"]["ct2"]["scorers"] == [] and manifest["decoder"]["ct2"]["model"] == "generator/ct2"
    stays = [line for line in said if "stays with fairseq" in line]
    assert len(stays) == 1 and "system: scorer nmt of step 1 stays with fairseq: " in stays[0], said
    assert "CTranslate2 cannot convert this model" in stays[0]
    assert not (system / "models" / "10-nmt-ct2").exists()
    result = translate(str(system), str(transformer["raw"]), str(tmp_path / "o"), tokenized=True, say=lambda t: None)
    assert "step1 (nmt)" in result["stages"]


def test_bench_generate_trained_compares_the_same_search_through_rerank_and_ctranslate2(transformer, tmp_path):
    """benchmarks/bench_generate_trained.py (issue 91): a packed system's generator converted to
    CTranslate2 decodes the raw sources through ``rerank generate ct2:`` and through
    ``translate_batch`` directly; the two give the same candidates for every sentence, and the
    report counts them from the list rerank wrote."""
    import sys

    from tests.conftest import ROOT

    root = transformer["root"]
    system = tmp_path / "system"
    argv = ["pack-system", "--nbest", str(root / "val.full.nbest"), "--weights", str(root / "w.json")]
    assert main(argv + ["--out", str(system)]) == 0
    sys.path.insert(0, os.path.join(str(ROOT), "benchmarks"))
    try:
        import bench_generate_trained
    finally:
        sys.path.remove(os.path.join(str(ROOT), "benchmarks"))
    out = tmp_path / "report.json"
    argv = ["--system", str(system), "--input", str(transformer["raw"]), "--sentences", "5", "--nbest", "3"]
    argv += ["--runs", "1", "--compute-type", "float32", "--work", str(tmp_path / "work"), "--json", str(out)]
    assert bench_generate_trained.main(argv) == 0
    report = json.loads(out.read_text())
    assert report["sentences"] == 5 and report["hypotheses"] == 15
    assert report["same_candidate_sets"] == 5  # rerank's list is CTranslate2's own 3-best
    assert [len(report["seconds"][e]) for e in ("rerank", "ctranslate2")] == [1, 1]
    assert os.path.exists(tmp_path / "work" / "ct2" / "model.bin")
