"""The SQLite store: per-tick writes, queries, restore, retention, and kill -9 during writes."""

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import msgspec
import pytest

from fleetdeck.agents.source import EventDraft
from fleetdeck.agents.windows import ErrorWindows
from fleetdeck.console.audit import AuditRecord
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import EVENT_MEMORY, FleetState
from fleetdeck.console.store import Store, TickRows
from fleetdeck.protocol import codec
from fleetdeck.protocol.fast import JobOnNode
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import REPO, eventually, run_cli, spawn, stop_process
from tests.helpers import FakeNode


async def fill(store: Store, seconds: int = 130, node_id: str = "gpu0001"):
    node = FakeNode(node_id, t0=1_800_000_000.0)
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    for s in range(seconds):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        if s == 65:
            node.feed(ingest, node.agent._event(EventDraft("xid", "XID 79", component="gpu3")),
                      Kind.EVENT)
        if s == 70:
            node.feed(ingest, node.status(online=False), Kind.STATUS)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    return node, state


async def test_tick_writes_and_queries(tmp_path):
    store = await Store.open(tmp_path / "s.db")
    try:
        await fill(store)
        events = await store.events(0)
        assert [e["kind"] for e in events] == ["xid"]
        assert events[0]["component"] == "gpu3"
        trans = await store.transitions(0, ["gpu0001"])
        assert [(t["old"], t["new"]) for t in trans] == [(None, "ok"), ("ok", "offline")]
        gpus = await store.gpu_history("gpu0001", 0)
        minutes = sorted({r["minute"] for r in gpus})
        assert len(minutes) >= 1 and {r["gpu"] for r in gpus} == set(range(8))
        full = [r for r in gpus if r["samples"] >= 59]
        assert full and all(r["temp_max"] is not None for r in full)
        ports = await store.port_history("gpu0001", 0)
        assert {r["dev"] for r in ports} == {f"mlx5_ib{i}" for i in range(8)}
    finally:
        await store.close()


async def test_audit_rows_are_never_duplicated(tmp_path):
    store = await Store.open(tmp_path / "s.db")
    try:
        rec = AuditRecord(ts=time.time(), who="alice", what="drain", targets="gpu0001",
                          why="xid 79", outcome="requested", request_id="r1")
        store.audit(rec)
        store.audit(rec)  # e.g. a console restarted and re-sent its pending audit
        await fill(store, seconds=1)
        store.audit(rec)
        await store.write_tick(Ingest("test").take_batch(), [])
        rows = await store.audit_rows(0)
        assert [(r["request_id"], r["outcome"]) for r in rows] == [("r1", "requested")]
    finally:
        await store.close()


async def test_restore_brings_back_events(tmp_path):
    path = tmp_path / "s.db"
    store = await Store.open(path)
    await fill(store)
    await store.close()
    fresh = FleetState("test")
    store = await Store.open(path)
    t0 = time.perf_counter()
    restored = await store.restore(fresh)
    took = time.perf_counter() - t0
    await store.close()
    assert restored == 1 and fresh.events[0].kind == "xid"
    assert fresh.nodes["gpu0001"].changed_at > 0
    assert took < 2.0


async def test_a_restored_node_is_waiting_until_heard_and_its_row_follows_the_store(tmp_path):
    path = tmp_path / "s.db"
    store = await Store.open(path)
    node, _ = await fill(store, seconds=3)  # one row: new -> ok
    await store.close()
    fresh = FleetState("test")
    store = await Store.open(path)
    await store.restore(fresh)
    await store.close()
    st = fresh.nodes["gpu0001"]
    fresh.judge_fleet(node.now + 60)
    # Not heard since this console started, and it cannot hear the broker yet: not stale.
    assert st.verdict_shown == "waiting" and not st.stale
    assert fresh.take_transitions() == []
    fresh.start_hearing(node.now + 60)
    fresh.judge_fleet(node.now + 61)
    assert st.verdict_shown == "waiting"
    # Back as the store left it: no change, no row.
    ingest = Ingest(node.cluster)
    node.now += 61
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    fresh.apply(ingest.take_batch(), node.now)
    assert st.verdict_shown == "ok" and fresh.take_transitions() == []
    # Heard since, then silent: stale, from ok.
    fresh.judge_fleet(node.now + 30)
    assert [(t.old, t.new) for t in fresh.take_transitions()] == [("ok", "stale")]


