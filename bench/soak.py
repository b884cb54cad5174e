"""Soak: a simulated fleet with jobs and a fault every minute, a headless console (ingest, fleet
state, store, command follow-up) watching it; memory, tasks and queues sampled over time.

    python bench/soak.py                       # 1,024 nodes, 30 minutes (the target run)
    python bench/soak.py --nodes 256 --minutes 5

Prints one line per sample and a summary with the RSS slope (least squares, MiB per minute) of
the console and the simulator, and the largest queue and task counts seen. Stops by itself.
"""

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BenchFailure, main_guard
from fleetdeck.broker import ManagedBroker
from fleetdeck.console.session import ConsoleSession
from fleetdeck.runtime import tune_gc

FAULTS = [
    ("ib_flap", "port={p} count=3"), ("symbol_storm", "port={p} duration=30s"),
    ("thermal", "gpu={g} duration=40s"), ("xid79", "gpu={g}"), ("link_down", "port={p}"),
    ("agent_death", ""), ("pcie_replay", "gpu={g} duration=30s"),
]


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(x.split()[1]) for x in f if x.startswith("VmRSS:")) / 1024


def slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points) or 1.0
    return sum((x - mx) * (y - my) for x, y in points) / den


async def soak(args: argparse.Namespace, broker: ManagedBroker, db: Path) -> None:
    url = str(broker.url)
    sim_log = db.parent / "sim.log"
    sim = subprocess.Popen([sys.executable, "-m", "fleetdeck.cli", "sim", "--broker", url,
                            "--cluster", "soak", "--nodes", str(args.nodes), "--jobs", "6",
                            "--seed", "3"], stdout=subprocess.DEVNULL,
                           stderr=sim_log.open("wb"))
    col = ConsoleSession("soak", url=broker.url, operator="soak")
    await col.open_store(db)
    stop = asyncio.Event()
    task = asyncio.create_task(col.watch(stop, tick_s=0.5))
    rng = random.Random(5)
    console_pts: list[tuple[float, float]] = []
    sim_pts: list[tuple[float, float]] = []
    max_tasks = max_batch = max_queue = 0
    t0 = time.monotonic()
    next_fault = t0 + 60
    print(f"{'min':>5}{'console MiB':>12}{'sim MiB':>9}{'nodes':>7}{'tasks':>7}{'queue':>7}"
          f"{'behind s':>9}{'faults':>8}")
    faults = 0
    try:
        while time.monotonic() - t0 < args.minutes * 60:
            await asyncio.sleep(min(10.0, args.minutes * 60 / 12))
            now = time.monotonic()
            if now >= next_fault:
                kind, params = rng.choice(FAULTS)
                node = f"gpu{rng.randint(1, args.nodes):04d}"
                extra = params.format(p=rng.randrange(8), g=rng.randrange(8)).split()
                subprocess.run([sys.executable, "-m", "fleetdeck.cli", "inject", "--broker", url,
                                "--cluster", "soak", kind, f"node={node}", *extra],
                               capture_output=True, check=False)
                # …and repair an earlier victim so the fleet does not only decay.
                subprocess.run([sys.executable, "-m", "fleetdeck.cli", "inject", "--broker", url,
                                "--cluster", "soak", "repair",
                                f"node=gpu{rng.randint(1, args.nodes):04d}"],
                               capture_output=True, check=False)
                faults += 1
                next_fault += 60
            minutes = (now - t0) / 60
            if sim.poll() is not None:
                raise BenchFailure(f"the simulator exited (rc {sim.returncode}) after "
                                   f"{minutes:.1f} min: {tail(sim_log)}")
            if minutes >= 1 and len(col.state.nodes) < args.nodes:
                raise BenchFailure(f"after {minutes:.1f} min the console knows "
                                   f"{len(col.state.nodes)} of {args.nodes} nodes")
            c_rss = rss_mib(os.getpid())
            s_rss = rss_mib(sim.pid)
            console_pts.append((minutes, c_rss))
            sim_pts.append((minutes, s_rss))
            tasks = len(asyncio.all_tasks())
            queue = col.feed.queued if col.feed is not None else 0
            max_tasks, max_queue = max(max_tasks, tasks), max(max_queue, queue)
            max_batch = max(max_batch, len(col.ingest._batch.telemetry))
            print(f"{minutes:>5.1f}{c_rss:>12.0f}{s_rss:>9.0f}{len(col.state.nodes):>7}"
                  f"{tasks:>7}{queue:>7}{col.state.behind_s:>9.1f}{faults:>8}", flush=True)
    finally:
        stop.set()
        await task
        await col.close()
        sim.terminate()
        sim.wait()
    # Skip the first minute (start-up: connections, imports, first samples) for the slopes.
    steady_c = [p for p in console_pts if p[0] >= 1] or console_pts
    steady_s = [p for p in sim_pts if p[0] >= 1] or sim_pts
    print(f"\nsoak: {args.nodes} nodes, {args.minutes:g} min, {faults} faults injected")
    print(f"{'metric':<40}{'value':>12}")
    print(f"{'console RSS slope after 1 min (MiB/min)':<40}{slope(steady_c):>12.2f}")
    print(f"{'simulator RSS slope after 1 min (MiB/min)':<40}{slope(steady_s):>12.2f}")
    print(f"{'console asyncio tasks, max':<40}{max_tasks:>12}")
    print(f"{'MQTT incoming queue, max':<40}{max_queue:>12}")
    print(f"{'ingest batch (nodes), max':<40}{max_batch:>12}")
    print(f"{'store size (MiB)':<40}{size_mib(db):>12.1f}")


def tail(path: Path) -> str:
    return path.read_bytes()[-1500:].decode(errors="replace")


def size_mib(path: Path) -> float:
    return path.stat().st_size / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--minutes", type=float, default=30)
    args = ap.parse_args()
    tune_gc()
    with tempfile.TemporaryDirectory() as tmp, ManagedBroker("mosquitto") as broker:
        asyncio.run(soak(args, broker, Path(tmp) / "soak.db"))
    return 0


if __name__ == "__main__":
    main_guard(main)
