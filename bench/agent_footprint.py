"""Node agent footprint: start-up time, RSS and CPU at 1 Hz (targets: <= 40 MB, <= 1 % core).

    python bench/agent_footprint.py [--seconds 30] [--source sim]

Runs the real `fleetdeck agent` process against a private Mosquitto and reads /proc for its
RSS and CPU time. Start-up is measured twice: `--once` (import + one sample, no broker) and
process start -> first telemetry message seen by a subscriber.
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiomqtt

from bench._common import BenchFailure, main_guard
from fleetdeck.broker import ManagedBroker

TICK = os.sysconf("SC_CLK_TCK")


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process from /proc."""
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICK
    return rss_kb / 1024, cpu


async def first_telemetry(url, cmd: list[str]) -> tuple[float, subprocess.Popen[bytes]]:
    async with aiomqtt.Client(url.host, url.port, identifier="footprint") as client:
        await client.subscribe("fleetdeck/v1/bench/node/+/telemetry")
        t0 = time.perf_counter()
        err_log = tempfile.TemporaryFile()  # a file, not a pipe: a full pipe would stall it
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err_log)
        try:
            async with asyncio.timeout(30):
                async for _m in client.messages:
                    return time.perf_counter() - t0, proc
        except TimeoutError:
            pass
        proc.kill()
        proc.wait()
        err_log.seek(0)
        err = err_log.read()[-1500:].decode(errors="replace")
        raise BenchFailure(f"the agent published no telemetry within 30 s (rc {proc.returncode}):"
                           f" {err}")
    raise BenchFailure("the subscription ended before any telemetry")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--source", default="sim")
    args = ap.parse_args()
    exe = [sys.executable, "-m", "fleetdeck.cli", "agent", "--source", args.source,
           "--cluster", "bench", "--node-id", "gpu0001"]
    once = []
    for _ in range(5):
        t0 = time.perf_counter()
        subprocess.run([*exe, "--once"], check=True, stdout=subprocess.DEVNULL)
        once.append(time.perf_counter() - t0)
    with ManagedBroker("mosquitto") as broker:
        start_s, proc = asyncio.run(first_telemetry(broker.url,
                                                    [*exe, "--broker", str(broker.url)]))
        try:
            time.sleep(3)  # settle: imports done, first samples out
            rss0, cpu0 = proc_stats(proc.pid)
            time.sleep(args.seconds)
            if proc.poll() is not None:
                raise BenchFailure(f"the agent exited (rc {proc.returncode}) during the run")
            rss1, cpu1 = proc_stats(proc.pid)
        finally:
            proc.terminate()
            proc.wait()
    cpu_pct = 100 * (cpu1 - cpu0) / args.seconds
    print(f"agent footprint, source={args.source}, 1 Hz, {args.seconds} s, python "
          f"{sys.version.split()[0]}")
    print(f"{'metric':<40}{'value':>12}{'target':>10}")
    print(f"{'start-up, --once (median of 5)':<40}{statistics.median(once):>11.2f}s{'':>10}")
    print(f"{'start-up, process -> first telemetry':<40}{start_s:>11.2f}s{'':>10}")
    print(f"{'RSS after settling':<40}{rss1:>9.1f}MiB{'<= 40':>10}")
    print(f"{'RSS growth over the run':<40}{rss1 - rss0:>9.1f}MiB{'':>10}")
    print(f"{'CPU at 1 Hz (% of one core)':<40}{cpu_pct:>11.2f}%{'<= 1':>10}")
    return 0


if __name__ == "__main__":
    main_guard(main)
