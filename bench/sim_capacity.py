"""How many simulated nodes one `fleetdeck sim` process sustains at 1 Hz.

For each fleet size: a fresh private Mosquitto, then one child process running the real
:class:`agents.fleet.Fleet` (one MQTT session + Last Will per node, gmqtt unless ``--mqtt
aiomqtt``; the scheduler client; the world tick; the GC tuning ``fleetdeck sim`` applies)
with a few jobs so some nodes are in the training code path. The child records,
per telemetry sample, how late it was against its slot in the agent's schedule (the agent
publishes at ``start + k * interval``; a sample skipped because the loop fell more than one
interval behind counts as late). It reports:

* late % = samples due in the measuring window (nodes x window / interval) that were not
  published within ``--late-ms`` (default 200 ms) of their slot: late, skipped, or never sent
  (an agent not connected); the target is < 1 %;
* delivered % = telemetry the broker passed on in the window (a framing-only counter
  subscribes, bench/_mqttload.py RawCounter) over the samples due;
* CPU % of one core and RSS of the fleet process, also per 1,000 nodes, and the broker's CPU;
* waited % (runnable without a CPU: what the machine's other processes took) and CPU µs per
  sample, so a late figure on a shared machine says whether the simulator or the machine was
  short; the load average before each size;
* the pure model cost (sample + encode, no MQTT) per node, so the rest of the CPU is the MQTT
  client stack (one client per node) and the event loop.

The agents publish from the fleet's telemetry clock (agents/sim/clock.py) on NodeAgent's
schedule; :class:`Timed` times each read against that schedule, taken at the same point.

It fails loudly (``BENCH FAILED:``, exit 1) when an agent task died (the bench's agent class no
longer matching the simulator's is one way), no sample was taken, or the broker passed on
nothing: a dead fleet must never read as "0 % late".

Sized for a 2-core machine: sizes run one after another, each bounded (connect timeout,
warm-up, fixed window), and the whole run stops by itself. Usage::

    .venv/bin/python bench/sim_capacity.py --quick         # 256 nodes, 5 s window
    .venv/bin/python bench/sim_capacity.py                 # 1024 2048 4096, 20 s windows
    .venv/bin/python bench/sim_capacity.py --sizes 512 4096 6144 --window 30
"""

import argparse
import asyncio
import inspect
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import (
    BenchFailure,
    Row,
    cpu_s,
    judge,
    main_guard,
    rss_mib,
    runqueue_s,
    write_rows,
)

REPO = Path(__file__).resolve().parent.parent
TARGET_NODES = 4096
TARGET_LATE_PCT = 1.0
STOP_LIMIT_S = 120.0
"""How long the simulator may take to stop after the window (its agents say offline first)."""


