"""What a node agent keeps in its state directory: a drain survives SIGTERM and SIGKILL restarts
of a real agent process, and a captured signed command cannot run again after a restart."""

import asyncio
import json
import logging
import os
import shutil
import signal
import time
import uuid
from pathlib import Path

import pytest

from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.guard import EXPIRY_SKEW_MS, REPLAYED, CommandGuard
from fleetdeck.agents.run import NO_STATE_DIR_WARNING, make_state
from fleetdeck.agents.sim.node import SimNode
from fleetdeck.agents.state import UNREADABLE_REASON, AgentState, StateStore
from fleetdeck.errors import UserError
from fleetdeck.protocol import signing
from fleetdeck.protocol.messages import (
    Command,
    CommandArgs,
    CommandOp,
    DrainInfo,
    DrainMode,
    DrainState,
)
from fleetdeck.protocol.topics import Kind, topic_for
from tests.agent_tap import Tap, publish, send
from tests.conftest import eventually, run_cli, spawn, stop_process

CLUSTER = "keep"
NODE = "gpu0001"
KEY = b"s" * 32


def command(op: CommandOp, reason: str = "", lifetime_s: float = 60.0,
            cmd_id: str | None = None) -> Command:
    now = int(time.time() * 1000)
    return Command(cmd_id=cmd_id or uuid.uuid4().hex[:12], op=op, target=NODE,
                   args=CommandArgs(reason=reason), issued_by="alice", issued_at=now,
                   expires_at=now + int(lifetime_s * 1000))


def start_agent(url, tmp_path: Path, *extra: str):
    return spawn("agent", "--broker", str(url), "--cluster", CLUSTER, "--node-id", NODE,
                 "--interval", "0.5", "--keepalive", "2", "--state-dir", str(tmp_path / "state"),
                 *extra, log=tmp_path / "agent.log")


def last_bd_seq(tap: Tap) -> int:
    return max(s.bdSeq for s in tap.statuses(NODE))


async def restart(tap: Tap, proc, sig: int, url, tmp_path: Path, *extra: str):
    """Kill the agent with ``sig``, start a new one; return it and its first online status."""
    bd = last_bd_seq(tap)
    os.kill(proc.pid, sig)
    proc.wait(10)
    proc = start_agent(url, tmp_path, *extra)
    await tap.until(lambda: tap.first_status_after(NODE, bd) is not None, 20,
                    message="the restarted agent's first status")
    return proc, tap.first_status_after(NODE, bd)


async def drained(tap: Tap, url, reason: str) -> Command:
    """Wait for the agent to be online, drain it, wait for DRAINED; the drain sent."""
    await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                    message="agent online")
    drain = command(CommandOp.DRAIN, reason=reason)
    await send(url, CLUSTER, drain)
    await tap.until(lambda: tap.statuses(NODE)[-1].drain.state is DrainState.DRAINED,
                    message="DRAINED")
    return drain


