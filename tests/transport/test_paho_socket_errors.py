"""paho says "failed to receive on socket: …" (a reset, an SSL alert) at ERROR on the "mqtt"
logger. Before the CONNACK the reason is the connect's error, said once by the caller; after
it, that line is the only one that says why a session was lost. A filter on the logger
dropped it in both cases, and the agent's journal said just "lost the connection"."""

import asyncio
import logging
import time

import aiomqtt
import pytest

from fleetdeck.brokerurl import make_client, parse_broker_url
from tests.relay import Relay


def _socket_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "mqtt" and r.levelno >= logging.ERROR and "on socket:" in r.getMessage()]


async def test_a_reset_mid_session_reaches_the_log_once(mosquitto, caplog):
    relay = Relay((mosquitto.url.host, mosquitto.url.port))
    url = parse_broker_url(f"mqtt://127.0.0.1:{relay.port}")
    try:
        with caplog.at_level(logging.ERROR, logger="mqtt"), pytest.raises(aiomqtt.MqttError):
            async with make_client(url, "reset-mid-session", timeout=5) as client:
                await client.subscribe("fleetdeck/v1/#")
                relay.reset()
                async with asyncio.timeout(10):
                    async for _ in client.messages:
                        pass
    finally:
        relay.close()
    errors = _socket_errors(caplog)
    assert len(errors) == 1 and "reset" in errors[0].lower(), caplog.text


async def test_a_reset_before_the_connack_is_the_connects_error_not_a_log_line(
        mosquitto, caplog):
    relay = Relay((mosquitto.url.host, mosquitto.url.port), reset_before_connack=True)
    url = parse_broker_url(f"mqtt://127.0.0.1:{relay.port}")
    t0 = time.monotonic()
    try:
        with (caplog.at_level(logging.ERROR, logger="mqtt"),
              pytest.raises(aiomqtt.MqttError) as err):
            async with make_client(url, "reset-before-connack", timeout=5):
                pass
    finally:
        relay.close()
    assert "reset" in str(err.value).lower(), err.value
    assert time.monotonic() - t0 < 4  # at once, not after the connect's time-out
    assert _socket_errors(caplog) == [], caplog.text
