"""The demo keeps its audit log, store and recordings in a directory of its own and names it on
exit: a demo drain never lands in the operator's real audit log, a recording never in the
directory the demo was started from (the repository root, with ``make demo``)."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fleetdeck.console.audit import AuditLog, AuditRecord
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.demo import (
    AUDIT_FILE,
    STORE_FILE,
    audit_size,
    commands_since,
    demo_dir,
    where_it_went,
)
from fleetdeck.paths import mark_demo_broker, state_base
from tests.conftest import REPO, spawn, stop_process
from tests.tui.test_tmux_e2e import tmux, wait_for


def test_demo_dir_is_under_xdg_state_and_new_each_run(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert state_base() == tmp_path / "fleetdeck"
    first, second = demo_dir(1_767_225_600.0), demo_dir(1_767_225_600.0)
    assert first.parent == second.parent == tmp_path / "fleetdeck"
    assert first != second and first.name.startswith("demo-") and second.name.endswith("-2")
    assert not list(first.iterdir())


def test_a_console_records_under_xdg_state_not_the_current_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    app = FleetdeckApp(cluster="t", connect=False, auto_tick=False)
    assert app.record_dir == tmp_path / "fleetdeck" / "recordings"


def test_where_it_went_names_every_file(tmp_path):
    (tmp_path / AUDIT_FILE).write_text("{}\n")
    (tmp_path / "fleetdeck-demo-20260101T000000.jsonl.gz").write_bytes(b"")
    text = where_it_went(tmp_path)
    assert f"audit log   {tmp_path / AUDIT_FILE}" in text
    assert str(tmp_path / STORE_FILE) in text
    assert f"fleetdeck replay {tmp_path / 'fleetdeck-demo-20260101T000000.jsonl.gz'}" in text
    assert "no commands were sent" not in text
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "no commands were sent from this console" in where_it_went(empty)
    assert "recordings  none" in where_it_went(empty)


def test_commands_from_a_second_terminal_are_said_on_exit(tmp_path):
    """A drain and a restart typed in a second terminal (no --audit-log) go to the real audit
    log: the demo's exit said "no commands were sent" all the same (a newcomer's run)."""
    real = tmp_path / "real" / "audit.jsonl"
    log = AuditLog(real)
    log.write(AuditRecord(1.0, "root", "drain", "gpu0001", "before the demo", "done", "old",
                          cluster="demo"))
    start = audit_size(real)
    for outcome in ("requested", "done"):  # one command, two records
        log.write(AuditRecord(2.0, "root", "drain", "gpu0012", "XID 79", outcome, "r1",
                              cluster="demo"))
    log.write(AuditRecord(3.0, "root", "restart_job", "job 4102", "retry", "requested", "r2",
                          cluster="demo"))
    log.write(AuditRecord(4.0, "root", "drain", "n1", "another fleet", "done", "r3",
                          cluster="prod"))
    assert commands_since(real, start, "demo") == 2
    assert commands_since(tmp_path / "none.jsonl", 0, "demo") == 0
    demo = tmp_path / "demo-1"
    demo.mkdir()
    text = where_it_went(demo, (real, 2))
    assert "no commands were sent from this console" in text
    assert f"2 commands for cluster 'demo' went to your real audit log {real}" in text
    assert f"--audit-log {demo / AUDIT_FILE}" in text
    assert "elsewhere" not in where_it_went(demo, (real, 0))
    # A second console made the demo's log empty (it checks it can write it) and sent nothing.
    (demo / AUDIT_FILE).write_text("")
    assert "no commands were sent from this console" in where_it_went(demo)


@pytest.mark.tmux
@pytest.mark.needs("tmux", "mosquitto")
def test_demo_drain_and_recording_stay_in_the_demo_dir(tmp_path):
    state, cwd = tmp_path / "state", tmp_path / "cwd"
    cwd.mkdir()
    session = f"fd-demo-{int(time.time() * 1000) % 10**8}"
    cmd = (f"sleep 1; cd {cwd} && XDG_STATE_HOME={state} {sys.executable} -m fleetdeck.cli "
           f"demo --nodes 8 --interval 0.5 --broker-kind mosquitto; echo DEMO-EXITED rc=$?; "
           f"sleep 60")
    tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "48", cmd)
    tmux("set-option", "-t", session, "window-size", "manual")
    tmux("resize-window", "-t", session, "-x", "200", "-y", "48")
    try:
        wait_for(session, "Nodes 8", timeout=40)
        tmux("send-keys", "-t", session, "2")
        wait_for(session, "gpu0008")
        tmux("send-keys", "-t", session, "r")
        wait_for(session, "Drain 1 node")
        tmux("send-keys", "-t", session, "-l", "demo drain")
        tmux("send-keys", "-t", session, "Enter")
        wait_for(session, ": requested")
        tmux("send-keys", "-t", session, "R")
        wait_for(session, "RECORDING")
        time.sleep(1.5)
        tmux("send-keys", "-t", session, "R")
        wait_for(session, "recorded")
        tmux("send-keys", "-t", session, "q")
        # The drain is still open (DRAINING while its job runs): q asks first.
        wait_for(session, "1 command still open: quit anyway? y/n")
        tmux("send-keys", "-t", session, "y")
        screen = wait_for(session, "DEMO-EXITED", timeout=30)
    finally:
        tmux("kill-session", "-t", session)
    runs = list((state / "fleetdeck").glob("demo-*"))
    assert len(runs) == 1
    run = runs[0]
    audit = (run / AUDIT_FILE).read_text()
    assert "demo drain" in audit and "abandoned" in audit
    assert len(list(run.glob("fleetdeck-demo-*.jsonl.gz"))) == 1
    assert (run / STORE_FILE).exists()
    assert not (state / "fleetdeck" / AUDIT_FILE).exists()  # the real audit log: untouched
    assert list(cwd.iterdir()) == []  # nothing in the directory it was started from
    flat = "".join(screen.split())  # the pane wraps long paths
    assert "DEMO-EXITEDrc=0" in flat
    assert "".join(f"this run's files are in {run}".split()) in flat
    assert "".join(f"audit log {run / AUDIT_FILE}".split()) in flat



def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc's children lists)."""
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out.update(kids)
            todo.extend(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.tmux
@pytest.mark.needs("tmux", "mosquitto")
def test_closing_the_terminal_stops_the_demos_broker_and_simulator(tmp_path):
    """tmux kill-session (the terminal goes away: SIGHUP) used to leave the demo's Mosquitto
    running, one per demo, for ever."""
    session = f"fd-hup-{int(time.time() * 1000) % 10**8}"
    pidfile = tmp_path / "pid"
    cmd = (f"echo $$ > {pidfile}; XDG_STATE_HOME={tmp_path} exec {sys.executable} -m "
           "fleetdeck.cli demo --nodes 4 --broker-kind mosquitto")
    tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", cmd)
    try:
        wait_for(session, "Nodes 4", timeout=40)
        demo = int(pidfile.read_text())
        children = _descendants(demo)
        assert len(children) >= 2  # the broker and the simulator
    finally:
        tmux("kill-session", "-t", session)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and any(_alive(p) for p in {demo, *children}):
        time.sleep(0.2)
    assert not [p for p in {demo, *children} if _alive(p)]


@pytest.mark.tmux
@pytest.mark.needs("tmux", "mosquitto", "make")
def test_closing_the_terminal_under_make_stops_the_demo(tmp_path):
    """``make demo`` in a tmux pane whose terminal goes away: make gets the SIGHUP and does not
    pass it on; the demo used to live on with no screen, its broker and simulator with it. It
    notices that it lost its controlling terminal and exits as on SIGHUP."""
    import subprocess

    # A tmux server of its own, ended with kill-server: it closes the pane's terminal without
    # signalling the pane's processes (kill-session sends them SIGHUP itself).
    server = ["tmux", "-L", f"fd-hupw-{os.getpid()}-{int(time.time() * 1000) % 10**8}"]
    pidfile = tmp_path / "pid"
    makefile = tmp_path / "Makefile"
    makefile.write_text(f"demo:\n\tXDG_STATE_HOME={tmp_path} {sys.executable} -m fleetdeck.cli "
                        "demo --nodes 4 --broker-kind mosquitto\n")
    cmd = f"echo $$ > {pidfile}; exec make -f {makefile} demo"
    subprocess.run([*server, "new-session", "-d", "-x", "160", "-y", "48", cmd], check=True,
                   cwd=REPO)
    try:
        deadline = time.monotonic() + 40
        screen = ""
        while time.monotonic() < deadline and "Nodes 4" not in screen:
            time.sleep(0.3)
            screen = subprocess.run([*server, "capture-pane", "-p"], capture_output=True,
                                    text=True, check=False).stdout
        assert "Nodes 4" in screen, screen
        wrapper = int(pidfile.read_text())
        family = _descendants(wrapper)
        assert len(family) >= 3  # the demo, its broker and its simulator
    finally:
        subprocess.run([*server, "kill-server"], check=False)
    deadline = time.monotonic() + 25  # noticed within a second; then the orderly exit
    while time.monotonic() < deadline and any(_alive(p) for p in family):
        time.sleep(0.2)
    assert not [p for p in family if _alive(p)]


@pytest.mark.needs("mosquitto")
def test_sigterm_stops_the_demos_broker_and_simulator(tmp_path):
    import signal
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "fleetdeck.cli", "demo", "--nodes", "4",
                             "--broker-kind", "mosquitto", "--headless", "60"],
                            env={**os.environ, "XDG_STATE_HOME": str(tmp_path)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        children: set[int] = set()
        while time.monotonic() < deadline and len(children) < 2:
            time.sleep(0.3)
            children = _descendants(proc.pid)
        assert len(children) >= 2, "the demo never started its broker and simulator"
        time.sleep(1.0)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in children):
        time.sleep(0.2)
    assert not [p for p in children if _alive(p)]


