"""Validate every message from the network and keep the latest of each per node.

``Ingest.handle`` is pure (no MQTT, no clock of its own) so live MQTT, replay and tests all feed
it the same way. It does the minimum per message: parse the topic, validate the payload, store it
(last value wins). Telemetry is decoded into fast Structs, v1 or v2 (a v2 delta merged into its
keyframe), so the batch holds one type either way (docs/protocol.md, "Telemetry v2"). The fleet
state takes the batch on its own tick (``take_batch``), never one update per message.
"""

import logging
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel

from fleetdeck.console.health import (
    BENIGN_GPU_COLUMNS,
    BENIGN_PORT_COLUMNS,
    QUIET_CHECKED_GPU_COLUMNS,
)
from fleetdeck.protocol import codec, fast, wire2
from fleetdeck.protocol.fast import Telemetry
from fleetdeck.protocol.messages import (
    Ack,
    Birth,
    CollectorStatus,
    Command,
    CommandOp,
    Event,
    JobStatus,
    SchedulerStatus,
    Status,
)
from fleetdeck.protocol.topics import NODE_KINDS, Kind, Topic, TopicError, parse_topic

if TYPE_CHECKING:
    from fleetdeck.console.shard import ShardScope

log = logging.getLogger("fleetdeck.ingest")

REPLAY_MEMORY = 65_536
"""At most this many jobs, retired nodes, births and ended sessions remembered for
``Ingest._replayed``, the oldest forgotten first."""


def _remember(table: "OrderedDict[str, int]", key: str, value: int) -> None:
    """``table[key] = value``, newest last, the oldest forgotten past ``REPLAY_MEMORY``: the
    keys are subjects the network names (a made-up node's birth or will kept for good)."""
    table[key] = value
    table.move_to_end(key)
    if len(table) > REPLAY_MEMORY:
        table.popitem(last=False)


BDSEQ_FUTURE_S = 600.0
"""A bdSeq more than this ahead of the receive clock is refused (forged, or a broken clock)."""
JOBS_PASSED_MAX = 10_000
"""Replaced job statuses a batch keeps for the interruption accounting (``Batch.jobs_passed``)."""

CONSOLE_KINDS = frozenset(
    {Kind.BIRTH, Kind.STATUS, Kind.TELEMETRY, Kind.EVENT, Kind.ACK, Kind.JOB, Kind.SCHED_ACK,
     Kind.SCHED_STATUS, Kind.DIGEST, Kind.COLLECTOR, Kind.BRIDGE}
)
"""What a console listens to; anything else (e.g. amqtt's leaked retained messages) is ignored."""
COMMAND_KINDS = frozenset({Kind.CMD, Kind.SCHED_CMD})
"""Operators' commands: a live console never reads them (it sends its own), a replay does
(``Ingest.hears_commands``): who drained or restarted what, and why, is the recording's point."""
OPERATOR_OPS = frozenset({CommandOp.DRAIN, CommandOp.RESUME, CommandOp.RESTART_JOB})
"""The commands a replay's timeline shows: the read-only ones (keyframe, rebirth, resend) are
consoles asking on their own, dozens of them, nobody's decision."""
RECORDED_CMDS_MAX = 10_000
"""Recorded commands a replay remembers to name their acks by: past it the oldest go first, but
only once they have expired (``RecordedCmd.until``): an unexpired one may still be re-sent, and
forgotten it was told again as a new request, its re-sends read 0 (a review)."""
RECORDED_CMDS_HARD_MAX = 10 * RECORDED_CMDS_MAX
"""Recorded commands kept at most, expired or not: only a drain of more nodes than this at once
or a forged recording gets here (memory bound: tens of MB at most)."""
RECORDED_EXPIRY_SLACK_S = 10.0
"""Recorded seconds a command is kept past its own lifetime: the re-send a console made just
before it expired may reach the recorder a little later (the broker's queue, a slow link)."""


def request_of(cmd_id: str) -> str:
    """The request a command id belongs to: a console numbers the commands of one request
    ``REQUEST.0``, ``REQUEST.1``, … (one per node of a drain); any other id stands alone."""
    head, dot, tail = cmd_id.rpartition(".")
    return head if dot and tail.isdigit() else cmd_id


@dataclass(slots=True)
class RecordedCmd:
    """One operator command a replay read (``Ingest.recorded_cmds``), by its cmd_id."""

    op: CommandOp
    target: str
    until: float
    """Recorded time past which no console re-sends it: its first receive time plus its own
    lifetime (``expires_at - issued_at``, both by the issuing console's clock, so the
    recorder's clock skew does not matter) plus ``RECORDED_EXPIRY_SLACK_S``. A console re-sends
    an unanswered command every 3 s under the same cmd_id (``RETRY_EVERY_S``) only until it
    expires (``due_for_retry``), and agents refuse it after."""
    answered: set[str] = field(default_factory=set)
    """The ack results already told (an agent answers each re-send of a duplicate from
    memory: the same "accepted" again)."""
    recorded: bool = True
    """False: only its acks are in the recording (``Ingest.recorded_answer``)."""

