"""A store whose writes hang (its file on an NFS mount whose server went away: SQLite's write
never returns) under a running console. Everything the console did went through one I/O
pump: its publishes, then the store's write, under one lock. With the write hung, the next
drain never left the console (queued behind the write for as long as the mount hung) and
nothing said why. Now commands go out as before, and the hung write is said once, kept in
memory with the history it holds, and said again once it returns."""

import asyncio
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import uuid

import pytest

from fleetdeck.console import store_link as store_link_mod
from fleetdeck.console.commands import Phase
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import Store, StoreError, TickRows, WriterLock
from tests.conftest import REPO, eventually, spawn, stop_process

CLUSTER = "hungdb"
NODE = "gpu0001"


async def test_a_hung_store_write_holds_up_no_command(mosquitto, tmp_path, monkeypatch):
    monkeypatch.setattr(store_link_mod, "STORE_WRITE_HUNG_S", 1.0)
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                  NODE, "--interval", "0.5", "--state-dir", str(tmp_path / "state"),
                  log=tmp_path / "agent.log")
    session = ConsoleSession(CLUSTER, url=mosquitto.url, operator="dora",
                             client_id=f"hungdb-{uuid.uuid4().hex[:6]}")
    await session.open_store(tmp_path / "h.db")
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    mount_back = asyncio.Event()
    real_write = Store.write_rows

    async def hung_write(self: Store, rows: object) -> None:
        await mount_back.wait()  # the NFS server away: the write does not return
        await real_write(self, rows)  # type: ignore[arg-type]

    try:
        await eventually(lambda: (st := session.state.nodes.get(NODE)) is not None
                         and st.verdict.value == "ok", 20, message="the node up")
        monkeypatch.setattr(Store, "write_rows", hung_write)
        await asyncio.sleep(0.5)  # a tick's rows are in a write that hangs
        drain = session.drain([NODE], "hung store drill")
        await eventually(lambda: drain.phase is Phase.DONE, 15,
                         message="the drain done while the store's write hangs")
        await eventually(lambda: "store" in session.problems, 5, message="the hung write said")
        said = [line.text for _s, line in session.log if line.kind == "store"]
        assert len(said) == 1 and "has not returned for 1 s" in said[0], said
        assert "commands still go out" in said[0], said
        mount_back.set()
        await eventually(lambda: "store" not in session.problems, 10,
                         message="the store's write back")
        said = [line.text for _s, line in session.log if line.kind == "store"]
        assert len(said) == 2 and "returned after" in said[1], said
    finally:
        mount_back.set()
        stop.set()
        try:
            await asyncio.gather(watcher, return_exceptions=True)
            await session.close()
        finally:
            stop_process(agent)  # never left running by a failure above


async def test_a_hung_write_that_returns_failing_is_not_said_written(tmp_path, monkeypatch):
    """An NFS write that hangs mostly comes back with an error (EIO, a stale handle). Its
    return was said 'the history held is written' and the store's problem cleared, the
    failure's own line right under it."""
    monkeypatch.setattr(store_link_mod, "STORE_WRITE_HUNG_S", 0.2)
    session = ConsoleSession("hungerr")
    await session.open_store(tmp_path / "h.db")
    back = asyncio.Event()

    async def failing_write(self: Store, rows: object) -> None:
        await back.wait()
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(Store, "write_rows", failing_write)
    session.note("a line", keep=True)
    session.tick()
    session.store_link.in_background()  # the pump's turn: the write in flight
    await asyncio.sleep(0.3)
    session.store_link.in_background()  # the next turn: said hung
    assert "store" in session.problems
    back.set()
    task = session.store_link._task
    assert task is not None
    await task
    said = [line.text for _s, line in session.log if line.kind == "store"]
    assert not any("is written" in text for text in said), said
    assert any("returned after" in text and "disk I/O error" in text for text in said), said
    assert "disk I/O error" in session.problems["store"].detail
    monkeypatch.undo()
    await session.close()


async def test_a_hung_write_holds_a_closing_console_once(mosquitto, tmp_path, monkeypatch,
                                                        caplog):
    """Its close waited on the hung write: the console never exited. Then the watch's last
    flush, the pump's end and the close each waited ``STORE_WRITE_HUNG_S`` of their own for
    the same hung write: a one-shot command's result came 30 s late where its close was said
    to wait 10 s at most. They wait out one ``STORE_WRITE_HUNG_S`` from the write's start,
    together, and say what is not written."""
    monkeypatch.setattr(store_link_mod, "STORE_WRITE_HUNG_S", 2.0)
    session = ConsoleSession(CLUSTER, url=mosquitto.url,
                             client_id=f"hungdb-{uuid.uuid4().hex[:6]}")
    await session.open_store(tmp_path / "h.db")
    db = session.store
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    mount_back = asyncio.Event()

    async def hung_write(self: Store, rows: object) -> None:
        await mount_back.wait()

    try:
        await asyncio.sleep(0.5)
        monkeypatch.setattr(Store, "write_rows", hung_write)
        await eventually(lambda: "store" in session.problems, 10, message="the hung write said")
        t0 = time.monotonic()
        stop.set()
        await asyncio.wait_for(asyncio.gather(watcher, return_exceptions=True), 10)
        await asyncio.wait_for(session.close(), 5)
        took = time.monotonic() - t0
        assert took < 1.5, f"{took:.1f} s to close after the write was said hung"
        assert session.store is None
        assert any("tick(s) of history held in memory are not written" in r.getMessage()
                   for r in caplog.records)
    finally:
        mount_back.set()
        stop.set()
        if db is not None:
            await asyncio.sleep(0.1)
            await db.close()


