"""METEOR 1.5 (Denkowski & Lavie 2014) through the real jar, with per-segment
statistics so that corpus METEOR can be recomputed on resamples and shuffles.

The jar is the one PyPI's ``pycocoevalcap`` ships; it runs with ``java`` in ``-stdio``
mode, once per system: one ``SCORE ||| reference ||| hypothesis`` line per segment
gives that segment's statistics (23 numbers: test/reference length, test/reference
function words, for each of 4 stages the test/reference content/function matches,
chunks, test/reference word matches).  Summed statistics are scored with the jar's
``MeteorScorer.computeMetrics`` formula (vectorised here; the tests check it against the
jar's own corpus score):

    P = Σ_i w_i (δ·tc_i + (1−δ)·tf_i) / (δ·(T − Tf) + (1−δ)·Tf),  R likewise for the reference
    Fmean = 1 / ((1−α)/P + α/R)
    frag = 0 if everything matched in one chunk, else chunks / ((tm + rm)/2)
    (a perfectly matched segment contributes no chunks to a sum, as in the jar's aggregation)
    METEOR = 100 · max(0, Fmean · (1 − γ·frag^β))   (0 where undefined)

Default modules per language (:func:`default_modules`): English, the jar's four (``exact stem
synonym paraphrase``, weights ``1.0 0.5 0.5 0.5``); German, ``exact stem`` with weights
``1.0 0.8``, because German paraphrase tables are not obtainable here (:data:`METEOR_NOTE`,
printed with every report); every other language, the jar's own defaults for it without the
modules whose resources the jar pycocoevalcap ships lacks (it has English synonyms and
paraphrases only): ``exact stem`` where the jar has a stemmer for the language (fr, es, it,
ru, …), ``exact`` otherwise (cs, an unknown code).  The signature states the modules and
weights.  The language's parameters α β γ δ are read from the jar itself.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Sequence, Tuple

import numpy as np

from rerank.config import option
from rerank.errors import InputError
from rerank.metrics.base import METRICS, Metric, Signature
from rerank.metrics.references import References

NUM_STATS = 23
STAGES = 4
#: the modules and weights of the languages whose defaults are rerank's own (others: :func:`default_modules`)
DEFAULT_MODULES = {"de": ("exact stem", "1.0 0.8"), "en": ("exact stem synonym paraphrase", "1.0 0.5 0.5 0.5")}
METEOR_NOTE = (
    "METEOR 1.5, German: modules 'exact stem' (weights 1.0 0.8) only, because German paraphrase "
    "tables are not obtainable here; not comparable with METEOR scores that use paraphrases."
)


class MeteorUnavailable(InputError):
    """Java or the METEOR jar is missing; the message says which and how to get it."""


def find_jar() -> str:
    """Path of ``meteor-1.5.jar`` from the installed ``pycocoevalcap`` package.

    Raises:
        MeteorUnavailable: java is not on PATH or pycocoevalcap is not installed.
    """
    if shutil.which("java") is None:
        raise MeteorUnavailable("METEOR unavailable: no 'java' on PATH (install a JRE, e.g. Debian's default-jre)")
    spec = importlib.util.find_spec("pycocoevalcap")
    if spec is None or not spec.submodule_search_locations:
        raise MeteorUnavailable(
            "METEOR unavailable: the PyPI package pycocoevalcap (which ships meteor-1.5.jar) "
            "is not installed: pip install 'nbest-rerank[meteor]'"
        )
    jar = os.path.join(list(spec.submodule_search_locations)[0], "meteor", "meteor-1.5.jar")
    if not os.path.exists(jar):
        raise MeteorUnavailable("METEOR unavailable: pycocoevalcap has no meteor/meteor-1.5.jar", jar)
    return jar


def _tiny_files(tmp: str) -> Tuple[str, str]:
    for name in ("h", "r"):
        with open(os.path.join(tmp, name), "w", encoding="utf-8") as out:
            out.write("a\n")
    return os.path.join(tmp, "h"), os.path.join(tmp, "r")


@functools.lru_cache(maxsize=None)
def default_modules(jar: str, lang: str) -> Tuple[str, str]:
    """(modules, weights) for ``lang`` (module docstring): :data:`DEFAULT_MODULES`, else the
    jar's own defaults for the language less the modules it cannot run — ``paraphrase`` without
    ``data/paraphrase-LANG.gz`` beside the jar, ``synonym`` (English WordNet only) for any other
    language.

    Raises:
        MeteorUnavailable: the jar names no modules for the language.
    """
    if lang in DEFAULT_MODULES:
        return DEFAULT_MODULES[lang]
    with tempfile.TemporaryDirectory() as tmp:
        hyp, ref = _tiny_files(tmp)
        result = subprocess.run(["java", "-jar", jar, hyp, ref, "-l", lang], capture_output=True, text=True)
    modules = re.search(r"^Modules:\s+(.+)$", result.stdout, re.M)
    weights = re.search(r"^Weights:\s+(.+)$", result.stdout, re.M)
    if not modules or not weights or len(modules.group(1).split()) != len(weights.group(1).split()):
        raise MeteorUnavailable(f"METEOR unavailable: the jar names no modules for language {lang!r}", jar)
    paraphrases = os.path.join(os.path.dirname(jar), "data", f"paraphrase-{lang}.gz")
    kept = [
        (module, weight)
        for module, weight in zip(modules.group(1).split(), weights.group(1).split())
        if module in ("exact", "stem") or (module == "paraphrase" and os.path.exists(paraphrases))
    ]
    return " ".join(m for m, _ in kept), " ".join(w for _, w in kept)


@functools.lru_cache(maxsize=None)
def jar_parameters(jar: str, lang: str, modules: str, weights: str, lowercase: bool) -> Tuple[float, ...]:
    """(alpha, beta, gamma, delta) the jar uses for these options (read from its output).

    Raises:
        MeteorUnavailable: the jar cannot run them (a module without its resources for the
            language, e.g. ``stem`` for Czech), with the jar's own reason in one line.
    """
    with tempfile.TemporaryDirectory() as tmp:
        hyp, ref = _tiny_files(tmp)
        cmd = [
            "java",
            "-Xmx1G",
            "-jar",
            jar,
            hyp,
            ref,
            "-l",
            lang,
            "-m",
            modules,
            "-w",
            weights,
        ] + (["-lower"] if lowercase else [])
        result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        reason = next((line for line in result.stderr.splitlines() if "Error" in line or "Exception" in line), "")
        raise MeteorUnavailable(
            f"METEOR unavailable for language {lang!r} with modules {modules!r}: "
            f"{' '.join(reason.split())[:160] or 'the jar failed'}",
            jar,
        )
    text = result.stdout
    match = re.search(r"Parameters:\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)\s+([-\d.]+)", text)
    if not match:
        raise MeteorUnavailable("METEOR unavailable: could not read the jar's parameters", jar)
    return tuple(float(x) for x in match.groups())


@METRICS.register("meteor")
class MeteorMetric(Metric):
    """METEOR 1.5 with per-segment statistics from the jar (see the module docstring)."""

    name = "meteor"
    # the settings' types, for the type checker (declared, with defaults and help, in Config)
    lang: str
    modules: str
    weights: str
    size_column = 1  # reference words
    width = NUM_STATS

    def length_ratio(self, summed):
        return float(summed[0] / summed[1]) if summed[1] else 0.0

    @dataclass
    class Config:
        lang: str = option("", "the jar's language (parameters, stemmer): no default, --lang or lang=, e.g. de")
        lowercase: bool = option(False, "lowercase before scoring")
        modules: str = option(
            "",
            "the jar's matching modules (default: the language's that the shipped jar can run: en exact stem "
            "synonym paraphrase, de/fr/es/… exact stem, cs and others exact)",
        )
        weights: str = option("", "the modules' weights (default: the language's, e.g. 1.0 0.5 0.5 0.5)")

    def setup(self) -> None:
        if not self.lang:
            raise InputError(
                "meteor: needs the target language: --lang LANG (or meteor:lang=LANG, lang= in Python), e.g. --lang de "
                "(its stemmer, synonyms and parameters differ per language: there is no default)"
            )
        self.jar = find_jar()
        language_modules, language_weights = default_modules(self.jar, self.lang)
        self.modules = self.modules or language_modules
        self.weights = self.weights or language_weights
        self.module_weights = np.array([float(w) for w in self.weights.split()])
        self.alpha, self.beta, self.gamma, self.delta = jar_parameters(
            self.jar, self.lang, self.modules, self.weights, self.lowercase
        )

    def _command(self):
        return [
            "java",
            "-Xmx2G",
            "-jar",
            self.jar,
            "-",
            "-",
            "-stdio",
            "-l",
            self.lang,
            "-m",
            self.modules,
            "-w",
            self.weights,
        ] + (["-lower"] if self.lowercase else [])

    def stats(self, hypotheses: Sequence[str], references: References) -> np.ndarray:
        """float64[N, 23] statistics, one jar process for the whole system."""

        def clean(text: str) -> str:
            return " ".join(text.replace("|||", "| | |").split())

        # several references: the jar scores against each and keeps the best (its -stdio form
        # SCORE ||| ref 1 ||| … ||| ref R ||| hypothesis)
        streams = self.streams(references)
        lines = "".join(
            "SCORE ||| " + " ||| ".join(clean(s[i]) for s in streams) + f" ||| {clean(h)}\n"
            for i, h in enumerate(hypotheses)
        )
        result = subprocess.run(self._command(), input=lines, capture_output=True, text=True)
        rows = result.stdout.split("\n")[: len(hypotheses)]
        if result.returncode != 0 or len(rows) != len(hypotheses):
            raise MeteorUnavailable(f"METEOR jar failed: {result.stderr.strip().splitlines()[-1:]}")
        stats = np.array([[float(x) for x in row.split()] for row in rows], dtype=np.float64)
        if stats.shape[1:] != (NUM_STATS,):
            raise MeteorUnavailable(
                f"METEOR jar returned {stats.shape[1]} statistics per segment, expected {NUM_STATS}"
            )
        # The jar's aggregation adds no chunks for a perfectly matched segment (all words
        # matched in one chunk); store it that way so that plain sums reproduce the jar's
        # corpus statistics.  The segment's own score is unchanged (fragmentation 0 either way).
        stage = stats[:, 4 : 4 + 4 * STAGES].reshape(-1, STAGES, 4)
        perfect = (
            ((stage[:, :, 0] + stage[:, :, 2]).sum(1) == stats[:, 0])
            & ((stage[:, :, 1] + stage[:, :, 3]).sum(1) == stats[:, 1])
            & (stats[:, 20] == 1)
        )
        stats[perfect, 20] = 0.0
        return stats

    def jar_score(self, summed: np.ndarray) -> float:
        """The jar's own score (0-100) of one summed statistics row (``EVAL`` in -stdio mode)."""
        line = "EVAL ||| " + " ".join(repr(float(x)) for x in summed) + "\n"
        out = subprocess.run(self._command(), input=line, capture_output=True, text=True, check=True).stdout
        return 100.0 * float(out.split()[0])

    def score(self, stats: np.ndarray) -> np.ndarray:
        s = np.asarray(stats, dtype=np.float64)
        k = len(self.module_weights)
        test_len, ref_len, test_fn, ref_fn = s[..., 0], s[..., 1], s[..., 2], s[..., 3]
        stage = s[..., 4 : 4 + 4 * STAGES].reshape(s.shape[:-1] + (STAGES, 4))
        tc, rc, tf, rf = stage[..., 0], stage[..., 1], stage[..., 2], stage[..., 3]
        chunks, test_words, ref_words = s[..., 20], s[..., 21], s[..., 22]
        w, d = self.module_weights, self.delta
        test_matches = (tc[..., :k] * w * d).sum(-1) + (tf[..., :k] * w * (1 - d)).sum(-1)
        ref_matches = (rc[..., :k] * w * d).sum(-1) + (rf[..., :k] * w * (1 - d)).sum(-1)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            precision = test_matches / (d * (test_len - test_fn) + (1 - d) * test_fn)
            recall = ref_matches / (d * (ref_len - ref_fn) + (1 - d) * ref_fn)
            fmean = 1.0 / ((1 - self.alpha) / precision + self.alpha / recall)
            test_total = (tc + tf).sum(-1)
            ref_total = (rc + rf).sum(-1)
            whole = (test_total == test_len) & (ref_total == ref_len) & (chunks == 1)
            frag = np.where(whole, 0.0, chunks / ((test_words + ref_words) / 2.0))
            score = fmean * (1.0 - self.gamma * np.power(frag, self.beta))
        return 100.0 * np.where(np.isnan(score), 0.0, np.maximum(score, 0.0))

    def signature(self) -> str:
        params = " ".join(f"{x:g}" for x in (self.alpha, self.beta, self.gamma, self.delta))
        fields = [
            ("lang", self.lang),
            ("modules", self.modules),
            ("weights", self.weights),
            ("params", params),
            ("lc", self.lowercase),
        ]
        return str(Signature("meteor-1.5", fields))