KEYFRAME_ASK_EVERY_S = 5.0
"""A node is asked for a v2 keyframe at most this often (its deltas are useless until then)."""
TOPIC_CACHE_MAX = 100_000
"""Parsed topics kept per ingest (a node has a few: birth, status, telemetry, ...); past this,
endless invented topics are parsed every time instead of growing the cache."""


@dataclass(frozen=True, slots=True)
class Malformed:
    rx_ts: float
    topic: str
    reason: str
    detail: str


@dataclass
class MalformedLog:
    """Rejected messages: counted per topic and reason, the last few kept for the operator."""

    total: int = 0
    by_reason: Counter[str] = field(default_factory=Counter)
    by_topic: Counter[str] = field(default_factory=Counter)
    recent: deque[Malformed] = field(default_factory=lambda: deque(maxlen=200))
    log_window_start: float = 0.0
    logged_in_window: int = 0
    unlogged: int = 0

    LOG_PER_MINUTE = 20
    """Log lines per minute at most: a hostile publisher must not flood the log (it is
    counted all the same)."""

    refused_samples: dict[str, tuple[float, int, str]] = field(default_factory=dict)
    """node id -> (last receive time, how many, "reason: detail") of its refused telemetry:
    a node whose every sample was refused read "no telemetry heard from it yet" (an SRE
    drill); its H1 says why (``NodeState.judge``)."""

    awaiting_keyframe: dict[str, tuple[float, int]] = field(default_factory=dict)
    """node id -> (last receive time, how many) of its v2 deltas that could not be applied for
    want of their keyframe. Not malformed, so not counted as such; but a console whose broker
    user may not publish commands (the ``viewer`` role) gets no answer to its keyframe asks,
    and its H1 read "no telemetry heard from it yet" and 4 racks "fell silent" for up to 30 s
    while every node was talking (an SRE drill)."""

    refused_births: dict[str, tuple[float, int, str]] = field(default_factory=dict)
    """The same for births: a node whose every birth is refused (a clock an hour ahead makes
    its ``bdSeq`` one) was in neither ``nodes`` nor ``unborn`` of `status` (an SRE drill)."""

    refused_statuses: dict[str, tuple[float, int, str]] = field(default_factory=dict)
    """The same for statuses, malformed (a newer agent's drain state) or of a session older
    than the node's birth (``FleetState.apply``, not counted as malformed): a node whose status
    came and was refused is no status the broker dropped, and 12 of them read as a cut
    retained burst, exit 3 (a review; ``retained_burst.born_without_status``)."""

    REFUSED_NODES_MAX = 131_072
    """Nodes each ``refused_*`` table holds at most: topics are attacker-controlled."""

    def add(self, item: Malformed) -> None:
        self.total += 1
        self.by_reason[item.reason] += 1
        parts = item.topic.split("/")
        if len(parts) == 6 and parts[3] == "node" and parts[5] in ("telemetry", "birth",
                                                                    "status"):
            refused = (self.refused_samples if parts[5] == "telemetry" else
                       self.refused_births if parts[5] == "birth" else self.refused_statuses)
            self.refuse(refused, parts[4], item.rx_ts, f"{item.reason}: {item.detail}")
        # Bound the per-topic table: hostile publishers can invent endless topics.
        if item.topic in self.by_topic or len(self.by_topic) < 10_000:
            self.by_topic[item.topic] += 1
        self.recent.append(item)
        if item.rx_ts - self.log_window_start >= 60:
            if self.unlogged:
                log.warning("%d more rejected message(s) in the last minute not logged",
                            self.unlogged)
            self.log_window_start, self.logged_in_window, self.unlogged = item.rx_ts, 0, 0
        if self.by_topic.get(item.topic, 0) <= 3 and self.logged_in_window < self.LOG_PER_MINUTE:
            self.logged_in_window += 1
            log.warning("rejected message on %s: %s: %s", item.topic, item.reason, item.detail)
        else:
            self.unlogged += 1

    def refuse(self, refused: dict[str, tuple[float, int, str]], node: str, rx_ts: float,
               why: str) -> None:
        """Note in ``refused`` (one of the ``refused_*`` tables) that ``node``'s message was
        refused at ``rx_ts`` for ``why``."""
        was = refused.get(node)
        if was is not None or len(refused) < self.REFUSED_NODES_MAX:
            refused[node] = (rx_ts, (was[1] if was else 0) + 1, why)


