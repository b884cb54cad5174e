"""Record live MQTT traffic, and replay recordings through the same ingest path as live data.

The UI cannot tell replay from live: a ``Player`` feeds ``Ingest.handle`` with the recorded
receive times and provides the clock the fleet state judges staleness by.
"""

import asyncio
import bisect
import contextlib
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt

from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, make_client
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.recording import ReadReport, Recorded, RecordingReader, RecordingWriter
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.state import FleetState
from fleetdeck.console.summary import fleet_summary
from fleetdeck.errors import UserError
from fleetdeck.protocol.topics import ROOT, Kind, TopicError, parse_topic

TICK_S = 0.5
EVENT_KINDS = frozenset({Kind.EVENT, Kind.ACK, Kind.CMD, Kind.SCHED_CMD, Kind.SCHED_ACK,
                         Kind.STATUS, Kind.BIRTH})
"""What 'next/previous event' jumps between: things that happened, not periodic samples."""


# --- record --------------------------------------------------------------------------------------


@dataclass
class RecordStats:
    messages: int = 0
    bytes_in: int = 0
    file_bytes: int = 0
    started: float = 0.0
    gaps: int = 0
    """Times the broker was lost and the gap marked in the recording."""


RECONNECT_CAP_S = 10.0
"""Longest wait between reconnect attempts (jittered backoff, as LiveFeed)."""


def _say(text: str) -> None:
    print(f"fleetdeck record: {text}", file=sys.stderr, flush=True)


async def record(url: BrokerURL, cluster: str, out: Path, duration: float | None,
                 progress: Callable[[RecordStats], None] | None = None,
                 stop: asyncio.Event | None = None,
                 say: Callable[[str], None] = _say) -> RecordStats:
    """Capture everything under ``fleetdeck/v1/<cluster>/`` until ``duration`` or ``stop``.

    The first connection must succeed (a wrong URL is one sentence). After that a lost broker
    does not end the recording: it reconnects with jittered backoff until ``duration``, writes
    a gap note for the time it was cut off (docs/recording.md) and says both on ``say``.
    """
    stop = stop or asyncio.Event()
    started = time.time()
    deadline = None if duration is None else time.monotonic() + duration
    try:
        writer = RecordingWriter(out, cluster, source=str(url), started=started)
    except OSError as err:
        raise UserError(f"cannot write {out}: {err.strerror or err}.") from None
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

    def publish_stats() -> None:
        stats.messages, stats.bytes_in = writer.messages, writer.bytes_in
        stats.file_bytes = writer.size
        if progress:
            progress(stats)

    async def pump(client: aiomqtt.Client) -> None:
        last_flush = time.monotonic()
        async for m in client.messages:
            topic = m.topic.value
            if not topic.startswith(prefix):
                continue  # amqtt leaks retained messages of other subscriptions
            payload = m.payload if isinstance(m.payload, bytes) else b""
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
                    if lost_at is not None:
                        back = time.time()
                        writer.gap(lost_at, back, f"broker connection lost: {lost_why}")
                        say(f"broker back after {back - lost_at:.1f} s; recording again (the "
                            "gap is marked in the recording).")
                        lost_at = None
                    connected, attempt = True, 0
                    pumper = asyncio.create_task(pump(client))
                    waiter = asyncio.create_task(stop.wait())
                    try:
                        done, _ = await asyncio.wait({pumper, waiter}, timeout=left(),
                                                     return_when=asyncio.FIRST_COMPLETED)
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
        with contextlib.suppress(OSError):
            if lost_at is not None:
                writer.gap(lost_at, time.time(), f"broker connection lost: {lost_why}; the "
                           "recording ended before it came back")
                say("the recording ended while the broker was away (the gap is marked).")
            writer.close()
        stats.messages, stats.bytes_in = writer.messages, writer.bytes_in
        stats.file_bytes = writer.closed_size
        stats.gaps = writer.gaps


# --- replay --------------------------------------------------------------------------------------


