"""What applying one telemetry sample costs the console, per sample, at full fleet size.

The fleet is built through the real path without MQTT: payloads from bench/_payloads.py (real
simulated nodes of agents/sim, evolving like a fleet under jobs), ``Ingest.handle`` (validation),
then ``ConsoleSession.tick`` (FleetState.apply, health rules, recent history, fleet-wide
judgements, verdicts). Each round gives every node one new sample; ticks run until the round is
applied. Reported, per scenario:

* tick CPU per sample applied (``time.process_time``: CPU, not wall, so other engineers' load on
  this 2-core machine inflates it less), median over rounds, and the longest single tick;
* cyclic GC during the measured rounds (``gc.callbacks``): collections per generation and the
  longest pause of each;
* the Ingest.handle cost per message for scale (not the subject here).

Scenarios: ``healthy`` (every node healthy at steady state), ``faulty`` (2 % of the nodes carry
one of the simulator's faults: IB flap, link down, symbol storm, XID 79 / 48 / 94, ECC DBE,
thermal, NVLink down, PCIe replay), both applied a whole round per tick, and ``sliced`` (the
healthy fleet under the live console's apply budget, ``ConsoleSession.apply_budget_s``: ticks
per round and the longest tick show the event loop's worst stall from apply).

    .venv/bin/python bench/apply_cost.py                    # 16,384 nodes
    .venv/bin/python bench/apply_cost.py --nodes 2048 --rounds 3
"""

import argparse
import gc
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require

CLUSTER = "bench"
EPOCH_MS = 1_767_225_600_000
BD_SEQ = EPOCH_MS - 60_000

FAULTS: list[dict[str, object]] = [
    {"fault": "ib_flap", "port": 3, "count": 50, "down": 2.0, "every": 4.0},
    {"fault": "link_down", "port": 1},
    {"fault": "symbol_storm", "port": 6, "rate": 200.0},
    {"fault": "xid79", "gpu": 5},
    {"fault": "xid", "gpu": 2, "code": 48},
    {"fault": "xid", "gpu": 1, "code": 94},
    {"fault": "ecc_dbe", "gpu": 4},
    {"fault": "thermal", "gpu": 3, "temp": 92.0},
    {"fault": "nvlink", "gpu": 6, "links": 2},
    {"fault": "pcie_replay", "gpu": 0, "per_min": 120.0},
]


