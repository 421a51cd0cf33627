"""Users' data is sacred (issue 16): inputs are never overwritten, outputs go where the user
pointed, rows are never merged, nothing a user can do gives a traceback, errors name the
user's path, a killed run leaves no litter, and lists are streamed."""

import gzip
import json
import os
import random
import signal
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from conftest import one_line_error as _one_line_error
from conftest import random_corpus
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rerank.nbest.moses
import rerank.reranking
from rerank.cli import main
from rerank.errors import InputError
from rerank.metrics.bleu import BleuMetric
from rerank.nbest import NBestList, PackedStrings, iter_nbest, read_nbest, write_lines, write_nbest
from rerank.output_guard import check_paths
from rerank.outputs import PARTIAL_SUFFIX, StagedOutputs, atomic_write

NBEST = "0 ||| ein mann ||| F= 1 G= 2 ||| 0\n0 ||| eine frau ||| F= 0 G= 1 ||| 0\n1 ||| ein hund ||| F= 3 G= 0 ||| 0\n"
RERANK = [sys.executable, "-m", "rerank.cli"]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "dev.nbest").write_text(NBEST)
    (tmp_path / "dev.ref").write_text("ein mann\nein hund\n")
    (tmp_path / "hyp").write_text("ein mann\nein hund\n")
    (tmp_path / "w.json").write_text(json.dumps({"weights": {"F": 1.0, "G": 0.5}}))
    return tmp_path


def _snapshot(directory):
    return {
        p: open(os.path.join(directory, p), "rb").read()
        for p in sorted(os.listdir(directory))
        if os.path.isfile(os.path.join(directory, p))
    }


# 1. Inputs are never touched --------------------------------------------------------------

VERBS = {  # verb -> (argv with {name} placeholders, its input names, its output options)
    "apply": (["apply", "--nbest", "{nbest}", "--weights", "{w}", "--out", "{out}"], ["nbest", "w"], ["--out"]),
    "apply-nbest": (
        ["apply", "--nbest", "{nbest}", "--weights", "{w}", "--out", "{o1}", "--out-nbest", "{out}"],
        ["nbest", "w"],
        ["--out-nbest"],
    ),
    "oracle": (["oracle", "--nbest", "{nbest}", "--ref", "{ref}", "--out", "{out}"], ["nbest", "ref"], ["--out"]),
    "eval": (["eval", "--ref", "{ref}", "--hyp", "{hyp}", "--out", "{out}"], ["ref", "hyp"], ["--out"]),
    "signif": (
        [
            "signif",
            "--ref",
            "{ref}",
            "--baseline",
            "{hyp}",
            "--system",
            "A={hyp2}",
            "--metrics",
            "bleu",
            "--shuffles",
            "10",
            "--resamples",
            "0",
            "--out",
            "{out}",
        ],
        ["ref", "hyp", "hyp2"],
        ["--out"],
    ),
    "tune": (
        ["tune", "--nbest", "{nbest}", "--ref", "{ref}", "--init", "{w}", "--quiet", "--out", "{out}"],
        ["nbest", "ref", "w"],
        ["--out"],
    ),
    "truncate": (["truncate", "--nbest", "{nbest}", "--size", "1", "--out", "{out}"], ["nbest"], ["--out"]),
    "union": (["union", "--nbest", "{nbest}", "--nbest", "{nbest}", "--out", "{out}"], ["nbest"], ["--out"]),
}
INPUTS = {
    "nbest": NBEST,
    "ref": "ein mann\nein hund\n",
    "hyp": "ein mann\nein hund\n",
    "hyp2": "ein hund\nein\n",
    "w": json.dumps({"weights": {"F": 1.0, "G": 0.5}}),
}


def _alias(tmp_path, target: str, how: str) -> str:
    """A path that names ``target``: itself, another spelling, a symlink or a hard link."""
    if how == "same":
        return target
    if how == "spelling":
        return os.path.join(os.path.dirname(target), "sub", "..", os.path.basename(target))
    link = str(tmp_path / f"{how}-{os.path.basename(target)}")
    (os.symlink if how == "symlink" else os.link)(target, link)
    return link


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    verb=st.sampled_from(sorted(VERBS)),
    pick=st.integers(0, 10),
    how=st.sampled_from(["same", "spelling", "symlink", "hardlink"]),
)
def test_an_output_that_is_an_input_is_refused_before_any_work(tmp_path_factory, capsys, verb, pick, how):
    tmp_path = tmp_path_factory.mktemp("alias")
    (tmp_path / "sub").mkdir()
    paths = {name: str(tmp_path / name) for name in INPUTS}
    for name, text in INPUTS.items():
        (tmp_path / name).write_text(text)
    argv, inputs, _ = VERBS[verb]
    victim = inputs[pick % len(inputs)]
    before = _snapshot(tmp_path)
    values = dict(paths, out=_alias(tmp_path, paths[victim], how), o1=str(tmp_path / "o1"))
    assert main([a.format(**values) for a in argv]) == 1
    _one_line_error(capsys, "refusing to overwrite")
    after = _snapshot(tmp_path)
    assert {k: after[k] for k in before} == before  # every input byte for byte
    assert "o1" not in after  # and nothing written


