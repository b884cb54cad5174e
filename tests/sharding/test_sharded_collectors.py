"""Real ``fleetdeck sim`` and three ``fleetdeck collect --shard K/3`` processes on a real
Mosquitto: the collectors split the fleet (no node owned twice, none unowned), a console on
digests sees the verdicts a console on raw telemetry sees, a malformed digest is counted, and
when one collector is killed with SIGKILL the others take its nodes over."""

import asyncio
import contextlib
import json
import os
import signal
import time
from dataclasses import dataclass, field

import aiomqtt
import pytest

from fleetdeck.console.digest import DIGEST_EVERY_S
from tests.conftest import run_cli, spawn, stop_process

CLUSTER = "shd"
NODES = 24
COLLECTORS = 3
TAKEOVER_BOUND_S = 20.0
"""docs/architecture.md: a SIGKILLed collector's will is published at once (its socket closes);
a host that vanishes is noticed at keepalive x 1.5 (15 s); then one tick and the retained
births. Generous here: two shared cores."""


@dataclass
class Seen:
    collectors: dict[str, dict] = field(default_factory=dict)
    latest: dict[str, dict] = field(default_factory=dict)
    """node -> its newest digest (retained or live)."""
    live_by: dict[str, set[str]] = field(default_factory=dict)
    """node -> collectors that sent it a digest live (not retained) in the window."""


async def watch(url: str, seconds: float) -> Seen:
    host, port = url.removeprefix("mqtt://").split(":")
    seen = Seen()
    async with aiomqtt.Client(host, int(port), identifier=f"t-watch-{os.getpid()}") as c:
        await c.subscribe(f"fleetdeck/v1/{CLUSTER}/collector/+", qos=1)
        await c.subscribe(f"fleetdeck/v1/{CLUSTER}/digest/+", qos=0)

        async def read() -> None:
            async for m in c.messages:
                try:
                    d = json.loads(m.payload)
                except ValueError:
                    continue  # the malformed digest step 3 leaves retained
                if not isinstance(d, dict):
                    continue
                if "/collector/" in m.topic.value:
                    seen.collectors[d["collector"]] = d
                    continue
                seen.latest[d["node"]] = d
                if not m.retain:
                    seen.live_by.setdefault(d["node"], set()).add(d["by"])

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(read(), seconds)
    return seen


def wait_until(what: str, check, timeout: float, seconds: float = 1.0) -> Seen:
    deadline = time.monotonic() + timeout
    while True:
        seen = asyncio.run(watch(URL[0], seconds))
        if check(seen):
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}: "
                        f"collectors {sorted(seen.collectors)}, {len(seen.latest)} digests")


URL: list[str] = [""]


def statuses(url: str) -> tuple[dict, dict]:
    raw = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait", "3.5")
    dig = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait", "1.5",
                  "--digests")
    assert raw.returncode == 0, raw.stderr
    assert dig.returncode == 0, dig.stderr
    return json.loads(raw.stdout), json.loads(dig.stdout)


def verdicts(summary: dict) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {n["id"]: (n["verdict"], tuple(n["reasons"])) for n in summary["nodes"]}


async def publish(url: str, topic: str, payload: bytes, retain: bool) -> None:
    host, port = url.removeprefix("mqtt://").split(":")
    async with aiomqtt.Client(host, int(port)) as c:
        await c.publish(topic, payload, qos=1, retain=retain)


