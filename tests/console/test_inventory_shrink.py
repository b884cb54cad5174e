"""A node whose agent came back with fewer GPUs or IB ports than the node had (G14, N8).

A failure drill: an agent restarted with 7 GPUs instead of 8 (a GPU that fell off the bus, XID
79, is often not enumerated after the reboot), or 2 IB ports instead of 3, read 7/7, ok, with
no event, although the console had heard the node with 8. Only an agent told its counts
(``--expect-gpus``) caught it (docs/real-nodes.md)."""

import sqlite3
from pathlib import Path

import msgspec

from fleetdeck.console.digest import make_digest
from fleetdeck.console.health import (
    KnownInventory,
    NodeHistory,
    Severity,
    evaluate,
    inventory_shrink,
    still_healthy,
)
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import recommended_action
from fleetdeck.console.rows import Cell, gpu_cells, gpu_findings, node_row, top_problems
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.store import Store
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec, fast
from fleetdeck.protocol.topics import Kind, topic_for
from tests.console.test_retire import clear_retained
from tests.helpers import FakeNode
from tests.sharding.test_digest import digest_state
from tests.tui.fleet import CLUSTER, Clock, SynthFleet

UUIDS = tuple(f"GPU-{i:08x}-0000-0000-0000-000000000000" for i in range(8))


def _birth(gpus: int | tuple[int, ...] = 8, ports: int = 8, **kw: object) -> fast.Birth:
    """A birth of gpu0001 with the GPUs of ``UUIDS`` at ``gpus`` (renumbered from 0, as NVML
    does after one is lost) and ``ports`` ports, told no counts (a real agent's default)."""
    which = tuple(range(gpus)) if isinstance(gpus, int) else gpus
    return fast.Birth(
        cluster=CLUSTER, node="gpu0001", bdSeq=1, ts=1,
        gpus=tuple(fast.GpuInventory(index=i, uuid=UUIDS[g]) for i, g in enumerate(which)),
        ib_ports=tuple(fast.IbPortInventory(dev=f"mlx5_ib{i}") for i in range(ports)),
        **{"source": "nvml", **kw})  # type: ignore[arg-type]


WITHOUT_GPU3 = (0, 1, 2, 4, 5, 6, 7)


def test_a_birth_short_of_a_gpu_the_node_had_names_it_by_its_uuid():
    known, found = inventory_shrink(None, _birth())
    assert found == () and len(known.gpus) == 8
    kept, found = inventory_shrink(known, _birth(WITHOUT_GPU3))
    (f,) = found
    # Named by uuid: gpu3 now is the gpu4 of before, and must not be drawn failed.
    assert (f.rule, f.severity, f.component) == ("G14", Severity.DRAIN, UUIDS[3])
    assert f.text == ("gpu3 not enumerated since an earlier birth of the node "
                      "(7 GPUs now, 8 before)")
    assert kept == known  # the fullest stays what later births are judged against
    # Born again with all eight: clear.
    back, found = inventory_shrink(kept, _birth())
    assert found == () and back.gpus == known.gpus
    # One replaced (a new uuid at its index): the new inventory, nothing to say.
    swapped = _birth()
    swapped = msgspec.structs.replace(swapped, gpus=(
        *swapped.gpus[:3], fast.GpuInventory(index=3, uuid="GPU-new"), *swapped.gpus[4:]))
    now, found = inventory_shrink(known, swapped)
    assert found == () and (3, "GPU-new") in now.gpus


def test_a_birth_short_of_an_ib_port_names_the_port():
    known, _ = inventory_shrink(None, _birth(ports=3))
    kept, found = inventory_shrink(known, _birth(ports=2))
    assert [(f.rule, f.severity, f.component) for f in found] == [
        ("N8", Severity.DRAIN, "mlx5_ib2:1")]
    assert "(2 IB ports now, 3 before)" in found[0].text
    assert kept.ports == ("mlx5_ib0:1", "mlx5_ib1:1", "mlx5_ib2:1")


def test_what_g1_and_n1_judge_already_keeps_its_existing_behaviour():
    known, _ = inventory_shrink(None, _birth())
    # Told its counts (--expect-gpus / --expect-ib-ports, or the driver's count): G1 and N1.
    for told in (_birth(WITHOUT_GPU3, ports=7, gpus_expected=8, ib_ports_expected=8),
                 _birth(WITHOUT_GPU3, ports=7, gpus_expected=7, ib_ports_expected=7)):
        assert inventory_shrink(known, told)[1] == ()
    # An inventory that hung (no GPUs: G1 says 0/8), an agent with no GPU reader.
    assert inventory_shrink(known, _birth(()))[1] == ()
    assert inventory_shrink(known, _birth(WITHOUT_GPU3, source="sysfs"))[1] == ()
    # A GPU without a uuid cannot be named: counted.
    bare = KnownInventory(tuple((i, "") for i in range(8)), ())
    (f,) = inventory_shrink(bare, _birth(7, ports=0))[1]
    assert (f.component, f.text) == ("", "1 GPU not enumerated since an earlier birth of the "
                                         "node (7 GPUs now, 8 before)")


