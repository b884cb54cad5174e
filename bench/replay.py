"""Recording and store figures: file size per node-hour, headless replay speed, store size.

    python bench/replay.py [--nodes 1024] [--seconds 30] [--coarse-tick 10] [--slow]
                           [--wire 2] [--no-store] [--rows FILE]
    python bench/replay.py --quick            # 256 nodes x 10 s, no store: a few seconds

Builds a recording the way `fleetdeck record` writes it (RecordingWriter, births and statuses,
then 1 Hz telemetry of a simulated fleet with jobs running: some nodes training, some idle, in
the wire format agents send: v2 keyframes every 30 s and deltas between, or ``--wire 1``),
then replays it headless (`replay_headless`, the code behind `fleetdeck replay --headless`) at
the console's tick (the default, the figure judged against the target) and at a coarse tick
(`--tick`), and with `--slow` the reference path that decodes every message; then feeds the
same samples through the SQLite store. Speeds are recorded seconds per second of this process's
CPU time (the machine is shared: wall time is printed too, but it measures the neighbours).
Fails loudly when a replay does not end with every node, skipped lines, or did not account for
every message of the recording (applied, or superseded by a newer sample of its node).
"""

import argparse
import asyncio
import gc
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import Row, judge, main_guard, require, write_rows
from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import TICK_S, replay_headless
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import Store
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind, topic_for
from fleetdeck.runtime import tune_gc
from tests.helpers import FakeNode

T0 = 1_800_000_000.0
TARGET_NODES = 1024


