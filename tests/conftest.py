"""Real parts: a private Mosquitto (and amqtt where that path is tested) on a free loopback port.

No mocked MQTT client anywhere. Tests that need a broker skip with a clear message only when the
mosquitto binary is truly absent; .ci/run installs it.
"""

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdeck.broker import AMQTT, MOSQUITTO, ManagedBroker, find_mosquitto

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def mosquitto(tmp_path: Path) -> Iterator[ManagedBroker]:
    if find_mosquitto() is None:
        pytest.skip("mosquitto is not installed (apt-get install -y mosquitto; .ci/run does)")
    broker = ManagedBroker(MOSQUITTO, workdir=tmp_path / "mosquitto")
    broker.workdir.mkdir()  # type: ignore[union-attr]
    with broker:
        yield broker


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


@pytest.fixture(autouse=True)
def _private_state_dir(tmp_path_factory, monkeypatch):
    """Consoles and collectors keep history and audit under $XDG_STATE_HOME: never the real home
    directory from a test (subprocesses inherit it too)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("state")))