def test_the_rules_fail_the_node_from_its_history():
    hist = NodeHistory()
    hist.inventory(_birth())
    short = _birth(WITHOUT_GPU3, ports=7)
    hist.inventory(short)
    node = FakeNode()
    full = node.telemetry()
    t = msgspec.structs.replace(full, gpus=full.gpus[:7], ib_ports=full.ib_ports[:7])
    hist.update(t)
    assert [f.rule for f in evaluate(short, t, hist)] == ["G14", "N8"]
    assert not still_healthy(short, t, hist)
    hist.inventory(_birth())
    full = node.telemetry()
    hist.update(full)
    assert evaluate(_birth(), full, hist) == [] and still_healthy(_birth(), full, hist)


# --- a console's session ---------------------------------------------------------------------


def _born(session: ConsoleSession, fleet: SynthFleet, name: str, bd_seq: int) -> None:
    """The node's agent (re)started: its birth and status, told no counts."""
    a = fleet.agents[name]
    a.bd_seq = bd_seq
    birth = a.birth().model_copy(update={"gpus_expected": 0, "ib_ports_expected": 0})
    session.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name), codec.encode(birth),
                          session.clock())
    session.ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(a.status()),
                          session.clock())


def _lose_gpu3_and_a_port(fleet: SynthFleet, name: str = "gpu0001") -> str:
    """The sim node rebooted without its gpu3 (the rest renumbered) and mlx5_ib7; the lost
    GPU's uuid."""
    src = fleet.src(name)
    lost = src.gpus[3].uuid
    src.gpus = [g for g in src.gpus if g.index != 3]
    for i, g in enumerate(src.gpus):
        g.index = i
    src.ports = src.ports[:7]
    return lost


def _run(session: ConsoleSession, fleet: SynthFleet, ticks: int = 3) -> None:
    for _ in range(ticks):
        session.clock.advance(1.0)
        fleet.telemetry(session.ingest)
        session.tick()


def _two_nodes(session: ConsoleSession | None = None) -> tuple[ConsoleSession, SynthFleet]:
    if session is None:
        session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER),
                                 follow_up=False)
    fleet = SynthFleet(2, session.clock)
    for name in fleet.names:
        _born(session, fleet, name, 1)
    _run(session, fleet)
    assert session.state.nodes["gpu0001"].verdict.value == "ok"
    return session, fleet


def test_an_agent_back_with_a_gpu_and_a_port_fewer_fails_its_node_until_they_are_back():
    session, fleet = _two_nodes()
    state = session.state
    lost = _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    st = state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.reasons == ["G14", "N8"]
    action = recommended_action(st, state)
    assert action.startswith(f"drain (no job on it), then reboot the node and check that gpu3 "
                             f"({lost}) is seated; RMA it if it goes missing again; find why "
                             "mlx5_ib7:1's HCA is not enumerated"), action
    # status --json, and the incidents.
    (node,) = [n for n in fleet_summary(state, session.clock())["nodes"] if n["id"] == "gpu0001"]
    assert node["verdict"] == "failed" and node["action"] == action
    assert node["findings"][0] == (f"G14 {lost}: gpu3 not enumerated since an earlier birth of "
                                   "the node (7 GPUs now, 8 before)")
    assert [i for i in incidents(state, session.log.lines()) if "gpu0001" in i.nodes]
    # The timeline says what is gone, once, beside the verdict change.
    texts = [ln.text for ln in session.log.lines()]
    assert [t for t in texts if "came back short" in t] == [
        f"gpu0001 came back short of the hardware it had: G14 {lost}: gpu3 not enumerated "
        "since an earlier birth of the node (7 GPUs now, 8 before); N8 mlx5_ib7:1: IB port "
        "not enumerated since an earlier birth of the node (7 IB ports now, 8 before)"]
    assert any(t.startswith("ok -> failed (G14, N8)") for t in texts), texts
    # Born again with everything: clear.
    fresh = SynthFleet(2, session.clock)
    fleet.agents["gpu0001"].source = fresh.agents["gpu0001"].source
    _born(session, fleet, "gpu0001", 3)
    _run(session, fleet)
    assert st.verdict.value == "ok" and st.findings == []


