"""The console's domain modules never import textual or rich (the TUI is one consumer)."""

import subprocess
import sys

from tests.conftest import REPO

DOMAIN = ["console.commands", "console.audit", "console.rows", "console.recent",
          "console.cli_commands", "fleetdeck.hostlist"]


def test_domain_modules_do_not_import_textual():
    code = (f"import sys; import {', '.join(DOMAIN)}; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('textual',)); "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                         check=True)
    assert out.stdout.strip() == ""
