"""Progress off a terminal: plain lines, never carriage returns (rerank/progress.py)."""

import io

from tqdm import tqdm

from rerank import progress
from rerank.progress import LineProgress, progress_bar


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_off_a_terminal_each_update_past_the_interval_is_one_line():
    out = io.StringIO()
    bar = LineProgress(range(4), desc="features add", unit="hyp", interval=0.0, file=out)
    assert list(bar) == [0, 1, 2, 3]
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue() and len(lines) == 5  # one per update and the closing line
    assert lines[1].startswith("features add: 2/4 hyp (50 %), ") and "s elapsed" in lines[1]
    assert lines[-1].startswith("features add: 4/4 hyp (100 %), ") and lines[-1].endswith(" s in all")


def test_no_line_before_the_interval_and_none_at_the_end_then():
    out = io.StringIO()
    with LineProgress(total=None, desc="x", unit="sent", interval=3600, file=out) as bar:
        bar.update(5)
    assert out.getvalue() == ""  # quick work stays quiet


def test_unknown_total_says_the_count_and_rate():
    out = io.StringIO()
    bar = LineProgress(desc="generate", unit="batch", interval=0.0, file=out)
    bar.update(3)
    assert out.getvalue().startswith("generate: 3 batch, ") and "left" not in out.getvalue()


def test_progress_bar_picks_tqdm_on_a_terminal_lines_elsewhere_and_nothing_when_disabled(monkeypatch):
    assert isinstance(progress_bar(range(3), desc="d", file=Terminal()), tqdm)
    assert isinstance(progress_bar(range(3), desc="d", file=io.StringIO()), LineProgress)
    silent = progress_bar(range(3), enabled=False)
    assert list(silent) == [0, 1, 2] and silent.disable
    assert progress.LINE_INTERVAL <= 30  # never silent longer than 30 s between updates
