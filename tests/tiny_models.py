"""Tiny Hugging Face and CTranslate2 models built locally for the tests (no hub): a
SentencePiece model trained on 4,000 lines of Multi30k, a random-initialised Marian
translation model (d_model 32) and GPT-2 language model, saved with ``save_pretrained``;
the Marian model converted with CTranslate2's ``TransformersConverter``."""

import gzip
import json
import os

from rerank.features.hf_scorer import import_transformers

DATA = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "data", "multi30k", "task1", "raw"
)


#: a text file of one's own to train the tiny tokenizers on (``scripts/tiny_checkpoints.py
#: --text``); None: Multi30k's training text in ``DATA``
TEXT_FILE = None


def training_text(directory: str, lines: int = 2000) -> str:
    """``text.txt``: the first ``lines`` English and German training sentences (lowercased:
    our lists' text), or the first ``2 × lines`` lines of :data:`TEXT_FILE` (plain or .gz).

    Raises:
        InputError: no :data:`TEXT_FILE` and no Multi30k text beside the repository."""
    from rerank.errors import InputError
    from rerank.textio import open_text

    path = os.path.join(directory, "text.txt")
    out = []
    if TEXT_FILE is not None:
        with open_text(TEXT_FILE) as handle:
            out = [line.strip().lower() for _, line in zip(range(2 * lines), handle) if line.strip()]
        if not out:
            raise InputError("no text to train the tokenizer on", TEXT_FILE)
    elif not os.path.isfile(os.path.join(DATA, "train.en.gz")):
        raise InputError(
            "no Multi30k training text here to train the tiny tokenizers on: give --text FILE (any text, one "
            "sentence per line)",
            os.path.normpath(DATA),
        )
    for lang in ("en", "de") if TEXT_FILE is None else ():
        with gzip.open(os.path.join(DATA, f"train.{lang}.gz"), "rt", encoding="utf-8") as handle:
            out += [next(handle).strip().lower() for _ in range(lines)]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write("\n".join(out) + "\n")
    return path


def train_sentencepiece(directory: str, name: str, **settings) -> str:
    """``directory/NAME.model``: a SentencePiece model of 300 pieces trained on
    :func:`training_text` (1,000 lines per language; one thread: the same model every run),
    ``settings`` passed to the trainer (special ids, user-defined symbols).  Returns its path."""
    import sentencepiece as spm

    prefix = os.path.join(directory, name)
    if not os.path.isfile(prefix + ".model"):
        spm.SentencePieceTrainer.train(
            input=training_text(directory, 1000),
            model_prefix=prefix,
            vocab_size=300,
            hard_vocab_limit=TEXT_FILE is None,  # a small text of one's own: as many pieces as it has
            character_coverage=1.0,
            minloglevel=2,
            num_threads=1,
            **settings,
        )
    return prefix + ".model"


