"""What the overview's top problems and the incidents view cost when the whole fleet is silent
(a simulator or the network to the broker gone): every node is not ok at once, and the one
incident that explains them ("N racks fell silent") is what the operator needs on the screen.

Each view is made three times on the same state, as their refreshes do while nothing changes
(the first builds what ``incidents.silences`` keeps; the next two reuse it).

    .venv/bin/python bench/silent_fleet.py                 # 16,384 nodes
    .venv/bin/python bench/silent_fleet.py --nodes 2048
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require

CLUSTER = "bench"
EPOCH_MS = 1_767_225_600_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from bench._payloads import EvolvingFleet
    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.rows import top_problems
    from fleetdeck.console.session import ConsoleSession

    n = args.nodes
    fleet = EvolvingFleet(n, CLUSTER, EPOCH_MS - 60_000, personas=16, wire=2)
    ingest = Ingest(CLUSTER)
    now = [EPOCH_MS / 1000]
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=lambda: now[0])
    for i in range(n):
        ingest.handle(*fleet.birth(i), now[0] - 2)
        ingest.handle(*fleet.status(i, EPOCH_MS - 2000), now[0] - 2)
        ingest.handle(fleet.topics[i], fleet.telemetry(i, 0, EPOCH_MS), now[0])
    while session.tick(now[0]).messages:
        pass
    now[0] += 60.0  # nothing heard from any node since
    while session.tick(now[0]).messages or session.state.judge_left:
        pass
    state = session.state
    silent = sum(1 for st in state.nodes.values() if st.stale)
    require(silent == n, f"{silent} of {n} nodes silent: the fleet did not go quiet")
    tops, incs = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        problems, total = top_problems(state)
        t1 = time.perf_counter()
        found = incidents(state)
        t2 = time.perf_counter()
        tops.append((t1 - t0) * 1000)
        incs.append((t2 - t1) * 1000)
    require(problems and problems[0].node == "fleet" and total == n,
            "the top problems do not lead with the fleet's silence")
    require(bool(found) and found[0].kind == "fleet", "no fleet incident")
    print(f"{'nodes':>8} {'view':<14} {'first ms':>9} {'then ms (median)':>17}")
    for view, ms in (("top problems", tops), ("incidents", incs)):
        print(f"{n:>8,} {view:<14} {ms[0]:>9.1f} {statistics.median(ms[1:] or ms):>17.1f}")
    return 0


if __name__ == "__main__":
    main_guard(main)
