"""Ticks held past ``STORE_QUEUE_TICKS`` are merged into the next one while the store's write
of the oldest is in flight (a hung mount: since f88a5d1 the pump writes in a task of its own
and ticks go on). The row in flight was merged into the next, then the write returned and
took the merged row off the queue as if it were the one written: every event, transition and
audit record of the ticks merged into it was lost, though the queue promises to drop only
per-minute samples."""

import asyncio

from fleetdeck.console import store_link as store_link_mod
from fleetdeck.console.session import CONSOLE_SOURCE, ConsoleSession
from fleetdeck.console.store import Store, TickRows


async def test_ticks_merged_while_the_oldest_is_written_lose_no_event(tmp_path, monkeypatch):
    monkeypatch.setattr(store_link_mod, "STORE_QUEUE_TICKS", 3)
    session = ConsoleSession("trimq")
    await session.open_store(tmp_path / "t.db")
    back = asyncio.Event()
    real_write = Store.write_rows

    async def slow_write(self: Store, rows: TickRows) -> None:
        await back.wait()  # the mount hangs, then comes back
        await real_write(self, rows)

    monkeypatch.setattr(Store, "write_rows", slow_write)
    writer: asyncio.Task[None] | None = None
    for i in range(8):
        session.note(f"line {i}", keep=True)
        session.tick()
        if writer is None:
            writer = asyncio.create_task(session.store_link.flush())  # the pump's, in flight
            await asyncio.sleep(0.05)
    assert writer is not None and session.counters.store_dropped_ticks > 0
    back.set()
    await writer
    await session.flush()
    store = session.store
    assert store is not None
    said = {e["message"] for e in await store.events(0, [CONSOLE_SOURCE], kinds=["console"])}
    await session.close()
    assert {f"line {i}" for i in range(8)} <= said, sorted(said)
