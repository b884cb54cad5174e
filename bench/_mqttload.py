"""A featherweight MQTT 3.1.1 QoS 0 load generator for benchmarks only.

It writes pre-built CONNECT/PUBLISH packets straight to a socket so that, on a 2-core machine,
the load generator costs little CPU and the figures measure the subscriber, not the publisher.
Production code never uses this: agents and console use aiomqtt.
"""

import contextlib
import socket
import struct
import threading
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


def publish_parts(topic_field: bytes, payload: bytes) -> tuple[bytes, bytes, bytes]:
    """A QoS 0 PUBLISH as (fixed header, topic, payload): ``topic_field`` is ``_str(topic)``."""
    return b"\x30" + _varint(len(topic_field) + len(payload)), topic_field, payload


def topic_field(topic: str) -> bytes:
    return _str(topic.encode())


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

    def send_parts(self, parts: list[bytes]) -> None:
        """Send many buffers with one system call and no copy in Python (at most 1,024)."""
        total = sum(map(len, parts))
        sent = self.sock.sendmsg(parts)
        if sent < total:  # a partial send: the rest the slow way
            self.sock.sendall(b"".join(parts)[sent:])

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


class RawCounter:
    """Counts the PUBLISH packets of one subscription on a thread, parsing only MQTT framing.

    A few µs a message, so a benchmark can check what actually went through the broker without
    a full client's cost on a 2-core machine. ``times`` holds each arrival (epoch seconds).
    """

    def __init__(self, host: str, port: int, client_id: str, topic_filter: str) -> None:
        self.sock = socket.create_connection((host, port))
        self.sock.sendall(connect_packet(client_id, keepalive=0))
        ack = self._recv_exact(4)
        if ack[0] != 0x20 or ack[3] != 0:
            raise RuntimeError(f"broker refused the connection: {ack!r}")
        body = struct.pack("!H", 1) + _str(topic_filter.encode()) + b"\x00"
        self.sock.sendall(b"\x82" + _varint(len(body)) + body)
        suback = self._recv_exact(5)
        if suback[0] != 0x90 or suback[4] == 0x80:
            raise RuntimeError(f"broker refused the subscription: {suback!r}")
        self.times: list[float] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _recv_exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise RuntimeError("broker closed the connection")
            out += chunk
        return out

    def _run(self) -> None:
        buf = bytearray()
        times = self.times
        while True:
            try:
                data = self.sock.recv(1 << 20)
            except OSError:
                return
            if not data:
                return
            now = time.time()
            buf += data
            pos, end = 0, len(buf)
            while end - pos >= 2:
                rem, mult, i = 0, 1, pos + 1
                while i < end and i < pos + 5:
                    byte = buf[i]
                    rem += (byte & 0x7F) * mult
                    mult *= 128
                    i += 1
                    if not byte & 0x80:
                        break
                else:
                    break  # length still incomplete
                if end - i < rem:
                    break
                if buf[pos] >> 4 == 3:
                    times.append(now)
                pos = i + rem
            del buf[:pos]

    def between(self, t0: float, t1: float) -> int:
        return sum(1 for t in list(self.times) if t0 <= t < t1)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.sendall(b"\xe0\x00")
        self.sock.close()
