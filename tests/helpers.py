"""Builders for protocol messages in tests (real models, real codec)."""

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import codec
from fleetdeck.protocol.fast import Telemetry
from fleetdeck.protocol.messages import Birth, Status
from fleetdeck.protocol.topics import Kind, topic_for


class FakeNode:
    """A real NodeAgent + SimNode that produces messages without a broker."""

    def __init__(self, node_id: str = "gpu0001", cluster: str = "test", t0: float = 1_000_000.0):
        self.now = t0
        self.sim = SimNode(node_id, seed=1)
        self.agent = NodeAgent(cluster=cluster, node_id=node_id, source=self.sim,
                               url=BrokerURL("127.0.0.1", 1), clock=lambda: self.now)
        self.agent.bd_seq = self.agent._next_bd_seq()
        self.cluster = cluster
        self.node_id = node_id

    def topic(self, kind: Kind) -> str:
        return topic_for(self.cluster, kind, self.node_id)

    def birth(self) -> Birth:
        return self.agent.birth()

    def status(self, online: bool = True) -> Status:
        return self.agent.status(online)

    def telemetry(self, advance: float = 1.0) -> Telemetry:
        self.now += advance
        return self.agent.telemetry()

    def feed(self, ingest, msg, kind: Kind, rx: float | None = None) -> None:
        ingest.handle(self.topic(kind), codec.encode(msg), self.now if rx is None else rx)
