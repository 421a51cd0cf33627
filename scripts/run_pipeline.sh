#!/usr/bin/env bash
# The main job: Multi30k en->de NMT -> n-best lists (100 or 20) -> re-ranking features from
# independently trained models -> tuning on val with MIRA and MERT (REPLICAS seeds each),
# one feature set at a time and all together -> re-ranked test_2016 ->
# BLEU/METEOR/TER/chrF/length table with significance (rerank report).
#
#   bash scripts/run_pipeline.sh              # SYSTEM=transformer, everything under out/multi30k-transformer
#   SYSTEM=gru bash scripts/run_pipeline.sh   # the paper's GRU system with every feature, under out/multi30k
#   SYSTEM=gru NBEST=50 OUT=out/gru50 bash scripts/run_pipeline.sh   # any setting below overrides the system's
#   SYSTEM=gru bash scripts/run_pipeline.sh --settings   # print the resolved settings, do nothing
#   bash scripts/run_pipeline.sh --help      # this text
#
# SYSTEM picks the defaults of the settings below (issue 20: the strongest configuration
# measured that fits 2 hours on 2 idle cores; README "Configurations"):
#   transformer (default): a transformer-tiny baseline (27 epochs, patience 10), its 100-best
#     lists re-ranked by a transformer-tiny right-to-left model (28 epochs, trained beside
#     it), MBR, length and IBM Model 1 features, both models trained with bf16 autocast:
#     ARCH=transformer-tiny MAX_EPOCH=27 PATIENCE=10 NBEST=100 R2L_NBEST=0
#     AUX_ARCH=transformer-tiny AUX_EPOCH=28 LM_ARCH=transformer-tiny
#     FEATURES=r2l+mbr+len+ibm1 BF16_AUTOCAST=1,
#     OUT=out/multi30k-transformer (about 1 h 30 min from a fresh clone on 2 idle cores)
#   gru: the paper's attention GRU (Tables 3-4 share its lists: scripts/run_tables.sh) and
#     every re-ranking model: the right-to-left model R2L, the channel model de->en, the
#     German LSTM LM, a second left-to-right model L2R2, consensus (MBR expected BLEU /
#     chrF), MLMME s_s, multilingual-E5 similarity and length: ARCH=gru MAX_EPOCH=12
#     PATIENCE=3 AUX_ARCH=gru AUX_EPOCH=16 LM_ARCH=lstm FEATURES=every set but ibm1
#     (mlmme+r2l+channel+lm+l2r2+mbr+e5+len) R2L_NBEST=0 BF16_AUTOCAST=0,
#     OUT=out/multi30k
#     (3.5-5 h)
# settings.json records the resolved settings, not SYSTEM.
#
# Settings (environment variables): OUT (output directory), DATA (Multi30k directory;
# default ../shared/data/multi30k when it exists, else the public repository is
# downloaded), PRESET (cpu|paper: the GRU baseline's), VARIANT (weak|regular|optimised),
# MAX_EPOCH (baseline epochs), PATIENCE, NBEST (hypotheses per sentence, also the beam
# size: transformer 100, gru 20), R2L_NBEST (0: none; N: the R2L model's own N-best lists
# joined to the baseline's with rerank union, then scored again by the baseline, e.g.
# NBEST=50 R2L_NBEST=50; needs r2l in FEATURES), SEED (NMT training seed),
# REPLICAS (tuning replicas, 3), AUX_PRESET (preset of GRU R2L and channel models: small,
# scored at >= 1,000 hypotheses/s on 2 cores, or cpu as the baseline), CHANNEL_VOCAB (own:
# the channel model's output layer holds the English types only; joint), AUX_EPOCH (epochs
# of the R2L and channel models: transformer 28, gru 16), L2R2_EPOCH (8), LM_EPOCH (3),
# L2R2 (1: train the second left-to-right model, seed SEED+1; 0: skip it, the same as
# FEATURES without l2r2), FEATURES (the feature sets computed and tuned, a subset of
# "mlmme r2l channel lm l2r2 mbr e5 len ibm1", separated by spaces or +, or all; ibm1: IBM
# Model 1 in both directions, trained by EM on the training corpus in seconds; a model no set
# needs is not trained: FEATURES=r2l+mbr+len trains only the baseline and R2L), EMBED_EPOCHS
# (MLMME, 2), MAX_TOKENS (4000: tokens per batch of every translation model), LR (0: the
# architecture's learning rate, transformer-tiny 5e-3, GRU 2e-3), WARMUP (0: the
# architecture's warm-up, 1000 updates; transformers only), BF16_AUTOCAST (1 / 0 for
# transformer / gru: the transformers train with their forward pass in bfloat16 under
# torch.autocast; 0: in float32), JOBS (2: two training chains
# side by side, one CPU thread per model; 1: one after the other with torch's default
# threads), ARCH (baseline: gru | transformer-tiny |
# transformer-small), AUX_ARCH (R2L and channel models, the same choices), LM_ARCH (lstm |
# transformer-tiny), TUNERS ("mira mert"), CHRF_TUNING
# (1: +all is tuned for chrF too, MIRA, the row "+all/chrF-tuned" beside +all; 0: not).
# Every stage skips when its output exists, so an interrupted run resumes where it
# stopped (training resumes from its last checkpoint); timings.tsv records each stage.
# Model directories are named by their settings (models/r2l.small, models/channel.small-own);
# the feature lists and tuning runs are not: a run in an OUT that holds a run with other
# settings is refused before any work (scripts/pipeline_settings.py): give a new OUT.
set -euo pipefail
case "${1:-}" in
  "") ;;
  -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  --settings) ;;  # print the resolved settings (KEY=VALUE lines) and stop, before any work
  *) echo "run_pipeline: error: unknown argument '$1' (settings are environment variables: --help)" >&2; exit 1 ;;
