"""``fleetdeck drain|resume|restart-job`` against a real Mosquitto and ``fleetdeck sim``."""

import asyncio
import json
import signal
import subprocess
import time

import pytest

from fleetdeck.broker import free_port
from fleetdeck.brokerurl import make_client
from fleetdeck.hostlist import compress, expand
from fleetdeck.protocol import codec
from fleetdeck.protocol.messages import JobState, JobStatus
from fleetdeck.protocol.topics import Kind, topic_for
from tests.conftest import fleetdeck_cmd, run_cli, spawn, stop_process


@pytest.fixture
def sim(mosquitto, tmp_path):
    proc = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "cli", "--nodes", "4",
                 "--interval", "0.5", "--jobs", "1", "--seed", "3", log=tmp_path / "sim.log")
    time.sleep(2.0)
    yield mosquitto
    stop_process(proc)


def cli(broker, audit, *args, timeout=60):
    return run_cli(*args, "--broker", str(broker.url), "--cluster", "cli", "--operator", "carol",
                   "--audit-log", str(audit), timeout=timeout)


def test_drain_resume_and_rejections(sim, tmp_path):
    audit = tmp_path / "audit.jsonl"
    out = cli(sim, audit, "drain", "gpu[0001-0004]", "--reason", "switch swap OPS-9",
              "--now", "--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "dry run: nothing sent" in out.stdout
    assert "blast radius: 4 nodes, 32 GPUs" in out.stdout
    assert not audit.exists() or audit.read_text() == ""  # nothing requested, nothing audited
    out = cli(sim, audit, "drain", "gpu[0001-0004]", "--reason", "switch swap OPS-9",
              "--now", "--timeout", "30")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "blast radius: 4 nodes, 32 GPUs" in out.stdout
    assert "drain gpu[0001-0004]: 4 done" in out.stdout and "DRAINED" in out.stdout
    # resume --dry-run, as drain's and restart-job's (a newcomer read the README so).
    out = cli(sim, audit, "resume", "gpu[0001-0004]", "--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("dry run: nothing sent\nblast radius: 4 nodes, 32 GPUs "
                                 "given back"), out.stdout
    out = cli(sim, audit, "resume", "gpu[0001-0004]", "--timeout", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "back in service" in out.stdout
    # A node in service already: said before sending, and the outcome does not claim a return.
    out = cli(sim, audit, "resume", "gpu0002", "--timeout", "20")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "blast radius: 1 node, none drained: nothing given back to the scheduler\n" \
        in out.stdout
    assert "note: not drained: gpu0002" in out.stdout
    assert "gpu0002: done (in service, was not drained)" in out.stdout, out.stdout
    out = cli(sim, audit, "drain", "gpu9999", "--reason", "x")
    assert out.returncode == 2 and "unknown node" in out.stderr
    # --no-wait: the trail says how far it got when the CLI stopped following it.
    out = cli(sim, audit, "drain", "gpu0004", "--reason", "bad fan", "--no-wait")
    assert out.returncode == 0, out.stdout + out.stderr
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records][:-1] == ["requested", "done", "requested", "done",
                                                    "requested", "done", "refused",
                                                    "requested"]
    # An idle node may drain before the CLI leaves: then its outcome is done.
    last = records[-1]
    assert (last["outcome"], "--no-wait" in last["detail"]) in {("acknowledged", True),
                                                               ("done", False)}, last
    assert records[0]["who"] == "carol" and records[0]["why"] == "switch swap OPS-9"
    assert records[0]["targets"] == "gpu[0001-0004]" and records[0]["args"]["mode"] == "now"


def test_a_drain_of_a_node_drained_for_the_same_reason_sends_nothing(sim, tmp_path):
    """`drain gpu0004 --reason again --now` on a node drained already said "note: already
    drained: gpu0004", sent the drain and said "1 done": what it changed was not said (Slurm
    replaces the reason), nor that the same reason changes nothing."""
    audit = tmp_path / "audit.jsonl"
    out = cli(sim, audit, "drain", "gpu0004", "--reason", "first", "--timeout", "30")
    assert out.returncode == 0, out.stdout + out.stderr
    out = cli(sim, audit, "drain", "gpu0004", "--reason", "again", "--now", "--timeout", "30")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "note: gpu0004 is already drained (reason 'first' by carol): this replaces its " \
        "reason\n" in out.stdout, out.stdout
    assert "drain gpu0004: 1 done" in out.stdout
    out = cli(sim, audit, "drain", "gpu0004", "--reason", "again", "--now", "--timeout", "30")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.endswith("note: gpu0004 is already drained for this reason by carol: "
                               "nothing changes on it\ndrain gpu0004: nothing sent: already "
                               "drained for this reason\n"), out.stdout
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["requested", "done", "requested", "done"]


def test_restart_job_says_what_the_requeue_costs_and_dry_run_sends_nothing(sim, tmp_path):
    """restart-job sent with no word of the GPU-hours a requeue throws away (drain and the
    TUI's dialog say them) and had no --dry-run."""
    audit = tmp_path / "audit.jsonl"
    status = run_cli("status", "--broker", str(sim.url), "--cluster", "cli", "--json")
    job = next(n["job"] for n in json.loads(status.stdout)["nodes"] if n["job"])
    out = cli(sim, audit, "restart-job", job, "--reason", "retry", "--dry-run")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("dry run: nothing sent\nblast radius: "), out.stdout
    assert f"  job {job} " in out.stdout and "since last checkpoint lost" in out.stdout
    assert not audit.exists() or audit.read_text() == ""  # nothing requested, nothing audited
    out = cli(sim, audit, "restart-job", job, "--reason", "retry", "--timeout", "30")
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("blast radius: "), out.stdout
    assert f"restart job {job}: 1 done" in out.stdout


def test_commands_refused_before_they_are_sent_are_audited(sim, tmp_path):
    """An unknown node, a bad host list, a broker that is not there: the command is never
    sent, the CLI says so in one sentence with its usual exit code, and the attempt is in the
    audit trail as ``refused`` with the reason (before, it left no trace)."""
    audit = tmp_path / "audit.jsonl"
    out = cli(sim, audit, "drain", "gpu9999", "--reason", "bad fan OPS-12", "--now")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "unknown node(s) gpu9999" in out.stderr
    out = cli(sim, audit, "resume", "gpu[0001-", "--reason", "fixed")
    assert out.returncode == 2 and "bad hostlist" in out.stderr
    down = f"mqtt://127.0.0.1:{free_port()}"
    for args in (("restart-job", "4102", "--reason", "retry"),
                 ("drain", "gpu0001", "--reason", "x")):
        res = run_cli(*args, "--broker", down, "--cluster", "cli", "--operator", "carol",
                      "--audit-log", str(audit), "--timeout", "5")
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1, res.stderr
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["outcome"], r["what"], r["targets"], r["who"]) for r in records] == [
        ("refused", "drain", "gpu9999", "carol"), ("refused", "resume", "gpu[0001-", "carol"),
        ("refused", "restart_job", "job 4102", "carol"), ("refused", "drain", "gpu0001", "carol")]
    assert records[0]["detail"].startswith("unknown node(s) gpu9999")
    assert records[0]["why"] == "bad fan OPS-12" and records[0]["args"] == {"mode": "now"}
    assert records[1]["detail"].startswith("bad hostlist")
    assert "127.0.0.1" in records[2]["detail"]
    assert len({r["request_id"] for r in records}) == 4


