"""Many simulated node agents in one process, one MQTT connection (and Last Will) per node, plus
the simulated scheduler's own MQTT client and the runtime fault-injection listener.

Wiring (the values themselves come from :class:`agents.sim.world.SimWorld`, on sim time):

* a tick task advances the world once per interval, publishes changed job statuses (retained,
  ``job/<id>/status``) and scheduler acks (``sched/ack``), and applies agent deaths/restarts;
* every node has a :class:`SimAgent` (a :class:`NodeAgent`) whose source is that node's model;
* the scheduler client takes ``restart_job`` on ``sched/cmd`` and injections on
  ``fleetdeck/v1/<cluster>/sim/inject`` (a simulator-only topic, outside protocol v1), answering
  those on ``…/sim/inject/ack``.

Agent death inside one process: the broker fires a client's Last Will only when the connection
drops without a DISCONNECT. We shut the agent's TCP socket down under paho (``shutdown`` sends a
FIN, the broker sees a lost connection and publishes the will at once), wait for paho to notice,
then cancel the agent's task; aiomqtt then skips its clean DISCONNECT because the connection is
already gone. The node's ranks keep running: only its MQTT presence died.

A fleet spread over processes (``fleetdeck sim --procs N``, :class:`FleetOptions` ``shard`` and
``shards``): every process steps the *whole* world (same seed, scenario and epoch, ticks on the
same wall-clock grid), but runs agents, one MQTT session and Last Will each, only for its own
block of nodes. What is not a function of sim time reaches every copy of the world at one agreed
tick, so the copies stay one simulated cluster with one scheduler: the lead process (shard 0)
alone owns the scheduler's MQTT side (job statuses, ``sched/cmd``, acks, injections) and turns
every injection, scheduler command and node drain into an input stamped "apply before tick T"
(T = its tick + ``CTL_LAG_TICKS``) on ``…/sim/ctl``; the other processes send their nodes'
drains to it on ``…/sim/ctl/up/<shard>``. What goes out on each is a retained window, the
last ``CTL_KEEP`` inputs sent with their sequence numbers, not one input a message: a process
whose connection to the broker was away meanwhile (a clean session, subscribed again) gets
what it missed from the retained message, and takes each input once, by sequence. A node
a process does not own is still read (and the sample thrown away) while reading it changes
what the scheduler sees (:meth:`SimNode.needs_shadow`). What differs from one process: an
injection or ``restart_job`` takes effect ``CTL_LAG_TICKS`` ticks later, and a "drain now"
reports DRAINING for those ticks before DRAINED.
"""

import asyncio
import contextlib
import gc
import json
import logging
import os
import random
import signal
import socket
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import aiomqtt

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.guard import CommandGuard
from fleetdeck.agents.sim.clock import TelemetryClock
from fleetdeck.agents.sim.mqtt import GmqttSession
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.sim.scenario import Scenario
from fleetdeck.agents.sim.spec import SpecError, parse_action
from fleetdeck.agents.sim.topology import TopologySpec
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.agents.state import StateStore, kept_drain, state_file
from fleetdeck.brokerurl import BrokerURL, describe_mqtt_error, make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import (
    SCHED_HEARTBEAT_S,
    Ack,
    AckResult,
    Command,
    DrainMode,
    DrainState,
    JobState,
    JobStatus,
    SchedulerStatus,
)
from fleetdeck.protocol.topics import ROOT, Kind, topic_for
from fleetdeck.runtime import tune_gc
from fleetdeck.takeover import TAKEOVER_REMIND_S, TakeoverWatch

log = logging.getLogger("fleetdeck.sim")

STOP_GRACE_S = 10.0
"""How long agents get to say offline and disconnect on a clean stop."""
KILL_GRACE_S = 1.0
"""How long to wait for paho to see its socket die before cancelling the agent task."""
CTL_LAG_TICKS = 2
"""Ticks between the lead process stamping an input and every process applying it: room for
the broker to carry it to the others before their tick comes (two seconds at 1 Hz)."""
CTL_KEEP = 64
"""A retained window (``_Sent``) holds the last this many inputs its process sent: the lead's
stamps on ``…/sim/ctl`` (``Fleet._stamp``), another process's drains on ``…/sim/ctl/up/<shard>``
(``Fleet._relay_drain``): a process whose connection was away while no more were sent gets
each of them when it subscribes again."""
CTL_KEEP_BYTES = 64 * 1024
"""…and no more than this many bytes of them (the protocol's payload limit, far under the
broker's packet limit: deploy/mosquitto/mosquitto.conf), one input at least."""


SCHED_KEEPALIVE_S = 10
"""The scheduler client's MQTT keepalive (and each process's of a spread fleet)."""
SCHED_PUBLISH_TIMEOUT_S = 3.0 * SCHED_KEEPALIVE_S
"""How long the scheduler client waits for a publish's PUBACK on a live connection
(``Fleet._publish``): longer than any stall its connection outlives."""

INJECT_RESEND_S = 1.0
"""``fleetdeck inject`` sends its injection again, with the same id, this long after the last
send while no answer came (``inject``)."""
INJECT_ANSWERS_KEPT = 256
"""The scheduler client answers this many of the last injection ids from memory
(``Fleet._on_inject``)."""

CONNECT_REPORT_S = 0.5
"""How often start-up reports how many agents are connected (until all are)."""

ConnectReport = Callable[[int, int], None]
"""``(connected, total)`` while a fleet's agents connect: the CLI draws it (the agent side
prints nothing of its own and imports no UI, see pyproject's import-linter contracts)."""


def inject_topic(cluster: str) -> str:
    """Where ``fleetdeck inject`` publishes (simulator control, not part of protocol v1)."""
    return f"{ROOT}/{cluster}/sim/inject"


def inject_ack_topic(cluster: str) -> str:
    return f"{ROOT}/{cluster}/sim/inject/ack"


def ctl_topic(cluster: str) -> str:
    """Inputs the lead process of a spread fleet stamps for every process (simulator only)."""
    return f"{ROOT}/{cluster}/sim/ctl"


def ctl_up_topic(cluster: str, shard: int | str = "+") -> str:
    """Drains process ``shard`` of a spread fleet hands to the lead process (its retained
    window, ``_Sent``); ``+``: every process's, the lead's subscription."""
    return f"{ROOT}/{cluster}/sim/ctl/up/{shard}"


def shard_of(index: int, nodes: int, shards: int) -> int:
    """The process of a spread fleet that runs node ``index``'s agent: contiguous blocks."""
    return index * shards // nodes


class _Sent:
    """The inputs one process of a spread fleet sent on its retained topic, the window that
    goes out whole each time (``Fleet._put_window``): the lead's stamps on ``…/sim/ctl``,
    another process's drains on ``…/sim/ctl/up/<shard>``. The last ``CTL_KEEP`` of them, and
    no more than ``CTL_KEEP_BYTES``, one at least."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.seq = 0
        """The last input numbered."""
        self.kept: list[tuple[dict[str, Any], int]] = []
        """The inputs the window holds, each with its size."""
        self.first_new = 0
        """The first input the window waiting on the outbox is the first to bring; a newer
        window replaces it only while it holds that one too (``Fleet._put_window``)."""

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Number ``entry`` (``seq``, after any ``tick``) and keep it: what goes out."""
        self.seq += 1
        numbered = {**({"tick": entry["tick"]} if "tick" in entry else {}),
                    "seq": self.seq, **entry}
        kept = [*self.kept, (numbered, len(json.dumps(numbered)) + 2)]
        size = sum(n for _, n in kept)
        while len(kept) > 1 and (len(kept) > CTL_KEEP or size > CTL_KEEP_BYTES):
            size -= kept.pop(0)[1]
        self.kept = kept
        return numbered


