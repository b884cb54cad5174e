"""Every recorded fixture, replayed headless through the console's ingest path, reaches the
verdicts fixtures/README.md documents."""

import json
from pathlib import Path

import pytest

from fleetdeck.console.replay import replay_headless
from tests.conftest import REPO, run_cli

FIXTURES = REPO / "fixtures"


def replay(name: str) -> dict:
    out = replay_headless(FIXTURES / f"{name}.jsonl.gz")
    assert out["replay"]["skipped_lines"] == 0 and not out["replay"]["truncated"]
    assert out["totals"]["nodes"] == 16 and out["totals"]["malformed"] == 0
    return out


def bad(out: dict) -> dict[str, dict]:
    return {n["id"]: n for n in out["nodes"] if n["verdict"] != "ok" or n["drain"] != "none"}


def only_job(out: dict) -> dict:
    assert len(out["jobs"]) == 1
    return out["jobs"][0]


def kinds(out: dict) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ev in out["events"]:
        counts[ev["kind"]] = counts.get(ev["kind"], 0) + 1
    return counts


def test_every_fixture_is_small_and_documented():
    readme = (FIXTURES / "README.md").read_text()
    files = sorted(FIXTURES.glob("*.jsonl.gz"))
    assert len(files) >= 8
    for f in files:
        assert f.stat().st_size < 2 * 1024 * 1024, f
        assert f"`{f.name}`" in readme, f"{f.name} is not described in fixtures/README.md"


def test_healthy():
    out = replay("healthy")
    assert out["totals"]["by_verdict"]["ok"] == 16
    job = only_job(out)
    assert job["state"] == "R" and len(job["nodes"]) == 8 and job["requeues"] == 0
    # status --json's keys, for a script that reads both (they were missing: a newcomer).
    assert out["broker"] is None and out["collected_s"] == out["replayed_s"] > 0
    # Every key status --json always has (a JSON audit: `jq .retained_burst_judged` of a
    # replay read null, and `.broker_uptime_s` was missing): no broker; the recorded burst
    # judged as live judged it, whole (``RecordedBurst``).
    assert out["broker_uptime_s"] is None and out["retained_burst_cut"] is None
    assert out["retained_burst_judged"] is True
    assert out["console_problems"] == []
    assert out["quiet_link"] is None  # no broker connection to go quiet


def test_ib_flap():
    out = replay("ib_flap")
    assert set(bad(out)) == {"gpu0003"}
    assert bad(out)["gpu0003"]["verdict"] == "failed"
    assert {"N2", "N5"} <= set(bad(out)["gpu0003"]["reasons"])
    flaps = [e for e in out["events"] if e["kind"] == "ib_port_state"]
    assert len(flaps) == 10 and all(e["component"] == "mlx5_ib2:1" for e in flaps)
    assert only_job(out)["state"] == "R"


def test_hard_link_down_fails_the_job_and_requeues_it_elsewhere():
    out = replay("link_down")
    assert set(bad(out)) == {"gpu0002"}
    assert {"N1", "N2"} <= set(bad(out)["gpu0002"]["reasons"])
    job = only_job(out)
    assert job["requeues"] == 1 and job["state"] == "R"
    assert "gpu0002" not in job["nodes"] and len(job["nodes"]) == 8
    assert job["last_checkpoint_step"] > 0


def test_symbol_storm_makes_a_straggler():
    out = replay("symbol_storm")
    assert set(bad(out)) == {"gpu0004"}
    assert {"N3", "N4"} <= set(bad(out)["gpu0004"]["reasons"])
    job = only_job(out)
    assert job["slowest"][0]["node"] == "gpu0004"
    assert job["slowest"][0]["step_time_ms"] > 1.2 * job["median_step_time_ms"]


def test_thermal_straggler():
    out = replay("thermal")
    assert set(bad(out)) == {"gpu0005"}
    assert bad(out)["gpu0005"]["verdict"] == "degraded"
    assert "G12" in bad(out)["gpu0005"]["reasons"]
    job = only_job(out)
    assert job["slowest"][0]["node"] == "gpu0005"
    assert job["slowest"][0]["step_time_ms"] > 1.2 * job["median_step_time_ms"]