async def test_a_drain_survives_sigterm_and_sigkill_restarts(mosquitto, tmp_path):
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            drain = await drained(tap, url, "xid 79 on gpu3")
            drained_info = tap.statuses(NODE)[-1].drain
            assert (drained_info.reason, drained_info.requested_by, drained_info.cmd_id) == (
                "xid 79 on gpu3", "alice", drain.cmd_id)

            for sig in (signal.SIGTERM, signal.SIGKILL):
                proc, first = await restart(tap, proc, sig, url, tmp_path)
                # The very first status of the new session, not a later correction.
                assert first.drain == drained_info, signal.Signals(sig).name

            state_files = sorted(p.name for p in (tmp_path / "state").iterdir())
            assert state_files == [
                "outbox-gpu0001.jsonl", "state-gpu0001.json", "state-gpu0001.lock"]
            on_disk = json.loads((tmp_path / "state" / "state-gpu0001.json").read_text())
            assert on_disk["drain"]["cmd_id"] == drain.cmd_id

            # A resume is kept just the same: the node comes back in service after a restart.
            await send(url, CLUSTER, command(CommandOp.RESUME))
            await tap.until(lambda: tap.statuses(NODE)[-1].drain.state is DrainState.NONE,
                            message="resumed")
            proc, first = await restart(tap, proc, signal.SIGKILL, url, tmp_path)
            assert first.drain == DrainInfo()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_drained_node_whose_agent_is_killed_reads_drained_in_a_status_started_later(
        mosquitto, tmp_path):
    """MQTT fixes a Last Will at CONNECT: a node drained since read "not drained" once its
    agent was SIGKILLed, in every `status` started after that (an SRE drill). The agent ends
    its session cleanly once the drain went out and connects again at once, with a will that
    carries the drain; the retained will is then the drain an operator set."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await drained(tap, url, "RMA ticket 123")
            drained_at = next(s.bdSeq for s in tap.statuses(NODE)
                              if s.drain.state is DrainState.DRAINED)
            await tap.until(lambda: tap.first_status_after(NODE, drained_at) is not None, 20,
                            message="a new session after the drain")
            rearmed = tap.first_status_after(NODE, drained_at)
            assert rearmed is not None and rearmed.drain.state is DrainState.DRAINED
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        await tap.until(lambda: not tap.statuses(NODE)[-1].online, 20, message="its will")
    will = tap.statuses(NODE)[-1]
    assert (will.bdSeq, will.drain.state, will.drain.reason) == (
        rearmed.bdSeq, DrainState.DRAINED, "RMA ticket 123")

    res = run_cli("status", "--broker", str(url), "--cluster", CLUSTER, "--json", "--wait", "1")
    assert res.returncode == 0, res.stderr
    [node] = json.loads(res.stdout)["nodes"]
    assert (node["verdict"], node["drain"], node["drain_reason"], node["state"]) == (
        "offline", "drained", "RMA ticket 123", "drain*")
    assert node["action"].startswith("drained, now offline: check the node")


async def test_a_captured_signed_drain_does_not_run_again_after_a_restart(mosquitto, tmp_path):
    url = mosquitto.url
    key_file = tmp_path / "command.key"
    key_file.write_bytes(KEY)
    keyed = ("--command-key", str(key_file))
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path, *keyed)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            drain = signing.sign(command(CommandOp.DRAIN, reason="captured", lifetime_s=300),
                                 KEY)
            captured = await send(url, CLUSTER, drain)
            await tap.until(lambda: [a.result.value for a in tap.acks(drain.cmd_id)]
                            == ["accepted", "done"], message="drain obeyed")
            # Back in service, so a second execution of the drain would show.
            await send(url, CLUSTER, signing.sign(command(CommandOp.RESUME), KEY))
            await tap.until(lambda: tap.statuses(NODE)[-1].drain.state is DrainState.NONE,
                            message="resumed")

            proc, first = await restart(tap, proc, signal.SIGKILL, url, tmp_path, *keyed)
            assert first.drain.state is DrainState.NONE
            await publish(url, topic_for(CLUSTER, Kind.CMD, NODE), captured)
            await tap.until(lambda: len(tap.acks(drain.cmd_id)) >= 3, message="replay answered")
            replay = tap.acks(drain.cmd_id)[2]
            assert replay.result.value == "rejected" and "replayed" in replay.reason
            # Events go out with the next samples (every 0.5 s): give a second one time to show.
            await asyncio.sleep(1.5)
            assert tap.statuses(NODE)[-1].drain.state is DrainState.NONE
            drain_events = {e.event_id for e in tap.of(Kind.EVENT, NODE)
                            if e.kind == "drain" and e.data.get("cmd_id") == drain.cmd_id}
            assert len(drain_events) == 1
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
    assert "replayed command id" in (tmp_path / "agent.log").read_text()


def test_state_file_round_trip_prunes_expired_ids_and_leaves_no_temp_file(tmp_path):
    now = int(time.time() * 1000)
    store = StateStore(tmp_path / "state-n1.json", "n1")
    drain = DrainInfo(state=DrainState.DRAINING, reason="r", requested_by="bob", since_ts=now,
                      cmd_id="c1")
    old, late = now - EXPIRY_SKEW_MS - 1, now - EXPIRY_SKEW_MS // 2
    assert store.save(AgentState(drain, DrainMode.NOW,
                                 {"old": old, "late": late, "live": now + 60_000}))
    assert [p.name for p in tmp_path.iterdir()] == ["state-n1.json"]
    back = StateStore(tmp_path / "state-n1.json", "n1").load(now)
    # "late" expired, but an agent still takes it within the allowance for clocks.
    assert back == AgentState(drain, DrainMode.NOW, {"late": late, "live": now + 60_000})


def test_a_signed_command_executed_before_a_restart_is_a_replay_within_the_clock_allowance(
        tmp_path):
    """A state file holds each executed id's ``expires_at``: restarted while the agent would
    still take that command for unexpired (its expiry, plus any allowance for clocks,
    agents/guard.py EXPIRY_SKEW_MS, not yet past), the agent must still know it."""
    now = int(time.time() * 1000)
    expires = now - EXPIRY_SKEW_MS // 2
    cmd = signing.sign(Command(cmd_id="captured", op=CommandOp.DRAIN, target=NODE,
                               args=CommandArgs(reason="r"), issued_by="alice",
                               issued_at=expires - 10_000, expires_at=expires), KEY)
    path = tmp_path / f"state-{NODE}.json"
    path.write_text(json.dumps({"v": 1, "node": NODE, "executed": {"captured": cmd.expires_at}}))
    saved = StateStore(path, NODE).load(now)
    guard = CommandGuard(NODE, KEY, lambda: now, saved.executed)
    assert guard.check(cmd) == REPLAYED
    # Run and remembered after the restart, it stays a replay until the allowance is past.
    fresh = CommandGuard(NODE, KEY, lambda: now)
    assert fresh.check(cmd) == ""
    fresh.executing(cmd)
    assert StateStore(path, NODE).save(AgentState(executed=dict(fresh.executed)))
    again = CommandGuard(NODE, KEY, lambda: now, StateStore(path, NODE).load(now).executed)
    assert again.check(cmd) == REPLAYED


def test_an_unreadable_state_file_keeps_the_node_out_of_service(tmp_path):
    path = tmp_path / "state-n1.json"
    path.write_bytes(b'{"v": 1, "drain": {"state": "drai')
    store = StateStore(path, "n1")
    state = store.load(1_000)
    assert store.lost
    assert state.drain.state is DrainState.DRAINED and state.drain.reason == UNREADABLE_REASON
    assert (tmp_path / "state-n1.json.unreadable").exists()
    # Saved at once: a second restart before any command still comes up drained.
    again = StateStore(path, "n1").load(2_000)
    assert again.drain.state is DrainState.DRAINED


def test_without_a_state_dir_the_agent_warns_that_drains_do_not_survive(caplog):
    with caplog.at_level(logging.WARNING, logger="fleetdeck.agent"):
        store = make_state(None, "n1")
    assert store.path is None
    assert NO_STATE_DIR_WARNING in caplog.text


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_state_dir_is_refused_at_start(tmp_path):
    from fleetdeck.errors import UserError

    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    with pytest.raises(UserError, match="not writable"):
        make_state(ro, "n1")


async def test_saved_windows_of_another_shape_do_not_stop_the_agent(mosquitto, tmp_path):
    """A windows file of other counters (an agent of another version) or a damaged one that is
    still JSON crashed the agent on its first sample, at every start: a crash loop under
    systemd (a review). It is left out, said in the log, and the agent runs."""
    url = mosquitto.url
    state = tmp_path / "state"
    state.mkdir()
    names = ["link_downed", "symbol_error", "x", "y", "z"]
    (state / f"state-{NODE}.windows.json").write_text(json.dumps({
        "v": 1, "saved_ms": int(time.time() * 1000), "boot_id": "",
        "ports": {"names": names, "base": [[["mlx5_ib0", 1], [1, 2, 3, 4]]], "windows": [],
                  "held": []},
        "gpus": {"names": ["pcie_replay"], "base": [[[0], ["abc"]]], "windows": [],
                 "held": []}}))
    log_file = tmp_path / "agent.log"
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            await tap.until(lambda: "the error windows an earlier agent saved: left out"
                            in log_file.read_text(), 20, message="the first sample")
            await asyncio.sleep(2.0)  # four more samples at 0.5 s
            assert proc.poll() is None, log_file.read_text()
            assert "Traceback" not in log_file.read_text()
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def test_the_session_number_grows_across_restarts_when_the_clock_stepped_back(tmp_path):
    """The next agent's bdSeq is larger than the last one's even with the clock five minutes
    behind it (NTP stepped it back after a boot with a fast clock): smaller, its sessions read
    as older than the last one's will and the node stayed offline (an SRE drill). One saved
    too far ahead (a clock once wrong by hours) is not carried on."""
    from fleetdeck.brokerurl import BrokerURL

    path = tmp_path / f"state-{NODE}.json"
    now = [1_800_000_000.0]

    def agent() -> NodeAgent:
        return NodeAgent(cluster=CLUSTER, node_id=NODE, source=SimNode(NODE),
                         url=BrokerURL("127.0.0.1", 1), interval_s=1.0,
                         state=StateStore(path, NODE), clock=lambda: now[0])

    first = agent()
    first.bd_seq = first._next_bd_seq()
    first._save_state()
    assert json.loads(path.read_text())["bd_seq"] == first.bd_seq
    now[0] -= 300  # the clock stepped back five minutes
    second = agent()
    assert second._next_bd_seq() == first.bd_seq + 1
    StateStore(path, NODE).save(AgentState(bd_seq=int((now[0] + 7200) * 1000)))
    assert agent()._next_bd_seq() == int(now[0] * 1000)


async def test_commands_sent_together_are_all_handled_before_the_will_is_rearmed(
        mosquitto, tmp_path):
    """A drain, a resume and a drain 1 ms apart: the re-arm after the first cut the session
    under the others, the third was lost though the broker had delivered it, and cancelling a
    publish in flight stalled the reconnect 5 s, long enough for the node to read stale (an
    SRE drill). The session now ends between commands, once they stop coming."""
    from fleetdeck.brokerurl import make_client
    from fleetdeck.protocol import codec

    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            cmds = [command(CommandOp.DRAIN, reason="one"), command(CommandOp.RESUME),
                    command(CommandOp.DRAIN, reason="three")]
            before = last_bd_seq(tap)
            async with make_client(url, "burst") as c:
                for cmd in cmds:
                    await c.publish(topic_for(CLUSTER, Kind.CMD, NODE), codec.encode(cmd),
                                    qos=1)
            sent_ms = time.time() * 1000
            await tap.until(lambda: all(any(a.result.value == "done" for a in tap.acks(c.cmd_id))
                                        for c in cmds), 20, message="every command done")
            # One re-arm, after the burst, with the last drain in it, and at once (it took 5 s).
            await tap.until(lambda: (tap.first_status_after(NODE, before) is not None
                                     and tap.statuses(NODE)[-1].drain.reason == "three"
                                     and tap.statuses(NODE)[-1].bdSeq > before), 20,
                            message="a new session drained by the last")
            sessions = sorted({s.bdSeq for s in tap.statuses(NODE) if s.bdSeq > before})
            assert sessions[0] - sent_ms < 2000, sessions[0] - sent_ms
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
        await tap.until(lambda: not tap.statuses(NODE)[-1].online, 20, message="its will")
    assert tap.statuses(NODE)[-1].drain.reason == "three"


def test_a_simulators_state_is_renamed_into_place_without_fsync(tmp_path, monkeypatch):
    """Every agent saves at each session start: 4,096 simulated ones fsyncing held the
    simulator's loop ~5 s at start-up and after each broker restart. A real agent's save is
    durable (a power cut keeps the drain); a simulator's only atomic."""
    import os

    from fleetdeck.agents.state import AgentState, StateStore

    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    drained = AgentState(DrainInfo(state=DrainState.DRAINED, reason="rma", requested_by="a"))
    StateStore(tmp_path / "sim.json", "gpu0001", durable=False).save(drained)
    assert synced == []
    assert StateStore(tmp_path / "sim.json").load(0).drain.state is DrainState.DRAINED
    StateStore(tmp_path / "real.json", "gpu0001").save(drained)
    assert len(synced) == 2  # the file, then its directory entry


