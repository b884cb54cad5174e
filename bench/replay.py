"""Recording and store figures: file size per node-hour, headless replay speed, store size.

    python bench/replay.py [--nodes 1024] [--seconds 30]

Builds a recording the way `fleetdeck record` writes it (RecordingWriter, sim telemetry at 1 Hz
under load, births and statuses), then replays it headless (`replay_headless`, the code behind
`fleetdeck replay --headless`) and feeds the same samples through the SQLite store.
"""

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fleetdeck.console.ingest import Ingest
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import replay_headless
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import Store
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from fleetdeck.runtime import tune_gc
from tests.helpers import FakeNode

T0 = 1_800_000_000.0


def build(path: Path, nodes: int, seconds: int) -> tuple[float, int]:
    fakes = [FakeNode(f"gpu{i + 1:05d}", cluster="bench", t0=T0) for i in range(nodes)]
    for f in fakes:
        f.sim.load = 1.0
    w = RecordingWriter(path, "bench", source="bench", started=T0)
    t0 = time.perf_counter()
    for f in fakes:
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    encode_s = 0.0
    for s in range(1, seconds + 1):
        for f in fakes:
            e0 = time.perf_counter()
            payload = codec.encode(f.telemetry())
            encode_s += time.perf_counter() - e0
            w.write(T0 + s + (hash(f.node_id) % 1000) / 1000, f.topic(Kind.TELEMETRY), payload)
    w.close()
    write_s = time.perf_counter() - t0 - encode_s
    return write_s, w.messages


async def store_size(path: Path, nodes: int, seconds: int) -> tuple[float, float]:
    fakes = [FakeNode(f"gpu{i + 1:05d}", cluster="bench", t0=T0) for i in range(nodes)]
    store = await Store.open(path)
    ingest = Ingest("bench")
    state = FleetState("bench", ingest.malformed)
    t0 = time.perf_counter()
    for s in range(seconds + 61):  # past a minute boundary so rows are written
        for f in fakes:
            f.now = T0 + s
            ingest.handle(f.topic(Kind.TELEMETRY), codec.encode(f.agent.telemetry()), T0 + s)
        batch = ingest.take_batch()
        state.apply(batch, T0 + s)
        await store.write_tick(batch, state.take_transitions())
    elapsed = time.perf_counter() - t0
    await store.close()
    return elapsed, size_of(path)


def size_of(path: Path) -> int:
    return path.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=30)
    args = ap.parse_args()
    tune_gc()
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for name in ("rec.jsonl", "rec.jsonl.gz"):
            path = Path(tmp) / name
            write_s, msgs = build(path, args.nodes, args.seconds)
            size = path.stat().st_size
            per_node_hour = size / args.nodes / args.seconds * 3600
            t0 = time.perf_counter()
            out = replay_headless(path)
            replay_s = time.perf_counter() - t0
            assert out["totals"]["nodes"] == args.nodes
            rows.append((name, msgs, size, per_node_hour, msgs / write_s,
                         args.seconds / replay_s, msgs / replay_s))
        store_s, store_bytes = asyncio.run(store_size(Path(tmp) / "s.db", min(args.nodes, 256),
                                                      60))
    print(f"recording: {args.nodes} nodes x {args.seconds} s at 1 Hz (sim under load)\n")
    print(f"{'file':<14}{'msgs':>8}{'MiB':>8}{'MiB/node-h':>12}{'write msg/s':>13}"
          f"{'replay x real':>15}{'replay msg/s':>14}")
    for name, msgs, size, pnh, wr, speed, rate in rows:
        print(f"{name:<14}{msgs:>8}{size / 2**20:>8.1f}{pnh / 2**20:>12.1f}{wr:>13,.0f}"
              f"{speed:>15.1f}{rate:>14,.0f}")
    n = min(args.nodes, 256)
    per_day = store_bytes / n / 121 * 86400
    print(f"\nstore: {n} nodes, 121 s of 1 Hz telemetry through the per-tick writer: "
          f"{store_bytes / 2**20:.1f} MiB, {store_s:.1f} s")
    print(f"store size per node-day (1 row per GPU and port per minute): "
          f"{per_day / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
