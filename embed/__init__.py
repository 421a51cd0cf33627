"""MLMME / VSE sentence–image embeddings (Calixto & Liu 2017; Kiros et al. 2014): the
model (:mod:`embed.model`), its training (:mod:`embed.train`), data (:mod:`embed.data`),
ISR / STS evaluation (:mod:`embed.evaluation`) and CNN image features (:mod:`embed.cnn`).
The ``mlmme:`` / ``vse:`` scorers that use a trained model are in ``features/``.

torch is loaded in one place, :mod:`embed.lazy`: everything else here (settings, data,
evaluation) imports without it.
"""