async def test_a_second_agent_of_the_node_on_its_state_dir_is_refused_in_one_sentence(
        mosquitto, tmp_path):
    """A hand-started agent beside the systemd unit's, on one --state-dir: the two took the
    MQTT session from each other and wrote the state through one temporary file (a torn one
    fails the node safe to drained). The second is refused; the first's death frees the node."""
    first = start_agent(mosquitto.url, tmp_path)
    lock = tmp_path / "state" / f"state-{NODE}.lock"
    try:
        await eventually(lambda: lock.exists() and lock.read_text().strip() == str(first.pid),
                         20, message="the first agent's lock")
        res = run_cli("agent", "--broker", str(mosquitto.url), "--cluster", CLUSTER,
                      "--node-id", NODE, "--state-dir", str(tmp_path / "state"), timeout=30)
        assert res.returncode == 2, res
        said = res.stderr.strip()
        assert said.count("\n") == 0 and "Traceback" not in said, said
        assert f"another agent for {NODE} is running on --state-dir" in said, said
        assert f"(pid {first.pid})" in said and "stop that one first" in said, said
        os.kill(first.pid, signal.SIGKILL)
        first.wait(10)
        second = start_agent(mosquitto.url, tmp_path)
        try:
            await eventually(lambda: lock.read_text().strip() == str(second.pid), 20,
                             message="the lock taken again after the first agent's death")
            assert second.poll() is None
        finally:
            stop_process(second)
    finally:
        stop_process(first)


