"""A store an upgrade left at schema 3 (no ``transitions.seen``): two processes opening it at
once both open it, and a user who may not write it still reads it (a review)."""

import asyncio
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fleetdeck.console.store import Store
from tests.conftest import REPO, fleetdeck_cmd

OPEN_AT = """
import asyncio, sys, time
from pathlib import Path
from fleetdeck.console.store import Store, StoreError
async def main():
    for path, at in zip(sys.argv[1::2], map(float, sys.argv[2::2])):
        time.sleep(max(0.0, at - time.time()))
        try:
            store = await Store.open(Path(path), cluster="c")
        except StoreError as err:
            print("FAILED", err, flush=True)
        else:
            await store.close()
asyncio.run(main())
"""


def schema_3_store(path: Path, failed_at: float = 1.0) -> None:
    """A store as schema 3 left it: ``transitions`` without ``seen``, one ok -> failed row."""
    async def made() -> None:
        store = await Store.open(path, cluster="c", claim=True)
        await store.close()
    asyncio.run(made())
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE transitions DROP COLUMN seen")
    db.execute("INSERT INTO transitions (ts, node, old, new, reasons) "
               "VALUES (?, 'gpu0001', 'ok', 'failed', 'G1')", (failed_at,))
    db.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    db.commit()
    db.close()


def test_two_processes_opening_a_schema_3_store_at_once_both_open_it(tmp_path):
    """A console and a collector started together after an upgrade: both found ``seen``
    missing, and one's ALTER failed "duplicate column name: seen" (5 of 12 pairs): the console
    kept no history for its run, the collector exited."""
    pairs = 12
    paths = [tmp_path / f"store{i}.db" for i in range(pairs)]
    for path in paths:
        schema_3_store(path)
    t0 = time.time() + 3.0  # both processes started and imported by then
    args = [a for i, p in enumerate(paths) for a in (str(p), str(t0 + 0.25 * i))]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-c", OPEN_AT, *args], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for _ in range(2)]
    said = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], said
    assert not any("FAILED" in s for s in said), said
    for path in paths:
        db = sqlite3.connect(path)
        cols = [r[1] for r in db.execute("PRAGMA table_info(transitions)")]
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        db.close()
        assert cols.count("seen") == 1 and version == ("6",), (cols, version)


def test_a_schema_3_store_this_user_may_not_write_is_still_read():
    """Another user's collector store (here a 0444 file, read by ``nobody`` where the tests run
    as root): ``events`` needed write access to add ``seen`` and refused the whole store,
    blaming its folder. Read as it is instead, and left at schema 3."""
    folder = Path(tempfile.mkdtemp(prefix="fleetdeck-ro-"))
    try:
        folder.chmod(0o1777)  # the -wal and -shm files may be made beside it
        path = folder / "store.db"
        schema_3_store(path, failed_at=time.time() - 60)
        path.chmod(0o444)
        cmd = fleetdeck_cmd("events", "--db", str(path), "--cluster", "c", "--since", "1h")
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                             env={**os.environ, "HOME": str(folder)}, check=False)
        assert res.returncode == 0, res.stderr
        assert "gpu0001" in res.stdout and "failed" in res.stdout, res.stdout
        db = sqlite3.connect(path)
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        db.close()
        assert version == ("3",)
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


def test_a_schema_5_store_this_user_may_not_write_is_still_read():
    """Schema 6 added ``cleared_faults``: creating it in another user's schema-5 store (a 0444
    file) failed, and ``events`` refused every such store, "the file is read-only to this
    user" (a review). Read as it is, the table missing, and left at schema 5."""
    folder = Path(tempfile.mkdtemp(prefix="fleetdeck-ro-"))
    try:
        folder.chmod(0o1777)
        path = folder / "store.db"
        schema_3_store(path, failed_at=time.time() - 60)
        db = sqlite3.connect(path)
        db.execute("ALTER TABLE transitions ADD COLUMN seen INTEGER")
        db.execute("DROP TABLE cleared_faults")
        db.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
        db.commit()
        db.close()
        path.chmod(0o444)
        cmd = fleetdeck_cmd("events", "--db", str(path), "--cluster", "c", "--since", "1h")
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                             env={**os.environ, "HOME": str(folder)}, check=False)
        assert res.returncode == 0, res.stderr
        assert "gpu0001" in res.stdout and "failed" in res.stdout, res.stdout
        db = sqlite3.connect(path)
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        db.close()
        assert version == ("5",) and "cleared_faults" not in tables
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()


SCHEMA_2 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE transitions (
    id INTEGER PRIMARY KEY, ts REAL NOT NULL, node TEXT NOT NULL, old TEXT, new TEXT NOT NULL,
    reasons TEXT NOT NULL);
