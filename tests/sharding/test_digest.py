"""Digests: made from a judged node, validated on receipt, shown as the collector judged them."""

import pytest

from fleetdeck.console.digest import DIGEST_STALE_S, DigestSender, make_digest
from fleetdeck.console.health import Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.rows import gpu_cells, node_row, slurm_state
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import node_summary
from fleetdeck.protocol import codec, fast
from fleetdeck.protocol.topics import Kind, topic_for
from tests.helpers import FakeNode
from tests.tui.fleet import T0


def raw_state(node: FakeNode, fault: bool) -> FleetState:
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    if fault:
        node.sim.xid79(2, node.now, int(node.now * 1000))
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    return state


def digest_state(cluster: str, payload: bytes, rx: float, node: str = "gpu0001"
                 ) -> tuple[Ingest, FleetState]:
    ingest = Ingest(cluster)
    state = FleetState(cluster, ingest.malformed)
    ingest.handle(topic_for(cluster, Kind.DIGEST, node), payload, rx)
    state.apply(ingest.take_batch(), rx)
    return ingest, state


def test_a_digest_console_shows_what_the_collector_judged():
    node = FakeNode()
    raw = raw_state(node, fault=True)
    st = raw.nodes["gpu0001"]
    assert st.verdict is Verdict.FAILED
    payload = codec.encode(make_digest(st, "shard-1", node.now))
    _, dig = digest_state(node.cluster, payload, node.now + 0.1)
    ds = dig.nodes["gpu0001"]
    assert ds.verdict is st.verdict
    assert ds.reasons == st.reasons
    assert [str(f) for f in ds.all_findings] == [str(f) for f in st.all_findings]
    # The views read the digest's vitals as they read a sample: same cells, state, columns.
    assert gpu_cells(ds) == gpu_cells(st)
    assert slurm_state(ds) == slurm_state(st)
    want, got = node_row(st, node.now), node_row(ds, node.now)
    assert (got.util, got.temp, got.power, got.gpus) == (want.util, want.temp, want.power,
                                                         want.gpus)
    summary = node_summary(ds, node.now)
    assert summary["owner"] == "shard-1" and summary["gpus"] == 7
    assert node_summary(st, node.now)["owner"] is None


def test_a_digest_of_an_agent_dead_under_a_stepping_job_says_restart_the_agent():
    # The collector found the agent dead and its job still stepping: the console on digests
    # said "restart the agent, do not drain" in the finding and "check the node; drain it"
    # as the action, in one incident (an SRE drill).
    from fleetdeck.console.digest import STEPPING_NOTE
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action

    text = "agent offline (Last Will)" + STEPPING_NOTE.format(job="4105")
    payload = _digest_json(verdict="offline", online=False, drain={"state": "none"},
                           findings=[{"rule": "H2", "severity": "warn", "text": text}])
    _, state = digest_state("demo", payload, 1.0)
    state.judge_fleet(1.0)
    st = state.nodes["gpu0001"]
    assert st.job_stepping == "4105"
    assert recommended_action(st).startswith("restart the agent")
    (inc,) = incidents(state)
    assert "do not drain" in inc.action or inc.action.startswith("restart the agent"), inc
    assert "drain it if it does not come back" not in inc.action


def test_a_digest_that_stops_coming_reads_stale_not_ok():
    node = FakeNode()
    st = raw_state(node, fault=False).nodes["gpu0001"]
    _, dig = digest_state(node.cluster, codec.encode(make_digest(st, "shard-2", node.now)),
                          node.now)
    dig.judge(node.now + DIGEST_STALE_S - 1)
    assert dig.nodes["gpu0001"].verdict is Verdict.OK
    dig.judge(node.now + DIGEST_STALE_S + 1)
    ds = dig.nodes["gpu0001"]
    assert ds.verdict is Verdict.STALE and ds.reasons == ["D1"]
    assert "shard-2" in str(ds.liveness[0])


def test_malformed_digests_are_counted_with_their_topic_and_never_applied():
    cluster = "test"
    bad = {
        b"not json": "not_json",
        b'{"v":1,"node":"gpu0001","by":"shard-1","ts":1,"verdict":"splendid"}': "invalid",
        b'{"v":2,"node":"gpu0001","by":"shard-1","ts":1,"verdict":"ok"}': "unknown_version",
        b'{"v":1,"node":"gpu0009","by":"shard-1","ts":1,"verdict":"ok"}': "mismatch",
    }
    ingest = Ingest(cluster)
    state = FleetState(cluster, ingest.malformed)
    for payload in bad:
        ingest.handle(topic_for(cluster, Kind.DIGEST, "gpu0001"), payload, 10.0)
    ingest.handle("fleetdeck/v1/test/digest/bad+id", b"{}", 10.0)
    state.apply(ingest.take_batch(), 10.0)
    assert not state.nodes
    assert ingest.malformed.total == len(bad) + 1
    assert set(bad.values()) <= set(ingest.malformed.by_reason)
    assert ingest.malformed.by_topic["fleetdeck/v1/test/digest/gpu0001"] == len(bad)


def test_the_sender_sends_on_change_and_refreshes_the_rest():
    node = FakeNode()
    state = raw_state(node, fault=False)
    sender = DigestSender("shard-1", every_s=5.0)
    assert [d.node for d in sender.due(state.nodes, node.now)] == ["gpu0001"]
    assert sender.due(state.nodes, node.now + 1) == []  # nothing changed, not due yet
    assert len(sender.due(state.nodes, node.now + 5)) == 1  # the refresh
    node.sim.xid79(2, node.now, int(node.now * 1000))
    ingest = Ingest(node.cluster)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    changed = sender.due(state.nodes, node.now)
    assert [d.verdict for d in changed] == ["failed"]  # at once, not at the next refresh


def _digest_json(**over) -> bytes:
    import json

    d = {"v": 1, "node": "gpu0001", "by": "shard-1", "ts": 1, "verdict": "ok",
         "gpus": [{"index": 0, "util_pct": 50.0, "temp_c": 40.0, "power_w": 300.0}],
         "ports": [{"dev": "mlx5_ib0", "up": True}],
         "drain": {"state": "draining", "reason": "fan"}}
    d.update(over)
    return json.dumps(d).encode()