def test_a_state_dir_that_is_a_file_is_said_so(tmp_path):
    """A 2026-12-07 drill: `agent --state-dir FILE` said "--state-dir FILE: File exists.", and
    one under a file "Not a directory.", naming neither what is wrong nor what to do."""
    from tests.conftest import run_cli

    blocker = tmp_path / "afile"
    blocker.write_text("")
    res = run_cli("agent", "--broker", "mqtt://127.0.0.1:1", "--cluster", CLUSTER, "--node-id",
                  NODE, "--state-dir", str(blocker))
    assert res.returncode == 2, res.stdout + res.stderr
    assert res.stderr.strip().splitlines() == [
        f"fleetdeck agent: --state-dir {blocker} is a file, not a directory (the agent keeps "
        "its drain state, command ids and lock there): give it a directory."], res.stderr
    res = run_cli("agent", "--broker", "mqtt://127.0.0.1:1", "--cluster", CLUSTER, "--node-id",
                  NODE, "--state-dir", str(blocker / "sub"))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"({blocker} is a file)" in res.stderr, res.stderr


def test_a_state_dir_on_a_read_only_mount_says_so_not_this_user(tmp_path, monkeypatch):
    """The same drill, a tmpfs remounted read-only: root read "not writable by this user"."""
    from fleetdeck.agents import state as state_mod
    from fleetdeck.errors import UserError

    real = os.statvfs

    class ReadOnly:
        def __init__(self, of: os.statvfs_result) -> None:
            self.of = of
            self.f_flag = of.f_flag | os.ST_RDONLY

    monkeypatch.setattr(state_mod.os, "statvfs",
                        lambda p: ReadOnly(real(p)) if str(p) == str(tmp_path) else real(p))
    with pytest.raises(UserError, match="is on a read-only file system"):
        state_mod.usable_state_dir(tmp_path)


