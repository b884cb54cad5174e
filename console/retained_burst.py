"""What a connection's retained burst brought (docs/reliability.md, "The retained burst"): on
connect the broker sends every retained message at once and drops what its queue for this
client cannot hold. Statuses it dropped are asked for again, a node at a time, on the node's
own topic; many nodes born with no status at once mean it most likely cut the births too, and
then nodes may exist that no count shows (``burst_cut``).

``ConsoleSession`` owns one ``RetainedBurst``; each tick tells it whether the batch held a
birth or status it did not ask for (``in_burst``) and, on a full pass, lets it ask
(``ask_statuses``).
"""

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice

from fleetdeck.console.eventlog import Note
from fleetdeck.console.ingest import Batch
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState, NodeState
from fleetdeck.protocol.topics import ROOT, Kind, topic_for

STATUS_ASK_AFTER_S = 1.0
"""A node born this long with no status heard is asked for its retained status again, once the
connect burst is applied (``RetainedBurst.ask_statuses``): an agent publishes both together,
so the broker dropped it."""
STATUS_ASK_QUIET_S = 2.0
"""The connect burst is over once no birth or status was applied for this long."""
STATUS_ASK_WINDOW_S = 30.0
"""Born nodes are looked over for a missing status this long after each connect's burst is
over (the broker sends every retained message at once); not a pass over the fleet every tick
for ever."""
STATUS_ASK_BACKOFF_S = (10.0, 20.0, 40.0)
"""Ask k unanswered this long (the k-th) is made again (its answer may be dropped in a burst
too); after the last, no more this connection (a node may have no status retained): asks at 0,
10 and 30 s, given up at 70 s. A node's own
status filter stays subscribed until it is answered, asked again or given up."""
STATUS_ASKS_PER_TICK = 1024
BURST_CUT_MIN_NODES = 8
"""Nodes born with no status heard, once a connect's burst is over, from which the broker most
likely cut the burst (``RetainedBurst._note_burst_cut``): an agent retains its status beside
its birth (its Last Will when it dies), and 2 s after the last of the burst every status sent
with a birth has come; a few spare for a status cleared by hand (docs/reliability.md, "The
retained burst")."""
BURST_CUT_TEXT = (
    "the broker dropped part of its retained messages at connect ({missing} of {born} nodes "
    "came without their status): nodes whose birth it dropped are not listed; raise "
    "max_queued_messages (docs/reliability.md)")
"""What an operator reads when the connect burst was most likely cut in the births
(``_note_burst_cut``)."""
STATUSES_CUT_TEXT = (
    "the broker dropped the retained statuses of {missing} of {born} nodes at connect, after "
    "every birth: they are asked for again; raise max_queued_messages (docs/reliability.md)")
"""What the console logs (info, not kept) when the burst was cut in the statuses: every node
is listed, and the asks recover the statuses (``_note_burst_cut``)."""


def born_without_status(state: FleetState) -> Iterator[tuple[str, NodeState]]:
    """The nodes born with no status heard: the broker dropped it (an agent publishes both
    together, and its Last Will is a status), so each is asked for it (``ask_statuses``) and,
    many at once as a burst ends, the burst was cut (``_note_burst_cut``). A node whose status
    came and was refused (``MalformedLog.refused_statuses``: malformed, or of an older session)
    is none of them: asked again, the broker sends the same; counted, 12 nodes of a newer agent
    read as a cut burst, exit 3 (a review)."""
    refused = state.malformed.refused_statuses
    return ((n, st) for n, st in state.nodes.items()
            if st.birth is not None and st.status_bd_seq < 0 and n not in refused)


def said_cut(state: FleetState, missing: int, status_retained: bool,
             note: Note) -> tuple[int, int] | None:
    """A connection's burst over, ``missing`` nodes born with no status: whether it was cut
    in the births, (missing, born), said once as a kept warning; a cut in the statuses alone
    (a retained status came on the connection: every birth came before it) is logged, not
    kept; None for both and for too few missing (``BURST_CUT_MIN_NODES``). One judgement for
    the live console (``RetainedBurst``) and a replay (``RecordedBurst``)."""
    if missing < BURST_CUT_MIN_NODES:
        return None
    born = sum(1 for st in state.nodes.values() if st.birth is not None)
    if status_retained:
        note(STATUSES_CUT_TEXT.format(missing=missing, born=born), kind="statuses_cut")
        return None
    note(BURST_CUT_TEXT.format(missing=missing, born=born), severity="warn", kind="burst_cut",
         keep=True)
    return (missing, born)