def test_a_smaller_inventory_is_accepted_by_retiring_the_node():
    """docs/architecture.md: `fleetdeck retire --force`, then its agent's birth is a new node."""
    session, fleet = _two_nodes()
    _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    assert session.state.nodes["gpu0001"].verdict.value == "failed"
    clear_retained(session, ["gpu0001"])
    session.tick()
    assert "gpu0001" not in session.state.nodes
    _born(session, fleet, "gpu0001", 3)  # the agent's rebirth, asked for by the console
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "ok" and st.gpus_present == st.gpus_expected == 7


async def _console_on(db: Path, clock: Clock) -> ConsoleSession:
    """A console (re)started on the store at ``db``."""
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await session.open_store(db)
    return session


def _reads_gpu0001_short(session: ConsoleSession, fleet: SynthFleet, lost: str) -> None:
    """Both nodes' births heard again, gpu0001's short of ``lost``: it fails by G14 and N8,
    gpu0002 reads ok."""
    _born(session, fleet, "gpu0001", 2)
    _born(session, fleet, "gpu0002", 1)
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.reasons == ["G14", "N8"], st.findings
    assert st.findings[0].component == lost
    assert session.state.nodes["gpu0002"].verdict.value == "ok"


async def test_a_console_restarted_on_its_store_remembers_what_the_node_had(tmp_path: Path):
    """The broker keeps only the latest birth: a console restarted after the agent came back
    short heard a node of 7 GPUs, and read it ok."""
    db, clock = tmp_path / "history.db", Clock()
    first = await _console_on(db, clock)
    _session, fleet = _two_nodes(first)
    await first.close()

    clock.advance(60.0)
    lost = _lose_gpu3_and_a_port(fleet)
    again = await _console_on(db, clock)
    _reads_gpu0001_short(again, fleet, lost)
    await again.close()

    # Retired since: the next console does not hold the old inventory against the new node.
    clock.advance(60.0)
    third = await _console_on(db, clock)
    _born(third, fleet, "gpu0001", 2)
    _run(third, fleet)
    clear_retained(third, ["gpu0001"])
    third.tick()
    _born(third, fleet, "gpu0001", 3)
    _run(third, fleet)
    await third.close()
    clock.advance(60.0)
    fourth = await _console_on(db, clock)
    _born(fourth, fleet, "gpu0001", 3)
    _run(fourth, fleet)
    assert fourth.state.nodes["gpu0001"].verdict.value == "ok"
    await fourth.close()


def test_a_console_on_digests_shows_the_collectors_g14():
    session, fleet = _two_nodes()
    lost = _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    now = session.clock()
    _, dig = digest_state(CLUSTER, codec.encode(make_digest(st, "shard-1", now)), now + 0.1)
    ds = dig.nodes["gpu0001"]
    assert ds.verdict.value == "failed" and ds.reasons == ["G14", "N8"]
    assert [str(f) for f in ds.all_findings] == [str(f) for f in st.all_findings]
    assert lost in recommended_action(ds, dig)


async def _purged(db: Path, clock: Clock, days: float) -> None:
    """The store ``days`` after ``clock``: its retention purged what is older (a console that
    ran on it since)."""
    store = await Store.open(db)
    try:
        await store.purge(clock() + days * 86400)
    finally:
        await store.close()


async def test_a_node_ok_for_longer_than_the_retention_is_still_remembered(tmp_path: Path):
    """The fleet's nodes are ok for weeks: the retention purges their one verdict row, and a
    restarted console knew no node to put the stored inventory back into. The agent came back
    short of a GPU while no console ran: its node read 7/7, ok (the store kept the 8)."""
    db, clock = tmp_path / "history.db", Clock()
    first = await _console_on(db, clock)
    _session, fleet = _two_nodes(first)
    await first.close()
    await _purged(db, clock, 8)

    clock.advance(8 * 86400)
    lost = _lose_gpu3_and_a_port(fleet)
    again = await _console_on(db, clock)
    assert "gpu0001" not in again.state.nodes  # no row of it left: not shown before it is heard
    _reads_gpu0001_short(again, fleet, lost)
    await again.close()


