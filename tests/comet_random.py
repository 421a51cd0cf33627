"""Randomised COMET checkpoints for the equality test of issue 82 (scripts/comet_peer.py
``--random N`` and tests/core/test_comet_random.py): hyper-parameters drawn over unbabel-comet
2.2.7's option space, checkpoints built by its own classes in the peer venv, and every number
replayed by rerank from the record the peer run leaves (tests/data/comet_random.json).

A checkpoint is a function of what the record holds: ``hparams.yaml``'s text, the
``hyper_parameters`` the checkpoint stores, its state dict's keys and shapes (as comet's class
made them) and a seed — every float tensor is drawn by :func:`fill` from that seed in key
order (comet's own initialisation order is not reproducible outside its classes; a trained
checkpoint's weights are arbitrary too).  :func:`weights_digest` of both sides must agree.

This module is imported by the peer's python too (torch, no rerank, no transformers at import).
"""

import hashlib
import os
import random
import shutil

#: the encoders unbabel-comet 2.2.7 builds (``comet/encoders/__init__.py``)
ENCODER_KINDS = ("XLM-RoBERTa", "XLM-RoBERTa-XL", "BERT", "MiniLM", "RemBERT")
#: the classes drawn, with unbabel-comet's class names
CLASSES = {
    "regression_metric": "RegressionMetric",
    "referenceless_regression_metric": "ReferencelessRegression",
    "unified_metric": "UnifiedMetric",
    "xcomet_metric": "XCOMETMetric",
}
#: the tiny encoders' sizes (positions: 66, so that 64 subwords are usable and edge texts overflow)
SIZES = dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=2, intermediate_size=48)
MAX_POSITIONS = 66
ACTIVATIONS = ("Tanh", "Sigmoid", "Softplus", "Hardtanh", "Mish", "Identity")
#: texts that break naive code: empty, blank, special-token strings of every encoder, a
#: sentence over the usable length, other scripts, emoji, a duplicate
EDGE_HYPOTHESES = [
    "",
    "   ",
    "ein <pad> mann <pad> .",
    "<s> </s> <mask> <unk> [PAD] [CLS] [SEP] [MASK]",
    " ".join(["ein mann fährt fahrrad durch die stadt ."] * 30),
    "一个男人骑自行车。",
    "رجل يركب دراجة",
    "ein mann 🚲 fährt .",
    "ein mann fährt fahrrad .",
]
EDGE_SOURCES = [
    "a man rides a bike .",
    "",
    "a <pad> man .",
    "[SEP] a man </s></s> rides .",
    " ".join(["a man rides a bike through the city ."] * 30),
    "a man rides a bike .",
    "a man rides a bike .",
    "a man 🚲 rides .",
    "a man rides a bike .",
]
EDGE_REFERENCES = [
    "ein mann fährt fahrrad .",
    "ein mann fährt fahrrad .",
    "",
    "ein mann <pad> fährt <pad>",
    "ein mann fährt fahrrad .",
    " ".join(["ein mann fährt fahrrad ."] * 40),
    "ein mann fährt fahrrad .",
    "ein mann 🚲 fährt .",
    "ein mann fährt fahrrad .",
]


def texts(count: int = 100):
    """(sources, hypotheses, references): ``count`` Multi30k test pairs (the hypothesis: the
    next segment's reference with a word dropped, a cheap system), then the edge cases."""
    import gzip

    raw = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data")
    raw = os.path.join(raw, "multi30k", "task1", "raw")
    with gzip.open(os.path.join(raw, "test_2016_flickr.en.gz"), "rt", encoding="utf-8") as handle:
        src = [next(handle).strip() for _ in range(count)]
    with gzip.open(os.path.join(raw, "test_2016_flickr.de.gz"), "rt", encoding="utf-8") as handle:
        ref = [next(handle).strip() for _ in range(count)]
    hyp = [" ".join(r.split()[: max(1, len(r.split()) - 1 - k % 3)]) for k, r in enumerate(ref)]
    hyp = [hyp[k] if k % 4 else ref[(k + 1) % count] for k in range(count)]
    return src + EDGE_SOURCES, hyp + EDGE_HYPOTHESES, ref + EDGE_REFERENCES


