"""A console recording whose connect burst the broker cut in the births, replayed: the replay
judges the recorded burst as the live console judged it (``RecordedBurst``,
console/retained_burst.py), so its node count is not the cluster's either. A replay trusted any
count it was given: a 30-node job read "it can never start here" beside the 10 births the cut
kept, where the live console had said "needs 30 nodes; 10 heard so far" and that the broker cut
its burst (docs/recording.md, "The retained burst in a replay")."""

import asyncio
import contextlib
import json
import uuid

import aiomqtt
import pytest

from fleetdeck.console.replay import Player, replay_headless
from fleetdeck.console.retained_burst import STATUS_ASK_QUIET_S
from fleetdeck.console.rows import job_row
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import job_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually
from tests.console.test_statuses_the_broker_dropped import (  # noqa: F401 - a fixture
    CUT_NODES,
    _big_job,
    _retain_dead_agents,
    small_queue_mosquitto,
)
from tests.replay.test_damage import message
from tests.tui.fleet import CLUSTER, T0, Clock, SynthFleet


async def _recorded(broker, path) -> tuple[str | None, str, object]:
    """A console that records from before its connect, on ``broker`` holding CUT_NODES dead
    agents; a 30-node job published once it is connected. What it says of the job (its
    ``never_fits`` and its row's reason) and its burst's judgement, once that is judged."""
    fleet = SynthFleet(CUT_NODES, Clock(), leaves=1)
    await _retain_dead_agents(broker, fleet)
    session = ConsoleSession(CLUSTER, url=broker.url, operator="carol",
                             client_id=f"cut-{uuid.uuid4().hex[:6]}")
    session.start_recording(path)
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    try:
        await eventually(lambda: session.burst_judged, 20, message="the burst judged")
        url = broker.url
        async with aiomqtt.Client(url.host, url.port,
                                  identifier=f"pub-{uuid.uuid4().hex[:6]}") as c:
            await c.publish(*_big_job(Clock(), 30), qos=1, retain=True)
        await eventually(lambda: "42" in session.state.jobs, 10, message="the job heard")
        await asyncio.sleep(1.0)  # recorded a while after
        state, now = session.state, session.clock()
        job = state.jobs["42"]
        said = (job_summary(job, state, now)["never_fits"], job_row(job, state, now).reason,
                session.burst_cut)
    finally:
        stop.set()
        with contextlib.suppress(Exception):
            await watcher
        session.stop_recording()
    return said


@pytest.mark.timeout(120)
@pytest.mark.parametrize("cut", [True, False])
async def test_a_replay_trusts_its_node_count_only_as_the_live_console_did(cut, request,
                                                                            tmp_path):
    broker = request.getfixturevalue("small_queue_mosquitto" if cut else "mosquitto")
    path = tmp_path / "rec.jsonl"
    never, reason, burst_cut = await _recorded(broker, path)
    if cut:
        assert burst_cut is not None and never is None, (burst_cut, never)
        assert reason.startswith("Resources: needs 30 nodes; ") and "heard so far" in reason
    else:
        assert burst_cut is None and never == (
            f"needs 30 nodes; the cluster has {CUT_NODES}: it can never start here"), never
    out = replay_headless(path)
    [job] = [j for j in out["jobs"] if j["job_id"] == "42"]
    assert job["never_fits"] == never, job
    assert out["retained_burst_judged"] is True
    assert out["retained_burst_cut"] == (None if burst_cut is None else {
        "nodes_without_status": burst_cut[0], "nodes": burst_cut[1],
        "nodes_learned_since": None})
    # The Player (the replay console) says the same at the end, and its timeline says the cut.
    player = Player(path)
    player.seek(player.end)
    pjob = player.state.jobs["42"]
    assert job_row(pjob, player.state, player.clock()).reason == reason
    cut_said = [ln.text for ln in player.session.log.lines() if ln.kind == "burst_cut"]
    assert len(cut_said) == (1 if cut else 0), cut_said
    # And the session's own judgement, which the TUI's header ("NODES UNLISTED?") and overview
    # read: the replay's, not the unjudged one of a connection it never made.
    assert player.session.burst_judged is True
    assert player.session.burst_cut == burst_cut


def _header(started: float) -> str:
    return json.dumps({"fleetdeck_recording": 1, "cluster": CLUSTER, "started": started,
                       "fleetdeck": "0.1.0", "source": "test"})


def _cut_then_asked(connect_after_s: float) -> list[str]:
    """What a console records of a burst cut in the births, as the real one above does: 10
    births (no status: the broker dropped them with the births past them), then, once the
    live console had judged the burst over (2 s after the last birth) and asked each node for
    its status, the 10 retained statuses that answered; a 30-node job heard live after."""
    t0 = T0 + connect_after_s
    fleet = SynthFleet(10, Clock(), leaves=1)
    lines = [_header(T0)]
    for i, name in enumerate(fleet.names):
        lines.append(message(t0 + i * 0.001, topic_for(CLUSTER, Kind.BIRTH, name),
                             codec.encode(fleet.agents[name].birth()), True))
    asked = t0 + 0.009 + STATUS_ASK_QUIET_S + 0.13  # the live console's tick, and the broker
    for i, name in enumerate(fleet.names):
        lines.append(message(asked + i * 0.001, topic_for(CLUSTER, Kind.STATUS, name),
                             codec.encode(fleet.agents[name].status(online=False)), True))
    topic, payload = _big_job(Clock(), 30)
    for s in (1.0, 6.0):
        lines.append(message(asked + s, topic, payload))
    return lines


