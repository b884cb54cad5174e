"""Waiting on what a simulator process writes to its log."""

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