def build(path: Path, nodes: int, seconds: int, wire: int = 2) -> tuple[float, int]:
    """A recording of a simulated fleet with jobs running (some nodes training, some idle),
    its telemetry as the agents' own encoder puts it on the wire (``wire`` 1 or 2)."""
    world = SimWorld(WorldOptions(nodes=nodes, background_jobs=max(1, nodes // 32),
                                  epoch_ms=int(T0 * 1000)))
    now = [T0]
    agents = [NodeAgent(cluster="bench", node_id=x.node_id, source=x,
                        url=BrokerURL("127.0.0.1", 1), clock=lambda: now[0], wire=wire)
              for x in world.nodes]
    for _ in range(5):  # the scheduler starts its jobs
        world.step()
    w = RecordingWriter(path, "bench", source="bench", started=T0)
    t0 = time.perf_counter()
    for a in agents:
        a.bd_seq = int(T0 * 1000)
        w.write(T0, topic_for("bench", Kind.BIRTH, a.node_id), codec.encode(a.birth()), 1, True)
        w.write(T0, topic_for("bench", Kind.STATUS, a.node_id), codec.encode(a.status()), 1,
                True)
    encode_s = 0.0
    for s in range(1, seconds + 1):
        now[0] = T0 + s
        e0 = time.perf_counter()
        world.step()
        encode_s += time.perf_counter() - e0
        for a in agents:
            e0 = time.perf_counter()
            payload = a.telemetry_payload()
            encode_s += time.perf_counter() - e0
            w.write(T0 + s + (hash(a.node_id) % 1000) / 1000,
                    topic_for("bench", Kind.TELEMETRY, a.node_id), payload)
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


@dataclass
class Replayed:
    file: str
    mode: str
    msgs: int
    cpu_s: float
    wall_s: float
    decoded: int
    superseded: int
    seconds: float

    @property
    def speed(self) -> float:
        return self.seconds / self.cpu_s

    @property
    def rate(self) -> float:
        return self.msgs / self.cpu_s


def replay_once(path: Path, name: str, mode: str, msgs: int, nodes: int, seconds: int,
                **kw: Any) -> Replayed:
    gc.collect()
    c0, w0 = time.process_time(), time.perf_counter()
    out = replay_headless(path, **kw)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    rep = out["replay"]
    require(out["totals"]["nodes"] == nodes,
            f"{name} {mode}: the replay knows {out['totals']['nodes']} of {nodes} nodes")
    require(not rep["skipped_lines"] and not rep["truncated"] and not rep["problems"],
            f"{name} {mode}: the replay skipped or stumbled: {rep}")
    require(out["replayed_s"] >= seconds - 1,
            f"{name} {mode}: replayed {out['replayed_s']} s of a {seconds} s recording")
    require(rep["applied"] == msgs and rep["decoded"] + rep["superseded"] == msgs,
            f"{name} {mode}: the replay applied {rep['applied']} and decoded {rep['decoded']} "
            f"+ superseded {rep['superseded']} of {msgs} messages")
    return Replayed(name, mode, msgs, cpu, wall, rep["decoded"], rep["superseded"],
                    out["replayed_s"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--coarse-tick", type=float, default=10.0,
                    help="the coarse tick (s) replayed besides the console's")
    ap.add_argument("--slow", action="store_true",
                    help="also replay decoding every message (the reference path)")
    ap.add_argument("--wire", type=int, choices=(1, 2), default=2,
                    help="telemetry wire format (agents send 2: keyframes and deltas)")
    ap.add_argument("--no-store", action="store_true", help="skip the store-size figure")
    ap.add_argument("--quick", action="store_true", help="256 nodes x 10 s, no store")
    ap.add_argument("--rows", help="write the result row (JSON) here")
    args = ap.parse_args()
    if args.quick:
        args.nodes, args.seconds, args.no_store = 256, 10, True
    tune_gc()
    modes: list[tuple[str, dict[str, Any]]] = [(f"tick {TICK_S:g} s", {}),
                                               (f"tick {args.coarse_tick:g} s",
                                                {"tick_s": args.coarse_tick})]
    if args.slow:
        modes.append((f"every msg, {TICK_S:g} s", {"every_sample": True}))
    with tempfile.TemporaryDirectory() as tmp:
        built = []
        results: list[Replayed] = []
        for name in ("rec.jsonl", "rec.jsonl.gz"):
            path = Path(tmp) / name
            write_s, msgs = build(path, args.nodes, args.seconds, args.wire)
            require(msgs > args.nodes * args.seconds,
                    f"{name}: the recording holds {msgs} messages, fewer than its telemetry")
            size = path.stat().st_size
            built.append((name, msgs, size, size / args.nodes / args.seconds * 3600,
                          msgs / write_s))
            for mode, kw in modes:
                results.append(replay_once(path, name, mode, msgs, args.nodes, args.seconds,
                                           **kw))
        if not args.no_store:
            store_s, store_bytes = asyncio.run(store_size(Path(tmp) / "s.db",
                                                          min(args.nodes, 256), 60))
    print(f"recording: {args.nodes} nodes x {args.seconds} s at 1 Hz, telemetry wire v{args.wire} "
          "(simulated fleet, jobs running)\n")
    print(f"{'file':<14}{'msgs':>8}{'MiB':>8}{'MiB/node-h':>12}{'write msg/s':>13}")
    for name, msgs, size, pnh, wr in built:
        print(f"{name:<14}{msgs:>8}{size / 2**20:>8.1f}{pnh / 2**20:>12.1f}{wr:>13,.0f}")
    print(f"\n{'headless replay':<14}{'mode':>22}{'x real (CPU)':>14}{'msg/s (CPU)':>13}"
          f"{'CPU s':>8}{'wall s':>8}{'decoded':>9}{'superseded':>12}")
    for r in results:
        print(f"{r.file:<14}{r.mode:>22}{r.speed:>14.1f}{r.rate:>13,.0f}{r.cpu_s:>8.2f}"
              f"{r.wall_s:>8.2f}{r.decoded:>9}{r.superseded:>12}")
    if not args.no_store:
        n = min(args.nodes, 256)
        per_day = store_bytes / n / 121 * 86400
        print(f"\nstore: {n} nodes, 121 s of 1 Hz telemetry through the per-tick writer: "
              f"{store_bytes / 2**20:.1f} MiB, {store_s:.1f} s")
        print(f"store size per node-day (1 row per GPU and port per minute): "
              f"{per_day / 2**20:.2f} MiB")
    default = [r for r in results if r.mode == modes[0][0]]
    slowest = min(default, key=lambda r: r.speed)
    speeds = ", ".join(f"{r.file} {r.speed:.1f}x ({r.rate:,.0f} msg/s)" for r in default)
    coarse = ", ".join(f"{r.file} {r.speed:.1f}x" for r in results if r.mode == modes[1][0])
    write_rows(args.rows, [Row(
        "headless replay >= 100x real time on a 1,024-node recording",
        f"{slowest.speed:.1f}x ({speeds}; {modes[1][0]}: {coarse}; {args.seconds} s "
        f"recorded, wire v{args.wire}; per CPU second)", "x real time",
        judge(slowest.speed >= 100, args.nodes, TARGET_NODES), args.nodes, slowest.speed,
        "bench/replay.py")])
    return 0


if __name__ == "__main__":
    main_guard(main)
