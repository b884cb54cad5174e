"""Headless commands for scripts: ``fleetdeck drain|resume|restart-job``.

Each connects like the console, collects the retained state for a moment, publishes one protocol
``Command`` per target, then follows acks and the fleet state with the same ``CommandTracker``
as the TUI until every target is done or the deadline passes. It prints one line per transition
and a summary, writes the audit log, and exits 0 (done), 3 (rejected/failed) or 4 (timed out).
"""

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error
from fleetdeck.console.audit import AuditLog, AuditRecord, AuditSink
from fleetdeck.console.commands import CommandTracker, Phase, Request, Transition, audit_fields
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from fleetdeck.errors import UserError
from fleetdeck.hostlist import HostlistError, compress, expand
from fleetdeck.protocol.messages import DrainMode

EXIT_DONE = 0
EXIT_REJECTED = 3
EXIT_TIMED_OUT = 4
SETTLE_S = 0.7
"""How long to collect retained births/statuses/jobs before sending (to know the targets)."""
POLL_S = 0.1


def parse_targets(hostlist: str) -> list[str]:
    try:
        names = expand(hostlist)
    except HostlistError as err:
        raise UserError(f"bad hostlist '{hostlist}': {err}") from None
    if not names:
        raise UserError("the hostlist names no nodes")
    return names


class CommandRun:
    """One headless command: connect, send, follow, report."""

    def __init__(self, url: BrokerURL, cluster: str, operator: str, *,
                 audit: AuditSink, timeout_s: float, out: TextIO = sys.stdout,
                 clock: Callable[[], float] = time.time,
                 command_key: bytes | None = None) -> None:
        self.url = url
        self.cluster = cluster
        self.operator = operator
        self.audit = audit
        self.timeout_s = timeout_s
        self.out = out
        self.clock = clock
        self.ingest = Ingest(cluster)
        self.state = FleetState(cluster, self.ingest.malformed)
        self.tracker = CommandTracker(cluster, operator)
        self.feed = LiveFeed(url, self.ingest, client_id=f"fd-cli-{os.getpid()}-{id(self):x}",
                             clock=clock, command_key=command_key)

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _tick(self) -> list[Transition]:
        batch = self.ingest.take_batch()
        now = self.clock()
        self.state.apply(batch, now)
        return self.tracker.observe(self.state, [a for _rx, a in batch.acks], now)

    def _record(self, req: Request, outcome: str, detail: str = "") -> None:
        self.audit.write(AuditRecord(
            ts=self.clock(), who=self.operator, what=req.op.value, targets=req.target_text,
            why=req.reason, outcome=outcome, request_id=req.request_id, cluster=self.cluster,
            detail=detail, args=audit_fields(req),
        ))

    async def run(self, make: Callable[["CommandRun"], Request], *,
                  wait_done: bool = True) -> int:
        stop = asyncio.Event()
        task = asyncio.create_task(self.feed.run(stop, retry=False))
        try:
            await self._connected(task)
            await asyncio.sleep(SETTLE_S)
            self._tick()
            req = make(self)
            self._record(req, "requested")
            self.say(f"{req.op.value.replace('_', ' ')} {req.target_text} "
                     f"[{req.request_id}] requested by {self.operator}")
            for (kind, subject, cmd), progress in zip(req.commands(), req.targets, strict=True):
                await self.feed.send_command(kind, subject, cmd)
                progress.sent_at = self.clock()
            deadline = self.clock() + self.timeout_s
            while True:
                for kind, subject, cmd, progress in self.tracker.due_for_retry(self.clock()):
                    await self.feed.send_command(kind, subject, cmd)
                    progress.sent_at = self.clock()
                for tr in self._tick():
                    detail = f" ({tr.detail})" if tr.detail else ""
                    self.say(f"  {tr.target}: {tr.new.value}{detail}")
                if req.finished_at is not None:
                    break
                if not wait_done and all(t.phase is not Phase.REQUESTED for t in req.targets):
                    break
                if self.clock() > deadline:
                    for tr in self.tracker.expire_all(
                            self.clock(), f"no result within {self.timeout_s:g} s"):
                        self.say(f"  {tr.target}: {tr.new.value} ({tr.detail})")
                    break
                if task.done():
                    exc = task.exception()
                    raise UserError(describe_mqtt_error(self.url, exc)
                                    if isinstance(exc, Exception)
                                    else "lost the broker connection")
                await asyncio.sleep(POLL_S)
        except aiomqtt.MqttError as err:
            raise UserError(describe_mqtt_error(self.url, err)) from None
        finally:
            stop.set()
            with contextlib.suppress(aiomqtt.MqttError, asyncio.CancelledError):
                await task
        return self._report(req)

    async def _connected(self, task: "asyncio.Task[None]") -> None:
        deadline = time.monotonic() + 10
        while self.feed.conn.state != "connected" or self.feed.client is None:
            if task.done():
                exc = task.exception()
                if isinstance(exc, aiomqtt.MqttError):
                    raise UserError(describe_mqtt_error(self.url, exc))
                raise UserError(f"cannot connect to {self.url}")
            if time.monotonic() > deadline:
                raise UserError(f"cannot connect to {self.url} within 10 s")
            await asyncio.sleep(0.02)

    def _report(self, req: Request) -> int:
        phase = req.phase
        counts = ", ".join(f"{p.value} {n}" for p, n in req.counts().items())
        bad = [t for t in req.targets if t.phase is not Phase.DONE]
        detail = "; ".join(f"{t.target}: {t.phase.value} ({t.detail})" for t in bad)[:1000]
        if req.finished_at is not None:
            self._record(req, phase.value, detail)
        if phase is Phase.DONE:
            self.say(f"done: {counts}")
            return EXIT_DONE
        if req.finished_at is None:
            # --no-wait: acknowledged, not finished
            self.say(f"acknowledged: {counts}")
            return EXIT_DONE
        self.say(f"{phase.value}: {counts}")
        for t in bad:
            self.say(f"  {t.target}: {t.phase.value}: {t.detail}")
        return EXIT_TIMED_OUT if phase is Phase.TIMED_OUT else EXIT_REJECTED

    def known(self, targets: list[str]) -> None:
        unknown = [t for t in targets if t not in self.state.nodes]
        if unknown:
            raise UserError(f"unknown node(s) {compress(unknown)}: no birth or status seen on "
                            f"cluster '{self.cluster}' (wrong --cluster or hostlist?)")


