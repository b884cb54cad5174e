"""A store that cannot be written (disk full) is said, retried, and caught up once it can: the
session holds the rows in memory meanwhile and loses no event (before, the collector stopped
writing for good after the first error)."""

import asyncio
import threading

import pytest

from fleetdeck.agents.source import EventDraft
from fleetdeck.console import session as session_mod
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import Store, StoreError
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode


async def test_disk_full_is_reported_retried_and_caught_up(tmp_path, monkeypatch):
    monkeypatch.setattr(session_mod, "STORE_RETRY_S", (0.0, 0.0))  # retry at once in a test
    node = FakeNode(cluster="full")
    session = ConsoleSession("full", clock=lambda: node.now)
    await session.open_store(tmp_path / "store.db")
    assert session.store is not None
    node.feed(session.ingest, node.birth(), Kind.BIRTH)
    session.tick()
    await session.flush()
    # SQLite's own "database or disk is full", at the page limit the file has now.
    async with session.store.db.execute("PRAGMA page_count") as cur:
        (pages,) = await cur.fetchone()
    await session.store.db.execute(f"PRAGMA max_page_count = {pages}")
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
    await session.store.db.execute("PRAGMA max_page_count = 1073741823")
    node.now += 0.5
    session.tick()
    await session.flush()
    assert session.store_backlog == 0 and "store" not in session.problems, session.problems
    await session.close()
    store = await Store.open(tmp_path / "store.db")
    rows = await store.events(0)
    await store.close()
    assert len(rows) == 400


def test_a_store_sqlite_cannot_open_leaves_no_thread_traceback(tmp_path):
    """A path SQLite cannot open (here a folder) is one StoreError and nothing after it: the
    worker thread of a failed aiosqlite connect used to outlive the event loop and print
    "Exception in thread … Event loop is closed" under ``collect``'s one sentence, about one
    run in three (so the open is tried many times)."""
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
