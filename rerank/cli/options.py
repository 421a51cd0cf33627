"""Option groups several verbs share, and options generated from settings dataclasses
(as mbrs builds its command line from each component's ``Config``)."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Any, Dict, Iterable, Optional

from rerank.argtypes import non_negative_int, open_unit_interval, positive_int, seed
from rerank.defaults import DEFAULT_SEED
from rerank.devices import DEVICE_HELP, DTYPE_HELP, DTYPES, THREADS_HELP, DeviceSettings, device_name
from rerank.errors import InputError
from rerank.metrics import DEFAULT_METRICS, METRIC_HELP, make_metric
from rerank.metrics.bleu import BleuMetric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.shards import Shard
from rerank.signif import PAIRS, TESTS
from rerank.signif_adjust import ADJUSTMENTS
from rerank.signif_bootstrap import BOOTSTRAP_RESAMPLES


def bleu_options(p: argparse.ArgumentParser) -> None:
    """``--tokenize`` / ``--lowercase``: the :class:`~rerank.metrics.bleu.BleuMetric` of a verb."""
    p.add_argument(
        "--tokenize",
        default=DEFAULT_TOKENIZE,
        help=f"sacrebleu BLEU tokeniser (default: {DEFAULT_TOKENIZE}, sacrebleu's; 'none' for tokenised "
        "text such as Multi30k's, e.g. --tokenize none)",
    )
    p.add_argument("--lowercase", action="store_true", help="lowercase before scoring (default: off)")


#: the file formats, for ``rerank --help`` and ``rerank features add --help``
FORMATS_HELP = """formats:
  n-best list   id ||| hypothesis ||| name= value [value ...] name2= value ||| total   (Moses; ids 0..N-1 in order,
                the same names on every line); LIST.json beside it: its signature (beam_feature, feature_sets)
  weights       JSON {"weights": {"name": value or [values], ...}, ...} (rerank tune --out)
  text          one sentence per line (sources, references, 1-best outputs)"""


def metric_options(p: argparse.ArgumentParser, what: str) -> None:
    """``--metric`` (what ``what`` maximises) and ``--lang`` (METEOR's language)."""
    p.add_argument(
        "--metric",
        "--metrics",  # the reporting verbs' spelling: accepted, with a note (one metric is optimised)
        action=_aliased(
            argparse._StoreAction,
            "--metrics read as --metric: one metric is optimised (eval, signif and report take several)",
        ),
        default="bleu",
        help=f"what {what} maximises, one metric (default: bleu): {METRIC_HELP}; e.g. --metric chrf, "
        "--metric 0.5*bleu-0.5*ter, --metric seg:comet",
    )
    lang_option(p)


def lang_option(p: argparse.ArgumentParser) -> None:
    """``--lang``: METEOR's language, which it needs (no default)."""
    p.add_argument(
        "--lang",
        help="METEOR's language, which METEOR needs (the jar's stemmer and parameters differ per language; no "
        "default), e.g. --lang de",
    )


def ref_option(p: argparse.ArgumentParser) -> None:
    """``--ref FILE`` (required; again for several references per segment, as sacrebleu takes them)."""
    p.add_argument(
        "--ref",
        required=True,
        action="append",
        help="reference translations, one per line; give --ref again for several references per segment "
        "(sacrebleu's rule), e.g. --ref test.de --ref test.2.de",
    )


def seg_sidecars(spec: str, path: str) -> list:
    """The sidecar files ``seg:`` metrics of ``spec`` read for file ``path`` (inputs to
    protect and check); none for a spec that does not parse (the verb reports it)."""
    try:
        metric = make_metric(spec)
    except InputError:
        return []
    return metric.sidecars(path)


def signature_option(p: argparse.ArgumentParser, output: str = "--out") -> None:
    """``--signature FILE``: where the signature of a list written to standard output goes
    (a list written to a file has its signature beside it, ``FILE.json``)."""
    p.add_argument(
        "--signature",
        metavar="FILE",
        help=f"with {output} - (standard output): write the list's signature (JSON) to FILE, "
        f"e.g. --signature test.nbest.json (default: a list on standard output gets none)",
    )


def shard_options(p: argparse.ArgumentParser, what: str, parts: str = "contiguous blocks of") -> None:
    """``--num-shards N --shard-id K`` (:mod:`rerank.shards`): the K-th of N ``parts`` (contiguous
    blocks, or for fairseq's decoding its batches dealt round-robin) ``what`` (e.g. "sentences of
    the input"), joined afterwards by ``rerank merge``."""
    p.add_argument(
        "--num-shards",
        type=positive_int,
        help=f"split the work into N {parts} {what} (with --shard-id; one per machine or SLURM "
        "array task), e.g. --num-shards 4 (default: no shards); join the outputs with rerank merge",
    )
    p.add_argument(
        "--shard-id",
        type=non_negative_int,
        help="the shard this process does, 0..N-1 (default: none), e.g. --shard-id 0",
    )


def shard_option_value(args) -> Optional[Shard]:
    """The :class:`rerank.shards.Shard` of ``--num-shards`` / ``--shard-id``, or None.

    Raises:
        InputError: one without the other, an id outside 0..N-1.
    """
    return Shard.from_args(args.num_shards, args.shard_id)


def device_options(p: argparse.ArgumentParser, threads: bool = True) -> None:
    """``--device``, ``--dtype`` and ``--threads`` of every verb that runs a neural model
    (:class:`rerank.devices.DeviceSettings`; ``threads=False`` for a trainer whose own
    ``--threads`` goes to fairseq), and ``--trust-checkpoint`` (:mod:`rerank.nmt.checkpoints`)."""
    p.add_argument("--device", default="auto", type=device_name, help=DEVICE_HELP)
    p.add_argument("--dtype", default="float32", choices=DTYPES, help=DTYPE_HELP)
    if threads:
        p.add_argument("--threads", type=positive_int, help=THREADS_HELP)
    trust_option(p)


def trust_option(p: argparse.ArgumentParser) -> None:
    """``--trust-checkpoint`` (:mod:`rerank.nmt.checkpoints`) of every verb that loads a checkpoint."""
    p.add_argument(
        "--trust-checkpoint",
        action="store_true",
        help="load model checkpoints that name classes beyond fairseq's own (loading such a file can run "
        "code: only for a source you trust; default: refused; as RERANK_TRUST_CHECKPOINTS=1; docs/security.md)",
    )


def device_settings(args) -> DeviceSettings:
    """The :class:`DeviceSettings` of ``--device`` / ``--dtype`` / ``--threads``."""
    return DeviceSettings(args.device, args.dtype, getattr(args, "threads", None) or None)


def oracle_metric_option(p: argparse.ArgumentParser) -> None:
    """``--oracle-metric`` of the verbs that add an oracle row (``signif``, ``experiment``)."""
    p.add_argument(
        "--oracle-metric",
        default="bleu",
        help="the metric the oracle row maximises (and the report's plots show), with --tokenize/--lowercase "
        "(default: bleu), e.g. --oracle-metric chrf",
    )


def bleu_settings(args) -> BleuMetric:
    """The :class:`BleuMetric` of ``--tokenize`` / ``--lowercase``."""
    return BleuMetric(args.tokenize, args.lowercase)


def _dest(owner: str, name: str) -> str:
    return f"{owner}__{name}"


def add_config_options(
    parser: argparse.ArgumentParser, owner: str, config_class: type, skip: Iterable[str] = ()
) -> None:
    """One option per field of the dataclass ``config_class`` (fields made with
    :func:`rerank.config.option`: help, type, alias in their metadata), in an argument group
    named after ``owner``: ``--OWNER-FIELD`` (``--mira-iterations``, ``--mert-restarts``), and a
    boolean that is on by default is switched off by ``--OWNER-no-FIELD``.  A field's
    ``alias`` (its older flag, e.g. ``--restarts``) still works, with a one-line note.
    Options not given are absent from the namespace, so :func:`config_from_args` can tell
    which were given."""
    group = parser.add_argument_group(f"{owner} options")
    for f in dataclasses.fields(config_class):
        if f.name in skip:
            continue
        meta = f.metadata
        flag = config_flag(owner, f)
        flags = [flag] + ([meta["alias"]] if meta.get("alias") and meta["alias"] != flag else [])
        help_text = meta.get("help", f.name)
        if f.type in ("bool", bool):
            action = _aliased(_StoreFalse if f.default else _StoreTrue)
            group.add_argument(
                *flags,
                dest=_dest(owner, f.name),
                action=action,
                default=argparse.SUPPRESS,
                help=f"{owner}: {help_text}",
            )
        else:
            kind = meta.get("type") or type(f.default)
            group.add_argument(
                *flags,
                dest=_dest(owner, f.name),
                action=_aliased(argparse._StoreAction),
                type=kind,
                default=argparse.SUPPRESS,
                metavar=f.name.upper(),
                help=f"{owner}: {help_text} (default: {f.default})",
            )


def config_flag(owner: str, field: dataclasses.Field) -> str:
    """The command-line flag of a ``Config`` field: ``--OWNER-FIELD``, or
    ``--OWNER-no-FIELD`` for a boolean that is on by default."""
    name = field.name.replace("_", "-")
    if field.type in ("bool", bool) and field.default:
        return f"--{owner}-no-{name}"
    return f"--{owner}-{name}"


class _StoreTrue(argparse._StoreConstAction):
    def __init__(self, option_strings, dest, default=None, required=False, help=None):
        super().__init__(option_strings, dest, const=True, default=default, required=required, help=help)


class _StoreFalse(argparse._StoreConstAction):
    def __init__(self, option_strings, dest, default=None, required=False, help=None):
        super().__init__(option_strings, dest, const=False, default=default, required=required, help=help)


def _aliased(base, note: Optional[str] = None):
    """``base`` (an argparse action class) that notes, once, when the option was given
    by its other spelling (the second option string): ``note``, or by default that the
    first is the option's name now and the old spelling works for this release."""

    class Aliased(base):
        def __call__(self, parser, namespace, values, option_string=None):
            if option_string is not None and option_string != self.option_strings[0]:
                note_once(
                    note or f"{option_string} is now {self.option_strings[0]}; the old spelling works for this release"
                )
            super().__call__(parser, namespace, values, option_string)

    return Aliased


#: an option's action that accepts its old spelling (the second option string) with a note
OLD_SPELLING = _aliased(argparse._StoreAction)

_NOTED: set = set()


def note_once(text: str) -> None:
    """One ``rerank: note:`` line on stderr per process and text (old spellings)."""
    if text not in _NOTED:
        _NOTED.add(text)
        print(f"rerank: note: {text}", file=sys.stderr)


def config_from_args(
    args, owner: str, config_class: type, shared: Optional[Dict[str, Any]] = None, others: Iterable[tuple] = ()
) -> Any:
    """``config_class`` from the options of :func:`add_config_options` that were given
    (defaults for the others) and ``shared`` values (e.g. ``seed``).

    Raises:
        InputError: an option of another owner in ``others`` (``[(owner, class), ...]``)
            was given: it would be silently ignored.
    """
    for other, other_class in others:
        if other == owner:
            continue
        for f in dataclasses.fields(other_class):
            if hasattr(args, _dest(other, f.name)):
                raise InputError(f"{config_flag(other, f)} is an option of {other}, not of {owner}")
    values = {
        f.name: getattr(args, _dest(owner, f.name))
        for f in dataclasses.fields(config_class)
        if hasattr(args, _dest(owner, f.name))
    }
    names = {f.name for f in dataclasses.fields(config_class)}
    values.update({k: v for k, v in (shared or {}).items() if k in names})
    return config_class(**values)


def references(args):
    """``--ref`` given once: its path; given R times: the R paths (several references per
    segment, :func:`rerank.textio.read_references`)."""
    return args.ref[0] if len(args.ref) == 1 else list(args.ref)


def signif_options(p: argparse.ArgumentParser, adjust: str = "none") -> None:
    """The options ``signif`` and ``report`` share: metrics, shuffles, resamples, seed, compare-to,
    the test, intervals, adjustment (``adjust``: its default) and pairs."""
    p.add_argument(
        "--metrics",
        default=",".join(DEFAULT_METRICS),
        help=f"comma-separated (default: {','.join(DEFAULT_METRICS)}; MultEval's are bleu,meteor,ter,length): "
        + METRIC_HELP
        + " (length: 100 · hyp/ref length, as MultEval; seg: scores one per line in FILE.NAME beside "
        "every replica FILE)",
    )
    p.add_argument("--shuffles", type=positive_int, default=10000, help="approximate randomisation trials")
    p.add_argument("--resamples", type=non_negative_int, default=10000, help="bootstrap resamples for s_sel (0: none)")
    p.add_argument(
        "--seed",
        type=seed,
        default=DEFAULT_SEED,
        help=f"seed of shuffles and resamples (default: {DEFAULT_SEED}, sacrebleu's)",
    )
    p.add_argument("--compare-to", help="system name for the second mark (‡), e.g. VSE")
    p.add_argument(
        "--test",
        choices=TESTS,
        default="ar",
        help="the test of each p: ar (approximate randomisation, sacreBLEU --paired-ar, MultEval) or bs "
        "(paired bootstrap, sacreBLEU --paired-bs; Koehn 2004) (default: ar)",
    )
    p.add_argument(
        "--bootstrap",
        type=positive_int,
        default=BOOTSTRAP_RESAMPLES,
        help=f"paired bootstrap resamples behind the intervals and --test bs (default: {BOOTSTRAP_RESAMPLES}, "
        "sacreBLEU's --paired-bs-n)",
    )
    p.add_argument(
        "--confidence", type=open_unit_interval, default=0.95, help="level of the intervals (percentile; default: 0.95)"
    )
    p.add_argument(
        "--adjust",
        choices=ADJUSTMENTS,
        default=adjust,
        help="multiple-comparison adjustment over the table's tests (all rows and metrics): none, holm "
        f"(Holm 1979) or maxT (Westfall & Young 1993, over the shared shuffles) (default: {adjust})",
    )
    p.add_argument(
        "--alpha", type=open_unit_interval, default=0.05, help="level of the marks and clusters (default: 0.05)"
    )
    p.add_argument(
        "--pairs",
        choices=PAIRS,
        default="baseline",
        help="baseline: every system against the baseline; all: every pair too (the p-value matrix in the "
        "JSON, rank clusters per metric, #k in the cells) (default: baseline)",
    )
    lang_option(p)


def test_settings(args) -> dict:
    """The test, interval, adjustment and pairing settings of ``signif``/``report`` from ``args``."""
    return {
        "test": args.test,
        "bootstrap": args.bootstrap,
        "confidence": args.confidence,
        "adjust": args.adjust,
        "alpha": args.alpha,
        "pairs": args.pairs,
    }
