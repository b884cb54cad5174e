"""Operator commands: blast radius before, lifecycle after.

A request (drain, resume, restart a job) becomes one protocol ``Command`` per target, each with
its own ``cmd_id``. Each target goes ``requested -> acknowledged -> done | rejected | failed |
timed_out``. "Done" is never the agent's word alone: a drain is done when the node's retained
status says DRAINED for this command, a resume when the status says the node is back in service,
a job restart when the job's status shows it was requeued. The tracker is pure (no MQTT, no clock
of its own): the caller publishes ``request.commands()`` and feeds it acks and the fleet state on
every tick, exactly like the rest of the console.
"""

import dataclasses
import itertools
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from fleetdeck.console.audit import UNKNOWN, AuditRecord
from fleetdeck.console.health import Severity, Verdict
from fleetdeck.console.judgements import (
    drain_now_advised,
    failed_job,
    failed_under_job,
    holding_job,
    job_reason,
    never_fits,
    not_stepping,
    not_stepping_text,
    own_job,
    resume_ends_failure,
    scheduler_down,
    shown_findings,
    straggler,
)
from fleetdeck.console.state import STALE_INTERVALS, FleetState, NodeState
from fleetdeck.errors import UserError
from fleetdeck.hostlist import HostlistError, compress, expand
from fleetdeck.protocol import codec
from fleetdeck.protocol.ids import InvalidId, validate_id
from fleetdeck.protocol.messages import (
    NOT_DRAINED,
    NOT_SAVED,
    Ack,
    AckResult,
    Command,
    CommandArgs,
    CommandOp,
    DrainMode,
    DrainState,
    JobState,
    JobStatus,
)
from fleetdeck.protocol.topics import Kind

ACK_TIMEOUT_S = 10.0
"""No ack within this long: the agent is gone, or the broker dropped the command."""
WAITING_TO_RUN = "; waiting for it to run"
"""How a restart whose job was requeued but is still pending ends its detail."""
EFFECT_TIMEOUT_S = 60.0
"""Acknowledged, but the effect never showed in telemetry within this long."""
TYPED_CONFIRM_ABOVE = 8
"""More targeted nodes than this needs a typed confirmation."""
RUNNING = frozenset({JobState.R, JobState.CG})


class Phase(StrEnum):
    REQUESTED = "requested"
    ACKNOWLEDGED = "acknowledged"
    DONE = "done"
    REJECTED = "rejected"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    ABANDONED = "abandoned"
    """The issuer stopped following it (interrupted, closed): the outcome is unknown."""
    SUPERSEDED = "superseded"
    """A drain undone before it took effect: the node was resumed while it drained."""

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


DRAINING = "DRAINING"
"""A drain target's detail once its node's status says DRAINING: acknowledged, its jobs still
running there (docs/domain.md)."""

TERMINAL = frozenset({Phase.DONE, Phase.REJECTED, Phase.FAILED, Phase.TIMED_OUT,
                      Phase.ABANDONED, Phase.SUPERSEDED})
BAD = (Phase.REJECTED, Phase.FAILED, Phase.TIMED_OUT, Phase.ABANDONED, Phase.SUPERSEDED)


# --- blast radius -------------------------------------------------------------------------------


def parse_targets(hostlist: str) -> list[str]:
    """The nodes a drain's or a resume's hostlist names, for every front end (the CLI's
    arguments, the TUI's ``:drain``): a :class:`UserError` of one sentence for a hostlist that
    names none, or a name no node can have. The TUI's ``:drain gpu+`` read "unknown nodes"
    where the CLI said why (a CLI fuzz round). Words and commas as the CLI's arguments are
    joined (``gpu[0001, 0003]``, ``gpu0001 gpu0002``): the TUI's ``:drain gpu[0001, 0003]``
    reached here as ``gpu[0001,,0003]`` and was refused ("empty range"), where ``fleetdeck
    drain 'gpu[0001, 0003]'`` drained both."""
    hostlist = re.sub(",+", ",", ",".join(hostlist.split())).strip(",")
    # Escaped: what was typed goes back to the terminal, an ESC in it too (an audit).
    shown = hostlist.encode("unicode_escape").decode("ascii")
    try:
        names = expand(hostlist)
    except HostlistError as err:
        # The whole sentence escaped: it may quote one item of the list ('1-\x1b' is not a
        # number), which replacing the whole list did not reach. Its own words are ASCII.
        said = str(err).encode("unicode_escape").decode("ascii")
        raise UserError(f"bad hostlist '{shown}': {said}") from None
    if not names:
        raise UserError("the hostlist names no nodes")
    # A name no node can have ('gpu+', 'gpu#': MQTT wildcards; a '/'; an ESC) waited for the
    # fleet's births and then read "unknown node(s) gpu+" (an audit): said at once, as the
    # job id of restart-job is.
    for name in names:
        try:
            validate_id(name, "node name")
        except InvalidId as err:
            raise UserError(f"bad hostlist '{shown}': {err}") from None
    return names


def gpu_hours_said(hours: float) -> str:
    """GPU-hours to one decimal, "<0.1" for some work under it: "checkpoint 1m50s ago, 0.0
    GPU-h of work since then" read as nothing to lose (a 3 a.m. drive)."""
    return "<0.1" if 0 < hours < 0.05 else f"{hours:.1f}"


@dataclass(frozen=True)
class JobImpact:
    job_id: str
    name: str
    user: str
    state: str
    nodes_total: int
    nodes_targeted: int
    gpus: int
    since_checkpoint_s: float | None
    """Seconds of work since the job's last checkpoint (None: unknown)."""
    gpu_hours_at_risk: float
    hostlist: str
    checkpointed: bool = True
    """The job has written a checkpoint (else ``since_checkpoint_s`` counts from its start, and
    a requeue starts it over from step 0)."""
    eta_s: float | None = None
    """How long the job has left at its pace, as its scheduler says (None: not said)."""
    resumed_s: float | None = None
    """Seconds since this run started from its checkpoint, where it started after writing
    it (requeued or restarted from it): the work at risk counts from then (None: it did not)."""

    def line(self) -> str:
        since = "?" if self.since_checkpoint_s is None else fmt_duration(self.since_checkpoint_s)
        who = f" {self.user}" if self.user else ""
        if not self.nodes_total:
            # "0 nodes, 0 GPUs … 0.0 GPU-h since it started" of a failed job read as "no work
            # lost": true of the restart alone (a 3 a.m. drive on 1,024 nodes).
            lost = (" (its run's work was lost when it failed)"
                    if self.state in ("F", "NF", "TO") else "")
            return (f"job {self.job_id}{who} ({self.name or '-'}, {self.state}): holds no "
                    f"nodes now: the restart loses nothing more{lost}")
        head = (f"job {self.job_id}{who} ({self.name or '-'}, {self.state}): "
                f"{self.nodes_total} node{'s' if self.nodes_total != 1 else ''}, "
                f"{self.gpus} GPUs, ")
        risk = gpu_hours_said(self.gpu_hours_at_risk)
        if not self.checkpointed:
            # Never say "checkpoint … ago" of a job that has none (found in a UX audit).
            return (f"{head}no checkpoint yet: a requeue restarts it from step 0, "
                    f"{risk} GPU-h since it started")
        # "…GPU-h since it" read as a sentence cut off at the dialog's edge. Its time left:
        # a drain --now requeued a job 5 min from its end, where letting it finish was the
        # obvious choice had the dialog said so (a jobs audit).
        left = "" if self.eta_s is None else f"; ends in {fmt_duration(self.eta_s)} at its pace"
        if self.resumed_s is not None:
            return (f"{head}checkpoint {since} ago, resumed from it "
                    f"{fmt_duration(self.resumed_s)} ago: {risk} GPU-h of "
                    f"work since{left}")
        return (f"{head}checkpoint {since} ago, {risk} GPU-h of work since then{left}")


