"""A clean stop writes the minute in progress (marked partial), and the next run folds its
part of that minute into it: a collector restarted by systemd left a hole of up to a minute in
every node's history (a minute was written only once a sample of the next one arrived)."""

import sqlite3
import time

import pytest

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import Store
from fleetdeck.protocol.topics import Kind
from tests.conftest import run_cli, spawn, stop_process
from tests.helpers import FakeNode


def minute_rows(db, table: str, minute: int, *columns: str) -> list[tuple[int, ...]]:
    with sqlite3.connect(db) as con:
        return con.execute(f"SELECT {', '.join(columns or ('samples', 'partial'))} "
                           f"FROM {table} WHERE node = 'gpu0001' AND minute = ?",
                           (minute,)).fetchall()


@pytest.mark.timeout(120)
def test_sigterm_writes_the_minute_in_progress(mosquitto, tmp_path):
    db = tmp_path / "c.db"
    url = str(mosquitto.url)
    log = tmp_path / "collect.log"
    sim = spawn("sim", "--broker", url, "--cluster", "part", "--nodes", "1", "--jobs", "0",
                "--interval", "0.5", log=tmp_path / "sim.log")
    col = spawn("collect", "--broker", url, "--cluster", "part", "--db", str(db), log=log)
    try:
        deadline = time.monotonic() + 30
        while "caught up" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        if time.time() % 60 > 50:  # stop well inside a minute, not on its edge
            time.sleep(60 - time.time() % 60 + 1)
        time.sleep(3)
        minute = int(time.time() // 60)
        assert stop_process(col) == 0, log.read_text()  # SIGTERM
    finally:
        stop_process(col)
        stop_process(sim)
    assert len(minute_rows(db, "gpu_minutes", minute, "samples")) == 8, log.read_text()
    gpus = minute_rows(db, "gpu_minutes", minute)
    ports = minute_rows(db, "port_minutes", minute)
    assert len(ports) == 8
    assert all(samples >= 4 and partial == 1 for samples, partial in gpus + ports)
    res = run_cli("history", "gpu0001", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    assert f'"minute": {minute}' in res.stdout


async def test_a_restart_within_the_minute_folds_into_its_partial_row(tmp_path):
    db = tmp_path / "s.db"
    node = FakeNode("gpu0001", t0=1_800_000_000.0)  # on a minute's start
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)

    async def run(store: Store, seconds: int) -> None:
        for _ in range(seconds):
            node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
            batch = ingest.take_batch()
            state.apply(batch, node.now)
            await store.write_tick(batch, state.take_transitions())

    first = await Store.open(db)
    await run(first, 20)
    await first.write_rows(first.partial_minutes())  # as ConsoleSession.close does
    await first.close()
    minute = 1_800_000_000 // 60
    assert {r[0] for r in minute_rows(db, "gpu_minutes", minute)} == {20}
    again = await Store.open(db)
    await run(again, 45)  # the rest of the minute, and into the next
    await again.close()
    # Samples at seconds 1-59 of the minute: 20 before the restart, 39 after it.
    gpus = minute_rows(db, "gpu_minutes", minute)
    ports = minute_rows(db, "port_minutes", minute)
    assert len(gpus) == 8 and set(gpus) == {(59, 0)}
    assert len(ports) == 8 and set(ports) == {(59, 0)}


async def test_a_store_of_schema_1_gains_the_partial_column(tmp_path):
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as con:
        con.execute("CREATE TABLE gpu_minutes (node TEXT NOT NULL, gpu INTEGER NOT NULL, "
                    "minute INTEGER NOT NULL, samples INTEGER NOT NULL, util REAL, "
                    "temp_max REAL, power REAL, sm_clock_min REAL, present INTEGER NOT NULL, "
                    "PRIMARY KEY (node, gpu, minute)) WITHOUT ROWID")
        con.execute("INSERT INTO gpu_minutes VALUES ('gpu0001', 0, 5, 60, 1, 2, 3, 4, 1)")
    store = await Store.open(db)
    try:
        rows = await store.gpu_history("gpu0001", 0)
        assert [r["samples"] for r in rows] == [60]
    finally:
        await store.close()
    assert minute_rows(db, "gpu_minutes", 5) == [(60, 0)]
