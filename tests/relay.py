"""A TCP relay in front of a real broker, for what a network between client and broker does:
a far-away site broker whose answers come late, a firewall or load balancer that resets."""

import contextlib
import socket
import struct
import threading
import time


class Relay:
    """Forwards each connection to ``upstream``. ``answer_delay_s``: the broker's first answer
    on each connection (its CONNACK) is held that long (a TLS site broker where a connect takes
    ~2 s). ``reset_before_connack``: each client's CONNECT is read, never forwarded, and the
    connection reset. ``reset()`` resets every client connection now (an RST, as a firewall
    sends)."""

    def __init__(self, upstream: tuple[str, int], *, answer_delay_s: float = 0.0,
                 reset_before_connack: bool = False, reset_first: int = 0) -> None:
        self.upstream = upstream
        self.answer_delay_s, self.reset_before_connack = answer_delay_s, reset_before_connack
        self.reset_first = reset_first
        """Connections reset before their CONNACK before the relay forwards any (a broker
        that drops a connect now and then, as the embedded amqtt does when connects overlap)."""
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen()
        self.server.settimeout(0.2)
        self.port: int = self.server.getsockname()[1]
        self.stop = threading.Event()
        self.clients: list[socket.socket] = []
        self.accepted: list[float] = []
        """When each client connection came (``time.monotonic()``)."""
        self.resetting: set[socket.socket] = set()
        self.socks: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay_first: bool) -> None:
        try:
            while not self.stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                if delay_first:
                    time.sleep(self.answer_delay_s)
                    delay_first = False
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                if s in self.resetting:
                    # Its shutdown would send a FIN ahead of reset()'s RST: paho then read a
                    # clean end, not ECONNRESET (a CI run under load).
                    continue
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                client = self.server.accept()[0]
            except OSError:
                continue
            self.clients.append(client)
            self.accepted.append(time.monotonic())
            if self.reset_before_connack or self.reset_first > 0:
                self.reset_first -= 1
                client.recv(65536)  # the CONNECT, never forwarded
                self.reset()
                continue
            broker = socket.create_connection(self.upstream)
            self.socks += [client, broker]
            slow = self.answer_delay_s > 0
            for src, dst, delay in ((client, broker, False), (broker, client, slow)):
                threading.Thread(target=self._pipe, args=(src, dst, delay), daemon=True).start()

    def reset(self) -> None:
        self.resetting.update(self.clients)
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
