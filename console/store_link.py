"""The session's link to its history store: the ticks' rows queued and written by the I/O
pump (held in memory and retried while the store fails, a write that hangs said and left to
its own task), the checks on the store's file and on the collector that writes it, and the
store's half of the session's close (docs/architecture.md, "History, recording and replay";
docs/reliability.md).

``ConsoleSession`` owns one ``StoreLink``: ``open_store`` opens it, each tick ``queue``s its
rows, the pump writes them (``in_background``), ``close`` writes what is left.
"""

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import socket
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from fleetdeck.console.eventlog import Note
from fleetdeck.console.ingest import Batch
from fleetdeck.console.interruptions import Interruption
from fleetdeck.console.state import Transition as VerdictChange
from fleetdeck.console.store import Store, TickRows, WriterLock
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Event, JobState, JobStatus

log = logging.getLogger("fleetdeck.session")

WRITER_CHECK_S = 2.0
"""How often a console looks whether a collector writes its store (``WriterLock``)."""
STORE_FILE_CHECK_S = 5.0
"""How often the store's path is looked at, to say when it no longer names the file written."""
STORE_FILE_HUNG_S = 10.0
"""A look at the store's path (a stat and a header read, off the event loop) unanswered this
long is said once: a hung NFS mount, whose writes will not get far either."""
STORE_WRITE_HUNG_S = 10.0
"""A store write that has not returned this long is said once (a hung NFS mount under the
store): the I/O pump publishes on without it (``ConsoleSession._pump``), the history is held
in memory."""
STORE_QUEUE_TICKS = 1200
"""Ticks of store writes held while the store fails (10 min at 0.5 s); beyond that the oldest
per-minute samples are dropped, never events, transitions or audit records."""
STORE_RETRY_S = (1.0, 30.0)
STORE_CATCH_UP_CHECKPOINT = 64
"""Held ticks written between WAL checkpoints while a store that failed catches up
(``Store.checkpoint``): the catch-up must not fill the space that was just freed with WAL."""

Problem = Callable[[str, str, float], None]
"""Says a problem of the console's own, what, detail and since when
(``ConsoleSession._problem``)."""
TakeRuns = Callable[[float], list[tuple[str, JobState, int, list[str], JobStatus]]]
"""The job runs changed since the last call (``InterruptionTracker.take_runs``)."""


class Problems(Protocol):
    """The session's problems as the link reads and clears them (``ConsoleSession.problems``)."""

    def __contains__(self, what: object, /) -> bool: ...

    def pop(self, what: str, default: None, /) -> object: ...


class StoreCounters(Protocol):
    """The session's counters the link moves (``SessionCounters``)."""

    store_errors: int
    store_writes: int
    store_dropped_ticks: int


@dataclass
class _StoreQueue:
    rows: deque[TickRows] = field(default_factory=deque)
    failing_since: float | None = None
    last_error: str = ""
    retry_at: float = 0.0
    delay: float = field(default_factory=lambda: STORE_RETRY_S[0])
    caught_up: int = 0
    """Held ticks written since the store came back (the outage is over once none is held)."""