class Timed:
    """Wraps a node's source and notes how late each read is against the agent's schedule."""

    def __init__(self, inner: Any, interval: float) -> None:
        self.inner = inner
        self.name, self.mode = inner.name, inner.mode
        self.interval = interval
        self.start: float | None = None
        self.window: tuple[float, float] | None = None
        self.lateness: list[float] = []

    def read(self, now: float) -> Any:
        self._note()
        return self.inner.read(now)

    def read_columns(self, now: float) -> Any:
        # The simulated agent reads columns (NodeAgent.columns): timed as a read, or every
        # sample of the window would go unseen (100 % late).
        self._note()
        return self.inner.read_columns(now)

    def _note(self) -> None:
        t = time.monotonic()  # the clock of asyncio's loop.time(), which the agent schedules on
        if self.start is not None and self.window is not None:
            # The agent never reads before its slot and skips slots more than one interval late,
            # so the slot is the last one that began at or before now.
            slot = int((t - self.start) / self.interval + 1e-6)
            due = self.start + slot * self.interval
            if self.window[0] <= due < self.window[1]:
                self.lateness.append(t - due)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ErrorLog(logging.Handler):
    """Every ERROR logged in the simulator process (an agent task that died, asyncio's "Task
    exception was never retrieved"): any of them fails the run."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []
        logging.getLogger().addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{record.name}: {record.getMessage()}"[:500])


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
    # CPU time, best of three ticks: wall time on a shared 2-core machine measures the others.
    best = float("inf")
    for _ in range(3):
        t0 = time.process_time()
        world.step()
        for a in agents:
            codec.encode(a.telemetry())
        best = min(best, time.process_time() - t0)
    return best / n * 1e6


def _same_signature(ours: Any, theirs: Any, what: str) -> None:
    a, b = inspect.signature(ours), inspect.signature(theirs)
    if list(a.parameters) != list(b.parameters):
        raise BenchFailure(f"{what}{a} no longer matches the simulator's {what}{b}: fix the "
                           "benchmark's agent class (bench/sim_capacity.py)")


async def child(args: argparse.Namespace) -> dict[str, Any]:
    from fleetdeck.agents.fleet import Fleet, FleetOptions, SimAgent
    from fleetdeck.brokerurl import parse_broker_url

    class BenchAgent(SimAgent):
        async def _telemetry_loop(self, client: Any, stop: asyncio.Event) -> None:
            # The agent's schedule is loop.time() + phase at this point (no await in between).
            src = self.source
            if isinstance(src, Timed):
                src.start = asyncio.get_running_loop().time() + self.phase_s
            await super()._telemetry_loop(client, stop)

    _same_signature(BenchAgent._telemetry_loop, SimAgent._telemetry_loop, "_telemetry_loop")

    class BenchFleet(Fleet):
        agent_class = BenchAgent

    errors = ErrorLog()
    n = args.child
    pure = pure_cost_us(min(n, 1024)) if args.shard == 0 else 0.0
    opts = FleetOptions(cluster="bench", nodes=n, interval_s=args.interval, keepalive=30,
                        seed=1, connect_concurrency=64, jobs=max(1, n // 64),
                        shard=args.shard, shards=args.procs, epoch_ms=args.epoch_ms,
                        mqtt_lib=args.mqtt, tune_gc=True)  # as `fleetdeck sim` (cli.py)
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
        connected_all = True
    except TimeoutError:
        connected_all = False
    connect_s = time.monotonic() - t_connect
    await asyncio.sleep(args.warmup)
    w0 = time.monotonic()
    epoch0 = time.time()
    for tm in timers:
        tm.window = (w0, w0 + args.window)
    c0, q0 = cpu_s(), runqueue_s()
    await asyncio.sleep(args.window)
    c1, q1 = cpu_s(), runqueue_s()
    epoch1 = time.time()
    rss = rss_mib()
    connected = sum(1 for a in fleet.agents.values() if a.connected.is_set())
    # Agent tasks that ended while the fleet was meant to run died: say how.
    dead = [(name, t) for name, t in fleet._tasks.items() if t.done()]
    died = [f"{name}: {t.exception()!r}" if not t.cancelled() and t.exception() else
            f"{name}: ended" for name, t in dead]
    errors_in_window = list(errors.lines)
    lateness = sorted(x for t in timers for x in t.lateness)
    owned = len(fleet.agents)
    due = round(owned * args.window / args.interval)
    on_time = sum(1 for x in lateness if x * 1000 <= args.late_ms)
    result = {
        "nodes": n, "owned": owned, "on_time": on_time,
        "connected": connected, "connected_all": connected_all,
        "connect_s": round(connect_s, 1), "due": due, "sampled": len(lateness),
        "late_pct": round(100 * max(0, due - on_time) / due, 2),
        "p50_ms": round(1000 * lateness[len(lateness) // 2], 1) if lateness else None,
        "p99_ms": round(1000 * lateness[int(len(lateness) * 0.99)], 1) if lateness else None,
        "cpu_pct": round(100 * (c1 - c0) / args.window, 1),
        # Runnable but without a CPU (the other processes of a shared machine): samples late
        # for that reason are still counted late; this says why.
        "waited_pct": round(100 * (q1 - q0) / args.window, 1),
        "cpu_us_per_sample": round(1e6 * (c1 - c0) / len(lateness), 1) if lateness else None,
        "rss_mb": round(rss, 1),
        "pure_us_per_node": round(pure, 1),
        "window_epoch": [epoch0, epoch1],
        "died": died[:5], "died_count": len(died), "errors": errors_in_window[:5],
        "error_count": len(errors_in_window),
    }
    # Measured. Now the fleet's own clean stop (every agent says offline and disconnects),
    # timed but bounded: on a saturated machine it can take minutes.
    t_stop = time.monotonic()
    stop.set()
    try:
        await asyncio.wait_for(asyncio.shield(runner), STOP_LIMIT_S)
        result["stop_s"] = round(time.monotonic() - t_stop, 1)
    except TimeoutError:
        result["stop_s"] = None
        result["shutdown_errors"] = len(errors.lines) - len(errors_in_window)
        print(json.dumps(result), flush=True)
        os._exit(0)  # thousands of stuck tasks would make asyncio.run's own clean-up hang too
    result["shutdown_errors"] = len(errors.lines) - len(errors_in_window)
    return result


def combine(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One row from the processes of one fleet: sums, except CPU (the busiest process's share
    of a core, since the target is per process) and the window (the widest)."""
    if len(parts) == 1:
        return {**parts[0], "procs": 1, "cpu_pct_total": parts[0]["cpu_pct"]}
    due = sum(p["due"] for p in parts)
    on_time = sum(p["on_time"] for p in parts)
    stops = [p["stop_s"] for p in parts]
    return {
        "nodes": parts[0]["nodes"], "procs": len(parts),
        "owned": sum(p["owned"] for p in parts), "on_time": on_time,
        "connected": sum(p["connected"] for p in parts),
        "connected_all": all(p["connected_all"] for p in parts),
        "connect_s": max(p["connect_s"] for p in parts), "due": due,
        "sampled": sum(p["sampled"] for p in parts),
        "late_pct": round(100 * max(0, due - on_time) / due, 2) if due else 100.0,
        "p50_ms": max((p["p50_ms"] for p in parts if p["p50_ms"] is not None), default=None),
        "p99_ms": max((p["p99_ms"] for p in parts if p["p99_ms"] is not None), default=None),
        "cpu_pct": max(p["cpu_pct"] for p in parts),
        "cpu_pct_total": round(sum(p["cpu_pct"] for p in parts), 1),
        "waited_pct": max(p["waited_pct"] for p in parts),
        "cpu_us_per_sample": max((p["cpu_us_per_sample"] for p in parts
                                  if p["cpu_us_per_sample"] is not None), default=None),
        "rss_mb": round(sum(p["rss_mb"] for p in parts), 1),
        "pure_us_per_node": parts[0]["pure_us_per_node"],
        "window_epoch": [min(p["window_epoch"][0] for p in parts),
                         max(p["window_epoch"][1] for p in parts)],
        "died": [d for p in parts for d in p["died"]][:5],
        "died_count": sum(p["died_count"] for p in parts),
        "errors": [e for p in parts for e in p["errors"]][:5],
        "error_count": sum(p["error_count"] for p in parts),
        "stop_s": None if None in stops else max(stops),
        "shutdown_errors": sum(p["shutdown_errors"] for p in parts),
    }