async def test_a_restart_of_a_job_the_scheduler_never_published_is_refused_unsent(sim,
                                                                                   tmp_path):
    """It used to be sent anyway, rejected by the scheduler and audited requested + rejected:
    now it is refused like a drain of an unknown node (one sentence, exit 2, ``refused``) and
    nothing reaches sched/cmd."""
    audit = tmp_path / "audit.jsonl"
    seen: list[bytes] = []
    async with make_client(sim.url, "sched-cmd-watch") as watch:
        await watch.subscribe(topic_for("cli", Kind.SCHED_CMD), qos=1)

        async def collect() -> None:
            async for message in watch.messages:
                seen.append(bytes(message.payload))  # type: ignore[arg-type]

        collector = asyncio.create_task(collect())
        try:
            out = await asyncio.to_thread(cli, sim, audit, "restart-job", "999", "--reason",
                                          "retry", "--timeout", "10")
            await asyncio.sleep(1.0)  # a command sent at the last moment would arrive by now
        finally:
            collector.cancel()
    assert out.returncode == 2, out.stdout + out.stderr
    # The running jobs are named, to type one of them (a newcomer's 3 a.m. run).
    assert out.stderr == ("fleetdeck restart-job: unknown job 999: the scheduler has "
                          "published no such job on cluster 'cli' (running there: 4101; wrong "
                          "--cluster or job id?)\n"), out.stderr
    assert "requested" not in out.stdout and seen == []
    out = await asyncio.to_thread(cli, sim, audit, "restart-job", "job4101", "--reason", "retry",
                                  "--dry-run", "--timeout", "10")
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr == ("fleetdeck restart-job: unknown job job4101: the scheduler has "
                          "published no such job on cluster 'cli' (did you mean 4101?)\n")
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["outcome"], r["what"], r["targets"], r["why"]) for r in records] == [
        ("refused", "restart_job", "job 999", "retry")]
    assert records[0]["detail"].startswith("unknown job 999: the scheduler has published")