@dataclass(frozen=True)
class BlastRadius:
    op: CommandOp
    mode: DrainMode
    targets: list[str]
    target_lines: list[str]
    """One line per target: ``gpu0012 (job 41, 8 GPUs)``."""
    gpus: int
    jobs: list[JobImpact]
    nodes_affected: int
    """Targets plus every other node of the affected jobs (ranks that stop with them)."""
    gpus_affected: int
    gpu_hours_at_risk: float
    """GPU-hours of work since the last checkpoint that the action throws away (0 when jobs are
    left to finish)."""
    free_gpus_after: int
    notes: list[str] = field(default_factory=list)
    drained: int = 0
    """Of the targets, how many are drained or draining."""
    draining: int = 0
    """Of those, how many are DRAINING: their jobs still hold their GPUs, so a resume only
    cancels the drain and gives nothing back (docs/domain.md: DRAINING while the jobs run)."""
    gpus_failed: int = 0
    """Of a drain's ``gpus``, those status counts failed already (``GpuUse.failed``): the
    scheduler still gives them work until the drain, but "free GPUs left" has them out."""
    gpus_out: int = 0
    """And those status counts out already: on a failed, offline or stale node
    (``GpuUse.out``; a silent agent's GPUs may be sound, and idle in the scheduler)."""
    unheard: list[str] = field(default_factory=list)
    """Nodes of the cluster, not targets, with no telemetry heard yet (``NodeState.waiting``),
    idle and in service by what is known: "free GPUs left" cannot count theirs. The CLI waits
    for its own nodes' first telemetry only, not the whole cluster's (console/cli/commands.py,
    ``SAMPLES_WAIT_S``)."""
    subject: str = ""
    """What a restart targets when it holds no nodes (``job 4106 (F), on no nodes now; it
    failed on gpu0059``): the dialog's "Targets (0):" had nothing under it (a newcomer's
    run)."""

    @property
    def hostlist(self) -> str:
        return compress(self.targets)

    @property
    def needs_typed_confirmation(self) -> bool:
        return len(self.targets) > TYPED_CONFIRM_ABOVE

    def summary(self) -> str:
        nodes = f"{len(self.targets)} node{'s' if len(self.targets) != 1 else ''}"
        if self.op is CommandOp.RESTART_JOB:
            # The targets are the job's nodes: "1 job on" them would say it twice.
            if not self.targets:
                return "holds no nodes now: the restart loses nothing more"
            return (f"{nodes}, {self.gpus} GPUs requeued, "
                    f"{gpu_hours_said(self.gpu_hours_at_risk)} GPU-h since last checkpoint lost")
        if self.op is CommandOp.RESUME:
            return self._resume_summary(nodes)
        parts = [nodes, f"{self.gpus} GPUs"]
        said = []
        if self.op is CommandOp.DRAIN and self.drained:
            one = self.drained == 1
            said.append(f"{self.drained} {'is' if one else 'are'} drained or draining "
                        f"already: {'its' if one else 'their'} GPUs are out")
        if self.op is CommandOp.DRAIN and (self.gpus_failed or self.gpus_out):
            # "1 node, 8 GPUs" beside an unchanged "48 free GPUs left" for an idle failed node
            # read as a slip (a newcomer's run); "no GPU taken from service" was false from
            # the scheduler's side, where that node is idle until the drain. Both are true:
            # the scheduler stops using all 8, status counts them out already.
            out = self.gpus_failed + self.gpus_out
            how = [f"{self.gpus_failed} failed"] if self.gpus_failed else []
            if self.gpus_out:
                how.append(f"{self.gpus_out} on a node that cannot take work")
            which = ("it" if self.gpus == 1 else "them") if out == self.gpus else (
                f"{out} of them")
            said.append(f"status counts {which} out already: {', '.join(how)}")
        if said:
            parts[1] += f" ({'; '.join(said)})"
        if self.jobs:
            parts.append(f"{len(self.jobs)} job{'s' if len(self.jobs) != 1 else ''} on "
                         f"{self.nodes_affected} node{'s' if self.nodes_affected != 1 else ''}"
                         f" / {self.gpus_affected} GPUs")
            if self.mode is DrainMode.NOW:
                parts.append(f"{gpu_hours_said(self.gpu_hours_at_risk)} GPU-h since last "
                             "checkpoint lost")
            else:
                parts.append("jobs run to completion first")
        else:
            parts.append("no running jobs")
        parts.append(f"{self.free_gpus_after} free GPUs left")
        if self.unheard:
            # Said, not guessed: "8 free GPUs left" where the console said 24 read as a count
            # of the cluster's, when 2 of its nodes had not sent telemetry yet.
            parts[-1] += f" (not counting {compress(self.unheard)}: not heard from yet)"
        return ", ".join(parts)


    def _resume_summary(self, nodes: str) -> str:
        """What a resume gives back: the GPUs of the DRAINED targets that pass their health
        checks (``gpus``, blast_radius). A DRAINING target's job still holds its GPUs: "8 GPUs
        given back" of a node still running its job promised capacity the resume does not
        free; it cancels the drain, and the job runs on."""
        if not self.drained:
            return f"{nodes}, none drained: nothing given back to the scheduler"
        drained = self.drained - self.draining
        said = []
        if self.gpus:
            said.append(f"{self.gpus} GPUs given back to the scheduler")
        elif drained:
            they = "it fails" if drained == 1 else "they fail"
            said.append(f"nothing given back to the scheduler while {they} its health checks")
        if self.draining:
            one = self.draining == 1
            which = "draining" if self.draining == len(self.targets) else (
                f"{self.draining} draining")
            said.append(f"{which}: {'its drain is' if one else 'their drains are'} cancelled "
                        f"and {'its job keeps' if one else 'their jobs keep'} running on "
                        f"{'it' if one else 'them'} (nothing given back)")
        return f"{nodes}, {'; '.join(said)}"


def fmt_duration(seconds: float) -> str:
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def clip_words(text: str, most: int) -> str:
    """``text`` if it has at most ``most`` characters, else cut at the last word boundary that
    fits, with "…": a plain ``text[:most]`` cut a drain's time-out toast to "…its agent is hung
    or cut )" while the audit log had "…cut off and never answered" (a drill)."""
    if len(text) <= most:
        return text
    head = text[:most]
    if " " not in head:
        return head[:most - 1] + "…"  # one long word (a host list): cut inside it
    if text[most] != " ":
        head = head.rsplit(" ", 1)[0]  # the last word does not fit whole
    # No dangling separator or opening bracket before the ellipsis: "(H1 …" read as cut markup.
    return head.rstrip(" ,;:—(") + "…"


def scheduled_jobs_by_node(state: FleetState) -> dict[str, list[str]]:
    """Running jobs per node from the scheduler's job status alone (``jobs_on`` adds the
    node's own): O(jobs' nodes), not O(fleet), for views that need the jobs of a few nodes."""
    out: dict[str, list[str]] = {}
    for job in state.jobs.values():
        if job.state in RUNNING:
            for node in job.nodes:
                out.setdefault(node, []).append(job.job_id)
    return out


def jobs_on(st: NodeState, scheduled: dict[str, list[str]], state: FleetState) -> list[str]:
    """``jobs_by_node(state).get(st.node_id, [])`` from ``scheduled_jobs_by_node(state)``
    (the result may be that map's list: read it, never change it)."""
    jobs = scheduled.get(st.node_id, [])
    jid = own_job(st, state)
    return jobs if jid is None or jid in jobs else [*jobs, jid]


def jobs_by_node(state: FleetState) -> dict[str, list[str]]:
    """Running jobs per node, from the scheduler's job status, else the node's own telemetry
    (``judgements.own_job``)."""
    out = scheduled_jobs_by_node(state)
    for node_id, st in state.nodes.items():
        jid = own_job(st, state)
        if jid is not None and jid not in out.get(node_id, []):
            out.setdefault(node_id, []).append(jid)
    return out


def since_checkpoint_s(job: JobStatus, now: float) -> float | None:
    if job.last_checkpoint_ts is not None:
        return max(0.0, now - job.last_checkpoint_ts / 1000)
    if not job.last_checkpoint_step and job.started_ts is not None:
        # No checkpoint: everything since the run started is lost, the time its GPUs were
        # held, not its steps' worth (a hung job's restart was booked 0.25 GPU-h for 2 h of
        # 64 GPUs held: a 3 a.m. drive).
        return max(0.0, now - job.started_ts / 1000)
    if job.step_time_ms is not None and job.step >= job.last_checkpoint_step:
        steps = job.step - job.last_checkpoint_step
        if steps or job.last_checkpoint_step:
            return steps * job.step_time_ms / 1000
    if job.started_ts is not None:
        return max(0.0, now - job.started_ts / 1000)
    return None


def resumed_s(job: JobStatus, now: float) -> float | None:
    """Seconds since the job's current run started, where it started after its last checkpoint
    (a requeue or restart from it: ``started_ts`` is the current run's start, docs/scenarios.md);
    else None."""
    if job.last_checkpoint_ts is None or job.started_ts is None \
            or job.started_ts <= job.last_checkpoint_ts:
        return None
    return max(0.0, now - job.started_ts / 1000)


def work_at_risk_s(job: JobStatus, now: float) -> float | None:
    """Seconds of work a requeue now loses: since the last checkpoint, but only since the run
    that resumed from it started. The time between the checkpoint and the restart was lost at
    that restart already: a drain dialog a few seconds after a restart booked 0.3 GPU-h for 4
    steps of 32 GPUs, and a second interruption counted the first one's loss again (a
    newcomer's run)."""
    since = since_checkpoint_s(job, now)
    resumed = resumed_s(job, now)
    if since is None or resumed is None:
        return since
    return min(since, resumed)


def job_impact(job: JobStatus | None, job_id: str, targeted: set[str], now: float) -> JobImpact:
    if job is None:
        return JobImpact(job_id, "", "", "?", 1, 1, 0, None, 0.0, "")
    gpus = len(job.nodes) * job.gpus_per_node
    since = since_checkpoint_s(job, now)
    at_risk = work_at_risk_s(job, now)
    return JobImpact(
        job_id=job.job_id, name=job.name, user=job.user, state=job.state.value,
        nodes_total=len(job.nodes), nodes_targeted=len(targeted & set(job.nodes)), gpus=gpus,
        since_checkpoint_s=since,
        gpu_hours_at_risk=0.0 if at_risk is None else gpus * at_risk / 3600,
        resumed_s=resumed_s(job, now),
        hostlist=compress(job.nodes),
        checkpointed=job.last_checkpoint_ts is not None or job.last_checkpoint_step > 0,
        eta_s=job.eta_s if job.state.value == "R" and not job_reason(job) else None,
    )


def _node_gpus(st: NodeState | None) -> int:
    if st is None:
        return 0
    return st.gpus_expected or st.gpus_present


def why_unanswered(state: FleetState, node: str) -> str:
    """Why a command to ``node`` can have gone unanswered, from its liveness (H1, H2): a
    sentence to follow a time-out, or empty while the node looks alive."""
    st = state.nodes.get(node)
    if st is None:
        return "the node was never heard from"
    # All its findings: on a console on digests the collector's H1/H2 come among the node's
    # findings (its liveness holds D1 at most), and a drain to a node whose agent had died
    # read "the node reports: may this broker user publish node/+/cmd?" (a review).
    dead = next((f for f in st.all_findings if f.rule in ("H1", "H2")), None)
    if dead is None:
        if st.online is False:
            return "the node is offline: no agent is there to answer"
        if st.judged and (st.stale or st.verdict in (Verdict.STALE, Verdict.OFFLINE)):
            # A digest console whose collector went quiet (D1): nothing says the agent lives.
            why = "; ".join(f"{f.rule} {f.text}" for f in st.liveness)
            return (f"the node is {st.verdict.value}{f' ({why})' if why else ''}: nothing "
                    "says its agent is there to answer")
        return ""
    if dead.rule == "H1" and st.talks:
        return ""  # it talks (deltas awaiting their keyframe count): not hung, not cut off
    if dead.rule == "H2":
        return f"the node is offline ({dead.rule} {dead.text}): no agent is there to answer"
    return (f"the node is {st.verdict.value} ({dead.rule} {dead.text}): its agent is hung or "
            "cut off and never answered")


