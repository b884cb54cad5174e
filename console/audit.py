"""Append-only audit log of operator commands: who, what, why, when, outcome.

One JSON object per line in ``$XDG_STATE_HOME/fleetdeck/audit.jsonl`` (``~/.local/state/…``) or a
path given with ``--audit-log``. Each command writes a ``requested`` record and, later, one record
with its outcome (``done``, ``rejected``, ``failed``, ``timed_out``), both carrying the request id.
A command refused before it was sent (unknown node, no such job, no broker) writes one record,
``refused``, whose ``detail`` says why.
Every record names the process that wrote it (``writer``): a console killed with a command open
(kill -9, power loss) left its ``requested`` record open for ever; the next console or one-shot
command on the same host and cluster finds it, sees its writer is gone, and appends the outcome
it can tell (``settle_orphans``, docs/reliability.md, "A console killed with a command open").
The interface is two methods (``write`` and ``read``) so a SQLite store can replace the file.
"""

import errno
import fcntl
import getpass
import json
import logging
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from fleetdeck.paths import state_base

AUDIT_FILE = "audit.jsonl"
TAIL_BYTES = 4 << 20
"""How much of the log's end ``AuditLog.tail`` reads: a request left open is among the last
records (a console settles what it finds when it starts); a 50 MB log read whole took 1.2 s
and 344 MB to find them (a review). docs/reliability.md."""
SETTLE_MAX_AGE_S = 7 * 86400.0
"""An open request older than this is history, not settled: the nodes' status now says nothing
of what it did then."""
SETTLE_LOCK_TRIES = 5
log = logging.getLogger(__name__)


def default_audit_path() -> Path:
    return state_base() / AUDIT_FILE


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        # Never empty: argparse checks a default too, and --operator refuses an empty one.
        return os.environ.get("USER") or "unknown"


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