def test_xid79_node_fail_and_requeue_from_checkpoint():
    out = replay("xid79")
    node = bad(out)["gpu0006"]
    assert set(bad(out)) == {"gpu0006"}
    assert {"G1", "G2"} <= set(node["reasons"]) and node["gpus"] == 7
    assert kinds(out).get("xid") == 1
    job = only_job(out)
    assert job["requeues"] == 1 and job["state"] == "R" and "gpu0006" not in job["nodes"]
    assert job["last_checkpoint_step"] >= 5


def test_agent_death_versus_node_death():
    out = replay("agent_vs_node_death")
    assert {n: v["verdict"] for n, v in bad(out).items()} == {"gpu0002": "offline",
                                                              "gpu0007": "offline"}
    jobs = {j["name"]: j for j in out["jobs"]}
    # Agent death: the node went silent but its ranks keep the job going.
    assert jobs["job-a"]["state"] == "R" and jobs["job-a"]["requeues"] == 0
    assert "gpu0002" in jobs["job-a"]["nodes"]
    # Node death: the job hung, failed (NODE_FAIL) and was requeued without gpu0007.
    assert jobs["job-b"]["requeues"] == 1 and "gpu0007" not in jobs["job-b"]["nodes"]
    # And the console says so on the nodes, in the JSON: only one is a drain candidate.
    nodes = {n["id"]: n for n in out["nodes"]}
    assert nodes["gpu0002"]["job_still_stepping"] == jobs["job-a"]["job_id"]
    assert nodes["gpu0002"]["action"].startswith("restart the agent; do not drain")
    assert nodes["gpu0007"]["job_still_stepping"] is None
    assert nodes["gpu0007"]["action"].startswith("check the node")


def test_leaf_switch_failure_takes_down_every_node_under_it():
    out = replay("leaf_switch")
    leaf02 = {f"gpu{i:04d}" for i in range(9, 17)}
    assert set(bad(out)) == leaf02
    assert all("N1" in bad(out)[n]["reasons"] for n in leaf02)
    # The switches are the problem, not the 8 nodes: degraded, "check the switch, do not drain".
    assert all(bad(out)[n]["verdict"] == "degraded" and "F1" in bad(out)[n]["reasons"]
               for n in leaf02)
    assert {n["behind_switch"] for n in out["nodes"] if n["id"] in leaf02} == {"leaf02-r[0-7]"}
    assert {s["switch"] for s in out["suspect_switches"]} == {f"leaf02-r{k}" for k in range(8)}
    assert {n["leaf"] for n in out["nodes"] if n["id"] in leaf02} == {"leaf02"}
    job = only_job(out)
    assert job["requeues"] == 1 and job["state"] == "PD"  # 12 nodes wanted, 8 healthy left


def test_operator_drain_goes_draining_then_drained_with_its_reason():
    out = replay("drain")
    node = bad(out)["gpu0002"]
    assert node["verdict"] == "ok" and node["drain"] == "drained"
    assert node["drain_reason"] == "fan noise on gpu5, ticket OPS-42"
    assert node["drain_by"] == "alice"
    messages = [e["message"] for e in out["events"] if e["kind"] == "drain"]
    assert messages[0].startswith("draining: fan noise") and messages[1].startswith("drained")
    assert only_job(out)["state"] == "CD"


@pytest.mark.parametrize("name", ["xid79"])
def test_replay_until_shows_the_moment_before_the_fault(name):
    early = replay_headless(FIXTURES / f"{name}.jsonl.gz", until=5)
    assert early["totals"]["by_verdict"]["ok"] == 16


def test_cli_replay_of_a_fixture(tmp_path: Path):
    res = run_cli("replay", str(FIXTURES / "ib_flap.jsonl.gz"), "--headless", "--summary-json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["totals"]["by_verdict"]["failed"] == 1
