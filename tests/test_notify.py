"""The agent talks sd_notify to a real datagram socket, as systemd's Type=notify expects."""

import signal
import socket
import threading
import time

from tests.conftest import spawn, stop_process


class NotifySocket:
    """Reads datagrams continuously, as systemd does (a full queue would block the sender)."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.lines: list[str] = []
        self.running = True
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while self.running:
            try:
                self.lines.extend(self.sock.recv(4096).decode().splitlines())
            except TimeoutError:
                continue

    def close(self) -> None:
        self.running = False
        self.thread.join()
        self.sock.close()

    def wait_for(self, ready: bool, pings: int, timeout: float = 15) -> None:
        """Until READY=1 (if ``ready``) and ``pings`` WATCHDOG=1 have come, or ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (
                ("READY=1" in self.lines or not ready)
                and self.lines.count("WATCHDOG=1") >= pings):
            time.sleep(0.1)


def test_ready_watchdog_status_and_stopping(mosquitto, tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    listener = NotifySocket(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "sd",
                 "--node-id", "gpu0001", log=tmp_path / "agent.log")
    try:
        listener.wait_for(ready=True, pings=2)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        time.sleep(0.3)
    finally:
        stop_process(proc)
        listener.close()
    seen = listener.lines
    assert "READY=1" in seen
    assert seen.count("WATCHDOG=1") >= 2
    assert any(line.startswith("STATUS=publishing to mqtt://") for line in seen)
    assert "STOPPING=1" in seen
    assert seen.index("READY=1") < seen.index("STOPPING=1")


def test_no_notify_socket_means_no_notifications(monkeypatch):
    from fleetdeck.agents.notify import Notifier

    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    n = Notifier()
    assert not n.enabled
    n.ready("x")  # must not raise outside systemd


def test_an_agent_that_never_reached_its_broker_is_ready_and_stops_on_sigterm(
        tmp_path, monkeypatch):
    """On a wrong URL the agent never said READY (a unit of Type=notify timed out and
    restarted in a loop) and ignored SIGTERM and Ctrl-C until SIGKILLed: every `systemctl
    stop` waited out TimeoutStopSec (a newcomer's run). It is ready while it waits for its
    broker, its watchdog pings on a 45 s interval, and SIGTERM ends it at once."""
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    path = str(tmp_path / "notify.sock")
    listener = NotifySocket(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "2000000")
    proc = spawn("agent", "--broker", f"mqtt://127.0.0.1:{port}", "--cluster", "sd",
                 "--node-id", "gpu0001", "--interval", "45", log=tmp_path / "agent.log")
    try:
        listener.wait_for(ready=True, pings=3)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        assert proc.wait(timeout=10) == 0
        assert time.monotonic() - t0 < 5
    finally:
        stop_process(proc)
        listener.close()
    seen = listener.lines
    assert "READY=1" in seen and seen.count("WATCHDOG=1") >= 3, seen
    assert any(line.startswith("STATUS=reconnecting to mqtt://") for line in seen), seen


def test_the_watchdog_is_fed_between_samples_of_a_long_interval(mosquitto, tmp_path,
                                                                monkeypatch):
    """Progress comes once per sample: an agent on --interval 45 under WatchdogSec=30 stopped
    pinging between samples and systemd killed it (a newcomer's run)."""
    path = str(tmp_path / "notify.sock")
    listener = NotifySocket(path)
    monkeypatch.setenv("NOTIFY_SOCKET", path)
    monkeypatch.setenv("WATCHDOG_USEC", "1000000")
    proc = spawn("agent", "--broker", str(mosquitto.url), "--cluster", "sd",
                 "--node-id", "gpu0001", "--interval", "45", log=tmp_path / "agent.log")
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not any(
                line.startswith("STATUS=connected") for line in listener.lines):
            time.sleep(0.1)
        pings = listener.lines.count("WATCHDOG=1")
        time.sleep(4.0)  # four watchdog periods, no sample
        assert listener.lines.count("WATCHDOG=1") >= pings + 6, listener.lines
    finally:
        stop_process(proc)
        listener.close()