def test_a_node_typed_without_its_zero_padding_is_refused_naming_the_node_meant(sim, tmp_path):
    """`drain gpu42` for gpu0042 (a tired operator at 3 a.m.): refused, as before, but saying
    the node to type, not "wrong --cluster or hostlist?"."""
    out = cli(sim, tmp_path / "audit.jsonl", "drain", "gpu[3-4]", "--reason", "x", "--dry-run",
              "--timeout", "10", timeout=30)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr == ("fleetdeck drain: unknown node(s) gpu[3-4]: no birth or status seen on "
                          "cluster 'cli' (did you mean gpu[0003-0004]?)\n"), out.stderr
    # The simulator's refusal of an injected fault says it too.
    out = run_cli("inject", "xid79", "node=gpu3", "--broker", str(sim.url), "--cluster", "cli")
    assert (out.returncode, out.stderr) == (2, "fleetdeck inject: the simulator refused it: no "
                                            "node 'gpu3' in this fleet (did you mean gpu0003?).\n")


def test_a_mistyped_cluster_is_refused_without_the_restart_wait_naming_the_clusters_seen(
        sim, tmp_path):
    """`drain --cluster other` against a broker that keeps another cluster's births waited 30 s
    (the wait for births a restarted broker may still be owed; a Slurm prolog's budget) and
    --timeout did not bound it (a newcomer's scripts). This broker is seconds old, so the wait
    is owed (another cluster's agents may be back before this one's): --timeout bounds it, and
    the refusal names the clusters seen."""
    out = run_cli("drain", "gpu0001", "--reason", "x", "--dry-run", "--broker", str(sim.url),
                  "--cluster", "other", "--timeout", "4", timeout=20)
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr.strip() == (
        "fleetdeck drain: unknown node(s) gpu0001: no birth or status seen on cluster 'other' "
        "(wrong --cluster or hostlist?); clusters seen there: cli"), out.stderr


def test_timeout_exit_code(mosquitto, tmp_path):
    # A job known only from its retained status (no scheduler runs to answer on sched/cmd):
    # sent, then timed out, exit 4.
    now_ms = int(time.time() * 1000)
    job = JobStatus(job_id="7", state=JobState.R, nodes=["gpu0001"], ts=now_ms)
    asyncio.run(_publish_retained(mosquitto.url, topic_for("nobody", Kind.JOB, "7"),
                                  codec.encode(job)))
    out = run_cli("restart-job", "7", "--reason", "hung", "--broker", str(mosquitto.url),
                  "--cluster", "nobody", "--audit-log", str(tmp_path / "a.jsonl"),
                  "--timeout", "1.5")
    assert out.returncode == 4, out.stdout + out.stderr
    assert "timed_out" in out.stdout


@pytest.mark.parametrize(("state", "said"), [
    (JobState.CD, "job 8 is CD (completed): there is nothing to restart; submit it again"),
    (JobState.PD, "job 8 is PD (Resources): it is waiting to run already, there is nothing "
                  "to restart"),
])
def test_a_restart_of_a_job_found_ended_or_pending_gives_no_wrong_id_hint(mosquitto, tmp_path,
                                                                         state, said):
    """"job 4105 is CD (completed): … submit it again (wrong --cluster or job id?)": the job
    was found, so the hint for a job not found sent the operator looking for a typo."""
    now_ms = int(time.time() * 1000)
    job = JobStatus(job_id="8", state=state, reason="Resources", nodes=[], ts=now_ms)
    asyncio.run(_publish_retained(mosquitto.url, topic_for("ended", Kind.JOB, "8"),
                                  codec.encode(job)))
    audit = tmp_path / "a.jsonl"
    out = run_cli("restart-job", "8", "--reason", "retry", "--broker", str(mosquitto.url),
                  "--cluster", "ended", "--audit-log", str(audit), "--timeout", "20")
    assert out.returncode == 2, out.stdout + out.stderr
    assert out.stderr == f"fleetdeck restart-job: {said}\n", out.stderr
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [(r["outcome"], r["detail"]) for r in records] == [("refused", said)]


