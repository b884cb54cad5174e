"""A store that cannot be written (disk full) is said, retried, and caught up once it can: the
session holds the rows in memory meanwhile and loses no event (before, the collector stopped
writing for good after the first error)."""

import asyncio
import contextlib
import os
import subprocess
import threading

import pytest

from fleetdeck.agents.source import EventDraft
from fleetdeck.console import store_link as store_link_mod
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import CONSOLE_SOURCE, Store, StoreError
from fleetdeck.protocol.topics import Kind
from tests.conftest import run_cli
from tests.helpers import FakeNode


async def at_its_page_limit(tmp_path) -> tuple[FakeNode, ConsoleSession, Store]:
    """A console with one node whose store is full from now on: SQLite's own "database or
    disk is full", at the page limit the file has now (``PRAGMA max_page_count``)."""
    node = FakeNode(cluster="full")
    session = ConsoleSession("full", clock=lambda: node.now)
    await session.open_store(tmp_path / "store.db")
    assert session.store is not None
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    session.tick()
    await session.flush()
    async with session.store.db.execute("PRAGMA page_count") as cur:
        row = await cur.fetchone()
    assert row is not None
    await session.store.db.execute(f"PRAGMA max_page_count = {row[0]}")
    return node, session, session.store


async def test_disk_full_is_reported_retried_and_caught_up(tmp_path, monkeypatch):
    monkeypatch.setattr(store_link_mod, "STORE_RETRY_S", (0.0, 0.0))  # retry at once in a test
    node, session, store = await at_its_page_limit(tmp_path)
    for i in range(400):
        ev = node.agent._event(EventDraft("xid", f"event {i} " + "x" * 200))
        node.feed(session.ingest, ev, Kind.EVENT)
        if i % 50 == 0:
            node.now += 0.5
            session.tick()
            await session.flush()
    assert session.counters.store_errors > 0
    assert "store" in session.problems and "full" in session.problems["store"].detail
    assert session.store_backlog > 0
    # Space comes back: the next flush writes everything that was held.
    await store.db.execute("PRAGMA max_page_count = 1073741823")
    node.now += 0.5
    session.tick()
    await session.flush()
    assert session.store_backlog == 0 and "store" not in session.problems, session.problems
    # The outage is in the timeline, and in the store once it could be written again.
    said = [line.text for line in session.log.lines() if line.kind == "store"]
    assert len(said) == 2, said
    assert "full" in said[0] and "held in memory and retried" in said[0]
    assert "writable again after" in said[1] and "caught up" in said[1]
    await session.close()
    store = await Store.open(tmp_path / "store.db")
    rows = await store.events(0)
    await store.close()
    assert len([r for r in rows if r["node"] != CONSOLE_SOURCE]) == 400
    kept = [r["message"] for r in rows if r["node"] == CONSOLE_SOURCE and r["kind"] == "store"]
    assert len(kept) == 2 and "full" in kept[0] and "writable again" in kept[1], kept


async def test_an_outage_that_ends_at_close_is_kept_with_its_end(tmp_path, monkeypatch):
    """Space comes back and the service is stopped before the next tick: the final flush
    catches up and says "writable again", and that line is kept too (it was made after the
    last tick's rows, and lost)."""
    monkeypatch.setattr(store_link_mod, "STORE_RETRY_S", (60.0, 60.0))  # no retry before close
    node, session, store = await at_its_page_limit(tmp_path)
    for i in range(100):
        node.feed(session.ingest, node.agent._event(EventDraft("xid", f"e{i} " + "x" * 200)),
                  Kind.EVENT)
    node.now += 0.5
    session.tick()
    await session.flush()
    assert "store" in session.problems
    await store.db.execute("PRAGMA max_page_count = 1073741823")
    await session.close()
    store = await Store.open(tmp_path / "store.db")
    rows = await store.events(0)
    await store.close()
    assert len([r for r in rows if r["node"] != CONSOLE_SOURCE]) == 100
    kept = [r["message"] for r in rows if r["node"] == CONSOLE_SOURCE and r["kind"] == "store"]
    assert len(kept) == 2 and "full" in kept[0] and "writable again" in kept[1], kept