def why_scheduler_unanswered(state: FleetState) -> str:
    """Why a restart went unanswered when the scheduler's Last Will (or goodbye) is its latest
    word: a sentence to follow the time-out, as ``why_unanswered`` is for a node. A restart
    asked of a SIGKILLed simulator's scheduler read only "no acknowledgement within 15 s",
    where a drain of a dead node names the node offline (2026-12-07 drill)."""
    sched = state.scheduler
    if sched is None or not scheduler_down(state):
        return ""
    name = f" {sched.name}" if sched.name else ""
    return f"the scheduler{name} is offline: no scheduler is there to answer"


def never_reached(state: FleetState, node: str) -> str:
    """Why a node that reports did not acknowledge: most likely it never got the command. The
    broker drops a publish its ACL forbids without a word (MQTT 3.1.1 cannot say so), and a
    drain sent as the shipped ACL's ``viewer`` read only "no acknowledgement within 15 s" (an
    SRE drill). Empty for a node not known to report (``why_unanswered`` speaks for it)."""
    st = state.nodes.get(node)
    if st is None or why_unanswered(state, node):
        return ""
    # Only of a node heard to live: online and fresh, or talking (its deltas heard, their
    # keyframe awaited). Said of a dead one, the on-call checked the ACL instead of the node.
    if not (st.talks or (st.online is not False and not st.stale
                         and st.verdict not in (Verdict.STALE, Verdict.OFFLINE))):
        return ""
    return ("the node reports, so the command most likely never reached it: may this broker "
            "user publish node/+/cmd? (the shipped ACL lets only console and collector)")


def drained_for(state: FleetState, targets: Iterable[str], reason: str) -> list[str]:
    """Of ``targets``, the nodes DRAINED already for ``reason``: a drain changes nothing there
    whatever its mode (a drained node runs no job for ``now`` to requeue), so the CLI sends
    nothing when every target is one of them."""
    want = reason.strip()
    return [n for n in dict.fromkeys(targets) if (st := state.nodes.get(n)) is not None
            and st.drain.state is DrainState.DRAINED and st.drain.reason.strip() == want]


def _already_drained_notes(state: FleetState, nodes: list[str], reason: str | None) -> list[str]:
    """What a drain does to nodes DRAINED already: Slurm replaces the reason (the agent, its
    requester and time too). "already drained: gpu0012" followed by "1 done" left the operator
    to guess whether anything had changed. ``reason``: the new one, None while not yet typed
    (the TUI's dialog asks it after the radius)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for n in nodes:
        st = state.nodes.get(n)
        if st is not None and st.drain.state is DrainState.DRAINED:
            groups.setdefault((st.drain.reason.strip(), st.drain.requested_by), []).append(n)
    notes = []
    for (old, by), group in groups.items():
        one = len(group) == 1
        who = f" by {by}" if by else ""
        subject = f"{compress(group)} {'is' if one else 'are'} already drained"
        if reason is not None and reason.strip() == old:
            notes.append(f"{subject} for this reason{who}: nothing changes "
                         f"{'on it' if one else 'on them'}")
        else:
            why = f"reason '{old}'" if old else "no reason"
            notes.append(f"{subject} ({why}{who}): this replaces "
                         f"{'its' if one else 'their'} reason")
    return notes


def blast_radius(state: FleetState, op: CommandOp, targets: Iterable[str], now: float,
                 mode: DrainMode = DrainMode.FINISH, reason: str | None = None) -> BlastRadius:
    """What a drain or resume of ``targets`` (node ids) touches; ``reason``: the drain's, when
    known, to tell a node drained for it already from one whose reason it replaces."""
    nodes = list(dict.fromkeys(targets))
    by_node = jobs_by_node(state)
    target_set = set(nodes)
    job_ids: dict[str, None] = {}
    lines: list[str] = []
    notes: list[str] = []
    gpus = gpus_failed = gpus_out = 0
    for node in nodes:
        st = state.nodes.get(node)
        n_gpus = _node_gpus(st)
        if op is CommandOp.DRAIN and st is not None:
            # A drain takes out only what is in service: "2 nodes, 16 GPUs" for a sick node
            # and one drained an hour ago overstated what the scheduler loses (a 3 a.m.
            # drive). A drain that replaces a reason keeps its node's GPUs out; it adds none.
            # The scheduler stops using all of a node not drained yet, whatever the console
            # makes of them (in use, free, not heard yet, failed or out: ``gpu_use``); those
            # status counts out already are said as such, "free GPUs left" stays as status.
            if st.drain.state is DrainState.NONE:
                use = st.gpu_use()
                gpus += n_gpus
                gpus_failed += use.failed
                gpus_out += use.out
        elif op is not CommandOp.RESUME:
            gpus += n_gpus
        elif (st is not None and st.drain.state is DrainState.DRAINED
              and not _still_failing(st)):
            # A resume gives back only what was drained, and the scheduler's node health
            # check keeps work off a node that still fails it ("8 GPUs given back" for an
            # XID 79 node with 7 visible: a 3 a.m. drive). A draining node's job holds its
            # GPUs: the resume cancels the drain and the job runs on.
            gpus += n_gpus
        jobs = by_node.get(node, [])
        for j in jobs:
            job_ids[j] = None
        what = ", ".join(f"job {j}" for j in jobs) or "idle"
        flags = []
        if st is None:
            flags.append("unknown node")
        else:
            if st.online is False:
                flags.append("offline")
            elif st.stale:
                flags.append("stale")
            if st.drain.state is not DrainState.NONE:
                flags.append(st.drain.state.value)
        gpus_text = f"{n_gpus} GPUs"
        if st is not None and st.sample is not None and 0 < st.gpus_present < n_gpus:
            gpus_text = f"{st.gpus_present} of {n_gpus} GPUs visible"
        line = f"{node} ({what}, {gpus_text}{''.join(', ' + f for f in flags)})"
        if op is CommandOp.RESUME and st is not None:
            # What it was drained for and how it reads now: the resume dialog listed a node
            # drained for a throttled GPU as "(idle, 8 GPUs, drained)", it was resumed, and
            # slowed the next job by 23 % within 40 s (a jobs audit).
            if st.drain.state is not DrainState.NONE and st.drain.reason:
                by = f" by {st.drain.requested_by}" if st.drain.requested_by else ""
                line += f": {st.drain.state.value} for \"{st.drain.reason}\"{by}"
            worst = shown_findings(st)
            if st.verdict.value not in ("ok", "waiting") and worst:
                line += f"; now {st.verdict.value}: {worst[0]}"
        elif op is CommandOp.DRAIN and st is not None and st.verdict.value != "waiting":
            # How each target reads: a healthy node marked by mistake (space marks and moves
            # down) was listed as plainly as the sick one (a 3 a.m. drive).
            worst = shown_findings(st)
            line += (f": {st.verdict.value}, {worst[0]}" if worst and st.verdict.value != "ok"
                     else ": ok, nothing found on it")
        lines.append(line)
    # A resume touches no job: the jobs on a draining node run on whatever it does.
    impacts = ([] if op is CommandOp.RESUME
               else [job_impact(state.jobs.get(j), j, target_set, now) for j in job_ids])
    # The jobs' nodes only: "2 nodes, 1 job on 9 nodes" counted an idle target into the job
    # (its line below said 8; a 3 a.m. drive).
    affected_nodes: set[str] = set()
    for j in job_ids:
        job = state.jobs.get(j)
        if job is not None:
            affected_nodes.update(job.nodes)
    gpus_affected = sum(_node_gpus(state.nodes.get(n)) or 8 for n in affected_nodes)
    kills = op is CommandOp.DRAIN and mode is DrainMode.NOW
    at_risk = sum(i.gpu_hours_at_risk for i in impacts) if kills else 0.0
    if kills and impacts and (ahead := _pending_ahead(state)):
        notes.append(ahead)
    if kills:
        notes.extend(_requeued_onto(state, job_ids, target_set))
    if op is CommandOp.DRAIN:
        notes.extend(_already_drained_notes(state, nodes, reason))
        # The node's own judgement says "do not drain": the switch is the problem, and
        # draining every node behind a failing leaf takes a rail's worth of GPUs for nothing.
        switch_only: dict[tuple[str, bool], list[str]] = {}
        for n in nodes:
            st = state.nodes.get(n)
            if (st is not None and st.behind_switch
                    and not any(f.severity is Severity.DRAIN for f in st.effective_findings)):
                switch_only.setdefault((st.behind_switch, st.behind_recovered), []).append(n)
        for (switch, recovered), behind in switch_only.items():
            # A switch back up is no suspect: the dialog said "suspect … check the switch"
            # where the overview said recovered (a 3 a.m. drive).
            notes.append(f"behind switch {switch}, which recovered, with no fault of their own: "
                         f"{compress(behind)} (nothing to fix on them; draining takes them out "
                         "for nothing)" if recovered else
                         f"behind suspect switch {switch}, with no fault of their own: "
                         f"{compress(behind)} (check the switch; draining does not fix it)")
    if op is CommandOp.RESUME:
        unhealthy = [n for n in nodes if (st := state.nodes.get(n)) is not None
                     and st.verdict.value in ("failed", "offline")]
        held = [n for n in unhealthy if resume_ends_failure(state.nodes[n])]
        unhealthy = [n for n in unhealthy if n not in held]
        # A resume ends the hold only where there is a drain to end: "the resume ends the
        # hold" and "not drained: the resume changes nothing" were said of one node (an SRE
        # drill).
        held = [n for n in held if state.nodes[n].drain.state is not DrainState.NONE]
        if unhealthy:
            # "8 GPUs given back to the scheduler" over-promised: its node health check keeps
            # work off a node that fails it (an SRE drill's XID 62 node, not repaired).
            notes.append(f"still failing health checks: {compress(unhealthy)} (the scheduler "
                         "places no work there until "
                         f"{'it passes' if len(unhealthy) == 1 else 'they pass'}: repair "
                         "first)")
        degraded = [n for n in nodes if (st := state.nodes.get(n)) is not None
                    and st.verdict.value == "degraded"
                    and st.drain.state is not DrainState.NONE]
        # The throttle warning for throttled nodes only: it was said of a node degraded by an
        # XID that never throttled (a 3 a.m. drive).
        slow = [n for n in degraded if _throttled(state.nodes[n])]
        if slow:
            notes.append(f"still degraded: {compress(slow)} (the scheduler may place work "
                         "there; a throttled GPU slows every job it joins)")
        other = [n for n in degraded if n not in slow]
        if len(other) == 1 and (worst := shown_findings(state.nodes[other[0]])):
            notes.append(f"still degraded: {other[0]} (the scheduler may place work there: "
                         f"{worst[0]})")
        elif other:
            notes.append(f"still degraded: {compress(other)} (the scheduler may place work "
                         "there; each one's line says why)")
        if held:
            # "their" of one node read as of several (a review).
            whose = "its" if len(held) == 1 else "their"
            notes.append(f"failed only by the hour of {whose} port errors (N2, N3), links up "
                         f"(quiet, or repaired): {compress(held)} (the resume ends the hold)")
        undrained = [n for n in nodes if (st := state.nodes.get(n)) is not None
                     and st.drain.state is DrainState.NONE]
        if undrained:
            notes.append(f"not drained: {compress(undrained)} (in service already: the resume "
                         "changes nothing there; the agent answers 'was not drained')")
    silent = [n for n in nodes if state.nodes.get(n) is None or state.nodes[n].online is False]
    if silent:
        # Named: "offline or unknown nodes" of a 64-node drain left the operator to find
        # the 3 among them (a 2026-12-07 drill).
        notes.append(f"offline or unknown nodes cannot acknowledge: expect time-outs "
                     f"({compress(silent)})")
    return BlastRadius(
        op=op, mode=mode, targets=nodes, target_lines=lines, gpus=gpus, jobs=impacts,
        nodes_affected=len(affected_nodes), gpus_affected=gpus_affected,
        gpu_hours_at_risk=at_risk, free_gpus_after=_free_gpus(state, by_node, target_set),
        notes=notes, drained=sum(1 for n in nodes if (st := state.nodes.get(n)) is not None
                                 and st.drain.state is not DrainState.NONE),
        draining=sum(1 for n in nodes if (st := state.nodes.get(n)) is not None
                     and st.drain.state is DrainState.DRAINING),
        gpus_failed=gpus_failed, gpus_out=gpus_out,
        # Those whose GPUs it would count if heard: idle and in service (``_free_gpus``). A
        # waiting node a job holds, or drained, counts none either way ("not counting
        # gpu[0001-0200]" of a busy cluster whose 3 idle nodes were the only ones unknown).
        unheard=[n for n, st in state.nodes.items()
                 if n not in target_set and st.waiting and not by_node.get(n)
                 and st.drain.state is DrainState.NONE],
    )


@dataclass(frozen=True)
class RequeueRisk:
    """A node of a job that a requeue may put the job back on: it is not drained, and it is
    failed, offline, throttled or the job's straggler."""

    node: str
    why: str
    """How it reads: "failed (N1 …)", "degraded: G12 …", "slows the job: rank 11 …"."""
    stalls: bool
    """Failed or offline: the job stalls there again (else it runs there as slow)."""

    @property
    def then(self) -> str:
        return "to stall again" if self.stalls else "as slow"