def test_a_state_dir_whose_locks_fail_runs_the_agent_unguarded(tmp_path, monkeypatch, caplog):
    """NFS without its lock daemon answers flock with ENOLCK: that was read as "another agent
    for gpu0001 is running" and every agent on such a state directory refused to start (exit
    2), its node unwatched and undrainable. Only a lock held by another refuses."""
    import errno

    from fleetdeck.agents import state

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(state.fcntl, "flock", no_locks)
    with caplog.at_level("WARNING", logger="fleetdeck.agent.state"):
        assert state.hold_node_lock(tmp_path, NODE) is None
    assert "without the one-agent-per-node guard" in caplog.text
    assert "No locks available" in caplog.text
    monkeypatch.undo()
    held = state.hold_node_lock(tmp_path, NODE)
    assert held is not None
    try:
        with pytest.raises(UserError, match="another agent for gpu0001 is running"):
            state.hold_node_lock(tmp_path, NODE)
    finally:
        os.close(held)


def test_a_lock_file_left_by_another_user_still_guards(tmp_path, monkeypatch):
    """An agent run by hand as root leaves ``state-<node>.lock`` root's (0644): the unit's
    agent (its own user) could not open it for writing and refused to start ("cannot open
    state-gpu0001.lock: Permission denied", exit 2). A lock needs no write access: it is taken
    read-only, without the pid."""
    from fleetdeck.agents import state

    lock = tmp_path / f"state-{NODE}.lock"
    lock.write_text("4242\n")
    real_open = os.open

    def as_another_user(path, flags, *args):
        if str(path) == str(lock) and flags & os.O_RDWR:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(state.os, "open", as_another_user)
    held = state.hold_node_lock(tmp_path, NODE)
    assert held is not None
    try:
        assert lock.read_text() == "4242\n"  # not ours to write
        monkeypatch.undo()
        with pytest.raises(UserError, match="another agent for gpu0001 is running"):
            state.hold_node_lock(tmp_path, NODE)
    finally:
        os.close(held)


def test_a_lock_held_by_an_agent_stuck_in_the_kernel_lets_a_new_one_run(tmp_path, monkeypatch,
                                                                        caplog):
    """systemd SIGKILLs an agent whose GPU reader is stuck in a wedged driver call: the
    process cannot exit and holds its lock until the call returns. Refused, each restart of
    the unit exited 2 and the node read offline (a review); one beside it says what it can."""
    from fleetdeck.agents import state

    held = state.hold_node_lock(tmp_path, NODE)
    assert held is not None
    try:
        os.pwrite(held, b"424242\n", 0)
        monkeypatch.setattr(state, "process_state", lambda pid: "S" if pid != 424242 else "D")
        with caplog.at_level("WARNING", logger="fleetdeck.agent.state"):
            assert state.hold_node_lock(tmp_path, NODE) is None
        assert "held by pid 424242, stuck in the kernel" in caplog.text
        monkeypatch.setattr(state, "process_state", lambda pid: "S")
        with pytest.raises(UserError, match=r"\(pid 424242\)"):
            state.hold_node_lock(tmp_path, NODE)
    finally:
        os.close(held)
    assert state.process_state(os.getpid()) in ("R", "S")


