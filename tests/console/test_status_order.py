"""``status`` lists equal incidents by key, not by when its watch first heard each node: two
runs on one fleet, whose samples came in other orders, printed the same incidents in other
orders (their ``since`` is the arrival of each node's first sample in the watch)."""

import io

from rich.console import Console

from fleetdeck.brokerurl import parse_broker_url
from fleetdeck.console.cli.status import _summary, render_summary
from fleetdeck.console.contexts import cluster_row
from fleetdeck.console.incidents import incidents
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, port_down, publish_job

NAMES = ["gpu0001", "gpu0002", "gpu0003", "gpu0004", "gpu0005"]
BAD = NAMES[:4]


def watched(order: list[str]) -> ConsoleSession:
    """A watch that hears each node's first sample in ``order``, a tick apart."""
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(len(NAMES), clock)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=clock)
    fleet.birth(ingest)
    publish_job(ingest, job_status("9", ["gpu0001"], clock), clock)
    publish_job(ingest, job_status("10", ["gpu0002"], clock), clock)
    faults = {n: port_down() for n in BAD}
    for name in order:
        clock.advance(0.3)
        fleet.telemetry(ingest, names=[name], faults=faults)
        session.tick()
    for _ in range(3):
        clock.advance(1)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    return session


def test_status_lists_equal_incidents_by_key_whatever_order_the_nodes_were_heard_in():
    url = parse_broker_url("mqtt://127.0.0.1:1")
    runs = [watched(NAMES), watched(NAMES[::-1])]
    # The console keeps the oldest first: there, ``since`` is when it saw each go bad.
    assert [i.key for i in incidents(runs[1].state)][:2] == ["node:gpu0002", "node:gpu0001"]
    outs, texts = [], []
    for session in runs:
        out = _summary(session, url, 3.5)
        buf = io.StringIO()
        render_summary(out, Console(file=buf, width=200))
        outs.append([i["key"] for i in out["incidents"]])
        texts.append(buf.getvalue())
    # The two in a job (losing work) first, then the idle ones, each pair by key.
    assert outs[0] == outs[1] == ["node:gpu0001", "node:gpu0002", "node:gpu0003",
                                  "node:gpu0004"]
    assert texts[0] == texts[1]
    assert texts[0].index("error gpu0001 failed") < texts[0].index("error gpu0002 failed")
    # The clusters table's top incident (status --cluster a,b) too.
    assert {cluster_row(s.state, dated=False).top_incident for s in runs} == {
        "gpu0001 failed: N1 mlx5_ib2:1: DOWN/Polling; in job 9"}
