#!/usr/bin/env bash
# The embedding evaluations of issue 3 (paper Tables 1-2), with the features available here:
# MLMME (en+de) at beta 0.25 / 0.5 / 0.75 / 1 and VSE (de, beta 1), each trained on all
# task-2 training text plus 700 of the test_2016 images with their descriptions, model
# selection on 100 more, image-sentence ranking (ISR) on the last 200 real images, which no
# model ever trains on; STS-2014 images (English) for the MLMME models.
#
#   bash scripts/run_isr.sh          # everything under out/embed; two models train side by side
#
# Settings: OUT (out/embed), DATA (../shared/data/multi30k), FEATS / SPLIT (the ResNet-50
# test_2016 features and their image split), STS (the STS-2014 images file), EPOCHS (1 for
# beta < 1; beta 1 trains on the image examples only: 60 short epochs).  Models whose
# model directory is complete are not trained again.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/embed}
DATA=${DATA:-$ROOT/../shared/data/multi30k}
FEATS=${FEATS:-$DATA/features/test_2016_flickr-resnet50-avgpool.npy}
SPLIT=${SPLIT:-$DATA/task1/image_splits/test_2016_flickr.txt}
STS=${STS:-$ROOT/../shared/data/sts/sts2014.images.tsv}
EPOCHS=${EPOCHS:-1}
bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH" PYTHONUNBUFFERED=1
mkdir -p "$OUT"

train() {  # NAME ARGS...: one model, one torch thread (two run side by side on 2 cores)
  local name=$1; shift
  [ -f "$OUT/$name/heldout.json" ] && return
  local t0=$SECONDS
  rerank embed train --data "$DATA" --image-features "$FEATS" --image-split "$SPLIT" --heldout-images 200 \
    --valid-images 100 --threads 1 --patience 4 "$@" --out "$OUT/$name" > "$OUT/$name.log" 2>&1
  echo "$name trained in $((SECONDS - t0)) s"
}
( train mlmme-b0.25 --beta 0.25 --epochs "$EPOCHS" --validate-every 300
  train mlmme-b0.75 --beta 0.75 --epochs "$EPOCHS" --validate-every 300
  train vse-de --langs de --beta 1 --epochs 60 --validate-every 100 ) &
( train mlmme-b0.5 --beta 0.5 --epochs "$EPOCHS" --validate-every 300
  train mlmme-b1 --beta 1 --epochs 60 --validate-every 100 ) &
wait

for name in mlmme-b0.25 mlmme-b0.5 mlmme-b0.75 mlmme-b1 vse-de; do
  rerank embed isr --model "$OUT/$name" --data "$DATA" --image-features "$FEATS" --image-split "$SPLIT" \
    --lang de --json > "$OUT/$name/isr.de.json"
  if [ "${name#mlmme}" != "$name" ]; then
    rerank embed isr --model "$OUT/$name" --data "$DATA" --image-features "$FEATS" --image-split "$SPLIT" \
      --lang en --json > "$OUT/$name/isr.en.json"
    rerank embed sts --model "$OUT/$name" --data "$STS" --lang en --json > "$OUT/$name/sts.en.json"
  fi
done
python "$ROOT/scripts/isr_table.py" "$OUT" mlmme-b0.25 mlmme-b0.5 mlmme-b0.75 mlmme-b1 vse-de
cat "$OUT/isr_table.md"
