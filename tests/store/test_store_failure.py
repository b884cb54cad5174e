"""A store that cannot be written (disk full) is said, retried, and caught up once it can: the
session holds the rows in memory meanwhile and loses no event (before, the collector stopped
writing for good after the first error)."""

from fleetdeck.agents.source import EventDraft
from fleetdeck.console import session as session_mod
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import Store
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