def check(row: dict[str, Any]) -> None:
    """A run whose agents died, sampled nothing or got nothing through the broker measured
    nothing: fail, never report it as 0 % late."""
    n = row["nodes"]
    if row["died_count"]:
        raise BenchFailure(f"{n} nodes: {row['died_count']} agent task(s) died, e.g. "
                           f"{row['died'][0]}")
    if row["error_count"]:
        raise BenchFailure(f"{n} nodes: the simulator logged {row['error_count']} error(s), "
                           f"e.g. {row['errors'][0]}")
    if not row["sampled"]:
        raise BenchFailure(f"{n} nodes: no agent took a single sample in the window")
    if not row["delivered"]:
        raise BenchFailure(f"{n} nodes: the broker passed on no telemetry in the window")


def parent(args: argparse.Namespace) -> list[Row]:
    from bench._mqttload import RawCounter
    from fleetdeck.broker import MOSQUITTO, ManagedBroker, find_mosquitto

    if find_mosquitto() is None:
        raise BenchFailure("mosquitto is not installed; this benchmark needs it")
    rows = []
    for n in args.sizes:
        row_load = os.getloadavg()[0]
        with ManagedBroker(MOSQUITTO) as broker:
            assert broker.proc is not None
            counter = RawCounter(broker.url.host, broker.url.port, f"count-{os.getpid()}",
                                 "fleetdeck/v1/bench/node/+/telemetry")
            b0 = cpu_s(broker.proc.pid)
            t0 = time.monotonic()
            epoch_ms = int(time.time() * 1000)
            budget = args.connect_timeout + args.warmup + args.window + STOP_LIMIT_S + 90
            # --procs P: P processes of one fleet (fleetdeck sim --procs), side by side, each
            # measuring its own block of nodes in the same window.
            procs = [subprocess.Popen(
                [sys.executable, __file__, "--child", str(n), "--broker", str(broker.url),
                 "--interval", str(args.interval), "--warmup", str(args.warmup),
                 "--window", str(args.window), "--late-ms", str(args.late_ms),
                 "--connect-timeout", str(args.connect_timeout), "--mqtt", args.mqtt,
                 "--procs", str(args.procs), "--shard", str(i), "--epoch-ms", str(epoch_ms)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
                for i in range(args.procs)]
            outs: list[tuple[int, str, str]] = []
            try:
                for proc in procs:
                    left = max(1.0, budget - (time.monotonic() - t0))
                    so, se = proc.communicate(timeout=left)
                    outs.append((proc.returncode, so, se))
            except subprocess.TimeoutExpired:
                for proc in procs:
                    proc.kill()
                raise BenchFailure(f"{n} nodes: the simulator did not finish in {budget:.0f} s"
                                   ) from None
            finally:
                counter.close()
            elapsed = time.monotonic() - t0
            broker_pct = 100 * (cpu_s(broker.proc.pid) - b0) / elapsed
        parts = []
        for i, (rc, so, se) in enumerate(outs):
            lines = [x for x in so.splitlines() if x.startswith("{")]
            if rc != 0 or not lines:
                last = next((x for x in reversed(se.splitlines()) if x.strip()), "")
                raise BenchFailure(f"{n} nodes: simulator process {i + 1} failed (rc {rc}, "
                                   f"{last.strip()[:120]}):\n{se[-2000:]}")
            parts.append(json.loads(lines[-1]))
        row = combine(parts)
        e0, e1 = row["window_epoch"]
        row["delivered"] = counter.between(e0, e1)
        # Over the span of the window(s): the processes of a spread fleet open theirs a few
        # hundred ms apart.
        span_due = row["nodes"] * (e1 - e0) / args.interval
        row["delivered_pct"] = round(100 * row["delivered"] / span_due, 2)
        row["broker_cpu_pct"] = round(broker_pct, 1)
        row["load_before"] = round(row_load, 2)
        check(row)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k not in ("died", "errors")}),
              file=sys.stderr, flush=True)
    print()
    print(f"interval {args.interval:g} s, window {args.window:g} s, late = not published within "
          f"{args.late_ms:g} ms of its slot (late, skipped or never sent); {os.cpu_count()} CPUs")
    print(f"MQTT client per simulated node: {args.mqtt}; {args.procs} process(es) per fleet "
          "(CPU % core = the busiest process)")
    hdr = ("nodes", "connected", "connect s", "late %", "delivered %", "p50 ms", "p99 ms",
           "CPU % core", "waited %", "CPU µs/sample", "RSS MB", "model µs/node", "broker CPU %",
           "stop s", "load before")
    print(" | ".join(hdr))
    print(" | ".join("---" for _ in hdr))
    for r in rows:
        print(" | ".join(str(x) for x in (
            r["nodes"], r["connected"], r["connect_s"], r["late_pct"], r["delivered_pct"],
            r["p50_ms"], r["p99_ms"], r["cpu_pct"], r["waited_pct"], r["cpu_us_per_sample"],
            r["rss_mb"], r["pure_us_per_node"], r["broker_cpu_pct"],
            "> 120" if r["stop_s"] is None else r["stop_s"], r["load_before"])))
    print("waited % = of the window, the simulator runnable but without a CPU "
          "(/proc/PID/schedstat: the other processes of the machine); load before = the 1-min "
          "load average before the size started")
    for r in rows:
        if r["stop_s"] is None:
            print(f"note: {r['nodes']} nodes: the simulator had not stopped {STOP_LIMIT_S:.0f} s "
                  "after being told to (agents saying offline on a saturated loop)")
    ok = [r["nodes"] for r in rows
          if r["late_pct"] < TARGET_LATE_PCT and r["connected"] == r["nodes"]]
    print(f"\nlargest size with < {TARGET_LATE_PCT:g} % late samples: {max(ok) if ok else 'none'}")
    best = max(rows, key=lambda r: r["nodes"])
    met = best["late_pct"] < TARGET_LATE_PCT and best["connected"] == best["nodes"]
    per_proc = best["nodes"] // best["procs"]
    procs = f" in {best['procs']} processes" if best["procs"] > 1 else ""
    return [Row(
        "simulator >= 4,096 nodes per process at 1 Hz, < 1 % late",
        f"{best['late_pct']:.1f} % late at {best['nodes']:,}{procs} ({best['connected']:,} "
        f"connected, {best['delivered_pct']:.0f} % delivered, {best['cpu_pct']:.0f} % CPU of the "
        f"busiest process, {args.mqtt}"
        f"{'' if best['stop_s'] is not None else '; no clean stop in 120 s'}); largest < 1 %: "
        f"{max(ok) if ok else 'none'}", "% late", judge(met, per_proc, TARGET_NODES),
        per_proc, best["late_pct"], "bench/sim_capacity.py")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--late-ms", type=float, default=200.0)
    ap.add_argument("--connect-timeout", type=float, default=90.0)
    ap.add_argument("--quick", action="store_true", help="256 nodes, 3 s warm-up, 5 s window")
    ap.add_argument("--rows", help="write the result row (JSON) here")
    ap.add_argument("--procs", type=int, default=1,
                    help="spread each fleet over this many processes (fleetdeck sim --procs)")
    ap.add_argument("--mqtt", choices=["gmqtt", "aiomqtt"], default="gmqtt",
                    help="each simulated node's MQTT client (aiomqtt: the one before issue 12)")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--shard", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--epoch-ms", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--broker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        logging.basicConfig(level=logging.ERROR)
        print(json.dumps(asyncio.run(child(args))))
        return 0
    if args.quick:
        args.sizes, args.warmup, args.window = [256], 3.0, 5.0
    write_rows(args.rows, parent(args))
    return 0


if __name__ == "__main__":
    main_guard(main)
