"""Record live MQTT traffic, and replay recordings through the same ingest path as live data.

The UI cannot tell replay from live: a ``Player`` feeds ``Ingest.handle`` with the recorded
receive times and provides the clock the fleet state judges staleness by.
"""

import asyncio
import bisect
import contextlib
import math
import random
import re
import sys
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, make_client
from fleetdeck.console.ingest import BDSEQ_FUTURE_S, TOPIC_CACHE_MAX, Ingest
from fleetdeck.console.live import clusters_seen
from fleetdeck.console.recording import (
    ReadCursor,
    ReadMark,
    ReadReport,
    RecordingReader,
    RecordingWriter,
    Scanned,
)
from fleetdeck.console.retained_burst import RecordedBurst
from fleetdeck.console.session import ConsoleSession, Picture, TickReport
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.errors import UserError
from fleetdeck.protocol import wire2
from fleetdeck.protocol.ids import is_valid_id
from fleetdeck.protocol.topics import (
    NODE_KINDS,
    ROOT,
    Kind,
    TopicError,
    command_topics,
    digest_subscriptions,
    parse_topic,
    subscriptions,
    topic_for,
)
from fleetdeck.timespan import clock_s, span_s

TICK_S = 0.5
"""The console's own tick, in recorded time: what a headless replay ticks at unless told."""
LINE_SLACK_S = 2.0
"""How long after an agent's event's own time its recorded receipt is taken for it
(``Player.line_at``)."""
EVENT_KINDS = frozenset({Kind.EVENT, Kind.ACK, Kind.CMD, Kind.SCHED_CMD, Kind.SCHED_ACK,
                         Kind.STATUS})
"""What 'next/previous event' jumps between: things that happened, not periodic samples, nor
the routine messages of ``routine`` (births, an agent back online, keyframe requests)."""
ROUTINE_OPS = (b'"op":"keyframe"', b'"op":"rebirth"', b'"op":"resend_events"')
"""Commands that consoles, collectors and recorders send by themselves (read-only ops), not
operators: the events view's ``routine`` and ``replay --to-broker``'s count of what it left
out (console/republish.py) alike."""


def routine(kind: Kind | None, payload: bytes) -> bool:
    """A message of ``EVENT_KINDS`` that nothing in the events view stands for: a status that
    says online and not drained (every agent's on each connect), a command or answer of a
    keyframe or rebirth request (consoles' and recorders' own). After a broker restart, "next
    event" stopped 15 times on those, on nothing the screen showed (a replay audit)."""
    if kind is Kind.STATUS:
        return b'"online":true' in payload and b'"state":"none"' in payload
    return any(op in payload for op in ROUTINE_OPS)
_UNSEEN = object()


# --- record --------------------------------------------------------------------------------------


@dataclass
class RecordStats:
    messages: int = 0
    bytes_in: int = 0
    file_bytes: int = 0
    started: float = 0.0
    gaps: int = 0
    """Times the broker was lost and the gap marked in the recording."""
    created: bool = False
    """False when it stopped before the first connection: no file was made."""
    node_messages: int = 0
    """Messages of the cluster's nodes recorded: none means a wrong --cluster, or no agent."""
    clusters_seen: list[str] = field(default_factory=list)
    """Other clusters with nodes on that broker, asked once nothing of ours was heard."""


NOTHING_HEARD_S = 10.0
"""After this long connected with no node's message, ``record`` says so (once)."""


def already_exists(path: Path) -> str:
    return (f"{path} already exists; pick another --out, or pass --force to overwrite that "
            "recording.")


RECONNECT_CAP_S = 10.0
"""Longest wait between reconnect attempts (jittered backoff, as LiveFeed)."""


def _say(text: str) -> None:
    print(f"fleetdeck record: {text}", file=sys.stderr, flush=True)


async def record(url: BrokerURL, cluster: str, out: Path, duration: float | None,
                 progress: Callable[[RecordStats], None] | None = None,
                 stop: asyncio.Event | None = None,
                 say: Callable[[str], None] = _say, *, force: bool = False) -> RecordStats:
    """Capture everything under ``fleetdeck/v1/<cluster>/`` until ``duration`` or ``stop``.

    The first connection must succeed (a wrong URL is one sentence), and ``out`` is created
    only once it has: a failed start leaves no file behind. An existing ``out`` is refused
    unless ``force``. After that a lost broker does not end the recording: it reconnects with
    jittered backoff until ``duration``, writes a gap note for the time it was cut off
    (docs/recording.md) and says both on ``say``.
    """
    stop = stop or asyncio.Event()
    started = time.time()
    deadline = None if duration is None else time.monotonic() + duration
    if out.exists() and not force:  # noqa: ASYNC240 - one stat, before any I/O starts
        # Checked before connecting too, so the user hears it before waiting on a broker.
        raise UserError(already_exists(out))
    writer: RecordingWriter | None = None
    stats = RecordStats(started=started)
    prefix = f"{ROOT}/{cluster}/"
    attempt = 0
    connected = False
    lost_at: float | None = None
    lost_why = ""

    def left() -> float | None:
        return None if deadline is None else deadline - time.monotonic()

    def going() -> bool:
        return not stop.is_set() and (deadline is None or time.monotonic() < deadline)

    def open_writer() -> RecordingWriter:
        try:
            return RecordingWriter(out, cluster, source=str(url), started=started,
                                   overwrite=force)
        except FileExistsError:
            raise UserError(already_exists(out)) from None
        except OSError as err:
            raise UserError(f"cannot write {out}: {err.strerror or err}.") from None

    def publish_stats() -> None:
        if writer is None:
            return
        stats.messages, stats.bytes_in = writer.messages, writer.bytes_in
        stats.file_bytes = writer.size
        if progress:
            progress(stats)

    node_prefix = f"{prefix}node/"

    async def pump(client: aiomqtt.Client) -> None:
        last_flush = time.monotonic()
        async for m in client.messages:
            topic = m.topic.value
            if not topic.startswith(prefix):
                continue  # amqtt leaks retained messages of other subscriptions
            if topic.startswith(node_prefix):
                stats.node_messages += 1
            payload = m.payload if isinstance(m.payload, bytes) else b""
            assert writer is not None
            writer.write(time.time(), topic, payload, m.qos, m.retain)
            if time.monotonic() - last_flush > 1.0:
                writer.flush()
                last_flush = time.monotonic()
                publish_stats()
        raise aiomqtt.MqttError("the message stream ended")

    try:
        while going():
            client = make_client(url, f"fd-record-{int(started)}", keepalive=10)
            try:
                async with client:
                    await client.subscribe(f"{prefix}#", qos=1)
                    # Agents answer with their birth and a v2 telemetry keyframe, so the
                    # recording can be replayed from its start (docs/protocol.md, "Gaps").
                    await client.publish(topic_for(cluster, Kind.REBIRTH), b"", qos=1)
                    if writer is None:
                        # Once the broker answered all of the start: a publish it left
                        # unanswered left a recording of its header alone, and the same
                        # command again was refused, "already exists" (a 2026-12-07 drill).
                        writer = open_writer()
                    if lost_at is not None:
                        back = time.time()
                        assert writer is not None
                        writer.gap(lost_at, back, f"broker connection lost: {lost_why}")
                        say(f"broker back after {back - lost_at:.1f} s; recording again (the "
                            "gap is marked in the recording).")
                        lost_at = None
                    if not connected:
                        say(f"connected to {url}; recording everything under {prefix}")
                    connected, attempt = True, 0
                    pumper = asyncio.create_task(pump(client))
                    waiter = asyncio.create_task(stop.wait())
                    quiet_since: float | None = time.monotonic()
                    try:
                        while True:
                            if (not stats.node_messages and quiet_since is not None
                                    and time.monotonic() - quiet_since >= NOTHING_HEARD_S):
                                # An overnight recording of a mistyped cluster held one
                                # message, its own rebirth request, and exited 0 (a replay
                                # audit): said while there is time to start it again.
                                quiet_since = None
                                await _say_nothing_heard(url, cluster, stats, say)
                            # Each second, progress: also while nothing arrives.
                            remaining = left()
                            done, _ = await asyncio.wait(
                                {pumper, waiter}, return_when=asyncio.FIRST_COMPLETED,
                                timeout=1.0 if remaining is None else min(1.0, remaining))
                            remaining = left()
                            if done or (remaining is not None and remaining <= 0):
                                break
                            publish_stats()
                    finally:
                        for task in (pumper, waiter):
                            task.cancel()
                        await asyncio.gather(pumper, waiter, return_exceptions=True)
                    if pumper in done and not pumper.cancelled():
                        exc = pumper.exception()
                        if exc is not None:
                            raise exc
                    return stats
            except aiomqtt.MqttError as err:
                if not connected:
                    raise UserError(describe_mqtt_error(url, err)) from None
                if lost_at is None:
                    lost_at, lost_why = time.time(), str(err) or type(err).__name__
                    if writer is not None:
                        writer.flush()
                    say(f"broker connection lost ({lost_why}); reconnecting, the recording "
                        "goes on.")
                attempt += 1
                delay = min(RECONNECT_CAP_S, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1)
                remaining = left()
                if remaining is not None:
                    delay = min(delay, max(0.0, remaining))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)
        return stats
    except OSError as err:
        # The disk, not the broker (aiomqtt wraps socket errors in MqttError).
        raise UserError(f"cannot write {out}: {err.strerror or err}; what was written so far "
                        "is kept.") from None
    finally:
        if writer is not None:
            with contextlib.suppress(OSError):
                if lost_at is not None:
                    writer.gap(lost_at, time.time(), f"broker connection lost: {lost_why}; "
                               "the recording ended before it came back")
                    say("the recording ended while the broker was away (the gap is marked).")
                writer.close()
            stats.messages, stats.bytes_in = writer.messages, writer.bytes_in
            stats.file_bytes = writer.closed_size
            stats.gaps = writer.gaps
            stats.created = True