#: one MBR list (its source: the first source): candidates with a duplicate and an empty one
MBR_LIST = ["ein mann fährt fahrrad .", "ein mann fährt ein fahrrad .", "ein mann .", "", "ein mann ."]


def _sp_vocab(directory: str):
    """(pieces with scores) of a SentencePiece model trained on Multi30k text (300 pieces)."""
    import sentencepiece as spm

    from tests.tiny_models import train_sentencepiece

    model_file = train_sentencepiece(directory, "random-sp")
    sp = spm.SentencePieceProcessor(model_file=model_file)
    return model_file, [(sp.id_to_piece(i), float(sp.get_score(i))) for i in range(3, sp.get_piece_size())]


def build_encoders(directory: str) -> dict:
    """``directory/encoder-KIND`` for every kind of :data:`ENCODER_KINDS`: a random tiny model
    (:data:`SIZES`, seeded) with its tokenizer, saved by transformers (rerank's side): XLM-R
    and XLM-R XL over one XLM-R tokenizer (<s>=0 <pad>=1 </s>=2 <unk>=3); BERT with a WordPiece
    tokenizer from the same pieces ([PAD]=0); MiniLM a BERT model with the XLM-R tokenizer (as
    unbabel-comet pairs them); RemBERT (input embeddings 16 wide) with its SentencePiece
    model alone (:func:`_rembert_tokenizer`).  Returns kind -> directory."""
    import torch
    import transformers

    transformers.utils.logging.disable_progress_bar()
    os.makedirs(directory, exist_ok=True)
    _, pieces = _sp_vocab(directory)
    xlmr_vocab = [("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0)] + pieces + [("<mask>", 0.0)]
    xlmr = transformers.XLMRobertaTokenizer(vocab=xlmr_vocab)
    wordpiece = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    for piece, _ in pieces:
        word = piece[1:] if piece.startswith("\u2581") else "##" + piece
        if word and word not in wordpiece:
            wordpiece.append(word)
    for char in "abcdefghijklmnopqrstuvwxyzäöüß.,":
        for token in (char, "##" + char):
            if token not in wordpiece:
                wordpiece.append(token)
    bert = transformers.BertTokenizer(vocab={t: i for i, t in enumerate(wordpiece)})
    common = dict(SIZES, max_position_embeddings=MAX_POSITIONS)
    builds = {
        "XLM-RoBERTa": (
            transformers.XLMRobertaConfig,
            "XLMRobertaModel",
            xlmr,
            dict(pad_token_id=1, type_vocab_size=1),
        ),
        "XLM-RoBERTa-XL": (transformers.XLMRobertaXLConfig, "XLMRobertaXLModel", xlmr, dict(pad_token_id=1)),
        "BERT": (transformers.BertConfig, "BertModel", bert, dict(pad_token_id=0)),
        "MiniLM": (transformers.BertConfig, "BertModel", xlmr, dict(pad_token_id=1)),
        "RemBERT": (
            transformers.RemBertConfig,
            "RemBertModel",
            None,
            dict(pad_token_id=0, bos_token_id=2, eos_token_id=3, input_embedding_size=16, output_embedding_size=16),
        ),
    }
    out = {}
    for seed, (kind, (config_class, model_class, tokenizer, extra)) in enumerate(builds.items()):
        path = os.path.join(directory, f"encoder-{kind}")
        out[kind] = path
        if os.path.isfile(os.path.join(path, "config.json")):
            continue
        vocab_size = len(tokenizer) if tokenizer is not None else _rembert_tokenizer(directory, path)
        config = config_class(vocab_size=vocab_size, **common, **extra)
        torch.manual_seed(seed)
        getattr(transformers, model_class)(config).save_pretrained(path)
        if tokenizer is not None:
            tokenizer.model_max_length = MAX_POSITIONS - 2
            tokenizer.save_pretrained(path)
    return out


def _rembert_tokenizer(directory: str, out: str) -> int:
    """``out``: RemBERT's tokenizer as google/rembert ships it — ``sentencepiece.model`` (a
    model trained here with <pad>=0 <unk>=1 [CLS]=2 [SEP]=3 [MASK]=4) and
    ``tokenizer_config.json``, no ``tokenizer.json`` (each library converts the SentencePiece
    model itself).  Returns the vocabulary size."""
    import json

    import sentencepiece as spm

    from tests.tiny_models import train_sentencepiece

    model_file = train_sentencepiece(
        directory,
        "rembert-sp",
        pad_id=0,
        unk_id=1,
        bos_id=-1,
        eos_id=-1,
        user_defined_symbols=["[CLS]", "[SEP]", "[MASK]"],
    )
    os.makedirs(out, exist_ok=True)
    shutil.copy(model_file, os.path.join(out, "sentencepiece.model"))
    settings = {
        "tokenizer_class": "RemBertTokenizer",
        "do_lower_case": False,
        "remove_space": True,
        "keep_accents": True,
        "bos_token": "[CLS]",
        "eos_token": "[SEP]",
        "unk_token": "<unk>",
        "sep_token": "[SEP]",
        "pad_token": "<pad>",
        "cls_token": "[CLS]",
        "mask_token": "[MASK]",
        "model_max_length": MAX_POSITIONS - 2,
    }
    with open(os.path.join(out, "tokenizer_config.json"), "w", encoding="utf-8") as handle:
        json.dump(settings, handle, indent=1)
    return spm.SentencePieceProcessor(model_file=model_file).get_piece_size()


def draw(seed: int) -> dict:
    """One configuration over unbabel-comet 2.2.7's option space, from ``seed``: class,
    encoder, layer (a mix: softmax or sparsemax, with or without layer norm, sometimes with the
    top layers weighted 0; or one fixed layer, 0 the embeddings), pooling (regression), the
    estimator's hidden sizes and activations, a final activation, the input segments (unified:
    every subset with mt, in any order), word-level training (unified).  Returns
    ``{"kind", "encoder_model", "hparams" (the class's keyword arguments), "scalars"}``."""
    rng = random.Random(seed)
    kind = rng.choice(list(CLASSES))
    encoder = rng.choice(ENCODER_KINDS)
    layers = SIZES["num_hidden_layers"] + 1
    hparams: dict = {
        "hidden_sizes": [rng.choice([8, 16, 24]) for _ in range(rng.choice([1, 2, 3]))],
        "activations": rng.choice(ACTIVATIONS),
        "final_activation": rng.choice([None, None, "Sigmoid", "Tanh"]),
        "dropout": 0.1,
    }
    mix = rng.random() < 0.6
    layer = "mix" if mix else rng.randrange(layers)
    if mix:
        hparams["layer_transformation"] = rng.choice(["softmax", "sparsemax"])
        hparams["layer_norm"] = rng.random() < 0.4
    scalars = [round(rng.gauss(0, 0.6), 4) for _ in range(layers)]
    if mix and hparams["layer_transformation"] == "sparsemax" and rng.random() < 0.5:
        top = rng.randrange(layers)  # sparsemax weighs every layer above ``top`` 0
        scalars = [2.0 if k == top else (-3.0 if k > top else scalars[k]) for k in range(layers)]
    if kind in ("unified_metric", "xcomet_metric"):
        hparams["sent_layer"] = layer
        if kind == "unified_metric":
            segments = rng.choice([["mt", "src"], ["mt", "ref"], ["mt", "src", "ref"]])
            rng.shuffle(segments)
            hparams["input_segments"] = segments
            hparams["word_level_training"] = rng.random() < 0.3
        if kind == "xcomet_metric" or hparams["word_level_training"]:
            hparams["word_layer"] = rng.randrange(layers)
    else:
        hparams["layer"] = layer
        pools = ["avg", "max", "cls"] + (["default"] if encoder != "BERT" else [])
        hparams["pool"] = rng.choice(pools)
    if kind == "xcomet_metric":
        hparams["layer_transformation"] = hparams.get("layer_transformation", "sparsemax")
    return {"kind": kind, "encoder_model": encoder, "hparams": hparams, "scalars": scalars, "seed": seed}


def fill(shapes: dict, seed: int, scalars=None) -> dict:
    """The state dict of ``shapes`` (key -> shape, float32) drawn from ``seed`` in key order:
    norm weights 1 + N(0, 0.1), biases N(0, 0.1), the layer mix's scalars ``scalars`` (gamma
    1 + N(0, 0.3)), every other weight N(0, 0.15)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    state = {}
    for key in sorted(shapes):
        shape = tuple(shapes[key])
        noise = torch.randn(shape, generator=generator)
        if key.startswith("layerwise_attention.scalar_parameters.") and scalars is not None:
            value = torch.full(shape, float(scalars[int(key.rsplit(".", 1)[1])]))
        elif key == "layerwise_attention.gamma":
            value = 1 + 0.3 * noise
        elif ("LayerNorm" in key or "layer_norm" in key.lower()) and key.endswith("weight"):
            value = 1 + 0.1 * noise
        elif key.endswith("bias"):
            value = 0.1 * noise
        else:
            value = 0.15 * noise
        state[key] = value.float()
    return state


def write_checkpoint(out: str, state: dict, hyper_parameters: dict, hparams_yaml: str) -> str:
    """``out/checkpoints/model.ckpt`` (state_dict, hyper_parameters, as Lightning saves them)
    and ``out/hparams.yaml`` (its text as comet wrote it)."""
    import torch

    os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
    checkpoint = {"state_dict": state, "hyper_parameters": hyper_parameters, "epoch": 0, "global_step": 0}
    torch.save(checkpoint, os.path.join(out, "checkpoints", "model.ckpt"))
    with open(os.path.join(out, "hparams.yaml"), "w", encoding="utf-8") as handle:
        handle.write(hparams_yaml)
    return out


def weights_digest(checkpoint_dir: str) -> str:
    """SHA-256 (16 hex digits) of the checkpoint's tensors in key order: equal digests, equal weights."""
    import torch

    state = torch.load(os.path.join(checkpoint_dir, "checkpoints", "model.ckpt"), weights_only=True)["state_dict"]
    digest = hashlib.sha256()
    for key in sorted(state):
        digest.update(key.encode() + state[key].float().numpy().tobytes())
    return digest.hexdigest()[:16]


#: where the record puts the encoder's directory (the peer's temporary one is not kept)
ENCODER_MARK = "@ENCODER@"


def roles(config: dict, src, hyp, ref) -> dict:
    """The rows unbabel-comet scores for one configuration, by role: ``metric`` (src, mt, ref)
    for a model that reads references; ``qe`` (src, mt) for one that reads the source; ``mbr``
    every (candidate, pseudo-reference) pair of :data:`MBR_LIST` with the first source (as
    mbrs' COMET utility), where references are read."""
    kind, segments = config["kind"], config["hparams"].get("input_segments", ["mt", "src", "ref"])
    out = {}
    if kind != "referenceless_regression_metric" and "ref" in segments:
        out["metric"] = {"fields": ["src", "mt", "ref"], "src": src, "mt": hyp, "ref": ref}
        n = len(MBR_LIST)
        out["mbr"] = {
            "fields": ["src", "mt", "ref"],
            "src": [src[0]] * n * n,
            "mt": [MBR_LIST[i] for i in range(n) for _ in range(n)],
            "ref": [MBR_LIST[j] for _ in range(n) for j in range(n)],
        }
    if kind != "regression_metric" and "src" in segments:  # rerank refuses QE without a source (docs)
        out["qe"] = {"fields": ["src", "mt"], "src": src, "mt": hyp}
    return out


def rebuild(entry: dict, out: str, encoder: str) -> str:
    """The checkpoint of a record's ``entry`` in ``out``, its encoder at ``encoder``: the very
    weights the peer scored (:func:`weights_digest` checked by the caller)."""

    def placed(value):
        if isinstance(value, str):
            return value.replace(ENCODER_MARK, encoder)
        return value

    hyper = {k: placed(v) for k, v in entry["hyper_parameters"].items()}
    state = fill(entry["shapes"], entry["config"]["seed"], entry["config"]["scalars"])
    return write_checkpoint(out, state, hyper, placed(entry["hparams_yaml"]))


def replay(record: dict, work: str, names=None) -> dict:
    """Every configuration of ``record`` (tests/data/comet_random.json) rebuilt and scored by
    rerank in each role, against comet's numbers: returns name -> {role: max |difference|}
    (or ``"refused: …"`` where both refuse; ``"MISMATCH: …"`` where one refuses what the other
    scores).
    Roles: ``metric`` (``comet:`` statistics at batch 64; at batch 3 in reverse order; the
    tuning rows ``hypothesis_stats`` of a shuffled segment order), ``qe`` (``cometkiwi:``
    statistics; the ``cometkiwi:`` feature at batch 3), ``mbr`` (MBR's pair utilities)."""
    import numpy as np

    from rerank.errors import InputError
    from rerank.features.quality import CometKiwiScorer
    from rerank.mbr import MBR
    from rerank.metrics import make_metric

    encoders = build_encoders(os.path.join(work, "encoders"))
    src, hyp, ref = record["texts"]["src"], record["texts"]["hyp"], record["texts"]["ref"]
    src_file = os.path.join(work, "src.txt")
    with open(src_file, "w", encoding="utf-8") as handle:
        handle.write(src[0] + "\n")
    order = np.random.default_rng(0).permutation(len(hyp))
    results = {}
    for name, entry in record["configs"].items():
        if names is not None and name not in names or "error" in entry:
            continue
        directory = rebuild(entry, os.path.join(work, name), encoders[entry["config"]["encoder_model"]])
        assert weights_digest(directory) == entry["digest"], f"{name}: not the weights the peer scored"
        found = {}
        for role, peer in entry["roles"].items():
            try:
                found[role] = _role(
                    role, directory, src, hyp, ref, order, src_file, peer, make_metric, MBR, CometKiwiScorer
                )
            except InputError as error:
                message = " ".join(str(error).split())
                found[role] = f"refused: {message}" if "error" in peer else f"MISMATCH: rerank refuses: {message}"
                continue
            if "error" in peer:
                found[role] = f"MISMATCH: rerank scores what comet refuses ({peer['error']})"
        results[name] = found
    return results


def _role(role, directory, src, hyp, ref, order, src_file, peer, make_metric, MBR, CometKiwiScorer) -> float:
    """The largest |rerank − comet| of one role (:func:`replay`)."""
    import numpy as np

    if role == "mbr":
        n = len(MBR_LIST)
        engine = MBR(f"comet:{directory},source={src_file},device=cpu", feature="uniform")
        hyp_index, ref_index = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
        ours = engine.utilities(MBR_LIST, hyp_index, ref_index, np.zeros(n, dtype=np.int64))
        return float(np.abs(ours - np.array(peer["scores"])).max())
    wanted = np.array(peer.get("scores", [np.nan] * len(hyp)))
    if role == "metric":
        first = make_metric(f"comet:{directory},device=cpu").with_sources(src).stats(hyp, ref)[:, 0]
        back = make_metric(f"comet:{directory},batch=3,device=cpu").with_sources(src[::-1])
        reverse = back.stats(hyp[::-1], ref[::-1])[::-1, 0]
        tuning = make_metric(f"comet:{directory},batch=5,device=cpu").with_sources(src)
        rows = tuning.hypothesis_stats([hyp[k] for k in order], ref, order, None)[:, 0]
        return float(
            max(np.abs(first - wanted).max(), np.abs(reverse - wanted).max(), np.abs(rows - wanted[order]).max())
        )
    first = (
        make_metric(f"cometkiwi:{directory},device=cpu").with_sources(src).stats(hyp, ref)[:, 0]
    )  # references unread

    class Lists:  # the n-best shape the feature reads: one hypothesis per segment, shuffled
        hypotheses = [hyp[k] for k in order]
        segment = order
        num_segments = len(hyp)

    feature = CometKiwiScorer(CometKiwiScorer.Config(model=directory, batch=3))
    column = feature.score(Lists, src, None)["CometKiwi"]
    return float(max(np.abs(first - wanted).max(), np.abs(column - wanted[order]).max()))