def requeue_risks(state: FleetState, job: JobStatus,
                  exclude: Iterable[str] = ()) -> list[RequeueRisk]:
    """The nodes of ``job`` (but ``exclude``: what the command drains) that its requeue may land
    back on. A restart and a drain now both requeue, and both dialogs say this: only the
    restart's did, and it left out throttled nodes that were not the straggler, so a flapping
    port drained now put the job back on its throttled node, as slow (a 3 a.m. drive)."""
    out = set(exclude)
    named: dict[str, RequeueRisk] = {}
    for n in job.nodes:
        st = state.nodes.get(n)
        if n in out or st is None or st.drain.state is not DrainState.NONE:
            continue
        unfit = bool(_unfit_undrained(st))
        if unfit or _throttled(st):
            worst = shown_findings(st)
            named[n] = RequeueRisk(n, f"{st.verdict.value}: {worst[0]}" if worst
                                   else st.verdict.value, unfit)
    found = straggler(job, state)
    for slow in () if found is None else (found, *found.also):
        st = state.nodes.get(slow.node)
        if (slow.node in out or slow.node in named or st is None
                or st.drain.state is not DrainState.NONE):
            continue
        named[slow.node] = RequeueRisk(slow.node, f"slows the job: {slow.own_text}", False)
    return list(named.values())


def _requeued_onto(state: FleetState, job_ids: Iterable[str], targets: set[str]) -> list[str]:
    """A drain now's ``requeue_risks``, one line a node however many of its jobs it holds up."""
    risks: dict[str, tuple[RequeueRisk, list[str]]] = {}
    for j in job_ids:
        if (job := state.jobs.get(j)) is None:
            continue
        for risk in requeue_risks(state, job, targets):
            risks.setdefault(risk.node, (risk, []))[1].append(j)
    notes = []
    for n, (risk, jobs) in risks.items():
        whose = (f"job {jobs[0]}'s requeue may" if len(jobs) == 1
                 else f"the requeues of jobs {', '.join(jobs)} may")
        notes.append(f"{n} ({risk.why}) is not drained: {whose} put it back there, {risk.then}; "
                     f"drain {n} too")
    return notes


def _still_failing(st: NodeState) -> bool:
    """Failed or offline, and not only held by its ports' windows (a resume ends that)."""
    return st.verdict.value in ("failed", "offline") and not resume_ends_failure(st)


THROTTLE_RULES = frozenset({"G12", "G13"})
"""Clock throttling and a GPU hot enough to throttle: what slows every job the node joins."""


def _throttled(st: NodeState) -> bool:
    return any(f.rule in THROTTLE_RULES for f in shown_findings(st))


def suggested_drain_mode(state: FleetState, targets: Iterable[str]) -> DrainMode:
    """``now`` when every target that runs a job is failed (its job stalls at the next
    collective or is dying: letting it "finish" holds the job's other nodes for nothing, and
    the node's action says to requeue), else ``finish`` (Slurm's DRAIN, the safe default).
    The drain dialog opens on it: it opened on finish for a failed node under a job, against
    the console's own advice (an operator's walkthrough)."""
    busy = [st for n in targets if (st := state.nodes.get(n)) is not None
            and failed_under_job(st, state) is not None]
    # The node's own action's mode (``drain_now_advised``): a node failed only by N2's hour
    # with its links up, or under a one-node job that steps on, is told to drain (finish).
    if busy and all(drain_now_advised(st, state) for st in busy):
        return DrainMode.NOW
    return DrainMode.FINISH


def job_blast_radius(state: FleetState, job_id: str, now: float) -> BlastRadius:
    """What restarting (requeueing) ``job_id`` from its last checkpoint touches."""
    job = state.jobs.get(job_id)
    nodes = list(job.nodes) if job is not None else []
    impact = job_impact(job, job_id, set(nodes), now)
    lines = []
    for n in nodes:
        st = state.nodes.get(n)
        line = f"{n} ({_node_gpus(st) or (job.gpus_per_node if job else 0)} GPUs)"
        if why := _unfit_undrained(st):
            line += f": {why}, not drained"
        elif st is not None and st.job_stepping == job_id:
            # Tagged as the drain dialog tags it: the restart dialog listed it plain (a 3 a.m.
            # drive).
            line += ": its agent is silent (the node works: its ranks step on)"
        if st is not None and st.drain.state is not DrainState.NONE:
            # A node being drained was listed as a plain target, as if the job would come back
            # to it (a 3 a.m. drive): Slurm places no new work on a DRAIN node.
            line += (f"{'; ' if ': ' in line else ': '}{st.drain.state.value}, the requeued "
                     "job will not be placed there")
        lines.append(line)
    notes = [] if job is not None else [f"job {job_id} is not known to this console"]
    if job is not None and not nodes:
        # Ended or pending, it holds no node: "0 nodes, 0 GPUs requeued" and "Targets (0)" said
        # nothing of what the restart does (a 3 a.m. drive).
        since = (f"from its checkpoint at step {job.last_checkpoint_step}"
                 if job.last_checkpoint_step else "from the start (no checkpoint)")
        notes.append(f"job {job_id} ({job.state.value}) holds no nodes: the scheduler requeues "
                     f"it {since} wherever it finds room")
    quiet = None if job is None else not_stepping(job, state, now)
    if job is not None and quiet is not None:
        # What the restart is for: the dialog asked "restart?" of a hung job without saying
        # that it was hung (left open by the hung-job work). Its last step's ETA is no time
        # left ("ends in 3h27m at its pace" of a job hung for 342 s: a 3 a.m. drive).
        notes.append(f"job {job_id} is hung: {not_stepping_text(job, quiet, now)}")
        impact = dataclasses.replace(impact, eta_s=None)
    if job is not None and nodes and (ahead := _pending_ahead(state, job_id)):
        notes.append(ahead)
    switches = sorted({st.behind_switch for n in nodes if (st := state.nodes.get(n)) is not None
                       and st.behind_switch and not st.behind_recovered})
    if switches:
        # A switch outage read as "held up by gpu0009 degraded", and the restart said nothing
        # of the switch its nodes sit behind (a 3 a.m. drive).
        notes.append(f"its nodes are behind suspect switch {compress(switches)}: a requeued job "
                     "may land behind it again; check the switch first")
    # A requeued job goes wherever the scheduler finds room, the node that killed it or slowed
    # it included unless it is drained (Slurm places nothing on a DRAIN node): the restart
    # dialog listed a failed node as a plain target (a 3 a.m. drive), and a restart put a job
    # back on its straggler, 2.3 GPU-h lost for nothing (a jobs audit).
    for risk in () if job is None else requeue_risks(state, job):
        notes.append(f"{risk.node} ({risk.why}) is not drained: a restart may put the job on "
                     f"it again, {risk.then}; drain {risk.node} first")
    # A failed job holds no node, so the loop above names none: the node its rank died on,
    # failed and not drained, went unsaid, though its incident says "drain gpu0059, then
    # restart-job 4106" (a newcomer's run restarted it from the jobs view with no word of it).
    ended = None if job is None else failed_job(job, state)
    subject = f"job {job_id}"
    if job is not None and not nodes:
        last = sorted({*(ended.nodes if ended is not None else ()),
                       *(ended.drain if ended is not None else ())})
        subject += (f" ({job.state.value}), on no nodes now"
                    + (f"; it failed on {compress(last)}" if last else ""))
    for n in () if ended is None else ended.drain:
        if n in nodes:
            continue
        worst = shown_findings(state.nodes[n])
        why = f"failed: {worst[0]}" if worst else "failed"
        notes.append(f"{n} ({why}), where job {job_id} failed, is not drained: a restart may "
                     f"put the job on it again, to fail again; drain {n} first")
    sched = state.scheduler
    if sched is not None and scheduler_down(state):
        # Its Last Will came: the request waits in the broker's queue for nobody, and the
        # job's state shown is as the scheduler left it (docs/protocol.md, "Scheduler status").
        notes.append(f"the scheduler{' ' + sched.name if sched.name else ''} is offline: "
                     "nothing answers a restart until it is back; expect a time-out")
    return BlastRadius(
        op=CommandOp.RESTART_JOB, mode=DrainMode.NOW, targets=nodes, target_lines=lines,
        gpus=impact.gpus, jobs=[impact], nodes_affected=len(nodes), gpus_affected=impact.gpus,
        gpu_hours_at_risk=impact.gpu_hours_at_risk, free_gpus_after=0, notes=notes,
        subject=subject,
    )