@pytest.mark.parametrize("connect_after_s", [0.0, 0.6])
@pytest.mark.parametrize("tick_s", [0.1, 0.5, 1.0])
def test_the_answers_to_the_live_consoles_asks_are_no_part_of_the_recorded_burst(
        connect_after_s, tick_s, tmp_path):
    """The live console judged the burst cut in the births, then asked each node born without
    a status for it, and the broker answered with the retained status: a replay whose tick
    fell after those answers (the live console's had fallen before) took them for the
    burst's, judged it whole, and said "it can never start here" of a 30-node job on the 10
    nodes the cut kept, where the live console had said "10 heard so far". It depended on
    how long after the recording's start the console connected, and on the replay's tick."""
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(_cut_then_asked(connect_after_s)) + "\n")
    out = replay_headless(path, tick_s=tick_s)
    [job] = [j for j in out["jobs"] if j["job_id"] == "42"]
    assert out["retained_burst_cut"] == {"nodes_without_status": 10, "nodes": 10,
                                         "nodes_learned_since": None}, out["retained_burst_cut"]
    assert job["never_fits"] is None, job
    # Every node has its status (the answers), as the live console had once it asked.
    assert {n["verdict"] for n in out["nodes"]} == {"offline"}, out["nodes"]
    player = Player(path)
    player.seek(player.end)
    pjob = player.state.jobs["42"]
    assert job_row(pjob, player.state, player.clock()).reason == (
        "Resources: needs 30 nodes; 10 heard so far")


def test_a_consoles_reconnect_brings_a_burst_of_its_own_in_the_replay(tmp_path):
    """A console's recording writes no gap note when it loses the broker (``fleetdeck
    record``'s does): its next connection's burst came with nothing to say it was one, and a
    replay kept the first connection's judgement for good. The live console judged the cut
    first burst, then the whole one after it reconnected (all 24 births, their statuses and
    the job's): "needs 30 nodes; the cluster has 24: it can never start here". The replay
    went on saying "needs 30 nodes; 10 heard so far"."""
    lines = _cut_then_asked(0.0)
    fleet = SynthFleet(24, Clock(), leaves=1)
    back = T0 + 12.0
    for i, name in enumerate(fleet.names):
        a = fleet.agents[name]
        lines.append(message(back + i * 0.001, topic_for(CLUSTER, Kind.BIRTH, name),
                             codec.encode(a.birth()), True))
    for i, name in enumerate(fleet.names):
        lines.append(message(back + 0.1 + i * 0.001, topic_for(CLUSTER, Kind.STATUS, name),
                             codec.encode(fleet.agents[name].status(online=False)), True))
    topic, payload = _big_job(Clock(), 30)
    lines += [message(back + 0.2, topic, payload, True), message(back + 6.0, topic, payload)]
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = replay_headless(path)
    [job] = [j for j in out["jobs"] if j["job_id"] == "42"]
    assert job["never_fits"] == "needs 30 nodes; the cluster has 24: it can never start here"
    assert out["retained_burst_cut"] is None and out["retained_burst_judged"] is True
    # The first connection's cut was said, once, and stays in the timeline.
    player = Player(path)
    player.seek(player.end)
    assert [ln.kind for ln in player.session.log.lines()
            if ln.kind in ("burst_cut", "statuses_cut")] == ["burst_cut"]
    assert job_row(player.state.jobs["42"], player.state, player.clock()).reason == (
        "Resources: needs 30 nodes; the cluster has 24: it can never start here")


@pytest.mark.parametrize("counted", [10, None])
def test_a_recording_of_a_console_on_digests_is_judged_as_that_console_judged(counted,
                                                                               tmp_path):
    """A console on digests hears no birth nor status of a node, and judges no burst
    (``retained_burst_judged`` false); it trusts its node count by its collectors' word
    (``CollectorStatus.cluster_nodes``). Its recording, replayed, read every node as born
    without a status: "the broker dropped part of its retained messages at connect (10 of 10
    nodes came without their status)", a kept warning and ``retained_burst_cut`` that console
    never said. Of an older collector (no count), "heard so far", as that console said."""
    from fleetdeck.protocol.messages import CollectorStatus
    from tests.replay.test_mixed_feeds import digest

    lines = [_header(T0)]
    col = CollectorStatus(collector="shard-1", online=True, started=1, shard="1/1", nodes=10,
                          cluster_nodes=counted, ts=int(T0 * 1000))
    lines.append(message(T0 + 0.01, topic_for(CLUSTER, Kind.COLLECTOR, "shard-1"),
                         codec.encode(col), True))
    names = [f"gpu{i:04d}" for i in range(1, 11)]
    for s in range(0, 12, 5):
        for i, name in enumerate(names):
            dig = digest(name, int((T0 + s) * 1000)).replace(b'"mix"', b'"t"')
            lines.append(message(T0 + 0.02 + s + i * 0.001, topic_for(CLUSTER, Kind.DIGEST, name),
                                 dig, s == 0))
    topic, payload = _big_job(Clock(), 30)
    lines += [message(T0 + 3.0, topic, payload), message(T0 + 9.0, topic, payload)]
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(lines) + "\n")
    out = replay_headless(path)
    assert len(out["nodes"]) == 10 and {n["owner"] for n in out["nodes"]} == {"shard-1"}
    assert out["retained_burst_cut"] is None and out["retained_burst_judged"] is False, out
    [job] = [j for j in out["jobs"] if j["job_id"] == "42"]
    assert job["never_fits"] == (
        None if counted is None else "needs 30 nodes; the cluster has 10: it can never start here")
    player = Player(path)
    player.seek(player.end)
    assert [ln.text for ln in player.session.log.lines()
            if ln.kind in ("burst_cut", "statuses_cut")] == []
    assert job_row(player.state.jobs["42"], player.state, player.clock()).reason == (
        "Resources: needs 30 nodes; 10 heard so far" if counted is None
        else f"Resources: {job['never_fits']}")
