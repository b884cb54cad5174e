"""A console logged in as a read-only broker user (the shipped ACL's ``viewer``) showed ``[RW]``
in its header and opened drain dialogs as any other, while Mosquitto dropped every command it
sent without a word (an SRE drill). It now tests what the broker does with a publish of its
own (console/publish_probe.py): the header reads ``[R?] commands unconfirmed``, the timeline
and a toast say why, and every command's dialog says it first. A ``console`` user's test comes
back, and its header stays ``[RW]``."""

import asyncio
import time
from collections.abc import Iterator

import pytest
from textual.widgets import Static

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console import publish_probe
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.publish_probe import PROBE_NODE, PublishProbe
from fleetdeck.console.tui.app import FleetdeckApp
from fleetdeck.console.tui.modals import DrainScreen
from fleetdeck.transport import TransportError
from tests.conftest import spawn, stop_process
from tests.security.deploy import needs_tools, secured_broker
from tests.tui.conftest import pilot_until
from tests.tui.test_views import text_of

WAIT_S = 1.0
"""The probe's wait in these tests (a loopback broker answers in milliseconds)."""


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[object, dict[str, str], int, object]]:
    """The shipped broker setup, one agent (gpu0001) on its loopback listener."""
    work = tmp_path_factory.mktemp("ro")
    with secured_broker(work, users=["console", "viewer", "gpu0001"]) as setup:
        broker, creds, _tls, _work = setup
        agent = spawn("agent", "--source", "sim", "--node-id", "gpu0001", "--cluster", "ro",
                      "--broker", f"mqtt://gpu0001:{creds['gpu0001']}@127.0.0.1:{broker.port}",
                      "--interval", "0.5", "--state-dir", str(work / "agent"),
                      log=work / "agent.log")
        try:
            yield setup
        finally:
            stop_process(agent)


def console_as(broker, creds: dict[str, str], user: str, **kw: object) -> FleetdeckApp:
    url = BrokerURL("127.0.0.1", broker.port, username=user, password=creds[user])
    return FleetdeckApp(cluster="ro", url=url, audit=MemoryAudit(), operator="alice", **kw)


@needs_tools
async def test_a_viewer_consoles_header_says_the_broker_drops_its_commands(secured, monkeypatch):
    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", WAIT_S)
    broker, creds, _tls, _work = secured
    app = console_as(broker, creds, "viewer")
    async with app.run_test(size=(160, 48)) as pilot:
        session = app.session
        assert session.probe is not None
        await pilot_until(pilot, lambda: session.probe is not None and session.probe.dropped,
                          "the probe to judge the viewer's publishes dropped")
        app.tick()
        await pilot.pause()
        header = text_of(app).splitlines()[0]
        assert "[R?] commands unconfirmed" in header and "[RW]" not in header, header
        why = session.cannot_send_now()
        assert "broker user 'viewer'" in why and "node/+/cmd" in why, why
        assert any("cannot confirm that the broker delivers its commands" in line.text
                   for line in session.log.lines())
        assert any("cannot confirm" in str(n.message) for n in app._notifications)
        # The drain dialog says it first, before anything is sent.
        await pilot_until(pilot, lambda: "gpu0001" in session.state.nodes, "the agent")
        app.request_drain(["gpu0001"])
        await pilot_until(pilot, lambda: isinstance(app.screen, DrainScreen)
                          and bool(app.screen.query("#radius")), "the dialog")
        radius = str(app.screen.query_one("#radius", Static).render())
        assert "cannot confirm that the broker delivers its commands" in radius, radius


@needs_tools
async def test_a_console_users_test_publish_comes_back_and_keeps_rw(secured, monkeypatch):
    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", WAIT_S)
    broker, creds, _tls, _work = secured
    app = console_as(broker, creds, "console")
    async with app.run_test(size=(160, 48)) as pilot:
        session = app.session
        assert session.probe is not None
        await pilot_until(pilot, lambda: session.probe is not None and session.probe.answered,
                          "the console user's test publish to come back")
        await pilot.pause(WAIT_S * 1.5)
        app.tick()
        await pilot.pause()
        assert not session.probe.dropped
        header = text_of(app).splitlines()[0]
        assert "[RW]" in header and "unconfirmed" not in header, header
        assert session.cannot_send_now() == ""
        # Its echo went to neither the views nor the node table.
        assert PROBE_NODE not in session.state.nodes


@needs_tools
async def test_a_read_only_console_sends_no_test_publish(secured):
    broker, creds, _tls, _work = secured
    app = console_as(broker, creds, "viewer", read_only=True)
    async with app.run_test(size=(160, 48)):
        assert app.session.probe is None
        assert app.session.feed is not None and app.session.feed.probe_topic is None


