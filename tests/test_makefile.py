"""`make demo`'s knobs reach the demo: without BROKER_KIND the zero-install amqtt path could not
be tried on a machine with Mosquitto, not even with /usr/sbin off PATH (the demo looks there
too). Not BROKER and PORT: names a shell may already hold for something else."""

import shutil
import subprocess

import pytest

from tests.conftest import REPO


def demo_command(*assignments: str) -> str:
    """The command `make demo` would run (``make -n``), with the virtualenv taken as made."""
    out = subprocess.run(
        ["make", "-n", "-o", ".venv/.installed", "-o", ".venv/bin/python", "demo", *assignments],
        cwd=REPO, capture_output=True, text=True, check=True, timeout=30).stdout
    return next(line for line in out.splitlines() if "fleetdeck demo" in line)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_demo_passes_broker_and_port():
    assert demo_command().endswith("demo --nodes 64 --broker-kind auto --port 0")
    line = demo_command("BROKER_KIND=amqtt", "BROKER_PORT=50123", "NODES=16", "PORT=8080")
    assert line.endswith("demo --nodes 16 --broker-kind amqtt --port 50123")
