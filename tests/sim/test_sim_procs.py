"""`fleetdeck sim --procs N`: one fleet spread over processes, as real processes against
Mosquitto: every node is born and reports, an injection reaches a node of the second process,
and SIGTERM stops every process with every node saying offline."""

import asyncio
import os
import re
import time
import uuid
from pathlib import Path

from fleetdeck.agents.fleet import shard_of
from fleetdeck.brokerurl import make_client
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.messages import Birth, Status
from fleetdeck.protocol.topics import Kind, TopicError, parse_topic
from tests.conftest import run_cli, spawn, stop_process

NODES = [f"gpu{i:04d}" for i in range(1, 7)]


class Seen:
    def __init__(self) -> None:
        self.births: set[str] = set()
        self.telemetry: dict[str, int] = {}
        self.status: dict[str, Status] = {}


async def watch(url, cluster: str, seen: Seen, until, timeout: float) -> None:
    """Record births, telemetry and the latest status per node until ``until(seen)``."""
    async with make_client(url, f"t-{uuid.uuid4().hex[:8]}") as client:
        await client.subscribe(f"fleetdeck/v1/{cluster}/node/#", qos=1)
        async with asyncio.timeout(timeout):
            async for m in client.messages:
                try:
                    t = parse_topic(str(m.topic))
                except TopicError:
                    continue
                payload = m.payload if isinstance(m.payload, bytes) else b""
                if t.kind is Kind.BIRTH:
                    seen.births.add(codec.decode(Birth, payload).node)
                elif t.kind is Kind.TELEMETRY:
                    tel = wire2.decode_telemetry(payload)  # v1 or v2 (the sim's default)
                    seen.telemetry[tel.node] = seen.telemetry.get(tel.node, 0) + 1
                elif t.kind is Kind.STATUS:
                    st = codec.decode(Status, payload)
                    seen.status[st.node] = st
                if until(seen):
                    return


def pids_of_children(log: Path) -> list[int]:
    match = re.search(r"in 2 processes \(pids ([\d, ]+)\)", log.read_text(errors="replace"))
    assert match, log.read_text(errors="replace")
    return [int(p) for p in match.group(1).split(", ")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_nodes_are_split_into_contiguous_blocks():
    assert [shard_of(i, 6, 2) for i in range(6)] == [0, 0, 0, 1, 1, 1]
    assert [shard_of(i, 5, 5) for i in range(5)] == [0, 1, 2, 3, 4]


def test_a_fleet_in_two_processes_reports_obeys_inject_and_stops_cleanly(mosquitto, tmp_path):
    url = mosquitto.url
    log = tmp_path / "sim.log"
    sim = spawn("--log-level", "info", "sim", "--broker", str(url), "--cluster", "procs",
                "--nodes", "6", "--procs", "2", "--interval", "0.5", "--seed", "3", log=log)
    try:
        seen = Seen()
        asyncio.run(watch(url, "procs", seen, lambda s: s.births >= set(NODES) and all(
            s.telemetry.get(n, 0) >= 2 for n in NODES), timeout=60))
        children = pids_of_children(log)
        assert len(children) == 2 and all(alive(p) for p in children)
        victim = NODES[-1]
        assert shard_of(NODES.index(victim), 6, 2) == 1  # its agent runs in the second process
        res = run_cli("inject", "--broker", str(url), "--cluster", "procs", "agent_death",
                      f"node={victim}", "--wait", "5")
        assert res.returncode == 0, res.stderr
        assert res.stdout.strip() == f"injected: agent_death node={victim}"
        # The lead process stamped it for a later tick; the second process killed the agent
        # without a DISCONNECT, so the broker published its Last Will.
        asyncio.run(watch(url, "procs", seen, lambda s: victim in s.status
                          and not s.status[victim].online, timeout=20))
        assert all(seen.status[n].online for n in NODES[:-1])
    finally:
        t0 = time.monotonic()
        code = stop_process(sim, timeout=40)
        stop_s = time.monotonic() - t0
    said = log.read_text(errors="replace")
    assert code == 0, said
    assert stop_s < 30, said
    assert "Traceback" not in said and "ERROR" not in said, said
    assert not any(alive(p) for p in children)
    # A clean stop: every node's retained status says offline.
    final = Seen()
    asyncio.run(watch(url, "procs", final, lambda s: set(s.status) >= set(NODES), timeout=10))
    assert not any(final.status[n].online for n in NODES), final.status


def test_a_bad_process_count_is_one_sentence():
    for procs in ("0", "7", "-2"):
        res = run_cli("sim", "--broker", "mqtt://127.0.0.1:1", "--nodes", "6", "--procs", procs)
        assert res.returncode == 2, res.stderr
        assert res.stderr.strip() == (f"fleetdeck sim: --procs must be a whole number from 1 to "
                                      f"the fleet size (6), not {procs}."), res.stderr


def test_a_spread_fleet_says_what_its_timeline_skipped_once(mosquitto, tmp_path):
    """Every process steps the whole world: each logged every skipped fault, so --procs 2
    printed each warning twice."""
    scenario = tmp_path / "skip.toml"
    scenario.write_text('[[fault]]\nat = "1s"\nfault = "repair"\nnode = "gpu0099"\n')
    log = tmp_path / "sim.log"
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "skip", "--nodes", "4",
                "--procs", "2", "--interval", "0.5", "--scenario", str(scenario), log=log)
    try:
        deadline = time.monotonic() + 60
        while "skipped repair" not in log.read_text(errors="replace"):
            assert sim.poll() is None, log.read_text(errors="replace")
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.2)
        time.sleep(3.0)  # the other process's copy of the world has stepped past t=1s too
    finally:
        stop_process(sim, timeout=40)
    said = log.read_text(errors="replace")
    assert said.count("skipped repair node=gpu0099: no node 'gpu0099' in this fleet") == 1, said
