"""Interruption accounting, as the large training reports publish it: every job interruption
with its cause (GPU, HBM/ECC, network, host, software, operator), the GPU-hours lost since the
job's last checkpoint, and the effective training time ratio (productive GPU-hours over all
GPU-hours the jobs held).

Fed by the console session on every tick from the job statuses and the fleet state; the store
keeps the results (``fleetdeck report``)."""

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from fleetdeck.console.commands import work_at_risk_s
from fleetdeck.console.health import Finding
from fleetdeck.console.judgements import (
    NO_REASON,
    held_only_since,
    hung_when_it_ended,
    job_reason,
)
from fleetdeck.console.state import FleetState, NodeState, reason_words
from fleetdeck.hostlist import HostlistError, compress, expand
from fleetdeck.protocol.messages import DrainState, JobState, JobStatus

CAUSES = ("gpu", "hbm_ecc", "network", "host", "software", "operator")
"""In the order a cause wins when the nodes of an interrupted job show several."""
CAUSE_LABELS = {"gpu": "GPU", "hbm_ecc": "HBM/ECC"}
"""How prose names a cause (the README's words); JSON and the store keep the key."""


def cause_label(cause: str) -> str:
    """A cause as a sentence says it: "interrupted: hbm_ecc on gpu0059" read as a key (a
    newcomer's run)."""
    return CAUSE_LABELS.get(cause, cause)
INTERRUPTION = "interruption"
"""The kind of an interruption's line in the timeline and in ``fleetdeck events``."""
_ECC_XIDS = frozenset({48, 63, 64, 94, 95})
_XID = re.compile(r"XID (\d+)")
_ECC_RULES = frozenset({"G4", "G5", "G6", "G7", "G8"})


def finding_cause(f: Finding) -> str:
    """The interruption class of one finding (docs/architecture.md, "Interruptions")."""
    if f.rule in _ECC_RULES:
        return "hbm_ecc"
    if f.rule in ("G2", "G3"):
        m = _XID.search(f.text)
        if m and int(m.group(1)) in _ECC_XIDS:
            return "hbm_ecc"
        return "gpu"
    if f.rule.startswith("G"):
        return "gpu"
    if f.rule.startswith(("N", "F")):
        return "network"
    if f.rule.startswith("H"):
        return "host"
    return "software"


def named_cause(st: NodeState) -> str | None:
    """What a node the job's reason names (its rank died there) contributes once no
    drain-class finding showed: as ``node_cause``, and a warning counts too there (XID 94, a
    contained ECC error, kills the rank it hits and leaves the node only degraded)."""
    cause = node_cause(st)
    if cause is not None:
        return cause
    causes = {finding_cause(f) for f in st.all_findings if f.severity.value == "warn"}
    return next((c for c in CAUSES if c in causes), None)


_REASON_XID = re.compile(r"\bXid (\d+)\b")
_OPERATOR_RESTART = re.compile(r"^restart by \S")
"""The scheduler's reason for a requeue an operator asked for (``restart-job``: "restart by
alice@host")."""
_APP_XIDS = frozenset({13, 31, 43, 45})
"""The application's own faults and the driver's clean-up after them (docs/domain.md §4)."""


def reason_cause(reason: str) -> str | None:
    """The class of the XID a crashed rank's reason ends with (``… (Xid 13)``), if any."""
    m = _REASON_XID.search(reason)
    if m is None:
        return None
    code = int(m.group(1))
    if code in _APP_XIDS:
        return "software"
    return "hbm_ecc" if code in _ECC_XIDS else "gpu"


def _live_fault(st: NodeState | None, agent_only: bool = False) -> bool:
    """A node with a fault now: a cause other than the operator's, not only N2's hour."""
    if st is None:
        return False
    cause = node_cause(st, agent_only)
    return cause is not None and cause != "operator" and held_only_since(st) is None


