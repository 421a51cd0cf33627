"""Bahdanau et al. (2015) attention encoder-decoder as a fairseq model.

Registered as fairseq model ``bahdanau_gru`` with the architectures
``bahdanau_gru_cpu`` (small, trains on 2 CPU cores) and ``bahdanau_gru_paper``
(620-d embeddings, 1024-d GRUs: §8 of Calixto & Liu 2017).  Load it with
``--user-dir rerank/nmt/fairseq_user_dir``.

Model (shapes: S source length, T target length, B batch, V vocabulary):

* encoder: embedding -> dropout -> bidirectional GRU; annotations
  ``h_j = [h_j^fwd; h_j^bwd]`` of size ``2 * encoder_hidden_size``;
* decoder initial state ``s_0 = tanh(W_init · mean_j h_j)`` (masked mean);
* additive (MLP) attention on the previous decoder state:
  ``e_ij = v^T tanh(W_a s_{i-1} + U_a h_j)``, ``alpha = softmax_j(e)``, ``c_i = sum_j alpha_ij h_j``;
* GRU decoder ``s_i = GRU([E y_{i-1}; c_i], s_{i-1})``;
* maxout readout ``t_i = max-pairs(W_o [s_i; E y_{i-1}; c_i])`` (Bahdanau et al.'s deep
  output with maxout units) -> dropout -> ``logits = W_v t_i``.

Initialisation: embeddings N(0, 1/dim); encoder GRU recurrent matrices orthogonal (per
gate), its input matrices Xavier-uniform; decoder layers PyTorch's defaults.  This
differs from the paper's N(0, 0.01) on purpose: with it (and with a tanh readout) the
decoder stayed at unigram perplexity for hundreds of updates, which a CPU budget cannot
afford; with these choices and Adam (lr 2e-3) a 64-sentence batch is memorised as fast
as with fairseq's LSTM.
"""

from __future__ import annotations

from typing import Dict

import torch
import torch.nn as nn
import torch.nn.functional as F
from fairseq import utils
from fairseq.models import (
    FairseqEncoder,
    FairseqEncoderDecoderModel,
    FairseqIncrementalDecoder,
    register_model,
    register_model_architecture,
)

DEFAULT_MAX_POSITIONS = 100000


def _embedding(num: int, dim: int, padding_idx: int) -> nn.Embedding:
    emb = nn.Embedding(num, dim, padding_idx=padding_idx)
    nn.init.normal_(emb.weight, 0.0, dim**-0.5)
    nn.init.zeros_(emb.weight[padding_idx])
    return emb


def _is_leading_rows(new_order: torch.Tensor, size: int) -> bool:
    """True if ``new_order`` is 0, 1, …, n−1 (n ≤ size): keep the first n rows, a view."""
    count = new_order.numel()
    if count == 0 or count > size or int(new_order[0]) != 0 or int(new_order[-1]) != count - 1:
        return False
    return count == 1 or bool((new_order[1:] > new_order[:-1]).all())


class BahdanauEncoder(FairseqEncoder):
    """Bidirectional GRU encoder.

    ``forward(src_tokens (B, S), src_lengths (B,))`` returns a dict with
    ``encoder_out`` (S, B, 2H) annotations and ``encoder_padding_mask`` (S, B) bool
    (True at padding).  Source padding may be on the left (fairseq's default): it is
    moved to the right before packing so no padding enters the recurrence.
    """

    def __init__(self, dictionary, embed_dim: int, hidden_size: int, dropout: float, left_pad: bool = True):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.left_pad = left_pad
        self.embed_tokens = _embedding(len(dictionary), embed_dim, self.padding_idx)
        self.dropout = nn.Dropout(dropout)
        self.rnn = nn.GRU(embed_dim, hidden_size, batch_first=False, bidirectional=True)
        self.output_dim = 2 * hidden_size
        for name, param in self.rnn.named_parameters():
            if "weight_hh" in name:
                for k in range(0, param.size(0), hidden_size):
                    nn.init.orthogonal_(param.data[k : k + hidden_size])
            elif "weight_ih" in name:
                nn.init.xavier_uniform_(param)
            else:
                nn.init.zeros_(param)

    def forward(self, src_tokens: torch.Tensor, src_lengths: torch.Tensor, **kwargs):
        if self.left_pad:
            src_tokens = utils.convert_padding_direction(src_tokens, self.padding_idx, left_to_right=True)
        x = self.dropout(self.embed_tokens(src_tokens)).transpose(0, 1)  # S, B, E
        packed = nn.utils.rnn.pack_padded_sequence(x, src_lengths.cpu(), enforce_sorted=False)
        out, _ = self.rnn(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, padding_value=0.0, total_length=x.size(0))
        mask = src_tokens.eq(self.padding_idx).t()  # S, B
        return {"encoder_out": out, "encoder_padding_mask": mask}

    def reorder_encoder_out(self, encoder_out: Dict[str, torch.Tensor], new_order: torch.Tensor):
        if _is_leading_rows(new_order, encoder_out["encoder_out"].size(1)):  # a view, no copy
            keep = new_order.numel()
            return {key: value.narrow(1, 0, keep) for key, value in encoder_out.items()}
        return {
            "encoder_out": encoder_out["encoder_out"].index_select(1, new_order),
            "encoder_padding_mask": encoder_out["encoder_padding_mask"].index_select(1, new_order),
        }

    def max_positions(self) -> int:
        return DEFAULT_MAX_POSITIONS


