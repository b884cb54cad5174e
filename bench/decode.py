"""Telemetry decode and encode cost, and bytes on the wire: v1 (pydantic, fast) and v2.

    .venv/bin/python -m bench.decode [--samples 60] [--rounds 7] [--json FILE]

The samples are real: a simulated node under a training job (``SimWorld`` with a background
job), read by a real ``NodeAgent`` and encoded by the agents' own encoder (``wire2.
TelemetryEncoder``: v1 JSON, or v2 keyframes every 30 s of sample time and deltas between).
Every figure is CPU time (``time.process_time``) per message, the median of ``--rounds`` rounds
over all samples, so other load on the machine shows as spread, not as a wrong median.

Before timing, every payload is decoded and checked against the sample it came from (v2: merged
into its keyframe); a benchmark that decoded nothing or decoded wrong fails (``BENCH FAILED``).
"""

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench._common import BenchFailure, main_guard, require
from fleetdeck.agents.agent import NodeAgent
from fleetdeck.agents.sim.world import SimWorld, WorldOptions
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.protocol import codec, fast, messages, wire2


def busy_node_samples(n: int, seed: int = 1) -> list[fast.Telemetry]:
    """``n`` consecutive samples (1 s apart) of one node while it runs a job."""
    world = SimWorld(WorldOptions(nodes=4, seed=seed, background_jobs=2))
    agents = [NodeAgent(cluster="bench", node_id=x.node_id, source=x, url=BrokerURL("h", 1))
              for x in world.nodes]
    for a in agents:
        a.bd_seq = 1_700_000_000_000
    for _ in range(30):  # until the scheduler has started work
        world.step()
        tels = [a.telemetry() for a in agents]
        busy = [i for i, t in enumerate(tels) if t.job is not None]
        if busy:
            break
    require(busy, "no simulated node got a job in 30 s")
    agent = agents[busy[0]]
    out = []
    for _ in range(n):
        world.step()
        out.append(agent.telemetry())
    require(sum(t.job is not None for t in out) >= n * 0.9, "the node was idle most of the run")
    return out


@dataclass
class Op:
    name: str
    fn: Callable[[Any], object]
    items: Sequence[Any]
    bytes_per_msg: float
    reps: int = 1
    figures: list[float] = field(default_factory=list)

    def calibrate(self, min_s: float = 0.05) -> None:
        while True:
            t0 = time.process_time()
            self.run()
            if time.process_time() - t0 >= min_s:
                return
            self.reps *= 2

    def run(self) -> None:
        fn, items = self.fn, self.items
        for _ in range(self.reps):
            for x in items:
                fn(x)

    def round(self) -> float:
        t0 = time.process_time()
        self.run()
        us = (time.process_time() - t0) / (self.reps * len(self.items)) * 1e6
        self.figures.append(us)
        return us


