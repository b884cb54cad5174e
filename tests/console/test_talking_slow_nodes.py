"""A node on the shipped ``--interval 10`` (docs/real-nodes.md) whose keyframe this reader never
got (a ``viewer``, whose keyframe asks the ACL drops) talks: its deltas are heard. The judge
skipped it while it stayed ``waiting`` with nothing else changed, so its ``awaiting`` was never
read again: ``talks`` stayed False until the node went stale (30 s), and ``status`` as the
viewer stopped its watch at 21.6 s (its first-sample allowance), read the node "sent no
telemetry in the 21.6 s watch" and exited 2 where it should watch on for the periodic keyframe
(``keyframe_due``; a newcomer's run of the production set-up on loopback)."""

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.cli.status import keyframe_due
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for

CLUSTER = "slow"
NODE = "gpu0001"
INTERVAL_S = 10.0


def test_a_node_on_a_10_s_interval_heard_talking_is_due_its_keyframe():
    now = [1_000_000.0]
    agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=SimNode(NODE, seed=1),
                      url=BrokerURL("127.0.0.1", 1), interval_s=INTERVAL_S,
                      clock=lambda: now[0])
    agent.bd_seq = agent._next_bd_seq()
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)

    def feed(kind: Kind, payload: bytes) -> None:
        ingest.handle(topic_for(CLUSTER, kind, NODE), payload, now[0])

    agent.telemetry_payload()  # the keyframe sent before this reader came; the next in 30 s
    start = now[0]
    feed(Kind.BIRTH, codec.encode(agent.birth()))
    feed(Kind.STATUS, codec.encode(agent.status(True)))
    state.apply(ingest.take_batch(), now[0])
    # Ticks of 0.5 s, as status's watch; a delta every 10 s from 1.4 s in.
    for tick in range(1, 45):
        now[0] = start + tick * 0.5
        if tick in (3, 23, 43):
            feed(Kind.TELEMETRY, agent.telemetry_payload())
        state.apply(ingest.take_batch(), now[0])
    st = state.nodes[NODE]
    assert st.sample is None  # no keyframe: nothing read yet
    assert st.talks and st.verdict_shown == "waiting", (st.awaiting, st.verdict_shown)
    assert keyframe_due(state, now[0] - start) == [NODE]


def test_a_nodes_first_delta_without_its_keyframe_is_read_as_talk_in_its_own_tick():
    """The incremental pass judges it at once: it was left to the full pass up to
    ``FULL_JUDGE_EVERY_S`` later, and read "sent no telemetry" for 8.5 s after its delta."""
    now = [1_000_000.0]
    agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=SimNode(NODE, seed=1),
                      url=BrokerURL("127.0.0.1", 1), interval_s=INTERVAL_S,
                      clock=lambda: now[0])
    agent.bd_seq = agent._next_bd_seq()
    ingest = Ingest(CLUSTER)
    state = FleetState(CLUSTER, ingest.malformed)

    def feed(kind: Kind, payload: bytes) -> None:
        ingest.handle(topic_for(CLUSTER, kind, NODE), payload, now[0])

    agent.telemetry_payload()  # its keyframe went before this reader came
    start = now[0]
    feed(Kind.BIRTH, codec.encode(agent.birth()))
    feed(Kind.STATUS, codec.encode(agent.status(True)))
    state.apply(ingest.take_batch(), now[0])
    seen = []
    for tick in range(1, 8):
        now[0] = start + tick * 0.5
        if tick == 3:
            feed(Kind.TELEMETRY, agent.telemetry_payload())
        state.apply(ingest.take_batch(), now[0])
        seen.append(state.nodes[NODE].talks)
    assert seen == [False, False, True, True, True, True, True]
    rev = state.nodes[NODE].revision
    now[0] += 0.5
    feed(Kind.TELEMETRY, agent.telemetry_payload())
    state.apply(ingest.take_batch(), now[0])
    assert state.nodes[NODE].revision > rev  # its row's "N deltas" is drawn again
