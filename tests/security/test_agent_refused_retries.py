"""An agent whose password the broker no longer takes (a rotation that missed it): its journal
says the refusal and that it repeats, then nothing more until it changes or 5 minutes pass —
not the same sentence at every retry (a 2026-12-07 drill: 7 lines in 45 s, ~120 an hour)."""

import logging
import time

import pytest

from agents import agent as agent_mod
from fleetdeck.broker import free_port
from tests.conftest import spawn, stop_process
from tests.security.deploy import needs_tools, secured_broker
from tests.test_agent_reconnect import CLUSTER, NODE

pytestmark = needs_tools

REFUSED = "refused the credentials (not authorised)"


def test_a_refused_agent_says_so_twice_not_at_every_retry(tmp_path):
    (tmp_path / "b").mkdir()
    with secured_broker(tmp_path / "b", users=["console", NODE],
                        tls_port=free_port()) as (broker, _creds, _tls, _work):
        log = tmp_path / "agent.log"
        proc = spawn("agent", "--source", "sim", "--node-id", NODE, "--cluster", CLUSTER,
                     "--broker", f"mqtt://{NODE}:revoked@127.0.0.1:{broker.port}",
                     "--interval", "0.5", "--state-dir", str(tmp_path / "state"), log=log)
        try:
            # The back-off's first tries come 0.5-16 s apart: five or more within 20 s.
            time.sleep(20.0)
        finally:
            stop_process(proc)
    lines = [line for line in log.read_text().splitlines() if REFUSED in line]
    assert len(lines) == 2, log.read_text()
    assert "again; retrying in" in lines[1] and "said next in 5 min" in lines[1], lines
    assert "revoked" not in log.read_text()


def test_the_refusal_is_said_again_after_5_minutes_with_the_tries_it_stands_for(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    monkeypatch.setattr(agent_mod.time, "monotonic", lambda: now[0])
    node = agent_mod.NodeAgent.__new__(agent_mod.NodeAgent)
    node.node_id = "gpu0001"
    node._retry_said = None
    node._retries_unsaid = -1
    caplog.set_level(logging.WARNING, logger=agent_mod.log.name)
    for _ in range(12):  # a try every 30 s, the back-off's cap
        node._say_retry("refused", 30.0)
        now[0] += 30.0
    said = [r.getMessage() for r in caplog.records]
    assert said == ["gpu0001: refused; retrying in 30.0 s",
                    "gpu0001: refused again; retrying in 30.0 s (said next in 5 min unless it "
                    "changes)",
                    "gpu0001: still: refused (10 more tries in 300 s); retrying in 30.0 s"], said
    node._say_retry("connection refused", 1.0)  # another reason: said at once
    assert caplog.records[-1].getMessage() == "gpu0001: connection refused; retrying in 1.0 s"