@pytest.mark.tmux
@pytest.mark.needs("tmux", "mosquitto")
def test_closing_the_terminal_ends_the_console(mosquitto, tmp_path):
    """A console whose terminal went away (SIGHUP) exits as q does: it used to wait for ever
    in Textual's shutdown on the hung-up tty, a process with no screen."""
    sim = spawn("sim", "--broker", str(mosquitto.url), "--cluster", "hup", "--nodes", "4",
                "--interval", "0.5", log=tmp_path / "sim.log")
    session = f"fd-hupc-{int(time.time() * 1000) % 10**8}"
    pidfile = tmp_path / "pid"
    cmd = (f"echo $$ > {pidfile}; XDG_STATE_HOME={tmp_path} exec {sys.executable} -m "
           f"fleetdeck.cli console --broker {mosquitto.url} --cluster hup")
    tmux("new-session", "-d", "-s", session, "-x", "120", "-y", "40", cmd)
    try:
        wait_for(session, "Nodes 4", timeout=40)
        time.sleep(2)
        console = int(pidfile.read_text())
    finally:
        tmux("kill-session", "-t", session)
        stop_process(sim)
        mosquitto.kill()  # as the suite's teardown does: the broker goes while it exits
    deadline = time.monotonic() + 20  # the orderly exit, or the watchdog (STOP_GRACE_S)
    while time.monotonic() < deadline and _alive(console):
        time.sleep(0.2)
    assert not _alive(console)


