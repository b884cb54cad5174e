"""The console's history in SQLite (WAL): verdict transitions, events, command audit, and
telemetry downsampled to one row per GPU and per port per minute.

Written once per tick in one transaction (never per message), read by ``fleetdeck events``,
``fleetdeck history`` and by a restarting console to restore its picture. WAL with
``synchronous=NORMAL`` means a crash (even ``kill -9``) loses at most the last transaction and
never corrupts the database (tests/store/test_store.py kills a writer mid-write).
"""

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiosqlite
import msgspec

from fleetdeck.console.audit import AuditRecord
from fleetdeck.console.eventlog import RETIRE_KIND
from fleetdeck.console.health import (
    FATAL_WINDOW_S,
    KnownInventory,
    Verdict,
    inventory_shrink,
)
from fleetdeck.console.ingest import BDSEQ_FUTURE_S, Batch
from fleetdeck.console.interruptions import read_detail
from fleetdeck.console.judgements import listed
from fleetdeck.console.state import RECUR_S, FleetState, Transition
from fleetdeck.errors import UserError
from fleetdeck.hostlist import HostlistError, expand
from fleetdeck.paths import not_a_file_to_write, state_base, unreadable
from fleetdeck.protocol import codec, fast, wire2
from fleetdeck.protocol.ids import is_valid_id
from fleetdeck.protocol.messages import RESUMED, TS_MS_MAX, Event, JobState, JobStatus

log = logging.getLogger("fleetdeck.store")

SCHEMA_VERSION = 6
"""2: ``gpu_minutes``/``port_minutes`` gained ``partial`` (``Store._add_partial_columns``);
3: ``left_jobs`` (a new table: an older store gains it when opened); 4: ``transitions`` gained
``seen`` (``Store._migrate``); 5: ``inventories`` (a new table); 6: ``cleared_faults`` (a new
table)."""
DEFAULT_RETENTION_DAYS = 7.0
SPELL = (Verdict.OFFLINE.value, Verdict.STALE.value)
"""Verdicts of a node's liveness alone (``NodeState._verdict_changed``, ``restore``)."""

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transitions (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, node TEXT NOT NULL, old TEXT, new TEXT NOT NULL,
    reasons TEXT NOT NULL, seen INTEGER);
