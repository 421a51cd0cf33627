#!/usr/bin/env bash
# The main job: Multi30k en->de attention NMT -> n-best lists -> k-best MIRA (REPLICAS seeds)
# -> re-ranked test -> BLEU/TER/chrF table -> significance report (BLEU, METEOR, TER, chrF).
#
#   bash scripts/run_pipeline.sh            # everything under out/multi30k
#
# Settings (environment variables): OUT (output directory), DATA (Multi30k directory;
# default ../shared/data/multi30k when it exists, else the public repository is
# downloaded), PRESET (cpu|paper), VARIANT (weak|regular|optimised), MAX_EPOCH, PATIENCE,
# NBEST (20 or 50), SEED (NMT training seed), REPLICAS (MIRA optimizer replicas, 3).  Every stage skips when its output exists, so an interrupted
# run resumes where it stopped (training resumes from its last checkpoint).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/multi30k}
DATA=${DATA:-}
PRESET=${PRESET:-cpu}
VARIANT=${VARIANT:-regular}
MAX_EPOCH=${MAX_EPOCH:-12}
PATIENCE=${PATIENCE:-3}
NBEST=${NBEST:-20}
SEED=${SEED:-1}
REPLICAS=${REPLICAS:-3}

bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
TIMINGS="$OUT/timings.tsv"
touch "$TIMINGS"

# stage NAME OUTPUT COMMAND...: run COMMAND unless OUTPUT exists; record its wall time
stage() {
  local name=$1 output=$2; shift 2
  if [ -e "$output" ]; then
    echo "== $name: done ($output exists), skipped"
    return
  fi
  echo "== $name"
  local t0=$SECONDS
  "$@"
  grep -v "^$name	" "$TIMINGS" > "$TIMINGS.tmp" || true
  printf '%s\t%d\n' "$name" $((SECONDS - t0)) >> "$TIMINGS.tmp"
  mv "$TIMINGS.tmp" "$TIMINGS"
}

D="$OUT/data"; M="$OUT/model"; N="$OUT/nbest"; R="$OUT/rerank"
mkdir -p "$N" "$R"
stage prepare "$D/prepare.json" rerank nmt prepare ${DATA:+--data "$DATA"} --out "$D"
train_model() {
  rerank nmt train --data-bin "$D/bin" --save-dir "$M" --preset "$PRESET" --variant "$VARIANT" \
    --max-epoch "$MAX_EPOCH" --patience "$PATIENCE" --seed "$SEED" 2>&1 | tee -a "$OUT/train.log" | grep -E "\| (valid|train) \||done training|Error" || true
  [ -f "$M/checkpoint_best.pt" ] && touch "$M/train.done"
}
stage train "$M/train.done" train_model
[ -f "$M/train.done" ] || { echo "training did not finish: see $OUT/train.log" >&2; exit 1; }
stage nbest-val "$N/val.nbest" rerank nmt nbest --data-bin "$D/bin" --checkpoint "$M/checkpoint_best.pt" \
  --subset valid --nbest "$NBEST" --out-nbest "$N/val.nbest" --out-1best "$N/val.1best"
stage nbest-test "$N/test.nbest" rerank nmt nbest --data-bin "$D/bin" --checkpoint "$M/checkpoint_best.pt" \
  --subset test --nbest "$NBEST" --out-nbest "$N/test.nbest" --out-1best "$N/test.1best"
REF_VAL="$D/tok/val.de"; REF_TEST="$D/tok/test_2016_flickr.de"
# MIRA replicas (optimizer seeds 1..REPLICAS) on the NMT features: rerank/nmt/
mkdir -p "$R/nmt"
for S in $(seq 1 "$REPLICAS"); do
  stage "tune-seed$S" "$R/nmt/weights.seed$S.json" rerank tune --nbest "$N/val.nbest" --ref "$REF_VAL" \
    --out "$R/nmt/weights.seed$S.json" --seed "$S" --quiet
  stage "apply-seed$S" "$R/nmt/test.seed$S.txt" rerank apply --nbest "$N/test.nbest" \
    --weights "$R/nmt/weights.seed$S.json" --out "$R/nmt/test.seed$S.txt"
done
stage oracle "$R/test.oracle" rerank oracle --nbest "$N/test.nbest" --ref "$REF_TEST" --out "$R/test.oracle"
evaluate() {
  local args=(--ref "$REF_TEST" --tokenize none --hyp "baseline=$N/test.1best" --hyp "reranked=$R/nmt/test.seed1.txt"
              --hyp "oracle=$R/test.oracle")
  rerank eval "${args[@]}" --json --out "$OUT/results.json" > /dev/null
  rerank eval "${args[@]}" --out "$OUT/results.txt" > /dev/null
}
stage eval "$OUT/results.txt" evaluate
stage report "$OUT/report/table.txt" rerank report "$OUT" --metrics bleu,meteor,ter,chrf,length
echo "== results (test_2016_flickr, tokenised lowercased text, BLEU tokenize=none)"
cat "$OUT/results.txt"
echo "== tuned weights, replica 1 ($R/nmt/weights.seed1.json)"
python -c "import json,sys; print(json.dumps(json.load(open(sys.argv[1]))['weights']))" "$R/nmt/weights.seed1.json"
echo "== significance over $REPLICAS MIRA replicas ($OUT/report/)"
cat "$OUT/report/table.txt"
echo "== stage wall times, seconds ($TIMINGS)"
cat "$TIMINGS"
