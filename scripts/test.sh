#!/usr/bin/env bash
# The test suite (what CI runs):
#  1. sets up .venv with every extra and the development tools (scripts/setup_env.sh nmt), and
#     Debian's chromium and chromium-driver where apt-get can (the report page's browser test);
#  2. style: ruff format --check and ruff check (ruff.toml); types: mypy at pyproject.toml's level;
#  3. the documentation: mkdocs build --strict (mkdocs.yml, docs/);
#  4. pytest over tests/ in .venv, where a missing extra is a failure (RERANK_REQUIRE_EXTRAS),
#     ending with the wall times of the 25 slowest tests (the SLURM cluster's among them);
#  5. the whole suite once more in .venv-oldest, a core-only install (no torch, no extras)
#     with the oldest sacrebleu the package supports (pyproject.toml: >=2.3.1): the tests that need
#     an extra skip with the reason, everything else must pass at that end of the range too.
# Extra arguments go to the first pytest.
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$ROOT/scripts/setup_env.sh" nmt
cd "$ROOT"
# the report page's browser test (tests/core/test_report_page_browser.py) drives Debian's chromium;
# installed here where this runs as root with apt-get, else that test skips, saying why
if { ! command -v chromium || ! command -v chromedriver; } > /dev/null && [ "$(id -u)" = 0 ] \
  && command -v apt-get > /dev/null; then
  echo "== installing Debian's chromium and chromium-driver for the browser test (1-2 min)"
  { apt-get update -q && apt-get install -y -q chromium chromium-driver; } > /dev/null 2>&1 \
    || echo "test: chromium could not be installed; the browser test will skip" >&2
fi
status=0
echo "== ruff format --check, ruff check"
.venv/bin/ruff format --check --quiet . || status=$?
.venv/bin/ruff check --quiet . || status=$?
echo "== mypy (pyproject.toml [tool.mypy])"
.venv/bin/mypy || status=$?
echo "== mkdocs build --strict"
NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict --quiet --site-dir "$(mktemp -d)" || status=$?
echo "== pytest (every extra installed)"
RERANK_REQUIRE_EXTRAS=1 .venv/bin/python -m pytest -q --durations=25 "$@" tests || status=$?
OLDEST=sacrebleu==2.3.1
VENV=$ROOT/.venv-oldest bash "$ROOT/scripts/setup_env.sh" core "$OLDEST"
echo "== pytest in a core-only install with $OLDEST"
env -u RERANK_REQUIRE_EXTRAS "$ROOT/.venv-oldest/bin/python" -m pytest -q -p no:cacheprovider tests || status=$?
exit $status
