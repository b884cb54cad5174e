"""The simulated cluster on one clock: nodes, topology, scheduler and the fault timeline.

Everything that changes values runs on simulated time (``t``, seconds since the start, advanced
one ``interval_s`` per :meth:`SimWorld.step`), never on the wall clock; wall time only appears as
``epoch_ms + t`` in timestamps. Per-node random streams are seeded from (seed, node name) and
the scheduler's from the seed, so the same seed and scenario give the same telemetry whatever
order the agents read in. MQTT is not in here: :mod:`agents.fleet` wires the world to agents.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fleetdeck.agents.sim.node import N_PORTS, SimNode
from fleetdeck.agents.sim.scheduler import DEFAULT_HANG_TIMEOUT_S, TERMINAL, Scheduler, SimJob
from fleetdeck.agents.sim.spec import (
    NODE_LESS,
    Action,
    SpecError,
    xid_codes,
    xid_recovery_action,
)
from fleetdeck.agents.sim.topology import TopologySpec, node_names, topology_for
from fleetdeck.hostlist import did_you_mean
from fleetdeck.protocol.messages import DrainMode, DrainState, Severity

log = logging.getLogger("fleetdeck.sim")


@dataclass
class WorldOptions:
    nodes: int = 16
    prefix: str = "gpu"
    seed: int = 0
    interval_s: float = 1.0
    topology: TopologySpec = field(default_factory=TopologySpec)
    hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S
    epoch_ms: int | None = None
    """Wall time of sim t=0 (default: now). Tests fix it to make even timestamps repeat."""
    background_jobs: int = 0
    """Keep this many generated jobs queued or running (``sim --jobs N``); 0 = none."""


@dataclass(frozen=True)
class AgentOp:
    """What the MQTT side must do to a node's agent after a step: 'kill' or 'start' (both, in
    that order, restart it)."""

    op: str
    node: str


@dataclass
class Expiry:
    at: float
    node: SimNode
    kind: str
    gpu: int | None = None
    port: int | None = None
    switch_ports: list[tuple[SimNode, int]] = field(default_factory=list)

    @property
    def same(self) -> tuple[object, ...]:
        """What makes two expiries one fault's: the later application's wins."""
        return (self.node.node_id, self.kind, self.gpu, self.port,
                tuple((n.node_id, r) for n, r in self.switch_ports))


class SimWorld:
    def __init__(self, opts: WorldOptions, timeline: Iterable[Action] = ()) -> None:
        self.opts = opts
        self.interval_s = opts.interval_s
        self.epoch_ms = int(time.time() * 1000) if opts.epoch_ms is None else opts.epoch_ms
        self.t = 0.0
        self.ticks = 0
        phase = random.Random(opts.seed * 104729 + 3)
        self.nodes: list[SimNode] = []
        for i, name in enumerate(node_names(opts.nodes, opts.prefix)):
            # Each node is sampled at its own point of the interval (its agent's phase), so
            # thousands of agents never publish in the same millisecond.
            offset = opts.interval_s * (0.05 + 0.9 * phase.random())
            self.nodes.append(SimNode(name, seed=opts.seed, topology=topology_for(
                i, opts.topology), index=i, world=self, offset_s=offset))
        self.by_name = {n.node_id: n for n in self.nodes}
        self.scheduler = Scheduler(self, opts.seed, opts.hang_timeout_s)
        self.timeline = sorted(timeline, key=lambda a: a.at)
        self._next_action = 0
        self._injected: list[Action] = []
        self._expiries: list[Expiry] = []
        self.agent_ops: list[AgentOp] = []
        self.log: list[tuple[float, str]] = []
        """What the timeline did (sim time, text), for logs and tests."""
        self.narrate = True
        """Whether what the timeline did goes to the log as well: in a fleet spread over
        processes every process steps the whole world, and only the lead says it (each
        warning came once per process)."""
        self._workload_rng = random.Random(opts.seed * 31 + 5)
        self._workload: list[str] = []
        self._workload_n = 0
        self.relay: Callable[[str, DrainState, DrainMode], None] | None = None
        """Set by a process of a spread fleet: drains go to the lead process, which hands them
        to every process for one agreed tick (agents/fleet.py)."""

    def wall_ms(self, t: float) -> int:
        return self.epoch_ms + round(t * 1000)

    def leaf_nodes(self, leaf: str) -> list[SimNode]:
        return [n for n in self.nodes if n.topology.leaf == leaf]

    # --- the tick ------------------------------------------------------------------------------

    def step(self) -> None:
        """Advance one interval: due actions, timed recoveries, then the scheduler."""
        self.t = self.ticks * self.interval_s
        self.ticks += 1
        t = self.t
        while (self._next_action < len(self.timeline)
               and self.timeline[self._next_action].at <= t + 1e-9):
            self._run(self.timeline[self._next_action], t)
            self._next_action += 1
        injected, self._injected = self._injected, []
        for action in injected:
            self._run(action, t)
        due = [e for e in self._expiries if e.at <= t + 1e-9]
        self._expiries = [e for e in self._expiries if e.at > t + 1e-9]
        for e in due:
            self._expire(e, t)
        self._top_up_workload(t)
        self.scheduler.step(t, self.interval_s)

    def _top_up_workload(self, t: float) -> None:
        """``--jobs N``: keep N generated jobs alive, replacing each one that ends."""
        want = self.opts.background_jobs
        if not want:
            return
        from fleetdeck.agents.sim.scheduler import TERMINAL

        jobs = self.scheduler.jobs
        self._workload = [j for j in self._workload if jobs[j].state not in TERMINAL
                          or jobs[j].next_state is not None]
        rng = self._workload_rng
        share = max(1, int(len(self.nodes) * 0.85 / want))
        while len(self._workload) < want:
            self._workload_n += 1
            size = 1
            while size * 2 <= min(share, 256) and rng.random() < 0.8:
                size *= 2
            model = rng.choice(["llama3-8b", "llama3-70b", "mixtral-8x22b", "gpt-neox-20b",
                                "vit-h14", "dlrm-v3"])
            job = self.scheduler.submit(
                name=f"{model}-{self._workload_n:03d}", user=rng.choice(
                    ["alice", "bob", "chen", "dana", "eli"]), nodes=size,
                steps=rng.choice([600, 1200, 3000, 6000]), checkpoint_every=rng.choice(
                    [50, 100, 200]), step_time_s=round(rng.uniform(0.8, 2.5), 2),
                requeue=True, t=t)
            self._workload.append(job.job_id)

    def inject(self, action: Action) -> str:
        """Queue an action for the next tick after checking that it can apply; return what it
        will do (raise :class:`SpecError` with one sentence if it cannot)."""
        detail = self.check(action)
        self._injected.append(action)
        return detail

    def check(self, action: Action) -> str:
        """What ``action`` would do now, or :class:`SpecError` if it cannot apply."""
        nodes = self._targets(action)
        if action.kind in ("job_hang", "cancel"):
            # Checked before `inject` answers, not only when it runs: "injected: job_hang
            # job=4101" was said of a job that had failed, and nothing happened (a newcomer's
            # run).
            self._job_for(action)
        return action.describe() + self._reach(action, nodes)

    @staticmethod
    def _reach(action: Action, nodes: list[SimNode]) -> str:
        """Where an action given by job or node lands, as its answer says it: "injected:
        thermal job=4102 index=3" named no node, and "leaf_switch node=gpu0020" took down all
        eight rails of sixteen nodes without a word of it (a newcomer's run)."""
        if action.kind == "leaf_switch" and nodes:
            rail = action.get("rail")
            rails = f"rail {rail}" if rail is not None else f"all {N_PORTS} rails"
            return f" (leaf group {nodes[0].topology.leaf}, {rails}, {len(nodes)} nodes)"
        if action.get("node") is None and action.get("job") is not None and len(nodes) == 1:
            return f" (on {nodes[0].node_id})"
        return ""

    def _job_for(self, action: Action) -> SimJob:
        """The job ``job_hang`` or ``cancel`` acts on; :class:`SpecError` when it cannot take
        it: a hang of a job not running, a cancel of one that ended ("injected" of such a job
        read as done: an SRE drill)."""
        job = self.scheduler.find(str(action.get("job")))
        assert job is not None  # _targets checked it
        if action.kind == "job_hang" and not job.running:
            raise SpecError(f"job {job.job_id} is {job.state.value}, not running")
        if action.kind == "cancel" and job.state in TERMINAL:
            raise SpecError(f"job {job.job_id} is {job.state.value} already, not running or "
                            "pending")
        return job

    def node_drain(self, node: SimNode, state: DrainState, mode: DrainMode) -> None:
        """A node's agent drained or resumed it: now, or through ``relay`` when set."""
        if self.relay is not None:
            self.relay(node.node_id, state, mode)
        else:
            self.apply_drain(node.node_id, state, mode)

    def apply_drain(self, node_id: str, state: DrainState, mode: DrainMode) -> None:
        node = self.by_name[node_id]
        node.drain_state = state
        self.scheduler.on_drain(node, state, mode)

    def take_agent_ops(self) -> list[AgentOp]:
        ops, self.agent_ops = self.agent_ops, []
        return ops

    def _run(self, action: Action, t: float) -> None:
        try:
            text = self.apply(action, t)
        except SpecError as err:
            text = f"skipped {action.describe()}: {err}"
            if self.narrate:
                log.warning("t=%.0fs %s", t, text)
        else:
            if self.narrate:
                log.info("t=%.0fs %s", t, text)
        self.log.append((t, text))

    # --- actions -------------------------------------------------------------------------------

    def _targets(self, a: Action) -> list[SimNode]:
        if a.kind in NODE_LESS:
            if a.kind != "submit" and self.scheduler.find(str(a.get("job"))) is None:
                raise SpecError(f"no job {a.get('job')!r}")
            return []
        leaf = a.get("leaf")
        if leaf is not None and a.get("node") is None and a.get("job") is None:
            nodes = self.leaf_nodes(str(leaf))
            if not nodes:
                raise SpecError(f"no leaf group {leaf!r} (leaves look like 'leaf01')")
            return nodes
        if a.get("node") is not None:
            node = self.by_name.get(str(a.get("node")))
            if node is None:
                # gpu42 for gpu0042 (a 3 a.m. drill): say the node meant.
                hint = did_you_mean([str(a.get("node"))], self.by_name)
                raise SpecError(f"no node {a.get('node')!r} in this fleet"
                                + (f" ({hint})" if hint else ""))
        else:
            job = self.scheduler.find(str(a.get("job")))
            if job is None or not job.nodes:
                raise SpecError(f"job {a.get('job')!r} is not running anywhere")
            index = int(a.get("index") or 0)
            if index >= len(job.nodes):
                raise SpecError(f"job {a.get('job')!r} has only {len(job.nodes)} nodes")
            node = job.nodes[index]
        if a.kind == "leaf_switch":
            return self.leaf_nodes(node.topology.leaf)
        return [node]

    def apply(self, a: Action, t: float) -> str:
        """Do one action now; return what was done."""
        nodes = self._targets(a)
        wall = self.wall_ms(t)
        kind = a.kind
        if kind == "submit":
            job = self.scheduler.submit(
                name=str(a.get("name")), user=str(a.get("user")), nodes=int(a.get("nodes")),
                steps=int(a.get("steps")), checkpoint_every=int(a.get("checkpoint_every")),
                step_time_s=float(a.get("step_time")), requeue=bool(a.get("requeue")), t=t)
            return f"submitted job {job.job_id} {job.name} ({job.nodes_wanted} nodes)"
        if kind == "cancel":
            victim = self._job_for(a)
            self.scheduler.cancel(victim, t)
            return f"cancelled job {victim.job_id}"
        if kind == "job_hang":
            hung = self._job_for(a)
            duration = a.get("duration")
            self.scheduler.hang(hung, t, None if duration is None else float(duration))
            return (f"job {hung.job_id} hung at step {hung.step}"
                    + ("" if duration is None else f" for {float(duration):g} s"))
        node = nodes[0]
        what = f"{kind} on {node.node_id}"
        duration = a.get("duration")
        port = int(a.get("port") or 0)
        gpu = int(a.get("gpu") or 0)
        if kind in ("ib_flap", "link_down", "symbol_storm", "xid79", "xid", "ecc_dbe",
                    "thermal", "nvlink", "pcie_replay", "power_cap") and not node.up:
            raise SpecError(f"{node.node_id} is down")
        if kind == "ib_flap":
            node.flap(port, int(a.get("count")), float(a.get("down")), float(a.get("every")), t)
            return f"{what} mlx5_ib{port} x{a.get('count')}"
        if kind == "link_down":
            node.link_down(port, str(a.get("phys")), t, wall)
            self._expire_later(duration, t, Expiry(0, node, kind, port=port))
            return f"{what} mlx5_ib{port} ({a.get('phys')})"
        if kind == "symbol_storm":
            node.symbol_storm(port, float(a.get("rate")), float(a.get("bandwidth")))
            node.event("ib_errors", f"ib{port}: symbol errors rising", Severity.WARN,
                       f"mlx5_ib{port}:1", wall)
            self._expire_later(duration, t, Expiry(0, node, kind, port=port))
            return f"{what} mlx5_ib{port} {a.get('rate'):g}/s"
        if kind == "xid79":
            node.xid79(gpu, t, wall)
            return f"{what} gpu{gpu}"
        if kind == "xid":
            done = node.xid(gpu, xid_codes(a), t, wall, xid_recovery_action(a))
            return f"{what} gpu{gpu}: XID {', then '.join(done)}"
        if kind == "ecc_dbe":
            node.ecc_dbe(gpu, bool(a.get("remap_failure")), t, wall)
            return f"{what} gpu{gpu}"
        if kind == "thermal":
            node.thermal(gpu, float(a.get("temp")), float(a.get("clock_mhz")))
            self._expire_later(duration, t, Expiry(0, node, kind, gpu=gpu))
            return f"{what} gpu{gpu} → {a.get('temp'):g} °C"
        if kind == "power_cap":
            node.power_cap(gpu, float(a.get("limit")))
            self._expire_later(duration, t, Expiry(0, node, kind, gpu=gpu))
            return f"{what} gpu{gpu} limit {a.get('limit'):g} W"
        if kind == "nvlink":
            node.nvlink(gpu, int(a.get("links")), t, wall)
            return f"{what} gpu{gpu} ({a.get('links')} links down)"
        if kind == "pcie_replay":
            node.pcie_replay(gpu, float(a.get("per_min")))
            self._expire_later(duration, t, Expiry(0, node, kind, gpu=gpu))
            return f"{what} gpu{gpu} {a.get('per_min'):g}/min"
        if kind == "agent_death":
            if node.agent_alive:
                node.agent_alive = False
                self.agent_ops.append(AgentOp("kill", node.node_id))
            return f"{what} (ranks keep running)"
        if kind == "agent_restart":
            if a.get("only_dead") and node.agent_alive:
                return f"{what}: its agent is running, left be"
            self._start_agent(node, restart=True)
            return f"{what}"
        if kind == "node_death":
            if node.agent_alive:
                self.agent_ops.append(AgentOp("kill", node.node_id))
            node.die()
            return what
        if kind == "leaf_switch":
            rail = a.get("rail")
            rails = range(N_PORTS) if rail is None else [int(rail)]
            hit = [(n, r) for n in nodes for r in rails]
            for n, r in hit:
                if n.up:
                    n.link_down(r, "Polling", t, wall, switch=True)
            self._expire_later(duration, t, Expiry(0, node, kind, switch_ports=hit))
            leaf = nodes[0].topology.leaf
            sw = f"{leaf}-r{rail}" if rail is not None else f"{leaf} (all rails)"
            return f"leaf_switch {sw}: {len(hit)} ports on {len(nodes)} nodes down"
        if kind == "repair":
            if a.get("node") is None and a.get("job") is None:
                for n in nodes:
                    for p in n.ports:
                        if p.switch_down:
                            n.link_restore(p.index, t, wall, switch=True)
                return f"repaired leaf group {a.get('leaf')} ({len(nodes)} nodes)"
            for p in node.ports:
                if p.switch_down:
                    continue  # the switch is still dead: a node repair cannot fix it
                p.hard_down = None
            node.repair(t, wall)
            self._start_agent(node)
            return f"repaired {node.node_id}"
        raise SpecError(f"unknown action {kind}")

    def _start_agent(self, node: SimNode, *, restart: bool = False) -> None:
        """Start a dead agent; with ``restart``, a live one too (a repair leaves it be)."""
        if not node.up or (node.agent_alive and not restart):
            return
        if node.agent_alive:
            # A fresh process for a live agent too (docs/scenarios.md): the old one dies first
            # (its Last Will fires, as for a crash), then the new one starts.
            self.agent_ops.append(AgentOp("kill", node.node_id))
        node.agent_alive = True
        self.agent_ops.append(AgentOp("start", node.node_id))

    def _expire_later(self, duration: object, t: float, e: Expiry) -> None:
        """End ``e``'s fault ``duration`` s from ``t`` (none: it lasts until a repair). The
        same fault applied again restarts its clock: the first application's end, still due,
        cleared the second early (a 30 s thermal re-applied for 60 s at 20 s ended at 30 s)."""
        same = e.same
        self._expiries = [x for x in self._expiries if x.same != same]
        if isinstance(duration, int | float) and duration > 0:
            e.at = t + float(duration)
            self._expiries.append(e)

    def _expire(self, e: Expiry, t: float) -> None:
        wall = self.wall_ms(t)
        if e.kind == "link_down" and e.port is not None:
            e.node.link_restore(e.port, t, wall)
        elif e.kind == "leaf_switch":
            for n, r in e.switch_ports:
                n.link_restore(r, t, wall, switch=True)
        else:
            e.node.clear(e.kind, gpu=e.gpu, port=e.port)
        self.log.append((t, f"{e.kind} on {e.node.node_id} ended"))