async def test_a_born_node_has_no_row_until_its_first_sample(tmp_path):
    node = FakeNode()
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    state.apply(ingest.take_batch(), node.now)
    assert state.nodes["gpu0001"].verdict_shown == "waiting"
    assert state.take_transitions() == []
    node.feed(ingest, node.telemetry(advance=0.5), Kind.TELEMETRY)
    state.apply(ingest.take_batch(), node.now)
    assert [(t.old, t.new) for t in state.take_transitions()] == [(None, "ok")]


async def test_retention_purges_old_rows(tmp_path):
    store = await Store.open(tmp_path / "s.db", retention_days=1)
    try:
        await fill(store)
        await store.purge(1_800_000_000.0 + 3 * 86400)
        assert await store.events(0) == []
        assert await store.gpu_history("gpu0001", 0) == []
    finally:
        await store.close()


async def test_the_job_a_node_left_is_kept_latest_first_and_purged_with_the_rest(tmp_path):
    """``left_jobs``: each node's latest (two collectors on one store write the same leaving
    a tick apart, or an older one late), put back into a restarted console's state, and gone
    with the retention like the verdict rows it is read beside."""
    path = tmp_path / "s.db"
    store = await Store.open(path, retention_days=1)
    node, _ = await fill(store, seconds=3)
    now = node.now
    await store.write_rows(TickRows(left_jobs={"gpu0001": ("4104", now - 5)}))
    await store.write_rows(TickRows(left_jobs={"gpu0001": ("4099", now - 600)}))
    await store.close()
    fresh = FleetState("test")
    store = await Store.open(path, retention_days=1)
    await store.restore(fresh, now=now)
    assert fresh.nodes["gpu0001"].left_job == ("4104", now - 5)
    await store.purge(now + 2 * 86400)
    fresh = FleetState("test")
    await store.restore(fresh, now=now)
    assert "gpu0001" not in fresh.nodes
    async with store.db.execute("SELECT COUNT(*) FROM left_jobs") as cur:
        assert (await cur.fetchone())[0] == 0
    await store.close()


async def test_a_damaged_left_jobs_row_is_skipped_and_said_once(tmp_path, caplog):
    """A time that is not a number stopped the console from starting (``open_store`` raised);
    a job id the protocol's ``Id`` refuses went out in that node's every digest as its
    ``struck_job``, and consoles refuse such a digest whole. Each is skipped, and the restore
    says once how many."""
    path = tmp_path / "s.db"
    store = await Store.open(path, retention_days=1)
    names = ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005"]
    for name in names:
        node, _ = await fill(store, seconds=3, node_id=name)
    now = node.now
    await store.db.executemany("INSERT INTO left_jobs VALUES (?, ?, ?)", [
        ("gpu0001", "4104", now - 5),
        ("gpu0002", "4104", "yesterday"),
        ("gpu0003", "4104/step 2", now - 5),
        ("gpu0004", "x" * 65, now - 5),
        ("gpu0005", "4104", "inf")])
    await store.db.commit()
    await store.close()
    fresh = FleetState("test")
    store = await Store.open(path, retention_days=1)
    with caplog.at_level("WARNING", logger="fleetdeck.store"):
        await store.restore(fresh, now=now)
    await store.close()
    assert {n: fresh.nodes[n].left_job for n in names} == {
        "gpu0001": ("4104", now - 5), "gpu0002": None, "gpu0003": None, "gpu0004": None,
        "gpu0005": None}
    assert store.restore_skipped == {"left_jobs": 4}
    said = [r.getMessage() for r in caplog.records if r.name == "fleetdeck.store"]
    assert len(said) == 1 and "4 of left_jobs" in said[0], said


