"""Which objects the GC tracks per node of a console's fleet state, and by which path.

A GC sweep (``fleetdeck/runtime.py`` ``sweep``) costs one pass over every tracked object
(bench/gc_sweep.py): this finds what they are. The fleet is applied as in
``tests/test_runtime.py``'s census (bench/_payloads.py, ``Ingest.handle``,
``ConsoleSession.tick``, three rounds of v2 telemetry); the objects the GC tracks after that,
less those it tracked before, are counted per node by type, and by the first path from the
session (``S``) or the ingest (``I``) that reaches each (node names as ``[*]``).

    .venv/bin/python bench/gc_census.py --nodes 2048
    .venv/bin/python bench/gc_census.py --nodes 16384 --live   # what a live sweep meets
"""

import argparse
import collections
import gc
import sys
import types
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._common import main_guard

if TYPE_CHECKING:
    from bench._live_fleet import LiveFleet
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession

EPOCH_MS = 1_767_225_600_000
_LEAVES = (type, types.ModuleType, types.FunctionType, str, int, float)


def _children(o: object) -> Iterator[tuple[str, object]]:
    """(label, referent) of ``o``: dict keys, items, fields and slots by name."""
    if isinstance(o, dict):
        for k, v in o.items():
            yield "<key>", k
            named = isinstance(k, str) and len(k) < 25 and not any(c.isdigit() for c in k)
            yield (f"[{k}]" if named else "[*]"), v
        return
    if isinstance(o, (list, tuple, set, frozenset, deque)):
        for c in o:
            yield "[*]", c
        return
    names = list(getattr(type(o), "__struct_fields__", ()))
    for cls in type(o).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        names += [slots] if isinstance(slots, str) else list(slots)
    d = getattr(o, "__dict__", None)
    if isinstance(d, dict):
        names += list(d)
    got = set()
    for a in names:
        try:
            v = getattr(o, a)
        except AttributeError:
            continue
        got.add(id(v))
        yield "." + a, v
    for c in gc.get_referents(o):
        if id(c) not in got:
            yield (".__dict__" if c is d else "?"), c


def fleet_state(n: int) -> tuple["ConsoleSession", "Ingest", list[object]]:
    """A session and its ingest after the births and three rounds of v2 telemetry of ``n``
    nodes, and the objects the GC tracks that it did not before (``tests/test_runtime.py``'s
    census holds their count a node)."""
    from bench._payloads import EvolvingFleet
    from fleetdeck.console.ingest import Ingest
    from fleetdeck.console.session import ConsoleSession

    fleet = EvolvingFleet(n, "t", EPOCH_MS - 60_000, personas=16)
    payloads = [[fleet.telemetry(i, k, EPOCH_MS + k * 1000) for i in range(n)] for k in range(3)]
    ingest = Ingest("t")
    session = ConsoleSession("t", ingest=ingest, follow_up=False, clock=lambda: 0.0)
    gc.collect()
    before = {id(o) for o in gc.get_objects()}
    for i in range(n):
        ingest.handle(*fleet.birth(i), EPOCH_MS / 1000 - 2)
        ingest.handle(*fleet.status(i, EPOCH_MS - 2000), EPOCH_MS / 1000 - 2)
    for k, round_ in enumerate(payloads):
        for i, p in enumerate(round_):
            ingest.handle(fleet.topics[i], p, EPOCH_MS / 1000 + k + 0.05)
        while session.tick(EPOCH_MS / 1000 + k + 0.2).messages:
            pass
    del round_, p, payloads
    gc.collect()
    gc.collect()  # a tuple is untracked once what it holds is
    return session, ingest, [o for o in gc.get_objects() if id(o) not in before]


def live_objects(n: int) -> tuple["LiveFleet", list[object]]:
    """A live console of ``n`` nodes and every object its next sweep meets: births, 3 rounds, a
    sweep, then a keyframe cycle of rounds each applied by a tick, as live; then what the GC
    tracks outside the start-up objects ``tune_gc`` froze for good (a sweep does not walk
    those)."""
    from bench._live_fleet import LiveFleet
    from bench._payloads import V2_CYCLE
    from fleetdeck import runtime

    live = LiveFleet(n, "t")
    live.apply(3)
    runtime.sweep()
    live.apply(V2_CYCLE)
    live.check()
    return live, gc.get_objects()


def live_census(n: int, top: int) -> int:
    """The tracked objects and their references a sweep follows in a live console: births, 3
    rounds, a sweep, then a keyframe cycle of rounds each applied by a tick, as live, then what
    the GC tracks outside the frozen start-up objects, counted (docs/performance.md, "The sweep
    walks the state alone")."""
    live, objs = live_objects(n)
    count: collections.Counter[str] = collections.Counter()
    refs: collections.Counter[str] = collections.Counter()
    for o in objs:
        t = type(o).__qualname__
        if type(o) is tuple and o:
            t += f"[{type(o[0]).__qualname__}]"
        count[t] += 1
        refs[t] += len(gc.get_referents(o))
    print(f"{n:,} nodes, live: {len(objs):,} tracked objects, "
          f"{sum(refs.values()):,} references a sweep follows")
    print(f"{'a node':>8} {'refs a node':>12}  type")
    for t, c in count.most_common(top):
        print(f"{c / n:8.2f} {refs[t] / n:12.1f}  {t}")
    _print_paths(by_path(live.session, live.ingest, objs), n, top)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2048)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--live", action="store_true",
                    help="what a live console's sweep meets instead: the frozen generation "
                         "after a sweep and one keyframe cycle of ticks (tune_gc), by type, "
                         "with the references a sweep follows")
    args = ap.parse_args()
    n = args.nodes
    if args.live:
        return live_census(n, args.top)
    session, ingest, objs = fleet_state(n)
    print(f"{n:,} nodes: {len(objs) / n:.2f} tracked objects a node")
    for t, c in collections.Counter(type(o).__qualname__ for o in objs).most_common(args.top):
        print(f"{c / n:8.3f}  {t}")
    _print_paths(by_path(session, ingest, objs), n, args.top)
    return 0


def by_path(session: "ConsoleSession", ingest: "Ingest",
            objs: list[object]) -> collections.Counter[tuple[str, str]]:
    """``objs`` counted by (the first path from the session (``S``) or the ingest (``I``)
    that reaches each, type)."""
    new = {id(o) for o in objs}
    paths: dict[int, str] = {}
    seen = {id(session), id(ingest)}
    todo: deque[tuple[object, str]] = deque([(session, "S"), (ingest, "I")])
    while todo:
        o, path = todo.popleft()
        for label, c in _children(o):
            if id(c) in seen or isinstance(c, _LEAVES):
                continue
            seen.add(id(c))
            if id(c) in new:
                paths[id(c)] = path + label
            todo.append((c, path + label))
    return collections.Counter((paths.get(id(o), "(not reached)"), type(o).__qualname__)
                               for o in objs)


def _print_paths(counts: collections.Counter[tuple[str, str]], n: int, top: int) -> None:
    print("by path (first reached):")
    for (path, t), c in counts.most_common(top):
        print(f"{c / n:8.3f}  {t:<14} {path}")


if __name__ == "__main__":
    main_guard(main)
