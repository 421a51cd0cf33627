"""First contact, round 4 (issue 93): what a researcher coming from Moses, sacreBLEU, mbrs and
unbabel-comet expects, each item against hand-computed values."""

import json

import pytest
from conftest import one_line_error

import rerank
from rerank.cli import main
from rerank.errors import InputError

# two segments; G ranks the other way from F in both
NBEST = (
    "0 ||| a b ||| F= -1 G= 2 ||| 0\n0 ||| a c ||| F= -2 G= 3 ||| 0\n"
    "1 ||| x ||| F= -1 G= 0 ||| 0\n1 ||| y ||| F= -3 G= 1 ||| 0\n"
)


@pytest.fixture
def listed(tmp_path):
    (tmp_path / "q.nbest").write_text(NBEST)
    (tmp_path / "q.ref").write_text("a c\ny\n")
    return tmp_path


# -- item 5: QE re-ranking by one column, and weights that leave columns out --------------------


def test_apply_by_one_column_is_its_argmax(listed, capsys):
    out = listed / "qe.txt"
    assert main(["apply", "--nbest", str(listed / "q.nbest"), "--column", "G", "--out", str(out)]) == 0
    assert out.read_text() == "a c\ny\n"  # G's argmax: 3 > 2, 1 > 0
    assert "re-ranked by the column G alone" in capsys.readouterr().err
    assert main(["apply", "--nbest", str(listed / "q.nbest"), "--column", "CometKiwi", "--out", str(out)]) == 1
    one_line_error(capsys, "--column CometKiwi: the list has no such column (its columns: F G)")


def test_weights_that_leave_columns_out_are_refused_with_the_fix_or_weigh_zero(listed, capsys):
    (listed / "w.json").write_text(json.dumps({"weights": {"F": 1.0}}))
    argv = ["apply", "--nbest", str(listed / "q.nbest"), "--weights", str(listed / "w.json")]
    assert main(argv + ["--out", str(listed / "o")]) == 1
    one_line_error(capsys, "no weight for n-best feature(s) G (--missing zero gives them 0")
    assert main(argv + ["--missing", "zero", "--out", str(listed / "o")]) == 0
    assert (listed / "o").read_text() == "a b\nx\n"  # F's argmax: -1 > -2, -1 > -3
    assert "1 column(s) without a weight weigh 0 (--missing zero): G" in capsys.readouterr().err


def test_the_api_applies_a_column_a_path_or_the_files_dict(listed):
    nbest = rerank.read_nbest(str(listed / "q.nbest"))
    assert rerank.apply(nbest, column="G") == ["a c", "y"]
    assert rerank.apply(nbest, {"F": 1.0}, missing="zero") == ["a b", "x"]
    (listed / "w.json").write_text(json.dumps({"weights": {"F": 0.0, "G": 1.0}, "tuning": {"metric": "bleu"}}))
    assert rerank.apply(nbest, json.loads((listed / "w.json").read_text())) == ["a c", "y"]
    assert rerank.apply(nbest, str(listed / "w.json")) == ["a c", "y"]
    with pytest.raises(InputError, match="give weights or column=NAME"):
        rerank.apply(nbest)


# -- items 11 and 12: weights in Moses' formats, written and read ---------------------------------


@pytest.mark.parametrize("name, header", [("w.moses", ""), ("moses.ini", "[weight]\n")])
def test_tune_writes_moses_weights_that_apply_and_tune_read_back(listed, capsys, name, header):
    moses = listed / name
    argv = ["tune", "--nbest", str(listed / "q.nbest"), "--ref", str(listed / "q.ref"), "--init", "zeros"]
    assert main(argv + ["--quiet", "--out", str(listed / "w.json"), "--out-moses", str(moses)]) == 0
    weights = json.loads((listed / "w.json").read_text())["weights"]
    assert moses.read_text() == header + "".join(f"{k}= {float(v)!r}\n" for k, v in weights.items())
    assert rerank.read_weights(str(moses)) == weights
    for via in (str(listed / "w.json"), str(moses)):
        assert main(["apply", "--nbest", str(listed / "q.nbest"), "--weights", via, "--out", str(listed / "o")]) == 0
    assert main(argv[:-2] + ["--init", str(moses), "--quiet", "--out", str(listed / "w2.json")]) == 0


