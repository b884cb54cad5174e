"""A store written before the protocol ended its stamps at year 9999 (TS_MS_MAX)."""

import asyncio
import sqlite3
import subprocess

from fleetdeck.console.store import Store
from fleetdeck.protocol.messages import TS_MS_MAX
from tests.conftest import fleetdeck_cmd
from tests.test_cli_tables import _store_with_long_event

FAR_MS = 2**53
"""Valid on the wire until TS_MS_MAX (year 287396): an older collector stored it."""
MINUTE = 1_800_000_000 // 60


def _older_store(db) -> None:
    asyncio.run(_store_with_long_event(db))
    c = sqlite3.connect(db)
    c.execute("INSERT INTO events VALUES ('e-far', ?, 'gpu0001', 'xid', 'critical', 'gpu3', "
              "'forged', '{}')", (FAR_MS / 1000,))
    for minute in (MINUTE, MINUTE + 1, FAR_MS // 60_000):
        c.execute("INSERT INTO gpu_minutes (node, gpu, minute, samples, util, temp_max, power, "
                  "sm_clock_min, present, partial) VALUES ('gpu0001', 0, ?, 60, 50, 60, 300, "
                  "1900, 1, 0)", (minute,))
    c.commit()
    c.close()


def test_rows_stamped_beyond_year_9999_are_not_read_back(tmp_path):
    """An older store's event or minute stamped 2^53 ms: 'events' and 'history' raised "year
    287396 is out of range", and 'history --plot' laid out 285,000 years of ticks. The store
    reads back no row the wire now refuses (TS_MS_MAX), the rest as before."""
    db = tmp_path / "s.db"
    _older_store(db)

    async def read() -> tuple[list, list, int]:
        store = await Store.open(db)
        try:
            return (await store.events(0.0), await store.gpu_history("gpu0001", 0.0),
                    await store.count("events", 0.0))
        finally:
            await store.close()

    events, minutes, count = asyncio.run(read())
    assert [e["kind"] for e in events] == ["link_flap"] and count == 1
    assert [m["minute"] for m in minutes] == [MINUTE, MINUTE + 1]
    assert all(e["ts"] <= TS_MS_MAX / 1000 for e in events)
    for args in (("events",), ("history", "gpu0001"), ("history", "gpu0001", "--plot")):
        res = subprocess.run([*fleetdeck_cmd(), *args, "--db", str(db), "--since",
                              "2020-01-01T00:00"], check=False, capture_output=True,
                             text=True, timeout=60)
        assert res.returncode == 0 and "Traceback" not in res.stderr, (args, res.stderr)
        assert "forged" not in res.stdout


def test_purge_takes_rows_stamped_beyond_year_9999(tmp_path):
    """Never read back (``LAST_ROW_S``) and never older than the retention's cutoff, an older
    store's rows stamped 2^53 ms stayed in it for good: the purge takes them with the old."""
    db = tmp_path / "s.db"
    _older_store(db)

    async def purge() -> None:
        store = await Store.open(db)
        try:
            await store.purge(MINUTE * 60 + 3600)
        finally:
            await store.close()

    asyncio.run(purge())
    c = sqlite3.connect(db)
    try:
        assert c.execute("SELECT COUNT(*) FROM events WHERE ts > 1e12").fetchone()[0] == 0
        assert [r[0] for r in c.execute("SELECT minute FROM gpu_minutes ORDER BY minute")] \
            == [MINUTE, MINUTE + 1]
    finally:
        c.close()


def test_a_sample_stamped_a_year_ahead_counts_in_its_arrival_minute(tmp_path):
    """A node whose clock jumped a year ahead after it connected (its bdSeq, stamped at
    connect, passes): its samples' minutes were a year in the future, the newest of its
    history and out of the purge's reach for that year. T1 says the clock; the store keeps
    the sample at its arrival, as the ingest keeps such an event."""
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.protocol.topics import Kind
    from tests.helpers import FakeNode

    year_s = 365 * 86400.0
    node = FakeNode("gpu0001", t0=1_800_000_000.0)
    ingest = Ingest(node.cluster)

    async def write() -> list:
        store = await Store.open(tmp_path / "s.db")
        try:
            node.feed(ingest, node.birth(), Kind.BIRTH)
            rx = node.now + 1
            node.now += year_s
            node.feed(ingest, node.telemetry(), Kind.TELEMETRY, rx=rx)
            await store.write_tick(ingest.take_batch(), [])
            await store.write_rows(store.partial_minutes())
            return await store.gpu_history("gpu0001", 0.0)
        finally:
            await store.close()

    minutes = {m["minute"] for m in asyncio.run(write())}
    assert minutes == {int((1_800_000_000.0 + 1) // 60)}