def test_the_fast_digest_decoder_accepts_and_refuses_what_the_model_does():
    import pytest

    from fleetdeck.protocol.messages import Digest

    cases = [
        _digest_json(),
        _digest_json(verdict="splendid"),
        _digest_json(gpus=[{"index": 0, "util_pct": 101.0}]),
        _digest_json(gpus=[{"index": 0, "ecc": "not an object"}]),  # DigestGpu ignores ecc
        _digest_json(gpus=[{"index": 0, "present": 1}]),  # strict: no int for bool
        _digest_json(findings=[{"rule": "G1", "severity": "drain"}] * 17),
        _digest_json(findings=[{"rule": "G1", "severity": "fatal"}]),
        _digest_json(ports=[{"dev": "bad/dev", "up": True}]),
        _digest_json(ports=[{"dev": "mlx5_ib0"}]),
        _digest_json(by=""),
        _digest_json(v=2),
        _digest_json(ts=-1),
        _digest_json(last_seen_s=-1.0),
        _digest_json(unknown_field={"anything": 1}),
        b"[]",
        b"{",
    ]
    # A port's past (only ports with an N finding carry it) and the clock shift that goes
    # with it: bounds, null, bools, floats and strings, refused or accepted as the model does.
    past = {"dev": "mlx5_ib3", "up": True}
    for field, values in {
        "fatal_ms": [0, 2**53, 2**53 + 1, 2**64 - 1, 2**64, -1, None, True, 1.0, 1.5, "1", ""],
        "symbol_ms": [1, 2**53 + 1, 2**64, -1, None, False, 2.5, "x"],
        "first_ms": [0, 2**53, 2**53 + 1, 2**64, -1, None, True, 3.0, "0"],
        "downs_1h": [0, 2**32 - 1, 2**32, 2**64, -1, None, True, 1.5, "2"],
        "downed": [True, False, None, 0, 1, 1.0, "true"],
        "symbols_blind": ["storm", "saturated", None, "blind", "", True, 1],
    }.items():
        cases += [_digest_json(ports=[{**past, field: v}]) for v in values]
    cases += [_digest_json(shift_ms=v) for v in (0, -90_000, 2**53, -2**53, 2**53 + 1,
                                                 -2**53 - 1, 2**64, None, True, 1.5, "5")]
    # A drain the agent could not save (DrainInfo.unsaved): text bounds, types, null.
    cases += [_digest_json(drain={"state": "drained", "reason": "r", "unsaved": v})
              for v in ("", "/var/lib/fleetdeck/state.json: No space left on device",
                        "x" * 2048, "x" * 2049, None, 1, True, ["x"])]
    # A GPU power-capped by software, the node's power limit, a recurrence: bounds, null,
    # types, refused or accepted as the model does; an older console ignores them all.
    gpu = {"index": 0, "util_pct": 50.0}
    for field, values in {
        "clock_event_reasons": [0, 4, 2**53, 2**64 - 1, 2**64, -1, None, True, 4.0, "4"],
        "power_limit_w": [0, 450.0, 5000, 5000.5, -1, None, True, "450"],
        "sm_clock_mhz": [0, 1350.0, 10000, 10001, -1, None, False, "1"],
        "sm_clock_max_mhz": [1980.0, 10000.5, -0.5, None, "x"],
    }.items():
        cases += [_digest_json(gpus=[{**gpu, field: v}]) for v in values]
    cases += [_digest_json(power_limit_w=v) for v in (700.0, 0, 5000, 5001, -1, None, "7", True)]
    # The job's step time on the node (a 2-node job's baseline): bounds, null, types.
    cases += [_digest_json(job="41", step_time_ms=v)
              for v in (1010.0, 0, 1e15, 1e15 + 1e3, -1, None, "1010", True, 1010)]
    rec = {"cleared_ms": 1767225600000, "after_s": 34.0, "findings": ["G2 gpu0"]}
    cases += [_digest_json(recurred=v) for v in (
        rec, None, {**rec, "cleared_ms": -1}, {**rec, "cleared_ms": 2**53 + 1},
        {**rec, "after_s": -1.0}, {**rec, "after_s": "34"}, {**rec, "findings": []},
        {**rec, "findings": ["x" * 257]}, {**rec, "findings": ["G2 gpu0"] * 17},
        {**rec, "findings": [1]}, {k: v for k, v in rec.items() if k != "findings"}, [], "x")]
    for payload in cases:
        try:
            ref = codec.decode(Digest, payload)
        except codec.DecodeError as err:
            with pytest.raises(codec.DecodeError) as got:
                codec.decode_digest(payload)
            assert got.value.reason == err.reason, payload
            continue
        fast_d = codec.decode_digest(payload)
        assert (fast_d.node, fast_d.by, fast_d.verdict, fast_d.drain.state, fast_d.drain.reason,
                fast_d.drain.unsaved, [(g.index, g.util_pct) for g in fast_d.gpus],
                fast_d.shift_ms) == (
            ref.node, ref.by, ref.verdict, ref.drain.state.value, ref.drain.reason,
            ref.drain.unsaved, [(g.index, g.util_pct) for g in ref.gpus], ref.shift_ms), payload
        assert [{f: getattr(p, f) for f in p.__struct_fields__} for p in fast_d.ports] == [
            p.model_dump() for p in ref.ports], payload
        assert [{f: getattr(g, f) for f in type(ref.gpus[0]).model_fields}
                for g in fast_d.gpus] == [g.model_dump() for g in ref.gpus], payload
        assert fast_d.power_limit_w == ref.power_limit_w, payload
        assert fast_d.step_time_ms == ref.step_time_ms, payload
        assert (None if fast_d.recurred is None else fast.to_dict(fast_d.recurred)) == (
            None if ref.recurred is None else {**ref.recurred.model_dump(), "findings": list(
                ref.recurred.findings)}), payload


def _on_digests(session, by: str = "shard-1") -> FleetState:
    """A console on digests fed the digests a collector would send of ``session``'s nodes."""
    now = session.clock()
    ingest = Ingest(session.state.cluster)
    state = FleetState(session.state.cluster, ingest.malformed)
    for name, st in session.state.nodes.items():
        ingest.handle(topic_for(state.cluster, Kind.DIGEST, name),
                      codec.encode(make_digest(st, by, now)), now)
    state.apply(ingest.take_batch(), now)
    state.judge_fleet(now)
    return state


def test_a_digest_console_reads_agents_stopped_cleanly_as_a_stop_not_the_network():
    # A console on digests carried no "stopped": its fleet incident said "fell silent ... the
    # network" of agents that had said their clean goodbye, while a console on raw telemetry
    # said "agents stopped cleanly" (docs/protocol.md, "Birth, status and Last Will").
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action
    from tests.console.test_incidents import run

    silent = [f"gpu{i:04d}" for i in range(1, 25)]
    state = _on_digests(run(32, {}, silent=silent, stopped=True))
    found = {i.key: i for i in incidents(state)}
    fleet = found["fleet:silent"]
    assert "agents stopped cleanly" in fleet.title and "not the network" in fleet.title, fleet
    assert fleet.action.startswith("start the agents again")
    st = state.nodes["gpu0001"]
    assert st.stopped and st.verdict is Verdict.OFFLINE
    assert recommended_action(st).startswith("its agent was stopped cleanly")
    # Wills stay wills: the network is still suspected of agents that died.
    wills = _on_digests(run(32, {}, silent=silent, stopped=False))
    assert not wills.nodes["gpu0001"].stopped
    assert "fell silent" in {i.key: i for i in incidents(wills)}["fleet:silent"].title


def test_a_digest_without_stopped_reads_as_before():
    # An older collector sends no "stopped" (docs/protocol.md: unknown fields are ignored, an
    # absent one is its default): an offline node reads as a will, as from an older agent.
    from fleetdeck.protocol.messages import Digest

    payload = _digest_json(verdict="offline", online=False, drain={"state": "none"})
    assert b"stopped" not in payload
    _, state = digest_state("demo", payload, 1.0)
    assert state.nodes["gpu0001"].stopped is False
    assert codec.decode(Digest, payload).stopped is False
    # A newer collector's stopped is read by the fast decoder and the reference model alike.
    payload = _digest_json(verdict="offline", online=False, stopped=True, drain={"state": "none"})
    assert codec.decode_digest(payload).stopped and codec.decode(Digest, payload).stopped
    _, state = digest_state("demo", payload, 1.0)
    assert state.nodes["gpu0001"].stopped is True


def test_a_digest_console_expects_no_gpu_of_a_node_without_a_gpu_reader():
    # An agent on --source sysfs reads InfiniBand only: the collector expects no GPU of it,
    # while a console on digests read "0/8", counted 8 GPUs failed
    # and a drain's radius said 8 GPUs (its minimal birth said source "digest" and no GPU, so
    # health.gpus_expected fell back to 8).
    from msgspec.structs import replace

    from fleetdeck.console.commands import blast_radius
    from fleetdeck.protocol.messages import CommandOp

    node = FakeNode()
    ingest = Ingest(node.cluster)
    birth = node.birth().model_copy(update={"gpus": [], "gpus_expected": 0, "source": "sysfs"})
    node.feed(ingest, birth, Kind.BIRTH)
    node.feed(ingest, replace(node.telemetry(), gpus=[]), Kind.TELEMETRY)
    raw = FleetState(node.cluster, ingest.malformed)
    raw.apply(ingest.take_batch(), node.now)
    raw.judge_fleet(node.now)
    st = raw.nodes["gpu0001"]
    assert st.gpus_expected == 0 and st.verdict is Verdict.OK, st.all_findings
    payload = codec.encode(make_digest(st, "shard-1", node.now))
    _, dig = digest_state(node.cluster, payload, node.now + 0.1)
    dig.judge_fleet(node.now + 0.1)
    ds = dig.nodes["gpu0001"]
    assert ds.verdict is Verdict.OK
    assert (ds.gpus_present, ds.gpus_expected) == (0, 0)
    assert node_row(ds, node.now).gpus == "0/0"
    assert gpu_cells(ds) == gpu_cells(st)
    totals = dig.totals()
    assert (totals.gpus, totals.gpus_use.failed) == (0, 0)
    assert ds.birth is not None and ds.birth.gpus_expected == 0
    radius = blast_radius(dig, CommandOp.DRAIN, ["gpu0001"], node.now)
    assert radius.gpus == 0, radius


