"""The inputs that keep the copies of the world in a spread fleet (``sim --procs``) one cluster:
the lead process stamps them for a tick, every process applies them at that tick, and whatever
else arrives on the simulator's control topics is refused, counted and logged with its topic.

Two Fleet objects in one test play the two processes; what the broker would carry between them
is handed over by hand (tests/sim/test_sim_procs.py runs the same through Mosquitto, and
tests/sim/test_spread_reconnect.py with a process's connection cut)."""

import json

from fleetdeck.agents.fleet import (
    CTL_KEEP,
    CTL_LAG_TICKS,
    Fleet,
    FleetOptions,
    ctl_topic,
    ctl_up_topic,
    inject_ack_topic,
)
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol.messages import DrainMode, DrainState

URL = BrokerURL("127.0.0.1", 1)
EPOCH_MS = 1_700_000_000_000


def pair() -> tuple[Fleet, Fleet]:
    opts = dict(cluster="sp", nodes=6, seed=4, epoch_ms=EPOCH_MS, jobs=1)
    return (Fleet(URL, FleetOptions(**opts, shard=0, shards=2)),
            Fleet(URL, FleetOptions(**opts, shard=1, shards=2)))


def sent(fleet: Fleet, topic: str) -> list[bytes]:
    """Take what the fleet queued for the broker on ``topic`` (a retained message as it will
    go out: the newest of its topic, replaced in its place)."""
    out, keep = [], []
    while not fleet._outbox.empty():
        item = fleet._outbox.get_nowait()
        (out if item[0] == topic else keep).append(item)
    for item in keep:
        fleet._outbox.put_nowait(item)
    fleet._latest.pop(topic, None)
    return [getattr(payload, "payload", payload) for _, payload, _ in out]


def window(*inputs: dict[str, object], run: int = EPOCH_MS) -> bytes:
    """The lead's retained window on ``…/sim/ctl`` (agents/fleet.py ``Fleet._stamp``)."""
    return json.dumps({"run": run, "inputs": list(inputs)}).encode()


def test_each_process_runs_agents_for_its_own_block_only():
    lead, other = pair()
    assert sorted(lead.agents) == ["gpu0001", "gpu0002", "gpu0003"]
    assert sorted(other.agents) == ["gpu0004", "gpu0005", "gpu0006"]
    assert lead.lead and not other.lead


def test_an_injection_lands_on_the_same_tick_in_every_process():
    lead, other = pair()
    for _ in range(3):
        lead.world.step()
        other.world.step()
    lead._on_inject(json.dumps({"id": "r1", "fault": "xid79", "node": "gpu0005",
                                "gpu": 1}).encode())
    [ack] = sent(lead, inject_ack_topic("sp"))
    assert json.loads(ack)["ok"] is True
    [stamped] = sent(lead, ctl_topic("sp"))
    assert [e["tick"] for e in json.loads(stamped)["inputs"]] == [3 + CTL_LAG_TICKS]
    other._on_ctl(ctl_topic("sp"), stamped)
    for fleet in (lead, other):
        for _ in range(CTL_LAG_TICKS):
            fleet.tick()
        assert fleet.world.by_name["gpu0005"].gpus[1].present  # not yet: stamped for later
        fleet.tick()
        assert not fleet.world.by_name["gpu0005"].gpus[1].present
    assert lead.world.log == other.world.log


def test_an_input_stamped_while_a_process_was_away_reaches_it_with_the_window_once():
    """The window the lead sent while the other process's connection was away (a clean
    session: the broker had no subscription of it to deliver to) reached nobody there; every
    later window, and the retained one the broker hands over on subscribing again, holds that
    input too. Sent one input a message, the other process never had it: the copies diverged
    and a fault injected for one of its nodes never showed."""
    lead, other = pair()
    windows = []
    for node, gpu in (("gpu0005", 1), ("gpu0006", 2)):
        lead._on_inject(json.dumps({"id": node, "fault": "xid79", "node": node,
                                    "gpu": gpu}).encode())
        windows += sent(lead, ctl_topic("sp"))
    _lost, retained = windows  # the first went out while the other process was away
    assert [e["seq"] for e in json.loads(retained)["inputs"]] == [1, 2]
    for _ in range(2):  # subscribed again, then the same window once more (QoS 1)
        other._on_ctl(ctl_topic("sp"), retained)
    for fleet in (lead, other):
        for _ in range(CTL_LAG_TICKS + 1):
            fleet.tick()
        assert not fleet.world.by_name["gpu0005"].gpus[1].present
        assert not fleet.world.by_name["gpu0006"].gpus[2].present
    assert lead.world.log == other.world.log
    assert other.bad_inputs == 0


