"""``fleetdeck serve``: the operator console in a browser, for whoever is not at a terminal.

textual-serve (Textualize's own) serves a page with a terminal emulator and runs one
``fleetdeck console`` process per browser tab. Read-only by default (``--read-only``: no
commands, header shows [R]); ``--allow-commands --operator NAME`` lets tabs drain and resume,
audited as NAME. Every tab's console runs without the store (``--no-store``): the SQLite store
has one writer (docs/architecture.md), the collector. Broker credentials reach the tabs through
the environment ($FLEETDECK_BROKER …), never their command lines (``ps`` shows those).
"""

import asyncio
import errno
import os
import shlex
import signal
import socket
import sys
from typing import Any

from fleetdeck.errors import UserError
from fleetdeck.hostport import host_port

EXIT_CANNOT_BIND = 2


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says the console is served: a port in use
    is one sentence and exit 2, never a banner followed by an error. ``[::1]``, as a URL
    writes an IPv6 host, is ``::1``."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host.strip("[]"), port), family=family)
    except OSError as err:
        if err.errno == errno.EADDRINUSE:
            raise UserError(f"cannot serve on {host_port(host, port)}: the port is in use "
                            "(another fleetdeck serve?); pick another with --port.") from None
        raise UserError(f"cannot serve on {host_port(host, port)}: "
                        f"{err.strerror or err}.") from None


def console_command(cluster: str, *, allow_commands: bool, operator: str | None,
                    tick_s: float) -> str:
    """The shell command each browser tab runs."""
    args = [sys.executable, "-m", "fleetdeck.cli", "console", "--cluster", cluster,
            "--no-store", "--tick", str(tick_s)]
    if allow_commands:
        if not operator:
            raise UserError("--allow-commands needs --operator NAME: the audit log must say "
                            "who drained what.")
        args += ["--operator", operator]
    else:
        args.append("--read-only")
    return shlex.join(args)


def _stop_before_serving(_signum: int, _frame: object) -> None:
    raise SystemExit(0)


def run_serve(broker: str | None, ca: str | None, cert: str | None, key: str | None,
              cluster: str, host: str, port: int, *, allow_commands: bool,
              operator: str | None, tick_s: float, public_url: str | None,
              command_key: str | None = None) -> int:
    """``command_key``: the key file the tabs' consoles sign their commands with, passed as
    $FLEETDECK_COMMAND_KEY_FILE (checked readable by the caller): a tab started without it sent
    unsigned drains, which agents that obey only signed commands reject (docs/security.md)."""
    from aiohttp import web
    from textual_serve.server import Server

    from fleetdeck.brokerurl import broker_from_env

    url = broker_from_env(broker, ca, cert, key)  # a bad URL is one sentence here, not per tab
    command = console_command(cluster, allow_commands=allow_commands, operator=operator,
                              tick_s=tick_s)

    class BoundServer(Server):
        """textual-serve on a socket bound beforehand (its own ``serve`` binds only after its
        start-up hook has printed "Serving … on …")."""

        def __init__(self, sock: socket.socket, **kw: Any) -> None:
            super().__init__(command, **kw)
            self.sock = sock

        async def on_startup(self, app: web.Application) -> None:
            pass  # the banner below says where, once the port is ours

        def serve(self, debug: bool = False) -> None:
            self.debug = debug
            self.initialize_logging()
            loop = asyncio.new_event_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, self.request_exit)
            web.run_app(self._make_app(), sock=self.sock, handle_signals=False, loop=loop,
                        print=lambda *_args: None)

    sock = bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    for name, value in (("FLEETDECK_BROKER", broker), ("FLEETDECK_CA", ca),
                        ("FLEETDECK_CERT", cert), ("FLEETDECK_KEY", key),
                        ("FLEETDECK_COMMAND_KEY_FILE", command_key)):
        if value:
            os.environ[name] = value
    mode = "commands allowed as " + str(operator) if allow_commands else "read-only"
    shown = public_url or f"http://{host_port(host, bound_port)}"
    server = BoundServer(sock, host=str(bound_host), port=int(bound_port),
                         title=f"fleetdeck {cluster}", public_url=shown)
    # A stop (systemd, a test) may come as soon as the banner is out, before the server's
    # loop takes the signal over: it is a clean stop then too, not death by SIGTERM.
    signal.signal(signal.SIGTERM, _stop_before_serving)
    print(f"fleetdeck serve: console of cluster {cluster} at {url} on {shown} ({mode}); "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    server.serve()
    return 0
