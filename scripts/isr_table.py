"""Collect the ISR / STS results of scripts/run_isr.sh into isr_table.md and isr_table.json.

    python scripts/isr_table.py OUT_DIR MODEL [MODEL ...]

Reads OUT_DIR/MODEL/{isr.de.json, isr.en.json, sts.en.json, config.json}.
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


def main(out_dir, names):
    rows = []
    for name in names:
        config = load(os.path.join(out_dir, name, "config.json"))
        model = config["config"]["model"]
        best = max(config["history"], key=lambda h: h["rsum"])
        row = {
            "model": name,
            "langs": model["langs"],
            "beta": model["beta"],
            "steps": config["history"][-1]["step"],
            "best_step": best["step"],
            "signature": config["signature"],
        }
        for lang in ("de", "en"):
            isr = load(os.path.join(out_dir, name, f"isr.{lang}.json"))
            if isr:
                row[f"isr_{lang}"] = isr
        sts = load(os.path.join(out_dir, name, "sts.en.json"))
        if sts:
            row["sts_en"] = sts
        rows.append(row)
    with open(os.path.join(out_dir, "isr_table.json"), "w", encoding="utf-8") as out:
        json.dump(rows, out, indent=2)
    first = next(r for r in rows if "isr_de" in r)["isr_de"]
    lines = [
        f"ISR on {first['images']} held-out real test_2016 images (ResNet-50 pool5; never trained on), "
        f"German descriptions ({first['sentences']}); STS-2014 images, English, Pearson r.",
        "",
        "| model | β | image→sentence r@1 | r@5 | r@10 | mrank | sentence→image r@1 | r@5 | r@10 | mrank | STS r |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        i2s, s2i = r["isr_de"]["image_to_sentence"], r["isr_de"]["sentence_to_image"]
        sts = f"{r['sts_en']['pearson']:.3f}" if "sts_en" in r else "–"
        label = ("VSE (" if len(r["langs"]) == 1 else "MLMME (") + ",".join(r["langs"]) + ")"
        lines.append(
            f"| {label} | {r['beta']:g} | {i2s['r@1']:.1f} | {i2s['r@5']:.1f} | {i2s['r@10']:.1f} | "
            f"{i2s['mrank']:g} | {s2i['r@1']:.1f} | {s2i['r@5']:.1f} | {s2i['r@10']:.1f} | "
            f"{s2i['mrank']:g} | {sts} |"
        )
    with open(os.path.join(out_dir, "isr_table.md"), "w", encoding="utf-8") as out:
        out.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        sys.exit(0 if sys.argv[1:2] in (["-h"], ["--help"]) else 2)
    main(sys.argv[1], sys.argv[2:])
