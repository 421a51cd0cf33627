"""Sentence analysis of re-ranked systems against the baseline (``rerank analyze``, ``rerank
report --analysis``): what MultEval's ``--rankDir`` and compare-mt show, and what only an n-best
tool knows.

For each system, on its median replica (the replica of median corpus score under the first
metric; ``improved in k of R`` counts every replica):

* **sentences** ranked by gain over the baseline under the first metric (sacreBLEU's sentence
  scores, :meth:`rerank.metrics.Metric.sentence_level`): id, source, reference, both outputs,
  every metric's sentence scores, the replicas that improved it, the n-best rank the system picked;
* **buckets** by reference length, hypothesis/reference length ratio, the baseline's sentence
  score decile, the source's word frequency in the training corpus (when given), the picked
  n-best rank and whether the 1-best changed: each bucket's count, its corpus-level Δ per metric,
  the paired bootstrap interval and p of that Δ (:mod:`rerank.signif_bootstrap`), p adjusted
  (Holm) across the buckets of a metric;
* **n-grams** (orders 1-2) the system produces most more and most less often than the baseline,
  by compare-mt's smoothed ratio (c_sys + 1) / (c_sys + c_base + 2), with their reference counts.
"""

from __future__ import annotations

import bisect
import functools
import heapq
import json
import math
import os
import re
from collections import Counter
from dataclasses import dataclass
from itertools import chain
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rerank.defaults import DEFAULT_SEED
from rerank.metrics import make_metric
from rerank.metrics.bleu_stats import DEFAULT_TOKENIZE
from rerank.metrics.evaluate import shared_stats
from rerank.metrics.references import References
from rerank.nbest import NBestList, PackedStrings
from rerank.outputs import StagedOutputs
from rerank.signif import resample_counts, resampled_sums, summable
from rerank.signif_adjust import holm
from rerank.signif_bootstrap import delta_outcomes


@dataclass(frozen=True)
class AnalysisSettings:
    """What :func:`analyze` computes: ``metrics`` (the first ranks the sentences), the text settings,
    ``bootstrap`` resamples and ``confidence`` of the buckets' intervals, ``seed``, the n-gram
    ``orders`` and how many n-grams each way (``top``)."""

    metrics: Tuple[str, ...] = ("bleu", "chrf", "ter")
    tokenize: str = DEFAULT_TOKENIZE
    lowercase: bool = False
    lang: Optional[str] = None
    bootstrap: int = 1000
    confidence: float = 0.95
    seed: int = DEFAULT_SEED
    orders: Tuple[int, ...] = (1, 2)
    top: int = 20


