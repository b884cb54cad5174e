"""A broker that accepts the connection (CONNACK) and never answers the SUBSCRIBE: the embedded
amqtt broker does that when another client's CONNECT overlaps the SUBSCRIBE (its connect race).
`status` said "no answer (CONNACK) within 5 s" and a drain "cannot connect", sending the
operator to a broker that was up; they now say which step went unanswered.

A real amqtt broker, in this process, with a topic plugin that holds every SUBSCRIBE: the race
made deterministic."""

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.plugins.base import BaseTopicPlugin

from fleetdeck.broker import free_port
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.embedded_broker import amqtt_config
from fleetdeck.errors import UserError
from fleetdeck.transport import MqttLink, TransportError


class UnansweredSubscribe(BaseTopicPlugin):
    """Holds each SUBSCRIBE for ever (amqtt sends its SUBACK only after this answers)."""

    async def topic_filtering(self, *, session: Any = None, topic: str | None = None,
                              action: Action | None = None) -> bool | None:
        if action == Action.SUBSCRIBE:
            await asyncio.Event().wait()
        return True


@pytest.fixture
async def silent_suback() -> AsyncIterator[BrokerURL]:
    port = free_port()
    config = amqtt_config("127.0.0.1", port)
    config["plugins"][f"{__name__}.UnansweredSubscribe"] = {}
    broker = Broker(config)
    await broker.start()
    try:
        yield BrokerURL("127.0.0.1", port)
    finally:
        await broker.shutdown()


async def test_the_link_says_the_subscription_went_unanswered(silent_suback):
    link = MqttLink(silent_suback, "fd-test-suback", ["fleetdeck/v1/x/#"], lambda *a: None,
                    connect_timeout_s=1.0)
    with pytest.raises(TransportError):
        await link.run(asyncio.Event(), retry=False)
    assert link.conn.connacks == 1 and link.conn.connects == 0
    assert link.first_error == (
        f"connected to the MQTT broker at {silent_suback}, but the broker did not confirm the "
        "subscription (no SUBACK) within 1 s (a hung or overloaded broker? try again).")


async def test_status_says_connected_but_no_suback(silent_suback):
    from fleetdeck.console.cli.status import collect

    with pytest.raises(UserError) as err:
        await collect(silent_suback, "x", 1.0)
    text = str(err.value)
    assert "CONNACK" not in text, text
    assert text == (f"cannot get a status from {silent_suback}: connected, but the broker did "
                    "not confirm the subscription (no SUBACK) within 1 s (a hung or overloaded "
                    "broker? try again).")