async def _say_nothing_heard(url: BrokerURL, cluster: str, stats: RecordStats,
                             say: Callable[[str], None]) -> None:
    with contextlib.suppress(aiomqtt.MqttError, OSError):
        stats.clusters_seen = [c for c in await clusters_seen(
            url, f"fd-record-probe-{int(time.time())}") if c != cluster]
    hint = (f"clusters with nodes there: {', '.join(stats.clusters_seen)}; wrong --cluster?"
            if stats.clusters_seen else "is an agent or 'fleetdeck sim' publishing to it?")
    say(f"nothing from any node of cluster '{cluster}' in {NOTHING_HEARD_S:g} s on {url} "
        f"({hint}); recording on.")


def seek_target(arg: str, start: float, heading: float, end: float | None = None, *,
                nodes: bool = False) -> float:
    """Where ``:seek ARG`` goes (unix s): ``90`` seconds into the recording, ``+10``/``-30``
    from where the replay is heading, either with units (``2h``, ``+1h30m``, ``-5m``), or a
    clock time as the views show them, UTC (``04:02:30``; ``2026-12-05T04:02``): "go to 02:13,
    when the node failed" took working out the offset by hand (a replay audit). A clock time
    is of the recording's own day(s), ``start`` to ``end`` (no end: open-ended): the
    occurrence within it nearest ``heading``, else the one nearest the recording ("19:10" 4 min
    before its start read as tomorrow, its end: an SRE's run). ``start`` and ``end`` name the
    ends (no end: infinity, read to the end); ":seek end" was refused, the end found by seeking
    past it (a replay drill). Not clamped: ``seek_note`` says when it lies outside. ValueError
    with a sentence for anything else (``--until`` takes the same: one parser), which names
    a node as well where the caller takes one (``nodes``: the replay console's ``:seek gpu0005``,
    ``Player.node_event``)."""
    text = arg.strip()
    word = text.lower()
    if word == "start":
        return start
    if word == "end":
        return math.inf if end is None else end
    sign = text[:1] if text[:1] in "+-" else ""
    seconds = span_s(text[len(sign):])
    if seconds is not None:
        if sign:
            return heading + (seconds if sign == "+" else -seconds)
        return start + seconds
    clock = clock_s(text)
    if clock is not None:
        day = datetime.fromtimestamp(start, UTC).replace(hour=0, minute=0, second=0,
                                                         microsecond=0).timestamp()
        last = math.inf if end is None else end
        days = 1 if end is None else max(0, math.ceil((end - day) / 86400))
        times = [day + clock + k * 86400 for k in range(days + 1)]
        inside = [t for t in times if start <= t <= last]
        if inside:
            return min(inside, key=lambda t: abs(t - heading))
        return min(times, key=lambda t: start - t if t < start else t - last)
    try:
        dt = datetime.fromisoformat(text)
    except ValueError:
        ends = ("start, end or a node (gpu0005: its next recorded event)" if nodes
                else "start or end")
        raise ValueError(f"'{arg}' is not seconds (90, +10, -30), a span (2h, +1h30m), a UTC "
                         f"clock time (04:02:30, 2026-12-05T04:02), {ends}") from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def seek_needs_end(arg: str) -> bool:
    """Whether ``seek_target`` needs the recording's end for ``arg`` (a clock time: which of
    its days; ``end``): headless ``--until`` reads the file to find it only then."""
    text = arg.strip()
    return text.lower() == "end" or clock_s(text) is not None


def seek_note(arg: str, target: float, start: float, end: float) -> str:
    """'' when ``target`` lies within the recording, else the one line that says where a
    seek to it lands instead: ``:seek 999`` and ``:seek -999`` moved to an end silently (an
    SRE's run)."""
    # Half a second either side: the ends are said to the nearest second, as the replay's
    # header says where it stands, and a seek to the time the header shows at the end said
    # it lay after the recording (a newcomer's run).
    if start - 0.5 <= target <= end + 0.5:
        return ""
    span = f"{_when(start, start, end)} to {_when(end, start, end)}"
    if target < start:
        return f"{arg.strip()} is before the recording ({span}): at its start"
    return f"{arg.strip()} is after the recording ({span}): at its end"


def _when(t: float, start: float, end: float) -> str:
    """A UTC clock time, with its date when the recording runs over more than one day: to the
    nearest second, as the replay's header says where it stands (cut to the second, the end
    read 23:02:39 under a header at 23:02:40: a newcomer's run)."""
    one_day = (datetime.fromtimestamp(round(start), UTC).date()
               == datetime.fromtimestamp(round(end), UTC).date())
    return datetime.fromtimestamp(round(t), UTC).strftime("%H:%M:%S" if one_day
                                                          else "%Y-%m-%d %H:%M:%S")


# --- replay ---------------------------------------------------------------------------------------


class NothingToReplay(UserError):
    """The recording holds no node of the cluster it replays: exit 3, as ``record`` exits when
    it heard none (``EXIT_NOTHING_RECORDED``)."""

    exit_code = 3


class NodeWatch:
    """Whether a recording holds any node of the cluster it replays (a topic under its
    ``node/`` or ``digest/``): a header naming another cluster than its topics (edited, or
    recorded under the wrong name) replayed as an empty fleet, exit 0, not a word (an SRE's
    run). Ask ``see`` only until ``heard``."""

    MAX_OTHERS = 5

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.heard = False
        self.others: list[str] = []
        """Clusters whose nodes the recording holds instead (the first few)."""
        self._prefixes = (f"{ROOT}/{cluster}/node/", f"{ROOT}/{cluster}/digest/")

    def see(self, topic: str) -> None:
        if topic.startswith(self._prefixes):
            self.heard = True
            return
        parts = topic.split("/", 4)
        if (len(parts) == 5 and f"{parts[0]}/{parts[1]}" == ROOT
                and parts[3] in ("node", "digest") and parts[2] not in self.others
                and len(self.others) < self.MAX_OTHERS and is_valid_id(parts[2])):
            self.others.append(parts[2])

    def check(self) -> None:
        """Raise NothingToReplay unless a node of the cluster was seen."""
        if self.heard:
            return
        where = (f"its topics are of cluster {', '.join(repr(c) for c in self.others)}"
                 if self.others else "it holds no message of any node")
        raise NothingToReplay(f"no node of cluster '{self.cluster}' in this recording "
                              f"({where}): nothing to replay.")


_TELEMETRY_HEAD = re.compile(
    rb'\{\\"v\\":([12]),\\"node\\":\\"([A-Za-z0-9._-]{1,64})\\",\\"seq\\":([0-9]{1,18}),'
    rb'\\"bdSeq\\":([0-9]{1,18}),\\"ts\\":([0-9]{1,18})(?:,\\"kf\\":([0-9]{1,18}))?[,}]')
"""The first fields of a telemetry payload as agents encode it (v1, or v2 with its ``kf``), read
straight off the recording line (the payload is a JSON string there, hence the escaped quotes):
all a superseded sample contributes to the picture, and for v2 which keyframe it rests on. A
payload that does not start so is decoded in full."""


_Superseded = tuple[int, int, float]
"""(seq, ts in ms, receive time) of a superseded sample: all that is kept of it."""


