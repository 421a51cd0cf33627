"""Reliability round 5 (issue 92): each class of failure found by a hostile user, with its
variants, fixed at its root."""

import os

import pytest
from conftest import one_line_error

from rerank.cli import main

NBEST = "0 ||| ein mann ||| NMT= -1.0 ||| -1.0\n0 ||| ein hund ||| NMT= -2.0 ||| -2.0\n"


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- class 2: every file a verb reads is guarded, wherever it is named ---------------------------


@pytest.mark.parametrize(
    "victim",
    ["prompt", "config"],
)
def test_generate_never_replaces_the_prompt_template_or_the_model(tmp_path, capsys, victim):
    model = tmp_path / "lm"
    model.mkdir()
    config = _write(model / "config.json", "{}")
    prompt = _write(tmp_path / "prompt.txt", "Translate: {source}\n")
    source = _write(tmp_path / "src.en", "a man\n")
    target = {"prompt": prompt, "config": config}[victim]
    before = open(target).read()
    argv = ["generate", "--model", f"hf-lm:{model},prompt={prompt}", "--input", source, "--nbest", "2"]
    argv += ["--out-nbest", str(tmp_path / "o.nbest"), "--out-1best", target]
    assert main(argv) == 1
    one_line_error(capsys, "--out-1best is the same file as input", "refusing to overwrite")
    assert open(target).read() == before
    assert not (tmp_path / "o.nbest").exists()


@pytest.mark.parametrize("out", ["source", "ref"])
def test_mbr_never_replaces_a_file_its_prefilter_names(tmp_path, capsys, out):
    nbest = _write(tmp_path / "c.nbest", NBEST)
    source = _write(tmp_path / "src.en", "a man\n")
    other = _write(tmp_path / "other.txt", "x\n")
    target = {"source": source, "ref": other}[out]
    stage = f"mbr:comet:{tmp_path / 'comet'},source={source},top_k=1" if out == "source" else "column:NMT,top_k=1"
    argv = ["mbr", "--nbest", nbest, "--prefilter", stage, "--metric", "chrf", "--out", target]
    if out == "ref":  # the metric's own file, through --metric
        argv[argv.index("chrf")] = f"comet:{tmp_path / 'comet'},source={other}"
    assert main(argv) == 1
    one_line_error(capsys, "--out is the same file as input", "refusing to overwrite")
    assert open(target).read() in ("a man\n", "x\n")


