"""BERTScore (rerank/metrics/bertscore.py) in every role on a tiny random BERT built here:
evaluation equals the bert-score library's own ``score`` (the reference implementation),
several references take the highest F1 as bert-score does, MBR selects the candidate of the
highest mean F1 against the others (computed here with bert-score directly), tuning and
significance run with it, and a bad model directory is one line."""

import os

import numpy as np
import pytest

from tests.conftest import needs

pytestmark = needs("bertscore")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.metrics import make_metric  # noqa: E402

HYPS = ["a man is on the dog .", "the woman", "a child plays in the snow ."]
REFS = ["a man .", "the woman .", "the child runs in the park ."]
OTHER = ["a man is on the dog", "a woman .", "a red ball ."]


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A random 2-layer BERT with a word-level vocabulary, saved with its tokenizer
    (tests/tiny_models.py's :func:`build_bert`)."""
    from tests.tiny_models import build_bert

    return build_bert(str(tmp_path_factory.mktemp("bert")))


def _reference_f1(model, cands, refs):
    """bert-score's own F1 (the library's ``score``), the reference values."""
    from bert_score import BERTScorer

    scorer = BERTScorer(model_type=model, num_layers=2)
    scorer._tokenizer.model_max_length = 512
    return scorer.score(cands, refs)[2].double().numpy()


def test_the_corpus_score_is_bert_scores_mean_f1(model):
    metric = make_metric(f"bertscore:{model}")
    stats = metric.stats(HYPS, REFS)
    expected = _reference_f1(model, HYPS, REFS)
    assert np.allclose(stats[:, 0], expected, atol=1e-6) and (stats[:, 1] == 1).all()
    assert metric.score(stats.sum(axis=0)) == pytest.approx(expected.mean(), abs=1e-6)
    # several references: the highest F1 of each segment (bert-score's rule for lists of references)
    both = metric.stats(HYPS, [REFS, OTHER])
    assert np.allclose(both[:, 0], np.maximum(expected, _reference_f1(model, HYPS, OTHER)), atol=1e-6)
    # the last layer by default; another layer is another score
    assert not np.allclose(make_metric(f"bertscore:{model},layers=1").stats(HYPS, REFS)[:, 0], expected)


def test_mbr_selects_the_highest_mean_f1_against_the_other_candidates(model, tmp_path):
    segment = ["a man is on the dog .", "a man .", "the dog", "a man is on the dog"]
    (tmp_path / "l.nbest").write_text("".join(f"0 ||| {h} ||| NMT= -{k + 1} ||| 0\n" for k, h in enumerate(segment)))
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"bertscore:{model}", "--feature", "uniform"]
    assert main([*argv, "--out", str(tmp_path / "best.txt")]) == 0
    n = len(segment)
    f1 = _reference_f1(model, [segment[i] for i in range(n) for _ in range(n)], segment * n).reshape(n, n)
    assert (tmp_path / "best.txt").read_text() == segment[int(np.argmax(f1.mean(axis=1)))] + "\n"