@dataclass(frozen=True, slots=True)
class _Head:
    """What ``_peek`` read off a telemetry line."""

    seq: int
    ts: int
    rx: float
    bd_seq: int
    kf: int | None
    """v2: the ``seq`` of the keyframe it rests on (``kf == seq``: a keyframe); v1: None."""

    @property
    def keyframe(self) -> bool:
        return self.kf == self.seq

    @property
    def superseded(self) -> _Superseded:
        return self.seq, self.ts, self.rx


def _peek(msg: Scanned, subject: str) -> _Head | None:
    """The first fields of a telemetry sample, read off its line; None when they cannot be read
    so or when Ingest would refuse the sample for them (wrong node, a bdSeq from the future, a
    v2 ``kf`` after its ``seq``): such a sample is decoded and handed to Ingest instead."""
    if msg.raw is None:
        return None
    m = _TELEMETRY_HEAD.match(msg.raw, msg.p_at + 1)
    if m is None or m.group(2).decode("ascii") != subject:
        return None
    v2 = m.group(1) == b"2"
    kf = m.group(6)
    if v2 is (kf is None):
        return None  # a v1 sample with a kf, or a v2 one without: another encoder's layout
    head = _Head(int(m.group(3)), int(m.group(5)), msg.t, int(m.group(4)),
                 None if kf is None else int(kf))
    if head.bd_seq > (msg.t + BDSEQ_FUTURE_S) * 1000:
        return None
    if head.kf is not None and head.kf > head.seq:
        return None
    return head


class _Window:
    """One node's telemetry in the current tick window, oldest first. Kept whole: the newest
    sample, the one before it (in case Ingest refuses the newest), anything ``_peek`` cannot
    read, and for v2 the newest keyframe (the newest delta rests on it, and the next window's
    deltas will: Ingest must hold it). Every other sample shrinks to what superseding needs, so
    a long seek holds a few ints per sample, not lines.

    A v2 delta is superseded only if it rests on the keyframe Ingest would hold at its place
    in the window (``held``: the one Ingest holds now, moved on by each keyframe of the window
    as Ingest would move it); one that does not (its keyframe never arrived) goes through
    Ingest in order, which counts it as ``keyframe_missing`` as a live console does."""

    __slots__ = ("held", "kept", "kept_head", "newest", "newest_head", "older", "prev",
                 "prev_head")

    def __init__(self, newest: Scanned, held: tuple[int, int] | None) -> None:
        self.older: list[_Superseded | Scanned] = []
        self.prev: Scanned | None = None
        self.prev_head: _Head | None = None
        self.held = held
        self.kept: Scanned | None = None
        self.kept_head: _Head | None = None
        self.newest = newest
        self.newest_head: _Head | object | None = _UNSEEN
        """Read off the line only once a second sample arrives: a window of one sample (the
        common case at the console's tick) is handed to Ingest as it is."""

    def _note(self, msg: Scanned, subject: str) -> _Head | None:
        """``msg``'s head, or None where it must go through Ingest whole."""
        head = _peek(msg, subject)
        if head is None or head.kf is None:
            return head
        if not head.keyframe:
            return head if (head.bd_seq, head.kf) == self.held else None
        if self.held is None or (head.bd_seq, head.seq) >= self.held:
            # Ingest will hold this one from here on (wire2.Reassembler.apply's rule).
            self.held = (head.bd_seq, head.seq)
            old, old_head = self.kept, self.kept_head
            self.kept, self.kept_head = msg, head
            if old is not None and old_head is not None:
                # Needed by nothing any more: superseded like any sample.
                for i, item in enumerate(self.older):
                    if item is old:
                        self.older[i] = old_head.superseded
                        break
        return head

    def _shrunk(self, msg: Scanned, head: _Head | None) -> _Superseded | Scanned:
        return msg if head is None or msg is self.kept else head.superseded

    def _newest_head(self, subject: str) -> _Head | None:
        head = self.newest_head
        if head is _UNSEEN:
            head = self.newest_head = self._note(self.newest, subject)
        assert head is None or isinstance(head, _Head)
        return head

    def add(self, subject: str, msg: Scanned) -> None:
        head = self._newest_head(subject)
        if self.prev is not None:
            self.older.append(self._shrunk(self.prev, self.prev_head))
        self.prev, self.prev_head = self.newest, head
        self.newest, self.newest_head = msg, _UNSEEN

    def items(self, subject: str) -> list[_Superseded | Scanned]:
        """Every sample before the newest, in order: superseded ones shrunk, the rest whole."""
        assert self.prev is not None
        self._newest_head(subject)  # a keyframe newest frees the one before it
        return [*self.older, self._shrunk(self.prev, self.prev_head)]


class ReplayIngest(Ingest):
    """Ingest plus what replay needs: counting a telemetry sample that a newer one of the same
    node replaced within a tick without decoding it, exactly as ``Ingest`` counts a superseded
    live sample (messages, superseded, its seq for gap counting, its delay), and taking the
    operators' recorded commands for the timeline."""

    hears_commands = True

    def __init__(self, cluster: str) -> None:
        super().__init__(cluster)
        self.burst = RecordedBurst(cluster)
        """Each recorded connection's retained burst, judged as live: here, so a snapshot
        carries it with the state it judged."""

    def supersede(self, subject: str, seq: int, ts_ms: int, rx_ts: float) -> None:
        self.received += 1
        b = self._batch
        b.messages += 1
        b.superseded += 1
        lag = rx_ts - ts_ms / 1000
        floor = self._lag_floor.get(subject)
        if floor is None or lag < floor:
            floor = self._lag_floor[subject] = lag
        b.delays.append(lag - floor)
        b.note_seq(subject, seq)

    def mark(self, subject: str) -> "_Mark":
        """Where the batch stands for ``subject``: ``undo`` returns there."""
        b = self._batch
        seqs = b.seq_seen.get(subject)
        return _Mark(self.received, b.messages, b.superseded, len(b.delays),
                     -1 if seqs is None else len(seqs), self._lag_floor.get(subject),
                     b.telemetry.get(subject), b.basis.get(subject))

    def undo(self, subject: str, mark: "_Mark") -> None:
        b = self._batch
        self.received, b.messages, b.superseded = mark.received, mark.messages, mark.superseded
        del b.delays[mark.delays:]
        if mark.seqs < 0:
            b.seq_seen.pop(subject, None)
        else:
            del b.seq_seen[subject][mark.seqs:]
        if mark.floor is None:
            self._lag_floor.pop(subject, None)
        else:
            self._lag_floor[subject] = mark.floor
        if mark.telemetry is None:
            b.telemetry.pop(subject, None)
        else:
            b.telemetry[subject] = mark.telemetry
        if mark.basis is None:
            b.basis.pop(subject, None)
        else:
            b.basis[subject] = mark.basis


@dataclass(frozen=True, slots=True)
class _Mark:
    received: int
    messages: int
    superseded: int
    delays: int
    seqs: int
    """Length of the node's ``seq_seen`` list, -1 for none."""
    floor: float | None
    telemetry: tuple[float, wire2.Sample] | None
    basis: wire2.Basis | None


def _literals_at(filters: tuple[str, ...]) -> list[frozenset[str]]:
    """Per topic level, the words the subscription ``filters`` name there (not ``+``/``#``)."""
    levels: list[set[str]] = []
    for f in filters:
        words = f.split("/")
        if words[0] == "$share":
            words = words[2:]  # as aiomqtt matches a shared subscription
        for i, word in enumerate(words):
            if i == len(levels):
                levels.append(set())
            if word not in ("+", "#"):
                levels[i].add(word)
    return [frozenset(words) for words in levels]


def _shape(topic: str, literals: list[frozenset[str]]) -> tuple[str | None, ...]:
    """``topic``'s levels, each word no filter names at its level made None. A filter matches
    a topic by its length and by comparing the topic's word with its own at each level where
    it names one: a word no filter names there fails each such comparison, as None does, so
    topics of one shape are heard alike (``node/gpu0001/birth`` as ``node/gpu0002/birth``)."""
    words = topic.split("/")
    n = len(literals)
    return tuple(w if i < n and w in literals[i] else None for i, w in enumerate(words))


