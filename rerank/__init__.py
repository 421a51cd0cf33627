"""rerank: re-ranking of neural machine translation n-best lists.

The core (``rerank``, ``mira``) depends only on numpy and sacrebleu (plus a small C file compiled at install); the NMT
side (``nmt``) needs the ``[nmt]`` extra (torch, fairseq).
"""

__version__ = "0.1.0"

#: the one default seed of everything random in rerank's core: tuners (MIRA's sentence
#: order, MERT's restarts and directions, PRO's sampling), approximate randomisation and
#: the bootstrap (12345 is sacrebleu's default ``SACREBLEU_SEED``)
DEFAULT_SEED = 12345