async def test_every_node_that_left_a_job_in_one_tick_is_kept(tmp_path):
    """A collector applies a whole round in one tick: every node of a job of over 5,000
    requeued elsewhere (or of several jobs ending together) leaves its job at once. The rows
    were cut to the event log's size, the oldest first, and a restarted console read a struck
    node among the cut as its own "no job on it" incident, its digest without the job it
    failed in (a review). One row a node, none cut."""
    node = FakeNode(t0=1_800_000_000.0)
    session = ConsoleSession(node.cluster, clock=lambda: node.now)
    await session.open_store(tmp_path / "s.db", collector=True)
    names = [f"gpu{i:04d}" for i in range(1, EVENT_MEMORY + 2)]

    def from_each(kind: Kind, msg) -> None:
        # The same message from each node: its node id is as long as theirs.
        payload = codec.encode(msg)
        for name in names:
            session.ingest.handle(topic_for(node.cluster, kind, name),
                                  payload.replace(b'"gpu0001"', f'"{name}"'.encode()), node.now)

    from_each(Kind.BIRTH, node.birth())
    from_each(Kind.STATUS, node.status())
    tel = node.telemetry()
    from_each(Kind.TELEMETRY, msgspec.structs.replace(tel, job=JobOnNode(id="4104")))
    session.tick()
    tel = node.telemetry()
    left_at = node.now
    from_each(Kind.TELEMETRY, tel)  # the job requeued elsewhere: its nodes name none
    session.tick()
    assert tel.job is None
    await session.close()
    fresh = FleetState(node.cluster)
    for name in names:  # known (their verdict rows; the struck ones' "ok -> failed")
        fresh.node(name)
    store = await Store.open(tmp_path / "s.db")
    await store.restore(fresh, now=node.now)
    await store.close()
    left = [name for name, st in fresh.nodes.items() if st.left_job == ("4104", left_at)]
    assert len(left) == len(names)


async def test_every_node_whose_verdict_changed_in_one_tick_is_written(tmp_path):
    """A collector's first tick at 16,384 nodes (or a fleet-wide change) makes a verdict row a
    node: they were cut to the event log's 5,000, the oldest first, and the nodes whose only
    row was cut were not known to a restarted console (a review)."""
    node = FakeNode(t0=1_800_000_000.0)
    session = ConsoleSession(node.cluster, clock=lambda: node.now)
    await session.open_store(tmp_path / "s.db", collector=True)
    names = [f"gpu{i:04d}" for i in range(1, EVENT_MEMORY + 2)]
    for kind, msg in ((Kind.BIRTH, node.birth()), (Kind.STATUS, node.status()),
                      (Kind.TELEMETRY, node.telemetry())):
        payload = codec.encode(msg)
        for name in names:
            session.ingest.handle(topic_for(node.cluster, kind, name),
                                  payload.replace(b'"gpu0001"', f'"{name}"'.encode()), node.now)
    session.tick()
    await session.close()
    fresh = FleetState(node.cluster)
    store = await Store.open(tmp_path / "s.db")
    await store.restore(fresh, now=node.now)
    await store.close()
    assert len(fresh.nodes) == len(names)


def test_the_jobs_left_held_while_the_store_fails_are_one_a_node_the_latest():
    """Ticks held while the store cannot be written are merged past ``STORE_QUEUE_TICKS``:
    the jobs nodes left were concatenated without end, a row per node each time it left one.
    Each node's latest is what the store keeps; held, it is all that is kept."""
    held = TickRows(left_jobs={"gpu0001": ("4104", 10.0), "gpu0002": ("4104", 10.0)})
    for t in range(11, 1000):
        held = TickRows(left_jobs={"gpu0001": (f"{t}", float(t))}).merged_after(held)
    assert held.left_jobs == {"gpu0001": ("999", 999.0), "gpu0002": ("4104", 10.0)}


WRITER = """
import asyncio, sys, time
sys.path.insert(0, sys.argv[2])
from fleetdeck.console.store import Store
from tests.store.test_store import fill
async def main():
    store = await Store.open(__import__('pathlib').Path(sys.argv[1]))
    print('open', flush=True)
    n = 0
    while True:
        await fill(store, seconds=30, node_id=f'gpu{n % 9000:04d}')
        n += 1
asyncio.run(main())
"""


