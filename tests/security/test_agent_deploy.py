"""A node agent set up exactly as docs/real-nodes.md says (its agent.env: its node id as broker
user, mqtts://, the CA), against Mosquitto running the shipped config, ACL, users and
certificates; and the role users (console, viewer, scheduler, collector) publish under no node
topic."""

import asyncio
import re
import time
import uuid

import aiomqtt
import pytest

from fleetdeck.brokerurl import BrokerURL, make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp, DrainState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.agent_tap import Tap
from tests.conftest import REPO, eventually, first_retained, spawn, stop_process
from tests.security.deploy import needs_tools
from tests.security.test_broker_security import client, delivered

pytestmark = needs_tools

NODE = "gpu0001"


def documented_agent_env() -> dict[str, str]:
    """The agent.env that docs/real-nodes.md writes, with its shell variables unexpanded."""
    doc = (REPO / "docs" / "real-nodes.md").read_text()
    block = re.search(r"tee /etc/fleetdeck/agent\.env >/dev/null <<EOF\n(.*?)\nEOF\n", doc,
                      re.DOTALL)
    assert block, "docs/real-nodes.md no longer writes /etc/fleetdeck/agent.env"
    return dict(line.split("=", 1) for line in block.group(1).splitlines()
                if line and not line.startswith("#"))


async def test_an_agent_installed_per_the_docs_connects_over_tls_and_obeys_the_console(
        secured, tmp_path, monkeypatch):
    _broker, creds, tls_port, work = secured
    env = documented_agent_env()
    assert set(env) >= {"FLEETDECK_BROKER", "FLEETDECK_CA", "FLEETDECK_CLUSTER"}
    # What the install steps fill in on node gpu0001 (its line of mkusers.sh's credentials) and
    # where this test's broker and CA are instead of mqtt.example.internal and /etc/fleetdeck.
    site = {"$node": NODE, "$pass": creds[NODE],
            "mqtt.example.internal:8883": f"127.0.0.1:{tls_port}",
            "/etc/fleetdeck/ca.crt": str(work / "pki" / "ca.crt")}
    for key, documented in env.items():
        if key == "FLEETDECK_AGENT_ARGS":
            continue  # flags for the unit's ExecStart (a journal to follow): none here
        value = documented
        for placeholder, real in site.items():
            value = value.replace(placeholder, real)
        monkeypatch.setenv(key, value)
    assert env["FLEETDECK_BROKER"].startswith("mqtts://$node:$pass@")
    monkeypatch.setenv("FLEETDECK_NODE_ID", NODE)  # the default is the host name: not gpu0001
    cluster = env["FLEETDECK_CLUSTER"]
    proc = spawn("agent", "--source", "sim", "--state-dir", str(tmp_path / "state"),
                 "--interval", "0.5", log=tmp_path / "agent.log")
    # The console role, as docs/security.md sets it up: mqtts:// with the CA.
    console = BrokerURL("127.0.0.1", tls_port, tls=True, username="console",
                        password=creds["console"], ca_file=str(work / "pki" / "ca.crt"))
    try:
        async with Tap(console, cluster) as tap:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE))
                            and tap.of(Kind.BIRTH, NODE), 20, message="agent seen by console")
            now = int(time.time() * 1000)
            drain = Command(cmd_id=uuid.uuid4().hex[:12], op=CommandOp.DRAIN, target=NODE,
                            args=CommandArgs(reason="deploy test"), issued_by="console",
                            issued_at=now, expires_at=now + 30_000)
            async with make_client(console, f"console-{uuid.uuid4().hex[:6]}") as c:
                await c.publish(topic_for(cluster, Kind.CMD, NODE), codec.encode(drain), qos=1)
            await tap.until(lambda: [a.result.value for a in tap.acks(drain.cmd_id)]
                            == ["accepted", "done"], message="the agent's acks")
            assert tap.statuses(NODE)[-1].drain.state is DrainState.DRAINED
    finally:
        stop_process(proc)
    log = (tmp_path / "agent.log").read_text()
    assert "TLS" not in log and "not the node id" not in log, log


