"""Settings of the MLMME / VSE model and of its training, apart from the torch code that
uses them, so that the command line can take its defaults from them without loading
torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List

from rerank.errors import InputError


@dataclass
class MLMMEConfig:
    """Model settings.  ``preset='paper'``: 620-d word embeddings, 1024-d GRUs, 2048-d joint
    space (the paper's §5); ``'cpu'``: 300 / 512 / 512 for 2 CPU cores.

    ``init='paper'``: N(0, 0.01) weights, orthogonal recurrent matrices, zero biases (§5);
    ``'default'``: PyTorch's default initialisation.  The CPU preset uses ``'default'``
    (with Adam 2e-3, :data:`rerank.embed.train.PRESET_LR`): on Multi30k, 300 batches of the
    paper's initialisation with Adam 1e-3 reach a validation en↔de recall sum of 2.1,
    PyTorch's initialisation with 2e-3 reaches 19.2 (the NMT model showed the same)."""

    langs: List[str] = field(default_factory=lambda: ["en", "de"])
    beta: float = 0.5
    margin: float = 0.2
    word_dim: int = 300
    hidden_dim: int = 512
    embed_dim: int = 512
    image_dim: int = 2048
    dropout: float = 0.5
    init: str = "default"
    preset: str = "cpu"
    #: image–sentence similarity: "cosine" (MLMME, Gella's SYM) or "order" (order embeddings,
    #: Vendrov et al. 2016, Gella's ASYM: S(d, v) = −‖max(0, v − d)‖² on non-negative unit vectors)
    similarity: str = "cosine"
    #: text encoder: "gru" (the last GRU state) or "bow" (the mean of the word embeddings,
    #: ImageVec, Singhal et al. 2019)
    encoder: str = "gru"
    #: one language branch for every language (MULE, Kim et al. 2020): the GRU and the
    #: projection are shared, each language keeps its word embeddings (the universal space)
    shared: bool = False
    #: weight of MULE's adversarial language classifier on the universal word embeddings
    #: (gradient reversal; 0: none)
    adversary: float = 0.0
    #: weight of MULE's neighbourhood constraints: a sentence ranks another description of
    #: its image (in every language, its own included) above the other rows (0: none)
    neighbour: float = 0.0
    #: the family the model was trained as (a label: mlmme, vse, pivot, parallel, mule, imagevec)
    objective: str = "mlmme"

    @classmethod
    def from_preset(cls, preset: str, **kwargs) -> "MLMMEConfig":
        """Config of a named preset ('cpu' or 'paper'), overridden by ``kwargs``.

        Raises:
            ValueError: unknown preset or β outside [0, 1].
        """
        sizes = {
            "cpu": dict(word_dim=300, hidden_dim=512, embed_dim=512, init="default"),
            "paper": dict(word_dim=620, hidden_dim=1024, embed_dim=2048, init="paper"),
        }
        if preset not in sizes:
            raise InputError(f"unknown preset {preset!r}; known: {', '.join(sizes)}")
        config = cls(preset=preset, **{**sizes[preset], **kwargs})
        if not 0.0 <= config.beta <= 1.0:
            raise InputError(f"beta must be in [0, 1], got {config.beta}")
        if config.init not in ("paper", "default"):
            raise InputError(f"unknown init {config.init!r}; known: paper, default")
        config.check()
        return config

    def check(self) -> None:
        """Raises :class:`InputError` for a similarity, encoder or objective that does not
        exist, or a negative term weight."""
        for key, known in (("similarity", SIMILARITIES), ("encoder", ENCODERS), ("objective", OBJECTIVES)):
            if getattr(self, key) not in known:
                raise InputError(f"unknown {key} {getattr(self, key)!r}; known: {', '.join(known)}")
        for key in ("adversary", "neighbour"):
            if not getattr(self, key) >= 0:
                raise InputError(f"{key} must be >= 0, got {getattr(self, key)}")


SIMILARITIES = ("cosine", "order")
OPTIMIZERS = ("adam", "lazy-adam")
ENCODERS = ("gru", "bow")

#: the embedding families (``rerank embed train --objective``): the settings each one fixes
#: (β stays the user's where the family mixes terms).  PARALLEL's three terms of equal
#: weight (Gella et al. 2017) are MLMME's loss at β = 0.5 (Calixto & Liu 2017); PIVOT has
#: no sentence–sentence term (β = 1); the -asym variants use order embeddings.
OBJECTIVES: Dict[str, Dict[str, Any]] = {
    "mlmme": {},
    "vse": {"beta": 1.0},
    "pivot": {"beta": 1.0},
    "pivot-asym": {"beta": 1.0, "similarity": "order"},
    "parallel": {"beta": 0.5},
    "parallel-asym": {"beta": 0.5, "similarity": "order"},
    "mule": {"shared": True, "adversary": 0.1, "neighbour": 1.0},
    "imagevec": {"encoder": "bow"},
}


PRESET_LR = {"cpu": 2e-3, "paper": 2e-4}


@dataclass
class EmbedTrainConfig:
    """Training settings (serialised into ``config.json`` beside the model)."""

    model: MLMMEConfig = field(default_factory=MLMMEConfig)
    epochs: int = 10
    batch_size: int = 128
    lr: float = 2e-3
    grad_clip: float = 2.0
    min_count: int = 2
    patience: int = 3
    seed: int = 1
    contrastive: str = "batch"
    image_rows: int = 32
    validate_every: int = 0
    threads: int = 0
    #: stop after this many batches (0: no limit), e.g. to fine-tune a warm-started model
    max_steps: int = 0
    #: stop after this many minutes of training (wall time, 0: no limit), validating there and
    #: keeping the best state, as fairseq's ``--stop-time-hours``: a run that must end inside a
    #: job's or a lent machine's time still writes its model
    max_minutes: float = 0.0
    #: warm start: a trained model directory whose vocabularies, sizes and weights (every
    #: tensor whose name and shape match) the new model starts from ('' = from scratch)
    init_model: str = ""
    #: where training runs (rerank.devices.DeviceSettings: auto, cpu, cuda, cuda:N) and in
    #: which floating-point type (float16/bfloat16: mixed precision with torch.autocast on CUDA)
    device: str = "auto"
    dtype: str = "float32"
    #: "adam" (every weight, every step: torch.optim.Adam) or "lazy-adam" (a word-embedding row
    #: moves only in the steps whose batch holds its word: torch.optim.SparseAdam on sparse
    #: gradients, TensorFlow's LazyAdam; the other weights as with "adam").  Lazy Adam costs
    #: the batch's words, not the vocabulary: large word embeddings train fast on a CPU
    optimizer: str = "adam"