@dataclass
class Batch:
    """Everything ingested since the last tick. Latest-wins for state, ordered for events."""

    births: dict[str, tuple[float, fast.Birth]] = field(default_factory=dict)
    """Validated by the pydantic model, kept as its compact Struct (``fast.birth_of``)."""
    statuses: dict[str, tuple[float, Status]] = field(default_factory=dict)
    telemetry: dict[str, tuple[float, wire2.Sample]] = field(default_factory=dict)
    """A quiet v2 delta is a ``wire2.Pending``: its rows are built when first read."""
    events: list[tuple[float, Event]] = field(default_factory=list)
    acks: list[tuple[float, Ack]] = field(default_factory=list)
    jobs: dict[str, tuple[float, JobStatus]] = field(default_factory=dict)
    jobs_passed: list[JobStatus] = field(default_factory=list)
    """Job statuses of this batch that a later one replaced with another state or requeue
    count, in order: a tick of 20 s took a job's R, NF, RQ, PD and R again for one R, and the
    interruption went unseen (a replay audit); ``Interruptions.observe`` walks them."""
    jobs_withdrawn: set[str] = field(default_factory=set)
    """Jobs whose retained status was cleared (an empty retained payload, MQTT's way to
    delete one): the scheduler, or an operator, withdrew them (docs/protocol.md)."""
    jobs_emptied: set[str] = field(default_factory=set)
    """Jobs whose status in this batch a later empty payload replaced (popped from ``jobs``):
    a status of theirs was heard all the same, which keeps a job an earlier empty payload
    was clearing (``FleetState.apply``, ``JOB_CLEAR_CONFIRM_S``)."""
    nodes_retired: set[str] = field(default_factory=set)
    """Nodes whose retained birth was cleared (an empty retained payload: ``fleetdeck
    retire``, docs/protocol.md): ``FleetState.apply`` forgets them before this batch's own
    births, so a node born again under the name starts afresh."""
    digests_cleared: set[str] = field(default_factory=set)
    """Nodes whose retained digest was cleared (retired): forgotten by a console on digests,
    which hears no births."""
    messages: int = 0
    superseded: int = 0
    """Telemetry samples replaced by a newer one of the same node before a tick took them."""
    seq_seen: dict[str, list[int]] = field(default_factory=dict)
    """Every telemetry seq in this batch of each node that sent more than one, so gaps are
    counted even for superseded ones. A node with one sample has no entry (its seq is its
    sample's): a list per node per tick was 16,384 allocations the GC walked (issue 12)."""
    delays: list[float] = field(default_factory=list)
    """Per telemetry message: how much later than its node's fastest delivery it arrived (s)."""
    digests: dict[str, tuple[float, fast.Digest]] = field(default_factory=dict)
    """Collectors' digests per node (a console on digests applies them; latest wins)."""
    collectors: dict[str, tuple[float, CollectorStatus]] = field(default_factory=dict)
    bridge: list[tuple[float, bool | None]] = field(default_factory=list)
    """The cluster's bridge into the site broker, up or down (``bridge/state``, Mosquitto's
    "1"/"0"; None: its retained state cleared), in order (console/bridge.py)."""
    scheduler: list[tuple[float, SchedulerStatus | None]] = field(default_factory=list)
    """The scheduler's births, wills and goodbyes (``sched/status``), None where its retained
    presence was cleared (an empty payload), in order: ``FleetState.apply`` weighs each by the
    one counted before it. Only the last kept, a batch of one process's birth and another's
    late will read offline with an incident, the same two in two ticks online: the TUI and a
    ``status`` ticking at other moments disagreed (a review)."""
    commands: list[tuple[float, Command]] = field(default_factory=list)
    """Operators' drain, resume and restart commands a recording holds (a replay only:
    ``Ingest.hears_commands``), in order."""
    unkeyed: dict[str, tuple[float, int]] = field(default_factory=dict)
    """node -> (receive time, ``ts``) of its v2 delta heard here with the lowest ``rx - ts``,
    of those that wait for their keyframe: its clock's offset all the same (``FleetState``
    notes it, console/clock.py). A node 30 s ahead refused the keyframe ask, stamped by our
    clock, that its first applied sample waited for, and with it every command (a review)."""
    basis: dict[str, wire2.Basis] = field(default_factory=dict)
    """Per node whose latest sample here is v2: the keyframe it rests on and whether it moved
    only columns the rules do not read (FleetState skips the rules of a healthy node when its
    previous sample rested on the same keyframe quietly too). A v1 sample has none."""

    def retire(self, node: str) -> None:
        """``node``'s retained birth was cleared: what this batch holds of it goes too."""
        for held in (self.births, self.statuses, self.telemetry, self.digests, self.seq_seen,
                     self.basis):
            held.pop(node, None)
        self.nodes_retired.add(node)

    @property
    def behind_s(self) -> float:
        """Median queueing delay of this batch: how far behind the live fleet we are."""
        if not self.delays:
            return 0.0
        return sorted(self.delays)[len(self.delays) // 2]

    def __len__(self) -> int:
        return self.messages

    def seqs(self, node: str) -> list[int]:
        """Every telemetry seq of ``node`` in this batch, in arrival order."""
        seqs = self.seq_seen.get(node)
        if seqs is not None:
            return seqs
        item = self.telemetry.get(node)
        return [] if item is None else [item[1].seq]

    def note_seq(self, node: str, seq: int) -> None:
        """``seq`` of a telemetry sample of ``node`` that superseded, or will be superseded by,
        another in this batch (``seq_seen``: kept only for such nodes)."""
        seqs = self.seq_seen.get(node)
        if seqs is None:
            item = self.telemetry.get(node)
            seqs = self.seq_seen[node] = [] if item is None else [item[1].seq]
        seqs.append(seq)


class Ingest:
    def __init__(self, cluster: str, max_payload: int = codec.DEFAULT_MAX_PAYLOAD,
                 lazy: bool = True) -> None:
        self.cluster = cluster
        self.max_payload = max_payload
        self.malformed = MalformedLog()
        self.received = 0
        self.ignored = 0
        self._batch = Batch()
        self._lag_floor: dict[str, float] = {}
        self.rebirth_wanted: dict[str, str] = {}
        """Node id -> why, for nodes whose birth or status arrived malformed."""
        self.reassembler = wire2.Reassembler(
            quiet_gpu=BENIGN_GPU_COLUMNS | QUIET_CHECKED_GPU_COLUMNS,
            quiet_port=BENIGN_PORT_COLUMNS, lazy=lazy)
        """``lazy``: a quiet delta's sample is a ``wire2.Pending`` (rows built when read)."""
        self.keyframe_wanted: dict[str, str] = {}
        """Node id -> why, for v2 nodes whose deltas name a keyframe this console lacks (it
        started late, or the keyframe was lost): the session asks them (op ``keyframe``)."""
        self.keyframe_missing = 0
        """v2 deltas that could not be applied for want of their keyframe (not malformed)."""
        self._keyframe_asked: dict[str, float] = {}
        self.scope: ShardScope | None = None
        """A sharded collector's scope (``collect --shard``): node messages of nodes it does not
        own are ignored here (in flight when ownership moved), births teach it node ids, and
        collector births and wills move ownership as they arrive, so the births that follow
        them are judged by the new members."""
        self.out_of_shard = 0
        """Node messages ignored because another collector owns the node."""
        self._topics: dict[str, Topic] = {}
        self.unrecorded_told: OrderedDict[tuple[str, str], None] = OrderedDict()
        """A replay's answers told of commands the recording does not hold, by (cmd_id,
        result), at most ``RECORDED_CMDS_MAX`` (the oldest go first)."""
        self.recorded_cmds: OrderedDict[str, RecordedCmd] = OrderedDict()
        """A replay's recorded operator commands by cmd_id, in the order first sent, to name the
        acks that answer them and to tell each request and each answer once (in the ingest, so
        a replay's snapshot holds it too and a seek back puts it as it was then). An
        OrderedDict: the oldest go in O(1) (a dict's first key is found past every deleted
        slot)."""
        self.recorded_resent: OrderedDict[str, int] = OrderedDict()
        """Request (``request_of``) -> how many times the recording holds its commands
        again after their first send, for ``--summary-json``: looked up per request line in
        O(1) (summing over ``recorded_cmds`` for each line was quadratic on a long recording),
        and kept when a command of it goes. Bounded as ``recorded_cmds``, oldest first."""

        self.retained = False
        """Set by the feed while it hands on a message the broker sent retained (at subscribe:
        a 3.1.1 subscriber gets the flag on nothing else, ``LiveFeed.hand``)."""
        self._job_newest: OrderedDict[str, int] = OrderedDict()
        """Job id -> the ``ts`` of its status heard live last, or a newer one heard retained
        (``_replayed``)."""
        self._born: OrderedDict[str, int] = OrderedDict()
        self._ended: OrderedDict[str, int] = OrderedDict()
        """Node id -> the bdSeq of its latest birth, and of its latest session heard ended (an
        offline status: its goodbye or will). Keyed by topics the network names, so bounded
        as the other tables here (``_remember``)."""
        self._retired: OrderedDict[str, int] = OrderedDict()
        """Node id -> the bdSeq of its latest birth when it was retired (its birth cleared)."""
        self.replayed = 0
        """Retained messages left out as older than what was heard before (``_replayed``)."""
        self._replayed_unsaid: list[str] = []

    hears_commands = False
    """Take operators' commands (``COMMAND_KINDS``) into ``Batch.commands``: a replay does
    (``ReplayIngest``), so its timeline says who asked for what, as the live console's did."""

    def take_batch(self) -> Batch:
        batch, self._batch = self._batch, Batch()
        if self._replayed_unsaid:
            self._say_replayed()
        return batch

    def _replayed(self, subject: str, msg: BaseModel) -> str:
        """What a retained ``msg`` replays, older than what was heard from its sender before
        ('' when it is not, or not retained), noting what it tells of later ones.

        A broker that restarts from a saved state older than its last word (Mosquitto's
        persistence saved every ``autosave_interval``, then killed; a copy restored) sends
        each new subscriber that state: a job's status of steps ago, a node's status online
        of a session that had ended, the birth of a node retired since. A console that heard
        the newer ones took them as news: a job "interrupted … runs again in place" with its
        work since the checkpoint booked lost, a node stopped cleanly read stale (H1, "check
        the agent"), retired ones "fell silent" as a rack (2026-12-07 drill,
        docs/reliability.md). Only retained ones are left out: a live message is news, whatever
        its sender's clock reads, and a live birth again of a node retired with ``--force``
        is its agent still there."""
        retained = self.retained
        if isinstance(msg, JobStatus):
            newest = self._job_newest.get(subject)
            if retained and newest is not None and msg.ts < newest:
                return f"job {subject}'s status of {newest - msg.ts} ms before the one heard"
            # A live status is the scheduler's word now, whatever its clock: one whose clock
            # went back, or a simulator restarted (job ids again from 4101, ts from its epoch),
            # kept the largest ts ever, and its later statuses, retained, read as replays.
            if newest is None or msg.ts > newest or not retained:
                _remember(self._job_newest, subject, msg.ts)
            return ""
        if not isinstance(msg, Birth | Status):
            return ""
        retired = self._retired.get(subject)
        if retained and retired is not None and msg.bdSeq <= retired:
            return f"retired {subject}'s {'birth' if isinstance(msg, Birth) else 'status'}"
        if isinstance(msg, Birth):
            self._retired.pop(subject, None)  # born again: a node under the name
            if msg.bdSeq > self._born.get(subject, -1):
                _remember(self._born, subject, msg.bdSeq)
            return ""
        ended = self._ended.get(subject, -1)
        if msg.online:
            # Each connection is a new session of a larger bdSeq (agents/agent.py): online
            # again in a session that ended is an older state, never the agent.
            return (f"{subject}'s status online of a session heard ended"
                    if retained and msg.bdSeq <= ended else "")
        if msg.bdSeq > ended:
            _remember(self._ended, subject, msg.bdSeq)
        return ""

    def _retire(self, subject: str) -> None:
        born = self._born.pop(subject, None)
        self._ended.pop(subject, None)
        if born is not None:
            _remember(self._retired, subject, born)

    def _say_replayed(self) -> None:
        what, self._replayed_unsaid = self._replayed_unsaid, []
        shown = "; ".join(what[:4]) + (f"; {len(what) - 4} more" if len(what) > 4 else "")
        log.warning("the broker sent %d retained message(s) older than what this console heard "
                    "before (%s): a broker restarted from a saved state older than its last "
                    "word sends these (persistence saved long before it stopped, or restored "
                    "from an old copy); left out", len(what), shown)

    def clock_stepped(self) -> None:
        """This console's wall clock was stepped (NTP, an operator's ``date -s``): every
        node's lowest ``rx - ts`` was of the old clock. Kept, a step forward read as the
        console that far behind for as long as it ran (``BEHIND 420.0s`` in the header, the
        Prometheus gauge too, a 2026-12-07 drill); each node's next sample sets it again."""
        self._lag_floor.clear()
        self._batch.delays.clear()

    def parsed(self, topic: str) -> Topic | None:
        """``topic`` parsed (None: not a protocol topic), from the cache ``handle`` reads: a
        replay's feed asks first, and the topic is not parsed twice (~3 µs each)."""
        parsed = self._topics.get(topic)
        if parsed is None:
            try:
                parsed = parse_topic(topic)
            except TopicError:
                return None
            if len(self._topics) < TOPIC_CACHE_MAX:
                self._topics[topic] = parsed
        return parsed

    def handle_telemetry(self, subject: str, topic: str, payload: bytes, rx_ts: float) -> None:
        """``handle`` for ``topic``, already known (``parsed``) to be telemetry of ``subject``
        in this cluster: a replay's feed hands every sample so, past the topic's checks."""
        self.received += 1
        scope = self.scope
        if scope is not None and not scope.owns(subject):
            self.out_of_shard += 1
            return
        self._telemetry(subject, topic, payload, rx_ts)

    def handle(self, topic: str, payload: bytes, rx_ts: float) -> None:
        self.received += 1
        parsed = self._topics.get(topic)
        if parsed is None:
            # Splitting and checking the ids cost ~3 µs a message: a topic is parsed once
            # (a refused one every time: it is rare, and its error is counted each time).
            try:
                parsed = parse_topic(topic)
            except TopicError as err:
                if topic.startswith(f"fleetdeck/v1/{self.cluster}/"):
                    self._reject(rx_ts, topic, codec.Reason.BAD_TOPIC, str(err))
                else:
                    self.ignored += 1
                return
            if len(self._topics) < TOPIC_CACHE_MAX:
                self._topics[topic] = parsed
        if parsed.cluster != self.cluster or (
                parsed.kind not in CONSOLE_KINDS
                and not (self.hears_commands and parsed.kind in COMMAND_KINDS)):
            self.ignored += 1
            return
        if not payload and parsed.kind in (Kind.BIRTH, Kind.STATUS):
            # A cleared retained birth is a node retired (docs/protocol.md, ``fleetdeck
            # retire``), not garbage: counted malformed with a rebirth asked of a node that
            # is gone, it left an incident for ever. A cleared status alone says nothing.
            if parsed.kind is Kind.BIRTH:
                self._batch.retire(parsed.subject)
                self._retire(parsed.subject)
                if self.scope is not None:
                    self.scope.forget(parsed.subject)
                self._lag_floor.pop(parsed.subject, None)
                self.rebirth_wanted.pop(parsed.subject, None)
                self.keyframe_wanted.pop(parsed.subject, None)
            return
        scope = self.scope
        if scope is not None and parsed.kind in NODE_KINDS:
            owned = (scope.learn(parsed.subject) if parsed.kind is Kind.BIRTH
                     else scope.owns(parsed.subject))
            if not owned:
                self.out_of_shard += 1
                return
        if parsed.kind is Kind.TELEMETRY:
            self._telemetry(parsed.subject, topic, payload, rx_ts)
            return
        if parsed.kind is Kind.DIGEST:
            self._digest(parsed.subject, topic, payload, rx_ts)
            return
        if parsed.kind is Kind.BRIDGE:
            # Mosquitto's own notification, not a fleetdeck message: one byte, "1" or "0"
            # (docs/security.md, "Many clusters: bridges").
            if payload in (b"0", b"1", b""):
                self._batch.bridge.append((rx_ts, None if not payload else payload == b"1"))
                self._batch.messages += 1
            else:
                self._reject(rx_ts, topic, codec.Reason.INVALID,
                             "a bridge state is '0' or '1' (Mosquitto's notification)")
            return
        if parsed.kind is Kind.SCHED_STATUS and not payload:
            # A retained presence cleared (a scheduler retired for good): as never heard, not
            # malformed, or its will raised an incident for ever (docs/protocol.md).
            self._batch.scheduler.append((rx_ts, None))
            return
        if parsed.kind is Kind.JOB and not payload:
            # A cleared retained status: the job is gone, not a malformed message (a job
            # left retained by a scheduler that died read as running for ever).
            if self._batch.jobs.pop(parsed.subject, None) is not None:
                self._batch.jobs_emptied.add(parsed.subject)
            self._batch.jobs_withdrawn.add(parsed.subject)
            return
        model = codec.MODEL_FOR_KIND[parsed.kind]
        try:
            msg: BaseModel = codec.decode(model, payload, self.max_payload)
        except codec.DecodeError as err:
            if parsed.kind in COMMAND_KINDS:
                # Live, no console read it: a replay's malformed count stays what it was live.
                self.ignored += 1
                return
            self._reject(rx_ts, topic, err.reason, err.detail)
            if parsed.kind in (Kind.BIRTH, Kind.STATUS) and parsed.subject:
                # Garbage where a node's retained birth or status belongs: without asking,
                # every console started later would never learn its drain (docs/protocol.md).
                self.rebirth_wanted[parsed.subject] = f"malformed {parsed.kind.value}"
            return
        if isinstance(msg, Command):
            self._command(msg, rx_ts)
            return
        self._store(parsed.kind, parsed.subject, topic, msg, rx_ts)  # text made printable

    def _command(self, msg: Command, rx_ts: float) -> None:
        """A recorded operator command (only with ``hears_commands``): kept for the timeline,
        not counted among the messages the state took (it changes no state)."""
        if msg.op not in OPERATOR_OPS:
            return
        cmds = self.recorded_cmds
        known = cmds.get(msg.cmd_id)
        request = request_of(msg.cmd_id)
        resent = self.recorded_resent
        if known is not None:
            # A re-send of the same command (the live console's retry of an unanswered one):
            # told as a new request, one drain of a silent node read as five (a review).
            resent[request] = resent.get(request, 0) + 1
            return
        # The oldest go only once expired: none of its re-sends can come after, so forgetting
        # it never tells one as a new request. Oldest first is enough (no scan for any expired
        # one): consoles give their commands mostly the same lifetime (``ACK_TIMEOUT_S``), so
        # the first sent expire first; an unexpired head keeps a few more for a few seconds.
        while cmds and (len(cmds) >= RECORDED_CMDS_HARD_MAX or (
                len(cmds) >= RECORDED_CMDS_MAX and next(iter(cmds.values())).until <= rx_ts)):
            cmds.popitem(last=False)
        life_s = max(0.0, (msg.expires_at - msg.issued_at) / 1000)
        cmds[msg.cmd_id] = RecordedCmd(msg.op, msg.target,
                                       rx_ts + life_s + RECORDED_EXPIRY_SLACK_S)
        if request not in resent:
            # A request has at least one command: it goes no sooner than its commands do.
            while len(resent) >= RECORDED_CMDS_HARD_MAX:
                resent.popitem(last=False)
            resent[request] = 0
        self._batch.commands.append((rx_ts, msg))

    def recorded_answer(self, ack: Ack) -> RecordedCmd | None:
        """The recorded command ``ack`` answers, the first time it answers it so (by cmd_id
        and result); None for an ack of no recorded operator command, or one already told."""
        known = self.recorded_cmds.get(ack.cmd_id)
        if known is None:
            return self._unrecorded_answer(ack)
        if ack.result.value in known.answered:
            return None
        known.answered.add(ack.result.value)
        return known

    def _unrecorded_answer(self, ack: Ack) -> RecordedCmd | None:
        """An operator command's answer whose command the recording does not hold: a console's
        ``R`` records the commands it sends, not those of the CLI in a second terminal, and a
        recording may start between a command and its answer. Dropped, a CLI's restart of a
        job was nowhere in the replay's timeline while its acks were in the file (a newcomer
        run). Told once per command and result, as a recorded one's."""
        if not self.hears_commands or ack.op not in OPERATOR_OPS:
            return None
        key = (ack.cmd_id, ack.result.value)
        told = self.unrecorded_told
        if key in told:
            return None
        while len(told) >= RECORDED_CMDS_MAX:
            told.popitem(last=False)
        told[key] = None
        # A node answers for itself; the scheduler's ack names no job but in its words.
        target = "" if ack.op is CommandOp.RESTART_JOB else ack.by
        return RecordedCmd(ack.op, target, 0.0, recorded=False)

    def _telemetry(self, subject: str, topic: str, payload: bytes, rx_ts: float) -> None:
        """v1 or v2 (docs/protocol.md): either way a full fast Telemetry goes in the batch."""
        try:
            msg = wire2.decode_telemetry(payload, self.max_payload)
        except codec.DecodeError as err:
            self._reject(rx_ts, topic, err.reason, err.detail)
            return
        if ((msg.node != subject or msg.bdSeq > (rx_ts + BDSEQ_FUTURE_S) * 1000)
                and not self._sane(msg, subject, topic, rx_ts)):
            return  # (the common case checked inline: a call per message is ~0.1 µs)
        if isinstance(msg, wire2.TelemetryV2):
            try:
                tel = self.reassembler.apply(msg, payload)
            except codec.DecodeError as err:
                self._reject(rx_ts, topic, err.reason, err.detail)
                return
            if tel is None:
                self._no_keyframe(subject, msg, rx_ts)
                return
            basis = self.reassembler.basis
        else:
            tel, basis = msg, None
        b = self._batch
        b.messages += 1
        # Receive time minus sample time includes the agent's clock skew; the lowest value
        # seen per node is taken as skew plus network, the rest is our backlog.
        lag = rx_ts - tel.ts / 1000
        floor = self._lag_floor.get(subject)
        if floor is None or lag < floor:
            floor = self._lag_floor[subject] = lag
        b.delays.append(lag - floor)
        if subject in b.telemetry:
            b.superseded += 1
            b.note_seq(subject, tel.seq)
        elif subject in b.seq_seen:  # replay counted superseded samples of it first
            b.seq_seen[subject].append(tel.seq)
        b.telemetry[subject] = (rx_ts, tel)
        if basis is not None:
            b.basis[subject] = basis
        elif b.basis:
            b.basis.pop(subject, None)

    def _digest(self, subject: str, topic: str, payload: bytes, rx_ts: float) -> None:
        if not payload:
            # Cleared with the node's birth by ``fleetdeck retire``: not malformed.
            self._batch.digests.pop(subject, None)
            self._batch.digests_cleared.add(subject)
            return
        try:
            msg = codec.decode_digest(payload, self.max_payload)
        except codec.DecodeError as err:
            self._reject(rx_ts, topic, err.reason, err.detail)
            return
        if msg.node != subject:
            self._reject(rx_ts, topic, codec.Reason.MISMATCH,
                         f"payload node '{msg.node}' differs from the topic's")
            return
        b = self._batch
        b.messages += 1
        b.digests[subject] = (rx_ts, msg)

    def _no_keyframe(self, node: str, msg: wire2.TelemetryV2, rx_ts: float) -> None:
        self.keyframe_missing += 1
        unkeyed = self._batch.unkeyed
        had = unkeyed.get(node)
        if had is None or rx_ts - msg.ts / 1000 < had[0] - had[1] / 1000:
            unkeyed[node] = (rx_ts, msg.ts)
        waiting = self.malformed.awaiting_keyframe
        was = waiting.get(node)
        if was is not None or len(waiting) < 131_072:  # node ids come from the network
            waiting[node] = (rx_ts, (was[1] if was else 0) + 1)
        if rx_ts - self._keyframe_asked.get(node, -1e18) < KEYFRAME_ASK_EVERY_S:
            return
        if len(self._keyframe_asked) > 200_000:
            # Node ids come from the network: forget asks old enough to be repeated anyway.
            self._keyframe_asked = {n: t for n, t in self._keyframe_asked.items()
                                    if rx_ts - t < KEYFRAME_ASK_EVERY_S}
        self._keyframe_asked[node] = rx_ts
        held = self.reassembler.holds(node)
        self.keyframe_wanted[node] = (
            f"no keyframe {msg.kf} of session {msg.bdSeq}" if held is None
            else f"keyframe {msg.kf} of session {msg.bdSeq} not held (holds {held[1]} of "
                 f"{held[0]})")

    def _sane(self, msg: Telemetry | wire2.TelemetryV2 | Birth | Status | Event, subject: str,
              topic: str, rx_ts: float) -> bool:
        if msg.node != subject:
            self._reject(rx_ts, topic, codec.Reason.MISMATCH,
                         f"payload node '{msg.node}' differs from the topic's")
            return False
        if (not isinstance(msg, Event)
                and msg.bdSeq > (rx_ts + BDSEQ_FUTURE_S) * 1000):
            # bdSeq is the agent's wall clock at connect (docs/protocol.md): far ahead of ours
            # it would pin the node to a session no real agent can ever beat.
            ahead = msg.bdSeq / 1000 - rx_ts
            self._reject(rx_ts, topic, codec.Reason.INVALID,
                         f"bdSeq {msg.bdSeq} is {ahead:.0f} s ahead of the receive clock "
                         f"(more than {BDSEQ_FUTURE_S:.0f}): is the node's clock right?")
            return False
        return True

    def _store(self, kind: Kind, subject: str, topic: str, msg: BaseModel, rx_ts: float) -> None:
        b = self._batch
        if isinstance(msg, Birth | Status | Event) and not self._sane(msg, subject, topic, rx_ts):
            return
        if isinstance(msg, Birth | Status | JobStatus):
            replayed = self._replayed(subject, msg)
            if replayed:
                self.replayed += 1
                if len(self._replayed_unsaid) < REPLAY_MEMORY:
                    self._replayed_unsaid.append(replayed)
                return
        b.messages += 1
        match msg:
            case Birth():
                prev = b.births.get(subject)
                if prev is None or msg.bdSeq >= prev[1].bdSeq:
                    b.births[subject] = (rx_ts, fast.birth_of(msg))
            case Status():
                prev_s = b.statuses.get(subject)
                if prev_s is None or msg.bdSeq >= prev_s[1].bdSeq:
                    b.statuses[subject] = (rx_ts, msg)
            case Event():
                if msg.ts > (rx_ts + BDSEQ_FUTURE_S) * 1000:
                    # Stamped far ahead (a node booted with a wrong clock, a forged event), it
                    # stayed the newest event for years, a fresh-looking XID 79 on top of the
                    # events view (an SRE drill). Kept, at its arrival, and said.
                    self._reject(rx_ts, topic, codec.Reason.INVALID,
                                 f"event ts {msg.ts} is more than {BDSEQ_FUTURE_S:.0f} s ahead "
                                 "of the receive clock: kept at its arrival time")
                    msg = msg.model_copy(update={"ts": int(rx_ts * 1000)})
                b.events.append((rx_ts, msg))
            case Ack():
                # An ack counts only on its sender's own topic (node/A/ack from A, sched/ack
                # from the scheduler): with per-node ACLs the topic is what proves who sent it.
                sender = subject if kind is Kind.ACK else "sched"
                if msg.by != sender:
                    b.messages -= 1
                    self._reject(rx_ts, topic, codec.Reason.MISMATCH,
                                 f"ack by '{msg.by}' on {sender}'s topic")
                    return
                b.acks.append((rx_ts, msg))
            case CollectorStatus():
                if msg.collector != subject:
                    b.messages -= 1
                    self._reject(rx_ts, topic, codec.Reason.MISMATCH,
                                 f"payload collector '{msg.collector}' differs from the topic's")
                    return
                b.collectors[subject] = (rx_ts, msg)
                if self.scope is not None:
                    self.scope.observe(msg, rx_ts)
            case SchedulerStatus():
                b.scheduler.append((rx_ts, msg))
            case JobStatus():
                if msg.job_id != subject:
                    b.messages -= 1
                    self._reject(rx_ts, topic, codec.Reason.MISMATCH,
                                 f"payload job '{msg.job_id}' differs from the topic's")
                    return
                prev_job = b.jobs.get(subject)
                if (prev_job is not None and len(b.jobs_passed) < JOBS_PASSED_MAX
                        and (prev_job[1].state, prev_job[1].requeues)
                        != (msg.state, msg.requeues)):
                    b.jobs_passed.append(prev_job[1])
                b.jobs[subject] = (rx_ts, msg)
                b.jobs_withdrawn.discard(subject)

    def _reject(self, rx_ts: float, topic: str, reason: str, detail: str) -> None:
        # Topics are attacker-controlled: keep them printable and bounded before storing.
        shown = topic.encode("unicode_escape").decode("ascii")[:200]
        self.malformed.add(Malformed(rx_ts, shown, str(reason), detail[:300]))