async def _publish_retained(url, topic: str, payload: bytes) -> None:
    async with make_client(url, "retained-job") as client:
        await client.publish(topic, payload, qos=1, retain=True)


def test_dry_run_counts_free_gpus_of_nodes_it_has_heard_from(mosquitto, tmp_path):
    """Agents at a 2 s interval: a blast radius measured before their first samples counted
    none of their GPUs as free ("0 free GPUs left" where the console said 40)."""
    proc = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "slow", "--nodes", "4",
                 "--interval", "2", "--jobs", "1", "--seed", "3", log=tmp_path / "sim.log")
    try:
        status = run_cli("status", "--broker", str(mosquitto.url), "--cluster", "slow",
                         "--json", "--wait", "5")
        assert status.returncode == 0, status.stderr
        summary = json.loads(status.stdout)
        nodes = summary["nodes"]
        busy = {n for job in summary["jobs"] if job["state"] in ("R", "CG")
                for n in job["nodes"]}
        idle = [n for n in nodes if n["job"] is None and n["id"] not in busy
                and n["verdict"] == "ok"]
        assert idle, nodes
        target = idle[0]["id"]
        free = sum(n["gpus"] for n in idle if n["id"] != target)
        for mode in ((), ("--now",)):
            out = run_cli("drain", target, "--reason", "x", *mode, "--dry-run", "--broker",
                          str(mosquitto.url), "--cluster", "slow", "--operator", "carol")
            assert out.returncode == 0, out.stdout + out.stderr
            assert f", {free} free GPUs left" in out.stdout, (free, out.stdout)
    finally:
        stop_process(proc)


async def _publish_born_but_unheard(url, node_id: str, interval_s: float) -> None:
    """A node whose agent is born and online at ``interval_s`` and has sent no telemetry."""
    from tests.helpers import FakeNode

    node = FakeNode(node_id, "slow", t0=time.time())
    node.agent.interval_s = interval_s
    async with make_client(url, "born-unheard") as client:
        await client.publish(node.topic(Kind.BIRTH), codec.encode(node.birth()), qos=1,
                             retain=True)
        await client.publish(node.topic(Kind.STATUS), codec.encode(node.status()), qos=1,
                             retain=True)


