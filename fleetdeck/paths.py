"""Where fleetdeck keeps its own state on an operator's machine: ``$XDG_STATE_HOME/fleetdeck``
(``~/.local/state/fleetdeck``) — the audit log, the history store, console recordings and the
demo's per-run directories. One definition, so every front end agrees."""

import os
from pathlib import Path


def state_base() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(Path.home(), ".local", "state")
    return Path(base) / "fleetdeck"


def recordings_dir() -> Path:
    """Where the console's ``R`` writes recordings unless told otherwise (never the current
    directory: a console started from a repository would litter it)."""
    return state_base() / "recordings"