def faulty_personas(count: int) -> tuple[list[Any], list[list[bytes]]]:
    """Personas (bench/_payloads.py) of simulated nodes that each carry one fault: their v1
    templates and their v2 keyframe periods."""
    from bench._payloads import _persona, _v2_cycles
    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.spec import parse_action
    from fleetdeck.agents.sim.world import SimWorld, WorldOptions
    from fleetdeck.brokerurl import BrokerURL

    actions = [parse_action({**FAULTS[i % len(FAULTS)], "at": 1, "node": f"gpu{i + 1:04d}"})
               for i in range(count)]
    world = SimWorld(WorldOptions(nodes=count, seed=7, background_jobs=max(1, count // 16)),
                     actions)
    for _ in range(5):
        world.step()
    url = BrokerURL("127.0.0.1", 1)
    out = []
    for node in world.nodes:
        agent = NodeAgent(cluster=CLUSTER, node_id=node.node_id, source=node, url=url)
        agent.bd_seq = BD_SEQ
        out.append(_persona(agent, CLUSTER))
    return out, _v2_cycles(world, CLUSTER, BD_SEQ)


@dataclass
class GcWatch:
    """Collections and pauses per generation, while ``on``."""

    on: bool = False
    counts: list[int] = field(default_factory=lambda: [0, 0, 0])
    longest_ms: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    total_ms: float = 0.0
    _start: float = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        # CPU time, not wall: on this shared 2-core machine a wall pause also counts the time
        # other processes held the core (the same pause on a quiet machine is the CPU figure).
        if phase == "start":
            self._start = time.process_time()
            return
        if not self.on:
            return
        ms = (time.process_time() - self._start) * 1000
        g = info["generation"]
        self.counts[g] += 1
        self.longest_ms[g] = max(self.longest_ms[g], ms)
        self.total_ms += ms


def scenario(n: int, rounds: int, warmup: int, faulty: float, personas: int,
             sliced: bool = False, gc_threshold: tuple[int, ...] | None = None,
             wire: int = 2) -> dict[str, Any]:
    from bench._payloads import EvolvingFleet
    from fleetdeck.console.health import Verdict
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.runtime import tune_gc

    fleet = EvolvingFleet(n, CLUSTER, BD_SEQ, personas=personas, wire=wire)
    bad = int(n * faulty)
    if bad:
        sick, sick_v2 = faulty_personas(min(bad, 64))
        step = n // bad
        for j in range(bad):
            fleet.sick[j * step] = (sick[j % len(sick)], sick_v2[j % len(sick_v2)])
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=lambda: 0.0)
    if sliced:
        from fleetdeck.console import session as session_mod

        budget = getattr(session_mod, "APPLY_BUDGET_S", None)
        require(budget is not None, "this console has no apply budget to measure")
        session.apply_budget_s = budget
    tune_gc()  # as every console front end does
    if gc_threshold is not None:
        gc.set_threshold(*gc_threshold)
    watch = GcWatch()
    gc.callbacks.append(watch)
    t0 = EPOCH_MS / 1000
    for i in range(n):
        ingest.handle(*fleet.birth(i), t0 - 2)
        ingest.handle(*fleet.status(i, EPOCH_MS - 2000), t0 - 2)
    session.tick(t0 - 1)

    def drain(now: float) -> tuple[int, list[float], int]:
        """Tick until everything ingested is applied: (samples, CPU ms per tick, ticks)."""
        samples, ticks_ms, ticks = 0, [], 0
        while True:
            c0 = time.process_time()
            report = session.tick(now)
            ticks_ms.append((time.process_time() - c0) * 1000)
            samples += report.messages
            ticks += 1
            if not getattr(session, "backlog", 0) and not ingest._batch.messages:
                return samples, ticks_ms, ticks

    per_sample: list[float] = []
    handle_us: list[float] = []
    longest_tick = 0.0
    ticks_total = 0
    for k in range(warmup + rounds):
        ts_ms = EPOCH_MS + k * 1000
        rx = ts_ms / 1000 + 0.05
        c0 = time.process_time()
        for i in range(n):
            ingest.handle(fleet.topics[i], fleet.telemetry(i, k, ts_ms), rx)
        handle = time.process_time() - c0
        if k == warmup:
            watch.on = True
        samples, ticks_ms, ticks = drain(rx + 0.2)
        require(samples == n, f"round {k}: {samples} samples applied, {n} sent")
        if k >= warmup:
            handle_us.append(handle / n * 1e6)
            per_sample.append(sum(ticks_ms) / samples * 1000)
            longest_tick = max(longest_tick, *ticks_ms)
            ticks_total += ticks
    watch.on = False
    gc.callbacks.remove(watch)
    state = session.state
    applied = [st for st in state.nodes.values()
               if st.telemetry is not None and st.telemetry.seq == warmup + rounds]
    require(len(applied) == n, f"{len(applied)} of {n} nodes hold their newest sample")
    verdicts: dict[str, int] = {}
    for st in state.nodes.values():
        verdicts[st.verdict.value] = verdicts.get(st.verdict.value, 0) + 1
    require(verdicts.get(Verdict.OK.value, 0) >= n - 2 * bad - n // 100,
            f"a healthy fleet should judge ok: {verdicts}")
    if bad:
        require(verdicts.get(Verdict.OK.value, 0) < n, f"no fault was judged: {verdicts}")
    return {
        "us_per_sample": statistics.median(per_sample),
        "handle_us": statistics.median(handle_us),
        "longest_tick_ms": longest_tick,
        "ticks_per_round": ticks_total / rounds,
        "gc": watch,
        "verdicts": verdicts,
        "quiet_pct": 100 * state.quiet_applied / max(1, state.applied),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--personas", type=int, default=512)
    ap.add_argument("--only", choices=("healthy", "faulty", "sliced"))
    ap.add_argument("--wire", type=int, choices=(1, 2), default=2,
                    help="telemetry wire format (agents send 2: keyframes and deltas)")
    ap.add_argument("--gc-threshold", type=int, nargs=3, metavar=("G0", "G1", "G2"),
                    help="override fleetdeck.runtime.tune_gc's thresholds (experiments)")
    ap.add_argument("--no-sliced", action="store_true",
                    help="skip the healthy fleet applied under the tick's time budget "
                         "(a console without one)")
    args = ap.parse_args()
    rows = []
    for name, frac, sliced in (("healthy", 0.0, False), ("faulty", 0.02, False),
                               ("sliced", 0.0, True)):
        if (args.only and name != args.only) or (sliced and args.no_sliced):
            continue
        rows.append((name, scenario(args.nodes, args.rounds, args.warmup, frac, args.personas,
                                    sliced, args.gc_threshold, args.wire)))
        gc.collect()
    print(f"apply cost at {args.nodes:,} nodes, wire v{args.wire}, {args.rounds} measured rounds "
          f"(CPU time, median per round; GC pauses in CPU ms; gc threshold "
          f"{tuple(args.gc_threshold) if args.gc_threshold else 'tune_gc'})")
    head = (f"{'fleet':8} {'tick µs/sample':>15} {'handle µs/msg':>14} {'longest tick ms':>16} "
            f"{'ticks/round':>12} {'gc0 n/max ms':>13} {'gc1 n/max ms':>13} {'gc2 n/max ms':>13}"
            f" {'gc total ms':>12} {'no rules %':>10}  verdicts")
    print(head)
    for name, r in rows:
        w: GcWatch = r["gc"]
        gcs = " ".join(f"{w.counts[g]:>5}/{w.longest_ms[g]:>7.1f}" for g in range(3))
        print(f"{name:8} {r['us_per_sample']:>15.1f} {r['handle_us']:>14.1f} "
              f"{r['longest_tick_ms']:>16.1f} {r['ticks_per_round']:>12.1f} {gcs} "
              f"{w.total_ms:>12.1f} {r['quiet_pct']:>10.0f}  {r['verdicts']}")
    return 0


if __name__ == "__main__":
    main_guard(main)
