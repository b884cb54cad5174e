"""A simulated fleet run in virtual time, written straight into a recording: no broker, no clock.

``fleetdeck sim --out FILE --duration 7d`` steps the same :class:`~agents.sim.world.SimWorld` a
live ``fleetdeck sim`` steps once a second (nodes, scheduler, jobs, the fault timeline of a
scenario and of a rate table), but as fast as the CPU allows and with a step that grows when
nothing happens: 5 s around faults, job state changes and job ends, up to 2 min in between. A
week at 1,024 nodes cannot be sampled at 1 Hz (6 x 10^8 samples), so the recording
(docs/recording.md, format v1) holds what a console needs to judge it:

* every birth, status (online, Last Will) and job status change, and every event;
* a node's telemetry when something happened to it (a fault, a repair, an event, an agent
  restart), once more one step later (rules that compare two samples), and otherwise every
  ``report_every_s``; its ``interval_s`` says so, so the console does not call a node stale
  between two samples (stale after 3 x interval_s, console/state.py);
* each running job's status at every checkpoint and at least every ``job_every_s``, so the
  last running status before an interruption carries the checkpoint the job loses work since.

Messages are made by the real :class:`~agents.agent.NodeAgent` and scheduler code, on a virtual
clock (timestamps = the simulation's epoch + sim time). Accuracy it gives up: counters and
energy advance by one step's worth between two sparse samples, so rate rules computed from
counter deltas read low on a sparse sample (docs/scenarios.md, "Fault rate tables").
"""

from __future__ import annotations

import dataclasses
import heapq
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.sim.rates import Fault, RateTable, Schedule, describe, expected
from fleetdeck.agents.sim.scheduler import SimJob
from fleetdeck.agents.sim.spec import Action
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.errors import UserError
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import SCHED_HEARTBEAT_S, JobState, SchedulerStatus
from fleetdeck.protocol.topics import Kind, topic_for

MAX_INTERVAL_S = 3600.0
"""The protocol's largest ``interval_s`` (protocol/messages.py)."""
STALE_INTERVALS = 3.0
"""The console calls a node stale after this many intervals without telemetry."""
if TYPE_CHECKING:
    from fleetdeck.agents.fleet import FleetOptions

_LADDER = (1, 3, 12)
"""Step sizes in fine steps below the coarse one: the step shrinks like this towards an event."""
_NOWHERE = BrokerURL("offline.invalid", 1883)
"""NodeAgent wants a broker URL; an offline run never connects to it."""
_RESTART_REASON = "restart by on-call (offline run)"
SEGMENT_S = 86_400.0
"""Recording segments for an offline run (each opens with a keyframe of every node): one a day
keeps a week at 1,024 nodes small; a live recording's default is 60 s."""


class Sink(Protocol):
    """Where the messages go: console/recording.py ``RecordingWriter`` (the agent side does not
    import the console, docs/architecture.md: the CLI hands one in)."""

    def write(self, t: float, topic: str, payload: bytes, qos: int = 0,
              retain: bool = False) -> None: ...

    @property
    def size(self) -> int: ...

    def close(self) -> None: ...


SinkFactory = Callable[[float], Sink]
"""Opens the sink for a run that starts at this unix time (the recording header's 'started')."""


@dataclass
class OfflineOptions:
    cluster: str
    duration_s: float
    world: WorldOptions
    fine_s: float = 5.0
    """The step around events: faults, job state changes, stalls (hang_timeout is 30 s)."""
    coarse_s: float = 120.0
    """The step when nothing is due; a multiple of 12 x ``fine_s``."""
    report_every_s: float = 10_500.0
    """Each node's telemetry at least this often (just inside 3 x 3600 s: never stale)."""
    job_every_s: float = 600.0
    """A running job's status at least this often (and at every checkpoint)."""
    restart_failed_s: float | None = 600.0
    """An on-call operator restarts a FAILED job of the scenario (``[[job]]``) this long after
    it crashed (restart_job); None: it stays failed."""


