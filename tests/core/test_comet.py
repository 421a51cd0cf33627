"""COMET-family checkpoints run by rerank (rerank/metrics/comet.py) in every role, against
unbabel-comet 2.2.7's own numbers on the same tiny checkpoints (tests/comet_tiny.py).

The peer cannot share our environment (it pins numpy < 2 and transformers < 5); its numbers were
saved by the script that runs it in its own venv:

    .venv/bin/python scripts/comet_peer.py --peer-python .venv-comet/bin/python

(tests/data/comet_peer.json: comet's ``predict`` scores, its token ids and the weights' digest
of each checkpoint, so that a number is compared only with the very weights that made it)."""

import json
import os

import numpy as np
import pytest

from tests.conftest import ROOT, needs

pytestmark = needs("comet")

from rerank.cli import main  # noqa: E402
from rerank.errors import InputError  # noqa: E402
from rerank.metrics import make_metric  # noqa: E402

PEER = json.loads(open(os.path.join(ROOT, "tests", "data", "comet_peer.json"), encoding="utf-8").read())


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """name -> directory of every tiny checkpoint, checked to be the peer's very weights."""
    from tests.comet_tiny import CHECKPOINTS, build_checkpoint, weights_digest

    work = str(tmp_path_factory.mktemp("comet"))
    built = {name: build_checkpoint(work, name) for name in CHECKPOINTS}
    for name, directory in built.items():
        assert weights_digest(directory) == PEER["digests"][name], f"{name}: not the weights the peer scored"
    return built


def peer(name):
    return np.array(PEER["results"][name]["scores"])


def _write(path, lines):
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_every_checkpoint_scores_as_unbabel_comet_within_1e_5(checkpoints):
    from rerank.metrics.comet_kinds import load_comet
    from tests.comet_tiny import HYPOTHESES, REFERENCES, SOURCES

    for name, directory in checkpoints.items():
        model = load_comet(directory, device="cpu")
        assert model.tokens(HYPOTHESES) == PEER["results"][name]["mt_tokens"], name
        ours = model.score(SOURCES, HYPOTHESES, REFERENCES if model.uses_reference else None)
        assert np.abs(ours - peer(name)).max() < 1e-5, name
    # the top layer that sparsemax weighs 0 is not run (and the score is comet's all the same)
    assert len(load_comet(checkpoints["da-sparse"], device="cpu").encoder.encoder.layer) == 1
    # a unified model and xCOMET given no reference: the (mt, src) pass alone, as comet's predict without "ref"
    for name in ("unite", "xcomet"):
        model = load_comet(checkpoints[name], device="cpu")
        assert np.abs(model.score(SOURCES, HYPOTHESES, None) - peer(f"{name}-noref")).max() < 1e-5, name
    # xCOMET's MQM part: error spans decoded as comet decodes them (the tiny tagger finds some)
    xcomet = load_comet(checkpoints["xcomet"], device="cpu")
    tags = []
    xcomet.unified([xcomet.tokens(HYPOTHESES), xcomet.tokens(SOURCES)], tags)
    assert np.allclose(xcomet.mqm(tags), PEER["results"]["xcomet-noref"]["mqm_scores"], atol=1e-6)
    assert 0 < min(PEER["results"]["xcomet"]["mqm_scores"]) < 1 == max(PEER["results"]["xcomet"]["mqm_scores"])
    # the scores are not one constant: the test can tell checkpoints and sentences apart
    assert np.ptp(peer("da")) > 0.3 and np.ptp(peer("qe")) > 0.3


def test_sparsemax_is_the_projection_onto_the_simplex():
    import torch

    from rerank.metrics.comet_model import sparsemax

    # hand-computed: z = (0.9, 0.1, -0.5): tau = (0.9 + 0.1 - 1) / 2 = 0 -> (0.9, 0.1, 0)
    assert torch.allclose(sparsemax(torch.tensor([0.9, 0.1, -0.5])), torch.tensor([0.9, 0.1, 0.0]))
    # one far ahead takes all; equal weights share evenly
    assert torch.allclose(sparsemax(torch.tensor([3.0, 0.0])), torch.tensor([1.0, 0.0]))
    assert torch.allclose(sparsemax(torch.tensor([0.2, 0.2, 0.2, 0.2])), torch.full((4,), 0.25))