def test_tuning_and_significance_take_it(model, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RERANK_CACHE", "off")
    lines = [
        f"{s} ||| {h} ||| NMT= -{k} L= {len(h.split())} ||| 0"
        for s, hyps in enumerate(zip(HYPS, OTHER))
        for k, h in enumerate(hyps)
    ]
    (tmp_path / "l.nbest").write_text("\n".join(lines) + "\n")
    (tmp_path / "ref").write_text("\n".join(REFS) + "\n")
    (tmp_path / "a").write_text("\n".join(HYPS) + "\n")
    (tmp_path / "b").write_text("\n".join(OTHER) + "\n")
    spec = f"bertscore:{model}"
    tune = [
        "tune",
        "--nbest",
        str(tmp_path / "l.nbest"),
        "--ref",
        str(tmp_path / "ref"),
        "--metric",
        f"0.5*bleu+0.5*bertscore:model={model}",
    ]
    assert main([*tune, "--beam-feature", "NMT", "--tokenize", "none", "--out", str(tmp_path / "w.json")]) == 0
    signif = [
        "signif",
        "--ref",
        str(tmp_path / "ref"),
        "--baseline",
        str(tmp_path / "a"),
        "--system",
        f"b={tmp_path / 'b'}",
    ]
    assert (
        main([*signif, "--metrics", f"bleu,{spec}", "--tokenize", "none", "--format", "json", "--shuffles", "200"]) == 0
    )
    import json

    rows = {(r["system"], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[("baseline", spec)]["score"] == pytest.approx(_reference_f1(model, HYPS, REFS).mean(), abs=1e-6)
    assert rows[("b", spec)]["score"] == pytest.approx(_reference_f1(model, OTHER, REFS).mean(), abs=1e-6)
    weights = json.loads((tmp_path / "w.json").read_text())
    assert weights["tuning"]["metric"] == f"0.5*bleu+0.5*bertscore:model={model}"


def test_a_bad_model_directory_is_one_line(tmp_path, capsys):
    (tmp_path / "h").write_text("a man .\n")
    for spec, message in (("bertscore:", "give the encoder"), (f"bertscore:{tmp_path}/none", "not a model directory")):
        with pytest.raises(InputError, match=message):
            make_metric(spec)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert (
        main(["eval", "--ref", str(tmp_path / "h"), "--hyp", str(tmp_path / "h"), "--metrics", f"bertscore:{empty}"])
        == 1
    )
    err = capsys.readouterr().err.strip()
    assert "bertscore: cannot load the model" in err and "\n" not in err


def test_empty_or_blank_segments_score_0_as_bert_score_defines_them(model, tmp_path, capsys):
    """bert-score sets the F1 of an empty candidate or reference to 0 (its 0/0); under
    transformers 5 its own code fails on one (issue 82), so rerank scores them itself: 0 there,
    bert-score's F1 for the rest, in eval, MBR and tuning alike, no traceback."""
    hyps, refs = ["", "the woman", "  ", "a child plays in the snow ."], ["a man .", "", "the dog", REFS[2]]
    stats = make_metric(f"bertscore:{model}").stats(hyps, refs)
    assert stats[:3, 0].tolist() == [0.0, 0.0, 0.0]
    assert stats[3, 0] == pytest.approx(_reference_f1(model, hyps[3:], refs[3:])[0], abs=1e-6)
    (tmp_path / "h.txt").write_text("".join(f"{h}\n" for h in hyps))
    (tmp_path / "r.txt").write_text("".join(f"{r}\n" for r in refs))
    assert (
        main(
            [
                "eval",
                "--hyp",
                str(tmp_path / "h.txt"),
                "--ref",
                str(tmp_path / "r.txt"),
                "--metrics",
                f"bertscore:{model}",
            ]
        )
        == 0
    )
    assert "Traceback" not in capsys.readouterr().err
    (tmp_path / "l.nbest").write_text(
        "0 ||| a man . ||| NMT= -1 ||| 0\n0 |||  ||| NMT= -2 ||| 0\n0 ||| a man ||| NMT= -3 ||| 0\n"
    )
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"bertscore:{model}", "--feature", "uniform"]
    assert main([*argv, "--out", str(tmp_path / "best.txt")]) == 0
    assert (tmp_path / "best.txt").read_text().strip() in ("a man .", "a man")


def test_over_long_segments_are_cut_at_the_usable_positions_and_the_signature_names_the_installed_version(tmp_path):
    """A RoBERTa-style encoder's tokenizer saved without a maximum length: 2 of its
    max_position_embeddings are not usable (XLM-R's 514 → 512; here 130 → 128), so a sentence
    longer than that is cut there, as bert-score cuts at model_max_length, not a crash (issue 82)."""
    import importlib.metadata
    import json

    from transformers import XLMRobertaConfig

    from rerank.metrics.bertscore import usable_positions
    from tests.comet_tiny import build_encoder

    assert usable_positions(XLMRobertaConfig(max_position_embeddings=514)) == 512
    encoder = build_encoder(str(tmp_path))
    settings_file = os.path.join(encoder, "tokenizer_config.json")
    saved = json.load(open(settings_file))
    saved.pop("model_max_length", None)
    json.dump(saved, open(settings_file, "w"))
    long = " ".join(["ein mann fährt fahrrad"] * 100)  # ~ 400 pieces
    metric = make_metric(f"bertscore:{encoder}")
    f1 = metric.stats([long, "ein mann ."], [long, "ein mann ."])[:, 0]
    assert np.allclose(f1, 1.0, atol=1e-5)
    version = importlib.metadata.version("bert-score")
    assert metric.signature().endswith(f"|version:{version}")


def test_every_option_equals_bert_score_on_real_sentences(model):
    """Each setting rerank exposes (``layers``, ``batch``, ``lowercase``) against bert-score's
    ``BERTScorer`` with the same layer and batch on the same (folded) texts: 60 Multi30k
    validation sentences, mixed case, scored against the next one's reference."""
    import gzip

    from bert_score import BERTScorer

    from tests.tiny_models import DATA

    with gzip.open(os.path.join(DATA, "val.en.gz"), "rt", encoding="utf-8") as handle:
        lines = [next(handle).strip() for _ in range(61)]
    hyps, refs = lines[:60], lines[1:61]
    assert any(h != h.lower() for h in hyps)  # the case matters to lowercase=
    for layers in (1, 2):
        for batch in (1, 64):
            for lowercase in (False, True):
                spec = f"bertscore:{model},layers={layers},batch={batch},lowercase={str(lowercase).lower()}"
                ours = make_metric(spec).stats(hyps, refs)[:, 0]
                scorer = BERTScorer(model_type=model, num_layers=layers, batch_size=batch)
                scorer._tokenizer.model_max_length = 512  # saved without one: bert-score's own call overflows
                fold = [h.lower() for h in hyps] if lowercase else hyps
                theirs = scorer.score(fold, [r.lower() for r in refs] if lowercase else refs)[2].double().numpy()
                assert np.abs(ours - theirs).max() < 1e-6, spec
                assert np.ptp(theirs) > 1e-3, spec  # the scores tell the sentences apart


@pytest.mark.parametrize("verb", ["mbr", "eval"])
def test_bertscore_work_inside_a_verb_says_how_far_it_is(model, tmp_path, capsys, monkeypatch, verb):
    """Issue 93, item 3: BERTScore inside ``mbr`` and ``eval`` shows the progress line of every
    verb (here every 0 s, blocks of 2048 pairs), the API none; the values are those of one call."""
    import rerank.progress

    monkeypatch.setattr(rerank.progress.LineProgress.__init__, "__defaults__", (None, None, "", "it", 0.0, None))
    n = 46  # 46 × 46 = 2116 pairs in mbr: two blocks
    words = "a man dog the woman child snow park red ball plays runs".split()
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 6))) for _ in range(max(n, 2100))]
    if verb == "mbr":
        (tmp_path / "l.nbest").write_text("".join(f"0 ||| {h} ||| NMT= -{k} ||| 0\n" for k, h in enumerate(texts[:n])))
        argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"bertscore:{model}", "--feature", "uniform"]
        argv += ["--out", str(tmp_path / "o")]
    else:
        (tmp_path / "h").write_text("\n".join(texts) + "\n")
        (tmp_path / "r").write_text("\n".join(texts[::-1]) + "\n")
        argv = ["eval", "--ref", str(tmp_path / "r"), "--hyp", str(tmp_path / "h"), "--metrics", f"bertscore:{model}"]
    assert main(argv) == 0
    assert "bertscore: 1/2 block (50 %)" in capsys.readouterr().err
    metric = make_metric(f"bertscore:{model}")
    blocks = metric.f1(texts, texts[::-1])  # the API: quiet, and the blocks change no value
    assert "bertscore:" not in capsys.readouterr().err
    assert np.allclose(blocks, _reference_f1(model, texts, texts[::-1]), atol=1e-6)


def test_int8_quantises_the_encoders_linear_layers_and_stays_near_bert_scores_f1(model):
    """``dtype=int8``: the encoder's linear layers dynamically quantised, F1 near bert-score's
    float32 values but not equal, the signature saying so."""
    expected = _reference_f1(model, HYPS + OTHER, REFS + REFS)
    metric = make_metric(f"bertscore:{model},layers=2,dtype=int8")
    linear = [m for m in metric.scorer()._model.modules() if type(m).__name__ == "Linear"]
    assert linear and all(type(m).__module__ == "torch.ao.nn.quantized.dynamic.modules.linear" for m in linear)
    difference = np.abs(metric.f1(HYPS + OTHER, REFS + REFS) - expected)
    assert 0 < difference.max() < 1e-3, difference.max()
    assert "|dtype:int8|" in str(metric.signature())
    assert "dtype" not in str(make_metric(f"bertscore:{model},layers=2").signature())
    with pytest.raises(InputError, match="dtype"):
        make_metric(f"bertscore:{model},dtype=int4")
