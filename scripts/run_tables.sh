#!/usr/bin/env bash
# The paper's Tables 3 and 4 (Calixto & Liu 2017): NMT variants weak / regular / optimised
# × 20- and 50-best lists × re-rankers +VSE (s_i) and +MLMME β = 1 / 0.75 / 0.5 / 0.25
# (s_s and s_i), with the baseline, +nmt, +all (the main job's features, where its lists
# are shared) and oracle rows, the paper's value beside ours in every cell.
#
#   bash scripts/run_tables.sh           # everything under out/tables (about 8 h on 2 CPU cores)
#
# Protocols (PROTOCOL=crossfit, the default; the README's "Tables 3 and 4" section):
# * crossfit — image features exist here only for the 1,000 test_2016 images, none for val
#   where the paper tuned.  test_2016 is split by image into K folds (rerank folds); for
#   fold k every embedding model is trained with the images of the other folds only (plus
#   all training text) and scores fold k's hypotheses (s_s and s_i); MIRA is tuned on the
#   other folds' lists and applied to fold k (rerank crossfit); the re-ranked test set is
#   the K folds put back in order.  Rows without s_i (+nmt, +all) are tuned the same way.
#   A second view tunes on val as the paper did, with s_s only (no val images): for fold k
#   the fold-k model scores val and fold k's test hypotheses, MIRA is tuned on val and its
#   weights select fold k's hypotheses.
#   Views with s_i also tune each +MLMME β row without it ("(s_s only)": the s_i ablation)
#   and write a second report with ‡ against +nmt (report-vs-nmt/).
# * paper — the paper's protocol, for users with image features of every split (the
#   official Multi30k ResNet features, or rerank features extract over Flickr30k):
#   IMAGES=FEATS.npy IMAGE_NAMES=NAMES.txt (rows for train, val and test_2016 images);
#   one model per row, s_s and s_i on val and test, MIRA tuned on val.
#
# It shares the main job's stages and outputs (OUT_MAIN=out/multi30k): the data, the
# regular model, its 20-best lists with every feature of the main job (the +all row),
# and the text-only MLMME model that the MLMME models here start from; it runs
# SYSTEM=gru scripts/run_pipeline.sh first (MAIN_JOB=0 skips that: the files must exist).
#
# Settings: OUT, OUT_MAIN, DATA, FEATS / FEAT_SPLIT (test_2016 features and their image
# names), PAPER_TABLE, VARIANTS ("weak regular optimised"), SIZES ("20 50"; beam = list
# size), BETAS ("1 0.75 0.5 0.25"), K (5 folds), FOLD_SEED (1), REPLICAS (3), MAX_EPOCH
# (12), PATIENCE (3), SEED (1), EMBED_STEPS (300: batches of β·R_MM + (1−β)·R_ML from the
# text-only model), VSE_EPOCHS (60, from scratch), VALID_IMAGES (100 of the training
# folds' images select the embedding model), METRICS, JOBS (2 chains, one thread each).
# Every stage skips when its output exists; timings.tsv records each stage's seconds.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
[ $# -eq 0 ] || { echo "run_tables.sh: error: no arguments are taken (settings are environment variables; --help)" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$ROOT/out/tables}
OUT_MAIN=${OUT_MAIN:-$ROOT/out/multi30k}
DATA=${DATA:-$ROOT/../shared/data/multi30k}
FEATS=${FEATS:-$DATA/features/test_2016_flickr-resnet50-avgpool.npy}
FEAT_SPLIT=${FEAT_SPLIT:-$DATA/task1/image_splits/test_2016_flickr.txt}
PAPER_TABLE=${PAPER_TABLE:-$ROOT/../shared/reference/calixto2017_tables3-4.tsv}
PROTOCOL=${PROTOCOL:-crossfit}
VARIANTS=${VARIANTS:-weak regular optimised}
SIZES=${SIZES:-20 50}
BETAS=${BETAS:-1 0.75 0.5 0.25}
K=${K:-5}
FOLD_SEED=${FOLD_SEED:-1}
REPLICAS=${REPLICAS:-3}
PRESET=${PRESET:-cpu}
MAX_EPOCH=${MAX_EPOCH:-12}
PATIENCE=${PATIENCE:-3}
SEED=${SEED:-1}
MAIN_NBEST=${MAIN_NBEST:-20}
EMBED_STEPS=${EMBED_STEPS:-300}
VSE_EPOCHS=${VSE_EPOCHS:-60}
VALID_IMAGES=${VALID_IMAGES:-100}
METRICS=${METRICS:-bleu,meteor,ter,chrf,length}
JOBS=${JOBS:-2}
MAIN_JOB=${MAIN_JOB:-1}
case "$PROTOCOL" in
  crossfit) ;;
  paper) [ -n "${IMAGES:-}" ] && [ -n "${IMAGE_NAMES:-}" ] \
           || { echo "run_tables.sh: PROTOCOL=paper needs IMAGES and IMAGE_NAMES (features of train, val, test)" >&2; exit 1; } ;;
  *) echo "run_tables.sh: PROTOCOL must be crossfit or paper, not $PROTOCOL" >&2; exit 1 ;;