UNKNOWN = "unknown"
"""The outcome of an orphaned request whose effect cannot be told from what is heard now."""
_PROGRAMS = frozenset({"console", "drain", "resume", "restart-job", "serve", "demo", "collect"})
_me: tuple[int, dict[str, Any]] | None = None


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _process_started(pid: int) -> str:
    """The kernel's start time of ``pid`` (clock ticks since boot), '' where /proc cannot say:
    with the boot id it tells a pid reused by another process from its writer."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else ""


INIT_PIDNS = "pid:[4026531836]"
"""The host's own pid namespace, outside any container (the kernel's PROC_PID_INIT_INO, the
same on every host and every boot)."""


def _pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``), '' where /proc cannot say: a
    container with the host's network (``--net=host``) or a pod's containers share its
    hostname, not its process table."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


def this_process() -> dict[str, Any]:
    """Who writes this process's records: program, host, pid namespace, pid, boot id and start
    time."""
    global _me
    pid = os.getpid()
    if _me is None or _me[0] != pid:  # a fork is another writer
        arg = sys.argv[1] if len(sys.argv) > 1 else ""
        _me = (pid, {"program": f"fleetdeck {arg}" if arg in _PROGRAMS else "fleetdeck",
                     "host": socket.gethostname(), "pidns": _pid_namespace(), "pid": pid,
                     "boot": _boot_id(), "started": _process_started(pid)})
    return dict(_me[1])


def writer_running(writer: object) -> bool | None:
    """Whether the process that wrote a record runs now: None where this process cannot tell
    (a record without ``writer``, from before it existed, or written on another host or in
    another pid namespace: a container sharing the hostname, whose pids this one cannot see;
    a container's of another boot, which may be another host's of the same name).
    """
    if not isinstance(writer, Mapping) or not isinstance(writer.get("pid"), int):
        return None
    if writer.get("host") != socket.gethostname():
        return None
    # Another boot id is a reboot of this host only for a writer outside any container (the
    # host's own pid namespace, or a record from before writers named theirs, as before): a
    # container with this hostname on another host (a pod's name, one audit log on NFS) has
    # another boot id too, and its live drain was settled as an orphan, two outcomes (a
    # review). The cost: a container's command killed by a reboot of this host stays
    # `requested` for 7 days again (its namespace is another after the reboot, nothing here
    # tells this host from the other); never settling a live command is the better side
    # (docs/reliability.md).
    boot = _boot_id()
    if (writer.get("boot") and boot and writer["boot"] != boot
            and writer.get("pidns", INIT_PIDNS) == INIT_PIDNS):
        return False  # the host rebooted since (a power loss): nothing of then runs
    # A record from before writers named their namespace says nothing of it: as before.
    ns = _pid_namespace()
    if "pidns" in writer and (not ns or writer["pidns"] != ns):
        return None
    if writer.get("boot") and boot and writer["boot"] != boot:
        return None  # this namespace's number, of another boot: another host's, or reused
    pid = writer["pid"]
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    started = _process_started(pid)
    # The same pid, started at another time: a new process reusing it.
    return not (writer.get("started") and started and started != writer["started"])


@dataclass(frozen=True)
class AuditRecord:
    ts: float
    """When (unix seconds); written as ``when`` in ISO 8601 UTC too."""
    who: str
    what: str
    """The operation: drain, resume, restart_job."""
    targets: str
    """Hostlist of nodes, or the job id."""
    why: str
    outcome: str
    """requested | done | rejected | failed | timed_out | abandoned | superseded | refused (never
    sent) | acknowledged or requested again when the CLI stopped following it (``--no-wait``) |
    unknown (its writer stopped, and what it did cannot be told: ``settle_orphans``)"""
    request_id: str
    cluster: str = ""
    detail: str = ""
    args: dict[str, str] = field(default_factory=dict)
    writer: dict[str, Any] = field(default_factory=this_process, compare=False)
    """The process that wrote it (``this_process``): a record left open by one no longer
    running is settled by the next console (``settle_orphans``)."""

    def to_json(self) -> str:
        data: dict[str, Any] = {"when": iso(self.ts), **asdict(self)}
        return json.dumps(data, ensure_ascii=False, sort_keys=False)


HELD_MAX_BYTES = 4 * 1024 * 1024
"""Audit records a failing log holds in memory for the file, about 8,000 (the oldest go first)."""


class AuditSink(Protocol):
    """Where audit records go. ``errors`` counts failed writes and ``last_error`` says the last
    one, so every front end can show "AUDIT LOG FAILING" whatever the sink is."""

    def write(self, record: AuditRecord) -> None: ...

    @property
    def errors(self) -> int: ...

    @property
    def last_error(self) -> str: ...


class AuditLog:
    """A JSON-lines file opened for append on each write (safe with several consoles)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_audit_path()
        self._lock = threading.Lock()
        self.errors = 0
        self.last_error = ""
        self.settle_error = ""
        """Why commands left open could not be settled (``settle``), '' if they could."""
        self._held = b""
        """What failed to reach the file (whole records, or the end of one a short write cut),
        written ahead of the next record; at most ``HELD_MAX_BYTES``."""
        self.dropped = 0
        """Records given up while held past ``HELD_MAX_BYTES``."""

    @property
    def failing(self) -> bool:
        """Records have failed to reach the file and no write has got them there since."""
        return bool(self._held)

    @property
    def held_records(self) -> int:
        """Records (or the end of one) waiting for the file."""
        return self._held.count(b"\n")

    def unwritten(self) -> str:
        """'' when nothing failed to reach the file, else one sentence for the end of a
        console or command: what is held (and goes with the process) and what was dropped.
        Neither was said: a console ended while its log failed took its held records with it
        without a word, as the records dropped past ``HELD_MAX_BYTES`` went (a review)."""
        parts = []
        if self._held:
            parts.append(f"{self.held_records} record(s) never reached it ({self.last_error})")
        if self.dropped:
            parts.append(f"{self.dropped} older record(s) were dropped while it failed "
                         f"(over {HELD_MAX_BYTES // (1024 * 1024)} MiB held)")
        return f"audit log {self.path}: {'; '.join(parts)}" if parts else ""

    def write(self, record: AuditRecord) -> None:
        self._append(record.to_json() + "\n")

    def retry(self) -> None:
        """Write what is held, if anything (a failing log is retried without a new record)."""
        if self._held:
            self._append("")

    def check(self) -> str:
        """Empty if the log can be appended to, else why not: a one-shot command asks before
        it sends anything, so a mistyped ``--audit-log`` never acts unrecorded."""
        self._append("")
        return self.last_error if self.errors else ""

    def _append(self, line: str) -> None:
        with self._lock:
            # Records that failed before go first: a drain sent while the disk was full was
            # in no audit file once it had room again, a resume of the node that followed
            # was (2026-12-07 drill: docs/reliability.md).
            data = self._held + line.encode()
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    while data:
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            except OSError as err:
                # An audit failure must be visible but must not stop an operator mid-incident.
                self.errors += 1
                self.last_error = (f"cannot write audit log {self.path}: "
                                   f"{err.strerror or err}")
            self._held = self._bounded(data)

    def _bounded(self, data: bytes) -> bytes:
        dropped = self.dropped
        while len(data) > HELD_MAX_BYTES and b"\n" in data:
            data = data[data.index(b"\n") + 1:]
            self.dropped += 1
        if self.dropped > dropped:
            # Gone from the trail for good: in the console's log at least, not silently.
            log.warning("audit log %s still failing: %d record(s) dropped, %d in all (over "
                        "%d MiB held)", self.path, self.dropped - dropped, self.dropped,
                        HELD_MAX_BYTES // (1024 * 1024))
        return data

    def settle(self, decide: Callable[[list[dict[str, Any]]], list[AuditRecord]],
               write: Callable[[AuditRecord], None] | None = None) -> list[AuditRecord] | None:
        """Under an exclusive lock on the log (``flock``): read its end (``tail``), hand those
        records to ``decide``, and write the records it returns (through ``write``, this log
        by default). Two consoles settling at once take turns, and the second reads the
        first's records: one outcome per orphaned request (docs/reliability.md). Blocking
        file I/O: a console calls it off its event loop. None while another holds the lock
        (try again later); [] where the log cannot be locked or read, said once in
        ``settle_error``: settling is skipped, never raised (an exclusive ``flock`` on NFS
        wants the file open for writing, EBADF otherwise: a tick or ``fleetdeck drain`` died
        of it, its own request left open; a review)."""
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            return []  # no log yet: nothing was left open in it
        except OSError as err:
            return self._settle_failed(err)
        try:
            for attempt in range(SETTLE_LOCK_TRIES):
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if attempt == SETTLE_LOCK_TRIES - 1:
                        return None  # another console settles now: its records are read next
                    time.sleep(0.02 * (attempt + 1))
            out = decide(self.tail())
            for record in out:
                (write or self.write)(record)
            return out
        except OSError as err:
            return self._settle_failed(err)
        finally:
            os.close(fd)  # lets the lock go

    def _settle_failed(self, err: OSError) -> list[AuditRecord]:
        why = err.strerror or errno.errorcode.get(err.errno or 0, "") or str(err)
        self.settle_error = (f"cannot lock audit log {self.path} to settle commands left open "
                             f"({why}); left as they are")
        log.warning("%s", self.settle_error)
        return []

    def tail(self, max_bytes: int = TAIL_BYTES) -> list[dict[str, Any]]:
        """The records in the last ``max_bytes`` of the log (whole lines), oldest first."""
        try:
            with self.path.open("rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                start = max(0, size - max_bytes)
                fh.seek(start)
                data = fh.read()
        except FileNotFoundError:
            return []
        if start:
            data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
        return _parse(data.decode("utf-8", "replace").splitlines())

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with self.path.open(encoding="utf-8") as fh:
            return _parse(fh)


def _parse(lines: Iterable[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for raw in lines:
        line = raw.strip()
        if line:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                out.append(rec)
    return out


class TeeAudit:
    """Write every record to several sinks (the JSONL file and the SQLite store)."""

    def __init__(self, *sinks: AuditSink) -> None:
        self.sinks = sinks

    def write(self, record: AuditRecord) -> None:
        for sink in self.sinks:
            sink.write(record)

    @property
    def errors(self) -> int:
        return sum(sink.errors for sink in self.sinks)

    @property
    def last_error(self) -> str:
        return next((sink.last_error for sink in self.sinks if sink.last_error), "")


class MemoryAudit:
    """An in-memory sink for tests and ``--no-audit`` style use."""

    def __init__(self) -> None:
        self.records: list[AuditRecord] = []
        self.errors = 0
        self.last_error = ""

    def write(self, record: AuditRecord) -> None:
        self.records.append(record)


def log_of(sink: object) -> AuditLog | None:
    """The JSON-lines log among a sink's (a ``TeeAudit``'s) sinks, if any."""
    if isinstance(sink, AuditLog):
        return sink
    for each in getattr(sink, "sinks", ()):
        found = log_of(each)
        if found is not None:
            return found
    return None


NO_WAIT = "(--no-wait)"
"""In the detail of the record a front end that stopped following its command (``--no-wait``)
writes: the operator chose not to wait, nothing is left for a later console to settle."""


def orphans(records: list[dict[str, Any]], cluster: str, now: float,
            unowned_after_s: float, max_age_s: float = SETTLE_MAX_AGE_S) -> list[dict[str, Any]]:
    """The open requests of ``cluster`` whose writer no longer runs: each one's ``requested``
    record. A record without ``writer`` (written before it existed) counts as orphaned once
    older than ``unowned_after_s``, the longest a console follows a command with a deadline;
    one written on another host, or in another pid namespace on this boot, is left to a console
    there (this one cannot tell whether its writer runs). Not orphaned: a request whose agent
    answered (``acknowledged``) or that its front end stopped following on purpose
    (``--no-wait``): 4,094 such records of a 50 MB log were settled ``unknown``, and a fresh
    ``drain --no-wait`` before it landed (a review); nor one older than ``max_age_s``: history."""
    last: dict[str, dict[str, Any]] = {}
    closed: set[str] = set()
    for rec in records:
        rid = rec.get("request_id")
        if rec.get("cluster") != cluster or not isinstance(rid, str):
            continue
        if rec.get("outcome") == "requested" and NO_WAIT not in str(rec.get("detail", "")):
            last[rid] = rec
        else:
            # An outcome (its writer's or a settlement), an answer, or --no-wait: closed.
            closed.add(rid)
    out = []
    for rid, rec in last.items():
        if rid in closed:
            continue
        try:
            age = now - float(rec.get("ts", now))
        except (TypeError, ValueError):
            continue
        if age > max_age_s:
            continue
        running = writer_running(rec.get("writer"))
        if running is False or (running is None and "writer" not in rec
                                and age > unowned_after_s):
            out.append(rec)
    return out