def stored_verdicts(db, node: str | None = None) -> list[tuple[str | None, str]]:
    """(old, new) verdicts of ``node`` (default: every node) committed so far, oldest first;
    read beside the running writer (WAL lets a reader in while it writes)."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:
        return []  # not created yet
    try:
        if node is None:
            return con.execute("SELECT old, new FROM transitions ORDER BY id").fetchall()
        return con.execute("SELECT old, new FROM transitions WHERE node = ? ORDER BY id",
                           (node,)).fetchall()
    except sqlite3.OperationalError:
        return []  # no schema yet
    finally:
        con.close()


async def test_kill_9_during_writes_never_corrupts_the_store(tmp_path):
    path = tmp_path / "crash.db"
    committed = 0
    for attempt in range(3):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(REPO)],
                                stdout=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
        before = committed
        try:
            # This writer's first commit, however long a loaded machine takes to get there;
            # then land the kill at different points of the transactions that follow.
            await eventually(lambda n=before: len(stored_verdicts(path)) > n, 60, 0.02,
                             message=f"writer {attempt} to commit")
            await asyncio.sleep(0.1 + 0.37 * attempt)
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        con = sqlite3.connect(path)
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        committed = con.execute("SELECT COUNT(*) FROM transitions").fetchone()[0]
        con.close()
        assert committed > before  # what this writer committed survived its kill


DEADLINE_S = 60.0
"""Per step: processes starting and a collector ticking on a loaded machine, not a speed limit."""


async def test_collector_and_events_cli_against_a_live_fleet(mosquitto, tmp_path):
    url = str(mosquitto.url)
    db = tmp_path / "live.db"
    sim = spawn("sim", "--broker", url, "--cluster", "hist", "--nodes", "3",
                log=tmp_path / "sim.log")
    col = spawn("collect", "--broker", url, "--cluster", "hist", "--db", str(db),
                log=tmp_path / "collect.log")
    agent = None
    try:
        await eventually(lambda: all(stored_verdicts(db, f"gpu000{i}") for i in (1, 2, 3)),
                         DEADLINE_S, 0.2, message="the collector to store the sim's nodes")
        agent = spawn("agent", "--broker", url, "--cluster", "hist", "--node-id", "gpu0099",
                      log=tmp_path / "agent.log")
        await eventually(lambda: (None, "ok") in stored_verdicts(db, "gpu0099"), DEADLINE_S, 0.2,
                         message="gpu0099 stored as ok")
        os.kill(agent.pid, signal.SIGKILL)
        agent.wait()
        await eventually(lambda: stored_verdicts(db, "gpu0099")[-1][1] == "offline", DEADLINE_S,
                         0.2, message="gpu0099 stored offline after its kill")
    finally:
        if agent is not None:
            stop_process(agent)
        collector_exit = stop_process(col)
        stop_process(sim)  # always, even when the collector's exit is wrong
    assert collector_exit == 0
    # --kind verdict: every verdict row, a node's first 'new -> ok' too (left out otherwise).
    res = run_cli("events", "--db", str(db), "--since", "10m", "--kind", "verdict", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    gpu99 = [r["message"] for r in rows if r["node"] == "gpu0099" and r["kind"] == "verdict"]
    # Guaranteed order: new before ok (we waited for it), ok before the Last Will's offline (the
    # kill came after), offline last (the agent stayed dead). What a loaded machine may add in
    # between (a late sample seen as stale) is not this test's business.
    assert gpu99[0] == "new -> ok", gpu99
    assert gpu99[-1].endswith("-> offline (H2)"), gpu99
    assert sum(m.startswith("new ->") for m in gpu99) == 1, gpu99
    only = json.loads(run_cli("events", "--db", str(db), "--node", "gpu[0001-0002]",
                              "--json").stdout)
    assert {r["node"] for r in only} == {"gpu0001", "gpu0002"}
    table = run_cli("events", "--db", str(db), "--since", "1h")
    assert "gpu0099" in table.stdout and "offline" in table.stdout
    hist = run_cli("history", "gpu0001", "--db", str(db), "--metric", "temp")
    assert hist.returncode == 0


@pytest.mark.parametrize("since", ["yesterday", "5x"])
def test_bad_since_is_one_sentence(tmp_path, since):
    db = tmp_path / "x.db"
    sqlite3.connect(db).close()
    res = run_cli("events", "--db", str(db), "--since", since)
    assert res.returncode != 0 and "--since" in res.stderr and "Traceback" not in res.stderr


async def heard(path, node: FakeNode) -> tuple[Ingest, FleetState, Store]:
    """A collector's state and store that have heard ``node``'s birth and status."""
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    store = await Store.open(path)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    return ingest, state, store


async def restarted(path, node: FakeNode) -> tuple[Ingest, FleetState]:
    """A collector started again on ``path`` at ``node.now``, which has heard its birth."""
    fresh = FleetState("test")
    store = await Store.open(path)
    await store.restore(fresh, now=node.now)
    await store.close()
    fresh.start_hearing(node.now)
    ingest = Ingest(node.cluster)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    return ingest, fresh


async def replaying_pcie(path) -> tuple[FakeNode, FleetState]:
    """A collector on ``path`` that heard a node's GPU replay PCIe packets at 120/min for
    40 s (degraded, G11), then closed its store."""
    node = FakeNode(t0=1_800_000_000.0)
    node.sim.gpus[0].pcie_replay_per_min = 120.0
    ingest, state, store = await heard(path, node)
    for _ in range(40):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    await store.close()
    return node, state


async def test_a_restored_fault_still_there_writes_no_false_recovery(tmp_path):
    # A collector restart empties its rules' minute windows: a GPU still replaying PCIe
    # packets at 120/min reads ok until 31 replays are counted again. The store must not get
    # 'degraded -> ok' and 'ok -> degraded' 16 s later for a fault that never went away.
    path = tmp_path / "s.db"
    node, state = await replaying_pcie(path)
    assert state.nodes["gpu0001"].verdict_shown == "degraded"

    ingest, fresh = await restarted(path, node)
    written = []
    for s in range(260):
        if s == 90:
            node.sim.gpus[0].pcie_replay_per_min = 0.0  # repaired
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        fresh.apply(ingest.take_batch(), node.now)
        written += [(s, t.old, t.new) for t in fresh.take_transitions()]
    # Still replaying for 90 s: no row. Repaired at 90 s: the last minute holds no more than
    # 31 of them about 45 s later, and G11 holds a minute after that (``PCIE_HOLD_MS``).
    assert [(old, new) for _, old, new in written] == [("degraded", "ok")], written
    assert 185 <= written[0][0] <= 215


@pytest.mark.parametrize(("resumed", "agent_restarted"), [(False, False), (False, True),
                                                         (True, False)],
                         ids=["flapped", "flapped-agent-restarted", "flapped-then-resumed"])
async def test_a_restarted_collector_holds_a_flap_of_the_last_hour(tmp_path, resumed,
                                                                   agent_restarted):
    """A link that went down and came back 10 minutes before a collector restart: N2 holds the
    node failed for the hour. The restarted collector's windows were empty, so it reported the
    node ok once RESTORE_SETTLE_S was over (SRE drill); the store's minutes put them back,
    except those before the node was resumed (the repair N2 waits for was done)."""
    path = tmp_path / "s.db"
    node = FakeNode(t0=1_800_000_000.0)
    ingest, state, store = await heard(path, node)
    for s in range(180):
        # One flap, down and straight back up; resumed, it is in the resume's own minute.
        if s == (125 if resumed else 30):
            node.sim.ports[3].bump("link_downed", 1)
        if s == 150 and resumed:
            node.agent.windows.forget_ports()  # what the agent's own resume does (agents/agent.py)
            node.feed(ingest, node.agent._event(EventDraft(
                "drain", "resumed [alice]", data={"state": "none", "cmd_id": "c1"})),
                Kind.EVENT)
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    await store.close()
    if not resumed:
        assert state.nodes["gpu0001"].verdict_shown == "failed"

    node.now += 600  # ten minutes without a collector
    if agent_restarted:
        # Its hour (errors_1h) is gone with it: only the store's minutes can hold N2 now.
        node.agent.windows = ErrorWindows()
    ingest, fresh = await restarted(path, node)
    for _ in range(120):  # past RESTORE_SETTLE_S: the windows, not the hold, keep it failed
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        fresh.apply(ingest.take_batch(), node.now)
    st = fresh.nodes["gpu0001"]
    if resumed:
        assert not st.all_findings and st.verdict_shown == "ok"
        return
    assert st.verdict_shown == "failed", [f.text for f in st.all_findings]
    assert any(f.rule == "N2" and f.component == "mlx5_ib3:1" for f in st.all_findings)
    assert fresh.take_transitions() == []  # no 'failed -> ok' for a fault of the hour


async def test_a_resume_while_no_collector_ran_is_applied_when_its_event_arrives(tmp_path):
    """Flapped, then the collector stopped; the node was drained and resumed while none ran.
    The restarted collector put the flap's hour back from the store and never saw the status
    change that forgets it, so it held the node failed (N2) for the rest of the hour while
    `status` read it ok (fault audit). The re-sent "resumed" event forgets what came before."""
    path = tmp_path / "s.db"
    node = FakeNode(t0=1_800_000_000.0)
    ingest, state, store = await heard(path, node)
    for s in range(90):
        if s == 30:
            node.sim.ports[3].bump("link_downed", 1)
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    await store.close()
    assert state.nodes["gpu0001"].verdict_shown == "failed"

    node.now += 300  # no collector: drained and resumed meanwhile (the agent forgets its hour)
    node.agent.windows.forget_ports()
    resumed = node.agent._event(EventDraft("drain", "resumed [alice]",
                                           data={"state": "none", "cmd_id": "c1"}))
    node.now += 300
    ingest, fresh = await restarted(path, node)
    written = []
    for s in range(120):
        if s == 5:  # the console asks for the events it missed; the agent re-sends them
            node.feed(ingest, resumed, Kind.EVENT)
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        fresh.apply(ingest.take_batch(), node.now)
        written += [(s, t.old, t.new) for t in fresh.take_transitions()]
    st = fresh.nodes["gpu0001"]
    assert not st.all_findings and st.verdict_shown == "ok", [f.text for f in st.all_findings]
    # Written at once: the resume emptied the windows on purpose, no restore hold applies.
    assert [(old, new) for _, old, new in written] == [("failed", "ok")], written
    assert 5 <= written[0][0] <= 7


def test_a_late_resume_forgets_only_the_errors_before_it():
    from fleetdeck.console.health import NodeHistory

    h = NodeHistory()
    h.recall_port_minute("mlx5_ib3", 1000, symbol_errors=200, link_downed=1,
                         watched_from_ms=0)
    h.recall_port_minute("mlx5_ib3", 1010, symbol_errors=50, link_downed=0, watched_from_ms=0)
    assert h.forget_port_errors_before(1005 * 60_000)
    port = h.ports["mlx5_ib3"]
    assert port.last_fatal_ms == {} and port.symbol_hour.total == 50
    assert not h.forget_port_errors_before(1005 * 60_000)  # nothing older left


async def test_a_restored_fault_keeps_the_time_it_began(tmp_path):
    # A console started later judged the node "waiting" (ok for want of data) before its
    # first sample, then degraded again: its verdict read as changed at this console's start,
    # and an incident hours old said AGE 8s (an SRE drill).
    path = tmp_path / "s.db"
    node, state = await replaying_pcie(path)
    began = state.nodes["gpu0001"].changed_at
    assert state.nodes["gpu0001"].verdict_shown == "degraded" and began < node.now - 5

    node.now += 3600
    ingest, fresh = await restarted(path, node)
    fresh.apply(ingest.take_batch(), node.now)
    fresh.judge_fleet(node.now)
    st = fresh.nodes["gpu0001"]
    assert st.verdict_shown == "waiting" and st.changed_at == pytest.approx(began, abs=1)
    for _ in range(40):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        fresh.apply(ingest.take_batch(), node.now)
    assert st.verdict_shown == "degraded"
    assert st.changed_at == pytest.approx(began, abs=1)
    assert [i.since for i in incidents(fresh)] == [pytest.approx(began, abs=1)]


def heard_before_its_store(node: FakeNode) -> tuple[Ingest, FleetState, list]:
    """A console started at ``node.now`` that heard the node's birth, status and a sample
    before its store opened, and the transitions it holds for the store."""
    ingest = Ingest(node.cluster)
    fresh = FleetState(node.cluster, ingest.malformed)
    fresh.start_hearing(node.now)
    node.feed(ingest, node.birth(), Kind.BIRTH)
    node.feed(ingest, node.status(), Kind.STATUS)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    fresh.apply(ingest.take_batch(), node.now)
    return ingest, fresh, fresh.take_transitions()


async def restored_change(path, now: float) -> float | None:
    """When gpu0001's verdict changed, as a console restored from ``path`` at ``now`` says."""
    again = FleetState("test")
    store = await Store.open(path)
    await store.restore(again, now=now)
    await store.close()
    return again.nodes["gpu0001"].changed_at