class StoreLink:
    """The store a session writes (or only reads, while a collector writes it), the ticks'
    rows held for it, and the write in flight."""

    def __init__(self, note: Note, problem: Problem, problems: Problems,
                 counters: StoreCounters, clock: Callable[[], float]) -> None:
        self._note = note
        self._problem = problem
        self._problems = problems
        self._counters = counters
        self._clock = clock
        self.store: Store | None = None
        self._writer: WriterLock | None = None
        """A collector's: held while it writes the store (``open(collector=True)``)."""
        self._other_writer: WriterLock | None = None
        """A console's: who else writes its store; while a collector does, it only reads."""
        self.written_by: str | None = None
        """The collector that writes this console's store (its own words), None while none
        does (this console writes it then)."""
        self._writer_checked = -1e9
        self._checked = time.monotonic()
        """When the store's path was last looked at (``check_file``)."""
        self._look: concurrent.futures.Future[str] | None = None
        """That look while it has not answered (``Store.look_gone``): one at a time."""
        self._look_hung = False
        """Whether the look in flight was said not to answer (``STORE_FILE_HUNG_S``)."""
        self.notes: list[Event] = []
        """Lines of the console's own to keep in the store's events (``_log_drains_lost``)."""
        self._q = _StoreQueue()
        self._lock = asyncio.Lock()
        """Store writes, apart from publishes: a write that hangs holds up no command."""
        self._task: asyncio.Task[None] | None = None
        """The pump's store flush in flight (``in_background``)."""
        self._abandoned: asyncio.Task[None] | None = None
        """A store the close gave up on (its write hung), closed once that write returns."""
        self._write_since: float | None = None
        """When the store write in flight began (monotonic), None while none is."""
        self._write_hung = False
        """Whether that write was said not to return (``STORE_WRITE_HUNG_S``)."""
        self._writing: TickRows | None = None
        """The rows that write has (``q.rows[0]``): a full queue merges past it."""

    async def open(self, path: Path, retention_days: float, cluster: str, *,
                   collector: bool) -> Store:
        """Open the SQLite store at ``path`` with its writer's lock (``WriterLock``: a second
        collector is refused); ``ConsoleSession.open_store`` makes it the session's."""
        lock = WriterLock(path)
        if collector:
            lock.take(f"collect pid {os.getpid()} on {socket.gethostname()}")
        try:
            store = await Store.open(path, retention_days, cluster, claim=True)
        except BaseException:
            lock.release()
            raise
        if collector:
            self._writer = lock
        else:
            self._other_writer = lock
            self.check_writer(self._clock(), force=True)
            # Not the link's store yet (``ConsoleSession.open_store`` makes it so once it has
            # restored from it), so ``check_writer`` could not say it: a reader purged the
            # collector's history with its own retention as it wrote its audit.
            store.purging = self.written_by is None
        return store

    async def close(self) -> None:
        """The store's half of the session's close: what is held written, then the store
        closed (``release_writer`` lets go of a collector's lock after)."""
        if self.store is not None:
            # The minute in progress too: a stop (systemd, ^C) must not leave a hole in the
            # history; the next run folds its part of that minute into this one.
            partial = self.store.partial_minutes()
            if partial.gpu or partial.ports:
                self._q.rows.append(partial)
            if not await self.turn():
                # Its write hangs (a hung mount): closing would wait on it too.
                store, self.store = self.store, None
                self._look, self._look_hung = None, False
                # The collector's lock is kept while that write may still land: released
                # here, a second collector started then wrote the same ticks' job minutes
                # too (docs/reliability.md). It goes with the process if the write never
                # returns (the SQLite thread is a daemon: the process still exits).
                writer, self._writer = self._writer, None
                self._abandoned = asyncio.create_task(
                    self._close_after_hung_write(store, writer), name="session-store-hung")
                return
            try:
                self.queue_notes()
                await self.flush(final=True)
                if self.queue_notes():  # said by that flush: "writable again … caught up"
                    await self.flush(final=True)
                # Gone from the session before it closes, and closed under the lock: a pump's
                # write that started between the two (a TUI's unmount sets stop, then closes)
                # wrote into a closing connection (a review).
                store, self.store = self.store, None
                # A look in flight is of the store closed: read against one opened after (a
                # session's store opened again), its answer was taken for that one's.
                self._look, self._look_hung = None, False
                await store.close()
            finally:
                self._lock.release()

    async def _close_after_hung_write(self, store: Store, writer: WriterLock | None) -> None:
        """Close ``store`` once its hung write returns, then let go of the writer's lock:
        only then can no write of this process land in it. Cancelled (the process ends
        first), the lock is left to go with the process."""
        async with self._lock:
            # Queued behind the hung write in the connection's one thread: returned, the
            # thread has nothing of ours left to write.
            with contextlib.suppress(sqlite3.Error, OSError, ValueError):
                await store.close()
        if writer is not None:
            writer.release()

    def release_writer(self) -> None:
        if self._writer is not None:
            self._writer.release()
            self._writer = None

    def queue_notes(self) -> bool:
        """Lines kept since the last tick, as rows of their own (at close: only a tick made
        them rows, and what came after the last one went nowhere)."""
        if not self.notes or self.store is None or self.written_by is not None:
            return False
        self._q.rows.append(self.store.prepare(Batch(), [], self.notes))
        self.notes = []
        return True

    # --- the I/O pump's writes -------------------------------------------------------------------

    async def write_now(self) -> None:
        """Write what is held now (``ConsoleSession.flush``), unless a write that hangs holds
        the store."""
        if await self.turn():
            try:
                await self.flush()
            finally:
                self._lock.release()

    async def turn(self) -> bool:
        """The store's lock within ``STORE_WRITE_HUNG_S``; False while a write that hangs holds
        it (said in the log: what the session holds of history is not written)."""
        if not self._lock.locked():
            return await self._lock.acquire()  # at once: a wait_for of 0 s refuses it
        try:
            await asyncio.wait_for(self._lock.acquire(), self.wait_s())
        except TimeoutError:
            store = self.store
            log.error("history store %s: a write has not returned for %g s; %d tick(s) of "
                      "history held in memory are not written", store and store.path,
                      STORE_WRITE_HUNG_S, len(self._q.rows))
            return False
        return True

    def wait_s(self) -> float:
        """What is left of ``STORE_WRITE_HUNG_S`` for the write in flight, from its start: the
        watch's last flush, the pump's end and the close each waited it whole for the same
        hung write, and a one-shot command's result came three times as late."""
        since = self._write_since
        if since is None:
            return STORE_WRITE_HUNG_S
        return max(0.0, since + STORE_WRITE_HUNG_S - time.monotonic())

    def in_background(self) -> None:
        """The pump's store flush, as a task of its own: awaited in the pump, a write on a
        hung NFS mount held every later publish (a drain never left the console) for as
        long as the mount hung, and nothing said why. Said once when it hangs, and when it
        returns."""
        self.check_file()
        since = self._write_since
        if since is not None and not self._write_hung and self.store is not None:
            waited = time.monotonic() - since
            if waited >= STORE_WRITE_HUNG_S:
                self._write_hung = True
                why = (f"history store {self.store.path}: a write has not returned for "
                       f"{STORE_WRITE_HUNG_S:g} s (a hung network mount?); commands still go "
                       f"out, and the history is held in memory until it returns")
                log.error("%s", why)
                self._problem("store", why, self._clock())
                self._note(why, severity="error", kind="store", keep=True)
        task = self._task
        if task is not None and not task.done():
            return
        if task is not None and not task.cancelled() and task.exception() is not None:
            raise task.exception()  # type: ignore[misc]
        self._task = asyncio.create_task(self._locked_flush(), name="session-store")

    async def _locked_flush(self) -> None:
        async with self._lock:
            await self.flush()

    async def pump_ended(self) -> None:
        """The pump stops: the write in flight ends first (or is left, hung)."""
        task = self._task
        if task is not None and not task.done():
            # Its write ends before the session's close writes after it (cancelled, it left
            # its transaction open); one that hangs is left to its thread, said already.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), self.wait_s())

    # --- the ticks' rows -------------------------------------------------------------------------

    def queue(self, batch: Batch, verdicts: list[VerdictChange], now: float,
              found: list[Interruption], seconds: list[tuple[int, float]],
              left: dict[str, tuple[str, float]],
              cleared: dict[str, tuple[float, frozenset[str]]], take_runs: TakeRuns) -> None:
        if self.store is None:
            return
        q = self._q
        if self.check_writer(now):
            # The collector writes all this: only what this console did itself (its audit).
            take_runs(now)
            self.notes = []
            audit = self.store.prepare_audit()
            if audit.audit:
                q.rows.append(audit)
            return
        rows = self.store.prepare(batch, verdicts, self.notes)
        rows.watched = now
        self.notes = []
        rows.interruptions = [(it.job_id, it.ts, it.cause, ",".join(it.nodes), it.gpus,
                               it.lost_gpu_hours, it.detail) for it in found]
        rows.job_seconds = seconds
        rows.left_jobs = left
        rows.cleared = cleared
        rows.job_runs = [(job_id, st.value, requeues, ",".join(nodes),
                          codec.encode(run).decode(), now)
                         for job_id, st, requeues, nodes, run
                         in take_runs(now)]
        q.rows.append(rows)
        while len(q.rows) > STORE_QUEUE_TICKS:
            # Keep what cannot be had again (events, transitions, audit); drop the oldest
            # per-minute samples, which only thin the history charts. Never the row a write
            # has in flight (the pump's task, a hung mount): merged into the next, its write's
            # return took the merged row off as written, and the ticks merged into it with it.
            at = 1 if q.rows[0] is self._writing else 0
            if at + 1 >= len(q.rows):
                break
            oldest = q.rows[at]
            del q.rows[at]
            q.rows[at] = q.rows[at].merged_after(oldest)
            self._counters.store_dropped_ticks += 1

    def check_writer(self, now: float, force: bool = False) -> bool:
        """Whether a collector writes this console's store (looked at every few seconds);
        the timeline says so when that changes."""
        lock = self._other_writer
        if lock is None:
            return False
        if force or now - self._writer_checked >= WRITER_CHECK_S:
            self._writer_checked = now
            holder = lock.holder()
            if holder != self.written_by:
                path = lock.path.with_suffix("")
                if holder is not None:
                    self._note(f"history store {path} is written by {holder}: this console "
                               "reads it (and writes only its own audit)")
                elif self.written_by is not None:
                    self._note(f"history store {path}: its collector stopped; this console "
                               "writes it now")
                self.written_by = holder
                if self.store is not None:
                    # The collector keeps the store's retention (its --retention-days), not
                    # this console's default: a reader must not purge its history.
                    self.store.purging = holder is None
        return self.written_by is not None

    def check_file(self) -> None:
        """Say once when the store's path no longer names the file written (``Store.gone``):
        NO HISTORY in the header, the sentence in the timeline and the log."""
        store = self.store
        if store is None or "history" in self._problems:
            return
        now = time.monotonic()
        look = self._look
        if look is not None:
            waited = now - self._checked
            if not look.done():
                if not self._look_hung and waited >= STORE_FILE_HUNG_S:
                    self._look_hung = True
                    why = (f"history store {store.path}: the store's file did not answer a "
                           f"stat for {STORE_FILE_HUNG_S:g} s (a hung network mount?); the "
                           "console goes on, and looks again once it answers")
                    log.warning("%s", why)
                    # Kept as the store's other lasting problems are: the store's writes
                    # hold it, and `fleetdeck events` has it once the mount is back.
                    self._note(why, severity="warn", kind="store", keep=True)
                return
            self._look = None
            if self._look_hung:
                self._look_hung = False
                self._note(f"history store {store.path}: the store's file answered again "
                           f"after {waited:.0f} s", kind="store", keep=True)
            try:
                why = look.result()
            except OSError as err:  # as ``Store.gone`` itself: the writes say what is wrong
                log.warning("history store %s: looking at its file: %s", store.path, err)
                why = ""
            if why:
                log.error("%s", why)
                self._problem("history", f"history not kept: {why}", self._clock())
                # Kept as the store's failing writes are: into the file this console has
                # open, where a store moved aside (replaced) or copied off the mount still
                # tells why its rows stop.
                self._note(why, severity="error", kind="store", keep=True)
            return
        if now - self._checked < STORE_FILE_CHECK_S:
            return
        self._checked = now
        # Off the loop: a stat on a hung NFS mount never returns (``Store.look_gone``).
        self._look = store.look_gone()

    async def flush(self, final: bool = False) -> None:
        self.check_file()
        store, q = self.store, self._q
        if store is None or not q.rows:
            return
        now = time.monotonic()
        if not final and q.failing_since is not None and now < q.retry_at:
            return
        while q.rows:
            self._write_since = time.monotonic()
            self._writing = q.rows[0]
            try:
                await store.write_rows(self._writing)
            except (sqlite3.Error, OSError) as err:
                self._writing = None
                self._returned(f"{err}")
                self._counters.store_errors += 1
                q.last_error = f"history store {store.path}: {err}"
                if q.failing_since is None:
                    q.failing_since = now
                    log.error("%s; keeping %d tick(s) in memory and retrying", q.last_error,
                              len(q.rows))
                    # In the timeline too, and kept: the header said it only while it lasted,
                    # and the next morning's `fleetdeck events` showed a gap with no cause.
                    self._note(f"{q.last_error}: history held in memory and retried",
                               severity="error", kind="store", keep=True)
                self._problem("store", q.last_error, self._clock())
                q.retry_at = now + q.delay
                q.delay = min(STORE_RETRY_S[1], q.delay * 2)
                return
            self._writing = None
            self._returned()
            q.rows.popleft()
            self._counters.store_writes += 1
            if q.failing_since is not None:
                q.caught_up += 1
                if q.caught_up % STORE_CATCH_UP_CHECKPOINT == 0:
                    await store.checkpoint()
        if q.failing_since is not None:
            # Said once every held tick is written: said after the first, "caught up" came
            # with ticks still held, and the next failure of the same outage was a new one
            # (an SRE drill on a full disk).
            log.warning("history store writable again after %.0f s; caught up (%d held "
                        "tick(s) written)", now - q.failing_since, q.caught_up)
            self._note(f"history store {store.path} writable again after "
                       f"{now - q.failing_since:.0f} s; caught up ({q.caught_up} held tick(s) "
                       "written)", kind="store", keep=True)
            q.failing_since, q.delay, q.caught_up = None, STORE_RETRY_S[0], 0
            self._problems.pop("store", None)
            # What the catch-up wrote into the WAL goes into the database now, and the WAL
            # gives its space back: below SQLite's own 1,000-page checkpoint it stayed, and
            # a disk that had just been freed filled again under it.
            await store.checkpoint()

    def _returned(self, error: str = "") -> None:
        """A store write returned (done, or failed with ``error``): said when it had been
        said hung. A hung NFS write mostly returns failing (EIO, a stale handle): said
        written, the problem cleared, the failure's own line came right under it."""
        since, self._write_since = self._write_since, None
        if self._write_hung and since is not None and self.store is not None:
            self._write_hung = False
            waited = time.monotonic() - since
            log.warning("history store %s: the write returned after %.0f s%s", self.store.path,
                        waited, f", failing: {error}" if error else "")
            if error:
                # The failure is the store's problem now (``flush``), retried as any.
                self._note(f"history store {self.store.path}: the write returned after "
                           f"{waited:.0f} s, failing: {error}", severity="error", kind="store",
                           keep=True)
                return
            if self._q.failing_since is None:
                self._problems.pop("store", None)
            self._note(f"history store {self.store.path}: the write returned after "
                       f"{waited:.0f} s; the history held is written", kind="store", keep=True)

    @property
    def failing_s(self) -> float | None:
        q = self._q
        return None if q.failing_since is None else time.monotonic() - q.failing_since

    @property
    def backlog(self) -> int:
        return len(self._q.rows)
