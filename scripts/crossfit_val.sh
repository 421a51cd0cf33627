#!/usr/bin/env bash
# Held-out val BLEU of feature subsets: K-fold cross-fitted MIRA on a pipeline's val lists.
# Tuning on val and scoring on val rewards every extra column (the tuner fits the set it is
# scored on); here each fold of val (by image) is re-ranked by weights tuned on the other
# folds (rerank crossfit), so a subset is judged on segments its weights never saw.
#
#   bash scripts/crossfit_val.sh OUT NAME=COLUMNS[@METRIC] [NAME=COLUMNS[@METRIC]...]
#   bash scripts/crossfit_val.sh out/multi30k-transformer \
#       base=NMT,WordPenalty,NMTNorm,R2L,R2LNorm,MBRBLEU,MBRchrF,LenRatio,LenDev \
#       ibm1=NMT,WordPenalty,NMTNorm,R2L,R2LNorm,MBRBLEU,MBRchrF,LenRatio,LenDev,IBM1Norm,IBM1InvNorm
#
#   bash scripts/crossfit_val.sh out/multi30k-transformer all=all 'lp1=all@bleu:length_penalty=1' \
#       'bleu-ter=all@0.5*bleu-0.5*ter'
#
# OUT: a run_pipeline.sh directory (its nbest/val.full.nbest, data/tok/val.de); COLUMNS:
# the columns tuned (rerank tune --features), the others get weight 0, or all (every column);
# METRIC: what tuning maximises (rerank tune --metric; default bleu). Settings
# (environment variables): K (folds, 5), FOLD_SEED (seed of the fold assignment, 1),
# REPLICAS (tuner seeds 1..REPLICAS, 3), IMAGES (the image of each val segment, default
# ../shared/data/multi30k/task1/image_splits/val.txt; folds keep an image's segments
# together), TUNE_ARGS (more rerank crossfit options for every NAME of this call, e.g.
# TUNE_ARGS='--mira-C 0.001': recorded with the NAME, so give each setting its own NAME),
# AVERAGE (1: also the replicas' averaged weights, issue 46's stability candidate: in each
# fold the seeds' weights averaged by direction, rerank average, applied to that fold's
# held-out segments; default 0).
# Writes OUT/crossfit/{val.folds.tsv,NAME/val.seedS.txt,NAME/weights.seedS.json,
# results.tsv}; every output is skipped when it exists, so a run resumes. Prints one line
# per NAME: the val BLEU of each seed and their mean, with the mean TER and length ratio;
# with AVERAGE=1 one more, NAME/avg, of the averaged weights (OUT/crossfit/NAME/val.avg.txt).
set -euo pipefail
case "${1:-}" in
  ""|-h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; [ -n "${1:-}" ]; exit ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=$1; shift
[ $# -ge 1 ] || { echo "crossfit_val: error: no NAME=COLUMNS given (--help)" >&2; exit 1; }
for pair in "$@"; do
  [[ "$pair" =~ ^[A-Za-z0-9_.-]+=[^=@]+(@.+)?$ ]] \
    || { echo "crossfit_val: error: '$pair' is not NAME=COLUMNS[@METRIC]" >&2; exit 1; }
done
K=${K:-5}; FOLD_SEED=${FOLD_SEED:-1}; REPLICAS=${REPLICAS:-3}; read -r -a TUNE_ARGS <<< "${TUNE_ARGS:-}"
AVERAGE=${AVERAGE:-0}
case "$AVERAGE" in 0|1) ;; *) echo "crossfit_val: error: AVERAGE must be 0 or 1, not '$AVERAGE'" >&2; exit 1 ;; esac
[ "$AVERAGE" = 0 ] || [ "$REPLICAS" -ge 2 ] || { echo "crossfit_val: error: AVERAGE=1 needs REPLICAS >= 2" >&2; exit 1; }
IMAGES=${IMAGES:-$ROOT/../shared/data/multi30k/task1/image_splits/val.txt}
NBEST="$OUT/nbest/val.full.nbest"; REF="$OUT/data/tok/val.de"
for f in "$NBEST" "$REF" "$IMAGES"; do
  [ -f "$f" ] || { echo "crossfit_val: error: $f: no such file (a run_pipeline.sh OUT?)" >&2; exit 1; }
