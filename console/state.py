"""The fleet as the console knows it, updated once per tick from an ingest batch.

Liveness follows Sparkplug: a birth opens a session (``bdSeq``); a status of an older session —
typically a late Last Will — is ignored; ``offline`` is a status ``online=false`` of the current
session. Staleness (no telemetry for 3 intervals) is judged from receive times at tick time,
because amqtt never enforces keepalive and a wedged collector can keep an MQTT session alive.
"""

import heapq
import itertools
import math
import re
import time
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import msgspec

from fleetdeck.console.bridge import CLUSTER_SIDE_S, BridgeState, hear_bridge
from fleetdeck.console.clock import CLOCK_RULE, ClockWatch
from fleetdeck.console.digest import (
    BEHIND_RECOVERED,
    BEHIND_SUSPECT,
    STALE_PERIODS,
    STEPPING_NOTE,
    SWITCH_MARK,
    apply_digest,
    judge_digest,
)
from fleetdeck.console.health import (
    GPU_READER_SAYS,
    LINK_RULES,
    NO_FINDINGS,
    VERDICT_ORDER,
    Finding,
    KnownInventory,
    NodeHistory,
    Severity,
    Verdict,
    combine,
    evaluate,
    gpus_expected,
    still_healthy,
    still_quiet,
)
from fleetdeck.console.ingest import Batch, MalformedLog
from fleetdeck.hostlist import HostlistError, compress, expand
from fleetdeck.protocol import fast, wire2
from fleetdeck.protocol.fast import Birth, Telemetry
from fleetdeck.protocol.messages import (
    RESUMED,
    SCHED_HEARTBEAT_S,
    Ack,
    AckResult,
    CollectorStatus,
    CommandOp,
    DrainInfo,
    DrainState,
    Event,
    JobStatus,
    SchedulerStatus,
    Status,
)
from fleetdeck.protocol.thermal import gpu_uuids

STALE_INTERVALS = 3.0
FULL_JUDGE_EVERY_S = 10.0
"""A judgement pass over every node this often; in between only the nodes that changed, that
are due to go stale, or that are stale, offline or duplicated are visited (FleetState.judge)."""
JUDGE_CHUNK = 256
"""A pass with a time budget looks at the clock once every this many nodes (~0.3-3 ms)."""
RESEND_RETRY_S = 10.0
RESEND_BACKOFF_CAP_S = 300.0
RESEND_MAX_ASKS = 4
UNBORN_MAX = 10_000
BIRTHS_DROPPED = ("the broker most likely drops the nodes' births (a message_size_limit or "
                  "max_packet_size below a birth's size, 2-3 KB, or an ACL that keeps "
                  "node/+/birth from this broker user)")
"""Why a node whose agent answered a rebirth ask has no birth here (``births_unheard``)."""
"""Nodes heard from without a birth that are tracked for a rebirth request, at most."""
RECALLED_MAX = 1_000_000
"""Forgotten nodes whose last recorded verdict is kept, at most (node ids come from the network)."""
EVENT_MEMORY = 5000
SHAPE_LOG_MAX = 100_000
NODE_EVENT_MEMORY = 50
WAITING = "waiting"
"""What a node that was born but has sent no telemetry yet shows instead of ``ok``."""
_GPU_NAME = re.compile(r"gpu\d+")
AGENT_RECONNECT_S = 30.0
"""How long after the broker is back every agent has reconnected: their back-off is capped at
30 s (docs/reliability.md). Until then a node not heard from is not judged stale."""

PORT_DOWN_SETTLE_S = 2.0
"""A node failed only by its ports going down (N1, with the link_downed of that drop: N2) is
reported (a ``Transition``: the store, the timeline, notifications) this long after its
verdict changed, with that time: a dying leaf switch takes a port of every node under it, but
each node says so in its own next sample, up to an interval apart, and until three have
(``CORRELATION_MIN``) the switch is no suspect. The first nodes wrote ``ok -> failed`` and
``failed -> degraded (F1)`` half a second later (fault audit; fixtures/leaf_switch.jsonl.gz).
The views show the verdict as it is meanwhile."""

HOLDING_NODES = frozenset({"R", "CG", "RQ"})
"""Job states (squeue codes) in which a job holds its nodes: running, completing, requeued."""
FAILING_STATES = frozenset({"F", "NF"})
"""Job states ``judgements.failed_job`` may say something of: every other one it passes at a
glance."""
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(?:\[[0-9,-]+\][A-Za-z0-9._-]*)?")
_REASON_HOSTS_MAX = 4096
"""A bracketed host list in a reason expands to at most this many names (a typo'd range in a
free-text reason must not cost a tick)."""


def reason_words(reason: str) -> set[str]:
    """The words of a scheduler's reason, node names among them ("rank 8 on gpu0011." gives
    "gpu0011"; Slurm's compressed "gpu[0011-0013]" gives the three): which nodes it names."""
    words: set[str] = set()
    for found in _WORDS.findall(reason):
        w = found.rstrip("._-")
        if "[" in w:
            try:
                words.update(expand(w, limit=_REASON_HOSTS_MAX))
                continue
            except HostlistError:
                pass  # a typo'd or huge range: the word as written
        words.add(w)
    return words


JOB_WINDOW_S = 60.0
"""Nodes of one job that failed within this long of each other failed together: one incident
naming the job (its blast radius), not one per node (console/incidents.py); and a job a node's
telemetry stopped naming this close to its verdict's change is the job it failed in."""
JOB_CLEAR_CONFIRM_S = 5.0
"""A job whose status topic carried an empty payload is withdrawn this long after, unless a
status of it came meanwhile; time the console could not hear it (``unseen_s``) does not count
(docs/protocol.md, JobStatus): MQTT 3.1.1 hands a subscriber a
retained clear with the retain flag off, as it hands an empty publish that cleared nothing, so
the session asks the broker for the job's retained status again (``ConsoleSession
._ask_job_statuses``) and one that still stands keeps the job. An empty payload that was not
retained withdrew a running job from the console that heard it, while every console started
later read it running."""
WILL_BURST_S = 2.0
"""A Mosquitto that shuts down (SIGTERM, ``systemctl restart``) sends the Last Will of every
client it disconnects, and this console gets those of the clients dropped before it: a burst of
``online: false`` just before its own connection goes. Wills that arrived this long before the
console saw the loss (a tick late at most, 0.5 s, and a slow tick) are the broker's, not the
nodes': they are undone (``lose_sight``), and an offline verdict a will made is not reported
until it is this old with the connection still up. Measured: docs/reliability.md."""

SCHED_REPLAY_S = 2 * SCHED_HEARTBEAT_S
"""A birth whose ``ts`` is older than the scheduler's newest word (``sched_newest_ts``) by more
than this is a replay, not a live process: a broker restored from an older save of its retained
messages (mosquitto's autosave) replayed a replaced process's last birth after its successor's
will, and counted, a dead scheduler read online for ever with no incident (a review). Twice the
heartbeat: live births come that often, so room for two hosts' clocks in a bridge's fail-over
and a slow delivery; a process that speaks twice, its ``ts`` moving, counts whatever its clock
(docs/protocol.md, "Scheduler status")."""

Blind = tuple[float, float | None]
"""(since, until) of the console's last time without a broker connection, ``until`` including
the agents' time to reconnect (``AGENT_RECONNECT_S``); None while still cut off."""


def unseen_s(heard: float, now: float, blind: Blind | None) -> float:
    """Seconds of ``heard``..``now`` during which this console could have heard the node: a
    console cut off from the broker hears nothing, and silence it could not hear is not the
    node's (it must not go stale, nor its rack look dark, for the console's own outage)."""
    if blind is None:
        return now - heard
    since, until = blind
    end = now if until is None else min(now, until)
    return now - heard - max(0.0, end - max(heard, since))


@dataclass(frozen=True, slots=True)
class GpuUse:
    """A node's GPUs by what they can do now (``NodeState.gpu_use``); the overview's counts,
    ``status --json`` totals and the clusters view all add these up."""

    in_use: int = 0
    free: int = 0
    failed: int = 0
    """Missing, or with a fault of their own (a drain finding on that GPU: XID 79, DBE, …)."""
    out: int = 0
    """Sound, but on a node that cannot take work: drained or draining, down, stale, or failed
    for something that is not the GPU's (an IB port, a duplicate node id)."""
    waiting: int = 0
    """On a node that has sent no telemetry yet: not known, neither usable nor failed."""

    @property
    def usable(self) -> int:
        """GPUs that run work or could (in use + free)."""
        return self.in_use + self.free


@dataclass(frozen=True, slots=True)
class PortUse:
    """A node's IB ports by what is known of them now (``NodeState.port_use``); the overview,
    ``status --json`` totals and the clusters view all add these up, as they do ``GpuUse``."""

    up: int = 0
    down: int = 0
    """Heard from, and not ACTIVE/LinkUp in its latest sample."""
    unknown: int = 0
    """On a node that is silent (stale, offline) or has sent no telemetry yet: its last sample
    is no word on them now (a cluster whose agents died read 512/512 up)."""


NOT_DRAINED = DrainInfo()
"""The drain of a node that is not drained (immutable, shared)."""



_TALKS = "telemetry delta{s} heard, the last {ago:.0f} s ago, but not yet its keyframe"
_TALKS_RE = re.compile(r"^\d+ " + re.escape(_TALKS).replace(re.escape("{s}"), "s?").replace(
    re.escape("{ago:.0f}"), r"\d+"))


RECUR_S = 24 * 3600.0
"""A failure that is the one before it again within this long of its clearing recurs (a GPU
that fails the same way a day after its reset is the same bad GPU)."""
HELD_STEADY_S = 60
"""How long a port held only by N2/N3's hour must have been up, its fatal counters still,
before its node reads as repaired (``judgements.held_only_since``) and its fault as cleared
(``NodeState.quieted``)."""
RECONNECT_LOOP = "its agent reconnects again and again"
"""Said by H2 of a node whose agent opens session after session with no sample between
(``NodeState.births_unsampled``); ``judgements.recommended_action`` reads it."""
RECONNECT_LOOP_BIRTHS = 4
"""Births with no sample between, within ``RECONNECT_LOOP_S``, that make a reconnect loop: a
broker restart or two is one or two."""
RECONNECT_LOOP_S = 30.0

KEYFRAMES_DROPPED = "keyframe asks and none came"
"""What H1 says of a node whose agent answered keyframe asks none of whose keyframes came."""
KEYFRAME_ANSWERS_SAID = 2
"""Keyframe asks its agent answered, none of their keyframes heard, before H1 says the broker
drops them: one answer may cross its keyframe in flight."""


def awaiting_keyframe(count: int, ago_s: float, answered: int = 0) -> str:
    """H1's text of a node that talks: its deltas heard, their keyframe awaited
    (``NodeState.talking``). ``says_it_talks`` reads it back: one place for both, so the
    wording and the check cannot drift apart. ``answered``: keyframe asks its agent answered
    since, none of their keyframes come."""
    talks = f"{count} " + _TALKS.format(s="s" if count != 1 else "", ago=max(0.0, ago_s))
    if answered >= KEYFRAME_ANSWERS_SAID:
        # Mosquitto's message_size_limit below a keyframe's size drops every keyframe and
        # none of the deltas; the ask's own text blamed a user that may not publish commands,
        # whose asks the agent had answered (a 2026-12-07 drill).
        return (f"{talks}: its agent answered {answered} {KEYFRAMES_DROPPED}: the "
                "broker most likely drops its keyframes, the largest telemetry it sends (a "
                "message_size_limit or max_packet_size below their size?)")
    return (talks + ": asked for one (an ask the broker drops, as for a broker user that may "
            "not publish node/+/cmd, such as 'viewer', waits for the agent's periodic "
            "keyframe, 30 s by default)")


def says_it_talks(h1_text: str) -> bool:
    """Whether an H1 text (a collector's, on a console on digests) is ``awaiting_keyframe``'s:
    the node talks, and a command unanswered is not its agent hung."""
    return _TALKS_RE.match(h1_text) is not None

NO_SEQS: frozenset[int] = frozenset()
"""``NodeState.event_ahead`` with no gap open: one object for every node."""


