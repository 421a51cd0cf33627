#!/usr/bin/env bash
# The paper's Tables 3 and 4 (Calixto & Liu 2017): runs the GRU main job into OUT_MAIN
# (scripts/run_pipeline.sh; MAIN_JOB=0 skips it), then the rules of workflow/tables.smk with
# Snakemake on this machine (--cores JOBS), with the settings of config/tables.schema.yaml, each
# overridable by an environment variable of its name in capitals; then prints OUT/tables.md.
#
#   bash scripts/run_tables.sh               # everything under out/tables (about 8 h on 2 CPU cores)
#   bash scripts/run_tables.sh --help        # every setting, its default and an example (generated)
#   bash scripts/run_tables.sh --settings    # the resolved settings, KEY=VALUE; nothing runs
#   bash scripts/run_tables.sh --dry-run     # the jobs that would run (the main job's files must exist)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SETTINGS="$ROOT/workflow/settings"
mode=run
case "${1:-}" in
  "") ;;
  -h|--help) exec "$(bash "$ROOT/scripts/settings_python.sh")" "$SETTINGS" --tables help ;;
  --settings) exec "$(bash "$ROOT/scripts/settings_python.sh")" "$SETTINGS" --tables settings ;;
  -n|--dry-run) mode=dry-run ;;
  *) echo "run_tables.sh: error: unknown argument '$1' (settings are environment variables: --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "run_tables.sh: error: one argument at most (--help)" >&2; exit 2; }
PY=$(bash "$ROOT/scripts/settings_python.sh")
config=$(mktemp "${TMPDIR:-/tmp}/rerank-tables.XXXXXX.json")
trap 'rm -f "$config"' EXIT
"$PY" "$SETTINGS" --tables config > "$config"  # a bad setting: one line, exit 1, nothing written
get() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$config" "$1"; }
OUT=$(get out); OUT_MAIN=$(get out_main); JOBS=$(get jobs); MAIN_JOB=$(get main_job)

bash "$ROOT/scripts/setup_env.sh" nmt
export PATH="$ROOT/.venv/bin:$PATH"
export PYTHONUNBUFFERED=1
if [ "$MAIN_JOB" = 1 ] && [ "$mode" = run ]; then
  SYSTEM=gru OUT="$OUT_MAIN" bash "$ROOT/scripts/run_pipeline.sh"  # the paper's GRU system, every feature
fi
snakemake=(snakemake --snakefile "$ROOT/workflow/tables.smk" --configfile "$config" --cores "$JOBS"
           --rerun-triggers mtime --rerun-incomplete --quiet rules)
where=(); [ ! -d "$OUT" ] || where=(--directory "$OUT")  # OUT/.snakemake: a run's own state
if [ "$mode" = dry-run ]; then "${snakemake[@]}" "${where[@]}" --dry-run; exit; fi
mkdir -p "$OUT/.snakemake"
# one run per OUT: a second is refused; a run killed before (Ctrl-C, a lost machine) left
# Snakemake's lock behind, which this run may clear (its unfinished jobs rerun: --rerun-incomplete;
# a training resumes from its last checkpoint)
exec 9> "$OUT/.snakemake/run_tables.lock"
flock -n 9 || { echo "run_tables.sh: error: $OUT: another run is using this directory" >&2; exit 1; }
"${snakemake[@]}" --directory "$OUT" --unlock > /dev/null 2>&1 || true
"${snakemake[@]}" --directory "$OUT"
cat "$OUT/tables.md"
