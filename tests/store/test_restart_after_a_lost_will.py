"""A collector restarted after its broker lost what it kept: Mosquitto SIGKILLed before its
autosave forgets a dead agent's retained birth and Last Will, so the new collector hears
nothing of that node. It wrote "offline -> stale (H1) no telemetry heard from it yet" at its
own start, a change that never happened, dated when it looked (a failure drill, 256 nodes:
three such rows in `fleetdeck events`). Offline is what the store last knew, and stays, until
the node is heard: its telemetry alone brings it back (a status the broker dropped)."""

import pytest

from fleetdeck.console.health import Verdict
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from tests.tui.fleet import CLUSTER, Clock, SynthFleet


async def _offline_in_the_store(tmp_path, clock, fleet):
    """A first collector that saw gpu0003's Last Will, killed: its store says offline."""
    db = tmp_path / "c.db"
    alive = [n for n in fleet.names if n != "gpu0003"]
    first = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await first.open_store(db)
    fleet.birth(first.ingest)
    for _ in range(3):
        clock.advance(1.0)
        fleet.telemetry(first.ingest)
        first.tick()
    will = fleet.agents["gpu0003"].status(online=False)
    first.ingest.handle(topic_for(CLUSTER, Kind.STATUS, "gpu0003"), codec.encode(will), clock())
    for _ in range(4):
        clock.advance(1.0)
        fleet.telemetry(first.ingest, names=alive)
        first.tick()
    assert first.state.nodes["gpu0003"].verdict is Verdict.OFFLINE
    await first.flush()
    await first.store.db.close()  # killed: nothing more written
    clock.advance(60.0)
    second = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    await second.open_store(db)
    second.state.start_hearing(clock())
    return second, alive


async def _rows_since(session, since):
    await session.flush()
    async with session.store.db.execute(
            "SELECT old, new FROM transitions WHERE node = 'gpu0003' AND ts >= ?",
            (since,)) as cur:
        return [tuple(r) for r in await cur.fetchall()]


async def test_a_node_offline_in_the_store_and_unheard_since_stays_offline(tmp_path):
    clock = Clock()
    fleet = SynthFleet(4, clock, leaves=1)
    second, alive = await _offline_in_the_store(tmp_path, clock, fleet)
    restarted_at = clock()
    fleet.birth(second.ingest, names=alive)  # the broker kept nothing of gpu0003
    for _ in range(12):
        clock.advance(1.0)
        fleet.telemetry(second.ingest, names=alive)
        second.tick()
    rows = await _rows_since(second, restarted_at)
    st = second.state.nodes["gpu0003"]
    await second.close()
    assert rows == [], rows
    assert st.verdict is Verdict.OFFLINE, st.verdict


@pytest.mark.parametrize("born", [False, True], ids=["no-birth", "born-again"])
async def test_a_node_offline_in_the_store_comes_back_by_its_telemetry_alone(tmp_path, born):
    """Its agent is back and samples every second, but no status of it reached this
    collector (the broker dropped it in the connect burst; a node born by rebirth): it read
    offline, "agent offline (Last Will)", its 8 GPUs counted out, until its agent
    reconnected (a review)."""
    clock = Clock()
    fleet = SynthFleet(4, clock, leaves=1)
    second, alive = await _offline_in_the_store(tmp_path, clock, fleet)
    restarted_at = clock()
    fleet.birth(second.ingest, names=alive)
    if born:
        birth = fleet.agents["gpu0003"].birth()
        second.ingest.handle(topic_for(CLUSTER, Kind.BIRTH, "gpu0003"), codec.encode(birth),
                             clock())
    for _ in range(12):
        clock.advance(1.0)
        fleet.telemetry(second.ingest)
        second.tick()
    rows = await _rows_since(second, restarted_at)
    st = second.state.nodes["gpu0003"]
    use = st.gpu_use()
    await second.close()
    assert st.verdict is Verdict.OK, (st.verdict, st.online)
    assert (use.free, use.out) == (8, 0), use
    assert rows == [("offline", "ok")], rows
