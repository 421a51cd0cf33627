#!/usr/bin/env bash
# The test suite: sets up .venv with the [nmt] extra (scripts/setup_env.sh) and runs pytest.
# Extra arguments go to pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup_env.sh" nmt
cd "$ROOT"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 RERANK_REQUIRE_NMT=1
exec "$ROOT/.venv/bin/python" -m pytest -q "$@" tests
