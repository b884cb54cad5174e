"""Secret files readable by every local user get one warning that says what to chmod: an
agent.toml whose broker URL holds the node's password, and a command key (whoever reads it
signs drains every agent obeys). A warning, not a refusal: an agent that refused to start
would stop reporting its node."""

import logging

import pytest

from fleetdeck.protocol.signing import load_key
from tests.conftest import run_cli


@pytest.mark.parametrize(("mode", "warned"), [(0o644, True), (0o640, False)])
def test_an_agent_toml_with_a_password_open_to_all_is_warned_about(tmp_path, mode, warned):
    cfg = tmp_path / "agent.toml"
    cfg.write_text('broker = "mqtt://gpu0001:s3cret-pw@127.0.0.1:1883"\nnode_id = "gpu0001"\n')
    cfg.chmod(mode)
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 0, res.stderr
    assert ("holds the broker password and is readable by every user" in res.stderr) is warned
    if warned:
        assert "(mode 0644): chmod 0640" in res.stderr, res.stderr
    assert "s3cret-pw" not in res.stdout + res.stderr


def test_an_agent_toml_without_a_password_is_not_warned_about(tmp_path):
    cfg = tmp_path / "agent.toml"
    cfg.write_text('broker = "mqtt://127.0.0.1:1883"\nnode_id = "gpu0001"\n')
    cfg.chmod(0o644)
    res = run_cli("agent", "--config", str(cfg), "--check-config")
    assert res.returncode == 0 and "readable by every user" not in res.stderr, res.stderr


@pytest.mark.parametrize(("mode", "warned"), [(0o644, True), (0o600, False)])
def test_a_command_key_open_to_all_is_warned_about(tmp_path, caplog, mode, warned):
    key = tmp_path / "command.key"
    key.write_text("k" * 44)
    key.chmod(mode)
    with caplog.at_level(logging.WARNING, logger="fleetdeck.signing"):
        assert load_key(key) == b"k" * 44
    text = caplog.text
    assert ("anyone here can sign commands; chmod 0600" in text) is warned, text
    assert "k" * 44 not in text