esac
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ALL_FEATURES="mlmme r2l channel lm l2r2 mbr e5 len ibm1"
PAPER_FEATURES="mlmme r2l channel lm l2r2 mbr e5 len"  # the GRU system's: every set but ibm1
SYSTEM=${SYSTEM:-transformer}
case "$SYSTEM" in  # the system's defaults; a variable that is set wins
  transformer) OUT=${OUT:-$ROOT/out/multi30k-transformer}; ARCH=${ARCH:-transformer-tiny}; MAX_EPOCH=${MAX_EPOCH:-27}
               PATIENCE=${PATIENCE:-10}; NBEST=${NBEST:-100}; R2L_NBEST=${R2L_NBEST:-0}; AUX_ARCH=${AUX_ARCH:-transformer-tiny}; AUX_EPOCH=${AUX_EPOCH:-28}
               LM_ARCH=${LM_ARCH:-transformer-tiny}; FEATURES=${FEATURES:-r2l mbr len ibm1}; BF16_AUTOCAST=${BF16_AUTOCAST:-1} ;;
  gru) OUT=${OUT:-$ROOT/out/multi30k}; ARCH=${ARCH:-gru}; MAX_EPOCH=${MAX_EPOCH:-12}; PATIENCE=${PATIENCE:-3}; NBEST=${NBEST:-20}; R2L_NBEST=${R2L_NBEST:-0}
       AUX_ARCH=${AUX_ARCH:-gru}; AUX_EPOCH=${AUX_EPOCH:-16}; LM_ARCH=${LM_ARCH:-lstm}; FEATURES=${FEATURES:-$PAPER_FEATURES}
       BF16_AUTOCAST=${BF16_AUTOCAST:-0} ;;
  *) echo "run_pipeline: error: SYSTEM: unknown system '$SYSTEM' (choose from: transformer gru)" >&2; exit 1 ;;
