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
