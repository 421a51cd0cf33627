#!/usr/bin/env bash
# Print a python that can read the pipelines' settings (PyYAML and jsonschema: Snakemake's own
# dependencies): the project's .venv, else the machine's python3, else .venv after
# scripts/setup_env.sh nmt (its output on stderr). Used by run_pipeline.sh and run_tables.sh, so
# that --help and --settings need no installation where either python has them.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
for py in "$ROOT/.venv/bin/python" python3; do
  if command -v "$py" > /dev/null 2>&1 && "$py" -c "import yaml, jsonschema" > /dev/null 2>&1; then
    echo "$py"
    exit 0
  fi
done
bash "$ROOT/scripts/setup_env.sh" nmt >&2
echo "$ROOT/.venv/bin/python"
