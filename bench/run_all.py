"""``make bench``: every target of the issue, measured, in one table (and optionally as JSON).

Runs each benchmark in its own process at sizes a 2-core machine does in a few minutes, shows
their detailed output as it comes, then prints one table: target, measured figure, unit, the
node count it was measured at, and met / NOT MET / not measured at target size. A row is never
"met" by extrapolation from a smaller fleet. A benchmark that fails (its subject published or
received nothing, or died) turns its rows into NOT MET with the reason, and this exits 1.

    .venv/bin/python bench/run_all.py [--json FILE] [--ingest-nodes 2048]
    .venv/bin/python bench/run_all.py --quick      # every benchmark in its quick mode (~1 min)
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import FAILED, Row, read_rows, table

REPO = Path(__file__).resolve().parent.parent
# (script, arguments, arguments in --quick mode, the targets it measures: for a failed run)
PLAN: list[tuple[str, list[str], list[str], list[str]]] = [
    ("bench/ingest.py", ["--seconds", "20"], ["--quick"], [
        "16,384 nodes at 1 Hz into fleet state on one core: <= 70 % of it, 100 % delivered",
        "ingest >= 0.8 x a bare subscriber, same stream, same time",
        "sample -> visible on screen p99 < 1 s at 16,384 nodes",
        "keypress -> screen p99 < 100 ms while ingesting 16,384 nodes",
        "no event-loop stall > 50 ms while ingesting 16,384 nodes",
        "view switch p99 < 100 ms at 16,384 nodes (while ingesting)",
        "console RSS <= 1 GiB at 16,384 nodes"]),
    ("bench/console_scale.py", ["--nodes", "16384"], ["--quick"], [
        "sample -> visible on screen p99 < 1 s at 16,384 nodes while a feed applies "
        "16,384 samples/s",
        "view switch p99 < 100 ms at 16,384 nodes (idle: nothing ingesting)",
        "node list re-sort p99 < 100 ms at 16,384 nodes (idle)",
        "view switch p99 < 100 ms at 16,384 nodes while a feed applies 16,384 samples/s",
        "no event-loop stall > 50 ms while a feed applies 16,384 samples/s",
        "no event-loop stall > 50 ms: the periodic GC sweep at 16,384 nodes (TUI, every view)",
        "console RSS <= 1 GiB at 16,384 nodes (state only, no MQTT queue)"]),
    ("bench/replay.py", ["--nodes", "1024", "--seconds", "10", "--no-store"], ["--quick"], [
        "headless replay >= 100x real time on a 1,024-node recording"]),
    ("bench/sim_capacity.py", ["--sizes", "4096", "--window", "20", "--connect-timeout", "60"],
     ["--quick"], [
        "simulator >= 4,096 nodes per process at 1 Hz, < 1 % late"]),
]

ORDER = [
    "16,384 nodes at 1 Hz",
    "ingest >= 0.8",
    "sample -> visible",
    "keypress -> screen",
    "no event-loop stall",
    "view switch",
    "headless replay",
    "simulator",
    "console RSS",
]


def rank(row: Row) -> int:
    return next((i for i, p in enumerate(ORDER) if row.target.startswith(p)), len(ORDER))


def machine() -> str:
    from fleetdeck.broker import find_mosquitto, mosquitto_version

    mosq = find_mosquitto()
    return (f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), Python "
            f"{platform.python_version()}, {mosquitto_version(mosq) if mosq else 'no mosquitto'}, "
            f"load average at start {os.getloadavg()[0]:.2f}")


def reference_ms() -> float:
    """A fixed pure-Python loop, best of 7 (ms): the same code gets slower when the host's other
    tenants take the CPU, which the load average of this VM does not show. Printed at the start
    and the end, so runs on different days (or a run whose machine slowed) can be compared."""
    best = float("inf")
    for _ in range(7):
        t0 = time.perf_counter()
        sum(i * i for i in range(200_000))
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def run_teed(cmd: list[str]) -> tuple[int, list[str]]:
    """Run a benchmark, its stderr shown as it comes and kept (for its FAILED line)."""
    proc = subprocess.Popen(cmd, cwd=REPO, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        sys.stderr.write(line)
        sys.stderr.flush()
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", help="also write the rows as JSON to this file")
    ap.add_argument("--ingest-nodes", type=int, default=2048,
                    help="fleet size of the live ingest run (16384 on a big enough machine)")
    ap.add_argument("--quick", action="store_true", help="every benchmark in its quick mode")
    args = ap.parse_args()
    started = datetime.datetime.now(datetime.UTC)
    header = machine()
    ref_start = reference_ms()
    rows: list[Row] = []
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (script, full, quick, targets) in enumerate(PLAN):
            extra = quick if args.quick else list(full)
            if script == "bench/ingest.py" and not args.quick:
                extra += ["--nodes", str(args.ingest_nodes)]
            out = Path(tmp) / f"rows{i}.json"
            cmd = [sys.executable, script, *extra, "--rows", str(out)]
            print(f"\n=== {' '.join(['python', script, *extra])}", flush=True)
            t0 = time.monotonic()
            rc, err = run_teed(cmd)
            print(f"=== {script}: {time.monotonic() - t0:.0f} s, exit {rc}", flush=True)
            if rc == 0 and out.exists():
                rows += read_rows(out)
                continue
            why = next((line[len(FAILED):].strip() for line in err
                        if line.startswith(FAILED)), f"exit status {rc}")
            failures.append(f"{script}: {why}")
            rows += [Row(t, f"benchmark failed: {why.splitlines()[0][:120]}", "", False, None,
                         None, script) for t in targets]
    rows.sort(key=rank)
    header += (f"; reference loop {ref_start:.1f} ms at the start, {reference_ms():.1f} at the "
               "end (bench/run_all.py reference_ms)")
    print(f"\nfleetdeck benchmarks, {started:%Y-%m-%d %H:%M} UTC; {header}")
    print(f"command: make bench{' (quick)' if args.quick else ''}; ingest live at "
          f"{'quick size' if args.quick else f'{args.ingest_nodes:,} nodes'}\n")
    print(table(rows))
    if args.json:
        when = started.isoformat(timespec="seconds")
        Path(args.json).write_text(json.dumps(
            [asdict(r) | {"status": r.status, "date": when, "machine": header,
                          "quick": args.quick} for r in rows], indent=1) + "\n")
        print(f"\nrows written to {args.json}")
    for f in failures:
        print(f"{FAILED} {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
