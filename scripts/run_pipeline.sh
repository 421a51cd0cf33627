#!/usr/bin/env bash
# The main job: Multi30k en->de attention NMT -> n-best lists -> k-best MIRA (REPLICAS seeds)
# -> re-ranked test; an MLMME model adds s_s(source, hypothesis) = MLMMEss to the n-best
# lists -> MIRA again -> BLEU/TER/chrF table -> significance report (BLEU, METEOR, TER, chrF),
# every re-ranked system against the baseline (†) and against NMT-feature re-ranking (‡).
#
#   bash scripts/run_pipeline.sh            # everything under out/multi30k
#
# Settings (environment variables): OUT (output directory), DATA (Multi30k directory;
# default ../shared/data/multi30k when it exists, else the public repository is
# downloaded), PRESET (cpu|paper), VARIANT (weak|regular|optimised), MAX_EPOCH, PATIENCE,
# NBEST (20 or 50), SEED (NMT training seed), REPLICAS (MIRA optimizer replicas, 3),
# EMBED_EPOCHS (MLMME training epochs, 2), EMBED_THREADS (torch threads for it, 0 = default).  Every stage skips when its output exists, so an interrupted
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
EMBED_EPOCHS=${EMBED_EPOCHS:-2}
EMBED_THREADS=${EMBED_THREADS:-0}

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
# mira_replicas SET VAL.nbest TEST.nbest: MIRA replicas (optimizer seeds 1..REPLICAS) tuned on
# the validation list, applied to the test list: rerank/SET/weights.seed$S.json, test.seed$S.txt
mira_replicas() {
  local set=$1 val=$2 test=$3 tag
  mkdir -p "$R/$set"
  for S in $(seq 1 "$REPLICAS"); do
    tag=$([ "$set" = nmt ] && echo "seed$S" || echo "$set-seed$S")  # stage names of earlier runs kept
    stage "tune-$tag" "$R/$set/weights.seed$S.json" rerank tune --nbest "$val" --ref "$REF_VAL" \
      --out "$R/$set/weights.seed$S.json" --seed "$S" --quiet
    stage "apply-$tag" "$R/$set/test.seed$S.txt" rerank apply --nbest "$test" \
      --weights "$R/$set/weights.seed$S.json" --out "$R/$set/test.seed$S.txt"
  done
}
mira_replicas nmt "$N/val.nbest" "$N/test.nbest"
# MLMME features (features/): a text-only model (β 0: task-2 descriptions + task-1 pairs of
# the training split; it never sees test_2016 images or descriptions) scores every
# hypothesis against its source: MLMMEss.  MIRA tunes NMT + MLMMEss: rerank/mlmme/
# (heldout.json is the last file embed train writes: the stage's done marker)
E="$OUT/embed"
stage embed-train "$E/heldout.json" rerank embed train ${DATA:+--data "$DATA"} --download-dir "$D/download" \
  --task1 --beta 0 --epochs "$EMBED_EPOCHS" --validate-every 300 --patience 4 --threads "$EMBED_THREADS" --out "$E"
stage features-val "$N/val.mlmme.nbest" rerank features add --nbest "$N/val.nbest" --scorer "mlmme:$E" \
  --source "$D/tok/val.en" --out "$N/val.mlmme.nbest"
stage features-test "$N/test.mlmme.nbest" rerank features add --nbest "$N/test.nbest" --scorer "mlmme:$E" \
  --source "$D/tok/test_2016_flickr.en" --out "$N/test.mlmme.nbest"
mira_replicas mlmme "$N/val.mlmme.nbest" "$N/test.mlmme.nbest"
stage oracle "$R/test.oracle" rerank oracle --nbest "$N/test.nbest" --ref "$REF_TEST" --out "$R/test.oracle"
evaluate() {
  local args=(--ref "$REF_TEST" --tokenize none --hyp "baseline=$N/test.1best" --hyp "reranked=$R/nmt/test.seed1.txt"
              --hyp "reranked+MLMMEss=$R/mlmme/test.seed1.txt" --hyp "oracle=$R/test.oracle")
  rerank eval "${args[@]}" --json --out "$OUT/results.json" > /dev/null
  rerank eval "${args[@]}" --out "$OUT/results.txt" > /dev/null
}
stage eval "$OUT/results.txt" evaluate
stage report "$OUT/report/table.txt" rerank report "$OUT" --metrics bleu,meteor,ter,chrf,length --compare-to +nmt
echo "== results (test_2016_flickr, tokenised lowercased text, BLEU tokenize=none)"
cat "$OUT/results.txt"
echo "== tuned weights, replica 1 ($R/{nmt,mlmme}/weights.seed1.json)"
for F in nmt mlmme; do
  python -c "import json,sys; print(sys.argv[2], json.dumps(json.load(open(sys.argv[1]))['weights']))" \
    "$R/$F/weights.seed1.json" "$F"
done
echo "== significance over $REPLICAS MIRA replicas ($OUT/report/)"
cat "$OUT/report/table.txt"
echo "== stage wall times, seconds ($TIMINGS)"
cat "$TIMINGS"