def measure(ops: Sequence[Op], rounds: int) -> list[list[float]]:
    """Round-robin: every op once per round, so load on the machine hits them alike; the
    per-round ratios to the first op are the side-by-side figure."""
    for op in ops:
        op.calibrate()
    ratios: list[list[float]] = [[] for _ in ops]
    gc_was = gc.isenabled()
    gc.disable()  # cyclic GC is the apply loop's cost (gc.freeze there), not the decoder's
    try:
        for _ in range(rounds):
            figures = [op.round() for op in ops]
            for i, us in enumerate(figures):
                ratios[i].append(us / figures[0])
    finally:
        if gc_was:
            gc.enable()
    return ratios


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--keyframe-every", type=float, default=wire2.KEYFRAME_EVERY_S)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    require(args.samples >= 2, "--samples: at least 2")

    tels = busy_node_samples(args.samples)
    # Sample time, not the wall clock the samples were stamped with (they were made at once).
    at = {t.seq: i * t.interval_s for i, t in enumerate(tels)}
    v1 = [wire2.TelemetryEncoder(wire=1).encode(t, at[t.seq]) for t in tels]
    enc = wire2.TelemetryEncoder(args.keyframe_every)
    v2 = [enc.encode(t, at[t.seq]) for t in tels]
    old_v1 = [codec.encode(codec.decode(messages.Telemetry, p)) for p in v1]

    # Correctness first: everything decodes to the sample it came from.
    for t, p in zip(tels, v1, strict=True):
        require(codec.decode_telemetry(p) == t, f"fast v1 decoded seq {t.seq} wrong")
        require(fast.to_dict(t) == codec.decode(messages.Telemetry, p).model_dump(),
                f"pydantic v1 decoded seq {t.seq} differently")
    r = wire2.Reassembler()
    keyframes: list[bytes] = []
    deltas: list[tuple[bytes, wire2.Reassembler]] = []
    for t, p in zip(tels, v2, strict=True):
        msg = wire2.decode(p)
        require(r.apply(msg, p) == t, f"v2 seq {t.seq} merged wrong")
        if msg.keyframe:
            keyframes.append(p)
            held = wire2.Reassembler()
            held.apply(msg, p)
        else:
            deltas.append((p, held))
    require(keyframes and deltas, f"{len(keyframes)} keyframes, {len(deltas)} deltas")
    delta_msgs = [(wire2.decode(p), p, h) for p, h in deltas]
    # The console's Reassembler: its quiet columns, lazy (a quiet delta's rows not built) or not.
    from fleetdeck.console.health import (
        BENIGN_GPU_COLUMNS,
        BENIGN_PORT_COLUMNS,
        QUIET_CHECKED_GPU_COLUMNS,
    )

    def console_side(lazy: bool) -> list[tuple[wire2.TelemetryV2, bytes, wire2.Reassembler]]:
        out, held_c = [], None
        for p in v2:
            msg = wire2.decode(p)
            if msg.keyframe:
                held_c = wire2.Reassembler(quiet_gpu=BENIGN_GPU_COLUMNS | QUIET_CHECKED_GPU_COLUMNS,
                                           quiet_port=BENIGN_PORT_COLUMNS, lazy=lazy)
                held_c.apply(msg, p)
            else:
                assert held_c is not None
                out.append((msg, p, held_c))
        return out

    eager_c, lazy_c = console_side(False), console_side(True)
    quiet = sum(type(x[2].apply(x[0], x[1])) is wire2.Pending for x in lazy_c)
    require(quiet > 0, "no delta of the stream is quiet: the lazy merge measures nothing")

    def v2_delta(item: tuple[bytes, wire2.Reassembler]) -> object:
        p, h = item
        return h.apply(wire2.decode(p), p)

    def mean_len(ps: Sequence[bytes]) -> float:
        return sum(map(len, ps)) / len(ps)

    delta_bytes = mean_len([p for p, _ in deltas])
    stream_enc = wire2.TelemetryEncoder(args.keyframe_every)
    clock = iter(range(10**12))
    ops = [
        Op("v1 decode, fast (msgspec)", codec.decode_telemetry, v1, mean_len(v1)),
        Op("v1 decode, pydantic (before)", lambda p: codec.decode(messages.Telemetry, p), v1,
           mean_len(old_v1)),
        Op("v2 keyframe decode + build",
           lambda p: wire2.Reassembler().apply(wire2.decode(p), p), keyframes,
           mean_len(keyframes)),
        Op("v2 delta decode + merge", v2_delta, deltas, delta_bytes),
        Op("  of which decode", lambda x: wire2.decode(x[0]), deltas, delta_bytes),
        Op("  of which merge", lambda x: x[2].apply(x[0], x[1]), delta_msgs, delta_bytes),
        Op("  merge, console (eager)", lambda x: x[2].apply(x[0], x[1]), eager_c, delta_bytes),
        Op(f"  merge, console (lazy, {100 * quiet // len(lazy_c)}% quiet)",
           lambda x: x[2].apply(x[0], x[1]), lazy_c, delta_bytes),
        Op("agent: encode v1 (msgspec)", lambda t: wire2.TelemetryEncoder(wire=1).encode(t, 0),
           tels, mean_len(v1)),
        Op("agent: encode v2 (K + deltas)", lambda t: stream_enc.encode(t, next(clock)), tels,
           mean_len(v2)),
    ]
    ratios = measure(ops, args.rounds)
    rows: list[dict[str, Any]] = [
        {"op": op.name, "us_per_msg": round(statistics.median(op.figures), 2),
         "us_min": round(min(op.figures), 2), "us_max": round(max(op.figures), 2),
         "x_fast_v1": round(statistics.median(r), 2), "bytes_per_msg": round(op.bytes_per_msg)}
        for op, r in zip(ops, ratios, strict=True)]

    span_s = sum(t.interval_s for t in tels)
    per_s = {"v1 pydantic (before)": sum(map(len, old_v1)) / span_s,
             "v1 msgspec": sum(map(len, v1)) / span_s, "v2": sum(map(len, v2)) / span_s}
    require(all(v > 0 for v in per_s.values()), "no bytes measured")

    print(f"{len(tels)} samples of one simulated node under a job ({len(keyframes)} v2 "
          f"keyframes every {args.keyframe_every:g} s, {len(deltas)} deltas); CPU µs per "
          f"message, median of {args.rounds} rounds [min-max], and the median per-round "
          "ratio to fast v1 decode (round-robin, side by side)")
    print(f"{'operation':32} {'µs/msg':>8} {'range':>15} {'x fast v1':>10} {'bytes/msg':>10}")
    for x in rows:
        print(f"{x['op']:32} {x['us_per_msg']:8.1f} {x['us_min']:7.1f}-{x['us_max']:<7.1f} "
              f"{x['x_fast_v1']:10.2f} {x['bytes_per_msg']:10d}")
    print("bytes per node-second: " + ", ".join(f"{k} {v:,.0f}" for k, v in per_s.items())
          + f" (v2/v1 msgspec {per_s['v2'] / per_s['v1 msgspec']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "bytes_per_node_s": per_s}, f, indent=1)
    return 0


if __name__ == "__main__":
    try:
        main_guard(main)
    except BenchFailure as err:  # pragma: no cover - main_guard handles it
        print(err, file=sys.stderr)
        sys.exit(1)
