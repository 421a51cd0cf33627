"""MLMME: multilingual multi-modal sentence embeddings (Calixto & Liu 2017, §3 and §5).

K languages, each with its own word embeddings and GRU encoder; the sentence vector
v^k is the encoder's hidden state after the last real token (padding never enters the
recurrence: sequences are packed).  An image is embedded as d = W_I · q for a CNN
feature vector q of any size.  All vectors are unit-normalised; similarities are dot
products: s_i(d, v^k) = d · v^k and s_s(v^k, v^l) = v^k · v^l.

Loss (margin α, weight β):

    L = β · R_MM + (1 − β) · R_ML

* R_MM (equation 1): for every language k, the pairwise ranking loss between images
  and their sentences in both directions, over the examples that have an image;
* R_ML (equation 2): for every pair of languages k < l, the pairwise ranking loss
  between the two sentences of an example in both directions, over all examples.

The pairwise ranking loss of matched rows a_i, b_i (B × D each) with contrastive terms
from the other rows of the mini-batch is

    Σ_i Σ_{j≠i} max(0, α − a_i·b_i + a_i·b_j) + max(0, α − a_i·b_i + a_j·b_i)

VSE (Kiros et al. 2014) is the same model with K = 1 and β = 1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class MLMMEConfig:
    """Model settings.  ``preset='paper'``: 620-d word embeddings, 1024-d GRUs, 2048-d joint
    space (the paper's §5); ``'cpu'``: 300 / 512 / 512 for 2 CPU cores."""

    langs: List[str] = field(default_factory=lambda: ["en", "de"])
    beta: float = 0.5
    margin: float = 0.2
    word_dim: int = 300
    hidden_dim: int = 512
    embed_dim: int = 512
    image_dim: int = 2048
    dropout: float = 0.5
    preset: str = "cpu"

    @classmethod
    def from_preset(cls, preset: str, **kwargs) -> "MLMMEConfig":
        """Config of a named preset ('cpu' or 'paper'), overridden by ``kwargs``.

        Raises:
            ValueError: unknown preset or β outside [0, 1].
        """
        sizes = {"cpu": dict(word_dim=300, hidden_dim=512, embed_dim=512),
                 "paper": dict(word_dim=620, hidden_dim=1024, embed_dim=2048)}
        if preset not in sizes:
            raise ValueError(f"unknown preset {preset!r}; known: {', '.join(sizes)}")
        config = cls(preset=preset, **{**sizes[preset], **kwargs})
        if not 0.0 <= config.beta <= 1.0:
            raise ValueError(f"beta must be in [0, 1], got {config.beta}")
        return config


def ranking_loss(a: torch.Tensor, b: torch.Tensor, margin: float) -> torch.Tensor:
    """Bidirectional pairwise ranking loss with in-batch contrastive terms (module docstring).

    Args:
        a, b: (B, D) unit vectors, row i of ``a`` matched with row i of ``b``.
    Returns:
        scalar tensor: the sum over both directions and all i ≠ j (0 for B < 2).
    """
    if a.size(0) < 2:
        return a.new_zeros(())
    scores = a @ b.t()  # scores[i, j] = a_i · b_j
    positive = scores.diag()
    cost_b = (margin - positive.unsqueeze(1) + scores).clamp(min=0)  # a_i against b_j
    cost_a = (margin - positive.unsqueeze(0) + scores).clamp(min=0)  # b_j against a_i
    off = ~torch.eye(scores.size(0), dtype=torch.bool, device=scores.device)
    return cost_b[off].sum() + cost_a[off].sum()


class SentenceEncoder(nn.Module):
    """Word embeddings + GRU of one language; output: the hidden state after the last
    real token, projected to the joint space and unit-normalised."""

    def __init__(self, vocab_size: int, config: MLMMEConfig, padding_idx: int = 0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, config.word_dim, padding_idx=padding_idx)
        self.gru = nn.GRU(config.word_dim, config.hidden_dim, batch_first=True)
        self.proj = nn.Linear(config.hidden_dim, config.embed_dim)
        self.dropout = nn.Dropout(config.dropout)
        nn.init.normal_(self.embed.weight, 0.0, 0.01)
        for name, param in self.gru.named_parameters():
            if "weight_hh" in name:
                for k in range(0, param.size(0), config.hidden_dim):
                    nn.init.orthogonal_(param.data[k:k + config.hidden_dim])
            elif "weight" in name:
                nn.init.normal_(param, 0.0, 0.01)
            else:
                nn.init.zeros_(param)
        nn.init.normal_(self.proj.weight, 0.0, 0.01)
        nn.init.zeros_(self.proj.bias)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) right-padded, lengths (B,) ≥ 1 -> (B, embed_dim) unit vectors."""
        packed = nn.utils.rnn.pack_padded_sequence(self.embed(tokens), lengths.cpu(), batch_first=True,
                                                   enforce_sorted=False)
        _, last = self.gru(packed)  # (1, B, H): state after each sequence's last real token
        return F.normalize(self.proj(self.dropout(last[0])), dim=-1)


class MLMME(nn.Module):
    """The MLMME model: one :class:`SentenceEncoder` per language and the image projection W_I."""

    def __init__(self, vocab_sizes: Dict[str, int], config: MLMMEConfig):
        super().__init__()
        if sorted(vocab_sizes) != sorted(config.langs):
            raise ValueError(f"vocabularies for {sorted(vocab_sizes)} but languages {config.langs}")
        self.config = config
        self.encoders = nn.ModuleDict({lang: SentenceEncoder(vocab_sizes[lang], config) for lang in config.langs})
        self.image_proj = nn.Linear(config.image_dim, config.embed_dim)
        nn.init.normal_(self.image_proj.weight, 0.0, 0.01)
        nn.init.zeros_(self.image_proj.bias)
        self.image_dropout = nn.Dropout(config.dropout)

    def encode_text(self, lang: str, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T), (B,) -> (B, embed_dim) unit sentence vectors v^lang."""
        return self.encoders[lang](tokens, lengths)

    def encode_image(self, features: torch.Tensor) -> torch.Tensor:
        """(B, image_dim) CNN features -> (B, embed_dim) unit image vectors d = W_I q."""
        return F.normalize(self.image_proj(self.image_dropout(features)), dim=-1)

    def loss(self, sentences: Dict[str, torch.Tensor], images: Optional[torch.Tensor] = None,
             has_image: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """β·R_MM + (1−β)·R_ML from encoded vectors.

        Args:
            sentences: lang -> (B, D) unit sentence vectors (row i: example i).
            images: (B, D) unit image vectors, or None when no example has an image.
            has_image: (B,) bool; R_MM uses only these rows (all rows if None).
        Returns:
            {"loss", "r_mm", "r_ml"} scalar tensors.
        """
        c = self.config
        zero = next(iter(sentences.values())).new_zeros(())
        r_mm = zero
        if images is not None and c.beta > 0:
            rows = has_image if has_image is not None else torch.ones(images.size(0), dtype=torch.bool)
            for lang in c.langs:
                r_mm = r_mm + ranking_loss(images[rows], sentences[lang][rows], c.margin)
        r_ml = zero
        if c.beta < 1:
            for i, k in enumerate(c.langs):
                for l in c.langs[i + 1:]:
                    r_ml = r_ml + ranking_loss(sentences[k], sentences[l], c.margin)
        return {"loss": c.beta * r_mm + (1 - c.beta) * r_ml, "r_mm": r_mm, "r_ml": r_ml}

    def settings(self) -> Dict:
        """The config as a dict (for signatures)."""
        return asdict(self.config)


def vse_config(lang: str = "de", **kwargs) -> MLMMEConfig:
    """VSE (Kiros et al. 2014): MLMME with one language and β = 1."""
    return MLMMEConfig.from_preset(kwargs.pop("preset", "cpu"), langs=[lang], beta=1.0, **kwargs)
