"""Progress of long work: a tqdm bar on a terminal, a plain line every few seconds
elsewhere (a log file, a pipe, a cluster job's output), so that long work is never
silent for more than :data:`LINE_INTERVAL` seconds between updates off a terminal and
logs do not fill with carriage returns.

Every bar of the project comes from :func:`progress_bar`; ``enabled=False`` (a library
caller that asked for no progress) gives a silent one.  Work deep inside a library call (a
COMET model encoding the texts of an MBR run or of the tuner's first pass) shows its bar when
:func:`showing` is on: the command line turns it on for every verb, the Python API stays quiet
unless the caller turns it on (``with rerank.progress.showing(): …``).
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from typing import Any, Dict, Iterable, Iterator, Optional

from tqdm import tqdm

#: seconds between two progress lines off a terminal
LINE_INTERVAL = 10.0

_SHOWING: contextvars.ContextVar[bool] = contextvars.ContextVar("rerank_progress_showing", default=False)


def showing_progress() -> bool:
    """Whether work deep inside a call shows its progress (:func:`showing`)."""
    return _SHOWING.get()


@contextlib.contextmanager
def showing(on: bool = True) -> Iterator[None]:
    """A block in which long work deep inside library calls shows progress bars (the command
    line's verbs run in one; the API's calls are quiet outside one)."""
    token = _SHOWING.set(on)
    try:
        yield
    finally:
        _SHOWING.reset(token)


class LineProgress:
    """A tqdm-like counter that writes one line per ``interval`` seconds to stderr:
    ``DESC: 1200/5000 sent (24 %), 95.3 sent/s, 12 s elapsed, ~40 s left`` (the total,
    percentage and estimate only where the total is known), and a closing line when it
    printed anything before.  Supports iteration, :meth:`update`, :meth:`close` and ``with``.
    """

    def __init__(
        self,
        iterable: Optional[Iterable] = None,
        total: Optional[float] = None,
        desc: str = "",
        unit: str = "it",
        interval: float = LINE_INTERVAL,
        file: Any = None,
    ):
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total, self.desc, self.unit = total, desc, unit.strip() or "it"
        self.interval, self.file = interval, file
        self.n: float = 0
        self.start = self.last = time.monotonic()
        self.lines = 0
        self.closed = False

    def __iter__(self) -> Iterator:
        for item in self.iterable or ():
            yield item
            self.update(1)
        self.close()

    def __enter__(self) -> "LineProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def line(self) -> str:
        """The progress line as it stands."""
        elapsed = time.monotonic() - self.start
        rate = self.n / elapsed if elapsed > 0 else 0.0
        done = f"{self.n:g}"
        if self.total:
            done += f"/{self.total:g} {self.unit} ({100.0 * self.n / self.total:.0f} %)"
        else:
            done += f" {self.unit}"
        text = f"{self.desc}: {done}, {rate:.1f} {self.unit}/s, {elapsed:.0f} s elapsed"
        if self.total and rate > 0 and self.n < self.total:
            text += f", ~{(self.total - self.n) / rate:.0f} s left"
        return text

    def _write(self, text: str) -> None:
        print(text, file=self.file or sys.stderr, flush=True)
        self.lines += 1

    def update(self, n: float = 1) -> None:
        """``n`` more units done; a line when :attr:`interval` seconds have passed since the last."""
        self.n += n
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self._write(self.line())

    def close(self) -> None:
        """The last line (``… in all``), if any line was written."""
        if not self.closed and self.lines:
            self._write(self.line().replace(" elapsed", " in all"))
        self.closed = True

    # the tqdm methods some callers use
    def set_description(self, desc: str) -> None:
        """tqdm's: the name at the start of each line."""
        self.desc = desc

    def refresh(self) -> None:
        """tqdm's: nothing to redraw (lines are written as they come)."""


def progress_bar(
    iterable: Optional[Iterable] = None,
    total: Optional[float] = None,
    desc: str = "",
    unit: str = "it",
    enabled: bool = True,
    leave: bool = False,
    mininterval: float = 2.0,
    file: Any = None,
):
    """A progress bar over ``iterable`` (or updated by hand): tqdm when stderr is a
    terminal, :class:`LineProgress` otherwise, silent when ``enabled`` is False.  Use it
    as the iterable, or call ``update(n)`` and ``close()``."""
    stream = file or sys.stderr
    if not enabled:
        return tqdm(iterable, total=total, disable=True)
    if getattr(stream, "isatty", lambda: False)():
        return tqdm(iterable, total=total, desc=desc, unit=unit, leave=leave, mininterval=mininterval, file=stream)
    return LineProgress(iterable, total, desc, unit, file=file)


class Stages:
    """Seconds spent per named stage of a long job (mbrs' ``timer``): :meth:`measure` a block,
    or :meth:`timed` the iteration of a stream (the reading of a list).  ``seconds``:
    {stage: seconds}, in first-measured order; ``counts``: {stage: items}, of the stages
    measured with a count (texts encoded, pairs estimated)."""

    def __init__(self) -> None:
        self.seconds: Dict[str, float] = {}
        self.counts: Dict[str, int] = {}

    @contextlib.contextmanager
    def measure(self, stage: str, count: Optional[int] = None) -> Iterator[None]:
        """Add the seconds of the ``with`` block to ``stage`` (and ``count`` items, if given)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - began
            if count is not None:
                self.counts[stage] = self.counts.get(stage, 0) + count

    def timed(self, items: Iterable, stage: str) -> Iterator:
        """``items`` as they come, the seconds of producing each added to ``stage``."""
        stream = iter(items)
        while True:
            with self.measure(stage):
                try:
                    item = next(stream)
                except StopIteration:
                    return
            yield item

    def rounded(self, digits: int = 3) -> Dict[str, float]:
        """{stage: seconds} rounded (for records)."""
        return {stage: round(value, digits) for stage, value in self.seconds.items()}
