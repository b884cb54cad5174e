"""A real agent process against a real Mosquitto: death, shutdown, reconnect, commands."""

import asyncio
import json
import os
import signal
import time
import uuid

import aiomqtt

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.live import LiveFeed
from fleetdeck.console.state import FleetState
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import Ack, Command, CommandArgs, CommandOp, DrainMode
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, spawn, stop_process

CLUSTER = "life"
KEEPALIVE = 2


class Watcher:
    """The console's own ingest path, live against the broker."""

    def __init__(self, url) -> None:
        self.ingest = Ingest(CLUSTER)
        self.state = FleetState(CLUSTER, self.ingest.malformed)
        self.feed = LiveFeed(url, self.ingest, client_id=f"watch-{uuid.uuid4().hex[:8]}")
        self.stop = asyncio.Event()
        self.acks: list[Ack] = []

    async def __aenter__(self) -> "Watcher":
        self.task = asyncio.create_task(self.feed.run(self.stop))
        return self

    async def __aexit__(self, *exc) -> None:
        self.stop.set()
        await self.task

    def tick(self) -> None:
        batch = self.ingest.take_batch()
        self.acks.extend(a for _rx, a in batch.acks)
        self.state.apply(batch, time.time())

    async def until(self, predicate, timeout: float = 15, message: str = "condition") -> float:
        t0 = time.monotonic()

        def check() -> bool:
            self.tick()
            return predicate(self.state)

        await eventually(check, timeout, 0.02, message)
        return time.monotonic() - t0


def node(state, node_id="gpu0001"):
    return state.nodes.get(node_id)


def is_ok(s) -> bool:
    return node(s) is not None and node(s).verdict.value == "ok"


def agent_proc(url, tmp_path, node_id="gpu0001"):
    return spawn("agent", "--broker", str(url), "--cluster", CLUSTER, "--node-id", node_id,
                 "--keepalive", str(KEEPALIVE), log=tmp_path / f"{node_id}.log")