def test_a_digest_console_reads_nodes_behind_a_suspect_switch_as_the_raw_console_does():
    # A console on digests kept F1 and the "(switch)" findings as the node's own: each node
    # behind a dead switch read "watch; drain it if it persists" where the raw console said
    # "check switch leaf00-r2; do not drain", had an incident of its own instead of the
    # switch's one, and the overview said 18 nodes need attention beside the raw console's 2
    # (an SRE drill, 32 nodes, three collectors).
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action, sick_nodes
    from fleetdeck.console.rows import top_problems
    from tests.console.test_incidents import job_status, port_down, run

    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    faults = {n: down for n in behind}
    faults["gpu0005"] = port_down("mlx5_ib6")  # a fault of its own, beside the switch
    session = run(8, faults, jobs=[lambda c: job_status("4103", ["gpu0001", "gpu0006"], c)])
    raw = session.state
    dig = _on_digests(session)
    job = raw.jobs["4103"]
    dig.jobs["4103"] = job  # the job status reaches both consoles alike
    for name in [*behind, "gpu0005"]:
        r, d = raw.nodes[name], dig.nodes[name]
        assert (d.verdict, d.behind_switch, d.behind_ports) == (
            r.verdict, r.behind_switch, r.behind_ports), name
        assert [str(f) for f in d.all_findings] == [str(f) for f in r.all_findings], name
        assert recommended_action(d, dig) == recommended_action(r, raw), name
    assert recommended_action(dig.nodes["gpu0001"], dig).startswith("check switch leaf00-r2")
    want = sorted((i.key, i.nodes, i.action) for i in incidents(raw))
    assert sorted((i.key, i.nodes, i.action) for i in incidents(dig)) == want
    assert [s.as_json() for s in sick_nodes(job, dig)] == [
        s.as_json() for s in sick_nodes(job, raw)]
    (_, raw_count), (_, dig_count) = top_problems(raw), top_problems(dig)
    assert dig_count == raw_count


def test_a_digest_console_does_not_make_up_a_down_port_s_physical_state():
    # A digest says only whether a port is up: the console on digests drew every port behind
    # a dead switch "DOWN Disabled" (an administrator's act) in the fabric view's port table,
    # beside its own finding "DOWN/Polling" (a newcomer's run, collect --shard).
    from fleetdeck.console.rows import fabric
    from tests.console.test_incidents import port_down, run

    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    session = run(8, dict.fromkeys(behind, port_down("mlx5_ib2")))
    raw_rows = {(r.node, r.port): r for r in fabric(session.state)[1]}
    dig_rows = {(r.node, r.port): r for r in fabric(_on_digests(session))[1]}
    assert sorted(dig_rows) == sorted(raw_rows) == [(n, "mlx5_ib2:1") for n in behind]
    for key, row in dig_rows.items():
        assert (row.status, row.state) == (raw_rows[key].status, "DOWN"), row
        assert row.phys == "?", row
        assert "Polling" in row.detail and "Disabled" not in row.detail, row


def test_a_digest_console_counts_a_collector_that_outlived_its_twin():
    # The newer of two processes running as shard-1 died: its will replaced the older one's
    # birth, whose next announcements were ignored as older: "2 collectors" with three running.
    from fleetdeck.protocol.messages import CollectorStatus

    ingest = Ingest("demo")
    state = FleetState("demo", ingest.malformed)

    def hear(online: bool, started: int, rx: float) -> None:
        msg = CollectorStatus(collector="shard-1", online=online, started=started, ts=started)
        ingest.handle(topic_for("demo", Kind.COLLECTOR, "shard-1"), codec.encode(msg), rx)
        state.apply(ingest.take_batch(), rx)

    hear(True, 100, 1.0)
    hear(True, 900, 2.0)  # the twin
    hear(False, 900, 3.0)  # its will
    assert not state.collectors["shard-1"].online
    hear(True, 100, 30.0)  # the one still running announces itself
    assert state.collectors["shard-1"].online
    hear(False, 100, 31.0)
    hear(True, 900, 32.0)
    hear(False, 50, 33.0)  # a late will of an even older process changes nothing
    assert state.collectors["shard-1"].online and state.collectors["shard-1"].started == 900


def test_a_switch_whose_nodes_the_collectors_split_is_suspected_on_digests():
    # Each collector correlates within its shard: one that owned 2 of a dead switch's nodes
    # (fewer than CORRELATION_MIN) sent them failed, "drain, then reseat the cable", while
    # the console on digests named the switch suspect above them and a console on raw
    # telemetry said "check switch leaf02-r5; do not drain" (a drill with 4 collectors).
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import correlate_digests, recommended_action
    from tests.console.test_incidents import port_down, run

    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    raw = run(8, {n: down for n in behind}).state
    shard_a = run(8, {n: down for n in behind[:2]}).state  # owns gpu0001-2 (and 5-8)
    shard_b = run(8, {n: down for n in behind[2:]}).state  # owns gpu0003-4
    assert shard_a.nodes["gpu0001"].verdict is Verdict.FAILED  # no switch seen in a shard
    now = 1_000_100.0
    ingest = Ingest(raw.cluster)
    dig = FleetState(raw.cluster, ingest.malformed)
    dig.digest_mode = True
    dig.correlate = correlate_digests  # as ConsoleSession sets it up on digests
    for name in shard_a.nodes:
        by = shard_b if name in behind[2:] else shard_a
        ingest.handle(topic_for(dig.cluster, Kind.DIGEST, name),
                      codec.encode(make_digest(by.nodes[name], "shard-x", now)), now)
    dig.apply(ingest.take_batch(), now)
    dig.judge_fleet(now)
    for name in behind:
        r, d = raw.nodes[name], dig.nodes[name]
        assert (d.verdict, d.behind_switch) == (r.verdict, r.behind_switch), name
        assert recommended_action(d, dig) == recommended_action(r, raw), name
    assert recommended_action(dig.nodes["gpu0001"], dig).startswith("check switch leaf00-r2")
    assert sorted(i.key for i in incidents(dig)) == sorted(i.key for i in incidents(raw))
    # The switch back up: the nodes read as their collector judged them again.
    for name in behind:
        ingest.handle(topic_for(dig.cluster, Kind.DIGEST, name),
                      codec.encode(make_digest(raw.nodes["gpu0008"], "shard-x", now + 1)
                                   ).replace(b"gpu0008", name.encode()), now + 1)
    dig.apply(ingest.take_batch(), now + 1)
    dig.judge_fleet(now + 1)
    assert all(dig.nodes[n].verdict is Verdict.OK and not dig.nodes[n].behind_switch
               for n in behind)


