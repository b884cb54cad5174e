"""Where the event loop's stalls went: a summary of a ``FLEETDECK_BENCH_STALLS`` file.

``bench/ingest.py`` and ``bench/console_scale.py`` write, with that variable set, every stall
of the loop over 40 ms with the loop thread's stacks sampled every 2 ms and the CPU time of each
callback that ran in it (``bench/_console.py``, ``LoopProbe``). This prints, over all stalls,
the share of the stack samples in which each of the project's functions was running (itself
or below it), the innermost project frame of each sample (where the time went), the
longest stalls with their callbacks, and (files that keep every call) each callback's and
timed call's CPU over the whole probe, with the longest callbacks and what ran inside them
(timed calls, GC runs)::

    FLEETDECK_BENCH_STALLS=/tmp/stalls.json .venv/bin/python bench/console_scale.py
    .venv/bin/python bench/stall_report.py /tmp/stalls.json
"""

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

LOOP = "loop: "
"""bench/_console.py's prefix of an event-loop callback's name (not imported: this script
reads a stall file without Textual's import)."""


def _ours(frame: str, files: set[str]) -> bool:
    return frame.split(":", 1)[0] in files


def _calls(data: dict[str, Any], top: int) -> None:
    """Every timed call of the run (files written since the stall file kept them): per name,
    how often it took >= 2 ms of CPU and how long; then the longest event-loop callbacks with
    the timed calls and GC runs inside each (what one step of the loop was made of)."""
    calls = data.get("calls")
    if not calls:
        return
    by_name: dict[str, list[float]] = {}
    for _t, name, cpu, _wall in calls:
        by_name.setdefault(name, []).append(cpu)
    print("\ncalls of >= 2 ms of CPU over the whole probe: n, p50, p99, max, total (ms of CPU)")
    for name, v in sorted(by_name.items(), key=lambda kv: -max(kv[1]))[:top]:
        v.sort()
        print(f"{len(v):>5} {v[len(v) // 2]:>6.1f} {v[min(len(v) - 1, int(0.99 * len(v)))]:>6.1f}"
              f" {v[-1]:>6.1f} {sum(v):>8.1f}  {name}")
    loop = sorted((c for c in calls if c[1].startswith(LOOP)), key=lambda c: -c[2])
    gcs = data.get("gc_runs", [])
    print("\nlongest event-loop callbacks: CPU ms (wall ms) name; inside: calls' CPU ms, GC "
          "(generation, wall ms)")
    for t, name, cpu, wall in loop[:top]:
        inner = [f"{n} {c}" for t1, n, c, _w in calls
                 if not n.startswith(LOOP) and t <= t1 <= t + wall]
        inner += [f"gc{g} {d}" for t1, g, d in gcs if t <= t1 <= t + wall]
        print(f"{cpu:>6.1f} ({wall:>5.1f}) {name[len(LOOP):]}: {', '.join(inner)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    try:
        data = json.loads(args.file.read_text())
    except (OSError, ValueError) as err:
        print(f"stall_report: cannot read {args.file}: {err}", file=sys.stderr)
        return 2
    root = Path(__file__).resolve().parent.parent
    files = {p.name for d in ("console", "fleetdeck", "agents") for p in (root / d).rglob("*.py")}
    files.discard("__init__.py")
    stalls = data["stalls"]
    samples = [stack for st in stalls for stack in st["stacks"]]
    print(f"{len(stalls)} stalls over 40 ms, {len(samples)} stack samples; GC: {data['gc']}")
    if not samples:
        _calls(data, args.top)
        return 0
    inclusive: Counter[str] = Counter()
    innermost: Counter[str] = Counter()
    for stack in samples:
        mine = [f for f in stack if _ours(f, files)]
        for f in set(mine):
            inclusive[f] += 1
        innermost[mine[-1] if mine else f"(outside: {stack[-1] if stack else '?'})"] += 1
    n = len(samples)
    print(f"\n{'share':>6}  innermost project frame (where the samples were)")
    for f, c in innermost.most_common(args.top):
        print(f"{100 * c / n:>5.1f}%  {f}")
    print(f"\n{'share':>6}  project frame anywhere on the stack (itself or below)")
    for f, c in inclusive.most_common(args.top):
        print(f"{100 * c / n:>5.1f}%  {f}")
    print("\nlongest stalls: ms late, GC runs (generation, ms), callbacks' CPU ms")
    for st in sorted(stalls, key=lambda s: -s["late_ms"])[:10]:
        calls = ", ".join(f"{name} {ms}" for name, ms in st.get("callbacks_cpu_ms", []))
        print(f"{st['late_ms']:>5}  gc {st['gc']}  {calls}")
    _calls(data, args.top)
    slow = data.get("slow_keys", [])
    if slow:
        print("\nslow keys (>= 80 ms): key, ms; callbacks from 100 ms before the key: "
              "name CPU ms @ ms after the key")
    for k in sorted(slow, key=lambda k: -k["ms"])[:10]:
        calls = ", ".join(f"{name} {ms}@{at}" for name, ms, at in k["callbacks_cpu_ms"])
        print(f"{k['key']:>8} {k['ms']:>5}  {calls}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
