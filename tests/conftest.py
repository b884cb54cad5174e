"""Real parts: a private Mosquitto (and amqtt where that path is tested) on a free loopback port.

No mocked MQTT client anywhere. Tests that need a program (mosquitto, openssl, tmux) say so with
``require_binaries`` or ``@pytest.mark.needs(...)``: they skip with a clear message when it is
truly absent, and FAIL when $CI is set, because .ci/run installs them all there.
"""

import asyncio
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import aiomqtt
import pytest

from fleetdeck.broker import AMQTT, MOSQUITTO, ManagedBroker, find_mosquitto, mosquitto_conf
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.shard import ShardScope
from fleetdeck.console.sharding import ShardRunner, collector_will
from fleetdeck.protocol.topics import shard_subscriptions

REPO = Path(__file__).resolve().parent.parent

PACKAGE_OF = {"mosquitto": "mosquitto", "mosquitto_passwd": "mosquitto", "openssl": "openssl",
              "prometheus": "prometheus", "chromium": "chromium",
              "tmux": "tmux"}
"""The Debian package each program the suite runs comes from (.ci/run installs them)."""


def on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def find_binary(name: str) -> str | None:
    # Debian puts mosquitto in /usr/sbin, not on every PATH.
    return find_mosquitto() if name == "mosquitto" else shutil.which(name)


def require_binaries(*names: str) -> None:
    """Skip the calling test when a program it needs is not installed; fail it instead when
    $CI is set, where a missing program means a broken CI set-up, not fewer tests to run."""
    missing = [name for name in names if find_binary(name) is None]
    if not missing:
        return
    packages = " ".join(sorted({PACKAGE_OF.get(name, name) for name in missing}))
    why = f"{', '.join(missing)} not installed (apt-get install -y {packages}; .ci/run does)"
    if on_ci():
        pytest.fail(f"{why}; CI is set, so this fails instead of skipping", pytrace=False)
    pytest.skip(why)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs(*programs): skip without these programs, or fail when $CI is set")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Before any fixture: module fixtures may already run the programs.
    for mark in item.iter_markers("needs"):
        require_binaries(*mark.args)


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[ManagedBroker]:
    require_binaries("mosquitto")
    broker = ManagedBroker(MOSQUITTO, workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    with broker:
        yield broker


@pytest.fixture
def telling_mosquitto(tmp_path: Path) -> Iterator[ManagedBroker]:
    """The private Mosquitto of ``mosquitto``, which also logs each SUBSCRIBE and UNSUBSCRIBE
    it takes: a test waits for a program to have subscribed (``subscribers``) or unsubscribed
    (``unsubscribed``) instead of guessing how long that takes on a loaded machine."""
    require_binaries("mosquitto")
    broker = ManagedBroker(MOSQUITTO, workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    broker.config = mosquitto_conf(broker.port, broker.host,
                                   extra="log_type subscribe\nlog_type unsubscribe\n")
    with broker:
        yield broker


def subscribers(broker: ManagedBroker, client_prefix: str) -> int:
    """How many clients whose id starts with ``client_prefix`` subscribed on a
    ``telling_mosquitto`` so far. The broker logs a SUBSCRIBE as it takes it, a
    '<time>: <client id> <qos> <filter>' line per filter, and one packet carries all of a
    connection's filters (up to 256): once its client is named here, what is published later
    reaches it."""
    if not broker.log_path.exists():
        return 0
    rows = (line.split() for line in broker.log_path.read_text(errors="replace").splitlines())
    return len({row[1] for row in rows if len(row) == 4 and row[1].startswith(client_prefix)})


def unsubscribed(broker: ManagedBroker, client_id: str, topic_filter: str) -> bool:
    """A ``telling_mosquitto`` took ``client_id``'s UNSUBSCRIBE of ``topic_filter`` (logged
    '<time>: <client id> <filter>'): what is published later no longer reaches it that way."""
    if not broker.log_path.exists():
        return False
    return any(line.split()[1:] == [client_id, topic_filter]
               for line in broker.log_path.read_text(errors="replace").splitlines())


@pytest.fixture
def amqtt_broker(tmp_path: Path) -> Iterator[ManagedBroker]:
    broker = ManagedBroker(AMQTT, workdir=tmp_path / "amqtt")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    with broker:
        yield broker


def fleetdeck_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "fleetdeck.cli", *args]


def spawn(*args: str, log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start a real fleetdeck process (agent, sim …) in its own session."""
    out = open(log, "ab") if log is not None else subprocess.DEVNULL
    return subprocess.Popen(
        fleetdeck_cmd(*args), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
        start_new_session=True, cwd=REPO, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 10) -> int:
    if proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait()


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(fleetdeck_cmd(*args), capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, check=False)


async def eventually(predicate, timeout: float = 10.0, interval: float = 0.05,
                     message: str = "condition") -> None:
    """Poll ``predicate`` until true; fail with ``message`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")


async def first_retained(rx: aiomqtt.Client, topic: str, timeout: float) -> bytes | None:
    """Subscribe ``rx`` to ``topic``: the first message it gets, the retained one a broker
    sends a new subscriber (None: none within ``timeout`` seconds)."""
    await rx.subscribe(topic, qos=1)
    try:
        async with asyncio.timeout(timeout):
            async for msg in rx.messages:
                return bytes(msg.payload)  # type: ignore[arg-type]
    except TimeoutError:
        return None
    return None


def start_collector(cluster: str, url: BrokerURL, stop: asyncio.Event
                    ) -> tuple[ConsoleSession, ShardRunner, "asyncio.Task[TickReport]"]:
    """The cluster's one sharded collector (``shard-1``, 1/1) on ``url``, ticking every 0.2 s
    until ``stop``: its session, its runner, and the task that runs it."""
    scope = ShardScope("shard-1", int(time.time() * 1000))
    collector = ConsoleSession(cluster, url=url, operator="collector",
                               client_id="t-collector", filters=shard_subscriptions(cluster),
                               will=collector_will(cluster, scope, "1/1"))
    runner = ShardRunner(collector, scope, "1/1")
    task = asyncio.create_task(collector.watch(stop, tick_s=0.2, on_tick=runner.on_tick))
    return collector, runner, task


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """Consoles and collectors keep history and audit under $XDG_STATE_HOME: never the real home
    directory from a test (subprocesses inherit it too)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
