#!/usr/bin/env bash
# The test suite: sets up .venv with the [nmt] extra (scripts/setup_env.sh) and runs pytest;
# then the core tests (BLEU, TER, chrF statistics and significance against sacrebleu's) once
# more in .venv-oldest with the oldest sacrebleu the package supports (setup.py: >=2.3.1), so
# that both ends of the supported range are tested.  Extra arguments go to the first pytest.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup_env.sh" nmt
cd "$ROOT"
export TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 RERANK_REQUIRE_NMT=1
status=0
"$ROOT/.venv/bin/python" -m pytest -q "$@" tests || status=$?
OLDEST=sacrebleu==2.3.1
VENV=$ROOT/.venv-oldest bash "$ROOT/scripts/setup_env.sh" core "$OLDEST"
echo "== core tests with $OLDEST"
env -u RERANK_REQUIRE_NMT "$ROOT/.venv-oldest/bin/python" -m pytest -q -p no:cacheprovider tests/test_bleu.py tests/test_significance.py \
  tests/test_consensus_length.py tests/test_nbest.py tests/test_mira.py || status=$?
exit $status
