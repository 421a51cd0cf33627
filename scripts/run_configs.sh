#!/usr/bin/env bash
# Issue 20's configuration comparison: the main job (run_pipeline.sh) once per
# configuration, each in its own directory out/configs/NAME, then one table
# (scripts/config_table.py: beam BLEU, re-ranked BLEU, gain, p, METEOR/TER, oracle, time).
#
#   bash scripts/run_configs.sh                 # the default grid below
#   CONFIGS="tiny:ARCH=transformer-tiny,MAX_EPOCH=60 tiny50:ARCH=transformer-tiny,MAX_EPOCH=60,NBEST=50" \
#       bash scripts/run_configs.sh
#   CONFIGS="tiny-r2l:ARCH=transformer-tiny,MAX_EPOCH=30,PATIENCE=10,FEATURES=r2l+mbr+len" \
#       bash scripts/run_configs.sh   # only the baseline and R2L are trained (FEATURES: sets joined by +)
#
# Settings (environment variables): CONFIGS (space-separated NAME:VAR=VALUE,VAR=VALUE…;
# the variables are run_pipeline.sh's; a configuration starts from SYSTEM=gru, the
# main job in SHARED, unless it sets SYSTEM=transformer), SHARED (default out/multi30k, the main job's
# OUT: its prepared data, its trained models and its MLMME model are shared by every
# configuration, and models a configuration trains land there for the next one; model
# directories are named by their architecture, and run_pipeline.sh refuses a finished
# one trained with other settings (MAX_EPOCH, SEED…: rerank nmt train --check), so
# sharing never mixes two models: give such a configuration its own SHARED), ROOT_OUT
# (default out/configs). Each configuration keeps its own n-best lists, feature lists,
# tuning runs and report. Every stage of every configuration is resumable (run it again);
# pipeline.log in each directory keeps its output, and the table counts a shared model's
# training time in every configuration that uses it (what it costs from scratch).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=$(realpath -m "${SHARED:-$ROOT/out/multi30k}")
ROOT_OUT=$(realpath -m "${ROOT_OUT:-$ROOT/out/configs}")
# the default grid; the main job itself (SHARED: gru baseline, gru R2L/channel, LSTM LM,
# 20-best) is the table's first row
CONFIGS=${CONFIGS:-"gru-nbest50:ARCH=gru,NBEST=50 \
tiny:ARCH=transformer-tiny,MAX_EPOCH=30,PATIENCE=10 \
tiny-tinyaux:ARCH=transformer-tiny,MAX_EPOCH=30,PATIENCE=10,AUX_ARCH=transformer-tiny,LM_ARCH=transformer-tiny"}

mkdir -p "$ROOT_OUT" "$SHARED/models" "$SHARED/embed"
dirs=()
for config in $CONFIGS; do
  name=${config%%:*}; vars=${config#*:}
  [ "$name" != "$config" ] || { echo "run_configs: error: $config: expected NAME:VAR=VALUE,..." >&2; exit 1; }
  OUT="$ROOT_OUT/$name"; mkdir -p "$OUT"
  env_args=(SYSTEM=gru)  # the configuration's own assignments come later and win
  IFS=, read -r -a assignments <<< "$vars"
  for assignment in "${assignments[@]}"; do
    case "$assignment" in
      OUT=*|DATA=*) echo "run_configs: error: $name: $assignment: set SHARED/ROOT_OUT instead" >&2; exit 1 ;;
      [A-Z]*=*) env_args+=("$assignment") ;;
      *) echo "run_configs: error: $name: $assignment is not VAR=VALUE" >&2; exit 1 ;;
    esac
  done
  # the baseline's architecture as the pipeline resolves it (its --settings; errors end here)
  arch=$(env "${env_args[@]}" OUT="$OUT" bash "$ROOT/scripts/run_pipeline.sh" --settings | sed -n 's/^ARCH=//p')
  model="model$([ "$arch" = gru ] || echo ".$arch")"
  mkdir -p "$SHARED/$model"
  for shared in data models embed "$model"; do  # an existing directory of its own is never replaced
    if [ -e "$OUT/$shared" ] && [ ! -L "$OUT/$shared" ]; then
      echo "run_configs: error: $OUT/$shared exists and is not a link to $SHARED/$shared" >&2; exit 1
    fi
    ln -sfn "$SHARED/$shared" "$OUT/$shared"
  done
  echo "== config $name: ${vars//,/ } (log: $OUT/pipeline.log)"
  env "${env_args[@]}" OUT="$OUT" bash "$ROOT/scripts/run_pipeline.sh" >> "$OUT/pipeline.log" 2>&1 \
    || { echo "run_configs: $name failed: see $OUT/pipeline.log" >&2; exit 1; }
  dirs+=("$OUT")
done
# SHARED is the table's first row when it holds a run of the main job (settings.json)
if [ -f "$SHARED/settings.json" ]; then dirs=("$SHARED" "${dirs[@]}"); fi
"$ROOT/.venv/bin/python" "$ROOT/scripts/config_table.py" "${dirs[@]}" --out "$ROOT_OUT/table"