class BahdanauDecoder(FairseqIncrementalDecoder):
    """GRU decoder with additive attention (see module docstring).

    ``forward(prev_output_tokens (B, T), encoder_out, incremental_state)`` returns
    ``(logits (B, T, V), {"attn": [alpha (B, T, S)]})``.  With an incremental state only
    the last token is read and the decoder state, its last context and the projected
    annotations ``U_a h`` are cached (and reordered by beam search).
    """

    def __init__(
        self,
        dictionary,
        embed_dim: int,
        hidden_size: int,
        encoder_dim: int,
        attention_dim: int,
        out_dim: int,
        dropout: float,
        share_input_output_embed: bool = False,
    ):
        super().__init__(dictionary)
        self.padding_idx = dictionary.pad()
        self.embed_tokens = _embedding(len(dictionary), embed_dim, self.padding_idx)
        self.dropout = nn.Dropout(dropout)
        self.init_proj = nn.Linear(encoder_dim, hidden_size)
        self.att_query = nn.Linear(hidden_size, attention_dim, bias=False)
        self.att_key = nn.Linear(encoder_dim, attention_dim)
        self.att_v = nn.Linear(attention_dim, 1, bias=False)
        self.cell = nn.GRUCell(embed_dim + encoder_dim, hidden_size)
        self.readout = nn.Linear(hidden_size + embed_dim + encoder_dim, 2 * out_dim)  # maxout pairs
        self.output_projection = nn.Linear(out_dim, len(dictionary))

    def _attend(self, query: torch.Tensor, keys: torch.Tensor, annotations: torch.Tensor, mask: torch.Tensor):
        # query: B, H; keys: S, B, A; annotations: S, B, 2He; mask: S, B
        energy = self.att_v(torch.tanh(keys + self.att_query(query).unsqueeze(0))).squeeze(2)  # S, B
        energy = energy.masked_fill(mask, float("-inf"))
        alpha = F.softmax(energy, dim=0)
        context = (alpha.unsqueeze(2) * annotations).sum(0)  # B, 2He
        return context, alpha.t()

    def forward(self, prev_output_tokens, encoder_out=None, incremental_state=None, **kwargs):
        annotations = encoder_out["encoder_out"]
        mask = encoder_out["encoder_padding_mask"]
        cached = (
            self.get_incremental_state(incremental_state, "cached_state") if incremental_state is not None else None
        )
        if incremental_state is not None:
            prev_output_tokens = prev_output_tokens[:, -1:]
        if cached is not None:
            state, keys = cached["state"], cached["keys"]
        else:
            real = (~mask).unsqueeze(2).type_as(annotations)
            mean = (annotations * real).sum(0) / real.sum(0).clamp(min=1.0)
            state = torch.tanh(self.init_proj(mean))
            keys = self.att_key(annotations)
        emb = self.dropout(self.embed_tokens(prev_output_tokens))  # B, T, E
        outputs, attns = [], []
        for t in range(emb.size(1)):
            context, alpha = self._attend(state, keys, annotations, mask)
            state = self.cell(torch.cat([emb[:, t], context], dim=1), state)
            outputs.append(torch.cat([state, emb[:, t], context], dim=1))
            attns.append(alpha)
        if incremental_state is not None:
            self.set_incremental_state(incremental_state, "cached_state", {"state": state, "keys": keys})
        hidden = torch.stack(outputs, dim=1)  # B, T, H+E+2He
        pre = self.readout(hidden)
        readout = self.dropout(pre.view(*pre.shape[:-1], -1, 2).max(dim=-1)[0])  # maxout over pairs
        logits = self.output_projection(readout)
        return logits, {"attn": [torch.stack(attns, dim=1)]}

    def reorder_incremental_state(self, incremental_state, new_order):
        cached = self.get_incremental_state(incremental_state, "cached_state")
        if cached is None:
            return
        if _is_leading_rows(new_order, cached["state"].size(0)):  # views, no copies
            keep = new_order.numel()
            reordered = {"state": cached["state"][:keep], "keys": cached["keys"].narrow(1, 0, keep)}
        else:
            reordered = {
                "state": cached["state"].index_select(0, new_order),
                "keys": cached["keys"].index_select(1, new_order),
            }
        self.set_incremental_state(incremental_state, "cached_state", reordered)

    def max_positions(self) -> int:
        return DEFAULT_MAX_POSITIONS