def test_a_burst_of_inputs_goes_out_whole_a_window_at_a_time(caplog):
    """The window waiting to go out is replaced by a newer one only while that one still
    holds every input the waiting one brings: none is left out of every window however many
    are stamped before the scheduler's client sends one, and no window holds more than
    ``CTL_KEEP``. A process that missed more than a window holds says which it missed."""
    lead, other = pair()
    burst = 3 * CTL_KEEP + 5
    for i in range(burst):
        lead._relay_drain(f"gpu000{1 + i % 6}", DrainState.DRAINING, DrainMode.FINISH)
    windows = [json.loads(w)["inputs"] for w in sent(lead, ctl_topic("sp"))]
    assert all(len(w) <= CTL_KEEP for w in windows)
    assert sorted({e["seq"] for w in windows for e in w}) == list(range(1, burst + 1))
    assert len(windows) < burst / 8  # replaced in place, not one a stamp
    other._on_ctl(ctl_topic("sp"), json.dumps({"run": lead.world.epoch_ms,
                                               "inputs": windows[-1]}).encode())
    first = windows[-1][0]["seq"]
    assert f"inputs 1 to {first - 1} stamped by the lead process never reached" in caplog.text
    assert len(other._inputs) == len(windows[-1])


def test_a_window_of_another_run_or_a_cleared_one_changes_nothing(caplog):
    """Retained by an earlier run that was killed (or said by another simulator of the
    cluster): its ticks and sequence numbers are not this run's, and it is no one's fault."""
    _, other = pair()
    entry = {"k": "inject", "tick": 1, "seq": 1,
             "action": {"fault": "xid79", "node": "gpu0005", "gpu": 1}}
    other._on_ctl(ctl_topic("sp"), window(entry, run=EPOCH_MS - 60_000))
    other._on_ctl(ctl_topic("sp"), b"")  # the lead's clear on a clean stop
    assert not other._inputs and other.bad_inputs == 0 and "malformed" not in caplog.text


def test_a_drain_in_another_process_reaches_every_copy_of_the_scheduler():
    lead, other = pair()
    node = other.world.by_name["gpu0004"]
    node.on_drain(DrainState.DRAINING, DrainMode.NOW)  # what gpu0004's agent does on a drain
    assert node.drain_state is DrainState.NONE  # not here yet: it goes through the lead
    [up] = sent(other, ctl_up_topic("sp", 1))
    lead._on_ctl(ctl_up_topic("sp", 1), up)
    [stamped] = sent(lead, ctl_topic("sp"))
    other._on_ctl(ctl_topic("sp"), stamped)
    for _ in range(CTL_LAG_TICKS + 1):
        lead.tick()
        other.tick()
    for fleet in (lead, other):
        assert fleet.world.by_name["gpu0004"].drain_state is DrainState.DRAINING


def test_a_drain_sent_up_while_the_lead_was_away_reaches_it_with_the_window_once():
    """A drain another process sent up while the lead's connection was away (a clean
    session) reached nobody there; the next window, and the retained one the broker hands
    over on subscribing again, holds it too. Sent one drain a message, no copy of the
    scheduler had it and work was placed on the drained node."""
    lead, other = pair()
    windows = []
    for node in ("gpu0004", "gpu0005"):
        other.world.by_name[node].on_drain(DrainState.DRAINING, DrainMode.NOW)
        windows += sent(other, ctl_up_topic("sp", 1))
    _lost, retained = windows  # the first went out while the lead was away
    assert [e["seq"] for e in json.loads(retained)["inputs"]] == [1, 2]
    for _ in range(2):  # subscribed again, then the same window once more (QoS 1)
        lead._on_ctl(ctl_up_topic("sp", 1), retained)
    [stamped] = sent(lead, ctl_topic("sp"))
    assert [(e["seq"], e["node"]) for e in json.loads(stamped)["inputs"]] == [
        (1, "gpu0004"), (2, "gpu0005")]
    other._on_ctl(ctl_topic("sp"), stamped)
    for _ in range(CTL_LAG_TICKS + 1):
        lead.tick()
        other.tick()
    for fleet in (lead, other):
        for node in ("gpu0004", "gpu0005"):
            assert fleet.world.by_name[node].drain_state is DrainState.DRAINING
    # A window an earlier run left retained is no one's now.
    lead._on_ctl(ctl_up_topic("sp", 1), window(
        {"k": "drain", "node": "gpu0006", "seq": 3, "state": "draining", "mode": "now"},
        run=EPOCH_MS - 60_000))
    assert sent(lead, ctl_topic("sp")) == [] and lead.bad_inputs == other.bad_inputs == 0


