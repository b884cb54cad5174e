"""Failure drill: Mosquitto restarts from a saved state older than its last word (its
persistence saved every ``autosave_interval`` and then killed, or a copy restored) and sends
every new subscriber that older state retained: a job's status of steps before, a node's status
online of a session that ended since, the birth of a node retired since.

A console that heard the newer messages took the older ones as news (2026-12-07 drill): job
4101 "interrupted … 1.5 GPU-h of work lost" and "runs again in place (step 56 -> 14)", a node
its agent had stopped cleanly read stale (H1, "check the agent"), and four retired nodes came
back as "rack004: 4 nodes fell silent … power or the rack's network" (console/ingest.py,
``Ingest._replayed``; docs/reliability.md). A replay of the console's recording says the same: it
took no recorded retain flag, and booked job 41 "interrupted" where the live console had not
(console/replay.py, ``TickFeed._handle``)."""

import asyncio
import shutil
import time
import uuid
from pathlib import Path

import aiomqtt
import pytest

from fleetdeck.broker import MOSQUITTO, ManagedBroker, mosquitto_conf
from fleetdeck.console.replay import run_headless
from fleetdeck.console.session import ConsoleSession
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, JobStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import eventually, require_binaries, run_cli, spawn, stop_process

CLUSTER = "oldsave"


def job(step: int) -> JobStatus:
    now_ms = int(time.time() * 1000)
    return JobStatus(job_id="41", name="llama-70b", user="alice", state=JobState.R,
                     nodes=["gpu0001"], gpus_per_node=8, step=step, total_steps=1000,
                     step_time_ms=1000.0, checkpoint_every=100, last_checkpoint_step=100,
                     last_checkpoint_ts=now_ms - 60_000, started_ts=now_ms - 600_000,
                     ts=now_ms)


async def publish_job(broker: ManagedBroker, status: JobStatus) -> None:
    async with aiomqtt.Client(broker.host, broker.port,
                              identifier=f"sched-{uuid.uuid4().hex[:6]}",
                              protocol=aiomqtt.ProtocolVersion.V311) as client:
        await client.publish(topic_for(CLUSTER, Kind.JOB, "41"), codec.encode(status), qos=1,
                             retain=True)


def agent(broker: ManagedBroker, node: str, log: Path):
    return spawn("agent", "--broker", str(broker.url), "--cluster", CLUSTER, "--node-id", node,
                 "--keepalive", "2", log=log)


@pytest.mark.timeout(180)
async def test_a_broker_restarted_from_an_older_saved_state_changes_nothing_heard(tmp_path):
    require_binaries("mosquitto")
    broker = ManagedBroker(MOSQUITTO, workdir=tmp_path / "mq")
    data = tmp_path / "mq" / "data"
    data.mkdir(parents=True)
    # Saving every 5 s; run as root (a container's CI), Mosquitto would drop to its own user,
    # who may not write the test's folder: ``user root`` keeps it (ignored when not root).
    broker.config = mosquitto_conf(broker.port, broker.host, data, extra="user root\n")
    saved = data / "mosquitto.db"
    broker.start()
    agents = [agent(broker, node, tmp_path / f"{node}.log") for node in ("gpu0001", "gpu0002")]
    session = ConsoleSession(CLUSTER, url=broker.url, operator="oldsave-test",
                             client_id=f"oldsave-{uuid.uuid4().hex[:6]}")
    state = session.state
    stop = asyncio.Event()
    watcher = asyncio.create_task(session.watch(stop, tick_s=0.1))
    try:
        await publish_job(broker, job(100))
        await eventually(lambda: len(state.nodes) == 2
                         and all(st.verdict.value == "ok" for st in state.nodes.values())
                         and "41" in state.jobs, 30, message="both nodes ok and job 41 heard")
        # Recorded from here on: its first keyframe holds what was heard so far.
        recording = tmp_path / "rec.jsonl"
        session.start_recording(recording)
        # The broker saves every 5 s (fleetdeck.broker.mosquitto_conf): this copy holds both
        # nodes online and job 41 at step 100.
        copied_at = time.time()
        await eventually(lambda: saved.exists() and saved.stat().st_mtime > copied_at + 0.5, 15,
                         message="the broker's autosave")
        old = tmp_path / "old.db"
        shutil.copy(saved, old)

        # Then the fleet moves on: the job steps, gpu0001's agent is stopped, gpu0002 retired.
        await publish_job(broker, job(150))
        assert stop_process(agents[0]) == 0
        assert stop_process(agents[1]) == 0
        retired = await asyncio.to_thread(
            run_cli, "retire", "gpu0002", "--reason", "decommissioned", "--broker",
            str(broker.url), "--cluster", CLUSTER, "--audit-log", str(tmp_path / "audit.jsonl"))
        assert retired.returncode == 0, retired.stderr
        await eventually(lambda: state.jobs["41"].step == 150 and "gpu0002" not in state.nodes
                         and state.nodes["gpu0001"].online is False
                         and state.nodes["gpu0001"].stopped, 30,
                         message="the job at step 150, gpu0001 stopped, gpu0002 retired")

        # The broker dies and comes back from the older copy.
        feed = session.feed
        assert feed is not None
        connects, received = feed.conn.connects, feed.received
        broker.kill()
        shutil.copy(old, saved)
        broker.start()
        # What the broker holds comes with the subscription: job 41's status, gpu0001's birth
        # and status, gpu0002's; then a few ticks to apply it.
        await eventually(lambda: feed.conn.connects > connects and feed.conn.state == "connected"
                         and feed.received >= received + 5, 30,
                         message="the console back on the restarted broker, its state heard")
        await asyncio.sleep(1.5)
        assert state.jobs["41"].step == 150
        assert "gpu0002" not in state.nodes
        gpu0001 = state.nodes["gpu0001"]
        assert gpu0001.online is False and gpu0001.stopped
        assert session.interruptions.pending == [] and session.interruptions.total == []
        lines = [line.text for _n, line in session.log]
        assert not [t for t in lines if "interrupted" in t or "runs again" in t], lines
        assert session.ingest.replayed == 4  # job 41, gpu0001's status, gpu0002's two
        session.stop_recording()

        # Its replay, the recorded retain flags read, hears the same: nothing taken as news.
        for every_sample in (False, True):
            run = run_headless(recording, every_sample=every_sample)
            replayed = run.session
            assert replayed.state.jobs["41"].step == 150
            assert "gpu0002" not in replayed.state.nodes
            assert replayed.state.nodes["gpu0001"].online is False
            assert replayed.interruptions.total == []
            said = [line.text for _n, line in replayed.log]
            assert not [t for t in said if "interrupted" in t or "runs again" in t], said
            assert run.feed.ingest.replayed == 4
    finally:
        stop.set()
        await watcher
        for proc in agents:
            stop_process(proc)
        broker.close()
