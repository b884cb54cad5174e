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
