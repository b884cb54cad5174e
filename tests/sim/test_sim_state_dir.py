"""`fleetdeck sim --state-dir`: a simulator killed and started again brings its drained nodes
back drained, as a real cluster's drains outlive its daemons (Slurm's StateSaveLocation, a real
agent's --state-dir); without it they come back in service."""

import contextlib
import json
import os
import signal
import time

from tests.conftest import run_cli, spawn, stop_process


def drain_of(url: str, cluster: str, node: str) -> tuple[str, str, str] | None:
    out = run_cli("status", "--broker", url, "--cluster", cluster, "--json")
    assert out.returncode in (0, 1, 2), out.stderr
    for n in json.loads(out.stdout)["nodes"]:
        if n["id"] == node and n["online"]:
            return n["drain"], n["drain_reason"], n["drain_by"]
    return None


def wait_for(url: str, cluster: str, node: str, want: str) -> tuple[str, str, str]:
    deadline = time.monotonic() + 30
    while (seen := drain_of(url, cluster, node)) is None or seen[0] != want:
        assert time.monotonic() < deadline, seen
        time.sleep(0.5)
    return seen


def run_sim(url: str, cluster: str, log, *extra: str):
    return spawn("sim", "--broker", url, "--cluster", cluster, "--nodes", "4", *extra, log=log)


def test_a_restarted_simulator_keeps_its_drains_with_a_state_dir(mosquitto, tmp_path):
    url, cluster, where = str(mosquitto.url), "sd", str(tmp_path / "state")
    first = run_sim(url, cluster, tmp_path / "sim1.log", "--state-dir", where)
    try:
        wait_for(url, cluster, "gpu0002", "none")
        res = run_cli("drain", "gpu0002", "--broker", url, "--cluster", cluster,
                      "--reason", "reseat mlx5_ib3 cable", "--operator", "alice")
        assert res.returncode == 0, res.stderr
        wait_for(url, cluster, "gpu0002", "drained")
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
    assert sorted(os.listdir(os.path.join(where, cluster)))[:2] == [
        "sim-gpu.lock", "state-gpu0001.json"]
    second = run_sim(url, cluster, tmp_path / "sim2.log", "--state-dir", where)
    try:
        # Its first status is drained: it never reads in service between the two.
        assert wait_for(url, cluster, "gpu0002", "drained") == (
            "drained", "reseat mlx5_ib3 cable", "alice")
        assert drain_of(url, cluster, "gpu0001")[0] == "none"
    finally:
        assert stop_process(second) == 0
    # Another cluster's simulator in the same DIR does not take this one's drains.
    other = run_sim(url, "sd2", tmp_path / "sim-other.log", "--state-dir", where)
    try:
        wait_for(url, "sd2", "gpu0002", "none")
    finally:
        assert stop_process(other) == 0
    # Without one, the fleet's drains live in memory only: a new simulator forgets them.
    third = run_sim(url, cluster, tmp_path / "sim3.log")
    try:
        wait_for(url, cluster, "gpu0002", "none")
    finally:
        assert stop_process(third) == 0


