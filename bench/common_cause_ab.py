"""The incidents' regroup of ``bench/common_cause.py``'s fleet, this tree's ``incidents()`` and a
base revision's side by side in one process, on one state, alternated (which goes first swaps
each round), so a loaded host weighs on both alike. Between regroups the fleet moves as the
incidents view sees it move: ``--samples`` nodes send a sample (the same findings, each node
once an interval: the view regroups on every data revision), and with ``--move`` one node's
port goes down or back up too (a node's shape moved: what is kept is made again).

    .venv/bin/python bench/common_cause_ab.py --base HEAD~1 --blind 16384
    .venv/bin/python bench/common_cause_ab.py --base HEAD~1 --blind 16384 --move
"""

import argparse
import importlib.util
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require

LOG = "kernel log: /var/log/syslog: Permission denied"
ROOT = Path(__file__).resolve().parent.parent


def _base_incidents(rev: str):  # type: ignore[no-untyped-def]
    """``incidents`` as ``rev`` has it, loaded beside this tree's (the rest of the package is
    this tree's)."""
    src = subprocess.run(["git", "show", f"{rev}:console/incidents.py"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("fleetdeck.console._incidents_base", loader=None)
    assert spec is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    exec(compile(src, f"{rev}:console/incidents.py", "exec"), mod.__dict__)
    return mod.incidents


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD~1", help="git revision to compare with")
    ap.add_argument("--nodes", type=int, default=16384)
    ap.add_argument("--blind", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--samples", type=int, default=512,
                    help="nodes that send a sample between regroups")
    ap.add_argument("--move", action="store_true",
                    help="one node's port goes down or back up between regroups too")
    args = ap.parse_args()

    import msgspec

    from fleetdeck.console.incidents import incidents
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.runtime import tune_gc
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

    base = _base_incidents(args.base)

    def blind(t):  # type: ignore[no-untyped-def]
        return msgspec.structs.replace(t, agent=msgspec.structs.replace(t.agent, errors=(LOG,)))

    def blind_port(t):  # type: ignore[no-untyped-def]
        return port_down()(blind(t))

    clock = Clock()
    session = ConsoleSession(CLUSTER, clock=clock, ingest=Ingest(CLUSTER), follow_up=False)
    fleet = SynthFleet(args.nodes, clock)
    fleet.birth(session.ingest)
    faults = dict.fromkeys(fleet.names[:args.blind], blind)
    faults[fleet.names[2]] = blind_port

    def settle() -> None:
        while session.tick().messages or session.state.judge_left:
            pass

    for _ in range(2):
        clock.advance(1.0)
        fleet.telemetry(session.ingest, faults=faults)
        settle()
    state = session.state
    require(len(state.not_ok) == args.blind, f"{len(state.not_ok)} not ok, not {args.blind}")
    tune_gc()
    mover = fleet.names[5]
    times: dict[str, list[float]] = {"base": [], "now": []}
    same = True
    # Every node heard once an interval, as a live fleet is: none goes stale between rounds.
    step = state.nodes[mover].interval_s * args.samples / args.nodes
    for i in range(args.rounds):
        clock.advance(step)
        names = [fleet.names[(i * args.samples + j) % args.nodes] for j in range(args.samples)]
        if args.move:
            faults[mover] = blind_port if i % 2 == 0 else blind
            names.append(mover)
        fleet.telemetry(session.ingest, names=names, faults=faults)
        settle()
        found: dict[str, list[object]] = {}
        for which in (("base", "now") if i % 2 == 0 else ("now", "base")):
            fn = base if which == "base" else incidents
            t0 = time.perf_counter()
            got = fn(state)
            times[which].append((time.perf_counter() - t0) * 1000)
            found[which] = [inc.as_json() for inc in got]
        same = same and json.dumps(found["base"]) == json.dumps(found["now"])
    require(same, "base and now grouped the fleet differently")
    print(f"{args.nodes:,} nodes, {args.blind:,} blind, {args.samples} samples between "
          f"regroups{', one node moved' if args.move else ''}; {args.rounds} rounds, "
          f"alternated; same JSON: {same}")
    print(f"{'':<6} {'median ms':>10} {'min ms':>8} {'max ms':>8}")
    for which, ms in times.items():
        print(f"{which:<6} {statistics.median(ms):>10.1f} {min(ms):>8.1f} {max(ms):>8.1f}")
    return 0


if __name__ == "__main__":
    main_guard(main)
