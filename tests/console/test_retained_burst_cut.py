"""Mosquitto sends a new subscription's retained messages all at once: of QoS 1 ones it puts
``max_inflight_messages`` in flight, queues ``max_queued_messages`` more and drops the rest for
good, the births it reaches last included. A one-shot ``status`` on 2,048 dead agents and a
broker on the default 1000 listed the 1,020 nodes whose births arrived, exit 0 and no word of
the others (a review). The console now asks for an MQTT v5 Receive Maximum of 65,535, which
Mosquitto puts in the place of ``max_inflight_messages``; past that it says the burst may be
cut (docs/reliability.md, "The retained burst")."""

import asyncio
import json
import uuid
from unittest.mock import patch

import pytest

import fleetdeck.console.live as live_mod
from fleetdeck.broker import ManagedBroker, mosquitto_conf
from fleetdeck.console.cli.status import EXIT_UNSEEN, run_status
from fleetdeck.console.session import ConsoleSession
from tests.conftest import eventually, require_binaries, run_cli
from tests.console.test_statuses_the_broker_dropped import _retain_dead_agents
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

NODES = 24
"""48 retained messages; the broker below sends 10 of a burst (4 in flight, 6 queued)."""


@pytest.fixture
def tiny_queue_mosquitto(tmp_path):
    require_binaries("mosquitto")
    broker = ManagedBroker("mosquitto", workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    conf = mosquitto_conf(broker.port, broker.host)
    assert "max_queued_messages" in conf
    broker.config = "\n".join(
        line for line in conf.splitlines() if not line.startswith("max_queued_messages")
    ) + "\nmax_queued_messages 6\nmax_inflight_messages 4\nlog_type notice\n"
    with broker:
        yield broker


async def test_status_lists_every_node_of_a_retained_burst_past_the_brokers_queue(
        tiny_queue_mosquitto):
    broker = tiny_queue_mosquitto
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    out = await asyncio.to_thread(run_cli, "status", "--broker", str(broker.url),
                                  "--cluster", CLUSTER, "--json")
    summary = json.loads(out.stdout)
    listed = {n["id"]: n["verdict"] for n in summary["nodes"]}
    assert listed == dict.fromkeys(fleet.names, "offline"), (len(listed), out.stderr)
    assert "retained_burst_cut" not in json.dumps(summary) or not summary["retained_burst_cut"]


async def test_a_burst_past_the_receive_maximum_is_said_to_be_cut(tiny_queue_mosquitto):
    """Past the Receive Maximum the broker drops again: the console cannot list what it never
    got, so it says so (scaled down: a Receive Maximum of 8 against 48 retained messages)."""
    broker = tiny_queue_mosquitto
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    with patch.object(live_mod, "RECEIVE_MAXIMUM", 8):
        session = ConsoleSession(CLUSTER, url=broker.url, operator="test",
                                 client_id=f"cut-{uuid.uuid4().hex[:6]}", follow_up=False)
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.2))
    try:
        await eventually(lambda: session.burst_cut, 10, message="the cut said")
        lines = [ln.text for ln in session.log.lines() if "retained" in ln.text]
        assert any("max_queued_messages" in t for t in lines), lines
    finally:
        stop.set()
        await asyncio.gather(watcher, return_exceptions=True)


def test_status_says_a_cut_burst_and_exits_3(tiny_queue_mosquitto, capsys):
    """The listing of a cut burst is no fleet: one sentence on stderr, ``retained_burst_cut``
    in --json, exit 3 (could not see the fleet), as for a broker lost during the watch."""
    broker = tiny_queue_mosquitto
    fleet = SynthFleet(NODES, Clock(), leaves=1)
    asyncio.run(_retain_dead_agents(broker, fleet))
    with patch.object(live_mod, "RECEIVE_MAXIMUM", 8):
        code = run_status(broker.url, CLUSTER, None, True)
    out, err = capsys.readouterr()
    summary = json.loads(out)
    assert summary["retained_burst_cut"] is True
    assert len(summary["nodes"]) < NODES  # what the broker dropped is in no count
    assert "may have dropped part of the fleet's retained births" in err, err
    assert f"{len(summary['nodes'])} nodes known, more may exist unseen" in err, err
    assert code == EXIT_UNSEEN
