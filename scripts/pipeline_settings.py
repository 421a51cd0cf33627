#!/usr/bin/env python3
"""Write a pipeline run's settings (and library versions) to ``OUT/settings.json``, or
refuse, before any work, when ``OUT`` already holds a run whose settings differ in one that
decides what a skipped stage's output would contain.

The pipelines (``run_pipeline.sh``) skip every stage whose output exists, so a second run
in the same ``OUT`` with, say, ``NBEST=50`` or ``ARCH=transformer-tiny`` would otherwise
reuse the first run's 20-best lists and models and report them as the new configuration:
a silently merged result.  Settings that only add or drop stages or change how fast they
run (``ADDITIVE``) may change between sittings.

    python scripts/pipeline_settings.py OUT/settings.json NBEST=20 ARCH=gru ...

Exit status 1 with one line naming the file and the first differing setting; a
``settings.json`` that is not one of ours is refused the same way.
"""

import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Dict, List

#: settings that may differ between sittings in one OUT: the number of processes, which
#: tuners run, whether the chrF-tuned row is added, how many tuning replicas (added rows or
#: seeds; none changes an existing output)
ADDITIVE = ("JOBS", "TUNERS", "CHRF_TUNING", "REPLICAS")


def _feature_sets() -> ModuleType:
    """workflow/settings/feature_sets.py, the feature sets' table, loaded on its own: it is pure
    Python, and this script runs on pythons without PyYAML (which the settings package needs)."""
    path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "workflow", "settings", "feature_sets.py"
    )
    spec = importlib.util.spec_from_file_location("rerank_workflow_feature_sets", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_TABLE = _feature_sets()
LEGACY_SETS, NAMES, OPT_IN_SETS = _TABLE.LEGACY_SETS, _TABLE.NAMES, _TABLE.OPT_IN_SETS

#: run_pipeline.sh's feature sets (FEATURES), in the order of their columns
ALL_FEATURES = NAMES
#: what a pipeline computed before FEATURES was recorded (the GRU system's sets then)
PAPER_FEATURES = LEGACY_SETS
#: the sets FEATURES=all leaves out
OPT_IN = OPT_IN_SETS


def recorded_later(previous: Dict[str, str]) -> Dict[str, str]:
    """What an older pipeline, which did not record them, did for the settings added later:
    ``FEATURES`` (every feature set; without ``l2r2`` when ``L2R2=0``); the translation
    models' batch size and schedule (``MAX_TOKENS`` 4000, ``LR`` and ``WARMUP`` the
    architecture's), their precision (``BF16_AUTOCAST`` 0: float32), the baseline's list
    alone (``R2L_NBEST`` 0: no union with the R2L model's own list) and the tuning metric
    (``TUNE_METRIC`` bleu), the direction (``SRC`` en, ``TGT`` de) and the corpus (Multi30k:
    ``TRAIN``, ``VALID``, ``TEST`` empty), the baseline (``GENERATOR`` train; ``MAX_LENGTH``
    256, which only a generator of one's own reads), the lowercased text (``LOWERCASE`` 1), no
    QE checkpoint (``QE_CHECKPOINT`` empty), the right-to-left and channel models trained here
    (``R2L_MODEL``, ``CHANNEL_MODEL`` train), subword-nmt's BPE (``SUBWORD``) and the
    feature rules' blocks of 50,000 hypotheses (``BLOCK_HYPOTHESES``)."""
    sets = list(PAPER_FEATURES)
    if previous.get("L2R2", "1") != "1":
        sets.remove("l2r2")
    return {
        "FEATURES": " ".join(sets),
        "MAX_TOKENS": "4000",
        "LR": "0",
        "WARMUP": "0",
        "BF16_AUTOCAST": "0",
        "R2L_NBEST": "0",
        "TUNE_METRIC": "bleu",
        "SRC": "en",
        "TGT": "de",
        "TRAIN": "",
        "VALID": "",
        "TEST": "",
        "GENERATOR": "train",
        "MAX_LENGTH": "256",
        "LOWERCASE": "1",
        "QE_CHECKPOINT": "",
        "R2L_MODEL": "train",
        "CHANNEL_MODEL": "train",
        "SUBWORD": "subword-nmt",
        "BLOCK_HYPOTHESES": "50000",
    }


def conflicts(previous: Dict[str, str], current: Dict[str, str]) -> List[str]:
    """``NAME=old (this run: new)`` for every setting of ``current`` outside ``ADDITIVE`` that
    ``previous`` (an earlier run's settings) sets differently; a setting added to the
    pipeline later is compared with what older pipelines did (``recorded_later``), any other
    the earlier run did not record is not compared."""
    previous = {**recorded_later(previous), **previous}
    return [
        f"{key}={previous[key]} (this run: {value})"
        for key, value in current.items()
        if key not in ADDITIVE and key in previous and previous[key] != value
    ]


def main(argv: List[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    if len(argv) < 1:
        print("usage: pipeline_settings.py OUT/settings.json NAME=VALUE... (--help)", file=sys.stderr)
        return 2
    path, pairs = argv[0], argv[1:]
    bad = [pair for pair in pairs if "=" not in pair]
    if bad:
        print(f"pipeline_settings: error: {bad[0]}: expected NAME=VALUE", file=sys.stderr)
        return 2
    current = dict(pair.split("=", 1) for pair in pairs)
    if os.path.exists(path):
        try:
            with open(path, encoding="utf-8") as handle:
                previous = json.load(handle)["settings"]
            if not isinstance(previous, dict):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            print(
                f"pipeline_settings: error: {path}: not a pipeline settings file; use another OUT= or remove it",
                file=sys.stderr,
            )
            return 1
        differ = conflicts({str(k): str(v) for k, v in previous.items()}, current)
        if differ:
            print(
                f"pipeline_settings: error: {path}: this directory holds a run with {differ[0]}"
                + (f" and {len(differ) - 1} more" if len(differ) > 1 else "")
                + "; its outputs would be reused as this run's: use another OUT= "
                "(scripts/run_configs.sh runs configurations side by side), or remove the file "
                "to go on with the new settings anyway",
                file=sys.stderr,
            )
            return 1
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from rerank.signature import write_signed

    write_signed(
        path,
        {"script": "scripts/run_pipeline.sh", "settings": current},
        ("numpy", "sacrebleu", "torch", "fairseq-fixed"),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
