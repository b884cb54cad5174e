"""A console user that may publish ``node/+/cmd`` but not read it back (an ACL whose ``console``
block lists the topics it reads one by one; docs/security.md): its test publish never comes
back, and the header said ``[R] broker drops commands`` while ``fleetdeck drain`` as the same
user drained the node (a 2026-12-07 drill). The header now says what the console knows (its
commands are unconfirmed), and a node's answer to one of its commands confirms them."""

from collections.abc import Iterator
from pathlib import Path

import pytest

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console import publish_probe
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.commands import Phase
from fleetdeck.console.tui.app import FleetdeckApp
from tests.conftest import spawn, stop_process
from tests.security.deploy import DEPLOY, needs_tools, secured_broker
from tests.tui.conftest import pilot_until
from tests.tui.test_views import text_of

READS = "".join(f"topic read fleetdeck/v1/+/{t}\n" for t in (
    "node/+/birth", "node/+/status", "node/+/telemetry", "node/+/event", "node/+/ack",
    "job/#", "sched/#", "digest/#", "collector/#", "ctl/#"))


def acl_without_reading_commands(work: Path) -> Path:
    shipped = (DEPLOY / "acl").read_text()
    block = "user console\ntopic read fleetdeck/v1/#\n"
    assert block in shipped
    acl = work / "acl"
    acl.write_text(shipped.replace(block, "user console\n" + READS, 1))
    return acl


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[object, dict[str, str], int, object]]:
    work = tmp_path_factory.mktemp("noread")
    with secured_broker(work, users=["console", "gpu0001"],
                        acl=acl_without_reading_commands(work)) as setup:
        broker, creds, _tls, _work = setup
        agent = spawn("agent", "--source", "sim", "--node-id", "gpu0001", "--cluster", "nr",
                      "--broker", f"mqtt://gpu0001:{creds['gpu0001']}@127.0.0.1:{broker.port}",
                      "--interval", "0.5", "--state-dir", str(work / "agent"),
                      log=work / "agent.log")
        try:
            yield setup
        finally:
            stop_process(agent)


@needs_tools
async def test_a_console_that_cannot_read_its_commands_back_says_them_unconfirmed(
        secured, monkeypatch):
    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", 1.0)
    broker, creds, _tls, _work = secured
    url = BrokerURL("127.0.0.1", broker.port, username="console", password=creds["console"])
    app = FleetdeckApp(cluster="nr", url=url, audit=MemoryAudit(), operator="alice")
    async with app.run_test(size=(160, 48)) as pilot:
        session = app.session
        await pilot_until(pilot, lambda: session.probe is not None and session.probe.dropped,
                          "the probe's test publish judged not come back", timeout=20)
        await pilot_until(pilot, lambda: "gpu0001" in session.state.nodes, "the agent",
                          timeout=20)
        app.tick()
        await pilot.pause()
        header = text_of(app).splitlines()[0]
        assert "[R?] commands unconfirmed" in header and "drops" not in header, header
        why = session.cannot_send_now()
        assert "cannot confirm" in why and "not read it back" in why, why
        drain = session.drain(["gpu0001"], "an ACL drill")
        await pilot_until(pilot, lambda: drain.phase is Phase.DONE,
                          "the drain done though the test publish never came back", timeout=20)
        app.tick()
        await pilot.pause()
        header = text_of(app).splitlines()[0]
        assert "[RW]" in header and "unconfirmed" not in header, header
        assert session.cannot_send_now() == ""
        assert any("the broker delivers this console's commands: gpu0001 answered one" in
                   line.text for line in session.log.lines())
        session.resume(["gpu0001"], "the drill's end")
        await pilot.pause(1.0)
