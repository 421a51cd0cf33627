"""rerank: re-ranking of neural machine translation n-best lists.

The core (``rerank``, ``mira``) depends only on numpy and sacrebleu (plus a small C file compiled at install); the NMT
side (``nmt``) needs the ``[nmt]`` extra (torch, fairseq).
"""

__version__ = "0.1.0"
