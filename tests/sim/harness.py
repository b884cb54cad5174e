"""Drive the simulated world on a simulated clock, through real NodeAgents and the real codec.

Every telemetry message is encoded and decoded strictly (as the console would), then judged by
the console's own health rules, so these tests check what an operator would see.
"""

from dataclasses import dataclass, field

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.sim.scheduler import SimJob
from fleetdeck.agents.sim.spec import Action, parse_action
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.agents.source import EventDraft
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.health import Finding, NodeHistory, Verdict, combine, evaluate
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Birth, JobStatus, Telemetry

EPOCH_MS = 1_767_225_600_000


def act(kind: str, at: float = 0, **params: object) -> Action:
    return parse_action({"fault": kind, "at": at, **params})


def job(name: str, nodes: int = 4, steps: int = 10_000, checkpoint_every: int = 10,
        step_time: float = 1.0, at: float = 0, requeue: bool = True) -> Action:
    return act("submit", at, name=name, nodes=nodes, steps=steps,
               checkpoint_every=checkpoint_every, step_time=step_time, requeue=requeue)


@dataclass
class Harness:
    nodes: int = 16
    seed: int = 1
    actions: list[Action] = field(default_factory=list)
    hang_timeout_s: float = 10.0
    nodes_per_leaf: int = 16
    background_jobs: int = 0
    judge: bool = True
    """Decode strictly and apply the console's rules to every sample (off: encode only)."""

    def __post_init__(self) -> None:
        from fleetdeck.agents.sim.topology import TopologySpec

        self.world = SimWorld(WorldOptions(
            nodes=self.nodes, seed=self.seed, epoch_ms=EPOCH_MS,
            hang_timeout_s=self.hang_timeout_s, background_jobs=self.background_jobs,
            topology=TopologySpec(nodes_per_leaf=self.nodes_per_leaf)), self.actions)
        self.now = EPOCH_MS / 1000
        self.agents = {
            n.node_id: NodeAgent(cluster="t", node_id=n.node_id, source=n,
                                 url=BrokerURL("127.0.0.1", 1), clock=lambda: self.now)
            for n in self.world.nodes
        }
        for a in self.agents.values():
            a.bd_seq = 1
        self.births: dict[str, Birth] = {k: a.birth() for k, a in self.agents.items()}
        self.hist = {k: NodeHistory() for k in self.agents}
        self.last: dict[str, Telemetry] = {}
        self.findings: dict[str, list[Finding]] = {}
        self.events: dict[str, list[EventDraft]] = {k: [] for k in self.agents}
        self.payloads: list[bytes] = []
        self.jobs: list[JobStatus] = []

    def node(self, name: str) -> SimNode:
        return self.world.by_name[name]

    def job(self, name: str) -> SimJob:
        j = self.world.scheduler.find(name)
        assert j is not None
        return j

    def tick(self) -> dict[str, Telemetry]:
        self.world.step()
        self.jobs.extend(self.world.scheduler.updates(self.world.t))
        self.world.take_agent_ops()
        self.now = EPOCH_MS / 1000 + self.world.t
        out: dict[str, Telemetry] = {}
        for name, agent in self.agents.items():
            node = self.node(name)
            if not (node.up and node.agent_alive):
                continue
            raw = codec.encode(agent.telemetry())
            self.payloads.append(raw)
            if not self.judge:
                continue
            t = codec.decode(Telemetry, raw)  # strict validation of what the sim produced
            self.hist[name].update(t)
            self.findings[name] = evaluate(self.births[name], t, self.hist[name])
            self.last[name] = t
            self.events[name].extend(node.take_events())
            out[name] = t
        return out

    def run(self, ticks: int) -> list[dict[str, Telemetry]]:
        return [self.tick() for _ in range(ticks)]

    def verdict(self, name: str) -> Verdict:
        return combine(self.findings[name])

    def rules(self, name: str) -> set[str]:
        return {f.rule for f in self.findings[name]}

    def job_states(self, job_id: str) -> list[str]:
        seq: list[str] = []
        for st in self.jobs:
            if st.job_id == job_id and (not seq or seq[-1] != st.state.value):
                seq.append(st.state.value)
        return seq
