"""Instructions the console's hot path spends per telemetry sample, counted by callgrind.

Timings on this shared 2-vCPU machine move by tens of percent with the neighbours' load; an
instruction count does not. This runs the real path without MQTT (payloads from
bench/_payloads.py, evolving like a fleet under jobs; ``Ingest.handle`` then
``ConsoleSession.tick`` until each round is applied, as bench/apply_cost.py does) under
``valgrind --tool=callgrind`` twice, for ``--rounds`` and for ``--base-rounds`` rounds, and
prints the difference per sample: set-up, imports and the first keyframes cancel out.

    .venv/bin/python bench/hot_path_ir.py                 # 1,024 nodes, rounds 12 - 4: ~2.5 min
    .venv/bin/python bench/hot_path_ir.py --nodes 256 --rounds 8 --base-rounds 4

Fails loudly when valgrind is missing, or when a round's samples were not all applied.
"""

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import BenchFailure, main_guard, require

CLUSTER = "bench"
EPOCH_MS = 1_767_225_600_000
BD_SEQ = EPOCH_MS - 60_000


def feed(nodes: int, rounds: int, personas: int) -> None:
    """The measured subject: ``rounds`` rounds of ``nodes`` samples through ingest and ticks."""
    from bench._payloads import EvolvingFleet
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.runtime import tune_gc

    fleet = EvolvingFleet(nodes, CLUSTER, BD_SEQ, personas=personas, wire=2)
    payloads = [[fleet.telemetry(i, k, EPOCH_MS + k * 1000) for i in range(nodes)]
                for k in range(rounds)]
    ingest = Ingest(CLUSTER)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=lambda: 0.0)
    tune_gc()  # as every console front end does
    t0 = EPOCH_MS / 1000
    for i in range(nodes):
        ingest.handle(*fleet.birth(i), t0 - 2)
        ingest.handle(*fleet.status(i, EPOCH_MS - 2000), t0 - 2)
    session.tick(t0 - 1)
    topics = fleet.topics
    for k, round_ in enumerate(payloads):
        rx = (EPOCH_MS + k * 1000) / 1000 + 0.05
        for i in range(nodes):
            ingest.handle(topics[i], round_[i], rx)
        applied = 0
        while True:
            applied += session.tick(rx + 0.2).messages
            if not session.backlog and not ingest._batch.messages:
                break
        require(applied == nodes, f"round {k}: {applied} of {nodes} samples applied")


def instructions(nodes: int, rounds: int, personas: int) -> int:
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
         __file__, "--subject", "--nodes", str(nodes), "--rounds", str(rounds),
         "--personas", str(personas)],
        capture_output=True, text=True, check=False)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise BenchFailure(f"the subject under callgrind failed (exit {out.returncode}): "
                           f"{out.stderr.strip().splitlines()[-1:] or ''}")
    return int(found.group(1))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--base-rounds", type=int, default=4)
    ap.add_argument("--personas", type=int, default=64)
    ap.add_argument("--subject", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.subject:
        feed(args.nodes, args.rounds, args.personas)
        return 0
    require(shutil.which("valgrind") is not None, "valgrind is not installed")
    require(args.rounds > args.base_rounds, "--rounds must be more than --base-rounds")
    t0 = time.monotonic()
    base = instructions(args.nodes, args.base_rounds, args.personas)
    full = instructions(args.nodes, args.rounds, args.personas)
    samples = args.nodes * (args.rounds - args.base_rounds)
    require(full > base, "the longer run spent no more instructions than the shorter one")
    print(f"hot path instructions (callgrind), {args.nodes:,} nodes, rounds "
          f"{args.rounds} - {args.base_rounds}, {time.monotonic() - t0:.0f} s")
    print(f"{'samples':>10}  {'instructions':>16}  {'per sample':>12}")
    print(f"{samples:>10,}  {full - base:>16,}  {(full - base) // samples:>12,}")
    return 0


if __name__ == "__main__":
    main_guard(main)
