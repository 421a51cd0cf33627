"""The library's rules that the settings apply, imported from rerank rather than copied: a
component spec's grammar (:func:`rerank.config.split_spec`), the line-alignment rule of a
corpus (:func:`rerank.textio.count_lines`), Multi30k's splits and raw files
(:data:`rerank.nmt.data.SPLITS`, :func:`rerank.nmt.data.raw_path`), the subword step's files
(:data:`rerank.nmt.subword.SUBWORD_FILES`), a COMET checkpoint directory's layout
(:func:`rerank.metrics.comet_checks.checkpoint_files`) and the tuning objective
(:func:`rerank.metrics.spec.make_objective`).

rerank is installed in the project's ``.venv``, whose python the Snakefile and
``run_pipeline.sh``'s checks before any work run with.  On a python without it — the
machine's, which ``run_pipeline.sh --help`` and ``--settings`` may use before anything is
installed — :data:`HAVE_RERANK` is False and the checks that need these rules are skipped
(model settings are shown as given): ``run_pipeline.sh`` resolves the settings again with
``.venv``'s python before any work; what cannot do without them says so (:func:`require`).

The current directory is not searched for rerank: a job that Snakemake (or its SLURM
executor) starts as ``python -m snakemake`` runs in OUT with OUT first on its path, and OUT
holds the run's ``rerank/`` directory (the tuning runs), which would stand in for the library
as an empty namespace package.
"""

import os
import sys

_SAVED_PATH = list(sys.path)
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != os.path.abspath(os.curdir)]
try:
    from rerank.config import split_spec
    from rerank.errors import InputError
    from rerank.metrics.comet_checks import checkpoint_files
    from rerank.metrics.spec import make_objective
    from rerank.nmt.data import SPLITS, raw_path
    from rerank.nmt.subword import SUBWORD_FILES
    from rerank.textio import count_lines
except ImportError:  # a python without rerank (or one that cannot import it)
    HAVE_RERANK = False
else:
    HAVE_RERANK = True
finally:
    sys.path[:] = _SAVED_PATH


def require(what: str) -> None:
    """Raise ImportError (naming ``what``) on a python without rerank."""
    if not HAVE_RERANK:
        raise ImportError(
            f"workflow/settings: {what} needs rerank installed (the project's .venv: bash scripts/setup_env.sh nmt)"
        )


__all__ = [
    "HAVE_RERANK",
    "InputError",
    "SPLITS",
    "SUBWORD_FILES",
    "checkpoint_files",
    "count_lines",
    "make_objective",
    "raw_path",
    "require",
    "split_spec",
]
