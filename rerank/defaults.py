"""Defaults shared across rerank's layers, declared once (a library module imports them from
here, never from the package root ``rerank``, which is the facade of :mod:`rerank.api`)."""

#: the one default seed of everything random in rerank's core: tuners (MIRA's sentence
#: order, MERT's restarts and directions, PRO's sampling), approximate randomisation and
#: the bootstrap (12345 is sacrebleu's default ``SACREBLEU_SEED``)
DEFAULT_SEED = 12345
