"""``python -m fleetdeck`` is the CLI (it said "'fleetdeck' is a package and cannot be directly
executed": a newcomer's run without the virtualenv's ``fleetdeck`` on PATH)."""

import subprocess
import sys

from tests.conftest import REPO


def test_python_m_fleetdeck_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "fleetdeck", "--version"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("fleetdeck ")
    bad = subprocess.run([sys.executable, "-m", "fleetdeck", "no-such-command"], cwd=REPO,
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and bad.stderr.startswith("fleetdeck: "), bad.stderr