esac
for f in "$PAPER_TABLE" "$DATA/task1/image_splits/val.txt"; do
  [ -e "$f" ] || { echo "run_tables.sh: missing $f" >&2; exit 1; }
done
if [ "$PROTOCOL" = crossfit ]; then
  for f in "$FEATS" "$FEAT_SPLIT"; do [ -e "$f" ] || { echo "run_tables.sh: missing $f" >&2; exit 1; }; done
fi

bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 PYTHONUNBUFFERED=1
if [ "$MAIN_JOB" = 1 ]; then
  SYSTEM=gru OUT="$OUT_MAIN" bash "$ROOT/scripts/run_pipeline.sh"  # the paper's GRU system, every feature
fi
mkdir -p "$OUT"
TIMINGS="$OUT/timings.tsv"
touch "$TIMINGS"
THREADS=$([ "$JOBS" -ge 2 ] && echo 1 || echo 0)

source "$ROOT/scripts/stage.sh"  # stage NAME OUTPUT COMMAND...; chains FUNC_A FUNC_B
logged() {  # logged LOG COMMAND...: run COMMAND with its output in LOG; on failure show LOG's end
  local log=$1; shift
  "$@" > "$log" 2>&1 || { echo "failed: $* (see $log)" >&2; tail -n 5 "$log" >&2; return 1; }
}

D="$OUT_MAIN/data"; E="$OUT/embed"; F="$OUT/folds.tsv"
SRC_VAL="$D/tok/val.en"; SRC_TEST="$D/tok/test_2016_flickr.en"
REF_VAL="$D/tok/val.de"; REF_TEST="$D/tok/test_2016_flickr.de"
IMG_VAL="$DATA/task1/image_splits/val.txt"; IMG_TEST="$DATA/task1/image_splits/test_2016_flickr.txt"
TEXT_MODEL="$OUT_MAIN/embed"
mkdir -p "$E"

model_dir() { [ "$1" = regular ] && echo "$OUT_MAIN/model" || echo "$OUT/$1/model"; }
shared() { [ "$1" = regular ] && [ "$2" = "$MAIN_NBEST" ]; }  # the main job's own lists
list_in() {  # list_in VARIANT SPLIT SIZE: the n-best list a cell starts from
  if shared "$1" "$3"; then
    echo "$OUT_MAIN/nbest/$2.full.nbest"  # every feature of the main job (checked below)
  else
    echo "$OUT/$1/$2.$3.nbest"
  fi
}
baseline_of() { shared "$1" "$2" && echo "$OUT_MAIN/nbest/test.1best" || echo "$OUT/$1/test.$2.1best"; }

# --- NMT variants and their lists --------------------------------------------------------
train_nmt() {  # train_nmt VARIANT: as the main job trains its baseline
  local dir; dir=$(model_dir "$1")
  mkdir -p "$dir"
  rerank nmt train --data-bin "$D/bin" --save-dir "$dir" --preset "$PRESET" --variant "$1" --patience "$PATIENCE" \
    --threads "$THREADS" --max-epoch "$MAX_EPOCH" --seed "$SEED" >> "$dir/../train.log" 2>&1 \
    || { echo "training $1 failed: see $dir/../train.log" >&2; return 1; }
  touch "$dir/train.done"
}
decode() {  # decode VARIANT SUBSET NAME SIZE
  local dir; dir=$(model_dir "$1")
  logged "$OUT/$1/$3.$4.log" rerank nmt nbest --data-bin "$D/bin" --checkpoint "$dir/checkpoint_best.pt" \
    --subset "$2" --nbest "$4" --out-nbest "$OUT/$1/$3.$4.nbest" --out-1best "$OUT/$1/$3.$4.1best"
}
chain_variant() {  # train (unless shared with the main job) and decode every list of one variant
  local v=$1
  mkdir -p "$OUT/$v"
  [ "$v" = regular ] || stage "train-$v" "$(model_dir "$v")/train.done" train_nmt "$v"
  for n in $SIZES; do
    shared "$v" "$n" && continue
    stage "nbest-$v-val-$n" "$OUT/$v/val.$n.nbest" decode "$v" valid val "$n"
    stage "nbest-$v-test-$n" "$OUT/$v/test.$n.nbest" decode "$v" test test "$n"
  done
}

