"""Log records while the console owns the terminal. Written to stderr they land on top of the
screen (over the header and its connection state, until something repaints it), so the console
sends them to a log file (``FleetdeckApp.log_path``) and shows the warnings among its own
notifications, a logger at most once a ``NOTICE_EVERY_S``. The broker connection's own records
(``transport.LINK_STATE``) are not shown: the header says "disconnected" with the reason."""

import asyncio
import contextlib
import logging
import threading
import time
from pathlib import Path
from typing import Any, Literal

from textual.app import App

from fleetdeck.console.commands import clip_words
from fleetdeck.console.tui.text import esc

NOTICE_EVERY_S = 60.0
NOTICE_CHARS = 200


class NoticeHandler(logging.Handler):
    """WARNING and above as console notifications. Made on the app's event loop (``on_mount``);
    records from other threads are handed to that loop."""

    def __init__(self, app: App[Any], log_path: Path | None) -> None:
        super().__init__(logging.WARNING)
        self.app = app
        self.log_path = log_path
        """Where the same records are written in full (said in the notice), if anywhere."""
        self.count = 0
        """Records seen, shown or not (the front end says so on exit)."""
        self._shown_at: dict[str, float] = {}
        self._thread = threading.get_ident()
        self._loop = asyncio.get_running_loop()

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1
        if getattr(record, "link_state", False):
            # The header says "disconnected" and why, the timeline when it came back: a toast
            # a minute said it again over the last-events panel (a 3 a.m. drive).
            return
        now = time.monotonic()
        last = self._shown_at.get(record.name)
        if last is not None and now - last < NOTICE_EVERY_S:
            return
        self._shown_at[record.name] = now
        try:
            text = record.getMessage()
        except (TypeError, ValueError):  # a bad format string: the raw one still says something
            text = str(record.msg)
        where = f"  (more in {self.log_path})" if self.log_path is not None else ""
        # Cut between words with an ellipsis, as the command toasts are.
        message = esc(f"{record.name}: {clip_words(text, NOTICE_CHARS)}{where}")
        severity: Literal["warning", "error"] = (
            "error" if record.levelno >= logging.ERROR else "warning")
        if threading.get_ident() == self._thread:
            self.app.notify(message, severity=severity, timeout=8)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app has ended
            self._loop.call_soon_threadsafe(
                lambda: self.app.notify(message, severity=severity, timeout=8))