class _Twins:
    """One real agent on a simulated node, heard by a console on raw telemetry and by a
    console on the digests a collector (that raw console) makes of it, both with job 4103 on
    the node and another one (a job on one node reduces over NVLink: no port of its node
    holds it up). ``skew_s``: how far the collector's (and the digest console's) clock is ahead of
    the agent's."""

    def __init__(self, skew_s: float = 0.0) -> None:
        from fleetdeck.console.judgements import correlate_digests
        from fleetdeck.protocol.messages import JobState, JobStatus

        self.node = FakeNode(cluster="demo")
        self.skew_s = skew_s
        self.raw_in = Ingest("demo")
        self.raw = FleetState("demo", self.raw_in.malformed)
        self.dig_in = Ingest("demo")
        self.dig = FleetState("demo", self.dig_in.malformed)
        self.dig.digest_mode = True
        self.dig.correlate = correlate_digests  # as ConsoleSession sets it up on digests
        self.node.feed(self.raw_in, self.node.birth(), Kind.BIRTH)
        self.node.feed(self.raw_in, self.node.status(), Kind.STATUS)
        now_ms = int(self.node.now * 1000)
        self.job = JobStatus(job_id="4103", name="llama-70b", user="alice", state=JobState.R,
                             nodes=["gpu0001", "gpu0002"], gpus_per_node=8, step=500,
                             total_steps=1000, started_ts=now_ms - 3_600_000, ts=now_ms)
        self.raw.jobs["4103"] = self.dig.jobs["4103"] = self.job  # the job reaches both alike

    def step(self, seconds: int = 1) -> None:
        for _ in range(seconds):
            self.node.feed(self.raw_in, self.node.telemetry(), Kind.TELEMETRY)
            self.raw.apply(self.raw_in.take_batch(), self.node.now)
            self.raw.judge_fleet(self.node.now)
        st = self.raw.nodes["gpu0001"]
        now = self.node.now + self.skew_s  # the collector's clock, and the console's
        self.dig_in.handle(topic_for("demo", Kind.DIGEST, "gpu0001"),
                           codec.encode(make_digest(st, "shard-1", now)), now)
        self.dig.apply(self.dig_in.take_batch(), now)
        self.dig.judge_fleet(now)

    def held_up(self) -> tuple[str, str]:
        """(raw, digest) consoles' "held up by" of job 4103."""
        from fleetdeck.console.judgements import held_up_text, sick_nodes

        return (held_up_text(sick_nodes(self.job, self.raw)),
                held_up_text(sick_nodes(self.job, self.dig)))

    def ports(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(raw, digest) consoles' bad ports of the node, as the fabric view draws them."""
        from fleetdeck.console.judgements import bad_ports

        return tuple([(status, p.dev) for status, p in bad_ports(c.nodes["gpu0001"])]
                     for c in (self.raw, self.dig))  # type: ignore[return-value]


_SKEWS = [0.0, 90.0, -90.0]
"""The collector's clock against the agent's: a digest's port past is dated by the agent's
samples and read against the digest's time."""


@pytest.mark.parametrize("skew_s", _SKEWS)
def test_a_digest_console_says_a_flapping_link_holds_its_job_up_as_the_raw_console_does(
        skew_s: float):
    # A drill: while gpu0008's link flapped, the raw console said job 4103 was "held up by
    # gpu0008 failed: N2 …" and the console on digests said nothing (it had no history of
    # when the link last went down: up between drops read "links up again"), so its restart
    # dialog offered a generic reason; its fabric view drew the link "erroring", not
    # "flapping" (digests carried only up or down).
    from fleetdeck.console.judgements import PORT_FLAPPING, restart_reason_hint

    twins = _Twins(skew_s)
    twins.step(3)
    assert twins.held_up() == ("", "")
    twins.node.sim.flap(3, count=6, down_s=1.0, every_s=5.0, t=twins.node.sim._t_own + 0.5)
    seen_up_between = flapping = 0
    for _ in range(20):
        twins.step()
        raw, dig = twins.held_up()
        assert dig == raw, twins.node.now
        assert twins.ports()[1] == twins.ports()[0], twins.node.now
        if all(p.up for p in twins.dig.nodes["gpu0001"].digest.ports) and raw:
            seen_up_between += 1  # the case the drill found: up between two drops
            assert raw.startswith("gpu0001 failed: N2 mlx5_ib3:1"), raw
        flapping += twins.ports()[1] == [(PORT_FLAPPING, "mlx5_ib3")]
    assert seen_up_between and flapping
    assert (restart_reason_hint(twins.job, twins.dig, twins.node.now)
            == restart_reason_hint(twins.job, twins.raw, twins.node.now))
    # The flaps over and the link still for a minute: neither holds the job up any more.
    twins.step(40)
    twins.step(40)
    assert twins.held_up() == ("", "")
    assert twins.dig.nodes["gpu0001"].verdict is Verdict.FAILED  # N2's hour still holds


@pytest.mark.parametrize("skew_s", _SKEWS)
def test_a_digest_console_frees_a_job_once_symbol_errors_stop_as_the_raw_console_does(
        skew_s: float):
    # The same gap the other way round: a node whose symbol errors (N3) had stopped read as
    # holding its job up on digests (no history: never quiet) while the raw console said
    # it did its part.
    twins = _Twins(skew_s)
    twins.step(3)
    twins.node.sim.symbol_storm(3, rate=50.0, bandwidth=1.0)
    twins.step(20)
    raw, dig = twins.held_up()
    assert raw.startswith("gpu0001 failed: N3 mlx5_ib3:1") and dig == raw, (raw, dig)
    twins.node.sim.symbol_storm(3, rate=0.0, bandwidth=1.0)
    for _ in range(4):
        twins.step(100)
        assert twins.held_up()[1] == twins.held_up()[0], twins.node.now
    assert twins.held_up() == ("", "")
    assert twins.dig.nodes["gpu0001"].verdict is Verdict.FAILED  # N3's hour still holds


@pytest.mark.parametrize("skew_s", _SKEWS)
def test_a_digest_console_frees_a_job_once_its_port_is_repaired_as_the_raw_console_does(
        skew_s: float):
    # The agent's repair event is dated by its clock and the digest's port past by the
    # collector's: read as they came, 90 s of skew either way held the job up on digests
    # (a symbol error "after" the repair, or a repair "after" the digest) while the raw
    # console said the node did its part.
    from fleetdeck.agents.source import EventDraft

    twins = _Twins(skew_s)
    twins.step(3)
    twins.node.sim.symbol_storm(3, rate=50.0, bandwidth=1.0)
    twins.step(20)
    raw, dig = twins.held_up()
    assert raw.startswith("gpu0001 failed: N3 mlx5_ib3:1") and dig == raw, (raw, dig)
    twins.node.sim.symbol_storm(3, rate=0.0, bandwidth=1.0)
    twins.step(5)
    repair = codec.encode(twins.node.agent._event(EventDraft("repair", "node repaired")))
    twins.raw_in.handle(twins.node.topic(Kind.EVENT), repair, twins.node.now)
    twins.dig_in.handle(twins.node.topic(Kind.EVENT), repair, twins.node.now + skew_s)
    for _ in range(5):
        twins.step()
        assert twins.held_up()[1] == twins.held_up()[0], twins.node.now
    assert twins.held_up() == ("", "")
    assert twins.dig.nodes["gpu0001"].digest.shift_ms != 0 or skew_s == 0


def test_a_digest_carries_a_port_past_only_for_ports_with_a_finding():
    # Collectors publish digests for thousands of nodes: a healthy node's is as before, and
    # an older collector's (no past at all) reads as it did: no flap seen, never quiet.
    from msgspec.structs import replace

    from fleetdeck.console.judgements import port_past
    from fleetdeck.protocol.messages import Digest

    twins = _Twins()
    twins.step(3)
    healthy = codec.encode(make_digest(twins.raw.nodes["gpu0001"], "shard-1", twins.node.now))
    for key in (b"downs_1h", b"downed", b"fatal_ms", b"symbol_ms", b"first_ms", b"blind"):
        assert key not in healthy
    twins.node.sim.flap(3, count=2, down_s=1.0, every_s=5.0, t=twins.node.sim._t_own + 0.5)
    twins.step(4)
    payload = codec.encode(make_digest(twins.raw.nodes["gpu0001"], "shard-1", twins.node.now))
    ref = codec.decode(Digest, payload)
    fast_d = codec.decode_digest(payload)
    assert [p.model_dump() for p in ref.ports] == [
        {f: getattr(p, f) for f in p.__struct_fields__} for p in fast_d.ports]
    (bad,) = [p for p in fast_d.ports if p.fatal_ms is not None]
    assert (bad.dev, bad.downs_1h) == ("mlx5_ib3", 1) and bad.first_ms > 0
    # {"dev":"mlx5_ib3","up":true,"downs_1h":1,"fatal_ms":…,"first_ms":…}: a few dozen bytes
    # on a bad port, none on the others.
    plain = codec.encode(replace(bad, downs_1h=0, fatal_ms=None, first_ms=0))
    assert len(codec.encode(bad)) - len(plain) < 80, codec.encode(bad)
    assert healthy.count(b'"up":true}') == payload.count(b'"up":true}') + 1
    _, old = digest_state("demo", _digest_json(verdict="failed"), 1.0)
    past = port_past(old.nodes["gpu0001"], "mlx5_ib0")
    assert past is not None and past.fatal_ms is None and past.first_ms == 0


def _split_digests(raw: FleetState, shard_a: FleetState, shard_b: FleetState,
                   b_owns: list[str], now: float) -> FleetState:
    """A console on digests of two collectors: ``shard_b`` judged ``b_owns``, ``shard_a`` the
    rest (each only its own shard's switches)."""
    from fleetdeck.console.judgements import correlate_digests

    ingest = Ingest(raw.cluster)
    dig = FleetState(raw.cluster, ingest.malformed)
    dig.digest_mode = True
    dig.correlate = correlate_digests  # as ConsoleSession sets it up on digests
    for name in shard_a.nodes:
        by = shard_b if name in b_owns else shard_a
        ingest.handle(topic_for(dig.cluster, Kind.DIGEST, name),
                      codec.encode(make_digest(by.nodes[name], "shard-x", now)), now)
    dig.apply(ingest.take_batch(), now)
    dig.judge_fleet(now)
    return dig


def _duplicate(state: FleetState, name: str, now: float) -> None:
    """Two agent processes take turns publishing as ``name`` (H3), as the ingest notes it."""
    state.nodes[name].duplicate_at = now
    state.mark(name)
    state.judge_fleet(now)


def test_a_duplicate_node_id_behind_a_switch_the_collectors_split_stays_failed_on_digests():
    # The console's own correlation put gpu0001 behind the switch and re-judged its verdict
    # without the liveness findings: the collector's "failed: duplicate node id" (H3) read
    # "degraded" on digests, "failed" on raw telemetry (whose H3 comes before the findings).
    from fleetdeck.console.judgements import recommended_action
    from tests.console.test_incidents import port_down, run

    down = port_down("mlx5_ib2")
    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    raw_session = run(8, {n: down for n in behind})
    raw = raw_session.state
    shard_a = run(8, {n: down for n in behind[:2]}).state  # owns gpu0001-2 (and 5-8)
    shard_b = run(8, {n: down for n in behind[2:]}).state  # owns gpu0003-4
    now = raw_session.clock()
    for state in (raw, shard_a):
        _duplicate(state, "gpu0001", now)
    r = raw.nodes["gpu0001"]
    assert r.verdict is Verdict.FAILED and r.behind_switch and "H3" in r.reasons
    assert not shard_a.nodes["gpu0001"].behind_switch  # its collector saw no switch
    dig = _split_digests(raw, shard_a, shard_b, behind[2:], now)
    d = dig.nodes["gpu0001"]
    assert (d.verdict, d.behind_switch) == (r.verdict, r.behind_switch)
    assert recommended_action(d, dig) == recommended_action(r, raw)
    assert dig.nodes["gpu0002"].verdict is raw.nodes["gpu0002"].verdict is Verdict.DEGRADED


def test_a_digest_keeps_the_suspect_switch_of_a_node_with_more_findings_than_it_holds():
    # A whole leaf group down: 8 ports x (N1 + N2) = 16 findings, plus a GPU's XID of the
    # node's own. F1 came last and was cut (a digest holds 16): the console on digests kept
    # the " (switch)" texts as the node's own, and its own correlation marked them again.
    from msgspec.structs import replace

    from fleetdeck.console.digest import _finding
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import MAX_DIGEST_FINDINGS
    from tests.console.test_incidents import run

    def leaf_down(tel):  # all 8 rails of the node's leaf group: each link down (N1), dropped
        ports = [replace(p, state="DOWN", phys_state="Polling",  # the hour's drop (N2)
                         errors_1h={**p.errors_1h, "link_downed": 1}) for p in tel.ib_ports]
        return replace(tel, ib_ports=ports)

    def and_xid(tel):  # gpu0001's GPU 3 fell off the bus as well: a fault of its own
        tel = leaf_down(tel)
        gpus = [replace(g, xid_last=79, xid_last_ts=tel.ts) if g.index == 3 else g
                for g in tel.gpus]
        return replace(tel, gpus=gpus)

    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    faults = {n: leaf_down for n in behind[1:]}
    faults["gpu0001"] = and_xid
    session = run(8, faults)
    raw = session.state
    now = session.clock()
    r = raw.nodes["gpu0001"]
    assert len(r.all_findings) > MAX_DIGEST_FINDINGS, r.all_findings
    assert r.all_findings[-1].rule == "F1", r.all_findings
    digest = make_digest(r, "shard-1", now)
    assert len(digest.findings) == MAX_DIGEST_FINDINGS and digest.findings[-1].rule == "F1"
    dig = _split_digests(raw, raw, raw, [], now)  # one collector saw the whole switch
    d = dig.nodes["gpu0001"]
    assert (d.verdict, d.behind_switch, d.behind_ports) == (
        r.verdict, r.behind_switch, r.behind_ports)
    assert d.behind_by_collector
    assert not any(f.text.endswith(" (switch) (switch)") for f in d.all_findings), d.findings
    kept = [str(f) for f in d.all_findings]
    assert kept[:-1] == [str(f) for f in r.all_findings[:MAX_DIGEST_FINDINGS - 1]]
    assert kept[-1] == str(r.all_findings[-1])  # F1, as the raw console says it
    assert recommended_action(d, dig) == recommended_action(r, raw)
    # An older collector's digest, cut before its F1: the marks are taken off all the same,
    # and this console's own correlation names the switch (once).
    older = replace(digest, findings=[_finding(f) for f in r.all_findings[:MAX_DIGEST_FINDINGS]])
    ingest = Ingest(raw.cluster)
    ingest.handle(topic_for(raw.cluster, Kind.DIGEST, "gpu0001"), codec.encode(older), now + 1)
    dig.apply(ingest.take_batch(), now + 1)
    dig.judge_fleet(now + 1)
    d = dig.nodes["gpu0001"]
    assert d.behind_switch == r.behind_switch and not d.behind_by_collector
    assert not any(f.text.endswith(" (switch) (switch)") for f in d.all_findings), d.findings


def test_a_digest_keeps_a_node_s_own_port_fault_behind_a_dead_leaf_group():
    # All 8 rails of leaf00 down (N1 + N2 on each: 16 findings the switch's) and gpu0001's
    # last rail with symbol errors of its own (N3). Cut in order, the digest dropped that N3
    # (it sorts after the switch's N1/N2) and kept F1: the console on digests said "check
    # the switch, do not drain" where the raw console said to clean mlx5_ib7:1's cable.
    from msgspec.structs import replace

    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.messages import MAX_DIGEST_FINDINGS
    from tests.console.test_incidents import run

    def leaf_down(tel):
        ports = [replace(p, state="DOWN", phys_state="Polling",
                         errors_1h={**p.errors_1h, "link_downed": 1}) for p in tel.ib_ports]
        return replace(tel, ib_ports=ports)

    def and_symbols(tel):  # its own: 5,000 symbol errors in the hour on the last rail
        tel = leaf_down(tel)
        ports = [replace(p, errors_1h={**p.errors_1h, "symbol_error": 5000})
                 if p.dev == "mlx5_ib7" else p for p in tel.ib_ports]
        return replace(tel, ib_ports=ports)

    behind = ["gpu0001", "gpu0002", "gpu0003", "gpu0004"]
    faults = {n: leaf_down for n in behind[1:]}
    faults["gpu0001"] = and_symbols
    session = run(8, faults)
    raw = session.state
    now = session.clock()
    r = raw.nodes["gpu0001"]
    assert len(r.all_findings) > MAX_DIGEST_FINDINGS, r.all_findings
    assert any(f.rule == "N3" and f.component == "mlx5_ib7:1" and not f.text.endswith(
        " (switch)") for f in r.all_findings), r.all_findings
    digest = make_digest(r, "shard-1", now)
    assert len(digest.findings) == MAX_DIGEST_FINDINGS
    assert any(f.rule == "N3" for f in digest.findings), digest.findings
    dig = _split_digests(raw, raw, raw, [], now)
    d = dig.nodes["gpu0001"]
    assert (d.verdict, d.behind_switch, d.behind_ports, d.behind_link_only) == (
        r.verdict, r.behind_switch, r.behind_ports, r.behind_link_only)
    f1 = [str(f) for f in d.all_findings if f.rule == "F1"]
    assert f1 == [str(f) for f in r.all_findings if f.rule == "F1"], f1
    assert "do not drain" not in f1[0]
    assert "mlx5_ib7:1" in recommended_action(r, raw)
    assert recommended_action(d, dig) == recommended_action(r, raw)


def test_nodes_with_the_same_ports_share_one_port_list_whatever_their_past():
    # The synthesized sample's port list is shared between nodes that read the same; keyed
    # on the whole port, each bad node's past (its own fatal_ms, new in every digest) made
    # it one list a digest, the cache filling and clearing instead of sharing.
    from fleetdeck.console.digest import _PORT_LISTS, _sample_of
    from fleetdeck.protocol import fast

    def digest(node: str, fatal_ms: int) -> fast.Digest:
        return codec.decode_digest(_digest_json(node=node, verdict="failed", ports=[
            {"dev": "mlx5_ib0", "up": True, "downs_1h": 2, "fatal_ms": fatal_ms,
             "first_ms": 5}, {"dev": "mlx5_ib1", "up": False}]))

    _PORT_LISTS.clear()
    a = _sample_of(digest("gpu0001", 1_000))
    b = _sample_of(digest("gpu0002", 2_000))
    c = _sample_of(digest("gpu0001", 3_000))
    assert a.ib_ports is b.ib_ports is c.ib_ports and len(_PORT_LISTS) == 1
    assert [(p.state, p.errors_1h) for p in a.ib_ports] == [
        ("ACTIVE", {"link_downed": 2}), ("DOWN", {})]


def test_a_digest_console_groups_a_jobs_failed_nodes_as_the_raw_console_does():
    """The three nodes XID 79 took out of job 4104, requeued elsewhere: their samples name no
    job, and a console on digests read three "no job on it" node incidents where the raw
    console read one naming the job. Their digests say the job they failed in."""
    from fleetdeck.console.incidents import incidents
    from tests.console.test_incidents import _lost_in_job

    struck = ["gpu0001", "gpu0002", "gpu0004"]
    raw = _lost_in_job(None, struck, ["gpu0001", "gpu0002", "gpu0003", "gpu0004"],
                       ["gpu0003", "gpu0009", "gpu0010", "gpu0011"])
    now = raw.clock()
    ingest = Ingest(raw.state.cluster)
    dig = FleetState(raw.state.cluster, ingest.malformed)
    for name, st in raw.state.nodes.items():
        d = make_digest(st, "shard-1", now)
        assert d.struck_job == ("4104" if name in struck else None)
        ingest.handle(topic_for(raw.state.cluster, Kind.DIGEST, name), codec.encode(d), now)
    for job in raw.state.jobs.values():
        ingest.handle(topic_for(raw.state.cluster, Kind.JOB, job.job_id), codec.encode(job), now)
    dig.apply(ingest.take_batch(), now)
    dig.judge_fleet(now)
    want = [(i.key, i.nodes, i.jobs) for i in incidents(raw.state)]
    assert want == [("job:4104:failed", struck, ["4104"])]
    assert [(i.key, i.nodes, i.jobs) for i in incidents(dig)] == want
    assert b"struck_job" not in codec.encode(make_digest(raw.state.nodes["gpu0005"],
                                                         "shard-1", now))


def test_nodes_failed_in_a_collector_outage_did_not_fail_at_once_on_digests():
    """A console on digests: the collector went away, its nodes read stale (D1), and three
    nodes of job 4104 failed meanwhile; back, its digests said failed, and stale -> failed
    read as a change seen: "3 of its nodes failed at once", dated when the digests came back
    (a review). A console that heard the collector throughout saw them fail."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.ingest import Ingest as RawIngest
    from fleetdeck.console.session import ConsoleSession
    from tests.console.test_incidents import JOB_NODES, STRUCK, _heard, gpu_lost
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

    raw = ConsoleSession(CLUSTER, clock=Clock(), ingest=RawIngest(CLUSTER), follow_up=False)
    clock = raw.clock
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(raw.ingest)
    publish_job(raw.ingest, job_status("4104", JOB_NODES, clock), clock)
    _heard(raw, fleet, {})
    consoles = {"watched": Ingest(CLUSTER), "outage": Ingest(CLUSTER)}
    states = {k: FleetState(CLUSTER, ing.malformed) for k, ing in consoles.items()}

    def send(which: str) -> None:
        now = clock()
        ingest, state = consoles[which], states[which]
        for name, st in raw.state.nodes.items():
            ingest.handle(topic_for(CLUSTER, Kind.DIGEST, name),
                          codec.encode(make_digest(st, "shard-1", now)), now)
        for job in raw.state.jobs.values():
            ingest.handle(topic_for(CLUSTER, Kind.JOB, job.job_id), codec.encode(job), now)
        state.apply(ingest.take_batch(), now)
        state.judge_fleet(now)

    send("watched")
    send("outage")
    faults: dict = {}
    for _ in range(int(DIGEST_STALE_S) + 5):
        if clock() - raw.state.nodes["gpu0001"].changed_at > 10:
            faults = {n: gpu_lost(0) for n in STRUCK}
        _heard(raw, fleet, faults, ticks=1)
        send("watched")
        states["outage"].judge_fleet(clock())
    assert {states["outage"].nodes[n].verdict for n in STRUCK} == {Verdict.STALE}
    send("outage")
    titles = {}
    for which, state in states.items():
        (inc,) = incidents(state)
        assert inc.key == "job:4104:failed" and inc.nodes == STRUCK
        titles[which] = (inc.title.split(" (gpu")[0], inc.as_json()["unseen"])
    assert titles == {"watched": ("job 4104: 3 of its nodes failed at once", 0),
                      "outage": ("job 4104: 3 of its nodes had already failed when first "
                                 "heard", 3)}


def test_nodes_first_heard_failed_by_their_collector_did_not_fail_at_once_on_digests():
    """Three nodes of job 4104 rebooted between two digests (a new agent session, no goodbye)
    and came back failed: the collector knew it first heard them so ("failed before this
    console heard them"), but its digests said only ok, then failed, and the console on them
    read "3 of its nodes failed at once" (a review). The digest says so (``seen``, sent only
    then); one of nodes the collector watched fail says nothing more."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.ingest import Ingest as RawIngest
    from fleetdeck.console.session import ConsoleSession
    from tests.console.test_incidents import JOB_NODES, STRUCK, _heard, gpu_lost
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job

    raw = ConsoleSession(CLUSTER, clock=Clock(), ingest=RawIngest(CLUSTER), follow_up=False)
    clock = raw.clock
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(raw.ingest)
    publish_job(raw.ingest, job_status("4104", JOB_NODES, clock), clock)
    _heard(raw, fleet, {})
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)

    def send() -> None:
        now = clock()
        for name, st in raw.state.nodes.items():
            ingest.handle(topic_for(CLUSTER, Kind.DIGEST, name),
                          codec.encode(make_digest(st, "shard-1", now)), now)
        for job in raw.state.jobs.values():
            ingest.handle(topic_for(CLUSTER, Kind.JOB, job.job_id), codec.encode(job), now)
        state.apply(ingest.take_batch(), now)
        state.judge_fleet(now)

    send()
    for n in STRUCK:
        a = fleet.agents[n]
        a.bd_seq += 1
        a.seq = 0
    fleet.birth(raw.ingest, STRUCK)
    faults = {n: gpu_lost(0) for n in STRUCK}
    _heard(raw, fleet, faults)
    send()
    titles = []
    for incs in (incidents(raw.state), incidents(state)):
        (inc,) = incs
        titles.append((inc.title.split(" (gpu")[0], inc.as_json()["unseen"]))
    assert titles == [("job 4104: 3 of its nodes had already failed when first heard", 3)] * 2
    # Repaired, then watched failing by the collector: seen on digests as ever, and said by
    # no field of the digest.
    _heard(raw, fleet, {}, ticks=70)
    send()
    _heard(raw, fleet, faults)
    send()
    (inc,) = incidents(state)
    assert inc.title.startswith("job 4104: 3 of its nodes failed at once (gpu"), inc.title
    assert b'"seen"' not in codec.encode(make_digest(raw.state.nodes[STRUCK[0]], "shard-1",
                                                     clock()))


def test_a_digest_console_counts_a_digests_silence_only_up_to_the_brokers_last_word():
    """A broker hung (SIGSTOP) keeps the link up until the keepalive's mute (15 s), and a
    digest comes every 5 s: a node whose digest came 4 s before the broker's last word read
    D1 (stale) 11 s into the hang, and back once the mute made the console blind from that
    word. Its silence counts only up to the broker's last word, as a raw node's does."""
    node = FakeNode()
    st = raw_state(node, fault=False).nodes["gpu0001"]
    _, dig = digest_state(node.cluster, codec.encode(make_digest(st, "shard-2", node.now)),
                          node.now)
    dig.broker_word_at = node.now + 4  # the broker hung then (pinged, it answered no more)
    dig.judge(node.now + DIGEST_STALE_S + 1)
    assert dig.nodes["gpu0001"].verdict is Verdict.OK
    dig.broker_word_at = node.now + DIGEST_STALE_S + 1  # it talks again: the node is silent
    dig.judge(node.now + DIGEST_STALE_S + 2)
    assert dig.nodes["gpu0001"].verdict is Verdict.STALE


def test_a_drain_its_agent_could_not_save_reaches_a_digest_console():
    """A collector's digest carried the drain without ``unsaved``: a console on digests read
    a drain the agent's next restart forgets as kept (docs/reliability.md, "not saved")."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    node = FakeNode()
    raw = raw_state(node, fault=False)
    st = raw.nodes["gpu0001"]
    st.drain = DrainInfo(state=DrainState.DRAINED, reason="psu", requested_by="alice",
                         unsaved="/var/lib/fleetdeck/state-gpu0001.json: No space left on device")
    payload = codec.encode(make_digest(st, "shard-1", node.now))
    _, dig = digest_state(node.cluster, payload, node.now + 0.1)
    assert node_summary(dig.nodes["gpu0001"], node.now)["drain_unsaved"] == (
        "drained not saved on the node (/var/lib/fleetdeck/state-gpu0001.json: No space left "
        "on device): an agent restart forgets it")
    assert node_summary(raw_state(FakeNode(), fault=False).nodes["gpu0001"],
                        node.now)["drain_unsaved"] is None


def _digests_of(raw: FleetState, now: float, dig: FleetState | None = None) -> FleetState:
    """A console on digests (``dig``, or a new one) fed a collector's digests of ``raw``'s
    nodes at ``now`` and its jobs."""
    from fleetdeck.console.judgements import correlate_digests

    if dig is None:
        dig = FleetState(raw.cluster, Ingest(raw.cluster).malformed)
        dig.digest_mode = True
        dig.correlate = correlate_digests
    ingest = Ingest(raw.cluster)
    for name, st in raw.nodes.items():
        ingest.handle(topic_for(raw.cluster, Kind.DIGEST, name),
                      codec.encode(make_digest(st, "shard-1", now)), now)
    for job in raw.jobs.values():
        ingest.handle(topic_for(raw.cluster, Kind.JOB, job.job_id), codec.encode(job), now)
    dig.apply(ingest.take_batch(), now)
    dig.judge_fleet(now)
    return dig


@pytest.mark.parametrize("limit_w", [450.0, 700.0])
def test_a_digest_console_names_a_straggler_s_software_power_cap_as_the_raw_console_does(
        limit_w: float):
    """A digest's GPUs carried five vitals, no clock events nor power limit: a straggler whose
    GPU was power-capped by software read "no finding on that node" on digests while the raw
    console said "GPU power-capped by software (… limit 450 W, below its job's other nodes'
    700 W)" and "restore it" (a digest-vs-raw audit)."""
    from msgspec.structs import replace

    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.summary import fleet_summary
    from tests.console.test_judgements import _job_with, session_with

    def capped(tel):
        return replace(tel, gpus=[replace(g, clock_event_reasons=0x4, sm_clock_mhz=1350.0,
                                          sm_clock_max_mhz=1980.0, power_limit_w=limit_w)
                                  if g.index == 5 else g for g in tel.gpus])

    raw = session_with({"gpu0003": capped}, jobs=[_job_with(
        [(19, "gpu0003", 1120.0), (8, "gpu0002", 1012.0), (30, "gpu0004", 1010.0)])])
    now = raw.clock()
    dig = _digests_of(raw.state, now)
    (want,) = fleet_summary(raw.state, now)["jobs"]
    assert want["straggler"]["causes"] == ["power_capped"], want["straggler"]
    (got,) = fleet_summary(dig, now)["jobs"]
    assert got["straggler"] == want["straggler"]
    st, ds = raw.state.nodes["gpu0003"], dig.nodes["gpu0003"]
    assert recommended_action(ds, dig) == recommended_action(st, raw.state)
    assert [(i.key, i.title, i.action) for i in incidents(dig)] == [
        (i.key, i.title, i.action) for i in incidents(raw.state)]