@dataclass
class _Waiting:
    """A retained message on the scheduler's outbox, not sent yet (``Fleet._put_retained``)."""

    payload: bytes
    phase: object


_CLEARED = "cleared"
"""The phase of a retained job status's clear: never merged with a status of a reused id."""


def _job_phase(st: JobStatus) -> tuple[JobState, int]:
    """What a waiting job status must share with a newer one to be replaced by it."""
    return st.state, st.requeues


@dataclass
class FleetOptions:
    cluster: str = "demo"
    nodes: int = 64
    prefix: str = "gpu"
    interval_s: float = 1.0
    keepalive: int = 10
    seed: int = 0
    connect_concurrency: int = 16
    """Simultaneous MQTT connects. amqtt needs 1 (its connect race, see embedded_broker.py)."""
    connect_spacing_s: float = 0.0
    jobs: int = 0
    """Generated background jobs kept running (0 = an idle fleet unless the scenario adds jobs)."""
    topology: TopologySpec = field(default_factory=TopologySpec)
    hang_timeout_s: float | None = None
    scenario: Scenario | None = None
    command_key: bytes | None = None
    """Like ``fleetdeck agent --command-key``: every simulated agent and the simulated scheduler
    obey only commands signed with this key, and reject the rest with an ack that says why."""
    shard: int = 0
    shards: int = 1
    """``sim --procs N``: this process runs the agents of block ``shard`` of ``shards``."""
    epoch_ms: int | None = None
    """Wall time of sim t=0 (default: now); every process of a spread fleet gets the same."""
    mqtt_lib: str = "gmqtt"
    """Each simulated agent's MQTT client: gmqtt (agents/sim/mqtt.py) or NodeAgent's aiomqtt."""
    tune_gc: bool = False
    """The ``fleetdeck sim`` process (cli.py sets it; tests leave the test process's GC alone):
    fewer cyclic-GC passes and the fleet's long-lived state frozen out of their view, once built
    and again once every agent is connected (fleetdeck/runtime.py). With thousands of agents'
    objects alive, the default thresholds ran full collections that held the loop for tens to
    hundreds of milliseconds: late samples (docs/performance.md, "Simulator capacity")."""
    state_dir: Path | None = None
    """``sim --state-dir``: each node's drain, executed command ids and error windows in a file
    there, as a real agent's ``--state-dir`` keeps them, so a restarted simulator's nodes come
    back drained as they were (a real cluster's drains outlive its daemons). Without it they
    outlive an agent's restart inside this process only."""
    agent_kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra NodeAgent keywords for every simulated agent (``sim --wire`` once NodeAgent takes
    ``wire``)."""


class SimAgent(NodeAgent):
    """A NodeAgent on a cheap per-node MQTT session (agents/sim/mqtt.py, gmqtt; ``mqtt_lib=
    "aiomqtt"`` keeps NodeAgent's own client, for side-by-side measurements) that remembers its
    live session, so the fleet can cut it off abruptly.

    A killed agent's session task is cancelled while NodeAgent._session waits on its telemetry
    and command loops, so nobody looks at how those loops ended: both fail on the dead socket
    and asyncio printed "Task exception was never retrieved" with a traceback for each. Here the
    loops keep their MQTT error instead of ending with it, the session raises it as NodeAgent
    would, and a session that ends any way at all takes its loops with it.
    """

    client: aiomqtt.Client | GmqttSession | None = None

    def __init__(self, *args: Any, mqtt_lib: str = "gmqtt",
                 telemetry_clock: TelemetryClock | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.mqtt_lib = mqtt_lib
        self.telemetry_clock = telemetry_clock
        """The fleet's one timer for telemetry slots (agents/sim/clock.py); None: NodeAgent's
        own loop, one sleep per sample."""
        self._loops: set[asyncio.Task[Any]] = set()
        self._loop_error: aiomqtt.MqttError | None = None

    def _gmqtt_session(self) -> GmqttSession:
        # The same identity and Last Will NodeAgent.run gave the aiomqtt client it made for
        # this session (bdSeq already advanced): the offline status of this session.
        will = aiomqtt.Will(self._topic[Kind.STATUS], codec.encode(self.status(online=False)),
                            qos=1, retain=True)
        return GmqttSession(self.url, f"fd-{self.cluster}-{self.node_id}", will=will,
                            keepalive=self.keepalive)

    async def _session(self, client: aiomqtt.Client, stop: asyncio.Event) -> bool:
        if self.mqtt_lib == "gmqtt":
            # NodeAgent.run made an aiomqtt client (never connected, so it costs no socket);
            # this session replaces it. The cast: GmqttSession has the aiomqtt.Client methods
            # NodeAgent calls (agents/sim/mqtt.py).
            client = cast(aiomqtt.Client, self._gmqtt_session())
        self.client = client
        self._loop_error = None
        try:
            return await super()._session(client, stop)
        except aiomqtt.MqttError as err:
            # NodeAgent says "session ended" when the loop that ended raised nothing: the real
            # reason is the error the loop kept.
            if self._loop_error is not None and str(err) == "session ended":
                raise self._loop_error from None
            raise
        finally:
            self.client = None
            await self._end_loops()

    async def _end_loops(self) -> None:
        loops = [task for task in self._loops if not task.done()]
        for task in loops:
            task.cancel()
        if loops:
            # Bounded, as NodeAgent's own wait: a publish may swallow its cancellation (3.11).
            await asyncio.wait(loops, timeout=5)
        self._loops.clear()

    async def _kept(self, loop: Coroutine[Any, Any, None]) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._loops.add(task)
        try:
            await loop
        except aiomqtt.MqttError as err:
            self._loop_error = self._loop_error or err

    async def _telemetry_loop(self, client: aiomqtt.Client, stop: asyncio.Event) -> None:
        clock = self.telemetry_clock
        if clock is None or not isinstance(client, GmqttSession):
            await self._kept(super()._telemetry_loop(client, stop))
            return
        # NodeAgent's schedule, taken at the same point (no await before it): the benchmark
        # (bench/sim_capacity.py) times every read against exactly these slots.
        start = asyncio.get_running_loop().time() + self.phase_s
        await self._kept(self._clocked_telemetry(client, stop, clock, start))

    async def _clocked_telemetry(self, client: GmqttSession, stop: asyncio.Event,
                                 clock: TelemetryClock, start: float) -> None:
        """NodeAgent._telemetry_loop on the fleet's clock: the sample and its QoS 0 publish
        happen in the clock's callback, at the slot; this task wakes only when what follows a
        sample has to wait for the broker (an event's or a drain's QoS 1 publishes). Unlike
        NodeAgent's loop, telemetry goes on while those wait for their acknowledgement."""
        wake = asyncio.Event()
        failed: list[Exception] = []
        topic = self._topic[Kind.TELEMETRY]

        def fire() -> bool:
            if stop.is_set():
                wake.set()
                return False
            try:
                client.publish_nowait(topic, self.telemetry_payload())
            except Exception as err:  # MqttError, or a fault in the source: the session's end
                failed.append(err)
                wake.set()
                return False
            self.last_progress = time.monotonic()
            for draft in self.source.take_events():
                self.emit(draft)
            if self.outbox.pending or (self.drain.state is DrainState.DRAINING
                                       and not self.source.busy()):
                wake.set()  # _flush_events / _check_drained have work
            return True

        slot = clock.add(start, self.interval_s, fire)
        try:
            while True:
                await wake.wait()
                wake.clear()
                if failed:
                    raise failed[0]
                if stop.is_set():
                    return
                async with self.busy:
                    await self._flush_events(client)  # type: ignore[arg-type]
                    await self._check_drained(client)  # type: ignore[arg-type]
                self._rearm_if_stale()
        finally:
            slot.cancel()

    async def _command_loop(self, client: aiomqtt.Client, announced: asyncio.Event) -> None:
        await self._kept(super()._command_loop(client, announced))


RETRY_LOG_EVERY_S = 10.0


class RetryLog:
    """The agents' failed connects, one log line for the fleet at most every
    ``RETRY_LOG_EVERY_S``: with the broker down, 64 agents logged 267 lines in 10 s, one per
    agent per retry (a newcomer's run); a real agent still logs its own (agents/agent.py)."""

    def __init__(self, url: BrokerURL, total: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.total = total
        self.clock = clock
        self._failing: dict[str, str] = {}
        self._said_at: float | None = None
        self.outage_since: float | None = None
        """The first failed connect since the fleet was last all connected (``back``)."""
        self.takeover_said = False
        """A takeover episode was said (``takeover``): not again until it ends."""
        self._takeover_at = 0.0
        """When ``takeover`` last said something: one line for the fleet's agents at most
        every ``TAKEOVER_REMIND_S``, each agent's reminders (``TakeoverWatch.remind``) too."""

    def __call__(self, node_id: str, why: str, delay_s: float) -> None:
        self._failing[node_id] = why
        now = self.clock()
        if self.outage_since is None:
            self.outage_since = now
        if self._said_at is not None and now - self._said_at < RETRY_LOG_EVERY_S:
            return
        first = self._said_at is None
        self._said_at = now
        count, self._failing = len(self._failing), {}
        agents = f"{node_id}" if count == 1 and first else f"{count} of {self.total} agents"
        log.warning("%s: %s; retrying with back-off (one line every %.0f s while any "
                    "agent retries)", agents, why, RETRY_LOG_EVERY_S)

    def takeover(self, node_id: str, said: str) -> None:
        """An agent's connections keep being taken over (``NodeAgent.takeover``): one line for
        the fleet's episode, by the first agent to tell, and its retries go unsaid; a reminder
        while it lasts."""
        now = self.clock()
        if self.takeover_said and now - self._takeover_at < TAKEOVER_REMIND_S:
            return
        self.takeover_said, self._takeover_at = True, now
        log.warning("%s (and any other agent of this simulator that keeps losing its "
                    "connection): %s", node_id, said)

    def back(self) -> None:
        """Every agent is connected again: said once, or the log ended on "cannot reach"
        while the fleet worked (a 3 a.m. drive; ``collect`` says it too)."""
        if self.outage_since is not None:
            log.warning("all %d agents connected to the broker at %s again (%.0f s after the "
                        "first failed)", self.total, self.url, self.clock() - self.outage_since)
        self.outage_since, self._said_at, self._failing = None, None, {}
        self.takeover_said = False


class Fleet:
    agent_class: type[SimAgent] = SimAgent

    def __init__(self, url: BrokerURL, opts: FleetOptions) -> None:
        self.url = url
        self.opts = opts
        sc = opts.scenario
        hang = opts.hang_timeout_s
        if hang is None and sc is not None:
            hang = sc.hang_timeout_s
        if not 0 <= opts.shard < opts.shards <= opts.nodes:
            raise ValueError(f"shard {opts.shard} of {opts.shards} for {opts.nodes} nodes")
        world_opts = WorldOptions(
            nodes=opts.nodes, prefix=opts.prefix, seed=opts.seed, interval_s=opts.interval_s,
            topology=opts.topology, background_jobs=opts.jobs, epoch_ms=opts.epoch_ms,
        )
        if hang is not None:
            world_opts.hang_timeout_s = hang
        self.world = SimWorld(world_opts, sc.actions if sc is not None else ())
        self.gate = asyncio.Semaphore(max(1, opts.connect_concurrency))
        self.nodes: dict[str, SimNode] = self.world.by_name
        self.lead = opts.shard == 0
        """Runs the scheduler's MQTT side (always, in a fleet of one process)."""
        self._sched_started = int(time.time() * 1000)
        self.sched_takeover = TakeoverWatch()
        """The scheduler's connections taken over by another client (a second simulator)."""
        self.world.narrate = self.lead
        self.spread = opts.shards > 1
        mine = [n for n in self.world.nodes
                if shard_of(n.index, opts.nodes, opts.shards) == opts.shard]
        self.others = [n for n in self.world.nodes
                       if shard_of(n.index, opts.nodes, opts.shards) != opts.shard]
        """Nodes whose agents run in other processes of a spread fleet."""
        # One state per node that outlives its agents: what --state-dir is to a real agent, so
        # a restarted simulated agent keeps its drain and its executed command ids (and, with
        # ``state_dir``, a restarted simulator too).
        where = opts.state_dir
        self.states: dict[str, StateStore] = {
            n.node_id: StateStore() if where is None
            else StateStore(state_file(where, n.node_id), n.node_id, durable=False)
            for n in mine}
        self.telemetry_clock = TelemetryClock()
        """Every agent's telemetry slots on one timer (agents/sim/clock.py)."""
        self.retry_log = RetryLog(url, len(mine))
        self.agents: dict[str, SimAgent] = {n.node_id: self._new_agent(n) for n in mine}
        self._inputs: list[tuple[int, int, dict[str, Any]]] = []
        """Spread fleet: (tick, seq, input) to apply before that world step."""
        self._input_seq = 0
        """Another process of a spread fleet: the last of the lead's inputs taken."""
        self._sent = _Sent(ctl_topic(opts.cluster) if self.lead
                           else ctl_up_topic(opts.cluster, opts.shard))
        """A spread fleet: what this process sent on its retained window (``_put_window``):
        the lead's stamps, another process's drains."""
        self._up_taken: dict[int, int] = {}
        """The lead of a spread fleet: per other process, the last of its drains taken."""
        self.bad_inputs = 0
        """Control inputs refused as malformed (each logged with its topic)."""
        if self.spread and where is not None:
            # A drain restored from the state dir reaches this copy of the world from its own
            # agent only (``NodeAgent`` tells its source at construction, before ``relay``):
            # every other process's agents' drains are read here, so each copy starts with
            # the same nodes out of service (the lead's placed work on another process's
            # drained node, and the copies diverged).
            for n in self.others:
                if (kept := kept_drain(state_file(where, n.node_id))) is not DrainState.NONE:
                    self.world.apply_drain(n.node_id, kept, DrainMode.FINISH)
        if self.spread:
            self.world.relay = self._relay_drain
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._outbox: asyncio.Queue[tuple[str, bytes | _Waiting, bool]] = asyncio.Queue()
        """What the scheduler's client publishes, in order; a ``_Waiting``: a retained
        message that a newer one of its topic and phase may still replace (``_put_retained``)."""
        self._latest: dict[str, _Waiting] = {}
        """The last retained message queued and not yet sent, by topic: a newer one of the same
        phase replaces it in place. Each job's status went out once per tick, one QoS 1 round
        trip each: on a loaded machine (or with short ticks) the lead published them slower
        than its ticks made them, and an ``inject`` answer queued behind thousands of stale
        statuses never came (``sim --procs 2``, a drill: no answer in 60 s)."""
        self.sched_guard = CommandGuard("sched", opts.command_key,
                                        lambda: int(time.time() * 1000))
        self.sched_connected = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._sched_beat = time.monotonic()
        """When the scheduler's presence was last published (``SCHED_HEARTBEAT_S``)."""
        self._inject_answers: dict[str, bytes] = {}
        """The lead: the answers to the last ``INJECT_ANSWERS_KEPT`` injection ids, oldest
        first: ``fleetdeck inject`` sends one again until answered (``inject``), and a repeated
        id is answered from here, never injected twice."""
        self._kills: set[asyncio.Task[None]] = set()
        """kill_agent tasks started by tick(): kept (the loop holds tasks only weakly) and
        observed, never left to end unretrieved."""

    def _new_agent(self, node: SimNode) -> SimAgent:
        agent = self.agent_class(
            cluster=self.opts.cluster, node_id=node.node_id, source=node, url=self.url,
            interval_s=self.opts.interval_s, keepalive=self.opts.keepalive,
            connect_gate=self.gate, connect_spacing_s=self.opts.connect_spacing_s,
            phase_s=node.offset_s, command_key=self.opts.command_key,
            state=self.states[node.node_id], mqtt_lib=self.opts.mqtt_lib,
            telemetry_clock=self.telemetry_clock, **self.opts.agent_kwargs,
        )
        agent.on_retry = self.retry_log
        agent.on_takeover = self.retry_log.takeover
        return agent

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        if self.opts.tune_gc:
            # CPython's own full collections (the console has none but its tick's sweep): the
            # simulator has no tick to sweep from, and cycles made later, by reconnects and
            # killed agents, must stay collectable in a long simulation.
            tune_gc(console=False)
        for name, agent in self.agents.items():
            self._tasks[name] = asyncio.create_task(agent.run(stop), name=f"agent-{name}")
        sched = asyncio.create_task(self._sched_loop(stop), name="sched")
        ticker = asyncio.create_task(self._tick_loop(stop), name="tick")
        freezer = (asyncio.create_task(self._freeze_when_connected(stop), name="gc-freeze")
                   if self.opts.tune_gc else None)
        await stop.wait()
        # Agents see the same stop event: they publish offline and disconnect cleanly.
        _, stuck = await asyncio.wait(self._tasks.values(), timeout=STOP_GRACE_S)
        # Seen with 1,024 agents on Python 3.11: a few sessions never end because a cancelled
        # publish swallowed its cancellation (asyncio.wait_for race, fixed in 3.12), leaving
        # the agent's telemetry task running. Cancel those again rather than hang the exit.
        for _ in range(5):
            if not stuck:
                break
            log.warning("%d agents did not stop in time; cancelling them", len(stuck))
            for task in stuck:
                task.cancel()
            _, stuck = await asyncio.wait(stuck, timeout=2.0)
        # The scheduler loop watches ``stop`` too, but on 3.11 a cancelled publish can swallow
        # its cancellation (see above): cancel again, bounded, rather than hang the exit.
        self.telemetry_clock.close()
        rest = {ticker, sched, *self._kills, *([freezer] if freezer is not None else [])}
        for _ in range(5):
            for task in rest:
                task.cancel()
            _, rest = await asyncio.wait(rest, timeout=1.0)
            if not rest:
                break
        else:
            log.warning("%d simulator tasks did not stop; leaving them", len(rest))

    async def _freeze_when_connected(self, stop: asyncio.Event) -> None:
        """Once every agent is connected, freeze what the sessions built (sockets, transports,
        clients): state that lives as long as the fleet, out of the GC's scans."""
        everyone: asyncio.Future[Any] = asyncio.gather(
            *(a.connected.wait() for a in self.agents.values()))
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({everyone, stopping}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for fut in (everyone, stopping):
                fut.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await everyone
        if not stop.is_set():
            gc.collect(0)
            gc.freeze()

    def connected_count(self) -> int:
        return sum(1 for a in self.agents.values() if a.connected.is_set())

    async def report_connects(self, stop: asyncio.Event, report: ConnectReport) -> None:
        """Call ``report(connected, total)`` every ``CONNECT_REPORT_S`` until every agent of
        this process is connected (once more then), or until ``stop``."""
        total = len(self.agents)
        while not stop.is_set():
            done = self.connected_count()
            report(done, total)
            if done >= total:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), CONNECT_REPORT_S)

    async def wait_connected(self, timeout: float) -> None:
        await asyncio.wait_for(
            asyncio.gather(*(a.connected.wait() for a in self.agents.values()),
                           self.sched_connected.wait()), timeout
        )

    async def _tick_loop(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        # A spread fleet ticks on the wall clock from the shared epoch, so every process takes
        # step k at the same moment; one process keeps the monotonic clock.
        clock = time.time if self.spread else loop.time
        start = self.world.epoch_ms / 1000 if self.spread else loop.time()
        k = 0
        behind_from: int | None = None
        while not stop.is_set():
            self.tick()
            k += 1
            delay = start + k * self.opts.interval_s - clock()
            # Starved for more than a tick, the ticks missed run back to back: sim time stays
            # the clock's, and a spread fleet's processes reach the tick an input is stamped
            # for together (``_stamp``). Said once when it falls behind and once when caught
            # up: a warning per tick caught up was 60 lines at each start of ``sim --procs 2
            # --interval 0.05``, thousands after a long stall.
            if delay < -self.opts.interval_s:
                if behind_from is None:
                    behind_from = k
                    log.warning("sim tick %d ran %.1f s late; running the ticks missed back "
                                "to back", k, -delay)
            elif behind_from is not None:
                log.warning("sim ticks caught up: %d ran late, back to back", k - behind_from)
                behind_from = None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, delay))

    def tick(self) -> None:
        """One world step, then hand its effects to MQTT (outbox) and to the agents."""
        world = self.world
        if self._inputs:
            self._apply_inputs()
        world.step()
        for node in self.others:
            if node.needs_shadow():
                node.read(0.0)
                node.take_events()
        if self.sched_takeover.ended():
            log.warning("scheduler: connected to the MQTT broker at %s for %g s now: the "
                        "takeovers stopped", self.url, self.sched_takeover.end_s)
        if self.lead:
            if (self.sched_connected.is_set()
                    and time.monotonic() - self._sched_beat >= SCHED_HEARTBEAT_S):
                # Its presence again: a console tells a job that stopped stepping from a
                # scheduler that went quiet by hearing the scheduler (docs/protocol.md).
                self._sched_beat = time.monotonic()
                self._put_retained(topic_for(self.opts.cluster, Kind.SCHED_STATUS),
                                   self._sched_status(online=True))
            for st in world.scheduler.updates(world.t):
                self._put_retained(topic_for(self.opts.cluster, Kind.JOB, st.job_id),
                                   codec.encode(st), _job_phase(st))
        self._take_acks()
        if self.retry_log.outage_since is not None and all(
                a.connected.is_set() and not a.takeover.active
                for name, a in self.agents.items()
                if self.nodes[name].agent_alive):  # a killed agent is a fault, not the link
            # Not while connections are still taken over: each comes back in a second, and
            # "all connected again" mid-fight read as the end of it.
            for a in self.agents.values():
                a.takeover.ended()
            self.retry_log.back()
        # One step's ops of a node come down to what the last one leaves (a kill, a start, or
        # a kill then a start: a restart, whose start waits for the kill). Run one by one, a
        # kill, start, kill of a node in one step left its agent running: the second kill ran
        # before the restart's start (a review).
        wanted: dict[str, tuple[bool, bool]] = {}
        for op in world.take_agent_ops():
            if op.node not in self.agents and op.node not in self.states:
                continue  # its agent lives in another process of the fleet
            killed, _started = wanted.get(op.node, (False, False))
            wanted[op.node] = (True, False) if op.op == "kill" else (killed, True)
        for name, (kill, start) in wanted.items():
            if not kill:
                self.start_agent(name)
                continue
            task = asyncio.get_running_loop().create_task(
                self._kill_then_start(name) if start else self.kill_agent(name),
                name=f"kill-{name}")
            self._kills.add(task)
            task.add_done_callback(self._kill_done)

    async def _kill_then_start(self, name: str) -> None:
        await self.kill_agent(name)
        self.start_agent(name)

    def _kill_done(self, task: "asyncio.Task[None]") -> None:
        self._kills.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("killing an agent failed: %s", task.exception())

    def _take_acks(self) -> None:
        acks = self.world.scheduler.take_acks()
        if self.lead:  # the other copies of the scheduler keep quiet
            for ack in acks:
                self._send_ack(ack)

    # --- inputs of a spread fleet -------------------------------------------------------------

    def _stamp(self, entry: dict[str, Any]) -> None:
        """Lead process: schedule an input for every copy of the world, this one included.

        Sent as the retained window of the last ``CTL_KEEP`` inputs stamped: one input a
        message (QoS 1, not retained), an input stamped while another process's client made
        its connection again went to nobody there (a clean session), and that copy of the
        cluster never had it (a fault injected for one of its nodes never showed). The broker
        hands the window to the process when it subscribes again, and it takes what it has
        not taken yet (``_on_window``)."""
        self._add_input(self._sent.add({"tick": self.world.ticks + CTL_LAG_TICKS, **entry}))
        self._put_window()

    def _put_window(self) -> None:
        """Queue this process's window (``_Sent``). One still waiting is replaced while the
        new one still holds the first input that one brings, else this one is queued behind
        it: a burst of inputs (a rack's drains) goes out whole, a window at a time, none left
        out."""
        sent = self._sent
        inputs = [entry for entry, _ in sent.kept]
        waiting = self._latest.get(sent.topic)
        if waiting is None or not inputs or inputs[0]["seq"] > sent.first_new:
            sent.first_new = inputs[-1]["seq"] if inputs else 0
        window = {"run": self.world.epoch_ms, "inputs": inputs}
        self._put_retained(sent.topic, json.dumps(window).encode(), ("ctl", sent.first_new))

    def _add_input(self, stamped: dict[str, Any]) -> None:
        self._inputs.append((int(stamped["tick"]), int(stamped["seq"]), stamped))
        self._inputs.sort(key=lambda x: (x[0], x[1]))

    def _relay_drain(self, node_id: str, state: DrainState, mode: DrainMode) -> None:
        entry = {"k": "drain", "node": node_id, "state": state.value, "mode": mode.value}
        if self.lead:
            self._stamp(entry)
            return
        # A retained window too, as the lead's inputs: sent once, QoS 1 and not retained, a
        # drain sent while the lead's connection was away went to nobody there (a clean
        # session), no copy of the scheduler had it, and work was placed on the drained node.
        self._sent.add(entry)
        self._put_window()

    def _apply_inputs(self) -> None:
        world = self.world
        while self._inputs and self._inputs[0][0] <= world.ticks:
            tick, _, entry = self._inputs.pop(0)
            if tick < world.ticks:
                log.warning("input %s arrived %d tick(s) late: this process's copy of the "
                            "cluster may differ from the others", entry.get("k"),
                            world.ticks - tick)
            try:
                self._apply_input(entry)
            except (SpecError, codec.DecodeError, KeyError, ValueError, TypeError) as err:
                log.warning("input %s not applied: %s", entry.get("k"), err)

    def _apply_input(self, entry: dict[str, Any]) -> None:
        kind = entry["k"]
        world = self.world
        if kind == "inject":
            world.inject(parse_action(dict(entry["action"]), default_at=world.t))
        elif kind == "cmd":
            cmd = codec.decode(Command, str(entry["cmd"]).encode())
            world.scheduler.command(cmd, int(entry["now_ms"]))
            self._take_acks()
        elif kind == "drain":
            world.apply_drain(str(entry["node"]), DrainState(entry["state"]),
                              DrainMode(entry["mode"]))
        else:
            raise ValueError(f"unknown input kind {kind!r}")

    def _on_ctl(self, topic: str, payload: bytes) -> None:
        """A window of inputs from the network (``_Sent``: the lead's stamps, or another
        process's drains for the lead): each input not taken yet, checked before it touches
        the world; anything else is logged with its topic and dropped."""
        inputs = self._window(topic, payload)
        if inputs is None:
            return
        if topic == ctl_topic(self.opts.cluster):
            self._input_seq = self._take(
                topic, inputs, self._input_seq, self._add_input,
                "inputs {} to {} stamped by the lead process never reached this one",
                "this process's copy of the cluster may differ from the others")
            return
        shard = topic.rpartition("/")[2]
        if not (shard.isdigit() and 0 < int(shard) < self.opts.shards):
            self._bad_input(topic, f"no process {shard!r} in this fleet")
            return
        self._up_taken[int(shard)] = self._take(
            topic, inputs, self._up_taken.get(int(shard), 0), self._stamp_drain,
            f"drains {{}} to {{}} of simulator process {int(shard) + 1} never reached the lead "
            "process", "no copy of the cluster has them")

    def _window(self, topic: str, payload: bytes) -> list[Any] | None:
        """The inputs of a window (``_Sent``); None when there are none of this run's: one
        cleared on a clean stop, one of another run, or a malformed one (counted)."""
        if not payload:
            return None  # its sender cleared it on a clean stop
        try:
            raw: Any = json.loads(payload)
            if not (isinstance(raw, dict) and isinstance(raw.get("run"), int)
                    and isinstance(raw.get("inputs"), list)):
                raise ValueError("not a window of simulator inputs")
        except ValueError as err:
            self._bad_input(topic, str(err))
            return None
        if raw["run"] != self.world.epoch_ms:
            # Retained by an earlier run of the fleet that did not stop cleanly (or another
            # simulator's on this cluster): its ticks and sequence numbers are not ours.
            log.debug("simulator: skipped the inputs of another run on %s", topic)
            return None
        return cast(list[Any], raw["inputs"])

    def _take(self, topic: str, inputs: list[Any], taken: int,
              use: Callable[[dict[str, Any]], None], lost: str, so: str) -> int:
        """Hand each input of a window numbered after ``taken`` to ``use``, in order; one met
        again (the window is sent whole each time) is skipped. Returns the last taken. ``lost``
        (the first and last missed) and ``so``: what a gap in the numbers is said as."""
        stamped = topic == ctl_topic(self.opts.cluster)
        for entry in inputs:
            try:
                checked = self._checked_input(entry)
                seq = checked.get("seq")
                if not isinstance(seq, int) or (stamped and not isinstance(checked.get("tick"),
                                                                         int)):
                    raise ValueError("no tick/seq stamp" if stamped else "no seq")
                if seq <= taken:
                    continue
                use(checked)
            except ValueError as err:
                self._bad_input(topic, str(err))
                continue
            if seq > taken + 1:
                log.warning("simulator: %s (away while more were sent than the window holds: "
                            "the last %d, %d KiB at most): %s", lost.format(taken + 1, seq - 1),
                            CTL_KEEP, CTL_KEEP_BYTES // 1024, so)
            taken = seq
        return taken

    def _stamp_drain(self, entry: dict[str, Any]) -> None:
        """The lead: a drain another process sent up, stamped for every copy of the world."""
        if entry["k"] != "drain":
            raise ValueError("only drains go to the lead process")
        self._stamp({k: entry[k] for k in ("k", "node", "state", "mode")})

    def _bad_input(self, topic: str, why: str) -> None:
        self.bad_inputs += 1
        log.warning("simulator: dropped a malformed input on %s: %s", topic, why)

    def _checked_input(self, raw: Any) -> dict[str, Any]:
        """``raw`` when it is a simulator input, checked before it touches the world; else
        ValueError."""
        if not isinstance(raw, dict) or raw.get("k") not in ("inject", "cmd", "drain"):
            raise ValueError("not a simulator input")
        if raw["k"] == "drain":
            if str(raw.get("node")) not in self.nodes:
                raise ValueError(f"no node {raw.get('node')!r}")
            DrainState(str(raw.get("state")))
            DrainMode(str(raw.get("mode")))
        return raw

    def _put_retained(self, topic: str, payload: bytes, phase: object = None) -> None:
        """Queue a retained message; the last one of its topic still waiting is replaced in
        its place when it is of the same ``phase`` (a job's state and requeues: only the
        newest step is worth sending), else this one is queued behind it. Every state a job
        went through is still said: a console books an interruption from R -> NF with the
        reason naming the rank's node and XID, which RQ keeps and PD does not
        (console/interruptions.py), and its timeline, the store's events and a recording
        keep each change; coalesced across phases, a backlog turned R, NF, RQ, PD into
        "R -> PD (Resources)"."""
        waiting = self._latest.get(topic)
        if waiting is not None and waiting.phase == phase:
            waiting.payload = payload
            return
        self._latest[topic] = waiting = _Waiting(payload, phase)
        self._outbox.put_nowait((topic, waiting, True))

    def _send_ack(self, ack: Ack) -> None:
        self.sched_guard.remember(ack)
        self._outbox.put_nowait((topic_for(self.opts.cluster, Kind.SCHED_ACK), codec.encode(ack),
                                 False))

    async def kill_agent(self, name: str) -> None:
        """Agent death: drop the connection without DISCONNECT so the broker fires the will."""
        agent = self.agents.get(name)
        if agent is None:
            return  # another process of the fleet runs it
        task = self._tasks.pop(name, None)
        client = agent.client
        if isinstance(client, GmqttSession):
            client.abort()
            lost = client.lost
            if lost is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(asyncio.shield(lost), KILL_GRACE_S)
        elif client is not None:
            paho = client._client  # aiomqtt keeps the paho client private; no public way
            sock = paho.socket()
            if isinstance(sock, socket.socket):  # ssl.SSLSocket included
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
            # paho notices the dead socket on its next read and resolves this future.
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(client._disconnected), KILL_GRACE_S)
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        agent.connected.clear()
        log.info("agent of %s killed", name)

    def start_agent(self, name: str) -> None:
        """A fresh agent process for the node (new session, new bdSeq); its drain comes back
        from the node's state (``self.states``), as a real agent's comes from its state dir."""
        if (name in self._tasks or name not in self.states or self._stop is None
                or self._stop.is_set()):
            return
        agent = self._new_agent(self.nodes[name])
        self.agents[name] = agent
        self._tasks[name] = asyncio.get_running_loop().create_task(
            agent.run(self._stop), name=f"agent-{name}")
        log.info("agent of %s started", name)

    # --- scheduler + injection client ---------------------------------------------------------

    async def _sched_loop(self, stop: asyncio.Event) -> None:
        cluster = self.opts.cluster
        if self.lead:
            name = f"fd-{cluster}-sched"
            # Job statuses too: those left retained by an earlier scheduler that this one
            # does not run are cleared (_clear_foreign_job), or consoles show them running.
            topics = [topic_for(cluster, Kind.SCHED_CMD), inject_topic(cluster),
                      topic_for(cluster, Kind.JOB, "+")]
            # Its presence too: another's word there is answered with its birth
            # (_on_presence), so the retained one is the live scheduler's.
            topics.append(topic_for(cluster, Kind.SCHED_STATUS))
            if self.spread:
                topics.append(ctl_up_topic(cluster))
        else:
            name, topics = f"fd-{cluster}-sim{self.opts.shard}", [ctl_topic(cluster)]
        stopping = asyncio.create_task(stop.wait())
        try:
            await self._sched_sessions(stop, stopping, name, topics)
        finally:
            stopping.cancel()

    async def _sched_sessions(self, stop: asyncio.Event, stopping: "asyncio.Task[Any]",
                              name: str, topics: list[str]) -> None:
        attempt = 0
        pending: tuple[str, bytes, bool] | None = None
        presence = topic_for(self.opts.cluster, Kind.SCHED_STATUS)
        takeover = self.sched_takeover
        while not stop.is_set():
            accepted = False
            will = None
            if self.lead:
                # Retained: a console started after this scheduler died learns that its jobs'
                # retained statuses are as of its death (docs/protocol.md, "Scheduler status").
                will = aiomqtt.Will(presence, self._sched_status(online=False), qos=1,
                                    retain=True)
            client = make_client(self.url, name, keepalive=SCHED_KEEPALIVE_S, will=will)
            try:
                async with self.gate:
                    await client.__aenter__()
                accepted = True
                takeover.accepted()
                try:
                    for topic in topics:
                        await client.subscribe(topic, qos=1)
                    if self.lead:
                        await client.publish(presence, self._sched_status(online=True),
                                             qos=1, retain=True)
                    for st in self.world.scheduler.last_statuses():
                        # Every job status again, as it was (its ts: when it last changed);
                        # one still queued (the same or older) is replaced in its place.
                        self._put_retained(topic_for(self.opts.cluster, Kind.JOB, st.job_id),
                                           codec.encode(st), _job_phase(st))
                    if self.spread:
                        # This run's window, even empty: it replaces one an earlier run left
                        # retained, and one a broker restarted since has lost.
                        self._put_window()
                    self.sched_connected.set()
                    attempt = 0
                    receiver = asyncio.create_task(self._receive(client))
                    try:
                        while not stop.is_set():
                            if pending is None:
                                getter = asyncio.create_task(self._outbox.get())
                                done, _ = await asyncio.wait({getter, receiver, stopping},
                                                             return_when=asyncio.FIRST_COMPLETED)
                                if getter not in done and stopping in done:
                                    getter.cancel()
                                    break
                                if getter in done:
                                    # Taken now, whatever else ended: a retained one taken
                                    # and dropped left its topic in _latest with nothing
                                    # queued, and that job's status was never sent again.
                                    topic, queued, retain = getter.result()
                                    if isinstance(queued, _Waiting):
                                        if self._latest.get(topic) is queued:
                                            del self._latest[topic]
                                        queued = queued.payload
                                    pending = (topic, queued, retain)
                                if receiver in done:
                                    getter.cancel()
                                    receiver.result()
                                    raise aiomqtt.MqttError("message loop ended")
                            assert pending is not None
                            if not await self._publish(client, pending, receiver, stopping):
                                break
                            pending = None
                    finally:
                        receiver.cancel()
                        await asyncio.gather(receiver, return_exceptions=True)
                finally:
                    self.sched_connected.clear()
                    if self.lead and stop.is_set():
                        # A clean stop sends no will: say it, or consoles keep it online.
                        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                            await asyncio.wait_for(client.publish(
                                presence, self._sched_status(online=False), qos=1,
                                retain=True), 2.0)
                    if self.spread and stop.is_set():  # the run's inputs are no one's now
                        with contextlib.suppress(aiomqtt.MqttError, TimeoutError):
                            await asyncio.wait_for(client.publish(
                                self._sent.topic, b"", qos=1, retain=True), 2.0)
                    with contextlib.suppress(aiomqtt.MqttError):
                        await client.__aexit__(None, None, None)
            except aiomqtt.MqttError as err:
                attempt += 1
                delay = min(30.0, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.0)
                # "connection lost" of a broker it never reached read as an outage.
                why = describe_mqtt_error(self.url, err).rstrip(".")
                if takeover.lost(accepted, timed_out="timed out" in str(err).lower()):
                    log.warning("scheduler: %s", takeover.sentence(
                        self.url, name, "a second simulator on this broker and cluster"))
                elif accepted and takeover.remind():
                    log.warning("scheduler: %s", takeover.reminder(self.url, name))
                elif accepted and takeover.said:
                    pass  # said once for the episode: its retries are not news
                elif attempt == 1 or attempt % 8 == 0:
                    log.warning("scheduler: %s; retrying in %.1f s", why, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _publish(self, client: aiomqtt.Client, message: tuple[str, bytes, bool],
                       receiver: "asyncio.Task[None]", stopping: "asyncio.Task[Any]") -> bool:
        """Publish one message of the outbox and wait for the broker's PUBACK: True once
        it came, False when the fleet stops first; an MqttError when the connection ends.

        Not aiomqtt's 10 s time-out: its timer runs on while the process is stopped (SIGSTOP,
        a starved host), and a publish waiting at a 10 s stall timed out on resume with its
        PUBACK already there. The lead then dropped its connection and made it again, and
        an ``inject`` published in that second reached nobody (a clean session: the lead was
        not subscribed), never answered (docs/scenarios.md). A lost connection is the end of
        the message stream (``receiver``: paho's keepalive, a PINGREQ answered within the
        keepalive of being sent, which a stall does not fake); the bound is only for a broker
        that answers pings and never the publish, longer than any stall a connection outlives
        (the broker drops a client silent for 1.5 keepalives)."""
        topic, payload, retain = message
        sending = asyncio.create_task(client.publish(topic, payload, qos=1, retain=retain,
                                                     timeout=SCHED_PUBLISH_TIMEOUT_S))
        try:
            done, _ = await asyncio.wait({sending, receiver, stopping},
                                         return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not sending.done():
                sending.cancel()
                await asyncio.gather(sending, return_exceptions=True)
        if sending in done:
            sending.result()
            return True
        if receiver in done:
            receiver.result()
            raise aiomqtt.MqttError("message loop ended")
        return False

    def _sched_status(self, online: bool) -> bytes:
        now = int(time.time() * 1000)
        return codec.encode(SchedulerStatus(
            online=online, started=self._sched_started, name="sim", ts=now,
            jobs=len(self.world.scheduler.jobs) if online else None))

    async def _receive(self, client: aiomqtt.Client) -> None:
        cmd_topic = topic_for(self.opts.cluster, Kind.SCHED_CMD)
        inj_topic = inject_topic(self.opts.cluster)
        ctl = ctl_topic(self.opts.cluster)
        up = ctl_up_topic(self.opts.cluster, "")
        job_prefix = topic_for(self.opts.cluster, Kind.JOB, "")[:-len("/status")]
        presence = topic_for(self.opts.cluster, Kind.SCHED_STATUS)
        async for message in client.messages:
            payload = message.payload if isinstance(message.payload, bytes) else b""
            topic = str(message.topic)
            if topic == cmd_topic and self.lead:
                self._on_command(payload)
            elif topic == presence and self.lead:
                if not message.retain:  # one met on subscribing: its connect's birth follows
                    self._on_presence(payload)
            elif self.lead and topic.startswith(job_prefix):
                if message.retain and payload:
                    self._clear_foreign_job(topic, topic[len(job_prefix):].partition("/")[0])
            elif topic == inj_topic and self.lead:
                self._on_inject(payload)
            elif topic == ctl or (self.lead and topic.startswith(up)):
                self._on_ctl(topic, payload)

    def _on_presence(self, payload: bytes) -> None:
        """A word on ``sched/status`` that is not this scheduler's birth (the will of a process
        it replaced, come when that one's keepalive ran out; a retained one cleared): its
        birth again on the next tick, or the retained message stays a dead process's while
        this one runs, and a console that reads only it (``status``) disagrees with one that
        heard everything (docs/protocol.md, "Scheduler status")."""
        try:
            said = codec.decode(SchedulerStatus, payload) if payload else None
        except codec.DecodeError:
            said = None
        if said is None or not said.online or said.started != self._sched_started:
            self._sched_beat = float("-inf")  # the heartbeat's path: at most once a tick

    def _clear_foreign_job(self, topic: str, job_id: str) -> None:
        """A retained status of a job this scheduler does not run (a simulator killed and
        started again): clear it, as a scheduler bridge would, so no console keeps it running
        for ever (docs/protocol.md, JobStatus)."""
        if job_id in self.world.scheduler.jobs:
            return
        log.info("scheduler: clearing the retained status of job %s (not one of this run's)",
                 job_id)
        self._put_retained(topic, b"", _CLEARED)

    def _on_command(self, payload: bytes) -> None:
        try:
            cmd = codec.decode(Command, payload)
        except codec.DecodeError as err:
            log.warning("scheduler: rejected malformed command: %s", err)
            return
        # The same rules as a node agent (agents/guard.py): a duplicate is answered from memory,
        # never acted on twice; with a key, unsigned, forged, expired and replayed commands are
        # rejected with the reason.
        answered = self.sched_guard.answered(cmd.cmd_id)
        if answered is not None:
            self._outbox.put_nowait((topic_for(self.opts.cluster, Kind.SCHED_ACK),
                                     codec.encode(answered), False))
            return
        problem = self.sched_guard.check(cmd)
        if problem:
            self._send_ack(Ack(cmd_id=cmd.cmd_id, by="sched", op=cmd.op,
                               result=AckResult.REJECTED, reason=problem,
                               ts=int(time.time() * 1000)))
            return
        self.sched_guard.executing(cmd)
        if self.spread:
            self._stamp({"k": "cmd", "cmd": payload.decode(), "now_ms": int(time.time() * 1000)})
            return
        self.world.scheduler.command(cmd, int(time.time() * 1000))
        self._take_acks()

    def _on_inject(self, payload: bytes) -> None:
        try:
            raw: Any = json.loads(payload)
            if not isinstance(raw, dict):
                raise SpecError("an injection is a JSON object")
        except ValueError:
            return
        req_id = str(raw.pop("id", ""))[:64]
        answered = self._inject_answers.get(req_id) if req_id else None
        if answered is not None:
            # Sent again by ``inject``, its answer not in yet: answered, not injected twice.
            self._outbox.put_nowait((inject_ack_topic(self.opts.cluster), answered, False))
            return
        raw.pop("at", None)
        try:
            action = parse_action(dict(raw), default_at=self.world.t)
            if self.spread:
                detail = self.world.check(action)
                self._stamp({"k": "inject", "action": raw})
            else:
                detail = self.world.inject(action)
            ok = True
        except SpecError as err:
            ok, detail = False, str(err)
        log.info("inject %s: %s", "ok" if ok else "refused", detail)
        body = json.dumps({"id": req_id, "ok": ok, "detail": detail,
                           "sim_t": self.world.t}).encode()
        if req_id:
            self._inject_answers[req_id] = body
            if len(self._inject_answers) > INJECT_ANSWERS_KEPT:
                del self._inject_answers[next(iter(self._inject_answers))]
        self._outbox.put_nowait((inject_ack_topic(self.opts.cluster), body, False))


async def run_fleet(url: BrokerURL, opts: FleetOptions,
                    on_connect: ConnectReport | None = None) -> None:
    """Run the fleet until SIGINT/SIGTERM; ``on_connect`` hears how start-up goes."""
    fleet = Fleet(url, opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    scen = f", scenario '{opts.scenario.name}'" if opts.scenario is not None else ""
    log.info("simulating %d nodes against %s%s", opts.nodes, url, scen)
    reporter = (asyncio.create_task(fleet.report_connects(stop, on_connect),
                                    name="connect-report") if on_connect else None)
    try:
        await fleet.run(stop)
    finally:
        if reporter is not None:
            reporter.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reporter


async def inject(url: BrokerURL, cluster: str, entry: dict[str, object],
                 timeout: float = 5.0) -> tuple[bool, str]:
    """Publish one injection and wait for the simulator's answer: (ok, detail); TimeoutError
    when none came within ``timeout``.

    Sent again, with the same id, every ``INJECT_RESEND_S`` while no answer came: one sent
    while the simulator's scheduler client was reconnecting (a broker restart, a takeover)
    reached nobody (a clean session) and the command said "no simulator answered" while the
    simulator ran. The simulator answers an id it has met from memory (``Fleet._on_inject``)."""
    req_id = f"inj-{int(time.time() * 1000)}-{random.randrange(16**6):06x}"
    request = json.dumps({"id": req_id, **entry}).encode()
    client = make_client(url, f"fd-{cluster}-{req_id}", timeout=timeout)
    async with client:
        await client.subscribe(inject_ack_topic(cluster), qos=1)
        async with asyncio.timeout(timeout):
            answer = asyncio.create_task(_inject_answer(client, req_id))
            try:
                while True:
                    await client.publish(inject_topic(cluster), request, qos=1)
                    done, _ = await asyncio.wait({answer}, timeout=INJECT_RESEND_S)
                    if done:
                        return answer.result()
            finally:
                answer.cancel()
                await asyncio.gather(answer, return_exceptions=True)


async def _inject_answer(client: aiomqtt.Client, req_id: str) -> tuple[bool, str]:
    """The simulator's answer to injection ``req_id``: (ok, detail)."""
    async for message in client.messages:
        payload = message.payload if isinstance(message.payload, bytes) else b""
        try:
            answer = json.loads(payload)
        except ValueError:
            continue
        if isinstance(answer, dict) and answer.get("id") == req_id:
            return bool(answer.get("ok")), str(answer.get("detail", ""))
    raise aiomqtt.MqttError("message loop ended")  # pragma: no cover (aiomqtt raises first)


SPREAD_STOP_S = STOP_GRACE_S + 20.0
"""How long the processes of a spread fleet get to stop cleanly before they are killed."""


def _shard_main(url: BrokerURL, opts: FleetOptions, log_level: str,
                connected: Any = None, lock: int | None = None) -> None:
    """One process of a spread fleet (a ``spawn`` child: a fresh interpreter). ``connected``:
    a shared integer array where this process keeps its count of connected agents, for the
    parent's start-up progress. ``lock``: the parent's ``--state-dir`` lock, inherited
    (``_Inherited``), held open until this process ends."""
    import multiprocessing
    import threading

    from fleetdeck.logs import setup_logging

    setup_logging(log_level)
    parent = multiprocessing.parent_process()
    if parent is not None:
        # The parent SIGKILLed (an OOM kill, ``kill -9``) left its workers running with no one
        # to stop them, and a restart beside them fought them for every node's session and
        # drain state (a review). Its end closes the pipe this sentinel reads: a stop as by
        # SIGTERM, its agents saying offline.
        def orphaned() -> None:
            parent.join()
            log.warning("the simulator's parent process %s ended: stopping", parent.pid)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=orphaned, name="parent-watch", daemon=True).start()

    def note(done: int, _total: int) -> None:
        connected[opts.shard] = done

    # Ctrl-C reaches the whole process group: before run_fleet installs its handlers it is a
    # KeyboardInterrupt, which must end this process quietly, not with a traceback.
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_fleet(url, opts, note if connected is not None else None))


class _Inherited:
    """A descriptor a ``spawn`` child inherits, the same open file (``DupFd``: passed at the
    child's exec, as multiprocessing passes its pipes): rebuilt there as its number."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        from multiprocessing import reduction

        return _inherited_fd, (reduction.DupFd(self.fd),)


def _inherited_fd(dup: Any) -> int:
    return int(dup.detach())


def run_spread(url: BrokerURL, opts: FleetOptions, procs: int, log_level: str = "warning",
               on_connect: ConnectReport | None = None, lock: int | None = None) -> str | None:
    """``fleetdeck sim --procs N``: the fleet in ``procs`` processes until SIGINT/SIGTERM or
    until one of them ends by itself. Returns None after a clean stop, else what went wrong
    (one sentence). Every child is stopped (SIGTERM, then SIGKILL after ``SPREAD_STOP_S``)
    before this returns, and a child whose parent ends stops itself.

    ``lock``: the ``--state-dir`` lock's descriptor (agents/state.py ``hold_sim_lock``), which
    every child inherits: a flock is the open file's, held until its last descriptor closes,
    so the lock lasts as long as any process of this fleet. Held by the parent alone (its
    descriptor close-on-exec), a parent SIGKILLed let a restart start beside its workers."""
    import dataclasses
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # no forked event loop, sockets or threads
    epoch_ms = int(time.time() * 1000)
    connected = ctx.Array("i", procs, lock=False) if on_connect is not None else None
    children = [
        ctx.Process(target=_shard_main, name=f"fleetdeck-sim-{i}", args=(
            url, dataclasses.replace(opts, shard=i, shards=procs, epoch_ms=epoch_ms),
            log_level, connected, None if lock is None else _Inherited(lock)))
        for i in range(procs)
    ]
    reported = -1
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for child in children:
            child.start()
        log.info("simulating %d nodes in %d processes (pids %s)", opts.nodes, procs,
                 ", ".join(str(c.pid) for c in children))
        while not stopping and all(c.is_alive() for c in children):
            if on_connect is not None and connected is not None and reported < opts.nodes:
                done = sum(connected)
                if done != reported:
                    on_connect(done, opts.nodes)
                    reported = done
            time.sleep(0.2)
        ended = [c for c in children if not c.is_alive()]
        for child in children:
            if child.is_alive():
                child.terminate()  # SIGTERM: the child's agents say offline and disconnect
        deadline = time.monotonic() + SPREAD_STOP_S
        for child in children:
            child.join(max(0.0, deadline - time.monotonic()))
        killed = [c for c in children if c.is_alive()]
        for child in killed:
            child.kill()
            child.join()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if killed:
        return (f"{len(killed)} simulator process(es) did not stop within {SPREAD_STOP_S:.0f} s "
                "and were killed")
    if not stopping and ended:
        first = ended[0]
        return (f"simulator process {children.index(first) + 1} of {procs} ended by itself "
                f"(exit code {first.exitcode}), so the others were stopped")
    bad = [c for c in children if c.exitcode not in (0, -signal.SIGTERM)]
    if bad:
        return f"simulator process {children.index(bad[0]) + 1} of {procs} failed (exit code " \
               f"{bad[0].exitcode})"
    return None