def test_the_probe_judges_once_per_connection_and_again_after_a_fix():
    probe = PublishProbe(user="viewer")
    assert probe.due(0.0, 0, "alice") is None  # never connected
    first = probe.due(0.0, 1, "alice")
    assert first is not None and PROBE_NODE.encode() in first
    assert probe.due(1.0, 1, "alice") is None  # one test per connection
    assert probe.judge(20.0, True) is None  # queued, not out yet: no clock runs
    probe.sent(first, 0.0)
    assert probe.judge(publish_probe.PROBE_WAIT_S - 0.1, True) is None
    assert probe.judge(publish_probe.PROBE_WAIT_S, False) is None  # not while cut off
    # Nor while the broker said nothing since the test (hung: the link is up a while yet).
    assert probe.judge(publish_probe.PROBE_WAIT_S, True, spoke_since=False) is None
    assert probe.judge(publish_probe.PROBE_WAIT_S, True) == "dropped"
    assert probe.dropped and "broker user 'viewer'" in probe.why()
    probe.heard(b"someone else's probe")
    assert probe.judge(20.0, True) is None and probe.dropped
    # While dropped it tests again now and then; an answer (an ACL fixed) clears it.
    assert probe.due(20.0, 1, "alice") is None
    again = probe.due(publish_probe.PROBE_AGAIN_S, 1, "alice")
    assert again is not None and again != first
    probe.sent(again, publish_probe.PROBE_AGAIN_S)
    probe.heard(again)
    assert probe.judge(publish_probe.PROBE_AGAIN_S + 0.5, True) == "delivered"
    assert not probe.dropped and probe.why() == ""
    # A new connection is tested anew.
    assert probe.due(100.0, 2, "alice") is not None


@needs_tools
async def test_a_viewer_consoles_header_claims_no_rw_while_its_test_is_out(secured, monkeypatch):
    """Its header read "[RW]" for the probe's whole wait: a right the broker had not shown it
    to have, and 10 s is long enough to open a drain dialog. It reads "[RW?]" until then."""
    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", 60.0)
    broker, creds, _tls, _work = secured
    app = console_as(broker, creds, "viewer")
    async with app.run_test(size=(160, 48)) as pilot:
        session = app.session
        assert session.probe is not None
        await pilot_until(pilot, lambda: session.probe is not None
                          and session.probe.sent_at is not None, "the test publish to go out")
        await pilot_until(pilot, lambda: "gpu0001" in session.state.nodes, "the agent")
        app.tick()
        await pilot.pause()
        header = text_of(app).splitlines()[0]
        assert "[RW?]" in header and "[RW]" not in header and "unconfirmed" not in header, header


def delayed_probe(session, monkeypatch, *, fail_first: bool = False, delay_s: float = 0.0):
    """The session's test publishes go out ``delay_s`` late (a pump behind a slow store write,
    a loaded broker's PUBACKs), or the first not at all (no PUBACK in time)."""
    feed = session.feed
    publish = feed.publish
    calls: list[float] = []

    async def slow(kind, subject, payload, qos=1, retain=False):
        if subject == PROBE_NODE:
            calls.append(time.monotonic())
            if fail_first and len(calls) == 1:
                raise TransportError("no PUBACK from the broker within 10 s")
            await asyncio.sleep(delay_s)
        await publish(kind, subject, payload, qos=qos, retain=retain)

    monkeypatch.setattr(feed, "publish", slow)
    return calls


@pytest.mark.parametrize("late", ["published late", "first publish failed"])
@needs_tools
async def test_a_test_publish_that_went_out_late_is_not_judged_dropped(secured, monkeypatch,
                                                                       late):
    """The probe's wait ran from when the tick queued its test publish: one that went out
    later than the wait (the pump busy, a loaded broker), or not at all (no PUBACK in time:
    never sent again on that connection), read "[R] broker drops commands" for a console user
    whose commands the broker delivers. The wait now runs from the publish's PUBACK."""
    monkeypatch.setattr(publish_probe, "PROBE_WAIT_S", WAIT_S)
    broker, creds, _tls, _work = secured
    app = console_as(broker, creds, "console")
    async with app.run_test(size=(160, 48)) as pilot:
        session = app.session
        assert session.probe is not None
        calls = delayed_probe(session, monkeypatch, fail_first=late != "published late",
                              delay_s=WAIT_S * 2.5 if late == "published late" else 0.0)
        dropped: list[bool] = []

        def answered() -> bool:
            dropped.append(session.probe is not None and session.probe.dropped)
            return session.probe is not None and session.probe.answered

        await pilot_until(pilot, answered, "the console user's test publish to come back",
                          timeout=WAIT_S * 10)
        assert calls, "the test publish went through the feed"
        await pilot.pause(WAIT_S * 1.5)
        app.tick()
        await pilot.pause()
        assert not any(dropped) and not session.probe.dropped
        assert not any("cannot confirm" in line.text for line in session.log.lines())
        header = text_of(app).splitlines()[0]
        assert "[RW]" in header and "unconfirmed" not in header, header