class Player:
    """Replay position, speed and pause over a recording, feeding a ``ConsoleSession`` it owns
    (``session``) through the same ingest path as live MQTT.

    A backward seek resets the session (the past cannot be un-applied) and replays from the
    keyframe before the target.
    """

    def __init__(self, path: Path, speed: float = 1.0, index_events: bool = True) -> None:
        self.reader = RecordingReader(path)
        self.cluster = self.reader.header.cluster
        self.speed = speed
        self.paused = False
        self.start = self.reader.header.started
        self.events: list[float] = []
        self.end = self.start
        if index_events:
            self._scan()
        else:
            # Headless: no event navigation needed; find the end from the last segment only
            # instead of reading the whole file twice.
            self.report = self.reader.report
            self.end = self.reader.end_time()
        self.position = self.start
        self.session = ConsoleSession(self.cluster, clock=self.clock, operator="replay",
                                      follow_up=False)
        self._reset(self.start, fresh=True)

    @property
    def state(self) -> FleetState:
        return self.session.state

    @property
    def ingest(self) -> Ingest:
        return self.session.ingest

    def _scan(self) -> None:
        # One pass for the event index and the end time; messages are not kept in memory.
        for msg in self.reader.messages():
            self.end = msg.t
            try:
                kind = parse_topic(msg.topic).kind
            except TopicError:
                continue
            if kind in EVENT_KINDS:
                self.events.append(msg.t)
        # The scan read every line: its report is the file's. Later passes must not recount.
        self.report = self.reader.report
        self.reader.report = ReadReport()

    def _reset(self, at: float, fresh: bool = False) -> None:
        if not fresh:
            self.session.reset()
        self._iter = self.reader.messages(start=at if at > self.start else None)
        self._pending: Recorded | None = None
        self.position = at

    def clock(self) -> float:
        return self.position

    @property
    def done(self) -> bool:
        return self.position >= self.end

    def _feed_until(self, target: float) -> None:
        handle = self.session.ingest.handle
        while True:
            msg = self._pending
            if msg is None:
                msg = next(self._iter, None)
                if msg is None:
                    self.position = max(self.position, min(target, self.end))
                    return
            if msg.t > target:
                self._pending = msg
                self.position = target
                return
            self._pending = None
            handle(msg.topic, msg.payload, msg.t)

    def advance(self, wall_dt: float) -> None:
        """Move forward by ``wall_dt`` seconds of wall time at the current speed."""
        if not self.paused and not self.done:
            self._feed_until(min(self.end, self.position + wall_dt * self.speed))

    def step(self, seconds: float = TICK_S) -> None:
        self._feed_until(min(self.end, self.position + seconds))

    def seek(self, t: float) -> None:
        t = max(self.start, min(self.end, t))
        if t < self.position:
            self._reset(t)
        self._feed_until(t)

    def next_event(self) -> float | None:
        i = bisect.bisect_right(self.events, self.position + 1e-6)
        if i < len(self.events):
            self.seek(self.events[i])
            return self.events[i]
        return None

    def prev_event(self) -> float | None:
        i = bisect.bisect_left(self.events, self.position - 1e-6) - 1
        if i >= 0:
            self.seek(self.events[i])
            return self.events[i]
        return None


def replay_headless(path: Path, until: float | None = None,
                    tick_s: float = TICK_S) -> dict[str, Any]:
    """Replay as fast as possible, one session tick every 0.5 s of recorded time (the console's
    own tick, so every rule that needs two samples fires as it did live); return the final
    picture in the shape of ``status --json`` plus events and a replay report. A longer
    ``tick_s`` suits a sparse recording (``fleetdeck sim --out``: a week in minutes)."""
    player = Player(path, index_events=False)
    session = player.session
    end = player.end if until is None else min(player.end, player.start + until)
    t = player.start
    while t < end:
        t = min(end, t + tick_s)
        player.seek(t)
        session.tick(t)
    rep = player.report
    out = fleet_summary(session.state, end, source=str(path),
                        replayed_s=round(end - player.start, 3),
                        interruptions=session.interruptions.total)
    out["events"] = [ev.model_dump(mode="json") for ev in session.state.events]
    out["replay"] = {"start": player.start, "end": end, "skipped_lines": rep.skipped,
                     "truncated": rep.truncated, "problems": rep.problems}
    return out


async def replay_to_broker(path: Path, url: BrokerURL, speed: float,
                           progress: Callable[[int, float], None] | None = None
                           ) -> tuple[int, ReadReport]:
    """Republish a recording into a live broker with its original topics, QoS and retain flags;
    return how many messages went out and what the reader skipped."""
    reader = RecordingReader(path)
    client = make_client(url, f"fd-replay-{int(time.time())}", keepalive=10)
    sent = 0
    try:
        async with client:
            first: float | None = None
            wall0 = time.monotonic()
            for msg in reader.messages():
                first = msg.t if first is None else first
                due = wall0 + (msg.t - first) / speed
                delay = due - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                await client.publish(msg.topic, msg.payload, qos=min(msg.qos, 1),
                                     retain=msg.retain)
                sent += 1
                if progress and sent % 500 == 0:
                    progress(sent, msg.t - first)
    except aiomqtt.MqttError as err:
        raise UserError(describe_mqtt_error(url, err)) from None
    return sent, reader.report


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"