class TickFeed:
    """Feeds scanned messages to a session's ingest one tick window at a time.

    Births, statuses, events, acks, job statuses and anything unusual go to ``Ingest.handle``
    as they come, in order. Telemetry waits per node until ``flush`` (the end of the window):
    then only the newest sample of each node is decoded; the older ones are counted as
    superseded from the few fields read off the line (``_peek``), which is all the fleet state
    takes from a superseded live sample too. ``every_sample`` decodes every sample in order
    instead (the reference the fast path is tested against)."""

    def __init__(self, reader: RecordingReader, cluster: str, every_sample: bool = False,
                 ingest: ReplayIngest | None = None,
                 gaps: Sequence[tuple[float, float, str]] | None = None) -> None:
        self.reader = reader
        self.cluster = cluster
        self.gaps = reader.report.spans if gaps is None else gaps
        """The recording's gaps, each read before what was recorded after it: a retained
        message after a gap's end is of the recorder's next connection (``RecordedBurst``)."""
        self.every_sample = every_sample
        self.ingest = ingest if ingest is not None else ReplayIngest(cluster)
        self.pending: dict[str, _Window | Scanned] = {}
        """Per node, its telemetry of this window: one sample as it is, more in a _Window."""
        self.decoded = 0
        """Payloads decoded (the rest were superseded unread)."""
        self.superseded = 0
        """Telemetry samples counted from their first fields, never decoded."""
        self._topics: dict[str, str | None] = {}
        self._heard: dict[str, bool] = {}
        """Per topic outside telemetry: whether a live console subscribes to it. ``record``
        keeps everything under the cluster's root (the simulator's ``sim/inject`` too); what
        no console would have received is not handed to Ingest, which would count it
        malformed."""
        # Plus the operators' commands, which no console subscribes to: the replay's timeline
        # names them (``Ingest.hears_commands``).
        self._filters = tuple(dict.fromkeys([*subscriptions(cluster),
                                             *digest_subscriptions(cluster),
                                             *command_topics(cluster)]))
        self._literals: list[frozenset[str]] = _literals_at(self._filters)
        self._shapes: dict[tuple[str | None, ...], bool] = {}
        """Whether a console hears a topic of this shape (``_shape``): most topics outside
        telemetry are seen once (a node's birth, its status), and matching one against the
        filters cost ~20 µs, ~5 % of a replay of 1,024 nodes' births and statuses."""
        self._flushing: list[tuple[str, _Window | Scanned]] = []
        """A window being flushed in steps (``flush`` with a deadline), in order."""
        self._flushed = 0
        self._unbegun = self.ingest.burst.since is None
        """No message read yet: the first says when the first connection was up by."""

    @property
    def waiting(self) -> bool:
        """Telemetry of the window is still to be handed to Ingest (``flush``)."""
        return bool(self.pending) or self._flushed < len(self._flushing)

    def _telemetry_subject(self, topic: str) -> str | None:
        """The node a telemetry topic of this cluster is for; None for anything else."""
        try:
            return self._topics[topic]
        except KeyError:
            pass
        parsed = self.ingest.parsed(topic)  # Ingest finds it parsed
        subject = (parsed.subject if parsed is not None and parsed.kind is Kind.TELEMETRY
                   and parsed.cluster == self.cluster and parsed.subject else None)
        if len(self._topics) < TOPIC_CACHE_MAX:
            self._topics[topic] = subject
        return subject

    def add(self, msg: Scanned) -> None:
        if self._unbegun:
            self._unbegun = False
            self.ingest.burst.begin(msg.t)
        if not self.every_sample:
            subject = self._telemetry_subject(msg.topic)
            if subject is not None:
                window = self.pending.get(subject)
                if msg.keyframe:
                    # A recording keyframe's sample goes to Ingest at once: a window it
                    # lands in takes the keyframe Ingest holds before it (only a window of
                    # one sample has not yet, see below).
                    if isinstance(window, Scanned):
                        self.pending[subject] = self._window(subject, window)
                elif window is None:
                    # A window of one sample, the common case at the console's tick: kept as
                    # it is (a _Window costs ~2 µs a sample, ~3 % of a replay).
                    self.pending[subject] = msg
                    return
                elif isinstance(window, Scanned):
                    self.pending[subject] = w = self._window(subject, window)
                    w.add(subject, msg)
                    return
                else:
                    window.add(subject, msg)
                    return
        if msg.retain and not msg.keyframe:
            # What a subscribe brought: a connection's burst, judged as live judged it.
            self.ingest.burst.see(msg.topic, msg.t, self.gaps)
        if self._console_hears(msg.topic):
            self._handle(msg)

    def _console_hears(self, topic: str) -> bool:
        # The reader has checked that ``topic`` is a topic name (no wildcard, not empty).
        heard = self._heard.get(topic)
        if heard is None:
            shape = _shape(topic, self._literals)
            heard = self._shapes.get(shape)
            if heard is None:
                heard = any(aiomqtt.Topic(topic).matches(f) for f in self._filters)
                if len(self._shapes) < TOPIC_CACHE_MAX:
                    self._shapes[shape] = heard
            if len(self._heard) < TOPIC_CACHE_MAX:
                self._heard[topic] = heard
        return heard

    def _window(self, subject: str, first: Scanned) -> _Window:
        """A second sample of ``subject`` in this window: track it whole. Nothing since
        ``first`` moved the keyframe Ingest holds for ``subject`` (its telemetry waits here, a
        recording keyframe's upgrades the window first), so it is read now."""
        return _Window(first, self.ingest.reassembler.holds(subject))

    def _handle(self, msg: Scanned, subject: str | None = None) -> bool | None:
        """Decode and hand to Ingest: True when Ingest kept it, False when it refused it (or
        could not apply it: a v2 delta without its keyframe), None when the line itself was
        damaged (counted by the reader; Ingest never saw it). ``subject``: the node whose
        telemetry ``msg`` is (``_telemetry_subject``), its topic checked already."""
        payload = self.reader.payload(msg)
        if payload is None:
            return None
        self.decoded += 1
        ingest = self.ingest
        refused, missing = ingest.malformed.total, ingest.keyframe_missing
        # Retained as recorded, as ``LiveFeed.hand`` sets it live: a retained status older
        # than one heard before is left out (``Ingest._replayed``, a broker restored from an
        # old saved copy), or a replay booked job 41 "interrupted" where the live console had
        # not. A keyframe's entries, the recorder's own picture, are read unretained.
        retained = msg.retain
        if retained:
            ingest.retained = True
        try:
            if subject is None or ingest.cluster != self.cluster:
                ingest.handle(msg.topic, payload, msg.t)
            else:
                ingest.handle_telemetry(subject, msg.topic, payload, msg.t)
        finally:
            if retained:
                ingest.retained = False
        # A v2 delta whose keyframe is not held is not kept either (Ingest counts it apart).
        return ingest.malformed.total == refused and ingest.keyframe_missing == missing

    def flush(self, deadline: float | None = None) -> bool:
        """End the window: hand every node's telemetry to Ingest (see the class). With a
        ``deadline`` (``time.perf_counter``), stop once past it, a node at least: False while
        nodes are left, which the next call hands over (before anything is added again)."""
        if deadline is None and not self._flushing:
            pending, self.pending = self.pending, {}
            for subject, samples in pending.items():
                self._flush_node(subject, samples)
            return True
        if self.pending:
            self._flushing.extend(self.pending.items())
            self.pending = {}
        todo = self._flushing
        i = self._flushed
        try:
            while i < len(todo):
                subject, samples = todo[i]
                i += 1
                self._flush_node(subject, samples)
                if deadline is not None and i < len(todo) and time.perf_counter() > deadline:
                    return False
        finally:
            self._flushed = i
        todo.clear()
        self._flushed = 0
        return True

    def _flush_node(self, subject: str, window: _Window | Scanned) -> None:
        if isinstance(window, Scanned):
            self._handle(window, subject)
            return
        newest, prev = window.newest, window.prev
        if prev is None:
            self._handle(newest, subject)
            return
        ingest = self.ingest
        older = window.items(subject)
        mark = ingest.mark(subject)
        first_pass: dict[int, bool | None] = {}
        skipped = 0
        for i, item in enumerate(older):
            if isinstance(item, Scanned):
                # What Ingest would refuse, or what cannot be read cheaply: Ingest judges it.
                first_pass[i] = self._handle(item, subject)
            else:
                ingest.supersede(subject, *item)
                skipped += 1
        kept = self._handle(newest, subject)
        if kept:
            self.superseded += skipped
            return
        # The newest sample was refused (or its line damaged). A live console would have kept
        # the newest good one before it: redo the window with the sample before the newest
        # decoded. What was refused before is not handed over twice (it would be counted
        # twice); Ingest's receive count still sees every sample once. (Were that one refused
        # too, the node keeps its previous sample this tick, where a live console would have
        # taken an older good one: two refused samples in a row end a window.)
        ingest.undo(subject, mark)
        if kept is False:
            ingest.received += 1
        skipped = 0
        for i, item in enumerate(older[:-1]):
            if not isinstance(item, Scanned):
                ingest.supersede(subject, *item)
                skipped += 1
            elif first_pass[i]:
                self._handle(item, subject)
            elif first_pass[i] is False:
                ingest.received += 1
        last = len(older) - 1
        if last not in first_pass or first_pass[last]:
            self._handle(prev, subject)
        elif first_pass[last] is False:
            ingest.received += 1
        self.superseded += skipped


