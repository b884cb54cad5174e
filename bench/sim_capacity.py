"""How many simulated nodes one `fleetdeck sim` process sustains at 1 Hz.

For each fleet size: a fresh private Mosquitto, then one child process running the real
:class:`agents.fleet.Fleet` (one aiomqtt client + Last Will per node, the scheduler client, the
world tick) with a few jobs so some nodes are in the training code path. The child records,
per telemetry sample, how late it was against its slot in the agent's schedule (the agent
publishes at ``start + k * interval``; a sample skipped because the loop fell more than one
interval behind counts as late). It reports:

* late % = samples published more than ``--late-ms`` (default 200 ms) after their slot, or
  skipped, over all samples due in the measuring window; the target is < 5 %;
* CPU % of one core and RSS of the fleet process, also per 1,000 nodes, and the broker's CPU;
* the pure model cost (sample + encode, no MQTT) per node, so the rest of the CPU is the MQTT
  client stack (aiomqtt/paho, one client per node).

Sized for a 2-core machine: sizes run one after another, each bounded (connect timeout,
warm-up, fixed window), and the whole run stops by itself. Usage::

    .venv/bin/python bench/sim_capacity.py                 # 1024 2048 3072 4096, 20 s windows
    .venv/bin/python bench/sim_capacity.py --sizes 512 4096 6144 --window 30
"""

import argparse
import asyncio
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return math.nan


