"""Interruption accounting judged from the recorded fixtures: each job interruption once, with
the cause the fleet showed (even when the job failed a sample before its node's telemetry said
why), the GPU-hours since its checkpoint; and ``fleetdeck report`` over a store."""

import json

import pytest

from fleetdeck.console.recording import RecordingReader
from fleetdeck.console.session import ConsoleSession
from tests.conftest import REPO, run_cli

FIXTURES = REPO / "fixtures"


def interruptions(name: str) -> list[dict]:
    out = run_cli("replay", str(FIXTURES / f"{name}.jsonl.gz"), "--headless", "--summary-json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["interruptions"]


@pytest.mark.parametrize(("fixture", "cause", "nodes"), [
    ("link_down", "network", ["gpu0002"]),
    ("xid79", "gpu", ["gpu0006"]),
    ("agent_vs_node_death", "host", ["gpu0007"]),
])
def test_each_interruption_once_with_its_cause(fixture, cause, nodes):
    (it,) = interruptions(fixture)
    assert it["cause"] == cause and it["nodes"] == nodes
    assert it["lost_gpu_hours"] > 0 and it["detail"].startswith("R -> NF")


def test_a_switch_failure_is_a_network_interruption():
    (it,) = interruptions("leaf_switch")
    assert it["cause"] == "network"
    assert set(it["nodes"]) <= {f"gpu{i:04d}" for i in range(9, 17)}


@pytest.mark.parametrize("fixture", ["healthy", "drain", "thermal"])
def test_no_interruption_where_none_happened(fixture):
    assert interruptions(fixture) == []


async def played_into_a_store(db) -> tuple[ConsoleSession, float]:
    """link_down.jsonl.gz through a console with its store at ``db``, ticked every 0.5 s of
    the recording; the session (still open) and the recording's last tick."""
    reader = RecordingReader(FIXTURES / "link_down.jsonl.gz")
    clock = [reader.header.started]
    session = ConsoleSession(reader.header.cluster, clock=lambda: clock[0], follow_up=False)
    await session.open_store(db)
    next_tick = clock[0] + 0.5
    for msg in reader.messages():
        while msg.t > next_tick:
            clock[0] = next_tick
            session.tick(next_tick)
            await session.flush()
            next_tick += 0.5
        session.ingest.handle(msg.topic, msg.payload, msg.t)
    session.tick(next_tick)
    return session, next_tick


async def test_report_over_a_store(tmp_path):
    session, _ = await played_into_a_store(tmp_path / "store.db")
    await session.close()
    out = run_cli("report", "--db", str(tmp_path / "store.db"), "--since", "3650d", "--json")
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["interruptions"] == 1
    assert rep["by_cause"]["network"]["count"] == 1
    assert rep["lost_gpu_hours"] > 0 and rep["job_gpu_hours"] > rep["lost_gpu_hours"]
    assert 0 < rep["effective_training_time_ratio"] < 1
    text = run_cli("report", "--db", str(tmp_path / "store.db"), "--since", "3650d")
    assert text.returncode == 0 and "network" in text.stdout


async def test_a_restarted_console_puts_its_verdict_changes_and_interruptions_back(tmp_path):
    """A console restarted on its store showed only the agents' events: the verdict changes
    and the job's interruption it had logged were in the store, not in its events view, and an
    incident said "no events about its nodes" (a drill)."""
    session, last = await played_into_a_store(tmp_path / "store.db")
    kinds = ("verdict", "interruption")
    before = [(x.kind, x.text) for x in session.log.lines() if x.kind in kinds]
    await session.close()
    assert any(k == "interruption" for k, _ in before) and any(k == "verdict" for k, _ in before)

    again = ConsoleSession(session.cluster, clock=lambda: last + 60, follow_up=False)
    await again.open_store(tmp_path / "store.db")
    try:
        lines = list(again.log.lines())
        after = [(x.kind, x.text) for x in lines if x.kind in kinds]
        assert after == before
        assert [x.ts for x in lines] == sorted(x.ts for x in lines)  # one timeline, in order
        assert any(x.kind not in kinds for x in lines)  # the agents' events too
    finally:
        await again.close()


async def test_rows_of_an_older_store_read_without_slurms_placeholder(tmp_path):
    """Rows written before placeholder reasons were dropped say "R -> PD (None)": the store
    reads them as new rows word them, "R -> PD (PD)"; a real reason is left as it is."""
    import sqlite3

    from fleetdeck.console.store import Store

    path = tmp_path / "store.db"
    store = await Store.open(path)
    await store.close()
    with sqlite3.connect(path) as db:
        db.executemany("INSERT INTO interruptions VALUES (?,?,?,?,?,?,?)", [
            ("41", 100.0, "gpu", "gpu0006", 8, 1.0, "R -> PD (None)"),
            ("42", 101.0, "host", "gpu0007", 8, 1.0, "R -> NF ((null))"),
            ("43", 102.0, "network", "gpu0002", 8, 1.0, "R -> NF (NodeFail)"),
        ])
    store = await Store.open(path)
    try:
        rows = await store.interruptions(0)
    finally:
        await store.close()
    assert [r["detail"] for r in rows] == ["R -> PD (PD)", "R -> NF (NF)", "R -> NF (NodeFail)"]
