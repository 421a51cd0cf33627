"""unbabel-comet's own numbers on the tests' tiny checkpoints, for tests/core/test_comet.py.

unbabel-comet 2.2.7 pins numpy < 2 and transformers < 5: it is a peer in its own venv, never a
dependency.  Run from the repository root with rerank's python; it builds the checkpoints
(tests/comet_tiny.py, seeded) and runs this same file under the peer's python (``--peer``),
which loads each with ``comet.load_from_checkpoint`` and scores with ``model.predict`` (CPU),
then writes the scores, the token ids and the weights' digest to tests/data/comet_peer.json:

    python3 -m venv .venv-comet && .venv-comet/bin/pip install torch==2.13.0 unbabel-comet==2.2.7 'setuptools<81'
    .venv/bin/python scripts/comet_peer.py                  # --peer-python .venv-comet/bin/python

``--random N`` (issue 82) draws N configurations over unbabel-comet's option space, builds
each with its own classes over tiny XLM-R, XLM-R XL, BERT, MiniLM and RemBERT encoders, and
writes tests/data/comet_random.json (replayed by tests/core/test_comet_random.py).  RemBERT's
encoder folder holds only a SentencePiece model, which transformers 4.57 converts with
protobuf >= 7 — unbabel-comet pins protobuf < 5, with which that conversion fails — so the
peer needs ``.venv-comet/bin/pip install 'protobuf>=7'`` (pip warns about the pin; nothing
else of comet's uses protobuf here):

    .venv/bin/python scripts/comet_peer.py --random 60     # ~25 s in the peer, ~25 s replayed

The MBR rows are the utilities of every (candidate, pseudo-reference) pair of one list, as
mbrs' COMET utility computes them (the source, the candidate as ``mt``, the pseudo-reference
as ``ref``), scored by comet itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile


def peer(jobs_path: str) -> None:
    """Under unbabel-comet's python: score every job of ``jobs_path`` and print JSON."""
    import comet
    from comet import load_from_checkpoint

    with open(jobs_path, encoding="utf-8") as handle:
        jobs = json.load(handle)
    results = {}
    for name, job in jobs.items():
        model = load_from_checkpoint(os.path.join(job["dir"], "checkpoints", "model.ckpt"))
        data = [dict(zip(job["fields"], row)) for row in zip(*[job[f] for f in job["fields"]])]
        output = model.predict(data, batch_size=3, gpus=0, progress_bar=False)
        tokens = model.encoder.tokenizer(job["mt"])["input_ids"]
        results[name] = {"scores": [float(s) for s in output.scores], "mt_tokens": tokens}
        if (
            "metadata" in output and "mqm_scores" in output["metadata"]
        ):  # xCOMET: the MQM part, from its decoded error spans
            results[name]["mqm_scores"] = [float(s) for s in output.metadata.mqm_scores]
            results[name]["error_spans"] = [len(spans) for spans in output.metadata.error_spans]
    print(json.dumps({"comet_version": comet.__version__, "results": results}))


def peer_random(jobs_path: str) -> None:
    """Under unbabel-comet's python: build each drawn configuration with comet's own class
    (``load_pretrained_weights=False``: the tiny encoder's config), its weights from
    :func:`tests.comet_random.fill`, saved as comet's training saves a checkpoint (Lightning's
    ``save_checkpoint``, ``hparams.yaml`` by ``save_hparams_to_yaml``), loaded back with
    ``load_from_checkpoint`` and scored by ``predict`` in each role; prints JSON."""
    import time

    import comet
    import comet.models
    import pytorch_lightning as pl
    import torch
    from comet import load_from_checkpoint
    from pytorch_lightning.core.saving import save_hparams_to_yaml

    from tests.comet_random import CLASSES, fill, weights_digest

    with open(jobs_path, encoding="utf-8") as handle:
        jobs = json.load(handle)
    results = {}
    for name, job in jobs["configs"].items():
        out = os.path.join(jobs["work"], name)
        config = job["config"]
        record: dict = {}
        try:
            model_class = getattr(comet.models, CLASSES[config["kind"]])
            model = model_class(
                encoder_model=config["encoder_model"],
                pretrained_model=job["encoder"],
                load_pretrained_weights=False,
                local_files_only=True,
                **config["hparams"],
            )
            shapes = {k: list(v.shape) for k, v in model.state_dict().items()}
            model.load_state_dict(fill(shapes, config["seed"], config["scalars"]), strict=True)
            os.makedirs(os.path.join(out, "checkpoints"), exist_ok=True)
            trainer = pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, enable_progress_bar=False)
            trainer.strategy.connect(model)
            trainer.save_checkpoint(os.path.join(out, "checkpoints", "model.ckpt"))
            save_hparams_to_yaml(os.path.join(out, "hparams.yaml"), model.hparams)
            stored = torch.load(os.path.join(out, "checkpoints", "model.ckpt"), map_location="cpu", weights_only=False)
            with open(os.path.join(out, "hparams.yaml"), encoding="utf-8") as handle:
                record["hparams_yaml"] = handle.read()
            record["hyper_parameters"] = dict(stored["hyper_parameters"])
            record["shapes"] = shapes
            record["digest"] = weights_digest(out)
            loaded = load_from_checkpoint(os.path.join(out, "checkpoints", "model.ckpt"))
            for role, rows in job["roles"].items():
                data = [dict(zip(rows["fields"], row)) for row in zip(*[rows[f] for f in rows["fields"]])]
                started = time.perf_counter()
                try:
                    output = loaded.predict(data, batch_size=8, gpus=0, progress_bar=False)
                except Exception as error:  # comet refuses (or fails on) this role: recorded
                    record[role] = {"error": f"{type(error).__name__}: {' '.join(str(error).split())[:200]}"}
                    continue
                record[role] = {"scores": [float(s) for s in output.scores], "seconds": time.perf_counter() - started}
        except Exception as error:  # comet cannot build or load this configuration
            record["error"] = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
        results[name] = record
    print(json.dumps({"comet_version": comet.__version__, "results": results}))