async def test_sigkill_agent_goes_offline_within_one_and_a_half_keepalives(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    async with Watcher(mosquitto.url) as w:
        await w.until(is_ok, message="agent online")
        os.kill(proc.pid, signal.SIGKILL)
        took = await w.until(lambda s: node(s).verdict.value == "offline",
                             timeout=1.5 * KEEPALIVE, message="offline within 1.5 x keepalive")
        assert took <= 1.5 * KEEPALIVE
        assert node(w.state).reasons == ["H2"]
    proc.wait()


async def test_sigstop_hung_agent_goes_stale_then_offline(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            os.kill(proc.pid, signal.SIGSTOP)
            await w.until(lambda s: node(s).verdict.value == "stale", timeout=5,
                          message="stale after 3 missed intervals")
            # Mosquitto fires the will 1.5-3 x keepalive after the last packet (MQTT.md §3).
            await w.until(lambda s: node(s).verdict.value == "offline", timeout=4 * KEEPALIVE,
                          message="offline by keepalive")
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)


async def test_agent_continued_after_its_broker_dropped_it_comes_back_without_a_traceback(
        mosquitto, tmp_path):
    """A failure drill: SIGSTOP past the keepalive (the broker drops the agent and publishes its
    will), then SIGCONT. aiomqtt used to register a writer on the socket paho had just closed,
    and asyncio logged an "Exception in callback … Bad file descriptor" traceback before the
    reconnect (fleetdeck/brokerurl.py, _Client)."""
    proc = agent_proc(mosquitto.url, tmp_path)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            first_session = node(w.state).bd_seq
            os.kill(proc.pid, signal.SIGSTOP)
            await w.until(lambda s: node(s).online is False, timeout=4 * KEEPALIVE,
                          message="offline by keepalive (the will)")
            os.kill(proc.pid, signal.SIGCONT)
            await w.until(lambda s: node(s).bd_seq > first_session and node(s).online
                          and is_ok(s), timeout=15, message="back online in a new session")
        # The retained birth and status of the new session, as a console started now sees them.
        async with Watcher(mosquitto.url) as late:
            await late.until(lambda s: is_ok(s) and node(s).bd_seq > first_session,
                             timeout=5, message="retained birth and status of the new session")
        log = (tmp_path / "gpu0001.log").read_text()
        assert "Traceback" not in log and "Bad file descriptor" not in log, log
        lost = [line for line in log.splitlines() if "lost the connection" in line]
        assert len(lost) == 1, log
        assert lost[0].startswith("WARNING fleetdeck.agent: gpu0001: lost the connection to "
                                  "the MQTT broker at mqtt://"), lost
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        stop_process(proc)


async def test_sigterm_publishes_offline_and_exits_zero(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    async with Watcher(mosquitto.url) as w:
        await w.until(is_ok, message="agent online")
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 10) == 0
        # Published before it exited: the deadline is the watcher's, on a loaded machine.
        await w.until(lambda s: node(s).online is False, timeout=30, message="offline")
        # Its goodbye says the stop was meant: not "agent offline (Last Will)".
        assert node(w.state).stopped


async def test_agent_reconnects_after_broker_restart_with_a_new_session(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            first_session = node(w.state).bd_seq
            mosquitto.kill()
            await asyncio.sleep(1.0)
            mosquitto.start()
            await w.until(lambda s: node(s).bd_seq > first_session and is_ok(s), timeout=30,
                          message="agent back with a new bdSeq")
            assert w.feed.conn.connects >= 2
    finally:
        stop_process(proc)


async def send(url, cmd: Command) -> None:
    async with aiomqtt.Client(url.host, url.port, identifier=f"op-{uuid.uuid4().hex[:6]}",
                              protocol=aiomqtt.ProtocolVersion.V311) as c:
        await c.publish(topic_for(CLUSTER, Kind.CMD, cmd.target), codec.encode(cmd), qos=1)


def command(op: CommandOp, target="gpu0001", reason="", expires_in=30.0, cmd_id=None,
            mode=DrainMode.FINISH) -> Command:
    now = int(time.time() * 1000)
    return Command(cmd_id=cmd_id or uuid.uuid4().hex, op=op, target=target,
                   args=CommandArgs(reason=reason, mode=mode), issued_by="tester",
                   issued_at=now, expires_at=now + int(expires_in * 1000))


async def test_drain_and_resume_are_acknowledged_and_seen_in_status(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            drain = command(CommandOp.DRAIN, reason="xid 79 on gpu3")
            await send(mosquitto.url, drain)
            await w.until(lambda s: node(s).drain.state.value == "drained", message="DRAINED")
            st = node(w.state)
            assert (st.drain.reason, st.drain.requested_by) == ("xid 79 on gpu3", "tester")
            await w.until(lambda s: [a.result.value for a in w.acks
                                     if a.cmd_id == drain.cmd_id] == ["accepted", "done"],
                          message="accepted then done")
            # Same id again (QoS 1 redelivery / console retry): re-acked, not re-executed.
            await send(mosquitto.url, drain)
            await w.until(lambda s: len([a for a in w.acks if a.cmd_id == drain.cmd_id]) == 3,
                          message="duplicate re-acked")
            resume = command(CommandOp.RESUME)
            await send(mosquitto.url, resume)
            await w.until(lambda s: node(s).drain.state.value == "none", message="resumed")
            await w.until(lambda s: [e.kind for e in s.events].count("drain") == 2,
                          message="drain and resume events in the timeline")
    finally:
        stop_process(proc)


async def test_bad_commands_are_rejected_with_a_reason(mosquitto, tmp_path):
    proc = agent_proc(mosquitto.url, tmp_path)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            cases = {
                "no-reason": command(CommandOp.DRAIN, cmd_id="no-reason"),
                # Past the 60 s allowed for a console's clock behind the node's (agents/guard.py).
                "expired": command(CommandOp.DRAIN, reason="r", expires_in=-90,
                                   cmd_id="expired"),
                "job": command(CommandOp.RESTART_JOB, cmd_id="job"),
            }
            for cmd in cases.values():
                await send(mosquitto.url, cmd)
            await w.until(lambda s: {a.cmd_id for a in w.acks} >= set(cases),
                          message="all answered")
            by_id = {a.cmd_id: a for a in w.acks}
            assert all(by_id[c].result.value == "rejected" for c in cases)
            assert "reason is required" in by_id["no-reason"].reason
            assert "expired" in by_id["expired"].reason
            assert node(w.state).drain.state.value == "none"
            # A malformed command is dropped by the agent, which keeps running.
            async with aiomqtt.Client(mosquitto.url.host, mosquitto.url.port,
                                      identifier="junk") as c:
                await c.publish(topic_for(CLUSTER, Kind.CMD, "gpu0001"), b"{junk", qos=1)
            log = tmp_path / "gpu0001.log"
            await eventually(lambda: "rejected malformed command" in log.read_text(), 30,
                             message="the agent's word on the malformed command")
            w.tick()
            after = node(w.state).last_rx
            await w.until(lambda s: node(s).last_rx > after, message="telemetry after it")
            assert proc.poll() is None
    finally:
        stop_process(proc)


def test_agent_once_json_is_valid_protocol():
    from tests.conftest import run_cli

    out = json.loads(run_cli("agent", "--once", "--node-id", "n7").stdout)
    from fleetdeck.protocol.messages import Birth, Telemetry

    Birth.model_validate(out["birth"])
    Telemetry.model_validate(out["telemetry"])


async def test_a_session_task_that_failed_as_the_agent_stopped_leaves_no_traceback():
    """The command loop's "Disconnected during message iteration" of a session that a stop
    ended at the same moment (SIGTERM while the broker dropped the agent) was never taken:
    asyncio printed "Task exception was never retrieved" and a traceback into the journal
    (a real-node audit)."""
    import gc

    from fleetdeck.agents.agent import _cancel

    seen: list[str] = []
    loop = asyncio.get_running_loop()
    old = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx["message"]))
    try:
        async def commands() -> None:
            raise aiomqtt.MqttError("Disconnected during message iteration")

        task = asyncio.create_task(commands())
        await asyncio.sleep(0)
        assert task.done()
        await _cancel(task)  # the session's exit: it ends anyway
        del task
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(old)
    assert seen == []


async def test_a_session_task_that_failed_of_a_bug_is_logged_once_with_its_traceback(caplog):
    """Taking a finished session task's exception swallowed everything, a bug in the
    telemetry loop included: a session ended by a stop hid it without a word (a review). An
    ``MqttError`` (the broker dropping the client at shutdown) is still expected and quiet;
    anything else is logged once, with its traceback, however often the exit takes it."""
    import logging

    from fleetdeck.agents.agent import _cancel, _retrieved

    async def telemetry() -> None:
        raise KeyError("gpu9")

    async def commands() -> None:
        raise aiomqtt.MqttError("Disconnected during message iteration")

    bug = asyncio.create_task(telemetry(), name="gpu0001 telemetry")
    dropped = asyncio.create_task(commands(), name="gpu0001 commands")
    await asyncio.sleep(0)
    with caplog.at_level(logging.WARNING, logger="fleetdeck.agent"):
        for task in (bug, dropped):
            _retrieved(task)  # the session's end
            await _cancel(task)  # and its exit stack's
    (record,) = [r for r in caplog.records if r.name == "fleetdeck.agent"]
    assert record.levelno >= logging.WARNING
    assert "gpu0001 telemetry" in record.getMessage() and "KeyError" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is KeyError
    assert "raise KeyError" in caplog.text  # the traceback


async def test_sighup_after_a_bad_config_edit_keeps_the_agent_running_and_says_why(
        mosquitto, tmp_path):
    """An operator edits agent.toml and sends SIGHUP (``systemctl reload``, ``kill -HUP``), as
    for most daemons. SIGHUP used to end the agent at once, without a word in its journal, and
    systemd's ``Restart=on-failure`` takes a SIGHUP death for a clean stop: the node went
    offline for good (2026-12-07 drill). It now reads the file again, says what it found, and
    runs on with the settings it started with (agents/run.py, ``reread_said``). Only the file
    is read again: the environment (agent.env) and the flags are the start's, and a bare "no
    setting changed" after an edit of agent.env read as that edit taken; each line says so."""
    config = tmp_path / "agent.toml"
    config.write_text(f'broker = "{mosquitto.url}"\ncluster = "{CLUSTER}"\n'
                      'node_id = "gpu0001"\ninterval_s = 1\n')
    log = tmp_path / "agent.log"
    proc = spawn("agent", "--config", str(config), "--keepalive", str(KEEPALIVE), log=log)
    try:
        async with Watcher(mosquitto.url) as w:
            await w.until(is_ok, message="agent online")
            session = node(w.state).bd_seq
            # agent.env edited, say: the reread cannot see it, and says so.
            proc.send_signal(signal.SIGHUP)
            await eventually(lambda: "SIGHUP" in log.read_text(), 10, message="the reread said")
            said = log.read_text()
            assert ("configuration read again (SIGHUP): valid, and no setting changed; "
                    "agent.env and flags are read only at a restart") in said, said
            config.write_text(config.read_text().replace("interval_s = 1",
                                                         'interval_s = "fast"'))
            proc.send_signal(signal.SIGHUP)
            await eventually(lambda: log.read_text().count("SIGHUP") == 2, 10,
                             message="the reread said")
            said = log.read_text()
            assert "line 4, 'interval_s'" in said
            assert "runs on with the settings it started with" in said
            assert "its next start would refuse this one" in said
            assert "Traceback" not in said
            await asyncio.sleep(2 * KEEPALIVE)
            assert proc.poll() is None, "SIGHUP ended the agent"
            # Still the same session, still sampling: no will, no goodbye.
            seq = node(w.state).last_seq or 0
            await w.until(lambda s: (node(s).last_seq or 0) > seq,
                          message="samples after the SIGHUP")
            assert node(w.state).bd_seq == session and node(w.state).online
            config.write_text(config.read_text().replace('interval_s = "fast"',
                                                         "interval_s = 2"))
            proc.send_signal(signal.SIGHUP)
            await eventually(lambda: "changed: interval_s 1.0 -> 2.0" in log.read_text(), 10,
                             message="the change said")
            said = log.read_text()
            assert ("restart it to apply them (systemctl restart fleetdeck-agent); agent.env "
                    "and flags are read only at a restart") in said, said
    finally:
        assert stop_process(proc) == 0
