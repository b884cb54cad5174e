"""Synthetic fleets for console tests: real protocol messages through the real Ingest."""

from typing import Any

from msgspec.structs import replace

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.brokerurl import parse_broker_url
from fleetdeck.protocol import codec
from fleetdeck.protocol.fast import JobOnNode
from fleetdeck.protocol.messages import (
    Ack,
    AckResult,
    CommandOp,
    DrainInfo,
    DrainState,
    JobState,
    JobStatus,
    RankTime,
    Topology,
)
from fleetdeck.protocol.topics import Kind, topic_for

CLUSTER = "t"


def node_names(n: int) -> list[str]:
    return [f"gpu{i:04d}" for i in range(1, n + 1)]

T0 = 1_767_225_600.0
URL = parse_broker_url("mqtt://127.0.0.1:1")


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, s: float) -> None:
        self.t += s


class SynthFleet:
    """Node agents (sim sources) whose messages we hand to an Ingest ourselves: no sleeps."""

    def __init__(self, n: int, clock: Clock, leaves: int = 4, seed: int = 0) -> None:
        self.clock = clock
        self.names = node_names(n)
        self.agents: dict[str, NodeAgent] = {}
        for i, name in enumerate(self.names):
            src = SimNode(name, seed=seed,
                          topology=Topology(rack=f"r{i // 8:02d}", leaf=f"leaf{i % leaves:02d}"))
            agent = NodeAgent(cluster=CLUSTER, node_id=name, source=src, url=URL, clock=clock)
            agent.bd_seq = 1
            self.agents[name] = agent

    def src(self, name: str) -> SimNode:
        src = self.agents[name].source
        assert isinstance(src, SimNode)
        return src

    def birth(self, ingest, names=None) -> None:
        for name in names or self.names:
            a = self.agents[name]
            ingest.handle(topic_for(CLUSTER, Kind.BIRTH, name), codec.encode(a.birth()),
                          self.clock())
            ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(a.status()),
                          self.clock())

    def telemetry(self, ingest, names=None, job: dict[str, str] | None = None,
                  faults: dict[str, Any] | None = None) -> None:
        for name in names or self.names:
            a = self.agents[name]
            tel = a.telemetry()
            if job and name in job:
                tel = replace(tel, job=JobOnNode(id=job[name]))
            if faults and name in faults:
                tel = faults[name](tel)
            ingest.handle(topic_for(CLUSTER, Kind.TELEMETRY, name), codec.encode(tel),
                          self.clock())

    def payloads(self, names=None) -> list[tuple[str, bytes]]:
        out = []
        for name in names or self.names:
            a = self.agents[name]
            out.append((topic_for(CLUSTER, Kind.TELEMETRY, name), codec.encode(a.telemetry())))
        return out

    def status(self, ingest, name: str, state: DrainState, reason: str = "", by: str = "",
               cmd_id: str = "") -> None:
        a = self.agents[name]
        a.drain = DrainInfo(state=state, reason=reason, requested_by=by,
                            since_ts=int(self.clock() * 1000), cmd_id=cmd_id)
        ingest.handle(topic_for(CLUSTER, Kind.STATUS, name), codec.encode(a.status()),
                      self.clock())

    def ack(self, ingest, cmd_id: str, by: str, result: AckResult, reason: str = "",
            op: CommandOp = CommandOp.DRAIN) -> None:
        ack = Ack(cmd_id=cmd_id, by=by, op=op, result=result, reason=reason,
                  ts=int(self.clock() * 1000))
        kind = Kind.SCHED_ACK if by == "sched" else Kind.ACK
        ingest.handle(topic_for(CLUSTER, kind, by if kind is Kind.ACK else ""),
                      codec.encode(ack), self.clock())


def job_status(job_id: str, nodes: list[str], clock: Clock, *, state: JobState = JobState.R,
               step: int = 500, requeues: int = 0, slowest_node: str | None = None,
               started_offset_s: float = 3600) -> JobStatus:
    slowest = []
    if slowest_node is not None:
        slowest = [RankTime(rank=8 * nodes.index(slowest_node) + 3, node=slowest_node,
                            step_time_ms=1500.0)]
    now_ms = int(clock() * 1000)
    return JobStatus(
        job_id=job_id, name="llama-70b", user="alice", state=state, nodes=nodes,
        gpus_per_node=8, step=step, total_steps=1000, step_time_ms=1000.0,
        median_step_time_ms=1000.0, slowest=slowest, checkpoint_every=100,
        last_checkpoint_step=400, last_checkpoint_ts=now_ms - 1_800_000,
        started_ts=now_ms - int(started_offset_s * 1000), eta_s=500.0, requeues=requeues,
        ts=now_ms,
    )


def publish_job(ingest, job: JobStatus, clock: Clock) -> None:
    ingest.handle(topic_for(CLUSTER, Kind.JOB, job.job_id), codec.encode(job), clock())


def port_down(dev: str = "mlx5_ib2"):
    def apply(tel):
        ports = [replace(p, state="DOWN", phys_state="Polling")
                 if p.dev == dev else p for p in tel.ib_ports]
        return replace(tel, ib_ports=ports)
    return apply


def throttled(gpu: int = 3):
    def apply(tel):
        gpus = [replace(g, clock_event_reasons=0x40, temp_c=90.0)
                if g.index == gpu else g for g in tel.gpus]
        return replace(tel, gpus=gpus)
    return apply