def _pending_ahead(state: FleetState, but: str = "") -> str:
    """The jobs pending that a requeued job queues behind, in a sentence ('' when none): the
    queue's head took the freed nodes and the requeued job sat PD (Resources) for 13 min (a
    jobs audit, a 3 a.m. drive)."""
    # A job asking for more nodes than the cluster has never takes them (``never_fits``):
    # "2 jobs pending ahead (4102, 4107)" named a 40-node job on 32 nodes (a jobs audit).
    waiting = sorted((j for j in state.jobs.values() if j.state.value == "PD" and j.job_id != but
                      and not never_fits(j, state)),
                     key=lambda j: (j.submitted_ts or 0, j.job_id))
    if not waiting:
        return ""
    more = f" (+{len(waiting) - 3} more)" if len(waiting) > 3 else ""
    one = len(waiting) == 1
    return (f"{len(waiting)} job{'' if one else 's'} pending ahead "
            f"({', '.join(j.job_id for j in waiting[:3])}{more}): {'it' if one else 'they'} may "
            "take the freed nodes first, and a requeued job waits behind "
            f"{'it' if one else 'them'}")


def _unfit_undrained(st: NodeState | None) -> str:
    """Why a job's node should not take the job back, or '': failed or offline and not
    drained (silent nodes are left out: a silent agent is not a sick node)."""
    if st is None or st.drain.state is not DrainState.NONE:
        return ""
    if st.job_stepping:
        return ""  # its agent died, not the node: its ranks step on (H2 says do not drain)
    if st.verdict is Verdict.OFFLINE:
        return "offline"
    if st.verdict is Verdict.FAILED:  # N2's hour too: its link went down within it
        worst = shown_findings(st)
        return f"failed ({worst[0]})" if worst else "failed"
    return ""


def unknown_job_hint(state: FleetState, job_id: str) -> str:
    """What to type instead of ``job_id``, a job the scheduler never published: the id it is
    likely a typo of ('job4102' or '#4102' for 4102: "did you mean 4102?"), else the running
    jobs ("running there: 4101, 4102"), else ''. Every front end adds it to ``job_refusal``'s
    sentence (a newcomer's 3 a.m. run read only "wrong --cluster or job id?")."""
    if job_id in state.jobs:
        return ""
    digits = "".join(ch for ch in job_id if ch.isdigit())
    if digits and digits != job_id and digits in state.jobs:
        return f"did you mean {digits}?"
    running = sorted((j for j, job in state.jobs.items() if job.state is JobState.R),
                     key=lambda j: (len(j), j))
    if not running:
        return ""
    more = f" and {len(running) - 8} more" if len(running) > 8 else ""
    return f"running there: {', '.join(running[:8])}{more}"


def job_refusal(state: FleetState, job_id: str) -> str:
    """Why a restart of ``job_id`` is refused before anything is sent, in one sentence, or ''
    when this console knows the job. Known means a status of it arrived, retained ones
    included: a console started a moment ago knows every job the scheduler still publishes.
    Sent anyway, an unknown job only came back rejected by the scheduler; with no job status
    heard at all the job cannot be called unknown, so the sentence says that instead. Every
    front end (TUI command line, jobs view, palette, CLI) asks this, as drains ask for unknown
    nodes."""
    job = state.jobs.get(job_id)
    if job is not None:
        # What a scheduler rejects (docs/scenarios.md, "restart_job"): the dry run said "the
        # scheduler requeues it from its checkpoint", then the restart came back rejected, exit
        # 3 (a jobs audit).
        kind = job.state.value
        if kind in ("PD", "RQ"):
            why = job_reason(job)
            return (f"job {job_id} is {kind}{f' ({why})' if why else ''}: it is waiting to run "
                    "already, there is nothing to restart")
        if kind in ("CD", "CA"):
            ended = "completed" if kind == "CD" else "cancelled"
            return (f"job {job_id} is {kind} ({ended}): there is nothing to restart; submit it "
                    "again")
        return ""
    if not state.jobs:
        return (f"job {job_id} cannot be checked: nothing heard from the scheduler on cluster "
                f"'{state.cluster}' yet, not one job status")
    named = sorted(j.job_id for j in state.jobs.values() if j.name == job_id)
    if named:
        # squeue shows both; an operator types the name (an SRE drill).
        return (f"{job_id} is a job name, not a job id: restart-job takes the id "
                f"({', '.join(named[:5])})")
    return (f"unknown job {job_id}: the scheduler has published no such job on cluster "
            f"'{state.cluster}'")


def changed_while_open(state: FleetState, op: CommandOp, targets: list[str] | str,
                       opened: JobStatus | None = None) -> str:
    """Why a command confirmed in a dialog is refused though it was not when the dialog opened
    ('' when it still goes out): a target node retired (its birth cleared) or a job that ended,
    was requeued or is no longer published while the operator typed the reason. Sent, a drain
    of a retired node timed out "the node was never heard from" (a 2026-12-07 drill), and a
    restart of a job that had completed came back rejected by the scheduler. A one-shot
    command checks and sends in one tick: only a dialog leaves this window.

    ``opened``: the job's status as the restart dialog opened. A job requeued meanwhile and
    running again passed as running, and the restart requeued the new run, the one the
    operator had not seen."""
    if op is CommandOp.RESTART_JOB:
        assert isinstance(targets, str)
        job = state.jobs.get(targets)
        if job is None and opened is not None:
            # Not job_refusal's "nothing heard from the scheduler yet" where it was the last.
            why = f"job {targets} is no longer published by the scheduler (ended and withdrawn)"
        elif (job is not None and opened is not None and job.state is JobState.R
              and (job.requeues > opened.requeues or _restarted(opened, job))):
            why = (f"job {targets} was requeued and runs again (requeues {opened.requeues} -> "
                   f"{job.requeues}, at step {job.step}): restart it again only if this run "
                   "is held up too")
        else:
            why = job_refusal(state, targets)
        return f"changed while the dialog was open: {why}; nothing sent" if why else ""
    gone = [t for t in targets if t not in state.nodes]
    return (f"unknown node(s) {compress(gone)}: retired or forgotten while the dialog was "
            "open; nothing sent") if gone else ""


def _restarted(before: JobStatus, now: JobStatus) -> bool:
    """Whether ``now`` is a later run of the job than ``before`` by its start (a scheduler
    that publishes one; one that counts no requeues)."""
    return (before.started_ts is not None and now.started_ts is not None
            and now.started_ts != before.started_ts)


def _free_gpus(state: FleetState, by_node: dict[str, list[str]], removing: set[str]) -> int:
    free = 0
    for node_id, st in state.nodes.items():
        if node_id in removing or by_node.get(node_id):
            continue
        if st.online is False or st.stale or st.drain.state is not DrainState.NONE:
            continue
        # What status and the overview count free (``gpu_use``): a failed node's GPUs are out,
        # faulty ones failed ("183 free GPUs left" against status's 176: an SRE drill).
        free += st.gpu_use().free
    return free


# --- lifecycle ----------------------------------------------------------------------------------


_counter = itertools.count(1)


def new_request_id(now: float) -> str:
    """Short, unique enough across consoles: time, pid, counter (fits the 64-char cmd_id)."""
    return f"c{int(now * 1000) % 10**10:010d}-{os.getpid() % 100000}-{next(_counter)}"


