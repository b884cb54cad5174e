"""The ``FLEETDECK_*`` environment variables fleetdeck reads, and a warning for the others.

A mistyped name (``FLEETDECK_BROKR``) was ignored without a word: the command went to the
default broker, and the operator read "no node heard" as an empty cluster. Every command now
names such a variable once on stderr, with the name it most likely meant, and goes on.
"""

import difflib
from collections.abc import Mapping

PREFIX = "FLEETDECK_"

AGENT_SETTINGS = frozenset({
    "BROKER", "CLUSTER", "NODE_ID", "SOURCE", "INTERVAL_S", "KEEPALIVE", "SYSFS_ROOT",
    "KERNEL_LOG", "STATE_DIR", "SEED", "COMMAND_KEY_FILE", "CA", "CERT", "KEY", "EXPECT_GPUS",
    "EXPECT_IB_PORTS", "EXPECT_IB_RATE", "RACK", "LEAF", "SPINE_GROUP", "WIRE",
})
"""The agent's settings (agents/config.py reads ``FLEETDECK_<field>``; a test keeps the two
alike)."""

OTHERS = frozenset({
    "AGENT_ARGS",        # the systemd unit's extra agent flags (agents/systemd)
    "COLLECT_ARGS",      # the collector's unit's extra flags (agents/systemd)
    "PROGRESS_DELAY",    # console/cli/progress.py
    "BENCH_STALLS",      # bench/
    "UPDATE_SNAPSHOTS",  # tests/tui: rewrite the screen snapshots
})

KNOWN = frozenset(PREFIX + name for name in AGENT_SETTINGS | OTHERS)


def unknown_variables(environ: Mapping[str, str]) -> list[str]:
    """One sentence for each ``FLEETDECK_*`` variable fleetdeck does not read, in name order."""
    said = []
    for name in sorted(n for n in environ if n.startswith(PREFIX) and n not in KNOWN):
        # Matched without the prefix, which every name shares and which made FOO look like LEAF.
        near = difflib.get_close_matches(name.removeprefix(PREFIX), sorted(AGENT_SETTINGS | OTHERS),
                                         n=1, cutoff=0.75)
        meant = f" (did you mean {PREFIX}{near[0]}?)" if near else ""
        said.append(f"${name} is not a fleetdeck setting{meant}; it is ignored.")
    return said