def test_a_moses_ini_is_read_for_its_weight_section_only(tmp_path):
    ini = tmp_path / "moses.ini"
    ini.write_text("# tuned\n[feature]\nDistortion\n\n[weight]\nF= 0.5\nLM0= 0.25 -0.125\n\n[threads]\n4\n")
    assert rerank.read_weights(str(ini)) == {"F": 0.5, "LM0": [0.25, -0.125]}
    (tmp_path / "bad.ini").write_text("[feature]\nDistortion\n")
    with pytest.raises(InputError, match="without a \\[weight\\] section"):
        rerank.read_weights(str(tmp_path / "bad.ini"))


@pytest.mark.parametrize("fmt", ["json", "moses", "moses-ini"])
def test_the_api_writes_and_reads_weights_in_every_format(tmp_path, fmt):
    weights = {"F": 0.1, "LM": [0.2, -0.30000000000000004]}
    rerank.write_weights(weights, str(tmp_path / "w"), fmt)
    assert rerank.read_weights(str(tmp_path / "w")) == weights
    with pytest.raises(InputError, match="must be a finite number"):
        rerank.write_weights({"F": float("nan")}, str(tmp_path / "x"), fmt)


# -- item 6: --quiet hides progress, never a warning -----------------------------------------------


def test_tune_quiet_still_says_which_beam_column_it_inferred(listed, capsys):
    argv = ["tune", "--nbest", str(listed / "q.nbest"), "--ref", str(listed / "q.ref"), "--quiet"]
    assert main(argv + ["--out", str(listed / "w.json")]) == 0
    err = capsys.readouterr().err
    assert "no signature: the beam's column is F" in err  # the warning, though quiet
    assert "epoch" not in err.split("mira:")[0]  # and no per-epoch lines
    (listed / "part.json").write_text(json.dumps({"weights": {"F": 1.0}}))
    assert main(argv + ["--init", str(listed / "part.json"), "--out", str(listed / "w.json")]) == 0
    assert "no weight for G: they start at 0" in capsys.readouterr().err


# -- item 1: an interpolation weighs its terms on one 0-100 scale ----------------------------------


def test_a_0_1_metric_enters_an_interpolation_on_the_0_100_scale():
    import numpy as np

    from rerank.metrics import make_objective
    from rerank.metrics.base import Metric
    from rerank.metrics.interpolated import InterpolatedMetric
    from rerank.metrics.segment import MeanOfSegments

    class Unit(MeanOfSegments):  # a 0-1 metric as COMET is
        name, higher_is_better, interpolation_scale = "unit", True, 100.0

        def stats(self, hypotheses, references):
            raise NotImplementedError

        def signature(self):
            return "unit"

    bleu = make_objective("bleu", "none")
    mixed = InterpolatedMetric([(0.5, bleu), (0.5, Unit())])
    hyps, refs = ["a b c d", "e f g h"], ["a b c d", "e f x h"]
    bleu_stats = bleu.stats(hyps, refs).sum(axis=0)
    unit_stats = np.array([0.8 + 0.6, 2.0])  # mean 0.7
    value = mixed.score(np.concatenate([bleu_stats, unit_stats]))
    assert value == pytest.approx(0.5 * bleu.score(bleu_stats) + 0.5 * 70.0)
    assert "UNIT×100" in mixed.signature()
    assert Metric.interpolation_scale == 1.0
    for name in ("comet", "cometkiwi", "bertscore"):
        from rerank.metrics.base import METRICS

        assert METRICS.get(name).interpolation_scale == 100.0, name
    for name in ("bleu", "chrf", "ter", "meteor"):
        assert METRICS.get(name).interpolation_scale == 1.0, name