SNAPSHOT_SHARE = 0.25
"""A Player snapshots its session once the ticks since its last snapshot took 1/SNAPSHOT_SHARE
times what that snapshot took: snapshots cost about this share of a replay's ticking, and a seek
back replays at most about 1/SNAPSHOT_SHARE times a snapshot's cost after putting one back."""
SNAPSHOT_BYTES = 256 << 20
"""All the snapshots one Player keeps, at most: past it every other one goes and the next ones
are spaced twice as far apart."""
SLICE_S = 0.020
"""Wall time one ``Player.work`` or ``Player.advance`` spends at most, about: a seek, or a replay
played faster than this machine replays, goes on in slices this long with the event loop's
other work (keys, paints) in between (the console's target: no stall of the loop over 50 ms;
the live console's APPLY_BUDGET_S is as long).
A slice stops early rather than start a piece of work that would not fit in what is left of it
(the session's tick, ~20 ms at 1,024 nodes sending every second), and a piece may overrun it
by what a piece costs (a node's worth of a snapshot, mostly; see ``ConsoleSession``)."""
ADVANCE_BUDGET_S = SLICE_S
"""Wall time one ``Player.advance`` spends ticking at most: at a speed this machine cannot
replay, the recording moves slower than asked instead of stalling the console to catch up."""
CATCH_UP_S = 1.0
"""A replay behind its speed owes what it could not reach, this much wall time's worth at most:
it catches that up in the slices that follow (all of it when the machine can), and drops the
rest rather than build a backlog it would never work off."""
READ_CHECK = 64
"""Messages read between two looks at the slice's deadline."""
_EPS_S = 1e-6


@dataclass(frozen=True, slots=True)
class _Snapshot:
    ticks: int
    """How many ticks of straight play the session had had."""
    at: float
    """The time of the last of them: everything received up to it was applied."""
    picture: bytes
    """``ConsoleSession.snapshot``."""
    decoded: int
    superseded: int
    mark: ReadMark | None
    """Where the Player's scan of the file stood: put back, it reads on from there, not from
    the start of the segment (~0.3 s a minute of 1,024 nodes sending every second)."""


@dataclass(slots=True)
class _Taking:
    """A snapshot being taken, a piece per step (``ConsoleSession.snapshot_steps``)."""

    ticks: int
    steps: Generator[None, None, bytes]
    marks: tuple[int, int, int, int]
    """What moves when the session does (``Player._marks``): were it to, the snapshot would
    mix two pictures, and is dropped."""
    decoded: int
    superseded: int
    mark: ReadMark | None
    spent_s: float = 0.0


@dataclass(slots=True)
class _PuttingBack:
    """A snapshot being put back: unpickled a piece per step, then the file read on from the
    segment holding it to the first message after it, then swapped in. The session is not
    touched until the swap, so a seek that turns elsewhere drops it for nothing."""

    snap: _Snapshot
    steps: Generator[float, None, Picture] | None
    cursor: ReadCursor = field(default_factory=ReadCursor)
    picture: Picture | None = None
    scan: Iterator[Scanned] | None = None
    pending: Scanned | None = None
    read: bool = False
    """The file was read on to ``pending`` (None: the end)."""
    share: float = 0.0
    """Of the snapshot unpickled so far."""
    spent_s: float = 0.0


_START = "start"
"""``Player._plan``: replay from the recording's start (no snapshot before the target)."""
_TICK = "tick"
"""``Player._plan``: tick on from where the session is."""