esac
DATA=${DATA:-}
PRESET=${PRESET:-cpu}
VARIANT=${VARIANT:-regular}
SEED=${SEED:-1}
REPLICAS=${REPLICAS:-3}
AUX_PRESET=${AUX_PRESET:-small}
CHANNEL_VOCAB=${CHANNEL_VOCAB:-own}
L2R2_EPOCH=${L2R2_EPOCH:-8}
LM_EPOCH=${LM_EPOCH:-3}
L2R2=${L2R2:-1}
EMBED_EPOCHS=${EMBED_EPOCHS:-2}
MAX_TOKENS=${MAX_TOKENS:-4000}
LR=${LR:-0}
WARMUP=${WARMUP:-0}
case "$BF16_AUTOCAST" in 0|1) ;;
  *) echo "run_pipeline: error: BF16_AUTOCAST: '$BF16_AUTOCAST' is not 0 or 1" >&2; exit 1 ;;
esac
JOBS=${JOBS:-2}
TUNERS=${TUNERS:-mira mert}
CHRF_TUNING=${CHRF_TUNING:-1}
FEATURES=${FEATURES//+/ }  # "r2l mbr len" or r2l+mbr+len; all: every set
[ "$FEATURES" != all ] || FEATURES=$ALL_FEATURES
for f in $FEATURES; do
  [[ " $ALL_FEATURES " == *" $f "* ]] \
    || { echo "run_pipeline: error: FEATURES: unknown feature set '$f' (choose from: $ALL_FEATURES)" >&2; exit 1; }
done
# recorded in the canonical order (the order of the feature columns), without l2r2 when L2R2=0
requested=" $FEATURES "; FEATURES=""
for f in $ALL_FEATURES; do
  if [[ "$requested" == *" $f "* ]] && { [ "$f" != l2r2 ] || [ "$L2R2" = 1 ]; }; then FEATURES="$FEATURES${FEATURES:+ }$f"; fi
done
has() { [[ " $FEATURES " == *" $1 "* ]]; }  # has SET: is feature set SET computed and tuned?
[[ "$R2L_NBEST" =~ ^[0-9]+$ ]] || { echo "run_pipeline: error: R2L_NBEST: '$R2L_NBEST' is not a number" >&2; exit 1; }
[ "$R2L_NBEST" = 0 ] || has r2l \
  || { echo "run_pipeline: error: R2L_NBEST=$R2L_NBEST needs the r2l feature set in FEATURES (or R2L_NBEST=0)" >&2; exit 1; }
settings=()
for k in PRESET VARIANT MAX_EPOCH PATIENCE NBEST R2L_NBEST SEED REPLICAS AUX_PRESET CHANNEL_VOCAB AUX_EPOCH L2R2_EPOCH LM_EPOCH \
         L2R2 FEATURES EMBED_EPOCHS JOBS TUNERS CHRF_TUNING ARCH AUX_ARCH LM_ARCH MAX_TOKENS LR WARMUP BF16_AUTOCAST; do settings+=("$k=${!k}"); done
if [ "${1:-}" = --settings ]; then echo "OUT=$OUT"; printf '%s\n' "${settings[@]}"; exit 0; fi

bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONUNBUFFERED=1
mkdir -p "$OUT"
TIMINGS="$OUT/timings.tsv"
touch "$TIMINGS"
THREADS=$([ "$JOBS" -ge 2 ] && echo 1 || echo 0)  # per training process

source "$ROOT/scripts/stage.sh"  # stage NAME OUTPUT COMMAND...; chains FUNC_A FUNC_B

D="$OUT/data"; M="$OUT/model$([ "$ARCH" = gru ] || echo ".$ARCH")"; N="$OUT/nbest"; R="$OUT/rerank"
A="$OUT/models"; E="$OUT/embed"
AUX_NAME=$([ "$AUX_ARCH" = gru ] && echo "$AUX_PRESET" || echo "$AUX_ARCH")
R2L_DIR="$A/r2l.$AUX_NAME"
CHANNEL_DIR="$A/channel.$AUX_NAME$([ "$CHANNEL_VOCAB" = own ] && echo -own)"
LM_DIR="$A/lm$([ "$LM_ARCH" = lstm ] || echo ".$LM_ARCH")"

# --- models: the baseline and the re-ranking models, in two chains of stages -----------
# train_model [--check] PRESET|ARCH SAVE_DIR LOG ARGS...: rerank nmt train; done marker
# SAVE_DIR/train.done; --check: a finished model must have these settings (rerank nmt train --check)
train_model() {
  local check=; [ "$1" = --check ] && { check=1; shift; }
  local preset=$1 dir=$2 log=$3 arch=gru; shift 3
  case "$preset" in transformer-*) arch=$preset; preset=cpu ;; esac
  local args=(--data-bin "$D/bin" --save-dir "$dir" --arch "$arch" --preset "$preset" --variant "$VARIANT"
              --patience "$PATIENCE" --max-tokens "$MAX_TOKENS" --lr "$LR" "$@")
  [ "$arch" = gru ] || args+=(--warmup "$WARMUP")  # the GRU's Adam has no warm-up
  [ "$arch" = gru ] || [ "$BF16_AUTOCAST" = 0 ] || args+=(--bf16-autocast)
  if [ -n "$check" ]; then
    [ ! -f "$dir/train.done" ] || rerank nmt train --check "${args[@]}" > /dev/null
    return
  fi
  rerank nmt train "${args[@]}" --threads "$THREADS" 2>&1 | tee -a "$log" \
    | grep -E "\| valid \||done training|Error" || true
  [ -f "$dir/checkpoint_best.pt" ] && touch "$dir/train.done"
  [ -f "$dir/train.done" ] || { echo "training did not finish: see $log" >&2; return 1; }
}
checkpoint_of() {  # checkpoint_of MODEL_DIR: the checkpoint train.json names (checkpoint_avg.pt
  # for transformers), else checkpoint_best.pt
  echo "$1/$(python -c 'import json, sys; print(json.load(open(sys.argv[1])).get("checkpoint", "checkpoint_best.pt"))' \
             "$1/train.json")"
}
nbest_of() {  # nbest_of MODEL_DIR SUBSET NAME SIZE: the model's own n-best list (direction from its train.json);
  # with R2L_NBEST both chains decode side by side, one thread each (JOBS=2: two 2-thread
  # processes on 2 cores took 3x as long); alone, the baseline's decoding keeps torch's threads
  local threads=(); [ "$THREADS" = 0 ] || [ "$R2L_NBEST" = 0 ] || threads=(OMP_NUM_THREADS="$THREADS")
  env "${threads[@]}" rerank nmt nbest --data-bin "$D/bin" --checkpoint "$(checkpoint_of "$1")" --subset "$2" --nbest "$4" \
    --out-nbest "$N/$3.nbest" --out-1best "$N/$3.1best"
}
train_lm() {  # train_lm [--check]: as train_model
  local args=(--prepared "$D" --save-dir "$LM_DIR" --max-epoch "$LM_EPOCH" --arch "$LM_ARCH")
  if [ "${1-}" = --check ]; then
    [ ! -f "$LM_DIR/train.done" ] || rerank nmt train-lm --check "${args[@]}" > /dev/null
    return
  fi
  rerank nmt train-lm "${args[@]}" ${DATA:+--data "$DATA"} --threads "$THREADS" > "$LM_DIR.log" 2>&1 \
    || { echo "LM training failed: see $LM_DIR.log" >&2; return 1; }
  touch "$LM_DIR/train.done"
}
# the MLMME model of MLMMEss: text only (β 0: task-2 descriptions + task-1 pairs of the
# training split; it never sees test_2016); heldout.json is the last file it writes
embed_train() {
  rerank embed train ${DATA:+--data "$DATA"} --download-dir "$D/download" --task1 --beta 0 \
    --epochs "$EMBED_EPOCHS" --validate-every 300 --patience 4 --threads "$THREADS" --out "$E"
}
# each model's train_model arguments, once: its training stage and the check of a
# finished one, before any work (a model directory may be shared with a run of other
# settings: run_configs.sh links them; rerank nmt train --check)
BASELINE=("$([ "$ARCH" = gru ] && echo "$PRESET" || echo "$ARCH")" "$M" "$OUT/train.log" --max-epoch "$MAX_EPOCH" --seed "$SEED")
CHANNEL=("$AUX_NAME" "$CHANNEL_DIR" "$CHANNEL_DIR.log" --direction backward --target-vocab "$CHANNEL_VOCAB" \
         --max-epoch "$AUX_EPOCH" --patience 2 --seed "$SEED")