done
[ -x "$ROOT/.venv/bin/rerank" ] && export PATH="$ROOT/.venv/bin:$PATH"
C="$OUT/crossfit"; mkdir -p "$C"
FOLDS="$C/val.folds.k$K.seed$FOLD_SEED.tsv"
[ -e "$FOLDS" ] || rerank folds --segment-images "$IMAGES" --k "$K" --seed "$FOLD_SEED" --out "$FOLDS"
evaluate() {  # BLEU, TER and length ratio of a val output
  rerank eval --ref "$REF" --tokenize none --hyp "$1" --json --metrics bleu,ter,length | python3 -c 'import json, sys
rows = {r["metric"]: r["score"] for r in json.load(sys.stdin)}
print("%.2f %.2f %.2f" % (rows["bleu"], rows["ter"], rows["length"]))'
}
mean() { printf '%s\n' "$@" | awk '{s += $1} END {printf "%.2f", s / NR}'; }
for pair in "$@"; do
  name=${pair%%=*}; columns=${pair#*=}; metric=bleu
  if [[ "$columns" == *@* ]]; then metric=${columns#*@}; columns=${columns%%@*}; fi
  select=(--features "$columns"); [ "$columns" != all ] || select=()
  mkdir -p "$C/$name"
  record="$columns metric=$metric k=$K fold_seed=$FOLD_SEED${TUNE_ARGS[*]:+ ${TUNE_ARGS[*]}}"
  if [ -e "$C/$name/columns" ] && [ "$(cat "$C/$name/columns")" != "$record" ]; then
    echo "crossfit_val: error: $C/$name holds a run of other columns, folds or options; give another NAME" >&2; exit 1
  fi
  echo "$record" > "$C/$name/columns"
  scores=() ters=() ratios=()
  for S in $(seq 1 "$REPLICAS"); do
    [ -e "$C/$name/val.seed$S.txt" ] || rerank crossfit --nbest "$NBEST" --ref "$REF" --tokenize none \
      --folds "$FOLDS" "${select[@]}" --metric "$metric" --seed "$S" --quiet ${TUNE_ARGS[@]+"${TUNE_ARGS[@]}"} \
      --out "$C/$name/val.seed$S.txt" --weights-out "$C/$name/weights.seed$S.json" > /dev/null
    read -r bleu ter ratio < <(evaluate "$C/$name/val.seed$S.txt")
    scores+=("$bleu"); ters+=("$ter"); ratios+=("$ratio")
  done
  printf '%s\tmean %s\tseeds %s\tTER %s\tlength %s\t%s@%s\n' "$name" "$(mean "${scores[@]}")" "${scores[*]}" \
    "$(mean "${ters[@]}")" "$(mean "${ratios[@]}")" "$columns" "$metric" | tee -a "$C/results.tsv"
  [ "$AVERAGE" = 1 ] || continue
  # each fold's weights of the seeds, averaged by direction, re-rank that fold's segments
  if [ ! -e "$C/$name/val.avg.txt" ]; then
    for ((k = 0; k < K; k++)); do
      parts=()
      for S in $(seq 1 "$REPLICAS"); do
        python3 -c 'import json, sys
folds = json.load(open(sys.argv[1]))["folds"]
json.dump({"weights": next(f["weights"] for f in folds if f["fold"] == int(sys.argv[2]))}, open(sys.argv[3], "w"))' \
          "$C/$name/weights.seed$S.json" "$k" "$C/$name/fold$k.seed$S.json"
        parts+=(--weights "$C/$name/fold$k.seed$S.json")
      done
      rerank average "${parts[@]}" --out "$C/$name/weights.avg.fold$k.json"
    done
    rerank apply --nbest "$NBEST" --weights "$C/$name/weights.avg.fold{fold}.json" --folds "$FOLDS" \
      --out "$C/$name/val.avg.txt"
  fi
  read -r bleu ter ratio < <(evaluate "$C/$name/val.avg.txt")
  printf '%s/avg\tmean %s\tseeds averaged\tTER %s\tlength %s\t%s@%s\n' "$name" "$bleu" "$ter" "$ratio" "$columns" \
    "$metric" | tee -a "$C/results.tsv"
done