def test_a_store_sqlite_cannot_open_leaves_no_thread_traceback(tmp_path, monkeypatch):
    """A path SQLite cannot open (here a folder) is one StoreError and nothing after it: the
    worker thread of a failed aiosqlite connect used to outlive the event loop and print
    "Exception in thread … Event loop is closed" under ``collect``'s one sentence, about one
    run in three (so the open is tried many times). (A folder is refused before SQLite now,
    ``path_problem``: let through here, it stands for any path SQLite fails on.)"""
    import fleetdeck.console.store as store_module

    monkeypatch.setattr(store_module, "path_problem", lambda path: "")
    folder = tmp_path / "a-folder.db"
    folder.mkdir()
    died: list[threading.ExceptHookArgs] = []
    hook = threading.excepthook
    threading.excepthook = died.append
    try:
        for _ in range(40):
            before = set(threading.enumerate())
            with pytest.raises(StoreError, match="cannot open the history store"):
                asyncio.run(Store.open(folder))
            for thread in set(threading.enumerate()) - before:
                thread.join(5)
    finally:
        threading.excepthook = hook
    assert not died, died[0].exc_value


async def test_a_store_another_process_holds_write_locked_still_opens(tmp_path, monkeypatch):
    """Opening wrote ``meta`` each time, and an INSERT takes the write lock even when it
    changes nothing: with another process in a write transaction for over 5 s, a console got
    "cannot use the history store …: database is locked (is the folder writable …?)" and kept
    no history for its whole run (an SRE drill). Now it opens, reads, holds its writes in
    memory while the lock is held, and writes them after."""
    import sqlite3

    monkeypatch.setattr(store_link_mod, "STORE_RETRY_S", (0.0, 0.0))
    path = tmp_path / "store.db"
    node = FakeNode(cluster="locked")
    session = ConsoleSession("locked", clock=lambda: node.now)
    await session.open_store(path)
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    node.feed(session.ingest, node.agent._event(EventDraft("xid", "before")), Kind.EVENT)
    session.tick()
    await session.flush()
    await session.close()

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA busy_timeout=0")
    holder.execute("BEGIN EXCLUSIVE")
    try:
        store = await Store.open(path, cluster="locked", claim=True)
        await store.db.execute("PRAGMA busy_timeout=50")  # the write below fails fast
        assert [r["message"] for r in await store.events(0)] == ["before"]
        session = ConsoleSession("locked", clock=lambda: node.now)
        session.store = store
        node.feed(session.ingest, node.agent._event(EventDraft("xid", "during")), Kind.EVENT)
        session.tick()
        await session.flush()
        assert "locked" in session.problems["store"].detail and session.store_backlog
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    node.now += 0.5
    session.tick()
    await session.flush()
    assert session.store_backlog == 0 and "store" not in session.problems
    assert [r["message"] for r in await store.events(0)
            if r["node"] != CONSOLE_SOURCE] == ["before", "during"]
    await session.close()


async def test_another_programs_sqlite_file_is_refused_and_left_as_it_was(tmp_path):
    """``collect --db app.db`` (or ``events``) on another program's SQLite database wrote
    fleetdeck's nine tables into it (an SRE drill)."""
    import sqlite3

    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE users (id INTEGER, name TEXT)")
        db.commit()
    before = path.read_bytes()
    with pytest.raises(StoreError, match=r"another program's SQLite database .*users"):
        await Store.open(path, cluster="x", claim=True)
    assert path.read_bytes() == before
    with contextlib.closing(sqlite3.connect(path)) as db:
        names = [r[0] for r in db.execute("SELECT name FROM sqlite_master")]
    assert names == ["users"]


async def test_a_damaged_store_is_said_to_be_damaged(tmp_path):
    """A store cut in half (a disk error, a copy that stopped) got "is the folder writable,
    and the file a fleetdeck store?": the folder was fine and the file was ours (an SRE
    drill). The sentence says it is damaged and what to do."""
    path = tmp_path / "store.db"
    store = await Store.open(path, cluster="c", claim=True)
    await store.db.executemany(
        "INSERT INTO events VALUES (?,?,?,?,?,?,?,?)",
        [(f"n.1.{i}", i, "n", "xid", "error", "gpu0", "x" * 500, "{}") for i in range(300)])
    await store.db.commit()
    await store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    await store.close()
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(StoreError) as caught:
        await Store.open(path, cluster="c", claim=True)
    said = str(caught.value)
    assert "is damaged" in said and "move it aside" in said and "writable" not in said, said