def test_a_digest_carries_a_gpu_s_power_cap_only_where_one_is_capped():
    """20 bytes a GPU for every node's limit, where only a capped straggler's is compared:
    the node's highest limit once, and a capped GPU's own with its clocks."""
    from msgspec.structs import replace

    from tests.console.test_judgements import session_with

    def capped(tel):
        return replace(tel, gpus=[replace(g, clock_event_reasons=0x5 if g.index == 1 else 0x4,
                                          power_limit_w=450.0)
                                  if g.index in (1, 5) else g for g in tel.gpus])

    raw = session_with({"gpu0003": capped})
    now = raw.clock()
    ok = make_digest(raw.state.nodes["gpu0002"], "shard-1", now)
    assert ok.power_limit_w == 700.0
    assert all(g.power_limit_w is None and g.clock_event_reasons is None for g in ok.gpus)
    d = make_digest(raw.state.nodes["gpu0003"], "shard-1", now)
    assert [(g.index, g.power_limit_w, g.clock_event_reasons) for g in d.gpus
            if g.power_limit_w is not None] == [(1, 450.0, 0x5), (5, 450.0, 0x4)]
    assert d.power_limit_w == 700.0


def test_a_digest_console_says_a_fault_recurred_as_the_raw_console_does():
    """A console on digests judges no recurrence (it never sees a fault clear): the same DBE
    back 34 s after its repair read "reset gpu0 or reboot" there, the repair that had not
    held, where the raw console said "the same fault (G2 gpu0) came back 34 s after it
    cleared …: replace gpu0" (a digest-vs-raw audit). The digest says it, as judged."""
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.console.summary import node_summary
    from tests.test_xid_rules import Console, _dbe

    c = Console()
    dig = _digests_of(c.state, c.node.now)
    st = _dbe(c, 0)
    for _ in range(3):
        st = c.send(c.node.telemetry())  # repaired
        _digests_of(c.state, c.node.now, dig)
    assert st.verdict is Verdict.OK
    for _ in range(30):
        c.node.telemetry()
    st = _dbe(c, 0)
    _digests_of(c.state, c.node.now + 2.0, dig)  # read a tick later than the collector
    said = recommended_action(st, c.state)
    assert "the same fault (G2 gpu0) came back 3" in said, said
    ds = dig.nodes[st.node_id]
    assert recommended_action(ds, dig) == said
    now = c.node.now + 2.0
    assert node_summary(ds, now, dig)["recurrence"] == node_summary(st, now, c.state)[
        "recurrence"]
    assert [(i.key, i.action) for i in incidents(dig)] == [
        (i.key, i.action) for i in incidents(c.state)]
    # A console started a minute later (status --digests) first reads the failure then: how
    # long the repair held is still the collector's 3x s, not 9x.
    late = _digests_of(c.state, now + 60)
    assert recommended_action(late.nodes[st.node_id], late) == said
    # Cleared again: gone from the digest, and from the console's action.
    for _ in range(3):
        st = c.send(c.node.telemetry())
    _digests_of(c.state, c.node.now, dig)
    assert ds.recurred is None and "came back" not in recommended_action(ds, dig)
    assert b"recurred" not in codec.encode(make_digest(st, "shard-1", c.node.now))


