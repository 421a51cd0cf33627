"""Multi30k task 1 preparation: normalise, tokenise, lowercase, joint BPE, binarise.

The text convention follows the official Multi30k ``lc.norm.tok`` files: Moses
punctuation normalisation, Moses tokenisation (sacremoses, no XML escaping) and
lowercasing.  :func:`preprocess_lines` is *the* text convention of the project: the
embedding features use it too, so hypotheses and training text share one vocabulary.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import urllib.request
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from rerank.errors import InputError
from rerank.nmt.checkpoints import fairseq_environ, run_fairseq
from rerank.nmt.subword import SUBWORD_FILES, learn_subwords, make_bpe, require
from rerank.outputs import atomic_write, staged_directory
from rerank.progress import progress_bar
from rerank.signature import write_signed
from rerank.textio import count_lines, read_json, read_lines

#: public location of the Multi30k files, used when no local copy is given
MULTI30K_BASE = "https://github.com/multi30k/dataset/raw/master/data/"

#: our split name -> (Multi30k raw file stem, fairseq split name)
SPLITS = {"train": ("train", "train"), "val": ("val", "valid"), "test_2016_flickr": ("test_2016_flickr", "test")}


@dataclass
class PrepareConfig:
    """Settings of :func:`prepare`; serialised into ``prepare.json``."""

    src: str = "en"
    tgt: str = "de"
    bpe_merges: int = 10000
    bpe_min_frequency: int = 2
    #: the subword step learned on both sides' training text (:mod:`rerank.nmt.subword`):
    #: ``subword-nmt`` (``bpe_merges`` merges, the paper's) or ``sentencepiece``
    subword: str = "subword-nmt"
    #: the SentencePiece vocabulary's size (at most; ``subword="sentencepiece"``)
    spm_vocab: int = 8000
    splits: List[str] = field(default_factory=lambda: list(SPLITS))
    #: a corpus of one's own: {split: [source file, target file]} for every split (plain or
    #: .gz, one sentence per line, line-aligned); empty: Multi30k's task 1 files
    files: Dict[str, List[str]] = field(default_factory=dict)
    #: lowercase the tokenised text (Multi30k's ``lc.norm.tok`` protocol, the paper's); False
    #: keeps the case (what a corpus of one's own usually wants)
    lowercase: bool = True


def own_corpus(config: PrepareConfig) -> Dict[str, Tuple[str, str]]:
    """{split: (source file, target file)} of ``config.files``, checked before any work.

    Raises:
        InputError: a split without its pair or one that is not a split, a missing file,
            a pair whose line counts differ (naming both), an empty training pair.
    """
    unknown = sorted(set(config.files) - set(config.splits))
    missing = [s for s in config.splits if s not in config.files]
    if unknown or missing:
        raise InputError(
            f"a corpus of one's own gives every split as SRC_FILE,TGT_FILE ({', '.join(config.splits)}): "
            + (f"{unknown[0]!r} is not a split" if unknown else f"{missing[0]} is missing")
        )
    pairs = {}
    for split in config.splits:
        pair = config.files[split]
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 or not all(isinstance(p, str) and p for p in pair):
            raise InputError(f"{split}: expected two files, SRC_FILE,TGT_FILE, not {str(pair)[:120]}")
        if os.path.exists(pair[0]) and os.path.exists(pair[1]) and os.path.samefile(pair[0], pair[1]):
            raise InputError(f"{split}: the same file is given as source and target ({pair[1]})", pair[0])
        counts = [count_lines(path) for path in pair]
        if counts[0] != counts[1]:
            raise InputError(f"{counts[0]} lines here but {counts[1]} in {pair[1]}: not line-aligned", pair[0])
        if split == "train" and not counts[0]:
            raise InputError("the training corpus is empty", pair[0])
        pairs[split] = (pair[0], pair[1])
    return pairs


def preprocess_lines(
    lines: Iterable[str], lang: str, progress: Optional[str] = None, lowercase: bool = True
) -> List[str]:
    """Moses-normalise, Moses-tokenise (no escaping) and lowercase each line.

    Args:
        lines: raw sentences, one per item (trailing newlines are stripped).
        lang: ISO code given to the Moses normaliser and tokeniser ("en", "de", ...).
        progress: if given, a tqdm progress bar with this description.
        lowercase: False keeps the case (:attr:`PrepareConfig.lowercase`).
    Returns:
        list of tokenised (lowercased) strings, tokens separated by single spaces.
    """
    from sacremoses import MosesPunctNormalizer, MosesTokenizer

    normaliser, tokeniser = MosesPunctNormalizer(lang=lang), MosesTokenizer(lang=lang)
    items = lines
    if progress:
        items = progress_bar(lines, desc=progress, unit="sent")
    out = []
    for line in items:
        text = normaliser.normalize(line.rstrip("\n"))
        tokens = tokeniser.tokenize(text, escape=False, return_str=True)
        out.append(tokens.lower() if lowercase else tokens)
    return out


#: a language code as the Moses tokeniser and Multi30k's file names take it (ISO 639-1/2)
LANGUAGE = re.compile(r"[a-z]{2,3}")


def check_languages(src: str, tgt: str) -> None:
    """Raise :class:`InputError` unless ``src`` and ``tgt`` are two different language codes
    (``en``, ``de``, ``fr``, ``cs``…)."""
    for name, lang in (("source", src), ("target", tgt)):
        if not isinstance(lang, str) or not LANGUAGE.fullmatch(lang):
            raise InputError(f"{name} language {lang!r}: expected a language code such as en, de, fr, cs")
    if src == tgt:
        raise InputError(f"source and target language are both {src}")


def prepared_languages(path: str) -> Tuple[str, str]:
    """(source, target) language of a ``rerank nmt prepare`` directory or of its ``bin/``
    (its ``prepare.json``); ``("en", "de")`` for data without one or without languages in it
    (prepared before languages were a setting, or binarised by fairseq-preprocess directly).

    Raises:
        InputError: a prepare.json whose languages are not language codes.
    """
    meta, config = _prepared_config(path)
    if not config or not ({"src", "tgt"} & set(config)):
        return "en", "de"  # a record without languages: prepared before they were a setting
    src, tgt = config.get("src"), config.get("tgt")
    try:
        check_languages(src, tgt)  # type: ignore[arg-type]
    except InputError as error:
        raise InputError(error.message, meta) from None
    return src, tgt  # type: ignore[return-value]


def prepared_lowercase(path: str) -> bool:
    """Whether the text of a ``rerank nmt prepare`` directory (or of its ``bin/``) was
    lowercased (:attr:`PrepareConfig.lowercase`); True for data prepared before it was a
    setting or without a ``prepare.json``.

    Raises:
        InputError: a ``lowercase`` that is not true or false.
    """
    meta, config = _prepared_config(path)
    value = (config or {}).get("lowercase", True)
    if not isinstance(value, bool):
        raise InputError(f"config.lowercase is {value!r}, not true or false", meta)
    return value


def _prepared_config(path: str) -> Tuple[str, Optional[Dict[str, Any]]]:
    """(its prepare.json, the ``config`` recorded there) of a prepare directory or its
    ``bin/``; ("", None) where there is no prepare.json or no config in it."""
    for directory in (path, os.path.dirname(os.path.abspath(path).rstrip(os.sep))):
        meta = os.path.join(directory, "prepare.json")
        if os.path.isfile(meta):
            record = read_json(meta)
            config = record.get("config") if isinstance(record, dict) else None
            return meta, config if isinstance(config, dict) else None
    return "", None


def multi30k_files(task2: bool = False, languages: Sequence[str] = ("en", "de")) -> List[str]:
    """Paths (relative to a Multi30k ``data`` directory) that the pipeline reads: task 1's
    raw files of ``languages`` and, with ``task2``, task 2's five descriptions per language
    (en, de) and the image-split files of both tasks."""
    files = [f"task1/raw/{stem}.{lang}.gz" for stem, _ in SPLITS.values() for lang in languages]
    if task2:
        files += [f"task1/image_splits/{stem}.txt" for stem, _ in SPLITS.values()]
        files += [
            f"task2/raw/{split}.{k}.{lang}.gz"
            for split in ("train", "val", "test_2016")
            for k in range(1, 6)
            for lang in ("en", "de")
        ]
        files += [f"task2/image_splits/{split}_images.txt" for split in ("train", "val", "test_2016")]
    return files


def resolve_data_dir(
    data_dir: Optional[str],
    cache_dir: str,
    task2: bool = False,
    task1: bool = True,
    languages: Sequence[str] = ("en", "de"),
) -> str:
    """Return a directory holding the files of :func:`multi30k_files`.

    ``data_dir`` if given (it must hold them; the library assumes no location: the main job's
    settings choose a local copy, workflow/settings/), else the files are downloaded from the public multi30k/dataset repository into
    ``cache_dir`` (each file once; an interrupted download leaves no partial file).
    ``task1=False`` with ``task2`` accepts a given directory that holds only task 2.
    Raises :class:`InputError` if a given directory lacks the task directories.
    """
    needed = (["task1/raw"] if task1 else []) + (["task2/raw", "task2/image_splits"] if task2 else [])
    if data_dir is not None:
        for d in needed:
            if not os.path.isdir(os.path.join(data_dir, d)):
                raise InputError(f"no {d} directory: not a Multi30k copy", data_dir)
        return data_dir
    for rel in multi30k_files(task2, languages):
        target = os.path.join(cache_dir, rel)
        if not os.path.exists(target):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            url = MULTI30K_BASE + rel
            print(f"downloading {url}", file=sys.stderr)
            with urllib.request.urlopen(url, timeout=60) as response, atomic_write(target, "wb") as out:
                shutil.copyfileobj(response, out)
    return cache_dir


def raw_path(data_dir: str, stem: str, lang: str) -> str:
    """The path of ``task1/raw/{stem}.{lang}.gz`` (or the uncompressed file).

    Raises:
        InputError: the file is missing (neither ``.gz`` nor plain), naming the language.
    """
    path = os.path.join(data_dir, "task1", "raw", f"{stem}.{lang}")
    for candidate in (path + ".gz", path):
        if os.path.exists(candidate):
            return candidate
    raise InputError(f"missing Multi30k file of language {lang} (neither .gz nor plain)", path)


def read_raw(data_dir: str, stem: str, lang: str) -> List[str]:
    """Read ``task1/raw/{stem}.{lang}.gz`` (or the uncompressed file) as a list of lines.

    Raises:
        InputError: the file is missing (neither ``.gz`` nor plain).
    """
    return read_lines(raw_path(data_dir, stem, lang))


def _write_lines(path: str, lines: Iterable[str]) -> None:
    with atomic_write(path) as out:
        for line in lines:
            out.write(line + "\n")


def _say(text: str) -> None:
    """One line on stderr naming a phase of :func:`prepare` before it starts, with its estimate."""
    print(f"prepare: {text}", file=sys.stderr, flush=True)


def fairseq_preprocess(destdir: str, options: List[str], workers: int = 1, quiet: bool = False) -> None:
    """Run fairseq-preprocess (``python -m fairseq_cli.preprocess``, fairseq's environment)
    writing to ``destdir`` with ``options`` (languages, prefixes, dictionaries) and ``workers``;
    ``quiet``: its output discarded.

    Raises:
        subprocess.CalledProcessError: fairseq-preprocess failed."""
    command = [
        sys.executable,
        "-m",
        "fairseq_cli.preprocess",
        *options,
        "--destdir",
        destdir,
        "--workers",
        str(workers),
    ]
    output = subprocess.DEVNULL if quiet else None
    done = run_fairseq(command, fairseq_environ(), stdout=output, stderr=output)
    if done.returncode:
        raise subprocess.CalledProcessError(done.returncode, command)


def prepare(data_dir: Optional[str], out_dir: str, config: PrepareConfig = PrepareConfig(), workers: int = 2) -> str:
    """Prepare Multi30k task 1 for fairseq in the direction ``config.src`` → ``config.tgt``
    (any pair of its languages, either way), or a corpus of one's own (``config.files``:
    a source and a target file per split, :func:`own_corpus`); returns the binarised data
    directory.  The Moses tokeniser follows each side's language.

    Writes ``out_dir/tok/{split}.{lang}`` (tokenised, lowercased unless
    ``config.lowercase`` is False: the references of
    evaluation), the subword step learned on both sides' training text (``out_dir/bpe.codes``,
    or ``out_dir/spm.model`` with ``config.subword`` ``sentencepiece``:
    :func:`rerank.nmt.subword.learn_subwords`), ``out_dir/bpe/{split}.{lang}`` (the
    subwords), ``out_dir/bin`` (fairseq-preprocess output) and ``out_dir/prepare.json``
    (signature).  Each step is skipped when its output exists.

    Raises:
        InputError: languages that are not two different codes, an unknown subword step or
            an ``out_dir`` prepared with the other one, a missing file, files of a split whose
            line counts differ (all before any work).
    """
    check_languages(config.src, config.tgt)
    if config.subword not in SUBWORD_FILES:
        raise InputError(f"unknown subword step {config.subword!r}: expected {' or '.join(SUBWORD_FILES)}")
    for kind, name in SUBWORD_FILES.items():  # its steps are skipped where their outputs exist
        if kind != config.subword and os.path.exists(os.path.join(out_dir, name)):
            raise InputError(
                f"holds {name}, prepared with {kind}: prepare --subword {config.subword} into a new directory", out_dir
            )
    require(config.subword)  # its package, before any work
    own = own_corpus(config) if config.files else None  # every file checked before any work
    if own is None:
        data_dir = resolve_data_dir(data_dir, os.path.join(out_dir, "download"), languages=(config.src, config.tgt))
        for split in config.splits:
            for lang in (config.src, config.tgt):
                raw_path(data_dir, SPLITS[split][0], lang)
    tok_dir, bpe_dir, bin_dir = (os.path.join(out_dir, d) for d in ("tok", "bpe", "bin"))
    os.makedirs(tok_dir, exist_ok=True)
    os.makedirs(bpe_dir, exist_ok=True)
    for split in config.splits:
        stem = SPLITS[split][0]
        counts = {}
        for side, lang in enumerate((config.src, config.tgt)):
            path = os.path.join(tok_dir, f"{split}.{lang}")
            if not os.path.exists(path):
                raw = read_lines(own[split][side]) if own else read_raw(str(data_dir), stem, lang)
                tokenised = preprocess_lines(raw, lang, f"tokenise {split}.{lang}", lowercase=config.lowercase)
                _write_lines(path, tokenised)
            with open(path, encoding="utf-8") as handle:
                counts[lang] = sum(1 for _ in handle)
        if counts[config.src] != counts[config.tgt]:
            raise InputError(
                f"{counts[config.src]} {config.src} lines but {counts[config.tgt]} {config.tgt} lines", stem
            )

    codes = f"{config.subword}:{os.path.join(out_dir, SUBWORD_FILES[config.subword])}"
    if not os.path.exists(codes.partition(":")[2]):
        joint: List[str] = []
        for lang in (config.src, config.tgt):
            with open(os.path.join(tok_dir, f"train.{lang}"), encoding="utf-8") as handle:
                joint.extend(handle)
        size = config.spm_vocab if config.subword == "sentencepiece" else config.bpe_merges
        _say(
            f"learning the subword step ({config.subword}, {size:,} "
            f"{'pieces' if config.subword == 'sentencepiece' else 'merges'}) on {len(joint):,} training lines "
            f"(about {max(1, round(len(joint) / 4000))} s on one core)"
        )
        learn_subwords(config.subword, joint, out_dir, size, config.bpe_min_frequency)
    bpe = make_bpe(codes, out_dir)
    for split in config.splits:
        for lang in (config.src, config.tgt):
            path = os.path.join(bpe_dir, f"{split}.{lang}")
            if not os.path.exists(path):
                _say(f"applying the subword step to {split}.{lang} (seconds per 10,000 lines)")
                with open(os.path.join(tok_dir, f"{split}.{lang}"), encoding="utf-8") as handle:
                    _write_lines(path, (bpe.process_line(line.rstrip("\n")) for line in handle))

    if not os.path.exists(os.path.join(bin_dir, "preprocess.done")):
        prefixes = {SPLITS[s][1]: os.path.join(bpe_dir, s) for s in config.splits}
        with staged_directory(bin_dir) as tmp_bin:
            options = ["--source-lang", config.src, "--target-lang", config.tgt, "--trainpref", prefixes["train"]]
            options.append("--joined-dictionary")
            if "valid" in prefixes:
                options += ["--validpref", prefixes["valid"]]
            if "test" in prefixes:
                options += ["--testpref", prefixes["test"]]
            _say(f"binarising {', '.join(config.splits)} with fairseq-preprocess (seconds per 10,000 lines)")
            fairseq_preprocess(tmp_bin, options, workers)
            open(os.path.join(tmp_bin, "preprocess.done"), "w").close()
    write_signed(
        os.path.join(out_dir, "prepare.json"),
        {"config": asdict(config), "data_dir": os.path.abspath(data_dir) if own is None and data_dir else None},
        ["sacremoses", "sentencepiece" if config.subword == "sentencepiece" else "subword-nmt", "fairseq-fixed"],
    )
    return bin_dir
