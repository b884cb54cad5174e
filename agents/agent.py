"""The node agent: publishes birth, status and telemetry over MQTT and obeys drain/resume.

Session rules (docs/protocol.md): each MQTT connection is a new session with a larger ``bdSeq``;
the Last Will is the offline status of that session, so the console can ignore a late will of
an older session. Birth and status are retained; telemetry is QoS 0 and latest-value-wins.
"""

import asyncio
import contextlib
import dataclasses
import itertools
import logging
import os
import random
import time
import weakref
from collections.abc import Callable
from typing import Any

import aiomqtt

from fleetdeck import __version__
from fleetdeck.agents.guard import CommandGuard
from fleetdeck.agents.offloop import Overdue, Watched, start_daemon
from fleetdeck.agents.outbox import Outbox
from fleetdeck.agents.source import ColumnReading, EventDraft, Inventory, Reading, Source
from fleetdeck.agents.state import AgentState, StateStore
from fleetdeck.agents.windows import ErrorWindows
from fleetdeck.brokerurl import OVERSIZE_AFTER_S, BrokerURL, describe_mqtt_error, make_client
from fleetdeck.protocol import codec, signing, wire2
from fleetdeck.protocol.fast import AgentInfo, Telemetry
from fleetdeck.protocol.messages import (
    NOT_DRAINED,
    NOT_SAVED,
    RESUMED,
    Ack,
    AckResult,
    Birth,
    Command,
    CommandOp,
    DrainInfo,
    DrainMode,
    DrainState,
    Event,
    Severity,
    Status,
)
from fleetdeck.protocol.topics import NODE_KINDS, Kind, topic_for
from fleetdeck.retry_said import RetrySaid
from fleetdeck.takeover import TakeoverWatch, dropped_after_publish

log = logging.getLogger("fleetdeck.agent")

BACKOFF_START_S = 0.5
BACKOFF_CAP_S = 30.0
BD_SEQ_AHEAD_MS = 600_000
"""A saved session number further ahead of the clock than consoles accept (docs/protocol.md,
``bdSeq``) is not carried on: the clock was wrong then, and every later session would be
refused."""
WINDOWS_SAVE_EVERY_S = 10.0
"""How often, at most, the error windows are saved while they change (``Agent.keep_windows``)."""
SAVE_AGAIN_FIRST_S = 1.0
SAVE_AGAIN_CAP_S = 30.0
"""A state the disk refused is tried again after 1 s, then twice as long each time it fails,
at most 30 s apart (``NodeAgent._save_again``): one failing open is cheap, but a --state-dir
that stays full for days must not be hammered each sample."""


def now_ms(clock: Callable[[], float] = time.time) -> int:
    return int(clock() * 1000)


REARM_QUIET_S = 0.2
"""How long no command must come before a session ends to re-arm its will."""


