"""The encoders of COMET checkpoints as unbabel-comet 2.2.7 builds them (``comet/encoders``):
transformers' class per ``encoder_model``, the separators of joint sequences, which encoders
read token types, and their tokenizers as unbabel-comet's environment (transformers 4.57)
builds them from the same folder (:func:`repaired_backend`).  Used by
:class:`rerank.metrics.comet_model.CometModel`."""

from __future__ import annotations

import os

#: the encoder class of each ``encoder_model`` (transformers' name), as unbabel-comet 2.2.7's
#: ``comet/encoders`` builds them (MiniLM: a BERT model under XLM-R's tokenizer)
ENCODERS = {
    "XLM-RoBERTa": "XLMRobertaModel",
    "XLM-RoBERTa-XL": "XLMRobertaXLModel",
    "BERT": "BertModel",
    "MiniLM": "BertModel",
    "RemBERT": "RemBertModel",
}
#: separator tokens between the parts of a joint sequence (unbabel-comet's ``size_separator``:
#: ``</s></s>`` for XLM-R's tokenizer, ``[SEP]`` for BERT's and RemBERT's)
SEPARATORS = {"BERT": 1, "RemBERT": 1}
#: the encoders whose forward reads token type ids (unbabel-comet's ``BERTEncoder.forward``;
#: RemBERT's and MiniLM's, XLM-R's, ignore them)
TOKEN_TYPES = ("BERT",)


def sentencepiece_only(directory: str) -> bool:
    """Whether a tokenizer folder has a SentencePiece model and no tokenizer.json."""
    names = set(os.listdir(directory))
    return "tokenizer.json" not in names and any(name.endswith(".model") for name in names)


def has_protobuf() -> bool:
    """Whether protobuf imports (transformers needs it to convert a SentencePiece model)."""
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        return False
    return True


def repaired_backend(tokenizer, mask_lstrip: bool = True):
    """The tokenizer's Rust backend (a copy; None for a tokenizer without one) as the
    unbabel-comet 2.2.7 environment (transformers 4.57) builds it from the same folder:
    transformers 5 converts a SentencePiece-only RemBERT folder with its unknown id at 2 (the
    [CLS] of RemBERT's vocabulary) and without the post-processor that adds ``[CLS] … [SEP]``
    (its saved tokenizer.json lacks it too), and its mask token does not take the space before
    it as transformers 4.57's ``RemBertTokenizerFast`` (and XLM-R's) do: so a Unigram model's
    ``unk_id`` is set to the tokenizer's unknown token, the mask token strips on its left
    (``mask_lstrip``: every encoder but BERT, whose fast tokenizer does not), and
    ``[CLS] $A [SEP]`` is added where the backend adds neither."""
    import json

    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return None
    state = json.loads(backend.to_str())
    model, unk = state.get("model") or {}, tokenizer.unk_token_id
    if model.get("type") == "Unigram" and unk is not None and model.get("unk_id") != unk:
        model["unk_id"] = int(unk)
    for added in state.get("added_tokens") or []:
        if mask_lstrip and added.get("content") == tokenizer.mask_token:
            added["lstrip"] = True
    repaired = Tokenizer.from_str(json.dumps(state))
    cls, sep = tokenizer.cls_token, tokenizer.sep_token
    probe = repaired.encode("a", add_special_tokens=True).ids
    if cls and sep and not (probe[:1] == [tokenizer.cls_token_id] and probe[-1:] == [tokenizer.sep_token_id]):
        repaired.post_processor = TemplateProcessing(
            single=f"{cls} $A {sep}",
            pair=f"{cls} $A {sep} $B:1 {sep}:1",
            special_tokens=[(cls, int(tokenizer.cls_token_id)), (sep, int(tokenizer.sep_token_id))],
        )
    return repaired
