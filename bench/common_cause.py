"""What the incidents view and the overview's top problems cost when many nodes say one warning
alike (``incidents.common_causes``): agents that cannot read their kernel log after one
deployment (A1) on ``--blind`` of ``--nodes`` nodes, one of them with a port down besides. The
incidents are regrouped on every fleet change over the nodes that are not ok, so this is a cost
per change, against the tick's 50 ms stall budget (docs/performance.md).

    .venv/bin/python bench/common_cause.py                       # 16,384 nodes, 2,048 blind
    .venv/bin/python bench/common_cause.py --blind 16384
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require

LOG = "kernel log: /var/log/syslog: Permission denied"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--blind", type=int, default=2048)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()

    import msgspec

    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.rows import top_problems
    from fleetdeck.console.session import ConsoleSession
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

    def blind(t):  # type: ignore[no-untyped-def]
        return msgspec.structs.replace(t, agent=msgspec.structs.replace(t.agent, errors=(LOG,)))

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(args.nodes, clock)
    fleet.birth(session.ingest)
    faults = dict.fromkeys(fleet.names[:args.blind], blind)
    faults[fleet.names[2]] = lambda t: port_down()(blind(t))
    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        while session.tick().messages or session.state.judge_left:
            pass
    state = session.state
    require(len(state.not_ok) == args.blind, f"{len(state.not_ok)} not ok, not {args.blind}")
    tops, incs = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        _problems, total = top_problems(state)
        t1 = time.perf_counter()
        found = incidents(state)
        t2 = time.perf_counter()
        tops.append((t1 - t0) * 1000)
        incs.append((t2 - t1) * 1000)
    kinds = {i.kind for i in found}
    print(f"{len(found)} incidents ({', '.join(sorted(kinds))}); {total} nodes need attention")
    print(f"{'nodes':>8} {'blind':>6} {'view':<14} {'first ms':>9} {'then ms (median)':>17}")
    for view, ms in (("top problems", tops), ("incidents", incs)):
        print(f"{args.nodes:>8,} {args.blind:>6,} {view:<14} {ms[0]:>9.1f} "
              f"{statistics.median(ms[1:] or ms):>17.1f}")
    return 0


if __name__ == "__main__":
    main_guard(main)