def _save(model_class, config, tokenizer, out: str, seed: int) -> str:
    """A randomly initialised ``model_class(config)`` (seeded) and its tokenizer saved in ``out``."""
    import torch

    torch.manual_seed(seed)
    model_class(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def build_marian(
    directory: str,
    seed: int = 0,
    d_model: int = 32,
    layers: int = 1,
    heads: int = 2,
    ffn: int = 64,
    vocab_size: int = 800,
    lines: int = 2000,
) -> str:
    """A random Marian en->de model with its tokenizer in ``directory/marian``: tiny by
    default (the tests); ``benchmarks/bench_scorer.py --random-marian`` builds one the size
    of ``transformer-tiny`` (d_model 128, 4 layers, 4 heads, FFN 256, 8,000 pieces) to time
    ``hf:`` and ``ct2:`` against ``fairseq:`` (speed does not depend on the weights)."""
    import sentencepiece as spm

    transformers = import_transformers()
    text = training_text(directory, lines)
    prefix = os.path.join(directory, "sp")
    spm.SentencePieceTrainer.train(
        input=text,
        model_prefix=prefix,
        vocab_size=vocab_size,
        character_coverage=1.0,
        pad_id=-1,
        bos_id=-1,
        eos_id=1,
        unk_id=2,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_file=prefix + ".model")
    vocab = {sp.id_to_piece(i): i for i in range(sp.get_piece_size())}
    vocab["<pad>"] = len(vocab)
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as handle:
        json.dump(vocab, handle)
    tokenizer = transformers.MarianTokenizer(
        source_spm=prefix + ".model", target_spm=prefix + ".model", vocab=os.path.join(directory, "vocab.json")
    )
    config = transformers.MarianConfig(
        vocab_size=len(vocab),
        d_model=d_model,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        max_position_embeddings=256,
        pad_token_id=vocab["<pad>"],
        eos_token_id=1,
        decoder_start_token_id=vocab["<pad>"],
        forced_eos_token_id=1,
    )
    return _save(transformers.MarianMTModel, config, tokenizer, os.path.join(directory, "marian"), seed)


def _bpe_tokenizer(directory: str, vocab_size: int, **specials: str):
    """A byte-pair tokenizer (``tokenizers``' BPE over whitespace words) trained on
    :func:`training_text`, as transformers' fast tokenizer with ``specials`` (bos/eos/pad/unk;
    their distinct tokens take the first ids in the order given)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.decoder = decoders.BPEDecoder()
    words = list(dict.fromkeys(specials.values()))
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=words, show_progress=False)
    bpe.train([training_text(directory)], trainer)
    return import_transformers().PreTrainedTokenizerFast(tokenizer_object=bpe, **specials)


def build_nllb(directory: str, seed: int = 0) -> str:
    """A tiny random M2M-100 model in NLLB's shape (its ``NllbTokenizer``: a Metaspace BPE of
    600 tokens trained on :func:`training_text`, then NLLB's language codes) in
    ``directory/nllb``: a target starts with its language's token (``tgt_lang``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    transformers = import_transformers()
    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.Metaspace()
    bpe.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<s>", "<pad>", "</s>", "<unk>"], show_progress=False)
    bpe.train([training_text(directory)], trainer)
    trained = json.loads(bpe.to_str())["model"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tokenizer = transformers.NllbTokenizer(
        vocab=trained["vocab"], merges=merges, src_lang="eng_Latn", tgt_lang="deu_Latn"
    )
    config = transformers.M2M100Config(
        vocab_size=len(tokenizer),
        d_model=32,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=256,
        scale_embedding=True,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
    )
    return _save(transformers.M2M100ForConditionalGeneration, config, tokenizer, os.path.join(directory, "nllb"), seed)


def build_gpt2(directory: str, seed: int = 0) -> str:
    """A tiny random GPT-2 language model with a BPE tokenizer in ``directory/gpt2``."""
    transformers = import_transformers()
    tokenizer = _bpe_tokenizer(directory, 600, pad_token="<pad>", eos_token="</s>", bos_token="</s>", unk_token="<unk>")
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_embd=32,
        n_layer=1,
        n_head=2,
        n_positions=256,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _save(transformers.GPT2LMHeadModel, config, tokenizer, os.path.join(directory, "gpt2"), seed)


def build_llama(directory: str, seed: int = 0) -> str:
    """A tiny random Llama-shaped causal LM (grouped-query attention, SwiGLU, RoPE: the shape of
    Tower, EuroLLM, Qwen) with its own BPE tokenizer in ``directory/llama``."""
    transformers = import_transformers()
    tokenizer = _bpe_tokenizer(directory, 700, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    config = transformers.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return _save(transformers.LlamaForCausalLM, config, tokenizer, os.path.join(directory, "llama"), seed)


def convert_ct2(model_dir: str, out: str) -> str:
    """``model_dir`` converted with CTranslate2's TransformersConverter (float32 weights),
    its tokenizer files copied beside."""
    import ctranslate2

    files = [
        f
        for f in os.listdir(model_dir)
        if f not in ("model.safetensors", "config.json") and not f.startswith("generation")
    ]
    ctranslate2.converters.TransformersConverter(model_dir, copy_files=files).convert(out, force=True)
    return out


#: the word-level vocabulary of :func:`build_bert`
BERT_WORDS = "[PAD] [UNK] [CLS] [SEP] [MASK] a man dog woman child ball the is on in plays runs park snow red .".split()


def build_bert(directory: str, name: str = "tiny-bert") -> str:
    """``directory/NAME``: a random 2-layer BERT (hidden 32, seed 0) with a word-level
    vocabulary, saved with its tokenizer (which, as many saved without one, declares no maximum
    length): BERTScore's encoder in tests/core/test_bertscore.py and docs/usage/neural-metrics.md."""
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = os.path.join(directory, name)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "vocab.txt"), "w", encoding="utf-8") as handle:
        handle.write("\n".join(BERT_WORDS) + "\n")
    tokenizer = BertTokenizerFast(vocab_file=os.path.join(out, "vocab.txt"), do_lower_case=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(BERT_WORDS), hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    BertModel(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