def test_the_commands_it_prints_run_from_the_shell_the_demo_ran_in(tmp_path, monkeypatch):
    """``make demo``'s fleetdeck is in its virtualenv, not on PATH: the printed commands name
    it (a newcomer pasted "fleetdeck events …" and got "command not found")."""
    import shlex
    import subprocess
    import sys
    from pathlib import Path

    venv_bin = Path(sys.executable).parent
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.chdir(venv_bin.parent.parent)
    line = next(x for x in where_it_went(tmp_path).splitlines() if "events --db" in x)
    cmd = line[line.index("(") + 1:line.rindex(")")]
    assert not cmd.startswith("fleetdeck "), cmd
    res = subprocess.run([*shlex.split(cmd), "--since", "1m"], capture_output=True, text=True,
                         timeout=60, check=False)
    assert "command not found" not in res.stderr and "No such file" not in res.stderr
    assert f"no store at {tmp_path / STORE_FILE}" in res.stderr  # it ran, and said why


def test_the_demo_console_records_the_operator_as_the_cli_does(monkeypatch, tmp_path):
    """$USER unset: the demo's console audited "demo" while `fleetdeck drain` from a second
    terminal audited the login name ("root"), two operators for one person."""
    import contextlib
    import subprocess

    import fleetdeck.console.tui.app as app
    import fleetdeck.demo as demo
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.cli import build_parser
    from fleetdeck.console.audit import os_user

    monkeypatch.delenv("USER", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))

    class Broker(contextlib.nullcontext):
        kind, label, workdir = "mosquitto", "mosquitto", tmp_path
        url = BrokerURL("127.0.0.1", 9)

        def kill(self) -> None: ...
        def close(self) -> None: ...

    class Sim:
        def __init__(self, *_a, **_k) -> None: ...
        def kill(self) -> None: ...
        def terminate(self) -> None: ...
        def wait(self, timeout=None) -> int:
            return 0

    seen = {}
    monkeypatch.setattr(demo, "ManagedBroker", lambda kind, port=0: Broker())
    monkeypatch.setattr(demo, "refuse_unless_it_fits", lambda *a, **k: None)
    monkeypatch.setattr(subprocess, "Popen", Sim)
    monkeypatch.setattr(app, "run_console", lambda *a, **k: seen.update(k) or 0)
    args = build_parser().parse_args(["demo"])
    assert demo.run_demo(args) == 0
    cli = build_parser().parse_args(["drain", "gpu0001", "--reason", "x"])
    assert seen["operator"] == os_user() == cli.operator


