"""The embedded amqtt broker: the zero-install fallback for the demo, loopback only.

amqtt 0.12 has known defects (see docs/architecture.md, "Brokers"): it leaks retained messages to
clients that did not subscribe, a burst of concurrent connects can hang clients, and it never
enforces keepalive. fleetdeck copes with all three (topic filtering in ingest, serialised agent
connects, staleness by telemetry age), but this broker is for demos, never production.
"""

import asyncio
import errno
import ipaddress
import logging
import signal
import sys
from typing import Any

from fleetdeck.broker import busy_port_error, free_port, port_in_use
from fleetdeck.brokerurl import BrokerURL
from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def amqtt_config(bind: str, port: int) -> dict[str, Any]:
    return {
        "listeners": {
            "default": {"type": "tcp", "bind": f"{bind}:{port}", "max_connections": 10000}
        },
        # A plugins dict replaces amqtt's defaults (event/packet loggers, $SYS); anonymous is
        # acceptable only because the listener is loopback-only (enforced in run_embedded).
        "plugins": {"amqtt.plugins.authentication.AnonymousAuthPlugin": {"allow_anonymous": True}},
    }


def _bind_failure(err: BaseException) -> OSError | None:
    """The OSError under amqtt's BrokerError ('Broker instance can't be started: …'), if any."""
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


async def serve(bind: str, port: int, ready: asyncio.Event | None = None,
                announce: bool = False) -> int:
    """Serve until SIGINT or SIGTERM; the signal's number."""
    from amqtt.broker import Broker
    from amqtt.errors import BrokerError

    broker = Broker(amqtt_config(bind, port))
    try:
        await broker.start()
    except (BrokerError, OSError) as err:
        cause = _bind_failure(err)
        if cause is not None and cause.errno == errno.EADDRINUSE:
            raise busy_port_error(bind, port) from None
        why = (cause.strerror if cause is not None else None) or str(err)
        raise UserError(f"the embedded amqtt broker cannot listen on {host_port(bind, port)}: "
                        f"{why.rstrip('.')}.") from None
    if ready is not None:
        ready.set()
    if announce:
        # As the Mosquitto path says it: whoever asked for --port 0 needs the port to use.
        print(f"amqtt (embedded, demo only) listening on {BrokerURL(bind, port)} "
              "(Ctrl-C to stop)", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    stopped_by: list[int] = []
    loop = asyncio.get_running_loop()

    def on_signal(sig: int) -> None:
        stopped_by.append(sig)
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        await stop.wait()
    finally:
        await broker.shutdown()
    return stopped_by[0]


def run_embedded(bind: str, port: int, *, allow_remote: bool = False,
                 announce: bool = False) -> int:
    """Serve until SIGINT/SIGTERM and return the shell's exit code for it (128 + the signal,
    as the Mosquitto path and every other command say a Ctrl-C); ``announce`` says where on
    stderr once it listens (port 0: a free port, picked here so that it can be said)."""
    if not is_loopback(bind) and not allow_remote:
        raise UserError(
            f"the embedded amqtt broker is for demos on loopback only; refusing to bind {bind} "
            "(pass --allow-remote if you really mean it, or use Mosquitto)."
        )
    # amqtt logs every connection at INFO and tracebacks for clients that vanish; keep stderr
    # readable for the demo.
    logging.getLogger("amqtt").setLevel(logging.CRITICAL)
    logging.getLogger("transitions").setLevel(logging.CRITICAL)
    if port == 0:
        port = free_port(bind)
    if port_in_use(bind, port):
        raise busy_port_error(bind, port)
    return 128 + asyncio.run(serve(bind, port, announce=announce))