@dataclass
class OfflineStats:
    nodes: int
    duration_s: float
    steps: int = 0
    fine_steps: int = 0
    messages: int = 0
    telemetry: int = 0
    events: int = 0
    job_statuses: int = 0
    file_bytes: int = 0
    """While running: what the sink has written so far (the caller knows the final size)."""
    cpu_s: float = 0.0
    busy_node_s: float = 0.0
    """Node-seconds held by running jobs (what a fault can interrupt)."""
    faults: dict[str, int] = field(default_factory=dict)
    """Faults of the rate table that fired, by cause."""
    faults_on_busy: dict[str, int] = field(default_factory=dict)
    """Of those, the ones that hit a node running a job."""
    restarts: int = 0

    @property
    def busy_node_days(self) -> float:
        return self.busy_node_s / 86400.0

    def as_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "busy_node_days": round(self.busy_node_days, 3)}


@dataclass(order=True)
class _Msg:
    t: float
    n: int
    topic: str = field(compare=False)
    payload: bytes = field(compare=False)
    qos: int = field(compare=False)
    retain: bool = field(compare=False)


class OfflineRun:
    def __init__(self, opts: OfflineOptions, sink: SinkFactory, timeline: list[Action], *,
                 faults: Sequence[Fault] = (), restart_jobs: frozenset[str] = frozenset()) -> None:
        if opts.fine_s <= 0 or opts.duration_s <= 0:
            raise ValueError("fine_s and duration_s must be positive")
        mult = round(opts.coarse_s / opts.fine_s)
        if mult < 1 or abs(mult * opts.fine_s - opts.coarse_s) > 1e-9:
            raise ValueError("coarse_s must be a whole multiple of fine_s")
        self.opts = opts
        self.ladder = sorted({m for m in (*_LADDER, mult) if m <= mult and mult % m == 0})
        self.world = SimWorld(dataclasses.replace(opts.world, interval_s=opts.fine_s), timeline)
        self.epoch_s = self.world.epoch_ms / 1000
        self.now = 0.0
        self.cluster = opts.cluster
        self.interval_s = min(MAX_INTERVAL_S, (opts.report_every_s + opts.coarse_s
                                               + opts.fine_s) / STALE_INTERVALS)
        self.writer = sink(self.epoch_s)
        self.stats = OfflineStats(len(self.world.nodes), opts.duration_s)
        # Times a step must land on: actions, timed faults' ends.
        self._due: list[tuple[float, int, Action]] = [(a.at, i, a) for i, a in
                                                      enumerate(self.world.timeline)]
        heapq.heapify(self._due)
        self._marks: list[float] = sorted(
            a.at + float(a.get("duration")) for a in timeline
            if isinstance(a.get("duration"), int | float) and a.kind != "submit")
        self._fault_of = {id(f.action): f.cause.name for f in faults}
        self.restart_jobs = restart_jobs
        self._restart_at: dict[str, float] = {}
        self._job_key: dict[str, tuple[object, ...]] = {}
        self._job_written: dict[str, float] = {}
        self._presence_at = float("-inf")
        self.agents: dict[str, NodeAgent] = {}
        self._report_due: list[tuple[float, str]] = []
        self._again: set[str] = set()
        self._buf: list[_Msg] = []
        self._n = 0

    # --- messages --------------------------------------------------------------------------

    def clock(self) -> float:
        return self.epoch_s + self.now

    def _put(self, t: float, topic: str, payload: bytes, qos: int, retain: bool) -> None:
        self._n += 1
        self._buf.append(_Msg(self.epoch_s + t, self._n, topic, payload, qos, retain))

    def _flush(self) -> None:
        for m in sorted(self._buf):
            self.writer.write(m.t, m.topic, m.payload, m.qos, m.retain)
        self.stats.messages += len(self._buf)
        self._buf.clear()

    def _new_agent(self, node: SimNode, t: float) -> NodeAgent:
        self.now = t
        old = self.agents.get(node.node_id)
        agent = NodeAgent(cluster=self.cluster, node_id=node.node_id, source=node, url=_NOWHERE,
                          interval_s=self.interval_s, phase_s=node.offset_s, clock=self.clock)
        # A new process opens a new session: bdSeq above every earlier one (agent.py).
        agent.bd_seq = max(old.bd_seq + 1 if old else 0, int(self.clock() * 1000))
        self.agents[node.node_id] = agent
        c = self.cluster
        self._put(t, topic_for(c, Kind.BIRTH, node.node_id), codec.encode(agent.birth()), 1, True)
        self._put(t, topic_for(c, Kind.STATUS, node.node_id), codec.encode(agent.status()), 1,
                  True)
        return agent

    def _will(self, name: str, t: float) -> None:
        agent = self.agents.get(name)
        if agent is None:
            return
        self.now = t
        self._put(t, topic_for(self.cluster, Kind.STATUS, name),
                  codec.encode(agent.status(online=False)), 1, True)

    def _sample(self, node: SimNode, t: float) -> None:
        agent = self.agents.get(node.node_id)
        if agent is None or not node.up or not node.agent_alive:
            return
        at = t + node.offset_s
        self.now = at
        tel = agent.telemetry()
        self._put(at, topic_for(self.cluster, Kind.TELEMETRY, node.node_id), codec.encode(tel),
                  0, False)
        self.stats.telemetry += 1
        self._events(node, agent, at)
        heapq.heappush(self._report_due, (t + self.opts.report_every_s, node.node_id))

    def _events(self, node: SimNode, agent: NodeAgent, at: float) -> bool:
        drafts = node.take_events()
        for d in drafts:
            agent.emit(d)
        topic = topic_for(self.cluster, Kind.EVENT, node.node_id)
        while agent.outbox.pending:
            ev = agent.outbox.pending[0]
            self._put(at, topic, codec.encode(ev), 1, False)
            agent.outbox.acked(ev)
            self.stats.events += 1
        return bool(drafts)

    def _presence(self, t: float) -> None:
        """The scheduler's presence (``sched/status`` online) at most every
        ``SCHED_HEARTBEAT_S``, as the live simulator's: a console judges a job hung only while
        it hears the scheduler (console/judgements.py, ``not_stepping``)."""
        if t - self._presence_at < SCHED_HEARTBEAT_S:
            return
        self._presence_at = t
        status = SchedulerStatus(online=True, started=self.world.wall_ms(0.0), name="sim",
                                 ts=self.world.wall_ms(t), jobs=len(self.world.scheduler.jobs))
        self._put(t, topic_for(self.cluster, Kind.SCHED_STATUS), codec.encode(status), 1, True)

    def _job(self, job: SimJob, t: float) -> None:
        self._put(t, topic_for(self.cluster, Kind.JOB, job.job_id),
                  codec.encode(self.world.scheduler.status(job, t)), 1, True)
        self._job_written[job.job_id] = t
        self.stats.job_statuses += 1

    # --- the run -----------------------------------------------------------------------------

    def run(self, progress: Callable[[OfflineStats, float], None] | None = None
            ) -> OfflineStats:
        cpu0 = time.process_time()
        world = self.world
        fine = self.opts.fine_s
        for node in world.nodes:
            self._new_agent(node, 0.0)
            self._sample(node, 0.0)
        k = 0
        next_progress = 3600.0
        try:
            while k * fine < self.opts.duration_s - 1e-9:
                t = k * fine
                m = self._step_size(k, t)
                touched = self._fire(t)
                self.stats.busy_node_s += m * fine * sum(
                    len(j.nodes) for j in world.scheduler.jobs.values() if j.running)
                world.interval_s = m * fine
                world.ticks = k // m
                world.step()
                self._after(t, touched)
                self.stats.steps += 1
                self.stats.fine_steps += m == 1
                k += m
                if progress is not None and k * fine >= next_progress:
                    next_progress += 3600.0
                    self.stats.cpu_s = time.process_time() - cpu0
                    self.stats.file_bytes = self.writer.size
                    progress(self.stats, k * fine)
        finally:
            self.writer.close()
        self.stats.cpu_s = time.process_time() - cpu0
        return self.stats

    def _step_size(self, k: int, t: float) -> int:
        """The largest step (in fine steps) that is aligned at ``k`` and ends no later than the
        next thing that must happen at its own time."""
        sched = self.world.scheduler
        for job in sched.jobs.values():
            # A hung job (job_hang) is stalled with nothing due: its end is a horizon below.
            if (job.hold or job.next_state is not None
                    or (job.stalled and job.hung_until is None)
                    or job.state in (JobState.RQ, JobState.CG)
                    or (job.state is JobState.PD and t - job.queued_t < 3 * self.opts.fine_s)):
                return 1
        horizon = self.opts.duration_s
        if self._due:
            horizon = min(horizon, self._due[0][0])
        while self._marks and self._marks[0] <= t:
            self._marks.pop(0)
        if self._marks:
            horizon = min(horizon, self._marks[0])
        if self._restart_at:
            horizon = min(horizon, *self._restart_at.values())
        for job in sched.jobs.values():
            if job.running and job.hung_until is not None:
                horizon = min(horizon, job.hung_until)  # inf: hung until requeued
            elif job.running:
                horizon = min(horizon, t + (job.total_steps - job.progress) * job.step_time_s)
        fine = self.opts.fine_s
        # The step at or just after the horizon is where it happens: land there.
        land = max(k + 1, -int(-(horizon - 1e-9) // fine))
        for m in reversed(self.ladder):
            if k % m == 0 and k + m <= land:
                return m
        return 1

    def _fire(self, t: float) -> set[str]:
        """Actions the world runs this step: which nodes they touch, and which rate-table
        faults hit a node running a job."""
        touched: set[str] = set()
        by_name = self.world.by_name
        while self._due and self._due[0][0] <= t + 1e-9:
            _, _, action = heapq.heappop(self._due)
            name = action.get("node")
            node = by_name.get(str(name)) if name is not None else None
            if node is not None:
                touched.add(node.node_id)
            elif action.get("leaf") is not None:
                touched.update(n.node_id for n in self.world.leaf_nodes(str(action.get("leaf"))))
            cause = self._fault_of.get(id(action))
            if cause is not None:
                self.stats.faults[cause] = self.stats.faults.get(cause, 0) + 1
                b = node.binding if node is not None else None
                if node is not None and node.up and b is not None and b.job.running:
                    self.stats.faults_on_busy[cause] = self.stats.faults_on_busy.get(cause, 0) + 1
        return touched

    def _after(self, t: float, touched: set[str]) -> None:
        world = self.world
        sched = world.scheduler
        self._presence(t)
        for op in world.take_agent_ops():
            if op.op == "kill":
                self._will(op.node, t)
            else:
                self._new_agent(world.by_name[op.node], t)
                touched.add(op.node)
        for job_id, due in list(self._restart_at.items()):
            job = sched.jobs[job_id]
            if due <= t + 1e-9:
                del self._restart_at[job_id]
                if job.state is JobState.F:
                    sched.requeue(job, t, _RESTART_REASON)
                    self.stats.restarts += 1
        every = self.opts.job_every_s
        for job in sched.jobs.values():
            key = (job.state, job.reason, job.requeues, job.last_checkpoint_step, len(job.nodes))
            old = self._job_key.get(job.job_id)
            if key != old:
                self._job_key[job.job_id] = key
                self._job(job, t)
                if (job.state is JobState.F and job.name in self.restart_jobs
                        and self.opts.restart_failed_s is not None):
                    self._restart_at[job.job_id] = t + self.opts.restart_failed_s
            elif job.running and t - self._job_written.get(job.job_id, 0.0) >= every:
                self._job(job, t)
        for node in world.nodes:
            agent = self.agents.get(node.node_id)
            if (agent is not None and node.agent_alive and node.node_id not in touched
                    and self._events(node, agent, t)):
                touched.add(node.node_id)
        again, self._again = self._again, set()
        reports = self._report_due
        while reports and reports[0][0] <= t + 1e-9:
            again.add(heapq.heappop(reports)[1])
        sampled: set[str] = set()
        for name in sorted(touched | again):
            node = world.by_name[name]
            if name in sampled:
                continue
            sampled.add(name)
            self._sample(node, t)
        # One more sample a step later: rules that compare two samples see the change.
        self._again = touched
        self._dedupe_report_due()
        self._flush()

    def _dedupe_report_due(self) -> None:
        """Keep only each node's latest periodic report (a node sampled for an event is not
        due again before ``report_every_s`` has passed)."""
        if len(self._report_due) > 4 * max(1, len(self.world.nodes)):
            latest: dict[str, float] = {}
            for due, name in self._report_due:
                latest[name] = max(due, latest.get(name, 0.0))
            self._report_due = [(due, name) for name, due in latest.items()]
            heapq.heapify(self._report_due)


def run_offline(opts: OfflineOptions, sink: SinkFactory, timeline: list[Action], *,
                faults: Sequence[Fault] = (), restart_jobs: frozenset[str] = frozenset(),
                progress: Callable[[OfflineStats, float], None] | None = None) -> OfflineStats:
    """Run ``timeline`` (scenario jobs and faults, rate-table faults) for ``opts.duration_s`` of
    virtual time, writing every message into the sink ``sink(start time)`` opens."""
    return OfflineRun(opts, sink, timeline, faults=faults, restart_jobs=restart_jobs).run(progress)


def submitted_names(actions: list[Action]) -> frozenset[str]:
    """Names of the jobs a scenario submits: the ones an on-call operator restarts after a
    crash (generated background jobs are replaced instead, docs/scenarios.md)."""
    return frozenset(str(a.get("name")) for a in actions if a.kind == "submit")


def _span(seconds: float) -> str:
    """``7 days``, ``36 h``, ``90 min``: the --duration as typed, where "for 0.0833333 days"
    made a reader work out that it meant 2 h."""
    for unit, name in ((86400, "days"), (3600, "h"), (60, "min")):
        if seconds >= unit and (seconds % unit == 0 or unit == 60 or seconds >= 2 * unit):
            return "1 day" if seconds == unit == 86400 else f"{seconds / unit:.4g} {name}"
    return f"{seconds:.4g} s"


def summary_lines(stats: OfflineStats, table: RateTable | None, wall_s: float) -> list[str]:
    """What ``fleetdeck sim --out`` prints when it is done."""
    lines = [f"simulated {stats.nodes} nodes for {_span(stats.duration_s)} in {wall_s:.0f} s "
             f"({stats.cpu_s:.0f} s CPU, {stats.steps} steps, {stats.fine_steps} of them fine): "
             f"{stats.messages} messages ({stats.telemetry} samples, {stats.events} events, "
             f"{stats.job_statuses} job statuses), jobs held {stats.busy_node_days:.1f} "
             "node-days"]
    if table is not None:
        exp = expected(table, stats.busy_node_days)
        causes = ", ".join(f"{k} {v:.1f}" for k, v in exp.items() if v)
        if not causes:
            # An empty list read as a broken run: say why (no job ran, or too short a run).
            causes = ("none: no job held a node (too few nodes for the scenario's jobs?)"
                      if not stats.busy_node_days else "none to one decimal")
        lines.append(f"expected interruptions by cause (rate x busy node-days): {causes}")
        lines.append("faults that fired (on a busy node): " + ", ".join(
            f"{c} {n} ({stats.faults_on_busy.get(c, 0)})"
            for c, n in sorted(stats.faults.items())) if stats.faults else "no faults fired")
        if stats.restarts:
            lines.append(f"crashed jobs restarted by the on-call: {stats.restarts}")
    return lines


def run_cli(opts: FleetOptions, duration_s: float, table: RateTable | None,
            drawn: Schedule | None, sink: SinkFactory) -> int:
    """``fleetdeck sim --out FILE --duration SPAN``: the fleet ``opts`` describes, in virtual
    time, into the sink; progress every simulated 6 h and a summary on stderr."""
    sc = opts.scenario
    world = WorldOptions(nodes=opts.nodes, prefix=opts.prefix, seed=opts.seed,
                         topology=opts.topology, background_jobs=opts.jobs)
    hang = opts.hang_timeout_s if opts.hang_timeout_s is not None else (
        sc.hang_timeout_s if sc is not None else None)
    if hang is not None:
        world.hang_timeout_s = hang
    timeline = list(sc.actions) if sc is not None else []
    if table is not None:
        for line in describe(table, opts.nodes, duration_s / 86400):
            print(f"fleetdeck sim: {line}", file=sys.stderr)

    def progress(stats: OfflineStats, at: float) -> None:
        if at % 21_600 < 1e-6:
            print(f"fleetdeck sim: day {at / 86400:.2f}: {stats.messages} messages, "
                  f"{stats.file_bytes / 2**20:.1f} MiB, {stats.cpu_s:.0f} s CPU",
                  file=sys.stderr, flush=True)

    wall0 = time.monotonic()
    try:
        stats = run_offline(OfflineOptions(cluster=opts.cluster, duration_s=duration_s,
                                           world=world),
                            sink, timeline, faults=drawn.faults if drawn is not None else [],
                            restart_jobs=submitted_names(timeline), progress=progress)
    except OSError as err:
        where = f" {err.filename}" if err.filename else ""
        raise UserError(f"cannot write{where}: {err.strerror or err}.") from None
    for line in summary_lines(stats, table, time.monotonic() - wall0):
        print(f"fleetdeck sim: {line}", file=sys.stderr)
    return 0
