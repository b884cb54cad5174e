"""The console's GC tuning (fleetdeck/runtime.py): start-up objects frozen for good, young
collections small and frequent, the state collected only by the tick's periodic sweep; the
simulator's: fewer collections, CPython's own full ones. In child processes: the test process's
own GC is left alone."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from fleetdeck import runtime
    runtime.tune_gc(console=sys.argv[1] == "1")
    frozen = gc.get_freeze_count()
    full = gc.get_stats()[2]["collections"]
    keep = [[i] for i in range(30 * runtime.GEN0_THRESHOLD)]  # outlive many young collections
    in_gen2 = {id(o) for o in gc.get_objects(2)}
    print(json.dumps(dict(threshold=gc.get_threshold(), callbacks=len(gc.callbacks),
                          frozen_since=gc.get_freeze_count() - frozen, frozen=frozen,
                          kept_in_gen2=sum(id(x) in in_gen2 for x in keep),
                          full_collections=gc.get_stats()[2]["collections"] - full,
                          gen0=runtime.GEN0_THRESHOLD, gen1=runtime.GEN1_THRESHOLD,
                          never=runtime.NO_AUTOMATIC_FULL,
                          unfrozen=runtime.GEN0_THRESHOLD_UNFROZEN)))
""")


def tuned(console: bool) -> dict:
    res = subprocess.run([sys.executable, "-c", SCRIPT, "1" if console else "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_console_collects_young_objects_often_and_its_state_only_at_a_sweep():
    """Start-up objects (~20 ms of every full collection) are frozen for good; what the
    console keeps goes to gen 2 through small young collections, and no full collection of
    it runs on its own (they paused the console 223-465 ms at 2,048-4,096 nodes): the state
    was frozen at every tick before, so the periodic sweep had to unfreeze and walk the
    start-up objects too (docs/performance.md, "The sweep walks the state alone")."""
    out = tuned(True)
    assert out["threshold"] == [out["gen0"], out["gen1"], out["never"]], out
    assert out["gen0"] <= 10_000 < out["unfrozen"] and out["gen1"] <= 2
    assert out["callbacks"] == 0 and out["frozen"] > 10_000, out
    assert out["frozen_since"] == 0, out
    assert out["kept_in_gen2"] >= 25 * out["gen0"], out  # all but the last young batches
    assert out["full_collections"] == 0, out


def test_the_simulator_collects_less_and_freezes_nothing_after_start_up():
    out = tuned(False)
    assert out["threshold"][0] == out["unfrozen"]
    assert out["callbacks"] == 0 and out["frozen_since"] == 0


def test_a_forced_exit_runs_the_last_words_left_and_exits_with_its_code(tmp_path):
    """The watchdog's way out of an orderly exit that hangs: what asked for a last word (the
    demo stopping its broker and simulator) runs, what took it back does not, errors aside."""
    script = textwrap.dedent(f"""
        from pathlib import Path
        from fleetdeck import runtime
        runtime.on_forced_exit(lambda: Path({str(tmp_path / "said")!r}).write_text("bye"))
        runtime.on_forced_exit(lambda: 1 / 0)
        forget = runtime.on_forced_exit(lambda: Path({str(tmp_path / "taken")!r}).touch())
        forget()
        runtime.force_exit(7)
        print("not reached")
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 7 and "not reached" not in res.stdout, res.stderr
    assert (tmp_path / "said").read_text() == "bye"
    assert not (tmp_path / "taken").exists()


def test_a_cycle_that_outlived_the_young_collections_is_freed_by_the_next_sweep():
    """Textual makes a reference cycle at every layout; one alive through two young
    collections is in gen 2, which only the tick's periodic sweep collects (the console grew
    12-20 MB a minute while such cycles were kept for ever). The first sweeps, close together,
    freeze what they leave (the screen settled: ``SETTLING_S``); later ones freeze nothing,
    so what they walk is what changed since."""
    script = textwrap.dedent("""
        import gc, json, time, weakref
        from fleetdeck import runtime
        runtime.tune_gc()
        frozen = gc.get_freeze_count()
        class Node:
            pass
        settled = [[i] for i in range(1000)]  # the screen and state alive as it settles
        runtime.sweep_tick()     # the first tick arms the sweeps
        first_in = runtime.SWEEPS.due - time.monotonic()
        for _ in runtime.SETTLING_S:
            runtime.SWEEPS.due = time.monotonic() - 1
            runtime.sweep_tick()  # the settling sweeps: what each leaves is frozen
        settled_frozen = gc.get_freeze_count() - frozen
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, as Textual's add_widget closure makes
        alive = weakref.ref(a)
        gc.collect(1)            # it outlives the young collections: gen 2
        del a, b
        junk = [[] for _ in range(5 * runtime.GEN0_THRESHOLD)]
        del junk                 # young collections come and go
        gc.collect(1)
        kept = alive() is not None
        runtime.sweep_tick()     # not due yet
        swept_early = runtime.SWEEPS.sweeps
        runtime.SWEEPS.due = time.monotonic() - 1
        runtime.sweep_tick()     # due: gen 2 collected
        print(json.dumps(dict(kept=kept, freed=alive() is None, sweeps=runtime.SWEEPS.sweeps,
                              swept_early=swept_early, settled=settled_frozen,
                              first_in=first_in, settles=len(runtime.SETTLING_S),
                              refrozen=gc.get_freeze_count() - frozen - settled_frozen,
                              next_in=runtime.SWEEPS.due - time.monotonic())))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["kept"] and out["freed"], out
    assert out["first_in"] <= 2.5, out  # the screen starts settling at once
    assert out["swept_early"] == out["settles"] and out["sweeps"] == out["settles"] + 1, out
    assert out["settled"] >= 1000, out  # frozen by the settling sweeps
    assert out["refrozen"] == 0, out  # and never again: later cycles stay collectable
    assert out["next_in"] > 50  # SWEEP_EVERY_S, not at every tick


def test_under_an_event_loop_the_sweep_is_a_loop_step_of_its_own_after_what_is_due():
    """At the end of a tick the sweep made one event-loop step of both (53-57 ms at 16,384
    nodes under a feed, each alone under 40): under a running loop it runs later, after the
    timers already due, and once; a headless pass (no loop) sweeps at once as before."""
    script = textwrap.dedent("""
        import asyncio, json, time
        from fleetdeck import runtime
        runtime.tune_gc()
        runtime.sweep_tick()  # arms
        order = []
        async def main():
            loop = asyncio.get_running_loop()
            def mark(what):
                order.append(f"{what}, {runtime.SWEEPS.sweeps} sweeps")
            loop.call_later(0, mark, "timer due before the tick ended")
            time.sleep(0.01)  # the tick's work
            runtime.SWEEPS.due = time.monotonic() - 1
            runtime.sweep_tick()
            mark("tick ended")
            runtime.sweep_tick()  # the next tick, before the sweep ran: not twice
            loop.call_later(0, mark, "timer due after")
            await asyncio.sleep(0.05)
        asyncio.run(main())
        in_loop = runtime.SWEEPS.sweeps
        runtime.SWEEPS.due = time.monotonic() - 1
        runtime.sweep_tick()
        print(json.dumps(dict(order=order, in_loop=in_loop, headless=runtime.SWEEPS.sweeps,
                              next_in=runtime.SWEEPS.due - time.monotonic())))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["order"] == ["tick ended, 0 sweeps", "timer due before the tick ended, 0 sweeps",
                            "timer due after, 1 sweeps"], out
    assert out["in_loop"] == 1 and out["headless"] == 2, out
    assert 0 < out["next_in"] < 10, out  # the next settle (runtime.SETTLING_S), not never


def test_under_an_event_loop_the_young_objects_a_tick_left_are_collected_in_a_step_of_their_own():
    """CPython counts allocations less deallocations towards the gen-0 threshold, so a tick
    that replaces samples (an old object freed for each new one) left the young generation to
    grow to ~45,000 objects, collected at last inside a later tick or paint (20-56 ms at
    16,384 nodes). After each tick under a running loop the young generations are collected
    in a loop step of their own, after the timers already due, and once however many ticks
    ran before it; a headless pass (no loop) leaves them to CPython's thresholds."""
    script = textwrap.dedent("""
        import asyncio, gc, json, time
        from fleetdeck import runtime
        runtime.tune_gc()
        runtime.sweep_tick()  # arms the sweeps: the first is SETTLING_S away
        order, kept = [], []
        gc.callbacks.append(lambda phase, info: phase == "stop" and order.append(
            f"gen {info['generation']} collected"))
        async def main():
            loop = asyncio.get_running_loop()
            loop.call_later(0, order.append, "timer due before the tick ended")
            for _ in range(4000):  # what a tick keeps: new objects, the old ones freed
                kept.append([len(kept)])
                if len(kept) > 2000:
                    kept.pop(0)
            young = len(gc.get_objects(0))
            runtime.sweep_tick()
            runtime.sweep_tick()  # a second tick before the step ran: one collection
            order.append("ticks ended")
            await asyncio.sleep(0.05)
            return young, len(gc.get_objects(0))
        before, after = asyncio.run(main())
        headless = len(order)
        runtime.sweep_tick()
        print(json.dumps(dict(order=order, before=before, after=after,
                              headless=len(order) - headless)))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["order"][:3] == ["ticks ended", "timer due before the tick ended",
                                "gen 0 collected"], out
    assert out["order"].count("gen 0 collected") + out["order"].count("gen 1 collected") == 1, out
    assert out["before"] >= 2000 and out["after"] < 100, out
    assert out["headless"] == 0, out


LIVE_SCRIPT = textwrap.dedent("""
    import json, sys
    from bench.gc_census import by_path, live_objects
    n = int(sys.argv[1])
    live, objs = live_objects(n)
    reached = {p: c for (p, _t), c in by_path(live.session, live.ingest, objs).items()
               if p != "(not reached)"}
    print(json.dumps(dict(
        history=sum(c for p, c in reached.items() if ".history." in p) / n,
        state=sum(c for p, c in reached.items() if p.startswith("S.state.")) / n)))
""")


def test_a_live_sweep_meets_no_history_object_of_a_node_whose_counters_stood_still():
    """What a live sweep meets: the objects a keyframe cycle of ticks made and froze. Each
    port's and GPU's watched counters were a new tuple every sample, though they stood still:
    16 a node, frozen before any collection looked at them, ~half the references a sweep
    followed at 16,384 nodes. An equal tuple now keeps the one held (docs/performance.md,
    "Counters kept while they stand still")."""
    res = subprocess.run([sys.executable, "-c", LIVE_SCRIPT, "128"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["history"] < 1, out  # 16.2 before; only the counters that moved are new
    assert out["state"] < 16, out  # 30.7 before


STATE_SCRIPT = textwrap.dedent("""
    import json, sys
    from bench.gc_census import fleet_state
    n = int(sys.argv[1])
    session, _ingest, new = fleet_state(n)
    print(json.dumps(dict(per_node=len(new) / n, nodes=len(session.state.nodes))))
""")


def test_a_node_of_the_fleet_state_is_few_objects_for_the_gc():
    """The periodic full collection (``runtime.sweep``) walks every GC-tracked object: at
    16,384 nodes and ~106 tracked objects a node it stalled the console 1.1 s. Histories,
    held keyframes, topics and the undrained drain are nothing the GC tracks (~21 a node), and
    since the NodeState's containers, keys, history, ring, latest sample and birth lists
    neither: ~3.5 a node (the NodeState and its held keyframe's two column tuples), and since
    the NodeState is a ``gc=False`` Struct and a held keyframe's columns are in one too,
    ~0.4 (a port column of ``d`` dicts, on nodes whose counters moved): one more tracked
    object a node fails this (docs/performance.md, "Fewer objects for the GC to walk", "Four
    objects a node" and "Out of the collector's view")."""
    res = subprocess.run([sys.executable, "-c", STATE_SCRIPT, "256"], cwd=REPO,
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["nodes"] == 256
    assert out["per_node"] <= 1, out


LOOKED_SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from bench._live_fleet import LiveFleet
    from fleetdeck import runtime
    n = int(sys.argv[1])
    live = LiveFleet(n)
    live.apply(3)
    runtime.sweep()
    live.apply(40)
    gc.collect(1)  # the young collections everything passes before gen 2
    gen2 = {id(o) for o in gc.get_objects(2)}
    nodes = live.session.state.nodes.values()
    figures = sum(gc.is_tracked(s.metered) for s in nodes)
    print(json.dumps(dict(figures=figures / n, gen2=len(gen2) / n, frozen=gc.get_freeze_count())))
""")


def test_what_reaches_gen_2_left_the_gcs_view():
    """A sweep walks gen 2: what the ticks kept and the young collections passed on. Each
    node's (sample, figures) pair stayed tracked: a pair is looked at before the tuple it
    holds, so a collection untracked the figures and not the pair (15,424 pairs at 16,384
    nodes). The figures are now a field of their own (docs/performance.md, "What the look
    leaves"), and what gen 2 holds stays a few objects a node."""
    res = subprocess.run([sys.executable, "-c", LOOKED_SCRIPT, "64"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["figures"] == 0, out
    assert out["gen2"] < 8, out  # 1.4 at 64 nodes, the session's own objects included


def test_a_view_frozen_by_a_settle_and_removed_later_is_freed_by_an_unsettle():
    """What the settling sweeps freeze stays out of the sweeps' walk; a view among it removed
    later (another context) is cyclic garbage a frozen generation would keep for good with
    all it refers to, so the next sweep unfreezes everything first (``unsettle_later``; a
    review: a context switch kept every view and its caches)."""
    script = textwrap.dedent("""
        import gc, json, weakref
        from fleetdeck import runtime
        runtime.tune_gc()
        class Widget:
            pass
        a, b = Widget(), Widget()
        a.parent, b.child = b, a              # a widget tree: cycles
        a.cache = [[i] for i in range(1000)]  # and what the view caches
        before = gc.get_freeze_count()
        for _ in runtime.SETTLING_S:
            runtime.sweep()                   # the screen settles
        settled = gc.get_freeze_count() - before
        alive = weakref.ref(a)
        del a, b                              # the view removed
        runtime.sweep()
        kept = alive() is not None            # frozen: no periodic sweep sees it
        runtime.unsettle_later()              # the app asks, removing views
        runtime.sweep()
        print(json.dumps(dict(settled=settled, kept=kept, freed=alive() is None,
                              flag=runtime.SWEEPS.unsettle)))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["settled"] >= 1000, out
    assert out["kept"] and out["freed"], out
    assert out["flag"] is False, out
