#!/usr/bin/env bash
# Held-out val BLEU of feature subsets: K-fold cross-fitted MIRA on a pipeline's val lists.
# Tuning on val and scoring on val rewards every extra column (the tuner fits the set it is
# scored on); here each fold of val (by image) is re-ranked by weights tuned on the other
# folds (rerank crossfit), so a subset is judged on segments its weights never saw.
#
#   bash scripts/crossfit_val.sh OUT NAME=COLUMNS [NAME=COLUMNS...]
#   bash scripts/crossfit_val.sh out/multi30k-transformer \
#       base=NMT,WordPenalty,NMTNorm,R2L,R2LNorm,MBRBLEU,MBRchrF,LenRatio,LenDev \
#       ibm1=NMT,WordPenalty,NMTNorm,R2L,R2LNorm,MBRBLEU,MBRchrF,LenRatio,LenDev,IBM1Norm,IBM1InvNorm
#
# OUT: a run_pipeline.sh directory (its nbest/val.full.nbest, data/tok/val.de); COLUMNS:
# the columns tuned (rerank tune --features), the others get weight 0. Settings
# (environment variables): K (folds, 5), FOLD_SEED (seed of the fold assignment, 1),
# REPLICAS (tuner seeds 1..REPLICAS, 3), IMAGES (the image of each val segment, default
# ../shared/data/multi30k/task1/image_splits/val.txt; folds keep an image's segments
# together). Writes OUT/crossfit/{val.folds.tsv,NAME/val.seedS.txt,NAME/weights.seedS.json,
# results.tsv}; every output is skipped when it exists, so a run resumes. Prints one line
# per NAME: the val BLEU of each seed and their mean.
set -euo pipefail
case "${1:-}" in
  ""|-h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; [ -n "${1:-}" ]; exit ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$1; shift
[ $# -ge 1 ] || { echo "crossfit_val: error: no NAME=COLUMNS given (--help)" >&2; exit 1; }
for pair in "$@"; do
  [[ "$pair" =~ ^[A-Za-z0-9_.-]+=[^=]+$ ]] || { echo "crossfit_val: error: '$pair' is not NAME=COLUMNS" >&2; exit 1; }
done
K=${K:-5}; FOLD_SEED=${FOLD_SEED:-1}; REPLICAS=${REPLICAS:-3}
IMAGES=${IMAGES:-$ROOT/../shared/data/multi30k/task1/image_splits/val.txt}
NBEST="$OUT/nbest/val.full.nbest"; REF="$OUT/data/tok/val.de"
for f in "$NBEST" "$REF" "$IMAGES"; do
  [ -f "$f" ] || { echo "crossfit_val: error: $f: no such file (a run_pipeline.sh OUT?)" >&2; exit 1; }
done
[ -x "$ROOT/.venv/bin/rerank" ] && export PATH="$ROOT/.venv/bin:$PATH"
C="$OUT/crossfit"; mkdir -p "$C"
FOLDS="$C/val.folds.k$K.seed$FOLD_SEED.tsv"
[ -e "$FOLDS" ] || rerank folds --segment-images "$IMAGES" --k "$K" --seed "$FOLD_SEED" --out "$FOLDS"
for pair in "$@"; do
  name=${pair%%=*}; columns=${pair#*=}
  mkdir -p "$C/$name"
  if [ -e "$C/$name/columns" ] && [ "$(cat "$C/$name/columns")" != "$columns k=$K fold_seed=$FOLD_SEED" ]; then
    echo "crossfit_val: error: $C/$name holds a run of other columns or folds; give another NAME" >&2; exit 1
  fi
  echo "$columns k=$K fold_seed=$FOLD_SEED" > "$C/$name/columns"
  scores=()
  for S in $(seq 1 "$REPLICAS"); do
    [ -e "$C/$name/val.seed$S.txt" ] || rerank crossfit --nbest "$NBEST" --ref "$REF" --tokenize none \
      --folds "$FOLDS" --features "$columns" --seed "$S" --quiet \
      --out "$C/$name/val.seed$S.txt" --weights-out "$C/$name/weights.seed$S.json" > /dev/null
    scores+=("$(rerank eval --ref "$REF" --tokenize none --hyp "$C/$name/val.seed$S.txt" --json --metrics bleu \
      | python3 -c 'import json, sys; print("%.2f" % json.load(sys.stdin)[0]["score"])')")
  done
  mean=$(printf '%s\n' "${scores[@]}" | awk '{s += $1} END {printf "%.2f", s / NR}')
  printf '%s\tmean %s\tseeds %s\t%s\n' "$name" "$mean" "${scores[*]}" "$columns" | tee -a "$C/results.tsv"
done
