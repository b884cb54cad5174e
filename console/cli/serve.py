"""``fleetdeck serve``: the operator console in a browser, for whoever is not at a terminal.

textual-serve (Textualize's own) serves a page with a terminal emulator and runs one
``fleetdeck console`` process per browser tab. Read-only by default (``--read-only``: no
commands, header shows [R]); ``--allow-commands --operator NAME`` lets tabs drain and resume,
audited as NAME. Every tab's console runs without the store (``--no-store``): the SQLite store
has one writer (docs/architecture.md), the collector. Broker credentials reach the tabs through
the environment ($FLEETDECK_BROKER …), never their command lines (``ps`` shows those).
"""

import os
import shlex
import sys

from fleetdeck.errors import UserError

EXIT_CANNOT_BIND = 2


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


def run_serve(broker: str | None, ca: str | None, cert: str | None, key: str | None,
              cluster: str, host: str, port: int, *, allow_commands: bool,
              operator: str | None, tick_s: float, public_url: str | None) -> int:
    from textual_serve.server import Server

    from fleetdeck.brokerurl import broker_from_env

    url = broker_from_env(broker, ca, cert, key)  # a bad URL is one sentence here, not per tab
    command = console_command(cluster, allow_commands=allow_commands, operator=operator,
                              tick_s=tick_s)
    for name, value in (("FLEETDECK_BROKER", broker), ("FLEETDECK_CA", ca),
                        ("FLEETDECK_CERT", cert), ("FLEETDECK_KEY", key)):
        if value:
            os.environ[name] = value
    mode = "commands allowed as " + str(operator) if allow_commands else "read-only"
    shown = public_url or f"http://{host}:{port}"
    print(f"fleetdeck serve: console of cluster {cluster} at {url} on {shown} ({mode}); "
          "Ctrl-C stops", file=sys.stderr, flush=True)
    server = Server(command, host=host, port=port, title=f"fleetdeck {cluster}",
                    public_url=public_url)
    try:
        server.serve()
    except OSError as err:
        raise UserError(f"cannot serve on {host}:{port}: {err.strerror or err}.") from None
    return 0
