"""fairseq ``--user-dir`` entry point: importing it registers our models."""

import nmt.bahdanau  # noqa: F401  (registers bahdanau_gru and its architectures)