@dataclass
class TargetProgress:
    target: str
    cmd: Command
    phase: Phase = Phase.REQUESTED
    detail: str = ""
    updated: float = 0.0
    agent_done: bool = False
    sent_at: float | None = None
    """When the command was last published (retries re-send the same cmd_id)."""
    send_error: str = ""
    """Why the last attempt to publish failed ('' once one went out)."""
    draining_session: tuple[int, int | None] | None = None
    """A drain: the node's agent session (its status's bdSeq) and process (its samples'
    ``agent.started_ts``) when it was seen DRAINING."""
    unsaved: str = ""
    """The clause of an ack saying the agent could not keep the new drain state on its disk
    (``NOT_SAVED``): said again in the outcome, whatever settles it (a status, the ack)."""
    sent_shift_ms: int | None = None
    """How far into the node's clock its sends were stamped, the least of them
    (``CommandOutbox._publish``): a re-send goes no later, so no copy outlives the one an
    agent acted on, which it remembers only until that copy's expiry (agents/guard.py)."""


def draining_jobs(mode: DrainMode, *, one: bool = True) -> str:
    """What a DRAINING node's jobs do meanwhile, by the drain's mode, in the drain dialog's
    words: ``finish`` lets them run to completion, ``now`` requeues them from their last
    checkpoint. The quit question said "its jobs run to completion first" of a drain --now."""
    its = "its" if one else "their"
    if mode is DrainMode.NOW:
        return f"{its} jobs requeued from their last checkpoint"
    return f"{its} jobs run to completion first"


@dataclass
class Request:
    request_id: str
    op: CommandOp
    reason: str
    mode: DrainMode
    issued_by: str
    issued_at: float
    targets: list[TargetProgress]
    job: str | None = None
    ack_timeout_s: float = ACK_TIMEOUT_S
    effect_timeout_s: float | None = EFFECT_TIMEOUT_S
    baseline_requeues: int = 0
    baseline_started_ts: int | None = None
    finished_at: float | None = None
    outcome_recorded: bool = False
    """The outcome went to the audit trail (once, however many targets finished at once)."""

    @property
    def phase(self) -> Phase:
        phases = [t.phase for t in self.targets]
        if not phases:
            return Phase.DONE
        if not all(p.terminal for p in phases):
            return Phase.ACKNOWLEDGED if any(p is not Phase.REQUESTED for p in phases) \
                else Phase.REQUESTED
        for bad in BAD:
            if bad in phases:
                return bad
        return Phase.DONE

    @property
    def target_text(self) -> str:
        if self.op is CommandOp.RESTART_JOB:
            return f"job {self.job}"
        return compress(t.target for t in self.targets)

    def counts(self) -> dict[Phase, int]:
        out: dict[Phase, int] = {}
        for t in self.targets:
            out[t.phase] = out.get(t.phase, 0) + 1
        return out

    def standing(self) -> str:
        """Where an open request stands, in a few words: its phase, except that a drain's
        targets seen DRAINING are said to drain, their jobs still on them (the state a
        drain that lets its jobs finish stays in for hours). The quit question listed such a
        drain as "acknowledged", as if its node had not begun draining, where the events
        said "DRAINING" and the CLI "still draining (its jobs run to completion)"."""
        draining = sum(1 for t in self.targets
                       if t.phase is Phase.ACKNOWLEDGED and t.detail == DRAINING)
        if not draining:
            return self.phase.value
        said = [f"draining{'' if len(self.targets) == 1 else f' {draining}'} "
                f"({draining_jobs(self.mode, one=draining == 1)})"]
        counts = self.counts()
        counts[Phase.ACKNOWLEDGED] -= draining
        said += [f"{p.value} {n}" for p, n in counts.items() if n]
        return ", ".join(said)

    def describe(self) -> str:
        """One line: ``drain gpu[0001-0004] (finish): done 3, acknowledged 1 (DRAINING)``."""
        # "restart job 4102", not "restart job job 4102": target_text already names the job.
        what = "restart" if self.op is CommandOp.RESTART_JOB else self.op.value
        mode = f" ({self.mode.value})" if self.op is CommandOp.DRAIN else ""
        counts = ", ".join(f"{p.value} {n}" for p, n in self.counts().items())
        details = sorted({t.detail for t in self.targets if t.detail})
        # Cut with a mark, at 240: "…no agent is there to answe)" ended mid-word (a 3 a.m.
        # drive).
        said = "; ".join(details)
        tail = f": {said if len(said) <= 240 else said[:239] + '…'}" if details else ""
        return f"{what} {self.target_text}{mode} [{self.request_id}]: {counts}{tail}"

    def commands(self) -> list[tuple[Kind, str, Command]]:
        """What to publish: (topic kind, topic subject, command)."""
        if self.op is CommandOp.RESTART_JOB:
            return [(Kind.SCHED_CMD, "", t.cmd) for t in self.targets]
        return [(Kind.CMD, t.target, t.cmd) for t in self.targets]


@dataclass(frozen=True)
class Transition:
    request: Request
    target: str
    old: Phase
    new: Phase
    detail: str
    ts: float

    @property
    def finished(self) -> bool:
        return self.request.finished_at is not None and self.request.finished_at == self.ts

    @property
    def text(self) -> str:
        """``acknowledged (drain (finish))``, ``done (DRAINED)``; a move within its phase says
        what moved (``status now DRAINING``): "acknowledged" twice read as a duplicate ack."""
        if self.old is self.new and self.detail:
            return f"status now {self.detail}"
        return f"{self.new.value} ({self.detail})" if self.detail else self.new.value


RETRY_EVERY_S = 3.0
"""Re-send an unacknowledged command this often (same cmd_id: agents answer a duplicate from
memory and never execute it twice), so a broker restart between send and ack loses nothing."""
EFFECT_RETRY_S = 10.0
"""Re-send an acknowledged drain/resume whose effect has not shown up in the node's status for
this long: the agent then publishes its status again (a status lost with a broker)."""


