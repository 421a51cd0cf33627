"""Re-ranking features.  ``embed.model``: the MLMME / VSE sentence–image embedding model
(Calixto & Liu 2017; Kiros et al. 2014) and its ranking losses.  Needs torch (the
``[nmt]`` / ``[all]`` extras)."""
