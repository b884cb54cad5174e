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
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

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
    """A call that has not answered within its deadline (it may still be running); with
    ``Watched(hung_after_s=…)``, one that has not answered for that long: hung."""

    def __init__(self, what: str, since: float, now: float) -> None:
        self.what = what
        self.waited_s = max(0.0, now - since)
        super().__init__(f"{what}: no answer for {self.waited_s:.0f} s")


class Pending(Exception):
    """A call past the wait of the one who asked, not yet hung (``Watched(hung_after_s=…)``):
    a slow reader, still answering. The asker says what it had instead."""

    def __init__(self, what: str, since: float, now: float) -> None:
        self.what = what
        self.waited_s = max(0.0, now - since)
        super().__init__(f"{what}: no answer for {self.waited_s:.1f} s yet")


@dataclass(frozen=True)
class Answer(Generic[T]):
    value: T
    started: float
    """When the call that read it started (the clock's time): what it read is at most
    ``clock() - started`` old."""
    finished: float = 0.0
    """When that call answered (the clock's time): what it read is at least ``clock() -
    finished`` old. A late answer held while no one asked (an outage) is as old as that, not
    as its start (docs/reliability.md, "A slow GPU reader is not a hung one")."""
    late: bool = False
    """Answered after its asker had stopped waiting, and taken up by the next ask."""


@dataclass
class _Call:
    fut: "Future[Any]"
    started: float
    key: str
    finished: float | None = None
    overdue: bool = False
    """An asker raised ``Overdue`` for it."""
    forgotten: bool = False
    """``Watched.forget``: what it answers is no ask's."""


class Watched:
    """One reader's calls, on a daemon thread each, one in flight at a time, each waited for
    at most ``deadline_s``.

    A call that overruns raises ``Overdue`` and stays in flight: the next ``call`` waits for it
    (within its own deadline) and starts nothing meanwhile, so a hung driver never collects a
    pile of hung threads. What such a call returns, once it does, is dropped: it read the
    hardware before or during the hang and would be published as if fresh (docs/real-nodes.md,
    "What happens when hardware is missing"); the call after it reads again.

    With ``hung_after_s`` (the GPU reader: docs/reliability.md, "A slow GPU reader is not a
    hung one") a call is hung only once in flight that long, whatever the asker's wait: until
    then a call past the wait raises ``Pending``, and what it returns in time is the next
    ask's answer (``Answer.late``), not dropped. nvidia-smi on a loaded eight-GPU node takes
    0.3-1.5 s; at ``--interval 1`` a sample waits 0.75 s, and every read "hung"."""

    def __init__(self, what: str, deadline_s: float,
                 clock: Callable[[], float] = time.monotonic,
                 hung_after_s: float | None = None) -> None:
        self.what = what
        self.deadline_s = deadline_s
        self.clock = clock
        self.patient = hung_after_s is not None
        self.hung_after_s = deadline_s if hung_after_s is None else max(deadline_s,
                                                                        hung_after_s)
        self._flight: _Call | None = None
        """The call in flight past its asker's wait (None: none is)."""
        self.dropped = 0
        """Late answers dropped."""
        self.hung_from: float | None = None
        """When the calls started to hang (the clock's time): the start of the first call that
        counted as hung since ``ask`` last had an answer, or None. Hung: an asker was told
        ``Overdue``, or it answered only after ``hung_after_s`` with no ask meanwhile (an
        outage). A slow call (``Pending``) is not: its reader still answers."""

    @property
    def hung_since(self) -> float | None:
        """When the call still in flight past its deadline started (None: none is); with
        ``hung_after_s``, past that."""
        call = self._flight
        if call is None or call.fut.done():
            return None
        if call.overdue or self.clock() - call.started >= self.hung_after_s:
            return call.started
        return None

    def call(self, fn: Callable[[], T]) -> T:
        """``fn()``, or ``Overdue`` when it (or the late call before it) did not answer in
        time; ``fn``'s own exception is raised as is."""
        return self.ask(fn).value

    def ask(self, fn: Callable[[], T], key: str = "", wait_s: float | None = None) -> Answer[T]:
        """``fn()``'s answer, waited for at most ``wait_s`` (default ``deadline_s``).

        Patient (``hung_after_s``): the answer of the call before, of the same ``key``, that
        came after its asker stopped waiting (``late``) where this one does not answer in
        time; ``Pending`` when neither did and the call in flight is not hung yet; a call
        in flight is waited for at most until it counts as hung (or ``deadline_s`` once it
        does). ``Overdue`` when hung."""
        wait = self.deadline_s if wait_s is None else wait_s
        end = self.clock() + wait
        ready: _Call | None = None
        flight = self._flight
        if flight is not None:
            # Patient: waited for until it counts as hung, or for a deadline once it does.
            until = min(end, max(flight.started + self.hung_after_s,
                                 self.clock() + self.deadline_s)) if self.patient else end
            if not _settled(flight.fut, until - self.clock()):
                raise self._not_yet(flight)
            self._flight = None
            took = (flight.finished or self.clock()) - flight.started
            if self.patient and took < self.hung_after_s:
                if flight.key == key and not flight.forgotten:
                    ready = flight
                else:
                    # Another kind of call's (an inventory's, asked by a read), or one read
                    # before a new inventory (``forget``): read again.
                    self.dropped += 1
            else:
                self.dropped += 1
                self._hung(flight)
                log.info("%s answered after %.1f s, past its %g s deadline: what it read is "
                         "dropped, and it is asked again", self.what, took,
                         self.hung_after_s if self.patient else self.deadline_s)
        started = self.clock()
        call = _Call(start_daemon(fn, f"fleetdeck {self.what}"), started, key)
        call.fut.add_done_callback(lambda _: setattr(call, "finished", self.clock()))
        if _settled(call.fut, end - self.clock()):
            self.hung_from = None  # it answered, if only with the reader's own error
            return Answer(call.fut.result(), call.started, call.finished or self.clock())
        self._flight = call
        if ready is not None:
            self.hung_from = None
            return Answer(ready.fut.result(), ready.started,
                          ready.finished or self.clock(), late=True)
        raise self._not_yet(call)

    def forget(self) -> None:
        """What the call in flight now answers is dropped, not a later ask's: the GPU reader's
        new inventory (a reconnect's) follows what it read (agents/real/source.py)."""
        if self._flight is not None:
            self._flight.forgotten = True

    def _not_yet(self, call: _Call) -> Exception:
        now = self.clock()
        if not self.patient or now - call.started >= self.hung_after_s:
            call.overdue = True
            self._hung(call)
            return Overdue(self.what, call.started, now)
        return Pending(self.what, call.started, now)

    def _hung(self, call: _Call) -> None:
        if self.hung_from is None or call.started < self.hung_from:
            self.hung_from = call.started


def _settled(fut: "Future[Any]", timeout: float) -> bool:
    try:
        fut.exception(timeout=max(0.0, timeout))
    except FutureTimeout:
        return False
    return True
