"""agents/sim/mqtt.py's QoS 0 PUBLISH, written straight to the transport, is byte for byte the
packet gmqtt builds for MQTT 3.1.1 (any remaining-length size, retain or not)."""

import pytest
from gmqtt import Message
from gmqtt.mqtt.constants import MQTTv311
from gmqtt.mqtt.package import PublishPacket

from fleetdeck.agents.sim.mqtt import _Client, topic_head


class Transport:
    def __init__(self) -> None:
        self.out: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.out.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closing


class Conn:
    def __init__(self) -> None:
        self._transport = Transport()
        self._last_data_out = 0.0


class Proto:
    proto_ver = MQTTv311


@pytest.mark.parametrize("size", [0, 1, 100, 125, 126, 127, 1_000, 16_300, 16_400, 300_000])
@pytest.mark.parametrize("retain", [False, True])
def test_qos0_packet_is_gmqtts(size: int, retain: bool):
    topic = "fleetdeck/v1/c/node/gpu0001/telemetry"
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    client = _Client("x")
    client._connection = Conn()
    client.publish_qos0(topic_head(topic), payload, retain)
    _, want = PublishPacket.build_package(Message(topic, payload, qos=0, retain=retain), Proto())
    assert client._connection._transport.out == [bytes(want)]
    assert client._connection._last_data_out > 0  # gmqtt's keepalive sees the traffic


def test_qos0_on_a_closed_transport_raises():
    import aiomqtt

    client = _Client("x")
    client._connection = Conn()
    client._connection._transport.closing = True
    with pytest.raises(aiomqtt.MqttError):
        client.publish_qos0(topic_head("t"), b"x", False)
