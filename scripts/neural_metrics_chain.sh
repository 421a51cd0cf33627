#!/usr/bin/env bash
# The neural-metric chain on a finished main job's lists (docs/results.md, "Neural metrics on the
# de->en lists"): CometKiwi (QE) and COMET-MBR feature columns added to val and test, MIRA tuned
# for BLEU with and without them (3 seeds), test re-ranked, significance with COMET and CometKiwi
# beside BLEU and TER. Checkpoints: COMET=DIR (reference-based) and QE=DIR (reference-free); by
# default the tests' tiny random ones, built under OUT (no accuracy claim is possible with them).
#
#   JOB=out/multi30k-de-en SRC=de TGT=en OUT=out/neural-chain bash scripts/neural_metrics_chain.sh
#   COMET=models/wmt22-comet-da QE=models/wmt22-cometkiwi-da bash scripts/neural_metrics_chain.sh
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
cd "$(dirname "$0")/.."
JOB=${JOB:-out/multi30k-de-en} SRC=${SRC:-de} TGT=${TGT:-en} OUT=${OUT:-out/neural-chain}
export PATH="$PWD/.venv/bin:$PATH"
mkdir -p "$OUT"
if [ -z "${COMET:-}" ] || [ -z "${QE:-}" ]; then
  python -c "import sys; sys.path.insert(0, '.'); from tests.comet_tiny import build_checkpoint as b; b('$OUT/tiny', 'da'); b('$OUT/tiny', 'kiwi')"
fi
COMET=${COMET:-$OUT/tiny/da} QE=${QE:-$OUT/tiny/kiwi}
declare -A SOURCE=([val]=$JOB/data/tok/val.$SRC [test]=$JOB/data/tok/test_2016_flickr.$SRC)
for split in val test; do
  /usr/bin/time -f "features $split: %e s, %M KB" rerank features add --nbest "$JOB/nbest/$split.full.nbest" \
    --source "${SOURCE[$split]}" --scorer "cometkiwi:$QE" --scorer "mbr:comet:$COMET" --out "$OUT/$split.neural.nbest"
done
for seed in 1 2 3; do
  for run in neural control; do
    list=$OUT/val.neural.nbest test=$OUT/test.neural.nbest
    [ $run = control ] && list=$JOB/nbest/val.full.nbest test=$JOB/nbest/test.full.nbest
    rerank tune --nbest "$list" --ref "$JOB/data/tok/val.$TGT" --tokenize none --seed $seed \
      --out "$OUT/$run.weights.seed$seed.json"
    rerank apply --nbest "$test" --weights "$OUT/$run.weights.seed$seed.json" --out "$OUT/$run.seed$seed.txt"
  done
done
replicas() { echo "$OUT/$1.seed1.txt,$OUT/$1.seed2.txt,$OUT/$1.seed3.txt"; }
rerank signif --ref "$JOB/data/tok/test_2016_flickr.$TGT" --tokenize none --baseline "$JOB/nbest/test.1best" \
  --system "+all (BLEU-tuned)=$(replicas control)" --system "+all+neural=$(replicas neural)" \
  --compare-to "+all (BLEU-tuned)" \
  --metrics "bleu,ter,comet:$COMET,source=${SOURCE[test]},cometkiwi:$QE,source=${SOURCE[test]}" | tee "$OUT/signif.txt"