async def test_a_fault_heard_before_the_store_opened_keeps_the_time_it_began(tmp_path):
    # A console restarted on a store that opened after its first samples judged a node failed
    # half an hour ago "new -> failed" at its start: AGE 20s, and a row that dated the fault
    # from that start at every restore after (a 3 a.m. drive).
    path = tmp_path / "s.db"
    node = FakeNode(t0=1_800_000_000.0)
    node.sim.gpus[2].present = False
    ingest, state, store = await heard(path, node)
    for _ in range(5):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    await store.close()
    began = state.nodes["gpu0001"].changed_at
    assert state.nodes["gpu0001"].verdict_shown == "failed"

    node.now += 1800
    ingest, fresh, held = heard_before_its_store(node)
    st = fresh.nodes["gpu0001"]
    assert st.verdict_shown == "failed" and st.changed_at > began + 1000
    assert [(t.old, t.new.value) for t in held] == [(None, "failed")]

    store = await Store.open(path)
    await store.restore(fresh, now=node.now)
    assert st.changed_at == pytest.approx(began, abs=1)
    assert [i.since for i in incidents(fresh)] == [pytest.approx(began, abs=1)]
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    batch = ingest.take_batch()
    fresh.apply(batch, node.now)
    await store.write_tick(batch, held + fresh.take_transitions())
    async with store.db.execute("SELECT old, new FROM transitions") as cur:
        assert await cur.fetchall() == [(None, "failed")]  # the first console's row alone
    await store.close()
    assert await restored_change(path, node.now + 60) == pytest.approx(began, abs=1)