class Player:
    """Replay position, speed and pause over a recording, feeding a ``ConsoleSession`` it owns
    (``session``) through the same ingest path as live MQTT.

    The session ticks as it does when the recording is played straight through, whatever the
    moves: at ``start + k * tick_s`` for each such instant up to the position, and at the end
    of the recording (the ticks of ``run_headless``), each tick applying whole what was received
    since the one before (``TickFeed``: only the newest telemetry sample of each node decoded).
    Between two ticks the state is that of the one before. So every judgement that rests on
    history (counter windows, rates, latched fatal increments, switch correlation, job
    interruptions, the timeline) is at any position what straight play gives there.

    A seek ticks its way to the target without painting. A backward one, or a forward one past
    a snapshot that is cheaper to put back than to tick to, first puts back the newest snapshot
    of the session before the target (the start if none is). Snapshots are taken as the session
    ticks, spaced to cost about SNAPSHOT_SHARE of the ticking (``snapshot_every`` ticks apart
    instead, for tests), so a seek back replays a bounded stretch and reads the file from the
    segment holding that snapshot, not from the start (docs/recording.md, "The replay console").

    ``seek`` gets there before it returns (headless callers, tests). A front end with an event
    loop calls ``aim`` instead and then ``work`` until it returns False: each call does a slice
    of at most about SLICE_S, ``progress`` says how far it got, ``aim`` again turns the seek
    elsewhere and ``cancel`` stops it; wherever it stops, it is on a tick of straight play.
    While ``busy`` the session is between two pieces of the Player's work (a tick read in part,
    a snapshot taken in part) and must not be ticked by anyone else.
    """

    def __init__(self, path: Path, speed: float = 1.0, index_events: bool = True,
                 tick_s: float = TICK_S, snapshot_every: int | None = None) -> None:
        if not tick_s > 0:
            raise UserError(f"the replay tick must be a positive number of seconds, not "
                            f"{tick_s:g}.")
        self.reader = RecordingReader(path)
        self.cluster = self.reader.header.cluster
        self.speed = speed
        self.paused = False
        self.tick_s = tick_s
        self.start = self.reader.header.started
        self.events: list[float] = []
        self.node_events: dict[str, list[float]] = {}
        """Each node's recorded events (its XIDs, link changes, drains, going offline, the
        commands to it and its answers), for ``:seek NODE`` (``node_event``)."""
        self.recorded_nodes: set[str] = set()
        """Every node the recording names, for ``:seek NODE`` of one with no event: one heard
        later, or retired since, was refused as no time, where it has none to go to."""
        self.end = self.start
        if index_events:
            self._scan()
        else:
            # No event navigation needed; find the end from the last segment only.
            self.report = self.reader.report
            self.end = self.reader.end_time()
            self.gaps = self.report.spans  # filled as the file is read
        self.position = self.start
        self._last = (0 if self.end <= self.start
                      else max(1, math.ceil((self.end - self.start) / tick_s - _EPS_S)))
        """How many ticks straight play has: the last one at the end."""
        self.ticks = 0
        """Ticks the session has had (``tick_at(ticks)`` is the time of its state)."""
        self.target: float | None = None
        """Where the seek under way is going; None when there is none."""
        self.behind = False
        """The last ``advance`` ran out of its slice before the position it was asked for."""
        self._owed_s = 0.0
        """Recorded seconds the last ``advance`` was asked for and did not reach (CATCH_UP_S)."""
        self.snapshot_every = snapshot_every
        self._snapshots: list[_Snapshot] = []
        self._snapshot_bytes = 0
        self._spread = 1
        self._work_s = 0.0
        self._snapshot_s = 0.0
        self._tick_cost_s = 0.0
        """What a tick took, lately (a moving average)."""
        self._session_tick_s = 0.0
        """What the session's own tick (the one piece of a tick that cannot be cut) took, at
        most lately: a slice does not start one it has no time left for."""
        self._restore_s: float | None = None
        """What putting back the last snapshot took, reading to where it was included."""
        self._swap_s = 0.0
        """What swapping the last picture in took (``put_back``)."""
        self._iter: Iterator[Scanned] = iter(())
        self._cursor = ReadCursor()
        """Where ``_iter`` stands in the file (snapshots keep its mark)."""
        self._pending: Scanned | None = None
        self._job: _Taking | _PuttingBack | None = None
        self._mid = False
        """A tick is under way: read (``_read``) or handed to Ingest in part, not yet applied."""
        self._read = False
        self._tick_spent_s = 0.0
        self._discard: list[object] = []
        """What was put aside, freed as pieces of work of their own: a picture replaced (a
        ``ConsoleSession.let_go``, a node at a time), a snapshot dropped half way (its pickler
        or unpickler at once, ~20-35 ms at 1,024 nodes)."""
        self._worked = False
        """The current slice did some work (it then stops at its deadline)."""
        self._progress = 0.0
        self._seek_spent_s = 0.0
        """Work time the seek under way has had (``progress``)."""
        self.feed = TickFeed(self.reader, self.cluster, gaps=self.gaps)
        self.session = ConsoleSession(self.cluster, clock=self._state_clock, operator="replay",
                                      follow_up=False, ingest=self.feed.ingest)
        self._from_start()
        self._discard.clear()

    @property
    def state(self) -> FleetState:
        return self.session.state

    @property
    def ingest(self) -> Ingest:
        return self.session.ingest

    def _scan(self) -> None:
        # One pass for the event index and the end time; payloads are not decoded.
        kinds: dict[str, tuple[Kind | None, str]] = {}
        watch = NodeWatch(self.cluster)
        for msg in self.reader.scan():
            self.end = msg.t
            if not watch.heard:
                watch.see(msg.topic)
            seen = kinds.get(msg.topic)
            if seen is None:
                try:
                    topic = parse_topic(msg.topic)
                    seen = (topic.kind, topic.subject if topic.kind in NODE_KINDS else "")
                except TopicError:
                    seen = (None, "")
                if len(kinds) < TOPIC_CACHE_MAX:
                    kinds[msg.topic] = seen
                if seen[1]:
                    self.recorded_nodes.add(seen[1])
            kind, node = seen
            # A keyframe's entries are the picture before the recording began (a drained
            # node's status): "next event" stopped on them at +0.5 s, where the events view said
            # "no events yet" (a newcomer's run).
            if kind in EVENT_KINDS and not msg.keyframe:
                # Unescaped enough to test: the line holds the payload as a JSON string.
                text = (msg.known or b"" if msg.raw is None
                        else msg.raw[msg.p_at:].replace(b'\\"', b'"'))
                if not routine(kind, text):
                    self.events.append(msg.t)
                    if node:
                        self.node_events.setdefault(node, []).append(msg.t)
        # The scan read every line: its report is the file's. Later passes must not recount.
        self.report = self.reader.report
        self.gaps = self.report.spans
        self.reader.report = ReadReport()
        watch.check()

    def clock(self) -> float:
        """Where the replay stands (what the console's header shows): during a seek, where the
        session got to once it moved."""
        if self.target is not None and self.ticks_until(self.position) != self.ticks:
            return self.tick_at(self.ticks)
        return self.position

    def _state_clock(self) -> float:
        # The time of the session's last tick, not the position: a tick the front end runs
        # between two of the Player's is then at that same time and changes nothing, as
        # straight play has no tick there.
        return self.tick_at(self.ticks)

    @property
    def done(self) -> bool:
        return self.position >= self.end

    @property
    def seeking(self) -> bool:
        return self.target is not None

    @property
    def busy(self) -> bool:
        """Work is under way (a seek, a tick or a snapshot in part): ``work`` again soon, and
        leave the session alone until then."""
        return (self.target is not None or self._mid or self._job is not None
                or bool(self._discard))

    @property
    def heading(self) -> float:
        """Where the replay is going: the seek's target, else the position (relative moves
        start here, so ``]`` pressed during a seek moves its target)."""
        return self.position if self.target is None else self.target

    @property
    def progress(self) -> float:
        """How far the seek under way got, 0-1, by the measured cost of what is left."""
        if self.target is None:
            return 1.0
        # Spent against spent plus what is left, both measured now: the estimate made at the
        # start, latched at its highest, read "100 %" 12 s before a seek ended and "8 %" half
        # way through another (a replay audit).
        left = self._cost_to(self.ticks_until(self.target))
        spent = self._seek_spent_s
        if spent + left > 0:
            # Never backwards on screen (a tick dearer than the ones before moves ``left``).
            self._progress = max(self._progress, min(0.99, spent / (spent + left)))
        return self._progress

    # --- ticks -------------------------------------------------------------------------------

    def tick_at(self, k: int) -> float:
        """The time of straight play's ``k``-th tick (0: the start, before any)."""
        return self.end if k >= self._last else self.start + k * self.tick_s

    def ticks_until(self, t: float) -> int:
        """How many ticks straight play has had at ``t``."""
        if t >= self.end:
            return self._last
        return max(0, min(self._last - 1, math.floor((t - self.start) / self.tick_s + _EPS_S)))

    def shown_at(self, t: float) -> float:
        """The time of the tick that applies what was received at ``t``."""
        k = max(1, math.ceil((t - self.start) / self.tick_s - _EPS_S))
        return self.tick_at(k)

    def _late(self, deadline: float | None, need_s: float = 0.0) -> bool:
        """The slice is over: it did some work, and less than ``need_s`` is left of it."""
        return (deadline is not None and self._worked
                and time.perf_counter() + need_s > deadline)

    def _tick(self, deadline: float | None = None) -> bool:
        """Straight play's next tick: read up to its time, hand it to Ingest, apply it whole,
        judge. Reading and handing over stop at ``deadline`` and go on at the next call
        (``_mid``); the session's own tick is one piece, started only if it fits. True once
        the tick is done."""
        t0 = time.perf_counter()
        k = self.ticks + 1
        at = self.tick_at(k)
        self._mid = True
        try:
            if not self._read:
                self._read = self._read_until(at, deadline)
                if not self._read:
                    return False
            if self.feed.waiting:
                self._worked = True  # a node at least is handed over
            if not self.feed.flush(deadline) or self._late(deadline, self._session_tick_s):
                return False
            session = self.session
            # Whole, whatever budget a front end set for its own ticks: a tick cut short would
            # carry telemetry into the next one, which straight play does not.
            budget, cap = session.apply_budget_s, session.apply_max_nodes
            session.apply_budget_s = session.apply_max_nodes = None
            t1 = time.perf_counter()
            self.ticks = k  # the session's clock during its tick (``_state_clock``)
            self._mid = self._read = False
            try:
                session.replay_gaps(self.gaps, at)
                session.tick(at)
                self.feed.ingest.burst.judge(session.state, at, self.start, self.gaps,
                                             session.note)
            finally:
                session.apply_budget_s, session.apply_max_nodes = budget, cap
            took = time.perf_counter() - t1
            self._session_tick_s = max(took, 0.7 * self._session_tick_s + 0.3 * took)
        finally:
            self._worked = True
            self._tick_spent_s += time.perf_counter() - t0
        took = self._tick_spent_s
        self._tick_spent_s = 0.0
        self._work_s += took
        self._tick_cost_s = 0.8 * self._tick_cost_s + 0.2 * took if self._tick_cost_s else took
        self._maybe_snapshot()
        return True

    def _read_until(self, target: float, deadline: float | None = None) -> bool:
        """Hand the feed what was received up to ``target``; False when ``deadline`` came
        first (READ_CHECK messages at least were read)."""
        add = self.feed.add
        n = 0
        while True:
            msg = self._pending
            if msg is None:
                msg = next(self._iter, None)
                if msg is None:
                    return True
            if msg.t > target:
                self._pending = msg
                return True
            self._pending = None
            add(msg)
            self._worked = True
            n += 1
            if deadline is not None and n % READ_CHECK == 0 and time.perf_counter() > deadline:
                return False

    # --- snapshots -----------------------------------------------------------------------------

    def _marks(self) -> tuple[int, int, int, int]:
        s = self.session
        return s.counters.ticks, s.state.serial, s.log.seq, s.ingest.received

    def _maybe_snapshot(self) -> None:
        k = self.ticks
        i = bisect.bisect_left(self._snapshots, k, key=lambda s: s.ticks)
        if i < len(self._snapshots) and self._snapshots[i].ticks == k:
            self._work_s = 0.0  # one is here already: the next is due as after a new one
            return
        if self.snapshot_every is not None:
            due = k % (self.snapshot_every * self._spread) == 0
        else:
            due = self._work_s >= self._snapshot_s * self._spread / SNAPSHOT_SHARE
        if due:
            self._job = _Taking(k, self.session.snapshot_steps(), self._marks(),
                                self.feed.decoded, self.feed.superseded, self._cursor.mark)

    def _take(self, job: _Taking, deadline: float | None) -> bool:
        """A slice of the snapshot under way; True once it is done (or dropped)."""
        if self._marks() != job.marks or job.ticks != self.ticks:
            self._drop()  # the session moved meanwhile: half of it would be of another tick
            return True
        t0 = time.perf_counter()
        try:
            while True:
                try:
                    next(job.steps)
                except StopIteration as done:
                    picture: bytes = done.value
                    break
                self._worked = True
                if self._late(deadline):
                    return False
        finally:
            job.spent_s += time.perf_counter() - t0
        self._job = None
        k = job.ticks
        snap = _Snapshot(k, self.tick_at(k), picture, job.decoded, job.superseded, job.mark)
        self._snapshot_s = job.spent_s
        self._work_s = 0.0
        i = bisect.bisect_left(self._snapshots, k, key=lambda s: s.ticks)
        self._snapshots.insert(i, snap)
        self._snapshot_bytes += len(snap.picture)
        if self._snapshot_bytes > SNAPSHOT_BYTES:
            # Thinned evenly over what was played, so no stretch is left without any.
            self._snapshots = self._snapshots[1::2]
            self._snapshot_bytes = sum(len(s.picture) for s in self._snapshots)
            self._spread *= 2
        return True

    def _from_start(self) -> None:
        self._discard.append(self.session.let_go(Picture(self.session.parts())))
        self.feed = TickFeed(self.reader, self.cluster, gaps=self.gaps)
        self.session.reset(self.feed.ingest)
        self._cursor = ReadCursor()
        self._iter = self.reader.scan(cursor=self._cursor)
        self._pending = None
        self.ticks = 0
        self._mid = self._read = False
        self._tick_spent_s = 0.0
        self._work_s = 0.0

    def _put_back(self, job: _PuttingBack, deadline: float | None) -> bool:
        """A slice of putting ``job.snap`` back; True once the session holds it."""
        t0 = time.perf_counter()
        snap = job.snap
        try:
            while job.steps is not None:
                try:
                    job.share = next(job.steps)
                except StopIteration as done:
                    job.picture, job.steps = done.value, None
                self._worked = True
                if self._late(deadline):
                    return False
            if job.scan is None:
                job.scan = (self.reader.scan_segment(snap.at, job.cursor) if snap.mark is None
                            else self.reader.scan_from(snap.mark, job.cursor))
            n = 0
            while not job.read:
                # Read on to the first message after it: part of what putting a snapshot
                # back costs (``_plan`` weighs it against ticking there).
                msg = next(job.scan, None)
                if msg is None or msg.t > snap.at:
                    job.pending, job.read = msg, True
                    break
                n += 1
                if n % READ_CHECK == 0:
                    self._worked = True
                    if self._late(deadline):
                        return False
            if self._late(deadline, self._swap_s):
                return False
            t1 = time.perf_counter()
            assert job.picture is not None
            self._discard.append(self.session.let_go(self.session.put_back(job.picture)))
            self._swap_s = time.perf_counter() - t1
        finally:
            job.spent_s += time.perf_counter() - t0
        self._worked = True
        self._job = None
        ingest = self.session.ingest
        assert isinstance(ingest, ReplayIngest)  # the snapshot's, made by a TickFeed
        self.feed = TickFeed(self.reader, self.cluster, ingest=ingest, gaps=self.gaps)
        self.feed.decoded, self.feed.superseded = snap.decoded, snap.superseded
        self._iter, self._pending, self._cursor = job.scan, job.pending, job.cursor
        self.ticks = snap.ticks
        self._mid = self._read = False
        self._tick_spent_s = 0.0
        self._work_s = 0.0
        self._restore_s = job.spent_s
        return True

    def _newest(self, ticks: int) -> _Snapshot | None:
        i = bisect.bisect_right(self._snapshots, ticks, key=lambda s: s.ticks)
        return self._snapshots[i - 1] if i else None

    def _plan(self, k: int) -> _Snapshot | str:
        """How to get the session to ``k`` ticks: put a snapshot back, start over, or tick."""
        if k < self.ticks or (k == self.ticks and self._mid):
            return self._newest(k) or _START
        snap = self._newest(k)
        if snap is not None and not self._mid:
            job = self._job
            if isinstance(job, _PuttingBack) and job.snap is snap:
                return snap  # under way: what is left of it is cheaper still
            ahead = snap.ticks - self.ticks
            cost = self._snapshot_s if self._restore_s is None else self._restore_s
            if ahead > 0 and ahead * self._tick_cost_s > cost:
                return snap  # a snapshot ahead that is cheaper than ticking to it
        return _TICK

    def _cost_to(self, k: int) -> float:
        """What getting the session to ``k`` ticks should cost from here, as measured."""
        tick = self._tick_cost_s or 1e-3
        plan = self._plan(k)
        if plan == _START:
            return k * tick
        if isinstance(plan, _Snapshot):
            restore = self._restore_s if self._restore_s is not None else self._snapshot_s
            job = self._job
            if isinstance(job, _PuttingBack) and job.snap is plan:
                restore *= 1.0 - (job.share if job.steps is not None else 1.0)
            return restore + (k - plan.ticks) * tick
        return max(0, k - self.ticks) * tick

    def _toward(self, t: float, deadline: float | None) -> bool:
        """Work toward the session at ``t``; True once it is there (a snapshot of the last
        tick may still be under way), False when ``deadline`` came first."""
        k = self.ticks_until(t)
        while True:
            job = self._job
            if self.ticks == k and not self._mid:
                if isinstance(job, _PuttingBack):
                    self._drop()  # turned back to where the session is
                return True
            if self._late(deadline):
                return False
            if self._discard:
                self._free(deadline)
                continue
            plan = self._plan(k)
            if isinstance(job, _PuttingBack):
                if job.snap is not plan:
                    self._drop()  # the seek turned: another picture, or none, is nearer
                    continue
                if not self._put_back(job, deadline):
                    return False
                continue
            if isinstance(job, _Taking):
                if plan != _TICK:
                    self._drop()  # this picture is about to be replaced
                    continue
                if not self._take(job, deadline):
                    return False
                continue
            if plan == _START:
                self._from_start()
            elif isinstance(plan, _Snapshot):
                self._job = _PuttingBack(plan, self.session.restore_steps(plan.picture))
            elif not self._tick(deadline):
                return False

    def _finish(self, deadline: float | None) -> None:
        """What is left once the session is where it should be: a snapshot under way, a
        picture to free."""
        while not self._late(deadline):
            job = self._job
            if self._discard:
                self._free(deadline)
            elif isinstance(job, _Taking):
                self._take(job, deadline)
            elif isinstance(job, _PuttingBack):
                self._drop()
            else:
                return

    def _drop(self) -> None:
        """Leave the snapshot being taken or put back; what it built is freed later."""
        job, self._job = self._job, None
        self._discard.append(job)
        if isinstance(job, _PuttingBack) and job.picture is not None:
            self._discard.append(self.session.let_go(job.picture))
            job.picture = None

    def _free(self, deadline: float | None) -> None:
        """Free what was put aside, the last first, until ``deadline``."""
        while self._discard:
            item = self._discard[-1]
            self._worked = True
            if isinstance(item, Generator):
                for _ in item:
                    if self._late(deadline):
                        return
            self._discard.pop()
            if self._late(deadline):
                return

    # --- moves -------------------------------------------------------------------------------

    def advance(self, wall_dt: float) -> None:
        """Move forward by ``wall_dt`` seconds of wall time at the current speed, working at
        most ADVANCE_BUDGET_S (the work left waits for the next call: ``busy``). A seek under
        way holds the position: ``work`` moves it."""
        if self.target is not None:
            return
        deadline = time.perf_counter() + ADVANCE_BUDGET_S
        self._worked = False
        if self.paused or self.done:
            self.behind, self._owed_s = False, 0.0
            self._finish(deadline)
            return
        target = min(self.end, self.position + self._owed_s + wall_dt * self.speed)
        if self._mid:
            # A tick under way is finished: the position was there once already (behind, it
            # waits for the state), and the tick cannot be left half applied.
            target = max(target, self.tick_at(self.ticks + 1))
        self.behind = not self._toward(target, deadline)
        self._owed_s = 0.0
        if self.behind:
            reached = max(self.position, self.tick_at(self.ticks))
            self._owed_s = min(target - reached, self.speed * CATCH_UP_S)
            target = reached  # the position waits for the state
        self.position = max(self.position, target)
        self._finish(deadline)

    def step(self, seconds: float | None = None) -> None:
        """Seek ``seconds`` (one tick unless told) forward from where the replay is heading."""
        self.seek(self.heading + (self.tick_s if seconds is None else seconds))

    def aim(self, t: float) -> None:
        """Start a seek to ``t`` (or turn the one under way there); ``work`` does it."""
        t = max(self.start, min(self.end, t))
        self.target = t
        self._owed_s = 0.0
        self._progress = 0.0
        self._seek_spent_s = 0.0

    def work(self, budget_s: float | None = None) -> bool:
        """A slice of what is under way, at most about ``budget_s`` (SLICE_S unless told): the
        seek first, then a snapshot to finish. True while there is more (``busy``)."""
        return self._work(time.perf_counter() + (SLICE_S if budget_s is None else budget_s))

    def _work(self, deadline: float | None) -> bool:
        self._worked = False
        if self.target is not None:
            t0 = time.perf_counter()
            if self._toward(self.target, deadline):
                self.position, self.target = self.target, None
            self._seek_spent_s += time.perf_counter() - t0
        self._finish(deadline)
        return self.busy

    def cancel(self) -> None:
        """Stop the seek under way where it got: on the tick the session is at (a tick read in
        part is finished first, by the next ``work``), never between two."""
        if self.target is None:
            return
        if isinstance(self._job, _PuttingBack):
            self._drop()  # not swapped in: the session is where it was
        if self._mid:
            self.target = self.tick_at(self.ticks + 1)
            return
        if self.ticks_until(self.position) != self.ticks:
            self.position = self.tick_at(self.ticks)
        self.target = None

    def seek(self, t: float) -> None:
        """Seek to ``t`` and return once the session is there (snapshots taken on the way
        included)."""
        self.aim(t)
        while self._work(None):
            pass

    def _event_at(self, direction: int) -> float | None:
        if direction > 0:
            i = bisect.bisect_right(self.events, self.heading + _EPS_S, key=self.shown_at)
        else:
            i = bisect.bisect_left(self.events, self.heading - _EPS_S, key=self.shown_at) - 1
        return self.events[i] if 0 <= i < len(self.events) else None

    def node_event(self, node: str) -> tuple[float, bool] | None:
        """Aim at the tick that shows ``node``'s next recorded event after where the replay is
        heading, or, past its last one, its first (as a pager's search wraps): "jump to when
        gpu0005 failed" had no way but ``n`` through every other node's events (an SRE's
        post-mortem). The event's time and whether it wrapped; None if it has none."""
        times = self.node_events.get(node)
        if not times:
            return None
        i = bisect.bisect_right(times, self.heading + _EPS_S, key=self.shown_at)
        wrapped = i >= len(times)
        t = times[0 if wrapped else i]
        self.aim(self.shown_at(t))
        return t, wrapped

    def line_at(self, node: str, ts: float, agents: bool) -> float:
        """The tick that shows a timeline line of time ``ts`` about ``node``: the console's
        own lines (``agents`` False: a verdict, an interruption) are dated by the tick that
        made them; an agent's event by the agent's clock, so by the recorded event of that
        node received within LINE_SLACK_S after it, where there is one (its receive time
        can fall in the next tick)."""
        if agents:
            times = self.node_events.get(node, ())
            i = bisect.bisect_left(times, ts - _EPS_S)
            if i < len(times) and times[i] - ts <= LINE_SLACK_S:
                ts = times[i]
        return self.shown_at(ts)

    def next_event(self, *, wait: bool = True) -> float | None:
        """Seek to the tick that shows the next recorded event; its time, or None. Without
        ``wait``, the seek is only aimed there (``aim``)."""
        t = self._event_at(1)
        if t is not None:
            (self.seek if wait else self.aim)(self.shown_at(t))
        return t

    def prev_event(self, *, wait: bool = True) -> float | None:
        """Seek to the tick that showed the previous recorded event; its time, or None."""
        t = self._event_at(-1)
        if t is not None:
            (self.seek if wait else self.aim)(self.shown_at(t))
        return t