def _drain(state: Path, port: int, *extra: str, host: str = "127.0.0.1",
           scheme: str = "mqtt", command: str = "drain",
           wrap: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_STATE_HOME": str(state)}
    env.pop("FLEETDECK_BROKER", None)
    env.pop("FLEETDECK_CLUSTER", None)
    # A bad hostlist: refused before anything is sent, and audited as refused (README).
    what = ["gpu[0001"] if command != "restart-job" else ["4102"]
    return subprocess.run([*wrap, sys.executable, "-m", "fleetdeck.cli", command, *what,
                           "--reason", "drill", "--broker", f"{scheme}://{host}:{port}",
                           "--timeout", "1", *extra], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_a_second_terminals_drain_against_the_demo_is_audited_in_the_demos_log(tmp_path):
    """``fleetdeck drain`` typed in a second terminal against the demo's broker wrote the
    operator's real audit log: a drill's records in the production trail (a newcomer's run).
    It finds the running demo by its broker and writes the demo's log instead, saying so."""
    from fleetdeck.paths import mark_demo_broker

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    real = state / "fleetdeck" / AUDIT_FILE
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")  # held: the demo is running
    res = _drain(state, 21999)
    assert res.returncode == 2, res.stderr
    assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr
    assert "gpu[0001" in (run / AUDIT_FILE).read_text()
    assert '"refused"' in (run / AUDIT_FILE).read_text()
    assert not real.exists()  # the real audit log: untouched
    # Another broker is not the demo's: the real log, as before.
    res = _drain(state, 21998)
    assert res.returncode == 2 and "demo's log" not in res.stderr
    assert "gpu[0001" in real.read_text()
    # --audit-log still chooses.
    mine = tmp_path / "mine.jsonl"
    res = _drain(state, 21999, "--audit-log", str(mine))
    assert res.returncode == 2 and "demo's log" not in res.stderr and mine.exists()
    mark.close()
    assert not (run / "broker.json").exists()


def _real_log_only(state: Path, run: Path, *args: str, **kw) -> None:
    """The command is audited in the operator's real log, and the demo's is left as it was."""
    real = state / "fleetdeck" / AUDIT_FILE
    demos = run / AUDIT_FILE
    before = (real.read_text() if real.exists() else "", demos.read_text()
              if demos.exists() else None)
    res = _drain(state, 21999, *args, **kw)
    assert res.returncode == 2, res.stderr
    assert "demo's log" not in res.stderr
    assert (demos.read_text() if demos.exists() else None) == before[1]
    assert len(real.read_text()) > len(before[0])


_HOLD = """
import sys, time
from pathlib import Path
from fleetdeck.paths import mark_demo_broker
mark = mark_demo_broker(Path(sys.argv[1]), "127.0.0.1", 21999, "demo")
print("marked", flush=True)
time.sleep(120)
"""


def test_a_real_broker_on_a_dead_demos_port_is_not_taken_for_the_demo(tmp_path):
    """A demo killed by SIGKILL (an OOM kill, a reboot) leaves its mark; its pid reused (pid 1
    in a container), or a pid not ours to signal, read as alive, and a real operator's drain
    against a real broker later on that loopback port (an ssh tunnel, a local Mosquitto) was
    audited into the old demo's folder. The demo holds its mark locked: the kernel lets go of
    the lock with the process, so the mark of a dead demo is never matched, whatever its pid."""
    import json
    import signal
    import socket

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    demo = subprocess.Popen([sys.executable, "-c", _HOLD, str(run)], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert demo.stdout is not None and demo.stdout.readline() == "marked\n"
        said = json.loads((run / "broker.json").read_text())
        assert said == {"host": "127.0.0.1", "port": 21999, "cluster": "demo", "pid": demo.pid,
                        "boot_id": Path("/proc/sys/kernel/random/boot_id").read_text().strip(),
                        "netns": os.stat("/proc/self/ns/net").st_ino,
                        "hostname": socket.gethostname()}
        # Alive and holding its mark: found.
        res = _drain(state, 21999)
        assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr
        os.kill(demo.pid, signal.SIGKILL)  # its 'finally' never runs: the mark stays
        demo.wait()
    finally:
        demo.kill()
        demo.wait()
    assert (run / "broker.json").exists()
    _real_log_only(state, run)
    # The same mark naming a pid that is alive but is not the demo (this test; pid 1): the
    # real log all the same.
    for pid in (os.getpid(), 1, 0, -1):
        (run / "broker.json").write_text(json.dumps({**said, "pid": pid}) + "\n")
        _real_log_only(state, run)


def _unshare(*flags: str) -> tuple[str, ...]:
    """``unshare`` with ``flags`` as an unprivileged user namespace allows, or skip."""
    import shutil

    wrap = ("unshare", "-r", *flags)
    if shutil.which("unshare") is None or subprocess.run(
            [*wrap, "true"], capture_output=True, check=False).returncode != 0:
        pytest.skip(f"no {' '.join(wrap)} here")
    return wrap


def test_a_drain_from_another_host_or_network_namespace_is_not_the_demos(tmp_path):
    """``flock`` reaches across network namespaces and NFS clients: a drain typed in a
    container sharing $HOME (another network namespace), or on another login node over NFS,
    against a real broker of its own at 127.0.0.1 on the demo's port, found the live demo's
    mark and its real drain was audited into the demo's log. The mark names the demo's host's
    boot and its network namespace, and both must be this process's."""
    import json

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")  # held: the demo is running
    try:
        said = json.loads((run / "broker.json").read_text())
        # Another network namespace, as a container's: its 127.0.0.1 is another socket.
        _real_log_only(state, run, wrap=_unshare("-n"))
        # Rewritten in place, the lock kept: another login node over NFS (another boot, its
        # host name the same or not), another netns.
        for other in ({"boot_id": "5c1f0d2e-another-boot"},
                      {"boot_id": "5c1f0d2e-another-boot", "hostname": "login02"},
                      {"netns": said["netns"] + 1}):
            (run / "broker.json").write_text(json.dumps({**said, **other}) + "\n")
            _real_log_only(state, run)
        # Its own host and namespace: the demo's (the checks above stood on this).
        (run / "broker.json").write_text(json.dumps(said) + "\n")
        res = _drain(state, 21999)
        assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr
    finally:
        mark.close()


def _demos(state: Path, run: Path) -> None:
    """The command is audited in the demo's log, saying so."""
    res = _drain(state, 21999)
    assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr, res.stderr
    assert "gpu[0001" in (run / AUDIT_FILE).read_text()
    assert not (state / "fleetdeck" / AUDIT_FILE).exists()  # the real log: untouched


def test_a_demo_whose_host_was_renamed_is_still_found(monkeypatch, tmp_path):
    """A laptop's host name changes under a running demo (DHCP, NetworkManager, another
    network): matched by host name, a drain in a second terminal went to the operator's real
    audit log and a second console opened the real ``<cluster>.db``. The boot id names the
    host, and a host name is compared only where no boot id can be; a side that cannot read
    its network namespace is no other namespace."""
    import json
    import socket

    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.paths import running_demo

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")  # held: the demo is running
    try:
        said = json.loads((run / "broker.json").read_text())
        # Renamed since the demo wrote its mark, as the second terminal's command sees it.
        (run / "broker.json").write_text(
            json.dumps({**said, "hostname": said["hostname"] + "-wifi"}) + "\n")
        _demos(state, run)
        (run / "broker.json").write_text(json.dumps(said) + "\n")
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        url = BrokerURL("127.0.0.1", 21999)
        monkeypatch.setattr(socket, "gethostname", lambda: "laptop.home.example")
        assert running_demo(url, ["demo"]) == run
        # The demo could not read its network namespace, or this process cannot: not known.
        (run / "broker.json").write_text(json.dumps({**said, "netns": None}) + "\n")
        assert running_demo(url, ["demo"]) == run
        (run / "broker.json").write_text(json.dumps(said) + "\n")
        monkeypatch.setattr("fleetdeck.paths._NETNS", str(tmp_path / "no-such-ns"))
        assert running_demo(url, ["demo"]) == run
    finally:
        mark.close()


def test_the_host_name_decides_only_where_no_boot_id_can_be_read(monkeypatch, tmp_path):
    """Off Linux (no /proc) neither side has a boot id: the host name is what tells another
    login node sharing the folder over NFS from this one."""
    import json

    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.paths import running_demo

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.setattr("fleetdeck.paths._BOOT_ID", str(tmp_path / "no-boot-id"))
    run = tmp_path / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")
    try:
        said = json.loads((run / "broker.json").read_text())
        assert said["boot_id"] is None
        url = BrokerURL("127.0.0.1", 21999)
        assert running_demo(url, ["demo"]) == run
        (run / "broker.json").write_text(json.dumps({**said, "hostname": "login02"}) + "\n")
        assert running_demo(url, ["demo"]) is None
    finally:
        mark.close()


def test_a_demo_marked_before_its_host_was_named_is_still_found(tmp_path):
    """A demo started before the upgrade, still running, holds a mark without ``boot_id``,
    ``netns`` or ``hostname``: read with ``said[key]`` it raised KeyError and was passed over,
    so its drills went to the operator's real log. What the mark does not say is not known;
    its lock still says the demo lives. A mark that names a host name but no boot id (the
    release between) is compared by host name."""
    import json
    import socket

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")  # held: the demo is running
    try:
        said = json.loads((run / "broker.json").read_text())
        old = {k: said[k] for k in ("host", "port", "cluster", "pid")}
        (run / "broker.json").write_text(json.dumps(old) + "\n")
        _demos(state, run)
        between = {**old, "hostname": "login02", "netns": said["netns"]}
        (run / "broker.json").write_text(json.dumps(between) + "\n")
        _real_log_only(state, run)
        between["hostname"] = socket.gethostname()
        (run / "broker.json").write_text(json.dumps(between) + "\n")
        res = _drain(state, 21999)
        assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr, res.stderr
    finally:
        mark.close()


def test_a_demo_running_as_pid_1_is_found(tmp_path):
    """A demo that is a container's entrypoint runs as pid 1: its mark said pid 1 and was
    passed over, so its drills went to the operator's real log. The lock, not the pid, says
    the demo lives."""
    import json
    import signal

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    # A pid namespace of its own, as a container's: the demo is pid 1 there.
    demo = subprocess.Popen([*_unshare("-pf", "--kill-child"), sys.executable, "-c", _HOLD,
                             str(run)], stdout=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)
    try:
        assert demo.stdout is not None and demo.stdout.readline() == "marked\n"
        assert json.loads((run / "broker.json").read_text())["pid"] == 1
        res = _drain(state, 21999)
        assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr, res.stderr
        assert "gpu[0001" in (run / AUDIT_FILE).read_text()
    finally:
        # Its group: unshare's child (pid 1 inside) as well, which holds the lock.
        os.killpg(demo.pid, signal.SIGKILL)
        demo.wait()
    # Once it is gone, its mark is unlocked: the real log.
    _real_log_only(state, run)


def test_only_what_the_demos_broker_can_be_is_taken_for_it(tmp_path):
    """The demo's broker is plain MQTT on 127.0.0.1 for one cluster: a TLS URL, a user name,
    another cluster, ``::1`` (another socket: a tunnel may sit on it) are someone else's and
    write the real log; a dry run sends nothing and leaves the demo's log unmade."""
    from fleetdeck.paths import mark_demo_broker

    state = tmp_path / "state"
    run = state / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")
    try:
        _real_log_only(state, run, scheme="mqtts")
        _real_log_only(state, run, host="ops@127.0.0.1")
        _real_log_only(state, run, "--cluster", "prod")
        _real_log_only(state, run, host="[::1]")
        # A dry run: nothing to audit, no notice, and the demo's log is not made.
        res = _drain(state, 21999, "--dry-run", command="restart-job")
        assert "demo's log" not in res.stderr
        assert not (run / AUDIT_FILE).exists()
        # The demo's own broker, its own cluster: its log (the checks above stood on this).
        res = _drain(state, 21999, "--cluster", "demo")
        assert f"audited in the demo's log {run / AUDIT_FILE}" in res.stderr
    finally:
        mark.close()


def test_localhost_is_the_demos_broker_only_where_it_is_its_address(monkeypatch, tmp_path):
    """``localhost`` names the demo's broker only if every address it resolves to is the
    one the demo's broker listens on: resolved to ``::1`` first, a client reached whatever
    listened there."""
    import socket

    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.paths import mark_demo_broker, running_demo

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    run = tmp_path / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21999, "demo")
    try:
        def resolves(*addresses: str):
            return lambda *_a, **_k: [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, 0))
                                      for a in addresses]

        monkeypatch.setattr(socket, "getaddrinfo", resolves("127.0.0.1"))
        assert running_demo(BrokerURL("localhost", 21999), ["demo"]) == run
        monkeypatch.setattr(socket, "getaddrinfo", resolves("::1", "127.0.0.1"))
        assert running_demo(BrokerURL("localhost", 21999), ["demo"]) is None
        assert running_demo(BrokerURL("::1", 21999), ["demo"]) is None
        assert running_demo(BrokerURL("127.0.0.1", 21999), ["demo"]) == run
    finally:
        mark.close()