def test_eval_signif_and_tuning_take_comet(checkpoints, tmp_path, capsys, monkeypatch):
    from tests.comet_tiny import HYPOTHESES, REFERENCES, SOURCES

    monkeypatch.setenv("RERANK_CACHE", "off")
    src, ref = _write(tmp_path / "src.en", SOURCES), _write(tmp_path / "ref.de", REFERENCES)
    hyp = _write(tmp_path / "hyp.de", HYPOTHESES)
    other = _write(tmp_path / "other.de", REFERENCES[:2] + HYPOTHESES[2:])
    spec = f"comet:{checkpoints['da']},source={src}"
    kiwi = f"cometkiwi:{checkpoints['kiwi']},source={src}"
    argv = ["eval", "--ref", ref, "--hyp", f"a={hyp}", "--metrics", f"bleu,{spec},{kiwi}", "--json"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    scores = {(row["system"], row["metric"]): row["score"] for row in json.loads(out)}
    # the corpus score is the mean segment score: comet's system score (eval's JSON: 4 decimals)
    assert scores[("a", spec)] == round(float(peer("da").mean()), 4)
    assert scores[("a", kiwi)] == round(float(peer("kiwi").mean()), 4)
    assert main(argv[:-1]) == 0  # the text table: COMET's 0-1 scale with 4 decimals
    assert f"COMET = {peer('da').mean():.4f}" in capsys.readouterr().out
    signif = ["signif", "--ref", ref, "--baseline", hyp, "--system", f"b={other}", "--metrics", f"bleu,{spec}"]
    assert main([*signif, "--tokenize", "none", "--format", "json", "--shuffles", "200", "--resamples", "100"]) == 0
    rows = {(r["system"], r["metric"]): r for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows[("baseline", spec)]["score"] == pytest.approx(peer("da").mean(), abs=1e-5)
    assert rows[("b", spec)]["p_value"] is not None
    # the text table: a column titled COMET (not its settings), scores with 4 decimals (a 0-1 scale)
    assert main([*signif, "--tokenize", "none", "--shuffles", "200", "--resamples", "100"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["system", "BLEU", "COMET"]
    assert f"{peer('da').mean():.4f} [" in table[1]  # the baseline's COMET cell
    assert any(line.startswith("COMET: comet|model:da|class:regression_metric|") for line in table)
    # a tuning objective over an n-best list: its rows are the hypotheses' COMET, sources by segment
    lines = [
        f"{s} ||| {h} ||| NMT= -{k} L= {len(h.split())} ||| 0"
        for s in range(4)
        for k, h in enumerate([HYPOTHESES[s], REFERENCES[s]])
    ]
    nbest = _write(tmp_path / "l.nbest", lines)
    objective = f"0.5*bleu+0.5*comet:model={checkpoints['da']},source={src}"
    tune = [
        "tune",
        "--nbest",
        nbest,
        "--ref",
        ref,
        "--metric",
        objective,
        "--beam-feature",
        "NMT",
        "--tokenize",
        "none",
    ]
    assert main([*tune, "--out", str(tmp_path / "w.json")]) == 0
    assert json.loads((tmp_path / "w.json").read_text())["tuning"]["metric"] == objective
    # the statistics tuning reads, a list streamed in blocks of one segment: each block's rows
    # with its own segments' sources (comet's scores of the hypotheses, the references' own)
    import rerank.nbest.moses
    from rerank.tuning.data import load_tuning_data

    monkeypatch.setattr(rerank.nbest.moses, "BLOCK_HYPOTHESES", 2)
    _, _, rows = load_tuning_data(nbest, ref, make_metric(spec))
    assert np.allclose(rows[0::2, 0], peer("da"), atol=1e-5) and (rows[:, 1] == 1).all()
    assert rows[1, 0] != rows[3, 0]  # a reference scored against itself differs by segment (its source)


def test_mbr_utilities_are_comets_pair_scores_and_select_their_best(checkpoints, tmp_path, monkeypatch):
    from rerank.mbr import MBR
    from tests.comet_tiny import MBR_LIST, SOURCES

    n = len(MBR_LIST)
    src = _write(tmp_path / "src.en", SOURCES[:1])
    for name in ("da", "da-layer1-max", "unite", "xcomet"):
        matrix = peer(f"{name}-mbr").reshape(n, n).T  # [candidate, pseudo-reference]
        engine = MBR(f"comet:{checkpoints[name]},source={src}", feature="uniform")
        hyp, ref = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
        ours = engine.utilities(MBR_LIST, hyp, ref, np.zeros(n, dtype=np.int64)).reshape(n, n)
        assert np.abs(ours - matrix).max() < 1e-5, name
    # rerank mbr selects the candidate of the highest mean utility under comet's own numbers; the
    # list's second segment (its source SOURCES[0]) read in a block of its own: its own source
    import rerank.nbest.moses

    monkeypatch.setattr(rerank.nbest.moses, "BLOCK_HYPOTHESES", 3)
    src = _write(tmp_path / "src.en", [SOURCES[1], SOURCES[0]])
    matrix = peer("da-mbr").reshape(n, n).T
    first = ["zwei hunde .", "hunde im schnee ."]
    lines = [f"0 ||| {h} ||| NMT= -{k + 1} ||| 0" for k, h in enumerate(first)]
    _write(tmp_path / "l.nbest", lines + [f"1 ||| {h} ||| NMT= -{k + 1} ||| 0" for k, h in enumerate(MBR_LIST)])
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"comet:{checkpoints['da']},source={src}"]
    assert main([*argv, "--feature", "uniform", "--out", str(tmp_path / "best.txt")]) == 0
    assert (tmp_path / "best.txt").read_text().splitlines()[1] == MBR_LIST[int(np.argmax(matrix.mean(axis=1)))]
    # pruning takes it too (alpha 1 prunes nothing: exact MBR's selections); aggregation and centroid MBR
    # average embeddings (the tests below)
    pruned = [*argv, "--feature", "uniform", "--algorithm", "pruned", "--alpha", "1"]
    assert main([*pruned, "--out", str(tmp_path / "pruned.txt")]) == 0
    assert (tmp_path / "pruned.txt").read_text() == (tmp_path / "best.txt").read_text()
    # the mbr: feature column: expected utility under the NMT softmax, sources from --source
    p = np.exp(-np.arange(1, n + 1)) / np.exp(-np.arange(1, n + 1)).sum()
    add = ["features", "add", "--nbest", str(tmp_path / "l.nbest"), "--source", src, "--out", str(tmp_path / "f.nbest")]
    assert main([*add, "--scorer", f"mbr:comet:{checkpoints['da']}"]) == 0
    column = [float(line.split(" ||| ")[2].split("MBRCOMET= ")[1].split()[0]) for line in open(tmp_path / "f.nbest")]
    assert np.allclose(column[2:], matrix @ p, atol=1e-5)


def test_the_cometkiwi_feature_is_the_qe_score_of_source_and_hypothesis(checkpoints, tmp_path):
    from tests.comet_tiny import HYPOTHESES, SOURCES

    src = _write(tmp_path / "src.en", SOURCES)
    _write(tmp_path / "l.nbest", [f"{s} ||| {h} ||| NMT= -1 ||| 0" for s, h in enumerate(HYPOTHESES)])
    add = ["features", "add", "--nbest", str(tmp_path / "l.nbest"), "--source", src, "--out", str(tmp_path / "f.nbest")]
    for name in ("kiwi", "qe"):
        assert main([*add, "--scorer", f"cometkiwi:{checkpoints[name]}", "--device", "cpu"]) == 0
        column = [float(line.split("CometKiwi= ")[1].split()[0]) for line in open(tmp_path / "f.nbest")]
        assert np.allclose(column, peer(name), atol=1e-5), name


def test_bad_checkpoints_and_missing_inputs_are_one_line_each(checkpoints, tmp_path, capsys):
    import shutil

    import torch
    import yaml

    from tests.comet_tiny import HYPOTHESES

    hyp = _write(tmp_path / "hyp.de", HYPOTHESES)
    src = _write(tmp_path / "src.en", ["one source"] * 4)

    def refused(spec, message):
        assert main(["eval", "--ref", hyp, "--hyp", hyp, "--metrics", spec]) == 1
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err

    refused(f"comet:{tmp_path}/none,source={src}", "no such checkpoint directory")
    (tmp_path / "empty").mkdir()
    refused(f"comet:{tmp_path}/empty,source={src}", "no checkpoints/model.ckpt")
    refused(f"comet:{checkpoints['da']}", "needs the source sentences")
    refused(f"comet:{checkpoints['da']},source={_write(tmp_path / 's2', ['a'])}", "1 source sentences for 4 segments")
    refused(f"comet:{checkpoints['qe']},source={src}", "reads no reference: score it with cometkiwi")
    refused(f"cometkiwi:{checkpoints['da']},source={src}", "needs a reference: score it with comet")
    # a checkpoint that needs code to unpickle is refused, never run
    crafted = tmp_path / "crafted"
    shutil.copytree(checkpoints["da"], crafted)
    torch.save({"state_dict": {}, "hook": InputError("x")}, crafted / "checkpoints" / "model.ckpt")
    refused(f"comet:{crafted},source={src}", "not a plain weights checkpoint")
    # unknown classes (COMET's ranking models) are named, not guessed; an xCOMET without its tagger
    ranking = tmp_path / "ranking"
    shutil.copytree(checkpoints["unite"], ranking)
    hparams = yaml.safe_load((ranking / "hparams.yaml").read_text())
    (ranking / "hparams.yaml").write_text(yaml.safe_dump({**hparams, "class_identifier": "ranking_metric"}))
    refused(f"comet:{ranking},source={src}", "unknown class_identifier 'ranking_metric'")
    (ranking / "hparams.yaml").write_text(yaml.safe_dump({**hparams, "class_identifier": "xcomet_metric"}))
    refused(f"comet:{ranking},source={src}", "an xcomet_metric without hidden2tag")
    # an encoder that is not there (a hub name, nothing downloaded)
    moved = tmp_path / "moved"
    shutil.copytree(checkpoints["da"], moved)
    state = torch.load(moved / "checkpoints" / "model.ckpt", weights_only=True)
    state["hyper_parameters"]["pretrained_model"] = "xlm-roberta-nowhere"
    torch.save(state, moved / "checkpoints" / "model.ckpt")
    refused(f"comet:{moved},source={src}", "not a local directory, nor in the Hugging Face cache: give encoder=DIR")
    # the same with encoder= given loads
    assert make_metric(f"comet:{moved},source={src},encoder={os.path.dirname(checkpoints['da'])}/encoder").comet()
    # the mbr: feature without sources
    _write(tmp_path / "l.nbest", [f"0 ||| {h} ||| NMT= -1 ||| 0" for h in HYPOTHESES])
    add = ["features", "add", "--nbest", str(tmp_path / "l.nbest"), "--out", str(tmp_path / "f.nbest")]
    assert main([*add, "--scorer", f"mbr:comet:{checkpoints['da']}"]) == 1
    err = capsys.readouterr().err.strip()
    assert "MBRCOMET needs the source sentences" in err and "\n" not in err
    assert not (tmp_path / "f.nbest").exists()
    with pytest.raises(InputError, match=r"has no pairwise utility: MBR.s utilities are .*comet:DIR"):
        from rerank.mbr import MBR

        MBR(f"cometkiwi:{checkpoints['kiwi']},source={src}")


def test_the_neural_metrics_page_runs_on_tiny_checkpoints(checkpoints, tmp_path):
    """docs/usage/neural-metrics.md as written, its checkpoints tiny ones under the page's names
    (``comet-da``: a regression model, ``cometkiwi``: a unified QE model, ``bert``: BERTScore's
    encoder), the sources one line per segment; then what the page's commands wrote."""
    import shutil

    from tests.docs.test_docs import run_page
    from tests.tiny_models import build_bert

    def setup(directory):
        shutil.copytree(checkpoints["da"], directory / "comet-da")
        shutil.copytree(checkpoints["kiwi"], directory / "cometkiwi")
        build_bert(str(directory), "bert")
        for split in ("val", "test"):
            segments = len((directory / f"{split}.de").read_text().splitlines())
            _write(directory / f"{split}.en", [f"source sentence {k} of the {split} set ." for k in range(segments)])

    run_page("docs/usage/neural-metrics.md", tmp_path, setup)
    test_segments = len((tmp_path / "test.de").read_text().splitlines())
    assert len((tmp_path / "test.mbr.de").read_text().splitlines()) == test_segments
    header = (tmp_path / "test.neural.nbest").read_text().splitlines()[0].split(" ||| ")[2]
    assert "CometKiwi=" in header and "MBRCOMET=" in header
    weights = json.loads((tmp_path / "weights.neural.json").read_text())
    assert weights["tuning"]["metric"] == "0.5*bleu+0.5*comet:model=comet-da,source=val.en"
    # COMET on BLEU's 0-100 scale inside the interpolation (issue 93, item 1): half of the objective
    assert "(0-100 scale: COMET×100)" in weights["metric_signature"]
    print(
        "tuned weights:", json.dumps(weights["weights"]), weights["tuning"]["score"], weights["tuning"]["initial_score"]
    )
    assert len((tmp_path / "test.neural.de").read_text().splitlines()) == test_segments


def test_reference_aggregation_averages_comets_sentence_embeddings(checkpoints, tmp_path, capsys):
    """MBR's ``aggregate`` with a COMET regression utility (issue 80; mbrs' ``aggregate_mbr``):
    each candidate scored once against the probability-weighted mean of the pseudo-references'
    sentence embeddings, with the segment's source — by hand from the model's own embeddings
    and estimator; with one pseudo-reference it is exact MBR; a unified model is refused."""
    import torch

    from rerank.mbr import MBR
    from rerank.metrics.comet_kinds import load_comet
    from rerank.nbest import NBestList
    from tests.comet_tiny import MBR_LIST, SOURCES

    n = len(MBR_LIST)
    src = _write(tmp_path / "src.en", SOURCES[:1])
    nbest = NBestList(np.array([0, n]), list(MBR_LIST), -np.arange(n, dtype=float).reshape(n, 1), ["NMT"])
    p = np.exp(-np.arange(n)) / np.exp(-np.arange(n)).sum()
    engine = MBR(f"comet:{checkpoints['da']},source={src}", decoder="aggregate")
    engine.begin_list(0)
    ours = engine.expected(nbest, nbest, p)
    model = load_comet(checkpoints["da"], device="cpu")
    embeddings = model.embed(MBR_LIST + [SOURCES[0]])
    mean = torch.as_tensor(p, dtype=torch.float32).reshape(1, -1) @ embeddings[:n]
    by_hand = model.estimate(embeddings[-1:].expand(n, -1), embeddings[:n], mean.expand(n, -1))
    assert np.allclose(ours, by_hand, atol=1e-6) and np.ptp(ours) > 1e-3
    # one pseudo-reference per segment: the aggregate is that reference, the utility exact COMET
    one = NBestList(np.array([0, 1]), [MBR_LIST[1]], np.zeros((1, 1)), ["NMT"])
    exact = MBR(f"comet:{checkpoints['da']},source={src}", decoder="exact")
    exact.begin_list(0)
    assert np.allclose(engine.expected(nbest, one, np.ones(1)), exact.expected(nbest, one, np.ones(1)), atol=1e-6)
    # rerank mbr --algorithm aggregate selects the candidate of the highest aggregate utility
    lines = [f"0 ||| {h} ||| NMT= {-float(k)} ||| 0" for k, h in enumerate(MBR_LIST)]
    _write(tmp_path / "l.nbest", lines)
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"comet:{checkpoints['da']},source={src}"]
    assert main([*argv, "--algorithm", "aggregate", "--out", str(tmp_path / "best.txt")]) == 0
    assert (tmp_path / "best.txt").read_text() == MBR_LIST[int(np.argmax(by_hand))] + "\n"
    # a unified model encodes pairs jointly: no embedding to average, one line
    unite = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"comet:{checkpoints['unite']},source={src}"]
    assert main([*unite, "--algorithm", "aggregate", "--out", str(tmp_path / "u.txt")]) == 1
    assert "encodes each pair jointly and has none: use --algorithm exact" in capsys.readouterr().err


def test_centroid_mbr_clusters_comets_sentence_embeddings(checkpoints, tmp_path, capsys):
    """MBR's ``centroid`` with a COMET regression utility (issue 80; mbrs' ``centroid_mbr``):
    the pseudo-references' sentence embeddings clustered by weighted k-means, each candidate
    scored against every centroid (the weighted mean of its cluster's embeddings) and the
    scores weighed by the clusters' mass — by hand from scikit-learn's labels and the model's
    own embeddings and estimator; one cluster is reference aggregation, as many as
    pseudo-references exact MBR; a unified model is refused."""
    pytest.importorskip("sklearn")
    import torch
    from sklearn.cluster import KMeans

    from rerank.mbr import MBR
    from rerank.metrics.comet_kinds import load_comet
    from rerank.nbest import NBestList
    from tests.comet_tiny import MBR_LIST, SOURCES

    n = len(MBR_LIST)
    src = _write(tmp_path / "src.en", SOURCES[:1])
    spec = f"comet:{checkpoints['da']},source={src}"
    nbest = NBestList(np.array([0, n]), list(MBR_LIST), -np.arange(n, dtype=float).reshape(n, 1), ["NMT"])
    p = np.exp(-np.arange(n) / 2) / np.exp(-np.arange(n) / 2).sum()
    model = load_comet(checkpoints["da"], device="cpu")
    embeddings = model.embed(MBR_LIST + [SOURCES[0]])
    distinct = len(set(MBR_LIST))
    k = min(3, distinct)
    labels = KMeans(n_clusters=k, n_init=1, random_state=0).fit(embeddings[:n].numpy(), sample_weight=p).labels_
    labels = np.unique(labels, return_inverse=True)[1].reshape(-1)
    by_hand = np.zeros(n)
    for c in range(labels.max() + 1):
        members = labels == c
        mass = p[members].sum()
        centroid = torch.as_tensor(p[members] / mass, dtype=torch.float32).reshape(1, -1) @ embeddings[:n][members]
        by_hand += mass * model.estimate(embeddings[-1:].expand(n, -1), embeddings[:n], centroid.expand(n, -1))
    ours = {}
    for decoder in ("centroid", "aggregate", "exact"):
        from rerank.mbr.decoders import make_decoder

        engine = MBR(spec, decoder=make_decoder(decoder, clusters=k if decoder == "centroid" else 1))
        engine.begin_list(0)
        ours[decoder] = engine.expected(nbest, nbest, p)
    assert np.allclose(ours["centroid"], by_hand, atol=1e-5) and np.ptp(by_hand) > 1e-3
    one = MBR(spec, decoder=make_decoder("centroid", clusters=1))
    one.begin_list(0)
    assert np.allclose(one.expected(nbest, nbest, p), ours["aggregate"], atol=1e-5)
    many = MBR(spec, decoder=make_decoder("centroid", clusters=n))
    many.begin_list(0)
    assert np.allclose(many.expected(nbest, nbest, p), ours["exact"], atol=1e-5)
    lines = [f"0 ||| {h} ||| NMT= {-float(k)} ||| 0" for k, h in enumerate(MBR_LIST)]
    _write(tmp_path / "l.nbest", lines)
    unite = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"comet:{checkpoints['unite']},source={src}"]
    assert main([*unite, "--algorithm", "centroid", "--out", str(tmp_path / "u.txt")]) == 1
    assert "mbr: centroid averages sentence embeddings" in capsys.readouterr().err