class NodeState(msgspec.Struct, gc=False):
    # A ``gc=False`` Struct: no collection visits it. Its 63 fields were ~1 million of the 2.7
    # million references a full sweep followed at 16,384 nodes, a cache miss each
    # (docs/performance.md, "Out of the collector's view"). Nothing it holds refers back to
    # it (a node's state is reached from ``FleetState.nodes`` only), so it can be in no
    # reference cycle the collector would have to break; what it holds that the GC tracks
    # (a gap's set, an events deque, findings lists) is still tracked on its own.
    node_id: str
    birth: Birth | None = None
    bd_seq: int = -1
    online: bool | None = None
    """None until a status or telemetry says otherwise."""
    status_ts: float = 0.0
    status_sent: float = 0.0
    """Its latest status's own time (unix s): one sent before a broker restart says the agent
    has not reconnected since (``FleetState.broker_restarted``)."""
    drain: DrainInfo = NOT_DRAINED
    sample: wire2.Sample | None = None
    """The latest telemetry; read it as ``telemetry`` (a quiet v2 sample's rows are built when
    first read: ``wire2.Pending``)."""
    last_rx: float | None = None
    first_seen: float | None = None
    """When this console first heard of the node: staleness counts from here until telemetry."""
    session_rx: float | None = None
    """When this console heard the node's current agent session's first sample (a console
    start, an agent restart): its peers behind a switch may not be heard yet then
    (``_ports_just_down``)."""
    rejoined_at: float | None = None
    """When this node, silent (offline or stale), came back in a new session (a status online
    of a later bdSeq than its last sample's), until that session's first sample: its staleness
    counts from here and it is ``waiting``, its verdict not reported. A restarted simulator's
    nodes wrote "offline -> stale", "stale -> failed (N2)", "failed -> degraded" within a
    second (docs/reliability.md, "Failure drills by hand"; docs/protocol.md)."""
    last_seq: int | None = None
    agent_started: int | None = None
    seq_gaps: int = 0
    stale: bool = False
    stopped: bool = False
    """Offline by its agent's own goodbye (a clean stop), not its Last Will."""
    findings: list[Finding] = msgspec.field(default_factory=lambda: NO_FINDINGS)
    """From the latest telemetry (health rules)."""
    liveness: list[Finding] = msgspec.field(default_factory=lambda: NO_FINDINGS)
    """H1/H2: judged from the clock at tick time."""
    verdict: Verdict = Verdict.STALE
    history: NodeHistory = msgspec.field(default_factory=NodeHistory)
    events: deque[Event] | tuple[()] = ()
    """Its latest events (``NODE_EVENT_MEMORY``), oldest first: ``()`` until its first one
    (``node_event_log``), as most nodes never have one and an empty deque a node was one more
    object each GC sweep walked (docs/performance.md, "Fewer objects for the GC to walk")."""
    event_prefix: str = ""
    """``<node>.<agent start ms>.``: the agent process whose event seqs we track."""
    event_seq: int = 0
    """Highest event seq received with every earlier one received too (this process)."""
    event_ahead: set[int] | frozenset[int] = NO_SEQS
    """Event seqs received past ``event_seq``: the shared ``NO_SEQS`` while none is (the usual
    case), a set of its own only while a gap is open (``FleetState._count_event``)."""
    gap_since: float | None = None
    resend_asked: float = 0.0
    resend_asks: int = 0
    """Re-send requests since the in-order counter last moved (back-off, then give up)."""
    resend_progress: int = 0
    resend_answer: int | None = None
    """How many events the agent said it re-sent at its last answer to a re-send ask (its ack,
    "re-sent N event(s)"); None until one came."""
    events_lost: int = 0
    """Events the agent emitted that can no longer be had (gone from its outbox)."""
    processes: dict[int, float] = msgspec.field(default_factory=dict)
    """Agent process start stamps heard from recently -> when last heard (duplicate ids)."""
    turn_takers: tuple[int, ...] = ()
    """The processes (start stamps) seen taking turns in the duplicate episode ``duplicate_at``
    dates: H3's count. Not ``processes``, which holds the ones a restarted agent left
    behind too: two clones after two restarts read "4 agent processes take turns" in the
    console that saw the restarts, "2" in a one-shot ``status`` (2026-12-07 drill). A tuple,
    not a set: an empty set per node is one more object the GC tracks (tests/test_runtime.py)."""
    drain_lost: DrainInfo | None = None
    """The drain of the session before, where a new session's status says not drained: told
    as lost (``FleetState.drains_lost``) once the session's first sample shows a new agent
    process."""
    status_bd_seq: int = -1
    """The session (bdSeq) of the last status applied: a birth of a new session comes first
    and moves ``bd_seq`` (FleetState.drains_lost compares statuses)."""
    refused: tuple[float, int, str] | None = None
    """Its last refused telemetry (``MalformedLog.refused_samples``), read by its H1."""
    awaiting: tuple[float, int] | None = None
    """Its last deltas that wait for their keyframe (``MalformedLog.awaiting_keyframe``), read
    by its H1: a node heard talking is not silent."""
    keyframe_answers: tuple[float, ...] = ()
    """When its agent answered a keyframe ask ("keyframe with the next sample"), the last few:
    those after its last applied sample, with no keyframe since, say the broker drops them."""
    talks: bool = False
    """``talking`` as of its last judgement (``judge``): what its H1, its action, the silence
    incidents and a command's time-out read, so all of them agree with its verdict."""
    duplicate_at: float | None = None
    """Last time two agent processes were seen alternating under this node id."""
    births_unsampled: tuple[float, ...] = ()
    """When its last few births came, since its last sample: an agent the broker drops at its
    first keyframe reconnects about once a second and never gets a sample through (H2's
    ``RECONNECT_LOOP``)."""
    judged: bool = False
    made: int = 0
    """Position among the states FleetState made (its dict's order; ``_pick`` sorts by it)."""
    revision: int = 0
    """Bumped whenever this node's data changed (a sample, a status, a birth): views cache rows
    keyed on it instead of on hand-picked fields."""
    shape_rev: int = 0
    """Bumped when what the fleet-wide views summarise changed (verdict, liveness, drain,
    findings, busy or not): a healthy node's fresh sample does not bump it."""
    shape: tuple[object, ...] = ()
    behind_switch: str = ""
    """A suspect switch this node's bad ports hang off (set by the fleet-wide correlation)."""
    behind_ports: frozenset[str] = frozenset()
    """``dev:port`` components behind ``behind_switch``: their findings are the switch's."""
    behind_link_only: frozenset[str] = frozenset()
    """Of ``behind_ports``, those whose symbol errors stay the node's own: only their link
    faults are the switch's (``SuspectSwitch.link_only``, ``switch_owns``)."""
    behind_recovered: bool = False
    """Every switch in ``behind_switch`` is up again, suspected only for the hour its ports'
    fatal counters count (``SuspectSwitch.recovered``)."""
    behind_by_collector: bool = False
    """``behind_*`` came from the collector's F1 (a console on digests): its own
    correlation (``judgements.correlate_digests``) leaves them be."""
    job_stepping: str = ""
    """A job that keeps stepping on this node although its agent is silent: the agent died,
    not the node."""
    left_job: tuple[str, float] | None = None
    """(job id, receive time) of the sample that first named no job after its telemetry
    named that one: the job a node failed under is gone from its next samples once the
    scheduler requeues it elsewhere, and three nodes an XID 79 took out of one job read as
    three idle nodes with "no job on it" (an SRE drill; ``judgements.struck_job``). The store
    keeps it (``FleetState.jobs_left``): after a restart the nodes' samples name no job."""
    changed_at: float = 0.0
    """Receive time of the last change of verdict (for 'since' columns and sorting)."""
    change_seen: bool = False
    """``changed_at`` dates a change this console saw (or its store recorded seen), not the
    first judgement of a node already in that verdict when first heard: a one-shot ``status``
    found three failed nodes of a job, failed minutes apart, and called them "failed at once"
    (a fault drill; ``incidents.job_faults``). Seen only from a verdict ``verdict_heard``: a
    node restored ok that failed while no console ran, or one back failed from a silence or an
    agent restart, failed at some time unknown, not when this console first heard it so (a
    review)."""
    verdict_heard: bool = False
    """The last judgement rests on a sample heard in the agent session the node is in now: not
    recalled from the store, not offline, stale or waiting, not a collector's digest gone
    silent. A change from such a verdict is one this console saw happen (``change_seen``)."""
    failing: frozenset[str] = frozenset()
    """Its drain findings of its own hardware (``"G2 gpu0"``) since they began, until they
    are all gone."""
    cleared: tuple[float, frozenset[str]] | None = None
    """When its drain findings of its own hardware were last all gone (repaired, or its
    fault's window ended), whatever its verdict then (ok, or degraded by a warning left over),
    with the failure's ``failing``, each GPU's with its uuid (``_part_ids``)."""
    quieted: tuple[float, frozenset[str]] | None = None
    """(when, ``failing``'s parts as ``cleared`` names them) since its drain findings were all
    N2's hour, its links up again: held ``HELD_STEADY_S``, the fault had cleared, and a part
    of it back is a recurrence (``_note_recurrence``). Its link down again while N2 held the
    node read as the first failure, "reseat or replace its cable", not the replacement (a
    fault audit)."""
    recurred: tuple[float, tuple[str, ...]] | None = None
    """(when it had cleared, the drain findings that came back) of a failure that is the one
    before it again within ``RECUR_S`` of its clearing, until it clears: a part that fails
    again after its repair is for replacing, not for the same repair
    (``judgements.recommended_action``)."""
    recurred_at: float | None = None
    """When ``recurred``'s parts failed again. ``changed_at`` dated it, the node's change to
    failed: a fault back on a node failed already (by another part, or by N2's hour) read
    "came back 0 s after it cleared" (a review)."""
    before_spell: tuple[float, Verdict, bool] | None = None
    """``changed_at``, ``changed_to`` and ``change_seen`` of the verdict the node had when it
    went offline or stale: back to that verdict, it is no change (``_verdict_changed``)."""
    changed_to: Verdict | None = None
    """The verdict ``changed_at`` dates. A node's verdict while it is ``waiting`` (ok for want
    of data) is no change: a node recalled failed and heard failed again keeps the store's
    time, where it read as failed since this console's start (an incident hours old, AGE 8s;
    an SRE drill)."""
    reported: Verdict | None = None
    """The verdict the last ``Transition`` of this node gave (the store's latest row for it,
    after a restore); None before the first. A node that is ``waiting`` has no verdict to
    report yet: its first row is its first real one."""
    held_since: float | None = None
    """When the verdict change the port hold (PORT_DOWN_SETTLE_S) keeps unwritten began."""
    settle_until: float | None = None
    """A node recalled from the store as failed or degraded: until this time (a minute after
    its first sample here; ``math.inf`` before that sample) a better verdict is not reported.
    Its rules' windows restarted empty with this process, so a fault still there reads ok for
    the first samples: without the hold the store got 'failed -> ok' at every collector
    restart and 'ok -> failed' a second later (RESTORE_SETTLE_S)."""
    judge_key: tuple[object, ...] = ()
    """What the last judgement of a live, fresh node read, its findings first
    (FleetState.judge skips the node while this and the clock leave the verdict as it was)."""
    basis: wire2.Basis | None = None
    """The v2 keyframe the applied sample rests on, and whether it moved only columns no rule
    reads (``Ingest.Batch.basis``): None for v1, or after a birth."""
    counted: tuple[object, int, int] = (None, 0, 0)
    """(sample, GPUs present, IB ports up): the counts of ``telemetry`` (``_counts``)."""
    metered_for: object = None
    """The sample ``metered`` was read from."""
    metered: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The UTIL/TEMP/POWER figures of ``metered_for``: ``rows.metrics``, read once per sample.
    Two fields, not a (sample, figures) pair: a pair made after its figures stays tracked
    after the collection that untracks them, and 16,384 of them were frozen so, walked by
    every sweep (docs/performance.md, "What the look leaves")."""
    deadline_at: float | None = None
    """When this node goes stale unless heard from (its entry in FleetState's deadline heap)."""
    digest: fast.Digest | None = None
    """The owning collector's latest digest (a console on digests): the verdict comes from it."""
    digest_rx: float = 0.0
    raw: bool = False
    """Raw telemetry of a node known from digests is being received (its detail is open): the
    samples show in the detail, the verdict stays the collector's."""
    born_raw: bool = False
    """A console on raw telemetry heard this node's own birth: a collector's digest of it (a
    replay of a recording that holds both) must not overwrite what the console judges."""

    @property
    def telemetry(self) -> Telemetry | None:
        t = self.sample
        # The Pending stays the sample (its rows are cached in it): "is this the sample the
        # state took" stays an identity test (ConsoleSession._record_history).
        return t.full() if type(t) is wire2.Pending else t  # type: ignore[return-value]

    @telemetry.setter
    def telemetry(self, value: Telemetry | None) -> None:
        self.sample = value

    def talking(self, now: float, blind: Blind | None = None) -> bool:
        """Deltas heard since its last applied sample, all waiting for their keyframe, the last
        of them within the stale window (``STALE_INTERVALS`` of its interval, as a sample's):
        the node talks, the console cannot read it yet (``awaiting``). Without the window, a
        node whose deltas were heard once talked for ever: a viewer's rack that lost power
        10 s after the console started raised no silence incident and read "wait for its
        keyframe" an hour on (a review). ``talks`` holds the last judgement's answer."""
        aw = self.awaiting
        return (aw is not None and (self.last_rx is None or aw[0] > self.last_rx)
                and unseen_s(aw[0], now, blind) <= STALE_INTERVALS * self.interval_s)

    @property
    def interval_s(self) -> float:
        if self.sample is not None:
            return self.sample.interval_s
        return self.birth.interval_s if self.birth is not None else 1.0

    @property
    def gpus_expected(self) -> int:
        """What G1 judges the node against (``health.gpus_expected``): a GPU reader that found
        none at start (NVML not loaded) expects ``EXPECTED_GPUS``, and the row said "0/0"
        and the header counted no GPU failed beside "G1 0/8 GPUs visible" (a real-node
        audit). A node known from digests takes the collector's figure, already resolved so:
        its minimal birth says ``source="digest"``, and a GPU-less node (``--source sysfs``)
        read "0/8" with 8 GPUs failed on a console on digests (docs/protocol.md, "Digest — the
        owning collector's judgement of one node")."""
        if self.digest is not None:
            return self.digest.gpus_expected
        b = self.birth
        n = gpus_expected(b) if b is not None else 0
        # Back with fewer GPUs than an earlier birth (G14): read against the fullest it had.
        # Against its own birth it read "7/7" beside "gpu3 not enumerated" (a UX pass).
        h = self.history
        if h.shrunk and h.known is not None and len(h.known.gpus) > n and any(
                f.rule == "G14" for f in h.shrunk):
            return len(h.known.gpus)
        return n

    @property
    def gpus_present(self) -> int:
        return self._counts()[0]

    @property
    def faulty_gpus(self) -> frozenset[str]:
        """GPUs (``gpu3``) named by a drain finding of their own, missing ones included (G1
        names them)."""
        out: set[str] = set()
        for f in self.findings:
            if f.severity is Severity.DRAIN and f.component.startswith("gpu"):
                out.update(c for c in f.component.split(",") if _GPU_NAME.fullmatch(c))
        return frozenset(out)

    def gpu_use(self) -> GpuUse:
        """Its GPUs by what they can do now. A node that cannot take work puts its sound GPUs
        out, not failed: a node failed for one IB port counted its 8 GPUs failed (UX audit)."""
        t = self.sample
        expected = self.gpus_expected or (wire2.rows_of(t)[0] if t is not None else 0)
        if self.waiting:
            return GpuUse(waiting=expected)
        stepping = bool(self.job_stepping) and self.drain.state is DrainState.NONE
        if t is None:
            # Its agent died before this console started, and its job steps on: its ranks
            # run on its GPUs, as a console that had its last sample counts them (one started
            # late counted them out: two consoles on one fleet, 8 GPUs apart; an SRE drill).
            if stepping:
                return GpuUse(in_use=expected)
            # Silent with no sample ever heard: out of service, but nothing says its GPUs
            # failed (a replay that starts after a node died counted them failed where the
            # live console, which had its last sample, counted them out).
            return GpuUse(out=expected)
        missing = max(0, expected - self.gpus_present)
        # A fault of the GPU's own stays one while its node is silent (last known).
        failed = min(expected, max(missing, len(self.faulty_gpus))) if self.findings else missing
        usable = max(0, self.gpus_present - (failed - missing))  # present and not faulty
        if stepping:
            # Its agent died, not the node: its job's ranks run on its GPUs (they read "out",
            # and the node "down 1", beside "the agent died, not the node"; a 3 a.m. drive).
            return GpuUse(failed=failed, in_use=usable)
        if (self.verdict is Verdict.FAILED or self.online is False or self.stale
                or self.drain.state in (DrainState.DRAINING, DrainState.DRAINED)):
            return GpuUse(failed=failed, out=usable)
        if t.job is not None:
            return GpuUse(failed=failed, in_use=usable)
        return GpuUse(failed=failed, free=usable)

    @property
    def ib_ports(self) -> int:
        """Its birth's ports, and those an earlier birth had that it lacks (N8, one finding a
        port: a console on digests knows them from the collector's findings alone). A birth
        with no port left (every HCA gone: mlx5_core not loaded after a reboot) counts its
        N8s too: it fell back to its telemetry's none, and read IB "0", no port down and 8
        fewer ports in the fleet's total beside "(0 IB ports now, 8 before)" (a review).
        Never fewer than the birth's ``ib_ports_expected`` (its SKU's, N1 "0/8 IB ports
        found"): a node that found none read "IB up 0/0" in ``status`` beside that N1, and
        one short of an HCA "7/7"; the ports it lacks count as down, as N1 drains for them."""
        b = self.birth
        found = self.history.shrunk if self.digest is None else self.findings
        gone = sum(f.rule == "N8" for f in found) if found else 0
        if b is not None and (b.ib_ports or gone or b.ib_ports_expected):
            return max(len(b.ib_ports) + gone, b.ib_ports_expected)
        t = self.telemetry
        return len(t.ib_ports) if t is not None else 0

    @property
    def ib_ports_up(self) -> int:
        """Up in the latest sample, however old: ``port_use`` says what is known now."""
        return self._counts()[1]

    def port_use(self) -> PortUse:
        """Its IB ports by what is known of them now: those of a silent node are unknown, by
        the rule that puts its GPUs out (``gpu_use``)."""
        ports = self.ib_ports
        if self.sample is None or self.online is False or self.stale:
            return PortUse(unknown=ports)
        up = min(ports, self.ib_ports_up)
        return PortUse(up=up, down=ports - up)

    def _counts(self) -> tuple[int, int]:
        """(GPUs present, IB ports up) of the latest sample, counted once per sample: the
        node list sorts and the fleet totals read them for every node (issue 12)."""
        held = self.counted
        t = self.sample
        if held[0] is not None and held[0] is t:
            return held[1], held[2]
        if t is None:
            return 0, 0
        if type(t) is wire2.Pending and not t.built:
            # From its columns: building a quiet sample's rows to count them cost 18-25 µs a
            # node; the fleet totals read every node after a burst and at the end of a
            # headless replay (docs/performance.md, "Branch `replay100`"; docs/protocol.md
            # "Telemetry v2").
            present = sum(map(bool, t.gpu_column("present")))
            up = sum(1 for state, phys in zip(t.port_column("state"),
                                              t.port_column("phys_state"), strict=True)
                     if state == "ACTIVE" and phys in (None, "LinkUp"))
        else:
            full = wire2.full(t)
            present = sum(1 for g in full.gpus if g.present)
            up = sum(1 for p in full.ib_ports
                     if p.state == "ACTIVE" and p.phys_state in (None, "LinkUp"))
        self.counted = (t, present, up)
        return present, up

    @property
    def reasons(self) -> list[str]:
        return sorted({f.rule for f in self.all_findings})

    @property
    def waiting(self) -> bool:
        """Born and not silent, but no telemetry (of this session, ``rejoined_at``) yet: its
        health is not known, neither ok nor failed (``status`` and the views say ``waiting``,
        not ``ok``)."""
        return ((self.sample is None or self.rejoined_at is not None)
                and self.online is not False and not self.stale)

    @property
    def unread_talking(self) -> bool:
        """It talks (its deltas heard, their keyframe awaited) and reads bad only for that lack
        of telemetry: stale on its own telemetry, or degraded by its collector's H1 (a
        digest's "talking" H1 is a warning). Its health is unknown, not bad. ``status`` alone
        read such nodes ``waiting`` (a viewer's watch paged a healthy fleet stale), while the
        views, the incidents and the JSON's top problems called them stale: one judgement
        now, here."""
        return self.talks and (self.verdict is Verdict.STALE or (
            self.digest is not None and self.verdict is Verdict.DEGRADED
            # Degraded by the H1 alone: a warning of its own (an event's) is its own.
            and not any(f.rule != "H1" and f.severity is not Severity.INFO
                        for f in self.findings)))

    @property
    def verdict_shown(self) -> str:
        """The verdict as views and ``status`` show it: ``waiting`` before the first telemetry
        (a node that judges ok only for want of data), before the first of a session that
        follows a silence (its verdict is the last session's) and while it talks unread
        (``unread_talking``), else the verdict."""
        if self.waiting and (self.verdict is Verdict.OK or self.rejoined_at is not None):
            return WAITING
        if self.unread_talking:
            return WAITING
        return self.verdict.value

    @property
    def heard_at(self) -> float | None:
        """Where its staleness clock starts: its last telemetry, or the start of the session it
        rejoined in, or when this console first heard of it."""
        heard = self.last_rx if self.last_rx is not None else self.first_seen
        rejoined = self.rejoined_at
        if rejoined is not None and (heard is None or rejoined > heard):
            return rejoined
        return heard

    @property
    def job_id(self) -> str | None:
        t = self.sample
        return t.job.id if t is not None and t.job is not None else None

    def left_when_changed(self) -> str | None:
        """The job its telemetry stopped naming within ``JOB_WINDOW_S`` of its verdict's
        change (``left_job``): the job it failed in, which the scheduler requeued elsewhere
        (``judgements.struck_job``). On digests, the collector's word (``Digest.struck_job``):
        this console's clock of the change is when it first saw the digest."""
        d = self.digest
        if d is not None:
            return d.struck_job
        left = self.left_job
        if left is not None and abs(left[1] - self.changed_at) <= JOB_WINDOW_S:
            return left[0]
        return None

    def judge(self, now: float, blind: Blind | None = None,
              heard_until: float | None = None, bridge: BridgeState | None = None) -> Verdict:
        """Recompute staleness and the verdict at wall-clock ``now``; return the verdict.
        ``blind``: when the console itself heard nothing (``FleetState.blind``);
        ``heard_until``: the broker's last word, when it has been quiet
        (``FleetState.broker_word_at``): the node's silence counts only up to it;
        ``bridge``: the cluster's bridge into this broker (``FleetState.bridge``): a digest
        that stopped with it names it, not the collector."""
        if self.digest is not None:
            # Its digests' silence too counts only up to the broker's last word: a hung
            # broker's digests stop as its nodes' samples do (tests/sharding/test_digest.py).
            upto = now if heard_until is None else min(now, heard_until)
            verdict = judge_digest(self, upto if blind is None else
                                   self.digest_rx + unseen_s(self.digest_rx, upto, blind),
                                   bridge)
            # The collector's H1 says whether it talks (its deltas heard, their keyframe
            # awaited); a digest gone stale (D1) says nothing any more. Always False, a
            # command timed out to such a node read "its agent is hung or cut off".
            self.talks = not any(f.rule == "D1" for f in self.liveness) and any(
                f.rule == "H1" and says_it_talks(f.text) for f in self.findings)
            if verdict is not self.changed_to:
                self._verdict_changed(verdict, now)
                # Nor is one its collector did not see (an agent restarted between two of its
                # digests, the node failed in it): "failed at once" here, not there (a review).
                if not self.digest.seen:
                    self.change_seen = False
            # A collector's own stale or offline (or its digests gone, D1) is no sample heard:
            # a collector outage, then failed, read as failed when the digests came back. Nor
            # is a digest from before this console's own outage (``FleetState.lose_sight``).
            self.verdict_heard = verdict not in (Verdict.STALE, Verdict.OFFLINE) and (
                blind is None or self.digest_rx >= blind[0])
            self.judged, self.verdict = True, verdict
            return verdict
        heard = self.heard_at
        # Never heard: known only from history (the store) and the console cannot hear the
        # broker yet. Its silence is the console's, not the node's: waiting, not stale
        # (FleetState.start_hearing starts its clock).
        self.stale = heard is not None and unseen_s(
            heard, now if heard_until is None else min(now, heard_until), blind) > (
            STALE_INTERVALS * self.interval_s)
        self.talks = talks = self.talking(now, blind)
        liveness: list[Finding] = []
        alive = STEPPING_NOTE.format(job=self.job_stepping) if self.job_stepping else ""
        if self.online is False:
            verdict = Verdict.OFFLINE
            # A goodbye is a stop someone meant (a deployment, maintenance): "Last Will" and
            # "check the network path" of a fleet whose agents were stopped cleanly sent the
            # on-call after a fault there was none of (a drill).
            gone = "agent stopped (its clean goodbye)" if self.stopped else (
                "agent offline (Last Will)")
            loop = self.births_unsampled
            taking_turns = (self.duplicate_at is not None
                            and now - self.duplicate_at < DUPLICATE_WINDOW_S)
            if (not self.stopped and not taking_turns and len(loop) >= RECONNECT_LOOP_BIRTHS
                    and now - loop[0] <= RECONNECT_LOOP_S):
                # Its agent is up and reconnects about once a second: "check the node (power,
                # BMC)" sent the on-call to a machine that was fine (a 2026-12-07 drill).
                # A fixed text: a count would change the finding (its digest, the store's
                # row) at every reconnect for nothing an operator acts on.
                gone += (f"; {RECONNECT_LOOP}, no sample between: the broker most likely "
                         "drops it at its first keyframe (a max_packet_size below its size?)")
            liveness.append(Finding("H2", Severity.WARN if alive else Severity.DRAIN, "",
                                    gone + alive))
        elif self.stale and not (
                # Births still come, each from the process the one before took the session
                # from: the takeovers are why no sample comes (said by H3, below).
                self.duplicate_at is not None
                and now - self.duplicate_at < STALE_INTERVALS * self.interval_s):
            verdict = Verdict.STALE
            # "last never" read as a node that never reported, of nodes that had 8 s before
            # this console (a one-shot status after a broker restart) started.
            text = ("no telemetry heard from it yet" if self.last_rx is None
                    else f"no telemetry (last {now - self.last_rx:.0f} s ago)")
            refused = self.refused
            if refused is not None and (self.last_rx is None or refused[0] > self.last_rx):
                # Heard, and refused: "no telemetry heard" sent the on-call to the agent's
                # network while 40 samples had been refused with a precise reason (an SRE
                # drill).
                rx, count, why = refused
                text = (f"{'no telemetry accepted' if self.last_rx is None else text}: "
                        f"{count} sample{'s' if count != 1 else ''} refused, the last "
                        f"{max(0.0, now - rx):.0f} s ago ({why[:200]})")
            elif talks:
                rx, count = self.awaiting or (0.0, 0)
                since = self.last_rx or 0.0
                text = awaiting_keyframe(count, now - rx, sum(
                    1 for t in self.keyframe_answers if t > since))
            liveness.append(Finding("H1", Severity.WARN, "", text + alive))
        elif self.duplicate_at is not None and now - self.duplicate_at < DUPLICATE_WINDOW_S:
            # Two machines publish as one node: every figure shown is a mix of both.
            # Two at least, by what H3 is (the one publishing now may not be among those noted:
            # a fuzzed replay read "1 agent processes take turns").
            when = self.processes
            agents = max(2, sum(1 for p in self.turn_takers
                                if now - when.get(p, -math.inf) < TAKER_GONE_S))
            text = f"duplicate node id: {agents} agent processes take turns publishing as this node"
            quiet_s = None if self.last_rx is None else now - self.last_rx
            if quiet_s is None or quiet_s > STALE_INTERVALS * self.interval_s:
                last = ("no telemetry heard from it yet" if quiet_s is None
                        else f"no telemetry for {quiet_s:.0f} s")
                other = "the other" if agents == 2 else "another"
                text += f" ({last}: each takes the MQTT session from {other} before it sends)"
            liveness.append(Finding("H3", Severity.DRAIN, "", text))
            verdict = Verdict.FAILED
            # This console found it, by hearing an older process come back: a change it saw,
            # though the sample that shows it opens a session of its own (each process
            # reconnects under the one client id). It read "first heard so" and "failed before
            # this console heard them" of nodes heard ok for minutes (a newcomer's run).
            self.verdict_heard = True
        else:
            verdict = combine(self.effective_findings)
        self._note_recurrence(verdict, now)
        # A restored node found as the store left it keeps the time of its last change.
        if verdict is not self.changed_to and not (
                self.waiting and (verdict is Verdict.OK or self.rejoined_at is not None)):
            self._verdict_changed(verdict, now)
        # Liveness verdicts (offline, stale) and a verdict for want of data (``waiting``) rest
        # on no sample of this session: what follows them is not a change seen. Nor does one
        # from before this console's own outage (``FleetState.lose_sight``): nodes that failed
        # while it was cut off read "failed at once", dated when it heard the broker again.
        last_rx = self.last_rx
        self.verdict_heard = (self.online is not False and not self.stale
                              and self.sample is not None and self.rejoined_at is None
                              and (blind is None or (last_rx is not None
                                                     and last_rx >= blind[0])))
        self.judged = True
        self.verdict = verdict
        self.liveness = liveness or NO_FINDINGS  # the shared empty list: one per node less
        return verdict

    def _note_recurrence(self, verdict: Verdict, now: float) -> None:
        """Keep ``failing``, ``cleared`` and ``recurred`` up to date with ``verdict``: an
        offline or stale spell between (a repair's reboot) changes nothing.

        Cleared is the drain findings of its own hardware gone, whatever the verdict: a node
        that went failed, degraded (a warning left over), then failed the same way was never
        counted as cleared, and its fault's return read as a first failure (a review). Judged
        on each evaluated sample of a failed node: nothing is built unless a part is new to
        ``failing`` (a frozenset a judgement cost the hot path, docs/performance.md)."""
        failing = self.failing
        if verdict in _SPELL or (not failing and verdict is not Verdict.FAILED):
            # Nothing to clear, and a part counts only of a failed node: no pass over the
            # findings (a degraded node behind a suspect switch built its effective list for
            # nothing at each judgement; a review).
            return
        fresh: list[str] | None = None
        found = False
        held = True  # N2 alone: its links are up again, the hour holds it
        for f in self.effective_findings:
            if _names_part(f):
                found = True
                held = held and f.rule == "N2"
                key = f"{f.rule} {f.component}"
                if key not in failing:
                    fresh = [key] if fresh is None else [*fresh, key]
        quieted = self.quieted
        if found and held:
            if quieted is None:
                self.quieted = (now, frozenset(self._part_ids(failing | set(fresh or ())).values()))
        elif quieted is not None:
            self.quieted = None
            if found and now - quieted[0] >= HELD_STEADY_S and self._back_after_hold(quieted, now):
                return
        if not found:
            if failing:
                self.cleared = (now, frozenset(self._part_ids(failing).values()))
                self.failing = frozenset()
                # Gone with the fault: a failure that names no part of its own (G1's driver,
                # G14, H3) read "the same fault (G2 gpu0) came back …: replace gpu0" of the
                # recurrence before it, in the action and status --json (a review).
                self.recurred = None
            return
        if fresh is None or verdict is not Verdict.FAILED:
            return
        keys = frozenset(fresh)
        if not failing:
            self.recurred = None
        # Each part new to ``failing``, not only those the node failed with: a DBE back beside
        # a port already failing the node read as a first failure, "reset gpu0 or reboot" (a
        # review).
        last = self.cleared
        if last is not None and now - last[0] <= RECUR_S:
            ids = self._part_ids(keys)
            again = [k for k in keys if ids[k] in last[1]]
            if again:
                had = self.recurred[1] if self.recurred is not None else ()
                if not had:
                    self.recurred_at = now
                self.recurred = (last[0], tuple(sorted({*had, *again})))
        self.failing = failing | keys

    def recurred_after_s(self) -> float:
        """How long after its clearing ``recurred`` came back (``recurred_at``; ``changed_at``
        where not noted: a recurrence set by hand, or a digest's)."""
        assert self.recurred is not None
        cleared = self.recurred[0]
        return max(0.0, (self.recurred_at or self.changed_at or cleared) - cleared)

    def _back_after_hold(self, quieted: tuple[float, frozenset[str]], now: float) -> bool:
        """A part of the failure N2's hour held (``quieted``) failing again: the fault cleared
        when the links came up, and this is it again (``recurred``). Whether it was."""
        keys = frozenset(f"{f.rule} {f.component}" for f in self.effective_findings
                         if _names_part(f))
        ids = self._part_ids(keys)
        held = {i.split(" ")[1] for i in quieted[1] if i.startswith("N2 ")}
        # One of the failure's own parts, or another fault of a port N2 held (its link down
        # again after a flap): with that port's N2, whose counter moved again.
        back = {k for k in keys if not k.startswith("N2 ")
                and (ids[k] in quieted[1] or (k[0] == "N" and k.split(" ", 1)[1] in held))}
        if not back:
            return False
        ports = {k.split(" ", 1)[1] for k in back}
        back.update(k for k in keys if k.startswith("N2 ") and k.split(" ", 1)[1] in ports)
        self.cleared = quieted
        self.recurred, self.recurred_at = (quieted[0], tuple(sorted(back))), now
        self.failing = keys
        return True

    def _part_ids(self, keys: frozenset[str]) -> dict[str, str]:
        """``"G2 gpu0"`` -> ``"G2 gpu0 GPU-…"``: the GPU by the uuid its birth gives at that
        index. Replaced (an RMA, the node resumed), gpu0 is another GPU: its fault read "the
        same fault came back: replace gpu0" of the new one (a review). Run at a change of
        failing, not on each sample."""
        birth = self.birth
        uuids = gpu_uuids((g.index, g.uuid) for g in birth.gpus) if birth is not None else {}
        out: dict[str, str] = {}
        for k in keys:
            comp = k.split(" ", 1)[1]
            uuid = (uuids.get(int(comp[3:]), "") if comp.startswith("gpu") and comp[3:].isdigit()
                    else "")
            out[k] = f"{k} {uuid}" if uuid else k
        return out

    def _verdict_changed(self, verdict: Verdict, now: float) -> None:
        """``changed_to`` becomes ``verdict``, a change at ``now`` unless it is the verdict the
        node had before an offline or stale spell: a job's nodes this console watched fail read
        "failed before this console heard them", dated at the rejoin, after a clean restart
        of their agents (goodbye, offline 2 s, still failed) or a 20 s silence, where an agent
        restart without a goodbye kept "failed at once" (a review). A spell says nothing of
        the node's own health: back as it was, its change is the one before it."""
        before = self.changed_to
        if verdict in _SPELL:
            if before is not None and before not in _SPELL:
                self.before_spell = (self.changed_at, before, self.change_seen)
        else:
            spell, self.before_spell = self.before_spell, None
            if spell is not None and spell[1] is verdict:
                self.changed_at, self.changed_to, self.change_seen = spell
                return
        self.change_seen = self.verdict_heard
        self.changed_at, self.changed_to = now, verdict

    def switch_owns(self, f: Finding) -> bool:
        """Whether a finding of this node is its suspect switch's, not its own."""
        return f.component in self.behind_ports and (
            f.component not in self.behind_link_only or f.rule in LINK_RULES)

    @property
    def effective_findings(self) -> list[Finding]:
        """The node's own findings, with those of ports behind a suspect switch handed to the
        switch: a switch failure must not make every node behind it a drain candidate."""
        if not self.behind_switch:
            return self.findings
        # Liveness (H1-H3) is not a finding of the node's own hardware: a console on digests
        # keeps the collector's in ``findings`` (the digest has one list), where it must not
        # turn "check the switch, do not drain" into "the findings … are the switch's".
        own = [f for f in self.findings if not self.switch_owns(f)
               and f.severity is not Severity.INFO and f.rule not in _LIVENESS_RULES]
        # "Do not drain" holds only for what the switch explains: a GPU fault on a node behind
        # a failing switch is still a reason to drain it, and a warning of its own has its own
        # advice (recommended_action), which "do not drain" contradicted (a review).
        faulty = bool(own)
        # A switch up again: the node's link errors of the last hour were the switch's (a UX
        # audit read "check the switch" an hour after it came back).
        recovered = self.behind_recovered
        what = (BEHIND_RECOVERED if recovered else BEHIND_SUSPECT).format(
            switch=self.behind_switch)
        # Name the ports: a node with a fault of its own on another port read "its IB port
        # findings are the switch's" next to its own flapping link (an operator's walkthrough).
        ports = ", ".join(sorted(self.behind_ports))
        # Of a port whose symbol errors are its own, only the link faults (switch_owns).
        what_of = ("the link faults" if self.behind_ports <= self.behind_link_only
                   else "the findings")
        tail = f"{what_of} of {ports} are the switch's" if faulty else (
            "its link errors were the switch's, nothing to do on the node" if recovered
            else "check the switch, do not drain")
        switch = Finding("F1", Severity.WARN, "", f"{what}: {tail}")
        out = [] if faulty else [switch]
        for f in self.findings:
            if self.switch_owns(f):
                out.append(Finding(f.rule, Severity.WARN, f.component, f.text + SWITCH_MARK))
            else:
                out.append(f)
        if faulty:
            out.append(switch)  # its own finding first: that is what the on-call acts on
        return out

    @property
    def all_findings(self) -> list[Finding]:
        return self.liveness + self.effective_findings


_LIVENESS_RULES = frozenset({"H1", "H2", "H3"})


def _names_part(f: Finding) -> bool:
    """A drain finding of a part of the node's own (``NodeState.failing``): not G14's uuids of
    GPUs gone, nor G1's "none visible, the driver says why" (a driver that failed to load again
    read "replace gpu0, …, gpu7 (RMA a GPU)", a review)."""
    return (f.severity is Severity.DRAIN and f.rule[0] in "GN" and bool(f.component)
            and f.rule != "G14" and GPU_READER_SAYS not in f.text)


RESTORE_SETTLE_S = 60.0
"""How long a node recalled from the store as failed or degraded must read better before the
store is told: the longest of the rules' minute windows (G9, G11, G12's hold, N4). A fault
counted over an hour (N2, N3) at a low rate can still take longer to show again."""


def _settling(st: NodeState, new: Verdict, now: float) -> bool:
    """Whether ``st``'s better verdict ``new`` is held back (``NodeState.settle_until``): only a
    rule-made verdict (failed, degraded) turning better, which empty windows can fake; a node
    heard again after offline or stale is news at once. Ends the hold once it is over."""
    if not _settle_clock(st, now):
        return False
    return (st.reported in _RULE_MADE and new in (Verdict.OK, Verdict.DEGRADED)
            and VERDICT_ORDER[new] < VERDICT_ORDER[st.reported])


def _resumed(st: NodeState) -> None:
    """The operator returned the node to service after the repair the hour-long port rules
    were waiting for (N2 held a repaired node failed for an hour while the scheduler placed
    jobs on it): its next sample is judged afresh."""
    if not st.history.ports:
        return
    st.history.forget_port_windows()
    st.basis = None
    # A restore's hold guards against windows that restarted empty; these were emptied on
    # purpose, so the better verdict that follows is news at once.
    st.settle_until = None


def _settle_clock(st: NodeState, now: float) -> bool:
    """Whether ``st``'s restore hold still runs: it starts at the node's first sample here
    (``math.inf`` until then), not at its first better verdict (a fault the agent's own windows
    kept in view reads bad from that sample, and its real recovery must not wait a minute
    more), and is cleared once over."""
    until = st.settle_until
    if until == math.inf and st.sample is not None:
        until = st.settle_until = now + RESTORE_SETTLE_S
    if until is None or now >= until:
        st.settle_until = None
        return False
    return True


_RULE_MADE = (Verdict.FAILED, Verdict.DEGRADED)
_SPELL = (Verdict.OFFLINE, Verdict.STALE)
"""Verdicts of a node's liveness alone, not of its health (``NodeState._verdict_changed``)."""
_PORT_DOWN_RULES = frozenset({"N1", "N2"})


def _ports_just_down(st: NodeState, new: Verdict, now: float, within_s: float) -> bool:
    """Whether ``st`` turned failed less than ``within_s`` ago only because ports went down
    (N1, and N2 for their link_downed): what PORT_DOWN_SETTLE_S holds. N2 alone too at the
    node's first sample of its session here: a console started after a switch flapped heard
    one of its nodes first and wrote it failed (N2, the agent's hour), then degraded (F1)
    once the peers came (a drill)."""
    if new is not Verdict.FAILED or now - st.changed_at >= within_s:
        return False
    drains = [f.rule for f in st.findings if f.severity is Severity.DRAIN]
    first = st.session_rx is not None and st.changed_at - st.session_rx < within_s
    return ("N1" in drains or first) and _PORT_DOWN_RULES.issuperset(drains) and bool(drains)


DUPLICATE_WINDOW_S = 120.0
"""Two agent processes heard under one node id within this long: a duplicate id (a restarted
agent's old process falls silent; a second machine with the same id keeps coming back)."""


TAKER_GONE_S = 30.0
"""A process of a duplicate episode not heard for this long no longer takes turns (H3's
count): each of two clones is heard every second or two (each session's birth), and one that
restarted mid-episode counted as a third for the whole episode ("3 agent processes" of two)."""


def _nearly_all(names: set[str], nodes: dict[str, "NodeState"]) -> bool:
    """So many of the fleet that visiting every node costs less than picking them out."""
    return 10 * len(names) >= 9 * len(nodes)


def _pick(nodes: dict[str, "NodeState"], names: set[str]) -> list["NodeState"]:
    """The states of ``names`` (ids that are gone are left out), in the dict's order, the
    order the states were made in, whatever the process's hash seed: a pass appends
    transitions and events in the order it visits nodes, and a replay must give the same
    ones every run. For most of the fleet, by walking the dict: a set's hash order scatters
    the reads over memory, ~2 µs a node more at 16,384 nodes (bench/apply_cost.py)."""
    if _nearly_all(names, nodes):
        return list(nodes.values())
    if 4 * len(names) >= len(nodes):
        return [st for st in nodes.values() if st.node_id in names]
    picked = [nodes[n] for n in names if n in nodes]
    picked.sort(key=_made)
    return picked


def _made(st: "NodeState") -> int:
    return st.made


class Taken(IntEnum):
    """What ``FleetState._apply_telemetry`` did with a sample (falsy: nothing)."""

    NO = 0
    YES = 1
    SETTLED = 2
    """Taken, and nothing its node's verdict or shape is judged from moved."""


def _note_process(st: "NodeState", process: int, rx: float) -> None:
    """``process`` (an agent's start stamp, from a sample or a birth) heard at ``rx``.
    ``processes`` is kept in the order heard, the latest last: the process heard before this
    one is its last key, births and samples alike."""
    seen = st.processes
    last = next(reversed(seen)) if seen else None
    if process == last:
        seen[process] = rx  # the usual case: the same process again, still the latest
        return
    if process in seen and rx - seen[process] < DUPLICATE_WINDOW_S:
        # An older process came back: it and the one heard before it take turns.
        new_episode = st.duplicate_at is None or rx - st.duplicate_at >= DUPLICATE_WINDOW_S
        takers = dict.fromkeys(() if new_episode else st.turn_takers)
        takers[process] = None
        if last is not None:
            takers[last] = None
        if len(takers) > 4:
            takers = {p: None for p in takers if p in seen or p == process}
        st.turn_takers = tuple(takers)
        st.duplicate_at = rx
    seen.pop(process, None)
    seen[process] = rx
    if len(seen) > 4:
        del seen[next(iter(seen))]


SCHEDULER_OFFLINE = "scheduler_offline"
"""``jobs_unheard_why``: the scheduler's own latest word (``sched/status``) says it is gone."""
BROKER_YOUNG = "broker_young"
"""``jobs_unheard_why``: the broker is younger than the reconnect grace and no scheduler has
said it is back: it may not have reconnected yet."""


def jobs_unheard_text(jobs: list[str], why: str | None = None) -> str:
    """What an empty job list says when nodes report jobs (:meth:`FleetState.jobs_unheard`),
    ``why`` being :meth:`FleetState.jobs_unheard_why`."""
    shown = ", ".join(jobs[:4]) + (f" (+{len(jobs) - 4} more)" if len(jobs) > 4 else "")
    running = f"running job{'s' if len(jobs) > 1 else ''} {shown}"
    if why == BROKER_YOUNG:
        return (f"no job status heard yet, and nodes report {running}: the broker started "
                f"less than {AGENT_RECONNECT_S:.0f} s ago and the scheduler has not said it is "
                "back: it may still be reconnecting (it sends its job statuses again when it "
                "is; a broker without persistence kept none)")
    if why == SCHEDULER_OFFLINE:
        return (f"no job status heard, yet nodes report {running}: the scheduler is offline "
                "(its own status says so): its job statuses come when it is back")
    return (f"no job status heard, yet nodes report {running}: the broker may not deliver "
            "job/+/status to this user (its ACL), or the scheduler publishes none")


def node_event_log(st: NodeState) -> deque[Event]:
    """``st.events`` as a deque that can take an event: made at a node's first event."""
    log = st.events
    if type(log) is tuple:
        log = st.events = deque(maxlen=NODE_EVENT_MEMORY)
    return log  # type: ignore[return-value]


def _insert_by_time(log: deque[Event], ev: Event) -> bool:
    """Put ``ev`` in time order; return whether it went anywhere but the end."""
    if not log or log[-1].ts <= ev.ts:
        log.append(ev)
        return False
    # Rare (re-sent events): walk back to the right place; deques are bounded.
    i = len(log)
    while i > 0 and log[i - 1].ts > ev.ts:
        i -= 1
    if len(log) == log.maxlen:
        if i == 0:
            return False  # older than everything we keep
        log.popleft()
        i -= 1
    log.insert(i, ev)
    return True


@dataclass(frozen=True, slots=True)
class Transition:
    """A node's verdict changed (kept by the store: when did gpu0012 go bad, and why)."""

    node: str
    ts: float
    old: Verdict | None
    """None for the node's first verdict (neither this console nor its store had one)."""
    new: Verdict
    reasons: tuple[str, ...]
    seen: bool = False
    """This console saw the change happen (``NodeState.change_seen``): not a first verdict,
    nor one first heard after a silence, an agent restart or a console start, whose time is
    when it was heard. The store keeps it, so a restarted console dates it as this one did."""


@dataclass
class Totals:
    nodes: int
    gpus: int
    gpus_present: int
    gpus_use: GpuUse
    """The fleet's GPUs by what they can do now (``NodeState.gpu_use`` summed)."""
    ib_ports: int
    ib_ports_up: int
    """Up on nodes heard from (``NodeState.port_use``), not what silent nodes last said."""
    by_verdict: dict[str, int]
    drained: int
    draining: int
    malformed: int
    ib_ports_down: int = 0
    ib_ports_unknown: int = 0
    """On silent nodes, or nodes with no telemetry yet (``PortUse.unknown``)."""
    talking_unread: int = 0
    """Of those ``waiting``, the nodes heard talking whose keyframe is awaited
    (``NodeState.unread_talking``): they did send telemetry, unlike the rest."""


_SERIALS = itertools.count()
MEMO_BY_IDENTITY = "common:keys"
"""The ``FleetState.memo`` entry keyed by objects' identities (``id`` of findings:
``incidents.common_causes``). Dropped when a state is unpickled (a replay's snapshot put back):
its objects are copies at other addresses, and an old object's address may be a new finding's
by then, of another cause."""


class FleetState:
    def __init__(self, cluster: str, malformed: MalformedLog | None = None) -> None:
        self.cluster = cluster
        self.serial = next(_SERIALS)
        """Unique per state object (caches keyed on a state survive it being replaced)."""
        self.nodes: dict[str, NodeState] = {}
        self.jobs: dict[str, JobStatus] = {}
        self.jobs_revision = 0
        """Bumped by every job status applied or withdrawn (caches over ``jobs`` key on it)."""
        self.holding_index: tuple[int, dict[str, str]] | None = None
        """(jobs_revision, node id -> a job that holds it): ``judgements.holding_job``."""
        self.failed_lapsed: dict[str, tuple[int, str, str]] = {}
        """Job id -> (its failed status's ts, a node of it, the other job that ran there): a
        failed job whose node the scheduler gave other work stays lapsed once that work left
        (``judgements.failed_job``). Recorded as the job statuses are applied (``_note_lapses``),
        not when a view looks: a replay sought past the other work, or a `status` run after
        it, read the failure as losing work where a TUI that watched read it lapsed."""
        self._unlapsed: dict[str, tuple[int, frozenset[str]]] = {}
        """Job id -> (its failed status's ts, the nodes it ran on or its reason names) of a
        failed job not yet in ``failed_lapsed``."""
        self._unlapsed_on: dict[str, set[str]] = {}
        """Node (or a word of its reason) -> the jobs of ``_unlapsed`` on it: a batch's jobs
        that hold nodes are looked up in it, not each failed job tested against each of them
        (100 failed jobs and 400 running ones stepping cost ~40 ms a batch at 16,384 nodes)."""
        self._job_nodes: dict[str, tuple[JobStatus, frozenset[str]]] = {}
        self.events: deque[Event] = deque(maxlen=EVENT_MEMORY)
        self.late_events: list[Event] = []
        """Events put back in time order before newer ones (re-sent after an outage) since the
        session last took them: its walk back from the newest stops at the newest it logged,
        and missed them (the outbox's re-sent events never reached the events view)."""
        self.acks: deque[Ack] = deque(maxlen=EVENT_MEMORY)
        self.malformed = malformed or MalformedLog()
        self.last_update: float | None = None
        self.superseded = 0
        self.applied = 0
        self.seq_lost = 0
        """Telemetry samples missing from the nodes' ``seq`` (never received: dropped by the
        broker for a console that reads too slowly, or sent while the broker was away)."""
        self.behind_s = 0.0
        """Median delay of the last tick's telemetry beyond its node's best: our backlog."""
        self.orphan_events = 0
        """Events of nodes this console has no birth for (kept in the fleet timeline only)."""
        self.unborn: dict[str, int] = {}
        """Node id -> messages received without a birth: not nodes yet (a node exists from its
        birth on), but each is asked to re-publish it; bounded by ``UNBORN_MAX``."""
        self.unborn_dropped = 0
        self.births_unheard: dict[str, int] = {}
        """Node id -> how many times its agent answered a rebirth ask ("birth re-published")
        while no birth of it came: nodes the broker most likely keeps from this console by
        their births alone (``births_dropped_text``)."""
        self.rebirth_wanted: dict[str, str] = {}
        """Node id -> why: nodes to ask for their birth and status again (taken by the session)."""
        self._lost: list[tuple[str, int]] = []
        self.unheard_events: list[tuple[str, int, float]] = []
        """``(node, how many, since)`` of gaps given up on while no event of any node came from
        ``since`` on, taken by :meth:`take_lost_events`: the broker is not delivering events
        to this console (an ACL without ``node/+/event``), not an outbox that forgot them."""
        self.event_heard_at: float | None = None
        """When the last event of any node reached this console (its receive time)."""
        self.job_stepped_at: dict[str, tuple[int, float | None]] = {}
        """Job id -> (step, receive time the step last advanced; None until this console saw
        it advance: a retained status read on connect says where the job stopped, not that it
        still steps)."""
        self.job_run_stepped: dict[str, tuple[JobStatus, float | None,
                                              tuple[int, float | None] | None]] = {}
        """Job id -> its last running status, when that run was last seen to step (None:
        never) and its widest advance (``job_step_delta``), kept as the run ends: an
        operator's restart of a job that had stopped stepping is booked to the hang, not to
        the operator (console/interruptions.py)."""
        self.memo: dict[str, tuple[Hashable, Any]] = {}
        """Views derived from the state, each kept with the key it was derived at (the
        revision counters it follows: ``incidents.silences``)."""
        self.nodes_retired: list[str] = []
        """Nodes forgotten because their retained birth was cleared (``fleetdeck retire``), for
        the timeline (taken by the session)."""
        self.jobs_withdrawn: list[JobStatus] = []
        """Jobs withdrawn (an empty retained status) while they read running or failed, for
        the timeline (taken by the session)."""
        self.jobs_clearing: dict[str, float] = {}
        """Job id -> when an empty payload on its status topic was applied: withdrawn once
        ``JOB_CLEAR_CONFIRM_S`` passed with no status of it, kept if one came."""
        self.jobs_kept: list[str] = []
        """Jobs an empty payload did not withdraw (a status of theirs came within
        ``JOB_CLEAR_CONFIRM_S``), for the timeline (taken by the session)."""
        self.sched_newest_ts = 0
        """The newest ``ts`` of the scheduler's messages, by its own clock (ms): a job status
        much older than it, retained, says where a job stopped (``judgements.not_stepping``
        for a console that never saw the job step)."""
        self.sched_heard_at = float("-inf")
        """When the scheduler last said anything (a job status, its presence): a job whose
        step stopped is hung only while the scheduler is heard (``judgements.not_stepping``)."""
        self.job_step_delta: dict[str, tuple[int, float | None]] = {}
        """Job id -> (the most steps one advance of its current run covered, the longest time
        between two of its advances; None until this console saw two): a scheduler that
        publishes at checkpoints (a recording of the offline simulator, a bridge that polls)
        moves a job 100 steps at a time, and ``judgements.not_stepping`` waits for that."""
        self.correlate: Callable[[FleetState, float], None] | None = None
        """Fleet-wide judgements run before each verdict pass (console/judgements.py sets it:
        the state cannot import them, they read the state)."""
        self.transitions: list[Transition] = []
        """Verdict changes since the last ``take_transitions``; bounded like the event log."""
        self.jobs_left: dict[str, tuple[str, float]] = {}
        """Node -> (job id, receive time) of its latest ``NodeState.left_job`` since the last
        ``take_jobs_left``: the store keeps each node's latest (``Store.restore`` puts it
        back), or a restarted console read the nodes one XID 79 took out of a requeued job as
        idle nodes, "no job on it" (an SRE drill). One entry a node, so bounded by the fleet
        and never trimmed: a collector applies a whole round in one tick, and a 5,000-node
        job requeued (or several ending together) overflowed a list cut like the event log,
        losing the oldest nodes' rows (a review)."""
        self.faults_cleared: dict[str, tuple[float, frozenset[str]]] = {}
        """Node -> its ``NodeState.cleared`` where it changed since the last
        ``take_faults_cleared``: the store keeps each node's latest (``Store.restore`` puts it
        back, ``recall_cleared``), or a fault that cleared before a console or collector
        restart and came back after it read as a first failure (a review). One entry a node."""
        self._event_ids: dict[str, None] = {}
        self.collectors: dict[str, CollectorStatus] = {}
        """Sharded collectors by id, their latest birth or will (a console on digests shows
        how many are live; ``status --json`` lists them)."""
        self.collector_gone_at: dict[str, float] = {}
        """Collectors whose latest word is their Last Will: when it was heard (``behind_bridge``:
        one gone before the bridge fell keeps its nodes' silence)."""
        self.bridge: BridgeState | None = None
        """The cluster's Mosquitto bridge into the site broker (``bridge/state``), None where
        none was heard: while it is down its nodes' silence is its own, not theirs
        (console/bridge.py)."""
        self.scheduler: SchedulerStatus | None = None
        """The scheduler's latest birth, or the will or goodbye of the process it was of
        (``sched/status``); None: never heard (a scheduler bridge that does not say, or
        none)."""
        self.judged_at: float = 0.0
        """The clock of the last fleet-wide pass (``judge_fleet``): the time fleet-wide
        judgements read, so every view and ``status`` agree with the pass."""
        self.scheduler_will_doubted = False
        """Its will came with the broker's shutdown (``lose_sight``, ``WILL_BURST_S``): not
        believed until it holds after the broker is back (a new birth clears it)."""
        self.scheduler_since: float = 0.0
        """Receive time of the scheduler's last change between online and offline."""
        self._sched_replayed: tuple[int, int] | None = None
        """(``started``, ``ts``) of the last birth not counted as a replay (``SCHED_REPLAY_S``):
        the same process heard again, its ``ts`` later, is live."""
        self.revisions = 0
        """Node data changes since the state began (the sum of every ``revision`` bump)."""
        self.shape_revisions = 0
        self.not_ok: set[str] = set()
        """Nodes whose verdict is not ok (top problems look at these, not at every node)."""
        self.shape_log: list[str] = []
        """Node ids in the order their shape changed (or they were born again, or went away):
        fleet-wide counts and the fabric tables catch up from their last position instead of
        visiting every node (``rows.fleet_counts``, ``rows.fabric``)."""
        self.shape_log_base = 0
        """Position of ``shape_log[0]`` since the state began (older entries were dropped)."""
        self.digest_mode = False
        """Fed from digests (a console on digests): a judgement pass visits only the nodes
        whose digest (or raw data) changed, plus, once a second, those whose digest aged past
        ``STALE_PERIODS`` of its refresh period: at 65,536 nodes a pass over all of them each
        tick would be most of a core (docs/performance.md)."""
        self._made = 0
        self._dirty: set[str] = set()
        """Nodes whose data changed (or that correlation re-contextualised) since the last
        judgement pass: the pass visits them; views read them with ``not_ok`` (``maybe_bad``)."""
        self._watch: set[str] = set()
        """Raw nodes judged on every pass: stale, offline, duplicated (their text and verdict
        move with the clock), or never judged."""
        self._deadlines: list[tuple[float, str]] = []
        """Heap of (when a fresh node goes stale unless heard from, node): one entry per node."""
        self._deadlines_left = False
        """A budgeted pass stopped before every due deadline was looked at (``judge_left``)."""
        self._full_at = float("-inf")
        self._judge_rest: list[NodeState] = []
        """What a pass with a time budget left for the next one, in its order."""
        self.last_pass_nodes = 0
        """Nodes the last judgement pass visited (the rest kept their verdicts untouched)."""
        self.incremental = True
        """Judge only what changed or fell due (False: every node on every pass, to compare
        against in tests)."""
        self._swept = float("-inf")
        self._digest_order: dict[str, float] = {}
        """Node id -> receive time of its latest digest, oldest first."""
        self._min_every = float("inf")
        self.quiet_applied = 0
        """Samples applied without the rules: v2 deltas that moved only columns no rule reads,
        on a healthy node (bench/apply_cost.py reports the share)."""
        self.precheck = True
        """Skip the health rules of a healthy node whose new sample is within healthy bounds
        (``health.still_healthy``); off only to compare against the full rules in tests."""
        self.blind: Blind | None = None
        """The console's last time cut off from the broker (``lose_sight``/``regain_sight``):
        silence in it is not counted against any node (``unseen_s``)."""
        self.blind_why = ""
        """Why it heard nothing then: its broker connection was lost, or it did not run."""
        self.broker_word_at: float | None = None
        """When the live broker last sent this console anything (a ping's answer included),
        while connected (``ConsoleSession._watch_sight``); None without a live feed. A node's
        silence counts only up to it: a broker SIGSTOPped for 20 s left the link up until
        its keepalive ran out (15 s), and every node was written stale 2 s in and back at
        15 s (a drill: 64 verdict rows of 32 nodes, a failed node's among them)."""
        self.lost_at: float | None = None
        """When the console last lost sight (``lose_sight``): the start of the current outage,
        what "no data since" and ``connection_lost.since`` say. ``blind`` may run from an
        earlier loss that it joined (a return shorter than the agents' grace)."""
        self.gap_steps = 0
        """A replay's gaps this state was told of: two steps each, lost then back
        (``ConsoleSession.replay_gaps``); on the state, so a replay's snapshots carry it."""
        self.restart_gap: Blind | None = None
        """A broker restart younger than the agents' reconnect grace (``broker_restarted``):
        silence in it is the agents' reconnecting, not the nodes'."""
        self.broker_young_until: float | None = None
        """Until when a scheduler may still be reconnecting after ``broker_restarted``."""
        self._recalled: dict[str, tuple[Verdict, float, bool]] = {}
        """Forgotten nodes' last recorded verdict, its time and whether its change was seen
        (``forget``, ``node``)."""
        self._recalled_known: dict[str, KnownInventory] = {}
        """The fullest inventory the store kept of nodes it has no verdict row of (ok longer
        than the retention): their first birth is judged against it (``recall_inventory``)."""
        self.heard_since: float | None = None
        """When the console could first hear the broker (``start_hearing``)."""
        self.births_whole = False
        """A connection's retained burst was judged whole in the births: over, and not cut
        there (``RetainedBurst``; a later connection's judged cut makes it False again).
        Until then a live state's ``nodes`` are those heard so far (``nodes_counted``)."""
        self.shutdown_wills = 0
        """Last Wills taken for a shutting-down broker's and not believed (WILL_BURST_S)."""
        self.drains_lost: list[tuple[str, DrainInfo]] = []
        self.clocks = ClockWatch()
        """Each node's clock offset from its samples' receive times, and its T1 (rule of
        console/clock.py): judged in ``judge_fleet``, kept in ``findings`` past ``evaluate``."""
        """Nodes that came back in a new agent session not drained although the last one was
        (an agent without ``--state-dir``, a restarted simulator): a drained node went back to
        the pool with nothing said (an SRE drill). The session says it (``ConsoleSession``)."""

    def __setstate__(self, saved: dict[str, Any]) -> None:
        # A state unpickled (a replay's snapshot put back) is a new state object: caches keyed
        # on the serial must not take it for the one they counted.
        self.__dict__.update(saved)
        self.serial = next(_SERIALS)
        self.memo.pop(MEMO_BY_IDENTITY, None)

    def job_nodes(self, job: JobStatus) -> frozenset[str]:
        """``job.nodes`` as a set, made once per job status (a 4,096-node job's list was
        scanned for every node of the fleet: ``judgements.own_job``)."""
        hit = self._job_nodes.get(job.job_id)
        if hit is None or hit[0] is not job:
            hit = self._job_nodes[job.job_id] = (job, frozenset(job.nodes))
        return hit[1]

    def node(self, node_id: str) -> NodeState:
        st = self.nodes.get(node_id)
        if st is None:
            self._made += 1
            st = self.nodes[node_id] = NodeState(node_id, made=self._made)
            self._dirty.add(node_id)
            if self._recalled:
                st.reported, st.changed_at, st.change_seen = self._recalled.pop(
                    node_id, (None, 0.0, False))
                st.changed_to = st.reported
            if self._recalled_known:
                st.history.known = self._recalled_known.pop(node_id, None)
        return st

    def recall_inventory(self, node_id: str, known: KnownInventory) -> None:
        """The fullest inventory the store kept of a node this state does not know yet
        (``Store.restore``): what G14 and N8 judge its first birth against."""
        self._recalled_known[node_id] = known

    def recall(self, node_id: str, verdict: Verdict, changed_at: float,
               seen: bool = False, before_spell: tuple[float, Verdict, bool] | None = None
               ) -> NodeState:
        """A node known from the store (a restarting console): its last verdict there, so
        that the next row written for it is a change from that one, and not heard yet (so
        ``waiting`` until it is, or until the console has heard the broker long enough to
        call it stale: ``start_hearing``). ``seen``: the row says a console saw the change
        (``Transition.seen``), so ``changed_at`` is when it happened. ``before_spell``: of a
        node recalled offline or stale, its verdict before (``NodeState.before_spell``)."""
        st = self.node(node_id)
        if st.last_rx is None and not st.judged:
            st.reported, st.changed_at, st.changed_to = verdict, changed_at, verdict
            st.change_seen = seen
            st.before_spell = before_spell if verdict in _SPELL else None
            if verdict in _RULE_MADE:
                st.settle_until = math.inf
            if verdict is Verdict.OFFLINE and st.online is None:
                # Offline as last written, until its status or telemetry says otherwise
                # (``_apply_telemetry``: no status of this run, ``status_bd_seq`` -1): a
                # broker that lost its retained will (SIGKILLed before its autosave) left a
                # restarted collector nothing of the node, and it wrote "offline -> stale (H1)
                # no telemetry heard from it yet", a change at its own start that never
                # happened (a failure drill).
                st.online = False
        elif st.changed_to is verdict and changed_at < st.changed_at:
            # Heard before its store opened (a console restarted on a store that opened after
            # the first samples), the node's verdict read as new at this start: a fault half an
            # hour old said AGE 20s, and ordered the failed nodes by the restart (a 3 a.m.
            # drive). The same verdict, kept since earlier, is no change: its time is the
            # store's.
            st.changed_at, st.change_seen = changed_at, seen
            self._dirty.add(node_id)
        if st.first_seen is None and self.heard_since is not None:
            st.first_seen = self.heard_since
        return st

    def recall_cleared(self, node_id: str, cleared_at: float, parts: frozenset[str]) -> None:
        """When a node known from the store last cleared a failure, and its parts
        (``NodeState.cleared``), unless this console saw a later clearing itself: the same
        fault back after a restart recurs as it would have without one."""
        st = self.nodes.get(node_id)
        if st is not None and (st.cleared is None or st.cleared[0] < cleared_at):
            st.cleared = (cleared_at, parts)

    def recall_left_job(self, node_id: str, job_id: str, left_at: float) -> None:
        """The job a node known from the store last left (``NodeState.left_job``), unless this
        console saw it leave one itself: what ``judgements.struck_job`` reads of a failed node
        whose job the scheduler requeued elsewhere before a restart."""
        st = self.nodes.get(node_id)
        if st is not None and st.left_job is None:
            st.left_job = (job_id, left_at)

    def recall_port_errors(self, node_id: str, dev: str, minute: int, symbol_errors: int,
                           link_downed: int, watched_from_ms: int) -> None:
        """One minute of a port's errors from the store (``NodeHistory.recall_port_minute``),
        for a node known from there."""
        self.node(node_id).history.recall_port_minute(dev, minute, symbol_errors, link_downed,
                                                      watched_from_ms)

    def start_hearing(self, now: float) -> None:
        """The console hears the broker from ``now`` (its first connection): a node it knows
        only from history counts its silence from here, not from before the console ran."""
        if self.heard_since is None:
            self.heard_since = now
        for st in self.nodes.values():
            if st.first_seen is None and st.last_rx is None and st.digest is None:
                st.first_seen = self.heard_since
                self._dirty.add(st.node_id)

    def nodes_counted(self) -> bool:
        """Whether ``nodes`` is every node of the cluster, as far as a count of them goes: a
        state fed live (``heard_since``) once its retained burst was judged whole in the births
        (``births_whole``), a replay's as its recorded burst was judged (``RecordedBurst``,
        which feeds it as live from the recording's start); a state not fed live (one built by
        hand) holds what it was given. Mid-burst, or after a broker cut the births, a job that
        fits read "it can never start here" against the nodes heard so far, and was left out of
        "pending ahead" (a review: ``never_fits``). Never on node filters, which judge no
        burst; on digests (no birth heard, no burst judged) by the collectors' count
        (``digests_counted``)."""
        if self.heard_since is None:
            return True
        return self.digests_counted() if self.digest_mode else self.births_whole

    def digests_counted(self) -> bool:
        """Whether a console on digests holds every node of the cluster: each live collector
        says how many it counts (``CollectorStatus.cluster_nodes``: every birth it heard, once
        its births came whole), and this console has a digest of as many nodes as the most
        any says (a collector that heard fewer births than another counts short). One that
        says none (an older collector, or one whose births are not known whole yet) leaves the
        count untrusted, as does a node counted whose first digest has not come. Without it a
        job that can never start here was never said to on digests (docs/protocol.md,
        "CollectorStatus")."""
        said = [c.cluster_nodes for c in self.collectors.values() if c.online]
        if not said or None in said:
            return False
        return len(self.nodes) >= max(n for n in said if n is not None)

    def outage_start(self) -> float:
        """While blind: when the current outage began, as said to the operator (``lost_at``;
        ``blind`` may run from an earlier loss it joined)."""
        assert self.blind is not None, "not blind"
        return self.lost_at if self.lost_at is not None else self.blind[0]

    def _hear_scheduler(self, rx: float, sched: SchedulerStatus) -> None:
        """One birth, will or goodbye of the scheduler (``sched/status``) heard at ``rx``."""
        was = self.scheduler
        if (sched.online and was is not None and self.sightless(rx)
                and not (was.online and sched.started == was.started)  # its heartbeat
                and sched.ts < max(self.sched_newest_ts, was.ts) - SCHED_REPLAY_S * 1000):
            # A broker's replay of an older save (SCHED_REPLAY_S), unless the same process
            # spoke before, its clock moving since: a live one on a host whose clock lags.
            # Only as this console (re)subscribes, when retained messages come: a birth heard
            # on a connection that was up is live, a bridge that never speaks again included
            # (a review: one whose clock lagged read offline for ever where status read it
            # online).
            replayed = self._sched_replayed
            self._sched_replayed = (sched.started, sched.ts)
            if replayed is None or replayed[0] != sched.started or replayed[1] >= sched.ts:
                return
        self._sched_replayed = None
        self.sched_heard_at = max(self.sched_heard_at, rx)
        if sched.online:
            self.sched_newest_ts = max(self.sched_newest_ts, sched.ts)
        # The newest word of a live process counts, whatever its start; a will or goodbye only
        # from the process counted (docs/protocol.md, "Scheduler status"). By start alone, a
        # duplicate simulator that died unheard outranked the real scheduler's births and its
        # will: no incident when it died, where status, reading the retained will, said it
        # was gone (a newcomer's run).
        if was is None or sched.online or sched.started == was.started:
            if was is None or was.online is not sched.online:
                self.scheduler_since = rx
            self.scheduler = sched
            # A will that comes with the console's own loss of the broker: its shutdown's.
            blind = self.blind
            self.scheduler_will_doubted = (not sched.online and blind is not None
                                           and rx >= blind[0] - WILL_BURST_S)

    def _hear_bridge(self, batch: Batch) -> None:
        """The bridge's state words of ``batch``, then whether its digests came while it read
        down: on the cluster's own broker they do (``BridgeState.cluster_side``)."""
        was = self.bridge
        for rx, up in batch.bridge:
            newest = max((st.digest.ts / 1000 for st in self.nodes.values()
                          if st.digest is not None), default=None) if self.bridge is None else None
            self.bridge = hear_bridge(self.bridge, rx, up, newest)
        bridge = self.bridge
        flipped = bridge is not was
        if (bridge is not None and not bridge.up and not bridge.cluster_side and any(
                min(rx, d.ts / 1000) > bridge.since + CLUSTER_SIDE_S
                for rx, d in batch.digests.values())):
            # As old as it says (``apply_digest``): the retained digests a site console reads
            # at connect, after the bridge fell, are of before it.
            bridge.cluster_side = flipped = True
        if flipped:
            # Every digest node's D1 names the bridge, or stops naming it.
            self._dirty.update(n for n, st in self.nodes.items() if st.digest is not None)

    def behind_bridge(self, st: NodeState) -> bool:
        """``st`` is silent because the cluster's bridge into this broker is down
        (``BridgeState.behind``), not for its own sake nor its collector's: the collector of
        its last digest, gone before the bridge fell, keeps it (its incident, its D1)."""
        bridge, d = self.bridge, st.digest
        if bridge is None or d is None:
            return False
        gone = self.collector_gone_at.get(d.by)
        if gone is not None:
            # A retained will read at connect comes with the bridge's retained "0", after the
            # fall: the node's last digest from it dates it no later, its digests stale
            # (judge_digest) a few periods on, as they went silent.
            gone = min(gone, st.digest_rx + STALE_PERIODS * d.every_s)
        return bridge.behind(st.digest_rx, gone)

    def lose_sight(self, at: float, why: str = "the broker connection was lost") -> None:
        """The console hears nothing since ``at`` (its broker connection is gone, ``why``):
        from here until the agents have had time to reconnect after it is back, silence is
        the console's, not the nodes' (``unseen_s``)."""
        self.lost_at = at
        if self.blind is not None and self.blind[1] is not None and at <= self.blind[1]:
            # Lost again before the agents were all back: one outage for the nodes' silence
            # (``unseen_s``), but dated from this loss where it is said (``lost_at``): "no
            # data since" the first one hid the data between and read as a longer outage.
            at = self.blind[0]
        self.blind = (at, None)
        self.blind_why = why
        sched = self.scheduler
        if sched is not None and not sched.online and self.scheduler_since >= at - WILL_BURST_S:
            self.scheduler_will_doubted = True  # the broker's shutdown sent it, as the nodes'
        for st in self.nodes.values():
            # A goodbye (``stopped``) is the agent's own, never a will the broker sends: taken
            # back, a node stopped a second before the broker was killed read online and
            # stopped, then stale, "check the agent" (a 2026-12-07 drill).
            if st.online is False and not st.stopped and st.status_ts >= at - WILL_BURST_S:
                st.online = True  # its will was the broker's shutdown (WILL_BURST_S)
                self.shutdown_wills += 1
            # What a node does while this console hears nothing is not seen: a change its
            # next sample brings happened at some time in the outage (``NodeState.judge``
            # keeps it so until a sample heard after ``at``).
            st.verdict_heard = False
        self._full_at = float("-inf")  # every node's staleness moves: judge them all

    def broker_restarted(self, at: float, agents_back_s: float = AGENT_RECONNECT_S, *,
                         latest: float | None = None) -> None:
        """The broker (re)started at ``at``: until the agents have had ``agents_back_s`` to
        reconnect, a node whose agent has not said it is back (its status was sent before
        ``at``) reads ``waiting``, not stale. A one-shot status a second after a restart of a
        broker with persistence read 31 of 32 nodes stale and "8 racks fell silent" (an SRE
        drill). An agent that reconnected and then went silent is stale as ever (a hung one);
        the console's own outage is ``lose_sight``. ``latest``: the latest the start may be
        (``at`` is the earliest, its uptime being as of the broker's last refresh): a
        scheduler may be reconnecting until the grace after it (``jobs_unheard_why``)."""
        self.restart_gap = (at, at + agents_back_s)
        self.broker_young_until = (at if latest is None else max(at, latest)) + agents_back_s
        self._full_at = float("-inf")  # every node's staleness moves: judge them all

    def unheard(self, st: NodeState) -> Blind | None:
        """Silence not counted against ``st`` (``unseen_s``): the console's own (``blind``),
        else a broker restart's reconnect grace, while its agent has not reconnected."""
        if self.blind is not None:
            return self.blind
        gap = self.restart_gap
        return gap if gap is not None and st.status_sent < gap[0] else None

    def regain_sight(self, at: float, agents_back_s: float = AGENT_RECONNECT_S) -> None:
        if self.blind is not None and self.blind[1] is None:
            self.blind = (self.blind[0], at + agents_back_s)
            self._full_at = float("-inf")

    def sightless(self, now: float) -> bool:
        """Cut off from the broker now, or since too short a time for the agents to be back."""
        return self.blind is not None and (self.blind[1] is None or now < self.blind[1])

    def mark(self, node_id: str) -> None:
        """The next judgement pass must visit this node (fleet-wide context it reads changed)."""
        self._dirty.add(node_id)

    def maybe_bad(self) -> list[NodeState]:
        """Every node that may be not ok: judged so, or changed since the last judgement (a
        superset of the nodes with a finding): fleet-wide correlation looks at these only."""
        nodes, dirty = self.nodes, self._dirty
        names = self.not_ok | dirty if dirty else self.not_ok
        return _pick(nodes, names)

    def apply(self, batch: Batch, now: float, judge: bool = True) -> set[str]:
        """Apply one tick's batch; return the ids of nodes whose data changed.

        ``judge=False`` leaves the fleet-wide pass (correlation, verdicts) to a later call: a
        slice of a large batch (ConsoleSession's apply budget) costs only what it applies."""
        changed: set[str] = set()
        raw_mode = not self.digest_mode
        retired = batch.nodes_retired | (batch.digests_cleared if self.digest_mode else set())
        for node_id in retired:
            if node_id in self.nodes:
                self.retire(node_id)
                self.nodes_retired.append(node_id)
                del self.nodes_retired[:-1000]
        for node_id, (rx, birth) in batch.births.items():
            st = self.node(node_id)
            if st.first_seen is None:
                st.first_seen = rx
            if raw_mode:
                st.born_raw = True
                if st.digest is not None:  # a digest came first: the node's own word wins
                    st.digest = None
                    self._digest_order.pop(node_id, None)
            self.unborn.pop(node_id, None)
            self.births_unheard.pop(node_id, None)
            last_birth = st.birth.bdSeq if st.birth is not None else -1
            if self._apply_birth(st, birth, rx, now):
                changed.add(node_id)
                process = birth.agent_started_ts
                if (process is None or process != st.agent_started) and st.digest is None:
                    # Not the process its latest sample came from (or one that does not say):
                    # its clock may be another's (``ClockWatch.new_process``). A retained
                    # birth of the same process heard again keeps the samples' estimate.
                    self.clocks.new_process(node_id, rx, birth.ts)
                self._note_shape(node_id)  # what views summarise from the birth may move
                refused = self.malformed.refused_statuses.get(node_id)
                if birth.bdSeq > last_birth and refused is not None and refused[0] < rx:
                    # A status refused before it was of the session before: this one's may be
                    # dropped by the broker, and must be asked for
                    # (``RetainedBurst.ask_statuses``). One refused at ingest beside this
                    # birth (a newer agent's, malformed) is of this session.
                    del self.malformed.refused_statuses[node_id]
        blind = self.blind
        for node_id, (rx, status) in batch.statuses.items():
            if (not status.online and blind is not None and rx >= blind[0] - WILL_BURST_S
                    and (blind[1] is None or rx <= blind[0])):
                # Received just before the loss (WILL_BURST_S); a replay's coarse tick applies
                # it after the gap it came before, with sight regained already.
                self.shutdown_wills += 1
                continue
            born = self._born(node_id, rx, "status without a birth")
            if born is None:
                continue
            drain, session = born.drain, born.status_bd_seq
            if self._apply_status(born, status, rx):
                changed.add(node_id)
                self.malformed.refused_statuses.pop(node_id, None)
                if (drain.state is not DrainState.NONE and status.online
                        and status.bdSeq > session >= 0
                        and born.drain.state is DrainState.NONE):
                    # Lost only if a new agent process says so (its first sample): the same
                    # process reconnecting carries its drain, so not drained there is a resume
                    # whose own status went unseen (a review).
                    born.drain_lost = drain
            elif session < 0 and not ((b := batch.births.get(node_id)) is not None
                                      and b[0] > rx and b[1].bdSeq > status.bdSeq
                                      and born.birth is b[1]):
                # Refused, and the node has no status: none the broker dropped
                # (``MalformedLog.refused_statuses``). Not one heard before a newer session's
                # birth of this batch, applied: of the session before it, which this one's
                # asks must not skip (a review: births are applied first, so the birth could
                # not forget it).
                self.malformed.refuse(self.malformed.refused_statuses, node_id, rx,
                                      f"of an older session (bdSeq {status.bdSeq}, the "
                                      f"node's {born.bd_seq})")
        basis = batch.basis
        settled: list[str] = []
        for node_id, (rx, tel) in batch.telemetry.items():
            born = self._born(node_id, rx, "telemetry without a birth")
            if born is None:
                continue
            gaps = born.seq_gaps
            applied = self._apply_telemetry(born, tel, rx, batch.seq_seen.get(node_id),
                                            basis.get(node_id) if basis else None)
            if applied:
                changed.add(node_id)
                if applied is Taken.SETTLED:
                    settled.append(node_id)
            self.seq_lost += born.seq_gaps - gaps
        for node_id, (rx, ts) in batch.unkeyed.items():
            # Known nodes only (ids come from the network); their offset is what stamps the
            # keyframe ask they wait for in their clock (``ClockWatch.on_node_clock``).
            if (keyless := self.nodes.get(node_id)) is not None and keyless.digest is None:
                self.clocks.note(node_id, rx, ts)
                # Its deltas are what ``talks`` reads (``awaiting``): judged now, not at the
                # next full pass up to FULL_JUDGE_EVERY_S on (it read "sent no telemetry"
                # for 8.5 s after its first delta), and not by a look-up per node per pass.
                keyless.judge_key = ()
                changed.add(node_id)
        for node_id, (rx, digest) in batch.digests.items():
            if raw_mode and (raw := self.nodes.get(node_id)) is not None and raw.born_raw:
                continue
            st = self.node(node_id)
            if st.first_seen is None:
                st.first_seen = rx
            apply_digest(st, digest, rx, self.cluster)
            changed.add(node_id)
            order = self._digest_order
            order.pop(node_id, None)
            order[node_id] = rx  # oldest first: the stale sweep stops at the first fresh one
            self._min_every = min(self._min_every, digest.every_s)
        if batch.bridge or (self.bridge is not None and not self.bridge.up):
            self._hear_bridge(batch)
        for name, (rx, col) in batch.collectors.items():
            held = self.collectors.get(name)
            # An older process's birth after a newer one's will: it outlived a twin under its
            # id (the header said "2 collectors" with three running, as ShardScope.observe).
            if held is None or col.started >= held.started or (col.online and not held.online):
                self.collectors[name] = col
                if col.online:
                    self.collector_gone_at.pop(name, None)
                elif (name not in self.collector_gone_at or held is None
                      or held.started != col.started):
                    # A later process's will (this console away across its birth) dates a
                    # death of its own: kept from the first one, its nodes' digests since read
                    # as sent after their collector died, never behind the bridge.
                    self.collector_gone_at[name] = rx
                    if self.bridge is not None and not self.bridge.up:
                        # Its nodes' D1 may stop naming the bridge (``behind_bridge``).
                        self._dirty.update(n for n, st in self.nodes.items()
                                           if st.digest is not None and st.digest.by == name)
        for rx, sched in batch.scheduler:  # each in order: one tick or several read the same
            if sched is None:  # its retained presence cleared
                self.scheduler, self.scheduler_will_doubted = None, False
            else:
                self._hear_scheduler(rx, sched)
        for rx, ev in batch.events:
            self.event_heard_at = rx
            if (self.remember_event(ev) and ev.kind == "drain"
                    and ev.message.startswith(RESUMED)):
                self._resumed_by_event(ev, changed)
        for ack_rx, ack in batch.acks:
            self.acks.append(ack)
            if (ack.op is CommandOp.REBIRTH and ack.result is AckResult.DONE
                    and ack.by not in self.nodes and ack.by in self.unborn):
                # Births applied first (above): the agent publishes its birth before this ack,
                # and the broker keeps one client's messages in order, so none came.
                self.births_unheard[ack.by] = self.births_unheard.get(ack.by, 0) + 1
            if ack.op is CommandOp.KEYFRAME and ack.result is AckResult.DONE:
                asked = self.nodes.get(ack.by)
                if asked is not None:
                    asked.keyframe_answers = (*asked.keyframe_answers[-7:], ack_rx)
            if ack.op is CommandOp.RESEND_EVENTS and ack.reason.startswith("re-sent "):
                answered = self.nodes.get(ack.by)
                count = ack.reason.split()[1]
                if answered is not None and count.isdigit():
                    answered.resend_answer = int(count)
        clearing = self.jobs_clearing
        if batch.jobs:
            self.jobs_revision += 1
        if clearing:
            # A status heard since the empty payload keeps the job, one a later empty of
            # this batch replaced too (``Batch.jobs_emptied``): the broker's answer came, and
            # lost under a flood of empty publishes it left the clear standing, the topic
            # not asked again, and the job withdrawn (a review). The wait counts only time
            # the console could hear the answer (``unseen_s``): cut off from the broker, or
            # stopped, none can come.
            heard, emptied, blind = batch.jobs, batch.jobs_emptied, self.blind
            for job_id in [j for j, at in clearing.items()
                           if j in heard or j in emptied
                           or unseen_s(at, now, blind) >= JOB_CLEAR_CONFIRM_S]:
                del clearing[job_id]
                if job_id in heard or job_id in emptied:
                    self.jobs_kept.append(job_id)
                    del self.jobs_kept[:-100]
                else:
                    self._withdraw_job(job_id)
        for job_id in batch.jobs_withdrawn:
            # After the above: an empty payload after the status that kept the job clears
            # anew, asked of the broker again (``ConsoleSession._ask_job_statuses``).
            if job_id in self.jobs:
                clearing.setdefault(job_id, now)
        for job_id, (rx, job) in batch.jobs.items():
            before = self.jobs.get(job_id)
            self.jobs[job_id] = job
            self.sched_heard_at = max(self.sched_heard_at, rx)
            self.sched_newest_ts = max(self.sched_newest_ts, job.ts)
            seen = self.job_stepped_at.get(job_id)
            if seen is None or (before is not None and (before.state is not job.state
                                                        or before.requeues != job.requeues
                                                        or job.step < seen[0])):
                # A new run (requeued, restarted, or back at an earlier step: restarted in
                # place) starts from its checkpoint's step: not an advance, nor the gap since
                # its last one (a restarted job read hung the moment it ran again: a review).
                if seen is not None and before is not None and before.state.value == "R":
                    self.job_run_stepped[job_id] = (before, seen[1],
                                                    self.job_step_delta.get(job_id))
                self.job_stepped_at[job_id] = (job.step, None)
                self.job_step_delta.pop(job_id, None)
            elif job.step != seen[0]:
                self.job_stepped_at[job_id] = (job.step, rx)
                # The widest of this run's advances: a scheduler whose reports come unevenly
                # (a recording's every 10 min, with more at events) is waited for its longest.
                steps, gap = self.job_step_delta.get(job_id, (0, None))
                new_gap = None if seen[1] is None else rx - seen[1]
                self.job_step_delta[job_id] = (
                    max(steps, abs(job.step - seen[0])),
                    gap if new_gap is None else max(gap or 0.0, new_gap))
        if batch.jobs:
            self._note_lapses(batch.jobs)
        for node_id in changed:
            self.nodes[node_id].revision += 1
        self.revisions += len(changed)
        # A node whose sample left every input of its verdict and shape as judged need not be
        # judged again for it (its staleness deadline re-arms itself when it falls due).
        self._dirty |= changed.difference(settled) if settled else changed
        self.superseded += batch.superseded
        self.applied += batch.messages
        if batch.delays:
            self.behind_s = batch.behind_s
        if batch.messages:
            self.last_update = now
        if judge:
            self.judge_fleet(now)
        return changed

    def _note_lapses(self, heard: dict[str, tuple[float, JobStatus]]) -> None:
        """A failed job (F, NF) one of whose nodes a job heard in this batch holds, or that was
        heard failed on a node another job holds: lapsed, in ``failed_lapsed``, for good (until
        a status of it that is not failed, or another failure). Per batch, against the failed
        jobs not yet lapsed: none, most of the time."""
        unlapsed, lapsed = self._unlapsed, self.failed_lapsed
        fresh = False
        for job_id, (_rx, job) in heard.items():
            if job.state.value not in FAILING_STATES:
                if unlapsed:
                    self._forget_unlapsed(job_id)
                if lapsed:
                    lapsed.pop(job_id, None)  # restarted: a failure of its own later
                continue
            held = lapsed.get(job_id)
            if (held is None or held[0] != job.ts) and unlapsed.get(job_id, (None,))[0] != job.ts:
                # The nodes its reason names too: Slurm keeps the nodes of an F job, a
                # simulator's names only the rank's node in its reason.
                self._forget_unlapsed(job_id)
                nodes = frozenset({*job.nodes, *reason_words(job.reason)})
                unlapsed[job_id] = (job.ts, nodes)
                for n in nodes:
                    self._unlapsed_on.setdefault(n, set()).add(job_id)
                fresh = True
        if not unlapsed:
            return
        # A failed job just heard against every job that holds nodes; one heard before only
        # against the jobs of this batch (the others were checked when it was heard, and held
        # none of its nodes: scanning them too finds nothing more).
        pool = (self.jobs.values() if fresh
                else [self.jobs[j] for j in heard if j in self.jobs])
        on = self._unlapsed_on
        found: dict[str, tuple[str, str]] = {}
        for other in pool:
            if other.state.value not in HOLDING_NODES:
                continue
            held_nodes = self.job_nodes(other)
            small, big = (held_nodes, on) if len(held_nodes) <= len(on) else (on, held_nodes)
            for n in small:
                if n not in big:
                    continue
                for job_id in on[n]:
                    if job_id != other.job_id:
                        hit = (n, other.job_id)
                        best = found.get(job_id)
                        if best is None or hit < best:
                            found[job_id] = hit
        for job_id, hit in found.items():
            lapsed[job_id] = (unlapsed[job_id][0], *hit)
            self._forget_unlapsed(job_id)

    def _forget_unlapsed(self, job_id: str) -> None:
        got = self._unlapsed.pop(job_id, None)
        if got is None:
            return
        on = self._unlapsed_on
        for n in got[1]:
            jobs = on.get(n)
            if jobs is not None:
                jobs.discard(job_id)
                if not jobs:
                    del on[n]

    def _resumed_by_event(self, ev: Event, changed: set[str]) -> None:
        """A node's "resumed" event: the errors its port windows hold from before it were
        repaired. Live, the status change to no drain forgot them already; a collector that
        was down during the resume put the hour back from the store and hears of the resume
        only from the re-sent event, and held the node failed (N2) for the rest of the hour
        while ``status`` read it ok (fault audit)."""
        st = self.nodes.get(ev.node)
        # The store dates a minute's errors to its end (``recall_port_minute``): a resume
        # later in that minute forgets them too, as the store's own restore does.
        end_of_minute = (ev.ts // 60_000 + 1) * 60_000
        if st is not None and st.history.forget_port_errors_before(end_of_minute):
            st.basis = None  # its next sample is judged afresh
            st.settle_until = None  # as for a resume seen live (``_apply_status``)
            changed.add(ev.node)
    def judge_fleet(self, now: float, budget_s: float | None = None) -> None:
        """The fleet-wide pass: correlation, then every node's verdict (``judge``). A pass
        that a budget cut short goes on from where it stopped, without correlating again."""
        self.judged_at = now
        if not self.digest_mode and self.clocks.due(now, len(self.nodes)):
            self._judge_clocks(now)
        if self.correlate is not None and not self._judge_rest:
            self.correlate(self, now)
        self.judge(now, budget_s)

    def _judge_clocks(self, now: float) -> None:
        """T1 of every node whose offset's judgement changed, in its findings (where every
        view, ``status --json``, incident and digest reads findings) until it clears."""
        for node_id, clock in self.clocks.judge(now).items():
            st = self.nodes.get(node_id)
            if st is None or st.digest is not None:
                continue
            found = [f for f in st.findings if f.rule != CLOCK_RULE]
            if clock is not None:
                found.append(clock)
            st.findings = found or NO_FINDINGS
            st.revision += 1
            self.revisions += 1
            self._dirty.add(node_id)

    def unborn_why(self) -> dict[str, str]:
        """The nodes heard from without a birth this console could take, each with why: its
        last refused birth's reason, that its agent re-published the birth and none came
        (``BIRTHS_DROPPED``), or "" (messages, but no birth heard yet)."""
        why = dict.fromkeys(self.unborn, "")
        for node in self.births_unheard:
            if node in why:
                why[node] = BIRTHS_DROPPED
        for node, (_, _, reason) in self.malformed.refused_births.items():
            if node not in self.nodes:
                why[node] = reason
        return why

    def births_dropped_text(self) -> str:
        """One sentence for the nodes heard from (statuses, telemetry) whose agents answered a
        rebirth ask while no birth of theirs came ('' where none): a broker whose
        ``message_size_limit`` or ``max_packet_size`` is below a birth's size (2.4 KB for 8
        GPUs and 8 ports) drops every birth and passes the smaller messages, and a node exists
        from its birth on, so the console listed no node at all: "no node of cluster msl heard
        from yet" beside four agents publishing, ``status`` "is an agent or 'fleetdeck sim'
        running against this broker?" (2026-12-07 drill, docs/reliability.md)."""
        nodes = sorted(n for n in self.births_unheard if n in self.unborn)
        if not nodes:
            return ""
        one = len(nodes) == 1
        agents = "its agent re-published its birth" if one else (
            "their agents re-published their births")
        # The cause first: the TUI's one line of top problems cuts the rest.
        return (f"{BIRTHS_DROPPED}: {len(nodes)} node{'' if one else 's'} ({compress(nodes)}) "
                f"{'sends' if one else 'send'} statuses or telemetry, and {agents} when asked, "
                "yet none came")

    def _born(self, node_id: str, rx: float, why: str) -> NodeState | None:
        """The node's state if it has had a birth; otherwise count it and want a rebirth."""
        st = self.nodes.get(node_id)
        if st is not None:
            if st.first_seen is None:
                st.first_seen = rx
            return st
        if node_id in self.unborn or len(self.unborn) < UNBORN_MAX:
            self.unborn[node_id] = self.unborn.get(node_id, 0) + 1
            self.rebirth_wanted.setdefault(node_id, why)
        else:
            self.unborn_dropped += 1
        return None

    def remember_event(self, ev: Event, create: bool = False) -> bool:
        """Add an event to the timelines unless already seen (QoS 1 redelivery, restore).

        Re-sent events arrive after newer ones: they are put back in time order. A duplicate
        still counts towards the node's in-order counter: after a restore from the store the
        re-sent copies of restored events are what closes the gap."""
        fresh = ev.event_id not in self._event_ids
        st = self.node(ev.node) if create else self.nodes.get(ev.node)
        if fresh:
            self._event_ids[ev.event_id] = None
            if len(self._event_ids) > 4 * EVENT_MEMORY:
                for old in list(self._event_ids)[:EVENT_MEMORY]:
                    del self._event_ids[old]
            if _insert_by_time(self.events, ev) and len(self.late_events) < EVENT_MEMORY:
                self.late_events.append(ev)
            if st is not None:
                _insert_by_time(node_event_log(st), ev)
            else:
                self.orphan_events += 1
        if st is not None and st.agent_started is None:
            # No telemetry yet (a restore, or events that beat the first sample): follow the
            # newest agent process the events name, so the count survives the bounded timeline.
            prefix = ev.event_id[: len(ev.event_id) - len(str(ev.seq))]
            if ev.event_id.endswith(f".{ev.seq}") and prefix != st.event_prefix:
                st.event_prefix, st.event_seq, st.event_ahead = prefix, 0, NO_SEQS
        if st is not None and st.event_prefix and ev.event_id.startswith(st.event_prefix):
            if ev.seq == st.event_seq + 1 and not st.event_ahead:
                st.event_seq += 1  # in order, no gap open: the usual case, no set made
            else:
                # A set of its own made once per gap, then changed in place: a copy per event
                # cost 0.38 s for 10,000 events an agent's outbox flushed behind one lost seq
                # (a review).
                ahead = st.event_ahead
                if not isinstance(ahead, set):  # the shared NO_SEQS
                    ahead = st.event_ahead = set(ahead)
                ahead.add(ev.seq)
                while st.event_seq + 1 in ahead:
                    st.event_seq += 1
                    ahead.discard(st.event_seq)
                if not ahead:
                    st.event_ahead = NO_SEQS
        return fresh

    def missing_events(self, now: float, patience_intervals: float = 3.0,
                       retry_s: float = RESEND_RETRY_S) -> list[tuple[str, int]]:
        """``(node, since_seq)`` for agents whose telemetry says they emitted events we never
        got (lost in a broker restart, or sent while we were away): ask them to re-send.

        Each node backs off (``retry_s`` doubling up to ``RESEND_BACKOFF_CAP_S``) while its
        counter does not move, and after ``RESEND_MAX_ASKS`` fruitless asks the gap is marked
        lost (``take_lost_events``): an agent cannot re-send what its outbox no longer holds."""
        asks: list[tuple[str, int]] = []
        for st in self.nodes.values():
            t = st.sample
            emitted = t.agent.event_seq if t is not None else None
            if emitted is None or emitted <= st.event_seq:
                st.gap_since = None
                st.resend_asks = 0
                st.resend_answer = None
                continue
            if st.event_seq > st.resend_progress:
                st.resend_asks, st.resend_progress = 0, st.event_seq
            if st.gap_since is None:
                st.gap_since = now
                continue
            if now - st.gap_since < patience_intervals * st.interval_s:
                continue
            wait = min(RESEND_BACKOFF_CAP_S, retry_s * 2 ** max(0, st.resend_asks - 1))
            if st.resend_asks and now - st.resend_asked < wait:
                continue
            if st.resend_asks >= RESEND_MAX_ASKS:
                lost = emitted - st.event_seq
                st.events_lost += lost
                heard, since = self.event_heard_at, st.gap_since or now
                # Its telemetry came after the last ask: an agent there to answer it. A node
                # that went down with a gap (an XID 79 takes nodes down) answers nothing, and
                # in a quiet fleet no other event comes: EVENTS STOPPED stayed in a healthy
                # console's header for good (a review).
                alive = st.last_rx is not None and st.last_rx > st.resend_asked
                if alive and st.resend_answer != 0 and (heard is None or heard < since):
                    # Four asks answered by no event of any node, nor by an agent's "re-sent
                    # 0": the re-sends are dropped on the way like the events were (an ACL
                    # that lets this user read telemetry but not events: "no longer in the
                    # agent's outbox", said of every node with an event, sent operators to
                    # the agents; a 2026-12-07 drill).
                    self.unheard_events.append((st.node_id, lost, since))
                else:
                    self._lost.append((st.node_id, lost))
                st.event_seq = st.resend_progress = emitted
                st.event_ahead = {s for s in st.event_ahead if s > emitted} or NO_SEQS
                st.gap_since, st.resend_asks, st.resend_answer = None, 0, None
                continue
            st.resend_asked = now
            st.resend_asks += 1
            asks.append((st.node_id, st.event_seq))
        return asks

    def jobs_unheard(self) -> list[str]:
        """The jobs the nodes' telemetry says run on them while no job status at all was heard:
        a broker that does not deliver ``job/+/status`` to this user (an ACL listing topics one
        by one), or a scheduler that publishes none. The jobs view said "the scheduler has not
        published any job status" under a fleet running two jobs (a 2026-12-07 drill)."""
        if self.jobs:
            return []
        return sorted({job for st in self.nodes.values() if (job := st.job_id) is not None})

    def jobs_unheard_why(self, now: float) -> str | None:
        """Why ``jobs_unheard`` has jobs, where it is not the broker's ACL: the scheduler
        said it went (``SCHEDULER_OFFLINE``), or the broker is younger than the reconnect
        grace and no scheduler said it is back (``BROKER_YOUNG``). None: the broker may not
        deliver ``job/+/status`` to this user, or no scheduler publishes any. Right after a
        broker restart, ``status --digests`` blamed the ACL for a scheduler not reconnected
        yet (a 2026-12-07 drill). A scheduler heard online while no job status comes keeps
        the ACL in the sentence: it is connected and publishing."""
        sched = self.scheduler
        if sched is not None and not sched.online:
            return SCHEDULER_OFFLINE
        young = self.broker_young_until
        if sched is None and young is not None and now < young:
            return BROKER_YOUNG
        return None

    def take_lost_events(self) -> list[tuple[str, int]]:
        """``(node, how many)`` for gaps given up on since the last call."""
        out, self._lost = self._lost, []
        return out

    def _to_judge(self, now: float, until: float | None = None) -> list[NodeState]:
        if not self.digest_mode:
            return self._to_judge_raw(now, until)
        names, self._dirty = self._dirty, set()
        if now - self._swept >= 1.0:
            self._swept = now
            word = self.broker_word_at
            upto = now if word is None else min(now, word)
            limit = upto - STALE_PERIODS * self._min_every
            for n, rx in self._digest_order.items():
                if rx >= limit:
                    break
                st = self.nodes.get(n)
                if (st is not None and st.digest is not None and not st.stale
                        and unseen_s(rx, upto, self.blind) > STALE_PERIODS * st.digest.every_s):
                    names.add(n)
        return _pick(self.nodes, names)

    def _to_judge_raw(self, now: float, until: float | None = None) -> list[NodeState]:
        """Changed nodes, watched ones, and those whose staleness deadline passed; every node
        once every FULL_JUDGE_EVERY_S (a safety net, not a need: tests/console/
        test_incremental_judge.py holds the incremental passes to the full ones)."""
        nodes = self.nodes
        self._deadlines_left = False
        if not self.incremental or now - self._full_at >= FULL_JUDGE_EVERY_S or now < self._full_at:
            self._full_at = now
            self._dirty = set()
            return list(nodes.values())
        names = self._dirty | self._watch if self._watch else self._dirty
        self._dirty = set()
        if _nearly_all(names, nodes):
            # A plain pass; deadlines that passed meanwhile are judged by it and re-armed
            # when popped later.
            return list(nodes.values())
        heap = self._deadlines
        pops = 0
        blind, gap = self.blind, self.restart_gap
        word = self.broker_word_at
        upto = now if word is None else min(now, word)
        while heap and heap[0][0] < now:
            pops += 1
            if until is not None and not pops % JUDGE_CHUNK and time.perf_counter() >= until:
                # Out of the pass's budget (16,384 deadlines fall due together under a
                # stream: ~12 ms): the rest are still due, and the next pass goes on with them.
                self._deadlines_left = True
                break
            n = heap[0][1]
            st = nodes.get(n)
            if st is None:
                heapq.heappop(heap)
                continue
            st.deadline_at = None
            heard = st.heard_at
            if heard is not None and st.digest is None:
                left = STALE_INTERVALS * st.interval_s - unseen_s(
                    heard, upto, blind if gap is None else self.unheard(st))
                if left >= 0:  # heard from since: re-arm in place, nothing to judge
                    due = st.deadline_at = now + max(left, 0.001)
                    heapq.heapreplace(heap, (due, n))
                    continue
            heapq.heappop(heap)
            names.add(n)
        return _pick(nodes, names)

    def _arm(self, st: NodeState, heard: float | None, window: float) -> None:
        """Keep a raw node on the judgement pass's list: watched while its verdict moves with
        the clock, otherwise one deadline in the heap for when it would go stale."""
        if self.digest_mode:
            return  # _to_judge has its own sweep of digests that aged
        if (st.stale or st.online is False or st.duplicate_at is not None or not st.judged
                or heard is None or st.digest is not None):
            self._watch.add(st.node_id)
            return
        if self._watch:
            self._watch.discard(st.node_id)
        if st.deadline_at is None:
            st.deadline_at = heard + window
            heapq.heappush(self._deadlines, (st.deadline_at, st.node_id))

    @property
    def judge_left(self) -> int:
        """Nodes a pass with a time budget left for the next pass (at least: staleness
        deadlines it had no time to look at count as one)."""
        return len(self._judge_rest) + self._deadlines_left

    def judge(self, now: float, budget_s: float | None = None) -> None:
        """Judge the nodes that changed or fell due. With ``budget_s``, stop once that much
        time went by and leave the rest (``judge_left``) to the next call, which goes on with
        them before anything else: a pass over most of a 16,384-node fleet (every node back
        from stale at once, after an outage) took 100-170 ms, one stall of the live console's
        event loop (docs/performance.md, "Where the stalls come from")."""
        rest, self._judge_rest = self._judge_rest, []
        nodes = self.nodes
        if rest:
            rest = [st for st in rest if nodes.get(st.node_id) is st]  # not forgotten since
        end = None if budget_s is None else time.perf_counter() + budget_s
        if rest and budget_s is not None:
            visit = rest
        else:
            visit = self._to_judge(now, end)
            if rest:
                ids = {id(st) for st in visit}
                visit = [st for st in rest if id(st) not in ids] + visit
        if budget_s is None or len(visit) <= JUDGE_CHUNK:
            self.last_pass_nodes = len(visit)
            self._judge_nodes(visit, now)
            return
        assert end is not None
        done = 0
        while done < len(visit):
            self._judge_nodes(visit[done:done + JUDGE_CHUNK], now)
            done += JUDGE_CHUNK
            if time.perf_counter() >= end:
                self._judge_rest = visit[done:]
                break
        self.last_pass_nodes = min(done, len(visit))

    def _judge_nodes(self, visit: list[NodeState], now: float) -> None:
        blind = self.blind
        gap = self.restart_gap if blind is None else None
        # ``behind_bridge`` per node only while the bridge holds nodes: up (or heard on the
        # cluster's side, or none) it holds none, and the call cost 3.4 ms a pass at 16,384
        # digests, each of them judged every digest period (a review).
        bridge = self.bridge
        holds = bridge is not None and not bridge.up and not bridge.cluster_side
        for st in visit:
            if gap is not None:  # only right after a broker restart (``status``)
                blind = self.unheard(st)
            # A node that is online, fresh, not a duplicate, and whose inputs to its verdict and
            # shape equal those of its last judgement keeps verdict, liveness and shape: skip it,
            # so a tick's cost follows what changed, not the fleet's size (issue 12). A healthy
            # node's new sample keeps the same (empty) findings list: it is skipped too.
            t = st.sample
            key: tuple[object, ...]
            heard: float | None
            if st.digest is not None:
                # The collector judged it: only a new digest, digests that stopped, or a raw
                # status while its detail is open change what this console shows.
                key = (st.digest_rx, st.online, st.drain.state.value, st.behind_switch,
                       st.behind_recovered)
                heard, window = st.digest_rx, STALE_PERIODS * st.digest.every_s
            else:
                # None for an empty findings list, the shared undrained drain and empty port
                # sets: a key of strings, numbers and None leaves the GC's view at its first
                # collection, one holding a list, a pydantic model or a frozenset never does
                # (docs/performance.md, "Fewer objects for the GC to walk").
                drain = st.drain
                key = (st.findings or None, st.online, st.stopped,
                       None if drain is NOT_DRAINED else drain, st.birth is None,
                       None if t is None else t.job is None, st.behind_switch,
                       st.behind_ports or None, st.behind_link_only or None, st.job_stepping,
                       st.rejoined_at is None)
                # ``heard_at`` inline: a property call per node per pass cost 1.1 ms at 16,384
                # nodes (a review of this change).
                heard = st.last_rx if st.last_rx is not None else st.first_seen
                if st.rejoined_at is not None and (heard is None or st.rejoined_at > heard):
                    heard = st.rejoined_at
                window = STALE_INTERVALS * st.interval_s
            if (st.judged and key == st.judge_key and not st.stale and st.online is not False
                    and st.duplicate_at is None and heard is not None and st.settle_until is None
                    and (st.reported is st.verdict
                         or (st.reported is None and st.waiting))
                    and (now - heard if blind is None else unseen_s(heard, now, blind))
                    <= window
                    # A verdict from before this console's outage (``lose_sight``), the node
                    # heard since: judged once, so the verdict is one heard again. Skipped
                    # while its samples changed nothing, it stayed unheard, and its next change
                    # read "first heard so" of a node heard ok for minutes since (a replay UX
                    # run: a recording's 1 s damaged part). Heard after the loss, not in
                    # the tick it came in: that sample is of before it.
                    and (st.verdict_heard or blind is None or heard <= blind[0])):
                self._arm(st, heard, window)
                continue
            st.judge_key = key
            st.refused = self.malformed.refused_samples.get(st.node_id)
            st.awaiting = self.malformed.awaiting_keyframe.get(st.node_id)
            cleared = st.cleared
            # D1 names the bridge only of a node behind it (``behind_bridge``).
            new = st.judge(now, blind, self.broker_word_at,
                           bridge if not holds or self.behind_bridge(st) else None)
            if st.cleared is not cleared and st.cleared is not None:
                self.faults_cleared[st.node_id] = st.cleared
            if st.settle_until is not None:
                _settle_clock(st, now)
            self._arm(st, heard, window)
            t = st.sample
            # Enum values, not members (an enum member is an object the GC tracks, and so is
            # the tuple that holds it): the same comparison, a tuple the GC forgets.
            shape = (new.value, st.stale, st.online, st.drain.state.value,
                     tuple(st.all_findings),
                     t is not None and t.job is not None, t is None, st.birth is None,
                     st.rejoined_at is None)
            if shape != st.shape:
                st.shape = shape
                st.shape_rev += 1
                self.shape_revisions += 1
                self._note_shape(st.node_id)
            if new is not Verdict.OK:
                self.not_ok.add(st.node_id)
            else:
                self.not_ok.discard(st.node_id)
            if new is st.reported:
                st.held_since = None  # back as it was written within the hold: no row
            elif _ports_just_down(st, new, now, PORT_DOWN_SETTLE_S):
                if st.held_since is None:
                    st.held_since = st.changed_at
                if not self.digest_mode:
                    self._watch.add(st.node_id)  # judged again when the hold is over
            elif not self._report_held(st, new, now):
                # A row the port hold delayed carries the time the hold began, however the
                # hold ended (a switch suspected, the port back with N2 left, an XID).
                at = now if st.held_since is None else st.held_since
                st.held_since = None
                self.transitions.append(Transition(st.node_id, at, st.reported, new,
                                                   tuple(st.reasons), st.change_seen))
                st.reported = new
        # Bounded for a caller that never takes them, never below one row a node: a
        # collector's first tick at 16,384 nodes writes a row for each, and a cut at the event
        # log's 5,000 lost the oldest, so those nodes were not known after a restart (a review).
        keep = EVENT_MEMORY + len(self.nodes)
        if len(self.transitions) > keep:
            del self.transitions[: len(self.transitions) - keep]

    def _report_held(self, st: NodeState, new: Verdict, now: float) -> bool:
        """Whether ``st``'s change to ``new`` is not (yet) a ``Transition``: what the store,
        the events log and the timeline would keep as history."""
        if st.waiting and (new is Verdict.OK or st.rejoined_at is not None):
            # Born (or restored) but not heard yet: its health is not known, and a row saying
            # ok (or stale, for the console's own silence) would be false history (found in
            # an audit of collector starts). Back from a silence in a new session: its first
            # sample says what it is now (``rejoined_at``).
            return True
        if st.unread_talking:
            # Its health is unknown, not stale (it reads ``waiting``): a viewer console wrote
            # "ok -> stale" then "stale -> ok" for each node whose keyframe it waited for. Once
            # its deltas stop too, it is silent, and the row is written then.
            return True
        if st.settle_until is not None and _settling(st, new, now):
            return True  # restored as bad, its rules' windows still filling: RESTORE_SETTLE_S
        # A will this young may be a shutting-down broker's (WILL_BURST_S); while cut off or
        # with the agents reconnecting, a retained one may be too.
        return (new is Verdict.OFFLINE and st.online is False
                and (now - st.status_ts < WILL_BURST_S or self.sightless(now)))

    def take_transitions(self) -> list[Transition]:
        out, self.transitions = self.transitions, []
        return out

    def _withdraw_job(self, job_id: str) -> None:
        """``job_id``'s retained status was cleared (``JOB_CLEAR_CONFIRM_S``): forget it."""
        self.jobs_revision += 1
        gone = self.jobs.pop(job_id, None)
        # A failed one too: Slurm withdraws it after MinJobAge, restarted or not.
        if gone is not None and gone.state.value in ("R", "CG", "F", "NF"):
            self.jobs_withdrawn.append(gone)
            del self.jobs_withdrawn[:-100]
        self.job_stepped_at.pop(job_id, None)
        self.job_step_delta.pop(job_id, None)
        self.job_run_stepped.pop(job_id, None)
        self._job_nodes.pop(job_id, None)
        # Kept only while its failed status is: one entry per lapsed job ever withdrawn grew
        # for as long as the console ran (a review).
        self.failed_lapsed.pop(job_id, None)
        self._forget_unlapsed(job_id)

    def take_jobs_left(self) -> dict[str, tuple[str, float]]:
        out, self.jobs_left = self.jobs_left, {}
        return out

    def take_faults_cleared(self) -> dict[str, tuple[float, frozenset[str]]]:
        out, self.faults_cleared = self.faults_cleared, {}
        return out

    @staticmethod
    def _apply_birth(st: NodeState, birth: Birth, rx: float, now: float) -> bool:
        # A birth opens a session. It wins over a larger bdSeq that only a status or telemetry
        # claimed (forged, or a clock that jumped back): births are compared with births.
        last_birth = st.birth.bdSeq if st.birth is not None else -1
        if birth.bdSeq < st.bd_seq and birth.bdSeq <= last_birth:
            return False
        process = birth.agent_started_ts
        if process is not None:
            # Each session opens with a birth: two processes that take the session from each
            # other within a second send no sample between them, and are heard by these (a CI
            # run read the node stale, no H3, for 30 s of takeovers 0.8 s apart).
            _note_process(st, process, rx)
        st.history.inventory(birth)
        st.birth = birth
        st.bd_seq = birth.bdSeq
        if birth.bdSeq > last_birth:
            # A session the agent opened, not its retained birth again on the console's own
            # reconnect: a dead node (offline by its will) read "check the broker, not the
            # node" once the console had resubscribed 4 times in 30 s (a review).
            st.births_unsampled = (*st.births_unsampled[-(RECONNECT_LOOP_BIRTHS - 1):], rx)
        st.basis = None  # the rules read the birth (GPUs and ports expected): run them again
        return True

    @staticmethod
    def _apply_status(st: NodeState, status: Status, rx: float) -> bool:
        if status.bdSeq < st.bd_seq:
            return False  # a late will (or retained status) of an older session
        # A Last Will carries the drain as it was when its session connected: a node drained
        # since read "not drained" once its agent died, and paged as failed (an SRE drill).
        # The drain this session last said stands; a goodbye says the same.
        keep_drain = (not status.online and status.bdSeq == st.bd_seq and st.online is True)
        # A resume is a command within a session; a new session not drained is an agent that
        # kept no state, and nothing was repaired (FleetState.drains_lost).
        new_session = status.bdSeq > st.status_bd_seq >= 0
        st.status_bd_seq = status.bdSeq
        st.bd_seq = max(st.bd_seq, status.bdSeq)
        if (status.online and (st.online is False or st.stale)
                and (st.sample is None or st.sample.bdSeq < status.bdSeq)):
            st.rejoined_at = rx
        elif not status.online:
            st.rejoined_at = None
        st.online = status.online
        st.stopped = status.stopped and not status.online
        st.status_ts = rx
        st.status_sent = status.ts / 1000
        was = st.drain.state
        if not keep_drain:
            # Most nodes are not drained: they share one DrainInfo, not a model of three
            # GC-tracked objects each (docs/performance.md, "Frozen garbage").
            st.drain = NOT_DRAINED if status.drain == NOT_DRAINED else status.drain
        if (was is not DrainState.NONE and status.drain.state is DrainState.NONE
                and status.online and not new_session):
            _resumed(st)
        return True

    def _apply_telemetry(self, st: NodeState, tel: wire2.Sample, rx: float,
                         seqs: list[int] | None, basis: wire2.Basis | None = None) -> Taken:
        """``SETTLED``: a quiet sample of a fresh, judged, healthy node (its judgement stands)."""
        if tel.bdSeq < st.bd_seq:
            return Taken.NO
        new_session = tel.bdSeq > st.bd_seq
        if new_session:
            st.bd_seq = tel.bdSeq
        # seq counts per agent process, across its reconnects: samples lost while the broker
        # was away show as a gap. A new process (or an agent that does not say) starts over.
        process = tel.agent.started_ts
        new_process = process != st.agent_started
        if process is not None:
            _note_process(st, process, rx)
        if st.drain_lost is not None:
            if st.drain.state is DrainState.NONE:
                if new_process or process is None:
                    self.drains_lost.append((st.node_id, st.drain_lost))
                else:
                    _resumed(st)  # the same process: a resume whose status went unseen
            st.drain_lost = None
        if new_process or (process is None and new_session):
            st.agent_started = process
            st.last_seq = None
        for seq in seqs or (tel.seq,):
            last = st.last_seq
            if last is None or seq > last:
                if last is not None and seq > last + 1:
                    st.seq_gaps += seq - last - 1
                st.last_seq = seq
        if process is not None and (new_process or not st.event_prefix):
            # Only the telemetry of a process sets its prefix (events set one only while no
            # telemetry named the process): same process, same prefix as last time.
            prefix = f"{st.node_id}.{process}."
            if prefix != st.event_prefix:
                # A new agent process: its events count from 1. Events of it that arrived
                # before this telemetry are already in the timeline; count them now.
                ahead = {e.seq for e in st.events if e.event_id.startswith(prefix)}
                st.event_prefix, st.event_seq = prefix, 0
                while st.event_seq + 1 in ahead:
                    st.event_seq += 1
                    ahead.discard(st.event_seq)
                st.event_ahead = ahead or NO_SEQS
        prev_tel, st.sample = st.sample, tel
        st.last_rx = rx
        st.births_unsampled = ()
        if st.digest is None:
            self.clocks.note(st.node_id, rx, tel.ts)
        if prev_tel is None or prev_tel.bdSeq != tel.bdSeq:
            st.session_rx = rx
            # The session's first sample heard: the verdict before it is not of this session
            # (an agent restarted, or a console that just started), so a change it brings is
            # not one seen (``NodeState.change_seen``); judged again even where its findings
            # read as before, so the next verdict is this session's.
            st.verdict_heard = False
            st.judge_key = ()
        if prev_tel is not None and tel.job is None and prev_tel.job is not None:
            st.left_job = self.jobs_left[st.node_id] = (prev_tel.job.id, rx)
        st.rejoined_at = None
        if st.online is None or (st.online is False and st.status_bd_seq < 0):
            # Offline that no status of this run said is the store's (``recall``): a node that
            # samples is alive, though its status never came (a broker that dropped it in the
            # connect burst, a node born by rebirth): it read "agent offline (Last Will)", its
            # GPUs counted out, until its agent reconnected (a review).
            st.online = True
        prev, st.basis = st.basis, basis
        precheck = self.precheck
        if (precheck and basis is not None and prev is not None and basis[2] and prev[2]
                and basis[:2] == prev[:2] and not st.findings and st.digest is None
                and still_quiet(tel)):
            # Both samples rest quietly on one keyframe: every column a rule or the counter
            # history reads is as it was when the node was last found healthy (issue 12:
            # apply cost follows change; docs/protocol.md "Telemetry v2").
            st.history.advance(tel)
            held = st.counted
            if held[0] is prev_tel:  # presence and link state are among the unmoved columns
                st.counted = (tel, held[1], held[2])
            self.quiet_applied += 1
            if (st.judged and not st.stale and st.online is True and st.duplicate_at is None
                    and prev_tel is not None and (prev_tel.job is None) is (tel.job is None)
                    and st.verdict_heard):
                # What FleetState.judge reads (findings, liveness, job or not) is as judged;
                # one not heard since this console's outage is judged on this sample (the
                # skip in ``_judge_nodes`` says why).
                return Taken.SETTLED
            return Taken.YES
        full = wire2.full(tel)  # the rules read the rows
        st.history.update(full)
        if st.digest is not None:
            st.raw = True  # its detail is open; the verdict stays the collector's
        elif precheck and not st.findings and still_healthy(st.birth, full, st.history):
            pass  # healthy before and still: the (empty) findings stand (issue 12)
        else:
            found = evaluate(st.birth, full, st.history)
            clock = self.clocks.findings.get(st.node_id)
            st.findings = ([*found, clock] if clock is not None else found) or NO_FINDINGS
        return Taken.YES

    def _note_shape(self, node_id: str) -> None:
        log = self.shape_log
        log.append(node_id)
        if len(log) > SHAPE_LOG_MAX + 2 * len(self.nodes):
            # A reader this far behind recounts from scratch (it sees the base move past it).
            drop = len(log) // 2
            del log[:drop]
            self.shape_log_base += drop

    def forget(self, node_id: str) -> None:
        """Drop a node (a sharded collector handed it to another collector)."""
        st = self.nodes.pop(node_id, None)
        if st is not None:
            self._note_shape(node_id)
            if st.reported is not None and len(self._recalled) < RECALLED_MAX:
                # Taken back later (or owned once its birth says so, after a restore), its next
                # row is a change from the last one this console recorded, not a "new" one.
                self._recalled[node_id] = (st.reported, st.changed_at, st.change_seen)
        self._digest_order.pop(node_id, None)
        self.clocks.forget(node_id)
        self._dirty.discard(node_id)
        self._watch.discard(node_id)
        self.not_ok.discard(node_id)
        if self._judge_rest:
            self._judge_rest = [st for st in self._judge_rest if st.node_id != node_id]
        self.unborn.pop(node_id, None)
        self.births_unheard.pop(node_id, None)
        self.rebirth_wanted.pop(node_id, None)
        self.jobs_left.pop(node_id, None)
        self.faults_cleared.pop(node_id, None)
        self.malformed.refused_statuses.pop(node_id, None)

    def retire(self, node_id: str) -> None:
        """Drop a node retired (its retained birth cleared: docs/protocol.md, "Retiring a
        node"): out of every view, count and incident; the store keeps its history."""
        self.forget(node_id)
        self._recalled.pop(node_id, None)  # one born again under the name is new
        self._recalled_known.pop(node_id, None)

    def totals(self) -> Totals:
        by_verdict = dict.fromkeys((v.value for v in Verdict), 0)
        gpus = gpus_present = ports = ports_up = ports_down = ports_unknown = 0
        drained = draining = talking = 0
        by_verdict[WAITING] = 0
        use = [0, 0, 0, 0, 0]
        for st in self.nodes.values():
            by_verdict[st.verdict_shown] += 1
            gpus += st.gpus_expected or (wire2.rows_of(st.sample)[0] if st.sample else 0)
            gpus_present += st.gpus_present
            u = st.gpu_use()
            use[0] += u.in_use
            use[1] += u.free
            use[2] += u.failed
            use[3] += u.out
            use[4] += u.waiting
            ports += st.ib_ports
            p = st.port_use()
            ports_up += p.up
            ports_down += p.down
            ports_unknown += p.unknown
            drained += st.drain.state is DrainState.DRAINED
            draining += st.drain.state is DrainState.DRAINING
            talking += st.unread_talking
        return Totals(
            nodes=len(self.nodes), gpus=gpus, gpus_present=gpus_present,
            gpus_use=GpuUse(*use), ib_ports=ports,
            ib_ports_up=ports_up, by_verdict=by_verdict, drained=drained, draining=draining,
            malformed=self.malformed.total, ib_ports_down=ports_down,
            ib_ports_unknown=ports_unknown, talking_unread=talking,
        )

    def talking_unread(self) -> list[str]:
        """The nodes ``Totals.talking_unread`` counts, by id: ``status`` names them on stderr
        apart from those never heard."""
        return sorted(n for n, st in self.nodes.items() if st.unread_talking)

    def worst_first(self) -> list[NodeState]:
        return sorted(self.nodes.values(),
                      key=lambda s: (-VERDICT_ORDER[s.verdict], s.node_id))