def test_the_demo_marks_its_broker_while_it_runs_and_keeps_its_log(monkeypatch, tmp_path):
    """The mark a second terminal's commands find is there while the console runs and gone
    after; the console's log lines go to the demo's folder, not the real state folder."""
    import contextlib
    import subprocess

    import fleetdeck.console.tui.app as app
    import fleetdeck.demo as demo
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.cli import build_parser
    from fleetdeck.paths import running_demo

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))

    class Broker(contextlib.nullcontext):
        kind, label, workdir = "mosquitto", "mosquitto", tmp_path
        url = BrokerURL("127.0.0.1", 21997)

        def kill(self) -> None: ...
        def close(self) -> None: ...

    class Sim:
        def __init__(self, *_a, **_k) -> None: ...
        def kill(self) -> None: ...
        def terminate(self) -> None: ...
        def wait(self, timeout=None) -> int:
            return 0

    seen = {}

    def console(*_a, **k) -> int:
        seen.update(k, running=running_demo(BrokerURL("127.0.0.1", 21997), ["demo"]))
        return 0

    monkeypatch.setattr(demo, "ManagedBroker", lambda kind, port=0: Broker())
    monkeypatch.setattr(demo, "refuse_unless_it_fits", lambda *a, **k: None)
    monkeypatch.setattr(subprocess, "Popen", Sim)
    monkeypatch.setattr(app, "run_console", console)
    assert demo.run_demo(build_parser().parse_args(["demo"])) == 0
    run = seen["running"]
    assert run is not None and run.parent == tmp_path / "fleetdeck"
    assert seen["audit_path"] == run / AUDIT_FILE
    assert seen["log_path"] == run / "console.log"
    assert running_demo(BrokerURL("127.0.0.1", 21997), ["demo"]) is None  # ended: gone
    assert not list(run.glob("*broker.json*"))


