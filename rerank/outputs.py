"""Where outputs go, and the rules that keep users' files safe (the README's bad-input rules).

Every file rerank writes goes through :class:`StagedOutputs` (several outputs that appear
together or not at all) or :func:`atomic_write` (one output).  The target decides how:

* ``-``: standard output, written when the work is done;
* an existing character or block device, FIFO or socket (``/dev/null``, ``/dev/stdout``, a
  named pipe): written directly, never replaced;
* a symbolic link: followed; its final target is replaced atomically;
* anything else (a regular file, or a path that does not exist yet): written to one hidden
  temporary beside the target (``.NAME.XXXXXXXX.rerank-partial``) and renamed onto it on
  success, so the target is always absent, the old file or the whole new file.

A text output whose name ends in ``.gz`` is written gzip-compressed (and
:mod:`rerank.textio` reads it back); binary writes (``"wb"``) are stored as given, so bytes
that are already compressed (a downloaded ``.gz``) are not compressed twice.
While a temporary is being written its process holds an exclusive ``flock`` on it; the next
run that writes to the same directory removes every temporary whose lock is free (its
writer was killed), so a killed run leaves nothing behind once the command runs again.

:func:`rerank.output_guard.check_paths` is called by the command line before any work: an
output that is the same file as an input or as another output (symbolic and hard links
included), standard input named twice, or an output in a directory that cannot be written is
refused on one line naming the option and the path.
"""

from __future__ import annotations

import contextlib
import contextvars
import errno
import fcntl
import glob
import gzip
import hashlib
import io
import os
import shutil
import signal
import stat
import sys
import tempfile
import threading
from typing import IO, Dict, Iterator, List, Optional

from rerank.errors import InputError

PARTIAL_SUFFIX = ".rerank-partial"
#: the suffix of a directory moved aside while :func:`staged_directory` puts the new one in its
#: place: never swept as a stale temporary (it may be the only copy), restored by the next write
PREVIOUS_SUFFIX = ".rerank-previous"
#: write errors that are the user's environment, not our bug: named with the user's path
_WRITE_ERRNOS = {
    errno.ENOSPC,
    errno.EROFS,
    errno.EDQUOT,
    errno.EFBIG,
    errno.EIO,
    errno.EACCES,
    errno.EPERM,
    errno.ENOTDIR,
    errno.EISDIR,
    errno.ENAMETOOLONG,
    errno.EPIPE,
}


def is_special(path: str) -> bool:
    """True for an existing device, FIFO or socket (written directly, never replaced)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


#: where the signature of a list written to standard output goes (``--signature FILE``), or None
_STDOUT_SIGNATURE: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("stdout_signature", default=None)


@contextlib.contextmanager
def stdout_signature(path: Optional[str]) -> Iterator[None]:
    """While the block runs, the signature of a list written to ``-`` goes to ``path``
    (``--signature FILE`` of the verbs that write lists); None: it has none."""
    token = _STDOUT_SIGNATURE.set(path)
    try:
        yield
    finally:
        _STDOUT_SIGNATURE.reset(token)


def signature_path(path: Optional[str]) -> Optional[str]:
    """The side file (signature) of an output list ``path``: ``path + '.json'``; for ``-``
    (standard output) the file :func:`stdout_signature` names, if any; None where there is
    no file to put one beside (a device, a FIFO, no path)."""
    if path == "-":
        return _STDOUT_SIGNATURE.get()
    if path is None or is_special(os.path.realpath(path)):
        return None
    return path + ".json"


def _temp_prefix(target: str) -> str:
    """The name prefix of ``target``'s temporaries, in its directory: ``.NAME.``, or for a
    name too long to take the ~25 extra characters (names of up to 255 bytes are valid),
    ``.`` plus a hash of the name, so that every valid output name can be written."""
    name = os.path.basename(target)
    try:
        limit = os.pathconf(os.path.dirname(target) or ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    prefix = "." + name + "."
    if len(prefix.encode("utf-8")) + 8 + len(PARTIAL_SUFFIX) > limit:
        prefix = "." + hashlib.sha1(name.encode("utf-8")).hexdigest()[:20] + "."
    return prefix


def _restore_previous(target: str) -> None:
    """A directory moved aside by a :func:`staged_directory` commit that died before the new one
    was in place (``.NAME.XXXXXXXX.previous``): put back at ``target`` when nothing is there (it
    is the only copy), removed when the new directory made it."""
    pattern = os.path.join(
        glob.escape(os.path.dirname(target)), glob.escape(_temp_prefix(target)) + "*" + PREVIOUS_SUFFIX
    )
    for previous in sorted(glob.glob(pattern)):
        if not os.path.lexists(target):
            os.replace(previous, target)
        else:
            shutil.rmtree(previous, ignore_errors=True)


def _remove_stale(target: str) -> None:
    """Remove every temporary (file or staged directory) in ``target``'s directory whose
    writer is gone (its lock is free): a killed run's temporaries of any output there, not
    only this one's."""
    pattern = os.path.join(glob.escape(os.path.dirname(target)), ".*" + PARTIAL_SUFFIX)
    for tmp in glob.glob(pattern):
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)  # a live writer holds it
            continue
        with contextlib.suppress(OSError):
            if os.path.isdir(tmp) and not os.path.islink(tmp):  # a staged directory (staged_directory)
                shutil.rmtree(tmp)
            else:
                os.unlink(tmp)
        os.close(fd)


