"""Collect the results of scripts/run_family.sh into family_table.md and family_table.json,
and the README's compact table (ours beside the seed papers' headlines) into
family_readme.md.

    python scripts/family_table.py OUT_DIR MODEL [MODEL ...]

Reads OUT_DIR/MODEL/{config.json, train_seconds, eval_seconds, isr.{de,en}.json, sts.en.json,
simlex.json, wordsim353.json}; a missing file leaves its cells empty ("–").
Mean recall (MULE's mR): the mean of the six recalls r@1/5/10 of both directions.
"""

from __future__ import annotations

import json
import os
import sys


def load(path):
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def mean_recall(isr):
    return sum(isr[d][k] for d in ("image_to_sentence", "sentence_to_image") for k in ("r@1", "r@5", "r@10")) / 6


def row_of(out_dir, name):
    config = load(os.path.join(out_dir, name, "config.json"))
    if config is None:
        return None
    model = config["config"]["model"]
    best = max(config["history"], key=lambda h: h["rsum"]) if config["history"] else {}
    seconds = load(os.path.join(out_dir, name, "train_seconds"))
    row = {
        "model": name,
        "settings": {k: model.get(k) for k in ("objective", "langs", "beta", "margin", "similarity", "encoder")},
        "steps": config["history"][-1]["step"] if config["history"] else 0,
        "best_step": best.get("step"),
        "train_seconds": seconds,
        "eval_seconds": load(os.path.join(out_dir, name, "eval_seconds")),
        "signature": config.get("signature"),
    }
    for lang in ("de", "en"):
        isr = load(os.path.join(out_dir, name, f"isr.{lang}.json"))
        if isr:
            row[f"isr_{lang}"] = {**isr, "mean_recall": mean_recall(isr)}
    for key, file in (("sts_en", "sts.en.json"), ("simlex", "simlex.json"), ("wordsim353", "wordsim353.json")):
        value = load(os.path.join(out_dir, name, file))
        if value is not None:
            row[key] = value
    return row


def cell(value, fmt):
    return "–" if value is None else format(value, fmt)


#: the seed papers' headline numbers (their protocol: every training image, 1,000 test
#: images; ours: 700 test_2016 images for training, 200 held out — see docs/usage/embeddings.md)
SEEDS = {
    "parallel-asym": "Gella et al. 2017, PARALLEL-ASYM: STS-2014 images r .845; test_2016 de text→image r@1 22.5",
    "parallel": "Gella et al. 2017, PARALLEL-SYM (= MLMME's loss at β 0.5)",
    "pivot": "Gella et al. 2017, PIVOT-SYM (= MLMME's loss at β 1)",
    "pivot-asym": "Gella et al. 2017, PIVOT-ASYM",
    "mule": "Kim et al. 2020: Multi30K image–sentence mean recall EN 70.7 / DE 60.3",
    "imagevec": "Singhal et al. 2019: cross-lingual word similarity ρ ≈ .82 (SemEval-2017 Task 2)",
    "bow-text": "our baseline: ImageVec's encoder on the same text, no image term",
}


def readme_table(rows):
    """The README's compact table: ours beside the seeds' headlines."""
    lines = [
        "| model | STS-2014 r | ISR mR de / en | SimLex en–de ρ | WS-353 en–de ρ | train min | eval s | the seed paper's headline |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        de, en = r.get("isr_de"), r.get("isr_en")
        mr = f"{de['mean_recall']:.1f} / {en['mean_recall']:.1f}" if de and en else "–"
        sim = (r.get("simlex") or {}).get("en-de")
        ws = (r.get("wordsim353") or {}).get("en-de")
        minutes = r["train_seconds"] / 60 if r["train_seconds"] is not None else None
        lines.append(
            f"| {r['model']} | {cell(r.get('sts_en', {}).get('pearson'), '.3f')} | {mr} "
            f"| {cell(sim and sim['spearman'], '.3f')} | {cell(ws and ws['spearman'], '.3f')} "
            f"| {cell(minutes, '.0f')} | {cell(r.get('eval_seconds'), '.0f')} | {SEEDS.get(r['model'], '')} |"
        )
    return "\n".join(lines) + "\n"


def main(out_dir, names):
    rows = [r for r in (row_of(out_dir, name) for name in names) if r is not None]
    with open(os.path.join(out_dir, "family_table.json"), "w", encoding="utf-8") as out:
        json.dump(rows, out, indent=2)
    lines = [
        "ISR on the 200 held-out real test_2016 images (never trained on): r@1 / r@5 / r@10 both directions, "
        "mR = their mean (German, then English descriptions); STS-2014 images (English) Pearson r; word "
        "similarity Spearman rho (coverage %) on SimLex-999 and WordSim-353, English, German, cross-lingual en-de; "
        "eval s = wall seconds of all these evaluations together.",
        "",
        "| model | settings | train min | eval s | ISR de i→s r@1/5/10 | s→i r@1/5/10 | mR de | mR en | STS r "
        "| SimLex en | de | en-de | WS353 en | de | en-de |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        s = r["settings"]
        settings = f"β {s['beta']:g}, {s['similarity']}, {s['encoder']}, margin {s['margin']:g}"
        de, en = r.get("isr_de"), r.get("isr_en")
        i2s = "/".join(f"{de['image_to_sentence'][k]:.1f}" for k in ("r@1", "r@5", "r@10")) if de else "–"
        s2i = "/".join(f"{de['sentence_to_image'][k]:.1f}" for k in ("r@1", "r@5", "r@10")) if de else "–"
        words = []
        for key in ("simlex", "wordsim353"):
            for part in ("en", "de", "en-de"):
                w = (r.get(key) or {}).get(part)
                words.append(f"{w['spearman']:.3f} ({w['coverage']:.0f})" if w else "–")
        minutes = r["train_seconds"] / 60 if r["train_seconds"] is not None else None
        lines.append(
            f"| {r['model']} | {settings} | {cell(minutes, '.1f')} | {cell(r.get('eval_seconds'), '.0f')} | {i2s} | {s2i} "
            f"| {cell(de and de['mean_recall'], '.1f')} | {cell(en and en['mean_recall'], '.1f')} "
            f"| {cell(r.get('sts_en', {}).get('pearson'), '.3f')} | " + " | ".join(words) + " |"
        )
    with open(os.path.join(out_dir, "family_table.md"), "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")
    with open(os.path.join(out_dir, "family_readme.md"), "w", encoding="utf-8") as out:
        out.write(readme_table(rows))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main(sys.argv[1], sys.argv[2:])