R2L=("$AUX_NAME" "$R2L_DIR" "$R2L_DIR.log" --direction r2l --max-epoch "$AUX_EPOCH" --patience 2 --seed "$SEED")
L2R2_MODEL=("$PRESET" "$A/l2r2" "$A/l2r2.log" --role L2R2 --max-epoch "$L2R2_EPOCH" --patience 2 --seed $((SEED + 1)))
train_model --check "${BASELINE[@]}"
if has channel; then train_model --check "${CHANNEL[@]}"; fi
if has r2l; then train_model --check "${R2L[@]}"; fi
if has l2r2; then train_model --check "${L2R2_MODEL[@]}"; fi
if has lm; then train_lm --check; fi
# this run's settings and versions (scripts/config_table.py reads them; rewritten each run);
# refused, before any work, when OUT holds a run with other settings whose outputs the
# skipped stages would reuse (scripts/pipeline_settings.py); after the model checks, so
# that a refused run records nothing
python "$ROOT/scripts/pipeline_settings.py" "$OUT/settings.json" "${settings[@]}"
mkdir -p "$N" "$R" "$A"
stage prepare "$D/prepare.json" rerank nmt prepare ${DATA:+--data "$DATA"} --out "$D"
# the two chains, balanced by the measured stage times of the default run (out/multi30k,
# 2 cores): baseline + 20-best + Channel + LM about 15,600 s beside R2L + L2R2 + MLMME about
# 16,800 s; R2L, the strongest re-ranking model, is the first of chain B, so that a run with
# FEATURES=r2l+... trains it beside the baseline
chain_a() {
  stage train "$M/train.done" train_model "${BASELINE[@]}"
  stage nbest-val "$N/val.nbest" nbest_of "$M" valid val "$NBEST"
  stage nbest-test "$N/test.nbest" nbest_of "$M" test test "$NBEST"
  if has channel; then stage train-channel "$CHANNEL_DIR/train.done" train_model "${CHANNEL[@]}"; fi
  if has lm; then stage train-lm "$LM_DIR/train.done" train_lm; fi
}
chain_b() {
  if has r2l; then stage train-r2l "$R2L_DIR/train.done" train_model "${R2L[@]}"; fi
  if [ "$R2L_NBEST" != 0 ]; then  # the R2L model's own lists, for the union with the baseline's
    stage nbest-r2l-val "$N/val.r2l-beam.nbest" nbest_of "$R2L_DIR" valid val.r2l-beam "$R2L_NBEST"
    stage nbest-r2l-test "$N/test.r2l-beam.nbest" nbest_of "$R2L_DIR" test test.r2l-beam "$R2L_NBEST"
  fi
  if has l2r2; then stage train-l2r2 "$A/l2r2/train.done" train_model "${L2R2_MODEL[@]}"; fi
  if has mlmme; then stage embed-train "$E/heldout.json" embed_train; fi
}
chains chain_a chain_b

