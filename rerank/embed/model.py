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

Rows that describe the same image as row i are not contrastive for it (Multi30k has five
descriptions per image, so two of them can meet in a batch).  With the paper's random
contrastive sampling, b_j and a_j come from a separate random sample of training examples
instead of the batch (:func:`ranking_loss` with ``neg_a`` / ``neg_b``).

VSE (Kiros et al. 2014) is the same model with K = 1 and β = 1.

The rest of the family (``MLMMEConfig.objective``, :data:`rerank.embed.config.OBJECTIVES`):

* PIVOT / PARALLEL (Gella et al. 2017): β = 1 (images only) / β = 0.5 (the three terms of
  equal weight); their ASYM variants score image–sentence pairs with order embeddings
  (Vendrov et al. 2016): vectors are unit-normalised, then made non-negative (absolute
  value), and S(d, v) = −‖max(0, v − d)‖² (the image d is the more specific, the sentence v
  the more general; S = 0 when the order holds).  Two sentences stand at the same level,
  so their terms keep the symmetric ½(E(a, b) + E(b, a)) = 1 − a·b on unit vectors: cosine.
* MULE (Kim et al. 2020): one language branch (GRU and projection) shared by every
  language over per-language word embeddings (the universal word space), an adversarial
  language classifier on those word embeddings through a gradient-reversal layer (weight
  ``adversary``), and neighbourhood constraints (weight ``neighbour``): each sentence
  ranks another description of the same image, in every language, above the other rows
  of the batch (:func:`ranking_loss`).
* ImageVec (Singhal et al. 2019): a bag-of-words encoder (mean of the word embeddings,
  projected), so that word vectors live in the joint space.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Dict, Optional, cast

import torch
import torch.nn as nn
import torch.nn.functional as F

from rerank.embed.config import MLMMEConfig


