"""A simulated Slurm: jobs, a queue, placement, synchronous data-parallel progress, requeue.

Semantics follow Slurm's, as docs/domain.md §5 sums them up (squeue codes PD R CG CD F NF RQ CA;
DRAIN lets jobs finish, "drain now" requeues them; a requeued job restarts from its last
checkpoint):

* placement only on nodes that are up, whose agent is online, that are not draining/drained and
  that pass the node health check (:meth:`SimNode.fatal_reasons`); FIFO with first-fit
  backfill, nodes taken in name order (which keeps a job inside few leaf groups);
* one step of a synchronous data-parallel job takes the slowest rank's compute time plus an
  all-reduce paced by the slowest participating link, so one throttled GPU or one degraded port
  slows every rank (a straggler), visible in the per-rank step times;
* a rank's GPU falling off the bus kills the job at once (NODE_FAIL); a dead node or a link that
  is down (of a job on more than one node: one node's ranks reduce over NVLink) stalls the next
  collective until the NCCL watchdog fires (``hang_timeout_s``), then
  NODE_FAIL; an uncorrectable ECC error, or any XID that kills the application (13, 31, 94, 95,
  119 …, docs/scenarios.md), crashes the rank (FAILED). NODE_FAIL jobs with
  ``requeue`` go NF -> RQ -> PD -> R from their last checkpoint; FAILED ones wait for an
  operator's restart_job.

Every state change goes out one tick at a time so each one is published (retained job status).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fleetdeck.agents.guard import expired
from fleetdeck.agents.sim.node import COMM_PEAK_BPS
from fleetdeck.protocol.messages import (
    Ack,
    AckResult,
    Command,
    CommandOp,
    DrainMode,
    DrainState,
    JobState,
    JobStatus,
    RankTime,
)

if TYPE_CHECKING:
    from fleetdeck.agents.sim.node import SimNode
    from fleetdeck.agents.sim.world import SimWorld

GPUS = 8
COMPUTE_SHARE = 0.75
"""Share of a healthy step spent in forward/backward; the rest is the gradient all-reduce."""
SLOWEST_PUBLISHED = 8
DEFAULT_HANG_TIMEOUT_S = 30.0
"""NCCL's watchdog defaults to minutes; 30 s keeps demos and tests short ([fleet] hang_timeout)."""
RESTART_ACK_TIMEOUT_S = 30.0
TERMINAL = frozenset({JobState.CD, JobState.F, JobState.NF, JobState.CA})


@dataclass
class Binding:
    """A job's ranks on one node: ranks ``slot*8 … slot*8+7``."""

    job: SimJob
    slot: int


@dataclass
class PendingAck:
    cmd: Command
    deadline_t: float


@dataclass
class SimJob:
    job_id: str
    name: str
    user: str
    nodes_wanted: int
    total_steps: int
    checkpoint_every: int
    healthy_step_s: float
    requeue: bool
    submitted_ms: int
    state: JobState = JobState.PD
    reason: str = "None"
    nodes: list[SimNode] = field(default_factory=list)
    progress: float = 0.0
    """Steps done (fractional) at sim time ``t``."""
    progress_start: float = 0.0
    t: float = 0.0
    step_time_s: float = 1.0
    comm_frac: float = 1 - COMPUTE_SHARE
    compute_frac: list[list[float]] = field(default_factory=list)
    """Per node slot, per GPU: the share of the step that rank computes before it waits."""
    rank_time_s: list[list[float]] = field(default_factory=list)
    bytes_per_step: float = 0.0
    fb_mib: list[int] = field(default_factory=lambda: [0] * GPUS)
    stalled: bool = False
    stalled_since: float | None = None
    hung_until: float | None = None
    """A hang no watchdog catches (``job_hang``: a rank deadlocked outside a collective, its
    peers spinning in one): no step, no reason, state R, until then (inf: until it is
    requeued or cancelled)."""
    last_checkpoint_step: int = 0
    last_checkpoint_ms: int | None = None
    started_ms: int | None = None
    requeues: int = 0
    queued_t: float = 0.0
    """When the job (re)entered PD: it is placed at the earliest one tick later, so every job
    is published as PD before R, as squeue would show it."""
    next_state: JobState | None = None
    """A transition due on the next tick (NF/F -> RQ -> PD, CG -> CD)."""
    hold: bool = False
    """Changed between ticks (a command or a drain): keep this state for one publish."""
    acks: list[PendingAck] = field(default_factory=list)
    slowest: list[RankTime] = field(default_factory=list)
    median_ms: float | None = None

    @property
    def running(self) -> bool:
        return self.state is JobState.R

    @property
    def step(self) -> int:
        return int(self.progress + 1e-9)


