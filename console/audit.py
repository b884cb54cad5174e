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

import fcntl
import getpass
import json
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from fleetdeck.paths import state_base

AUDIT_FILE = "audit.jsonl"


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


OPEN_OUTCOMES = frozenset({"requested", "acknowledged"})
"""Outcomes that leave a request open: its writer still follows it, or stopped before an outcome
(``acknowledged``/``requested`` is also what ``--no-wait`` leaves)."""
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


def this_process() -> dict[str, Any]:
    """Who writes this process's records: program, host, pid, boot id and start time."""
    global _me
    pid = os.getpid()
    if _me is None or _me[0] != pid:  # a fork is another writer
        arg = sys.argv[1] if len(sys.argv) > 1 else ""
        _me = (pid, {"program": f"fleetdeck {arg}" if arg in _PROGRAMS else "fleetdeck",
                     "host": socket.gethostname(), "pid": pid, "boot": _boot_id(),
                     "started": _process_started(pid)})
    return dict(_me[1])


def writer_running(writer: object) -> bool | None:
    """Whether the process that wrote a record runs now: None where this host cannot tell (a
    record without ``writer``, from before it existed, or written on another host)."""
    if not isinstance(writer, Mapping) or not isinstance(writer.get("pid"), int):
        return None
    if writer.get("host") != socket.gethostname():
        return None
    boot = _boot_id()
    if writer.get("boot") and boot and writer["boot"] != boot:
        return False  # the host rebooted since (a power loss): nothing of then runs
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

    def write(self, record: AuditRecord) -> None:
        self._append(record.to_json() + "\n")

    def check(self) -> str:
        """Empty if the log can be appended to, else why not: a one-shot command asks before
        it sends anything, so a mistyped ``--audit-log`` never acts unrecorded."""
        self._append("")
        return self.last_error if self.errors else ""

    def _append(self, line: str) -> None:
        with self._lock:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                try:
                    if line:
                        os.write(fd, line.encode())
                finally:
                    os.close(fd)
            except OSError as err:
                # An audit failure must be visible but must not stop an operator mid-incident.
                self.errors += 1
                self.last_error = (f"cannot write audit log {self.path}: "
                                   f"{err.strerror or err}")

    def settle(self, decide: Callable[[list[dict[str, Any]]], list[AuditRecord]],
               write: Callable[[AuditRecord], None] | None = None) -> list[AuditRecord]:
        """Under an exclusive lock on the log (``flock``): read it, hand every record to
        ``decide``, and write the records it returns (through ``write``, this log by default).
        Two consoles settling at once take turns, and the second reads the first's records:
        one outcome per orphaned request (docs/reliability.md)."""
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return []  # no log yet: nothing was left open in it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            out = decide(self.read())
            for record in out:
                (write or self.write)(record)
            return out
        finally:
            os.close(fd)  # lets the lock go

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out: list[dict[str, Any]] = []
        with self.path.open(encoding="utf-8") as fh:
            for raw in fh:
                line = raw.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        continue
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


def orphans(records: list[dict[str, Any]], cluster: str, now: float,
            unowned_after_s: float) -> list[dict[str, Any]]:
    """The open requests of ``cluster`` whose writer no longer runs: each one's last record
    (``requested``, or ``acknowledged`` left by ``--no-wait``). A record without ``writer``
    (written before it existed) counts as orphaned once older than ``unowned_after_s``, the
    longest a console follows a command with a deadline; one written on another host is left
    to a console there (this one cannot tell whether its writer runs)."""
    last: dict[str, dict[str, Any]] = {}
    closed: set[str] = set()
    for rec in records:
        rid = rec.get("request_id")
        if rec.get("cluster") != cluster or not isinstance(rid, str):
            continue
        if rec.get("outcome") in OPEN_OUTCOMES:
            last[rid] = rec
        else:
            closed.add(rid)  # an outcome, its writer's or a settlement: closed for good
    out = []
    for rid, rec in last.items():
        if rid in closed:
            continue
        running = writer_running(rec.get("writer"))
        if running is False or (running is None and "writer" not in rec
                                and now - float(rec.get("ts", now)) > unowned_after_s):
            out.append(rec)
    return out