async def test_a_node_retired_longer_ago_than_the_retention_stays_accepted(tmp_path: Path):
    """Retiring accepts the smaller inventory (docs/architecture.md): the restore left out the
    inventories from before the retirement by its line in ``events``, which the retention
    purges, while ``inventories`` is kept. A week on, a console restarted after the node's
    next reboot failed it by G14 again, for the GPU the operator had written off."""
    db, clock = tmp_path / "history.db", Clock()
    first = await _console_on(db, clock)
    _session, fleet = _two_nodes(first)
    _lose_gpu3_and_a_port(fleet)
    _born(first, fleet, "gpu0001", 2)
    _run(first, fleet)
    assert first.state.nodes["gpu0001"].verdict.value == "failed"
    clear_retained(first, ["gpu0001"])
    first.tick()
    _born(first, fleet, "gpu0001", 3)
    _run(first, fleet)
    assert first.state.nodes["gpu0001"].verdict.value == "ok"
    await first.close()
    await _purged(db, clock, 8)

    # A week on, the node rebooted (a verdict row within the retention), with its 7 GPUs.
    clock.advance(8 * 86400)
    second = await _console_on(db, clock)
    _born(second, fleet, "gpu0001", 4)
    _born(second, fleet, "gpu0002", 1)
    _run(second, fleet)
    assert second.state.nodes["gpu0001"].verdict.value == "ok"
    await second.close()
    clock.advance(60.0)
    third = await _console_on(db, clock)
    _born(third, fleet, "gpu0001", 4)
    _born(third, fleet, "gpu0002", 1)
    _run(third, fleet)
    st = third.state.nodes["gpu0001"]
    assert st.verdict.value == "ok", st.findings
    await third.close()


async def test_what_a_node_came_back_short_of_is_said_once_not_at_each_retained_birth(
        tmp_path: Path):
    """The broker sends the retained birth again on each resubscription (the console's
    reconnect, a broker restart) and to a restarted console: each said "came back short" again,
    kept in the store, for every such node (a birth storm at 16,384 nodes)."""
    db = tmp_path / "history.db"
    session = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    await session.open_store(db)
    _session, fleet = _two_nodes(session)
    _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    _born(session, fleet, "gpu0001", 2)  # the same retained birth, sent again
    _run(session, fleet)
    said = [ln.text for ln in session.log.lines() if "came back short" in ln.text]
    assert len(said) == 1, said
    await session.close()
    again = ConsoleSession(CLUSTER, clock=session.clock, ingest=Ingest(CLUSTER),
                           follow_up=False)
    await again.open_store(db)
    _born(again, fleet, "gpu0001", 2)
    _run(again, fleet)
    assert again.state.nodes["gpu0001"].reasons == ["G14", "N8"]
    await again.close()
    with sqlite3.connect(db) as con:
        kept = con.execute("SELECT COUNT(*) FROM events WHERE kind = 'inventory'").fetchone()
    assert kept == (1,)


def test_the_counts_read_against_the_fullest_inventory_the_node_had():
    """The node list, status and --json read "7/7" GPUs and all IB ports up of a node G14 and
    N8 fail for one GPU and one port it no longer has."""
    session, fleet = _two_nodes()
    _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    row = node_row(st, session.clock())
    assert (row.gpus, row.ib) == ("7/8", "7/8")
    (node,) = [n for n in fleet_summary(session.state, session.clock())["nodes"]
               if n["id"] == "gpu0001"]
    assert (node["gpus"], node["gpus_expected"], node["ib_ports_up"], node["ib_ports"]) == (
        7, 8, 7, 8)
    assert st.gpu_use().failed == 1  # the GPU it no longer has, counted failed in the totals
    # A console on the collector's digests reads it so too.
    now = session.clock()
    _, dig = digest_state(CLUSTER, codec.encode(make_digest(st, "shard-1", now)), now + 0.1)
    ds = dig.nodes["gpu0001"]
    assert (ds.gpus_present, ds.gpus_expected, ds.ib_ports) == (7, 8, 8)
    # Born again with all of it: 8/8 and every port.
    fresh = SynthFleet(2, session.clock)
    fleet.agents["gpu0001"].source = fresh.agents["gpu0001"].source
    _born(session, fleet, "gpu0001", 3)
    _run(session, fleet)
    row = node_row(st, session.clock())
    assert (row.gpus, row.ib, row.reasons) == ("8/8", "8", "")