# --- features: one stage per scorer, each list carrying all earlier columns -----------
# each set of FEATURES (one line each, in ALL_FEATURES' order): its scorers and its tuning
# set (rerank tune --feature-sets, on top of the beam's)
SCORERS=()  # NAME:SCORER[+SCORER]
SETS=("nmt:beam")  # NAME:FEATURE-SETS
while read -r name feature_set specs; do
  if has "$name"; then SCORERS+=("$name:$specs"); SETS+=("$name:beam,$feature_set"); fi
done <<SETS_END
mlmme MLMME mlmme:$E
r2l R2L nmt:$R2L_DIR
channel Channel nmt:$CHANNEL_DIR
lm LM lm:$LM_DIR
l2r2 L2R2 nmt:$A/l2r2
mbr MBR mbr:bleu+mbr:chrf
e5 E5 e5:
len Len len:$D
ibm1 IBM1 ibm1:$D
SETS_END
SETS+=("all:")
# the list the features are added to: the baseline's n-best list, or with R2L_NBEST its
# union with the R2L model's (each distinct hypothesis once), scored again by the baseline
# by forced decoding, whose columns NMT, WordPenalty, NMTNorm are declared the beam's
first_list() { if [ "$R2L_NBEST" = 0 ]; then echo "$N/$1.nbest"; else echo "$N/$1.union.nmt.nbest"; fi; }
for SPLIT in val test; do
  SRC="$D/tok/$([ "$SPLIT" = val ] && echo val || echo test_2016_flickr).en"
  prev=$(first_list "$SPLIT")
  if [ "$R2L_NBEST" != 0 ]; then
    stage "union-$SPLIT" "$N/$SPLIT.union.nbest" rerank union --nbest "$N/$SPLIT.nbest" \
      --nbest "$N/$SPLIT.r2l-beam.nbest" --out "$N/$SPLIT.union.nbest"
    stage "rescore-$SPLIT" "$prev" rerank features add --nbest "$N/$SPLIT.union.nbest" --source "$SRC" \
      --scorer "fairseq:$(checkpoint_of "$M"),dict=$M,bpe=subword-nmt:$M/bpe.codes,direction=forward,name=NMT" \
      --beam-feature NMTNorm --beam-set NMT,WordPenalty,NMTNorm --out "$prev"
  fi
  for item in "${SCORERS[@]}"; do
    name=${item%%:*}; specs=${item#*:}
    args=()
    IFS=+ read -r -a parts <<< "$specs"
    for spec in "${parts[@]}"; do args+=(--scorer "$spec"); done
    stage "features-$name-$SPLIT" "$N/$SPLIT.$name.nbest" rerank features add --nbest "$prev" "${args[@]}" \
      --source "$SRC" --out "$N/$SPLIT.$name.nbest"
    prev="$N/$SPLIT.$name.nbest"
  done
  [ -e "$N/$SPLIT.full.nbest" ] || { cp "$prev" "$N/$SPLIT.full.nbest.tmp" && cp "$prev.json" "$N/$SPLIT.full.nbest.json" \
    && mv "$N/$SPLIT.full.nbest.tmp" "$N/$SPLIT.full.nbest"; }
done

# --- tuning: each feature set alone on top of the beam's, then all of them -------------
# feature sets are named by scorer (the lists' signatures record them: rerank tune
# --feature-sets); no column name is spelled here
REF_VAL="$D/tok/val.de"; REF_TEST="$D/tok/test_2016_flickr.de"
SYSTEMS=()  # --system arguments of the manifest, in the report's row order
for TUNER in $TUNERS; do
  for item in "${SETS[@]}"; do
    set_name=${item%%:*}; sets=${item#*:}
    dir=$set_name$([ "$TUNER" = mira ] || echo ".$TUNER")
    mkdir -p "$R/$dir"
    for S in $(seq 1 "$REPLICAS"); do
      stage "tune-$dir-seed$S" "$R/$dir/weights.seed$S.json" rerank tune --algorithm "$TUNER" \
        --nbest "$N/val.full.nbest" --ref "$REF_VAL" --tokenize none ${sets:+--feature-sets "$sets"} \
        --out "$R/$dir/weights.seed$S.json" --seed "$S" --quiet
      stage "apply-$dir-seed$S" "$R/$dir/test.seed$S.txt" rerank apply --nbest "$N/test.full.nbest" \
        --weights "$R/$dir/weights.seed$S.json" --out "$R/$dir/test.seed$S.txt"
    done
    SYSTEMS+=(--system "+$set_name$([ "$TUNER" = mira ] || echo "/${TUNER^^}")=$R/$dir/test.seed{replica}.txt")
  done
done
# +all tuned for chrF instead of BLEU (MIRA): the report prints both rows' BLEU, METEOR,
# TER and chrF side by side
if [ "$CHRF_TUNING" = 1 ]; then
  mkdir -p "$R/all.chrf"
  for S in $(seq 1 "$REPLICAS"); do
    stage "tune-all.chrf-seed$S" "$R/all.chrf/weights.seed$S.json" rerank tune --metric chrf \
      --nbest "$N/val.full.nbest" --ref "$REF_VAL" --tokenize none --out "$R/all.chrf/weights.seed$S.json" \
      --seed "$S" --quiet
    stage "apply-all.chrf-seed$S" "$R/all.chrf/test.seed$S.txt" rerank apply --nbest "$N/test.full.nbest" \
      --weights "$R/all.chrf/weights.seed$S.json" --out "$R/all.chrf/test.seed$S.txt"
  done
  SYSTEMS+=(--system "+all/chrF-tuned=$R/all.chrf/test.seed{replica}.txt")
fi
# the experiment's manifest for rerank report: what is compared, in which order
rerank experiment "$OUT" --ref "$REF_TEST" --baseline "$N/test.1best" --nbest "$(first_list test)" \
  --tokenize none --replicas "$REPLICAS" "${SYSTEMS[@]}"

stage oracle "$R/test.oracle" rerank oracle --nbest "$(first_list test)" --ref "$REF_TEST" --tokenize none \
  --out "$R/test.oracle"
evaluate() {
  local args=(--ref "$REF_TEST" --tokenize none --hyp "baseline=$N/test.1best" --hyp "+nmt=$R/nmt/test.seed1.txt"
              --hyp "+all=$R/all/test.seed1.txt")
  [ -d "$R/all.mert" ] && args+=(--hyp "+all/MERT=$R/all.mert/test.seed1.txt")
  args+=(--hyp "oracle=$R/test.oracle")
  rerank eval "${args[@]}" --json --out "$OUT/results.json" > /dev/null
  rerank eval "${args[@]}" --out "$OUT/results.txt" > /dev/null
}
stage eval "$OUT/results.txt" evaluate
stage report "$OUT/report/table.txt" rerank report "$OUT" --metrics bleu,meteor,ter,chrf,length --compare-to +nmt
# the trained system in one directory (decoder, +all's scorer chain as tuned, the replica of
# the best val score): rerank translate --system "$OUT/system" --input RAW.en --out OUT.de
if [ "$R2L_NBEST" = 0 ]; then  # a rescored union of two decoders' lists is not replayable yet
  pack_weights=(); for S in $(seq 1 "$REPLICAS"); do pack_weights+=(--weights "$R/all/weights.seed$S.json"); done
  stage system "$OUT/system/system.json" rerank pack-system --nbest "$N/val.full.nbest" --data-bin "$D/bin" \
    "${pack_weights[@]}" --out "$OUT/system"
fi
echo "== results (test_2016_flickr, tokenised lowercased text, BLEU tokenize=none; replica 1)"
cat "$OUT/results.txt"
echo "== tuning-set score (BLEU; chrF for all.chrf) of every run against the beam's ($R/*/weights.seed*.json)"
python "$ROOT/scripts/tuning_summary.py" "$R"
echo "== significance over $REPLICAS tuning replicas ($OUT/report/)"
cat "$OUT/report/table.txt"
if [ "$CHRF_TUNING" = 1 ]; then
  echo "== +all tuned for BLEU and for chrF (test_2016, mean of $REPLICAS replicas)"
  grep -E "^(system|\+all |\+all/chrF-tuned)" "$OUT/report/table.txt" || true
fi
echo "== stage wall times, seconds ($TIMINGS)"
cat "$TIMINGS"