class RetainedBurst:
    """The status asks of one session and its judgement of each connection's burst."""

    def __init__(self, cluster: str, note: Note, *, asks_statuses: bool) -> None:
        self.cluster = cluster
        self._note = note
        self.asks_statuses = asks_statuses
        """It subscribes to every node's status (``subscriptions``): a status the broker
        dropped is asked for again on the node's own topic (``ask_statuses``)."""
        self._status_asked: dict[str, tuple[float, int]] = {}
        """Node -> when it was last asked for its status, and how many times (this
        connection); more than ``STATUS_ASK_BACKOFF_S`` holds: given up, unsubscribed."""
        self._status_connect = -1.0
        self.burst_at = -1.0
        """When a tick last applied a birth or a status: the connect burst is over once none
        came for ``STATUS_ASK_QUIET_S``."""
        self._status_quiet_from: float | None = None
        """When this connection's burst was first over: the asks' window starts then."""
        self.burst_cut: tuple[int, int] | None = None
        """(nodes born with no status, nodes born) when a connect's burst was most likely cut
        in the births (``_note_burst_cut``): nodes may exist that no count shows. None also
        while the burst is not judged (``judged``)."""

    def ask_statuses(self, feed: LiveFeed, state: FleetState, now: float) -> None:
        """Subscribe, for a while, to the status topic of each node born with no status heard.
        On connect the broker sends every retained message at once and queues at most
        ``max_queued_messages`` for this client (Mosquitto's default 1000): of 1,024 nodes it
        sent the births and dropped the statuses after them, so the agents that had died
        (their Last Will) read "stale: no telemetry heard from it yet", not offline (an SRE
        drill; docs/domain.md, Mosquitto). A subscription to one node's topic brings its
        retained status alone. New asks wait for the burst to be over (no birth or status
        applied for ``STATUS_ASK_QUIET_S`` but the answers to its own asks and rebirths,
        ``in_burst``): asked in the burst, the answers queue behind it
        and are dropped with the rest. Telemetry is no part of it: at 16,384 nodes at 1 Hz
        some always waits to be applied, and asks that waited for none were never made (a
        review). The window (``STATUS_ASK_WINDOW_S``) starts when the burst is over. An ask
        unanswered is made again, and one answered forgotten (``STATUS_ASK_BACKOFF_S``)."""
        link = feed.link
        asked = self._status_asked
        nodes = state.nodes
        cluster = self.cluster
        tries = len(STATUS_ASK_BACKOFF_S)
        connected = link.conn.state == "connected" and link.client is not None
        if asked:
            heard: list[str] = []
            due: list[str] = []
            for n, (at, made) in asked.items():
                if (st := nodes.get(n)) is None or st.status_bd_seq >= 0:
                    heard.append(n)
                elif made <= tries and now - at >= STATUS_ASK_BACKOFF_S[made - 1]:
                    due.append(n)
            # Answered: forgotten, not kept to be looked over (and unsubscribed) again on every
            # full tick.
            gone = [topic_for(cluster, Kind.STATUS, n) for n in heard if asked.pop(n)[1] <= tries]
            if gone:
                link.unsubscribe(gone)
            if due:
                topics = [topic_for(cluster, Kind.STATUS, n) for n in due]
                # Subscribed already, the link sends nothing: off and on again, the broker
                # sends the retained status again.
                link.unsubscribe(topics)
                again = [(n, t) for n, t in zip(due, topics, strict=True)
                         if asked[n][1] < tries and connected]
                if again:
                    link.subscribe([t for _n, t in again])
                for n in due:
                    at, made = asked[n]
                    asked[n] = (now, made + 1) if made < tries and connected else (
                        at, tries + 1)
        if not connected:
            return
        conn = link.conn
        if conn.since != self._status_connect:
            self._status_connect = conn.since  # a new connection: its own burst
            self._status_quiet_from = None
            self.burst_cut = None  # judged again on this connection's burst
            for n in [n for n, (_at, made) in asked.items() if made > tries]:
                del asked[n]
        quiet_for = now - max(self.burst_at, conn.since)
        if self._status_quiet_from is None:
            if quiet_for < STATUS_ASK_QUIET_S:
                return
            self._status_quiet_from = now
            self._note_burst_cut(feed, state)
            # The node count is the cluster's from here (``FleetState.nodes_counted``); kept
            # through a later connection until its own burst is judged: what a whole burst
            # brought stays in ``nodes``, and a reconnect only adds.
            state.births_whole = self.burst_cut is None
        if quiet_for < STATUS_ASK_QUIET_S or now - self._status_quiet_from > STATUS_ASK_WINDOW_S:
            return
        ask = list(islice((n for n, st in born_without_status(state)
                           if st.first_seen is not None
                           and now - st.first_seen >= STATUS_ASK_AFTER_S
                           and n not in asked), STATUS_ASKS_PER_TICK))
        if ask:
            link.subscribe([topic_for(cluster, Kind.STATUS, n) for n in ask])
            for n in ask:
                asked[n] = (now, 1)

    @property
    def judged(self) -> bool:
        """Whether ``burst_cut`` says something of this connection's retained burst: it is
        judged once the burst is over (``STATUS_ASK_QUIET_S`` after its last birth or status),
        which a short watch may not reach, and never by a session that asks for no status
        (filters, digests): ``status`` says so then (``retained_burst_judged`` false)."""
        return self.asks_statuses and self._status_quiet_from is not None

    def _note_burst_cut(self, feed: LiveFeed, state: FleetState) -> None:
        """Once a connection, as its burst is over: many nodes born with no status means the
        broker cut the burst (Mosquitto keeps max_inflight_messages + max_queued_messages of it
        for a 3.1.1 client and drops the rest, births first, their filter subscribed first).
        Where no retained status came on this connection, the cut may be in the births: nodes
        whose births it dropped are in no count and the fleet reads smaller and healthier than
        it is (2,048 dead agents listed as 1,020, exit 0: a review); said once, kept in the
        store, and ``status`` exits 3. Where one came, every birth came before it: the cut
        took statuses only, which the asks recover (``ask_statuses``), and the listing is
        whole: 9 dead agents on a broker that keeps 10 of a burst read as cut, exit 3, on every
        fleet of 510-1,010 nodes on Mosquitto's default queue (a review). Logged, not kept."""
        missing = sum(1 for _ in born_without_status(state))
        self.burst_cut = said_cut(state, missing, feed.status_retained_on == feed.conn.connacks,
                                  self._note)

    def in_burst(self, batch: Batch, now: float, reborn: Mapping[str, float],
                 rebirth_every_s: float) -> bool:
        """Whether ``batch`` holds a birth or status the console did not ask for: the answers
        to its own status asks and rebirths are no burst, and counted as one they held the
        next asks 2 s each round: one round of 1,024 per 2.5 s, and of 16,384 nodes about
        3,000 were never asked in the 30 s window (a review)."""
        asked = self._status_asked
        if any(n not in asked for n in batch.statuses):
            return True
        return any(now - reborn.get(n, -1e18) >= rebirth_every_s for n in batch.births)


