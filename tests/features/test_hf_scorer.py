"""hf:, hf-lm: and ct2: scorers on tiny models built in the test (tests/tiny_models.py):
equal to transformers' own cross-entropy, padding-invariant, CTranslate2 within 0.05 nats."""

import json

import numpy as np
import pytest

# transformers itself is imported by features.hf_scorer.import_transformers (after hiding a
# broken torchaudio), never before it
from tests.conftest import needs  # noqa: E402

pytestmark = needs("hf")

import torch  # noqa: E402

from rerank.cli import main  # noqa: E402
from rerank.devices import DeviceSettings  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.features.scorer import make_scorer  # noqa: E402
from rerank.nbest import NBestList, read_list_info, read_nbest, write_lines, write_nbest  # noqa: E402
from tests.conftest import one_line_error  # noqa: E402
from tests.tiny_models import build_gpt2, build_marian, convert_ct2  # noqa: E402

SOURCES = ["a man in a blue shirt is standing on a ladder .", "two dogs play in the snow ."]
HYPS = [
    [
        "ein mann in einem blauen hemd steht auf einer leiter .",
        "ein mann steht .",
        "ein mann , der auf einer leiter steht , trägt ein blaues hemd .",
    ],
    ["zwei hunde spielen im schnee .", "hunde im schnee ."],
]
CPU = DeviceSettings("cpu")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    directory = tmp_path_factory.mktemp("hf")
    marian = build_marian(str(directory))
    gpt2 = build_gpt2(str(directory))
    ct2 = convert_ct2(marian, str(directory / "ct2"))
    return {"marian": marian, "gpt2": gpt2, "ct2": ct2, "dir": directory}


def _nbest():
    hyps = [h for seg in HYPS for h in seg]
    offsets = np.concatenate([[0], np.cumsum([len(seg) for seg in HYPS])])
    return NBestList(offsets, hyps, np.zeros((len(hyps), 1)), ["NMT"])


def _transformers_seq2seq(path, source, target):
    """log P(target | source) from transformers' own loss (mean cross-entropy × tokens)."""
    from rerank.features.hf_scorer import import_transformers

    tf = import_transformers()
    tok, model = tf.AutoTokenizer.from_pretrained(path), tf.AutoModelForSeq2SeqLM.from_pretrained(path).eval()
    enc = tok([source], return_tensors="pt")
    labels = tok(text_target=[target], return_tensors="pt").input_ids
    with torch.no_grad():
        loss = model(**enc, labels=labels).loss.item()
    return -loss * labels.shape[1], labels.shape[1]


def test_hf_forward_and_channel_equal_transformers_cross_entropy(models):
    nbest = _nbest()
    forward = make_scorer(f"hf:{models['marian']}", CPU).score(nbest, SOURCES, None)
    channel = make_scorer(f"hf:{models['marian']},direction=backward", CPU).score(nbest, SOURCES, None)
    for row, (hyp, seg) in enumerate(zip(nbest.hypotheses, nbest.segment)):
        total, tokens = _transformers_seq2seq(models["marian"], SOURCES[seg], hyp)
        assert forward["HF"][row] == pytest.approx(total, abs=1e-4)
        assert forward["HFNorm"][row] == pytest.approx(total / tokens, abs=1e-5)
        back, _ = _transformers_seq2seq(models["marian"], hyp, SOURCES[seg])
        assert channel["HFChannel"][row] == pytest.approx(back, abs=1e-4)


def test_scores_do_not_depend_on_the_batch(models):
    scorer = make_scorer(f"hf:{models['marian']},batch=64", CPU)
    alone = make_scorer(f"hf:{models['marian']},batch=1", CPU)
    inputs = [SOURCES[0]] * 3 + [SOURCES[1]] * 2
    outputs = [h for seg in HYPS for h in seg]
    batched, _ = scorer.score_pairs(inputs, outputs)
    single, _ = alone.score_pairs(inputs, outputs)
    assert np.allclose(batched, single, atol=1e-5)
    lm = make_scorer(f"hf-lm:{models['gpt2']},batch=64", CPU)
    lm_alone = make_scorer(f"hf-lm:{models['gpt2']},batch=1", CPU)
    assert np.allclose(lm.score_pairs([""] * 5, outputs)[0], lm_alone.score_pairs([""] * 5, outputs)[0], atol=1e-5)
    # ct2: 10 distinct pairs sorted by length, in batches of 1 on 1 thread (two chunks of 8 pairs and 2) or
    # batches of 2 on 2 threads (one chunk of 32), the results mapped back to their rows: the same scores
    ct2 = make_scorer(f"ct2:{models['ct2']},compute_type=float32,batch=2,threads=2", CPU)
    ct2_alone = make_scorer(f"ct2:{models['ct2']},compute_type=float32,batch=1,threads=1", CPU)
    assert (ct2.batch, ct2.threads) == (2, 2)
    many_in, many_out = inputs * 4, outputs[::-1] * 2 + outputs * 2
    scores, lengths = ct2.score_pairs(many_in, many_out)
    assert np.allclose(scores, ct2_alone.score_pairs(many_in, many_out)[0], atol=1e-4)
    assert np.allclose(scores[10:15], ct2_alone.score_pairs(inputs, outputs)[0], atol=1e-4)


