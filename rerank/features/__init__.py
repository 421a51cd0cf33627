"""Re-ranking features: every feature is a :class:`~rerank.features.scorer.Scorer`, registered
in :data:`~rerank.features.scorer.SCORERS` under the name before the colon of
``rerank features add --scorer NAME:ARG``; :mod:`rerank.features.add` streams a list through
scorers.  The scorers: forced decoding under other models (``nmt:``, ``lm:`` in
:mod:`~rerank.features.nmt_scorer`, ``fairseq:`` in :mod:`~rerank.features.fairseq_scorer`; ``hf:``, ``hf-lm:``, ``ct2:`` in
:mod:`~rerank.features.hf_scorer`, whose models also generate lists:
:mod:`~rerank.features.generate`), MBR consensus (``mbr:``, :mod:`~rerank.features.consensus`),
length (``len:``, :mod:`~rerank.features.length`), IBM Model 1 (``ibm1:``,
:mod:`~rerank.features.lexical`), E5 (``e5:``, :mod:`~rerank.features.text_embedding`) and the
MLMME / VSE embeddings (``mlmme:``, ``vse:``, :mod:`~rerank.features.mlmme_scorer`, over the
models of :mod:`rerank.embed`).  Scorers that need torch load it in their own module, when one
is asked for.
"""