def median_replica(scores: Sequence[float]) -> int:
    """The index of the replica of median score (the lower middle one of an even count)."""
    order = np.argsort(scores, kind="stable")
    return int(order[(len(scores) - 1) // 2])


class PickedRanks:
    """Where the systems' outputs stand in the n-best list they were picked from: :meth:`of`
    gives each segment's 1-based rank of a system's output (its first equal hypothesis), or
    None where the list does not hold it.  The list's hypotheses are searched as one UTF-8
    buffer (:class:`~rerank.nbest.PackedStrings`, packed here when the list holds strings),
    within each segment's bytes, a match counting where it spans a whole hypothesis: no text
    of the list is decoded."""

    def __init__(self, nbest: NBestList):
        hypotheses = nbest.hypotheses
        packed = hypotheses if isinstance(hypotheses, PackedStrings) else PackedStrings.from_strings(hypotheses)
        self.data = packed.data.tobytes()
        self.bounds = packed.offsets.tolist()  # byte offset of each hypothesis, and the end
        self.segments = nbest.offsets.tolist()  # first hypothesis of each segment, and the end

    def rank(self, segment: int, text: str) -> Optional[int]:
        """The 1-based rank of ``text`` among ``segment``'s hypotheses, or None."""
        first, last = self.segments[segment], self.segments[segment + 1]
        needle, bounds = text.encode("utf-8"), self.bounds
        at = self.data.find(needle, bounds[first], bounds[last])
        while at != -1:
            row = bisect.bisect_left(bounds, at, first, last)
            while row < last and bounds[row] == at:  # rows starting here (empty ones share a start)
                if bounds[row + 1] - at == len(needle):
                    return row - first + 1
                row += 1
            at = self.data.find(needle, at + 1, bounds[last])
        return None

    def of(self, outputs: Sequence[str]) -> List[Optional[int]]:
        """Each segment's rank of ``outputs[i]`` (:meth:`rank`)."""
        return [self.rank(i, text) for i, text in enumerate(outputs)]


def word_frequency(sources: Sequence[str], train: Sequence[str]) -> np.ndarray:
    """float64[N] each source's mean log10(1 + count) of its words in the training text ``train``
    (lowercased whitespace words; an unseen word counts 0)."""
    counts = Counter(w for line in train for w in line.lower().split())
    return np.array(
        [np.mean([math.log10(1 + counts[w]) for w in s.lower().split()]) if s.split() else 0.0 for s in sources]
    )


def _bins(values: np.ndarray, edges: Sequence[float], labels: Sequence[str]) -> np.ndarray:
    """The label of each value: ``labels[k]`` for edges[k-1] < value ≤ edges[k] (the last open)."""
    return np.asarray(labels, dtype=object)[np.searchsorted(edges, values, side="left")]


def _quantile_bins(values: np.ndarray, parts: int, name: str) -> np.ndarray:
    """Each value's quantile bucket (``name`` 1..parts, equal counts where values allow)."""
    ranks = np.argsort(np.argsort(values, kind="stable"), kind="stable")
    return np.array([f"{name} {1 + (r * parts) // len(values)}" for r in ranks], dtype=object)


def bucketings(
    refs: List[str],
    baseline: List[str],
    system: List[str],
    first_scores: np.ndarray,
    ranks: Optional[List[Optional[int]]],
    frequency: Optional[np.ndarray],
    fixed: Optional[Dict[str, np.ndarray]] = None,
) -> Dict[str, np.ndarray]:
    """{bucketing: object[N] bucket label of each segment}: reference length, length ratio,
    baseline score decile, source word frequency quartile (with ``frequency``), picked rank (with
    ``ranks``), 1-best changed.  ``fixed``: where the bucketings that do not depend on the system
    (and the reference lengths) are kept across the systems of one baseline."""
    fixed = {} if fixed is None else fixed
    if not fixed:
        fixed["lengths"] = ref_len = np.array([len(r.split()) for r in refs], dtype=float)
        fixed["reference length"] = _bins(ref_len, [5, 10, 15, 20], ["1-5", "6-10", "11-15", "16-20", "21+"])
        fixed["baseline score decile"] = _quantile_bins(first_scores, 10, "decile")
        if frequency is not None:
            fixed["source word frequency"] = _quantile_bins(frequency, 4, "quartile")
    ratio = np.array([len(h.split()) for h in system], dtype=float) / np.maximum(fixed["lengths"], 1)
    out = {
        "reference length": fixed["reference length"],
        "length ratio": _bins(ratio, [0.9, 1.0, 1.1], ["<=0.9", "0.9-1.0", "1.0-1.1", ">1.1"]),
        "baseline score decile": fixed["baseline score decile"],
        "1-best changed": np.array(["changed" if a != b else "same" for a, b in zip(baseline, system)], dtype=object),
    }
    if frequency is not None:
        out["source word frequency"] = fixed["source word frequency"]
    if ranks is not None:
        labels = np.array(["1", "2", "3-5", "6-10", "11+", "not in list"], dtype=object)
        picked = np.array([0 if r is None else r for r in ranks], dtype=np.int64)
        out["picked n-best rank"] = labels[np.where(picked > 0, np.searchsorted([1, 2, 5, 10], picked), 5)]
    return out


@functools.lru_cache(maxsize=1 << 16)
def _line_ngrams(line: str, order: int) -> Tuple[str, ...]:
    """The n-grams of ``order`` in one line (whitespace words), kept: the systems of a table share
    most of their outputs with each other and with the baseline."""
    words = line.split()
    return tuple(words) if order == 1 else tuple(map(" ".join, zip(*(words[k:] for k in range(order)))))


def _ngrams(lines: Sequence[str], order: int) -> Counter:
    """The n-grams of ``order`` in ``lines`` (whitespace words), counted in one pass."""
    return Counter(chain.from_iterable(_line_ngrams(line, order) for line in lines))


def ngram_differences(
    baseline: Sequence[str],
    system: Sequence[str],
    refs: Sequence[str],
    orders: Sequence[int],
    top: int,
    counted: Optional[Dict[Tuple[str, int], Counter]] = None,
) -> Dict[str, List[Dict[str, Any]]]:
    """{"over": [...], "under": [...]}: the ``top`` n-grams the system produces most more (less)
    often than the baseline by compare-mt's smoothed ratio (c_sys + 1) / (c_sys + c_base + 2),
    each with both counts and its count in the references (ties: more occurrences first).
    ``counted``: where the baseline's and the references' counts are kept across systems
    ({("baseline" | "reference", order): counts}).  Only the segments whose output differs from
    the baseline's are counted for the system: c_sys = c_base − (the baseline's count in them) +
    (the system's count in them), and an n-gram out of them has c_sys = c_base."""
    counted = {} if counted is None else counted
    changed = [i for i, (b, s) in enumerate(zip(baseline, system)) if b != s]
    over, under = [], []  # (-ratio or ratio, -(c_sys + c_base), n-gram, c_sys, c_base): sorted, the order asked
    for order in orders:
        if ("baseline", order) not in counted:
            counted[("baseline", order)], counted[("reference", order)] = _ngrams(baseline, order), _ngrams(refs, order)
        base_counts = counted[("baseline", order)]
        gained = _ngrams([system[i] for i in changed], order)
        lost = _ngrams([baseline[i] for i in changed], order)
        plus, minus, base_of = gained.get, lost.get, base_counts.get
        for gram in gained.keys() | lost.keys():
            change = plus(gram, 0) - minus(gram, 0)
            if change > 0:  # c_sys > c_base: ratio > 1/2
                c_base = base_of(gram, 0)
                c_sys = c_base + change
                over.append((-(c_sys + 1) / (c_sys + c_base + 2), -(c_sys + c_base), gram, c_sys, c_base))
            elif change < 0:
                c_base = base_of(gram, 0)
                c_sys = c_base + change
                under.append(((c_sys + 1) / (c_sys + c_base + 2), -(c_sys + c_base), gram, c_sys, c_base))

    def records(rows: List[Tuple[float, int, str, int, int]]) -> List[Dict[str, Any]]:
        best = heapq.nsmallest(top, rows, key=lambda r: r[:3])  # sorted(rows)[:top]: grams are distinct
        return [
            {
                "ngram": g,
                "ratio": abs(r),
                "system": c_sys,
                "baseline": c_base,
                "reference": counted[("reference", len(g.split()))][g],
            }
            for r, _, g, c_sys, c_base in best
        ]

    return {"over": records(over), "under": records(under)}


def _bucket_order(bucket: str) -> Tuple[float, int, str]:
    """Buckets in their natural order: by their first number (``<=0.9`` before ``0.9-1.0``), the
    others (``changed``, ``same``) after them by name."""
    found = re.search(r"\d+(?:\.\d+)?", bucket)
    return (float(found.group()) if found else math.inf, -1 if bucket.startswith("<") else 0, bucket)


def bucket_tables(
    metrics: Dict[str, Any],
    baseline: Dict[str, np.ndarray],
    systems: Dict[str, Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]],
    settings: AnalysisSettings,
) -> Dict[str, List[Dict[str, Any]]]:
    """{system: its bucket records}, one record per (bucketing, bucket, metric): count, Δ, its
    paired-bootstrap interval and p (:func:`rerank.signif_bootstrap.paired_bootstrap` on the
    bucket's segments: the same draws, the same numbers); p adjusted (Holm) across the buckets of
    each metric.  ``baseline``: {metric: float[N, K] statistics}; ``systems``: {system: ({metric:
    float[N, K]}, {bucketing: object[N] labels})}.  A bucket that holds the same segments for
    several systems (reference length, baseline decile, word frequency) is resampled once for the
    baseline and all of them: one product of the draws with their stacked statistics, one call of
    the metric on the stacked sums."""
    shared: Dict[Tuple[str, str, bytes], List[str]] = {}
    for name, (_, labels) in systems.items():
        for bucketing, label in labels.items():
            for bucket in sorted(set(label), key=_bucket_order):
                rows = np.flatnonzero(label == bucket)
                shared.setdefault((bucketing, str(bucket), rows.tobytes()), []).append(name)
    by_size: Dict[int, List[Tuple[str, str, np.ndarray, List[str]]]] = {}
    for (bucketing, bucket, key), names in shared.items():
        rows = np.frombuffer(key, dtype=np.intp)
        by_size.setdefault(len(rows), []).append((bucketing, bucket, rows, names))
    found: Dict[Tuple[str, str, str, str], Dict[str, Any]] = {}
    for size in sorted(by_size):  # the buckets of one size share their draws: one product for all of them
        # per bucket and metric: statistics equal to another's on the bucket (the baseline's, where the
        # 1-best was kept) are resampled once; the baseline's is the first part
        work = []
        for bucketing, bucket, rows, names in by_size[size]:
            for metric_name in metrics:
                column: Dict[bytes, int] = {}
                parts: List[np.ndarray] = []
                part_of: List[int] = []  # the baseline's, then each system's
                for part in [baseline[metric_name][rows]] + [systems[n][0][metric_name][rows] for n in names]:
                    part_of.append(column.setdefault(part.tobytes(), len(parts)))
                    if part_of[-1] == len(parts):
                        parts.append(part)
                work.append((bucketing, bucket, names, metric_name, parts, part_of))
        resampled = [w for w in work if len(w[4]) > 1]  # a system that differs from the baseline here
        scores: Dict[int, np.ndarray] = {}
        if resampled:
            counts = resample_counts(size, settings.bootstrap, settings.seed)
            blocks = [part for w in resampled for part in w[4]]
            sums = resampled_sums(counts, summable(np.concatenate(blocks, axis=1)))
            at = 0
            for w in resampled:
                width = w[4][0].shape[1]
                span = sums[:, at : at + width * len(w[4])]
                scores[id(w)] = np.asarray(metrics[w[3]].score(span.reshape(-1, width)), dtype=np.float64).reshape(
                    len(counts), -1
                )
                at += width * len(w[4])
        for w in work:
            bucketing, bucket, names, metric_name, parts, part_of = w
            totals = np.stack([part.sum(0) for part in parts])
            observed = np.asarray(metrics[metric_name].score(totals), dtype=np.float64).reshape(len(parts)).tolist()
            # the baseline's own statistics: Δ 0 in every resample (what bootstrap_outcome gives)
            outcome = {0: (0.0, [0.0, 0.0], 1.0)}
            if len(parts) > 1:
                resampled_scores = scores[id(w)]
                delta, lo, hi, p = delta_outcomes(
                    (observed[0], np.array(observed[1:])),
                    resampled_scores[:, 0].copy(),
                    resampled_scores[:, 1:].T,
                    settings.confidence,
                )
                for k in range(1, len(parts)):
                    outcome[k] = (float(delta[k - 1]), [float(lo[k - 1]), float(hi[k - 1])], float(p[k - 1]))
            for name, k in zip(names, part_of[1:]):
                found[(name, bucketing, bucket, metric_name)] = {
                    "bucketing": bucketing,
                    "bucket": bucket,
                    "metric": metric_name,
                    "count": size,
                    "baseline": observed[0],
                    "system": observed[k],
                    "delta": outcome[k][0],
                    "delta_ci": list(outcome[k][1]),
                    "p": outcome[k][2],
                }
    out: Dict[str, List[Dict[str, Any]]] = {}
    for name, (_, labels) in systems.items():
        records = [
            found[(name, bucketing, str(bucket), metric_name)]
            for bucketing, label in labels.items()
            for bucket in sorted(set(label), key=_bucket_order)
            for metric_name in metrics
        ]
        for metric_name in metrics:
            family = [r for r in records if r["metric"] == metric_name]
            for record, adjusted in zip(family, holm([float(r["p"]) for r in family])):
                record["p_adjusted"] = float(adjusted)
        out[name] = records
    return out


def analyze(
    refs: References,
    texts: Dict[str, List[List[str]]],
    settings: AnalysisSettings = AnalysisSettings(),
    sources: Optional[List[str]] = None,
    nbest: Optional[NBestList] = None,
    train_source: Optional[List[str]] = None,
    computed: Optional[Dict[str, Any]] = None,
) -> Dict[str, Dict[str, Any]]:
    """The analysis of every system of ``texts`` (its first entry: the baseline, one replica or
    more: its first is compared) against the baseline (module docstring).  ``refs``: the
    references (one stream or several; the first is shown); ``sources``: shown, and with
    ``train_source`` (the training corpus' source side) the word-frequency buckets; ``nbest``:
    the list the systems picked from (their picked ranks); ``computed``: statistics already computed
    for these texts ({metric: {system: [replica statistics]}}, a report's).  Returns {system: {"replica",
    "sentences", "buckets", "ngrams"}}."""
    streams = refs if refs and isinstance(refs[0], list) else [refs]
    first_refs = [str(r) for r in streams[0]]
    metrics = {m: make_metric(m, settings.tokenize, settings.lowercase, settings.lang) for m in settings.metrics}
    computed = computed or {}
    stats = {name: computed.get(name) or shared_stats(metric, texts, refs, None) for name, metric in metrics.items()}
    baseline_name = next(iter(texts))
    baseline = texts[baseline_name][0]
    frequency = word_frequency(sources, train_source) if sources is not None and train_source is not None else None
    first = settings.metrics[0]
    out: Dict[str, Dict[str, Any]] = {}
    bucketed: Dict[str, Tuple[Dict[str, np.ndarray], Dict[str, np.ndarray]]] = {}
    counted: Dict[Tuple[str, int], Counter] = {}  # the baseline's and the references' n-grams, counted once
    listed = PickedRanks(nbest) if nbest is not None else None
    fixed: Dict[str, np.ndarray] = {}  # the bucketings every system shares
    baseline_sentences = {m: metric.sentence_level(stats[m][baseline_name][0]) for m, metric in metrics.items()}
    for name, replicas in list(texts.items())[1:]:
        first_metric = metrics[first]
        replica = median_replica([float(first_metric.score(s.sum(0))) for s in stats[first][name]])
        system = replicas[replica]
        sentence = {
            m: (baseline_sentences[m], metric.sentence_level(stats[m][name][replica])) for m, metric in metrics.items()
        }
        sign = 1.0 if first_metric.higher_is_better is not False else -1.0
        gain = sign * (sentence[first][1] - sentence[first][0])
        improved = np.sum(
            [sign * (first_metric.sentence_level(s) - sentence[first][0]) > 0 for s in stats[first][name]], axis=0
        )
        ranks = listed.of(system) if listed is not None else None
        as_lists = {m: (b.tolist(), s.tolist()) for m, (b, s) in sentence.items()}  # Python floats, once
        gains, counts = gain.tolist(), improved.tolist()
        records = [
            {
                "id": i,
                "source": None if sources is None else sources[i],
                "reference": first_refs[i],
                "baseline": baseline[i],
                "system": system[i],
                "scores": {m: {"baseline": b[i], "system": s[i]} for m, (b, s) in as_lists.items()},
                "gain": gains[i],
                "improved_in": f"{counts[i]} of {len(replicas)}",
                "rank": None if ranks is None else ranks[i],
            }
            for i in np.argsort(-gain, kind="stable").tolist()
        ]
        labels = bucketings(first_refs, baseline, system, sentence[first][0], ranks, frequency, fixed)
        bucketed[name] = ({m: stats[m][name][replica] for m in metrics}, labels)
        out[name] = {
            "replica": replica + 1,
            "sentences": records,
            "buckets": [],
            "ngrams": ngram_differences(baseline, system, first_refs, settings.orders, settings.top, counted),
        }
    tables = bucket_tables(metrics, {m: stats[m][baseline_name][0] for m in metrics}, bucketed, settings)
    for name, records in tables.items():
        out[name]["buckets"] = records
    return out


def _safe(name: str) -> str:
    """A system name as a directory name (``+r2l/chrF-tuned`` → ``+r2l_chrF-tuned``)."""
    return "".join(ch if ch.isalnum() or ch in "+-._" else "_" for ch in name) or "_"


def analysis_files(result: Dict[str, Dict[str, Any]], out_dir: str) -> Dict[str, str]:
    """{file kind: path} of what :func:`write_analysis` writes: per system ``SYSTEM/sentences.tsv``,
    ``sentences.jsonl``, ``buckets.tsv``, ``ngrams.tsv``; and ``analysis.json`` (everything, each
    system's ``sentences`` the path of its ``sentences.jsonl``, relative to ``out_dir``)."""
    files = {"analysis.json": os.path.join(out_dir, "analysis.json")}
    for name in result:
        for kind in ("sentences.tsv", "sentences.jsonl", "buckets.tsv", "ngrams.tsv"):
            files[f"{name}/{kind}"] = os.path.join(out_dir, _safe(name), kind)
    return files


def write_analysis(result: Dict[str, Dict[str, Any]], out_dir: str, outputs: StagedOutputs) -> Dict[str, str]:
    """Write :func:`analyze`'s ``result`` under ``out_dir`` (staged in ``outputs``: all files or
    none).  TSV cells hold no tab or line break (texts are one line each).  Returns the files."""
    files = analysis_files(result, out_dir)
    with outputs.open(files["analysis.json"]) as handle:
        # the sentences are in each system's sentences.jsonl; json.dumps without an indent runs the C
        # encoder (json.dump or an indent: the Python one, 10x slower)
        summary = {
            name: {
                **{k: v for k, v in part.items() if k != "sentences"},
                "sentences": os.path.relpath(files[f"{name}/sentences.jsonl"], out_dir),
            }
            for name, part in result.items()
        }
        handle.write(json.dumps(summary, ensure_ascii=False) + "\n")
    for name, part in result.items():
        metrics = list(part["sentences"][0]["scores"]) if part["sentences"] else []
        with outputs.open(files[f"{name}/sentences.tsv"]) as handle:
            head = ["id", "gain", "improved_in", "rank", "source", "reference", "baseline", "system"]
            handle.write("\t".join(head + [f"{m}:{side}" for m in metrics for side in ("baseline", "system")]) + "\n")
            scores = "\t{:.4f}" * (2 * len(metrics))  # each metric's baseline and system score
            handle.writelines(
                f"{r['id']}\t{r['gain']:.4f}\t{r['improved_in']}\t{'' if r['rank'] is None else r['rank']}\t"
                f"{'' if r['source'] is None else r['source']}\t{r['reference']}\t{r['baseline']}\t{r['system']}"
                + scores.format(*(r["scores"][m][side] for m in metrics for side in ("baseline", "system")))
                + "\n"
                for r in part["sentences"]
            )
        with outputs.open(files[f"{name}/sentences.jsonl"]) as handle:
            # one encoder for every line; the records are trees built here (no cycle to check)
            encode = json.JSONEncoder(ensure_ascii=False, check_circular=False).encode
            handle.writelines(encode(r) + "\n" for r in part["sentences"])
        with outputs.open(files[f"{name}/buckets.tsv"]) as handle:
            keys = [
                "bucketing",
                "bucket",
                "metric",
                "count",
                "baseline",
                "system",
                "delta",
                "delta_ci",
                "p",
                "p_adjusted",
            ]
            handle.write("\t".join(keys) + "\n")
            for b in part["buckets"]:
                handle.write("\t".join(_tsv(b[k]) for k in keys) + "\n")
        with outputs.open(files[f"{name}/ngrams.tsv"]) as handle:
            handle.write("direction\tngram\tratio\tsystem\tbaseline\treference\n")
            for direction in ("over", "under"):
                for g in part["ngrams"][direction]:
                    handle.write(
                        f"{direction}\t{g['ngram']}\t{g['ratio']:.4f}\t{g['system']}\t{g['baseline']}\t{g['reference']}\n"
                    )
    return files


def _tsv(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}"
    if isinstance(value, list):
        return "[" + ", ".join(f"{v:.4f}" for v in value) + "]"
    return str(value)
