"""Attention NMT for Multi30k on fairseq: data preparation, the Bahdanau GRU model
(registered as a fairseq plugin under ``nmt/fairseq_user_dir``), training and
n-best generation.  Needs the ``[nmt]`` extra (torch, fairseq, sacremoses, subword-nmt).
"""

import os

#: fairseq 0.12 checkpoints hold pickled argparse objects, which torch >= 2.6 refuses to
#: load by default (``weights_only=True``).  Every code path of ours that lets fairseq
#: load a checkpoint runs with this environment variable set.
FAIRSEQ_ENV = {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}

#: directory to pass to fairseq's ``--user-dir`` so that our models are registered
USER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fairseq_user_dir")