class _Target:
    """One output: the user's path, where it is written, and its temporary if any."""

    def __init__(self, path: str):
        self.path = path
        self.stdout = path == "-"
        real = os.path.realpath(path) if not self.stdout else ""
        self.real: Optional[str] = None if self.stdout else real
        self.direct = self.stdout or is_special(real)
        self.compress = path.endswith(".gz")  # text writes only: see _open_target
        self.tmp: Optional[str] = None
        self.lock_fd: Optional[int] = None
        self.created: List[str] = []  # directories made for it, removed again if it is discarded
        if not self.direct:
            directory = os.path.dirname(real)
            missing = directory
            while not os.path.exists(missing):
                self.created.append(missing)
                missing = os.path.dirname(missing)
            os.makedirs(directory, exist_ok=True)
            _remove_stale(real)
            while True:
                fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(real), suffix=PARTIAL_SUFFIX, dir=directory)
                fcntl.flock(fd, fcntl.LOCK_EX)  # held until committed or removed: marks the temporary as live
                if os.fstat(fd).st_nlink:  # not swept by another run between creation and lock
                    break
                os.close(fd)
            self.tmp, self.lock_fd = tmp, fd

    @property
    def write_path(self) -> str:
        """The path a writer opens: the temporary, or the target itself when written directly."""
        if self.tmp is not None:
            return self.tmp
        return self.path if self.real is None else self.real

    def commit(self, umask: int) -> None:
        if self.tmp is None or self.real is None:
            return
        try:  # a replaced file keeps its mode; a new one gets the usual permissions (mkstemp makes 0600)
            mode = stat.S_IMODE(os.stat(self.real).st_mode)
        except FileNotFoundError:
            mode = 0o666 & ~umask
        os.chmod(self.tmp, mode)
        os.replace(self.tmp, self.real)
        self.tmp = None

    def discard(self) -> None:
        if self.tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.tmp)
            self.tmp = None
            for directory in self.created:  # innermost first; only if still empty
                with contextlib.suppress(OSError):
                    os.rmdir(directory)
        if self.lock_fd is not None:
            os.close(self.lock_fd)
            self.lock_fd = None


#: temporaries being written now -> their target, so that a writer given a staged path
#: (``write_nbest(nbest, outputs.stage(path))``) writes into it instead of staging again
_LIVE: Dict[str, _Target] = {}


def _umask() -> int:
    """The process's umask (read by setting it, then put back)."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


def _error_inside(err: OSError, directory: str) -> Optional[str]:
    """The reason of ``err`` when it concerns a file inside ``directory`` (a staged directory's
    temporary): its ``strerror`` — for :class:`shutil.Error` (``copytree``'s list of failed
    copies), the first copy's reason — else None."""
    root = os.path.realpath(directory)

    def inside(name) -> bool:
        return isinstance(name, str) and os.path.commonpath([root, os.path.realpath(name)]) == root

    if isinstance(err, shutil.Error):
        failures = err.args[0] if err.args and isinstance(err.args[0], list) else []
        for failure in failures:
            if len(failure) == 3 and (inside(failure[0]) or inside(failure[1])):
                return str(failure[2]).split("] ", 1)[-1].split(":", 1)[0]
        return None
    if inside(err.filename) or inside(err.filename2):
        return err.strerror or str(err)
    return None


