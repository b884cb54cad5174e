"""Process-wide tuning for long-running, allocation-heavy processes (console, collector, sim)."""

import gc


def tune_gc() -> None:
    """Make Python's cyclic GC cheaper for a process that holds a large, long-lived fleet state.

    Each validated telemetry sample allocates a few hundred objects, and with thousands of nodes'
    samples alive, the default thresholds (700/10/10) trigger full collections that rescan the
    whole state many times a second: measured in bench/ingest.py as 3-4x the cost of ingest
    itself. Our state holds no reference cycles worth collecting eagerly, so collect less often
    and move start-up objects (modules, models, schemas) out of the GC's view.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
