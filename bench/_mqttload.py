"""A featherweight MQTT 3.1.1 QoS 0 load generator for benchmarks only.

It writes pre-built CONNECT/PUBLISH packets straight to a socket so that, on a 2-core machine,
the load generator costs little CPU and the figures measure the subscriber, not the publisher.
Production code never uses this: agents and console use aiomqtt.
"""

import socket
import struct
import time


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n % 128, n // 128
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _str(s: bytes) -> bytes:
    return struct.pack("!H", len(s)) + s


def connect_packet(client_id: str, keepalive: int = 60) -> bytes:
    body = _str(b"MQTT") + bytes([4, 0x02]) + struct.pack("!H", keepalive) + _str(
        client_id.encode())
    return b"\x10" + _varint(len(body)) + body


def publish_packet(topic: str, payload: bytes) -> bytes:
    body = _str(topic.encode()) + payload
    return b"\x30" + _varint(len(body)) + body


class RawPublisher:
    def __init__(self, host: str, port: int, client_id: str) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(connect_packet(client_id))
        ack = self.sock.recv(4)
        if len(ack) < 4 or ack[0] != 0x20 or ack[3] != 0:
            raise RuntimeError(f"broker refused the connection: {ack!r}")

    def send(self, packets: bytes) -> None:
        self.sock.sendall(packets)

    def close(self) -> None:
        self.sock.sendall(b"\xe0\x00")  # DISCONNECT
        self.sock.close()


def paced(total: int, rate: float, chunk: int):
    """Yield chunk sizes so that ``total`` items go out at ``rate`` per second."""
    start = time.perf_counter()
    sent = 0
    while sent < total:
        n = min(chunk, total - sent)
        due = start + sent / rate
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        yield n
        sent += n
