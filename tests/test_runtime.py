"""The console's GC tuning (fleetdeck/runtime.py): gen-0 collections small enough not to stall
the event loop, their survivors frozen at once; the simulator's: fewer collections, nothing
frozen after them. In child processes: the test process's own GC is left alone."""

import json
import subprocess
import sys
import textwrap

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import gc, json, sys
    from fleetdeck import runtime
    runtime.tune_gc(freeze_survivors=sys.argv[1] == "1")
    frozen = gc.get_freeze_count()
    keep = [[i] for i in range(3 * runtime.GEN0_THRESHOLD)]  # survivors of gen-0 collections
    print(json.dumps(dict(threshold=gc.get_threshold()[0], callbacks=len(gc.callbacks),
                          frozen_since=gc.get_freeze_count() - frozen,
                          gen0=runtime.GEN0_THRESHOLD, unfrozen=runtime.GEN0_THRESHOLD_UNFROZEN)))
""")


def tuned(freeze: bool) -> dict:
    res = subprocess.run([sys.executable, "-c", SCRIPT, "1" if freeze else "0"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def test_the_console_collects_often_and_freezes_what_survives():
    out = tuned(True)
    assert out["threshold"] == out["gen0"] <= 10_000 < out["unfrozen"]
    assert out["callbacks"] == 1
    # Lists kept across several gen-0 collections were frozen by them, not left in gen 1/2.
    assert out["frozen_since"] >= 2 * out["gen0"]


def test_the_simulator_collects_less_and_freezes_nothing_after_a_collection():
    out = tuned(False)
    assert out["threshold"] == out["unfrozen"]
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


def test_a_cycle_frozen_while_alive_is_freed_by_the_next_sweep():
    """Freezing kept every reference cycle alive at a freeze for ever (Textual makes one per
    layout: the console grew 12-20 MB a minute); the tick's periodic sweep frees them."""
    script = textwrap.dedent("""
        import gc, json, time, weakref
        from fleetdeck import runtime
        runtime.tune_gc()
        class Node:
            pass
        runtime.freeze_tick()    # the first tick arms the sweep
        runtime.SWEEPS.due = time.monotonic() - 1
        runtime.freeze_tick()    # due, but nothing grew: no full pass
        skipped = runtime.SWEEPS.skipped
        a, b = Node(), Node()
        a.other, b.other = b, a  # a cycle, as Textual's add_widget closure makes
        alive = weakref.ref(a)
        more = [[] for _ in range(runtime.SWEEP_GROWTH)]
        for x in more:
            x.append(x)  # more cycles: frozen garbage that grows as the console's did
        gc.freeze()
        del a, b, more, x
        gc.collect()
        kept = alive() is not None  # frozen: a full collection does not see it
        runtime.SWEEPS.due = time.monotonic() - 1
        runtime.LOOK_S = 0.1
        runtime.freeze_tick()    # due and grown: ticks look for LOOK_S
        time.sleep(0.15)
        runtime.freeze_tick()    # then unfreeze, collect, freeze
        print(json.dumps(dict(kept=kept, freed=alive() is None, sweeps=runtime.SWEEPS.sweeps,
                              skipped=skipped, next_in=runtime.SWEEPS.due - time.monotonic())))
    """)
    res = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["skipped"] == 1  # a state that does not grow costs no full pass
    assert out["kept"] and out["freed"] and out["sweeps"] == 1
    assert out["next_in"] > 50  # SWEEP_EVERY_S, not at every tick


LOOK_SCRIPT = textwrap.dedent("""
    import gc, json, time
    from fleetdeck import runtime
    runtime.tune_gc()
    runtime.LOOK_S = 0.3
    st = runtime.SWEEPS
    runtime.freeze_tick()  # arms the sweeps
    def made():
        return tuple(tuple(range(i, i + 8)) for i in range(64))  # a sample's columns
    quiet = made()
    runtime.freeze_tick()  # not due: frozen unlooked-at
    st.due, st.frozen_after = time.monotonic() - 1, -runtime.SWEEP_GROWTH  # due and grown
    looked = made()
    runtime.freeze_tick()  # due: this tick looks, the sweep waits
    swept_at_once = st.sweeps
    counts = dict(quiet=sum(map(gc.is_tracked, quiet)), looked=sum(map(gc.is_tracked, looked)))
    st.frozen_after = gc.get_freeze_count()  # the look lowered the count: no growth now
    runtime.freeze_tick()  # still looking: neither swept nor skipped
    swept_looking, skipped_looking = st.sweeps, st.skipped
    time.sleep(0.35)
    runtime.freeze_tick()  # LOOK_S later: the sweep
    print(json.dumps(dict(counts, swept_at_once=swept_at_once, swept_looking=swept_looking,
                          skipped_looking=skipped_looking, sweeps=st.sweeps,
                          looks=st.looks, looking=st.look_until)))
""")


def test_a_due_sweep_waits_for_ticks_that_look_at_what_they_made():
    """A tick freezes what it made before any collection looked at it, so every node's latest
    sample's columns were still tracked when the sweep came: ~1.7 million references at 16,384
    nodes. A due sweep now waits ``LOOK_S`` (a sample interval) of ticks that collect gen 0
    before they freeze (docs/performance.md, "Out of the collector's view")."""
    res = subprocess.run([sys.executable, "-c", LOOK_SCRIPT], cwd=REPO, capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["quiet"] == 64  # an ordinary tick: no collection, nothing untracked
    assert out["looked"] == 0, out
    assert out["swept_at_once"] == 0 and out["sweeps"] == 1, out
    # Growth is judged when the look starts: a look that untracks more than the ticks froze
    # must not turn the sweep into a skip (it did, every minute, on a quiet fleet).
    assert out["swept_looking"] == 0 and out["skipped_looking"] == 0, out
    assert out["looks"] == 2 and out["looking"] == 0, out  # the sweeping tick needs no look


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
    import gc, json, math, sys
    from bench._live_fleet import LiveFleet
    from fleetdeck import runtime
    n = int(sys.argv[1])
    live = LiveFleet(n)
    live.apply(3)
    runtime.sweep()
    live.apply(35)
    st = runtime.SWEEPS
    st.due, st.look_until = 0.0, math.inf  # the ticks before a due sweep look
    live.apply(2)
    nodes = live.session.state.nodes.values()
    figures = sum(gc.is_tracked(s.metered) for s in nodes)
    print(json.dumps(dict(figures=figures / n, looks=st.looks)))
""")


def test_what_the_ticks_looked_at_leaves_the_gcs_view():
    """The ticks before a due sweep collect what they made, so the sweep meets only what no
    collection could untrack. Each node's (sample, figures) pair stayed tracked: a pair is
    looked at before the tuple it holds, so one collection untracked the figures and not the
    pair, frozen so until the sweep (15,424 pairs at 16,384 nodes). The figures are now a
    field of their own (docs/performance.md, "What the look leaves")."""
    res = subprocess.run([sys.executable, "-c", LOOKED_SCRIPT, "64"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["looks"] >= 2, out
    assert out["figures"] == 0, out