async def test_a_fault_back_from_a_spell_heard_before_the_store_opened_keeps_its_time(tmp_path):
    # As above, with the fault's node offline a while and back failed before the restart: the
    # store's latest row is 'offline -> failed', restored as the fault's first time. Its node,
    # heard before the store opened, wrote 'new -> failed' at the restart, which dated the
    # fault from that restart at every restore after.
    path = tmp_path / "s.db"
    node = FakeNode(t0=1_800_000_000.0)
    node.sim.gpus[2].present = False
    ingest, state, store = await heard(path, node)

    async def tick(ingest: Ingest, state: FleetState, store: Store, held=()) -> None:
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, [*held, *state.take_transitions()])

    for _ in range(5):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        await tick(ingest, state, store)
    began = state.nodes["gpu0001"].changed_at
    node.feed(ingest, node.status(online=False), Kind.STATUS)
    for _ in range(3):  # offline is written once it has held a moment
        await tick(ingest, state, store)
        node.now += 5
    node.now += 120
    node.feed(ingest, node.status(), Kind.STATUS)
    for _ in range(5):
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        await tick(ingest, state, store)
    await store.close()
    assert state.nodes["gpu0001"].verdict_shown == "failed"
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT old, new FROM transitions ORDER BY ts").fetchall() == [
            (None, "failed"), ("failed", "offline"), ("offline", "failed")]

    node.now += 1800
    ingest, fresh, held = heard_before_its_store(node)
    store = await Store.open(path)
    await store.restore(fresh, now=node.now)
    assert fresh.nodes["gpu0001"].changed_at == pytest.approx(began, abs=1)
    node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
    await tick(ingest, fresh, store, held)
    await store.close()
    assert await restored_change(path, node.now + 60) == pytest.approx(began, abs=1)


