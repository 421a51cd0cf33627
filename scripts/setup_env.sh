#!/usr/bin/env bash
# Create (once) the virtual environment .venv and install rerank into it (from this checkout:
# the package is not on PyPI yet).
#
#   bash scripts/setup_env.sh core [PIN]  # numpy, sacrebleu, tqdm, pytest: the core and its tests;
#                                        # PIN (e.g. sacrebleu==2.3.1) is installed on top
#   bash scripts/setup_env.sh nmt         # everything ([all], [test], [dev]: ruff, mkdocs): + torch
#                                        # 2.13.0 (CPU), fairseq-fixed 0.12.3.1, transformers,
#                                        # CTranslate2, sacremoses, subword-nmt, pycocoevalcap
#                                        # (METEOR jar), matplotlib, Snakemake
#   bash scripts/setup_env.sh --help      # this text
#
# Settings (environment): VENV (default .venv), PYTHON (default python3, 3.9 or newer).
# Each phase says what it installs and about how long it takes before it starts, and pip
# prints what it downloads and builds. torch is installed first and pinned to 2.13.0 so that
# pip takes the local CPU build and never resolves a CUDA build; fairseq-fixed builds from
# source once (~5 min), then pip's wheel cache makes later installs fast. Safe to run
# repeatedly: a finished install is skipped (a stamp in the venv records it).
set -euo pipefail
if [ "${1:-}" = --help ] || [ "${1:-}" = -h ]; then
  sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHAT=${1:-core}
PIN=${2:-}
case "$WHAT" in
  core | nmt | all) ;;
  *)
    echo "setup_env: error: unknown kind of install '$WHAT' (core or nmt; --help)" >&2
    exit 2
    ;;
esac
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
say() { echo "setup_env: $*" >&2; }
# pip's own lines (what it downloads, builds and installs), without its progress bars
PIP_QUIET=(--progress-bar off --disable-pip-version-check)
if [ ! -x "$VENV/bin/python" ]; then
  say "creating the virtual environment $VENV (seconds)"
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/pip"
pip_install() {  # pip's status kept (pipefail), its "already satisfied" lines left out
  "$PIP" install "${PIP_QUIET[@]}" "$@" | { grep -v '^Requirement already satisfied' || true; }
}
stamp="$VENV/.rerank-$WHAT-$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" <(echo "$PIN") | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  start=$SECONDS
  # with every install, not only the venv's first: a venv whose first install was cut short is repaired
  say "updating pip, wheel and setuptools (seconds)"
  "$PIP" install -q "${PIP_QUIET[@]}" --upgrade pip wheel setuptools
  if [ "$WHAT" = nmt ] || [ "$WHAT" = all ]; then
    say "installing torch 2.13.0, CPU build (about 1 min from the cache, several from the network)"
    pip_install torch==2.13.0
    say "installing rerank with every extra: fairseq builds from source the first time (about 5 min on 2 idle" \
      "cores; under a minute once its wheel is cached), then transformers, CTranslate2, Snakemake, … (1-3 min)"
    pip_install -e "$ROOT[all,test,dev]"
  else
    say "installing rerank's core (numpy, sacrebleu, tqdm) and its tests' tools${PIN:+, then $PIN} (under a minute)"
    pip_install -e "$ROOT[test]" $PIN
  fi
  "$VENV/bin/python" -c "import rerank" || { say "error: rerank does not import in $VENV"; exit 1; }
  touch "$stamp"
  say "done in $((SECONDS - start)) s: $VENV"
fi
# fairseq-fixed pulls torchaudio, whose newest release (2.11) is built for another torch and
# cannot load beside torch 2.13: it breaks `import transformers` (MarianMTModel,
# ct2-transformers-converter). fairseq's translation and language-model tasks do not use it,
# so a torchaudio that does not load is removed (checked every run: cheap)
if "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchaudio') is None)" \
  && ! "$VENV/bin/python" -c "import torchaudio" > /dev/null 2>&1; then
  say "removing torchaudio: it does not load beside this torch (fairseq does not need it)"
  "$PIP" uninstall -q -y torchaudio
fi