# --- embedding models --------------------------------------------------------------------
embed_args() {  # the image data of one model: cross-fitted fold, or every split's features
  if [ "$PROTOCOL" = crossfit ]; then
    echo --image-features "$FEATS" --image-split "$FEAT_SPLIT" --folds "$F" --fold "$1" --valid-images "$VALID_IMAGES"
  else
    echo --image-features "$IMAGES" --image-split "$IMAGE_NAMES" --image-task2-split none
  fi
}
train_embed() {  # train_embed DIR FOLD ARGS...
  local dir=$1 fold=$2; shift 2
  mkdir -p "$dir"
  # shellcheck disable=SC2046
  logged "$dir.log" rerank embed train --data "$DATA" $(embed_args "$fold") --validate-every 100 --patience 4 \
    --threads "$THREADS" "$@" --out "$dir"
}
embed_dir() {  # embed_dir NAME FOLD
  [ "$PROTOCOL" = crossfit ] && echo "$E/$1/fold$2" || echo "$E/$1"
}
chain_embed() {  # chain_embed FOLD...: VSE (de, from scratch) and MLMME β (from the text-only model)
  for k in "$@"; do
    stage "embed-vse-f$k" "$(embed_dir vse "$k")/heldout.json" train_embed "$(embed_dir vse "$k")" "$k" \
      --langs de --beta 1 --epochs "$VSE_EPOCHS"
    for b in $BETAS; do
      stage "embed-b$b-f$k" "$(embed_dir "mlmme-b$b" "$k")/heldout.json" train_embed "$(embed_dir "mlmme-b$b" "$k")" \
        "$k" --task1 --beta "$b" --init-model "$TEXT_MODEL" --epochs 60 --max-steps "$EMBED_STEPS"
    done
  done
}

if [ "$PROTOCOL" = crossfit ]; then
  stage folds "$F" rerank folds --segment-images "$IMG_TEST" --k "$K" --seed "$FOLD_SEED" --out "$F"
  FOLDS_A=$(seq 0 2 $((K - 1)) | tr '\n' ' '); FOLDS_B=$(seq 1 2 $((K - 1)) | tr '\n' ' ')
else
  FOLDS_A="all"; FOLDS_B=""
fi
# two chains of stages side by side (one thread each), or one after the other (JOBS=1)
CHAIN_A=() CHAIN_B=()
i=0
for v in $(for v in $VARIANTS; do [ "$v" = regular ] || echo "$v"; done) $(for v in $VARIANTS; do
           [ "$v" = regular ] && echo "$v"; done); do  # the variants to train first, alternating
  if [ $((i % 2)) = 0 ]; then CHAIN_A+=("$v"); else CHAIN_B+=("$v"); fi
  i=$((i + 1))
done
# shellcheck disable=SC2086
run_a() { for v in "${CHAIN_A[@]}"; do chain_variant "$v"; done; chain_embed $FOLDS_A; }
# shellcheck disable=SC2086
run_b() { for v in "${CHAIN_B[@]}"; do chain_variant "$v"; done; [ -z "$FOLDS_B" ] || chain_embed $FOLDS_B; }
chains run_a run_b
if [ "$PROTOCOL" = crossfit ]; then
  for k in $(seq 0 $((K - 1))); do  # ISR of each fold's models on the fold's own (held-out) images
    for name in vse $(for b in $BETAS; do echo "mlmme-b$b"; done); do
      dir=$(embed_dir "$name" "$k")
      stage "isr-$name-f$k" "$dir/isr.de.json" sh -c "rerank embed isr --model '$dir' --data '$DATA' \
        --image-features '$FEATS' --image-split '$FEAT_SPLIT' --lang de --json > '$dir/isr.de.json.tmp' \
        && mv '$dir/isr.de.json.tmp' '$dir/isr.de.json'"
    done
  done
