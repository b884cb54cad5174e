"""Node detail's history charts: what one read of the store and one redraw cost.

    python bench/history_read.py [--nodes 8] [--days 7] [--repeat 5]
    python bench/history_read.py --quick            # 2 nodes x 1 day: a few seconds

Fills a store (``Store.write_rows``, the console's own write path) with ``--days`` of
per-minute rows (8 GPUs and 8 IB ports a minute) for ``--nodes`` nodes, then for each span node
detail offers (15 min, 1 h, 24 h) measures, for one node, what ``node_history.load`` does: the
two store queries (``Store.gpu_history``, ``port_history``) and building the series; the same
rows read by the plain
``node = ? AND minute >= ?`` scan the store used before (for comparison), and drawing the eight
charts with plotext the way history_view.py does (thinned to one point per column) at the chart
size of a 160x48 terminal (78x9). The query and the series run off the event loop in the
console (aiosqlite's thread, a worker thread); drawing runs on it. Figures are medians over
``--repeat`` runs, in wall time on a shared machine. Fails loudly when a read returns no rows
or fewer minutes than the span holds.
"""

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from textual_plotext.plot import Plot

from bench._common import main_guard, require
from fleetdeck.console.node_history import CHARTS, SPANS, NodeHistory, build, thin
from fleetdeck.console.store import GPU_MINUTE_COLUMNS, PORT_MINUTE_COLUMNS, Store, TickRows
from fleetdeck.console.tui.history_view import SERIES_COLOURS, Y_LABELS

NOW = 1_800_000_000.0
CHART_W, CHART_H = 78, 9


async def fill(store: Store, nodes: int, days: float) -> int:
    last = int(NOW // 60)
    minutes = int(days * 1440)
    rows = 0
    for n in range(nodes):
        node = f"gpu{n + 1:04d}"
        for start in range(last - minutes, last, 1440):
            gpu, ports = [], []
            for m in range(start, min(last, start + 1440)):
                for g in range(8):
                    gpu.append((node, g, m, 60, 90.0, 60.0 + (m + g) % 17, 500.0 + (m % 40),
                                1980.0 - (m % 7) * 10, 1))
                for p in range(8):
                    ports.append((node, f"mlx5_ib{p}", m, 60, 2.4e10, 2.3e10, m % 3, 0, 0))
            await store.write_rows(TickRows(gpu=gpu, ports=ports))
            rows += len(gpu) + len(ports)
    return rows


def draw(hist: NodeHistory) -> None:
    plt = Plot()
    for chart in CHARTS:
        plt.clear_figure()
        for i, pts in enumerate(hist.charts[chart.key].values()):
            shown = thin(pts, hist.first, hist.span.minutes, CHART_W - Y_LABELS, chart.fold)
            plt.plot([m - hist.first for m, _ in shown], [v for _, v in shown],
                     marker="braille", color=SERIES_COLOURS[i % len(SERIES_COLOURS)])
        plt.xlim(0, hist.span.minutes)
        plt.plotsize(CHART_W, CHART_H)
        plt.build()


async def scan(store: Store, node: str, since: float) -> int:
    """The store's history reads as they were before the seeking query (rows as dicts, too)."""
    out = 0
    for table, key, columns in (("gpu_minutes", "gpu", GPU_MINUTE_COLUMNS),
                                ("port_minutes", "dev", PORT_MINUTE_COLUMNS)):
        async with store.db.execute(
                f"SELECT {', '.join(columns)} FROM {table} WHERE node = ? AND minute >= ? "
                f"ORDER BY minute, {key}", (node, int(since // 60))) as cur:
            rows = [dict(zip(columns, r, strict=True)) for r in await cur.fetchall()]
        out += len(rows)
    return out


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def run(nodes: int, days: float, repeat: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = await Store.open(Path(tmp) / "bench.db", retention_days=days + 1)
        try:
            t0 = time.perf_counter()
            rows = await fill(store, nodes, days)
            print(f"store: {nodes} nodes x {days:g} days = {rows:,} rows, written in "
                  f"{time.perf_counter() - t0:.1f} s")
            node = f"gpu{(nodes + 1) // 2:04d}"
            print(f"{'span':>7} {'rows':>7} {'query ms':>9} {'old scan ms':>12} "
                  f"{'series ms':>10} {'8 charts ms':>12}")
            for span in SPANS:
                if span.seconds > days * 86400:
                    continue
                queries, scans, builds, draws = [], [], [], []
                hist = None
                since = NOW - span.seconds
                for _ in range(repeat):
                    t = time.perf_counter()
                    gpu = await store.gpu_history(node, since)
                    ports = await store.port_history(node, since)
                    queries.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    scanned = await scan(store, node, since)
                    scans.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    hist = build(node, span, NOW, gpu, ports)
                    builds.append(time.perf_counter() - t)
                    t = time.perf_counter()
                    draw(hist)
                    draws.append(time.perf_counter() - t)
                require(hist is not None and hist.rows, f"{span.label}: the read returned no rows")
                assert hist is not None
                require(len(hist.minutes) == span.minutes,
                        f"{span.label}: {len(hist.minutes)} minutes read, {span.minutes} stored")
                require(scanned == hist.rows, f"{span.label}: the scan read {scanned} rows, "
                        f"the seeking query {hist.rows}")
                print(f"{span.label:>7} {hist.rows:>7,} {ms(queries):>9.1f} {ms(scans):>12.1f} "
                      f"{ms(builds):>10.1f} {ms(draws):>12.0f}")
        finally:
            await store.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=8)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="2 nodes x 1 day")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.days, args.repeat = 2, 1.0, 3
    asyncio.run(run(args.nodes, args.days, args.repeat))


if __name__ == "__main__":
    main_guard(main)