async def test_a_drain_after_the_state_dir_was_removed_is_kept_and_said(mosquitto, tmp_path):
    """The state directory removed (``rm -rf``) while the agent runs, then a drain: the agent
    crashed writing the drain's event (a traceback, the drain never acknowledged, its clean
    exit dropping the will: the node read stale) (a 2026-12-07 drill). Now the directory is
    made again, the drain acknowledged and kept across a restart, and the log says so."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            shutil.rmtree(tmp_path / "state")
            drain = command(CommandOp.DRAIN, reason="after rm -rf")
            await send(url, CLUSTER, drain)
            await tap.until(lambda: any(a.result.value == "done" for a in tap.acks(drain.cmd_id)),
                            message="the drain done")
            assert proc.poll() is None, (tmp_path / "agent.log").read_text()
            on_disk = json.loads((tmp_path / "state" / "state-gpu0001.json").read_text())
            assert on_disk["drain"]["cmd_id"] == drain.cmd_id
            proc, first = await restart(tap, proc, signal.SIGKILL, url, tmp_path)
            assert first.drain.cmd_id == drain.cmd_id
            assert first.drain.state is DrainState.DRAINED
            logged = (tmp_path / "agent.log").read_text()
            assert "was removed while the agent ran: made it again" in logged
            assert "Traceback" not in logged
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_an_outbox_the_disk_refuses_does_not_stop_the_agent(mosquitto, tmp_path):
    """The outbox file made unwritable (a folder in its place: as root, the nearest stand-in
    for a full or read-only disk): the agent used to crash at its next event. Now it says so
    once, keeps the event in memory and publishes it; the drain is acknowledged."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            outbox = tmp_path / "state" / "outbox-gpu0001.jsonl"
            outbox.unlink(missing_ok=True)
            outbox.mkdir()
            drain = command(CommandOp.DRAIN, reason="outbox refused")
            await send(url, CLUSTER, drain)
            await tap.until(lambda: any(a.result.value == "done" for a in tap.acks(drain.cmd_id)),
                            message="the drain done")
            await tap.until(lambda: any("outbox refused" in e.message
                                        for e in tap.of(Kind.EVENT, NODE)),
                            message="the drain's event published")
            assert proc.poll() is None
            logged = (tmp_path / "agent.log").read_text()
            assert logged.count("cannot write the event outbox") == 1, logged
            assert "Traceback" not in logged
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


class _DrainBreaks(SimNode):
    def on_drain(self, state, mode) -> None:
        raise RuntimeError("a bug in the drain")


