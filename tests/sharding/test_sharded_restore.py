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


def incidents_on_digests(env) -> list[dict]:
    out = run_cli("status", *env, "--digests", "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["incidents"]


def test_a_restarted_collector_still_names_the_job_its_failed_nodes_were_in(mosquitto,
                                                                             tmp_path):
    """XID 79 on three nodes of one job, which the scheduler requeued elsewhere: one incident
    naming the job, `job:<id>:failed`, on digests too (``Digest.struck_job``). Restarted, the
    collector read them as three nodes with "no job on it": the job they left was only in its
    memory (a drill). Nor does the restart write a verdict row for them: each was failed
    before it and is after."""
    url, cluster, db = str(mosquitto.url), "shj", tmp_path / "s.db"
    env = ("--broker", url, "--cluster", cluster)
    sim = spawn("sim", *env, "--nodes", "8", log=tmp_path / "sim.log")
    collect = spawn("collect", *env, "--db", str(db), "--shard", "1/1",
                    log=tmp_path / "c1.log")
    try:
        time.sleep(3)
        assert run_cli("inject", *env, "submit", "name=bert", "nodes=4",
                       "steps=100000").returncode == 0
        deadline = time.monotonic() + 30
        while True:
            out = run_cli("status", *env, "--json")
            jobs = [j for j in json.loads(out.stdout)["jobs"]
                    if j["name"] == "bert" and j["state"] == "R"] if out.stdout else []
            if jobs:
                break
            assert time.monotonic() < deadline, out.stderr
            time.sleep(1)
        job_id, struck = jobs[0]["job_id"], sorted(jobs[0]["nodes"])[:3]
        for node in struck:
            assert run_cli("inject", *env, "xid79", f"node={node}").returncode == 0
        key = f"job:{job_id}:failed"
        deadline = time.monotonic() + 30
        while True:
            found = incidents_on_digests(env)
            if any(i["key"] == key for i in found):
                break
            assert time.monotonic() < deadline, found
            time.sleep(1)
        assert next(i for i in found if i["key"] == key)["nodes"] == struck, found
        rows = {n: verdict_rows(db, n) for n in struck}
        assert all(any("ok -> failed" in r for r in rows[n]) for n in struck), rows

        assert stop_process(collect) == 0
        log = tmp_path / "c2.log"
        collect = spawn("collect", *env, "--db", str(db), "--shard", "1/1", log=log)
        deadline = time.monotonic() + 30
        while "caught up" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        time.sleep(3)  # its first digests of the nodes replace the retained ones
        found = incidents_on_digests(env)
        assert [i["nodes"] for i in found if set(i["nodes"]) & set(struck)] == [struck], found
        assert next(i for i in found if i["nodes"] == struck)["key"] == key, found
        assert {n: verdict_rows(db, n) for n in struck} == rows
    finally:
        stop_process(collect)
        stop_process(sim)