async def test_a_catch_up_cut_short_is_one_outage_and_the_wal_is_given_back(
        tmp_path, monkeypatch, caplog):
    """Drill on a 2 MB tmpfs: space freed, the held ticks written one transaction each, and
    "writable again …; caught up" logged after the first while the rest still waited; the
    catch-up's WAL (below SQLite's 1,000-page checkpoint) filled the freed space, the next
    write failed, and a second "database or disk is full" outage began. Now the outage ends
    when nothing is held, and the WAL is checkpointed as the catch-up goes and after it."""
    import logging
    import sqlite3

    monkeypatch.setattr(store_link_mod, "STORE_RETRY_S", (0.0, 0.0))
    monkeypatch.setattr(store_link_mod, "STORE_CATCH_UP_CHECKPOINT", 8)
    node = FakeNode(cluster="full")
    session = ConsoleSession("full", clock=lambda: node.now)
    await session.open_store(tmp_path / "store.db")
    assert session.store is not None
    store = session.store
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    session.tick()
    await session.flush()
    real_write = store.write_rows
    budget = {"left": 0}

    async def write_rows(rows):
        if budget["left"] <= 0:
            raise sqlite3.OperationalError("database or disk is full")
        budget["left"] -= 1
        await real_write(rows)

    monkeypatch.setattr(store, "write_rows", write_rows)
    caplog.set_level(logging.WARNING, logger="fleetdeck.session")
    for i in range(40):
        node.feed(session.ingest, node.agent._event(EventDraft("xid", f"event {i}")),
                  Kind.EVENT)
        node.now += 0.5
        session.tick()
        await session.flush()
    assert session.store_backlog == 40
    budget["left"] = 20  # space for half of them, then full again
    node.now += 0.5
    session.tick()
    await session.flush()
    assert session.store_backlog == 21 and "store" in session.problems
    said = [r.getMessage() for r in caplog.records]
    assert len([s for s in said if "disk is full" in s]) == 1, said  # one outage, said once
    assert not [s for s in said if "caught up" in s], said
    budget["left"] = 1000
    node.now += 0.5
    session.tick()
    await session.flush()
    assert session.store_backlog == 0 and "store" not in session.problems
    said = [r.getMessage() for r in caplog.records if "caught up" in r.getMessage()]
    assert len(said) == 1 and "42 held tick(s) written" in said[0], said
    wal = tmp_path / "store.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    rows = await store.events(0)
    assert len([r for r in rows if r["node"] != CONSOLE_SOURCE]) == 40
    await session.close()


def test_a_store_on_a_read_only_mount_is_said_to_be_read_only(tmp_path):
    """`events` (and the console's history) on a store whose folder is mounted read-only said
    SQLite's "unable to open database file (is the folder writable, and the file a fleetdeck
    store?)", where `collect` on the same folder said "Read-only file system" (a failure
    drill). A real read-only mount where this user may make one (root), else a folder and file
    this user may not write."""
    folder = tmp_path / "ro"
    folder.mkdir()
    path = folder / "store.db"
    mounted = False
    if os.geteuid() == 0:
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(folder)],
                          capture_output=True, check=False).returncode != 0:
            pytest.skip("root here may not mount a tmpfs")
        mounted = True
    try:
        asyncio.run(_made(path))
        if mounted:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        else:
            path.chmod(0o444)
            folder.chmod(0o555)
        res = run_cli("events", "--db", str(path), "--cluster", "c", "--since", "1h")
    finally:
        if mounted:
            subprocess.run(["umount", str(folder)], check=False)
        else:
            folder.chmod(0o755)
    assert res.returncode == 2, (res.returncode, res.stderr)
    said = res.stderr.strip()
    assert "read-only file system" in said or "not writable by this user" in said, said
    assert "unable to open database file" not in said and said.count("\n") == 0, said


async def _made(path) -> None:
    store = await Store.open(path, cluster="c", claim=True)
    await store.close()
