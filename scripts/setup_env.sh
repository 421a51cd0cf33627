#!/usr/bin/env bash
# Create (once) the virtual environment .venv and install rerank into it.
#   scripts/setup_env.sh core [PIN]  # numpy, sacrebleu, pytest: enough for the core and its tests;
#                               # PIN (e.g. sacrebleu==2.3.1) is installed on top (VENV=... for another venv)
#   scripts/setup_env.sh nmt    # everything ([all], [test], [dev]: ruff, mkdocs): + torch 2.13.0 (CPU), fairseq-fixed 0.12.3.1, sacremoses,
#                               # subword-nmt, pycocoevalcap (METEOR jar), matplotlib
# torch is installed first and pinned to 2.13.0 so that pip takes the local CPU build and
# never resolves a CUDA build; fairseq-fixed builds from source once (~5 min), then pip's
# wheel cache makes later installs fast.  Safe to run repeatedly.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WHAT=${1:-core}
PIN=${2:-}
VENV=${VENV:-$ROOT/.venv}
PY=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
PIP="$VENV/bin/pip"
stamp="$VENV/.rerank-$WHAT-$(cat "$ROOT/pyproject.toml" "$ROOT/setup.py" <(echo "$PIN") | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  # with every install, not only the venv's first: a venv whose first install was cut short is repaired
  "$PIP" install -q --upgrade pip wheel setuptools
  if [ "$WHAT" = nmt ] || [ "$WHAT" = all ]; then
    "$PIP" install -q torch==2.13.0
    "$PIP" install -q -e "$ROOT[all,test,dev]"
  else
    "$PIP" install -q -e "$ROOT[test]" $PIN
  fi
  touch "$stamp"
fi
# fairseq-fixed pulls torchaudio, whose newest release (2.11) is built for another torch and
# cannot load beside torch 2.13: it breaks `import transformers` (MarianMTModel,
# ct2-transformers-converter). fairseq's translation and language-model tasks do not use it,
# so a torchaudio that does not load is removed (checked every run: cheap)
if "$VENV/bin/python" -c "import importlib.util, sys; sys.exit(importlib.util.find_spec('torchaudio') is None)" \
  && ! "$VENV/bin/python" -c "import torchaudio" > /dev/null 2>&1; then
  echo "setup_env: removing torchaudio: it does not load beside this torch (fairseq does not need it)" >&2
  "$PIP" uninstall -q -y torchaudio
fi
