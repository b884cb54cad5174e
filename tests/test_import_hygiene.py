"""Layer boundaries, checked twice: ``lint-imports`` (the contracts in pyproject.toml) reads the
import graph; this test imports every module for real, in a fresh interpreter, and looks at what
got loaded. Nothing is listed by hand: every module under the package is walked."""

import json
import pkgutil
import subprocess
import sys

import fleetdeck

PROBE = (
    "import importlib, json, sys\n"
    "bad = {}\n"
    "for m in sys.argv[1:]:\n"
    "    before = set(sys.modules)\n"
    "    importlib.import_module(m)\n"
    "    ui = sorted(k for k in set(sys.modules) - before\n"
    "                if k.split('.')[0] in ('textual', 'rich'))\n"
    "    if ui: bad[m] = ui[:3]\n"
    "print(json.dumps(bad))\n"
)
UI_PACKAGES = ("fleetdeck.console.tui", "fleetdeck.console.cli", "fleetdeck.cli")
"""The only places allowed to load textual (tui) or rich (tui, cli front ends, the CLI)."""


def all_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(fleetdeck.__path__, "fleetdeck."))


def ui_loaded_by(modules: list[str]) -> dict[str, list[str]]:
    # One interpreter per module would take a minute; instead each module is imported after the
    # ones before it and charged with what *it* newly loaded — a module whose UI import another
    # already paid for is still caught by its own run below (only non-UI modules are probed).
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_the_walk_finds_every_layer():
    names = all_modules()
    for expected in ("fleetdeck.protocol.messages", "fleetdeck.agents.agent",
                     "fleetdeck.agents.sim.node", "fleetdeck.console.state",
                     "fleetdeck.console.tui.app"):
        assert expected in names, expected


def test_no_module_outside_the_ui_loads_textual_or_rich():
    domain = [m for m in all_modules() if not m.startswith(UI_PACKAGES)]
    assert len(domain) > 40
    # Nothing UI-side is imported first, so every first load of textual/rich is blamed on the
    # domain module that caused it.
    assert ui_loaded_by(domain) == {}


def test_the_agent_side_alone_loads_neither_the_console_nor_a_ui():
    agent = [m for m in all_modules() if m.startswith(("fleetdeck.agents", "fleetdeck.protocol"))]
    code = (
        "import importlib, json, sys\n"
        "for m in sys.argv[1:]: importlib.import_module(m)\n"
        "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in "
        "('textual', 'rich') or k.startswith('fleetdeck.console'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, *agent], capture_output=True, text=True,
                         check=True)
    assert json.loads(out.stdout) == []