def _user_error(err: OSError, path: str) -> InputError:
    """A write error named with the user's ``path`` and its reason, never the temporary's name."""
    return InputError(f"cannot write: {err.strerror or err}", path)


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT and SIGTERM back for the block and deliver them right after it, so that a
    temporary is never created without being recorded for removal.  They are held at the
    Python level: a signal the process received just before the block, whose Python
    handler has not run yet, is held too (an OS signal mask would let it raise inside the
    block).  Only the main thread can set handlers; elsewhere (and where a handler was set outside
    Python) the block runs as it is."""
    deferred = (signal.SIGINT, signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or any(
        signal.getsignal(signum) is None for signum in deferred
    ):  # a handler set outside Python: left alone
        yield
        return
    held: List[signal.Signals] = []
    previous = {
        signum: signal.signal(signum, lambda signum, frame: held.append(signal.Signals(signum))) for signum in deferred
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for held_signum in dict.fromkeys(held):  # delivered now, to the handlers the process had
            handler = previous[held_signum]
            if callable(handler):
                handler(held_signum, None)
            elif handler != signal.SIG_IGN:
                signal.raise_signal(held_signum)


class StagedOutputs:
    """Several outputs that appear together or not at all.

    ``stage(path)`` returns the path to write instead of ``path`` (its temporary; the
    target itself for ``-``, devices and FIFOs, which are written directly).  Leaving the
    ``with`` block normally renames every temporary onto its target; an exception (also
    KeyboardInterrupt or SystemExit) removes them all and touches no target.  Write errors
    (disk full, read-only file system) become :class:`InputError` naming the user's path.
    """

    def __init__(self):
        self._targets: List[_Target] = []
        self._removals: List[str] = []

    def signature(self, list_path: str) -> Optional[str]:
        """The staged side file (signature) of the output list ``list_path``, or None where
        it gets none (``-``, devices, FIFOs: :func:`signature_path`)."""
        side = signature_path(list_path)
        return None if side is None else self.stage(side)

    def drop_signature(self, list_path: str) -> None:
        """The output list ``list_path`` is written without a signature: a stale
        ``list_path.json`` of an earlier list is removed when the outputs appear (never
        left beside the new list)."""
        side = signature_path(list_path)
        if side is not None:
            self._removals.append(side)

    def stage(self, path: str) -> str:
        """The path to write in place of ``path`` (see the class docstring)."""
        with _signals_deferred():  # Ctrl-C/SIGTERM cannot land between creating the temporary and recording it
            try:
                target = _Target(path)
            except OSError as err:
                raise _user_error(err, path) from None
            self._targets.append(target)
            if target.tmp is not None:
                _LIVE[target.tmp] = target
        return target.write_path

    def open(self, path: str, mode: str = "w", encoding: Optional[str] = "utf-8"):
        """Stage ``path`` and open it for writing (gzip-compressed for ``.gz`` names)."""
        return _open_target(self._get(self.stage(path)), mode, encoding)

    def _get(self, staged: str) -> _Target:
        return next(t for t in self._targets if t.write_path == staged)

    def __enter__(self) -> "StagedOutputs":
        return self

    def _commit(self) -> None:
        umask = _umask()
        for side in self._removals:  # before the new list appears: never beside it
            try:
                os.unlink(side)
            except FileNotFoundError:
                pass
            except OSError as err:
                raise _user_error(err, side) from None
        for target in self._targets:
            try:
                target.commit(umask)
            except OSError as err:
                raise _user_error(err, target.path) from None

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                with _signals_deferred():  # the outputs appear together: Ctrl-C waits for the last rename
                    self._commit()
            elif isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
                failed = next((t for t in self._targets if exc.filename in (t.tmp, t.real)), None)
                if failed is not None or exc.filename is None:
                    where = failed or (self._targets[-1] if self._targets else None)
                    if where is not None:
                        raise _user_error(exc, where.path) from None
        finally:
            for target in self._targets:
                if target.tmp is not None:
                    _LIVE.pop(target.tmp, None)
                target.discard()


@contextlib.contextmanager
def _open_target(target: _Target, mode: str, encoding: Optional[str]) -> Iterator:
    binary = "b" in mode
    if target.stdout:
        stream = sys.stdout.buffer if binary else sys.stdout
        yield stream
        stream.flush()
        return
    try:
        with contextlib.ExitStack() as stack:
            handle: IO
            if target.compress and not binary:
                raw = stack.enter_context(open(target.write_path, "wb"))
                gz = stack.enter_context(gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0))
                handle = stack.enter_context(io.TextIOWrapper(gz, encoding=encoding or "utf-8"))
            elif binary:
                handle = stack.enter_context(open(target.write_path, "wb"))
            else:
                handle = stack.enter_context(open(target.write_path, "w", encoding=encoding or "utf-8"))
            yield handle
    except OSError as err:
        if err.errno in _WRITE_ERRNOS and err.filename in (None, target.tmp, target.real):
            raise _user_error(err, target.path) from None
        raise


@contextlib.contextmanager
def atomic_write(path: str, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator:
    """Open one output ``path`` for writing: text (``encoding``) or binary (``"wb"``),
    gzip-compressed when the name ends in ``.gz``.  No partial output is ever left at
    ``path``: the file appears whole when the body succeeds, and is untouched (old or
    absent) if it raises.  ``-`` is standard output; devices and FIFOs are written
    directly; a path staged by a :class:`StagedOutputs` is written in place.

    Raises:
        InputError: the output cannot be written (disk full, read-only, permission),
            naming ``path`` (the user's path, never a temporary).
    """
    live = _LIVE.get(path)
    if live is not None:  # a StagedOutputs temporary: it is renamed by its owner
        with _open_target(live, mode, encoding) as handle:
            yield handle
        return
    with StagedOutputs() as outputs:
        with _open_target(outputs._get(outputs.stage(path)), mode, encoding) as handle:
            yield handle


@contextlib.contextmanager
def staged_directory(path: str, replace: bool = True, fresh: bool = False) -> Iterator[str]:
    """A directory output (a model, binarised data, a packed system) that appears whole or not
    at all: yields a temporary directory beside ``path`` (``.NAME.XXXXXXXX.partial``, locked
    while it is written, so that a later run sweeps it as stale once its writer is gone, as
    :func:`atomic_write`'s temporaries); leaving the block normally puts it at ``path``, an
    exception (also KeyboardInterrupt or SystemExit) removes it and leaves ``path`` as it was.
    An existing directory at ``path`` is replaced (``replace``: moved aside, the new one put
    in place, the old one removed) or, with ``replace=False``, must be empty.  Relative links
    made inside point the same way from ``path`` (a sibling of it).  ``fresh``: the writer
    makes the directory itself (CTranslate2's converter refuses an existing one): the path
    yielded does not exist yet, inside the locked temporary.

    Raises:
        InputError: ``path`` is a non-empty directory and ``replace`` is False; the directory
            cannot be written (naming ``path``).
    """
    real = os.path.realpath(path)
    parent = os.path.dirname(real)
    try:
        os.makedirs(parent, exist_ok=True)
        _remove_stale(real)
        _restore_previous(real)
        with _signals_deferred():  # the temporary is locked before a signal can leave it unrecorded
            tmp = tempfile.mkdtemp(prefix=_temp_prefix(real), suffix=PARTIAL_SUFFIX, dir=parent)
            fd = os.open(tmp, os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError as err:
        raise _user_error(err, path) from None
    written = os.path.join(tmp, "new") if fresh else tmp
    try:
        yield written
        if fresh and not os.path.isdir(written):
            raise InputError("the directory was not written", path)
    except OSError as err:  # a full disk while writing inside: the user's path, never the temporary's
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)
        inside = _error_inside(err, tmp)
        if inside is not None:
            raise InputError(f"cannot write: {inside}", path) from None
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        os.close(fd)
        raise
    try:
        with _signals_deferred():  # Ctrl-C waits until the new directory is in place
            _restore_previous(real)
            old, mode = None, 0o777 & ~_umask()  # a new directory: what mkdir makes (mkdtemp's is 0700)
            if os.path.isdir(real) and not os.path.islink(real):
                mode = stat.S_IMODE(os.stat(real).st_mode)  # a replaced one keeps its mode
            if os.path.isdir(real) and not os.path.islink(real) and os.listdir(real):
                if not replace:
                    raise InputError("exists and is not an empty directory: refusing to replace it", path)
                old = tempfile.mkdtemp(prefix=_temp_prefix(real), suffix=PREVIOUS_SUFFIX, dir=parent)
                os.replace(real, old)  # the old directory aside: never swept while it is the only copy
            elif os.path.isdir(real) and not os.path.islink(real):
                os.rmdir(real)
            os.chmod(written, mode)
            os.replace(written, real)
            if fresh:
                os.rmdir(tmp)
            if old is not None:
                shutil.rmtree(old, ignore_errors=True)
    except OSError as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _user_error(err, path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        os.close(fd)