def test_a_drain_waits_for_its_targets_telemetry_not_the_whole_clusters(mosquitto, tmp_path):
    """Agents at --interval 10: a drain printed nothing for 21 s before its blast radius, while
    it waited for every node of the cluster to be heard from (a newcomer's production set-up).
    It waits for its targets, says at once what for, and says which nodes "free GPUs left"
    could not count."""
    agents = [spawn("agent", "--broker", str(mosquitto.url), "--cluster", "slow", "--node-id",
                    node, "--interval", "1", log=tmp_path / f"{node}.log")
              for node in ("gpu0001", "gpu0002")]
    try:
        asyncio.run(_publish_born_but_unheard(mosquitto.url, "gpu0003", 10.0))
        status = run_cli("status", "--broker", str(mosquitto.url), "--cluster", "slow",
                         "--json", "--wait", "5")
        assert {n["id"] for n in json.loads(status.stdout)["nodes"]} == {
            "gpu0001", "gpu0002", "gpu0003"}, status.stdout
        started = time.monotonic()
        out = run_cli("drain", "gpu0001", "--reason", "x", "--dry-run", "--broker",
                      str(mosquitto.url), "--cluster", "slow", "--operator", "carol")
        took = time.monotonic() - started
        assert out.returncode == 0, out.stdout + out.stderr
        # Before: two of gpu0003's intervals, 21 s, for a node the drain does not touch.
        assert took < 12, (took, out.stdout)
        assert "free GPUs left (not counting gpu0003: not heard from yet)\n" in out.stdout, \
            out.stdout
        # A target not heard from yet: said at once, on stderr (stdout is the result).
        proc = subprocess.Popen(
            fleetdeck_cmd("drain", "gpu0003", "--reason", "x", "--dry-run", "--broker",
                          str(mosquitto.url), "--cluster", "slow", "--operator", "carol"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            started = time.monotonic()
            assert proc.stderr is not None
            line = proc.stderr.readline()
            assert time.monotonic() - started < 8, line
            assert line.startswith("waiting for the first telemetry of gpu0003 (its GPUs and "
                                   "jobs; its agent reports every 10 s): up to "), line
        finally:
            proc.kill()
            proc.communicate(timeout=10)
    finally:
        for proc in agents:
            stop_process(proc)


def test_a_drain_now_waits_for_its_jobs_other_nodes_and_a_1_hz_wait_is_not_said(mosquitto,
                                                                                 tmp_path):
    """A drain --now requeues its target's job, and its radius names the job's other nodes
    the requeue may land back on (failed, throttled): waiting for its targets alone, such a
    node not heard yet was never judged. And a target at 1 Hz, heard a moment after the
    settle, had every such drain say it waited "up to 2 s" (a review)."""
    agent = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "slow", "--node-id",
                  "gpu0001", "--interval", "1", log=tmp_path / "gpu0001.log")
    try:
        asyncio.run(_publish_born_but_unheard(mosquitto.url, "gpu0003", 10.0))
        asyncio.run(_publish_born_but_unheard(mosquitto.url, "gpu0004", 1.0))
        job = JobStatus(job_id="7", state=JobState.R, nodes=["gpu0001", "gpu0003"],
                        gpus_per_node=8, ts=int(time.time() * 1000))
        asyncio.run(_publish_retained(mosquitto.url, topic_for("slow", Kind.JOB, "7"),
                                      codec.encode(job)))
        status = run_cli("status", "--broker", str(mosquitto.url), "--cluster", "slow",
                         "--json", "--wait", "5")
        assert {n["id"] for n in json.loads(status.stdout)["nodes"]} == {
            "gpu0001", "gpu0003", "gpu0004"}, status.stdout
        # gpu0004 reports every second (never, here: 3 s at most, as any 1 Hz wait): no line.
        out = run_cli("drain", "gpu0004", "--reason", "x", "--dry-run", "--broker",
                      str(mosquitto.url), "--cluster", "slow", "--operator", "carol")
        assert out.returncode == 0, out.stdout + out.stderr
        assert out.stderr == "", out.stderr
        proc = subprocess.Popen(
            fleetdeck_cmd("drain", "gpu0001", "--now", "--reason", "x", "--dry-run",
                          "--broker", str(mosquitto.url), "--cluster", "slow", "--operator",
                          "carol"),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            # gpu0001 with it if not heard yet at the settle, at its own 1 s.
            assert line.startswith((
                "waiting for the first telemetry of gpu0003 (its GPUs and jobs; its agent "
                "reports every 10 s): up to ",
                "waiting for the first telemetry of gpu[0001,0003] (their GPUs and jobs; their "
                "agents report every 1 to 10 s): up to ")), line
        finally:
            proc.kill()
            proc.communicate(timeout=10)
    finally:
        stop_process(agent)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_command_killed_by_a_signal_still_gets_its_outcome_audited(sim, tmp_path, signum):
    """A drain waiting for its effect (finish mode on a node running a job) is ended by
    SIGTERM or by the SIGHUP of a dropped ssh session: before, the audit log kept only
    "requested" for it."""
    audit = tmp_path / "audit.jsonl"
    proc = subprocess.Popen(
        fleetdeck_cmd("drain", "gpu0001", "--reason", "hangup drill", "--timeout", "60",
                      "--broker", str(sim.url), "--cluster", "cli", "--operator", "carol",
                      "--audit-log", str(audit)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (audit.exists() and audit.read_text()):
        time.sleep(0.1)
    assert audit.exists() and audit.read_text(), "the drain was never requested"
    time.sleep(0.5)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 128 + signum, out + err
    assert "Traceback" not in err
    assert "stays in effect" in out
    # The way back is named (a Ctrl-C that meant "not this node", a newcomer's 3 a.m. run).
    assert out.splitlines()[-1] == (
        f"drain gpu0001: interrupted ({signal.Signals(signum).name}); what was sent stays in "
        "effect on the nodes that received it (check with fleetdeck status; 'fleetdeck resume "
        "gpu0001' undoes it)"), out
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["requested", "abandoned"], records
    assert signal.Signals(signum).name in records[-1]["detail"]


def test_the_acknowledgement_may_take_as_long_as_the_timeout():
    """--timeout 15 on an offline node gave up after the tracker's own 10 s ack limit."""
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.cli.commands import CommandRun

    run = CommandRun(BrokerURL("127.0.0.1", 9), "cli", "carol", audit=MemoryAudit(),
                     timeout_s=15.0)
    req = run.session.drain(["gpu0001"], "x")
    (target,) = req.targets
    assert target.cmd.expires_at - target.cmd.issued_at == 15_000


def test_a_drain_whose_node_dies_while_draining_says_so_not_still_draining(sim, tmp_path):
    """The agent died after the node said DRAINING: the time-out read "the node is still
    draining (its jobs run to completion)" although its Last Will had come 23 s before (an SRE
    drill)."""
    import json
    import subprocess

    status = run_cli("status", "--json", "--broker", str(sim.url), "--cluster", "cli")
    busy = next(n["id"] for n in json.loads(status.stdout)["nodes"] if n["job"])
    drain = subprocess.Popen(
        fleetdeck_cmd("drain", busy, "--reason", "agent dies mid-drain", "--timeout", "8",
                      "--broker", str(sim.url), "--cluster", "cli", "--operator", "carol",
                      "--audit-log", str(tmp_path / "audit.jsonl")),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        audit = tmp_path / "audit.jsonl"
        while time.monotonic() < deadline and not (
                audit.exists() and '"requested"' in audit.read_text()):
            time.sleep(0.1)
        time.sleep(1.0)  # its DRAINING status first
        res = run_cli("inject", "--broker", str(sim.url), "--cluster", "cli", "agent_death",
                      f"node={busy}")
        assert res.returncode == 0, res.stdout + res.stderr
        out, err = drain.communicate(timeout=30)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 4, out + err
    assert "it was draining when its agent went silent: the node is offline" in out, out
    assert "still draining (its jobs" not in out


def test_a_drain_resumed_while_it_drains_ends_superseded_not_open(sim, tmp_path):
    """A drain (finish) of a busy node, then a resume of it before it drained: the drain stayed
    open ("cmds 1 open" in the console's header, a CLI drain waiting out its --timeout) until a
    later drain of the node closed it as done (a newcomer run)."""
    status = run_cli("status", "--json", "--broker", str(sim.url), "--cluster", "cli")
    busy = next(n["id"] for n in json.loads(status.stdout)["nodes"] if n["job"])
    audit = tmp_path / "audit.jsonl"
    drain = subprocess.Popen(
        fleetdeck_cmd("drain", busy, "--reason", "changed my mind", "--timeout", "25",
                      "--broker", str(sim.url), "--cluster", "cli", "--operator", "carol",
                      "--audit-log", str(audit)),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (
                audit.exists() and '"requested"' in audit.read_text()):
            time.sleep(0.1)
        time.sleep(1.5)  # its DRAINING status first
        res = cli(sim, tmp_path / "resume-audit.jsonl", "resume", busy, "--timeout", "20")
        assert res.returncode == 0, res.stdout + res.stderr
        started = time.monotonic()
        out, err = drain.communicate(timeout=40)
        waited = time.monotonic() - started
    finally:
        if drain.poll() is None:
            drain.kill()
    assert "status now DRAINING" in out, out + err
    assert f"{busy}: superseded: resumed before it drained: the node is in service" in out, out
    assert drain.returncode == 3, out + err
    assert waited < 10, f"the drain waited {waited:.0f} s after the resume"
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert [r["outcome"] for r in records] == ["requested", "superseded"], records


def test_a_drain_of_a_list_says_which_nodes_still_drain_and_which_never_answered(sim, tmp_path):
    """A 2026-12-07 drill: `drain 'gpu[0001-0064]'` with 3 agents dead ended "32 timed_out, 32
    done", the 29 nodes still DRAINING (the drain took; their jobs finish first) counted with
    the 3 that never answered, each listed twice, and the radius said "offline or unknown
    nodes" without naming them. The silent ones are named, the draining ones counted apart."""
    import json

    status = run_cli("status", "--json", "--broker", str(sim.url), "--cluster", "cli")
    nodes = json.loads(status.stdout)["nodes"]
    idle = [n["id"] for n in nodes if not n["job"]]
    busy = [n["id"] for n in nodes if n["job"]]
    assert len(busy) >= 2 and idle, nodes
    dead = idle[0]
    res = run_cli("inject", "--broker", str(sim.url), "--cluster", "cli", "agent_death",
                  f"node={dead}")
    assert res.returncode == 0, res.stdout + res.stderr
    time.sleep(2.0)
    out = cli(sim, tmp_path / "audit.jsonl", "drain", "gpu[0001-0004]", "--reason", "list",
              "--timeout", "6")
    assert out.returncode == 4, out.stdout + out.stderr
    text = out.stdout
    assert f"expect time-outs ({dead})" in text, text
    summary = next(line for line in text.splitlines() if line.startswith("drain gpu[0001-0004]:"))
    assert f"{len(busy)} still draining (acknowledged" in summary, summary
    assert "1 timed_out" in summary, summary
    tail = text[text.index(summary):]
    assert f"  {compress(busy)}: timed_out while DRAINING" in tail, tail
    assert sum(line.startswith(f"  {n}:") for n in busy for line in tail.splitlines()) == 0, tail
    assert f"  {dead}: timed_out" in tail and "offline" in tail, tail


def test_a_drain_that_took_but_still_drains_exits_6_not_4(sim, tmp_path):
    """The drill's drain, no agent dead: every target DRAINED or acknowledged and still
    DRAINING (the drain took; its jobs finish first) exited 4, as nodes that never answered
    did, and a script could tell "wait longer" from "go and look" only by the text."""
    status = run_cli("status", "--json", "--broker", str(sim.url), "--cluster", "cli")
    nodes = json.loads(status.stdout)["nodes"]
    busy = [n["id"] for n in nodes if n["job"]]
    assert busy and len(busy) < len(nodes), nodes
    audit = tmp_path / "audit.jsonl"
    out = cli(sim, audit, "drain", "gpu[0001-0004]", "--reason", "list", "--timeout", "6")
    assert out.returncode == 6, out.stdout + out.stderr
    summary = next(line for line in out.stdout.splitlines()
                   if line.startswith("drain gpu[0001-0004]:"))
    assert f"{len(nodes) - len(busy)} done, {len(busy)} still draining" in summary, summary
    assert "timed_out" not in summary, summary
    # The audit record is what happened: the deadline passed before DRAINED, the nodes named.
    (record,) = [json.loads(line) for line in audit.read_text().splitlines()][1:]
    assert record["outcome"] == "timed_out", record
    assert all(f"{n}: no result within 6 s (DRAINING)" in record["detail"] for n in busy), record


def test_a_finish_drain_of_a_busy_node_says_on_stderr_what_it_waits_for(sim, tmp_path):
    """A drain of a busy node said "status now DRAINING", then nothing for its --timeout (60 s
    by default) before exit 6 "still draining" (a fresh-clone walk-through): once the node says
    DRAINING, one line on stderr says its jobs finish first, how long the wait for DRAINED is,
    and that Ctrl-C or the --timeout leaves the drain in place. stdout keeps its lines."""
    status = run_cli("status", "--json", "--broker", str(sim.url), "--cluster", "cli")
    busy = next(n["id"] for n in json.loads(status.stdout)["nodes"] if n["job"])
    out = cli(sim, tmp_path / "audit.jsonl", "drain", busy, "--reason", "busy", "--timeout", "6")
    assert out.returncode == 6, out.stdout + out.stderr
    said = [line for line in out.stderr.splitlines() if "DRAINING" in line]
    assert len(said) == 1, out.stderr
    (line,) = said
    assert line.startswith(f"{busy} is DRAINING: its jobs run to completion first; waiting up "
                           "to "), line
    left = int(line.split("waiting up to ", 1)[1].split(" s", 1)[0])
    assert 0 < left <= 6, line
    assert (f"Ctrl-C or the --timeout leaves the drain in place ('fleetdeck resume {busy}' "
            "undoes it)") in line, line
    assert "waiting up to" not in out.stdout, out.stdout
    assert f"  {busy}: status now DRAINING" in out.stdout.splitlines(), out.stdout
    # A drain of an idle node goes straight to DRAINED: nothing to wait for, nothing said.
    idle = next(n["id"] for n in json.loads(status.stdout)["nodes"] if not n["job"])
    out = cli(sim, tmp_path / "audit.jsonl", "drain", idle, "--reason", "idle", "--timeout", "6")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "DRAINING" not in out.stderr, out.stderr


def test_a_drain_and_resume_of_many_nodes_say_their_progress_by_hostlist_not_a_line_a_node(
        mosquitto, tmp_path):
    """A 2026-12-07 drill: `drain 'gpu[0001-0512]'` printed 1,068 lines (an acknowledgement
    and an outcome a node, 512 each) and its resume 1,027, the summary last: at 3 a.m. the
    operator scrolls past 1,000 lines to learn the drain took. Above 8 targets the nodes that
    moved alike within a second are one hostlist line."""
    proc = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "cli", "--nodes", "64",
                 "--interval", "1", "--seed", "3", log=tmp_path / "sim.log")
    try:
        time.sleep(4.0)
        audit = tmp_path / "audit.jsonl"
        for args, summary in ((("drain", "gpu[0001-0064]", "--reason", "mass"),
                               "drain gpu[0001-0064]: 64 done"),
                              (("resume", "gpu[0001-0064]"), "resume gpu[0001-0064]: 64 done")):
            out = cli(mosquitto, audit, *args, "--timeout", "30")
            assert out.returncode == 0, out.stdout + out.stderr
            lines = out.stdout.splitlines()
            assert summary in lines, out.stdout
            progress = [line for line in lines if line.startswith("  gpu")]
            # Every node's acknowledgement and outcome are said, by hostlist.
            said = {verb: sum(len(expand(line.split(":")[0].strip())) for line in progress
                              if f": {verb} (" in line) for verb in ("acknowledged", "done")}
            assert said == {"acknowledged": 64, "done": 64}, out.stdout
            assert len(progress) <= 16, out.stdout
            assert any(len(expand(line.split(":")[0].strip())) > 1 for line in progress), \
                out.stdout
        # The audit keeps one request and one outcome each, as before.
        records = [json.loads(line) for line in audit.read_text().splitlines()]
        assert [r["outcome"] for r in records] == ["requested", "done"] * 2, records
    finally:
        stop_process(proc)


@pytest.mark.parametrize(("hostlist", "said"), [
    ("gpu+", "bad hostlist 'gpu+': node name 'gpu+' may only hold letters"),
    ("gpu[0001-0002],gpu#", "node name 'gpu#' may only hold"),
    ("gpu/0001", "node name 'gpu/0001' may only hold"),
    ("gpu\x1b0001", "bad hostlist 'gpu\\x1b0001': node name 'gpu\\x1b0001' may only hold"),
    ("gpu\x1b[", "bad hostlist 'gpu\\x1b[': unbalanced '[' in 'gpu\\x1b['"),
])
def test_a_name_no_node_can_have_is_refused_before_the_broker(hostlist, said, tmp_path):
    """'gpu+' and 'gpu#' (MQTT wildcards), a '/', an ESC: they went to the broker, waited for
    the fleet's births and read "unknown node(s) gpu+", the ESC sent to the terminal as typed
    (a CLI audit). Refused at once now, escaped, with the broker never asked (none here)."""
    down = f"mqtt://127.0.0.1:{free_port()}"
    res = run_cli("drain", hostlist, "--reason", "x", "--broker", down, "--cluster", "cli",
                  "--audit-log", str(tmp_path / "audit.jsonl"), "--timeout", "5")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert said in res.stderr and "\x1b" not in res.stderr, res.stderr


@pytest.mark.parametrize("hostlist", ["gpu[1-\x1b]", "gpu[0001-0002],gpu[\x1b1-2]",
                                      "gpu[1-2]x[3-\x1b[31m]"])
def test_a_bad_hostlist_is_said_escaped_where_the_error_quotes_one_item(hostlist):
    """The error of one item ('1-<ESC>' is not a number) quotes that item, not the whole list,
    and replacing the whole list with its escaped form left the ESC raw in the sentence."""
    from fleetdeck.console.cli.commands import parse_targets
    from fleetdeck.errors import UserError

    with pytest.raises(UserError) as err:
        parse_targets(hostlist)
    said = str(err.value)
    assert "\x1b" not in said and "\\x1b" in said and said.startswith("bad hostlist '"), said


@pytest.mark.parametrize("typed", ["gpu[0001, 0003]", "gpu0001, gpu0003", "gpu0001 gpu0003",
                                   "gpu[0001,0003]"])
def test_the_tuis_drain_reads_a_hostlist_as_the_cli_does(typed):
    """The TUI's ':drain gpu[0001, 0003]' reached parse_targets as its words joined by commas
    ('gpu[0001,,0003]') and was refused ("empty range"), where 'fleetdeck drain' took it: one
    parser, one reading of what was typed."""
    from fleetdeck.console.commands import parse_targets

    assert parse_targets(",".join(typed.split())) == ["gpu0001", "gpu0003"]  # the TUI's join
    assert parse_targets(typed) == ["gpu0001", "gpu0003"]