CREATE INDEX IF NOT EXISTS transitions_node_ts ON transitions (node, ts);
CREATE INDEX IF NOT EXISTS transitions_ts ON transitions (ts);
CREATE TABLE IF NOT EXISTS events (
    event_id TEXT PRIMARY KEY, ts REAL NOT NULL, node TEXT NOT NULL, kind TEXT NOT NULL,
    severity TEXT NOT NULL, component TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS events_ts ON events (ts);
CREATE INDEX IF NOT EXISTS events_node_ts ON events (node, ts);
CREATE TABLE IF NOT EXISTS audit (
    request_id TEXT NOT NULL, outcome TEXT NOT NULL, ts REAL NOT NULL, who TEXT NOT NULL,
    what TEXT NOT NULL, targets TEXT NOT NULL, why TEXT NOT NULL, cluster TEXT NOT NULL,
    detail TEXT NOT NULL, args TEXT NOT NULL, PRIMARY KEY (request_id, outcome));
CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts);
CREATE TABLE IF NOT EXISTS gpu_minutes (
    node TEXT NOT NULL, gpu INTEGER NOT NULL, minute INTEGER NOT NULL, samples INTEGER NOT NULL,
    util REAL, temp_max REAL, power REAL, sm_clock_min REAL, present INTEGER NOT NULL,
    partial INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (node, gpu, minute)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS interruptions (
    job_id TEXT NOT NULL, ts REAL NOT NULL, cause TEXT NOT NULL, nodes TEXT NOT NULL,
    gpus INTEGER NOT NULL, lost_gpu_hours REAL NOT NULL, detail TEXT NOT NULL,
    PRIMARY KEY (job_id, ts));
CREATE INDEX IF NOT EXISTS interruptions_ts ON interruptions (ts);
CREATE TABLE IF NOT EXISTS job_minutes (
    minute INTEGER PRIMARY KEY, gpu_seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS job_runs (
    job_id TEXT PRIMARY KEY, state TEXT NOT NULL, requeues INTEGER NOT NULL,
    nodes TEXT NOT NULL, run TEXT NOT NULL, ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS port_minutes (
    node TEXT NOT NULL, dev TEXT NOT NULL, minute INTEGER NOT NULL, samples INTEGER NOT NULL,
    xmit_Bps REAL, rcv_Bps REAL, symbol_errors INTEGER NOT NULL, link_downed INTEGER NOT NULL,
    down_samples INTEGER NOT NULL, partial INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node, dev, minute)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS port_minutes_errors ON port_minutes (minute)
    WHERE symbol_errors > 0 OR link_downed > 0;
CREATE TABLE IF NOT EXISTS left_jobs (
    node TEXT PRIMARY KEY, job_id TEXT NOT NULL, ts REAL NOT NULL);
CREATE TABLE IF NOT EXISTS inventories (
    node TEXT NOT NULL, inventory TEXT NOT NULL, ts REAL NOT NULL,
    PRIMARY KEY (node, inventory)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS cleared_faults (
    node TEXT PRIMARY KEY, ts REAL NOT NULL, parts TEXT NOT NULL);
"""

STORE_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", SCHEMA))
RESTORED_TABLES = {
    "left_jobs": "the job each node last left (a failed job's nodes requeued elsewhere)",
    "inventories": "what each node's GPUs and ports were (a GPU lost before the restart)",
    "cleared_faults": "each node's last cleared fault (a repair that did not hold)"}
"""Tables newer schemas added that ``restore`` reads, and what a console lacks without each
(schema 3, 5, 6)."""


def _upsert(table: str, key: str, means: tuple[str, ...], maxes: tuple[str, ...],
            mins: tuple[str, ...], sums: tuple[str, ...], partial: bool) -> str:
    """The insert of a minute row: it replaces a whole minute already there (two collectors
    on one store write the same minute), but folds into a *partial* one (the part a collector
    wrote as it stopped), so a restart within a minute keeps both parts of it."""
    n = "(samples + excluded.samples)"
    sets = ["samples = CASE WHEN partial THEN samples + excluded.samples "
            "ELSE excluded.samples END"]
    for c in means:
        sets.append(f"{c} = CASE WHEN NOT partial OR {c} IS NULL THEN excluded.{c} "
                    f"WHEN excluded.{c} IS NULL THEN {c} "
                    f"ELSE ({c} * samples + excluded.{c} * excluded.samples) / {n} END")
    for fn, cols in (("max", maxes), ("min", mins)):
        for c in cols:
            sets.append(f"{c} = CASE WHEN NOT partial THEN excluded.{c} "
                        f"ELSE {fn}(COALESCE({c}, excluded.{c}), "
                        f"COALESCE(excluded.{c}, {c})) END")
    for c in sums:
        sets.append(f"{c} = CASE WHEN NOT partial THEN excluded.{c} "
                    f"ELSE {c} + excluded.{c} END")
    sets.append("partial = excluded.partial")
    return (f"INSERT INTO {table} VALUES ({'?,' * 9}{int(partial)}) "
            f"ON CONFLICT (node, {key}, minute) DO UPDATE SET {', '.join(sets)}")


_GPU_UPSERT = {partial: _upsert("gpu_minutes", "gpu", ("util", "power"), ("temp_max",),
                                ("sm_clock_min", "present"), (), partial)
               for partial in (False, True)}
_PORT_UPSERT = {partial: _upsert("port_minutes", "dev", ("xmit_Bps", "rcv_Bps"), (), (),
                                 ("symbol_errors", "link_downed", "down_samples"), partial)
                for partial in (False, True)}


SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first bytes of every SQLite database file."""


def default_db_path(cluster: str) -> Path:
    return state_base() / f"{cluster}.db"


@dataclass
class _GpuAcc:
    samples: int = 0
    util: float = 0.0
    util_n: int = 0
    power: float = 0.0
    power_n: int = 0
    temp_max: float | None = None
    clock_min: float | None = None
    present: bool = True


@dataclass
class _PortAcc:
    samples: int = 0
    xmit: float = 0.0
    rcv: float = 0.0
    rate_n: int = 0
    symbol_errors: int = 0
    link_downed: int = 0
    down: int = 0


class Downsampler:
    """Folds telemetry into per-minute aggregates; emits a minute once it is over, or, marked
    partial, when the collector stops (``drain``)."""

    def __init__(self) -> None:
        self.minute: dict[str, int] = {}
        # Per node, so closing one node's minute touches only that node's accumulators.
        self.gpus: dict[str, dict[int, _GpuAcc]] = {}
        self.ports: dict[str, dict[str, _PortAcc]] = {}
        self._counters: dict[tuple[str, str], tuple[int, int]] = {}

    def add(self, t: wire2.Sample, rx: float | None = None
            ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """``t`` received at ``rx`` (this console's clock): a sample stamped more than
        ``BDSEQ_FUTURE_S`` past it counts in the minute of its arrival, as the ingest keeps such
        an event (console/ingest.py). Its own stamp (a node a year ahead, T1) made minutes a
        year in the future: the newest of its ``history`` and past the retention's purge for
        that year."""
        node = t.node
        minute = t.ts // 60_000
        if rx is not None and t.ts > (rx + BDSEQ_FUTURE_S) * 1000:
            minute = int(rx // 60)
        gpu_rows: list[tuple[Any, ...]] = []
        port_rows: list[tuple[Any, ...]] = []
        if self.minute.get(node, minute) != minute:
            gpu_rows, port_rows = self._emit(node)
        self.minute[node] = minute
        gaccs = self.gpus.setdefault(node, {})
        paccs = self.ports.setdefault(node, {})
        if type(t) is wire2.Pending and not t.built:
            # A quiet v2 sample: its columns, without building its rows for this.
            gpus: Iterable[tuple[Any, ...]] = zip(
                *map(t.gpu_column, ("index", "present", "util_pct", "power_w", "temp_c",
                                    "sm_clock_mhz")), strict=True)
            ports: Iterable[tuple[Any, ...]] = zip(
                *map(t.port_column, ("dev", "xmit_Bps", "rcv_Bps", "state", "symbol_error",
                                     "link_downed")), strict=True)
        else:
            gpus = ((g.index, g.present, g.util_pct, g.power_w, g.temp_c, g.sm_clock_mhz)
                    for g in t.gpus)
            ports = ((p.dev, p.xmit_Bps, p.rcv_Bps, p.state, p.symbol_error, p.link_downed)
                     for p in t.ib_ports)
        for index, present, util, power, temp, clock in gpus:
            acc = gaccs.get(index)
            if acc is None:
                acc = gaccs[index] = _GpuAcc()
            acc.samples += 1
            acc.present = acc.present and present
            if util is not None:
                acc.util += util
                acc.util_n += 1
            if power is not None:
                acc.power += power
                acc.power_n += 1
            if temp is not None:
                acc.temp_max = temp if acc.temp_max is None else max(acc.temp_max, temp)
            if clock is not None:
                acc.clock_min = clock if acc.clock_min is None else min(acc.clock_min, clock)
        for dev, xmit, rcv, state, sym_total, downed_total in ports:
            key = (node, dev)
            pacc = paccs.get(dev)
            if pacc is None:
                pacc = paccs[dev] = _PortAcc()
            pacc.samples += 1
            if xmit is not None and rcv is not None:
                pacc.xmit += xmit
                pacc.rcv += rcv
                pacc.rate_n += 1
            if state is not None and state != "ACTIVE":
                pacc.down += 1
            sym, downed = sym_total or 0, downed_total or 0
            prev = self._counters.get(key)
            if prev is not None:
                pacc.symbol_errors += max(0, sym - prev[0])
                pacc.link_downed += max(0, downed - prev[1])
            self._counters[key] = (sym, downed)
        return gpu_rows, port_rows

    def drain(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        """Every node's minute in progress, marked partial: a stop must not lose it (a minute
        is otherwise emitted only when a sample of the next one arrives)."""
        gpu_rows: list[tuple[Any, ...]] = []
        port_rows: list[tuple[Any, ...]] = []
        for node in list(self.minute):
            g, p = self._emit(node)
            gpu_rows += g
            port_rows += p
        self.minute.clear()
        return gpu_rows, port_rows

    def _emit(self, node: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
        minute = self.minute[node]
        gpu_rows = []
        for index, a in self.gpus.pop(node, {}).items():
            gpu_rows.append((node, index, minute, a.samples,
                             a.util / a.util_n if a.util_n else None, a.temp_max,
                             a.power / a.power_n if a.power_n else None, a.clock_min,
                             int(a.present)))
        port_rows = []
        for dev, p in self.ports.pop(node, {}).items():
            port_rows.append((node, dev, minute, p.samples,
                              p.xmit / p.rate_n if p.rate_n else None,
                              p.rcv / p.rate_n if p.rate_n else None,
                              p.symbol_errors, p.link_downed, p.down))
        return gpu_rows, port_rows


TRANSITION_DEDUP_S = 5.0
"""The same verdict change of a node within this long is one change (several collectors)."""


class StoreError(UserError):
    """The store cannot be opened or used (one sentence for the operator)."""


class WriterLock:
    """``<store>.writer``: held (``flock``, exclusive) by a collector for as long as it runs, so
    that a console on the same store knows it is written already and only reads it.

    ``collect`` and ``console`` both default to ``$XDG_STATE_HOME/fleetdeck/<cluster>.db``:
    with both running, every job interruption was written twice (each with its own time) and
    the GPU-seconds held by jobs were summed twice (a 3 a.m. drive: ``report`` listed six
    interruptions for three). The lock goes with its process, however it ends (SIGKILL too),
    so nothing stale is left to clear by hand."""

    def __init__(self, store: Path) -> None:
        # Beside the file the path leads to: a symlink to a store took a lock of its own, and
        # a second collector wrote the store through it (an SRE drill). Hard links are other
        # names of the file, each with its own lock: one collector per store still means one
        # path to it (docs/reliability.md).
        store = Path(os.path.realpath(store))
        self.path = store.with_name(store.name + ".writer")
        self._fd: int | None = None

    def take(self, who: str) -> None:
        """Hold the lock, or raise ``StoreError`` naming who holds it."""
        fd = self._open()
        for attempt in range(10):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                # A console's look (``holder``) holds it shared for a moment: try again
                # for 0.1 s before calling it another collector's.
                if attempt < 9:
                    time.sleep(0.01)
        else:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreError(f"another collector writes the history store "
                             f"{self.path.with_suffix('')} ({holder}): one collector per "
                             f"store; give this one its own --db.") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, who.encode(), 0)
        self._fd = fd

    def holder(self) -> str | None:
        """Who holds the lock now (its process's own words), or None when no one does."""
        try:
            fd = os.open(self.path, os.O_RDONLY)  # none there: no collector ever held it
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_holder(fd)
        finally:
            os.close(fd)  # closing it drops a shared lock taken just now
        return None

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)  # no stale name for the next holder's refusals
            os.close(self._fd)
            self._fd = None

    def _open(self) -> int:
        # Before the store itself (a refused collector must not touch it): its folder may not
        # exist yet on a first run. A folder that cannot be made is said by the open below.
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise StoreError(f"cannot open the history store {self.path.with_suffix('')}: "
                             f"{err.strerror or err}.") from None


def _daemon(db: aiosqlite.Connection) -> aiosqlite.Connection:
    """``db`` with its worker thread made a daemon, before it starts. aiosqlite's is not one:
    the interpreter joins it at exit, so a console or collector whose store write hung (its
    file on an NFS mount whose server went away) never exited, SIGTERMed or quit, after its
    close had given up on the write and said the ticks not written (docs/reliability.md).
    A daemon thread is left in its call at exit; what it had not committed is not written."""
    thread = getattr(db, "_thread", db)  # aiosqlite < 0.20: the connection is the thread
    if isinstance(thread, threading.Thread):
        thread.daemon = True
    return db


def path_problem(path: Path) -> str:
    """The sentence for a store path that is no file this user may read ('' for one that is,
    or none yet): SQLite said "unable to open database file" of a directory and of a file
    the user may not read alike, and a console opened its screen on either, keeping no
    history (checked before it opens, as its audit log is)."""
    why = not_a_file_to_write(path)
    if why:
        return f"the history store {path} {why} (give --db a store file)."
    if not os.path.exists(path):
        return ""  # none yet, or a link to none yet: SQLite makes it
    why = unreadable(path)
    return f"cannot open the history store {path}: {why}." if why else ""


def _unusable(path: Path, err: sqlite3.Error) -> str:
    """The sentence for a store SQLite opened but cannot use, with the advice that fits: a
    locked or damaged store was told to check that its folder is writable (an SRE drill)."""
    code = (getattr(err, "sqlite_errorcode", None) or 0) & 0xFF  # the primary code
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
        return (f"the history store {path} is locked: another process has held a write "
                "transaction on it for over 5 s; let it finish, or give this one its own --db.")
    if code == sqlite3.SQLITE_NOTADB:
        return (f"{path} is not a SQLite database, so not a fleetdeck history store: give "
                "--db a new file or a store fleetdeck wrote.")
    if code == sqlite3.SQLITE_CORRUPT:
        return (f"the history store {path} is damaged ({err}): move it aside and start with "
                "a new --db ('sqlite3 FILE .recover' saves what can still be read).")
    read_only = _read_only(path)
    if read_only:
        # SQLite's "unable to open database file" and a question beside a collector's plain
        # "Read-only file system" for the same folder (a failure drill on a read-only mount).
        return (f"cannot use the history store {path}: {read_only}, and SQLite writes beside "
                "the store (its -wal and -shm files) even to read it; give --db a file in a "
                "writable folder.")
    return (f"cannot use the history store {path}: {err} (is the folder writable, and the "
            "file a fleetdeck store?).")


def _read_only(path: Path) -> str:
    """Why ``path``'s store cannot be written, where the file system says: its folder is on a
    read-only mount, or this user may not write it or the file; '' where it may."""
    folder = path.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "its folder is on a read-only file system"
    except OSError:
        return ""
    if not os.access(folder, os.W_OK | os.X_OK):
        return "its folder is not writable by this user"
    if path.exists() and not os.access(path, os.W_OK):
        return "the file is read-only to this user"
    return ""


def _audit_row(a: AuditRecord) -> tuple[Any, ...]:
    return (a.request_id, a.outcome, a.ts, a.who, a.what, a.targets, a.why, a.cluster,
            a.detail, json.dumps(a.args))


def _read_holder(fd: int) -> str:
    return os.pread(fd, 200, 0).decode(errors="replace").strip() or "a collector"


@dataclass
class TickRows:
    """One tick's rows, ready to write (kept in memory while the store cannot be written)."""

    transitions: list[tuple[Any, ...]] = field(default_factory=list)
    events: list[tuple[Any, ...]] = field(default_factory=list)
    audit: list[tuple[Any, ...]] = field(default_factory=list)
    gpu: list[tuple[Any, ...]] = field(default_factory=list)
    ports: list[tuple[Any, ...]] = field(default_factory=list)
    interruptions: list[tuple[Any, ...]] = field(default_factory=list)
    job_seconds: list[tuple[int, float]] = field(default_factory=list)
    job_runs: list[tuple[Any, ...]] = field(default_factory=list)
    """Each changed job's run (``InterruptionTracker.take_runs``), the latest last."""
    left_jobs: dict[str, tuple[str, float]] = field(default_factory=dict)
    """Node -> (job id, time) of the latest job its telemetry stopped naming
    (``FleetState.jobs_left``): one a node, so rows held while the store fails stay bounded
    by the fleet."""
    cleared: dict[str, tuple[float, frozenset[str]]] = field(default_factory=dict)
    """Node -> when it last cleared a failure, and the failure's parts
    (``FleetState.take_faults_cleared``): one a node, like ``left_jobs``."""
    inventories: list[tuple[str, str, float]] = field(default_factory=list)
    """(node, inventory, birth time) of each birth heard (``inventory_row``)."""
    retired: list[str] = field(default_factory=list)
    """Nodes retired this tick (the console's retire line): their ``inventories`` go."""
    partial: bool = False
    """``gpu``/``ports`` are minutes still in progress (written as a collector stops)."""
    watched: float | None = None
    """The tick's time: the store keeps the latest as ``watched_until`` (``Store.watched``)."""

    def merged_after(self, older: "TickRows") -> "TickRows":
        """These rows plus what cannot be had again of ``older`` (its per-minute samples are
        dropped: they only thin the history charts)."""
        return TickRows(older.transitions + self.transitions, older.events + self.events,
                        older.audit + self.audit, self.gpu, self.ports,
                        older.interruptions + self.interruptions,
                        older.job_seconds + self.job_seconds,
                        older.job_runs + self.job_runs, older.left_jobs | self.left_jobs,
                        older.cleared | self.cleared,
                        [r for r in older.inventories if r[0] not in self.retired]
                        + self.inventories, older.retired + self.retired,
                        watched=self.watched)


class Store:
    def __init__(self, db: aiosqlite.Connection, path: Path, retention_days: float) -> None:
        self.db = db
        self.path = path
        self.retention_s = retention_days * 86400
        self.down = Downsampler()
        self._audit: list[AuditRecord] = []
        self._recalled: dict[str, str] = {}
        """Each node's verdict as ``restore`` put it back, until its first transition is written
        (``prepare``)."""
        self._last_purge = time.monotonic()
        self.writes = 0
        self.write_ms = 0.0
        self.cluster: str | None = None
        """The cluster the store holds (``meta``), None for one no writer has named yet."""
        self.restore_skipped: dict[str, int] = {}
        """Rows the last ``restore`` skipped as unreadable, by table (a store written by an
        older version, damaged or edited by hand): logged once, never put into the state."""
        self.missing: frozenset[str] = frozenset()
        """Tables a newer schema added that this store lacks: an older store this user may not
        write (``_make_tables``), read as it is; ``restore`` reads around them."""
        self.schema: str | None = None
        """The store's ``schema_version`` as it was opened (None: a store before it had one)."""
        self._seen = "seen"
        """How ``transitions.seen`` is read: NULL in an older store opened read-only
        (``_migrate``)."""
        self.identity: tuple[int, int] | None = None
        """The file opened (device, inode): ``gone`` tells whether ``path`` still names it."""
        self._head_fd: int | None = None
        """A descriptor of the file opened, held until ``close``: ``gone`` reads its header
        through it. Never one opened and closed each look: closing any descriptor of a file
        drops every POSIX lock this process holds on it, SQLite's own among them (sqlite.org,
        "How To Corrupt An SQLite Database File", 2.2), and a collector's store, looked at
        every 5 s so, stopped showing its writes to other readers (CI: a restarted sharded
        collector's verdict rows never came)."""
        self._head_lock = threading.Lock()
        self._head_readers = 0
        """``gone`` calls reading through ``_head_fd`` now (``look_gone``'s threads)."""
        self._head_closing: int | None = None
        """``_head_fd`` as ``close`` left it to the last of those readers to close."""

    @classmethod
    async def open(cls, path: Path, retention_days: float = DEFAULT_RETENTION_DAYS,
                   cluster: str | None = None, *, claim: bool = False) -> "Store":
        """Open (or create) the store; a path that cannot hold it is one sentence
        (``StoreError``), not a traceback.

        A store holds one cluster's history: the first writer (``claim``) names it in ``meta``,
        and a store that names another cluster than ``cluster`` is refused, to a writer (two
        clusters' nodes and jobs mixed in one history) and to a reader asked for a cluster
        (``events --db X --cluster Y`` listed X's events as if they were Y's). A store made
        before it named its cluster takes the next writer's."""
        problem = path_problem(path)
        if problem:
            raise StoreError(problem)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # Tried synchronously first: when aiosqlite's own connect fails, its worker thread
            # outlives the event loop and prints a traceback as ``asyncio.run`` closes it.
            sqlite3.connect(path).close()
            db = await _daemon(aiosqlite.connect(path))
        except (OSError, sqlite3.Error) as err:
            raise StoreError(f"cannot open the history store {path}: "
                             f"{getattr(err, 'strerror', None) or err}.") from None
        try:
            await db.execute("PRAGMA busy_timeout=5000")
            # Before WAL is turned on: that rewrites the file's header too.
            async with db.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
                tables = {str(r[0]) for r in await cur.fetchall()}
            if tables and not tables & STORE_TABLES:
                # Not one of a store's tables: another program's database, and ours written
                # into it changed a file that is not ours (an SRE drill: ``collect --db`` on
                # an app's SQLite file).
                await db.close()
                raise StoreError(
                    f"{path} is another program's SQLite database (tables "
                    f"{', '.join(sorted(tables)[:3])}), not a fleetdeck history store: "
                    "give --db a new file or a store fleetdeck wrote.")
            await db.execute("PRAGMA journal_mode=WAL")
            await db.execute("PRAGMA synchronous=NORMAL")
            # False: an older store this user may not write (another user's collector's, a
            # 0444 file), read as it is rather than refused for want of a migration.
            current = await cls._make_tables(db) and await cls._migrate(db)
            # Written only when it moves: a reader's open that wrote it made a stale store
            # the newest written (``events`` then named no newer demo store: a review). And
            # looked at before writing: an INSERT takes the write lock even when it changes
            # nothing, so a store another process held a write transaction on for 5 s could
            # not be opened at all, and a console kept no history for its whole run (an SRE
            # drill; its writes are held and retried instead, docs/architecture.md).
            async with db.execute("SELECT value FROM meta WHERE key = 'schema_version'") as cur:
                row = await cur.fetchone()
            schema = None if row is None else str(row[0])
            if current and (row is None or str(row[0]) != str(SCHEMA_VERSION)):
                await db.execute("INSERT INTO meta VALUES ('schema_version', ?1) "
                                 "ON CONFLICT (key) DO UPDATE SET value = ?1",
                                 (str(SCHEMA_VERSION),))
            async with db.execute("SELECT value FROM meta WHERE key = 'cluster'") as cur:
                row = await cur.fetchone()
            held = str(row[0]) if row else None
            if cluster is not None and held is not None and held != cluster:
                await db.close()
                raise StoreError(
                    f"the history store {path} holds cluster '{held}', not '{cluster}': "
                    f"pass --cluster {held}, or give cluster '{cluster}' its own --db.")
            if claim and held is None and cluster is not None:
                await db.execute("INSERT INTO meta VALUES ('cluster', ?)", (cluster,))
                held = cluster
            await db.commit()
        except sqlite3.Error as err:
            await db.close()
            raise StoreError(_unusable(path, err)) from None
        store = cls(db, path, retention_days)
        store.cluster = held
        store.schema = str(SCHEMA_VERSION) if current else schema
        with contextlib.suppress(OSError):
            fd = os.open(path, os.O_RDONLY)
            st = os.fstat(fd)
            store.identity, store._head_fd = (st.st_dev, st.st_ino), fd
        if not current:
            async with db.execute("PRAGMA table_info(transitions)") as cur:
                if not any(r[1] == "seen" for r in await cur.fetchall()):
                    store._seen = "NULL AS seen"
            async with db.execute("SELECT name FROM sqlite_master WHERE type = 'table'") as cur:
                store.missing = STORE_TABLES - {str(r[0]) for r in await cur.fetchall()}
        return store

    @staticmethod
    async def _make_tables(db: aiosqlite.Connection) -> bool:
        """Create the tables and indexes a store lacks; False where this user may not write it.
        A table a newer schema added is then missing, and ``restore`` reads around it: every
        schema-5 store another user's collector wrote was refused once schema 6 added
        ``cleared_faults`` ("the file is read-only to this user", of ``events``; a review)."""
        try:
            await db.executescript(SCHEMA)
        except sqlite3.OperationalError as err:
            if (err.sqlite_errorcode or 0) & 0xFF == sqlite3.SQLITE_READONLY:
                return False
            raise
        return True

    _COLUMNS_ADDED = (
        ("gpu_minutes", "partial", "INTEGER NOT NULL DEFAULT 0"),
        ("port_minutes", "partial", "INTEGER NOT NULL DEFAULT 0"),
        ("transitions", "seen", "INTEGER"))
    """Columns a store of an older schema lacks: ``partial`` (schema 2; its rows were all
    whole minutes) and ``transitions.seen`` (schema 4; NULL in older rows, which ``restore``
    reads as seen where they have an ``old``, what that schema could tell)."""

    @classmethod
    async def _missing_columns(cls, db: aiosqlite.Connection) -> list[tuple[str, str, str]]:
        missing = []
        for table, column, decl in cls._COLUMNS_ADDED:
            async with db.execute(f"PRAGMA table_info({table})") as cur:
                if not any(row[1] == column for row in await cur.fetchall()):
                    missing.append((table, column, decl))
        return missing

    @classmethod
    async def _migrate(cls, db: aiosqlite.Connection) -> bool:
        """Give an older store the columns it lacks; False where this user may not write it
        (left as it is: ``restore`` and ``transitions`` read a missing ``seen`` as NULL).

        Looked at again and altered under the write lock: a console and a collector started
        at once on a store an upgrade left at schema 3 both found ``seen`` missing, and one's
        ALTER failed "duplicate column name" (no history for the console's run, the collector
        gone; a review)."""
        if not await cls._missing_columns(db):
            return True
        try:
            await db.execute("BEGIN IMMEDIATE")
            for table, column, decl in await cls._missing_columns(db):
                await db.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
            await db.commit()
        except BaseException as err:
            await db.rollback()
            if (isinstance(err, sqlite3.OperationalError) and
                    (err.sqlite_errorcode or 0) & 0xFF == sqlite3.SQLITE_READONLY):
                return False
            raise
        return True

    async def close(self) -> None:
        await self.db.close()
        with self._head_lock:  # after SQLite's own: closing it drops the file's locks
            fd, self._head_fd = self._head_fd, None
            if fd is not None and self._head_readers:
                # Closed under a look in flight, its number was free for the next file this
                # process opened, and the look read that file's first bytes as this store's
                # header ("overwritten"), or EBADF: the last look closes it instead.
                self._head_closing, fd = fd, None
        if fd is not None:
            os.close(fd)

    # --- writing (once per tick) -------------------------------------------------------------

    def write(self, record: AuditRecord) -> None:
        """``AuditSink``: queued, written with the next tick's transaction."""
        self._audit.append(record)

    audit = write
    errors = 0
    """``AuditSink``: write failures show as the session's store problem instead."""
    purging = True
    """Whether writes purge rows older than the retention (not by a console whose store a
    collector writes: ``WriterLock``)."""
    last_error = ""

    def prepare(self, batch: Batch, transitions: Sequence[Transition],
                notes: Sequence[Event] = ()) -> "TickRows":
        """The rows one tick adds (CPU only; the downsampler accumulates here, once);
        ``notes``: events of the console's own, kept beside the agents'."""
        gpu_rows: list[tuple[Any, ...]] = []
        port_rows: list[tuple[Any, ...]] = []
        for rx, tel in batch.telemetry.values():
            g, p = self.down.add(tel, rx)
            gpu_rows += g
            port_rows += p
        audit, self._audit = self._audit, []
        rows = []
        for tr in transitions:
            was = self._recalled.pop(tr.node, None) if self._recalled else None
            if tr.old is None and was == tr.new.value:
                # A first verdict of a node this console heard before its store opened, the
                # one the store holds already: no change, and a row would date the fault from
                # this start at the next restore (a 3 a.m. drive: AGE 20s of a fault 30 min
                # old). Another verdict is a change from the store's.
                continue
            rows.append((tr.ts, tr.node, tr.old.value if tr.old else was, tr.new.value,
                         ",".join(tr.reasons), int(tr.seen)))
        return TickRows(
            transitions=rows,
            events=[*(_event_row(ev) for _rx, ev in batch.events), *map(_event_row, notes)],
            audit=[_audit_row(a) for a in audit],
            gpu=gpu_rows, ports=port_rows,
            inventories=[inventory_row(birth) for _rx, birth in batch.births.values()],
            retired=[node for ev in notes if ev.kind == RETIRE_KIND
                     for node in _retired_nodes(ev.data)])

    def prepare_audit(self) -> "TickRows":
        """Only the audit records queued since the last tick (a console whose store a
        collector writes: ``WriterLock``)."""
        audit, self._audit = self._audit, []
        return TickRows(audit=[_audit_row(a) for a in audit])

    async def write_rows(self, rows: "TickRows") -> None:
        """One transaction; on failure it is rolled back and the same rows can be written
        again (events and audit rows are keyed, transitions only land with the commit)."""
        t0 = time.perf_counter()
        db = self.db
        try:
            if rows.transitions:
                # Two collectors on one store see the same change a tick apart: keep one.
                await db.executemany(
                    "INSERT INTO transitions (ts, node, old, new, reasons, seen) "
                    "SELECT ?1, ?2, ?3, ?4, ?5, ?6 WHERE NOT EXISTS (SELECT 1 FROM transitions "
                    "WHERE node = ?2 AND new = ?4 AND old IS ?3 AND ABS(ts - ?1) < ?7)",
                    [(*tr, TRANSITION_DEDUP_S) for tr in rows.transitions])
            if rows.events:
                await db.executemany("INSERT OR IGNORE INTO events VALUES (?,?,?,?,?,?,?,?)",
                                     rows.events)
            if rows.audit:
                await db.executemany(
                    "INSERT OR IGNORE INTO audit VALUES (?,?,?,?,?,?,?,?,?,?)", rows.audit)
            if rows.interruptions:
                await db.executemany(
                    "INSERT OR IGNORE INTO interruptions VALUES (?,?,?,?,?,?,?)",
                    rows.interruptions)
            if rows.job_seconds:
                await db.executemany(
                    "INSERT INTO job_minutes VALUES (?, ?) ON CONFLICT (minute) "
                    "DO UPDATE SET gpu_seconds = gpu_seconds + excluded.gpu_seconds",
                    rows.job_seconds)
            if rows.job_runs:
                await db.executemany("INSERT OR REPLACE INTO job_runs VALUES (?,?,?,?,?,?)",
                                     rows.job_runs)
            if rows.left_jobs:
                # Each node's latest only (two collectors on one store: the later leaving).
                await db.executemany(
                    "INSERT INTO left_jobs VALUES (?1, ?2, ?3) ON CONFLICT (node) DO UPDATE "
                    "SET job_id = ?2, ts = ?3 WHERE ?3 >= left_jobs.ts",
                    [(node, job_id, ts) for node, (job_id, ts) in rows.left_jobs.items()])
            if rows.cleared:
                # Each node's latest clearing: what a restart needs to tell the same fault
                # back from a first one (docs/architecture.md, "A fault that comes back").
                await db.executemany(
                    "INSERT INTO cleared_faults VALUES (?1, ?2, ?3) ON CONFLICT (node) DO "
                    "UPDATE SET ts = ?2, parts = ?3 WHERE ?2 >= cleared_faults.ts",
                    [(node, ts, json.dumps(sorted(parts)))
                     for node, (ts, parts) in rows.cleared.items()])
            if rows.retired:
                # Retiring accepts the inventory the node has now (docs/architecture.md, "A
                # node short of what it had"): the restore's own skip of older rows goes by
                # the retire line, which the retention purges, while ``inventories`` is kept,
                # and a week later a restarted console failed the node by G14 again.
                await db.executemany("DELETE FROM inventories WHERE node = ?",
                                     [(node,) for node in rows.retired])
                # One born again under the name is another machine: no fault of its to recur.
                await db.executemany("DELETE FROM cleared_faults WHERE node = ?",
                                     [(node,) for node in rows.retired])
            if rows.inventories:
                # One row per distinct inventory of a node, dated by its latest birth: what
                # ``restore`` replays, oldest first, into the rules' memory of it (G14, N8).
                await db.executemany(
                    "INSERT INTO inventories VALUES (?1, ?2, ?3) ON CONFLICT (node, inventory) "
                    "DO UPDATE SET ts = MAX(ts, ?3)", rows.inventories)
            if rows.gpu:
                await db.executemany(_GPU_UPSERT[rows.partial], rows.gpu)
            if rows.ports:
                await db.executemany(_PORT_UPSERT[rows.partial], rows.ports)
            if rows.watched is not None:
                await db.execute("INSERT INTO meta VALUES ('watched_until', ?1) "
                                 "ON CONFLICT (key) DO UPDATE SET value = ?1",
                                 (repr(rows.watched),))
            await db.commit()
        except BaseException:
            with contextlib.suppress(sqlite3.Error, ValueError):
                await db.rollback()
            raise
        if self.purging and time.monotonic() - self._last_purge > 600:
            await self.purge(time.time())
        self.writes += 1
        self.write_ms = (time.perf_counter() - t0) * 1000

    def gone(self) -> str:
        """Why ``path`` no longer names the store this process writes ('' while it does): the
        file deleted (``rm``, a cleanup job), another put in its place, or its header
        overwritten. SQLite writes on into the file it has open and says nothing: a drill
        deleted a console's store and every row it wrote after was lost with the process,
        the header clear all along (2026-12-07)."""
        with self._head_lock:
            fd = self._head_fd
            if self.identity is None or fd is None:
                return ""  # closed: nothing to look at
            self._head_readers += 1
        lost = "what is written now is lost: restart to keep history in a new store"
        try:
            st = os.stat(self.path)
            head = os.pread(fd, len(SQLITE_MAGIC), 0)
        except FileNotFoundError:
            return f"history store {self.path} was deleted while in use; {lost}"
        except OSError:
            return ""  # unreadable now (permissions, NFS): the writes say what goes wrong
        finally:
            with self._head_lock:
                self._head_readers -= 1
                closing = self._head_closing if not self._head_readers else None
                if closing is not None:
                    self._head_closing = None
            if closing is not None:
                os.close(closing)
        if self._head_fd is None:
            return ""  # closed while it looked: the answer is of no store in use
        if (st.st_dev, st.st_ino) != self.identity:
            return f"history store {self.path} was replaced by another file while in use; {lost}"
        if head != SQLITE_MAGIC and st.st_size > 0:
            return (f"history store {self.path} was overwritten (not a SQLite database any "
                    f"more) while in use; {lost} (move the damaged file aside first)")
        return ""

    def look_gone(self) -> "Future[str]":
        """``gone()`` in a thread of its own, its answer in the future returned: a stat of a
        file on a hung NFS mount does not return, and on the event loop it stalled the whole
        console (its link's keepalives, the TUI). A daemon thread, not the loop's executor:
        a check that never returns is joined by neither ``asyncio.run``'s shutdown nor the
        interpreter's exit. A store closed under it answers '' (its descriptor is closed by
        the look, not under it)."""
        answer: Future[str] = Future()

        def look() -> None:
            try:
                answer.set_result(self.gone())
            except BaseException as err:  # said by whoever reads the answer
                answer.set_exception(err)

        threading.Thread(target=look, name="store-file-check", daemon=True).start()
        return answer

    async def checkpoint(self) -> None:
        """Move the WAL into the database and give its space back, without waiting for
        readers (one that holds a snapshot leaves the rest for a later checkpoint); a store
        that cannot is left as it is (the next write says so)."""
        with contextlib.suppress(sqlite3.Error, ValueError):
            await self.db.execute("PRAGMA busy_timeout=0")
            try:
                await self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                await self.db.execute("PRAGMA busy_timeout=5000")

    def partial_minutes(self) -> "TickRows":
        """The minutes in progress, marked partial, for a clean stop to write last."""
        gpu_rows, port_rows = self.down.drain()
        return TickRows(gpu=gpu_rows, ports=port_rows, partial=True)

    async def write_tick(self, batch: Batch, transitions: Sequence[Transition]) -> None:
        await self.write_rows(self.prepare(batch, transitions))

    async def purge(self, now: float) -> None:
        cutoff = now - self.retention_s
        minute = int(cutoff // 60)
        # Rows past the last stamp the store reads back (``LAST_ROW_S``: an older store's,
        # written before the wire ended at year 9999) are never read and never grew old: the
        # purge takes them too, or they stayed for good.
        for sql, args in (("DELETE FROM transitions WHERE ts < ?", (cutoff,)),
                          ("DELETE FROM interruptions WHERE ts < ?", (cutoff,)),
                          ("DELETE FROM job_minutes WHERE minute < ?", (minute,)),
                          ("DELETE FROM job_runs WHERE ts < ?", (cutoff,)),
                          ("DELETE FROM left_jobs WHERE ts < ?", (cutoff,)),
                          # Older than RECUR_S, a clearing makes no fault a recurrence.
                          ("DELETE FROM cleared_faults WHERE ts < ?",
                           (max(cutoff, now - RECUR_S),)),
                          ("DELETE FROM events WHERE ts < ? OR ts > ?", (cutoff, LAST_ROW_S)),
                          ("DELETE FROM gpu_minutes WHERE minute < ? OR minute > ?",
                           (minute, LAST_ROW_MINUTE)),
                          ("DELETE FROM port_minutes WHERE minute < ? OR minute > ?",
                           (minute, LAST_ROW_MINUTE))):
            await self.db.execute(sql, args)
        await self.db.commit()
        self._last_purge = time.monotonic()

    # --- reading ---------------------------------------------------------------------------------

    async def _select(self, columns: tuple[str, ...], rest: str, args: list[Any]
                      ) -> list[dict[str, Any]]:
        """Rows of ``SELECT columns <rest>`` as dicts keyed by column name (an ``X AS name``
        column by its name)."""
        async with self.db.execute(f"SELECT {', '.join(columns)} {rest}", args) as cur:
            rows = await cur.fetchall()
        keys = [c.rpartition(" AS ")[2] for c in columns]
        return [dict(zip(keys, r, strict=True)) for r in rows]

    async def events(
        self, since: float, nodes: Iterable[str] | None = None,
        kinds: Iterable[str] | None = None, limit: int = 10_000,
    ) -> list[dict[str, Any]]:
        where, args = _filters(since, node=nodes, kind=kinds)
        # The newest ``limit`` rows, oldest first: a query that matches more must lose the
        # oldest, never the most recent (what an operator is looking for).
        rows = await self._select(EVENT_COLUMNS,
                                  f"FROM events {where} ORDER BY ts DESC LIMIT ?",
                                  [*args, limit])
        rows.reverse()
        for row in rows:
            row["data"] = json.loads(row["data"])
        return rows

    async def transitions(self, since: float, nodes: Iterable[str] | None = None,
                          limit: int = 10_000, first_ok: bool = True) -> list[dict[str, Any]]:
        """``first_ok=False`` leaves out each node's first row when it says ``ok`` (a node
        first seen healthy: a collector's start writes one per node)."""
        where, args = _filters(since, node=nodes)
        if not first_ok:
            where += FIRST_OK_LEFT_OUT
        rows = await self._select(("ts", "node", "old", "new", "reasons", self._seen),
                                  f"FROM transitions {where} ORDER BY ts DESC LIMIT ?",
                                  [*args, limit])
        rows.reverse()
        for row in rows:
            row["reasons"] = [x for x in row["reasons"].split(",") if x]
            # Rows before schema 4 (NULL): seen where they have an ``old``, as ``restore``.
            row["seen"] = row["old"] is not None if row["seen"] is None else bool(row["seen"])
        return rows

    async def count(self, table: str, since: float, nodes: Iterable[str] | None = None,
                    kinds: Iterable[str] | None = None, first_ok: bool = True) -> int:
        """How many rows of ``events`` or ``transitions`` match (to say what a limit cut);
        ``first_ok`` as for ``transitions``."""
        assert table in ("events", "transitions")
        where, args = (_filters(since, node=nodes, kind=kinds) if table == "events"
                       else _filters(since, node=nodes))
        if table == "transitions" and not first_ok:
            where += FIRST_OK_LEFT_OUT
        async with self.db.execute(f"SELECT COUNT(*) FROM {table} {where}", args) as cur:
            row = await cur.fetchone()
        return int(row[0]) if row else 0

    async def event_kinds(self) -> set[str]:
        """Every event kind the store holds, at any time."""
        async with self.db.execute("SELECT DISTINCT kind FROM events") as cur:
            return {str(row[0]) for row in await cur.fetchall()}

    async def job_runs(self) -> list[tuple[JobStatus, JobState, int, list[str]]]:
        """Each job's run as last kept (``TickRows.job_runs``): (its last running status,
        state, requeues, nodes). A row that does not read is skipped (a hand-edited store)."""
        async with self.db.execute(
                "SELECT run, state, requeues, nodes FROM job_runs") as cur:
            rows = await cur.fetchall()
        out = []
        for run, state, requeues, nodes in rows:
            try:
                out.append((codec.decode(JobStatus, str(run).encode()), JobState(state),
                            int(requeues), [n for n in str(nodes).split(",") if n]))
            except (ValueError, TypeError):
                continue
        return out

    async def interruptions(self, since: float) -> list[dict[str, Any]]:
        rows = await self._select(
            ("job_id", "ts", "cause", "nodes", "gpus", "lost_gpu_hours", "detail"),
            "FROM interruptions WHERE ts >= ? ORDER BY ts", [since])
        for row in rows:
            row["nodes"] = [n for n in row["nodes"].split(",") if n]
            row["detail"] = read_detail(row["detail"])
        return rows

    async def job_gpu_hours(self, since: float) -> float:
        async with self.db.execute("SELECT COALESCE(SUM(gpu_seconds), 0) FROM job_minutes "
                                   "WHERE minute >= ?", (int(since // 60),)) as cur:
            row = await cur.fetchone()
        return float(row[0]) / 3600 if row else 0.0

    async def audit_rows(self, since: float) -> list[dict[str, Any]]:
        return await self._select(
            ("request_id", "outcome", "ts", "who", "what", "targets", "why", "detail"),
            "FROM audit WHERE ts >= ? ORDER BY ts", [since])

    async def has_minutes_of(self, node: str) -> bool:
        """Whether the store holds any per-minute row of ``node``, at any time (a lookup on
        the tables' primary key, never a scan): a mistyped name from an empty window."""
        for table in ("gpu_minutes", "port_minutes"):
            async with self.db.execute(f"SELECT 1 FROM {table} WHERE node = ? LIMIT 1",
                                       (node,)) as cur:
                if await cur.fetchone() is not None:
                    return True
        return False

    async def has_heard_of(self, node: str) -> bool:
        """Whether the store holds a verdict transition or an event of ``node`` (an index seek
        each): a node its collector hears, whose first minute is not written yet."""
        for table in ("transitions", "events"):
            async with self.db.execute(f"SELECT 1 FROM {table} WHERE node = ? LIMIT 1",
                                       (node,)) as cur:
                if await cur.fetchone() is not None:
                    return True
        return False

    async def gpu_history(self, node: str, since: float) -> list[dict[str, Any]]:
        return await self._minutes("gpu_minutes", "gpu", GPU_MINUTE_COLUMNS, node, since)

    async def port_history(self, node: str, since: float) -> list[dict[str, Any]]:
        return await self._minutes("port_minutes", "dev", PORT_MINUTE_COLUMNS, node, since)

    async def _minutes(self, table: str, key: str, columns: tuple[str, ...], node: str,
                       since: float) -> list[dict[str, Any]]:
        """One node's per-minute rows since ``since``, ordered by minute then GPU (or port).

        The key is (node, gpu|dev, minute), so ``node = ? AND minute >= ?`` alone would read
        every row the node has (a week is 80,000 GPU rows) to return the last 15 minutes. The
        recursive part walks the node's GPUs (ports) by index seeks, then each one's minutes
        from ``since`` on: the cost follows the span shown, not the retention
        (docs/performance.md, "History reads")."""
        sql = (f"WITH RECURSIVE k(v) AS (SELECT MIN({key}) FROM {table} WHERE node = ?1 "
               f"UNION ALL SELECT (SELECT MIN({key}) FROM {table} WHERE node = ?1 AND {key} > k.v)"
               f" FROM k WHERE k.v IS NOT NULL) "
               f"SELECT {', '.join('m.' + c for c in columns)} FROM k JOIN {table} m "
               f"ON m.node = ?1 AND m.{key} = k.v AND m.minute >= ?2 AND m.minute <= ?3 "
               f"ORDER BY m.minute, m.{key}")
        async with self.db.execute(sql, [node, int(since // 60), LAST_ROW_MINUTE]) as cur:
            rows = await cur.fetchall()
        return [dict(zip(columns, r, strict=True)) for r in rows]

    async def watched(self) -> float | None:
        """Until when a console or collector last wrote this store (its tick's clock), None
        for a store no tick has written: a restart says the gap it missed."""
        async with self.db.execute(
                "SELECT value FROM meta WHERE key = 'watched_until'") as cur:
            row = await cur.fetchone()
        try:
            return float(row[0]) if row is not None else None
        except ValueError:
            return None

    async def restore(self, state: FleetState, recent_events: int = 2000,
                      now: float | None = None) -> int:
        """Put recent history back into a fresh console's state; return events restored."""
        rows = await self._select(EVENT_COLUMNS, "FROM events WHERE node != ? ORDER BY ts DESC "
                                  "LIMIT ?", [CONSOLE_SOURCE, recent_events])
        restored = 0
        skipped: dict[str, int] = {}
        self.restore_skipped = skipped
        for r in reversed(rows):
            try:
                # Rows are ours, but validate anyway: a store written by an older version or
                # edited by hand must not put bad state into the console.
                ev = Event.model_validate(
                    {**r, "seq": _seq_of(r["event_id"]), "ts": int(r["ts"] * 1000),
                     "data": json.loads(r["data"])}, strict=False)
            except ValueError:
                skipped["events"] = skipped.get("events", 0) + 1
                continue
            state.remember_event(ev, create=True)
            restored += 1
        # SQLite takes the bare columns ``new``, ``old`` and ``seen`` from the row that holds
        # the MAX: each node's latest verdict, and whether a console saw it happen. A node's
        # first row (no ``old``) or one a console first heard so (``seen`` 0) dates when it
        # was heard, not when it failed: recalled seen, a job's three nodes a console first
        # heard failed read "failed at once" after its restart (a review).
        async with self.db.execute(
            f"SELECT node, new, MAX(ts), old, {self._seen} FROM transitions GROUP BY node"
        ) as cur:
            latest = await cur.fetchall()
        spells = await self._before_spells(
            [node for node, new, _ts, old, _seen in latest if new in SPELL or old in SPELL])
        for node, new, ts, old, seen in latest:
            try:
                verdict = Verdict(new)
            except ValueError:
                skipped["transitions"] = skipped.get("transitions", 0) + 1
                continue
            spell = spells.get(node)
            if spell is not None and new not in SPELL:
                # Back from a spell offline or stale to the verdict before it: no change, as
                # the console that wrote it said (``NodeState._verdict_changed``).
                if spell[1] is verdict:
                    state.recall(node, verdict, spell[0], seen=spell[2])
                    # As below: a node heard before this store opened must not write its
                    # verdict again as new, which dated it from this start at the next restore.
                    self._recalled[node] = verdict.value
                    continue
                spell = None
            state.recall(node, verdict, ts, seen=old is not None if seen is None else bool(seen),
                         before_spell=spell)
            self._recalled[node] = verdict.value
        # The job each node last left: a failed node's job, requeued elsewhere before the
        # restart, is named by no sample now (``judgements.struck_job``). A collector sends it
        # on as ``Digest.struck_job``, which consoles decode strictly as a protocol ``Id``: one
        # that is not had that node's every digest refused, and a time that is not a number
        # stopped the console from starting (a review).
        if self.missing & RESTORED_TABLES.keys():
            # A console on another user's store of schema 2 (no left_jobs) failed to start,
            # "no such table": what the store has is restored, what it lacks said once.
            log.warning("%s", self.missing_said())
        left_jobs = [] if "left_jobs" in self.missing else await self._all(
            "SELECT node, job_id, ts FROM left_jobs")
        for node, job_id, ts in left_jobs:
            left_at = _finite(ts)
            if (isinstance(node, str) and isinstance(job_id, str) and is_valid_id(node)
                    and is_valid_id(job_id) and left_at is not None):
                state.recall_left_job(node, job_id, left_at)
            else:
                skipped["left_jobs"] = skipped.get("left_jobs", 0) + 1
        await self._recall_cleared(state, skipped)
        if skipped:
            log.warning("history store %s: unreadable rows skipped on restore: %s", self.path,
                        ", ".join(f"{n} of {table}" for table, n in skipped.items()))
        await self._recall_port_errors(state, time.time() if now is None else now)
        retired = await self._forget_retired(
            state, {node: ts for node, _new, ts, _old, _seen in latest})
        await self._recall_inventories(state, retired, skipped)
        if state.heard_since is not None:
            state.start_hearing(state.heard_since)  # nodes of restored events, too
        return restored


    def missing_said(self) -> str:
        """The one sentence of what ``restore`` cannot put back of an older, read-only store."""
        lacks = sorted(self.missing & RESTORED_TABLES.keys())
        # Said as a list ("a, b or c") and with the way out: "… not A, nor B, nor C" named no
        # one who could add them (a review).
        what = listed([RESTORED_TABLES[t] for t in lacks], "or")
        tables = f"{listed(lacks, 'or')} table"
        return (f"history store {self.path.name} (schema {self.schema or 'unknown'}, read-only "
                f"to this user) has no {tables}: its events and verdicts are restored, but not "
                f"{what}; a console or collector of this version run by the store's owner "
                "adds them")

    async def _all(self, sql: str) -> list[Any]:
        async with self.db.execute(sql) as cur:
            return list(await cur.fetchall())

    async def _recall_cleared(self, state: FleetState, skipped: dict[str, int]) -> None:
        """Each node's last clearing of a failure (``NodeState.cleared``): without it, a fault
        that cleared before a console or collector restart and came back after it read as a
        first failure, and asked for the repair that had not held (a review)."""
        if "cleared_faults" in self.missing:
            return
        rows = await self._all("SELECT node, ts, parts FROM cleared_faults")
        for node, ts, parts in rows:
            at = _finite(ts)
            try:
                names = json.loads(parts) if isinstance(parts, str) else None
            except ValueError:
                names = None
            if (isinstance(node, str) and is_valid_id(node) and at is not None
                    and isinstance(names, list) and all(isinstance(n, str) for n in names)):
                state.recall_cleared(node, at, frozenset(names))
            else:
                skipped["cleared_faults"] = skipped.get("cleared_faults", 0) + 1

    async def _recall_inventories(self, state: FleetState, retired: dict[str, float],
                                  skipped: dict[str, int]) -> None:
        """The inventories the nodes' births gave, oldest first, into the rules' memory of what
        each node had (``NodeHistory.remember_inventory``): a console restarted after an agent
        came back with 7 of its 8 GPUs heard only the retained birth of 7, and read it ok
        (G14; N8 for IB ports). Not those from before the node's retirement: one born again
        under the name is a new node (docs/protocol.md, "Retiring a node")."""
        if "inventories" in self.missing:
            return
        rows = await self._all("SELECT node, inventory, ts FROM inventories ORDER BY ts")
        unknown: dict[str, KnownInventory] = {}
        for node, text, ts in rows:
            if (not isinstance(node, str)
                    or (isinstance(ts, int | float) and ts <= retired.get(node, -1.0))):
                continue
            try:
                birth = msgspec.json.decode(text, type=fast.Birth)
            except (msgspec.ValidationError, msgspec.DecodeError, TypeError):
                skipped["inventories"] = skipped.get("inventories", 0) + 1
                continue
            st = state.nodes.get(node)
            if st is not None:
                # The rate N1 judges by is the live birth's where one is held: a stored one
                # is older (and a row written before rows kept the rate states none, NDR's).
                st.history.remember_inventory(birth, rate=st.birth is None)
            elif is_valid_id(node):
                # No verdict row of it left (ok for longer than the retention: most of a
                # healthy fleet): its first birth still meets what it had.
                unknown[node], _ = inventory_shrink(unknown.get(node), birth)
        for node, known in unknown.items():
            state.recall_inventory(node, known)

    async def _forget_retired(self, state: FleetState, last_row: dict[str, float]
                              ) -> dict[str, float]:
        """Drop what the restore put back of nodes retired since their last verdict row (the
        console line ``ConsoleSession._note_retired`` kept): recalled from their rows, events
        or port errors, a console restarted on its store showed them offline, with an incident,
        for ever, as before ``fleetdeck retire`` (a review). One born again under the name
        since has a newer row, and stays."""
        retired: dict[str, float] = {}
        async with self.db.execute("SELECT ts, data FROM events WHERE node = ? AND kind = ?",
                                   (CONSOLE_SOURCE, RETIRE_KIND)) as cur:
            for ts, data in await cur.fetchall():
                try:
                    nodes = _retired_nodes(json.loads(data))
                except ValueError:
                    continue
                for node in nodes:
                    retired[node] = max(float(ts), retired.get(node, float("-inf")))
        for node, at in retired.items():
            if node in state.nodes and last_row.get(node, float("-inf")) <= at:
                state.retire(node)
        return retired

    async def _before_spells(self, nodes: list[str]
                             ) -> dict[str, tuple[float, Verdict, bool]]:
        """Of ``nodes``, the last change to a verdict of their health (not offline or stale),
        looking through returns to it from a spell (``NodeState.before_spell``): its time, the
        verdict and whether it was seen. A node watched failing, its agent then restarted
        cleanly (failed, offline, failed), read as failed since the rejoin after a restart of
        the console, where the live one dated it to the failure (a review)."""
        if not nodes:
            return {}
        found: dict[str, tuple[float, Verdict, bool]] = {}
        follow: dict[str, bool] = {}
        """Per node: whether the row taken is a return from a spell, so the next older one to
        the same verdict stands for it."""
        async with self.db.execute(
                f"SELECT node, ts, old, new, {self._seen} FROM transitions WHERE node IN "
                "(SELECT value FROM json_each(?)) AND new NOT IN (?, ?) ORDER BY node, ts DESC",
                (json.dumps(nodes), *SPELL)) as cur:
            async for node, ts, old, new, seen in cur:  # newest first
                if not follow.get(node, True):
                    continue
                taken = found.get(node)
                if taken is not None and taken[1].value != new:
                    follow[node] = False
                    continue
                try:
                    verdict = Verdict(new)
                except ValueError:
                    follow[node] = False
                    continue
                found[node] = (ts, verdict, old is not None if seen is None else bool(seen))
                follow[node] = old in SPELL
        return found

    async def _recall_port_errors(self, state: FleetState, now: float) -> None:
        """The last hour's port errors back into the rules' windows (N2, N3): a restarted
        collector holds a flapped node failed for the rest of the hour as the one before it
        would have. Only minutes with errors are read, through a partial index (a few rows,
        not 16,384 nodes' hour)."""
        first = int(now // 60) - int(FATAL_WINDOW_S // 60)
        # Since when the store watched (for the findings' "in N min watched"): its first
        # verdict row, through transitions' time index, not a scan of the minutes.
        async with self.db.execute("SELECT MIN(ts) FROM transitions") as cur:
            row = await cur.fetchone()
        if row is None or row[0] is None:
            return
        watched_from_ms = max(first, int(float(row[0]) // 60)) * 60_000
        # A node resumed since had its windows forgotten (the repair they waited for was
        # done: FleetState's status apply, on a drained node only): its errors up to the
        # resume's minute stay forgotten.
        resumed: dict[str, float] = {}
        async with self.db.execute(
                "SELECT node, MAX(ts) FROM events WHERE ts >= ? AND kind = 'drain' "
                "AND message LIKE ? GROUP BY node", (first * 60, f"{RESUMED}%")) as cur:
            for node, ts in await cur.fetchall():
                resumed[node] = float(ts)
        async with self.db.execute(
                "SELECT node, dev, minute, symbol_errors, link_downed FROM port_minutes "
                "WHERE minute >= ? AND (symbol_errors > 0 OR link_downed > 0) "
                "ORDER BY minute", (first,)) as cur:
            for node, dev, minute, symbols, downed in await cur.fetchall():
                if not (isinstance(node, str) and isinstance(dev, str)):
                    continue
                if node in resumed and int(minute) * 60 < resumed[node]:
                    continue
                state.recall_port_errors(node, dev, int(minute), int(symbols), int(downed),
                                         watched_from_ms)


GPU_MINUTE_COLUMNS = ("gpu", "minute", "samples", "util", "temp_max", "power", "sm_clock_min",
                      "present")
PORT_MINUTE_COLUMNS = ("dev", "minute", "samples", "xmit_Bps", "rcv_Bps", "symbol_errors",
                       "link_downed", "down_samples")
MINUTE_AGGREGATION = {"util": "mean", "temp_max": "max", "power": "mean", "sm_clock_min": "min",
                      "xmit_Bps": "mean", "rcv_Bps": "mean", "symbol_errors": "sum",
                      "link_downed": "sum", "down_samples": "count"}
"""How ``Downsampler`` folds a minute's samples into each per-minute column: whoever shows one
must say which (a minute's minimum clock is not its clock)."""
EVENT_COLUMNS = ("event_id", "ts", "node", "kind", "severity", "component", "message", "data")
CONSOLE_SOURCE = "(console)"
"""The node column of a console's own timeline lines kept as events (``ConsoleSession.note``
with ``keep``): no node id can be it (the protocol's ``Id`` refuses brackets), so a host named
``console`` keeps its own events (a review)."""


FIRST_OK_LEFT_OUT = " AND NOT (old IS NULL AND new = 'ok')"
"""A node's first verdict row when it is ``ok`` (``Store.transitions``' ``first_ok``)."""


def _retired_nodes(data: object) -> list[str]:
    """The nodes a retire line's ``data`` names (``ConsoleSession._note_retired``); none if it
    is not one's."""
    try:
        return expand(str(data.get("nodes", ""))) if isinstance(data, dict) else []
    except HostlistError:
        return []


def inventory_row(birth: fast.Birth) -> tuple[str, str, float]:
    """(node, inventory, time) of a birth for ``inventories``: the birth cut to what the
    inventory rules read (``health.inventory_shrink``) and the link rate N1 reads
    (``health.birth_ib_rate``: a restarted console that hears telemetry but no birth judges an
    HDR node's ports by it), so an agent restarted with the same hardware gives the same row."""
    kept = fast.Birth(cluster=birth.cluster, node=birth.node, bdSeq=0, ts=0,
                      source=birth.source,
                      gpus=tuple(fast.GpuInventory(index=g.index, uuid=g.uuid)
                                 for g in birth.gpus),
                      ib_ports=tuple(fast.IbPortInventory(
                          dev=p.dev, port=p.port, expected_rate_gbps=p.expected_rate_gbps)
                                     for p in birth.ib_ports),
                      gpus_expected=birth.gpus_expected,
                      ib_ports_expected=birth.ib_ports_expected)
    # The agent's clock, not this console's: a broker's replay of an older process's retained
    # birth (docs/protocol.md) must not pass for the newest.
    return birth.node, msgspec.json.encode(kept).decode(), birth.ts / 1000


LAST_ROW_S = TS_MS_MAX / 1000
"""The latest row time the store reads back; ``LAST_ROW_MINUTE`` its minute. A store written
before the protocol ended its stamps at year 9999 (``TS_MS_MAX``) may hold an event or a
minute stamped up to 2^53 ms (year 287396), which the wire now refuses: read back, it crashed
``events`` and ``history`` ("year 287396 is out of range") and made ``history --plot`` lay out
285,000 years of ticks (docs/protocol.md, "Rejected input")."""
LAST_ROW_MINUTE = TS_MS_MAX // 60_000


def _filters(since: float, **in_lists: Iterable[str] | None) -> tuple[str, list[Any]]:
    """``WHERE ts >= ? AND ts <= LAST_ROW_S [AND col IN (…)]…`` for the lists that are given
    and not empty."""
    where = "WHERE ts >= ? AND ts <= ?"
    args: list[Any] = [since, LAST_ROW_S]
    for column, values in in_lists.items():
        chosen = list(values or [])
        if chosen:
            where += f" AND {column} IN ({','.join('?' * len(chosen))})"
            args += chosen
    return where, args


def _finite(value: object) -> float | None:
    """``value`` as a finite float, None when it is not one (a damaged store's cell)."""
    if not isinstance(value, (int, float, str)):
        return None
    try:
        out = float(value)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def _seq_of(event_id: str) -> int:
    """Event ids are ``<node>.<agent start ms>.<seq>`` (docs/protocol.md); 0 when not."""
    tail = event_id.rsplit(".", 1)[-1]
    return int(tail) if tail.isdigit() else 0


def _event_row(ev: Event) -> tuple[Any, ...]:
    return (ev.event_id, ev.ts / 1000, ev.node, ev.kind, ev.severity.value, ev.component,
            ev.message, json.dumps(ev.data))