async def test_a_fault_that_cleared_before_a_restart_recurs_after_it(tmp_path):
    """An XID 48 on gpu0 cleared (a reset), the console restarted, the same DBE back 40 s
    later: the restarted console read it as a first failure, "reset gpu0 or reboot", the
    repair that had not held, where one running on said "the same fault came back" (a review:
    ``NodeState.cleared`` was not kept)."""
    from msgspec.structs import replace

    from fleetdeck.console.health import Verdict
    from fleetdeck.console.judgements import recommended_action
    from fleetdeck.protocol.fast import XidSeen

    node = FakeNode(t0=1_800_000_000.0)

    def dbe(session: ConsoleSession) -> None:
        t = node.telemetry()
        gpus = list(t.gpus)
        gpus[0] = replace(gpus[0], xids=[XidSeen(code=48, ts=t.ts - 1_000)], xid_last=48,
                          xid_last_ts=t.ts - 1_000)
        node.feed(session.ingest, replace(t, gpus=gpus), Kind.TELEMETRY)
        session.tick()

    def healthy(session: ConsoleSession, samples: int) -> None:
        for _ in range(samples):
            node.feed(session.ingest, node.telemetry(), Kind.TELEMETRY)
            session.tick()

    first = ConsoleSession(node.cluster, clock=lambda: node.now)
    await first.open_store(tmp_path / "s.db", collector=True)
    node.feed(first.ingest, node.birth(), Kind.BIRTH)
    node.feed(first.ingest, node.status(), Kind.STATUS)
    healthy(first, 3)
    dbe(first)
    assert first.state.nodes["gpu0001"].verdict is Verdict.FAILED
    healthy(first, 3)  # repaired
    st = first.state.nodes["gpu0001"]
    assert st.verdict is Verdict.OK and st.cleared is not None
    await first.close()

    node.now += 30
    second = ConsoleSession(node.cluster, clock=lambda: node.now)
    await second.open_store(tmp_path / "s.db", collector=True)
    second.state.start_hearing(node.now)
    node.feed(second.ingest, node.birth(), Kind.BIRTH)
    node.feed(second.ingest, node.status(), Kind.STATUS)
    healthy(second, 3)
    dbe(second)
    st = second.state.nodes["gpu0001"]
    said = recommended_action(st, second.state)
    await second.close()
    assert st.verdict is Verdict.FAILED
    assert "the same fault (G2 gpu0) came back" in said and "replace gpu0 (RMA a GPU)" in said, said


