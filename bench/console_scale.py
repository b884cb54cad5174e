"""The console at full fleet size without MQTT: memory, tick cost and view switches at N nodes.

A live stream of 16,384 nodes at 1 Hz does not fit on a 2-core machine next to its broker,
publisher and reference subscriber (bench/ingest.py measures live load at the size that does).
What does fit is the console holding N nodes: the real ``FleetdeckApp`` headless (``run_test``,
``connect=False, auto_tick=False``) fed through the real ``Ingest`` by this process, births first,
then ``--rounds`` samples of every node (evolving: bench/_payloads.py), applied by ``app.tick()``
half the fleet at a time as a 0.5 s tick at 1 Hz would. It reports:

* Ingest.handle per message (validation), and each tick: apply + view refresh, and until the
  screen painted — whether one core could keep a 0.5 s tick at N nodes;
* RSS (current and peak) with N nodes' state;
* view switches and cursor keys -> screen p50/p99, pressed while no ingest runs (bench/ingest.py
  measures them under load).

    .venv/bin/python bench/console_scale.py --quick          # 2,048 nodes
    .venv/bin/python bench/console_scale.py --nodes 16384 --rows rows.json
"""

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BenchFailure, Row, judge, main_guard, pct, require, rss_mib, write_rows

CLUSTER = "bench"
TARGET_NODES = 16384


async def measure(n: int, rounds: int, personas: int, switches: int) -> dict[str, Any]:
    from bench._console import BenchApp
    from bench._payloads import EvolvingFleet
    from fleetdeck.console.audit import MemoryAudit
    from fleetdeck.console.ingest import Ingest

    t0 = time.perf_counter()
    fleet = EvolvingFleet(n, CLUSTER, bd_seq=int(time.time() * 1000), personas=personas)
    build_s = time.perf_counter() - t0
    ingest = Ingest(CLUSTER)
    app = BenchApp(cluster=CLUSTER, connect=False, auto_tick=False, ingest=ingest,
                   audit=MemoryAudit(), operator="bench")
    out: dict[str, Any] = {"build_s": build_s}
    async with app.run_test(size=(160, 48)) as pilot:
        now = time.time()
        t0 = time.perf_counter()
        for i in range(n):
            ingest.handle(*fleet.birth(i), now)
            ingest.handle(*fleet.status(i, int(now * 1000)), now)
        out["births_s"] = time.perf_counter() - t0
        app.tick()
        await pilot.pause()
        require(len(app.state.nodes) == n,
                f"the console knows {len(app.state.nodes)} of {n} nodes after the births")
        handle_s = 0.0
        handled = 0
        ticks: list[tuple[float, float]] = []
        applied = 0
        for k in range(rounds):
            for half in (0, 1):
                t0 = time.perf_counter()
                for i in range(half * n // 2, (half + 1) * n // 2 if half else n // 2):
                    ingest.handle(fleet.topics[i], fleet.telemetry(i, k, int(time.time() * 1000)),
                                  time.time())
                handle_s += time.perf_counter() - t0
                handled += (n // 2) if not half else n - n // 2
                paints = app.paints
                t1 = time.perf_counter()
                report = app.tick()
                t2 = time.perf_counter()
                while app.paints == paints and time.perf_counter() - t2 < 10:  # noqa: ASYNC110
                    await asyncio.sleep(0.001)
                ticks.append((t2 - t1, time.perf_counter() - t1))
                applied += report.messages
        require(applied == handled, f"ticks applied {applied} of {handled} samples handled")
        require(app.state.malformed.total == 0,
                f"the console rejected {app.state.malformed.total} messages "
                f"({dict(app.state.malformed.by_reason)}): the benchmark's payloads are broken")
        out.update(rss_mib=rss_mib(), rss_peak_mib=rss_mib(field="VmHWM"),
                   handle_us=1e6 * handle_s / handled, ticks=ticks, applied=applied)
        # Keys with nothing ingesting: first visits (compose) untimed, then timed.
        for key in "23451":
            await app.press_timed(key, True)
        switch, nav = [], []
        for i in range(switches):
            switch.append(await app.press_timed("23451"[i % 5], True))
            if "23451"[i % 5] in "12":  # cursor keys on the grid and the node list
                for key in ("down", "pagedown", "pageup", "up"):
                    nav.append(await app.press_timed(key, False))
        out.update(switch=switch, nav=nav)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=TARGET_NODES)
    ap.add_argument("--rounds", type=int, default=2, help="samples per node")
    ap.add_argument("--switches", type=int, default=30, help="view switches timed")
    ap.add_argument("--personas", type=int, default=1024)
    ap.add_argument("--quick", action="store_true", help="2,048 nodes, 10 switches")
    ap.add_argument("--rows", help="write the result rows (JSON) here")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.switches = 2048, 10
    from fleetdeck.runtime import tune_gc

    tune_gc()  # as run_console does
    n = args.nodes
    r = asyncio.run(measure(n, args.rounds, args.personas, args.switches))
    ticks = r["ticks"][2:] or r["ticks"]  # after the first round: every node has history
    apply_ms = [1000 * a for a, _p in ticks]
    paint_ms = [1000 * p for _a, p in ticks]
    sw, nav = r["switch"], r["nav"]
    if not sw:
        raise BenchFailure("no view switch was timed")
    half = n // 2
    print(f"console at {n:,} nodes (no MQTT): births {r['births_s']:.1f} s; "
          f"Ingest.handle {r['handle_us']:.0f} µs per telemetry message")
    print(f"tick applying {half:,} samples (half the fleet: one 0.5 s tick at 1 Hz): apply + "
          f"refresh p50 {pct(apply_ms, 0.5):,.0f} ms, to painted p50 {pct(paint_ms, 0.5):,.0f} ms"
          f" (max {max(paint_ms):,.0f} ms)")
    per_s = 2 * pct(paint_ms, 0.5) / 1000 + n * r["handle_us"] / 1e6
    print(f"=> one second of a {n:,}-node fleet at 1 Hz costs ~{per_s:.1f} s of one core "
          f"(validation + 2 ticks): the console {'keeps' if per_s < 1 else 'cannot keep'} up")
    print(f"RSS {r['rss_mib']:,.0f} MiB, peak {r['rss_peak_mib']:,.0f} MiB")
    print(f"keys, nothing ingesting: view switch n={len(sw)} p50 {1000 * pct(sw, 0.5):,.0f} ms "
          f"p99 {1000 * pct(sw, 0.99):,.0f} ms; cursor keys n={len(nav)} p50 "
          f"{1000 * pct(nav, 0.5):,.0f} ms p99 {1000 * pct(nav, 0.99):,.0f} ms")
    src = "bench/console_scale.py"
    sw99 = 1000 * pct(sw, 0.99)
    rows = [
        Row("view switch p99 < 100 ms at 16,384 nodes (idle: nothing ingesting)",
            f"p99 {sw99:,.0f} (p50 {1000 * pct(sw, 0.5):,.0f}; {len(sw)} switches)", "ms",
            judge(sw99 < 100, n, TARGET_NODES), n, sw99, src),
        Row("console RSS <= 1 GiB at 16,384 nodes (state only, no MQTT queue)",
            f"{r['rss_peak_mib']:,.0f} peak", "MiB",
            judge(r["rss_peak_mib"] <= 1024, n, TARGET_NODES), n, r["rss_peak_mib"], src),
    ]
    write_rows(args.rows, rows)
    return 0


if __name__ == "__main__":
    main_guard(main)
