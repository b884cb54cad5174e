"""What one simulated sample costs without MQTT: the node's read, the agent's windows and
Telemetry, the v2 encode (``NodeAgent.telemetry_payload``, as the simulator's clock calls it).

    python bench/sim_sample_cost.py [--nodes 4096] [--ticks 8] [--rows]

prints CPU µs a sample (process time, the world's tick left out), best and median of the
ticks. On a shared, loaded host CPU time is noisy; instructions are not. Under cachegrind, run
it twice with the same nodes and ticks, the second with ``--only-tick`` (the same world ticks,
no samples): the difference over nodes x ticks is the instructions a sample
(docs/performance.md, "Simulator capacity"):

    valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
        .venv/bin/python bench/sim_sample_cost.py --nodes 256 --ticks 5 [--only-tick]

``--rows``: the agents read rows (``NodeAgent.columns = False``), where the tree has columns.
"""

import argparse
import gc
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4096)
    ap.add_argument("--ticks", type=int, default=8)
    ap.add_argument("--rows", action="store_true")
    ap.add_argument("--only-tick", action="store_true")
    args = ap.parse_args()

    from fleetdeck.agents.agent import NodeAgent
    from fleetdeck.agents.sim.world import SimWorld, WorldOptions
    from fleetdeck.brokerurl import BrokerURL

    n = args.nodes
    world = SimWorld(WorldOptions(nodes=n, background_jobs=max(1, n // 64), seed=1,
                                  epoch_ms=1_700_000_000_000))
    agents = [NodeAgent(cluster="b", node_id=x.node_id, source=x, url=BrokerURL("h", 1),
                        clock=lambda: world.epoch_ms / 1000 + world.t) for x in world.nodes]
    for a in agents:
        if args.rows:
            a.columns = False
    for _ in range(3):  # past the first keyframe and the windows' baselines
        world.step()
        for a in agents:
            a.telemetry_payload()
    gc.collect()
    gc.freeze()
    per_sample = []
    for _ in range(args.ticks):
        world.step()
        if args.only_tick:
            continue
        t0 = time.process_time()
        for a in agents:
            a.telemetry_payload()
        per_sample.append((time.process_time() - t0) / n * 1e6)
    if args.only_tick:
        return
    require(per_sample, "no tick measured (--ticks 0)")
    per_sample.sort()
    print(f"{n} nodes, {args.ticks} ticks, {'rows' if args.rows else 'as the agent reads'}: "
          f"CPU µs a sample best {per_sample[0]:.1f} median "
          f"{per_sample[len(per_sample) // 2]:.1f}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main_guard(main)