def test_a_demo_ended_by_force_exit_takes_its_mark_away(monkeypatch, tmp_path):
    """A console that cannot stop (an event loop blocked on a terminal gone away) is ended by
    ``force_exit``, ``os._exit``: no ``finally`` runs, and the demo's mark stayed in its
    folder (unlocked, so harmless, but a stale file beside its logs). Its last words remove
    it."""
    import contextlib
    import subprocess

    import fleetdeck.console.tui.app as app
    import fleetdeck.demo as demo
    import fleetdeck.runtime as runtime
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.cli import build_parser

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))

    class Broker(contextlib.nullcontext):
        kind, label, workdir = "mosquitto", "mosquitto", tmp_path
        url = BrokerURL("127.0.0.1", 21994)

        def kill(self) -> None: ...
        def close(self) -> None: ...

    class Sim:
        def __init__(self, *_a, **_k) -> None: ...
        def kill(self) -> None: ...
        def terminate(self) -> None: ...
        def wait(self, timeout=None) -> int:
            return 0

    class Ended(BaseException):
        pass

    marks: dict[str, list[Path]] = {}

    def exit_now(code: int) -> None:
        # What os._exit leaves behind: the files as the process ends.
        marks["at exit"] = list((tmp_path / "fleetdeck").glob("demo-*/*broker.json*"))
        raise Ended(code)

    def console(*_a, **_k) -> int:
        marks["running"] = list((tmp_path / "fleetdeck").glob("demo-*/*broker.json*"))
        runtime.force_exit(129)

    monkeypatch.setattr(demo, "ManagedBroker", lambda kind, port=0: Broker())
    monkeypatch.setattr(demo, "refuse_unless_it_fits", lambda *a, **k: None)
    monkeypatch.setattr(subprocess, "Popen", Sim)
    monkeypatch.setattr(app, "run_console", console)
    monkeypatch.setattr(runtime.os, "_exit", exit_now)
    with pytest.raises(Ended):
        demo.run_demo(build_parser().parse_args(["demo"]))
    assert [p.name for p in marks["running"]] == ["broker.json"]
    assert marks["at exit"] == []


