"""A console given a wrong password against the shipped Mosquitto setup (password file).

It retries every ~2 s (fine), but each attempt logged two gmqtt ERROR lines ("CONNACK 0x5 is
permanent, not reconnecting", "not reconnecting after a permanent CONNACK refusal") that showed
as a popup notice and filled console.log, and the header cut the reason to "refused the
credentials (code 5 (Connection Refused:…" (a drill). The operator now reads one plain, steady
sentence with the fix, and no library lines."""

import logging
from collections.abc import Iterator

import pytest

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.audit import MemoryAudit
from fleetdeck.console.tui.app import FleetdeckApp
from tests.security.deploy import needs_tools, secured_broker
from tests.tui.conftest import pilot_until
from tests.tui.test_views import text_of

pytestmark = needs_tools

FIX = ("refused the credentials (not authorised): check the user and password in the broker "
       "URL (--broker)")


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Iterator[tuple[object, dict[str, str], int, object]]:
    with secured_broker(tmp_path_factory.mktemp("pw"), users=["console"]) as setup:
        yield setup


async def test_a_wrong_password_is_one_steady_sentence_not_library_errors(secured, caplog):
    broker, _creds, _tls, _work = secured
    url = BrokerURL("127.0.0.1", broker.port, username="console", password="wrong")
    app = FleetdeckApp(cluster="pw", url=url, auto_tick=False, audit=MemoryAudit())
    caplog.set_level(logging.WARNING)
    async with app.run_test(size=(160, 48)) as pilot:
        feed = app.session.feed
        assert feed is not None

        def refused_twice() -> bool:
            app.tick()
            return sum("retrying in" in r.getMessage() for r in caplog.records) >= 2

        await pilot_until(pilot, refused_twice, "two refused attempts")
        app.tick()
        await pilot.pause()
        assert feed.conn.state == "disconnected"
        assert FIX in feed.conn.detail, feed.conn.detail
        text = text_of(app)
        assert f"Top problems unknown: the MQTT broker {FIX}; no node heard yet" in text, text
        header = text.splitlines()[0]
        assert "(not authorised)" in header and "code 5" not in header, header
        # Nothing from the library: not in the log, not as a notice.
        gmqtt = [r.getMessage() for r in caplog.records if r.name.startswith("gmqtt")]
        assert gmqtt == [], gmqtt
        notes = [str(n.message) for n in app._notifications]
        assert not any("gmqtt" in n or "CONNACK" in n for n in notes), notes


def test_other_gmqtt_errors_still_show():
    """Only the CONNACK refusal, which fleetdeck says itself, is dropped."""
    import fleetdeck.transport  # noqa: F401  (installs the filter)

    handler_log = logging.getLogger("gmqtt.mqtt.handler")
    refusal = handler_log.makeRecord("gmqtt.mqtt.handler", logging.ERROR, __file__, 1,
                                     "[MqttPackageHandler] CONNACK %s is permanent, not "
                                     "reconnecting", ("0x5",), None)
    other = handler_log.makeRecord("gmqtt.mqtt.handler", logging.ERROR, __file__, 1,
                                   "[MqttPackageHandler] reconnect failed: %s", ("boom",), None)
    assert not handler_log.filter(refusal)
    assert handler_log.filter(other)