def test_batches_hold_at_most_the_logit_budget_and_score_the_same(models, monkeypatch):
    """A large vocabulary's logits bound a batch (LOGIT_CELLS, issue 91): each forward call of
    hf: holds at most that many rows × positions × vocabulary floats (one row at least), and the
    scores are those of plain batches."""
    from rerank.features import hf_scorer

    inputs = [SOURCES[0]] * 3 + [SOURCES[1]] * 2
    outputs = [h for seg in HYPS for h in seg]
    scorer = make_scorer(f"hf:{models['marian']},batch=64", CPU)
    plain, _ = scorer.score_pairs(inputs, outputs)
    vocabulary = scorer.model.get_output_embeddings().weight.shape[0]
    monkeypatch.setattr(hf_scorer, "LOGIT_CELLS", 2 * 20 * vocabulary)  # two rows of 20 positions
    shapes = []
    hook = scorer.model.get_output_embeddings().register_forward_hook(lambda m, i, out: shapes.append(out.shape))
    budgeted, _ = scorer.score_pairs(inputs, outputs)
    hook.remove()
    assert np.allclose(budgeted, plain, atol=1e-5)
    assert len(shapes) > 1 and sum(rows for rows, _, _ in shapes) == 5
    assert all(rows * width <= 40 or rows == 1 for rows, width, _ in shapes)
    assert any(rows > 1 for rows, _, _ in shapes)  # short rows share a batch
    assert scorer.rows_within(10**6, vocabulary) == 1 and scorer.rows_within(1, 1) == 64
    ct2 = make_scorer(f"ct2:{models['ct2']},compute_type=float32", CPU)
    with open(f"{models['ct2']}/shared_vocabulary.json", encoding="utf-8") as handle:
        assert ct2.vocabulary_size == len(json.load(handle))  # Marian's pad row left out by the converter
    assert np.allclose(ct2.score_pairs(inputs, outputs)[0], plain, atol=0.05)


def test_hf_lm_equals_transformers_cross_entropy(models):
    from rerank.features.hf_scorer import import_transformers

    tf = import_transformers()
    tok = tf.AutoTokenizer.from_pretrained(models["gpt2"])
    model = tf.AutoModelForCausalLM.from_pretrained(models["gpt2"]).eval()
    scores = make_scorer(f"hf-lm:{models['gpt2']},name=GPT", CPU).score(_nbest(), None, None)
    for row, hyp in enumerate(_nbest().hypotheses):
        ids = torch.tensor([[tok.eos_token_id] + tok(hyp, add_special_tokens=False).input_ids + [tok.eos_token_id]])
        with torch.no_grad():
            loss = model(input_ids=ids, labels=ids).loss.item()
        assert scores["GPT"][row] == pytest.approx(-loss * (ids.shape[1] - 1), abs=1e-4)
        assert scores["GPTNorm"][row] == pytest.approx(-loss, abs=1e-5)


def test_ct2_is_within_005_nats_of_hf(models):
    nbest = _nbest()
    hf = make_scorer(f"hf:{models['marian']}", CPU).score(nbest, SOURCES, None)["HF"]
    ct2 = make_scorer(f"ct2:{models['ct2']},compute_type=float32", CPU).score(nbest, SOURCES, None)["CT2"]
    assert np.max(np.abs(ct2 - hf)) < 0.05
    int8 = make_scorer(f"ct2:{models['ct2']},name=Q", CPU).score(nbest, SOURCES, None)["Q"]  # the CPU default
    assert np.all(np.isfinite(int8)) and np.max(np.abs(int8 - hf)) < 0.05 * np.max(np.abs(hf))


def test_detok_gives_the_model_detokenised_text(models):
    from sacremoses import MosesDetokenizer

    scorer = make_scorer(f"hf:{models['marian']},detok=moses:de,source_detok=moses:en", CPU)
    plain = make_scorer(f"hf:{models['marian']}", CPU)
    nbest = _nbest()
    got = scorer.score(nbest, SOURCES, None)["HF"]
    de, en = MosesDetokenizer(lang="de"), MosesDetokenizer(lang="en")
    expected, _ = plain.score_pairs(
        [en.detokenize(SOURCES[s].split()) for s in nbest.segment], [de.detokenize(h.split()) for h in nbest.hypotheses]
    )
    assert np.allclose(got, expected, atol=1e-6)
    assert not np.allclose(got, plain.score(nbest, SOURCES, None)["HF"])  # "hemd ." -> "hemd."


def test_features_add_with_hf_ct2_and_their_errors(models, tmp_path, capsys):
    nbest_path, src = str(tmp_path / "t.nbest"), str(tmp_path / "t.en")
    write_nbest(_nbest(), nbest_path)
    write_lines(SOURCES, src)
    out = str(tmp_path / "out.nbest")
    assert (
        main(
            [
                "features",
                "add",
                "--nbest",
                nbest_path,
                "--source",
                src,
                "--device",
                "cpu",
                "--out",
                out,
                "--scorer",
                f"hf:{models['marian']},direction=backward,name=Ch",
                "--scorer",
                f"ct2:{models['ct2']}",
                "--scorer",
                f"hf-lm:{models['gpt2']}",
            ]
        )
        == 0
    )
    result = read_nbest(out)
    assert result.feature_names == ["NMT", "Ch", "ChNorm", "CT2", "CT2Norm", "HFLM", "HFLMNorm"]
    assert read_list_info(out).feature_sets["Ch"] == ["Ch", "ChNorm"]
    assert "Loading weights" not in capsys.readouterr().err  # transformers' own bars are off
    for argv, needle in (
        (["--dtype", "float16", "--device", "cpu"], "needs a CUDA device"),
        (["--scorer", f"hf:{models['marian']},direction=up"], "direction must be forward"),
        (["--scorer", f"hf:{tmp_path}"], "no config.json"),
        (["--scorer", f"hf:{models['gpt2']}"], "not a Hugging Face sequence-to-sequence"),
        (["--scorer", f"hf-lm:{models['gpt2']},direction=backward"], "unknown setting"),
        (["--scorer", f"ct2:{models['ct2']},threads=0"], "threads"),
    ):
        base = ["features", "add", "--nbest", nbest_path, "--source", src, "--out", str(tmp_path / "x.nbest")]
        scorers = [] if "--scorer" in argv else ["--scorer", f"hf:{models['marian']}"]
        assert main(base + scorers + argv) == 1
        one_line_error(capsys, needle)
    if not torch.cuda.is_available():
        assert (
            main(
                [
                    "features",
                    "add",
                    "--nbest",
                    nbest_path,
                    "--source",
                    src,
                    "--out",
                    str(tmp_path / "x.nbest"),
                    "--scorer",
                    f"hf:{models['marian']}",
                    "--device",
                    "cuda",
                ]
            )
            == 1
        )
        one_line_error(capsys, "torch sees no CUDA device")


