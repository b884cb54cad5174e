"""``python -m fleetdeck …`` runs the CLI, as ``.venv/bin/fleetdeck …`` does.

``python -m fleetdeck`` is the first thing many try where the entry point is not on PATH (a
``make demo`` virtualenv not activated); it said "'fleetdeck' is a package and cannot be
directly executed" (a newcomer's run).
"""

import sys

from fleetdeck.cli import main

if __name__ == "__main__":
    sys.exit(main())
