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
``.venv``'s python before any work.
"""

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

__all__ = [
    "HAVE_RERANK",
    "InputError",
    "SPLITS",
    "SUBWORD_FILES",
    "checkpoint_files",
    "count_lines",
    "make_objective",
    "raw_path",
    "split_spec",
]
