"""unbabel-comet's own numbers on the tests' tiny checkpoints, for tests/core/test_comet.py.

unbabel-comet 2.2.7 pins numpy < 2 and transformers < 5: it is a peer in its own venv, never a
dependency.  Run from the repository root with rerank's python; it builds the checkpoints
(tests/comet_tiny.py, seeded) and runs this same file under the peer's python (``--peer``),
which loads each with ``comet.load_from_checkpoint`` and scores with ``model.predict`` (CPU),
then writes the scores, the token ids and the weights' digest to tests/data/comet_peer.json:

    python3 -m venv .venv-comet && .venv-comet/bin/pip install torch==2.13.0 unbabel-comet==2.2.7
    .venv/bin/python scripts/comet_peer.py                  # --peer-python .venv-comet/bin/python

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--peer-python",
        default=".venv-comet/bin/python",
        help="the peer venv's python, with unbabel-comet 2.2.7 (relative to the repository root; default "
        ".venv-comet/bin/python), e.g. --peer-python ../peer-comet/bin/python",
    )
    parser.add_argument("--out", default="tests/data/comet_peer.json", help="where the numbers go")
    parser.add_argument("--peer", metavar="JOBS", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        peer(args.peer)
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
