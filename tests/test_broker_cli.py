"""`fleetdeck broker` as a real process: a busy port is one sentence, and SIGTERM (or SIGHUP)
cleans up its Mosquitto child and temporary directory the way Ctrl-C does."""

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdeck.broker import free_port
from tests.conftest import REPO, fleetdeck_cmd, require_binaries, run_cli


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else already listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize("kind", ["mosquitto", "amqtt"])
def test_a_busy_port_is_one_sentence_never_listening(busy_port, kind):
    if kind == "mosquitto":
        require_binaries("mosquitto")
    res = run_cli("broker", "--kind", kind, "--port", str(busy_port), timeout=60)
    assert res.returncode == 2, res.stderr
    said = res.stderr.strip().splitlines()
    assert said == [f"fleetdeck broker: cannot listen on 127.0.0.1:{busy_port}: the address is "
                    "already in use (another broker? choose another port)."]


def test_a_port_out_of_range_is_refused():
    res = run_cli("broker", "--port", "70000")
    assert res.returncode == 2 and "--port must be between 0 and 65535" in res.stderr
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize(("argv", "words"), [
    (("--kind", "amqtt", "--allow-remote", "--bind", "10.255.255.1"),
     "cannot listen on 10.255.255.1: cannot assign requested address"),
    (("--kind", "amqtt", "--allow-remote", "--bind", "nosuchhost.invalid"),
     "cannot listen on 'nosuchhost.invalid': it does not resolve"),
])
def test_an_address_it_cannot_listen_on_is_one_sentence_with_port_0(argv, words):
    """With ``--port 0`` the free port was looked up on the address first, and that raised a
    traceback (a newcomer's run); a fixed port already got a sentence."""
    res = run_cli("broker", *argv, "--port", "0", timeout=60)
    assert res.returncode == 2, res.stderr
    assert words in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_the_demo_takes_its_brokers_port_and_a_busy_one_is_one_sentence(busy_port):
    """The demo's broker always took a random port: an operator who must stay within a port
    range (a newcomer's run) could not run it."""
    require_binaries("mosquitto")
    res = run_cli("demo", "--nodes", "4", "--headless", "1", "--port", str(busy_port))
    assert res.returncode == 2, res.stderr
    assert res.stderr == (f"fleetdeck demo: cannot listen on 127.0.0.1:{busy_port}: the "
                          "address is already in use (another broker? choose another port).\n")


@pytest.mark.parametrize("where", ["under-a-file", "a-file-in-its-place"])
def test_a_demo_without_a_writable_state_folder_is_one_sentence(tmp_path, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    state = blocker / "x"
    if where == "a-file-in-its-place":  # $XDG_STATE_HOME/fleetdeck is a file
        state = tmp_path / "state"
        state.mkdir()
        (state / "fleetdeck").write_text("not a folder")
    res = subprocess.run(fleetdeck_cmd("demo", "--nodes", "4"), capture_output=True, text=True,
                         timeout=60, cwd=REPO, check=False,
                         env={**os.environ, "XDG_STATE_HOME": str(state)})
    assert res.returncode == 2, res.stderr
    assert "cannot make the demo's folder" in res.stderr and "Traceback" not in res.stderr


def children(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


class RunningBroker:
    """`fleetdeck broker --port P` with its own TMPDIR, up and listening, its child known."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path / "tmp"
        self.tmp.mkdir()
        self.err = tmp_path / "broker.err"
        with self.err.open("wb") as err:
            self.proc = subprocess.Popen(
                fleetdeck_cmd("broker", "--port", str(free_port())), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=err, cwd=REPO, start_new_session=True,
                env={**os.environ, "TMPDIR": str(self.tmp)},
            )
        deadline = time.monotonic() + 30
        while "listening" not in self.stderr():
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline, "fleetdeck broker did not start"
            time.sleep(0.05)
        kids = children(self.proc.pid)
        assert len(kids) == 1, kids
        self.child = kids[0]
        assert "mosquitto" in Path(f"/proc/{self.child}/cmdline").read_text()
        assert len(list(self.tmp.iterdir())) == 1  # its fleetdeck-broker-* directory

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def close(self) -> None:
        for pid in (self.proc.pid, self.child):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait()


@pytest.mark.parametrize(
    ("sig", "code"),
    [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["ctrl-c", "sigterm", "sighup"],
)
def test_a_stop_signal_removes_the_mosquitto_child_and_the_temp_dir(tmp_path, sig, code):
    require_binaries("mosquitto")
    broker = RunningBroker(tmp_path)
    try:
        broker.proc.send_signal(sig)
        assert broker.proc.wait(timeout=20) == code, broker.stderr()
        deadline = time.monotonic() + 5
        while alive(broker.child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(broker.child), "the mosquitto child outlived fleetdeck broker"
        assert list(broker.tmp.iterdir()) == [], "the temporary directory was left behind"
        assert "Traceback" not in broker.stderr()
    finally:
        broker.close()


def test_a_broker_that_dies_under_it_is_one_sentence(tmp_path):
    require_binaries("mosquitto")
    broker = RunningBroker(tmp_path)
    try:
        os.kill(broker.child, signal.SIGKILL)
        assert broker.proc.wait(timeout=20) == 2
        last = broker.stderr().strip().splitlines()[-1]
        assert last.startswith("fleetdeck broker: mosquitto") and "stopped by itself" in last
        assert list(broker.tmp.iterdir()) == []
    finally:
        broker.close()


@pytest.mark.parametrize("port", ["0", "fixed"])
def test_the_embedded_broker_says_where_it_listens(tmp_path, port):
    """`broker --kind amqtt` said nothing: with --port 0 ("any free port, printed") nobody
    could learn which port to point agents at."""
    asked = "0" if port == "0" else str(free_port())
    err = tmp_path / "broker.err"
    with err.open("wb") as out:
        proc = subprocess.Popen(fleetdeck_cmd("broker", "--kind", "amqtt", "--port", asked),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=out, cwd=REPO, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while "listening on" not in err.read_text():
            assert proc.poll() is None, err.read_text()
            assert time.monotonic() < deadline, f"nothing said in 30 s: {err.read_text()!r}"
            time.sleep(0.05)
        line = err.read_text().strip().splitlines()[-1]
        url = line.split("listening on ", 1)[1].split()[0]
        assert url.startswith("mqtt://127.0.0.1:"), line
        listening = int(url.rsplit(":", 1)[1])
        assert listening != 0 and (port == "0" or listening == int(asked)), line
        with socket.create_connection(("127.0.0.1", listening), timeout=5):
            pass
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=20)
    assert "Traceback" not in err.read_text()
    # A Ctrl-C says so in the exit code, as Mosquitto's path and every other command do (it was
    # 0, which a wrapper script reads as "the broker finished its work").
    assert code == 128 + signal.SIGINT, err.read_text()
