"""One collector writes a store; a console on it reads. ``collect`` and ``console`` both default
to $XDG_STATE_HOME/fleetdeck/<cluster>.db: with both running, every job interruption was written
twice and the GPU-seconds held by jobs summed twice (a 3 a.m. drive: `report` listed six
interruptions for three)."""

import time

import pytest

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import StoreError, WriterLock
from fleetdeck.console.store_link import WRITER_CHECK_S
from tests.conftest import run_cli, spawn, stop_process
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


def test_the_lock_names_its_holder_and_goes_with_it(tmp_path):
    lock = WriterLock(tmp_path / "c.db")
    assert lock.holder() is None
    lock.take("collect pid 1 on here")
    assert WriterLock(tmp_path / "c.db").holder() == "collect pid 1 on here"
    with pytest.raises(StoreError, match=r"another collector writes the history store .*c\.db "
                                         r"\(collect pid 1 on here\): one collector per store"):
        WriterLock(tmp_path / "c.db").take("collect pid 2 on here")
    lock.release()
    assert WriterLock(tmp_path / "c.db").holder() is None


def test_a_symlink_to_a_store_is_the_same_store(tmp_path):
    """`collect --db link.db` beside a collector of the store it links to took a lock of its
    own and wrote the store too (an SRE drill)."""
    (tmp_path / "c.db").touch()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "link.db").symlink_to(tmp_path / "c.db")
    lock = WriterLock(tmp_path / "c.db")
    lock.take("collect pid 1 on here")
    try:
        with pytest.raises(StoreError, match="another collector writes"):
            WriterLock(tmp_path / "other" / "link.db").take("collect pid 2 on here")
        assert WriterLock(tmp_path / "other" / "link.db").holder() == "collect pid 1 on here"
    finally:
        lock.release()


async def _interrupted(session: ConsoleSession, fleet: SynthFleet, clock: Clock) -> None:
    run = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    fleet.birth(session.ingest)
    publish_job(session.ingest, job_status("41", run, clock), clock)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(session.ingest)
        session.tick()
    publish_job(session.ingest, job_status("41", run, clock, requeues=1), clock)
    for _ in range(15):
        clock.advance(1.0)
        fleet.telemetry(session.ingest)
        session.tick()
    await session.flush()


async def test_a_console_on_a_collectors_store_reads_it_and_writes_only_its_audit(tmp_path):
    db = tmp_path / "c.db"
    clock = Clock()
    fleet = SynthFleet(8, clock, leaves=1)
    collector = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await collector.open_store(db, collector=True)
    console = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await console.open_store(db)
    assert console.store_written_by is not None
    assert console.store_written_by.startswith("collect pid ")
    assert any("is written by collect pid" in line.text for line in console.log.lines())
    with pytest.raises(StoreError, match="another collector writes"):
        await ConsoleSession(CLUSTER, clock=clock).open_store(db, collector=True)

    # Both see job 41 requeued: one row, the collector's.
    for session in (collector, console):
        await _interrupted(session, fleet, clock)
    rows = await console.store.interruptions(0.0)
    assert len(rows) == 1, rows
    async with console.store.db.execute("SELECT SUM(gpu_seconds) FROM job_minutes") as cur:
        (held_s,) = await cur.fetchone()
    assert held_s <= 18 * 32 + 1  # the collector's 18 s of a 32-GPU job, not twice that

    # The collector stops: the console writes the store from then on.
    await collector.close()
    clock.advance(WRITER_CHECK_S + 0.5)
    console.tick()
    assert console.store_written_by is None
    assert any("its collector stopped; this console writes it now" in line.text
               for line in console.log.lines())
    await console.close()


@pytest.mark.needs("mosquitto")
def test_a_second_collector_on_one_store_is_one_sentence(mosquitto, tmp_path):
    db = tmp_path / "c.db"
    url = str(mosquitto.url)
    first = spawn("collect", "--broker", url, "--cluster", "lock", "--db", str(db),
                  log=tmp_path / "first.log")
    try:
        deadline = time.monotonic() + 30
        while WriterLock(db).holder() is None:
            assert time.monotonic() < deadline, (tmp_path / "first.log").read_text()
            time.sleep(0.2)
        second = run_cli("collect", "--broker", url, "--cluster", "lock", "--db", str(db))
        assert second.returncode == 2, second.stderr
        assert "another collector writes the history store" in second.stderr
        assert "Traceback" not in second.stderr
    finally:
        assert stop_process(first) == 0
    assert WriterLock(db).holder() is None  # gone with its process


def test_the_lock_makes_the_stores_folder_and_names_the_store_when_it_cannot(tmp_path):
    lock = WriterLock(tmp_path / "new" / "deeper" / "c.db")  # a first run's default path
    lock.take("collect pid 1")
    lock.release()
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match=r"cannot open the history store .*file/c\.db: Not a "
                                         r"directory\.$"):
        WriterLock(tmp_path / "file" / "c.db").take("collect pid 1")


async def test_a_console_on_a_collectors_store_purges_none_of_its_history(tmp_path):
    """The collector keeps the store's retention (its --retention-days): a console opened on
    its store read the collector before the store was its own, so its writes (its audit) went
    on purging with the console's retention, and a week of the collector's history was gone."""
    db = tmp_path / "c.db"
    clock = Clock(time.time() - 5 * 86400)
    collector = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await collector.open_store(db, retention_days=30, collector=True)
    collector.note("five days ago", keep=True)
    collector.tick()
    await collector.flush()
    console = ConsoleSession(CLUSTER, ingest=Ingest(CLUSTER), follow_up=False)
    await console.open_store(db, retention_days=1)
    assert console.store_written_by is not None
    store = console.store
    assert store is not None
    assert [e["message"] for e in await store.events(0)] == ["five days ago"]
    store._last_purge = time.monotonic() - 3600  # a purge is due (every 10 min)
    await store.write_rows(store.prepare_audit())  # what a reader writes: its own audit
    assert [e["message"] for e in await store.events(0)] == ["five days ago"]
    await console.close()
    await collector.close()
