"""Append-only audit log of operator commands: who, what, why, when, outcome.

One JSON object per line in ``$XDG_STATE_HOME/fleetdeck/audit.jsonl`` (``~/.local/state/…``) or a
path given with ``--audit-log``. Each command writes a ``requested`` record and, later, one record
with its outcome (``done``, ``rejected``, ``failed``, ``timed_out``), both carrying the request id.
A command refused before it was sent (unknown node, no such job, no broker) writes one record,
``refused``, whose ``detail`` says why.
The interface is two methods (``write`` and ``read``) so a SQLite store can replace the file.
"""

import getpass
import json
import os
import threading
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
    """requested | done | rejected | failed | timed_out | abandoned | refused (never sent) |
    acknowledged or requested again when the CLI stopped following it (``--no-wait``)"""
    request_id: str
    cluster: str = ""
    detail: str = ""
    args: dict[str, str] = field(default_factory=dict)

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