def test_comet_mbr_records_its_encoders_and_estimators_work(checkpoints, tmp_path, capsys):
    """MBR's record (--json) and closing line say what COMET did inside "utilities" (issue 80's
    per-stage counters): every distinct text and source encoded once; the estimator on every
    (candidate, pseudo-reference) pair in exact MBR, on one row a candidate with the aggregate."""
    import json

    from tests.comet_tiny import MBR_LIST, SOURCES

    first = ["zwei hunde .", "hunde im schnee .", "zwei hunde ."]  # a repeated text: encoded once
    lines = [f"0 ||| {h} ||| NMT= -{k + 1} ||| 0" for k, h in enumerate(first)]
    _write(tmp_path / "l.nbest", lines + [f"1 ||| {h} ||| NMT= -{k + 1} ||| 0" for k, h in enumerate(MBR_LIST)])
    src = _write(tmp_path / "src.en", [SOURCES[1], SOURCES[0]])
    argv = ["mbr", "--nbest", str(tmp_path / "l.nbest"), "--metric", f"comet:{checkpoints['da']},source={src}"]
    argv += ["--feature", "uniform", "--out", str(tmp_path / "best.txt"), "--json"]
    encoded = len(set(first)) + len(set(MBR_LIST)) + 2  # the distinct texts and the two sources
    for algorithm, rows in (("exact", 2 * 2 + len(MBR_LIST) ** 2), ("aggregate", len(first) + len(MBR_LIST))):
        capsys.readouterr()
        assert main([*argv, "--algorithm", algorithm]) == 0
        captured = capsys.readouterr()
        work = json.loads(captured.out)["utility"]
        assert work["counts"] == {"encoder": encoded, "estimator": rows}, algorithm
        assert set(work["seconds"]) == {"encoder", "estimator"} and work["load_seconds"] > 0
        assert f"encoder {encoded:,} in " in captured.err and f"estimator {rows:,} in " in captured.err
    # an n-gram utility has no parts of its own: no "utility" in its record
    assert main([*argv[:4], "chrf", *argv[5:]]) == 0
    assert "utility" not in json.loads(capsys.readouterr().out)