async def test_no_pump_write_goes_into_a_store_being_closed(tmp_path, monkeypatch):
    """A TUI's unmount sets stop, then closes: the close released the store's lock before it
    closed the connection and only then let go of the store, so a pump's write started in
    between went into a closing connection (a review)."""
    session = ConsoleSession(CLUSTER)
    await session.open_store(tmp_path / "c.db")
    closing = asyncio.Event()
    late: list[object] = []
    real_close, real_write = Store.close, Store.write_rows

    async def slow_close(self: Store) -> None:
        closing.set()
        await asyncio.sleep(0.2)
        await real_close(self)

    async def watched_write(self: Store, rows: object) -> None:
        if closing.is_set():
            late.append(rows)
        await real_write(self, rows)  # type: ignore[arg-type]

    monkeypatch.setattr(Store, "close", slow_close)
    monkeypatch.setattr(Store, "write_rows", watched_write)
    closer = asyncio.create_task(session.close())
    await closing.wait()
    session.note("said while closing", kind="store", keep=True)
    if session.store is not None:  # a tick's rows, as the pump finds them
        session.store_link.queue_notes()
    session.store_link.in_background()
    await closer
    if session.store_link._task is not None:
        await session.store_link._task
    assert late == [], late


async def test_a_close_that_gave_up_on_a_hung_write_keeps_the_writer_lock(tmp_path,
                                                                          monkeypatch):
    """The close gave up on the hung write and let go of the collector's lock while that
    write could still land: a second collector started then wrote the same ticks' job minutes
    too. The lock is held until the write has returned and the store is closed."""
    monkeypatch.setattr(store_link_mod, "STORE_WRITE_HUNG_S", 0.3)
    session = ConsoleSession(CLUSTER)
    path = tmp_path / "w.db"
    await session.open_store(path, collector=True)
    back = threading.Event()
    real_write = Store.write_rows

    async def hung_write(self: Store, rows: TickRows) -> None:
        # SQLite's own call held in the connection's thread, as on a hung NFS mount.
        await self.db._execute(back.wait)
        await real_write(self, rows)

    monkeypatch.setattr(Store, "write_rows", hung_write)
    try:
        session.note("a line", keep=True)
        session.tick()
        session.store_link.in_background()
        await asyncio.sleep(0.1)
        await asyncio.wait_for(session.close(), 5)
        assert session.store is None
        holder = WriterLock(path).holder()
        assert holder is not None and f"pid {os.getpid()}" in holder, holder
        with pytest.raises(StoreError, match="another collector writes"):
            WriterLock(path).take("collect pid 2 on here")
    finally:
        back.set()
    await eventually(lambda: WriterLock(path).holder() is None, 5,
                     message="the lock let go once the hung write returned")


HANG_IN_SQLITE = """\
import sys, threading
from pathlib import Path
from fleetdeck.cli import main
from fleetdeck.console import store_link
from fleetdeck.console.store import Store

store_link.STORE_WRITE_HUNG_S = 1.0
flag, real_write = Path(sys.argv[1]), Store.write_rows

async def write_rows(self, rows):
    if flag.exists():  # SQLite's call never returns: the connection's thread is held
        await self.db._execute(threading.Event().wait)
    await real_write(self, rows)

Store.write_rows = write_rows
sys.exit(main(sys.argv[2:]))
"""


async def test_a_collector_whose_store_write_hangs_exits_on_sigterm(mosquitto, tmp_path):
    """aiosqlite's thread was not a daemon: the interpreter joined it at exit, so a collector
    SIGTERMed while its store's write hung (in SQLite's call, on a hung NFS mount) said the
    ticks not written and never exited (systemd killed it at TimeoutStopSec)."""
    script, flag, log = tmp_path / "hang.py", tmp_path / "hang", tmp_path / "collect.log"
    script.write_text(HANG_IN_SQLITE)
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--node-id",
                  NODE, "--interval", "0.5", "--state-dir", str(tmp_path / "state"),
                  log=tmp_path / "agent.log")
    with open(log, "ab") as out:
        col = subprocess.Popen(
            [sys.executable, str(script), str(flag), "collect", "--broker",
             str(mosquitto.url), "--cluster", CLUSTER, "--db", str(tmp_path / "c.db")],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
            cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(REPO)})
    try:
        # "1 store write" in the singular (collect's status_line), then "2 store writes".
        await eventually(lambda: re.search(r", [1-9][0-9]* store writes?\b", log.read_text())
                         is not None, 20, message="the collector writing its store")
        flag.touch()
        await eventually(lambda: "a write has not returned" in log.read_text(), 10,
                         message="the hung write said")
        col.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        try:
            col.wait(timeout=8)
        except subprocess.TimeoutExpired:
            raise AssertionError("the collector did not exit within 8 s of its SIGTERM:\n"
                                 + log.read_text()[-2000:]) from None
        took = time.monotonic() - t0
        said = log.read_text()
        assert "tick(s) of history held in memory are not written" in said, said[-2000:]
        print(f"exited {took:.1f} s after SIGTERM, rc {col.returncode}")
    finally:
        if col.poll() is None:
            col.kill()
            col.wait()
        stop_process(agent)