@register_model("bahdanau_gru")
class BahdanauGRUModel(FairseqEncoderDecoderModel):
    """Bahdanau et al. (2015) encoder-decoder; see the module docstring."""

    @staticmethod
    def add_args(parser):
        parser.add_argument("--dropout", type=float, metavar="D", help="dropout on embeddings and readout")
        parser.add_argument("--encoder-embed-dim", type=int, metavar="N")
        parser.add_argument("--encoder-hidden-size", type=int, metavar="N", help="per direction")
        parser.add_argument("--decoder-embed-dim", type=int, metavar="N")
        parser.add_argument("--decoder-hidden-size", type=int, metavar="N")
        parser.add_argument("--attention-dim", type=int, metavar="N")
        parser.add_argument("--decoder-out-dim", type=int, metavar="N", help="readout layer size")

    @classmethod
    def build_model(cls, args, task):
        base_architecture(args)
        encoder = BahdanauEncoder(
            task.source_dictionary,
            args.encoder_embed_dim,
            args.encoder_hidden_size,
            args.dropout,
            left_pad=getattr(args, "left_pad_source", True),
        )
        decoder = BahdanauDecoder(
            task.target_dictionary,
            args.decoder_embed_dim,
            args.decoder_hidden_size,
            encoder.output_dim,
            args.attention_dim,
            args.decoder_out_dim,
            args.dropout,
        )
        return cls(encoder, decoder)


def _dimensions(args, embed: int, encoder: int, decoder: int, attention: int, out: int) -> None:
    """Set each size unless the command line gave it (fairseq's architecture convention)."""
    sizes = {
        "encoder_embed_dim": embed,
        "encoder_hidden_size": encoder,
        "decoder_embed_dim": embed,
        "decoder_hidden_size": decoder,
        "attention_dim": attention,
        "decoder_out_dim": out,
    }
    for name, value in sizes.items():
        setattr(args, name, getattr(args, name, value))


@register_model_architecture("bahdanau_gru", "bahdanau_gru")
def base_architecture(args):
    """The cpu preset's sizes (embeddings 256, encoder 256, decoder 512, attention 256, output
    256) and dropout 0.5, for every option the command line left unset (fairseq's
    ``register_model_architecture``)."""
    args.dropout = getattr(args, "dropout", 0.5)
    _dimensions(args, embed=256, encoder=256, decoder=512, attention=256, out=256)


@register_model_architecture("bahdanau_gru", "bahdanau_gru_cpu")
def cpu_architecture(args):
    """Small preset for 2 CPU cores: 256-d embeddings, 256-d encoder GRUs, 512-d decoder GRU."""
    base_architecture(args)


@register_model_architecture("bahdanau_gru", "bahdanau_gru_small")
def small_architecture(args):
    """Re-ranking models that score fast on CPU: 128-d embeddings, 128-d encoder GRUs, 256-d
    decoder GRU, 128-d attention and readout (about 2.5× fewer multiply-adds per decoded
    token than ``cpu``, most of them in the output layer)."""
    _dimensions(args, embed=128, encoder=128, decoder=256, attention=128, out=128)
    base_architecture(args)


@register_model_architecture("bahdanau_gru", "bahdanau_gru_paper")
def paper_architecture(args):
    """§8 of Calixto & Liu (2017): 620-d embeddings, 1024-d GRUs."""
    _dimensions(args, embed=620, encoder=1024, decoder=1024, attention=1024, out=620)
    base_architecture(args)