class NodeAgent:
    """One node's MQTT presence. Runs until ``stop`` is set, reconnecting with jittered backoff."""

    def __init__(
        self,
        *,
        cluster: str,
        node_id: str,
        source: Source,
        url: BrokerURL,
        interval_s: float = 1.0,
        keepalive: int = 10,
        connect_gate: asyncio.Semaphore | None = None,
        connect_spacing_s: float = 0.0,
        phase_s: float | None = None,
        clock: Callable[[], float] = time.time,
        outbox: Outbox | None = None,
        command_key: bytes | None = None,
        state: StateStore | None = None,
        wire: int = wire2.WIRE_MAJOR,
        keyframe_every_s: float = wire2.KEYFRAME_EVERY_S,
        read_deadline_s: float | None = None,
    ) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.source = source
        self.url = url
        self.interval_s = interval_s
        self.keepalive = keepalive
        self.clock = clock
        self.connect_gate = connect_gate or asyncio.Semaphore(1)
        self.connect_spacing_s = connect_spacing_s
        self.phase_s = random.uniform(0, interval_s) if phase_s is None else phase_s
        self.started_ms = now_ms(clock)
        self.bd_seq = 0
        self.seq = 0
        self.event_seq = 0
        self.connected = asyncio.Event()
        self.connects = 0
        """Sessions fully announced (birth and status out)."""
        self.connacks = 0
        """Sessions the broker accepted (CONNACK), announced or not."""
        self._failing_since: float | None = None
        """Monotonic time of the first failed connect of the current outage (None: none)."""
        self._retry_said = RetrySaid()
        """Each reason of a failed connect said in this outage (fleetdeck/retry_said.py)."""
        self.last_progress = time.monotonic()
        """Monotonic time the main loop last did its job (systemd watchdog reads it)."""
        self.on_retry: Callable[[str, str, float], None] | None = None
        """Told (node, why, delay) of each failed connect instead of the log: a simulator's
        thousands of agents say it in one line (agents/fleet.py, ``RetryLog``)."""
        self.takeover = TakeoverWatch()
        """Its connections dropped within seconds of the broker accepting them, again and
        again: another client with its client id (docs/reliability.md)."""
        self._taken_bytes = 0
        """Bytes of the largest publish the broker is known to have read (a connection
        outlived it by ``OVERSIZE_AFTER_S``), over all of this agent's connections."""
        self.on_takeover: Callable[[str, str], None] | None = None
        """Told (node, sentence) once per such episode instead of the log (``RetryLog``)."""
        self.outbox = outbox or Outbox()
        self.encoder = wire2.TelemetryEncoder(keyframe_every_s, wire)
        """Telemetry as v1 or v2 (keyframes and deltas); op ``keyframe`` asks it for one."""
        self.columns = True
        """A source that reads columns (``read_columns``: the simulator) hands them to the v2
        encoder without row Structs (docs/performance.md, "Simulator capacity"); False: read
        rows, as every other source (the tests hold the two to the same bytes)."""
        self.windows = ErrorWindows()
        """The hour of IB errors and minute of PCIe replays this agent saw (agents/windows.py)."""
        self.command_key = command_key
        self.off_loop = bool(getattr(source, "blocking", False))
        """A source whose reads block (a real node's nvidia-smi, NVML, sysfs) is read on
        threads, so a hung reader never holds the commands and the MQTT pings up
        (agents/offloop.py); a simulated one on the loop, as before: a simulator runs
        thousands of agents and a thread hop per sample would cost it (docs/performance.md)."""
        self._reads = Watched(
            f"{source.name} read",
            2 * interval_s + 1 if read_deadline_s is None else read_deadline_s,
        ) if self.off_loop else None
        """A blocking source's reads, one in flight, each waited for at most this long: a
        real source bounds its GPU reader by the interval itself, so this is the backstop for
        a read that hangs elsewhere (sysfs, /proc)."""
        self._inventories = Watched(
            f"{source.name} inventory", self._reads.deadline_s) if self._reads else None
        """A blocking source's inventories (each birth's), bounded as the reads are: a read
        that hangs keeps the source's lock (agents/real/source.py), and a rebirth waiting on
        it with no deadline held the commands after it, the drain of that node included (a
        review; docs/reliability.md, "A hung GPU reader")."""
        self._inventory_had: Inventory | None = None
        """The last inventory taken in time: a birth whose inventory overran says it again."""
        self._birth_owed = False
        """A birth went out without any inventory (the first one overran): it is published
        again once an inventory answers (``_telemetry_loop``), or the console judged the node
        for ever against a birth with no GPUs, no ports, no SKU (a review)."""
        self._topic = {k: topic_for(cluster, k, node_id) for k in NODE_KINDS}
        # The drain and the executed command ids come back from the state the last agent of
        # this node saved, so a restart neither returns a drained node to service nor lets a
        # captured command run twice.
        self.state = state or StateStore()
        saved = self.state.load(now_ms(clock))
        if saved.bd_seq <= now_ms(clock) + BD_SEQ_AHEAD_MS:
            self.bd_seq = saved.bd_seq  # the next session's is larger (``_next_bd_seq``)
        self._windows_saved = self.state.load_windows()
        """What an earlier agent of this node saved, taken back at the first sample, when
        the node's boot is known (``ErrorWindows.restore``)."""
        self._windows_kept = self.windows.revision
        self._windows_kept_at = time.monotonic()
        self._boot_id: str | None = None
        """The node's boot id, from the last birth's inventory (``boot_id``)."""
        self.drain: DrainInfo = saved.drain
        self._drain_mode = saved.drain_mode
        self._will_drain: DrainInfo | None = None
        """The drain the current session's Last Will carries (MQTT fixes a will at CONNECT),
        with its ``unsaved`` (``drain_said``)."""
        self._save_again_at = 0.0
        self._save_again_s = SAVE_AGAIN_FIRST_S
        self.rearm = asyncio.Event()
        """Set once the drain moved away from the will's: the session ends cleanly (no will) and
        a new one connects at once with a will that carries the drain (``_rearm_if_stale``)."""
        self.rearms = 0
        """Sessions ended to re-arm the will."""
        self.busy = asyncio.Lock()
        """Held while a command is handled or events and a drain's end go out: the session is
        ended for a re-arm only between those (``_rearm_when_quiet``), never in the middle of
        one (a drill lost a command the broker had delivered, and cancelling a QoS 1 publish
        stalled the re-arm 5 s)."""
        self.commands_handled = 0
        self._rearm_holds = False
        self.guard = CommandGuard(node_id, command_key, lambda: now_ms(self.clock),
                                  saved.executed)
        self._awaiting_drained: str | None = (
            self.drain.cmd_id or None if self.drain.state is DrainState.DRAINING else None)
        if self.drain.state is not DrainState.NONE:
            # FINISH: restoring a drain must never requeue work a second time.
            source.on_drain(self.drain.state, DrainMode.FINISH)
            log.info("%s: %s since before the restart (%s)", node_id, self.drain.state.value,
                     self.drain.reason)
        if self.state.lost:
            self.emit(EventDraft("drain", self.drain.reason, Severity.WARN,
                                 data={"state": self.drain.state.value}))

    # --- messages ---------------------------------------------------------------------------

    def birth(self, inv: Inventory | None = None) -> Birth:
        """``inv``: the source's inventory, taken already (off the loop); else taken now."""
        inv = self.source.inventory() if inv is None else inv
        if not (self.off_loop and self._inventory_had is None):
            # Not a stand-in's "" (``_inventory_again``: no inventory answered yet): the error
            # windows saved under it would read as another boot's at the next start. A real
            # inventory's "" (no /proc boot_id) is its boot: windows saved and restored under
            # it, as ever (a review).
            self._boot_id = inv.boot_id
            # A GPU replaced at its index (a new uuid) does not inherit the old one's holds.
            self.windows.inventory([(g.index, g.uuid) for g in inv.gpus])
        return Birth(
            cluster=self.cluster,
            node=self.node_id,
            bdSeq=self.bd_seq,
            ts=now_ms(self.clock),
            boot_id=inv.boot_id,
            agent_version=__version__,
            source=self.source.name,
            sku=inv.sku,
            interval_s=self.interval_s,
            driver_version=inv.driver_version,
            cuda_version=inv.cuda_version,
            topology=inv.topology,
            gpus=inv.gpus,
            ib_ports=inv.ib_ports,
            errors=inv.errors,
            gpus_expected=inv.gpus_expected,
            ib_ports_expected=inv.ib_ports_expected,
            agent_started_ts=self.started_ms,
        )

    def drain_said(self) -> DrainInfo:
        """The drain as a status says it: with why it is not saved while saves fail."""
        if not self.state.save_error or self.drain == self.state.kept_drain:
            # Nothing a restart would change: a node never drained on a full --state-dir is no
            # "drain not kept" (every such node was listed so in status, "none not saved").
            return self.drain
        # Every status while the state is unsaved (its will too): what a restart forgets.
        return self.drain.model_copy(update={"unsaved": self.state.save_error[-1024:]})

    def status(self, online: bool = True, stopped: bool = False) -> Status:
        return Status(
            node=self.node_id, online=online, bdSeq=self.bd_seq, ts=now_ms(self.clock),
            drain=self.drain_said(), stopped=stopped,
        )

    def telemetry(self) -> Telemetry:
        t0 = time.perf_counter()
        reading = self.source.read(self.clock())
        return self._sample(reading, (time.perf_counter() - t0) * 1000)

    async def _read_off_loop(self) -> tuple[Reading, float]:
        """The source's reading, read on a thread within ``_reads``' deadline; past it, a
        reading that measured nothing and says which read hung and for how long."""
        now = self.clock()
        t0 = time.perf_counter()
        source, reads = self.source, self._reads
        assert reads is not None  # only a blocking source is read off the loop
        try:
            reading = await asyncio.wrap_future(start_daemon(
                lambda: reads.call(lambda: source.read(now)), f"{self.node_id} read"))
        except Overdue as hung:
            reading = Reading(gpus=[], ib_ports=[], errors=[
                f"{hung}{self._hung_reader()}: nothing measured (a reader hung; the GPU one: "
                "a driver wedged?)"])
        return reading, (time.perf_counter() - t0) * 1000

    async def _inventory(self) -> Inventory:
        if not self.off_loop:
            return self.source.inventory()
        source, calls, reads = self.source, self._inventories, self._reads
        assert calls is not None and reads is not None
        for late in (calls, reads):
            since = late.hung_since
            if since is not None:
                # A read or inventory still hung past its deadline holds the source's lock:
                # not another whole deadline of waiting for it (a REBIRTH then a ctl/rebirth
                # kept a drain behind them unanswered 6 s, one deadline each).
                return self._inventory_again(Overdue(late.what, since, late.clock()))
        try:
            inv = await asyncio.wrap_future(start_daemon(
                lambda: calls.call(source.inventory), f"{self.node_id} inventory"))
        except Overdue as hung:
            return self._inventory_again(hung)
        self._inventory_had = inv
        self._birth_owed = False
        return inv

    def _inventory_again(self, hung: Overdue) -> Inventory:
        """The last inventory in time, its errors led by why: the birth goes out, and the
        commands behind it are answered, while a reader hangs. None in time yet: what the
        source knows without its hardware (its SKU, what it was told to expect), and the
        birth is owed (``_birth_owed``)."""
        had = self._inventory_had
        if had is None:
            source = self.source
            self._birth_owed = True
            had = Inventory(sku=getattr(source, "sku", ""), gpus=[], ib_ports=[],
                            boot_id=self._boot_id or "",
                            gpus_expected=getattr(source, "gpus_expected", 0),
                            ib_ports_expected=getattr(source, "ib_ports_expected", 0))
            said = (f"{hung}{self._hung_reader()}: no inventory yet; the birth is sent again "
                    "once one answers")
        else:
            said = f"{hung}{self._hung_reader()}: this birth repeats the last inventory"
        # The birth takes 32 errors at most (agents/real/common.py, ``cap_errors``): the why
        # first, the last of the earlier ones left out.
        return dataclasses.replace(had, errors=[said, *had.errors][:32])

    def _hung(self) -> bool:
        """A blocking source's read or inventory is in flight past its deadline."""
        return any(w is not None and w.hung_since is not None
                   for w in (self._reads, self._inventories))

    def _hung_reader(self) -> str:
        """'; hung: sysfs read (12 s)': the reader call a blocking source has in flight, where
        it says (``RealSource.stuck``); else ''."""
        stuck: Callable[[], str] | None = getattr(self.source, "stuck", None)
        what = stuck() if stuck is not None else ""
        return f"; hung: {what}" if what else ""

    async def _payload(self) -> bytes:
        """The next sample on the wire; a blocking source's read off the loop."""
        if not self.off_loop:
            return self.telemetry_payload()
        reading, collect_ms = await self._read_off_loop()
        if reading.inventory_changed:
            # Sent before this sample (the telemetry loop): a birth naming the old HCA failed
            # the node, "port missing from telemetry", for as long as the agent ran.
            self._birth_owed = True
        return self.encoder.encode(self._sample(reading, collect_ms), self.clock())

    def _sample(self, reading: Reading, collect_ms: float) -> Telemetry:
        ts = self._next_sample()
        sample = self._head(reading, collect_ms, ts,
                            tuple(self.windows.gpus(reading.gpus, ts)),
                            tuple(self.windows.ports(reading.ib_ports, ts)))
        self.keep_windows()
        return sample

    def _columns_payload(self, reading: ColumnReading, collect_ms: float) -> bytes:
        """:meth:`_sample` and its encoding, the GPUs and ports as columns throughout (the
        same windows, the same bytes)."""
        ts = self._next_sample()
        head = self._head(reading, collect_ms, ts, (), ())
        gpus, ports = self.windows.columns(reading.gpus, reading.ib_ports, ts)
        self.keep_windows()
        return self.encoder.encode_columns(head, gpus, ports, self.clock())

    def _next_sample(self) -> int:
        """The next sample's seq taken, its ts (ms): the saved windows restored first."""
        self.seq += 1
        ts = now_ms(self.clock)
        if self._windows_saved is not None and (self._boot_id is not None or not self.off_loop):
            # A blocking source's boot is known from its first birth's inventory only: never
            # read here, on the loop, from a reader that may hang (``boot_id``).
            saved, self._windows_saved = self._windows_saved, None
            why = self.windows.restore(saved, ts, self.boot_id())
            if why:
                # Baselines of another boot are the normal case after a reboot: said, quietly.
                log.log(logging.INFO if why.startswith("baselines") else logging.WARNING,
                        "%s: the error windows an earlier agent saved: %s", self.node_id, why)
            self._windows_kept = self.windows.revision
        return ts

    def _head(self, reading: Reading | ColumnReading, collect_ms: float, ts: int,
              gpus: tuple[Any, ...], ib_ports: tuple[Any, ...]) -> Telemetry:
        return Telemetry(
            node=self.node_id,
            seq=self.seq,
            bdSeq=self.bd_seq,
            ts=ts,
            interval_s=self.interval_s,
            agent=AgentInfo(
                version=__version__,
                mode=self.source.mode,
                pid=os.getpid(),
                started_ts=self.started_ms,
                collect_ms=round(collect_ms, 3),
                errors=tuple(reading.errors),
                event_seq=self.event_seq,
            ),
            job=reading.job,
            host=reading.host,
            gpus=gpus,
            ib_ports=ib_ports,
        )

    def boot_id(self) -> str:
        """The boot the windows are saved under: the birth's, taken once. Not a new
        ``source.inventory()`` at each save: on a real node that re-ran nvidia-smi / NVML and
        the sysfs scan, and a GPU lost since the birth left the readers and the kernel log's
        map, so its telemetry and its XID 79 went unreported (a real-node audit;
        docs/real-nodes.md, "What happens when hardware is missing")."""
        if self._boot_id is None:
            self._boot_id = self.source.inventory().boot_id
        return self._boot_id

    def keep_windows(self, now: float | None = None, *, at_once: bool = False) -> None:
        """Save the error windows when they changed, at most every ``WINDOWS_SAVE_EVERY_S``
        (a symbol-error storm moves them every sample): what changed after a save is counted
        again from the counters by the next agent (agents/windows.py)."""
        if self.windows.revision == self._windows_kept:
            return
        if self._windows_saved is not None or (self.off_loop and self._boot_id is None):
            # Not restored yet (its boot unknown, ``_sample``): a save would erase them; and
            # a blocking source's boot is not read here, on the loop (``boot_id``).
            return
        now = time.monotonic() if now is None else now
        if not at_once and now - self._windows_kept_at < WINDOWS_SAVE_EVERY_S:
            return
        self.state.save_windows(self.windows.snapshot(now_ms(self.clock), self.boot_id()))
        self._windows_kept = self.windows.revision
        self._windows_kept_at = now

    def telemetry_payload(self) -> bytes:
        """The next sample as it goes on the wire: v1, or a v2 keyframe or delta."""
        if self.columns and self.encoder.wire == 2:
            # Looked up each time: a wrapper may replace the source (bench/sim_capacity.py).
            read_columns = getattr(self.source, "read_columns", None)
            if read_columns is not None and self.source.columns:  # type: ignore[attr-defined]
                t0 = time.perf_counter()
                reading = read_columns(self.clock())
                return self._columns_payload(reading, (time.perf_counter() - t0) * 1000)
        return self.encoder.encode(self.telemetry(), self.clock())

    def _event(self, draft: EventDraft) -> Event:
        self.event_seq += 1
        return Event(
            node=self.node_id,
            event_id=f"{self.event_id_prefix}{self.event_seq}",
            seq=self.event_seq,
            ts=draft.ts_ms or now_ms(self.clock),
            kind=draft.kind,
            severity=draft.severity,
            component=draft.component,
            message=draft.message,
            data=draft.data,
        )

    # --- session loop -----------------------------------------------------------------------

    def _next_bd_seq(self) -> int:
        # Wall-clock milliseconds, strictly increasing: larger than any earlier session of this
        # node even across agent restarts, without a state file (Sparkplug persists a 0-255
        # counter instead; see docs/protocol.md).
        return max(self.bd_seq + 1, now_ms(self.clock))

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await self._run(stop)
        finally:
            self.keep_windows(at_once=True)
            self.outbox.close()

    async def _run(self, stop: asyncio.Event) -> None:
        attempt = 0
        while not stop.is_set():
            accepted_before = self.connacks
            self.bd_seq = self._next_bd_seq()
            self._save_state()  # before the will that carries it can reach anyone
            self._will_drain = self.drain_said()
            self.rearm.clear()
            will = aiomqtt.Will(
                self._topic[Kind.STATUS], codec.encode(self.status(online=False)), qos=1,
                retain=True,
            )
            client = make_client(
                self.url, f"fd-{self.cluster}-{self.node_id}", will=will,
                keepalive=self.keepalive,
            )
            try:
                try:
                    again = await self._session(client, stop)
                finally:
                    # What the broker read, on every connection of this agent: a publish no
                    # larger is no packet over its max_packet_size (``dropped_after_publish``).
                    self._taken_bytes = max(self._taken_bytes, getattr(client, "taken", 0))
                    if self._rearm_holds:
                        self._rearm_holds = False
                        self.busy.release()
                if not again:
                    return
                self.connected.clear()
                self.rearms += 1
                attempt = 0
                continue  # at once: the broker took us a moment ago
            except aiomqtt.MqttError as err:
                self.connected.clear()
                if self.connacks > accepted_before:
                    # The broker took us: this is a new outage, not more of the old one. Without
                    # the reset, every broker restart in the agent's life added to the delay
                    # until each reconnect waited 15-30 s (docs/reliability.md). CONNACK, not
                    # the end of the announcement: a broker that dies while the birth is in
                    # flight was up all the same.
                    attempt = 0
                attempt += 1
                delay = min(BACKOFF_CAP_S, BACKOFF_START_S * 2 ** min(attempt, 10))
                delay *= random.uniform(0.5, 1.0)  # jitter: no thundering herd on broker restart
                why = describe_mqtt_error(self.url, err).rstrip(".")
                if self._failing_since is None:
                    self._failing_since = time.monotonic()
                accepted = self.connacks > accepted_before
                client_id = f"fd-{self.cluster}-{self.node_id}"
                said = None
                sent = getattr(client, "last_sent", None)
                lost_at = getattr(client, "lost_at", None) or time.monotonic()
                right_after = dropped_after_publish(sent, lost_at, self._taken_bytes)
                if sent is not None and lost_at - sent[0] > OVERSIZE_AFTER_S:
                    self._taken_bytes = max(self._taken_bytes, sent[1])
                if self.takeover.lost(accepted, timed_out="timed out" in str(err).lower(),
                                      after_publish=right_after):
                    # Every line said "lost the connection … retrying", a second a node, and
                    # never why: a second simulator for the same nodes (a newcomer's run).
                    said = self.takeover.sentence(
                        self.url, client_id, "a second agent or simulator for the same node")
                elif accepted and self.takeover.remind():
                    # Said once, then silence: a broker that dropped the agent for good (an
                    # oversize packet) read as quiet while nothing went out (a review).
                    said = self.takeover.reminder(self.url, client_id)
                if said is not None:
                    if self.on_takeover is not None:
                        self.on_takeover(self.node_id, said)
                    else:
                        log.warning("%s: %s", self.node_id, said)
                if accepted and self.takeover.said:
                    pass  # said once for the episode, not once a retry
                elif self.on_retry is not None:
                    self.on_retry(self.node_id, why, delay)
                else:
                    self._say_retry(why, delay)
                self.last_progress = time.monotonic()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    def _say_retry(self, why: str, delay: float) -> None:
        """A failed connect in the journal: said when its reason is new to this outage, once
        more with a note when it repeats, then every ``RETRY_REMIND_S`` with the tries it
        stands for (``RetrySaid``)."""
        said = self._retry_said.line(why, delay, time.monotonic())
        if said is not None:
            log.warning("%s: %s", self.node_id, said)

    async def _session(self, client: aiomqtt.Client, stop: asyncio.Event) -> bool:
        """One MQTT session until ``stop`` (False) or until the will must be re-armed (True);
        a lost connection raises MqttError."""
        async with contextlib.AsyncExitStack() as stack:
            announced = asyncio.Event()
            async with self.connect_gate:
                await stack.enter_async_context(client)
                self.connacks += 1
                self.takeover.accepted()
                if (self._failing_since is not None and self.on_retry is None
                        and not self.takeover.said):
                    # Its journal said "cannot reach …; retrying" every few seconds, then
                    # nothing: it read as still down after the broker came back (an SRE drill
                    # restarting a TLS broker). A simulator says it for its fleet itself.
                    log.warning("%s: connected to the MQTT broker at %s again (%.0f s after "
                                "the first failure)", self.node_id, self.url,
                                time.monotonic() - self._failing_since)
                self._failing_since = None
                self._retry_said.clear()
                # Listen from the first moment: the message iterator notices a dropped
                # connection at once, while aiomqtt leaves a SUBSCRIBE or QoS 1 PUBLISH that was
                # in flight waiting out its whole timeout (10 s) when the broker dies under it.
                commands = asyncio.create_task(self._command_loop(client, announced),
                                               name=f"{self.node_id} commands")
                stack.push_async_callback(_cancel, commands)
                setup = asyncio.create_task(self._announce(client), name=f"{self.node_id} announce")
                try:
                    await asyncio.wait({setup, commands}, return_when=asyncio.FIRST_COMPLETED)
                except BaseException:
                    await _cancel(setup)
                    raise
                if not setup.done():
                    # Only a running one: a failed announcement is raised just below by
                    # setup.result(), not taken (and logged) here first.
                    await _cancel(setup)
                if not setup.done() or setup.cancelled():
                    _raised(commands)  # not logged again when the session's exit cancels it
                    commands.result()  # the MqttError that ended the session
                    raise aiomqtt.MqttError("disconnected while announcing the session")
                setup.result()
                announced.set()
                if self.connect_spacing_s:
                    await asyncio.sleep(self.connect_spacing_s)
            self.connects += 1
            self.connected.set()
            rearm = asyncio.create_task(self._rearm_when_quiet(), name=f"{self.node_id} rearm")
            tasks = [
                asyncio.create_task(self._telemetry_loop(client, stop),
                                    name=f"{self.node_id} telemetry"),
                commands,
                asyncio.create_task(stop.wait()),
                rearm,
            ]
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            # Bounded: a publish that swallows its cancellation must not hang the shutdown
            # (seen with 1,024 agents in one process); the loops also check ``stop`` themselves.
            await asyncio.wait(pending, timeout=5)
            ending = None if stop.is_set() or rearm in done else next(
                (t for t in done if not t.cancelled() and t.exception() is not None), None)
            if ending is not None:
                _raised(ending)  # the exception that ends the session, raised below
            for task in tasks:
                _retrieved(task)
            if stop.is_set():
                # A clean DISCONNECT suppresses the will, so say goodbye ourselves; it says
                # the stop was meant (not a death: the consoles' H2 tells the two apart).
                with contextlib.suppress(aiomqtt.MqttError):
                    await client.publish(
                        self._topic[Kind.STATUS],
                        codec.encode(self.status(online=False, stopped=True)),
                        qos=1, retain=True,
                    )
                return False
            if rearm in done:
                # Leaving the ``async with`` sends DISCONNECT: the broker drops the old will,
                # whose drain is out of date, and the retained status already says the drain.
                # ``busy`` is held until then, so nothing is half done.
                return True
            exc = ending.exception() if ending is not None else None
            if exc is not None:
                if not isinstance(exc, aiomqtt.MqttError):
                    # A bug ends the agent, and leaving the ``async with`` sends DISCONNECT,
                    # which drops the will: the retained status said online for good and the
                    # node read stale, "hung or cut off", not offline (a 2026-12-07 drill,
                    # an outbox write that raised). Say what the will would have said.
                    with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                        await asyncio.wait_for(client.publish(
                            self._topic[Kind.STATUS], codec.encode(self.status(online=False)),
                            qos=1, retain=True), 5)
                raise exc
            raise aiomqtt.MqttError("session ended")

    async def _announce(self, client: aiomqtt.Client) -> None:
        await client.subscribe(self._topic[Kind.CMD], qos=1)
        await client.subscribe(topic_for(self.cluster, Kind.REBIRTH), qos=1)
        await self._publish_birth(client)

    async def _publish_birth(self, client: aiomqtt.Client) -> None:
        birth = self.birth(await self._inventory() if self.off_loop else None)
        await client.publish(self._topic[Kind.BIRTH], codec.encode(birth), qos=1, retain=True)
        await self._publish_status(client)

    async def _publish_status(self, client: aiomqtt.Client) -> None:
        await client.publish(self._topic[Kind.STATUS], codec.encode(self.status()), qos=1,
                             retain=True)

    async def _telemetry_loop(self, client: aiomqtt.Client, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        # Phase-spread the fleet so thousands of nodes do not publish in the same millisecond.
        start = loop.time() + self.phase_s
        for k in itertools.count():
            if stop.is_set():
                return
            delay = start + k * self.interval_s - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -self.interval_s:
                # Fell behind by more than a period (CPU starved): skip, the gap shows in seq.
                continue
            payload = await self._payload()
            if self._birth_owed and not self._hung():
                # The birth owed (none with an inventory yet, or an HCA back under a new
                # name) goes out before the sample that needs it: a sample naming mlx5_8
                # judged against the birth naming mlx5_3 read N1 "port missing from
                # telemetry", a false failed verdict and an incident for one sample (a
                # review). Same session, same bdSeq: a birth again (docs/protocol.md).
                async with self.busy:
                    await self._publish_birth(client)
            await client.publish(self._topic[Kind.TELEMETRY], payload, qos=0)
            self.last_progress = time.monotonic()
            async with self.busy:
                await self._flush_events(client)
                await self._check_drained(client)
                await self._save_again(client)
            self._rearm_if_stale()
            if self.on_takeover is None and self.takeover.ended():
                log.warning("%s: connected to the MQTT broker at %s for %g s now: the "
                            "takeovers stopped", self.node_id, self.url, self.takeover.end_s)

    async def _flush_events(self, client: aiomqtt.Client) -> None:
        for draft in self.source.take_events():
            self.emit(draft)
        while self.outbox.pending:
            ev = self.outbox.pending[0]
            # QoS 1: returns once the broker acknowledged it; on a lost connection the event
            # stays pending and goes out, with the same id, after the reconnect.
            await client.publish(self._topic[Kind.EVENT], codec.encode(ev), qos=1)
            self.outbox.acked(ev)

    def emit(self, draft: EventDraft) -> None:
        """Give an event its id and seq now (so retries keep them) and queue it."""
        if draft.ts_ms is None:
            draft = dataclasses.replace(draft, ts_ms=now_ms(self.clock))
        self.outbox.add(self._event(draft))

    @property
    def event_id_prefix(self) -> str:
        return f"{self.node_id}.{self.started_ms}."

    # --- commands ---------------------------------------------------------------------------

    async def _command_loop(self, client: aiomqtt.Client, announced: asyncio.Event) -> None:
        async for message in client.messages:
            await announced.wait()  # the birth is the first message of every session
            topic = str(message.topic)
            if topic == topic_for(self.cluster, Kind.REBIRTH):
                # "Tell me everything again": the birth, and a v2 keyframe with the next sample
                # (a recorder or console that starts mid-stream asks this way).
                self.encoder.request_keyframe()
                async with self.busy:
                    await self._publish_birth(client)
                continue
            if topic != self._topic[Kind.CMD]:
                continue  # amqtt pushes retained messages we never subscribed to
            payload = message.payload if isinstance(message.payload, bytes) else b""
            try:
                cmd = codec.decode(Command, payload)
            except codec.DecodeError as err:
                log.warning("%s: rejected malformed command on %s: %s", self.node_id, topic, err)
                continue
            async with self.busy:
                await self._handle(client, cmd)
                self.commands_handled += 1
            self._rearm_if_stale()

    async def _rearm_when_quiet(self) -> None:
        """Once a re-arm is wanted and no command came for ``REARM_QUIET_S`` (commands sent
        together, a drain then a resume, are handled in this session first), take ``busy``
        and return: the session ends between two pieces of work. Commands that reach the
        agent after this are lost with the session; consoles send a command again, with
        the same id, until it is acknowledged (docs/protocol.md)."""
        await self.rearm.wait()
        while True:
            seen = self.commands_handled
            await asyncio.sleep(REARM_QUIET_S)
            if self.commands_handled == seen:
                break
        await self.busy.acquire()
        self._rearm_holds = True

    def _rearm_if_stale(self) -> None:
        """Re-arm the will once the drain changed and what followed it went out: a drained
        node whose agent then died read "not drained" in every console started later, since
        the will it left was the drain as of the connect (an SRE drill; docs/protocol.md)."""
        if self._will_drain is not None and self.drain_said() != self._will_drain:
            self.rearm.set()

    async def _save_again(self, client: aiomqtt.Client) -> None:
        """Try a state the disk refused again (with back-off), and once it is kept say so in the
        status (the will follows, ``_rearm_if_stale``): a --state-dir freed of its full disk
        left the retained status saying "not saved on the node" until the next command or
        reconnect, though a restart would now keep the drain (a review)."""
        if not self.state.save_error:
            self._save_again_s = SAVE_AGAIN_FIRST_S
            return
        now = time.monotonic()
        if now < self._save_again_at:
            return
        said = self.drain_said()
        if self._save_state():
            self._save_again_at = now + self._save_again_s
            self._save_again_s = min(SAVE_AGAIN_CAP_S, self._save_again_s * 2)
            return
        self._save_again_s = SAVE_AGAIN_FIRST_S
        if self.drain_said() != said:
            await self._publish_status(client)

    async def _handle(self, client: aiomqtt.Client, cmd: Command) -> None:
        answered = self.guard.answered(cmd.cmd_id)
        if answered is not None:
            # QoS 1 redelivery or a console retry with the same id: answer, do not act twice.
            # A console that retries a drain or resume has not seen its effect: say the state
            # again too (idempotent; it may have been lost with a broker).
            await self._publish_ack(client, answered, remember=False)
            if cmd.op in (CommandOp.DRAIN, CommandOp.RESUME):
                await self._publish_status(client)
            return
        if self._done_but_unanswered(cmd):
            # Acted on, but the ack was lost with the broker before it went out: the console's
            # retry (same id) gets its answer now, and nothing runs twice. A captured copy
            # replayed after the state moved on still falls through to "replayed".
            await self._ack(client, cmd, AckResult.DONE, "already done (its ack was lost)")
            await self._publish_status(client)
            return
        reject = self._validate(cmd)
        if reject:
            await self._ack(client, cmd, AckResult.REJECTED, reject)
            return
        self.guard.executing(cmd)
        if cmd.op is CommandOp.DRAIN:
            await self._drain(client, cmd)
        elif cmd.op is CommandOp.RESUME:
            await self._resume(client, cmd)
        # Rebirth and resend change nothing and are harmless to repeat: not worth an fsync
        # (their ids reach the state file with the next drain or resume).
        elif cmd.op is CommandOp.REBIRTH:
            self.encoder.request_keyframe()
            await self._publish_birth(client)
            await self._ack(client, cmd, AckResult.DONE, "birth re-published")
        elif cmd.op is CommandOp.KEYFRAME:
            self.encoder.request_keyframe()
            await self._ack(client, cmd, AckResult.DONE, "keyframe with the next sample")
        elif cmd.op is CommandOp.RESEND_EVENTS:
            again = self.outbox.since(cmd.args.since_seq or 0, self.event_id_prefix)
            for ev in again:
                await client.publish(self._topic[Kind.EVENT], codec.encode(ev), qos=1)
            await self._ack(client, cmd, AckResult.DONE, f"re-sent {len(again)} event(s)")

    def _done_but_unanswered(self, cmd: Command) -> bool:
        if cmd.cmd_id not in self.guard.executed or cmd.target != self.node_id:
            return False
        if self.guard.key is not None and signing.check(cmd, self.guard.key,
                                                        now_ms(self.clock)):
            return False
        if cmd.op is CommandOp.DRAIN:
            return self.drain.cmd_id == cmd.cmd_id and self.drain.state is not DrainState.NONE
        if cmd.op is CommandOp.RESUME:
            return self.drain.state is DrainState.NONE
        return False

    def _validate(self, cmd: Command) -> str:
        problem = self.guard.check(cmd)
        if problem:
            return problem
        if cmd.target != self.node_id:
            return f"command is for {cmd.target}, not {self.node_id}"
        if cmd.op is CommandOp.RESTART_JOB:
            return "node agents do not run jobs; send restart_job to the scheduler"
        if cmd.op is CommandOp.DRAIN and not cmd.args.reason.strip():
            return "a reason is required to drain a node"
        return ""

    def _save_state(self) -> str:
        """Before telling anyone: an ack or status must never promise what a restart forgets.
        What the acks add when the disk refused the state ('' when saved): the drain obeyed
        and acknowledged read "done (DRAINED)", exit 0, on a full --state-dir, and the node
        was back in service after the agent's next restart (a 2026-12-07 drill)."""
        if self.state.save(AgentState(self.drain, self._drain_mode, dict(self.guard.executed),
                                      self.bd_seq)):
            return ""
        # Cut: an ack's reason is at most 2,048 characters (protocol Text), a path up to 4,096.
        return f"; {NOT_SAVED} ({self.state.save_error[-1024:]}): an agent restart forgets it"

    async def _drain(self, client: aiomqtt.Client, cmd: Command) -> None:
        # Act first, then tell: if the broker dies between the two, the state is already
        # changed (status goes out again on reconnect) and the event waits in the outbox.
        # Acknowledging first could leave a command "accepted" but never executed.
        self._drain_mode = cmd.args.mode
        state = DrainState.DRAINING if self.source.busy() else DrainState.DRAINED
        self.drain = DrainInfo(
            state=state, reason=cmd.args.reason, requested_by=cmd.issued_by,
            since_ts=now_ms(self.clock), cmd_id=cmd.cmd_id,
        )
        self.source.on_drain(state, cmd.args.mode)
        # on_drain with mode=now may have requeued the work already.
        if state is DrainState.DRAINING and not self.source.busy():
            state = DrainState.DRAINED
            self.drain = self.drain.model_copy(update={"state": state})
            self.source.on_drain(state, cmd.args.mode)
        self.emit(EventDraft("drain", f"{state.value}: {cmd.args.reason} [{cmd.issued_by}]",
                             Severity.WARN, data={"state": state.value, "cmd_id": cmd.cmd_id}))
        if state is DrainState.DRAINING:
            self._awaiting_drained = cmd.cmd_id
        unsaved = self._save_state()
        await self._ack(client, cmd, AckResult.ACCEPTED,
                        f"drain ({cmd.args.mode.value}){unsaved}")
        await self._publish_status(client)
        if state is DrainState.DRAINED:
            await self._ack(client, cmd, AckResult.DONE, f"DRAINED{unsaved}")

    async def _check_drained(self, client: aiomqtt.Client) -> None:
        if self.drain.state is not DrainState.DRAINING or self.source.busy():
            return
        self.drain = self.drain.model_copy(update={"state": DrainState.DRAINED})
        self.source.on_drain(DrainState.DRAINED, self._drain_mode)
        self.emit(EventDraft("drain", "drained: work left the node", Severity.WARN,
                             data={"state": "drained"}))
        unsaved = self._save_state()
        awaiting, self._awaiting_drained = self._awaiting_drained, None
        await self._publish_status(client)
        if awaiting:
            ack = Ack(cmd_id=awaiting, by=self.node_id, op=CommandOp.DRAIN,
                      result=AckResult.DONE, reason=f"DRAINED{unsaved}", ts=now_ms(self.clock))
            await self._publish_ack(client, ack)

    async def _resume(self, client: aiomqtt.Client, cmd: Command) -> None:
        was = self.drain.state
        self.drain = DrainInfo()
        self._awaiting_drained = None
        self.source.on_drain(DrainState.NONE, cmd.args.mode)
        if was is not DrainState.NONE:
            # Returned to service after its repair: what the windows held was repaired, as the
            # console forgets its own then (FleetState._apply_status); before the status says so.
            self.windows.forget_ports()
            self.keep_windows(at_once=True)  # a restart must not bring the hour back
        said = RESUMED if was is not DrainState.NONE else f"resume: {NOT_DRAINED}"
        self.emit(EventDraft("drain", f"{said} [{cmd.issued_by}]", Severity.INFO,
                             data={"state": "none", "cmd_id": cmd.cmd_id}))
        unsaved = self._save_state()
        await self._publish_status(client)
        note = "returned to service" if was is not DrainState.NONE else NOT_DRAINED
        await self._ack(client, cmd, AckResult.DONE, note + unsaved)

    async def _ack(self, client: aiomqtt.Client, cmd: Command, result: AckResult,
                   reason: str) -> None:
        ack = Ack(cmd_id=cmd.cmd_id, by=self.node_id, op=cmd.op, result=result, reason=reason,
                  ts=now_ms(self.clock))
        await self._publish_ack(client, ack)

    async def _publish_ack(self, client: aiomqtt.Client, ack: Ack, remember: bool = True) -> None:
        if remember:
            self.guard.remember(ack)
        await client.publish(self._topic[Kind.ACK], codec.encode(ack), qos=1)


async def _cancel(task: "asyncio.Task[None]") -> None:
    if not task.done():
        task.cancel()
        # Bounded for the same reason as the session's own shutdown (see _session).
        await asyncio.wait({task}, timeout=5)
    _retrieved(task)


_RAISED: "weakref.WeakSet[asyncio.Task[Any]]" = weakref.WeakSet()
"""Session tasks whose exception the session raises: its caller sees it, not the log."""


def _raised(task: "asyncio.Task[Any]") -> None:
    _RAISED.add(task)


def _retrieved(task: "asyncio.Task[Any]") -> None:
    """Take a finished task's exception, which a session that ends anyway has no use for.

    Left alone, the command loop's "Disconnected during message iteration" of a session ended
    by a stop (SIGTERM while the broker dropped the agent) came out at garbage collection as
    "Task exception was never retrieved" and a traceback in the journal (a real-node audit).
    Only an ``MqttError`` is expected then (the broker dropping the client); anything else is
    a bug, in the telemetry loop say, and is logged once with its traceback rather than lost
    (a review found a telemetry-loop bug would have been swallowed)."""
    if not task.done() or task.cancelled():
        return
    exc = task.exception()
    if exc is None or isinstance(exc, aiomqtt.MqttError) or task in _RAISED:
        return
    _RAISED.add(task)  # once: _cancel takes the command loop's again at the session's exit
    log.error("%s: failed as its session ended: %s: %s", task.get_name(), type(exc).__name__,
              exc, exc_info=exc)
