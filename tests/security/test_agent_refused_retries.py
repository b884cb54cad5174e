"""An agent whose password the broker no longer takes (a rotation that missed it): its journal
says the refusal and that it repeats, then nothing more until it changes or 5 minutes pass —
not the same sentence at every retry (a 2026-12-07 drill: 7 lines in 45 s, ~120 an hour)."""

import logging
import time

import pytest

from agents import agent as agent_mod
from fleetdeck.broker import free_port
from fleetdeck.retry_said import RETRY_REASONS_HELD, RetrySaid
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


def _bare_agent() -> agent_mod.NodeAgent:
    node = agent_mod.NodeAgent.__new__(agent_mod.NodeAgent)
    node.node_id = "gpu0001"
    node._retry_said = RetrySaid()
    return node


def test_the_refusal_is_said_again_after_5_minutes_with_the_tries_it_stands_for(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    monkeypatch.setattr(agent_mod.time, "monotonic", lambda: now[0])
    node = _bare_agent()
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


def test_two_reasons_in_turn_are_not_said_at_every_try(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A flapping link's "timed out" and "no route to host" in turn: each was new beside the
    one said last, and the journal had a line at every try, as before the limit."""
    now = [1000.0]
    monkeypatch.setattr(agent_mod.time, "monotonic", lambda: now[0])
    node = _bare_agent()
    caplog.set_level(logging.WARNING, logger=agent_mod.log.name)
    for k in range(20):  # 10 min at the back-off's cap
        node._say_retry("timed out" if k % 2 == 0 else "no route to host", 30.0)
        now[0] += 30.0
    said = [r.getMessage() for r in caplog.records]
    assert said[:4] == ["gpu0001: timed out; retrying in 30.0 s",
                        "gpu0001: no route to host; retrying in 30.0 s",
                        "gpu0001: timed out again; retrying in 30.0 s (said next in 5 min "
                        "unless it changes)",
                        "gpu0001: no route to host again; retrying in 30.0 s (said next in 5 "
                        "min unless it changes)"], said
    # Each again 5 min on, with the tries it stands for; nothing else in 10 minutes.
    assert said[4:] == ["gpu0001: still: timed out (5 more tries in 300 s); retrying in 30.0 s",
                        "gpu0001: still: no route to host (5 more tries in 300 s); retrying "
                        "in 30.0 s"], said


def test_a_reason_that_differs_each_time_holds_no_more_than_a_few(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_mod.time, "monotonic", lambda: 1000.0)
    node = _bare_agent()
    for k in range(100):
        node._say_retry(f"refused by 10.0.0.{k}", 30.0)
    assert len(node._retry_said) == RETRY_REASONS_HELD
