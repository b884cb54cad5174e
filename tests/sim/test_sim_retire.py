"""``fleetdeck retire``: a 4-node simulator replaced by a 2-node one left gpu0003-0004's
retained birth and will on the broker for ever (offline, "fell silent" incidents, `status
--fail-on failed` exit 1); retiring them clears their retained topics, so `status` forgets
them (docs/protocol.md, "Retiring a node"). A node heard online is refused."""

import json
import os
import signal
import time

from tests.conftest import run_cli, spawn, stop_process


def nodes_seen(url: str, cluster: str) -> dict[str, str]:
    out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
    data = json.loads(out.stdout)
    return {n["id"]: n["verdict"] for n in data["nodes"]}


def test_retire_clears_the_nodes_a_smaller_simulator_left_behind(mosquitto, tmp_path):
    url, cluster = str(mosquitto.url), "rt"
    audit = tmp_path / "audit.jsonl"
    first = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "4", "--jobs", "0",
                  log=tmp_path / "sim1.log")
    try:
        deadline = time.monotonic() + 30
        while sorted(nodes_seen(url, cluster)) != ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]:
            assert time.monotonic() < deadline
    finally:
        os.kill(first.pid, signal.SIGKILL)  # the broker publishes their wills
        first.wait()
    second = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "2", "--jobs", "0",
                   log=tmp_path / "sim2.log")
    try:
        deadline = time.monotonic() + 30
        while (seen := nodes_seen(url, cluster)) != {
                "gpu0001": "ok", "gpu0002": "ok", "gpu0003": "offline", "gpu0004": "offline"}:
            assert time.monotonic() < deadline, seen
        before = run_cli("status", "--broker", url, "--cluster", cluster, "--fail-on", "failed")
        assert before.returncode == 1 and "gpu0003" in before.stdout, before.stdout

        # A node heard online is refused, in one sentence that says what to do first.
        live = run_cli("retire", "gpu[0002-0003]", "--broker", url, "--cluster", cluster,
                       "--audit-log", str(audit))
        assert live.returncode == 2, live.stdout + live.stderr
        assert live.stderr.strip() == (
            "fleetdeck retire: gpu0002 is online now (telemetry heard): its agent would "
            "publish its birth again; stop it first (systemctl stop fleetdeck-agent), or "
            "--force"), live.stderr
        assert sorted(nodes_seen(url, cluster)) == ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]

        bad = run_cli("retire", "gpu[0003-", "--broker", url, "--cluster", cluster,
                      "--audit-log", str(audit))
        assert bad.returncode == 2
        assert bad.stderr.strip() == ("fleetdeck retire: bad hostlist 'gpu[0003-': "
                                      "unbalanced '[' in 'gpu[0003-'"), bad.stderr

        done = run_cli("retire", "gpu[0003-0004]", "--reason", "decommissioned",
                       "--operator", "alice", "--broker", url, "--cluster", cluster,
                       "--audit-log", str(audit))
        assert done.returncode == 0, done.stdout + done.stderr
        assert "gpu0003 retired by alice: decommissioned" in done.stdout
        after = run_cli("status", "--broker", url, "--cluster", cluster, "--fail-on", "failed")
        assert after.returncode == 0, after.stdout + after.stderr
        assert "gpu0003" not in after.stdout and "gpu0004" not in after.stdout
        assert sorted(nodes_seen(url, cluster)) == ["gpu0001", "gpu0002"]
        out = json.loads(run_cli("status", "--broker", url, "--cluster", cluster,
                                 "--json").stdout)
        assert out["totals"]["malformed"] == 0  # an empty retained birth is no error
    finally:
        assert stop_process(second) == 0
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["what"], r["outcome"], r["targets"]) for r in records] == [
        ("retire", "refused", "gpu[0002-0003]"), ("retire", "refused", "gpu[0003-"),
        ("retire", "done", "gpu[0003-0004]")]
    assert records[-1]["detail"] == "gpu[0003-0004] retired by alice: decommissioned"


def test_retire_of_many_nodes_says_them_by_hostlist_not_a_line_a_node(mosquitto, tmp_path):
    """`retire 'gpu[0001-0512]'` printed a line a node, 512 before its summary, where drain
    and resume of as many say a hostlist (above PROGRESS_GROUP_OVER targets)."""
    url, cluster = str(mosquitto.url), "rtm"
    sim = spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "12", "--jobs", "0",
                log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 30
        while len(nodes_seen(url, cluster)) < 12:
            assert time.monotonic() < deadline
    finally:
        os.kill(sim.pid, signal.SIGKILL)  # the broker publishes their wills
        sim.wait()
    deadline = time.monotonic() + 30
    while set((seen := nodes_seen(url, cluster)).values()) != {"offline"}:
        assert time.monotonic() < deadline, seen
    done = run_cli("retire", "gpu[0001-0012]", "--operator", "alice", "--broker", url,
                   "--cluster", cluster, "--audit-log", str(tmp_path / "audit.jsonl"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "gpu[0001-0012] retired by alice" in lines, done.stdout
    assert not any(line.startswith("gpu0001 ") for line in lines), done.stdout
    assert len(lines) <= 3 and "holds no birth, status or digest of them" in lines[-1], lines


def test_a_forced_retire_says_retired_only_the_nodes_whose_births_stay_cleared(mosquitto,
                                                                               tmp_path):
    """`retire --force` of two nodes whose agents were killed and two still running said all
    four "retired", exit 0, though the running agents' births came back at the next rebirth
    request (a review). It waits a moment for them, says retired only those gone, and the
    others still run: exit 3."""
    url, cluster = str(mosquitto.url), "rtf"
    audit = tmp_path / "audit.jsonl"
    agents = {node: spawn("agent", "--broker", url, "--cluster", cluster, "--node-id", node,
                          "--interval", "1", log=tmp_path / f"{node}.log")
              for node in ("gpu0001", "gpu0002", "gpu0003", "gpu0004")}
    try:
        deadline = time.monotonic() + 30
        while set((seen := nodes_seen(url, cluster)).values()) != {"ok"} or len(seen) != 4:
            assert time.monotonic() < deadline, seen
        for node in ("gpu0003", "gpu0004"):
            os.kill(agents[node].pid, signal.SIGKILL)  # the broker publishes their wills
            agents.pop(node).wait()
        deadline = time.monotonic() + 30
        while (seen := nodes_seen(url, cluster)) != {
                "gpu0001": "ok", "gpu0002": "ok", "gpu0003": "offline", "gpu0004": "offline"}:
            assert time.monotonic() < deadline, seen
        done = run_cli("retire", "gpu[0001-0004]", "--force", "--operator", "alice",
                       "--broker", url, "--cluster", cluster, "--audit-log", str(audit))
        assert done.returncode == 3, done.stdout + done.stderr
        lines = done.stdout.splitlines()
        assert "gpu0003 retired by alice" in lines and "gpu0004 retired by alice" in lines, lines
        assert not [line for line in lines if "gpu0001 retired" in line
                    or "gpu0002 retired" in line], lines
        assert lines[-1] == ("retire gpu[0001-0004]: gpu[0001-0002] published their births "
                             "again after the clear: their agents still run; stop them, then "
                             "retire them again"), lines
        assert sorted(nodes_seen(url, cluster)) == ["gpu0001", "gpu0002"]
    finally:
        for proc in agents.values():
            stop_process(proc)
    [record] = [json.loads(line) for line in audit.read_text().splitlines()]
    assert (record["outcome"], record["detail"]) == (
        "failed", "gpu[0003-0004] retired by alice; gpu[0001-0002] published their births "
        "again after the clear: their agents still run")