@pytest.mark.timeout(300)
def test_sharded_collectors_split_digest_and_take_over(mosquitto, tmp_path):
    url = URL[0] = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", str(NODES), "--jobs",
                "0", "--seed", "5", log=tmp_path / "sim.log")
    cols = {f"shard-{k}": spawn("collect", "--broker", url, "--cluster", CLUSTER, "--shard",
                                f"{k}/{COLLECTORS}", "--db", str(tmp_path / f"c{k}.db"),
                                log=tmp_path / f"collect{k}.log")
            for k in range(1, COLLECTORS + 1)}
    try:
        # 1. Every node has an owner, and over a whole refresh period each node's digests come
        #    from one collector only.
        wait_until("three collectors and a digest of every node",
                   lambda s: len(s.latest) == NODES and len(
                       [c for c in s.collectors.values() if c["online"]]) == COLLECTORS, 60)
        seen = asyncio.run(watch(url, DIGEST_EVERY_S + 1.5))
        assert set(seen.live_by) == {f"gpu{i:04d}" for i in range(1, NODES + 1)}
        twice = {n: by for n, by in seen.live_by.items() if len(by) != 1}
        assert not twice, f"nodes owned twice: {twice}"
        owners = {n: next(iter(by)) for n, by in seen.live_by.items()}
        assert set(owners.values()) == set(cols), "every collector owns some of 24 nodes"
        assert sum(c["nodes"] for c in seen.collectors.values()) == NODES

        # 2. A fault: the console on digests shows the verdicts the raw console shows.
        res = run_cli("inject", "--broker", url, "--cluster", CLUSTER, "xid79", "node=gpu0005",
                      "gpu=3", "--wait", "5")
        assert res.returncode == 0, res.stderr
        deadline = time.monotonic() + 30
        while True:
            raw, dig = statuses(url)
            if (verdicts(raw) == verdicts(dig)
                    and verdicts(dig)["gpu0005"][0] == "failed") or time.monotonic() > deadline:
                break
        assert verdicts(dig)["gpu0005"][0] == "failed", verdicts(dig)["gpu0005"]
        assert verdicts(raw) == verdicts(dig)
        assert dig["totals"] == raw["totals"]
        by_node = {n["id"]: n for n in dig["nodes"]}
        assert by_node["gpu0005"]["owner"] == owners["gpu0005"]
        assert all(n["owner"] is None for n in raw["nodes"])
        assert [(c["collector"], c["online"]) for c in dig["collectors"]] == [
            (name, True) for name in sorted(cols)]

        # 3. A malformed digest is counted and shown; nothing stops.
        asyncio.run(publish(url, f"fleetdeck/v1/{CLUSTER}/digest/gpu0099", b'{"v":1,"nod',
                            retain=True))
        _, dig = statuses(url)
        assert dig["totals"]["malformed"] >= 1
        assert any(m["topic"].endswith("/digest/gpu0099") for m in dig["malformed"])
        assert len(dig["nodes"]) == NODES

        # 4. SIGKILL the owner of the failed node: the others take its nodes over.
        victim = owners["gpu0005"]
        its_nodes = {n for n, o in owners.items() if o == victim}
        os.kill(cols[victim].pid, signal.SIGKILL)
        cols[victim].wait(10)
        survivors = set(cols) - {victim}
        seen = wait_until(
            f"the nodes of {victim} digested by {sorted(survivors)}",
            lambda s: s.collectors.get(victim, {}).get("online") is False and all(
                s.latest.get(n, {}).get("by") in survivors for n in its_nodes),
            TAKEOVER_BOUND_S)
        assert seen.latest["gpu0005"]["verdict"] == "failed"
        assert {d["by"] for d in seen.latest.values()} == survivors
        _, dig = statuses(url)
        assert {n["owner"] for n in dig["nodes"]} == survivors
        assert {c["collector"]: c["online"] for c in dig["collectors"]} == {
            **dict.fromkeys(survivors, True), victim: False}
        assert verdicts(dig)["gpu0005"][0] == "failed"
        for name in survivors:
            assert cols[name].poll() is None, f"{name} died"

        # 5. Every collector gone: the retained digests are as old as they say. status
        #    --digests exits 3, and once they are past their window the nodes read stale,
        #    grouped per silent collector, never as dark racks (a scale-out audit saw "ok 48"
        #    with exit 0, and a rack incident per rack in the console).
        for name in survivors:
            stop_process(cols[name])  # a clean stop: each says online false itself
        wait_until("every collector offline",
                   lambda s: not any(c["online"] for c in s.collectors.values()), 30)
        time.sleep(3 * DIGEST_EVERY_S + 1)
        res = run_cli("status", "--broker", url, "--cluster", CLUSTER, "--json", "--wait",
                      "1.5", "--digests")
        assert res.returncode == 3, res.stderr
        assert "no collector is live" in res.stderr
        gone = json.loads(res.stdout)
        assert gone["totals"]["by_verdict"]["stale"] == NODES, gone["totals"]
        kinds = {inc["kind"] for inc in gone["incidents"]}
        assert "collector" in kinds and "rack" not in kinds, kinds
    finally:
        for proc in cols.values():
            stop_process(proc)
        stop_process(sim)
    for name in survivors:
        assert cols[name].returncode == 0, (tmp_path / f"collect{name[-1]}.log").read_text()
