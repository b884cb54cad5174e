"""systemd notifications (READY, WATCHDOG, STATUS, STOPPING) via the ``sdnotify`` library.

A no-op outside systemd (no ``NOTIFY_SOCKET``), so the same agent runs by hand and as a service.
"""

import asyncio
import contextlib
import os
import time
from collections.abc import Callable

import sdnotify


class Notifier:
    def __init__(self) -> None:
        self.enabled = bool(os.environ.get("NOTIFY_SOCKET"))
        self._sd = sdnotify.SystemdNotifier() if self.enabled else None
        usec = os.environ.get("WATCHDOG_USEC", "")
        self.watchdog_s = int(usec) / 1e6 if usec.isdigit() else None
        self.ready_sent = False

    def send(self, line: str) -> None:
        if self._sd is not None:
            self._sd.notify(line)

    def ready(self, status: str) -> None:
        if not self.ready_sent:
            self.ready_sent = True
            self.send(f"READY=1\nSTATUS={status}")

    def status(self, text: str) -> None:
        self.send(f"STATUS={text}")

    def stopping(self) -> None:
        self.send("STOPPING=1")

    async def watchdog(self, last_progress: Callable[[], float], stop: asyncio.Event,
                       interval_s: float = 0.0) -> None:
        """Ping at half the watchdog period while the main loop keeps making progress.

        The loop reports progress both while publishing and while waiting to reconnect, so a
        broker outage does not get the agent killed; a hung loop (NVML call stuck, event loop
        blocked) stops the pings and systemd restarts the agent. Progress comes once per
        sample, so a sample ``interval_s`` apart is no hang: an agent on ``--interval 45``
        under ``WatchdogSec=30`` was killed between samples (a newcomer's run).
        """
        if self.watchdog_s is None or self._sd is None:
            return
        period = self.watchdog_s / 2
        allowed = self.watchdog_s + interval_s
        while not stop.is_set():
            if time.monotonic() - last_progress() < allowed:
                self.send("WATCHDOG=1")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), period)