def test_a_console_on_digests_dates_a_leaf_groups_rails_as_the_raw_one_does():
    """Rails of one leaf group that dropped 20 min apart are two switches' faults on digests
    too (each port's drop rides as ``fatal_ms``), and rails down together one group's."""
    from fleetdeck.console.incidents import incidents
    from tests.console.test_incidents import _leaf_drops

    for gap_s, keys in ((20 * 60, ["switch:leaf00-r2", "switch:leaf00-r5"]),
                        (20, ["switch:leaf00"])):
        session, _fleet = _leaf_drops(("mlx5_ib2",), ("mlx5_ib5",), gap_s)
        raw = session.state
        dig = _split_digests(raw, raw, raw, [], session.clock())
        assert sorted(i.key for i in incidents(raw)) == keys
        assert sorted(i.key for i in incidents(dig)) == keys, [i.title for i in incidents(dig)]


def test_a_digest_console_measures_a_two_node_jobs_slow_node_as_the_raw_console_does():
    """A slow node of a 2-node job is measured against the other node's own step time (its
    sample's ``job.step_time_ms``): the scheduler's median lies between the two nodes. A
    digest carried the job without its step time, and a console on digests measured against
    the median: "+17%" of a node slowing its job 37 % where the raw console said "+37%" (a
    digest-vs-raw audit). Of an older collector, no step time: the median, as before."""
    from msgspec.structs import replace

    from fleetdeck.console.judgements import straggler
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.fast import JobOnNode
    from fleetdeck.protocol.messages import RankTime
    from tests.console.test_judgements import job_status, session_with, throttled

    def slowed(c):
        job = job_status("41", ["gpu0002", "gpu0003"], c)
        return job.model_copy(update={"step_time_ms": 1385.0, "median_step_time_ms": 1185.0,
                                      "slowest": [RankTime(rank=8 + i, node="gpu0003",
                                                           step_time_ms=1384.0 - i)
                                                  for i in range(8)]})

    def on_job(ms):
        def apply(tel):
            return replace(throttled(3)(tel) if ms > 1100 else tel,
                           job=JobOnNode(id="41", step_time_ms=ms))
        return apply

    raw = session_with({"gpu0002": on_job(1010.0), "gpu0003": on_job(1384.0)}, jobs=[slowed])
    now = raw.clock()
    dig = _digests_of(raw.state, now)
    want = straggler(raw.state.jobs["41"], raw.state)
    assert want is not None and round(want.slower_pct) == 37, want
    got = straggler(dig.jobs["41"], dig)
    assert got is not None and got.text == want.text, got
    assert fleet_summary(dig, now)["jobs"] == fleet_summary(raw.state, now)["jobs"]
    # An older collector's digest says no step time: the scheduler's median, as before.
    old = codec.encode(replace(make_digest(raw.state.nodes["gpu0002"], "shard-1", now),
                               step_time_ms=None))
    assert b"step_time_ms" not in old
    ingest = Ingest(raw.state.cluster)
    ingest.handle(topic_for(raw.state.cluster, Kind.DIGEST, "gpu0002"), old, now)
    dig.apply(ingest.take_batch(), now)
    dig.judge_fleet(now)
    older = straggler(dig.jobs["41"], dig)
    assert older is not None and round(older.slower_pct) == 17, older


