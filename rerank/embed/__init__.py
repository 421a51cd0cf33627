"""MLMME / VSE sentence–image embeddings (Calixto & Liu 2017; Kiros et al. 2014): the
model (:mod:`rerank.embed.model`), its training (:mod:`rerank.embed.train`), data (:mod:`rerank.embed.data`),
ISR / STS evaluation (:mod:`rerank.embed.evaluation`) and CNN image features (:mod:`rerank.embed.cnn`).
The ``mlmme:`` / ``vse:`` scorers that use a trained model are in ``rerank/features/``.

torch is loaded in one place, :mod:`rerank.embed.lazy`: everything else here (settings, data,
evaluation) imports without it.
"""
