#!/usr/bin/env bash
# The embedding family of issue 45 beside MLMME: PIVOT and PARALLEL (Gella et al. 2017; SYM
# = cosine, ASYM = order embeddings), MULE (Kim et al. 2020) and ImageVec (Singhal et al.
# 2019), plus a text-only bag-of-words baseline (ImageVec's encoder, β = 0: no image term).
# Every model trains as scripts/run_isr.sh's: all task-2 training text plus 700 of the
# test_2016 images with their descriptions, model selection on 100 more, image-sentence
# ranking (ISR) on the last 200 real images, which no model ever trains on; then STS-2014
# images (English, Pearson r) and word similarity (SimLex-999 and WordSim-353, English,
# German and cross-lingual en-de, Spearman rho with coverage).
#
#   bash scripts/run_family.sh            # everything under out/embed-family, one model at a time
#   bash scripts/run_family.sh --help     # this text
#
# Settings (environment): OUT (out/embed-family), DATA (../shared/data/multi30k), FEATS /
# SPLIT (the ResNet-50 test_2016 features and their image split), STS (STS-2014 images),
# WORDSIM (../shared/data/wordsim), EPOCHS (1: GRU models with beta < 1), BOW_EPOCHS (5:
# the bag-of-words models, ~10x faster per epoch), THREADS (1 torch thread per model),
# MODELS (the models to run, default all, in this order).  A model whose directory holds
# heldout.json is not trained again; every evaluation is redone (seconds).  Train times go
# to OUT/NAME/train_seconds, the time of all its evaluations below to OUT/NAME/eval_seconds.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; exit 0; fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/embed-family}
DATA=${DATA:-$ROOT/../shared/data/multi30k}
FEATS=${FEATS:-$DATA/features/test_2016_flickr-resnet50-avgpool.npy}
SPLIT=${SPLIT:-$DATA/task1/image_splits/test_2016_flickr.txt}
STS=${STS:-$ROOT/../shared/data/sts/sts2014.images.tsv}
WORDSIM=${WORDSIM:-$ROOT/../shared/data/wordsim}
EPOCHS=${EPOCHS:-1}
BOW_EPOCHS=${BOW_EPOCHS:-5}
THREADS=${THREADS:-1}
MODELS=${MODELS:-"parallel-asym imagevec bow-text mule pivot pivot-asym parallel"}
bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH" PYTHONUNBUFFERED=1
mkdir -p "$OUT"

args_of() {  # NAME -> the training options of that model
  case $1 in
    parallel) echo "--objective parallel --epochs $EPOCHS --validate-every 300" ;;
    parallel-asym) echo "--objective parallel-asym --margin 0.05 --epochs $EPOCHS --validate-every 300" ;;
    pivot) echo "--objective pivot --epochs 60 --validate-every 100" ;;
    pivot-asym) echo "--objective pivot-asym --margin 0.05 --epochs 60 --validate-every 100" ;;
    mule) echo "--objective mule --epochs $EPOCHS --validate-every 300" ;;
    imagevec) echo "--objective imagevec --epochs $BOW_EPOCHS --validate-every 300" ;;
    bow-text) echo "--objective imagevec --beta 0 --epochs $BOW_EPOCHS --validate-every 300" ;;
    *) echo "unknown model $1 (known: parallel parallel-asym pivot pivot-asym mule imagevec bow-text)" >&2; return 2 ;;
  esac
}

for name in $MODELS; do
  args=$(args_of "$name")
  if [ ! -f "$OUT/$name/heldout.json" ]; then
    t0=$SECONDS
    # shellcheck disable=SC2086
    rerank embed train --data "$DATA" --image-features "$FEATS" --image-split "$SPLIT" --heldout-images 200 \
      --valid-images 100 --threads "$THREADS" --patience 4 $args --out "$OUT/$name" > "$OUT/$name.log" 2>&1
    echo $((SECONDS - t0)) > "$OUT/$name/train_seconds"
    echo "$name trained in $((SECONDS - t0)) s"
  fi
  t0=$SECONDS
  for lang in de en; do
    rerank embed isr --model "$OUT/$name" --data "$DATA" --image-features "$FEATS" --image-split "$SPLIT" \
      --lang "$lang" --json > "$OUT/$name/isr.$lang.json"
  done
  rerank embed sts --model "$OUT/$name" --data "$STS" --lang en --json > "$OUT/$name/sts.en.json"
  rerank embed words --model "$OUT/$name" --out "$OUT/$name/words.txt" > /dev/null 2>&1
  for set in simlex wordsim353; do
    rerank embed wordsim --vectors "$OUT/$name/words.txt" --pairs "$WORDSIM/$set-english.tsv" --lang en \
      --pairs2 "$WORDSIM/$set-german.tsv" --lang2 de --json > "$OUT/$name/$set.json"
  done
  echo $((SECONDS - t0)) > "$OUT/$name/eval_seconds"
  echo "$name evaluated in $((SECONDS - t0)) s"
done
python "$ROOT/scripts/family_table.py" "$OUT" $MODELS
cat "$OUT/family_table.md"