def test_status_json_dates_a_suspect_switch_on_digests_as_on_raw_telemetry():
    """``SuspectSwitch.since_ms`` (when its rails dropped) is what tells two rails of a leaf
    that dropped 20 min apart from a leaf group down, yet ``status --json`` did not carry it:
    a script saw only the incidents' keys. Its ``since`` (unix s), the same on digests (the
    ports' past ride the digest, shifted onto its clock) as on raw telemetry."""
    from fleetdeck.console.summary import fleet_summary
    from tests.console.test_incidents import _leaf_drops

    session, _fleet = _leaf_drops(("mlx5_ib2",), ("mlx5_ib5",), 20 * 60)
    raw = session.state
    # Digests made as the last samples were judged: the shift onto the digest's clock is 0,
    # as on a collector that judged them at once.
    now = session.clock() - 1.0
    dig = _split_digests(raw, raw, raw, [], now)
    want = fleet_summary(raw, now)["suspect_switches"]
    assert [(s["switch"], s["since"]) for s in want] == [
        ("leaf00-r2", T0 + 2.0), ("leaf00-r5", T0 + 2.0 + 20 * 60)], want
    assert fleet_summary(dig, now)["suspect_switches"] == want


def test_a_digest_console_says_a_job_can_never_start_once_its_collectors_count_the_nodes():
    """A job that asks for more nodes than the cluster has is said never to start only on a
    node count that is the cluster's (``FleetState.nodes_counted``): a live raw console's once
    its connect burst came whole in the births; a live console on digests, which hears no
    birth, was never sure, and said "needs 16 nodes; 8 heard so far" where the raw console
    said "it can never start here". It takes the collectors' word now: each says how many
    nodes it counts (``CollectorStatus.cluster_nodes``), and the console has a digest of as
    many. Not while one says none (an older collector, or its births not known whole yet),
    nor while it counts more than the console has digests of."""
    from fleetdeck.console.rows import job_row
    from fleetdeck.console.summary import job_summary
    from fleetdeck.protocol.messages import CollectorStatus, JobState
    from tests.console.test_judgements import job_status, session_with

    def huge(c):
        return job_status("42", [], c, state=JobState.PD).model_copy(
            update={"reason": "Resources", "nodes_wanted": 16})

    raw = session_with({}, jobs=[huge])
    now = raw.clock()
    raw.state.start_hearing(now - 10)  # live, and its connect burst judged whole
    raw.state.births_whole = True
    never = "needs 16 nodes; the cluster has 8: it can never start here"
    assert job_summary(raw.state.jobs["42"], raw.state, now)["never_fits"] == never

    dig = _digests_of(raw.state, now)
    dig.start_hearing(now - 10)  # a live console on digests

    def said(**collectors: int | None) -> tuple[str | None, str]:
        ingest = Ingest(dig.cluster)
        for name, counted in collectors.items():
            col = CollectorStatus(collector=name, online=True, started=1, shard="1/2",
                                  nodes=4, cluster_nodes=counted, ts=int(now * 1000))
            ingest.handle(topic_for(dig.cluster, Kind.COLLECTOR, name), codec.encode(col), now)
        dig.apply(ingest.take_batch(), now)
        job = dig.jobs["42"]
        return job_summary(job, dig, now)["never_fits"], job_row(job, dig, now).reason

    assert said() == (None, "Resources: needs 16 nodes; 8 heard so far")
    # An older collector says no count: nothing trusted.
    assert said(**{"shard-1": 8, "shard-2": None}) == (
        None, "Resources: needs 16 nodes; 8 heard so far")
    # Both count the 8 nodes this console has digests of: the raw console's words.
    assert said(**{"shard-2": 8}) == (never, f"Resources: {never}")
    assert dig.nodes_counted()
    # One counts a node whose digest has not come yet: the count is not the cluster's.
    assert said(**{"shard-1": 9}) == (None, "Resources: needs 16 nodes; 8 heard so far")
    # A collector gone (its will) says nothing any more.
    ingest = Ingest(dig.cluster)
    ingest.handle(topic_for(dig.cluster, Kind.COLLECTOR, "shard-1"), codec.encode(
        CollectorStatus(collector="shard-1", online=False, started=1, ts=int(now * 1000))),
        now)
    dig.apply(ingest.take_batch(), now)
    assert job_summary(dig.jobs["42"], dig, now)["never_fits"] == never