def test_a_state_dir_that_cannot_be_made_is_one_sentence(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    res = run_cli("sim", "--broker", "mqtt://127.0.0.1:1", "--nodes", "2",
                  "--state-dir", str(blocker / "sub"))
    assert res.returncode != 0
    assert res.stderr.strip().splitlines() == [
        f"fleetdeck sim: --state-dir {blocker / 'sub' / 'demo'}: Not a directory ({blocker} is a "
        "file)."], res.stderr


def test_a_second_simulator_on_one_state_dir_is_refused(mosquitto, tmp_path):
    """Two `sim --state-dir DIR` of one cluster took no lock and overwrote each other's drain
    state. The first holds one (its --procs workers under it, not refused by each other); a
    second of the same prefix is refused as a second agent of a node is, exit 2, and one of
    another prefix (a fleet spread over machines) is not."""
    url, cluster, where = str(mosquitto.url), "lk", str(tmp_path / "state")
    first = run_sim(url, cluster, tmp_path / "sim1.log", "--state-dir", where, "--procs", "2")
    try:
        wait_for(url, cluster, "gpu0004", "none")  # both workers' nodes are up
        res = run_cli("sim", "--broker", url, "--cluster", cluster, "--nodes", "2",
                      "--state-dir", where, timeout=20)
        assert res.returncode == 2, res.stdout + res.stderr
        assert res.stderr.strip().splitlines() == [
            f"fleetdeck sim: another simulator of gpu nodes on cluster '{cluster}' is running "
            f"on --state-dir {where} (pid {first.pid}): two simulators of one fleet take its "
            "nodes' MQTT sessions from each other and overwrite each other's drain state; "
            "stop that one first."], res.stderr
        other = run_sim(url, cluster, tmp_path / "sim-cpu.log", "--state-dir", where,
                        "--prefix", "cpu")
        try:
            wait_for(url, cluster, "cpu0002", "none")
            assert other.poll() is None
        finally:
            assert stop_process(other) == 0
        assert first.poll() is None
    finally:
        assert stop_process(first) == 0
    # Gone with its process: the next one starts.
    again = run_sim(url, cluster, tmp_path / "sim2.log", "--state-dir", where)
    try:
        wait_for(url, cluster, "gpu0001", "none")
    finally:
        assert stop_process(again) == 0


def _children(pid: int) -> list[int]:
    """``pid``'s child processes (from /proc: their stat's ppid field)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = open(f"/proc/{entry}/stat", "rb").read()
        except OSError:
            continue
        if int(raw[raw.rfind(b")") + 1:].split()[1]) == pid:
            out.append(int(entry))
    return out


def test_a_spread_simulator_killed_keeps_its_lock_until_its_workers_stop(mosquitto, tmp_path):
    """`sim --procs 2 --state-dir` SIGKILLed (an OOM kill): the lock was its parent's alone
    (close-on-exec, `spawn` workers), its workers ran on with no one to stop them, and a
    restart was accepted beside them (both fought for every node's session and drain state).
    The workers inherit the lock now, and stop once they see their parent gone."""
    url, cluster, where = str(mosquitto.url), "lkk", str(tmp_path / "state")
    first = run_sim(url, cluster, tmp_path / "sim1.log", "--state-dir", where, "--procs", "2")
    workers: list[int] = []
    try:
        wait_for(url, cluster, "gpu0004", "none")
        workers = [p for p in _children(first.pid)
                   if b"spawn_main" in open(f"/proc/{p}/cmdline", "rb").read()]
        assert len(workers) == 2, workers
        # Held still, so the restart below finds them running whatever the host's speed.
        for p in workers:
            os.kill(p, signal.SIGSTOP)
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        res = run_cli("sim", "--broker", url, "--cluster", cluster, "--nodes", "4",
                      "--state-dir", where, timeout=15)
        assert res.returncode == 2, res.stdout + res.stderr
        assert f"is running on --state-dir {where} (pid {first.pid})" in res.stderr, res.stderr
        for p in workers:
            os.kill(p, signal.SIGCONT)
        deadline = time.monotonic() + 30
        while any(os.path.exists(f"/proc/{p}") and b"spawn_main" in
                  open(f"/proc/{p}/cmdline", "rb").read() for p in workers):
            assert time.monotonic() < deadline, "the orphaned workers ran on"
            time.sleep(0.2)
    finally:
        for p in workers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGCONT)
                os.kill(p, signal.SIGKILL)
        if first.poll() is None:
            os.kill(first.pid, signal.SIGKILL)
            first.wait()
    again = run_sim(url, cluster, tmp_path / "sim2.log", "--state-dir", where)
    try:
        wait_for(url, cluster, "gpu0001", "none")
        assert again.poll() is None
    finally:
        assert stop_process(again) == 0