class CommandTracker:
    """All commands of this console (or CLI run) and their lifecycle."""

    def progress(self, cmd_id: str) -> TargetProgress | None:
        """The target ``cmd_id`` was sent to, while this tracker holds its request."""
        return self._by_cmd.get(cmd_id)

    def due_for_retry(self, now: float, every_s: float = RETRY_EVERY_S
                      ) -> list[tuple[Kind, str, Command, TargetProgress]]:
        """Commands sent but not yet acknowledged for ``every_s``, and still unexpired."""
        out: list[tuple[Kind, str, Command, TargetProgress]] = []
        for req in self.active:
            for (kind, subject, cmd), t in zip(req.commands(), req.targets, strict=True):
                if t.sent_at is None or cmd.expires_at <= now * 1000:
                    continue
                waiting = now - t.sent_at
                unacked = t.phase is Phase.REQUESTED and waiting >= every_s
                no_effect = (t.phase is Phase.ACKNOWLEDGED and req.op is not CommandOp.RESTART_JOB
                             and t.detail != DRAINING and waiting >= EFFECT_RETRY_S)
                if unacked or no_effect:
                    out.append((kind, subject, cmd, t))
        return out

    def __init__(self, cluster: str, issued_by: str, *, ack_timeout_s: float = ACK_TIMEOUT_S,
                 effect_timeout_s: float = EFFECT_TIMEOUT_S) -> None:
        self.cluster = cluster
        self.issued_by = issued_by
        self.ack_timeout_s = ack_timeout_s
        self.effect_timeout_s = effect_timeout_s
        self.unanswered: Callable[[Request], str | None] | None = None
        """At an unanswered target's ack deadline, what its front end knows of why (the CLI's
        publish probe, console/cli/commands.py): None to hold the target open a moment yet
        (that verdict is still out), '' to time it out with what the node's state says, else
        the sentence to time it out with."""
        self.requests: dict[str, Request] = {}
        self._by_cmd: dict[str, TargetProgress] = {}
        self._req_of: dict[str, Request] = {}

    # --- creating ------------------------------------------------------------------------------

    def _command(self, cmd_id: str, op: CommandOp, target: str, args: CommandArgs,
                 now: float) -> Command:
        if not args.reason.isprintable():
            # The agent reads the reason made printable (docs/protocol.md, "Text from the
            # network"); signing what it will read keeps the signature valid.
            args = args.model_copy(update={"reason": codec.printable_text(args.reason)})
        return Command(
            cmd_id=cmd_id, op=op, target=target, args=args, issued_by=self.issued_by[:256],
            issued_at=int(now * 1000), expires_at=int((now + self.ack_timeout_s) * 1000),
            reply_to="",
        )

    def _register(self, req: Request) -> Request:
        self.requests[req.request_id] = req
        for t in req.targets:
            self._by_cmd[t.cmd.cmd_id] = t
            self._req_of[t.cmd.cmd_id] = req
        return req

    def drain(self, targets: Iterable[str], reason: str, now: float,
              mode: DrainMode = DrainMode.FINISH) -> Request:
        reason = reason.strip()
        if not reason:
            raise ValueError("a reason is required to drain a node")
        rid = new_request_id(now)
        args = CommandArgs(reason=reason, mode=mode)
        progress = [TargetProgress(n, self._command(f"{rid}.{i}", CommandOp.DRAIN, n, args, now),
                                   updated=now)
                    for i, n in enumerate(dict.fromkeys(targets))]
        # Drains that let jobs finish may legitimately take hours: no effect deadline.
        effect = None if mode is DrainMode.FINISH else self.effect_timeout_s
        return self._register(Request(rid, CommandOp.DRAIN, reason, mode, self.issued_by, now,
                                      progress, ack_timeout_s=self.ack_timeout_s,
                                      effect_timeout_s=effect))

    def resume(self, targets: Iterable[str], now: float, reason: str = "") -> Request:
        rid = new_request_id(now)
        args = CommandArgs(reason=reason.strip())
        progress = [TargetProgress(n, self._command(f"{rid}.{i}", CommandOp.RESUME, n, args,
                                                    now), updated=now)
                    for i, n in enumerate(dict.fromkeys(targets))]
        return self._register(Request(rid, CommandOp.RESUME, reason.strip(), DrainMode.FINISH,
                                      self.issued_by, now, progress,
                                      ack_timeout_s=self.ack_timeout_s,
                                      effect_timeout_s=self.effect_timeout_s))

    def restart_job(self, job_id: str, now: float, reason: str = "",
                    job: JobStatus | None = None) -> Request:
        rid = new_request_id(now)
        args = CommandArgs(reason=reason.strip(), mode=DrainMode.NOW, job=job_id)
        cmd = self._command(f"{rid}.0", CommandOp.RESTART_JOB, job_id, args, now)
        return self._register(Request(
            rid, CommandOp.RESTART_JOB, reason.strip(), DrainMode.NOW, self.issued_by, now,
            [TargetProgress(job_id, cmd, updated=now)], job=job_id,
            ack_timeout_s=self.ack_timeout_s, effect_timeout_s=self.effect_timeout_s,
            baseline_requeues=job.requeues if job is not None else 0,
            baseline_started_ts=job.started_ts if job is not None else None,
        ))

    def publish_failed(self, req: Request, why: str, now: float) -> list[Transition]:
        """The console could not even send the command (not connected)."""
        out = []
        for t in req.targets:
            if not t.phase.terminal:
                out.append(self._move(req, t, Phase.FAILED, f"not sent: {why}", now))
        return [x for x in out if x is not None]

    # --- observing -----------------------------------------------------------------------------

    @property
    def active(self) -> list[Request]:
        return [r for r in self.requests.values() if r.finished_at is None]

    def observe(self, state: FleetState, acks: Iterable[Ack], now: float) -> list[Transition]:
        """Apply this tick's acks, then what the fleet state shows, then deadlines."""
        out: list[Transition] = []
        for ack in acks:
            t = self._by_cmd.get(ack.cmd_id)
            if t is None:
                continue
            req = self._req_of[ack.cmd_id]
            if req.op is not CommandOp.RESTART_JOB and ack.by != t.target:
                continue  # an ack for our id from another node: ignore it
            moved = self._on_ack(req, t, ack, now)
            if moved is not None:
                out.append(moved)
        for req in self.active:
            for t in req.targets:
                if t.phase.terminal:
                    continue
                moved = self._on_state(req, t, state, now)
                if moved is not None:
                    out.append(moved)
                    continue
                moved = self._on_deadline(req, t, state, now)
                if moved is not None:
                    out.append(moved)
        return out

    def _on_ack(self, req: Request, t: TargetProgress, ack: Ack, now: float) -> Transition | None:
        if t.phase.terminal:
            return None  # duplicate or late ack
        if NOT_SAVED in ack.reason and not t.unsaved:
            # The status settles most drains before the ack's done, and its "DRAINED" said
            # nothing of the disk: "done (DRAINED)", exit 0, for a drain the agent's next
            # restart forgot (a 2026-12-07 drill, a full --state-dir).
            t.unsaved = ack.reason[ack.reason.index(NOT_SAVED):]
        elif NOT_SAVED not in ack.reason and ack.result is AckResult.DONE and t.unsaved:
            # Its "done" was sent after a save that worked (agents/agent.py saves before each
            # ack): a drain whose DRAINING the full disk refused and whose DRAINED it kept
            # read "not saved …: an agent restart forgets it", which it did not.
            t.unsaved = ""
        if ack.result is AckResult.REJECTED:
            return self._move(req, t, Phase.REJECTED, ack.reason or "rejected", now)
        if ack.result is AckResult.FAILED:
            return self._move(req, t, Phase.FAILED, ack.reason or "failed", now)
        if ack.result is AckResult.DONE:
            t.agent_done = True
        if t.phase is Phase.REQUESTED:
            detail = ack.reason or ack.result.value
            if ack.result is AckResult.DONE:
                detail = f"{detail}; waiting to see it in status"
            return self._move(req, t, Phase.ACKNOWLEDGED, detail, now)
        return None

    def _on_state(self, req: Request, t: TargetProgress, state: FleetState,
                  now: float) -> Transition | None:
        if req.op is CommandOp.DRAIN:
            st = state.nodes.get(t.target)
            if st is None:
                return None
            d = st.drain
            mine = d.cmd_id == t.cmd.cmd_id
            if d.state is DrainState.DRAINED and t.phase is Phase.ACKNOWLEDGED and not mine:
                # Acknowledged, and the node is drained: by this command or by another that
                # reached it after (its status names the last one, as Slurm keeps the last
                # reason). Two drains of one node at once read "timed out" for the one that
                # requeued the job (an SRE drill).
                # Who, as the agent's drain event says it: two operators' drains of one node
                # at once told the one whose reason was replaced the reason, not whose it was
                # (a 2026-12-07 drill).
                by = f" [{d.requested_by}]" if d.requested_by else ""
                other = f" (its status names another drain: {d.reason}{by})" if d.cmd_id else ""
                return self._move(req, t, Phase.DONE, f"DRAINED{other}", now)
            if (d.state is DrainState.NONE and t.detail == DRAINING
                    and st.online is True):
                # Seen draining for this command, now in service: a resume undid it before it
                # drained. Left open, it kept "cmds 1 open" in the console's header and a CLI
                # drain waiting, until a later, unrelated drain of the node closed it as done
                # (a newcomer run). A Last Will may carry no drain: online only.
                if t.draining_session is not None and t.draining_session[0] != st.status_bd_seq:
                    # A new session: the same process re-arming its will after the resume
                    # (agents/agent.py), or a new one that lost its state, which nobody
                    # resumed (FleetState.drains_lost): its first sample tells which.
                    sample = st.sample
                    if sample is None or sample.bdSeq < st.status_bd_seq:
                        return None
                    # Its process unknown when seen draining (no sample of it yet): a resume is
                    # the likelier, and "failed" of an operator's resume would be false.
                    started = t.draining_session[1]
                    if started is not None and st.agent_started != started:
                        return self._move(req, t, Phase.FAILED, "the agent restarted without "
                                          "its drain: the node is in service again", now)
                return self._move(req, t, Phase.SUPERSEDED,
                                  "resumed before it drained: the node is in service", now)
            ours = mine or (not d.cmd_id and t.phase is Phase.ACKNOWLEDGED)
            if not ours:
                return None
            if d.state is DrainState.DRAINED:
                return self._move(req, t, Phase.DONE, "DRAINED", now)
            if d.state is DrainState.DRAINING and t.detail != DRAINING:
                t.draining_session = (st.status_bd_seq, st.agent_started)
                return self._move(req, t, Phase.ACKNOWLEDGED, DRAINING, now)
            seen = t.draining_session
            if (d.state is DrainState.DRAINING and seen is not None and seen[1] is None
                    and st.agent_started is not None and st.sample is not None
                    and st.sample.bdSeq >= seen[0] == st.status_bd_seq):
                # Seen draining before any sample (a console just started, a CLI whose wait
                # for samples ran out): the first sample of that session names its process,
                # or a resume after it read as an agent that lost its drain (a review).
                t.draining_session = (seen[0], st.agent_started)
            return None
        if req.op is CommandOp.RESUME:
            st = state.nodes.get(t.target)
            if st is None or t.phase is Phase.REQUESTED:
                return None
            if st.drain.state is DrainState.NONE and st.online is not False:
                # The agent's own word when there was nothing to undo (agents/agent.py).
                done = ("in service, was not drained"
                        if t.detail.startswith(NOT_DRAINED) else "back in service")
                return self._move(req, t, Phase.DONE, done, now)
            return None
        job = state.jobs.get(t.target)
        if job is None:
            return None
        restarted = job.requeues > req.baseline_requeues or (
            job.started_ts is not None and req.baseline_started_ts is not None
            and job.started_ts > req.baseline_started_ts)
        if not restarted:
            return None
        requeued = f"requeued (requeues {job.requeues})"
        if job.state.value == "R":
            return self._move(req, t, Phase.DONE, f"{requeued}, running again at step {job.step}",
                              now)
        if job.state.value in ("CG", "CD"):
            return self._move(req, t, Phase.DONE, f"{requeued}, now {job.state.value}", now)
        # Requeued and pending: "done" as soon as the requeue showed read as running again,
        # while a queued job had taken its nodes (a jobs audit). Done once the scheduler says
        # so (it answers done for a job still pending after its wait, docs/scenarios.md).
        why = job_reason(job)
        pending = f"{requeued}, now {job.state.value}{f' ({why})' if why else ''}"
        if t.agent_done:
            return self._move(req, t, Phase.DONE,
                              f"{pending}: it runs once the scheduler finds it nodes", now)
        return self._move(req, t, Phase.ACKNOWLEDGED,
                          f"{pending}{WAITING_TO_RUN}", now)

    def _on_deadline(self, req: Request, t: TargetProgress, state: FleetState,
                     now: float) -> Transition | None:
        age = now - req.issued_at
        if t.phase is Phase.REQUESTED and age > req.ack_timeout_s:
            known = "" if self.unanswered is None else self.unanswered(req)
            if known is None:
                return None
            why = f"no acknowledgement within {req.ack_timeout_s:g} s"
            if t.send_error:
                why += f"; never published: {t.send_error}"
            # A node known offline or silent is why first: the broker's test publish not
            # back (``known``) would blame the ACL for a node that is down, and a user that
            # may publish commands but not read them back always has that verdict (a review).
            node = (why_scheduler_unanswered(state) if req.op is CommandOp.RESTART_JOB
                    else why_unanswered(state, t.target))
            dead = node or known or ("" if req.op is CommandOp.RESTART_JOB
                                     else never_reached(state, t.target))
            if dead:
                why += f" — {dead}"
            return self._move(req, t, Phase.TIMED_OUT, why, now)
        if (t.phase is Phase.ACKNOWLEDGED and req.effect_timeout_s is not None
                and age > req.effect_timeout_s):
            effect = {CommandOp.DRAIN: "DRAINED", CommandOp.RESUME: "the node back in service",
                      CommandOp.RESTART_JOB: "the job requeued"}.get(req.op, "the effect")
            if req.op is CommandOp.RESTART_JOB and t.detail.endswith(WAITING_TO_RUN):
                effect = "the job running again"  # requeued, seen: pending all that time
            return self._move(req, t, Phase.TIMED_OUT,
                              f"acknowledged, but {effect} not seen within "
                              f"{req.effect_timeout_s:g} s", now)
        return None

    def expire_all(self, now: float, why: str, phase: Phase = Phase.TIMED_OUT
                   ) -> list[Transition]:
        """Give up on everything still open (the CLI's overall deadline, an interrupt)."""
        out = []
        for req in self.active:
            for t in req.targets:
                if not t.phase.terminal:
                    detail = f"{why} ({t.detail})" if t.detail else why
                    moved = self._move(req, t, phase, detail, now)
                    if moved is not None:
                        out.append(moved)
        return out

    def _move(self, req: Request, t: TargetProgress, phase: Phase, detail: str,
              now: float) -> Transition | None:
        if t.phase is phase and t.detail == detail:
            return None
        old = t.phase
        if phase.terminal and t.unsaved and t.unsaved not in detail:
            detail = f"{detail}; {t.unsaved}"
        t.phase, t.detail, t.updated = phase, detail, now
        if req.finished_at is None and all(x.phase.terminal for x in req.targets):
            req.finished_at = now
        return Transition(req, t.target, old, phase, detail, now)