@dataclass
class HeadlessRun:
    """What ``run_headless`` leaves: the session at the end and how the file was read."""

    session: ConsoleSession
    feed: TickFeed
    report: ReadReport
    start: float
    end: float
    tick_s: float


def run_headless(path: Path, *, until: float | None = None, tick_s: float = TICK_S,
                 every_sample: bool = False,
                 on_tick: Callable[[TickReport], None] | None = None,
                 progress: Callable[[int, int, float], None] | None = None) -> HeadlessRun:
    """Replay as fast as possible, reading the file once, front to back: the session ticks
    every ``tick_s`` of recorded time (the console's own 0.5 s by default, so every rule that
    needs two samples fires as it did live) and once more at the end. Within a tick only the
    newest telemetry sample per node is decoded (``TickFeed``); ``every_sample=True`` decodes
    every message, the slow reference the fast path is tested against. The result is the same
    either way (docs/recording.md, "Headless replay"). ``progress`` is called after each tick
    with the bytes of the file read so far, its size and the recorded seconds replayed."""
    if not tick_s > 0:
        raise UserError(f"--tick must be a positive number of seconds, not {tick_s:g}.")
    reader = RecordingReader(path)
    cluster = reader.header.cluster
    start = reader.header.started
    feed = TickFeed(reader, cluster, every_sample=every_sample)
    now = [start]
    # No sparklines: nothing headless shows them (the TUI's Player keeps them).
    session = ConsoleSession(cluster, clock=lambda: now[0], operator="replay",
                             follow_up=False, ingest=feed.ingest, recent_history=False)
    limit = None if until is None else start + until

    size = reader.size

    def tick(at: float) -> None:
        feed.flush()
        now[0] = at
        session.replay_gaps(reader.report.spans, at)
        report = session.tick(at)
        feed.ingest.burst.judge(session.state, at, start, reader.report.spans, session.note)
        if on_tick is not None:
            on_tick(report)
        if progress is not None:
            progress(reader.bytes_read, size, at - start)

    # The same tick times as the console's replay always had: start + k * tick_s, summed.
    next_tick = start + tick_s
    last = start
    cut = False
    watch = NodeWatch(cluster)
    for msg in reader.scan():
        if limit is not None and msg.t > limit:
            cut = True
            break
        if not watch.heard:
            watch.see(msg.topic)
        while msg.t > next_tick:
            tick(next_tick)
            next_tick += tick_s
        last = msg.t
        feed.add(msg)
    if not cut:  # nodes may come after a --until
        watch.check()
    end = limit if cut and limit is not None else last
    while next_tick < end:
        tick(next_tick)
        next_tick += tick_s
    if end > start:
        tick(end)
    else:
        feed.flush()
    return HeadlessRun(session, feed, reader.report, start, end, tick_s)


