"""Failure drill: three ``fleetdeck collect --shard K/3`` and a graceful broker restart
(SIGTERM, as ``systemctl restart mosquitto`` does). Mosquitto then sends the Last Will of every
client it drops, so each collector gets ``online: false`` from the peers dropped before it.
Before this was handled, every collector took the whole fleet over for the few seconds until
the peers announced themselves again, and gave it back (found in a drill, 2026-12-04: 12
takeovers over three restarts). Now no node moves (docs/architecture.md, "Sharded
collectors")."""

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from subprocess import Popen

import pytest

from fleetdeck.console.shard import REANNOUNCE_GRACE_S
from tests.conftest import spawn, stop_process

CLUSTER = "shdwill"
NODES = 24
COLLECTORS = 3
RESTARTS = 3
ALL_LIVE = "live: " + ",".join(f"shard-{k}" for k in range(1, COLLECTORS + 1))
MOVED = "now owned by other collectors"
TAKEN_BACK = "taken back before they counted"
WILL_SETTLE_S = 3.0
"""Longer than WILL_BURST_S (2 s): a will held back that was going to count has by now."""


def wait_for(what: str, check, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.5)


def received(log: Path) -> int:
    """What the collector's last status line says it has received."""
    counts = re.findall(r"(\d+) messages? received", " ".join(status_lines(log)[-1:]))
    return int(counts[0]) if counts else 0


def status_lines(log: Path, since: int = 0) -> list[str]:
    return [ln for ln in log.read_bytes()[since:].decode(errors="replace").splitlines()
            if ln.startswith(f"collect {CLUSTER}:")]


@contextlib.contextmanager
def sharded_fleet(url: str, tmp_path: Path) -> Iterator[tuple[list[Path], list[Popen[bytes]]]]:
    """``fleetdeck sim`` and three ``collect --shard K/3`` that each see all three; stopped
    on the way out. Yields the collectors' logs and processes."""
    logs = [tmp_path / f"collect{k}.log" for k in range(1, COLLECTORS + 1)]
    sim = spawn("sim", "--broker", url, "--cluster", CLUSTER, "--nodes", str(NODES), "--jobs",
                "0", "--seed", "5", log=tmp_path / "sim.log")
    cols = [spawn("--log-level", "info", "collect", "--broker", url, "--cluster", CLUSTER,
                  "--shard", f"{k}/{COLLECTORS}", "--db", str(tmp_path / f"c{k}.db"),
                  "--status-every", "1", log=logs[k - 1])
            for k in range(1, COLLECTORS + 1)]
    try:
        wait_for("three collectors that each see all three",
                 lambda: all((lines := status_lines(log)) and ALL_LIVE in lines[-1]
                             for log in logs), 60)
        yield logs, cols
    finally:
        for c in cols:
            stop_process(c)
        stop_process(sim)


@pytest.mark.timeout(240)
def test_a_graceful_broker_restart_moves_no_node_between_collectors(mosquitto, tmp_path):
    with sharded_fleet(str(mosquitto.url), tmp_path) as (logs, _cols):
        time.sleep(3)  # the split settled: what each collector logs from here is the drill
        marks = {log: log.stat().st_size for log in logs}
        for _ in range(RESTARTS):
            mosquitto.restart()  # SIGTERM, then the same port again
            before = [received(log) for log in logs]
            wait_for("every collector receiving again",  # its own nodes' births and samples
                     lambda b=before: all(  # type: ignore[misc]
                         received(log) >= n + NODES for log, n in zip(logs, b, strict=True)), 60)
            time.sleep(WILL_SETTLE_S)
    after = [log.read_bytes()[at:].decode(errors="replace") for log, at in marks.items()]
    moved = [ln for text in after for ln in text.splitlines() if MOVED in ln]
    alone = [ln for log, at in marks.items() for ln in status_lines(log, at)
             if "live:" in ln and ALL_LIVE not in ln]
    assert moved == [], moved
    assert alone == [], alone[:5]
    # The drill happened: some collector got a peer's will from the shutting-down broker.
    assert any(TAKEN_BACK in text for text in after), \
        "no collector received a peer's will: the drill proved nothing\n" + after[0][-2000:]


@pytest.mark.timeout(240)
def test_a_collector_gone_with_a_crashed_broker_has_its_nodes_taken_over(mosquitto, tmp_path):
    """The broker is SIGKILLed and a collector dies while it is down (one host ran both): no
    will is ever sent, and the restarted broker has lost the collector's retained birth. Its
    nodes were orphaned for good (found in a drill, 2026-12-04: ``status --digests`` showed 14
    of 24 nodes a minute later). The survivors now give up on a peer not heard from again
    within REANNOUNCE_GRACE_S of their reconnect, and take its nodes over."""
    with sharded_fleet(str(mosquitto.url), tmp_path) as (logs, cols):
        survivors = [logs[0], logs[2]]
        mosquitto.kill()
        cols[1].kill()
        cols[1].wait()
        mosquitto.start()
        wait_for("the two survivors owning the whole fleet",
                 lambda: all((lines := status_lines(log)) and "live: shard-1,shard-3" in lines[-1]
                             for log in survivors)
                 and sum(owned(log) for log in survivors) == NODES,
                 REANNOUNCE_GRACE_S + 60)


def owned(log: Path) -> int:
    """How many nodes the collector's last status line says it holds."""
    counts = re.findall(r"(\d+) nodes?,", " ".join(status_lines(log)[-1:]))
    return int(counts[0]) if counts else 0
