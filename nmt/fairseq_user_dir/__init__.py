"""fairseq ``--user-dir`` entry point: importing it registers our models, and gives
fairseq 0.12 the ``numpy.compat.long`` it still names (removed in numpy 2; it was
Python's ``int``, a 64-bit integer dtype) — the language-model datasets
(``TokenBlockDataset``) need it."""

import types

import numpy as np

if not hasattr(np, "compat"):
    np.compat = types.SimpleNamespace(long=np.int64)

import nmt.bahdanau  # noqa: E402,F401  (registers bahdanau_gru and its architectures)