def replay_headless(path: Path, until: float | None = None, tick_s: float = TICK_S,
                    every_sample: bool = False,
                    progress: Callable[[int, int, float], None] | None = None
                    ) -> dict[str, Any]:
    """``run_headless``, summed up: the final picture in the shape of ``status --json`` plus
    events and a replay report."""
    run = run_headless(path, until=until, tick_s=tick_s, every_sample=every_sample,
                       progress=progress)
    session, rep = run.session, run.report
    replayed = round(run.end - run.start, 3)
    # status --json's keys too, so one script reads both (a newcomer's got null for them):
    # no broker was asked, and what was "collected" is the recorded time replayed.
    # The broker's and its retained burst's keys too (status's ``said_burst_cut``): a key a
    # script reads of both must be there in both, null where no broker was asked.
    # The recorded burst as the replay judged it, as the live console judged its own
    # (``RecordedBurst``): the shape of status's (``said_burst_cut``).
    burst = run.feed.ingest.burst
    out = fleet_summary(session.state, run.end, broker=None, collected_s=replayed,
                        broker_uptime_s=None,
                        retained_burst_cut=None if burst.burst_cut is None else {
                            "nodes_without_status": burst.burst_cut[0],
                            "nodes": burst.burst_cut[1],
                            # Counted live by the console's own rebirth asks, which a
                            # replay does not make: not known here.
                            "nodes_learned_since": None},
                        retained_burst_judged=burst.judged, quiet_link=None,
                        console_problems=session.problems_json(),
                        source=str(path), replayed_s=replayed,
                        interruptions=session.interruptions.total,
                        log=session.log.lines())
    out["events"] = [ev.model_dump(mode="json") for ev in session.state.events]
    # The operators' commands the recording holds and their acks, as the replay console's
    # timeline says them: who asked for what, and why (the agents' events hold only effects).
    # A request says how often the console re-sent it unanswered ("resent"): its line is
    # told once, and a silent node is otherwise told nowhere in the replay.
    out["commands"] = [{"ts": ln.ts, "severity": ln.severity, "text": ln.text,
                        "nodes": list(ln.nodes)}
                       | ({"resent": session.recorded_resends(ln.ref)} if ln.ref else {})
                       for ln in session.log.lines() if ln.kind == "command"]
    out["replay"] = {"start": run.start, "end": run.end, "skipped_lines": rep.skipped,
                     "truncated": rep.truncated, "unreadable_rest": rep.unreadable_rest,
                     "problems": rep.problems,
                     "tick_s": tick_s, "ticks": session.counters.ticks,
                     "decoded": run.feed.decoded, "superseded": run.feed.superseded,
                     "applied": session.state.applied,
                     "judged_at_start": [j.as_json()
                                         for j in run.feed.reader.header.judged_at_start]}
    return out


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
