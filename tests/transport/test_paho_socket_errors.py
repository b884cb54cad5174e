"""paho says "failed to receive on socket: …" (a reset, an SSL alert) at ERROR on the "mqtt"
logger. Before the CONNACK the reason is the connect's error, said once by the caller; after
it, that line is the only one that says why a session was lost. A filter on the logger
dropped it in both cases, and the agent's journal said just "lost the connection"."""

import asyncio
import contextlib
import logging
import socket
import struct
import threading
import time

import aiomqtt
import pytest

from fleetdeck.brokerurl import make_client, parse_broker_url


class ResettingRelay:
    """A TCP relay in front of a real broker whose connections can be reset (an RST, as a
    firewall or a load balancer sends), after the session started or before its CONNACK."""

    def __init__(self, upstream: tuple[str, int], *, before_connack: bool = False) -> None:
        self.upstream, self.before_connack = upstream, before_connack
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.server.settimeout(0.2)
        self.port: int = self.server.getsockname()[1]
        self.stop = threading.Event()
        self.clients: list[socket.socket] = []
        self.socks: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client = self.server.accept()[0]
            except OSError:
                continue
            self.clients.append(client)
            if self.before_connack:
                client.recv(65536)  # the CONNECT, never forwarded
                self.reset()
                continue
            broker = socket.create_connection(self.upstream)
            self.socks += [client, broker]
            for src, dst in ((client, broker), (broker, client)):
                threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def reset(self) -> None:
        for client in self.clients:
            # Linger 0: close sends an RST, which paho reads as ECONNRESET.
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            # A relay thread blocked in recv holds the socket open past close(): woken first.
            with contextlib.suppress(OSError):
                client.shutdown(socket.SHUT_RD)
            client.close()
        self.clients.clear()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for s in self.socks:
            s.close()
        self.server.close()


def _socket_errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "mqtt" and r.levelno >= logging.ERROR and "on socket:" in r.getMessage()]


async def test_a_reset_mid_session_reaches_the_log_once(mosquitto, caplog):
    relay = ResettingRelay((mosquitto.url.host, mosquitto.url.port))
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
    relay = ResettingRelay((mosquitto.url.host, mosquitto.url.port), before_connack=True)
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