def _clock_events(bits: int, gpus: tuple[int, ...] = tuple(range(8)), **more):
    from msgspec.structs import replace

    def apply(tel):
        return replace(tel, gpus=[replace(g, clock_event_reasons=bits, **more)
                                  if g.index in gpus else g for g in tel.gpus])
    return apply


_BRAKED = [f"gpu{i:04d}" for i in range(1, 11)]


@pytest.mark.parametrize("rounds", [
    # A power brake (HW slowdown with it, no heat) on 10 nodes: one facility incident.
    [dict.fromkeys(_BRAKED, _clock_events(0x88))] * 2,
    # ... ended: held a minute (the agent's and the collector's hold), then the same.
    [dict.fromkeys(_BRAKED, _clock_events(0x88))] * 2 + [{}] * 2,
    # ... on idle GPUs.
    [dict.fromkeys(_BRAKED, _clock_events(0x89))] * 2,
    # Heat on one GPU of the straggler's node, and after it cooled.
    [{"gpu0003": _clock_events(0x40, (3,))}] * 2,
    [{"gpu0003": _clock_events(0x40, (3,))}] * 2 + [{}] * 3,
    # A power cap beside a brake on one GPU, and a brake then a cap.
    [{"gpu0003": _clock_events(0x84, (3,), power_limit_w=450.0)}] * 2,
    [{"gpu0003": _clock_events(0x80, (3,))}] * 2
    + [{"gpu0003": _clock_events(0x4, (3,), power_limit_w=450.0)}] * 2,
    # A brake on one GPU of the straggler's node, a cap on another.
    [{"gpu0003": lambda t: _clock_events(0x4, (5,), power_limit_w=450.0)(
        _clock_events(0x88, (3,))(t))}] * 2,
], ids=["brake", "brake-held", "brake-idle", "thermal", "thermal-held", "cap+brake",
        "brake-then-cap", "brake-and-cap"])
def test_a_digest_console_judges_throttled_gpus_as_the_raw_console_does(rounds):
    """A digest carries a GPU's clock events only where it is power-capped by software (bit
    0x4): a console on digests reads a power brake's or heat's throttle from the collector's
    G12/G13 findings (their common cause, the straggler's cause, the steps), never from a
    sample's bits. Whether their judgements match the raw console's with the bits of every
    other GPU left out (a digest-vs-raw audit): they do, nodes, jobs and incidents alike."""
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.messages import RankTime
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, publish_job
    from tests.tui.fleet import job_status as a_job

    clock = Clock()
    ingest = Ingest(CLUSTER)
    raw = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(16, clock, leaves=1)
    fleet.birth(ingest)
    nodes = fleet.names[:12]
    publish_job(ingest, a_job("41", nodes, clock).model_copy(update={
        "median_step_time_ms": 1000.0, "slowest": [
            RankTime(rank=19, node="gpu0003", step_time_ms=1150.0),
            RankTime(rank=3, node="gpu0001", step_time_ms=1010.0)]}), clock)
    dig = None
    for faults in rounds:
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults, job=dict.fromkeys(nodes, "41"))
        raw.tick()
        dig = _digests_of(raw.state, clock(), dig)
    now = clock()
    want, got = fleet_summary(raw.state, now), fleet_summary(dig, now)
    assert got["incidents"] == want["incidents"]
    assert got["jobs"] == want["jobs"]
    skip = {"seq", "owner"}  # a digest's sample has no seq; the owner is the collector
    assert [{k: v for k, v in n.items() if k not in skip} for n in got["nodes"]] == [
        {k: v for k, v in n.items() if k not in skip} for n in want["nodes"]]
