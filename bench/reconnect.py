"""Reconnect spread: N simulated agents, the broker is killed and restarted; how do they return?

    python bench/reconnect.py [--nodes 1000] [--down 3]

Jittered exponential backoff should spread reconnects out instead of a thundering herd. Prints
the distribution of births (one per reconnected agent) after the restart, and the peak rate.
"""

import argparse
import asyncio
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiomqtt

from bench._common import BenchFailure, main_guard
from fleetdeck.broker import ManagedBroker


async def births(url, n: int, timeout: float) -> list[float]:
    """Arrival times of the first birth of each node, from subscription time."""
    seen: dict[str, float] = {}
    # Subscribing right after the restart: births that beat us arrive as retained, at ~0 s.
    async with aiomqtt.Client(url.host, url.port, identifier=f"rc-{time.time()}") as c:
        await c.subscribe("fleetdeck/v1/rc/node/+/birth", qos=1)
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(timeout):
                async for m in c.messages:
                    # Retained births count too: the killed broker kept nothing (no
                    # persistence), so any retained birth is from an agent already back.
                    node = m.topic.value.split("/")[4]
                    seen.setdefault(node, time.monotonic() - t0)
                    if len(seen) >= n:
                        break
        except TimeoutError:
            pass
    return sorted(seen.values())


def pct(v: list[float], q: float) -> float:
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--down", type=float, default=3.0, help="seconds the broker stays down")
    args = ap.parse_args()
    with ManagedBroker("mosquitto") as broker:
        sim = subprocess.Popen([sys.executable, "-m", "fleetdeck.cli", "sim", "--broker",
                                str(broker.url), "--cluster", "rc", "--nodes", str(args.nodes),
                                "--interval", "5"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        try:
            first = asyncio.run(births(broker.url, args.nodes, 120))
            if not first or sim.poll() is not None:
                raise BenchFailure(f"no agent came up, or the simulator died ({len(first)} "
                                   f"births; simulator exit status {sim.poll()})")
            print(f"{len(first)}/{args.nodes} agents connected in {first[-1]:.1f} s at start-up")
            broker.kill()
            time.sleep(args.down)
            broker.start()
            again = asyncio.run(births(broker.url, args.nodes, 180))
            if not again:
                raise BenchFailure("no agent came back after the broker restart")
        finally:
            sim.terminate()
            sim.wait()
    per_s = Counter(int(t) for t in again)
    print(f"broker down {args.down:g} s; {len(again)}/{args.nodes} agents back\n")
    print(f"{'after restart':<26}{'seconds':>10}")
    for label, q in (("first", 0.0), ("p10", 0.1), ("p50", 0.5), ("p90", 0.9), ("p99", 0.99),
                     ("last", 1.0)):
        print(f"{label:<26}{pct(again, q) if q < 1 else again[-1]:>10.2f}")
    peak_s, peak = per_s.most_common(1)[0] if per_s else (0, 0)
    print(f"{'peak reconnects / second':<26}{peak:>10}  (second {peak_s})")
    return 0


if __name__ == "__main__":
    main_guard(main)
