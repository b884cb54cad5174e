"""A collector that starts (or restarts) on a store of its own writes no false history: a node
it knows only from the store, or was born but has sent nothing yet, is ``waiting``, not
``stale`` (docs/architecture.md, "Sharded collectors"), and a sharded collector writes rows for
its own nodes only. Real ``fleetdeck sim`` and ``collect`` processes on a real Mosquitto."""

import json
import time
from pathlib import Path

import pytest

from fleetdeck.console.shard import assign
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "cst"
NODES = 8
NODE_IDS = [f"gpu{i:04d}" for i in range(1, NODES + 1)]


def rows(db: Path) -> list[dict]:
    res = run_cli("events", "--db", str(db), "--kind", "verdict", "--since", "1h", "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def wait_for(what: str, check, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.5)


def collect(url: str, shard: str, db: Path, log: Path):
    return spawn("collect", "--broker", url, "--cluster", CLUSTER, "--shard", shard, "--db",
                 str(db), "--status-every", "1", log=log)


@pytest.mark.timeout(240)
def test_a_restarted_collector_writes_no_stale_rows_and_none_for_nodes_it_does_not_own(
        mosquitto, tmp_path):
    url = str(mosquitto.url)
    c2_db, c1_db = tmp_path / "c2.db", tmp_path / "c1.db"
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", str(NODES), "--jobs",
                "0", "--seed", "7", log=tmp_path / "sim.log")
    procs = [sim]
    try:
        # 1. Shard 2 alone owns every node: its store has a row for each.
        first = collect(url, "2/2", c2_db, tmp_path / "c2-first.log")
        procs.append(first)
        wait_for("shard 2's first rows", lambda: c2_db.exists()
                 and {r["node"] for r in rows(c2_db)} == set(NODE_IDS))
        assert stop_process(first) == 0
        before = rows(c2_db)
        assert {r["message"] for r in before} == {"new -> ok"}

        # 2. Shard 1 takes over every node; then shard 2 comes back and owns about half.
        other = collect(url, "1/2", c1_db, tmp_path / "c1.log")
        procs.append(other)
        wait_for("shard 1's rows", lambda: c1_db.exists()
                 and {r["node"] for r in rows(c1_db)} == set(NODE_IDS))
        log = tmp_path / "c2-again.log"
        again = collect(url, "2/2", c2_db, log)
        procs.append(again)
        wait_for("shard 2 caught up", lambda: log.exists() and "caught up" in log.read_text())
        # Well past the staleness window (3 s at a 1 s interval) after it connected.
        time.sleep(6)
        assert stop_process(again) == 0
        mine = {n for n, o in assign(NODE_IDS, ["shard-1", "shard-2"]).items()
                if o == "shard-2"}
        assert mine and mine != set(NODE_IDS)
        after = rows(c2_db)[len(before):]
        assert [r for r in after if "stale" in r["message"]] == []
        assert [r for r in after if r["node"] not in mine] == []
        # Its own nodes came back as its store left them: no change, so no row.
        assert after == []
    finally:
        for proc in reversed(procs):
            stop_process(proc)