CREATE INDEX transitions_node_ts ON transitions (node, ts);
CREATE INDEX transitions_ts ON transitions (ts);
CREATE TABLE events (
    event_id TEXT PRIMARY KEY, ts REAL NOT NULL, node TEXT NOT NULL, kind TEXT NOT NULL,
    severity TEXT NOT NULL, component TEXT NOT NULL, message TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX events_ts ON events (ts);
CREATE INDEX events_node_ts ON events (node, ts);
CREATE TABLE audit (
    request_id TEXT NOT NULL, outcome TEXT NOT NULL, ts REAL NOT NULL, who TEXT NOT NULL,
    what TEXT NOT NULL, targets TEXT NOT NULL, why TEXT NOT NULL, cluster TEXT NOT NULL,
    detail TEXT NOT NULL, args TEXT NOT NULL, PRIMARY KEY (request_id, outcome));
CREATE INDEX audit_ts ON audit (ts);
CREATE TABLE gpu_minutes (
    node TEXT NOT NULL, gpu INTEGER NOT NULL, minute INTEGER NOT NULL, samples INTEGER NOT NULL,
    util REAL, temp_max REAL, power REAL, sm_clock_min REAL, present INTEGER NOT NULL,
    partial INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (node, gpu, minute)) WITHOUT ROWID;
CREATE TABLE interruptions (
    job_id TEXT NOT NULL, ts REAL NOT NULL, cause TEXT NOT NULL, nodes TEXT NOT NULL,
    gpus INTEGER NOT NULL, lost_gpu_hours REAL NOT NULL, detail TEXT NOT NULL,
    PRIMARY KEY (job_id, ts));
CREATE INDEX interruptions_ts ON interruptions (ts);
CREATE TABLE job_minutes (
    minute INTEGER PRIMARY KEY, gpu_seconds REAL NOT NULL);
CREATE TABLE job_runs (
    job_id TEXT PRIMARY KEY, state TEXT NOT NULL, requeues INTEGER NOT NULL,
    nodes TEXT NOT NULL, run TEXT NOT NULL, ts REAL NOT NULL);
CREATE TABLE port_minutes (
    node TEXT NOT NULL, dev TEXT NOT NULL, minute INTEGER NOT NULL, samples INTEGER NOT NULL,
    xmit_Bps REAL, rcv_Bps REAL, symbol_errors INTEGER NOT NULL, link_downed INTEGER NOT NULL,
    down_samples INTEGER NOT NULL, partial INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (node, dev, minute)) WITHOUT ROWID;
CREATE INDEX port_minutes_errors ON port_minutes (minute)
    WHERE symbol_errors > 0 OR link_downed > 0;
INSERT INTO meta VALUES ('schema_version', '2');
INSERT INTO meta VALUES ('cluster', 'c');
"""
"""The DDL of schema 2 (console/store.py before ``left_jobs``): no ``left_jobs``,
``inventories``, ``cleared_faults`` nor ``transitions.seen``."""

RESTORE = """
import asyncio, logging, sys
from pathlib import Path
from fleetdeck.console.session import ConsoleSession
logging.basicConfig(level=logging.WARNING, format="%(message)s")
async def main():
    session = ConsoleSession("c", follow_up=False)
    restored = await session.open_store(Path(sys.argv[1]))
    st = session.state.nodes["gpu0001"]
    print("RESTORED", restored, st.verdict.value, flush=True)
    for line in session.log.lines():
        print("LINE", line.text, flush=True)
    await session.store.close()
asyncio.run(main())
"""


def test_a_schema_2_store_this_user_may_not_write_restores_what_it_holds():
    """A console on another user's schema-2 store (no ``left_jobs``, added by schema 3):
    its restore failed "no such table: left_jobs" and the console did not start. Each table
    a newer schema added is read where it is there; what is missing is one sentence."""
    folder = Path(tempfile.mkdtemp(prefix="fleetdeck-ro-"))
    try:
        folder.chmod(0o1777)
        path = folder / "store.db"
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode=WAL")  # as every store is (``Store.open``)
        db.executescript(SCHEMA_2)
        now = time.time()
        db.execute("INSERT INTO transitions (ts, node, old, new, reasons) "
                   "VALUES (?, 'gpu0001', 'ok', 'failed', 'G1')", (now - 60,))
        db.execute("INSERT INTO events VALUES ('gpu0001:1:1', ?, 'gpu0001', 'xid', 'error', "
                   "'gpu0', 'XID 79', '{}')", (now - 61,))
        db.commit()
        db.close()
        path.chmod(0o444)
        cmd = [sys.executable, "-c", RESTORE, str(path)]
        if os.geteuid() == 0:
            cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=REPO,
                             env={**os.environ, "HOME": str(folder),
                                  "PYTHONPATH": str(REPO)}, check=False)
        assert res.returncode == 0, res.stderr
        assert "RESTORED 1 " in res.stdout, res.stdout + res.stderr
        assert "LINE ok -> failed (G1)" in res.stdout.splitlines(), res.stdout
        said = [line for line in res.stdout.splitlines() if "left_jobs" in line]
        assert said == [
            "LINE history store store.db (schema 2, read-only to this user) has no "
            "cleared_faults, inventories or left_jobs table: its events and verdicts are "
            "restored, but not each node's last cleared fault (a repair that did not hold), "
            "what each node's GPUs and ports were (a GPU lost before the restart) or the "
            "job each node last left (a failed job's nodes requeued elsewhere); a console or "
            "collector of this version run by the store's owner adds them"], res.stdout
        db = sqlite3.connect(path)
        version = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        db.close()
        assert version == ("2",)
    finally:
        for f in folder.iterdir():
            f.unlink()
        folder.rmdir()
