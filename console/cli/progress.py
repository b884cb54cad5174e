"""Progress of long CLI work (``record``, ``replay --headless``, ``collect`` starting up and
catching up, ``sim`` connecting its agents), always on stderr so ``--json`` and
``--summary-json`` keep stdout to themselves.

On a terminal it is a rich progress bar (a pulse when the total is not known); otherwise plain
lines for logs and CI: one when a quarter of the total is crossed, at most one every
``PLAIN_EVERY_S`` in between, and where it ended. Like git's progress, it shows only once the
work has run for ``$FLEETDECK_PROGRESS_DELAY`` seconds (default 2): what ends sooner prints no
progress at all, so a quick replay's stderr still holds nothing but its warnings. Milestones
(connected, caught up) print whenever they happen.

The work itself reports through plain callbacks (numbers, not rich objects): only front ends
import rich (pyproject's import-linter contracts), so the agent side and the console core stay
free of it.
"""

import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)

PLAIN_EVERY_S = 5.0
QUARTERS = (0.25, 0.5, 0.75)
DELAY_ENV = "FLEETDECK_PROGRESS_DELAY"
DEFAULT_DELAY_S = 2.0


def progress_delay() -> float:
    """Seconds before progress shows: ``$FLEETDECK_PROGRESS_DELAY``, else 2 (a value that is
    not a number of seconds counts as unset)."""
    try:
        value = float(os.environ.get(DELAY_ENV, DEFAULT_DELAY_S))
    except ValueError:
        return DEFAULT_DELAY_S
    return value if value >= 0 else DEFAULT_DELAY_S


class ProgressLine:
    """``with ProgressLine("replay", total=...) as p: p.update(done, detail=...)``."""

    def __init__(self, what: str, total: float | None = None, *, unit: str = "",
                 stream: TextIO | None = None, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 fmt: Callable[[float], str] | None = None,
                 delay_s: float | None = None) -> None:
        self.what = what
        self.total = total
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty() if tty is None else tty
        self.clock = clock
        self.fmt = fmt or (lambda v: f"{v:,.0f}")
        self.delay_s = progress_delay() if delay_s is None else delay_s
        self.started = clock()
        self.done = 0.0
        self.detail = ""
        self.shown = False
        """Whether progress has shown (the delay passed while there was work to show)."""
        self._last_line: float | None = None
        self._quarter = 0
        self._last_text = ""
        self._closed = False
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> "ProgressLine":
        self.started = self.clock()
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self, text: str | None = None) -> None:
        """Stop the bar (left on screen as it last was) or print where it ended, if progress
        has shown; then ``text``, if any. Once: later calls do nothing."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=self.done, total=self.total,
                             detail=self.detail)
            self._bar.stop()
            self._bar = None
        elif self.shown:
            self._line(self._status())
        if text:
            self._print(text)

    # --- reporting -------------------------------------------------------------------------------

    def update(self, done: float, total: float | None = None, detail: str = "") -> None:
        if self._closed:
            return
        self.done = done
        if total is not None:
            self.total = total
        self.detail = detail
        now = self.clock()
        if not self.shown:
            if now - self.started < self.delay_s:
                return
            self.shown = True
            if self.tty:
                self._start_bar()
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, completed=done, total=self.total, detail=detail)
            return
        crossed = False
        if self.total:
            while (self._quarter < len(QUARTERS)
                   and done >= QUARTERS[self._quarter] * self.total):
                self._quarter += 1
                crossed = True
        if crossed or self._last_line is None or now - self._last_line >= PLAIN_EVERY_S:
            self._line(self._status())

    def milestone(self, text: str) -> None:
        """A step worth a line of its own (connected, caught up); above the bar on a TTY."""
        self._print(f"{self.what}: {text}")

    # --- output ------------------------------------------------------------------------------

    def _start_bar(self) -> None:
        console = Console(file=self.stream, stderr=self.stream is sys.stderr)
        self._bar = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TimeElapsedColumn(), TextColumn("{task.fields[detail]}"),
            console=console, transient=False, refresh_per_second=4)
        self._bar.start()
        self._task = self._bar.add_task(self.what, total=self.total, detail=self.detail)

    def _status(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            pct = min(100.0, 100.0 * self.done / self.total)
            text = f"{pct:3.0f}% ({self.fmt(self.done)} of {self.fmt(self.total)}{unit})"
        else:
            text = f"{self.fmt(self.done)}{unit}"
        return f"{self.what}: {text}" + (f", {self.detail}" if self.detail else "")

    def _line(self, text: str) -> None:
        self._last_line = self.clock()
        if text != self._last_text:
            self._last_text = text
            self._print(text)

    def _print(self, text: str) -> None:
        if self._bar is not None:
            self._bar.console.print(text, markup=False, highlight=False)
            return
        print(text, file=self.stream, flush=True)