fi

# --- features ----------------------------------------------------------------------------
scorers() {  # scorers FOLD WITH_VSE: --scorer arguments of every embedding model
  local fold=$1
  [ "$2" = 1 ] && printf -- '--scorer\nvse:%s\n' "$(embed_dir vse "$fold")"
  for b in $BETAS; do printf -- '--scorer\nmlmme:%s,name=MLMMEb%s\n' "$(embed_dir "mlmme-b$b" "$fold")" "$b"; done
}
add() {  # add OUT ARGS...: rerank features add with its log
  local out=$1; shift
  logged "$out.log" rerank features add "$@" --out "$out"
}
N="$OUT/lists"; mkdir -p "$N"
for v in $VARIANTS; do
  for n in $SIZES; do
    for split in val test; do
      [ -e "$(list_in "$v" $split "$n")" ] || { echo "run_tables.sh: missing $(list_in "$v" $split "$n")" \
        "(the main job's lists: run scripts/run_pipeline.sh to the end)" >&2; exit 1; }
    done
  done
done
for v in $VARIANTS; do
  for n in $SIZES; do
    c="$v.$n"
    if [ "$PROTOCOL" = crossfit ]; then
      mapfile -t SI < <(scorers '{fold}' 1)
      mapfile -t SS < <(scorers '{fold}' 0)
      stage "features-$c-test-si" "$N/test.$c.si.nbest" add "$N/test.$c.si.nbest" --nbest "$(list_in "$v" test "$n")" \
        --source "$SRC_TEST" --images "$FEATS" --image-split "$FEAT_SPLIT" --segment-images "$IMG_TEST" --folds "$F" \
        "${SI[@]}"
      stage "features-$c-test-ss" "$N/test.$c.ss.nbest" add "$N/test.$c.ss.nbest" --nbest "$(list_in "$v" test "$n")" \
        --source "$SRC_TEST" --folds "$F" "${SS[@]}"
      for k in $(seq 0 $((K - 1))); do
        mapfile -t SS < <(scorers "$k" 0)
        stage "features-$c-val-f$k" "$N/val.$c.f$k.nbest" add "$N/val.$c.f$k.nbest" --nbest "$(list_in "$v" val "$n")" \
          --source "$SRC_VAL" "${SS[@]}"
      done
    else
      mapfile -t SI < <(scorers all 1)
      for split in val test; do
        src=$([ $split = val ] && echo "$SRC_VAL" || echo "$SRC_TEST")
        img=$([ $split = val ] && echo "$IMG_VAL" || echo "$IMG_TEST")
        stage "features-$c-$split" "$N/$split.$c.si.nbest" add "$N/$split.$c.si.nbest" \
          --nbest "$(list_in "$v" $split "$n")" --source "$src" --images "$IMAGES" --image-split "$IMAGE_NAMES" \
          --segment-images "$img" "${SI[@]}"
      done
    fi
  done
done

