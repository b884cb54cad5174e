"""Agents must never load the TUI stack; console domain modules must not import textual."""

import json
import subprocess
import sys

import pytest

PROBE = (
    "import importlib, json, sys\n"
    "for m in sys.argv[1:]: importlib.import_module(m)\n"
    "print(json.dumps(sorted(k for k in sys.modules if k.split('.')[0] in "
    "('textual', 'rich'))))\n"
)

AGENT_MODULES = ["agents.agent", "agents.run", "agents.fleet", "agents.sim.node",
                 "agents.source", "fleetdeck.protocol", "fleetdeck.cli"]
CONSOLE_DOMAIN = ["console.ingest", "console.state", "console.health", "console.live",
                  "console.summary", "console.rows"]


def loaded(modules: list[str]) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE, *modules], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout)


def test_agent_side_loads_neither_textual_nor_rich():
    assert loaded(AGENT_MODULES) == []


@pytest.mark.parametrize("module", CONSOLE_DOMAIN)
def test_console_domain_does_not_import_textual(module):
    assert not [m for m in loaded([module]) if m.startswith("textual")]


def test_every_agents_module_is_clean():
    import pkgutil

    import agents

    names = [m.name for m in pkgutil.walk_packages(agents.__path__, "agents.")]
    assert names, "no agent modules found"
    assert loaded(names) == []