def test_a_second_console_against_the_demo_keeps_out_of_the_real_state(monkeypatch, tmp_path):
    """A second ``fleetdeck console`` against the demo's broker wrote the default store,
    ``$XDG_STATE_HOME/fleetdeck/demo.db`` (the operator's real one when their cluster is the
    default 'demo'), and the real audit log; both go to the demo's folder now."""
    import fleetdeck.console.tui.app as app
    from fleetdeck.cli import build_parser, cmd_console
    from fleetdeck.paths import mark_demo_broker

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    monkeypatch.delenv("FLEETDECK_BROKER", raising=False)
    run = tmp_path / "fleetdeck" / "demo-20261206T093801"
    run.mkdir(parents=True)
    mark = mark_demo_broker(run, "127.0.0.1", 21996, "demo")
    seen: dict = {}
    monkeypatch.setattr(app, "run_console", lambda *a, **k: seen.update(k) or 0)
    args = build_parser().parse_args(["console", "--broker", "mqtt://127.0.0.1:21996"])
    assert cmd_console(args) == 0
    assert seen["audit_path"] == run / AUDIT_FILE
    store = seen["stores"]["demo"]
    assert store.parent == run and store.name != STORE_FILE  # not the demo console's
    # Another broker: the defaults, as before.
    args = build_parser().parse_args(["console", "--broker", "mqtt://127.0.0.1:21995"])
    assert cmd_console(args) == 0
    assert seen["audit_path"] is None
    assert seen["stores"]["demo"] == tmp_path / "fleetdeck" / "demo.db"
    # Another cluster on that broker is not the demo's: the defaults too.
    args = build_parser().parse_args(["console", "--broker", "mqtt://127.0.0.1:21996",
                                      "--cluster", "prod"])
    assert cmd_console(args) == 0
    assert seen["audit_path"] is None
    assert seen["stores"]["prod"] == tmp_path / "fleetdeck" / "prod.db"
    mark.close()
    # The second console's store is named when the demo ends, and found by 'events'.
    from fleetdeck.console.cli.history import demo_stores

    store.write_bytes(b"")
    assert f"store       {store}  (a second console's; " in where_it_went(run)
    assert demo_stores() == [store]