# --- tuning: 3 MIRA replicas per row, and the reports -------------------------------------
rows_of() {  # rows_of VIEW SHARED: "name<TAB>dir<TAB>feature sets" (empty: every column); sets are the scorers'
  local view=$1
  printf '+nmt\tnmt\tbeam\n'
  [ "$view" != val ] && printf '+VSE\tvse\tbeam,VSE\n'
  for b in $BETAS; do printf '+MLMME beta=%s\tb%s\tbeam,MLMMEb%s\n' "$b" "$b" "$b"; done  # s_s (and s_i where scored)
  if [ "$view" != val ]; then  # the s_i ablation: the same models and tuning without s_i
    for b in $BETAS; do printf '+MLMME beta=%s (s_s only)\tb%s-ss\tbeam,MLMMEb%s/ss\n' "$b" "$b" "$b"; done
  fi
  [ "$2" = 1 ] && printf '+all\tall\t\n'  # the main job's lists carry every feature
  return 0
}
tune_val_folds() {  # tune_val_folds CELL DIR FEATURES SEED: fold k tuned on val with the fold-k model's s_s
  local c=$1 dir=$2 features=$3 s=$4
  for k in $(seq 0 $((K - 1))); do
    rerank tune --nbest "$N/val.$c.f$k.nbest" --ref "$REF_VAL" --tokenize none ${features:+--feature-sets "$features"} --seed "$s" \
      --quiet --out "$dir/weights.seed$s.fold$k.json" 2>> "$dir/tune.log"
  done
  rerank apply --nbest "$N/test.$c.ss.nbest" --folds "$F" --weights "$dir/weights.seed$s.fold{fold}.json" \
    --out "$dir/test.seed$s.txt"
}
tune_paper() {  # tune_paper CELL DIR FEATURES SEED: the paper's protocol, tuned on val
  local c=$1 dir=$2 features=$3 s=$4
  rerank tune --nbest "$N/val.$c.si.nbest" --ref "$REF_VAL" --tokenize none ${features:+--feature-sets "$features"} --seed "$s" \
    --quiet --out "$dir/weights.seed$s.json" 2>> "$dir/tune.log"
  rerank apply --nbest "$N/test.$c.si.nbest" --weights "$dir/weights.seed$s.json" --out "$dir/test.seed$s.txt"
}
caption() {
  case "$1" in
    crossfit) echo "test_2016, cross-fitted over $K folds by image (embedding models trained without the fold's images; MIRA tuned on the other folds' lists); every row tuned so; $REPLICAS MIRA replicas";;
    val) echo "test_2016, MIRA tuned on val as in the paper, s_s only (no val image features here: MLMME rows lack s_i, no +VSE row); fold k's hypotheses scored and selected with the fold-k embedding model and its val-tuned weights; $REPLICAS MIRA replicas";;
    paper) echo "test_2016, the paper's protocol: embedding models trained with train images, MIRA tuned on val with s_s and s_i; $REPLICAS MIRA replicas";;
  esac
}
VIEWS=$([ "$PROTOCOL" = crossfit ] && echo "crossfit val" || echo "paper")
for v in $VARIANTS; do
  for n in $SIZES; do
    c="$v.$n"
    for view in $VIEWS; do
      R="$OUT/rerank/$c.$view"
      systems=()
      while IFS=$'\t' read -r name dir features; do
        mkdir -p "$R/$dir"
        for s in $(seq 1 "$REPLICAS"); do
          case "$view" in
            crossfit) stage "tune-$c.$view-$dir-seed$s" "$R/$dir/test.seed$s.txt" rerank crossfit \
                        --nbest "$N/test.$c.si.nbest" --ref "$REF_TEST" --folds "$F" --tokenize none ${features:+--feature-sets "$features"} \
                        --seed "$s" --quiet --out "$R/$dir/test.seed$s.txt" --weights-out "$R/$dir/weights.seed$s.json";;
            val) stage "tune-$c.$view-$dir-seed$s" "$R/$dir/test.seed$s.txt" tune_val_folds "$c" "$R/$dir" "$features" "$s";;
            paper) stage "tune-$c.$view-$dir-seed$s" "$R/$dir/test.seed$s.txt" tune_paper "$c" "$R/$dir" "$features" "$s";;
          esac
        done
        systems+=(--system "$name=$R/$dir/test.seed{replica}.txt")
      done < <(rows_of "$view" "$(shared "$v" "$n" && echo 1 || echo 0)")
      compare=$([ "$view" = val ] && echo "+nmt" || echo "+VSE")
      # the manifest, rewritten only when its rows change (the reports below are then redone)
      rerank experiment "$R" --ref "$REF_TEST" --baseline "$(baseline_of "$v" "$n")" \
        --nbest "$(list_in "$v" test "$n")" --tokenize none --caption "$(caption "$view")" --replicas "$REPLICAS" \
        --paper-table "$PAPER_TABLE" --paper-select "nbest=$n" --paper-select "variant=$v" "${systems[@]}"
      for report in report report-vs-nmt; do  # a report older than its manifest is stale
        [ "$R/$report/table.json" -nt "$R/experiment.json" ] || rm -f "$R/$report/table.json"
      done
      stage "report-$c.$view" "$R/report/table.json" logged "$R/report.log" rerank report "$R" --metrics "$METRICS" \
        --compare-to "$compare"
      if [ "$view" != val ]; then  # do the embedding features add anything to the NMT features?
        stage "report-$c.$view-vs-nmt" "$R/report-vs-nmt/table.json" logged "$R/report-vs-nmt.log" \
          rerank report "$R" --out "$R/report-vs-nmt" --metrics "$METRICS" --compare-to "+nmt"
      fi
    done
  done
done
python "$ROOT/scripts/paper_tables.py" "$OUT" --views "$VIEWS" --variants "$VARIANTS" --sizes "$SIZES"
cat "$OUT/tables.md"
