"""Start a private broker on a free loopback port: Mosquitto if installed, else embedded amqtt.

Used by ``fleetdeck demo``, ``fleetdeck broker`` and the test fixtures, so the demo and the tests
run the broker the same way.
"""

import contextlib
import errno
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port

MOSQUITTO = "mosquitto"
AMQTT = "amqtt"


def free_port(host: str = "127.0.0.1") -> int:
    """A port free on ``host`` now; a host this machine cannot listen on is one sentence (it
    was a traceback for ``broker --bind 10.255.255.1 --port 0``: a newcomer's run)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, 0))
        except socket.gaierror:
            raise UserError(f"cannot listen on '{host}': it does not resolve to an address "
                            "(a typo?).") from None
        except OSError as err:
            raise UserError(f"cannot listen on {host}: {(err.strerror or str(err)).lower()} "
                            "(is it an address of this machine?).") from None
        return int(s.getsockname()[1])


def port_in_use(host: str, port: int) -> bool:
    """Whether something already listens on host:port (bound the way brokers bind, with
    SO_REUSEADDR, so a port with only TIME_WAIT leftovers of a killed broker counts as free).
    Other bind errors (no such address, no permission) are left for the broker to report."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as err:
            return err.errno == errno.EADDRINUSE
    return False


def busy_port_error(host: str, port: int) -> UserError:
    return UserError(f"cannot listen on {host_port(host, port)}: the address is already in use "
                     "(another broker? choose another port).")


def find_mosquitto() -> str | None:
    found = shutil.which("mosquitto")
    if found:
        return found
    # Debian installs it in /usr/sbin, which is not on every user's PATH.
    for candidate in ("/usr/sbin/mosquitto", "/usr/local/sbin/mosquitto"):
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def mosquitto_version(binary: str) -> str:
    try:
        out = subprocess.run(
            [binary, "-h"], capture_output=True, text=True, timeout=5, check=False
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "mosquitto"
    first = out.splitlines()[0] if out else "mosquitto"
    return first.replace("version ", "").strip()


def mosquitto_conf(
    port: int, bind: str = "127.0.0.1", persistence_dir: Path | None = None, extra: str = ""
) -> str:
    lines = [
        "per_listener_settings false",
        f"listener {port} {bind}",
        "allow_anonymous true",
        # Nagle + delayed ACK on the broker->console socket adds 10-20 ms of lag (MQTT.md §5b).
        "set_tcp_nodelay true",
        # Larger than any valid fleetdeck payload (64 KiB limit in the codec) so that oversize
        # messages reach the console and are counted there, rather than silently disconnecting.
        "max_packet_size 1048576",
        # The connect burst of a 16,384-node fleet (2 retained per node) for a 3.1.1 client
        # (docs/reliability.md, "The retained burst").
        "max_queued_messages 50000",
        "max_keepalive 120",
        "log_dest stderr",
        "log_type error",
        "log_type warning",
    ]
    if persistence_dir is not None:
        lines += [
            "persistence true",
            f"persistence_location {persistence_dir}/",
            "autosave_interval 5",
        ]
    else:
        lines.append("persistence false")
    return "\n".join(lines) + "\n" + extra


def last_line(log: Path, offset: int = 0) -> str:
    """The last non-empty line a broker wrote to its log after ``offset`` ('' if none)."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            lines = f.read()[-4096:].decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def wait_for_port(host: str, port: int, timeout: float, proc: subprocess.Popen[bytes],
                  why: Callable[[], str] = lambda: "") -> None:
    """Until something accepts connections on host:port; ``why`` says (from the broker's log)
    why the broker exited, if it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            reason = why() or f"exit code {proc.returncode}"
            raise UserError(f"the broker exited at start-up: {reason.rstrip('.')}.")
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.2):
            if proc.poll() is None:
                return
        time.sleep(0.05)
    raise UserError(f"the broker did not start listening on {host_port(host, port)} within "
                    f"{timeout:.0f} s.")


@dataclass
class ManagedBroker:
    """A broker subprocess on loopback. Can be killed and restarted on the same port (tests)."""

    kind: str = "auto"
    """'mosquitto', 'amqtt' or 'auto' (mosquitto if installed)."""
    host: str = "127.0.0.1"
    port: int = 0
    persistent: bool = False
    workdir: Path | None = None
    config: str | None = None
    """A full Mosquitto config instead of the generated one ('{port}' and '{workdir}' are
    filled in): the security tests run the shipped deploy/mosquitto ACL this way."""
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    label: str = field(default="", init=False)
    _tmp: tempfile.TemporaryDirectory[str] | None = field(default=None, init=False)
    _log_start: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.kind == "auto":
            self.kind = MOSQUITTO if find_mosquitto() else AMQTT
        if self.kind not in (MOSQUITTO, AMQTT):
            raise UserError(f"unknown broker kind '{self.kind}' (use mosquitto, amqtt or auto).")
        if self.port == 0:
            self.port = free_port(self.host)
        if self.workdir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="fleetdeck-broker-")
            self.workdir = Path(self._tmp.name)

    @property
    def url(self) -> BrokerURL:
        return BrokerURL(self.host, self.port)

    def start(self, timeout: float = 15.0) -> "ManagedBroker":
        assert self.workdir is not None
        if self.kind == MOSQUITTO:
            binary = find_mosquitto()
            if binary is None:
                raise UserError("mosquitto is not installed (apt-get install -y mosquitto).")
            conf = self.workdir / "mosquitto.conf"
            persist = self.workdir / "data" if self.persistent else None
            if persist is not None:
                persist.mkdir(exist_ok=True)
            if self.config is not None:
                conf.write_text(self.config.replace("{port}", str(self.port))
                                .replace("{workdir}", str(self.workdir)))
            else:
                conf.write_text(mosquitto_conf(self.port, self.host, persist))
            cmd = [binary, "-c", str(conf)]
            self.label = mosquitto_version(binary)
        else:
            cmd = [
                sys.executable,
                "-m",
                "fleetdeck.cli",
                "broker",
                "--serve-embedded",
                "--bind",
                self.host,
                "--port",
                str(self.port),
            ]
            self.label = "amqtt (embedded)"
        # Checked first: otherwise the port answers (the other program) while our broker has
        # already exited, and we would report it listening.
        if port_in_use(self.host, self.port):
            raise busy_port_error(self.host, self.port)
        # stderr into the log too: a pipe nobody reads would stall a long-running broker once
        # it filled, and the log keeps its last words for the error message.
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
            )
        try:
            wait_for_port(self.host, self.port, timeout, self.proc, self.last_words)
        except BaseException:
            self.stop()
            raise
        return self

    @property
    def log_path(self) -> Path:
        assert self.workdir is not None
        return self.workdir / "broker.log"

    def last_words(self) -> str:
        """The broker's last log line since it was (re)started: why it exited."""
        return last_line(self.log_path, self._log_start)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: the broker vanishes without saying goodbye (failure tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "ManagedBroker":
        if self.proc is not None:
            return self
        try:
            return self.start()
        except BaseException:
            self.close()  # __exit__ does not run when __enter__ fails: no temp dir left behind
            raise

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
