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
