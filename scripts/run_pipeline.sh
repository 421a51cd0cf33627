#!/usr/bin/env bash
# The main job (Multi30k en->de): runs the rules of workflow/Snakefile with Snakemake on this
# machine (--cores JOBS: both trainings side by side), with the settings of config/SYSTEM.yaml
# and config/schema.yaml, each overridable by an environment variable of its name in capitals.
#
#   bash scripts/run_pipeline.sh               # the default system (transformer)
#   SYSTEM=gru NBEST=50 OUT=out/gru50 bash scripts/run_pipeline.sh
#   bash scripts/run_pipeline.sh --help        # every setting, its default and an example (generated)
#   bash scripts/run_pipeline.sh --settings    # the resolved settings, KEY=VALUE; nothing runs
#   bash scripts/run_pipeline.sh --dry-run     # the jobs that would run (snakemake --dry-run)
#   bash scripts/run_pipeline.sh --dag         # the jobs' graph in Graphviz dot (snakemake --dag)
#
# Everything else (the rules, the settings, their help) lives in workflow/ and config/.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SETTINGS="$ROOT/workflow/settings"
mode=run
case "${1:-}" in
  "") ;;
  -h|--help) exec "$(bash "$ROOT/scripts/settings_python.sh")" "$SETTINGS" help ;;
  --settings) exec "$(bash "$ROOT/scripts/settings_python.sh")" "$SETTINGS" settings ;;
  -n|--dry-run) mode=dry-run ;;
  --dag) mode=dag ;;
  *) echo "run_pipeline: error: unknown argument '$1' (settings are environment variables: --help)" >&2; exit 1 ;;
esac
[ $# -le 1 ] || { echo "run_pipeline: error: one argument at most (--help)" >&2; exit 1; }
PY=$(bash "$ROOT/scripts/settings_python.sh")
config=$(mktemp "${TMPDIR:-/tmp}/rerank-pipeline.XXXXXX.json")
trap 'rm -f "$config"' EXIT
"$PY" "$SETTINGS" config > "$config"  # a bad setting: one line, exit 1, nothing written
OUT=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["out"])' "$config")
JOBS=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["jobs"])' "$config")

bash "$ROOT/scripts/setup_env.sh" nmt
# again with the job's python, which has rerank: the checks a python without it skips (TUNE_METRIC)
"$ROOT/.venv/bin/python" "$SETTINGS" config > "$config"
export PATH="$ROOT/.venv/bin:$PATH"
export PYTHONUNBUFFERED=1
snakemake=(snakemake --snakefile "$ROOT/workflow/Snakefile" --configfile "$config" --cores "$JOBS"
           --rerun-triggers mtime --rerun-incomplete --printshellcmds --quiet rules)
where=(); [ ! -d "$OUT" ] || where=(--directory "$OUT")  # OUT/.snakemake: a run's own state
case "$mode" in
  dry-run) "${snakemake[@]}" "${where[@]}" --dry-run; exit ;;
  dag) "${snakemake[@]}" "${where[@]}" --dag; exit ;;
esac
# one run per OUT: a second is refused; a run killed before (Ctrl-C, a lost machine) left
# Snakemake's lock behind, which this run clears (its unfinished jobs rerun: --rerun-incomplete;
# a training resumes from its last checkpoint). Snakemake's own state (locks, incomplete jobs)
# lives in OUT/.snakemake: runs in other OUTs never block each other
mkdir -p "$OUT/.snakemake"
exec 9> "$OUT/.snakemake/run_pipeline.lock"
flock -n 9 || { echo "run_pipeline: error: $OUT: another run is using this directory" >&2; exit 1; }
# before any work: finished models of other settings, an OUT that holds a run of other
# settings (one line each; workflow/settings preflight); Snakemake's onstart then skips it
"$ROOT/.venv/bin/python" "$SETTINGS" preflight
export RERANK_PREFLIGHT_DONE=1
"${snakemake[@]}" --directory "$OUT" --unlock > /dev/null 2>&1 || true
"${snakemake[@]}" --directory "$OUT"

R="$OUT/rerank"
echo "== results (the test set, replica 1; $OUT/results.json: the same as JSON)"
cat "$OUT/results.txt"
echo "== tuning-set score (BLEU; chrF for all.chrf) of every run against the beam's ($R/*/weights.seed*.json)"
python "$ROOT/scripts/tuning_summary.py" "$R"
echo "== significance over the tuning replicas ($OUT/report/)"
cat "$OUT/report/table.txt"
echo "== stage wall times, seconds ($OUT/timings.tsv, from $OUT/benchmarks/)"
cat "$OUT/timings.tsv"
