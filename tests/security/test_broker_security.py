"""The shipped Mosquitto setup (deploy/mosquitto: ACL, users, TLS) against a real broker."""

import asyncio
import subprocess
import uuid

import aiomqtt
import pytest

from tests.conftest import run_cli
from tests.security.deploy import DEPLOY, needs_tools

pytestmark = needs_tools


def client(broker, user, creds, **kw):
    return aiomqtt.Client(broker.host, broker.port, username=user,
                          password=creds.get(user) if user else None,
                          identifier=f"{user}-{uuid.uuid4().hex[:6]}",
                          protocol=aiomqtt.ProtocolVersion.V311, timeout=5, **kw)


async def delivered(broker, creds, *, sender, topic, listener, listen_topic, payload=b"x"):
    """Publish as ``sender``; return whether ``listener`` (subscribed to ``listen_topic``)
    received it within a second."""
    async with client(broker, listener, creds) as rx:
        await rx.subscribe(listen_topic, qos=1)
        async with client(broker, sender, creds) as tx:
            await tx.publish(topic, payload, qos=1)
        try:
            async with asyncio.timeout(1.0):
                async for m in rx.messages:
                    if m.payload == payload:
                        return True
        except TimeoutError:
            return False
    return False


async def test_anonymous_clients_are_refused(secured):
    broker, creds, _, _ = secured
    with pytest.raises(aiomqtt.MqttError, match=r"[Nn]ot authori"):
        async with client(broker, None, creds):
            pass
    with pytest.raises(aiomqtt.MqttError):
        async with aiomqtt.Client(broker.host, broker.port, username="console",
                                  password="wrong", timeout=5):
            pass


async def test_agent_publishes_only_under_its_own_node(secured):
    broker, creds, _, _ = secured
    own = "fleetdeck/v1/c/node/gpu0001/telemetry"
    other = "fleetdeck/v1/c/node/gpu0002/telemetry"
    assert await delivered(broker, creds, sender="gpu0001", topic=own, listener="console",
                           listen_topic="fleetdeck/v1/#", payload=b"mine")
    assert not await delivered(broker, creds, sender="gpu0001", topic=other,
                               listener="console", listen_topic="fleetdeck/v1/#",
                               payload=b"forged")


async def test_only_the_console_role_can_command_an_agent(secured):
    broker, creds, _, _ = secured
    cmd = "fleetdeck/v1/c/node/gpu0001/cmd"
    assert await delivered(broker, creds, sender="console", topic=cmd, listener="gpu0001",
                           listen_topic=cmd, payload=b"drain")
    assert not await delivered(broker, creds, sender="viewer", topic=cmd, listener="gpu0001",
                               listen_topic=cmd, payload=b"viewer-drain")
    assert not await delivered(broker, creds, sender="gpu0002", topic=cmd, listener="gpu0001",
                               listen_topic=cmd, payload=b"peer-drain")


async def test_an_agent_cannot_read_another_nodes_commands(secured):
    broker, creds, _, _ = secured
    cmd = "fleetdeck/v1/c/node/gpu0001/cmd"
    # Mosquitto grants the SUBACK but never delivers (MQTT.md §3): check delivery.
    assert not await delivered(broker, creds, sender="console", topic=cmd, listener="gpu0002",
                               listen_topic=cmd, payload=b"snoop")


def test_status_over_tls_with_the_right_ca(secured):
    _broker, creds, tls_port, work = secured
    url = f"mqtts://viewer:{creds['viewer']}@127.0.0.1:{tls_port}"
    res = run_cli("status", "--broker", url, "--ca", str(work / "pki" / "ca.crt"),
                  "--cluster", "c", "--json", "--wait", "1")
    # Connected and subscribed over TLS: the only complaint is that cluster c has no node.
    assert res.returncode == 2, res.stderr
    assert "no node of cluster 'c' was heard" in res.stderr, res.stderr


def test_tls_with_a_wrong_ca_fails_with_a_clear_sentence(secured, tmp_path):
    _broker, creds, tls_port, _ = secured
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / "other"), "127.0.0.1"],
                   check=True, capture_output=True)
    url = f"mqtts://viewer:{creds['viewer']}@127.0.0.1:{tls_port}"
    res = run_cli("status", "--broker", url, "--ca", str(tmp_path / "other" / "ca.crt"),
                  "--cluster", "c", "--wait", "1")
    assert res.returncode != 0
    assert "TLS with the MQTT broker" in res.stderr and "--ca" in res.stderr
    assert "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_tls_flags_need_an_mqtts_url(tmp_path):
    res = run_cli("status", "--broker", "mqtt://127.0.0.1:1", "--ca", "/etc/hostname")
    assert res.returncode != 0 and "need an mqtts:// broker URL" in res.stderr


async def test_only_the_collector_role_publishes_digests_and_consoles_read_them(secured):
    broker, creds, _, _ = secured
    digest = "fleetdeck/v1/c/digest/gpu0001"
    birth = "fleetdeck/v1/c/collector/shard-1"
    for listener in ("console", "viewer"):
        assert await delivered(broker, creds, sender="collector", topic=digest,
                               listener=listener, listen_topic="fleetdeck/v1/c/digest/+",
                               payload=f"digest-for-{listener}".encode())
        assert await delivered(broker, creds, sender="collector", topic=birth,
                               listener=listener, listen_topic="fleetdeck/v1/c/collector/+",
                               payload=f"birth-for-{listener}".encode())
    # A collector asks agents for re-sends and rebirths: node commands reach the agent.
    cmd = "fleetdeck/v1/c/node/gpu0001/cmd"
    assert await delivered(broker, creds, sender="collector", topic=cmd, listener="gpu0001",
                           listen_topic=cmd, payload=b"resend")
    # Nobody else may speak for a collector: a forged digest could hide a failed node.
    for sender in ("console", "viewer", "scheduler", "gpu0001"):
        assert not await delivered(broker, creds, sender=sender, topic=digest,
                                   listener="viewer", listen_topic="fleetdeck/v1/c/digest/+",
                                   payload=f"forged-by-{sender}".encode())
        assert not await delivered(broker, creds, sender=sender, topic=birth,
                                   listener="viewer", listen_topic="fleetdeck/v1/c/collector/+",
                                   payload=f"forged-birth-by-{sender}".encode())


async def test_only_the_scheduler_role_says_whether_the_scheduler_is_up(secured):
    # Not in the shipped ACL, the scheduler's birth and Last Will were dropped by Mosquitto
    # without a word, and every console read "scheduler: null" (a review of this change).
    broker, creds, _, _ = secured
    topic = "fleetdeck/v1/c/sched/status"
    for listener in ("console", "viewer", "collector"):
        assert await delivered(broker, creds, sender="scheduler", topic=topic,
                               listener=listener, listen_topic=topic,
                               payload=f"up-for-{listener}".encode())
    for sender in ("console", "viewer", "gpu0001"):
        assert not await delivered(broker, creds, sender=sender, topic=topic,
                                   listener="viewer", listen_topic=topic,
                                   payload=f"forged-by-{sender}".encode())
