"""The main job's feature sets, one row each: the one table that ``config/schema.yaml``'s
``features`` choices and help, the Snakefile's rules (``rules/features.smk``: the scorers and
the model a set waits for; the Snakefile: the sets scored with torch), the settings' checks
(which sets a generator of one's own can have, which take a model of one's own, which are
opt-in) and ``scripts/pipeline_settings.py`` (the sets an earlier run recorded) read.

A new feature set is one row here (and its scorer in ``rerank/features/``).  Pure Python: it
is read on a python without rerank (``run_pipeline.sh --help``).
"""

from dataclasses import dataclass
from typing import Optional, Tuple


@dataclass(frozen=True)
class FeatureSet:
    """One feature set of ``FEATURES``.

    Attributes:
        name: the word in ``FEATURES``.
        column: the name of its columns' set in ``rerank tune --feature-sets``.
        help: what it is, in the settings' help (after ``NAME:``).
        scorers: ``rerank features add --scorer`` specs, templates over the run's directories
            (:func:`settings.models.layout`'s keys, and ``qe_checkpoint``).
        needs: the file its rule waits for (a model's ``train.done``), a template as
            ``scorers``; None: nothing trained here.
        raw_scorers: the scorers with a GENERATOR of one's own, where they differ (templates
            over ``train_src``, ``train_tgt`` — the raw training pair — and ``column``, the
            generator's score column); such a set waits for nothing.
        torch: scored with torch (forced decoding, embeddings): its rule holds every core.
        raw_text: it reads raw text only, so a GENERATOR of one's own can have it.
        own_model: (setting, scorer direction) where the user may bring the model instead
            of training it here (``R2L_MODEL``, ``CHANNEL_MODEL``).
        opt_in: left out of ``FEATURES=all`` (it needs a model the user brings).
        legacy: computed by every run of the pipeline before ``FEATURES`` was recorded (the
            GRU system's sets then), what ``scripts/pipeline_settings.py`` reads into an
            earlier run's ``settings.json``; a set added since is not.
    """

    name: str
    column: str
    help: str
    scorers: Tuple[str, ...]
    needs: Optional[str] = None
    raw_scorers: Tuple[str, ...] = ()
    torch: bool = False
    raw_text: bool = False
    own_model: Optional[Tuple[str, str]] = None
    opt_in: bool = False
    legacy: bool = False


#: every feature set, in the order of their columns
FEATURE_SETS: Tuple[FeatureSet, ...] = (
    FeatureSet("mlmme", "MLMME", "MLMME s_s", ("mlmme:{embed}",), "{embed}/heldout.json", torch=True, legacy=True),
    FeatureSet(
        "r2l",
        "R2L",
        "right-to-left model",
        ("nmt:{r2l}",),
        "{r2l}/train.done",
        torch=True,
        own_model=("r2l_model", "r2l"),
        legacy=True,
    ),
    FeatureSet(
        "channel",
        "Channel",
        "de-en channel model",
        ("nmt:{channel}",),
        "{channel}/train.done",
        torch=True,
        own_model=("channel_model", "backward"),
        legacy=True,
    ),
    FeatureSet("lm", "LM", "German LM", ("lm:{lm}",), "{lm}/train.done", torch=True, legacy=True),
    FeatureSet(
        "l2r2", "L2R2", "a second left-to-right model", ("nmt:{l2r2}",), "{l2r2}/train.done", torch=True, legacy=True
    ),
    FeatureSet(
        "mbr",
        "MBR",
        "MBR expected BLEU and chrF",
        ("mbr:bleu", "mbr:chrf"),
        raw_scorers=("mbr:bleu,feature={column}", "mbr:chrf,feature={column}"),
        raw_text=True,
        legacy=True,
    ),
    FeatureSet("e5", "E5", "multilingual-E5 similarity", ("e5:",), torch=True, raw_text=True, legacy=True),
    FeatureSet(
        "len",
        "Len",
        "length",
        ("len:{data}",),
        "{data}/prepare.json",
        raw_scorers=("len:src={train_src},tgt={train_tgt}",),
        raw_text=True,
        legacy=True,
    ),
    FeatureSet(
        "ibm1",
        "IBM1",
        "IBM Model 1 in both directions",
        ("ibm1:{data}",),
        "{data}/prepare.json",
        raw_scorers=("ibm1:src={train_src},tgt={train_tgt}",),
        raw_text=True,
    ),
    FeatureSet(
        "qe",
        "QE",
        "reference-free COMET of source and hypothesis (CometKiwi, COMET-QE) from QE_CHECKPOINT, opt-in "
        "(skipped with one line without a checkpoint)",
        ("cometkiwi:{qe_checkpoint}",),
        torch=True,
        raw_text=True,
        opt_in=True,
    ),
)

#: {name: its row}
BY_NAME = {feature_set.name: feature_set for feature_set in FEATURE_SETS}
#: the names, in the order of their columns (the schema's ``features`` choices)
NAMES = tuple(BY_NAME)
#: the sets ``FEATURES=all`` leaves out: they need a model the user brings (QE_CHECKPOINT)
OPT_IN_SETS = tuple(f.name for f in FEATURE_SETS if f.opt_in)
#: the sets a generator of one's own can have: no model trained on the prepared corpus
RAW_TEXT_SETS = tuple(f.name for f in FEATURE_SETS if f.raw_text)
#: the sets scored with torch: such a rule holds every core
TORCH_SETS = tuple(f.name for f in FEATURE_SETS if f.torch)
#: the sets every run computed before FEATURES was recorded (scripts/pipeline_settings.py)
LEGACY_SETS = tuple(f.name for f in FEATURE_SETS if f.legacy)
#: {feature set: (its setting, the scorer's direction, its column)}: the sets whose model may be
#: one the user has (R2L_MODEL, CHANNEL_MODEL) instead of one trained here
OWN_MODEL_SETS = {f.name: (f.own_model[0], f.own_model[1], f.column) for f in FEATURE_SETS if f.own_model}
