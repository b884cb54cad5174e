"""Commands a console that stopped left open (killed, power lost), settled by the one that
runs now: found at the audit log's end (``AuditLog.tail``), decided from what the broker's
retained state says once their nodes are heard (``commands.settlement``), and written by the
session's I/O pump under the log's lock, off the event loop (docs/reliability.md).

``ConsoleSession`` owns one ``OrphanSettler``: ``adopt_orphans`` finds them, each tick
``settle`` decides, the pump ``write``s.
"""

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

from fleetdeck.console.audit import (
    UNKNOWN,
    AuditLog,
    AuditRecord,
    AuditSink,
    TeeAudit,
    log_of,
    orphans,
)
from fleetdeck.console.commands import (
    UNOWNED_AFTER_S,
    orphan_deadline,
    orphan_heard,
    settlement,
)
from fleetdeck.console.eventlog import Note
from fleetdeck.console.state import FleetState
from fleetdeck.hostlist import HostlistError, expand
from fleetdeck.protocol.messages import CommandOp

SETTLE_WAIT_S = 15.0
"""How long a console, connected, waits to hear the nodes of a request a stopped console left
open before it settles it with what it knows (``adopt_orphans``)."""


class OrphanSettler:
    """This cluster's requests left open by consoles that stopped, and their outcomes decided
    but not written yet."""

    def __init__(self, cluster: str, note: Note, wake: Callable[[], None]) -> None:
        self.cluster = cluster
        self._note = note
        self._wake = wake
        """Wakes the session's I/O pump, which writes what ``settle`` decided."""
        self._orphans: list[dict[str, Any]] = []
        """Open audit records of this cluster whose writer stopped (``adopt``)."""
        self._orphans_since: float | None = None
        """When this session, connected, began waiting to hear their nodes."""
        self._settling: list[AuditRecord] = []
        """Their outcomes, decided, for the I/O pump to write (``write``)."""
        self._settle_error_said = False

    @property
    def pending(self) -> bool:
        """Orphans not settled yet (each tick decides what it can)."""
        return bool(self._orphans)

    @property
    def settling(self) -> bool:
        """Outcomes decided and not written yet."""
        return bool(self._settling)

    def adopt(self, audit: AuditSink, now: float) -> int:
        """Find this cluster's requests that a console (or one-shot command) no longer running
        left open in the audit log (killed, power lost): the next ticks settle each from what
        the broker's retained state says (``commands.settlement``), once its nodes are heard or
        after ``SETTLE_WAIT_S`` connected. Only front ends that send commands call it (a
        replay or a read-only console writes no audit). Reads the log's end only
        (``AuditLog.tail``). How many were found."""
        log = log_of(audit)
        if log is None:
            return 0
        try:
            records = log.tail()
        except OSError as err:
            log.settle_error = f"cannot read audit log {log.path}: {err.strerror or err}"
            # Said here: with no orphans found nothing is ever settled, and the error said at
            # a settlement never was (a review).
            self._settle_error_said = True
            self._note(f"{log.settle_error}: commands left open by consoles that stopped are "
                       "not settled", severity="warn", kind="audit")
            return 0
        self._orphans = orphans(records, self.cluster, now, UNOWNED_AFTER_S)
        return len(self._orphans)

    def settle(self, state: FleetState, now: float, connected: bool) -> None:
        """Decide, from the state now, the outcome of each orphan whose nodes are heard (or
        waited for): written by the I/O pump off the event loop (``write``)."""
        if self._settling:
            return  # the last ones are not written yet
        if not connected:
            return  # what the broker keeps is unknown yet: wait, not "unknown"
        if self._orphans_since is None:
            self._orphans_since = now
        waited = now - self._orphans_since >= SETTLE_WAIT_S
        decided: list[AuditRecord] = []
        left: list[dict[str, Any]] = []
        for r in self._orphans:
            if waited or orphan_heard(r, state):
                rec = settlement(r, state, now)
                # Not seen to take effect while it may still land: asked again next tick.
                if rec.outcome != UNKNOWN or now >= orphan_deadline(r):
                    decided.append(rec)
                    continue
            left.append(r)
        self._orphans = left
        if decided:
            self._settling = decided
            self._wake()

    async def write(self, audit: Callable[[], AuditSink]) -> None:
        """Append the outcomes ``settle`` decided to the audit log under its lock, in
        a thread: reading a big log and waiting for another console's lock held the event loop
        for seconds (a review). The timeline says them in one line. ``audit``: the session's
        sinks, read again once the file is written: a store opened while the thread ran (the
        TUI runs a session whose store is slow to open) gets its copy too."""
        due = self._settling
        log = log_of(audit())
        if not due or log is None:
            self._settling = []
            return
        cluster, now = self.cluster, max(r.ts for r in due)

        def decide(records: list[dict[str, Any]]) -> list[AuditRecord]:
            # Read again under the log's lock: another console settled it meanwhile, or its
            # writer's outcome came in — one outcome per request (docs/reliability.md).
            still = {r["request_id"] for r in orphans(records, cluster, now, UNOWNED_AFTER_S)}
            return [r for r in due if r.request_id in still]

        # The thread writes the file whatever becomes of this coroutine: cancelled at stop
        # while it ran, the store's copy and the timeline's line were lost, and the next flush
        # found the request settled already (a review). Wait it out, then stop.
        # A future, not a task: the loop's shutdown cancels tasks only.
        job = asyncio.get_running_loop().run_in_executor(None, log.settle, decide, log.write)
        cancelled = False
        while True:
            try:
                written = await asyncio.shield(job)
                break
            except asyncio.CancelledError:
                if job.cancelled():
                    raise
                cancelled = True
        try:
            self._said(audit(), log, written)
        finally:
            if cancelled:
                raise asyncio.CancelledError

    def _said(self, audit: AuditSink, log: AuditLog, written: list[AuditRecord] | None) -> None:
        """What ``write`` wrote, to the other audit sinks and the timeline."""
        if written is None:
            return  # another console holds the lock: tried again at the next flush
        self._settling = []
        if log.settle_error and not self._settle_error_said:
            self._settle_error_said = True
            self._note(log.settle_error, severity="warn", kind="audit")
        if not written:
            return
        for rec in written:
            for sink in _other_sinks(audit, log):
                sink.write(rec)
        self._note(_settled_text(written), severity="warn" if any(
            r.outcome == UNKNOWN for r in written) else "done",
            nodes=_settled_nodes(written), kind="command")


