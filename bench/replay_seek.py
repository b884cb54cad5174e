"""Replay console seeks at fleet scale: the longest stall of the event loop while a seek runs,
and the time it takes to land.

    fleetdeck sim --nodes 1024 --duration 15m --jobs 4 --scenario demo --seed 1 \\
        --out /tmp/rec1024.jsonl.gz
    .venv/bin/python bench/replay_seek.py /tmp/rec1024.jsonl.gz [--reps 3]
    .venv/bin/python bench/replay_seek.py --dense 1024,120 --reps 1 \
        --moves ':seek +100,:seek -60,],[,:seek +30'    # every node sends every second

Drives the real ``ReplayApp`` headless (Textual's ``run_test``, its own tick timer, paused so
that only the moves move it), with the GC tuned as ``fleetdeck replay`` tunes it, through these
moves in order, each from where the one before landed: ``:seek +600`` from the start (nothing
played yet), ``:seek -60``, ``]``, ``[``, ``:seek +60`` (over what was played). A move is made as
its key makes it (the app's own handler, called in the event loop) and has landed once the
Player holds its target with nothing left to do. Meanwhile the benchmarks' probe task sleeps
10 ms in a loop (``bench/_console.py``, ``LoopProbe``): its longest oversleep is the longest
stall of the loop (what a key or a paint waited for), and the loop thread's CPU time in that beat
says how much of it was the console's own work (the machine may be shared). With
``FLEETDECK_BENCH_STALLS=FILE`` every stall over 40 ms is written to FILE with the callbacks and
stacks in it (``bench/stall_report.py`` sums it up; the last run's). Each move runs ``--reps``
times, in a fresh app each time; the table shows the median and the worst.

Fails loudly when the recording holds no node, a move lands elsewhere than asked, or a move does
not land within a minute.
"""

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BenchFailure, main_guard, require
from bench._console import LoopProbe
from bench.replay import build
from fleetdeck.console.replay import NothingToReplay
from fleetdeck.console.tui.replay_app import ReplayApp
from fleetdeck.runtime import tune_gc

LAND_LIMIT_S = 60.0
MOVES = (":seek +600", ":seek -60", "]", "[", ":seek +60")


def landed(app: ReplayApp) -> bool:
    p = app.player
    # ``busy``/``target`` exist once seeks are incremental; before, a move landed on return.
    return getattr(p, "target", None) is None and not getattr(p, "busy", False)


def make(app: ReplayApp, move: str) -> float:
    """Make ``move`` as its key does; where it should land."""
    p = app.player
    here = getattr(p, "heading", p.position)
    if move.startswith(":"):
        value = float(move.split()[1])
        want = here + value
        app.run_command_line(move)
    else:
        step = 1 if move == "]" else -1
        want = here + step * app.tick_s
        app.action_step(step)
    return max(p.start, min(p.end, want))


async def one_run(path: Path, size: tuple[int, int],
                  moves: tuple[str, ...] = MOVES) -> dict[str, tuple[float, float, float]]:
    try:
        app = ReplayApp(path)
    except NothingToReplay as err:
        # The replay refuses a recording of no node before its screen opens.
        raise BenchFailure(f"the replay shows no node: {err}") from None
    out: dict[str, tuple[float, float, float]] = {}
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        app.player.paused = True
        await pilot.pause(0.3)
        probe = LoopProbe()
        # What the stall file names (those the code under test has: the bench also times the
        # console from before seeks were incremental).
        for owner, names in ((ReplayApp, ("tick", "_go", "_show", "_show_progress",
                                          "refresh_view")),
                             (type(app.player), ("work", "advance", "seek"))):
            probe.time_calls(owner, *(n for n in names if hasattr(owner, n)))
        probe.start()
        await asyncio.sleep(0.05)
        for move in moves:
            w0, t0 = time.time(), time.perf_counter()
            want = make(app, move)
            while not landed(app):
                if time.perf_counter() - t0 > LAND_LIMIT_S:
                    raise BenchFailure(f"{move} did not land within {LAND_LIMIT_S:.0f} s")
                await asyncio.sleep(0.001)
            land_s = time.perf_counter() - t0
            await asyncio.sleep(0.05)  # the paint after it, within the probe's watch
            p = app.player
            require(abs(p.position - want) < 1e-6,
                    f"{move} landed at {p.position - p.start:.3f} s, not "
                    f"{want - p.start:.3f} s")
            beats = [i for i, (t, _late) in enumerate(probe.samples) if w0 <= t]
            require(beats, f"the probe did not run during {move}")
            worst = max(beats, key=lambda i: probe.samples[i][1])
            out[move] = (land_s, probe.samples[worst][1], probe.cpu_samples[worst])
            await asyncio.sleep(0.05)
        probe.stop()
        require(len(app.state.nodes) > 0, "the replay shows no node: nothing was replayed")
        require(app.player.ticks > 0, "the replay never ticked")
        out["nodes"] = (float(len(app.state.nodes)), 0.0, 0.0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("recording", type=Path, nargs="?",
                    help="a recording (fleetdeck sim --out, fleetdeck record)")
    ap.add_argument("--dense", metavar="NODES,SECONDS",
                    help="instead, build a recording of NODES sending every second for SECONDS "
                         "as bench/replay.py does (the agents' own v2 encoder, jobs running)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--size", default="160x48", help="terminal COLUMNSxROWS")
    ap.add_argument("--moves", default=",".join(MOVES),
                    help="the moves, comma-separated (default: %(default)s)")
    args = ap.parse_args()
    moves = tuple(m.strip() for m in args.moves.split(","))
    if not all(m in ("[", "]") or (m.startswith(":seek ") and m[6:7] in "+-") for m in moves):
        ap.error("--moves takes ':seek +N', ':seek -N', '[' and ']', comma-separated")
    if args.dense:
        try:
            nodes, seconds = (int(x) for x in args.dense.split(","))
        except ValueError:
            ap.error("--dense takes NODES,SECONDS, e.g. 1024,120")
        tmp = tempfile.TemporaryDirectory(prefix="fleetdeck-seek-")
        args.recording = Path(tmp.name) / f"dense{nodes}.jsonl.gz"
        t0 = time.perf_counter()
        build(args.recording, nodes, seconds)
        print(f"built {args.recording.name}: {nodes} nodes x {seconds} s in "
              f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    elif args.recording is None or not args.recording.is_file():
        ap.error("give a recording (a file), or --dense NODES,SECONDS")
    cols, rows = (int(x) for x in args.size.split("x"))
    tune_gc()
    runs: list[dict[str, tuple[float, float, float]]] = []
    for _ in range(args.reps):
        runs.append(asyncio.run(one_run(args.recording, (cols, rows), moves)))
    nodes = int(runs[0]["nodes"][0])
    print(f"{args.recording.name}: {nodes} nodes, {args.reps} runs; ms, median (worst)")
    print(f"{'move':<12} {'to land':>16} {'longest stall':>18} {'its CPU':>16}")

    def cell(values: list[float]) -> str:
        return f"{1000 * statistics.median(values):.0f} ({1000 * max(values):.0f})"

    for move in moves:
        got: list[Any] = [r[move] for r in runs]
        print(f"{move:<12} {cell([g[0] for g in got]):>16} {cell([g[1] for g in got]):>18} "
              f"{cell([g[2] for g in got]):>16}")
    return 0


if __name__ == "__main__":
    main_guard(main)