def test_a_node_back_with_no_ib_port_at_all_counts_the_ports_it_had():
    """Every HCA gone (mlx5_core not loaded after the reboot): its birth lists no port, and
    the count fell back to its telemetry's none: IB "0", no port down, the fleet 8 ports
    fewer, beside eight N8s "(0 IB ports now, 8 before)"."""
    session, fleet = _two_nodes()
    fleet.src("gpu0001").ports = []
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    assert st.reasons == ["N8"] and st.birth is not None and st.birth.ib_ports == ()
    assert node_row(st, session.clock()).ib == "0/8"
    totals = fleet_summary(session.state, session.clock())["totals"]
    assert (totals["ib_ports"], totals["ib_ports_up"], totals["ib_ports_down"]) == (16, 8, 8)
    now = session.clock()
    _, dig = digest_state(CLUSTER, codec.encode(make_digest(st, "shard-1", now)), now + 0.1)
    ds = dig.nodes["gpu0001"]
    assert (ds.ib_ports, ds.port_use().down) == (8, 8)


def test_the_grid_cell_drawn_missing_for_a_lost_gpu_says_g14():
    """Counted against the 8 it had, the node's eighth cell is drawn missing (NVML renumbered
    the seven left 0-6): its line read only its rail's N8, and the G14 that drew it was on no
    cell's line (named by uuid, not by a cell's index)."""
    session, fleet = _two_nodes()
    _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    st = session.state.nodes["gpu0001"]
    now = session.clock()
    _, dig = digest_state(CLUSTER, codec.encode(make_digest(st, "shard-1", now)), now + 0.1)
    for node in (st, dig.nodes["gpu0001"]):
        assert gpu_cells(node)[7] == Cell.MISSING
        assert [f.rule for f in gpu_findings(node, 7)] == ["G14", "N8"]
        assert [f.rule for f in gpu_findings(node, 3)] == []


def test_the_incident_names_the_gpu_before_its_uuid_as_the_top_problems_do():
    """The overview's top problems read "G14 gpu3 not enumerated …, GPU-…" and the incident
    beside them "G14 GPU-…: gpu3 not enumerated", the gpu3 cut off at the panel's width."""
    session, fleet = _two_nodes()
    lost = _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    (inc,) = [i for i in incidents(session.state, session.log.lines()) if "gpu0001" in i.nodes]
    assert inc.title.startswith("gpu0001 failed: G14 gpu3 not enumerated since an earlier "
                                f"birth of the node (7 GPUs now, 8 before), {lost} (+1 more)"), (
        inc.title)


def test_the_reasons_column_names_the_gpu_before_its_uuid():
    """"G14 GPU-fabe…: gpu3 not enumerated": the uuid came before the gpu3 a reader looks for.
    The other findings read "rule component: text", the component by its name (gpu3,
    mlx5_ib7:1); --json keeps G14's ``str`` with the uuid first, as stored."""
    session, fleet = _two_nodes()
    lost = _lose_gpu3_and_a_port(fleet)
    _born(session, fleet, "gpu0001", 2)
    _run(session, fleet)
    row = node_row(session.state.nodes["gpu0001"], session.clock())
    said = ("G14 gpu3 not enumerated since an earlier birth of the node (7 GPUs now, 8 before), "
            f"{lost}; N8 mlx5_ib7:1: IB port not enumerated since an earlier birth of the node "
            "(7 IB ports now, 8 before)")
    assert row.reasons == said
    (problem,) = top_problems(session.state)[0]  # the overview's row of it
    assert problem.text == said


async def test_a_store_opened_after_the_births_keeps_the_link_rate_they_state(
        tmp_path: Path, monkeypatch):
    """An HDR (200 Gb/s) fleet whose agents state their rate: a console whose store opened
    after it heard their births (a slow disk past ``STORE_WAIT_S``, a store opened later) took
    N1's rate from the stored inventories, which kept none, and failed every port "200 Gb/s,
    not 400" until the next birth (a review of 33ebbde)."""
    from fleetdeck.agents.sim import node as sim_node

    monkeypatch.setattr(sim_node, "NDR_RATE_GBPS", 200.0)
    db = tmp_path / "history.db"
    first = ConsoleSession(CLUSTER, clock=Clock(), ingest=Ingest(CLUSTER), follow_up=False)
    await first.open_store(db)
    _session, fleet = _two_nodes(first)
    await first.close()
    again = ConsoleSession(CLUSTER, clock=first.clock, ingest=Ingest(CLUSTER), follow_up=False)
    _two_nodes(again)  # heard before its store is open
    await again.open_store(db)
    _run(again, fleet)
    st = again.state.nodes["gpu0001"]
    assert st.verdict.value == "ok" and not st.findings, st.findings
    await again.close()
    # A console restored before any birth: the stored rate, for telemetry heard without one.
    third = ConsoleSession(CLUSTER, clock=first.clock, ingest=Ingest(CLUSTER), follow_up=False)
    await third.open_store(db)
    assert third.state.nodes["gpu0001"].history.ib_rate == 200.0
    await third.close()