async def test_a_damaged_cleared_faults_row_is_skipped_and_held_rows_keep_the_latest(tmp_path):
    """``cleared_faults`` rows are validated like ``left_jobs``: one edited by hand or written
    by another version must not put bad state into the console; rows held while the store
    fails keep each node's latest clearing."""
    held = TickRows(cleared={"gpu0001": (10.0, frozenset({"G2 gpu0"}))})
    held = TickRows(cleared={"gpu0001": (20.0, frozenset({"N3 mlx5_0:1"}))}).merged_after(held)
    assert held.cleared == {"gpu0001": (20.0, frozenset({"N3 mlx5_0:1"}))}
    store = await Store.open(tmp_path / "s.db")
    now = time.time()
    await store.write_rows(TickRows(cleared={"gpu0001": (now - 5, frozenset({"G2 gpu0"}))}))
    await store.db.executemany("INSERT INTO cleared_faults VALUES (?, ?, ?)", [
        ("gpu0002", now, "not json"), ("gpu0003", "soon", "[]"), ("gpu0004", now, "[1]")])
    await store.db.commit()
    fresh = FleetState("test")
    for name in ("gpu0001", "gpu0002", "gpu0003", "gpu0004"):
        fresh.node(name)
    await store.restore(fresh, now=now)
    await store.close()
    assert fresh.nodes["gpu0001"].cleared == (now - 5, frozenset({"G2 gpu0"}))
    assert all(fresh.nodes[n].cleared is None for n in ("gpu0002", "gpu0003", "gpu0004"))
    assert store.restore_skipped == {"cleared_faults": 3}