def _other_sinks(sink: AuditSink, log: object) -> list[AuditSink]:
    """The audit sinks besides the JSON-lines ``log`` (the store's, through a ``TeeAudit``)."""
    if sink is log:
        return []
    if isinstance(sink, TeeAudit):
        return [s for each in sink.sinks for s in _other_sinks(each, log)]
    return [sink]


def _settled_line(rec: AuditRecord) -> str:
    verb = "restart" if rec.what == CommandOp.RESTART_JOB.value else rec.what
    return f"{verb} {rec.targets} [{rec.request_id}]: {rec.outcome}"


def _settled_text(written: list[AuditRecord]) -> str:
    """One timeline line for the commands settled at once: one per record flooded it with
    4,094 warnings on a 50 MB log (a review). One alone reads as the console's own command
    lines do (``CommandOutbox.on_transition``)."""
    if len(written) == 1:
        rec = written[0]
        return f"{_settled_line(rec)} ({rec.detail})"
    counts = Counter(r.outcome for r in written)
    shown = "; ".join(_settled_line(r) for r in written[:5])
    more = f"; and {len(written) - 5} more" if len(written) > 5 else ""
    return (f"settled {len(written)} commands left open by consoles that stopped "
            f"({', '.join(f'{n} {o}' for o, n in counts.most_common())}; each in the audit "
            f"log): {shown}{more}")


def _settled_nodes(written: list[AuditRecord]) -> tuple[str, ...]:
    nodes: list[str] = []
    for rec in written:
        if rec.what == CommandOp.RESTART_JOB.value:
            continue
        try:
            nodes += expand(rec.targets)[:64]
        except HostlistError:
            continue
    return tuple(dict.fromkeys(nodes))[:64]
