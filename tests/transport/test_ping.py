"""The console's own ping (``MqttLink.ping``): a node's silence counts only up to the broker's
last word, and on a quiet broker the ping is what keeps that word current
(tests/tui/test_hung_broker.py). gmqtt has no public ping, so it reaches into its connection."""

import logging
from types import SimpleNamespace

from gmqtt.mqtt.connection import MQTTConnection

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.transport import MqttLink


def test_gmqtt_still_has_the_ping_the_link_sends():
    """An upgrade of gmqtt that renames it fails here, not as dead nodes read stale late."""
    assert callable(getattr(MQTTConnection, "_send_ping_request", None))


def test_a_gmqtt_without_it_is_said_once_not_silently_skipped(caplog):
    link = MqttLink(BrokerURL("127.0.0.1", 1), "t", [], lambda *a: None)
    link.client = SimpleNamespace(_connection=object())  # type: ignore[assignment]
    with caplog.at_level(logging.WARNING, logger="fleetdeck.transport"):
        link.ping()
        link.ping()
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "no ping to send" in said[0], said
    sent: list[int] = []
    link.client = SimpleNamespace(  # type: ignore[assignment]
        _connection=SimpleNamespace(_send_ping_request=lambda: sent.append(1)))
    link.ping()
    assert sent == [1]