def pair_scores(x: torch.Tensor, y: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """S(x_i, y_j) for every pair: (B, D), (C, D) -> (B, C).

    ``cosine``: x_i · y_j (unit vectors).  ``order``: −‖max(0, y_j − x_i)‖² (Vendrov et al.
    2016, equation 2), x the more specific side (images), y the more general (sentences).
    """
    if similarity == "cosine":
        return x @ y.t()
    if similarity == "order":
        return -(y.unsqueeze(0) - x.unsqueeze(1)).clamp(min=0).pow(2).sum(-1)
    raise ValueError(f"unknown similarity {similarity!r}")


def matched_scores(x: torch.Tensor, y: torch.Tensor, similarity: str = "cosine") -> torch.Tensor:
    """S(x_i, y_i) of matched rows: (B, D), (B, D) -> (B,) (:func:`pair_scores`' diagonal)."""
    if similarity == "cosine":
        return (x * y).sum(-1)
    if similarity == "order":
        return -(y - x).clamp(min=0).pow(2).sum(-1)
    raise ValueError(f"unknown similarity {similarity!r}")


def ranking_loss(
    a: torch.Tensor,
    b: torch.Tensor,
    margin: float,
    same: Optional[torch.Tensor] = None,
    neg_a: Optional[torch.Tensor] = None,
    neg_b: Optional[torch.Tensor] = None,
    similarity: str = "cosine",
) -> torch.Tensor:
    """Bidirectional pairwise ranking loss (module docstring; paper equations 1 and 2).

    Args:
        a, b: (B, D) unit vectors, row i of ``a`` matched with row i of ``b``; with
            ``similarity='order'``, ``a`` is the more specific side (images).
        same: (B, C) bool, True where contrastive item j describes the same image as
            row i (those terms are left out); C = B, or the sample size with ``neg_*``.
        neg_a, neg_b: (C, D) contrastive items sampled from the training set (both or
            neither); without them the other rows of the batch are used (j ≠ i).
        similarity: ``cosine`` or ``order`` (:func:`pair_scores`).
    Returns:
        scalar tensor: Σ_i Σ_j max(0, α − S(a_i, b_i) + S(a_i, b_j)) + max(0, α − S(a_i, b_i)
        + S(a_j, b_i)) over the kept pairs (0 for B < 2 without a sample).
    """
    if (neg_a is None) != (neg_b is None):
        raise ValueError("neg_a and neg_b go together")
    positive = matched_scores(a, b, similarity)
    if neg_a is None or neg_b is None:
        if a.size(0) < 2:
            return a.new_zeros(())
        keep = ~torch.eye(a.size(0), dtype=torch.bool, device=a.device)
        neg_a, neg_b = a, b
    else:
        keep = torch.ones(a.size(0), neg_a.size(0), dtype=torch.bool, device=a.device)
    if same is not None:
        keep = keep & ~same
    cost_b = (margin - positive.unsqueeze(1) + pair_scores(a, neg_b, similarity)).clamp(min=0)  # a_i against b_j
    cost_a = (margin - positive.unsqueeze(1) + pair_scores(neg_a, b, similarity).t()).clamp(min=0)  # b_i against a_j
    return cost_b[keep].sum() + cost_a[keep].sum()


class _ReverseGradient(torch.autograd.Function):
    """Identity forward; the gradient times −λ backward (Ganin & Lempitsky 2015)."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.scale * grad, None


def reverse_gradient(x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
    """x unchanged; in the backward pass its gradient is multiplied by −``scale``
    (the gradient-reversal layer of MULE's adversarial language classifier)."""
    return _ReverseGradient.apply(x, scale)


def _unit(x: torch.Tensor, similarity: str) -> torch.Tensor:
    """Unit-normalised rows, made non-negative (absolute value) for order embeddings."""
    x = F.normalize(x, dim=-1)
    return x.abs() if similarity == "order" else x


class SentenceEncoder(nn.Module):
    """Word embeddings + GRU of one language (``encoder='gru'``: the hidden state after the
    last real token) or the mean of the word embeddings (``'bow'``), projected to the joint
    space and unit-normalised.  ``gru`` / ``proj``: modules shared with other languages
    (MULE's one language branch), or None for the language's own."""

    embed: nn.Embedding
    gru: nn.GRU
    proj: nn.Linear

    def __init__(
        self,
        vocab_size: int,
        config: MLMMEConfig,
        padding_idx: int = 0,
        gru: Optional[nn.GRU] = None,
        proj: Optional[nn.Linear] = None,
    ):
        super().__init__()
        self.kind, self.similarity = config.encoder, config.similarity
        self.embed = nn.Embedding(vocab_size, config.word_dim, padding_idx=padding_idx)
        self.padding_idx = padding_idx
        inner = config.word_dim
        if self.kind == "gru":
            self.gru = gru if gru is not None else nn.GRU(config.word_dim, config.hidden_dim, batch_first=True)
            inner = config.hidden_dim
        self.proj = proj if proj is not None else nn.Linear(inner, config.embed_dim)
        self.dropout = nn.Dropout(config.dropout)
        if config.init == "paper" and gru is None:
            self._paper_init(config)

    def _paper_init(self, config: MLMMEConfig) -> None:
        nn.init.normal_(self.embed.weight, 0.0, 0.01)
        if self.kind == "gru":
            for name, param in self.gru.named_parameters():
                if "weight_hh" in name:
                    for k in range(0, param.size(0), config.hidden_dim):
                        nn.init.orthogonal_(param.data[k : k + config.hidden_dim])
                elif "weight" in name:
                    nn.init.normal_(param, 0.0, 0.01)
                else:
                    nn.init.zeros_(param)
        nn.init.normal_(self.proj.weight, 0.0, 0.01)
        nn.init.zeros_(self.proj.bias)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """tokens (B, T) right-padded, lengths (B,) ≥ 1 -> (B, embed_dim) unit vectors."""
        words = self.embed(tokens)
        if self.kind == "bow":
            real = torch.ne(tokens, self.padding_idx).unsqueeze(-1).to(words.dtype)
            state = (words * real).sum(1) / lengths.to(words.device).clamp(min=1).unsqueeze(-1).to(words.dtype)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(words, lengths.cpu(), batch_first=True, enforce_sorted=False)
            _, last = self.gru(packed)  # (1, B, H): state after each sequence's last real token
            state = last[0]
        return _unit(self.proj(self.dropout(state)), self.similarity)


class MLMME(nn.Module):
    """The MLMME model: one :class:`SentenceEncoder` per language and the image projection W_I."""

    def __init__(self, vocab_sizes: Dict[str, int], config: MLMMEConfig):
        super().__init__()
        if sorted(vocab_sizes) != sorted(config.langs):
            raise ValueError(f"vocabularies for {sorted(vocab_sizes)} but languages {config.langs}")
        self.config = config
        if config.shared:  # MULE: one branch, built by the first language's encoder
            first = SentenceEncoder(vocab_sizes[config.langs[0]], config)
            branch: Dict[str, Any] = {"gru": getattr(first, "gru", None), "proj": first.proj}
            self.encoders = nn.ModuleDict(
                {
                    lang: first if i == 0 else SentenceEncoder(vocab_sizes[lang], config, **branch)
                    for i, lang in enumerate(config.langs)
                }
            )
        else:
            self.encoders = nn.ModuleDict({lang: SentenceEncoder(vocab_sizes[lang], config) for lang in config.langs})
        if config.adversary > 0:  # MULE's language classifier on the universal word embeddings
            self.language_classifier = nn.Sequential(
                nn.Linear(config.word_dim, config.word_dim), nn.ReLU(), nn.Linear(config.word_dim, len(config.langs))
            )
        self.image_proj = nn.Linear(config.image_dim, config.embed_dim)
        if config.init == "paper":
            nn.init.normal_(self.image_proj.weight, 0.0, 0.01)
            nn.init.zeros_(self.image_proj.bias)
        self.image_dropout = nn.Dropout(config.dropout)

    def encoder(self, lang: str) -> SentenceEncoder:
        """The sentence encoder of ``lang``."""
        return cast(SentenceEncoder, self.encoders[lang])

    def encode_text(self, lang: str, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """(B, T), (B,) -> (B, embed_dim) unit sentence vectors v^lang."""
        return self.encoders[lang](tokens, lengths)

    def encode_image(self, features: torch.Tensor) -> torch.Tensor:
        """(B, image_dim) CNN features -> (B, embed_dim) unit image vectors d = W_I q
        (non-negative for order embeddings)."""
        return _unit(self.image_proj(self.image_dropout(features)), self.config.similarity)

    def language_loss(self, tokens: Dict[str, torch.Tensor]) -> torch.Tensor:
        """MULE's adversarial term: the mean cross-entropy of the language classifier over
        every real token of the batch (lang -> (B, T) token ids), its input the word
        embeddings behind a gradient-reversal layer (scale 1: the classifier learns to tell
        the languages apart, the embeddings learn to hide them).  Weighted by
        ``config.adversary`` in :meth:`loss`'s caller."""
        inputs, labels = [], []
        for k, lang in enumerate(self.config.langs):
            t = tokens[lang]
            embed = self.encoder(lang).embed
            words = embed(t[t != embed.padding_idx])
            inputs.append(words)
            labels.append(torch.full((words.size(0),), k, dtype=torch.long, device=words.device))
        logits = self.language_classifier(reverse_gradient(torch.cat(inputs)))
        return F.cross_entropy(logits, torch.cat(labels))

    def loss(
        self,
        sentences: Dict[str, torch.Tensor],
        images: Optional[torch.Tensor] = None,
        has_image: Optional[torch.Tensor] = None,
        image_ids: Optional[torch.Tensor] = None,
        negatives: Optional[Dict] = None,
        neighbours: Optional[Dict[str, torch.Tensor]] = None,
    ) -> Dict[str, torch.Tensor]:
        """β·R_MM + (1−β)·R_ML (+ ``neighbour``·R_NB, MULE) from encoded vectors.

        Args:
            sentences: lang -> (B, D) unit sentence vectors (row i: example i).
            images: (B, D) unit image vectors, or None when no example has an image.
            has_image: (B,) bool; R_MM uses only these rows (all rows if None).
            image_ids: (B,) int64 image of each example; items of the same image are not
                contrastive for each other (None: all other items are).
            negatives: the paper's random contrastive sample, a dict with the same four
                keys ("sentences", "images", "has_image", "image_ids") over C sampled
                examples; None: the other rows of the batch.
            neighbours: lang -> (B, D) vectors of another description of row i's image
                (MULE's neighbourhood constraints; needs ``image_ids``): R_NB sums the
                ranking loss of every language's rows against every language's
                neighbours, rows of the same image never contrastive.
        Returns:
            {"loss", "r_mm", "r_ml", "r_nb"} scalar tensors.
        """
        c = self.config
        first = next(iter(sentences.values()))
        zero = first.new_zeros(())
        everyone = torch.ones(first.size(0), dtype=torch.bool)
        neg = negatives
        if neg is not None:
            neg_everyone = torch.ones(next(iter(neg["sentences"].values())).size(0), dtype=torch.bool)

        def same(rows, neg_rows):
            if image_ids is None:
                return None
            other = image_ids if neg is None else neg["image_ids"]
            return image_ids[rows].unsqueeze(1) == other[neg_rows].unsqueeze(0)

        r_mm = zero
        if images is not None and c.beta > 0:
            rows = has_image if has_image is not None else everyone
            neg_rows = rows
            if neg is not None:
                neg_rows = neg["has_image"] if neg.get("has_image") is not None else neg_everyone
            for lang in c.langs:
                if neg is None:
                    r_mm = r_mm + ranking_loss(
                        images[rows], sentences[lang][rows], c.margin, same(rows, rows), similarity=c.similarity
                    )
                elif neg.get("images") is not None and neg_rows.any():
                    r_mm = r_mm + ranking_loss(
                        images[rows],
                        sentences[lang][rows],
                        c.margin,
                        same(rows, neg_rows),
                        neg["images"][neg_rows],
                        neg["sentences"][lang][neg_rows],
                        similarity=c.similarity,
                    )
        r_ml = zero
        if c.beta < 1:
            neg_rows = everyone if neg is None else neg_everyone
            for i, k in enumerate(c.langs):
                for l in c.langs[i + 1 :]:
                    if neg is None:
                        r_ml = r_ml + ranking_loss(sentences[k], sentences[l], c.margin, same(everyone, everyone))
                    else:
                        r_ml = r_ml + ranking_loss(
                            sentences[k],
                            sentences[l],
                            c.margin,
                            same(everyone, neg_rows),
                            neg["sentences"][k],
                            neg["sentences"][l],
                        )
        r_nb = zero
        if neighbours is not None and c.neighbour > 0:
            if image_ids is None:
                raise ValueError("neighbourhood constraints need image_ids")
            others = image_ids.unsqueeze(1) == image_ids.unsqueeze(0)  # neighbour j describes row i's image
            for k in c.langs:
                for l in c.langs:
                    r_nb = r_nb + ranking_loss(sentences[k], neighbours[l], c.margin, others)
        loss = c.beta * r_mm + (1 - c.beta) * r_ml + c.neighbour * r_nb
        return {"loss": loss, "r_mm": r_mm, "r_ml": r_ml, "r_nb": r_nb}

    def settings(self) -> Dict:
        """The config as a dict (for signatures)."""
        return asdict(self.config)


def vse_config(lang: str = "de", **kwargs) -> MLMMEConfig:
    """VSE (Kiros et al. 2014): MLMME with one language and β = 1."""
    return MLMMEConfig.from_preset(kwargs.pop("preset", "cpu"), langs=[lang], beta=1.0, **kwargs)
