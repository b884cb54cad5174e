"""Waiting on, and reading, what a fleetdeck process (a simulator, an agent) writes to its
log."""

import re
import time
from pathlib import Path


def wait_for_lines(log: Path, lines: list[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if all(line in text for line in lines):
            return text
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {lines}; the sim said:\n{text}")


_OWN = re.compile(r"^(?:\S+ \S+ )?[A-Z]+ fleetdeck[.\w]*: ", re.MULTILINE)


def own_lines(text: str) -> list[str]:
    """The log's lines of fleetdeck's own loggers: a daemon keeps its MQTT libraries' ERROR
    lines (fleetdeck/logs.py), and paho's "failed to receive on socket … reset by peer" comes
    when a broker's reset happens to land mid-read, not at every drop (a CI run)."""
    return [line for line in text.splitlines() if _OWN.match(line)]