class RecordedBurst:
    """A replay's judgement of each recorded connection's retained burst, as ``RetainedBurst``
    judged it live (docs/recording.md, "The retained burst in a replay"). A recording keeps
    each message's retain flag, which a 3.1.1 subscriber gets set only on what its subscribe
    brought: the births and statuses with it are a connection's burst, its first from the
    recording's first message and one after each gap (the recorder lost the broker and
    subscribed again) or, where a console recorded it (no gap note), from each retained birth
    that comes once a burst is over. Once no retained birth or status came for
    ``STATUS_ASK_QUIET_S``, the burst is judged by the live rule: ``BURST_CUT_MIN_NODES`` nodes
    or more born with no status and no retained status on that connection is a cut in the
    births. Until then, and after a cut, a replay's node count is not the cluster's
    (``FleetState.nodes_counted``): a replay trusted whatever count it was given, and a job
    too big for the births a cut kept read "it can never start here" where the live console
    had said how many were heard so far.

    A node's retained status that comes once the burst is over is no part of it: the live
    console asked for it (``RetainedBurst.ask_statuses``, only once it had judged the burst),
    and the node was born without one when it judged. Taken as the burst's, the answers to a
    cut's asks read as a burst whole in the births whenever the replay's tick fell after them
    (the live console's tick had fallen before): "it can never start here" again.

    Kept by the replay's ingest, so a snapshot carries it with the state it judged."""

    def __init__(self, cluster: str) -> None:
        self._prefix = f"{ROOT}/{cluster}/"
        self._node_prefix = f"{self._prefix}node/"
        self.since: float | None = None
        """When the connection whose burst is judged began (None: nothing read yet). The
        first began by the recording's first message, not at its start: a console records
        from before it connects, and what the broker sent 2 s after the start read as no
        part of its burst."""
        self.gaps_taken = 0
        """The recording's gaps (their ends) taken as new connections so far."""
        self.burst_at = -math.inf
        """When the last retained birth or status of this connection's burst came."""
        self.status_retained = False
        """A retained status (of a node, a job or the scheduler) came on this connection: its
        births came whole before it (``LiveFeed.status_retained_on``)."""
        self.answered: set[str] = set()
        """Nodes whose retained status came after the burst was over and before it was
        judged here: answers to the live console's asks, born without a status then."""
        self.judged = False
        self.burst_cut: tuple[int, int] | None = None
        """(nodes born with no status, nodes born), as ``RetainedBurst.burst_cut``."""
        self.on_digests = False
        """A console on digests recorded it (its nodes are known from digests alone): no
        burst judged, as that console judged none, and its node count the collectors' word
        (``FleetState.digests_counted``)."""

    def begin(self, at: float) -> None:
        """The recording's first message (a keyframe's included) came at ``at``: its first
        connection was up by then."""
        if self.since is None:
            self._connect(at)

    def _connect(self, at: float) -> None:
        self.since, self.burst_at = at, -math.inf
        self.status_retained = self.judged = False
        self.burst_cut = None
        self.answered.clear()

    def _gaps_to(self, t: float, gaps: Sequence[tuple[float, float, str]]) -> None:
        """Take the gaps that ended by ``t``: each end is a new connection with its own burst."""
        while self.gaps_taken < len(gaps) and gaps[self.gaps_taken][1] <= t:
            self._connect(gaps[self.gaps_taken][1])
            self.gaps_taken += 1

    def see(self, topic: str, t: float, gaps: Sequence[tuple[float, float, str]]) -> None:
        """A recorded message with the retain flag set, received at ``t``."""
        if not topic.startswith(self._prefix):
            return
        self._gaps_to(t, gaps)
        self.begin(t)
        assert self.since is not None
        birth = topic.endswith("/birth")
        if not birth and not topic.endswith("/status"):
            return
        if t - max(self.burst_at, self.since) >= STATUS_ASK_QUIET_S:
            # Over already: the live console had judged it by then.
            if birth:
                # No ask brings a birth: the console connected again, and a console's
                # recording writes no gap note for it (``fleetdeck record``'s does).
                self._connect(t)
            else:
                if not self.judged and topic.startswith(self._node_prefix):
                    self.answered.add(topic[len(self._node_prefix):].partition("/")[0])
                return
        self.burst_at = t
        if not birth:
            self.status_retained = True

    def judge(self, state: FleetState, now: float, start: float,
              gaps: Sequence[tuple[float, float, str]], note: Note) -> None:
        """After the replay's tick at ``now``: the recording heard from ``start`` on, and this
        connection's burst judged once it is over."""
        if state.heard_since is None:
            # Fed as live from the recording's start: the node count is trusted only once a
            # burst is judged whole (``nodes_counted``), as a live console's.
            state.start_hearing(start)
        self._gaps_to(now, gaps)
        if self.on_digests:
            state.births_whole = state.digests_counted()
            return
        if (self.since is None or self.judged
                or now - max(self.burst_at, self.since) < STATUS_ASK_QUIET_S):
            return
        nodes = state.nodes
        if (not any(st.born_raw for st in nodes.values())
                and any(st.digest is not None for st in nodes.values())):
            # Recorded by a console on digests: no node of it has a status of its own, and
            # judged as raw births its 10 nodes read "the broker dropped part of its retained
            # messages at connect (10 of 10 nodes came without their status)", a kept warning
            # and ``retained_burst_cut`` that console never said.
            self.on_digests = True
            state.births_whole = state.digests_counted()
            return
        self.judged = True
        # A node known from its digest alone (a recording of raw and digests) has no status
        # of its own to miss.
        without = {n for n, st in born_without_status(state) if st.digest is None}
        # What the live console judged: those it asked for were born without a status.
        without.update(n for n in self.answered
                       if (st := nodes.get(n)) is not None and st.birth is not None)
        self.answered.clear()
        self.burst_cut = said_cut(state, len(without), self.status_retained, note)
        state.births_whole = self.burst_cut is None