REFUSED = "refused"
"""The audit outcome of a command refused before anything was sent."""


def refusal(op: CommandOp, targets: Iterable[str] | str, why: str, *, who: str, cluster: str,
            now: float, reason: str = "", mode: DrainMode | None = None) -> AuditRecord:
    """The audit record of an operator's command refused before it was sent (a node or job
    this console does not know, no broker, a bad host list, interrupted): the attempt belongs
    in the audit trail as much as a command that was sent and rejected. ``targets``: node ids,
    or the hostlist or job id as typed."""
    text = targets if isinstance(targets, str) else compress(targets)
    if op is CommandOp.RESTART_JOB:
        text = f"job {text}"  # as Request.target_text says it
    return AuditRecord(ts=now, who=who, what=op.value, targets=text, why=reason.strip(),
                       outcome=REFUSED, request_id=new_request_id(now), cluster=cluster,
                       detail=why.strip().rstrip("."),
                       args={"mode": mode.value} if mode is not None else {})


def retire_refusal(state: FleetState, targets: Iterable[str], now: float | None = None) -> str:
    """Why ``fleetdeck retire`` leaves ``targets`` alone ('' for none): a node heard from
    now (online, its telemetry coming) would publish its birth again at its next connect or
    rebirth request, so its agent must stop first (docs/protocol.md, "Retiring a node")."""
    targets = list(targets)
    live = heard_live(state, targets, now)
    if not live:
        return _held_refusal(state, targets)
    one = len(live) == 1
    return (f"{compress(live)} {'is' if one else 'are'} online now (telemetry heard): "
            f"{'its agent' if one else 'their agents'} would publish "
            f"{'its' if one else 'their'} birth again; stop "
            f"{'it' if one else 'them'} first (systemctl stop fleetdeck-agent), or --force")


def _held_refusal(state: FleetState, targets: list[str]) -> str:
    """A node a job still holds, by the scheduler's word: forgotten, its job read as healthy
    with a node gone from every view, its "offline, in job 4101" incident gone with no
    word (a review)."""
    held = {t: job for t in targets if (job := holding_job(state, t)) is not None}
    if not held:
        return ""
    one = len(held) == 1
    jobs = sorted(set(held.values()))
    return (f"{compress(list(held))} {'is' if one else 'are'} held by job "
            f"{', '.join(jobs)} (the scheduler says so): retired, "
            f"{'it' if one else 'they'} would leave every view while the job still "
            f"runs on {'it' if one else 'them'}; requeue or end the job first, or --force")


def heard_live(state: FleetState, targets: Iterable[str], now: float | None = None) -> list[str]:
    """Of ``targets``, those heard online now (their telemetry coming): retired, their agents
    publish their births again at the next rebirth request (``retire_refusal``). A node whose
    deltas come while their keyframe is awaited is heard too: the shipped ACL's ``admin``,
    the user docs/security.md gives ``retire``, may not ask for keyframes, and it retired a
    running agent's node without ``--force`` whenever no periodic keyframe fell in its wait
    (a newcomer's run of the production set-up on loopback)."""
    at = time.time() if now is None else now
    waiting = state.malformed.awaiting_keyframe
    return [t for t in targets if _heard_live(state.nodes.get(t), waiting.get(t), at)]


def _heard_live(st: NodeState | None, awaiting: tuple[float, int] | None, now: float) -> bool:
    if st is None or st.online is False:
        return False
    if st.sample is not None and not st.stale:
        return True
    # Its deltas' last one within the stale window, as ``NodeState.talking`` reads them.
    return awaiting is not None and now - awaiting[0] <= STALE_INTERVALS * st.interval_s


def audit_fields(req: Request) -> dict[str, str]:
    out = {"mode": req.mode.value} if req.op is CommandOp.DRAIN else {}
    out["cmd_ids"] = ",".join(t.cmd.cmd_id for t in req.targets)[:2000]
    # How long it may take to land and show: a console settling it after its writer stopped
    # says ``unknown`` only past it (``orphan_deadline``).
    out["deadline_s"] = f"{req.ack_timeout_s + (req.effect_timeout_s or 0.0):g}"
    return out



UNOWNED_AFTER_S = ACK_TIMEOUT_S + EFFECT_TIMEOUT_S
"""An open audit record with no ``writer`` (written before records named theirs) is taken for
orphaned once older than this: the longest a console follows a command with a deadline."""


def orphan_deadline(record: dict[str, Any]) -> float:
    """When (unix seconds) the command of an orphaned ``record`` can no longer land: its own
    deadline (``audit_fields``), ``UNOWNED_AFTER_S`` after it for a record without one. Until
    then what is heard may be the moment before it lands: not ``unknown`` yet."""
    given = record.get("args")
    try:
        span = float(given["deadline_s"]) if isinstance(given, dict) else UNOWNED_AFTER_S
    except (KeyError, TypeError, ValueError):
        span = UNOWNED_AFTER_S
    try:
        return float(record.get("ts", 0.0)) + span
    except (TypeError, ValueError):
        return 0.0


def orphan_heard(record: dict[str, Any], state: FleetState) -> bool:
    """Whether the state has heard enough to settle ``record`` (every target node's status):
    a console just started knows no node until the broker's retained statuses arrive."""
    if record.get("what") == CommandOp.RESTART_JOB.value:
        return bool(state.jobs)
    nodes = _record_nodes(record)
    return bool(nodes) and all(
        (st := state.nodes.get(n)) is not None and st.online is not None for n in nodes)


def _record_nodes(record: dict[str, Any]) -> list[str]:
    try:
        return expand(str(record.get("targets", "")))
    except HostlistError:
        return []


def _writer_words(record: dict[str, Any]) -> str:
    writer = record.get("writer")
    if not isinstance(writer, dict):
        return "the process that sent it"
    prog = str(writer.get("program", "fleetdeck"))
    prog = {"fleetdeck console": "console", "fleetdeck": "fleetdeck process"}.get(prog, prog)
    return f"the {prog} that sent it (pid {writer.get('pid')} on {writer.get('host')})"


def settlement(record: dict[str, Any], state: FleetState, now: float) -> AuditRecord:
    """The outcome of a request whose writer stopped before it wrote one (killed, power
    lost), from what ``state`` shows now: a drain whose node's status names it DRAINING or
    DRAINED took effect (``done``), so did a resume whose node is in service again; anything
    else cannot be told (``unknown``: a node in service after a drain was never drained, or was
    resumed since; a job restart leaves no mark of its own). docs/reliability.md, "A console
    killed with a command open"."""
    what = str(record.get("what", ""))
    given = record.get("args")
    args: dict[str, Any] = given if isinstance(given, dict) else {}
    # Its commands' ids are the request id and the target's index: ``cmd_ids`` is cut at 2,000
    # characters, and a drain of 128 nodes matched on it read "by another drain" (a review).
    mine = f"{record.get('request_id', '')}."
    seen: list[str] = []
    took = what in (CommandOp.DRAIN.value, CommandOp.RESUME.value)
    nodes = _record_nodes(record) if took else []
    took = took and bool(nodes)
    for node in nodes:
        st = state.nodes.get(node)
        if st is None or st.online is None:
            seen.append(f"{node} not heard")
            took = False
            continue
        d = st.drain
        if what == CommandOp.DRAIN.value:
            if d.state is not DrainState.NONE and mine != "." and d.cmd_id.startswith(mine):
                seen.append(f"{node} {d.state.name}")
                continue
            took = False
            if d.state is not DrainState.NONE:
                seen.append(f"{node} {d.state.name} by another drain ({d.reason})")
            else:
                seen.append(f"{node} in service" if st.online else f"{node} offline")
        elif d.state is DrainState.NONE and st.online:
            seen.append(f"{node} in service")
        else:
            took = False
            seen.append(f"{node} {d.state.name if st.online else 'offline'}")
    if what == CommandOp.RESTART_JOB.value:
        job = state.jobs.get(str(record.get("targets", "")).removeprefix("job "))
        if job is not None:
            seen.append(f"the job is {job.state.value} (requeues {job.requeues})")
    now_seen = "; ".join(seen)
    who = _writer_words(record)
    if took:
        outcome, detail = Phase.DONE.value, f"seen after {who} stopped: {now_seen}"
    else:
        outcome = UNKNOWN
        detail = f"{who} stopped before any answer was recorded"
        if now_seen:
            detail += f"; seen now: {now_seen}"
    return AuditRecord(ts=now, who=str(record.get("who", "")), what=what,
                       targets=str(record.get("targets", "")), why=str(record.get("why", "")),
                       outcome=outcome, request_id=str(record.get("request_id", "")),
                       cluster=str(record.get("cluster", "")), detail=detail[:2000],
                       args={k: str(v) for k, v in args.items()})