# -- item 4: the offline route to neural metrics on one's own text ------------------------------


def test_tiny_checkpoints_without_multi30k_says_give_text(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import importlib.util
    import os

    from tests import tiny_models

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    spec = importlib.util.spec_from_file_location(
        "tiny_checkpoints", os.path.join(root, "scripts", "tiny_checkpoints.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.setattr(tiny_models, "DATA", str(tmp_path / "no-shared-data"))
    monkeypatch.setattr(tiny_models, "TEXT_FILE", None)
    assert script.main([str(tmp_path / "models"), "--kinds", "da"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "give --text FILE" in err, err


def test_tiny_checkpoints_train_on_a_text_of_ones_own(tmp_path):
    import os
    import random
    import subprocess
    import sys

    pytest.importorskip("sentencepiece")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rng = random.Random(0)
    words = ["".join(rng.choices("abcdefghijklmnopqrstuvwxyzäöü", k=rng.randint(2, 8))) for _ in range(300)]
    text = tmp_path / "mine.txt"
    text.write_text("".join(" ".join(rng.choices(words, k=rng.randint(3, 9))) + " .\n" for _ in range(800)))
    run = subprocess.run(
        [
            sys.executable,
            os.path.join(root, "scripts", "tiny_checkpoints.py"),
            str(tmp_path / "m"),
            "--kinds",
            "da",
            "--text",
            str(text),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=str(tmp_path),
    )
    assert run.returncode == 0, run.stderr[-2000:]
    (tmp_path / "src.en").write_text("a man runs .\n")
    (tmp_path / "hyp.de").write_text("ein mann läuft .\n")
    scores = rerank.evaluate(
        ["ein mann läuft ."],
        ["ein mann läuft ."],
        metrics=[f"comet:{tmp_path / 'm' / 'da'},source={tmp_path / 'src.en'}"],
    )
    assert len(scores) == 1


# -- item 8: MBR weighs by the list's own model column, or is told which --------------------------


def test_mbr_takes_the_model_column_its_signature_names_or_asks(tmp_path, capsys):
    from rerank.nbest import ListInfo, write_list_info

    (tmp_path / "c.nbest").write_text(
        "0 ||| a b ||| HF= -9 HFNorm= -3 ||| -3\n0 ||| a c ||| HF= -1 HFNorm= -1 ||| -1\n"
        "0 ||| a c d ||| HF= -1 HFNorm= -0.3 ||| -0.3\n"
    )
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--metric", "chrf", "--out", str(tmp_path / "o")]
    assert main(argv) == 1  # no signature: which column weighs the pseudo-references is asked
    one_line_error(capsys, "nor its order names a model column", "give --feature COLUMN", "or uniform for samples")
    write_list_info(str(tmp_path / "c.nbest.json"), ListInfo("HFNorm", {"beam": ["HF", "HFNorm"]}, True), {})
    assert main(argv + ["--json"]) == 0  # rerank generate's list: HF, the column HFNorm normalises
    by_default = (tmp_path / "o").read_text()
    assert main(argv[:-2] + ["--feature", "HF", "--out", str(tmp_path / "o2")]) == 0
    assert (tmp_path / "o2").read_text() == by_default
    nbest = rerank.read_nbest(str(tmp_path / "c.nbest"))
    assert rerank.mbr_decode(nbest, "chrf").picks == by_default.splitlines()


def test_mbr_columns_of_two_algorithms_sit_side_by_side_with_name(tmp_path):
    (tmp_path / "c.nbest").write_text(NBEST)
    nbest = rerank.read_nbest(str(tmp_path / "c.nbest"))
    both = rerank.add_features(
        nbest, ["mbr:chrf,feature=uniform", "mbr:chrf,feature=uniform,algorithm=aggregate,name=MBRchrFagg"]
    )
    assert both.feature_names[-2:] == ["MBRchrF", "MBRchrFagg"]


# -- item 13: one spelling per metric, a minus that is a minus ------------------------------------


def test_signif_titles_chrf_as_eval_and_sacrebleu_do_and_latex_prints_minus_signs(tmp_path, capsys):
    (tmp_path / "ref").write_text("a b c d\ne f g h\ni j k\n")
    (tmp_path / "base").write_text("a b c d\ne f g h\ni j k\n")
    (tmp_path / "sys").write_text("a b x d\ne f g\ni j\n")
    argv = ["signif", "--ref", str(tmp_path / "ref"), "--baseline", str(tmp_path / "base"), "--system"]
    argv += [f"worse={tmp_path / 'sys'}", "--metrics", "bleu,chrf,ter", "--tokenize", "none", "--shuffles", "50"]
    for fmt in ("text", "latex"):
        assert main(argv + ["--resamples", "0", "--format", fmt]) == 0
        out = capsys.readouterr().out
        header = out.splitlines()[0 if fmt == "text" else 2]
        assert "chrF2" in header and "CHRF" not in header, header
        if fmt == "latex":
            row = next(line for line in out.splitlines() if line.startswith("worse"))
            assert "($-$" in row and "(-" not in row, row
    assert main(["eval", "--ref", str(tmp_path / "ref"), "--hyp", str(tmp_path / "sys"), "--metrics", "chrf"]) == 0
    assert "chrF2" in capsys.readouterr().out


def test_meteor_has_no_language_default(tmp_path, capsys):
    (tmp_path / "ref").write_text("a b\n")
    argv = ["eval", "--ref", str(tmp_path / "ref"), "--hyp", str(tmp_path / "ref"), "--metrics", "meteor"]
    assert main(argv) == 1
    one_line_error(capsys, "meteor: needs the target language: --lang LANG")
    with pytest.raises(InputError, match="needs the target language"):
        rerank.evaluate(["a b"], ["a b"], metrics=["meteor"])


def test_the_verb_summaries_name_every_registered_metric(capsys):
    from rerank.mbr.engine import mbr_utilities
    from rerank.metrics.base import METRICS

    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    eval_line = text[text.index(" eval ") : text.index(" oracle ")]
    assert all(name in eval_line for name in METRICS.names()) and "comet" in eval_line and "bertscore" in eval_line
    mbr_line = text[text.index(" mbr ") : text.index(" generate ")]
    assert all(name in mbr_line for name in mbr_utilities())


# -- item 7: approximate MBR says when it cannot pay -------------------------------------------


@pytest.mark.parametrize(
    "algorithm, size, needle",
    [
        ("halving", 20, "halving on about 400 (candidate, pseudo-reference) pairs per segment"),
        ("lowrank", 20, "lowrank: rank 8 ≥ the 2.5 cells observed per candidate row"),
        ("exact", 20, None),
        ("halving", 40, None),
        ("lowrank", 80, None),
    ],
)
def test_approximate_mbr_warns_on_lists_too_short_for_it(tmp_path, capsys, algorithm, size, needle):
    import random

    rng = random.Random(size)
    words = "a b c d e f g h".split()
    lines = [f"{s} ||| {' '.join(rng.choices(words, k=5))} ||| F= 0 ||| 0" for s in range(2) for _ in range(size)]
    (tmp_path / "c.nbest").write_text("\n".join(lines) + "\n")
    argv = ["mbr", "--nbest", str(tmp_path / "c.nbest"), "--feature", "uniform", "--algorithm", algorithm]
    assert main(argv + ["--json", "--out", str(tmp_path / "o")]) == 0
    out, err = capsys.readouterr()
    record = json.loads(out)
    if needle is None:
        assert record["warnings"] == [] and "warning" not in err
    else:
        assert needle in record["warnings"][0] and f"rerank mbr: warning: {needle}" in err


# -- item 10: convert infers and records the beam column, or says it could not -------------------


def test_convert_records_the_column_the_lists_order_names_or_says_none(listed, capsys):
    out = listed / "c.nbest"
    assert main(["convert", str(listed / "q.nbest"), "--from", "moses", "--out", str(out)]) == 0
    assert "the beam's column is F" in capsys.readouterr().err
    record = json.loads((listed / "c.nbest.json").read_text())
    assert record["beam_feature"] == "F"
    argv = ["tune", "--nbest", str(out), "--ref", str(listed / "q.ref"), "--feature-sets", "beam", "--quiet"]
    assert main(argv + ["--out", str(listed / "w.json")]) == 0  # the beam set exists now
    (listed / "tie.nbest").write_text("0 ||| a b ||| F= -1 G= 2 ||| 0\n0 ||| a c ||| F= -2 G= 1 ||| 0\n")
    assert main(["convert", str(listed / "tie.nbest"), "--from", "moses", "--out", str(listed / "t.nbest")]) == 0
    err = capsys.readouterr().err
    assert "no signature written: the beam's column is not known (2 columns order it (F, G))" in err
    assert not (listed / "t.nbest.json").exists()


# -- item 12: sacreBLEU's --sentence-level ------------------------------------------------------


def test_eval_sentence_level_equals_sacrebleus_sentence_scores(tmp_path, capsys):
    from sacrebleu.metrics import BLEU, CHRF, TER

    refs = ["the cat sat on the mat", "a b c", "x y z w"]
    hyps = ["the cat sat on a mat", "a b", "q"]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "hyp").write_text("\n".join(hyps) + "\n")
    argv = ["eval", "--ref", str(tmp_path / "ref"), "--hyp", f"sys={tmp_path / 'hyp'}", "--metrics", "bleu,chrf,ter"]
    assert main(argv + ["--sentence-level", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["segment"] for r in rows] == [1, 2, 3] and {r["system"] for r in rows} == {"sys"}
    for row, h, r in zip(rows, hyps, refs):
        assert row["BLEU"] == pytest.approx(BLEU(effective_order=True).sentence_score(h, [r]).score, abs=1e-4)
        assert row["chrF2"] == pytest.approx(CHRF().sentence_score(h, [r]).score, abs=1e-4)
        assert row["TER"] == pytest.approx(TER().sentence_score(h, [r]).score, abs=1e-4)
    assert main(argv + ["--sentence-level"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "system\tsegment\tBLEU\tchrF2\tTER"


def test_convert_fills_the_segments_a_decoder_skipped_when_asked(tmp_path, capsys):
    (tmp_path / "gap.nbest").write_text(
        "0 ||| a ||| F= -1 ||| -1\n0 ||| b ||| F= -2 ||| -2\n3 ||| c ||| F= -1 ||| -1\n"
    )
    argv = ["convert", str(tmp_path / "gap.nbest"), "--from", "moses", "--out", str(tmp_path / "o.nbest")]
    assert main(argv) == 1
    one_line_error(capsys, "gap.nbest:3: segment id 3 follows 0", "--fill-missing SCORE")
    assert main(argv + ["--fill-missing", "-100"]) == 0
    assert "2 segment(s) the list skips filled with an empty hypothesis scored -100: 1, 2" in capsys.readouterr().err
    filled = rerank.read_nbest(str(tmp_path / "o.nbest"))
    assert filled.num_segments == 4
    assert list(filled.hypotheses) == ["a", "b", "", "", "c"]
    assert filled.features[:, 0].tolist() == [-1, -2, -100, -100, -1]


# -- item 11: the API's oracle and truncate, equal to the verbs ----------------------------------


def test_the_apis_oracle_and_truncate_equal_the_command_lines(tmp_path):
    from tests.conftest import write_split

    write_split(tmp_path, "val", 12, seed=4)
    nbest = rerank.read_nbest(str(tmp_path / "val.nbest"))
    refs = rerank.read_lines(str(tmp_path / "val.de"))
    for metric in ("bleu", "chrf"):
        argv = ["oracle", "--nbest", str(tmp_path / "val.nbest"), "--ref", str(tmp_path / "val.de")]
        assert main(argv + ["--tokenize", "none", "--metric", metric, "--out", str(tmp_path / "o")]) == 0
        assert rerank.oracle(nbest, refs, metric, tokenize="none") == rerank.read_lines(str(tmp_path / "o"))
    assert main(["truncate", "--nbest", str(tmp_path / "val.nbest"), "--size", "3", "--out", str(tmp_path / "t")]) == 0
    short = rerank.truncate(nbest, 3)
    written = rerank.read_nbest(str(tmp_path / "t"))
    assert list(short.hypotheses) == list(written.hypotheses) and (short.offsets == written.offsets).all()
    assert (short.features == written.features).all() and short.info == nbest.info
    with pytest.raises(InputError, match="size must be a positive integer"):
        rerank.truncate(nbest, 0)


# -- item 14: statements that were stale ----------------------------------------------------------


def test_the_extras_lists_name_comet_and_the_prepare_examples_their_own_option(capsys):
    import os

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for page in ("README.md", os.path.join("docs", "index.md")):
        assert "`[comet]`" in open(os.path.join(root, page), encoding="utf-8").read(), page
    with pytest.raises(SystemExit):
        main(["nmt", "prepare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag, split in (("--train", "train"), ("--valid", "valid"), ("--test", "test")):
        assert f"e.g. {flag} {split}.de.gz,{split}.en.gz" in text, flag


# -- item 9: a training text tokenised otherwise than the list is said; rerank tokenize matches it --


def test_ibm1_and_len_say_when_the_training_text_is_cased_or_untokenised_and_tokenize_fixes_it(tmp_path, capsys):
    pytest.importorskip("sacremoses")
    import random

    rng = random.Random(1)
    nouns = ["Mann", "Hund", "Frau", "Kind", "Ball", "Park", "Straße", "Haus"]
    verbs = ["läuft", "spielt", "sitzt", "steht"]
    raw_de = [f"Ein {rng.choice(nouns)} {rng.choice(verbs)} im {rng.choice(nouns)}." for _ in range(300)]
    raw_en = [f"A {k} is there, yes." for k in range(300)]
    (tmp_path / "train.de").write_text("\n".join(raw_de) + "\n")
    (tmp_path / "train.en").write_text("\n".join(raw_en) + "\n")
    hyps = ["ein mann läuft im park .", "ein hund spielt im haus .", "eine frau sitzt ."]
    (tmp_path / "c.nbest").write_text("".join(f"{k} ||| {h} ||| F= -1 ||| 0\n" for k, h in enumerate(hyps)))
    (tmp_path / "src.en").write_text("a man runs .\na dog plays .\na woman sits .\n")
    base = ["features", "add", "--nbest", str(tmp_path / "c.nbest"), "--source", str(tmp_path / "src.en")]
    for scorer in ("ibm1", "len"):
        spec = f"{scorer}:src={tmp_path / 'train.en'},tgt={tmp_path / 'train.de'}"
        assert main(base + ["--scorer", spec, "--out", str(tmp_path / f"{scorer}.nbest")]) == 0
        err = capsys.readouterr().err
        assert "the list is lowercased and the training text cased" in err, err
        assert "the training text's punctuation is glued to its words" in err and "rerank tokenize" in err
    for side, lang in (("de", "de"), ("en", "en")):
        argv = ["tokenize", "--input", str(tmp_path / f"train.{side}"), "--lang", lang]
        assert main(argv + ["--out", str(tmp_path / f"train.tok.{side}")]) == 0
    assert (tmp_path / "train.tok.de").read_text().splitlines()[0] == raw_de[0].lower()[:-1] + " ."
    spec = f"ibm1:src={tmp_path / 'train.tok.en'},tgt={tmp_path / 'train.tok.de'}"
    capsys.readouterr()
    assert main(base + ["--scorer", spec, "--out", str(tmp_path / "tok.nbest")]) == 0
    assert "warning" not in capsys.readouterr().err
