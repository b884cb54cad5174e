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