class Scheduler:
    def __init__(self, world: SimWorld, seed: int, hang_timeout_s: float) -> None:
        self.world = world
        self.rng = random.Random(seed * 7919 + 17)
        self.hang_timeout_s = hang_timeout_s
        self.jobs: dict[str, SimJob] = {}
        self._next_id = 4101
        self._published: dict[str, tuple[object, ...]] = {}
        self._last: dict[str, JobStatus] = {}
        """Each job's newest status, as it went out (``last_statuses``)."""
        self._stepped: dict[str, tuple[tuple[object, ...], int]] = {}
        """Each job's (step, state, requeues) and when it was first published so
        (``JobStatus.step_ts``)."""
        self._acks: list[Ack] = []

    # --- submission and control ----------------------------------------------------------

    def submit(self, *, name: str, user: str, nodes: int, steps: int, checkpoint_every: int,
               step_time_s: float, requeue: bool, t: float) -> SimJob:
        job = SimJob(
            job_id=str(self._next_id), name=name, user=user, nodes_wanted=nodes,
            total_steps=steps, checkpoint_every=checkpoint_every,
            healthy_step_s=max(0.05, step_time_s), requeue=requeue,
            submitted_ms=self.world.wall_ms(t), t=t, queued_t=t,
        )
        self._next_id += 1
        # Per-GPU memory footprint of this model: 60-78 GiB of the 80 (docs/domain.md §1).
        job.fb_mib = [int(self.rng.uniform(61440, 79872)) for _ in range(GPUS)]
        self.jobs[job.job_id] = job
        return job

    def find(self, ref: str) -> SimJob | None:
        """A job by id or by name (the newest of that name)."""
        if ref in self.jobs:
            return self.jobs[ref]
        named = [j for j in self.jobs.values() if j.name == ref]
        return named[-1] if named else None

    def cancel(self, job: SimJob, t: float) -> None:
        if job.state in TERMINAL:
            return
        self._release(job)
        job.state, job.reason, job.next_state = JobState.CA, "cancelled", None

    def hang(self, job: SimJob, t: float, duration_s: float | None) -> None:
        job.hung_until = math.inf if duration_s is None else t + duration_s

    def requeue(self, job: SimJob, t: float, reason: str) -> None:
        """``scontrol requeue``: back to the queue from the last checkpoint."""
        self._release(job)
        job.progress = float(job.last_checkpoint_step)
        job.requeues += 1
        job.state, job.reason, job.next_state = JobState.RQ, reason, JobState.PD
        job.hold = True

    def on_drain(self, node: SimNode, state: DrainState, mode: DrainMode) -> None:
        b = node.binding
        if state is DrainState.DRAINING and mode is DrainMode.NOW and b is not None:
            self.requeue(b.job, self.world.t, f"{node.node_id} drained (now)")

    def command(self, cmd: Command, now_ms: int) -> None:
        """restart_job on ``sched/cmd``: ``accepted`` at once, ``done`` when it runs again."""
        def ack(result: AckResult, reason: str) -> None:
            self._acks.append(Ack(cmd_id=cmd.cmd_id, by="sched", op=cmd.op, result=result,
                                  reason=reason, ts=now_ms))

        if cmd.op is not CommandOp.RESTART_JOB:
            ack(AckResult.REJECTED, f"the scheduler does not do {cmd.op.value}; "
                                    "send it to the node")
            return
        late = expired(cmd, now_ms)
        if late:
            ack(AckResult.REJECTED, late)
            return
        ref = cmd.args.job or cmd.target
        job = self.find(ref)
        if job is None:
            ack(AckResult.REJECTED, f"no job {ref}")
            return
        if job.state in (JobState.CD, JobState.CA):
            ack(AckResult.REJECTED, f"job {job.job_id} is {job.state.value}: nothing to restart")
            return
        if job.state in (JobState.PD, JobState.RQ):
            ack(AckResult.REJECTED, f"job {job.job_id} is already waiting to run")
            return
        ack(AckResult.ACCEPTED,
            f"requeue job {job.job_id} from step {job.last_checkpoint_step}")
        self.requeue(job, self.world.t, f"restart by {cmd.issued_by}")
        job.acks.append(PendingAck(cmd, self.world.t + RESTART_ACK_TIMEOUT_S))

    def take_acks(self) -> list[Ack]:
        acks, self._acks = self._acks, []
        return acks

    # --- the tick ----------------------------------------------------------------------------

    def eligible(self, node: SimNode, t: float) -> bool:
        return (node.binding is None and node.up and node.agent_alive
                and node.drain_state is DrainState.NONE and not node.fatal_reasons(t))

    def step(self, t: float, dt: float) -> None:
        for job in list(self.jobs.values()):
            if job.hold:
                job.hold = False
            elif job.next_state is not None:
                self._transition(job, t)
            elif job.state is JobState.R:
                self._advance(job, t, dt)
        self._place(t)
        for job in self.jobs.values():
            self._answer_restarts(job, t)

    def _transition(self, job: SimJob, t: float) -> None:
        nxt, job.next_state = job.next_state, None
        if nxt is JobState.RQ:
            job.requeues += 1
            job.state, job.next_state = JobState.RQ, JobState.PD
            job.progress = float(job.last_checkpoint_step)
        elif nxt is JobState.PD:
            job.state, job.reason, job.queued_t = JobState.PD, "Resources", t
        elif nxt is JobState.CD:
            self._release(job)
            job.state, job.reason = JobState.CD, ""

    def _advance(self, job: SimJob, t: float, dt: float) -> None:
        job.t = t
        hang = self._hang_reason(job, t)
        if job.state is not JobState.R:
            return  # _hang_reason failed the job outright
        if hang:
            if job.stalled_since is None:
                job.stalled_since = t
            job.stalled = True
            job.reason = hang
            if t - job.stalled_since >= self.hang_timeout_s:
                self._fail(job, JobState.NF,
                           f"NCCL watchdog: collective stalled {t - job.stalled_since:.0f} s "
                           f"({hang})")
            return
        if job.hung_until is not None:
            if t < job.hung_until:
                # Spinning, not failed: Slurm still says R with no reason, the step stops.
                job.stalled, job.stalled_since, job.reason = True, None, ""
                return
            job.hung_until = None
        job.stalled, job.stalled_since, job.reason = False, None, ""
        self._rank_times(job)
        job.progress = min(float(job.total_steps), job.progress + dt / job.step_time_s)
        ck = job.checkpoint_every
        done_ck = int(job.progress + 1e-9) // ck * ck
        if done_ck > job.last_checkpoint_step:
            job.last_checkpoint_step = done_ck
            job.last_checkpoint_ms = self.world.wall_ms(t)
        if job.progress >= job.total_steps:
            job.last_checkpoint_step = job.total_steps
            job.state, job.reason, job.next_state = JobState.CG, "", JobState.CD

    def _hang_reason(self, job: SimJob, t: float) -> str:
        for slot, node in enumerate(job.nodes):
            if not node.up:
                return f"{node.node_id} not responding"
            for g in node.gpus:
                rank = slot * GPUS + g.index
                crash, g.crash = g.crash, None
                if crash is not None and crash[0] == job.job_id:
                    self._fail(job, JobState.F, f"rank {rank} on {node.node_id} gpu{g.index}: "
                                                f"{crash[1]}")
                    return ""
                if not g.present:
                    self._fail(job, JobState.NF,
                               f"rank {rank} on {node.node_id} gpu{g.index}: CUDA error: "
                               "unspecified launch failure (Xid 79)")
                    return ""
                if g.dbe_vol:
                    self._fail(job, JobState.F,
                               f"rank {rank} on {node.node_id} gpu{g.index}: uncorrectable "
                               "ECC error encountered (Xid 48)")
                    return ""
            if len(job.nodes) == 1:
                continue  # its collectives stay inside the node (NVLink): no IB port in them
            for p in node.ports:
                if not p.up_at(t):
                    return f"{node.node_id} {p.dev} link down"
        return ""

    def _fail(self, job: SimJob, state: JobState, reason: str) -> None:
        self._release(job)
        job.state, job.reason = state, reason
        job.stalled, job.stalled_since = False, None
        # Slurm requeues a job whose node failed when it allows requeue; a crash stays FAILED.
        job.next_state = JobState.RQ if state is JobState.NF and job.requeue else None

    def _rank_times(self, job: SimJob) -> None:
        compute0 = job.healthy_step_s * COMPUTE_SHARE
        comm0 = job.healthy_step_s - compute0
        u = self.rng.random
        compute: list[list[float]] = []
        comm: list[list[float]] = []
        for node in job.nodes:
            compute.append([compute0 * node.gpu_slowdown(g) * (0.985 + 0.03 * u())
                            for g in range(GPUS)])
            comm.append([comm0 * node.comm_slowdown(g, ib=len(job.nodes) > 1)
                         * (0.99 + 0.02 * u()) for g in range(GPUS)])
        max_compute = max(max(row) for row in compute)
        max_comm = max(max(row) for row in comm)
        period = max_compute + max_comm
        job.step_time_s = period
        job.comm_frac = max_comm / period
        job.compute_frac = [[c / period for c in row] for row in compute]
        job.rank_time_s = [[c + m for c, m in zip(rc, rm, strict=True)]
                           for rc, rm in zip(compute, comm, strict=True)]
        # Ring all-reduce: every port moves the same bytes per step; time is set by the slowest.
        job.bytes_per_step = COMM_PEAK_BPS * comm0
        flat = [(rt, slot * GPUS + g) for slot, row in enumerate(job.rank_time_s)
                for g, rt in enumerate(row)]
        job.median_ms = statistics.median(rt for rt, _ in flat) * 1000
        top = sorted(flat, key=lambda x: (-x[0], x[1]))[:SLOWEST_PUBLISHED]
        job.slowest = [RankTime(rank=r, node=job.nodes[r // GPUS].node_id,
                                step_time_ms=round(rt * 1000, 1)) for rt, r in top]

    def _place(self, t: float) -> None:
        pending = [j for j in self.jobs.values()
                   if j.state is JobState.PD and j.queued_t < t - 1e-9]
        if not pending:
            return
        free = [n for n in self.world.nodes if self.eligible(n, t)]
        head_blocked = False
        for job in pending:
            if job.nodes_wanted > len(free):
                job.reason = "Priority" if head_blocked else "Resources"
                head_blocked = True
                continue
            chosen, free = free[: job.nodes_wanted], free[job.nodes_wanted:]
            self._start(job, chosen, t)

    def _start(self, job: SimJob, nodes: list[SimNode], t: float) -> None:
        job.nodes = nodes
        for slot, node in enumerate(nodes):
            node.binding = Binding(job, slot)
        job.state, job.reason = JobState.R, ""
        job.t = t
        job.progress_start = job.progress
        job.started_ms = self.world.wall_ms(t)
        job.stalled, job.stalled_since = False, None
        self._rank_times(job)

    def _release(self, job: SimJob) -> None:
        for node in job.nodes:
            if node.binding is not None and node.binding.job is job:
                node.binding = None
        job.nodes = []
        job.stalled, job.stalled_since, job.hung_until = False, None, None
        job.rank_time_s, job.compute_frac, job.slowest = [], [], []

    def _answer_restarts(self, job: SimJob, t: float) -> None:
        if not job.acks:
            return
        keep: list[PendingAck] = []
        for pa in job.acks:
            if job.state is JobState.R:
                result, reason = AckResult.DONE, (
                    f"job {job.job_id} running again from step {job.step} on "
                    f"{len(job.nodes)} nodes")
            elif job.state in (JobState.F, JobState.NF, JobState.CA):
                result, reason = AckResult.FAILED, f"job {job.job_id} {job.state.value}: " \
                                                   f"{job.reason}"
            elif t >= pa.deadline_t:
                result, reason = AckResult.DONE, (
                    f"job {job.job_id} requeued from step {job.last_checkpoint_step}; "
                    f"pending ({job.reason}: needs {job.nodes_wanted} nodes)")
            else:
                keep.append(pa)
                continue
            self._acks.append(Ack(cmd_id=pa.cmd.cmd_id, by="sched", op=pa.cmd.op,
                                  result=result, reason=reason, ts=self.world.wall_ms(t)))
        job.acks = keep

    # --- publishing ---------------------------------------------------------------------------

    def status(self, job: SimJob, t: float) -> JobStatus:
        running = job.state in (JobState.R, JobState.CG)
        # The step's time in this run: a job that waited (or was requeued to its checkpoint)
        # starts its run now, not when it last stood at that step (a review: a job out of a
        # 200 s wait read hung at its start).
        at = (job.step, job.state, job.requeues)
        moved = self._stepped.get(job.job_id)
        if moved is None or moved[0] != at:
            moved = self._stepped[job.job_id] = (at, self.world.wall_ms(t))
        eta = None
        if job.state is JobState.R and not job.stalled:
            eta = round(max(0.0, job.total_steps - job.progress) * job.step_time_s, 1)
        return JobStatus(
            job_id=job.job_id, name=job.name, user=job.user, state=job.state,
            reason=job.reason, nodes=[n.node_id for n in job.nodes],
            nodes_wanted=job.nodes_wanted, gpus_per_node=GPUS,
            step=job.step, total_steps=job.total_steps,
            step_time_ms=round(job.step_time_s * 1000, 1) if running else None,
            median_step_time_ms=round(job.median_ms, 1) if running and job.median_ms else None,
            slowest=job.slowest if running else [],
            checkpoint_every=job.checkpoint_every,
            last_checkpoint_step=job.last_checkpoint_step,
            last_checkpoint_ts=job.last_checkpoint_ms, submitted_ts=job.submitted_ms,
            started_ts=job.started_ms, eta_s=eta, requeues=job.requeues,
            step_ts=moved[1], ts=self.world.wall_ms(t),
        )

    def updates(self, t: float) -> list[JobStatus]:
        """Job statuses to publish: every job whose state, reason or step changed."""
        out: list[JobStatus] = []
        for job in self.jobs.values():
            key = (job.state, job.reason, job.step, len(job.nodes), job.requeues,
                   math.floor(job.step_time_s * 100) if job.running else 0)
            if self._published.get(job.job_id) != key:
                self._published[job.job_id] = key
                st = self._last[job.job_id] = self.status(job, t)
                out.append(st)
        return out

    def last_statuses(self) -> list[JobStatus]:
        """Every job's newest status as it was sent, its ``ts`` unchanged: what a reconnect
        publishes again (a broker that lost its retained ones). Stamped afresh, a job hung
        since 00:47 read "no step since 00:56", the broker's restart, to a console judging
        by the scheduler's clock (a live drive)."""
        return list(self._last.values())