def test_the_api_takes_sources_as_a_list_or_a_path_in_mbr_and_features(checkpoints, tmp_path):
    import rerank
    from tests.comet_tiny import HYPOTHESES, MBR_LIST, SOURCES

    src = _write(tmp_path / "src.en", SOURCES[:1])
    nbest = rerank.NBestList([0, len(MBR_LIST)], list(MBR_LIST), np.zeros((len(MBR_LIST), 0)), [])
    utility = f"comet:{checkpoints['da']}"
    own = rerank.mbr_decode(nbest, f"{utility},source={src}", weights_from="uniform")
    for given in (src, tmp_path / "src.en", SOURCES[:1]):
        picked = rerank.mbr_decode(nbest, utility, weights_from="uniform", sources=given)
        assert picked.picks == own.picks
    with pytest.raises(InputError, match="give one of them"):
        rerank.mbr_decode(nbest, f"{utility},source={src}", weights_from="uniform", sources=SOURCES[:1])
    with pytest.raises(InputError, match="reads no source sentences"):
        rerank.mbr_decode(nbest, "chrf", weights_from="uniform", sources=SOURCES[:1])
    listed = rerank.NBestList(np.arange(len(HYPOTHESES) + 1), list(HYPOTHESES), np.zeros((len(HYPOTHESES), 0)), [])
    by_path = rerank.add_features(
        listed, [f"cometkiwi:{checkpoints['kiwi']}"], sources=_write(tmp_path / "all.en", SOURCES)
    )
    by_list = rerank.add_features(listed, [f"cometkiwi:{checkpoints['kiwi']}"], sources=list(SOURCES))
    np.testing.assert_array_equal(by_path.features, by_list.features)
    assert np.allclose(by_path.features[:, 0], peer("kiwi"), atol=1e-5)
    with pytest.raises(InputError, match="sources: no such file"):
        rerank.add_features(listed, [f"cometkiwi:{checkpoints['kiwi']}"], sources=str(tmp_path / "absent.en"))


