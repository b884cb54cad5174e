"""Blocking reads of a real node, run off the agent's event loop with a deadline.

When a GPU falls off the bus (XID 79) or the driver wedges, ``nvidia-smi`` and NVML calls hang
for many seconds, and a killed ``nvidia-smi`` stuck in the kernel is not reaped either. Read on
the event loop, such a call stopped the whole agent: no telemetry, MQTT keepalive pings late, and
the operator's drain of exactly that node acknowledged only once the read returned (an SRE drill;
docs/reliability.md, "A hung GPU reader"). ``Watched`` runs one reader's calls on a thread of
their own, one at a time, and waits for each at most a deadline.

The threads are daemons, not an executor's: ``concurrent.futures`` and ``asyncio.to_thread``
join their workers at exit, so an agent told to stop while its reader hung would not exit.
"""

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

log = logging.getLogger("fleetdeck.agent")
T = TypeVar("T")


def start_daemon(fn: Callable[[], T], name: str) -> "Future[T]":
    """``fn()`` on a new daemon thread; its outcome in the returned future."""
    fut: Future[T] = Future()

    def run() -> None:
        if not fut.set_running_or_notify_cancel():
            return
        try:
            fut.set_result(fn())
        except BaseException as exc:  # the caller sees it through the future
            fut.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return fut


class Overdue(Exception):
    """A call that has not answered within its deadline (it may still be running)."""

    def __init__(self, what: str, since: float, now: float) -> None:
        self.what = what
        self.waited_s = max(0.0, now - since)
        super().__init__(f"{what}: no answer for {self.waited_s:.0f} s")


class Watched:
    """One reader's calls, on a daemon thread each, one in flight at a time, each waited for
    at most ``deadline_s``.

    A call that overruns raises ``Overdue`` and stays in flight: the next ``call`` waits for it
    (within its own deadline) and starts nothing meanwhile, so a hung driver never collects a
    pile of hung threads. What such a call returns, once it does, is dropped: it read the
    hardware before or during the hang and would be published as if fresh (docs/real-nodes.md,
    "What happens when hardware is missing"); the call after it reads again."""

    def __init__(self, what: str, deadline_s: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.what = what
        self.deadline_s = deadline_s
        self.clock = clock
        self._late: tuple[Future[Any], float] | None = None
        """The call in flight past its deadline, and since when (the clock's time)."""
        self.dropped = 0
        """Late answers dropped."""

    @property
    def hung_since(self) -> float | None:
        """When the call still in flight past its deadline started (None: none is)."""
        if self._late is None or self._late[0].done():
            return None
        return self._late[1]

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, or ``Overdue`` when it (or the late call before it) did not answer in
        time; ``fn``'s own exception is raised as is."""
        end = self.clock() + self.deadline_s
        if self._late is not None:
            fut, since = self._late
            if not _settled(fut, end - self.clock()):
                raise Overdue(self.what, since, self.clock())
            self._late = None
            self.dropped += 1
            log.info("%s answered after %.1f s, past its %g s deadline: what it read is "
                     "dropped, and it is asked again", self.what, self.clock() - since,
                     self.deadline_s)
        started = self.clock()
        fut2: Future[T] = start_daemon(fn, f"fleetdeck {self.what}")
        if not _settled(fut2, end - self.clock()):
            self._late = (fut2, started)
            raise Overdue(self.what, started, self.clock())
        return fut2.result()


def _settled(fut: "Future[Any]", timeout: float) -> bool:
    try:
        fut.exception(timeout=max(0.0, timeout))
    except FutureTimeout:
        return False
    return True
