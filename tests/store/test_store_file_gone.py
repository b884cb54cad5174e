"""The store's file deleted, or overwritten, under a running collector (a 2026-12-07 drill, on a
TUI console: `rm` of its --db, then random bytes copied over it). SQLite wrote on into the file
it had open: nothing was said, and every row written after the `rm` was lost with the process
(the header clear, `events --db` "no store"). Now the collector says so in one sentence on its
log, the console's header reads NO HISTORY with the sentence in its timeline."""

import time
from pathlib import Path

import pytest

from tests.conftest import spawn, stop_process

CLUSTER = "gone"


def _said(log: Path, words: str, timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if words in text:
            return text
        time.sleep(0.25)
    raise AssertionError(f"not said within {timeout} s: {words!r}\n{log.read_text()}")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("how", ["deleted", "overwritten"])
def test_a_collector_says_its_store_file_is_gone(mosquitto, tmp_path, how) -> None:
    db = tmp_path / "c.db"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--nodes", "4",
                "--interval", "1.0", log=tmp_path / "sim.log")
    log = tmp_path / "collect.log"
    col = spawn("collect", "--broker", str(mosquitto.url), "--cluster", CLUSTER, "--db", str(db),
                log=log)
    try:
        deadline = time.monotonic() + 30
        while not (db.exists() and db.stat().st_size > 0) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(3)
        assert "history store" not in log.read_text()
        if how == "deleted":
            db.unlink()
        else:
            with open(db, "r+b") as f:  # as `cp garbage c.db` does: the same inode
                f.write(b"\x8f" * 4096)
        text = _said(log, f"history store {db} was {how}", 20)
        assert "restart to keep history in a new store" in text, text
        assert col.poll() is None  # it goes on: the live side still serves its metrics
    finally:
        stop_process(col)
        stop_process(sim)