@pytest.mark.parametrize(
    "script, argv",
    [
        ("bench_mbr_recipes.py", ["--nbest", "{nbest}", "--out", "{nbest}"]),
        ("bench_mbr_recipes.py", ["--nbest", "{nbest}", "--metric", "comet:{dir},source={src}", "--out", "{src}"]),
        ("bench_mbr_recipes.py", ["--nbest", "{missing}", "--out", "{new}"]),
        ("bench_mbr_lowrank.py", ["--data", "{missing}"]),
        ("bench_mbrs.py", ["--engine", "rerank", "--nbest", "{nbest}", "--out", "{nbest}"]),
        ("bench_shards.py", ["--job", "{missing}"]),
        ("bench_mira.py", ["--tune-nbest", "{missing}"]),
    ],
)
def test_benchmarks_guard_their_inputs(tmp_path, script, argv):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    values = {
        "nbest": _write(tmp_path / "c.nbest", NBEST),
        "src": _write(tmp_path / "src.en", "a man\n"),
        "dir": str(tmp_path),
        "missing": str(tmp_path / "missing"),
        "new": str(tmp_path / "new.json"),
    }
    before = {name: open(values[name]).read() for name in ("nbest", "src")}
    run = subprocess.run(
        [sys.executable, os.path.join(root, "benchmarks", script)] + [a.format(**values) for a in argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 1, run.stderr
    err = run.stderr.strip()
    assert err.count("\n") == 0 and f"{script}: error: " in err, err
    assert ("refusing to overwrite" in err) or ("no such file or directory" in err and values["missing"] in err), err
    assert {name: open(values[name]).read() for name in ("nbest", "src")} == before
    assert not os.path.exists(values["new"])


# -- class 3: a Ctrl-C inside a commit waits for it; an old directory is never swept -------------


@pytest.fixture
def python_sigint():
    """SIGINT with Python's own handler (KeyboardInterrupt) for the test, the previous one after:
    a process started in the background by a non-interactive shell inherits SIGINT ignored, and
    would never see the tests' Ctrl-C."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _interrupt_on_replace(monkeypatch, which: int):
    """os.replace sends SIGINT to the process on its ``which``-th call (1-based), then renames."""
    import signal

    real_replace, calls = os.replace, []

    def replace(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == which:
            signal.raise_signal(signal.SIGINT)
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    return calls


@pytest.mark.parametrize("which", [1, 2])
def test_a_ctrl_c_inside_a_directory_commit_waits_for_it(tmp_path, monkeypatch, which, python_sigint):
    from rerank.outputs import staged_directory

    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("old")
    calls = _interrupt_on_replace(monkeypatch, which)
    with pytest.raises(KeyboardInterrupt):
        with staged_directory(str(target)) as tmp:
            with open(os.path.join(tmp, "new.txt"), "w") as handle:
                handle.write("new")
    assert len(calls) == 2  # both renames ran: old aside, new in place
    assert sorted(os.listdir(target)) == ["new.txt"]
    assert [name for name in os.listdir(tmp_path) if name != "model"] == []  # nothing aside is left


def test_an_old_directory_moved_aside_is_never_swept_and_comes_back(tmp_path):
    """A run killed between moving the old directory aside and putting the new one in place:
    the next write in that folder leaves the only copy alone, the next write of the directory
    (failed or not) puts it back first."""
    from rerank.outputs import PREVIOUS_SUFFIX, atomic_write, staged_directory

    aside = tmp_path / f".model.abcd1234{PREVIOUS_SUFFIX}"
    aside.mkdir()
    (aside / "weights.bin").write_text("the only copy")
    with atomic_write(str(tmp_path / "other.txt")) as handle:  # swept stale temporaries before round 5
        handle.write("x")
    assert (aside / "weights.bin").read_text() == "the only copy"
    with pytest.raises(RuntimeError):
        with staged_directory(str(tmp_path / "model")):
            raise RuntimeError("the new model failed")
    assert (tmp_path / "model" / "weights.bin").read_text() == "the only copy"
    assert not aside.exists()


@pytest.mark.parametrize("which", [1, 2])
def test_a_ctrl_c_inside_a_list_commit_leaves_the_list_and_its_signature_together(
    tmp_path, monkeypatch, which, python_sigint
):
    from rerank.outputs import StagedOutputs

    nbest, side = tmp_path / "a.nbest", tmp_path / "a.nbest.json"
    nbest.write_text("old list\n")
    side.write_text('{"old": true}\n')
    _interrupt_on_replace(monkeypatch, which)
    with pytest.raises(KeyboardInterrupt):
        with StagedOutputs() as staged:
            with staged.open(str(nbest)) as handle:
                handle.write("new list\n")
            with staged.open(str(side)) as handle:
                handle.write('{"new": true}\n')
    assert (nbest.read_text(), side.read_text()) == ("new list\n", '{"new": true}\n')


# -- class 7: staged directories get the permissions mkdir gives ---------------------------------


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_a_staged_directory_has_the_mode_mkdir_gives(tmp_path, umask):
    from rerank.outputs import staged_directory

    previous = os.umask(umask)
    try:
        with staged_directory(str(tmp_path / "new")) as tmp:
            open(os.path.join(tmp, "f"), "w").close()
        os.mkdir(tmp_path / "plain")
    finally:
        os.umask(previous)
    assert oct(os.stat(tmp_path / "new").st_mode & 0o777) == oct(os.stat(tmp_path / "plain").st_mode & 0o777)
    os.chmod(tmp_path / "new", 0o750)  # a replaced directory keeps the mode it had
    with staged_directory(str(tmp_path / "new")) as tmp:
        open(os.path.join(tmp, "g"), "w").close()
    assert os.stat(tmp_path / "new").st_mode & 0o777 == 0o750


# -- class 5: MBR's outputs and pseudo-references ------------------------------------------------


def _list(path, segments):
    lines = [f"{s} ||| {h} ||| NMT= {-i:.1f} ||| 0\n" for s, hyps in enumerate(segments) for i, h in enumerate(hyps)]
    return _write(path, "".join(lines))


def _signed(path, record):
    import json

    (path.parent / (path.name + ".json")).write_text(json.dumps(record))


@pytest.mark.parametrize("other", ["--matrix", "--out-kbest"])
def test_mbr_json_and_an_output_to_standard_output_are_refused(tmp_path, capsys, other):
    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"], ["d e", "d"]])
    argv = ["mbr", "--nbest", nbest, "--metric", "chrf", "--json"]
    for case in (["--out", "-"], ["--out", str(tmp_path / "o"), other, "-"]):
        assert main(argv + case) == 1
        one_line_error(capsys, "'-' (standard output) given for both")
        assert capsys.readouterr().out == ""


def test_mbr_refuses_pseudo_references_of_other_sentences(tmp_path, capsys):
    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"], ["d e", "d"]])
    refs = _list(tmp_path / "r.nbest", [["a b", "a b c"], ["d e", "e"]])
    _signed(tmp_path / "c.nbest", {"input": "test.en", "input_sha256": "1" * 64})
    _signed(tmp_path / "r.nbest", {"input": "val.en", "input_sha256": "2" * 64})
    out = tmp_path / "o"
    assert main(["mbr", "--nbest", nbest, "--pseudo-refs", refs, "--feature", "uniform", "--out", str(out)]) == 1
    one_line_error(capsys, "r.nbest", "generated from other sentences (val.en) than the candidates (test.en)")
    assert not out.exists()
    _signed(tmp_path / "r.nbest", {"input": "copy-of-test.en", "input_sha256": "1" * 64})  # the same sentences
    assert main(["mbr", "--nbest", nbest, "--pseudo-refs", refs, "--feature", "uniform", "--out", str(out)]) == 0


def test_mbr_outputs_never_sit_beside_an_earlier_runs_signature(tmp_path):
    import json

    nbest = _list(tmp_path / "c.nbest", [["a b", "a c", "a b c"], ["d e", "d", "d e f"]])
    out, kbest = tmp_path / "o", tmp_path / "k.nbest"
    for path in (out, kbest):
        _signed(path, {"stale": True})
    argv = ["mbr", "--nbest", nbest, "--metric", "chrf", "--feature", "uniform", "--out", str(out)]
    assert main(argv + ["--out-kbest", str(kbest), "--keep", "2"]) == 0
    assert not (tmp_path / "o.json").exists()  # plain selections: the stale signature is gone
    record = json.loads((tmp_path / "k.nbest.json").read_text())  # the K-best list is signed by this run
    assert "stale" not in record and record["kbest"] == {"keep": 2, "diversity": 0.0}
    assert record["mbr"]["metric"] == "chrf" and record["segments"] == 2


# -- class 6: the Python API is as strict as the command line (one validation path) ------------


@pytest.mark.parametrize(
    "settings, needle",
    [
        ({"temperature": -1}, "temperature must be at least"),
        ({"temperature": float("nan")}, "temperature must be a finite number"),
        ({"temperature": "0.5"}, "temperature must be a finite number"),
        ({"algorithm": "lowrank", "iterations": 0}, "iterations=0: '0' is not a positive integer"),
        ({"algorithm": "lowrank", "regularization": -1.0}, "regularization=-1.0"),
        ({"algorithm": "lowrank", "regularization": 1e-300}, "regularization=1e-300"),
        ({"algorithm": "centroid", "clusters": -2}, "clusters=-2: '-2' is not a positive integer"),
        ({"algorithm": "pruned", "alpha": "x"}, "alpha='x' is not a number"),
        ({"algorithm": "pruned", "seed": -1}, "is not a seed"),
        ({"algorithm": "halving", "seed": 2**40}, "is not a seed"),
    ],
)
def test_mbr_decode_refuses_what_the_command_line_refuses(tmp_path, settings, needle):
    import rerank
    from rerank.errors import InputError

    nbest = rerank.read_nbest(_list(tmp_path / "c.nbest", [["a b", "a c", "b c"]]))
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace("+", r"\+")):
        rerank.mbr_decode(nbest, **settings)


@pytest.mark.parametrize("field, value", [("seed", -1), ("iterations", -1), ("neighbors", 0), ("draws", "x")])
def test_the_apis_local_search_is_range_checked(tmp_path, field, value):
    import rerank
    from rerank.errors import InputError
    from rerank.mbr.kbest import LocalSearch

    nbest = rerank.read_nbest(_list(tmp_path / "c.nbest", [["a b", "a c", "b c"]]))
    with pytest.raises(InputError, match=field):
        rerank.mbr_decode(nbest, keep=2, diversity=0.5, local_search=LocalSearch(**{field: value}))


@pytest.mark.parametrize("text", ["a man\nwalks", "a man\r", "\n"])
def test_the_apis_texts_are_one_line_each(text):
    import rerank
    from rerank.errors import InputError

    with pytest.raises(InputError, match=r"sources\[1\] holds a line break"):
        rerank.generate("hf:does-not-matter", ["first", text, "third"], 2)


# -- class 7/8: bounds on every seed and temperature, on the command line and in specs -----------


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["tune", "--seed", "-1"], "is not a seed"),
        (["tune", "--seed", "99999999999999999999999"], "is too large"),
        (["signif", "--seed", "-5"], "is not a seed"),
        (["folds", "--seed", "4294967296"], "is not a seed"),
        (["mbr", "--algorithm", "pruned", "--seed", "-1"], "is not a seed"),
        (["mbr", "--local-search-seed", "-1"], "is not a seed"),
        (["mbr", "--algorithm", "lowrank", "--regularization", "1e-300"], "is not a finite number ≥ 1e-06"),
        (["mbr", "--temperature", "1e-300"], "is not a temperature"),
    ],
)
def test_seeds_and_temperatures_are_bounded_on_the_command_line(capsys, argv, needle):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize(
    "text, needle",
    [
        ("seed=-1", "seed must be an integer from 0"),
        ("seed=4294967296", "seed must be an integer from 0"),
        ("temperature=1e-300", "temperature must be a finite number ≥ 0.0001"),
    ],
)
def test_sampling_seeds_and_temperatures_are_bounded(text, needle):
    from rerank.errors import InputError
    from rerank.features.sampling import Sampling

    with pytest.raises(InputError, match=needle):
        Sampling.parse(text)


# -- class 10: shard merges trust nothing their side files say ------------------------------------


def _mbr_shards(tmp_path):
    import json

    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"], ["d e", "d"], ["x", "x y"]])
    for k in (0, 1):
        argv = ["mbr", "--nbest", nbest, "--metric", "chrf", "--num-shards", "2", "--shard-id", str(k)]
        assert main(argv + ["--out", str(tmp_path / f"o.{k}")]) == 0
    return [json.loads((tmp_path / f"o.{k}.json").read_text()) for k in (0, 1)]


@pytest.mark.parametrize(
    "tamper, needle",
    [
        (lambda r: r.update(system="sha256:" + "1" * 64), "other system than"),
        (lambda r: r.update(tokenized=True), "other tokenized than"),
        (lambda r: r["mbr"].update(metric="bleu"), "other mbr than"),
        (lambda r: r["shard"].update(id=True), "'id' must be a whole number"),
        (lambda r: r["shard"].update(first=0), "starts at segment 0"),
        (lambda r: r["shard"].update(input_sha256="0" * 64), "another input than"),
        (lambda r: r["shard"].update(of=3), "another number of shards"),
        (lambda r: r["shard"].pop("last"), "shard record is incomplete"),
        ("segments-5000-digits", "not a JSON rerank reads"),
        ("nested-100000", "nested too deeply"),
        ("not-utf8", "not UTF-8"),
    ],
)
def test_a_merge_refuses_every_shard_its_side_file_does_not_vouch_for(tmp_path, capsys, tamper, needle):
    import json

    records = _mbr_shards(tmp_path)
    side = tmp_path / "o.1.json"
    if callable(tamper):
        for record in records:  # the setting present in both shards, different in the second
            if needle.startswith("other system") or needle.startswith("other tokenized"):
                record.setdefault("system", "sha256:" + "0" * 64)
                record.setdefault("tokenized", False)
        (tmp_path / "o.0.json").write_text(json.dumps(records[0]))
        tamper(records[1])
        side.write_text(json.dumps(records[1]))
    elif tamper == "segments-5000-digits":
        side.write_text(json.dumps(records[1]).replace('"segments": 3', '"segments": ' + "9" * 5000, 1))
    elif tamper == "nested-100000":
        side.write_text(json.dumps({**records[1], "stages": None}).replace("null", "[" * 100000 + "]" * 100000))
    else:
        side.write_bytes(json.dumps(records[1]).encode().replace(b'"chrf"', b'"chr\xff"'))
    capsys.readouterr()
    assert main(["merge", str(tmp_path / "o.0"), str(tmp_path / "o.1"), "--out", str(tmp_path / "merged")]) == 1
    one_line_error(capsys, needle)
    assert not (tmp_path / "merged").exists()


# -- class 8: counting a corpus never holds a line whole -------------------------------------------


def test_counting_a_one_line_gigabyte_corpus_holds_chunks_not_the_line(tmp_path):
    """A 1 GB one-line gzip was a MemoryError; the count streams chunks: on a 24 MB one-line
    gzip the peak of Python's allocations stays a few chunks (tracemalloc), not the line."""
    import gzip
    import tracemalloc

    from rerank.textio import count_lines

    path = tmp_path / "one-line.gz"
    with gzip.open(path, "wb", compresslevel=1) as handle:
        for _ in range(24):
            handle.write(b"ab " * (1 << 18) + b"c" * (1 << 18))  # 1 MiB, no newline
    tracemalloc.start()
    try:
        assert count_lines(str(path)) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 12 << 20, peak


@pytest.mark.parametrize(
    "data, lines, bad_line",
    [
        (b"a\nb\n", 2, None),
        (b"a\nb", 2, None),
        (b"", 0, None),
        (b"a\r\nb\r", 2, None),
        (b"a\rb\n", None, 1),
        (b"a\n\r\nx\rq", None, 3),
        (b"a" * ((1 << 20) - 1) + b"\r\nrest\n", 2, None),  # CR LF across the chunk boundary
        (b"a" * ((1 << 20) - 1) + b"\rxrest\n", None, 1),
    ],
)
def test_line_counts_and_inner_carriage_returns_across_chunks(tmp_path, data, lines, bad_line):
    from rerank.errors import InputError
    from rerank.textio import count_lines

    path = tmp_path / "corpus.txt"
    path.write_bytes(data)
    if bad_line is None:
        assert count_lines(str(path)) == lines
    else:
        with pytest.raises(InputError, match="a carriage return inside the line") as raised:
            count_lines(str(path))
        assert raised.value.line == bad_line


def test_a_ctrl_c_reaches_rerank_not_the_fairseq_child(tmp_path):
    """fairseq-preprocess printed its own KeyboardInterrupt traceback on a Ctrl-C during ``nmt
    prepare``: a fairseq child runs in a session of its own (:func:`run_fairseq`), the terminal's
    SIGINT reaches rerank only, which kills the child's group and reports one line."""
    import signal
    import subprocess
    import sys
    import time

    child = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    parent = (
        "import os, sys\n"
        "from rerank.nmt.checkpoints import run_fairseq\n"
        "try:\n"
        f"    run_fairseq([sys.executable, '-c', {child!r}, sys.argv[1]], dict(os.environ))\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted; no output was written', file=sys.stderr)\n"
        "    sys.exit(130)\n"
    )
    pid_file = tmp_path / "child.pid"
    run = subprocess.Popen(
        [sys.executable, "-c", parent, str(pid_file)],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        # a terminal's default, also where this test runs in the background of a shell (SIGINT ignored)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    os.killpg(run.pid, signal.SIGINT)  # what the terminal does: the foreground group
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130 and err.strip() == "interrupted; no output was written", err
    child_pid = int(pid_file.read_text())
    for _ in range(100):
        try:
            os.kill(child_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the fairseq child outlived the interrupt")


@pytest.mark.parametrize("out", ["afile", "afile/sub"])
def test_tiny_checkpoints_given_a_file_as_out_says_so(tmp_path, out):
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    (tmp_path / "afile").write_text("keep me\n")
    run = subprocess.run(
        [sys.executable, os.path.join(root, "scripts", "tiny_checkpoints.py"), str(tmp_path / out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1 and run.stderr.count("\n") == 1 and "tiny_checkpoints: error: " in run.stderr
    assert (tmp_path / "afile").read_text() == "keep me\n"


# -- class 9: messages name the right thing --------------------------------------------------------


def test_missing_weights_column_names_the_pseudo_references_list(tmp_path, capsys):
    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"]])
    refs = _write(tmp_path / "r.nbest", "0 ||| a b ||| Other= -1 ||| 0\n0 ||| a ||| Other= -2 ||| 0\n")
    argv = ["mbr", "--nbest", nbest, "--pseudo-refs", refs, "--feature", "NMT", "--out", str(tmp_path / "o")]
    assert main(argv) == 1
    one_line_error(capsys, f"{refs}: mbr: the list of pseudo-references has no 'NMT' column", "--feature COLUMN")


def test_the_api_names_its_argument_not_a_temporary_file(tmp_path):
    import rerank
    from rerank.errors import InputError

    nbest = rerank.read_nbest(_list(tmp_path / "c.nbest", [["a b", "a c"]]))
    refs = rerank.read_nbest(_write(tmp_path / "r.nbest", "0 ||| a b ||| Other= -1 ||| 0\n"))
    with pytest.raises(InputError) as raised:
        rerank.mbr_decode(nbest, pseudo_refs=refs)
    assert str(raised.value).startswith("pseudo_refs (the list given): ") and "/tmp" not in str(raised.value)


@pytest.mark.parametrize(
    "argv, needle", [(["--algorithm", "lowrank", "--rank", "100000"], "is not a rank from 1 to 256")]
)
def test_a_huge_rank_is_named_not_blamed_on_the_input(tmp_path, capsys, argv, needle):
    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"]])
    with pytest.raises(SystemExit):
        main(["mbr", "--nbest", nbest, "--out", str(tmp_path / "o")] + argv)
    assert needle in capsys.readouterr().err


@pytest.mark.parametrize("prompt", ["/dev/zero", "DIR", "BIG"])
def test_a_prompt_that_is_no_file_is_named_before_it_is_read(tmp_path, prompt):
    from rerank.errors import InputError
    from rerank.features.hf_scorer import read_prompt

    path = {"/dev/zero": "/dev/zero", "DIR": str(tmp_path), "BIG": str(tmp_path / "big.txt")}[prompt]
    if prompt == "BIG":
        (tmp_path / "big.txt").write_text("{source} " + "x" * (2 << 20))
    with pytest.raises(InputError, match="regular file|over 1024 KB"):
        read_prompt(path)


@pytest.mark.parametrize("how", ["copyfile", "copytree"])
def test_a_full_disk_inside_a_staged_directory_names_the_users_path(tmp_path, monkeypatch, how):
    import errno
    import shutil

    from rerank.errors import InputError
    from rerank.outputs import staged_directory

    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "w.bin").write_text("w")
    target = tmp_path / "system"
    with pytest.raises(InputError) as raised:
        with staged_directory(str(target)) as tmp:
            if how == "copyfile":
                raise OSError(errno.ENOSPC, "No space left on device", os.path.join(tmp, "generator", "w.bin"))
            failure = (
                str(tmp_path / "model" / "w.bin"),
                os.path.join(tmp, "m", "w.bin"),
                "[Errno 28] No space left on device: 'x'",
            )
            raise shutil.Error([failure])
    message = str(raised.value)
    assert message.startswith(f"{target}: cannot write: No space left on device"), message
    assert ".rerank-partial" not in message
    assert sorted(os.listdir(tmp_path)) == ["model"]


# -- class 11: older edges -----------------------------------------------------------------------


@pytest.mark.parametrize("fails", [True, False])
def test_a_failed_run_leaves_no_directory_it_made(tmp_path, monkeypatch, capsys, fails):
    import rerank.cli.core
    from rerank.errors import InputError

    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"]])
    (tmp_path / "existing").mkdir()

    def verb(args):  # a verb that makes its output's folders, then fails (nmt prepare, report)
        os.makedirs(os.path.join(os.path.dirname(args.out), "tok"), exist_ok=True)
        if fails:
            raise InputError("failed after making the folders")
        with open(args.out, "w") as handle:
            handle.write("done\n")

    monkeypatch.setattr(rerank.cli.core, "cmd_truncate", verb)
    out = tmp_path / "existing" / "new" / "deeper" / "o.nbest"
    status = main(["truncate", "--nbest", nbest, "--size", "1", "--out", str(out)])
    assert status == (1 if fails else 0)
    if fails:
        assert os.listdir(tmp_path / "existing") == []  # new/deeper/tok removed, existing kept
    else:
        assert out.read_text() == "done\n" and (out.parent / "tok").is_dir()


def test_a_scorer_spec_error_names_the_spec(tmp_path, capsys):
    nbest = _list(tmp_path / "c.nbest", [["a b", "a c"]])
    assert main(["features", "add", "--nbest", nbest, "--scorer", "mbr:foo", "--out", str(tmp_path / "o")]) == 1
    one_line_error(capsys, "scorer mbr:foo: unknown metric 'foo'")


def test_e5_threads_zero_is_refused():
    from rerank.errors import InputError
    from rerank.features.spec_paths import scorer_settings

    with pytest.raises(InputError, match="threads=0: '0' is not a positive integer"):
        scorer_settings("e5:threads=0")


def test_mert_refuses_more_columns_than_it_can_search_in_one_line(tmp_path):
    import numpy as np

    import rerank
    from rerank.errors import InputError
    from rerank.nbest import NBestList

    columns = 1001
    rng = np.random.default_rng(0)
    nbest = NBestList(
        np.array([0, 3, 6]),
        ["a b", "a", "b", "c d", "c", "d"],
        rng.normal(size=(6, columns)),
        [f"F{k}" for k in range(columns)],
    )
    with pytest.raises(InputError, match=r"mert: 1001 columns: .* \(at most 1000, .* --algorithm mira or pro"):
        rerank.tune(nbest, ["a b", "c d"], algorithm="mert", init="zeros")
    tuned = rerank.tune(nbest, ["a b", "c d"], algorithm="mira", init="zeros", iterations=2)  # MIRA takes them
    assert len(tuned.weights) == columns
