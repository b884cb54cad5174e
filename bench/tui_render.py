"""Console render benchmark at fleet scale: synthetic telemetry through the real Ingest, the real
app driven headless with ``run_test``, ticks driven by hand.

    .venv/bin/python bench/tui_render.py [--nodes 4096] [--ticks 6]

Prints a table: per view, the tick split into apply (FleetState.apply + commands, not this
issue's code) and render (the view's refresh), tick+paint (tick plus Textual's repaint), and
keypress -> screen latency (press, then wait until the screen has been refreshed).
"""

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.tui.app import FleetdeckApp
from tests.tui.fleet import CLUSTER, Clock, SynthFleet, job_status, publish_job


def pct(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


async def run(nodes: int, ticks: int, size: tuple[int, int]) -> None:
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(nodes, clock, leaves=max(1, nodes // 32))
    t0 = time.perf_counter()
    fleet.birth(ingest)
    rounds = [fleet.payloads() for _ in range(2)]
    gen_s = time.perf_counter() - t0
    for i in range(0, min(nodes, 512), 32):
        publish_job(ingest, job_status(f"j{i}", fleet.names[i:i + 32], clock), clock)
    t0 = time.perf_counter()
    for topic, payload in rounds[0]:
        ingest.handle(topic, payload, clock())
    ingest_us = (time.perf_counter() - t0) / nodes * 1e6
    app = FleetdeckApp(cluster=CLUSTER, ingest=ingest, clock=clock, connect=False,
                       auto_tick=False, audit=MemoryAudit())
    rows: list[tuple[str, ...]] = []
    async with app.run_test(size=size) as pilot:
        app.tick()
        await pilot.pause()
        half = nodes // 2
        k = 0
        for key, view in (("1", "overview"), ("2", "nodes"), ("3", "jobs"), ("4", "fabric"),
                          ("5", "events")):
            await pilot.press(key)
            await pilot.pause()
            apply_ms, render_ms, paint_ms = [], [], []
            for _ in range(ticks):
                batch = rounds[k % 2][(k % 2) * half:(k % 2) * half + half]
                k += 1
                for topic, payload in batch:
                    ingest.handle(topic, payload, clock())
                clock.advance(0.5)
                t0 = time.perf_counter()
                app.tick()
                await pilot.pause()
                paint_ms.append((time.perf_counter() - t0) * 1000)
                apply_ms.append(app.tick_ms - app.render_ms)
                render_ms.append(app.render_ms)
            base_ms = []
            for _ in range(20):
                t0 = time.perf_counter()
                await pilot.press("f9")  # unbound: Pilot's own press+wait overhead
                await pilot.pause()
                base_ms.append((time.perf_counter() - t0) * 1000)
            keys_ms = []
            move = {"overview": "right", "nodes": "down", "jobs": "down", "fabric": "down",
                    "events": "down"}[view]
            for i in range(40):
                t0 = time.perf_counter()
                await pilot.press(move if i % 10 else "pagedown")
                await pilot.pause()
                keys_ms.append((time.perf_counter() - t0) * 1000)
            rows.append((view, f"{statistics.median(apply_ms):.1f}",
                         f"{statistics.median(render_ms):.2f}", f"{max(render_ms):.2f}",
                         f"{statistics.median(paint_ms):.1f}", f"{pct(keys_ms, 50):.1f}",
                         f"{pct(keys_ms, 99):.1f}", f"{pct(base_ms, 50):.1f}"))
        # view switches and the sort-by-util path (the expensive one in the node list)
        switch_ms = []
        for i in range(20):
            t0 = time.perf_counter()
            await pilot.press("12345"[i % 5])
            await pilot.pause()
            switch_ms.append((time.perf_counter() - t0) * 1000)
        await pilot.press("2")
        screen = app.screen
        screen.sort_key = "util"  # type: ignore[attr-defined]
        util_ms = []
        for _ in range(ticks):
            for topic, payload in rounds[k % 2][:half]:
                ingest.handle(topic, payload, clock())
            k += 1
            clock.advance(0.5)
            app.tick()
            util_ms.append(app.render_ms)
    print(f"fleetdeck console render benchmark: {nodes} nodes ({nodes * 8} GPU cells), "
          f"terminal {size[0]}x{size[1]}, {ticks} ticks of {nodes // 2} telemetry messages "
          "per view")
    print(f"synthetic message generation {gen_s:.1f} s; Ingest.handle {ingest_us:.0f} µs/message "
          f"(~9 KB telemetry; foundation code, runs per message in the MQTT loop)")
    head = ("view", "apply ms p50", "render ms p50", "render ms max", "tick+paint ms p50",
            "key→screen ms p50", "key→screen ms p99", "no-op key ms p50")
    widths = [max(len(h), 8) for h in head]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)))
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    print(f"view switch (1-5) key→screen: p50 {pct(switch_ms, 50):.1f} ms, "
          f"p99 {pct(switch_ms, 99):.1f} ms")
    print(f"nodes view sorted by util (all rows built, cached per node): render p50 "
          f"{statistics.median(util_ms):.1f} ms, max {max(util_ms):.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--ticks", type=int, default=6)
    ap.add_argument("--width", type=int, default=160)
    ap.add_argument("--height", type=int, default=48)
    args = ap.parse_args()
    from fleetdeck.runtime import tune_gc

    tune_gc()  # as run_console does
    asyncio.run(run(args.nodes, args.ticks, (args.width, args.height)))


if __name__ == "__main__":
    main()
