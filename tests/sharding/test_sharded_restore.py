"""A sharded collector restarted on its store keeps what a plain one keeps: the hour of port
errors and the settle hold of the nodes it restores (docs/reliability.md, "Failure drills by
hand"). It learned its nodes from their births only, so its first ownership pass forgot every
node restored from the store, and a link that flapped 90 s before the restart read
"failed -> ok" 3 s after it."""

import json
import time

from tests.conftest import run_cli, spawn, stop_process


def verdict_rows(db, node: str) -> list[str]:
    out = run_cli("events", "--db", str(db), "--node", node, "--kind", "verdict")
    assert out.returncode == 0, out.stderr
    return [line for line in out.stdout.splitlines() if "->" in line]


def test_a_restarted_sharded_collector_holds_a_flap_of_the_last_hour(mosquitto, tmp_path):
    url, cluster, db = str(mosquitto.url), "shr", tmp_path / "s.db"
    env = ("--broker", url, "--cluster", cluster)
    sim = spawn("sim", *env, "--nodes", "4", "--jobs", "0", log=tmp_path / "sim.log")
    collect = spawn("collect", *env, "--db", str(db), "--shard", "1/1",
                    log=tmp_path / "c1.log")
    try:
        time.sleep(4)
        assert run_cli("inject", *env, "ib_flap", "node=gpu0002", "count=1",
                       "down=1").returncode == 0
        deadline = time.monotonic() + 30
        while not any("-> failed" in r for r in verdict_rows(db, "gpu0002")):
            assert time.monotonic() < deadline, (tmp_path / "c1.log").read_text()[-2000:]
            time.sleep(1)
        # A stop writes the minute in progress (a SIGKILL loses it: the store keeps minutes).
        assert stop_process(collect) == 0
        collect = spawn("collect", *env, "--db", str(db), "--shard", "1/1",
                        log=tmp_path / "c2.log")
        time.sleep(15)
        rows = verdict_rows(db, "gpu0002")
        assert not any("failed -> ok" in r for r in rows), rows
        out = run_cli("status", *env, "--digests", "--json")
        assert out.returncode == 0, out.stderr
        nodes = {n["id"]: n for n in json.loads(out.stdout)["nodes"]}
        assert nodes["gpu0002"]["verdict"] == "failed", nodes["gpu0002"]
    finally:
        stop_process(collect)
        stop_process(sim)
