"""`fleetdeck sim --command-key`: every simulated agent and the simulated scheduler check
signatures like a real agent; and a restarted simulated agent keeps its drain (node state)."""

import asyncio
import time
import uuid

from fleetdeck.agents.fleet import inject
from fleetdeck.protocol import codec, signing
from fleetdeck.protocol.messages import Command, CommandArgs, CommandOp, DrainState, JobState
from fleetdeck.protocol.topics import Kind, topic_for
from tests.agent_tap import Tap, publish
from tests.conftest import spawn, stop_process

CLUSTER = "signedsim"
KEY = b"q" * 32
SCENARIO = """
[[job]]
name = "train"
nodes = 1
steps = 100000
checkpoint_every = 5
step_time = 0.5
"""


def cmd(op: CommandOp, target: str, *, reason: str = "", job: str | None = None,
        age_s: float = 0, lifetime_s: float = 60) -> Command:
    issued = int((time.time() - age_s) * 1000)
    return Command(cmd_id=f"{op.value}-{uuid.uuid4().hex[:8]}", op=op, target=target,
                   args=CommandArgs(reason=reason, job=job), issued_by="tester",
                   issued_at=issued, expires_at=issued + int(lifetime_s * 1000))


async def test_sim_with_a_command_key_rejects_unsigned_forged_expired_commands(mosquitto,
                                                                              tmp_path):
    url = mosquitto.url
    (tmp_path / "key").write_bytes(KEY)
    (tmp_path / "one-job.toml").write_text(SCENARIO)
    node_cmd = topic_for(CLUSTER, Kind.CMD, "gpu0002")
    sched_cmd = topic_for(CLUSTER, Kind.SCHED_CMD)
    async with Tap(url, CLUSTER) as tap:
        sim = spawn("sim", "--broker", str(url), "--cluster", CLUSTER, "--nodes", "2",
                    "--interval", "0.5", "--keepalive", "2", "--scenario",
                    str(tmp_path / "one-job.toml"), "--command-key", str(tmp_path / "key"),
                    log=tmp_path / "sim.log")
        try:
            def job():
                jobs = tap.of(Kind.JOB)
                return jobs[-1] if jobs else None

            await tap.until(lambda: job() is not None and job().state is JobState.R
                            and any(s.online for s in tap.statuses("gpu0002")), 30,
                            message="job running, gpu0002 online")
            job_id = job().job_id
            bad = {
                "unsigned drain": (node_cmd, cmd(CommandOp.DRAIN, "gpu0002", reason="r")),
                "unsigned restart": (sched_cmd, cmd(CommandOp.RESTART_JOB, job_id, job=job_id)),
                "forged drain": (node_cmd, signing.sign(
                    cmd(CommandOp.DRAIN, "gpu0002", reason="r"), b"not-the-key-12345678")),
                "forged restart": (sched_cmd, signing.sign(
                    cmd(CommandOp.RESTART_JOB, job_id, job=job_id), b"not-the-key-12345678")),
                "expired restart": (sched_cmd, signing.sign(
                    cmd(CommandOp.RESTART_JOB, job_id, job=job_id, age_s=90, lifetime_s=10),
                    KEY)),
            }
            for topic, c in bad.values():
                await publish(url, topic, codec.encode(c))

            def answer(c: Command):
                kind = Kind.SCHED_ACK if c.op is CommandOp.RESTART_JOB else Kind.ACK
                acks = tap.acks(c.cmd_id, kind)
                return acks[0] if acks else None

            await tap.until(lambda: all(answer(c) for _, c in bad.values()),
                            message="every bad command answered")
            reasons = {name: (answer(c).result.value, answer(c).reason)
                       for name, (_, c) in bad.items()}
            assert all(result == "rejected" for result, _ in reasons.values()), reasons
            assert "unsigned" in reasons["unsigned drain"][1]
            assert "unsigned" in reasons["unsigned restart"][1]
            assert "bad signature" in reasons["forged drain"][1]
            assert "bad signature" in reasons["forged restart"][1]
            assert "expired" in reasons["expired restart"][1]
            assert job().requeues == 0
            assert tap.statuses("gpu0002")[-1].drain.state is DrainState.NONE

            drain = signing.sign(cmd(CommandOp.DRAIN, "gpu0002", reason="signed"), KEY)
            restart = signing.sign(cmd(CommandOp.RESTART_JOB, job_id, job=job_id), KEY)
            await publish(url, node_cmd, codec.encode(drain))
            await publish(url, sched_cmd, codec.encode(restart))
            await tap.until(lambda: [a.result.value for a in tap.acks(drain.cmd_id)]
                            == ["accepted", "done"], message="signed drain done")
            await tap.until(lambda: [a.result.value for a in tap.acks(restart.cmd_id,
                                                                      Kind.SCHED_ACK)]
                            == ["accepted", "done"], 20, message="signed restart done")
            assert job().requeues == 1

            # The captured restart again: answered from memory, the job is not requeued twice.
            await publish(url, sched_cmd, codec.encode(restart))
            await tap.until(lambda: len(tap.acks(restart.cmd_id, Kind.SCHED_ACK)) == 3,
                            message="replayed restart answered")
            await asyncio.sleep(1.5)
            assert job().requeues == 1

            # A restarted simulated agent comes back with its drain, like a real one.
            bd = max(s.bdSeq for s in tap.statuses("gpu0002"))
            ok, detail = await inject(url, CLUSTER, {"fault": "agent_death", "node": "gpu0002"})
            assert ok, detail
            await tap.until(lambda: not tap.statuses("gpu0002")[-1].online, message="will")
            ok, detail = await inject(url, CLUSTER, {"fault": "agent_restart",
                                                     "node": "gpu0002"})
            assert ok, detail
            await tap.until(lambda: tap.first_status_after("gpu0002", bd) is not None,
                            message="restarted agent's first status")
            first = tap.first_status_after("gpu0002", bd)
            assert (first.drain.state, first.drain.cmd_id) == (DrainState.DRAINED,
                                                               drain.cmd_id)
        finally:
            assert stop_process(sim) == 0
    log = (tmp_path / "sim.log").read_text()
    assert "sched: rejected command" in log and "gpu0002: rejected command" in log