def test_a_hypothesis_longer_than_the_ct2_models_positions_is_one_line(models, tmp_path, capsys):
    """The tiny Marian has 256 positions: a 300-word hypothesis cannot be scored by its
    CTranslate2 conversion; features add says so in one line (CTranslate2 raised a
    RuntimeError, a traceback, after rerank generate decoded up to its --max-length)."""
    long = NBestList(np.array([0, 1]), [" ".join(["ein"] * 300)], np.zeros((1, 1)), ["NMT"])
    write_nbest(long, str(tmp_path / "l.nbest"))
    write_lines(["a dog ."], str(tmp_path / "l.en"))
    argv = ["features", "add", "--nbest", str(tmp_path / "l.nbest"), "--source", str(tmp_path / "l.en")]
    assert main(argv + ["--device", "cpu", "--scorer", f"ct2:{models['ct2']}", "--out", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err
    assert "tokens is too long for the model" in err and "--max-length" in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_scores_equal_cpu_scores(models):
    nbest = _nbest()
    cpu = make_scorer(f"hf:{models['marian']}", CPU).score(nbest, SOURCES, None)["HF"]
    gpu = make_scorer(f"hf:{models['marian']}", DeviceSettings("cuda")).score(nbest, SOURCES, None)["HF"]
    assert np.allclose(cpu, gpu, atol=1e-3)
    half = make_scorer(f"hf:{models['marian']}", DeviceSettings("cuda", "float16")).score(nbest, SOURCES, None)["HF"]
    assert np.max(np.abs(half - cpu)) < 0.1 * np.max(np.abs(cpu))


def test_device_settings_are_checked():
    with pytest.raises(InputError):
        DeviceSettings("gpu")
    with pytest.raises(InputError):
        DeviceSettings("cpu", "float64")


@pytest.mark.parametrize("kind", ["hf", "ct2"])
@pytest.mark.parametrize(
    "how", [["--beam", "4"], ["--sampling", "epsilon=0.02,seed=3"], ["--sampling", "top_k=8,top_p=0.9,temperature=0.8"]]
)
def test_generate_writes_a_list_that_its_scorer_agrees_with(models, tmp_path, capsys, kind, how):
    src = str(tmp_path / "src.en")
    write_lines(SOURCES, src)
    path = models["marian"] if kind == "hf" else models["ct2"]
    spec = f"{kind}:{path}" + (",compute_type=float32" if kind == "ct2" else "")
    out = str(tmp_path / "gen.nbest")
    argv = [
        "generate",
        "--model",
        spec,
        "--input",
        src,
        "--nbest",
        "3",
        "--max-length",
        "12",
        "--device",
        "cpu",
        "--out-nbest",
        out,
        "--out-1best",
        str(tmp_path / "gen.1best"),
    ] + how
    assert main(argv) == 0
    listing = read_nbest(out)
    name = "HF" if kind == "hf" else "CT2"
    assert listing.feature_names == [name, f"{name}Norm"] and list(np.diff(listing.offsets)) == [3, 3]
    info = read_list_info(out)
    assert info.beam_feature == f"{name}Norm" and info.feature_sets == {"beam": [name, f"{name}Norm"]}
    norm = listing.features[:, 1]
    for s in range(2):  # best first
        assert list(norm[listing.offsets[s] : listing.offsets[s + 1]]) == sorted(
            norm[listing.offsets[s] : listing.offsets[s + 1]], reverse=True
        )
    best = (tmp_path / "gen.1best").read_text().splitlines()
    assert best == [listing.hypotheses[o] for o in listing.offsets[:-1]]
    # the columns are what features add --scorer computes on the same list
    rescored = make_scorer(spec, CPU).score(listing, SOURCES, None)
    assert np.allclose(rescored[name], listing.features[:, 0], atol=1e-4)
    if how[0] == "--sampling":  # seeded: the same seed gives the same samples
        again = str(tmp_path / "again.nbest")
        assert main(argv[:-6] + ["--out-nbest", again, "--out-1best", str(tmp_path / "a.1best")] + how) == 0
        assert list(read_nbest(again).hypotheses) == list(listing.hypotheses)


def test_ct2_epsilon_sampling_keeps_only_tokens_above_epsilon(models, tmp_path):
    """With ε = 0.5 at most one token can pass each step: sampling becomes greedy search."""
    from rerank.features.generate import _ct2_candidates
    from rerank.features.sampling import Sampling

    scorer = make_scorer(f"ct2:{models['ct2']},compute_type=float32", CPU)
    greedy = scorer.model.translate_batch(
        [scorer.tokenizer.convert_ids_to_tokens(ids) for ids in scorer.tokenizer(SOURCES)["input_ids"]],
        beam_size=1,
        max_decoding_length=12,
    )
    expected = [scorer.tokenizer.convert_tokens_to_string(r.hypotheses[0]) for r in greedy]
    sampled, _ = _ct2_candidates(scorer, SOURCES, 2, 1, Sampling(0.5, 1), 12)
    assert [set(c) for c in sampled] == [{e} for e in expected]


def test_truncation_equals_hugging_faces_warpers():
    """rerank.features.sampling.truncate (the samplers for CTranslate2) against the
    LogitsWarpers transformers' generate chains for the same settings, on random logits."""
    from rerank.features.hf_scorer import import_transformers
    from rerank.features.sampling import Sampling, truncate

    generation = import_transformers().generation
    rng = np.random.default_rng(5)
    checked = 0
    for trial in range(40):
        sampling = Sampling(
            float(rng.choice([0.0005, 0.002, 0.01, 0.05])) if rng.random() < 0.5 else None,
            trial,
            float(rng.uniform(0.3, 0.99)) if rng.random() < 0.5 else None,
            int(rng.integers(1, 60)) if rng.random() < 0.5 else None,
            float(rng.choice([0.5, 0.8, 1.0, 1.3])),
        )
        logits = rng.normal(0, 3, size=(6, 200))
        warpers = []
        if sampling.temperature != 1.0:
            warpers.append(generation.TemperatureLogitsWarper(sampling.temperature))
        if sampling.top_k:
            warpers.append(generation.TopKLogitsWarper(sampling.top_k))
        if sampling.top_p is not None:
            warpers.append(generation.TopPLogitsWarper(sampling.top_p))
        if sampling.epsilon is not None:
            warpers.append(generation.EpsilonLogitsWarper(sampling.epsilon))
        scores = torch.tensor(logits, dtype=torch.float64)
        for warper in warpers:
            scores = warper(None, scores)
        theirs = torch.softmax(scores, dim=-1).numpy()
        ours = truncate(logits, sampling)
        assert np.array_equal(ours > 0, theirs > 0), sampling
        assert np.allclose(ours, theirs, atol=1e-12), sampling
        checked += int((ours == 0).any())
    assert checked > 20  # most draws truncate something


@pytest.mark.parametrize("kind", ["hf", "ct2"])
def test_top_k_1_sampling_is_greedy_search(models, kind):
    """top_k=1 (or a nucleus so small that it holds one token) leaves one token a step: the
    samples are greedy search's output, whatever the seed and the temperature."""
    from rerank.features.generate import _ct2_candidates, _hf_candidates
    from rerank.features.sampling import Sampling

    spec = f"hf:{models['marian']}" if kind == "hf" else f"ct2:{models['ct2']},compute_type=float32"
    scorer = make_scorer(spec, CPU)
    scorer.progress = False
    candidates = _hf_candidates if kind == "hf" else _ct2_candidates
    greedy, _ = candidates(scorer, SOURCES, 1, 1, None, 12)
    for sampling in (Sampling(None, 4, top_k=1, temperature=1.7), Sampling(None, 9, top_p=0.001)):
        assert candidates(scorer, SOURCES, 3, 1, sampling, 12)[0] == [g * 3 for g in greedy]


def test_the_full_environment_runs_plain_transformers_and_the_ct2_converter(models, tmp_path):
    # outside rerank's own import guard: a fresh interpreter imports MarianMTModel, and the
    # converter's command line converts the tiny model (a torchaudio built for another torch
    # broke both in the [all] environment; scripts/setup_env.sh removes it)
    import os
    import subprocess
    import sys

    code = "from transformers import MarianMTModel; print(MarianMTModel.__name__)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "MarianMTModel", run.stderr[-2000:]
    converter = os.path.join(os.path.dirname(sys.executable), "ct2-transformers-converter")
    out = tmp_path / "ct2"
    run = subprocess.run(
        [converter, "--model", models["marian"], "--output_dir", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert (out / "model.bin").exists()


def test_generate_in_chunks_equals_one_pass_and_sampling_is_reproducible(models, tmp_path):
    from rerank.features.generate import generate_file
    from rerank.features.sampling import Sampling
    from rerank.nbest import read_nbest
    from rerank.shards import Shard, merge_shards

    write_lines(SOURCES * 3, str(tmp_path / "src.en"))
    runs = {}
    for name, rows in (("whole", 10_000), ("chunked", 2)):  # 2 rows = one sentence per chunk
        generate_file(
            f"ct2:{models['ct2']}",
            str(tmp_path / "src.en"),
            str(tmp_path / f"{name}.nbest"),
            str(tmp_path / f"{name}.1best"),
            2,
            devices=CPU,
            max_length=12,
            chunk_rows=rows,
        )
        runs[name] = read_nbest(str(tmp_path / f"{name}.nbest"))
    assert runs["whole"].hypotheses == runs["chunked"].hypotheses
    assert np.allclose(runs["whole"].features, runs["chunked"].features, atol=1e-5)

    def sample(name, rows, shard=None):
        record = generate_file(
            f"ct2:{models['ct2']}",
            str(tmp_path / "src.en"),
            str(tmp_path / f"{name}.nbest"),
            str(tmp_path / f"{name}.1best"),
            3,
            sampling=Sampling(0.02, 7),
            devices=CPU,
            max_length=8,
            chunk_rows=rows,
            shard=shard,
        )
        return record

    # the same samples whatever the chunks (sentence i is seeded by (seed, i)) or shards
    assert sample("s0", 3)["hypotheses"] == 6 * 3  # 6 sentences, 3 samples each
    sample("s1", 10_000)
    assert (tmp_path / "s0.nbest").read_bytes() == (tmp_path / "s1.nbest").read_bytes()
    for k in range(2):
        assert sample(f"shard{k}", 3, Shard(k, 2))["segments"] == 3
    merge_shards([str(tmp_path / "shard1.nbest"), str(tmp_path / "shard0.nbest")], str(tmp_path / "m.nbest"))
    merge_shards([str(tmp_path / "shard0.1best"), str(tmp_path / "shard1.1best")], str(tmp_path / "m.1best"))
    assert (tmp_path / "m.nbest").read_bytes() == (tmp_path / "s0.nbest").read_bytes()
    assert (tmp_path / "m.1best").read_bytes() == (tmp_path / "s0.1best").read_bytes()
    assert read_list_info(str(tmp_path / "s0.nbest")).beam_feature is not None
    # beam search in shards: chunks of 2 sentences dealt (0+2, 1), each searched and scored as
    # one process does it, merge into its list byte for byte
    for name, shard in (("beam", None), ("beam0", Shard(0, 2)), ("beam1", Shard(1, 2))):
        out = [str(tmp_path / f"{name}.{kind}") for kind in ("nbest", "1best")]
        source = str(tmp_path / "src.en")
        record = generate_file(
            f"ct2:{models['ct2']}", source, *out, 2, devices=CPU, max_length=12, shard=shard, chunk_sentences=2
        )
    assert record["shard"]["members"] == [2, 3] and record["chunk_sentences"] == 2
    merge_shards([str(tmp_path / "beam1.nbest"), str(tmp_path / "beam0.nbest")], str(tmp_path / "mb.nbest"))
    assert (tmp_path / "mb.nbest").read_bytes() == (tmp_path / "beam.nbest").read_bytes()


def test_pseudo_references_drawn_with_another_sampler_feed_mbr(models, tmp_path, capsys):
    """rerank generate --pseudo-ref-sampling (ZurichNLP mbr's references_config): candidates by
    beam search, pseudo-references by epsilon sampling, each list its own; the pseudo-reference
    list is the list rerank generate --sampling writes with that sampler, and rerank mbr takes it."""
    src = str(tmp_path / "src.en")
    write_lines(SOURCES, src)
    common = ["generate", "--model", f"ct2:{models['ct2']},compute_type=float32", "--input", src]
    common += ["--max-length", "10", "--device", "cpu"]
    cands, refs = str(tmp_path / "c.nbest"), str(tmp_path / "r.nbest")
    argv = common + ["--nbest", "2", "--beam", "3", "--out-nbest", cands, "--out-1best", str(tmp_path / "c.1best")]
    argv += ["--pseudo-ref-sampling", "epsilon=0.05,seed=2", "--pseudo-refs", "5", "--out-pseudo-refs", refs]
    assert main(argv) == 0
    assert "10 pseudo-references (epsilon)" in capsys.readouterr().err
    alone = str(tmp_path / "alone.nbest")
    one = common + ["--nbest", "5", "--sampling", "epsilon=0.05,seed=2", "--out-nbest", alone]
    assert main(one + ["--out-1best", str(tmp_path / "a.1best")]) == 0
    assert (tmp_path / "r.nbest").read_bytes() == (tmp_path / "alone.nbest").read_bytes()
    assert read_nbest(cands).offsets.tolist() == [0, 2, 4] and read_nbest(refs).offsets.tolist() == [0, 5, 10]
    sampling = json.loads((tmp_path / "r.nbest.json").read_text())["sampling"]
    assert sampling["method"] == "epsilon" and sampling["epsilon"] == 0.05 and sampling["seed"] == 2
    out = str(tmp_path / "mbr.txt")
    mbr = ["mbr", "--nbest", cands, "--pseudo-refs", refs, "--feature", "uniform", "--metric", "chrf", "--out", out]
    assert main(mbr) == 0
    picks = (tmp_path / "mbr.txt").read_text().splitlines()
    listing = read_nbest(cands)
    assert all(p in listing.hypotheses[listing.offsets[s] : listing.offsets[s + 1]] for s, p in enumerate(picks))
    capsys.readouterr()
    for extra, message in (
        (["--pseudo-refs", "5"], "--pseudo-refs and --out-pseudo-refs need --pseudo-ref-sampling"),
        (["--pseudo-ref-sampling", "top_p=0.9"], "--pseudo-ref-sampling needs --out-pseudo-refs FILE"),
        (["--pseudo-ref-sampling", "top_p=2", "--out-pseudo-refs", refs], "top_p must be in (0, 1)"),
    ):
        assert (
            main(common + ["--nbest", "2", "--out-nbest", str(tmp_path / "x.nbest"), "--out-1best", "x"] + extra) == 1
        )
        one_line_error(capsys, message)
    assert not (tmp_path / "x.nbest").exists()


def test_a_prompted_causal_lm_translates_and_scores_its_candidates(tmp_path, capsys):
    """hf-lm:DIR,prompt=FILE (issue 80): a decoder-only translator — a tiny random Llama with its
    own tokenizer — scores log P(hypothesis EOS | BOS prompt(source)), by hand from its logits and
    padding-invariant; rerank generate continues the prompt (beam search, sampling), top_k=1 is
    greedy search, and the list's columns are what features add computes."""
    from tests.tiny_models import build_llama

    llama = build_llama(str(tmp_path))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Translate from English to German.\nEnglish: {source}\nGerman:\n")
    spec = f"hf-lm:{llama},prompt={prompt}"
    scorer = make_scorer(spec, CPU)
    tok, model = scorer.tokenizer, scorer.model
    pairs = [(SOURCES[0], HYPS[0][0]), (SOURCES[1], HYPS[1][1]), (SOURCES[1], HYPS[1][0])]
    total, length = scorer.score_pairs([s for s, _ in pairs], [h for _, h in pairs])
    for k, (source, hyp) in enumerate(pairs):
        head = [tok.bos_token_id] + tok(
            f"Translate from English to German.\nEnglish: {source}\nGerman:", add_special_tokens=False
        )["input_ids"]
        tail = tok(hyp, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        with torch.inference_mode():
            logp = torch.log_softmax(model(input_ids=torch.tensor([head + tail])).logits[0].double(), dim=-1)
        by_hand = sum(float(logp[len(head) - 1 + j, t]) for j, t in enumerate(tail))
        assert total[k] == pytest.approx(by_hand, abs=1e-4) and length[k] == len(tail)
    alone = make_scorer(spec + ",batch=1", CPU).score_pairs([s for s, _ in pairs], [h for _, h in pairs])[0]
    assert np.allclose(alone, total, atol=1e-4)  # padding changes nothing
    src = str(tmp_path / "src.en")
    write_lines(SOURCES, src)
    common = ["generate", "--model", spec, "--input", src, "--max-length", "8", "--device", "cpu"]
    out = str(tmp_path / "lm.nbest")
    assert main(common + ["--nbest", "2", "--beam", "3", "--out-nbest", out, "--out-1best", str(tmp_path / "b")]) == 0
    listing = read_nbest(out)
    assert listing.feature_names == ["HFLM", "HFLMNorm"] and list(np.diff(listing.offsets)) == [2, 2]
    rescored = make_scorer(spec, CPU).score(listing, SOURCES, None)
    assert np.allclose(rescored["HFLM"], listing.features[:, 0], atol=1e-4)
    greedy = []
    for source in SOURCES:
        ids = torch.tensor([scorer.prompt_ids(source)])
        with torch.inference_mode():
            made = model.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=8,
                do_sample=False,
                num_beams=1,
                eos_token_id=tok.eos_token_id,
                pad_token_id=tok.eos_token_id,
            )
        greedy.append(tok.decode(made[0, ids.shape[1] :], skip_special_tokens=True).strip().split("\n")[0].strip())
    sampled = str(tmp_path / "s.nbest")
    how = ["--nbest", "3", "--sampling", "top_k=1,seed=5", "--out-nbest", sampled, "--out-1best", str(tmp_path / "s")]
    assert main(common + how) == 0
    assert list(read_nbest(sampled).hypotheses) == [g for g in greedy for _ in range(3)]
    capsys.readouterr()
    bare = ["generate", "--model", f"hf-lm:{llama}", "--input", src, "--nbest", "2", "--device", "cpu"]
    assert main(bare + ["--out-nbest", str(tmp_path / "x.nbest"), "--out-1best", str(tmp_path / "x")]) == 1
    one_line_error(capsys, "a causal LM translates from a prompt: hf-lm:PATH,prompt=FILE")
    (tmp_path / "bad.txt").write_text("no placeholder\n")
    bad = common + ["--nbest", "2", "--out-nbest", str(tmp_path / "x.nbest"), "--out-1best", str(tmp_path / "x")]
    bad[2] = f"hf-lm:{llama},prompt={tmp_path / 'bad.txt'}"
    assert main(bad) == 1
    one_line_error(capsys, "the prompt template holds no {source}")


def test_nllb_targets_start_with_the_target_language_in_search_and_scoring(tmp_path):
    """``tgt_lang=``: transformers' beam search started with the language token (what a user of
    NLLB calls, ``forced_bos_token_id``) is what ``rerank generate hf:`` finds, and ``ct2:``
    feeds the same token without scoring it (within 0.05 nats of ``hf:``); issue 91."""
    from rerank.features.hf_scorer import import_transformers
    from tests.tiny_models import build_nllb

    nllb = build_nllb(str(tmp_path))
    ct2 = convert_ct2(nllb, str(tmp_path / "nllb-ct2"))
    langs = "src_lang=eng_Latn,tgt_lang=deu_Latn"
    tf = import_transformers()
    tok = tf.AutoTokenizer.from_pretrained(nllb, src_lang="eng_Latn", tgt_lang="deu_Latn")
    model = tf.AutoModelForSeq2SeqLM.from_pretrained(nllb).eval()
    deu = tok.convert_tokens_to_ids("deu_Latn")
    enc = tok(SOURCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        ids = model.generate(
            **enc, num_beams=3, num_return_sequences=3, max_new_tokens=12, forced_bos_token_id=deu, do_sample=False
        )
    assert (ids[:, 1] == deu).all()
    expected = tok.batch_decode(ids, skip_special_tokens=True)
    src = str(tmp_path / "src.en")
    write_lines(SOURCES, src)
    lists = {}
    for kind, path in (("hf", nllb), ("ct2", ct2 + ",compute_type=float32")):
        out = str(tmp_path / f"{kind}.nbest")
        argv = ["generate", "--model", f"{kind}:{path},{langs}", "--input", src, "--nbest", "3", "--max-length", "12"]
        assert main(argv + ["--device", "cpu", "--out-nbest", out, "--out-1best", out + ".1best"]) == 0
        lists[kind] = read_nbest(out)
    hf = lists["hf"]
    for s in range(2):  # the same candidates (rerank orders them by their per-token score)
        assert set(hf.hypotheses[hf.offsets[s] : hf.offsets[s + 1]]) == set(expected[3 * s : 3 * s + 3])
    # forced decoding: the language token is fed, never scored, by either scorer
    hyps = [h for seg in HYPS for h in seg]
    inputs = [SOURCES[s] for s, seg in enumerate(HYPS) for _ in seg]
    sums, lengths = make_scorer(f"hf:{nllb},{langs}", CPU).score_pairs(inputs, hyps)
    ct2_sums, ct2_lengths = make_scorer(f"ct2:{ct2},compute_type=float32,{langs}", CPU).score_pairs(inputs, hyps)
    assert list(ct2_lengths) == list(lengths)
    assert np.abs(ct2_sums - sums).max() < 0.05
    labels = tok(text_target=hyps[0], return_tensors="pt").input_ids
    assert labels[0, 0] == deu and lengths[0] == labels.shape[1] - 1
    with torch.no_grad():
        logits = model(**tok([inputs[0]], return_tensors="pt"), labels=labels).logits
    token = torch.log_softmax(logits, -1).gather(-1, labels[..., None])[0, 1:, 0]
    assert abs(float(token.sum()) - sums[0]) < 1e-4
    # the ct2 list's candidates were searched from the language token too: its scores are hf's
    ct = lists["ct2"]
    rescored = make_scorer(f"hf:{nllb},{langs}", CPU).score(ct, SOURCES, None)
    assert np.abs(rescored["HF"] - ct.features[:, 0]).max() < 0.05
    with pytest.raises(InputError, match="src_lang/tgt_lang"):
        make_scorer(f"ct2:{ct2},bpe=none,{langs}", CPU)


@pytest.mark.parametrize("builder", ["gpt2", "llama"])
@pytest.mark.parametrize("verb", ["generate", "features add"])
def test_a_prompt_over_the_models_positions_is_refused_in_one_line(tmp_path, capsys, builder, verb):
    """Issue 92, classes 7 and 8: a prompt longer than the model's context gave only a
    transformers warning (Llama) or an index-error traceback (GPT-2); it is refused naming the
    template, and generation never runs past the model's positions."""
    from tests.tiny_models import build_llama

    model = build_gpt2(str(tmp_path)) if builder == "gpt2" else build_llama(str(tmp_path))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Translate. " + "a man is walking . " * 200 + "English: {source}\nGerman:")
    (tmp_path / "src.en").write_text("a man\n")
    (tmp_path / "c.nbest").write_text("0 ||| ein mann ||| F= 0 ||| 0\n")
    spec = f"hf-lm:{model},prompt={prompt}"
    if verb == "generate":
        argv = ["generate", "--model", spec, "--input", str(tmp_path / "src.en"), "--nbest", "2", "--device", "cpu"]
        argv += ["--out-nbest", str(tmp_path / "o.nbest"), "--out-1best", str(tmp_path / "o.1best")]
    else:
        argv = ["features", "add", "--nbest", str(tmp_path / "c.nbest"), "--source", str(tmp_path / "src.en")]
        argv += ["--scorer", spec, "--device", "cpu", "--out", str(tmp_path / "o.nbest")]
    capsys.readouterr()
    assert main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in err and str(prompt) in err and "over the model's 256 positions" in err, err
    assert not (tmp_path / "o.nbest").exists()


def _refused_features_add(tmp_path, capsys, spec: str) -> str:
    """``features add --scorer SPEC`` on a two-segment list: asserted refused (rc 1, no output,
    no traceback); its last stderr line."""
    (tmp_path / "src.en").write_text("a man\na dog\n")
    (tmp_path / "c.nbest").write_text("0 ||| ein mann ||| F= 0 ||| 0\n1 ||| ein hund ||| F= 0 ||| 0\n")
    argv = ["features", "add", "--nbest", str(tmp_path / "c.nbest"), "--source", str(tmp_path / "src.en")]
    argv += ["--scorer", spec, "--device", "cpu", "--out", str(tmp_path / "o.nbest")]
    capsys.readouterr()
    assert main(argv) == 1
    assert not (tmp_path / "o.nbest").exists()
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "Traceback" not in err, err
    return err


@pytest.mark.parametrize("damage", ["symlink-to-text", "pickle-only", "truncated"])
@pytest.mark.parametrize("scorer", ["hf", "hf-lm"])
def test_damaged_weight_files_are_refused_in_one_line(models, tmp_path, capsys, damage, scorer):
    """Issue 92, class 8: a model.safetensors that is a symbolic link to a text file and a
    pickle-only pytorch_model.bin were tracebacks; both are one line naming the directory."""
    import shutil

    import torch
    from safetensors.torch import load_file

    model = tmp_path / "model"
    shutil.copytree(models["marian" if scorer == "hf" else "gpt2"], model)
    weights = model / "model.safetensors"
    if damage == "symlink-to-text":
        (tmp_path / "notes.txt").write_text("not weights\n")
        weights.unlink()
        weights.symlink_to(tmp_path / "notes.txt")
    elif damage == "pickle-only":
        torch.save({**load_file(str(weights)), "extra": object}, str(model / "pytorch_model.bin"))
        weights.unlink()
    else:
        weights.write_bytes(weights.read_bytes()[:100])
    err = _refused_features_add(tmp_path, capsys, f"{scorer}:{model}")
    assert f"{model}: not a Hugging Face" in err, err
    if damage == "pickle-only":
        assert "never unpickles" in err
    assert not (tmp_path / "o.nbest").exists()


@pytest.mark.parametrize("content", [b"", b"not a model\n"])
def test_a_corrupt_sentencepiece_model_is_named_not_tiktoken(models, tmp_path, capsys, content):
    """Issue 92, class 9: a corrupt SentencePiece model was reported as "tiktoken is required"."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(models["marian"], model)
    (model / "source.spm").write_bytes(content)
    err = _refused_features_add(tmp_path, capsys, f"hf:{model}")
    assert "source.spm is not a SentencePiece model" in err and "tiktoken" not in err, err


def test_ct2_beam_search_scores_stand_for_forced_decoding_where_it_sees_the_same_tokens(models, tmp_path):
    """`rerank generate ct2:` takes a beam candidate's sum from the search (score × tokens, the
    first step's renormalisation without </s> undone) where the search ended it with </s> and
    the scorer's tokenisation of its text gives the same tokens; the others are scored by forced
    decoding. Both equal forced decoding: a model biased towards </s> ends some candidates early."""
    from rerank.features.generate import _ct2_candidates
    from rerank.features.hf_scorer import import_transformers

    transformers = import_transformers()
    biased = str(tmp_path / "marian-eos")
    model = transformers.MarianMTModel.from_pretrained(models["marian"])
    with torch.no_grad():
        model.final_logits_bias[0, model.config.eos_token_id] = 0.4
    model.save_pretrained(biased)
    transformers.AutoTokenizer.from_pretrained(models["marian"]).save_pretrained(biased)
    scorer = make_scorer(f"ct2:{convert_ct2(biased, str(tmp_path / 'ct2'))},compute_type=float32", CPU)
    scorer.progress = False
    sources = SOURCES + ["a girl runs on the beach .", "three people sit at a table .", "a black dog ."]
    texts, known = _ct2_candidates(scorer, sources, 5, 5, None, 30)
    flat = [k for row in known for k in row]
    sums, lengths = scorer.score_pairs([s for s, row in zip(sources, texts) for _ in row], sum(texts, []))
    reused = [i for i, k in enumerate(flat) if k is not None]
    assert 0 < len(reused) < len(flat)  # some ended with </s>, some did not
    assert [flat[i][1] for i in reused] == [int(lengths[i]) for i in reused]
    assert np.allclose([flat[i][0] for i in reused], sums[reused], atol=1e-4)
    # the list generate writes holds forced decoding's numbers either way
    src = str(tmp_path / "src.en")
    write_lines(sources, src)
    out = str(tmp_path / "gen.nbest")
    spec = f"ct2:{tmp_path / 'ct2'},compute_type=float32"
    argv = ["generate", "--model", spec, "--input", src, "--nbest", "5", "--max-length", "30", "--device", "cpu"]
    assert main(argv + ["--out-nbest", out, "--out-1best", str(tmp_path / "gen.1best")]) == 0
    listing = read_nbest(out)
    rescored = make_scorer(spec, CPU).score(listing, sources, None)
    assert np.allclose(rescored["CT2"], listing.features[:, 0], atol=1e-4)
    # the signature counts the candidates whose sum the search gave
    with open(out + ".json", encoding="utf-8") as handle:
        assert json.load(handle)["scores_from_search"] == len(reused)
    # in shards (a chunk of one sentence each), the merged list's count is the unsharded run's
    one = ["--chunk-sentences", "1"]
    unsharded = str(tmp_path / "one.nbest")
    assert main(argv + one + ["--out-nbest", unsharded, "--out-1best", str(tmp_path / "one.1best")]) == 0
    for k in range(2):
        shard = ["--num-shards", "2", "--shard-id", str(k), "--out-1best", str(tmp_path / f"s{k}.1best")]
        assert main(argv + one + shard + ["--out-nbest", str(tmp_path / f"s{k}.nbest")]) == 0
    merged = str(tmp_path / "merged.nbest")
    assert main(["merge", str(tmp_path / "s0.nbest"), str(tmp_path / "s1.nbest"), "--out", merged]) == 0
    counts = [
        json.loads(open(path + ".json", encoding="utf-8").read())["scores_from_search"] for path in (unsharded, merged)
    ]
    shards = [json.loads(open(str(tmp_path / f"s{k}.nbest.json"), encoding="utf-8").read()) for k in range(2)]
    assert counts[0] == counts[1] == sum(s["scores_from_search"] for s in shards)


def test_ct2_beam_search_batches_sentences_within_the_logits_budget(models, tmp_path, monkeypatch):
    """Issue 91: `rerank generate ct2:` gives CTranslate2's beam search as many sentences per
    batch as keep beam × vocabulary scores a step within forced decoding's logits budget
    (NLLB-600M at beam 20 held 5.5 GB in batches of 25 sentences, 3.2 GB in one); the
    candidates are those of larger batches."""
    from rerank.features import hf_scorer
    from rerank.features.generate import _ct2_candidates

    scorer = make_scorer(f"ct2:{convert_ct2(models['marian'], str(tmp_path / 'ct2'))},compute_type=float32", CPU)
    scorer.progress = False
    sources = SOURCES + ["a girl runs on the beach .", "three people sit at a table .", "a black dog ."]
    wide, _ = _ct2_candidates(scorer, sources, 4, 5, None, 12)

    class Spy:
        def __init__(self, model):
            self.model, self.sizes = model, []

        def translate_batch(self, *args, **kwargs):
            self.sizes.append(kwargs["max_batch_size"])
            return self.model.translate_batch(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.model, name)

    monkeypatch.setattr(hf_scorer, "LOGIT_CELLS", 2 * 5 * scorer.vocabulary_size + 1)  # 2 sentences at beam 5
    spy = Spy(scorer.model)
    monkeypatch.setattr(scorer, "model", spy)
    narrow, _ = _ct2_candidates(scorer, sources, 4, 5, None, 12)
    assert spy.sizes == [2]
    assert narrow == wide


def test_int8_quantises_the_models_linear_layers_for_forced_decoding_and_generation(models, tmp_path):
    """``hf:DIR,dtype=int8`` / ``hf-lm:DIR,dtype=int8``: every linear layer of the model
    dynamically quantised, forced decoding near the float32 sums but not equal to them, and
    ``generate`` searching with the quantised model, its columns what the int8 scorer
    computes on its list."""
    nbest = _nbest()
    for kind, path, column in (("hf", models["marian"], "HF"), ("hf-lm", models["gpt2"], "HFLM")):
        exact = make_scorer(f"{kind}:{path}", CPU).score(nbest, SOURCES, None)[column]
        scorer = make_scorer(f"{kind}:{path},dtype=int8", CPU)
        linear = [m for m in scorer.model.modules() if type(m).__name__ == "Linear"]
        assert linear and all(type(m).__module__ == "torch.ao.nn.quantized.dynamic.modules.linear" for m in linear)
        difference = np.abs(scorer.score(nbest, SOURCES, None)[column] - exact)
        assert 0 < difference.max() < 0.05 * np.abs(exact).max(), (kind, difference.max())
    src = str(tmp_path / "src.en")
    write_lines(SOURCES, src)
    spec, out = f"hf:{models['marian']},dtype=int8", str(tmp_path / "gen.nbest")
    argv = ["generate", "--model", spec, "--input", src, "--nbest", "3", "--beam", "4", "--max-length", "12"]
    assert main([*argv, "--device", "cpu", "--out-nbest", out, "--out-1best", str(tmp_path / "gen.1best")]) == 0
    listing = read_nbest(out)
    rescored = make_scorer(spec, CPU).score(listing, SOURCES, None)
    assert np.allclose(rescored["HF"], listing.features[:, 0], atol=1e-4)
    with pytest.raises(InputError, match="dtype"):
        make_scorer(f"hf:{models['marian']},dtype=int4", CPU)
