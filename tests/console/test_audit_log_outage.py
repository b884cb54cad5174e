"""An audit log that fails for a while under a running console (a full disk, a directory where
the file goes) and then works again: a real agent process, a real Mosquitto, the shipped console
core.

2026-12-07 drill (the TUI's audit log on a full 512 KiB tmpfs): the drain sent while it was full
was in no audit file once there was room again, while the resume that followed was, and the
header said AUDIT LOG FAILING for as long as the console ran."""

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fleetdeck.console.audit import AuditLog
from fleetdeck.console.commands import Phase
from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, spawn, stop_process

CLUSTER = "audout"
NODE = "gpu0001"


@asynccontextmanager
async def watched_agent(mosquitto: Any, tmp_path: Path) -> AsyncIterator[
        tuple[ConsoleSession, Path]]:
    """A real agent, and a console watching it with its audit log at the returned path, once
    the node reads ok."""
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                  NODE, "--interval", "0.5", "--state-dir", str(tmp_path / "state"),
                  log=tmp_path / "agent.log")
    path = tmp_path / "audit.jsonl"
    session = ConsoleSession(CLUSTER, url=mosquitto.url, operator="carol", audit=AuditLog(path),
                             client_id=f"audout-{uuid.uuid4().hex[:6]}")
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    try:
        await eventually(lambda: (st := session.state.nodes.get(NODE)) is not None
                         and st.verdict.value == "ok", 20, message="the node up")
        yield session, path
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)
        stop_process(agent)


async def test_records_a_failing_audit_log_missed_reach_it_once_it_works(mosquitto, tmp_path):
    async with watched_agent(mosquitto, tmp_path) as (session, path):
        path.mkdir()  # the log cannot be opened for append now
        drain = session.drain([NODE], "audit outage drill")
        await eventually(lambda: drain.phase is Phase.DONE, 20, message="the drain done")
        await eventually(lambda: "audit" in session.problems, 5, message="the log failing said")
        path.rmdir()  # room again
        resume = session.resume([NODE])
        await eventually(lambda: resume.phase is Phase.DONE, 20, message="the resume done")
        await eventually(lambda: len(AuditLog(path).read()) == 4, 10,
                         message="four records in the file")
        assert [(r["what"], r["outcome"]) for r in AuditLog(path).read()] == [
            ("drain", "requested"), ("drain", "done"), ("resume", "requested"),
            ("resume", "done")]
        await eventually(lambda: not session.audit_failing and "audit" not in session.problems,
                         5, message="the audit log no longer failing")


async def test_held_records_reach_the_file_with_no_new_command(mosquitto, tmp_path):
    async with watched_agent(mosquitto, tmp_path) as (session, path):
        path.mkdir()
        drain = session.drain([NODE], "audit outage drill")
        await eventually(lambda: drain.phase is Phase.DONE, 20, message="the drain done")
        path.rmdir()
        # Within the retry period (console/session.py, AUDIT_RETRY_S), no command needed.
        await eventually(lambda: path.is_file() and len(AuditLog(path).read()) == 2, 10,
                         message="the drain's records in the file")
        assert [r["outcome"] for r in AuditLog(path).read()] == ["requested", "done"]


async def test_the_failure_and_its_end_are_said_in_the_timeline(mosquitto, tmp_path, caplog):
    """The log's file system remounted read-only under a TUI, then a drain (2026-12-07 drill):
    the header said AUDIT LOG FAILING, and nothing said why (the disk's error was held for no
    view), nor, once it was written again, that it had been."""
    async with watched_agent(mosquitto, tmp_path) as (session, path):
        path.mkdir()
        drain = session.drain([NODE], "audit outage drill")
        await eventually(lambda: drain.phase is Phase.DONE, 20, message="the drain done")
        await eventually(lambda: "audit" in session.problems, 5, message="the log failing")
        said = [line for _s, line in session.log if line.kind == "audit"]
        assert len(said) == 1 and said[0].severity == "error", said
        assert f"cannot write audit log {path}" in said[0].text, said
        assert "commands still go out; their records are held" in said[0].text, said
        assert any("cannot write audit log" in r.getMessage() for r in caplog.records)
        path.rmdir()
        await eventually(lambda: "audit" not in session.problems, 10, message="written again")
        said = [line.text for _s, line in session.log if line.kind == "audit"]
        assert len(said) == 2 and said[1] == (
            f"audit log {path} written again: the records it held are in it"), said
