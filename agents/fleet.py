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
"""

import asyncio
import contextlib
import json
import logging
import random
import signal
import socket
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

import aiomqtt

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.guard import CommandGuard
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.sim.scenario import Scenario
from fleetdeck.agents.sim.spec import SpecError, parse_action
from fleetdeck.agents.sim.topology import TopologySpec
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.agents.state import StateStore
from fleetdeck.brokerurl import BrokerURL, make_client
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Ack, AckResult, Command
from fleetdeck.protocol.topics import ROOT, Kind, topic_for

log = logging.getLogger("fleetdeck.sim")

STOP_GRACE_S = 10.0
"""How long agents get to say offline and disconnect on a clean stop."""
KILL_GRACE_S = 1.0
"""How long to wait for paho to see its socket die before cancelling the agent task."""


def inject_topic(cluster: str) -> str:
    """Where ``fleetdeck inject`` publishes (simulator control, not part of protocol v1)."""
    return f"{ROOT}/{cluster}/sim/inject"


def inject_ack_topic(cluster: str) -> str:
    return f"{ROOT}/{cluster}/sim/inject/ack"


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


class SimAgent(NodeAgent):
    """A NodeAgent that remembers its live MQTT client, so the fleet can cut it off abruptly.

    A killed agent's session task is cancelled while NodeAgent._session waits on its telemetry
    and command loops, so nobody looks at how those loops ended: both fail on the dead socket
    and asyncio printed "Task exception was never retrieved" with a traceback for each. Here the
    loops keep their MQTT error instead of ending with it, the session raises it as NodeAgent
    would, and a session that ends any way at all takes its loops with it.
    """

    client: aiomqtt.Client | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loops: set[asyncio.Task[Any]] = set()
        self._loop_error: aiomqtt.MqttError | None = None

    async def _session(self, client: aiomqtt.Client, stop: asyncio.Event) -> None:
        self.client = client
        self._loop_error = None
        try:
            await super()._session(client, stop)
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
        await self._kept(super()._telemetry_loop(client, stop))

    async def _command_loop(self, client: aiomqtt.Client, announced: asyncio.Event) -> None:
        await self._kept(super()._command_loop(client, announced))


class Fleet:
    agent_class: type[SimAgent] = SimAgent

    def __init__(self, url: BrokerURL, opts: FleetOptions) -> None:
        self.url = url
        self.opts = opts
        sc = opts.scenario
        hang = opts.hang_timeout_s
        if hang is None and sc is not None:
            hang = sc.hang_timeout_s
        world_opts = WorldOptions(
            nodes=opts.nodes, prefix=opts.prefix, seed=opts.seed, interval_s=opts.interval_s,
            topology=opts.topology, background_jobs=opts.jobs,
        )
        if hang is not None:
            world_opts.hang_timeout_s = hang
        self.world = SimWorld(world_opts, sc.actions if sc is not None else ())
        self.gate = asyncio.Semaphore(max(1, opts.connect_concurrency))
        self.nodes: dict[str, SimNode] = self.world.by_name
        # One state per node that outlives its agents: what --state-dir is to a real agent, so
        # a restarted simulated agent keeps its drain and its executed command ids.
        self.states: dict[str, StateStore] = {n.node_id: StateStore() for n in self.world.nodes}
        self.agents: dict[str, SimAgent] = {n.node_id: self._new_agent(n) for n in self.world.nodes}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._outbox: asyncio.Queue[tuple[str, bytes, bool]] = asyncio.Queue()
        self.sched_guard = CommandGuard("sched", opts.command_key,
                                        lambda: int(time.time() * 1000))
        self.sched_connected = asyncio.Event()
        self._stop: asyncio.Event | None = None
        self._kills: set[asyncio.Task[None]] = set()
        """kill_agent tasks started by tick(): kept (the loop holds tasks only weakly) and
        observed, never left to end unretrieved."""

    def _new_agent(self, node: SimNode) -> SimAgent:
        return self.agent_class(
            cluster=self.opts.cluster, node_id=node.node_id, source=node, url=self.url,
            interval_s=self.opts.interval_s, keepalive=self.opts.keepalive,
            connect_gate=self.gate, connect_spacing_s=self.opts.connect_spacing_s,
            phase_s=node.offset_s, command_key=self.opts.command_key,
            state=self.states[node.node_id],
        )

    # --- lifecycle ---------------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        self._stop = stop
        for name, agent in self.agents.items():
            self._tasks[name] = asyncio.create_task(agent.run(stop), name=f"agent-{name}")
        sched = asyncio.create_task(self._sched_loop(stop), name="sched")
        ticker = asyncio.create_task(self._tick_loop(stop), name="tick")
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
        for task in (ticker, sched):
            task.cancel()
        await asyncio.gather(ticker, sched, *self._kills, return_exceptions=True)

    async def wait_connected(self, timeout: float) -> None:
        await asyncio.wait_for(
            asyncio.gather(*(a.connected.wait() for a in self.agents.values()),
                           self.sched_connected.wait()), timeout
        )

    async def _tick_loop(self, stop: asyncio.Event) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        k = 0
        while not stop.is_set():
            self.tick()
            k += 1
            delay = start + k * self.opts.interval_s - loop.time()
            if delay < -self.opts.interval_s:
                # Starved for more than a tick: keep sim time honest rather than racing.
                log.warning("sim tick %d ran %.1f s late", k, -delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, delay))

    def tick(self) -> None:
        """One world step, then hand its effects to MQTT (outbox) and to the agents."""
        world = self.world
        world.step()
        for st in world.scheduler.updates(world.t):
            self._outbox.put_nowait((topic_for(self.opts.cluster, Kind.JOB, st.job_id),
                                     codec.encode(st), True))
        for ack in world.scheduler.take_acks():
            self._send_ack(ack)
        for op in world.take_agent_ops():
            if op.op == "kill":
                task = asyncio.get_running_loop().create_task(self.kill_agent(op.node),
                                                              name=f"kill-{op.node}")
                self._kills.add(task)
                task.add_done_callback(self._kill_done)
            else:
                self.start_agent(op.node)

    def _kill_done(self, task: "asyncio.Task[None]") -> None:
        self._kills.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.warning("killing an agent failed: %s", task.exception())

    def _send_ack(self, ack: Ack) -> None:
        self.sched_guard.remember(ack)
        self._outbox.put_nowait((topic_for(self.opts.cluster, Kind.SCHED_ACK), codec.encode(ack),
                                 False))

    async def kill_agent(self, name: str) -> None:
        """Agent death: drop the connection without DISCONNECT so the broker fires the will."""
        agent = self.agents[name]
        task = self._tasks.pop(name, None)
        client = agent.client
        if client is not None:
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
        if name in self._tasks or self._stop is None or self._stop.is_set():
            return
        agent = self._new_agent(self.nodes[name])
        self.agents[name] = agent
        self._tasks[name] = asyncio.get_running_loop().create_task(
            agent.run(self._stop), name=f"agent-{name}")
        log.info("agent of %s started", name)

    # --- scheduler + injection client ---------------------------------------------------------

    async def _sched_loop(self, stop: asyncio.Event) -> None:
        attempt = 0
        pending: tuple[str, bytes, bool] | None = None
        while not stop.is_set():
            client = make_client(self.url, f"fd-{self.opts.cluster}-sched", keepalive=10)
            try:
                async with self.gate:
                    await client.__aenter__()
                try:
                    await client.subscribe(topic_for(self.opts.cluster, Kind.SCHED_CMD), qos=1)
                    await client.subscribe(inject_topic(self.opts.cluster), qos=1)
                    self.world.scheduler._published.clear()  # re-publish every job status
                    self.sched_connected.set()
                    attempt = 0
                    receiver = asyncio.create_task(self._receive(client))
                    try:
                        while True:
                            if pending is None:
                                getter = asyncio.create_task(self._outbox.get())
                                done, _ = await asyncio.wait({getter, receiver},
                                                             return_when=asyncio.FIRST_COMPLETED)
                                if receiver in done:
                                    getter.cancel()
                                    receiver.result()
                                    raise aiomqtt.MqttError("message loop ended")
                                pending = getter.result()
                            topic, payload, retain = pending
                            await client.publish(topic, payload, qos=1, retain=retain)
                            pending = None
                    finally:
                        receiver.cancel()
                        await asyncio.gather(receiver, return_exceptions=True)
                finally:
                    self.sched_connected.clear()
                    with contextlib.suppress(aiomqtt.MqttError):
                        await client.__aexit__(None, None, None)
            except aiomqtt.MqttError as err:
                attempt += 1
                delay = min(30.0, 0.5 * 2 ** min(attempt, 6)) * random.uniform(0.5, 1.0)
                log.warning("scheduler: broker connection lost (%s); retrying in %.1f s",
                            err, delay)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    async def _receive(self, client: aiomqtt.Client) -> None:
        cmd_topic = topic_for(self.opts.cluster, Kind.SCHED_CMD)
        inj_topic = inject_topic(self.opts.cluster)
        async for message in client.messages:
            payload = message.payload if isinstance(message.payload, bytes) else b""
            topic = str(message.topic)
            if topic == cmd_topic:
                self._on_command(payload)
            elif topic == inj_topic:
                self._on_inject(payload)

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
        self.world.scheduler.command(cmd, int(time.time() * 1000))
        for ack in self.world.scheduler.take_acks():
            self._send_ack(ack)

    def _on_inject(self, payload: bytes) -> None:
        try:
            raw: Any = json.loads(payload)
            if not isinstance(raw, dict):
                raise SpecError("an injection is a JSON object")
        except ValueError:
            return
        req_id = str(raw.pop("id", ""))[:64]
        raw.pop("at", None)
        try:
            action = parse_action(raw, default_at=self.world.t)
            detail = self.world.inject(action)
            ok = True
        except SpecError as err:
            ok, detail = False, str(err)
        log.info("inject %s: %s", "ok" if ok else "refused", detail)
        body = json.dumps({"id": req_id, "ok": ok, "detail": detail,
                           "sim_t": self.world.t}).encode()
        self._outbox.put_nowait((inject_ack_topic(self.opts.cluster), body, False))


async def run_fleet(url: BrokerURL, opts: FleetOptions) -> None:
    fleet = Fleet(url, opts)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    scen = f", scenario '{opts.scenario.name}'" if opts.scenario is not None else ""
    log.info("simulating %d nodes against %s%s", opts.nodes, url, scen)
    await fleet.run(stop)


async def inject(url: BrokerURL, cluster: str, entry: dict[str, object],
                 timeout: float = 5.0) -> tuple[bool, str]:
    """Publish one injection and wait for the simulator's answer: (ok, detail)."""
    req_id = f"inj-{int(time.time() * 1000)}-{random.randrange(16**6):06x}"
    client = make_client(url, f"fd-{cluster}-{req_id}", timeout=timeout)
    async with client:
        await client.subscribe(inject_ack_topic(cluster), qos=1)
        await client.publish(inject_topic(cluster), json.dumps({"id": req_id, **entry}).encode(),
                             qos=1)
        async with asyncio.timeout(timeout):
            async for message in client.messages:
                payload = message.payload if isinstance(message.payload, bytes) else b""
                try:
                    answer = json.loads(payload)
                except ValueError:
                    continue
                if isinstance(answer, dict) and answer.get("id") == req_id:
                    return bool(answer.get("ok")), str(answer.get("detail", ""))
    return False, "no answer"  # pragma: no cover (the timeout raises first)
