"""How far a headless replay is from its floor: the issue-12 target's ceiling on this host.

    python bench/replay_ceiling.py [--nodes 1024] [--seconds 10] [--reps 3] [--gz]

Builds two recordings as bench/replay.py does (``build``: 1 Hz, wire v2, jobs running), one
of ``--seconds`` and one of its first second only (every node's birth, status and first
keyframe), then times, in this one process, best of ``--reps`` CPU times each:

- ``read``: the reader's scan of every line (``RecordingReader.scan``);
- ``+ payload``: the payload taken out of each line (``RecordingReader.payload``);
- ``+ decode``: every message decoded and validated as Ingest does (telemetry by msgspec,
  births and statuses by their pydantic models): the floor of a replay that must refuse what
  a live console refuses, with nothing applied;
- ``replay``: ``replay_headless`` at the console's 0.5 s tick (the target's figure).

From the two recordings it splits the replay into its first second (births, statuses, the
first keyframes, the first judgement of every node) and the deltas after it, and prints two
bounds: the replay if applying a delta cost nothing beyond reading and decoding it, and the
floor of the whole file. docs/performance.md, "The ceiling of the headless replay", reads them.
"""

import argparse
import gc
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard, require
from bench.replay import build
from fleetdeck.console.recording import RecordingReader
from fleetdeck.console.replay import replay_headless
from fleetdeck.protocol import codec, fast, wire2
from fleetdeck.protocol.messages import Status
from fleetdeck.protocol.topics import Kind, parse_topic
from fleetdeck.runtime import tune_gc


def read(path: Path, stage: int) -> int:
    """Read ``path`` to ``stage`` (0 scan, 1 + payload, 2 + decode and validate)."""
    kinds: dict[str, Kind] = {}
    reader = RecordingReader(path)
    n = 0
    for msg in reader.scan():
        n += 1
        if stage == 0:
            continue
        payload = reader.payload(msg)
        require(payload is not None, f"{path.name}: a damaged line")
        if stage == 1 or payload is None:
            continue
        kind = kinds.get(msg.topic)
        if kind is None:
            kind = kinds[msg.topic] = parse_topic(msg.topic).kind
        if kind is Kind.TELEMETRY:
            wire2.decode_telemetry(payload)
        elif kind is Kind.BIRTH:
            codec.decode(fast.Birth, payload)  # pydantic validates, kept as the Struct
        elif kind is Kind.STATUS:
            codec.decode(Status, payload)
        else:
            # Counted but not decoded, it would lower the floor it is timed in.
            require(False, f"{path.name}: a {kind} message, which the floor does not decode")
    require(n, f"{path.name}: no message read")
    return n


def best(fn: Callable[[], object], reps: int) -> float:
    out = float("inf")
    for _ in range(reps):
        gc.collect()
        c0 = time.process_time()
        fn()
        out = min(out, time.process_time() - c0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1024)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--gz", action="store_true", help="gzip recordings (.jsonl.gz)")
    args = ap.parse_args()
    require(args.seconds >= 2, "--seconds: at least 2 (the first second is split off)")
    tune_gc()
    ext = ".jsonl.gz" if args.gz else ".jsonl"
    with tempfile.TemporaryDirectory() as tmp:
        whole, first = Path(tmp) / f"rec{ext}", Path(tmp) / f"first{ext}"
        build(whole, args.nodes, args.seconds)
        build(first, args.nodes, 1)
        msgs = {p: read(p, 0) for p in (whole, first)}
        t: dict[tuple[Path, str], float] = {}
        for p in (whole, first):  # alternating stages would not change a best-of figure
            for stage, name in ((0, "read"), (1, "+ payload"), (2, "+ decode")):
                t[p, name] = best(partial(read, p, stage), args.reps)
            t[p, "replay"] = best(partial(replay_headless, p), args.reps)
            rep = replay_headless(p)["replay"]
            # A replay that skipped or refused lines is timed on less than the floor is.
            # (A sample superseded unread within its tick is read as the replay reads it.)
            require(rep["decoded"] + rep["superseded"] == msgs[p] and not rep["skipped_lines"]
                    and not rep["problems"],
                    f"{p.name}: the replay read {rep['decoded']} + {rep['superseded']} "
                    f"superseded of {msgs[p]} msgs "
                    f"({rep['skipped_lines']} lines skipped, problems {rep['problems']})")
    rec_s = float(args.seconds)
    print(f"{args.nodes} nodes x {args.seconds} s, wire v2, {ext}, best of {args.reps} CPU "
          f"times; x real = {args.seconds} s / CPU s\n")
    print(f"{'stage':<12}{'whole CPU s':>13}{'x real':>9}{'first s CPU s':>15}"
          f"{'per later msg':>15}")
    later = msgs[whole] - msgs[first]
    require(later > 0, "no message after the first second: nothing to split")
    for name in ("read", "+ payload", "+ decode", "replay"):
        w, f = t[whole, name], t[first, name]
        print(f"{name:<12}{w:>13.3f}{rec_s / w:>9.1f}{f:>15.3f}"
              f"{1e6 * (w - f) / later:>13.1f} µs")
    replay_w, replay_f = t[whole, "replay"], t[first, "replay"]
    floor_later = t[whole, "+ decode"] - t[first, "+ decode"]
    bound = replay_f + floor_later
    print(f"\nfirst second: {msgs[first]} msgs, {replay_f:.3f} s of the replay's "
          f"{replay_w:.3f} s ({100 * replay_f / replay_w:.0f} %)")
    print(f"bound, a later message costing only its read and decode: {bound:.3f} s "
          f"= {rec_s / bound:.1f}x")
    print(f"bound, the whole file at its floor (read + decode, nothing applied): "
          f"{t[whole, '+ decode']:.3f} s = {rec_s / t[whole, '+ decode']:.1f}x")
    print(f"target 100x = {rec_s / 100:.3f} CPU s for {msgs[whole]} msgs "
          f"({1e6 * rec_s / 100 / msgs[whole]:.1f} µs a message, all in)")
    return 0


if __name__ == "__main__":
    main_guard(main)
