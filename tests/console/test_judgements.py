"""Fleet-wide judgements live in the domain (console/judgements.py) and reach the JSON."""

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.judgements import suspect_switches
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from tests.tui.fleet import (
    CLUSTER,
    Clock,
    SynthFleet,
    job_status,
    port_down,
    publish_job,
    throttled,
)


def session_with(faults, leaves: int = 1, jobs=()) -> ConsoleSession:
    clock = Clock()
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, clock=clock, ingest=ingest, follow_up=False)
    fleet = SynthFleet(8, clock, leaves=leaves)
    fleet.birth(ingest)
    for job in jobs:
        publish_job(ingest, job(clock), clock)
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(ingest, faults=faults)
        session.tick()
    return session


def test_one_rail_failing_on_three_nodes_names_that_switch():
    down = port_down("mlx5_ib2")
    session = session_with({"gpu0001": down, "gpu0004": down, "gpu0006": down})
    (sw,) = suspect_switches(session.state)
    assert sw.switch == "leaf00-r2"
    assert sw.nodes == ["gpu0001", "gpu0004", "gpu0006"]
    assert sw.ports == ["gpu0001:mlx5_ib2:1", "gpu0004:mlx5_ib2:1", "gpu0006:mlx5_ib2:1"]


def test_three_unrelated_cables_on_three_rails_blame_no_switch():
    session = session_with({"gpu0001": port_down("mlx5_ib1"), "gpu0004": port_down("mlx5_ib3"),
                            "gpu0006": port_down("mlx5_ib5")})
    assert suspect_switches(session.state) == []
    out = fleet_summary(session.state, session.clock())
    assert out["suspect_switches"] == []
    assert {n["id"] for n in out["nodes"] if n["verdict"] == "failed"} == {
        "gpu0001", "gpu0004", "gpu0006"}


def test_status_json_carries_switches_jobs_and_stragglers():
    down = port_down("mlx5_ib2")
    session = session_with(
        {"gpu0001": down, "gpu0004": down, "gpu0006": down, "gpu0003": throttled(3)},
        jobs=[lambda c: job_status("41", ["gpu0002", "gpu0003"], c, slowest_node="gpu0003")])
    out = fleet_summary(session.state, session.clock())
    assert [s["switch"] for s in out["suspect_switches"]] == ["leaf00-r2"]
    (job,) = out["jobs"]
    assert job["job_id"] == "41" and job["progress"] == 0.5
    assert job["straggler"]["node"] == "gpu0003"
    assert job["straggler"]["slower_pct"] == 50.0
    assert job["straggler"]["cause"].startswith("throttled GPU")