def test_two_outputs_that_are_one_file_are_refused(files, capsys):
    out = str(files / "o")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                out,
                "--out-nbest",
                out,
            ]
        )
        == 1
    )
    _one_line_error(capsys, "--out-nbest is the same file as output --out")
    assert not os.path.exists(out)
    (files / "t.json").write_text(NBEST)  # an n-best list that happens to be named like a signature
    assert main(["truncate", "--nbest", str(files / "t.json"), "--size", "1", "--out", str(files / "t")]) == 1
    _one_line_error(capsys, "--out (signature) is the same file as input --nbest")  # OUT.json would replace it
    assert (files / "t.json").read_text() == NBEST and not (files / "t").exists()


def test_standard_input_or_output_twice_is_refused(files, capsys):
    assert main(["oracle", "--nbest", "-", "--ref", "-", "--out", str(files / "o")]) == 1
    _one_line_error(capsys, "'-' (standard input) given for both --nbest and --ref")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                "-",
                "--out-nbest",
                "-",
            ]
        )
        == 1
    )
    _one_line_error(capsys, "standard output")


def test_check_paths_directly(tmp_path):
    (tmp_path / "a").write_text("x")
    check_paths({"--in": str(tmp_path / "a")}, {"--out": str(tmp_path / "b")})  # fine
    with pytest.raises(InputError, match="is a directory"):
        check_paths({}, {"--out": str(tmp_path)})
    with pytest.raises(InputError, match="not a directory"):
        check_paths({}, {"--out": str(tmp_path / "a" / "b")})
    check_paths({"--in": "/dev/null"}, {"--out": "/dev/null", "--out2": "/dev/null"})  # devices are never replaced


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_directory_is_refused_before_the_work(files, capsys):
    locked = files / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert (
            main(
                [
                    "tune",
                    "--init",
                    "zeros",
                    "--nbest",
                    str(files / "dev.nbest"),
                    "--ref",
                    str(files / "dev.ref"),
                    "--out",
                    str(locked / "w.json"),
                ]
            )
            == 1
        )
        _one_line_error(capsys, "cannot write in", "permission denied")
    finally:
        locked.chmod(0o700)


def test_the_output_check_comes_before_reading_inputs(files, capsys):
    (files / "broken.nbest").write_text("not an n-best list\n")
    assert (
        main(
            [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(files / "broken.nbest"),
                "--ref",
                str(files / "dev.ref"),
                "--out",
                str(files / "hyp" / "w.json"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "--out", "is not a directory")


# 2. Outputs go where the user pointed ----------------------------------------------------


def test_a_symlink_is_followed_and_its_target_replaced(files):
    target = files / "real.txt"
    target.write_text("old\n")
    link = files / "link.txt"
    link.symlink_to(target)
    assert (
        main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out", str(link)])
        == 0
    )
    assert link.is_symlink() and target.read_text() == "ein mann\nein hund\n"


def test_a_fifo_is_written_not_replaced(files):
    fifo = files / "pipe"
    os.mkfifo(fifo)
    received = []
    reader = threading.Thread(target=lambda: received.append(open(fifo).read()))
    reader.start()
    assert (
        main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out", str(fifo)])
        == 0
    )
    reader.join(10)
    assert received == ["ein mann\nein hund\n"] and stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="mknod of a character device needs root")
def test_a_character_device_is_written_not_replaced(files):
    null = files / "null"
    os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a /dev/null of our own
    assert (
        main(["oracle", "--nbest", str(files / "dev.nbest"), "--ref", str(files / "dev.ref"), "--out", str(null)]) == 0
    )
    assert stat.S_ISCHR(os.stat(null).st_mode)
    assert [p for p in os.listdir(files) if PARTIAL_SUFFIX in p] == []


def test_dash_is_standard_output(files, capsys):
    assert main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out", "-"]) == 0
    assert capsys.readouterr().out == "ein mann\nein hund\n"


# 3. Names are unique ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv,needle",
    [
        (
            ["signif", "--ref", "{ref}", "--baseline", "{hyp}", "--system", "A={hyp}", "--system", "A={hyp}"],
            "'A' is given to two systems",
        ),
        (["signif", "--ref", "{ref}", "--baseline", "{hyp}", "--system", "baseline={hyp}"], "the baseline's name"),
        (
            ["signif", "--ref", "{ref}", "--baseline", "{hyp}", "--system", "oracle={hyp}", "--nbest", "{nbest}"],
            "'oracle' is given to two systems",
        ),
        (["eval", "--ref", "{ref}", "--hyp", "X={hyp}", "--hyp", "X={ref}"], "'X' is given to two systems"),
        (["signif", "--ref", "{ref}", "--baseline", "{hyp}", "--system", "A="], "at least one file"),
    ],
)
def test_two_rows_of_one_name_are_an_error(files, capsys, argv, needle):
    values = {"ref": str(files / "dev.ref"), "hyp": str(files / "hyp"), "nbest": str(files / "dev.nbest")}
    assert main([a.format(**values) for a in argv] + (["--metrics", "bleu"] if argv[0] == "signif" else [])) == 1
    _one_line_error(capsys, needle)


@pytest.mark.parametrize(
    "manifest,needle",
    [
        ({"systems": [["A", ["hyp"]], ["A", ["hyp"]]]}, "'A' is given to two systems"),
        ({"systems": [["baseline", ["hyp"]]]}, "the baseline's name"),
        ({"systems": [["A", ["hyp"]]], "baseline": []}, '"baseline" lists no file'),
        ({"systems": [["A", []]]}, "lists no replica file"),
        ({"systems": [["A", ["hyp"]]], "nbest": "missing.nbest"}, "missing.nbest"),
    ],
)
@pytest.mark.parametrize("matplotlib", [True, False], ids=["plots", "no-matplotlib"])
def test_report_manifests_are_checked(files, capsys, monkeypatch, manifest, needle, matplotlib):
    # without matplotlib the "plots skipped" line comes only once the manifests are read:
    # a bad manifest is the one line said (a core-only install printed both)
    monkeypatch.setattr("rerank.cli.scoring.plots_available", lambda: matplotlib)
    data = {"reference": "dev.ref", "baseline": ["hyp"], "tokenize": "none", **manifest}
    (files / "experiment.json").write_text(json.dumps(data))
    assert main(["report", str(files), "--metrics", "bleu"]) == 1
    _one_line_error(capsys, needle)
    assert not (files / "report").exists()


def test_duplicate_json_keys_are_an_error(files, capsys):
    (files / "w.json").write_text('{"weights": {"F": 1.0, "G": 0.5, "F": 2.0}}')
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "w.json", "key 'F' occurs twice")