@pytest.mark.parametrize("sender", ["console", "viewer", "scheduler", "collector"])
async def test_role_users_cannot_publish_under_any_node_topic(secured, sender):
    broker, creds, _, _ = secured
    nodes = [sender, "gpu0001", "gpu0002", "agent"]
    forged = {f"fleetdeck/v1/c/node/{n}/{kind}": f"{sender}-{n}-{kind}".encode()
              for n in nodes for kind in ("telemetry", "birth", "status", "event")}
    control = ("fleetdeck/v1/c/node/gpu0002/telemetry", b"the real gpu0002")
    got: list[bytes] = []
    # Two readers: each role is denied its own pseudo-node's topics, reading included.
    async with client(broker, "console", creds) as rx1, client(broker, "viewer", creds) as rx2:
        for rx in (rx1, rx2):
            await rx.subscribe("fleetdeck/v1/#", qos=1)

        async def read(rx: aiomqtt.Client) -> None:
            async for m in rx.messages:
                got.append(bytes(m.payload))  # type: ignore[arg-type]

        readers = [asyncio.create_task(read(rx)) for rx in (rx1, rx2)]
        async with client(broker, sender, creds) as tx:
            for topic, payload in forged.items():
                await tx.publish(topic, payload, qos=1)
        async with client(broker, "gpu0002", creds) as tx:
            await tx.publish(*control, qos=1)
        await eventually(lambda: got.count(control[1]) >= 2, 5, message="the real telemetry")
        await asyncio.sleep(0.3)  # forged ones were published first; give stragglers a moment
        for task in readers:
            task.cancel()
    assert got.count(control[1]) == 2, "both readers see a real agent's telemetry"
    assert not set(got) & set(forged.values()), sorted(set(got) & set(forged.values()))


async def retained(broker, creds, topic: str) -> bytes | None:
    """The retained message a new subscriber to ``topic`` gets, or None."""
    async with client(broker, "viewer", creds) as rx:
        return await first_retained(rx, topic, 0.7)


async def test_only_the_admin_role_clears_a_retired_nodes_retained_birth(secured):
    """``fleetdeck retire`` clears a node's retained birth, status and digest (empty retained
    payloads): the shipped ACL lets the ``admin`` role do it, not ``console`` (mosquitto drops
    a denied publish without a word), and gives ``admin`` no telemetry or command topic."""
    broker, creds, _, _ = secured
    birth = "fleetdeck/v1/c/node/gpu0001/birth"
    async with client(broker, "gpu0001", creds) as agent:
        await agent.publish(birth, b"gpu0001's birth", qos=1, retain=True)
    assert await retained(broker, creds, birth) == b"gpu0001's birth"
    async with client(broker, "console", creds) as console:
        await console.publish(birth, b"", qos=1, retain=True)
    assert await retained(broker, creds, birth) == b"gpu0001's birth"
    async with client(broker, "admin", creds) as admin:
        await admin.publish(birth, b"", qos=1, retain=True)
    assert await retained(broker, creds, birth) is None
    for topic in ("fleetdeck/v1/c/node/gpu0002/telemetry", "fleetdeck/v1/c/node/gpu0002/cmd"):
        assert not await delivered(broker, creds, sender="admin", topic=topic,
                                   listener="console", listen_topic=topic)


async def test_the_admin_role_clears_a_removed_bridges_retained_state(secured):
    """A bridge removed for good (its cluster retired, or moved) leaves its Last Will "0"
    retained on ``bridge/state`` of the site broker, and a site console on digests said that
    cluster's bridge was down for ever (console/bridge.py): the ``admin`` role clears it,
    as it clears a retired node's birth (docs/security.md); no role could but the bridge's."""
    broker, creds, _, _ = secured
    state = "fleetdeck/v1/c/bridge/state"
    async with client(broker, "console", creds) as console:
        await console.publish(state, b"0", qos=1, retain=True)
    assert await retained(broker, creds, state) is None
    async with client(broker, "admin", creds) as admin:
        await admin.publish(state, b"0", qos=1, retain=True)
    assert await retained(broker, creds, state) == b"0"
    async with client(broker, "admin", creds) as admin:
        await admin.publish(state, b"", qos=1, retain=True)
    assert await retained(broker, creds, state) is None