DRAINED_NEAR_S = 300.0
"""How long before an interruption was seen a command's drain of one of the job's nodes is
taken for what ended the run (a broker outage between the two included)."""


def _drained_near(st: NodeState | None, at: float) -> bool:
    if (st is None or st.drain.state is DrainState.NONE or not st.drain.cmd_id
            or st.drain.since_ts is None):
        return False
    since = st.drain.since_ts / 1000
    return at - DRAINED_NEAR_S <= since <= at + 5.0


def node_cause(st: NodeState, agent_only: bool = False) -> str | None:
    """What a node of an interrupted job contributes: None when it looks healthy.

    A node drained by a command is the operator's only when nothing else is wrong with it: the
    drain (now) of a node with a flapping link is the network's interruption, carried out by
    the operator (a newcomer's report booked the flap's lost hours as "operator").

    ``agent_only``: the node's agent fell silent while the run stepped on (``job_stepping``):
    the agent died, not the node, so its silence is no cause (an operator's restart that moved
    the job off it was booked "host on gpu0038": a 3 a.m. drive)."""
    causes = {finding_cause(f) for f in st.all_findings if f.severity.value == "drain"
              and not (agent_only and f.rule.startswith("H"))}
    if st.behind_switch and not st.behind_recovered:
        causes.add("network")  # its findings were handed to the switch, still the fabric
    # Behind a switch that recovered, its link errors of the hour are past: a node death or
    # an XID 94 there was booked "network" for the hour after a switch blip (an SRE drill).
    if st.online is False and not agent_only:
        causes.add("host")
    for cause in CAUSES:
        if cause in causes:
            return cause
    if st.drain.state is not DrainState.NONE and st.drain.cmd_id:
        return "operator"
    return None


def _switches(behind: str) -> set[str]:
    """``leaf02-r[1,5]`` (``NodeState.behind_switch``, compressed) as its switch names."""
    if not behind:
        return set()
    try:
        return set(expand(behind))
    except HostlistError:
        return {behind}


def _stepping_by_job(state: FleetState) -> dict[str, set[str]]:
    """Job id -> its nodes whose agent is silent while it steps on (``job_stepping``); such a
    node is silent, so among the not-ok ones: no pass over every job's nodes."""
    out: dict[str, set[str]] = {}
    nodes = state.nodes
    for n in state.not_ok:
        st = nodes.get(n)
        if st is not None and st.job_stepping:
            out.setdefault(st.job_stepping, set()).add(n)
    return out


@dataclass(frozen=True)
class Interruption:
    job_id: str
    ts: float
    cause: str
    nodes: tuple[str, ...]
    """The job's nodes that carried the cause (empty: none looked unhealthy)."""
    gpus: int
    lost_gpu_hours: float
    detail: str
    in_place: str = ""
    """Restarted in place (``restarted_in_place``): how, for the timeline's "runs again" line
    (the job already runs; its start may be the old run's). Not stored."""
    unwatched: bool = False
    """Found by a console or collector started after it, from the store's run (``recall``):
    ``ts`` is the scheduler's word for it (the new run's start), no run's end was seen. Not
    stored."""

    def as_json(self) -> dict[str, object]:
        return {"job_id": self.job_id, "ts": self.ts, "cause": self.cause,
                "nodes": list(self.nodes), "gpus": self.gpus,
                "lost_gpu_hours": round(self.lost_gpu_hours, 3), "detail": self.detail}


@dataclass
class _Seen:
    state: JobState
    requeues: int
    nodes: list[str]
    """The nodes of the current run (the blame for its interruption goes to them)."""
    job: JobStatus
    """The run's last running status (its checkpoint says what an interruption loses)."""
    latest: JobStatus
    interrupted: bool = False
    """An interruption of this run was recorded (NF then RQ is one interruption)."""
    recalled: bool = False
    """Put back from the store (``InterruptionTracker.recall``): the next status seen may
    follow an interruption that happened while no collector ran."""
    queued_at: float = 0.0
    """When it was last seen going back to PD (``observe``'s ``queued_again``)."""
    agent_only: set[str] = field(default_factory=set)
    """Nodes of the run whose agent fell silent while the run stepped on (``node_cause``)."""


