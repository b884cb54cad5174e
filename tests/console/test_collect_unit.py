"""agents/systemd/fleetdeck-collect.service: docs/recording.md said "run it under systemd" of
``fleetdeck collect`` and shipped no unit (a fresh-clone walk-through). Its ``ExecStart``, with
the ``collect.env`` docs/recording.md writes, goes through the real command line here, and the
store it opens lies inside the one directory the sandbox lets it write."""

import configparser
import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.security.deploy import DEPLOY, needs_tools

UNIT = REPO / "agents" / "systemd" / "fleetdeck-collect.service"
AGENT_UNIT = REPO / "agents" / "systemd" / "fleetdeck-agent.service"
SYSTEM_STATE = "/var/lib"
"""What systemd's ``%S`` is for a system unit (systemd.unit(5), "Specifiers")."""


def unit(path: Path) -> configparser.ConfigParser:
    # strict=False: SystemCallFilter= is given twice, which systemd adds up.
    parsed = configparser.ConfigParser(strict=False, interpolation=None,
                                       comment_prefixes=("#", ";"))
    parsed.optionxform = str  # type: ignore[assignment,method-assign]
    parsed.read_string(path.read_text())
    return parsed


def documented_env(tmp_path: Path) -> dict[str, str]:
    """docs/recording.md's collect.env, read by a shell as systemd's EnvironmentFile= reads
    its quoted values; the CA file a real one (the broker URL checks it holds a certificate,
    tests/security/test_tls_file_contents.py)."""
    doc = (REPO / "docs" / "recording.md").read_text()
    env = re.search(r"tee /etc/fleetdeck/collect\.env >/dev/null <<EOF\n(.*?)\nEOF\n", doc,
                    re.DOTALL)
    assert env, "docs/recording.md no longer writes /etc/fleetdeck/collect.env"
    subprocess.run(["bash", str(DEPLOY / "mkcerts.sh"), str(tmp_path / "pki"), "broker"],
                   check=True, capture_output=True, timeout=60)
    ca = tmp_path / "pki" / "ca.crt"
    text = env.group(1).replace("$pass", "pw").replace("/etc/fleetdeck/ca.crt", str(ca))
    (tmp_path / "collect.env").write_text(text + "\n")
    res = subprocess.run(
        ["sh", "-c", 'set -a; . "$1"; set +a; exec python3 -c "import json, os; '
         'print(json.dumps(dict(os.environ)))"', "sh", str(tmp_path / "collect.env")],
        capture_output=True, text=True, timeout=30, check=True, env={"PATH": "/usr/bin:/bin"})
    shown = json.loads(res.stdout)
    return {k: v for k, v in shown.items() if k.startswith("FLEETDECK_")}


def test_the_collector_unit_keeps_the_agents_pattern():
    svc = unit(UNIT)["Service"]
    agent = unit(AGENT_UNIT)["Service"]
    assert svc["EnvironmentFile"] == "-/etc/fleetdeck/collect.env"
    assert (svc["User"], svc["Group"]) == ("fleetdeck", "fleetdeck")
    assert svc["Restart"] == "on-failure" and svc["StateDirectory"] == "fleetdeck"
    # collect sends no sd_notify: Type=notify would have systemd kill it at start-up.
    assert svc["Type"] == "exec"
    # The agent's sandbox, less what only the agent needs: GPU devices, the journal, and its
    # UMask (the collector's store is the operators' to read), and the agent's reload (its
    # SIGHUP reads agent.toml again; the collector's is an orderly stop the unit restarts).
    own = {"Type", "NotifyAccess", "WatchdogSec", "TimeoutStopSec", "EnvironmentFile",
           "ExecStart", "StateDirectory", "SupplementaryGroups", "ReadOnlyPaths",
           "PrivateDevices", "DevicePolicy", "DeviceAllow", "UMask", "ExecReload"}
    for key, value in agent.items():
        if key not in own:
            assert svc.get(key) == value, key
    assert svc["PrivateDevices"] == "yes" and svc["ProtectSystem"] == "strict"
    assert "ExecReload" not in svc
    assert unit(UNIT)["Install"]["WantedBy"] == "multi-user.target"


@needs_tools
@pytest.mark.parametrize("extra, store", [([], "ndv5-east.db"),
                                          (["--shard", "2/3"], "ndv5-east-shard-2.db")])
def test_the_units_exec_start_runs_collect_on_a_store_in_its_state_directory(
        tmp_path, monkeypatch, capsys, extra, store):
    from fleetdeck.cli import main
    from fleetdeck.console.cli import collect

    svc = unit(UNIT)["Service"]
    env = documented_env(tmp_path)
    for key in [k for k in os.environ if k.startswith("FLEETDECK_")]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (setting,) = [v for v in (svc["Environment"],) if v.startswith("XDG_STATE_HOME=")]
    monkeypatch.setenv("XDG_STATE_HOME", setting.split("=", 1)[1].replace("%S", SYSTEM_STATE))
    # systemd splits an unbraced $VAR at whitespace (systemd.service(5), "Command lines").
    words = shlex.split(svc["ExecStart"])
    assert words[0] == "/opt/fleetdeck/venv/bin/fleetdeck"
    argv = [w for word in words[1:]
            for w in (env[word[1:]].split() if word.startswith("$") else [word])]
    calls: list[tuple] = []
    monkeypatch.setattr(collect, "run_collect", lambda *a, **kw: calls.append((a, kw)) or 0)
    assert main(argv + extra) == 0
    # Not "$FLEETDECK_COLLECT_ARGS is not a fleetdeck setting; it is ignored." at every start.
    assert capsys.readouterr().err == ""
    ((url, cluster, db, retention), kw), = calls
    assert (cluster, retention, kw["metrics"]) == ("ndv5-east", 14.0, ":9108")
    assert (url.host, url.port, url.username, url.ca_file) == (
        "mqtt.example.internal", 8883, "collector", str(tmp_path / "pki" / "ca.crt"))
    # The only place ProtectSystem=strict leaves it to write.
    assert db == Path(SYSTEM_STATE) / svc["StateDirectory"] / store