def cpu_s(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Timed:
    """Wraps a node's source and notes how late each read is against the agent's schedule."""

    def __init__(self, inner: Any, interval: float) -> None:
        self.inner = inner
        self.name, self.mode = inner.name, inner.mode
        self.interval = interval
        self.start: float | None = None
        self.last_slot = -1
        self.window: tuple[float, float] | None = None
        self.samples = self.late = self.skipped = 0
        self.lateness: list[float] = []

    def read(self, now: float) -> Any:
        t = time.monotonic()  # the clock of asyncio's loop.time(), which the agent schedules on
        if self.start is None:
            return self.inner.read(now)
        # The agent never reads before its slot and skips slots more than one interval late,
        # so the slot is the last one that began at or before now.
        slot = int((t - self.start) / self.interval + 1e-6)
        late = t - (self.start + slot * self.interval)
        if self.window is not None and self.window[0] <= t < self.window[1]:
            self.samples += 1
            self.skipped += max(0, slot - self.last_slot - 1)
            self.lateness.append(late)
        self.last_slot = slot
        return self.inner.read(now)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def pure_cost_us(n: int) -> float:
    """Model sample + Telemetry + encode per node, no MQTT (same code path as the agents)."""
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.world import SimWorld, WorldOptions
    from fleetdeck.brokerurl import BrokerURL
    from fleetdeck.protocol import codec

    world = SimWorld(WorldOptions(nodes=n, background_jobs=max(1, n // 64)))
    agents = [NodeAgent(cluster="b", node_id=x.node_id, source=x, url=BrokerURL("h", 1))
              for x in world.nodes]
    for _ in range(3):
        world.step()
        for a in agents:
            codec.encode(a.telemetry())
    t0 = time.perf_counter()
    world.step()
    for a in agents:
        codec.encode(a.telemetry())
    return (time.perf_counter() - t0) / n * 1e6


async def child(args: argparse.Namespace) -> dict[str, Any]:
    from fleetdeck.agents.fleet import Fleet, FleetOptions, SimAgent
    from fleetdeck.brokerurl import parse_broker_url

    class BenchAgent(SimAgent):
        async def _telemetry_loop(self, client: Any) -> None:
            # The agent's schedule is loop.time() + phase at this point (no await in between).
            src = self.source
            if isinstance(src, Timed):
                src.start, src.last_slot = asyncio.get_running_loop().time() + self.phase_s, -1
            await super()._telemetry_loop(client)

    class BenchFleet(Fleet):
        agent_class = BenchAgent

    n = args.child
    pure = pure_cost_us(min(n, 1024))
    opts = FleetOptions(cluster="bench", nodes=n, interval_s=args.interval, keepalive=30,
                        seed=1, connect_concurrency=64, jobs=max(1, n // 64))
    fleet = BenchFleet(parse_broker_url(args.broker), opts)
    timers = []
    for agent in fleet.agents.values():
        timed = Timed(agent.source, args.interval)
        agent.source = timed
        timers.append(timed)
    stop = asyncio.Event()
    t_connect = time.monotonic()
    runner = asyncio.create_task(fleet.run(stop))
    try:
        await fleet.wait_connected(args.connect_timeout)
        connected = True
    except TimeoutError:
        connected = False
    connect_s = time.monotonic() - t_connect
    await asyncio.sleep(args.warmup)
    w0 = time.monotonic()
    window = (w0, w0 + args.window)
    for tm in timers:
        tm.window = window
    c0 = cpu_s()
    await asyncio.sleep(args.window)
    c1 = cpu_s()
    rss = rss_mb()
    stop.set()
    await asyncio.wait_for(runner, 60)
    samples = sum(t.samples for t in timers)
    skipped = sum(t.skipped for t in timers)
    lateness = sorted(x for t in timers for x in t.lateness)
    late = sum(1 for x in lateness if x * 1000 > args.late_ms) + skipped
    due = samples + skipped
    expected = n * args.window / args.interval
    return {
        "nodes": n, "connected": connected, "connect_s": round(connect_s, 1),
        "due": due, "expected": int(expected), "late": late,
        "late_pct": round(100 * late / max(1, due), 2),
        "missing_pct": round(100 * max(0.0, expected - samples) / expected, 2),
        "p50_ms": round(1000 * lateness[len(lateness) // 2], 1) if lateness else None,
        "p99_ms": round(1000 * lateness[int(len(lateness) * 0.99)], 1) if lateness else None,
        "cpu_pct": round(100 * (c1 - c0) / args.window, 1),
        "rss_mb": round(rss, 1),
        "pure_us_per_node": round(pure, 1),
    }


def parent(args: argparse.Namespace) -> int:
    from fleetdeck.broker import MOSQUITTO, ManagedBroker, find_mosquitto

    if find_mosquitto() is None:
        print("mosquitto is not installed; this benchmark needs it", file=sys.stderr)
        return 2
    rows = []
    for n in args.sizes:
        with ManagedBroker(MOSQUITTO) as broker:
            assert broker.proc is not None
            b0 = cpu_s(broker.proc.pid)
            t0 = time.monotonic()
            cmd = [sys.executable, __file__, "--child", str(n), "--broker", str(broker.url),
                   "--interval", str(args.interval), "--warmup", str(args.warmup),
                   "--window", str(args.window), "--late-ms", str(args.late_ms),
                   "--connect-timeout", str(args.connect_timeout)]
            budget = args.connect_timeout + args.warmup + args.window + 120
            try:
                out = subprocess.run(cmd, capture_output=True, text=True, timeout=budget,
                                     check=False, cwd=REPO)
            except subprocess.TimeoutExpired:
                print(f"{n} nodes: did not finish in {budget:.0f} s", file=sys.stderr)
                continue
            elapsed = time.monotonic() - t0
            broker_pct = 100 * (cpu_s(broker.proc.pid) - b0) / elapsed
        lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
        if out.returncode != 0 or not lines:
            print(f"{n} nodes: child failed:\n{out.stderr[-2000:]}", file=sys.stderr)
            continue
        row = json.loads(lines[-1])
        row["broker_cpu_pct"] = round(broker_pct, 1)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    print()
    print(f"interval {args.interval:g} s, window {args.window:g} s, late = > {args.late_ms:g} ms "
          f"after its slot or skipped; {os.cpu_count()} CPUs")
    hdr = ("nodes", "connect s", "late %", "p50 ms", "p99 ms", "CPU % core",
           "CPU %/1k nodes", "RSS MB", "RSS MB/1k", "model µs/node", "broker CPU %")
    print(" | ".join(hdr))
    print(" | ".join("---" for _ in hdr))
    for r in rows:
        k = r["nodes"] / 1000
        print(" | ".join(str(x) for x in (
            r["nodes"], r["connect_s"], r["late_pct"], r["p50_ms"], r["p99_ms"], r["cpu_pct"],
            round(r["cpu_pct"] / k, 1), r["rss_mb"], round(r["rss_mb"] / k, 1),
            r["pure_us_per_node"], r["broker_cpu_pct"])))
    ok = [r["nodes"] for r in rows if r["late_pct"] < 5 and r["connected"]]
    print(f"\nlargest size with < 5 % late samples: {max(ok) if ok else 'none'}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 3072, 4096])
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--late-ms", type=float, default=200.0)
    ap.add_argument("--connect-timeout", type=float, default=90.0)
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--broker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        import logging

        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(asyncio.run(child(args))))
        return 0
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