def _audit(path: str | None) -> AuditSink:
    return AuditLog(Path(path) if path else None)


def run_drain(url: BrokerURL, cluster: str, hostlist: str, reason: str, *, now: bool,
              operator: str, audit_path: str | None, timeout_s: float, wait: bool,
              command_key: bytes | None = None) -> int:
    targets = parse_targets(hostlist)
    if not reason.strip():
        raise UserError("a reason is required to drain (--reason TEXT)")
    run = CommandRun(url, cluster, operator, audit=_audit(audit_path), timeout_s=timeout_s,
                     command_key=command_key)

    def make(r: CommandRun) -> Request:
        r.known(targets)
        return r.tracker.drain(targets, reason, r.clock(),
                               DrainMode.NOW if now else DrainMode.FINISH)

    return asyncio.run(run.run(make, wait_done=wait))


def run_resume(url: BrokerURL, cluster: str, hostlist: str, *, reason: str, operator: str,
               audit_path: str | None, timeout_s: float,
               command_key: bytes | None = None) -> int:
    targets = parse_targets(hostlist)
    run = CommandRun(url, cluster, operator, audit=_audit(audit_path), timeout_s=timeout_s,
                     command_key=command_key)

    def make(r: CommandRun) -> Request:
        r.known(targets)
        return r.tracker.resume(targets, r.clock(), reason)

    return asyncio.run(run.run(make))


def run_restart_job(url: BrokerURL, cluster: str, job_id: str, *, reason: str, operator: str,
                    audit_path: str | None, timeout_s: float,
               command_key: bytes | None = None) -> int:
    run = CommandRun(url, cluster, operator, audit=_audit(audit_path), timeout_s=timeout_s,
                     command_key=command_key)

    def make(r: CommandRun) -> Request:
        job = r.state.jobs.get(job_id)
        if job is None:
            r.say(f"warning: job {job_id} has no retained status yet; sending anyway")
        return r.tracker.restart_job(job_id, r.clock(), reason, job=job)

    return asyncio.run(run.run(make))