def test_malformed_control_inputs_are_counted_and_change_nothing(caplog):
    lead, other = pair()
    bad = [b"not json", b"[1, 2]", b'{"k": "inject", "tick": 1, "seq": 1}',  # not a window
           b'{"run": "x", "inputs": []}', b'{"run": 1700000000000, "inputs": {}}',
           window({"k": "reboot", "tick": 1, "seq": 1}),
           window({"k": "inject", "action": {"fault": "xid79"}}),  # no tick/seq stamp
           window({"k": "drain", "node": "gpu9999", "state": "draining", "mode": "now",
                   "tick": 1, "seq": 1}),
           window({"k": "drain", "node": "gpu0004", "state": "melting", "mode": "now",
                   "tick": 1, "seq": 1})]
    for payload in bad:
        other._on_ctl(ctl_topic("sp"), payload)
    # Only drains may go up to the lead, and only from a process of the fleet.
    lead._on_ctl(ctl_up_topic("sp", 1), window({"k": "inject", "seq": 1,
                                                "action": {"fault": "xid79"}}))
    lead._on_ctl(ctl_up_topic("sp", 2), window({"k": "drain", "node": "gpu0004", "seq": 1,
                                                "state": "draining", "mode": "now"}))
    assert other.bad_inputs == len(bad) and lead.bad_inputs == 2
    assert not other._inputs and not lead._inputs and lead._outbox.empty()
    assert "fleetdeck/v1/sp/sim/ctl" in caplog.text


def test_an_input_that_fails_when_applied_is_logged_not_raised(caplog):
    _, other = pair()
    stamped = window({"k": "inject", "tick": 0, "seq": 1,
                      "action": {"fault": "nosuch", "node": "gpu0001"}})
    other._on_ctl(ctl_topic("sp"), stamped)
    other.tick()
    assert "not applied" in caplog.text


def test_a_drain_kept_in_the_state_dir_is_in_every_copy_of_the_world(tmp_path):
    """``sim --procs 2 --state-dir``: a node drained before the restart is out of service in
    every process's copy of the scheduler from the first tick, not only in the copy of the
    process that runs its agent (the lead's copy placed work on it: the copies diverged)."""
    from fleetdeck.agents.state import AgentState, StateStore, state_file
    from fleetdeck.protocol.messages import DrainInfo

    for node in ("gpu0002", "gpu0005"):
        StateStore(state_file(tmp_path, node), node).save(AgentState(DrainInfo(
            state=DrainState.DRAINED, reason="reseat cable", requested_by="alice")))
    # A damaged file: its own process keeps the node out of service (agents/state.py), so
    # every copy does.
    state_file(tmp_path, "gpu0006").write_text("{torn")
    opts = dict(cluster="sp", nodes=6, seed=4, epoch_ms=1_700_000_000_000, jobs=6,
                state_dir=tmp_path)
    lead = Fleet(URL, FleetOptions(**opts, shard=0, shards=2))
    other = Fleet(URL, FleetOptions(**opts, shard=1, shards=2))
    for fleet in (lead, other):
        drained = sorted(n.node_id for n in fleet.world.nodes
                         if n.drain_state is not DrainState.NONE)
        assert drained == ["gpu0002", "gpu0005", "gpu0006"], fleet.opts.shard
        for _ in range(3):
            fleet.tick()
    assert lead.world.log == other.world.log
    placed = {n.node_id for n in lead.world.nodes if n.binding is not None}
    assert placed and not placed & {"gpu0002", "gpu0005", "gpu0006"}