# 4. Compression by name ---------------------------------------------------------------------


def test_gz_outputs_are_compressed_and_read_back(files):
    out, nbest = str(files / "o.txt.gz"), str(files / "o.nbest.gz")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                out,
                "--out-nbest",
                nbest,
            ]
        )
        == 0
    )
    assert gzip.decompress(open(out, "rb").read()).decode() == "ein mann\nein hund\n"
    assert read_nbest(nbest).hypotheses == ["ein mann", "eine frau", "ein hund"]
    assert main(["truncate", "--nbest", nbest, "--size", "1", "--out", str(files / "t.nbest.gz")]) == 0
    assert read_nbest(str(files / "t.nbest.gz")).hypotheses == ["ein mann", "ein hund"]
    assert (
        main(
            ["features", "add", "--nbest", nbest, "--scorer", "mbr:bleu,feature=F", "--out", str(files / "f.nbest.gz")]
        )
        == 0
    )
    assert read_nbest(str(files / "f.nbest.gz")).feature_names == ["F", "G", "MBRBLEU"]
    assert main(["eval", "--ref", str(files / "dev.ref"), "--hyp", out]) == 0


def test_binary_gz_writes_are_stored_as_given(tmp_path):
    data = gzip.compress(b"already compressed\n")
    with atomic_write(str(tmp_path / "x.gz"), "wb") as handle:
        handle.write(data)
    assert (tmp_path / "x.gz").read_bytes() == data


def test_a_byte_order_mark_is_not_text(files):
    from rerank.textio import read_lines

    (files / "bom.ref").write_bytes("\ufeffein mann\nein hund\n".encode("utf-8"))
    (files / "bom.nbest").write_bytes(("\ufeff" + NBEST).encode("utf-8"))
    assert read_lines(str(files / "bom.ref")) == ["ein mann", "ein hund"]
    assert read_nbest(str(files / "bom.nbest")).hypotheses == read_nbest(str(files / "dev.nbest")).hypotheses


def test_nul_bytes_are_refused_with_their_line(files, capsys):
    (files / "nul.nbest").write_text(NBEST.replace("ein hund", "ein\x00hund"))
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "nul.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "nul.nbest:3:", "NUL byte")
    (files / "nul.ref").write_text("ein mann\nein\x00hund\n")
    assert main(["eval", "--ref", str(files / "nul.ref"), "--hyp", str(files / "hyp")]) == 1
    _one_line_error(capsys, "nul.ref:2:", "NUL byte")


# 5. No traceback for anything a user can do ---------------------------------------------


def test_zero_features_cannot_be_tuned(files, capsys):
    (files / "none.nbest").write_text("0 ||| ein mann |||  ||| 0\n1 ||| ein hund |||  ||| 0\n")
    for algorithm in ("mira", "mert", "pro"):
        assert (
            main(
                [
                    "tune",
                    "--init",
                    "zeros",
                    "--nbest",
                    str(files / "none.nbest"),
                    "--ref",
                    str(files / "dev.ref"),
                    "--algorithm",
                    algorithm,
                    "--out",
                    str(files / "w2.json"),
                ]
            )
            == 1
        )
        _one_line_error(capsys, "no feature columns: nothing to tune")
    assert not (files / "w2.json").exists()


