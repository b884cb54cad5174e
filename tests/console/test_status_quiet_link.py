"""``status --json`` says what the TUI's header says of a link that hears nothing while its
broker answers: ``quiet_link`` (console/deaf_check.py ``DeafCheck.judge``). Its header said
"the fleet is silent" and a script reading ``status --json`` got only nodes waiting or stale.
A one-shot ``status`` judges its quiet on its own subscription, made for the watch, and takes
no second one to look (a collector or a console does: docs/architecture.md)."""

import asyncio
import json
import time

from fleetdeck.brokerurl import make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.conftest import run_cli, subscribers
from tests.helpers import FakeNode


async def _born_and_silent(url, cluster: str, nodes: list[str]) -> None:
    """Nodes whose agents are born and online at a 1 s interval, and send nothing more."""
    async with make_client(url, f"born-silent-{cluster}") as client:
        for node_id in nodes:
            node = FakeNode(node_id, cluster, t0=time.time())
            node.agent.interval_s = 1.0
            await client.publish(node.topic(Kind.BIRTH), codec.encode(node.birth()), qos=1,
                                 retain=True)
            await client.publish(node.topic(Kind.STATUS), codec.encode(node.status()), qos=1,
                                 retain=True)


def test_status_json_says_a_silent_fleet_and_takes_no_second_subscription(
        telling_mosquitto) -> None:
    mosquitto = telling_mosquitto
    asyncio.run(_born_and_silent(mosquitto.url, "hush", ["gpu0001", "gpu0002", "gpu0003"]))
    got = run_cli("status", "--broker", str(mosquitto.url), "--cluster", "hush", "--json",
                  "--wait", "9")
    out = json.loads(got.stdout)
    quiet = out["quiet_link"]
    assert quiet is not None, got.stdout
    assert quiet["verdict"] == "silent", quiet
    assert "the fleet is silent" in quiet["text"], quiet
    # Heard the retained burst at its connect, nothing since: quiet for the watch's last part.
    assert 5 < quiet["quiet_s"] < 9 and quiet["since"] <= time.time() - quiet["quiet_s"], quiet
    assert out["connection_lost"] is None  # the broker answered all through
    assert "nothing heard for" in got.stderr and "the fleet is silent" in got.stderr, got.stderr
    # No look through a connection of its own (console/deaf_check.py's "fd-look-" client):
    # its own subscription, made for this watch, is as fresh as a look's.
    assert subscribers(mosquitto, "fd-status-") == 1
    assert subscribers(mosquitto, "fd-look-") == 0


def test_a_drain_waiting_on_a_quiet_link_still_looks_whether_it_is_deaf(
        telling_mosquitto) -> None:
    """``drain`` waits up to its ``--timeout`` (60 s by default, longer for a drain that lets
    jobs finish), where its subscription is not the fresh one a 3.5 s ``status`` has: a
    connection the broker stopped delivering to would wait out the timeout for acks that came
    (docs/architecture.md). Quiet with the broker answering, it looks, as the console does."""
    mosquitto = telling_mosquitto
    asyncio.run(_born_and_silent(mosquitto.url, "hush", ["gpu0001"]))
    got = run_cli("drain", "gpu0001", "--reason", "test", "--broker", str(mosquitto.url),
                  "--cluster", "hush", "--timeout", "12")
    assert got.returncode == 4, (got.returncode, got.stderr)  # the silent node never answers
    assert subscribers(mosquitto, "fd-look-") >= 1, got.stderr