async def test_an_agent_that_dies_of_a_bug_reads_offline_not_stale(mosquitto):
    """An error that ends the agent (here its drain raising; in the drill, the outbox write
    above) left its ``async with`` with a clean DISCONNECT, which drops the Last Will: the
    retained status said online for good, every console read the node stale ("its agent is
    hung or cut off") and a later one "no telemetry heard from it yet". It publishes what
    its will would have said first."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=_DrainBreaks(NODE), url=url,
                          interval_s=0.5, keepalive=2, phase_s=0.0)
        task = asyncio.create_task(agent.run(asyncio.Event()))
        await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                        message="agent online")
        await send(url, CLUSTER, command(CommandOp.DRAIN, reason="breaks"))
        with pytest.raises(RuntimeError, match="a bug in the drain"):
            await asyncio.wait_for(task, 20)
        await tap.until(lambda: not tap.statuses(NODE)[-1].online, 5,
                        message="the node offline")
        assert not tap.statuses(NODE)[-1].stopped


def test_events_an_outbox_refused_are_said_lost_when_the_agent_exits(tmp_path, caplog):
    """The outbox file refused (a folder in its place): its events waited in memory, and an
    agent that exited before the broker took them lost them without a word (a review)."""
    from fleetdeck.agents.outbox import Outbox
    from fleetdeck.protocol.messages import Event, Severity

    path = tmp_path / "outbox.jsonl"
    outbox = Outbox(path)
    path.mkdir()
    ev = Event(node="gpu0001", event_id="gpu0001.1.1", seq=1, ts=1, kind="xid",
               severity=Severity.ERROR, component="gpu0", message="XID 79")
    with caplog.at_level(logging.ERROR, logger="fleetdeck.agent.outbox"):
        outbox.add(ev)
        outbox.close()
    said = [r.getMessage() for r in caplog.records]
    assert any("exits with 1 event(s)" in m and "they are lost" in m for m in said), said


@pytest.mark.parametrize("remade_by", ["a drain", "the agent's own look"])
async def test_the_lock_is_taken_again_when_the_state_dir_is_remade(mosquitto, tmp_path,
                                                                    remade_by):
    """The lock against a second agent of the node lived in the --state-dir: removed
    (``rm -rf``) and made again by the agent, the directory had none until the agent
    restarted, and a second agent of the node was accepted (a 2026-12-07 drill). It is taken
    again when the directory is remade: by a save (the drain's), or by the agent's look every
    5 s where nothing is saved."""
    url = mosquitto.url
    lock = tmp_path / "state" / f"state-{NODE}.lock"
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            shutil.rmtree(tmp_path / "state")
            if remade_by == "a drain":
                drain = command(CommandOp.DRAIN, reason="after rm -rf")
                await send(url, CLUSTER, drain)
                await tap.until(lambda: any(a.result.value == "done"
                                            for a in tap.acks(drain.cmd_id)),
                                message="the drain done")
            await eventually(lambda: lock.exists() and lock.read_text().strip() == str(proc.pid),
                             12, message="the lock taken again in the remade directory")
            res = run_cli("agent", "--broker", str(url), "--cluster", CLUSTER, "--node-id",
                          NODE, "--state-dir", str(tmp_path / "state"), timeout=30)
            assert res.returncode == 2, res
            assert f"another agent for {NODE} is running" in res.stderr, res.stderr
            assert f"(pid {proc.pid})" in res.stderr, res.stderr
            assert proc.poll() is None
            logged = (tmp_path / "agent.log").read_text()
            assert "took the lock against a second agent of gpu0001 again" in logged, logged
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_drain_the_agent_cannot_save_is_said_not_saved_to_its_operator(
        mosquitto, tmp_path):
    """The agent's --state-dir full when a drain comes (a 2026-12-07 drill: a 64 KiB tmpfs
    filled; here the state file's place taken by a folder, as root the nearest stand-in): the
    drain was obeyed and the real CLI said "done (DRAINED)", its audit record too, exit 0, and
    the agent's next restart put the node back in service. Obeyed still, now its operator reads
    that the disk did not keep it, in the CLI's lines and the audit log's outcome."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            state_file = tmp_path / "state" / "state-gpu0001.json"
            state_file.unlink()
            (state_file / "full").mkdir(parents=True)
            audit = tmp_path / "audit.jsonl"
            done = await asyncio.to_thread(
                run_cli, "drain", NODE, "--reason", "disk full drill", "--broker", str(url),
                "--cluster", CLUSTER, "--operator", "alice", "--audit-log", str(audit),
                "--timeout", "10")
            assert done.returncode == 0, done.stdout + done.stderr
            assert tap.statuses(NODE)[-1].drain.state is DrainState.DRAINED
            assert "done (DRAINED; not saved on the node (" in done.stdout, done.stdout
            assert "an agent restart forgets it" in done.stdout
            outcome = [json.loads(line) for line in audit.read_text().splitlines()][-1]
            assert outcome["outcome"] == "done"
            assert outcome["detail"].startswith("DRAINED; not saved on the node ("), outcome
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_drain_the_agent_cannot_save_is_said_to_every_reader_of_its_status(
        mosquitto, tmp_path):
    """The drain above told "not saved" to the console that sent it alone: `status` (table and
    --json), another console and a restarted one read the drain as kept, though the agent's
    next restart forgets it. Its retained status carries it now (``DrainInfo.unsaved``)."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            state_file = tmp_path / "state" / "state-gpu0001.json"
            state_file.unlink()
            (state_file / "full").mkdir(parents=True)
            done = await asyncio.to_thread(
                run_cli, "drain", NODE, "--reason", "disk full drill", "--broker", str(url),
                "--cluster", CLUSTER, "--operator", "alice", "--audit-log",
                str(tmp_path / "audit.jsonl"), "--timeout", "10")
            assert done.returncode == 0, done.stdout + done.stderr
            last = tap.statuses(NODE)[-1]
            assert last.drain.state is DrainState.DRAINED
            assert last.drain.unsaved.endswith("state-gpu0001.json: Is a directory"), last
            res = await asyncio.to_thread(run_cli, "status", "--json", "--broker", str(url),
                                          "--cluster", CLUSTER)
            (node,) = json.loads(res.stdout)["nodes"]
            assert node["drain"] == "drained", node
            assert node["drain_unsaved"].startswith("drained not saved on the node ("), node
            assert node["drain_unsaved"].endswith(": an agent restart forgets it"), node
            table = await asyncio.to_thread(run_cli, "status", "--broker", str(url),
                                            "--cluster", CLUSTER)
            said = " ".join(table.stdout.split())
            assert f"drains not kept on their nodes (1): {NODE}: drained not saved on the node (" \
                in said, table.stdout
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


async def test_a_drain_saved_once_the_disk_recovers_no_longer_reads_not_saved(
        mosquitto, tmp_path):
    """Its status said "not saved" until the agent's next command or reconnect, though the
    disk took the state again a moment later: the agent tries the save again (with back-off)
    and says it kept in its status, and its will (re-armed) says so to a console started after
    the agent dies; the drain survives a restart."""
    url = mosquitto.url
    async with Tap(url, CLUSTER) as tap:
        proc = start_agent(url, tmp_path)
        try:
            await tap.until(lambda: any(s.online for s in tap.statuses(NODE)), 20,
                            message="agent online")
            state_file = tmp_path / "state" / "state-gpu0001.json"
            state_file.unlink()
            (state_file / "full").mkdir(parents=True)
            await send(url, CLUSTER, command(CommandOp.DRAIN, reason="disk full drill"))
            await tap.until(lambda: tap.statuses(NODE)[-1].drain.unsaved != "", 20,
                            message="the drain said not saved")
            await asyncio.sleep(2)  # the will re-armed for the drain, its save failing again
            assert tap.statuses(NODE)[-1].drain.unsaved != ""
            shutil.rmtree(state_file)  # the disk freed
            await tap.until(lambda: (tap.statuses(NODE)[-1].online
                                     and tap.statuses(NODE)[-1].drain.unsaved == ""), 20,
                            message="a status saying the drain kept")
            assert tap.statuses(NODE)[-1].drain.state is DrainState.DRAINED
            assert json.loads(state_file.read_text())["drain"]["state"] == "drained"
            await asyncio.sleep(2)  # the will re-armed: a session of its own
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)
            await tap.until(lambda: not tap.statuses(NODE)[-1].online, 20, message="the will")
            will = tap.statuses(NODE)[-1]
            assert will.drain.state is DrainState.DRAINED and will.drain.unsaved == "", will
            bd = last_bd_seq(tap)
            proc = start_agent(url, tmp_path)
            await tap.until(lambda: tap.first_status_after(NODE, bd) is not None, 20,
                            message="the restarted agent's first status")
            first = tap.first_status_after(NODE, bd)
            assert first is not None and first.drain.state is DrainState.DRAINED, first
        finally:
            proc.kill()  # not an error where the test killed it already
            proc.wait(10)


def test_the_not_saved_clause_of_a_long_state_path_fits_an_acks_reason(tmp_path):
    """An ack's reason is at most 2,048 characters (protocol Text) and a state path may be
    longer: the clause naming it whole made the agent's ack invalid (166edee keeps its last
    1,024 characters). The ack of a resume, the longest note, still validates."""
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.protocol.messages import Ack, AckResult, CommandOp

    blocker = tmp_path / "file"
    blocker.write_text("")
    path = blocker.joinpath(*["d" * 200] * 12) / f"state-{NODE}.json"  # ~2,450 characters
    agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=SimNode(NODE),
                      url=BrokerURL("127.0.0.1", 1), interval_s=1.0,
                      state=StateStore(tmp_path / f"state-{NODE}.json", NODE))
    agent.state.path = path  # the disk refuses it from now on, as a full one does
    clause = agent._save_state()
    assert clause.startswith("; not saved on the node (") and len(str(path)) > 2048
    assert clause.endswith(f"state-{NODE}.json: Not a directory): an agent restart forgets it")
    Ack(cmd_id="c1.0", by=NODE, op=CommandOp.RESUME, result=AckResult.DONE,
        reason="returned to service" + clause, ts=1_800_000_000_000)


def test_only_a_drain_a_restart_would_change_is_said_not_saved(tmp_path):
    """Every status carried ``unsaved`` while saves failed, so a node never drained on a full
    --state-dir was listed among "drains not kept" as "none not saved on the node (…): an
    agent restart forgets it", and an unsaved resume read so too, though its restart brings
    the saved drain back."""
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.console.rows import drain_unsaved

    path = tmp_path / f"state-{NODE}.json"
    agent = NodeAgent(cluster=CLUSTER, node_id=NODE, source=SimNode(NODE),
                      url=BrokerURL("127.0.0.1", 1), interval_s=1.0,
                      state=StateStore(path, NODE))
    good = agent.state.path
    agent.state.path = tmp_path / "file"
    agent.state.path.write_text("")
    agent.state.path = agent.state.path / "state.json"  # the disk refuses it from now on
    assert agent._save_state()
    assert agent.status().drain.unsaved == ""  # in service, and a restart keeps it so
    agent.drain = DrainInfo(state=DrainState.DRAINED, reason="ib", requested_by="alice")
    assert agent._save_state()
    assert drain_unsaved(agent.status().drain).startswith("drained not saved on the node (")
    agent.state.path = good
    assert agent._save_state() == ""  # the drain kept
    assert agent.status().drain.unsaved == ""
    agent.state.path = tmp_path / "file" / "state.json"
    agent.drain = DrainInfo()  # resumed, not saved: the file still holds the drain
    assert agent._save_state()
    said = drain_unsaved(agent.status().drain)
    assert said.startswith("resume not saved on the node ("), said
    assert said.endswith("an agent restart brings back the drain it saved"), said