def test_huge_feature_values_are_refused_by_the_tuners_without_hanging(files):
    (files / "huge.nbest").write_text(NBEST.replace("F= 3", "F= 1e307").replace("F= 0", "F= -1e307"))
    for algorithm in ("mert", "mira", "pro"):
        done = subprocess.run(
            RERANK
            + [
                "tune",
                "--init",
                "zeros",
                "--nbest",
                str(files / "huge.nbest"),
                "--ref",
                str(files / "dev.ref"),
                "--algorithm",
                algorithm,
                "--out",
                str(files / "w2.json"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert "huge.nbest" in done.stderr and "magnitude 1e+307" in done.stderr


def test_weights_that_overflow_the_scores_are_named(files):
    (files / "big.json").write_text(json.dumps({"weights": {"F": 1e308, "G": 1e308}}))
    done = subprocess.run(
        RERANK
        + [
            "apply",
            "--nbest",
            str(files / "dev.nbest"),
            "--weights",
            str(files / "big.json"),
            "--out",
            str(files / "o"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stderr.count("\n") == 1, done.stderr
    assert "big.json" in done.stderr and "not finite" in done.stderr and "Warning" not in done.stderr
    assert not (files / "o").exists()


def test_out_of_memory_names_the_largest_input(files, capsys, monkeypatch):
    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(rerank.reranking, "iter_nbest", exhausted)
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "dev.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "dev.nbest is too large to hold in memory", "stream")
    assert not (files / "o").exists()


def _big_list(path, segments=4000, size=50, seed=0):
    rng = np.random.RandomState(seed)
    words = np.array("ein mann eine frau hund rennt über die wiese im park".split())
    with open(path, "w") as out:
        for i in range(segments):
            for _k in range(size):
                hyp = " ".join(words[rng.randint(0, len(words), 6)])
                out.write(f"{i} ||| {hyp} ||| F= {rng.randn():.4f} G= {rng.randn():.4f} ||| 0\n")


@pytest.mark.parametrize("signum,code", [(signal.SIGINT, 130), (signal.SIGTERM, 130)])
def test_an_interrupted_run_says_so_and_leaves_nothing(files, signum, code):
    _big_list(files / "big.nbest", segments=8000)
    out = files / "o"
    proc = subprocess.Popen(
        RERANK
        + [
            "apply",
            "--nbest",
            str(files / "big.nbest"),
            "--weights",
            str(files / "w.json"),
            "--out",
            str(out),
            "--out-nbest",
            str(files / "o.nbest"),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 60  # signal while it writes: its temporaries exist
    while not any(PARTIAL_SUFFIX in p for p in os.listdir(files)) and proc.poll() is None and time.time() < deadline:
        time.sleep(0.01)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")
    assert proc.returncode == code and err.strip().count("\n") == 0 and "interrupted" in err, err
    assert sorted(os.listdir(files)) == sorted(["dev.nbest", "dev.ref", "hyp", "w.json", "big.nbest"])


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_while_an_output_is_staged_is_raised_after_it_is_recorded(tmp_path, monkeypatch, signum):
    # Python runs the process's handler for a signal right after the temporary is created
    # (a signal received just before staging began: the window the CLI test above hits
    # only by chance, and an OS signal mask does not cover): it is held until the temporary
    # is recorded, then raised, and the staged outputs are removed
    import rerank.outputs

    create = rerank.outputs.tempfile.mkstemp

    def create_then_signal(*args, **kwargs):
        made = create(*args, **kwargs)
        signal.getsignal(signum)(signum, None)
        return made

    def terminate(signum, frame):  # as rerank's CLI handles SIGTERM
        raise KeyboardInterrupt

    # the handlers the CLI runs with, whatever an earlier test or library left installed
    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, terminate),
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
    }
    try:
        with pytest.raises(KeyboardInterrupt):
            with StagedOutputs() as outputs:
                outputs.stage(str(tmp_path / "a.txt"))
                monkeypatch.setattr(rerank.outputs.tempfile, "mkstemp", create_then_signal)
                outputs.stage(str(tmp_path / "b.txt"))
                raise AssertionError("not reached: the signal is raised when b.txt is staged")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
        assert signal.getsignal(signal.SIGTERM) is terminate
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    assert os.listdir(tmp_path) == []


# 6. Errors name the user's path -------------------------------------------------------------


def test_disk_full_names_the_output(files, capsys):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    assert (
        main(["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out", "/dev/full"])
        == 1
    )
    _one_line_error(capsys, "/dev/full", "No space left on device")


def test_a_failed_rename_names_the_users_path_not_the_temporary(files, capsys, monkeypatch):
    import errno

    def full(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device", src)

    monkeypatch.setattr(os, "replace", full)
    assert (
        main(
            [
                "oracle",
                "--nbest",
                str(files / "dev.nbest"),
                "--ref",
                str(files / "dev.ref"),
                "--out",
                str(files / "o.txt"),
            ]
        )
        == 1
    )
    err = _one_line_error(capsys, str(files / "o.txt"), "No space left on device")
    assert PARTIAL_SUFFIX not in err
    monkeypatch.undo()
    assert [p for p in os.listdir(files) if PARTIAL_SUFFIX in p] == []


# 7. No litter --------------------------------------------------------------------------------


def test_a_killed_run_leaves_the_old_file_or_the_new_and_no_litter(files):
    _big_list(files / "big.nbest", segments=2000)
    out = files / "o.nbest"
    out.write_text("old\n")
    argv = RERANK + [
        "apply",
        "--nbest",
        str(files / "big.nbest"),
        "--weights",
        str(files / "w.json"),
        "--out",
        str(files / "o"),
        "--out-nbest",
        str(out),
    ]
    whole = subprocess.run(argv, capture_output=True, timeout=120)
    assert whole.returncode == 0
    new = out.read_bytes()
    out.write_text("old\n")
    rng = random.Random(7)
    for _ in range(6):  # arbitrary kill points
        proc = subprocess.Popen(argv, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.0, 2.0))
        proc.kill()
        proc.wait()
        assert out.read_bytes() in (b"old\n", new)  # never a truncated output
    subprocess.run(argv, capture_output=True, timeout=120, check=True)  # the next run sweeps what kills left
    assert out.read_bytes() == new
    assert sorted(os.listdir(files)) == sorted(["dev.nbest", "dev.ref", "hyp", "w.json", "big.nbest", "o", "o.nbest"])


def test_a_failed_run_leaves_no_directory_it_made(files, capsys):
    (files / "bad.nbest").write_text(NBEST + "2 ||| x ||| F= nope G= 1 ||| 0\n")
    assert (
        main(
            [
                "apply",
                "--nbest",
                str(files / "bad.nbest"),
                "--weights",
                str(files / "w.json"),
                "--out",
                str(files / "new" / "deeper" / "o"),
            ]
        )
        == 1
    )
    _one_line_error(capsys, "bad.nbest:4:")
    assert not (files / "new").exists()


def test_a_live_writers_temporary_is_not_swept(tmp_path):
    target = str(tmp_path / "x.txt")
    with StagedOutputs() as first:
        staged = first.stage(target)
        with StagedOutputs() as second:  # another run writing the same output meanwhile
            second.stage(target)
        assert os.path.exists(staged)  # still there: its writer holds the lock
        with open(staged, "w") as handle:
            handle.write("first\n")
    assert open(target).read() == "first\n"


# 8. Streaming --------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12), block=st.integers(1, 20))
def test_blocks_are_whole_segments_and_concatenate_to_the_list(tmp_path_factory, sizes, block):
    path = str(tmp_path_factory.mktemp("blocks") / "x.nbest")
    M = sum(sizes)
    hyps = [f"h{i} ü" for i in range(M)]
    nbest = NBestList(np.concatenate([[0], np.cumsum(sizes)]), hyps, np.arange(M * 2.0).reshape(M, 2), ["A", "B"])
    write_nbest(nbest, path)
    blocks = list(iter_nbest(path, block_size=block))
    assert [first for first, _ in blocks] == list(np.cumsum([0] + [b.num_segments for _, b in blocks[:-1]]))
    assert all(len(b.hypotheses) <= max(block, max(sizes)) + max(sizes) for _, b in blocks)
    back = rerank.nbest.concat_blocks([b for _, b in blocks])
    assert back.hypotheses == hyps and back.offsets.tolist() == nbest.offsets.tolist()
    assert back.features.tolist() == nbest.features.tolist()


def test_errors_name_the_line_in_any_block(tmp_path):
    path = tmp_path / "x.nbest"
    path.write_text("".join(f"{i} ||| h ||| F= {i} ||| 0\n" for i in range(30)).replace("F= 25", "F= x"))
    with pytest.raises(InputError, match=r"x.nbest:26: feature 'F': non-numeric value 'x'"):
        list(iter_nbest(str(path), block_size=4))


def test_streamed_verbs_equal_the_whole_list(files, monkeypatch):
    refs, hyps, segment = random_corpus(30, 5, seed=4)
    rng = np.random.RandomState(0)
    nbest = NBestList(np.arange(0, 151, 5), hyps, rng.randn(150, 2), ["NMT", "G"])
    write_nbest(nbest, str(files / "c.nbest"))
    write_lines(refs, str(files / "c.ref"))
    write_lines([" ".join(r.split()[:3]) for r in refs], str(files / "c.src"))
    (files / "c.json").write_text(json.dumps({"weights": {"NMT": 1.0, "G": -0.3}}))
    argv = {
        "apply": [
            "apply",
            "--nbest",
            str(files / "c.nbest"),
            "--weights",
            str(files / "c.json"),
            "--out",
            "{o}",
            "--out-nbest",
            "{o}.nbest",
        ],
        "features": [
            "features",
            "add",
            "--nbest",
            str(files / "c.nbest"),
            "--source",
            str(files / "c.src"),
            "--scorer",
            "mbr:bleu,feature=NMT",
            "--scorer",
            "mbr:chrf,feature=NMT",
            "--scorer",
            "len:1.1",
            "--out",
            "{o}",
        ],
        "truncate": ["truncate", "--nbest", str(files / "c.nbest"), "--size", "2", "--out", "{o}"],
        "oracle": ["oracle", "--nbest", str(files / "c.nbest"), "--ref", str(files / "c.ref"), "--out", "{o}"],
    }
    for verb, args in argv.items():
        assert main([a.format(o=str(files / f"{verb}.whole")) for a in args]) == 0
        monkeypatch.setattr(rerank.nbest.moses, "BLOCK_HYPOTHESES", 7)  # many blocks, cut at segment boundaries
        assert main([a.format(o=str(files / f"{verb}.streamed")) for a in args]) == 0
        monkeypatch.undo()
        assert (files / f"{verb}.whole").read_bytes() == (files / f"{verb}.streamed").read_bytes(), verb
    assert (files / "apply.whole.nbest").read_bytes() == (files / "apply.streamed.nbest").read_bytes()


def test_mbr_in_pair_groups_equals_all_pairs_at_once(corpus):
    from rerank.features.scorer import make_scorer
    from rerank.mbr import pair_groups

    refs, hyps, segment = corpus
    offsets = np.concatenate([[0], np.cumsum(np.bincount(segment))])
    nbest = NBestList(offsets, hyps, np.random.RandomState(1).randn(len(hyps), 1), ["NMT"])
    for metric in ("bleu", "chrf"):
        scorer = make_scorer(f"mbr:{metric},feature=NMT")
        whole = scorer.score(nbest, None, None)
        scorer.max_pairs = 40  # a few segments per group (6 x 6 = 36 pairs each)
        grouped = scorer.score(nbest, None, None)
        assert np.array_equal(whole[scorer.column], grouped[scorer.column])
    groups = pair_groups(offsets, 40)
    assert groups[0] == (0, 1) and groups[-1][1] == len(offsets) - 1
    assert pair_groups(np.array([0, 10, 12]), 5) == [(0, 1), (1, 2)]  # a segment larger than the cap stands alone


def test_packed_strings_are_a_sequence():
    strings = ["ein mann", "", "grüße", "日本", "x"]
    packed = PackedStrings.from_strings(strings)
    assert list(packed) == strings and len(packed) == 5 and packed[2] == "grüße" and packed[-1] == "x"
    assert list(packed.take(np.array([3, 0, 3]))) == ["日本", "ein mann", "日本"]
    both = PackedStrings.concat([packed, PackedStrings.from_strings(["a", "b"])])
    assert list(both) == strings + ["a", "b"]


# --- issue 43: side files are outputs like any other -------------------------------------


def test_an_output_never_replaces_the_signature_of_an_input(files, capsys):
    (files / "dev.nbest.json").write_text(json.dumps({"beam_feature": "F", "feature_sets": {"beam": ["F"]}}))
    before = (files / "dev.nbest.json").read_text()
    for argv in (
        ["tune", "--nbest", str(files / "dev.nbest"), "--ref", str(files / "dev.ref"), "--out"],
        ["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json"), "--out"],
        ["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out"],
    ):
        assert main(argv + [str(files / "dev.nbest.json")]) == 1
        err = capsys.readouterr().err
        assert "is the same file as input --nbest (its signature)" in err and err.count("\n") == 1
        assert (files / "dev.nbest.json").read_text() == before


def test_a_list_written_without_a_signature_removes_a_stale_one(files, capsys):
    # the first convert declares a beam; the second, to the same output, cannot: the first
    # list's signature must not stay beside the second list (tune would start from it)
    src = files / "m.nbest"
    src.write_text("0 ||| a b ||| F0= -1 F1= 2 ||| -1\n0 ||| c ||| F0= -2 F1= 1 ||| -2\n")
    out = files / "out.nbest"
    assert main(["convert", "--from", "marian", str(src), "--beam-feature", "F0", "--out", str(out)]) == 0
    assert json.loads((files / "out.nbest.json").read_text())["beam_feature"] == "F0"
    assert main(["convert", "--from", "marian", str(src), "--out", str(out)]) == 0
    assert out.exists() and not (files / "out.nbest.json").exists()
    capsys.readouterr()


def test_standard_output_and_devices_get_no_side_file(files, capsys, monkeypatch):
    monkeypatch.chdir(files)
    assert main(["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out", "-"]) == 0
    assert capsys.readouterr().out.count("|||") == 6
    assert main(["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out", os.devnull]) == 0
    assert not (files / "-.json").exists() and not os.path.exists(os.devnull + ".json")
    fifo = files / "pipe.nbest"
    os.mkfifo(fifo)
    reader = threading.Thread(target=lambda: open(fifo).read())
    reader.start()
    assert main(["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out", str(fifo)]) == 0
    reader.join(10)
    assert not (files / "pipe.nbest.json").exists()


def test_a_list_on_standard_output_takes_its_signature_where_signature_says(files, capsys, monkeypatch):
    """``--signature FILE`` with ``--out -``: the list goes to standard output, its signature
    to FILE (the same record a file's OUT.json gets); FILE is an output as any other (never an
    input, never beside a file output)."""
    from rerank.nbest import ListInfo, write_list_info

    monkeypatch.chdir(files)
    write_list_info(str(files / "dev.nbest.json"), ListInfo("F", {"beam": ["F"]}, declared=True), {"made_by": "test"})
    argv = ["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1"]
    assert main(argv + ["--out", "-", "--signature", "t.json"]) == 0
    assert capsys.readouterr().out.count("|||") == 6
    assert main(argv + ["--out", "t.nbest"]) == 0
    piped, beside = json.loads((files / "t.json").read_text()), json.loads((files / "t.nbest.json").read_text())
    assert piped["beam_feature"] == beside["beam_feature"] and piped["feature_sets"] == beside["feature_sets"]
    assert not (files / "-.json").exists()
    assert main(argv + ["--out", "t2.nbest", "--signature", "t2.json"]) == 1
    assert "--signature is for a list written to standard output (-)" in capsys.readouterr().err
    assert not (files / "t2.nbest").exists() and not (files / "t2.json").exists()
    before = (files / "dev.nbest.json").read_bytes()
    assert main(argv + ["--out", "-", "--signature", str(files / "dev.nbest.json")]) == 1
    assert "refusing to overwrite it" in capsys.readouterr().err
    assert (files / "dev.nbest.json").read_bytes() == before


def test_an_output_that_ends_in_a_slash_is_refused(files, capsys):
    argv = ["apply", "--nbest", str(files / "dev.nbest"), "--weights", str(files / "w.json")]
    assert main(argv + ["--out", str(files / "newdir") + "/"]) == 1
    assert "ends in '/': give a file name, not a directory" in capsys.readouterr().err
    assert not (files / "newdir").exists()


# --- issue 43: the Python API is as strict as the command line ----------------------------


def test_the_api_refuses_what_the_command_line_refuses():
    import rerank as api

    nbest = NBestList(np.array([0, 2]), ["a", "b"], np.array([[1.0], [2.0]]), ["F"])
    cases = [
        (lambda: api.apply(nbest, {"F": float("nan")}), InputError, "weights: weight of 'F' must be a finite number"),
        (lambda: api.apply(nbest, {"F": 1e308 * 10}), InputError, "not NaN|Infinity"),
        (lambda: api.apply(nbest, {"F": 1e308}), InputError, "weighted scores of the n-best list are not finite"),
        (lambda: api.tune(nbest, ["a"], init={"F": float("inf")}), InputError, "init: weight of 'F'"),
        (
            lambda: api.evaluate("abc", ["a", "b", "c"]),
            TypeError,
            "hypotheses: expected a list of strings, not a string",
        ),
        (lambda: api.evaluate(["a"], "a"), InputError, "references: expected a list of reference strings"),
        (lambda: api.evaluate([], []), InputError, "no hypotheses: nothing to score"),
        (lambda: api.evaluate([1], ["a"]), TypeError, "hypotheses: item 0 is int, not a string"),
        (lambda: api.significance(["a"], [["a"]], {"x": ["a"]}), InputError, "x: expected a list of replicas"),
    ]
    for call, kind, message in cases:
        with pytest.raises(kind, match=message):
            call()


# --- issue 43: importers and small things -------------------------------------------------


def test_small_things_are_refused_in_one_line(files, capsys, tmp_path):
    # an option too large for int64; and head() of any size never overflows
    argv = [
        "truncate",
        "--nbest",
        str(files / "dev.nbest"),
        "--size",
        "99999999999999999999",
        "--out",
        str(tmp_path / "t"),
    ]
    with pytest.raises(SystemExit):
        main(argv)
    assert "is too large (at most 9223372036854775807)" in capsys.readouterr().err
    assert (
        read_nbest(str(files / "dev.nbest")).head(2**62).hypotheses == read_nbest(str(files / "dev.nbest")).hypotheses
    )
    # folds with an empty image name: refused before a folds file apply would refuse
    (tmp_path / "seg.txt").write_text("img1\n\nimg3\n")
    assert main(["folds", "--segment-images", str(tmp_path / "seg.txt"), "--out", str(tmp_path / "f.tsv")]) == 1
    assert f"{tmp_path / 'seg.txt'}:2: empty image name" in capsys.readouterr().err
    assert not (tmp_path / "f.tsv").exists()
    # a list that cannot be written names the output file and the line
    bad = NBestList(np.array([0, 1, 2]), ["a", "a ||| b"], np.zeros((2, 1)), ["F"])
    with pytest.raises(InputError, match=r"x\.nbest:2: hypothesis 1 \('a \|\|\| b'\) cannot be written"):
        write_nbest(bad, str(tmp_path / "x.nbest"))
    spaced = NBestList(np.array([0, 1]), ["a"], np.zeros((1, 1)), ["F G"])
    with pytest.raises(InputError, match=r"x\.nbest:1: feature name 'F G' cannot be written"):
        write_nbest(spaced, str(tmp_path / "x.nbest"))
    assert not (tmp_path / "x.nbest").exists()


def test_a_terminal_that_cannot_show_utf8_gets_utf8_data_and_no_traceback(tmp_path):
    (tmp_path / "u.nbest").write_text("0 ||| grüße ||| F= 1 ||| 1\n", encoding="utf-8")
    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    run = subprocess.run(
        RERANK + ["truncate", "--nbest", str(tmp_path / "u.nbest"), "--size", "1", "--out", "-"],
        capture_output=True,
        env=env,
    )
    assert run.returncode == 0, run.stderr.decode("utf-8", "replace")
    assert run.stdout.decode("utf-8") == "0 ||| grüße ||| F= 1 ||| 1\n"
    run = subprocess.run(
        RERANK + ["truncate", "--nbest", str(tmp_path / "grüße.nbest"), "--size", "1", "--out", "-"],
        capture_output=True,
        env=env,
    )
    assert run.returncode == 1 and b"Traceback" not in run.stderr


# --- issue 43: validation before work -------------------------------------------------------


def test_features_add_checks_line_counts_and_column_clashes_before_any_scoring(files, capsys, monkeypatch):
    from rerank.features import add as add_module
    from rerank.nbest import count_segments

    assert count_segments(str(files / "dev.nbest")) == 2
    gz = files / "dev.nbest.gz"
    with gzip.open(gz, "wt") as out:
        out.write(NBEST)
    assert count_segments(str(gz)) == 2 and count_segments("-") is None
    scored = []
    real = add_module.score_block
    monkeypatch.setattr(add_module, "score_block", lambda *a, **k: scored.append(1) or real(*a, **k))
    (files / "src").write_text("a\nb\nc\n")  # one line too many
    argv = ["features", "add", "--nbest", str(files / "dev.nbest"), "--scorer", "len:", "--source", str(files / "src")]
    assert main(argv + ["--out", str(files / "o.nbest")]) == 1
    assert f"{files / 'src'}: 3 lines but the n-best list has 2 segments" in capsys.readouterr().err
    # two scorers that give one column — refused before scoring
    (files / "src").write_text("a\nb\n")
    argv = ["features", "add", "--nbest", str(files / "dev.nbest"), "--scorer", "mbr:bleu", "--scorer", "mbr:bleu"]
    assert main(argv + ["--out", str(files / "o.nbest")]) == 1
    assert "feature 'MBRBLEU' is given by two scorers" in capsys.readouterr().err
    assert scored == [] and not (files / "o.nbest").exists()


def test_results_that_could_not_be_written_are_refused_before_the_work(files, capsys):
    argv = ["tune", "--nbest", str(files / "dev.nbest"), "--ref", str(files / "dev.ref"), "--init", "zeros"]
    assert main(argv + ["--metric", "1e308*bleu+1e308*chrf", "--out", str(files / "o.json")]) == 1
    assert "coefficient 1e308 is beyond 1e+06 (scores would overflow)" in capsys.readouterr().err
    assert not (files / "o.json").exists()
    (files / "hyp.q").write_text("1e308\n1e308\n")  # finite scores whose mean overflows
    assert main(["eval", "--ref", str(files / "dev.ref"), "--hyp", str(files / "hyp"), "--metrics", "seg:q"]) == 1
    assert "metric 'seg:q': the score is not a finite number" in capsys.readouterr().err
    (files / "dev.nbest.q").write_text("1e308\n1e308\n1e308\n")
    assert main(argv + ["--metric", "seg:q", "--out", str(files / "o.json")]) == 1
    assert "seg:q: the start's score is not a finite number" in capsys.readouterr().err
    assert not (files / "o.json").exists()


def test_a_bad_byte_in_a_list_read_from_a_fifo_is_refused_without_hanging(tmp_path):
    fifo = tmp_path / "in.nbest"
    os.mkfifo(fifo)

    def feed():
        with open(fifo, "wb") as out:
            out.write(b"0 ||| a \xff b ||| F= 1 ||| 1\n")

    writer = threading.Thread(target=feed)
    writer.start()
    run = subprocess.run(
        RERANK + ["truncate", "--nbest", str(fifo), "--size", "1", "--out", str(tmp_path / "o.nbest")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    writer.join(10)
    assert run.returncode == 1 and f"{fifo}: not UTF-8 text" in run.stderr and "Traceback" not in run.stderr


# --- issue 43: paths ----------------------------------------------------------------------


def test_every_valid_name_is_writable_modes_are_kept_and_read_only_outputs_refused(files, capsys):
    long_name = files / ("a" * 240 + ".nbest")  # 246 bytes: valid, but not with 25 more for a temporary
    argv = ["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out"]
    assert main(argv + [str(long_name)]) == 0
    assert long_name.read_text().count("\n") == 2
    assert not [p for p in os.listdir(files) if p.endswith(".rerank-partial")]
    os.chmod(long_name, 0o640)
    assert main(argv + [str(long_name)]) == 0
    assert stat.S_IMODE(os.stat(long_name).st_mode) == 0o640  # replaced, its mode kept
    os.chmod(long_name, 0o444)
    before = long_name.read_text()
    assert main(argv[:-2] + ["2", "--out", str(long_name)]) == 1
    assert "the file is read-only: refusing to replace it" in capsys.readouterr().err
    assert long_name.read_text() == before


def test_a_killed_runs_free_temporaries_of_other_outputs_are_swept(files):
    stale = files / ".other.txt.abcd1234.rerank-partial"  # another output's, its writer gone (no lock)
    stale.write_text("half")
    assert main(["truncate", "--nbest", str(files / "dev.nbest"), "--size", "1", "--out", str(files / "t.nbest")]) == 0
    assert not stale.exists()


def test_mert_refuses_a_problem_whose_memory_it_can_estimate_and_talks_on_long_iterations(monkeypatch):
    from rerank.tuning import mert

    rng = np.random.default_rng(0)
    offsets = np.arange(0, 41, 4)
    stats = np.abs(rng.normal(size=(40, 9))) + 1
    features = rng.normal(size=(40, 150))
    monkeypatch.setattr(mert, "MAX_SLOPE_BYTES", 40 * 100 * 8)  # 150 + 10 directions × 40 rows is more
    tuner = mert.Mert(mert.MertConfig(restarts=1, max_iterations=2))
    with pytest.raises(InputError, match=r"mert: 150 columns and 40 hypotheses need .* use --algorithm mira or pro"):
        tuner.tune(features, stats, offsets, metric=BleuMetric())
    monkeypatch.setattr(mert, "MAX_SLOPE_BYTES", 2**30)
    said = []
    tuner.tune(features, stats, offsets, progress=said.append, metric=BleuMetric())
    assert any("line searches (160 per iteration)" in line for line in said)


def test_a_failed_run_removes_the_directories_it_created(files, capsys):
    (files / "bad.nbest").write_text("0 ||| a b ||| F= 1 ||| 1\n1 ||| c ||| F= x ||| 2\n")  # fails on line 2
    out = files / "new" / "deeper" / "t.nbest"
    assert main(["truncate", "--nbest", str(files / "bad.nbest"), "--size", "1", "--out", str(out)]) == 1
    assert "bad.nbest:2: feature 'F': non-numeric value 'x'" in capsys.readouterr().err
    assert not (files / "new").exists()