def test_int8_quantises_the_encoders_linear_layers_and_stays_near_comets_scores(checkpoints, tmp_path):
    """``dtype=int8``: every linear layer of the encoder dynamically quantised (the estimator
    and the layer mix stay float32), scores near unbabel-comet's float32 ones but not equal to
    them, the signature saying so; the same through the MBR utility and the CometKiwi feature."""
    import torch

    from rerank.metrics.comet_kinds import load_comet
    from tests.comet_tiny import HYPOTHESES, REFERENCES, SOURCES

    for name in ("da", "unite", "kiwi"):
        model = load_comet(checkpoints[name], device="cpu", dtype="int8")
        linear = [m for m in model.encoder.modules() if type(m).__name__ == "Linear"]
        assert linear and all(type(m).__module__ == "torch.ao.nn.quantized.dynamic.modules.linear" for m in linear)
        assert all(isinstance(m, torch.nn.Linear) for m in model.estimator.modules() if "Linear" in type(m).__name__)
        ours = model.score(SOURCES, HYPOTHESES, REFERENCES if model.uses_reference else None)
        difference = np.abs(ours - peer(name))
        assert 0 < difference.max() < 1e-3, (name, difference.max())
    src = _write(tmp_path / "src.en", SOURCES)
    metric = make_metric(f"comet:{checkpoints['da']},source={src},dtype=int8")
    assert "|dtype:int8|" in str(metric.signature())
    assert "dtype" not in str(make_metric(f"comet:{checkpoints['da']},source={src}").signature())
    _write(tmp_path / "l.nbest", [f"{s} ||| {h} ||| NMT= -1 ||| 0" for s, h in enumerate(HYPOTHESES)])
    add = ["features", "add", "--nbest", str(tmp_path / "l.nbest"), "--source", src, "--out", str(tmp_path / "f.nbest")]
    assert main([*add, "--scorer", f"cometkiwi:{checkpoints['kiwi']},dtype=int8", "--device", "cpu"]) == 0
    column = np.array([float(line.split("CometKiwi= ")[1].split()[0]) for line in open(tmp_path / "f.nbest")])
    assert 0 < np.abs(column - peer("kiwi")).max() < 1e-3
