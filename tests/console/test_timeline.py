"""Verdict changes reach the timeline the operator reads (events view, incidents), not only the
store: a node whose agent died was missing from the events view (found in a UX audit)."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

T0 = 1_000_000.0


def test_a_node_going_offline_and_back_is_in_the_timeline() -> None:
    now = [T0]
    ingest = Ingest("test")
    session = ConsoleSession("test", ingest=ingest, follow_up=False, clock=lambda: now[0])
    nodes = [FakeNode(f"gpu{i:04d}", t0=T0) for i in range(3)]
    for node in nodes:
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
        node.feed(ingest, node.telemetry(advance=0.0), Kind.TELEMETRY)
    session.tick(T0)
    assert not [line for line in session.log.lines() if line.kind == "verdict"]  # first looks
    dead = nodes[1]
    dead.feed(ingest, dead.status().model_copy(update={"online": False}), Kind.STATUS)
    now[0] = T0 + 1
    session.tick()
    # A will younger than WILL_BURST_S may be a shutting-down broker's: not logged yet.
    assert not [line for line in session.log.lines() if line.kind == "verdict"]
    now[0] = T0 + 2.5
    session.tick()
    (line,) = [line for line in session.log.lines() if line.kind == "verdict"]
    assert line.source == "gpu0001" and line.nodes == ("gpu0001",)
    assert line.severity == "error" and line.text.startswith("ok -> offline")
    assert "H2" in line.text
    dead.feed(ingest, dead.status(), Kind.STATUS)
    dead.feed(ingest, dead.telemetry(), Kind.TELEMETRY)
    now[0] = T0 + 3.5
    session.tick()
    back = [line for line in session.log.lines()
            if line.kind == "verdict" and line.source == "gpu0001"][-1]
    assert back.text == "offline -> ok" and back.severity == "info"


def test_the_kept_timeline_is_nothing_the_gcs_sweep_walks() -> None:
    """5,000 lines are kept: as GC-tracked objects they were 40,000 references the console's
    periodic sweep followed every minute (docs/performance.md, "The sweep walks the state
    alone"). A line and its (seq, line) entry leave the GC's view once a collection looked."""
    import gc

    from fleetdeck.console.eventlog import EventLine, EventLog

    log = EventLog()
    for i in range(100):
        log.add(EventLine(float(i), f"gpu{i:04d}", "xid", "error", "gpu3: XID 79",
                          (f"gpu{i:04d}",)))
    gc.collect()
    assert not any(gc.is_tracked(line) for _seq, line in log)
    assert not any(gc.is_tracked(entry) for entry in log)