@dataclass(frozen=True)
class _Pending:
    """An interruption whose cause is still being looked for (a snapshot of its run)."""

    nodes: tuple[str, ...]
    run: JobStatus
    was: JobState
    job: JobStatus
    at: float
    unwatched: bool = False
    """It happened while no collector ran (seen on a restart, ``recall``)."""
    found_at: float | None = None
    """When it was seen, where that is not ``at`` (``unwatched``): the cause is looked for
    from then."""
    agent_only: frozenset[str] = frozenset()
    """``_Seen.agent_only`` of the run (the console clears ``job_stepping`` once the job
    stops)."""


RUN_KEPT_EVERY_S = 60.0
"""A running job's run (its checkpoint) is written to the store at most this often unless its
state, requeues or nodes change."""
MAX_UNWATCHED_S = 86400.0
"""The longest gap without a collector whose GPU-hours a job recalled from the store is
counted to have held (``InterruptionTracker.recall``)."""
CLASSIFY_WITHIN_S = 10.0
"""A job often fails before its node's telemetry shows why (the NCCL watchdog, an XID the
agent reports a sample later): the cause is looked for this long before it is 'software'."""

@dataclass
class InterruptionTracker:
    """Job status changes -> interruptions; running jobs -> GPU-seconds held."""

    jobs: dict[str, _Seen] = field(default_factory=dict)
    gpu_seconds: float = 0.0
    """GPU-seconds held by running jobs since the last ``take`` (ETTR's denominator)."""
    held_gpu_seconds: float = 0.0
    """GPU-seconds held by running jobs over the whole session (never taken)."""
    last_tick: float | None = None
    started: float | None = None
    """When the tracker first observed the fleet (what a session-only report covers)."""
    found: list[Interruption] = field(default_factory=list)
    pending: list[_Pending] = field(default_factory=list)
    total: list[Interruption] = field(default_factory=list)
    """Every interruption this session saw (bounded), for summaries without a store."""
    booked: int = 0
    """How many this session booked: it only goes up (``total`` is cut to its last 1,000)."""
    changed_runs: set[str] = field(default_factory=set)
    """Jobs whose run (state, requeues, nodes, last running status) changed since
    ``take_runs``: the store keeps each job's so that a restarted collector sees an
    interruption that happened while none ran (``recall``)."""

    replaced: dict[str, float] = field(default_factory=dict)
    """Jobs whose id another job took (``_another_job``), with when: an interruption of the
    one before, booked then or later, waits for no rerun (``ConsoleSession._rerun``)."""
    kept_at: dict[str, float] = field(default_factory=dict)
    """When each job's run was last handed to the store (``take_runs``)."""
    gap_minutes: list[tuple[int, float]] = field(default_factory=list)
    """GPU-seconds held while no collector ran, per minute (``take``)."""

    def recall(self, run: JobStatus, state: JobState, requeues: int, nodes: list[str]) -> None:
        """A job's run as the store last kept it (a restarting console or collector): a job
        requeued or failed while no collector ran was never reported ("report" undercounted
        after a collector's kill -9, an SRE drill); compared with the first status seen now,
        it is. A run kept as failed had its interruption recorded: its requeue is not another
        one (NF then RQ is one)."""
        if run.job_id not in self.jobs:
            self.jobs[run.job_id] = _Seen(state, requeues, list(nodes), run, run,
                                          interrupted=state in (JobState.NF, JobState.F),
                                          recalled=True)

    def take_runs(self, now: float) -> list[tuple[str, JobState, int, list[str], JobStatus]]:
        """(job id, state, requeues, the run's nodes, the run's last running status) of each
        job whose run changed since the last call."""
        out = [(j, seen.state, seen.requeues, seen.nodes, seen.job)
               for j in sorted(self.changed_runs) if (seen := self.jobs.get(j)) is not None]
        for j in self.changed_runs:
            self.kept_at[j] = now
        self.changed_runs.clear()
        return out

    @staticmethod
    def _when_unwatched(seen: _Seen, job: JobStatus) -> float:
        """When an interruption seen after a gap happened, as the scheduler's status says:
        the requeued run's start, else the status's own time (not the restart's)."""
        # A new start, requeued or restarted in place: the run that ended ended by then.
        new_run = (job.requeues > seen.requeues
                   or (job.started_ts or 0) > (seen.latest.started_ts or 0))
        then = (job.started_ts if new_run and job.started_ts else job.ts) / 1000
        return max(then, seen.latest.ts / 1000)

    def _unwatched(self, seen: _Seen, job: JobStatus, interrupted: bool, now: float) -> None:
        """The GPU-seconds a recalled running job held while no collector ran, from its last
        status then to its interruption (or now), per minute: else the gap's lost GPU-hours
        stood against none held, and the report's ratio read 0 %."""
        if seen.state is not JobState.R:
            return
        start = seen.latest.ts / 1000
        end = (self._when_unwatched(seen, job) if interrupted
               else job.ts / 1000 if job.state is not JobState.R else now)
        end = min(now, end, start + MAX_UNWATCHED_S)
        gpus = len(seen.nodes) * seen.job.gpus_per_node
        t = start
        while t < end:
            upto = min(end, (t // 60 + 1) * 60)
            self.gap_minutes.append((int(t // 60), (upto - t) * gpus))
            self.held_gpu_seconds += (upto - t) * gpus
            t = upto

    def observe(self, state: FleetState, now: float,
                passed: Sequence[JobStatus] = ()) -> None:
        """``passed``: job statuses this tick's replaced (``Batch.jobs_passed``), in order."""
        if self.last_tick is not None:
            dt = max(0.0, min(now - self.last_tick, 60.0))
            held = dt * sum(len(j.nodes) * j.gpus_per_node
                            for j in state.jobs.values() if j.state is JobState.R)
            self.gpu_seconds += held
            self.held_gpu_seconds += held
        self.last_tick = now
        if self.started is None:
            self.started = now
        stepping: dict[str, set[str]] | None = None

        def see(job_id: str, job: JobStatus, when: float) -> None:
            nonlocal stepping
            seen = self.jobs.get(job_id)
            if seen is None:
                self.jobs[job_id] = _Seen(job.state, job.requeues, list(job.nodes), job, job)
                self.changed_runs.add(job_id)
                return
            if seen.latest is job:
                return
            if _another_job(seen.latest, job):
                # Another job under the id: a scheduler that lost its state (a simulator
                # restarted) counts from its first id again. A drill's new 4104, one node at
                # step 0, was booked as the old 4104's interruption 5 min after that one was
                # withdrawn, its 32 GPUs' work lost "0s after its run ended".
                self.jobs[job_id] = _Seen(job.state, job.requeues, list(job.nodes), job, job)
                self.changed_runs.add(job_id)
                self.replaced[job_id] = when
                return
            was = (seen.state, seen.requeues, seen.nodes)
            # Back in the queue with no requeue counted, then running from an earlier step or
            # a new start: submitted anew under its id. Booked once it runs again, dated when
            # it was seen pending: a suspended job a bridge reports as PD comes back as it was
            # and loses nothing (a review).
            queued_again = (seen.state is JobState.PD and restarted_in_place(seen.job, job))
            interrupted = (job.requeues > seen.requeues
                           or (job.state in (JobState.NF, JobState.F)
                               and seen.state is JobState.R)
                           or restarted_in_place(seen.latest, job) or queued_again)
            if seen.recalled:
                self._unwatched(seen, job, interrupted, now)
            if interrupted and not seen.interrupted and (seen.state is not JobState.PD
                                                         or queued_again):
                at = (seen.queued_at or when) if queued_again else when
                if seen.recalled:
                    at = self._when_unwatched(seen, job)
                self.pending.append(_Pending(tuple(seen.nodes), seen.job, seen.state, job, at,
                                             seen.recalled, now, frozenset(seen.agent_only)))
                seen.interrupted = True
            seen.recalled = False
            if job.state is JobState.PD and seen.state is not JobState.PD:
                seen.queued_at = when
            seen.state, seen.requeues, seen.latest = job.state, job.requeues, job
            if job.state is JobState.R and job.nodes:
                # Running again (or still): a new run, blamed on its own nodes next time.
                # As at its last running status: the console clears job_stepping once the job
                # stops, before the interruption is classified.
                if stepping is None:
                    stepping = _stepping_by_job(state)
                seen.agent_only = stepping.get(job_id, set())
                seen.nodes, seen.job, seen.interrupted = list(job.nodes), job, False
            # The store keeps a run when it changes, and its checkpoint once a minute (a
            # status comes every step: rewriting a 4,096-node job's run twice a second).
            if ((seen.state, seen.requeues, seen.nodes) != was
                    or now - self.kept_at.get(job_id, float("-inf")) >= RUN_KEPT_EVERY_S):
                self.changed_runs.add(job_id)

        # What a tick's later status replaced first, in order: R, NF, RQ, PD and R again
        # within one coarse tick is an interruption all the same.
        # A replaced status is timed by its scheduler's clock (at most now), not by the tick.
        for job in passed:
            see(job.job_id, job, min(now, job.ts / 1000))
        for job_id, job in state.jobs.items():
            see(job_id, job, now)
        still: list[_Pending] = []
        for p in self.pending:
            seen_at = p.at if p.found_at is None else p.found_at
            if not self._record(state, p, now, final=now - seen_at >= CLASSIFY_WITHIN_S):
                still.append(p)
        self.pending = still

    def _record(self, state: FleetState, p: _Pending, now: float, final: bool) -> bool:
        job = p.job
        by_cause: dict[str, list[str]] = {}
        # A node whose agent died while the run stepped on is no live fault of an operator's
        # restart (it moved the job off it); in any other interruption its silence may be the
        # node's own death, which the scheduler reports the same way (a replayed two days
        # booked node deaths as software when it was taken for an agent's).
        if _OPERATOR_RESTART.match(job.reason) and not any(
                _live_fault(state.nodes.get(n), n in p.agent_only) for n in p.nodes):
            # An operator's restart of a job no node was failing: the operator's, not that of
            # a leftover finding (N2's hour after a flap that recovered booked a restart of a
            # job stepping at full speed as the network's: a 3 a.m. drive) -- unless the job
            # had stopped stepping: the hang's, which the restart only ended.
            hung = hung_when_it_ended(state, job.job_id, p.at)
            by_cause["software" if hung else "operator"] = []
        # The scheduler's reason names the node whose rank died ("rank 8 on gpu0011 …"): its
        # cause wins over a leftover finding elsewhere in the run (a 24 h carrier-loss flag
        # on another node blamed XID 79 crashes on the network). Until its own cause shows,
        # wait; only at the end fall back to the run's other nodes.
        words = reason_words(job.reason)
        # "restart by root@gpu0011" names who restarted it, not where a rank died.
        named = [] if by_cause else [n for n in p.nodes if n in words]
        # The XID the reason ends with is what killed the rank: its class wins on the node it
        # names once it shows there, over another fault of that node that showed first (an
        # ECC DBE with a link flap on one node was booked to the network: a fault drill).
        why = reason_cause(job.reason)
        for node in named:
            st = state.nodes.get(node)
            if st is not None and why in ("gpu", "hbm_ecc"):
                if any(finding_cause(f) == why for f in st.all_findings):
                    by_cause.setdefault(why, []).append(node)
                    continue
                if not final:
                    return False
            cause = node_cause(st) if st is not None else "host"
            if cause is not None:
                by_cause.setdefault(cause, []).append(node)
        if named and not by_cause:
            if not final:
                return False
            # No drain-class finding came where the rank died: a warning there (XID 94 kills
            # the rank and leaves the node degraded), else the reason's XID (13: the
            # application's bug), before any other node of the run takes the blame.
            for node in named:
                st = state.nodes.get(node)
                if st is not None and (cause := named_cause(st)) is not None:
                    by_cause.setdefault(cause, []).append(node)
            if not by_cause and why is not None:
                by_cause[why] = named
        # No node named: a node of the run drained by a command just before is what requeued
        # it (a drain --now), over faults elsewhere in the run that it ran with: after a
        # broker blip hid the requeue's reason, an operator's drain was booked to the network
        # of two nodes failing for an hour under the job (an SRE drill).
        drained = [n for n in p.nodes if _drained_near(state.nodes.get(n), p.at)]
        for node in () if by_cause else (drained or p.nodes):
            st = state.nodes.get(node)
            cause = node_cause(st) if st is not None else "host"
            if cause is not None:
                by_cause.setdefault(cause, []).append(node)
        if not by_cause and not final:
            return False
        cause = next((c for c in CAUSES if c in by_cause), "software")
        gpus = len(p.nodes) * p.run.gpus_per_node
        since = work_at_risk_s(p.run, p.at)
        if since is not None and p.unwatched and p.run.checkpoint_every and p.run.step_time_ms:
            # Its checkpoints went on while no collector ran: it lost at most one interval's
            # work, not everything since the checkpoint the store last saw (a job kept at step
            # 5060 and back at 60 eight hours later was booked 131 GPU-h: a review).
            since = min(since, p.run.checkpoint_every * p.run.step_time_ms / 1000)
        lost = 0.0 if since is None else gpus * since / 3600
        what = job_reason(job) or job.state.value
        in_place, was = "", p.was.value
        if restarted_in_place(p.run, job):
            moved = f"step {p.run.step} -> {job.step}" + (
                f"; {job_reason(job)}" if job_reason(job) else "")
            if p.was is JobState.PD:
                was, what = "R -> PD", f"{QUEUED_AGAIN}: {moved}"
            else:
                in_place = f"{IN_PLACE}: step {p.run.step} -> {job.step}"
                what = f"{IN_PLACE}: {moved}"
        if p.unwatched:
            # "R -> R (R)" said nothing: what changed while no one watched is the requeue.
            again = job.requeues - p.run.requeues
            what = (f"requeued {again}x" if again > 0 else what) + " while no collector ran"
        blamed = by_cause.get(cause, [])
        if cause == "network":
            # A failing switch stops every rank behind it: the interruption named the one node
            # the scheduler's reason happened to name (a 3 a.m. drive). All of the run's nodes
            # behind it, and the switch in the detail.
            switches = {sw for n in blamed
                        if (st := state.nodes.get(n)) is not None and st.behind_switch
                        and not st.behind_recovered for sw in _switches(st.behind_switch)}
            if switches:
                # The node the reason named first: it is what `interruption_text` shows.
                blamed = blamed + [n for n in p.nodes if n not in blamed
                                   and (st := state.nodes.get(n)) is not None
                                   and switches & _switches(st.behind_switch)]
                what += f"; switch {compress(sorted(switches))}"
        it = Interruption(job.job_id, p.at, cause, tuple(blamed), gpus, lost,
                          f"{was} -> {job.state.value} ({what})", in_place, p.unwatched)
        self.found.append(it)
        self.total.append(it)
        self.booked += 1
        del self.total[:-1000]
        return True

    def take(self, now: float) -> tuple[list[Interruption], list[tuple[int, float]]]:
        """Interruptions and GPU-seconds held, per minute, since the last call (for the
        store): this tick's in ``now``'s minute, a gap's in its own minutes."""
        out, seconds = self.found, self.gap_minutes
        if self.gpu_seconds:
            seconds.append((int(now // 60), self.gpu_seconds))
        self.found, self.gpu_seconds, self.gap_minutes = [], 0.0, []
        return out, seconds


_DETAIL = re.compile(r"^(\S+) -> (\S+) \((.*)\)$")


def read_detail(detail: str) -> str:
    """An interruption's detail as stored. Rows written before Slurm's placeholder reasons were
    dropped (``job_reason``) say "R -> PD (None)": read as the state, as new rows word it."""
    m = _DETAIL.match(detail)
    if m is None or m.group(3).strip().lower() not in NO_REASON:
        return detail
    return f"{m.group(1)} -> {m.group(2)} ({m.group(2)})"


QUEUED_AGAIN = "queued again without a requeue"
"""How an interruption's detail says the job went back to PD and ran anew, no requeue counted."""
UNWATCHED = "while no console or collector ran"
"""How the timeline says an interruption was found after a gap (``Interruption.unwatched``)."""
IN_PLACE = "restarted without a requeue"
"""How an interruption's detail says the job was restarted in place (``restarted_in_place``)."""


def _another_job(before: JobStatus, job: JobStatus) -> bool:
    """Whether ``job`` is not the job ``before`` was, though under its id: another name or
    user (a job's own restart, requeue or resubmission keeps both). Unsaid (empty) on either
    side, the same job."""
    return ((bool(before.name) and bool(job.name) and before.name != job.name)
            or (bool(before.user) and bool(job.user) and before.user != job.user))


def restarted_in_place(before: JobStatus, job: JobStatus) -> bool:
    """Running again from an earlier step (``before``: its last running status) with no requeue
    counted: its launcher restarted it inside its allocation (torchrun's --max-restarts), or
    its scheduler came back with it anew (a simulator restarted under a running job went from
    step 127 to 1, or through PD, and nothing was said or booked: a 3 a.m. drive, a drill).
    Either way its work since its checkpoint is lost."""
    if before.state is not JobState.R or job.requeues != before.requeues:
        return False
    # A bridge may leave ``step`` out of a status sent for another change (it reads 0): a
    # step back to 0 counts only with a new start.
    return (job.state is JobState.R and job.step < before.step
            and (job.step > 0 or (job.started_ts or 0) > (before.started_ts or 0)))


def interruption_text(job_id: str, cause: str, nodes: Sequence[str], lost_gpu_hours: float) -> str:
    """One interruption as the timeline and ``events --kind interruption`` word it."""
    return (f"job {job_id} interrupted: {cause_label(cause)}"
            + (f" on {','.join(nodes[:4])}" + (f" (+{len(nodes) - 4})" if len(nodes) > 4 else "")
               if nodes else "")
            # "since its checkpoint" of a job that had none read wrong (a newcomer's run).
            + f", {lost_gpu_hours:.1f} GPU-h of work lost")


def report(interruptions: list[dict[str, object]], gpu_hours: float) -> dict[str, object]:
    """By cause, lost GPU-hours and the effective training time ratio over a window."""
    by_cause: dict[str, dict[str, float]] = {c: {"count": 0, "lost_gpu_hours": 0.0}
                                             for c in CAUSES}
    lost = 0.0
    for it in interruptions:
        row = by_cause.setdefault(str(it["cause"]), {"count": 0, "lost_gpu_hours": 0.0})
        row["count"] += 1
        hours = float(it["lost_gpu_hours"])  # type: ignore[arg-type]
        row["lost_gpu_hours"] = round(row["lost_gpu_hours"] + hours, 3)
        lost += hours
    ettr = None if gpu_hours <= 0 else max(0.0, (gpu_hours - lost) / gpu_hours)
    return {"interruptions": len(interruptions), "by_cause": by_cause,
            "lost_gpu_hours": round(lost, 3), "job_gpu_hours": round(gpu_hours, 3),
            "effective_training_time_ratio": None if ettr is None else round(ettr, 4)}