def random_main(args) -> None:
    """The randomised equality test: draw, build and score in the peer, replay in rerank."""
    import shutil
    import time

    sys.path.insert(0, os.getcwd())
    from tests.comet_random import ENCODER_MARK, build_encoders, draw, replay, roles, texts

    work = tempfile.mkdtemp(prefix="comet-random-")
    encoders = build_encoders(os.path.join(work, "encoders"))
    # MiniLM: unbabel-comet reads the tokenizer of "xlm-roberta-base" from the hub cache whatever
    # the checkpoint says; a cache holding the tiny XLM-R tokenizer under that name, offline
    snapshot = os.path.join(work, "hub", "models--xlm-roberta-base", "snapshots", "0" * 40)
    shutil.copytree(encoders["XLM-RoBERTa"], snapshot, ignore=shutil.ignore_patterns("*.safetensors"))
    os.makedirs(os.path.join(work, "hub", "models--xlm-roberta-base", "refs"))
    with open(os.path.join(work, "hub", "models--xlm-roberta-base", "refs", "main"), "w") as handle:
        handle.write("0" * 40)
    src, hyp, ref = texts()
    jobs: dict = {"work": work, "configs": {}}
    for seed in range(args.seed, args.seed + args.random):
        config = draw(seed)
        jobs["configs"][f"c{seed:03d}"] = {
            "config": config,
            "encoder": encoders[config["encoder_model"]],
            "roles": roles(config, src, hyp, ref),
        }
    jobs_path = os.path.join(work, "jobs.json")
    with open(jobs_path, "w", encoding="utf-8") as handle:
        json.dump(jobs, handle)
    env = {
        **os.environ,
        "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1",  # the peer's own loader, in the peer only
        "PYTHONSAFEPATH": "1",
        "HF_HUB_CACHE": os.path.join(work, "hub"),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    command = [os.path.abspath(args.peer_python), os.path.abspath(__file__), "--peer-random", jobs_path]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    if done.returncode:
        sys.exit(f"comet_peer: the peer failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"comet_peer: the peer built and scored {args.random} configurations in {time.perf_counter() - started:.0f} s"
    )
    configs = {}
    for name, job in jobs["configs"].items():
        result = answer["results"][name]
        entry = {"config": job["config"]}
        if "error" in result:
            entry["error"] = result["error"]
        else:
            entry.update({k: result[k] for k in ("hparams_yaml", "hyper_parameters", "shapes", "digest")})
            entry["hparams_yaml"] = entry["hparams_yaml"].replace(job["encoder"], ENCODER_MARK)
            entry["hyper_parameters"] = {
                k: v.replace(job["encoder"], ENCODER_MARK) if isinstance(v, str) else v
                for k, v in entry["hyper_parameters"].items()
            }
            entry["roles"] = {role: result[role] for role in job["roles"]}
        configs[name] = entry
    record = {
        "command": f".venv/bin/python scripts/comet_peer.py --random {args.random} --seed {args.seed}",
        "peer": f"unbabel-comet {answer['comet_version']}",
        "texts": {"src": src, "hyp": hyp, "ref": ref},
        "configs": configs,
    }
    started = time.perf_counter()
    found = replay(record, os.path.join(work, "replay"))
    print(f"comet_peer: rerank replayed them in {time.perf_counter() - started:.0f} s")
    worst: dict = {}
    for name, by_role in found.items():
        kind = configs[name]["config"]["kind"]
        for role, value in by_role.items():
            key = f"{kind} {role}"
            if isinstance(value, float):
                worst[key] = max(worst.get(key, 0.0), value)
            else:
                label = f"{key} ({'MISMATCH' if value.startswith('MISMATCH') else 'refused by both'})"
                worst[label] = worst.get(label, 0) + 1
    record["worst"] = worst
    out = args.out if args.out != "tests/data/comet_peer.json" else "tests/data/comet_random.json"
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=None, ensure_ascii=False)
        handle.write("\n")
    failed = [name for name, entry in configs.items() if "error" in entry]
    for key in sorted(worst):
        print(f"  {key:50s} {worst[key]:.2e}" if isinstance(worst[key], float) else f"  {key:50s} {worst[key]}")
    print(f"comet_peer: {len(configs)} configurations ({len(failed)} comet cannot build: {', '.join(failed)}) -> {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peer-python",
        default=".venv-comet/bin/python",
        help="the peer venv's python, with unbabel-comet 2.2.7 (relative to the repository root; default "
        ".venv-comet/bin/python), e.g. --peer-python ../peer-comet/bin/python",
    )
    parser.add_argument("--out", default="tests/data/comet_peer.json", help="where the numbers go")
    parser.add_argument(
        "--random",
        type=int,
        default=0,
        metavar="N",
        help="the randomised equality test (issue 82): N configurations drawn over unbabel-comet's option "
        "space (tests/comet_random.py), built with its classes, scored by it in every role and replayed by "
        "rerank; writes tests/data/comet_random.json and prints the worst difference per class (default 0: "
        "the tiny checkpoints of tests/comet_tiny.py), e.g. --random 60",
    )
    parser.add_argument("--seed", type=int, default=1, help="the first configuration's seed (default 1)")
    parser.add_argument("--peer", metavar="JOBS", help=argparse.SUPPRESS)
    parser.add_argument("--peer-random", metavar="JOBS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer(args.peer)
        return
    if args.peer_random:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        peer_random(args.peer_random)
        return
    if args.random:
        random_main(args)
        return
    sys.path.insert(0, os.getcwd())
    from tests.comet_tiny import (
        CHECKPOINTS,
        HYPOTHESES,
        MBR_LIST,
        REFERENCES,
        SOURCES,
        build_checkpoint,
        weights_digest,
    )

    work = tempfile.mkdtemp(prefix="comet-peer-")
    jobs, digests = {}, {}
    for name, (kind, settings) in CHECKPOINTS.items():
        directory = build_checkpoint(work, name)
        digests[name] = weights_digest(directory)
        with_ref = kind in ("regression_metric", "xcomet_metric") or "ref" in settings.get("input_segments", [])
        fields = ["src", "mt", "ref"] if with_ref else ["src", "mt"]
        jobs[name] = {"dir": directory, "fields": fields, "src": SOURCES, "mt": HYPOTHESES, "ref": REFERENCES}
        if name in ("unite", "xcomet"):  # a unified model given no reference: its (mt, src) pass alone
            jobs[f"{name}-noref"] = {**jobs[name], "fields": ["src", "mt"]}
        if with_ref:  # MBR: every (candidate, pseudo-reference) pair of one list
            n = len(MBR_LIST)
            jobs[f"{name}-mbr"] = {
                "dir": directory,
                "fields": ["src", "mt", "ref"],
                "src": [SOURCES[0]] * n * n,
                "mt": [MBR_LIST[i] for j in range(n) for i in range(n)],
                "ref": [MBR_LIST[j] for j in range(n) for i in range(n)],
            }
    jobs_path = os.path.join(work, "jobs.json")
    with open(jobs_path, "w", encoding="utf-8") as handle:
        json.dump(jobs, handle)
    env = {**os.environ, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", "PYTHONSAFEPATH": "1"}
    command = [os.path.abspath(args.peer_python), os.path.abspath(__file__), "--peer", jobs_path]
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=work)
    if done.returncode:
        sys.exit(f"comet_peer: the peer failed:\n{done.stderr[-3000:]}")
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    record = {
        "command": ".venv/bin/python scripts/comet_peer.py --peer-python .venv-comet/bin/python",
        "peer": f"unbabel-comet {answer['comet_version']}",
        "digests": digests,
        "results": answer["results"],
    }
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, ensure_ascii=False)
        handle.write("\n")
    print(f"comet_peer: {len(answer['results'])} jobs -> {args.out}")


if __name__ == "__main__":
    main()
