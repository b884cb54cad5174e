"""fleetdeck: operations console for GPU training clusters (MQTT agents, simulator, TUI).

Every bad argument, bad config or unreachable broker ends in one plain sentence on stderr and a
non-zero exit, never a traceback (UserError). Heavy imports (textual, aiomqtt) happen inside the
subcommand that needs them, so ``fleetdeck agent`` never loads the TUI.
"""

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from fleetdeck import __version__
from fleetdeck.errors import UserError
from fleetdeck.protocol.ids import InvalidId, validate_id

CLUSTER_ENV = "FLEETDECK_CLUSTER"
DEFAULT_CLUSTER = "demo"


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see '{self.prog} --help').\n")


def _id(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            return validate_id(value, what)
        except InvalidId as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    check.__name__ = what
    return check


def _positive(kind: type[int] | type[float], what: str) -> Callable[[str], int | float]:
    def check(value: str) -> int | float:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, not '{value}'") from None
        if number <= 0:
            raise argparse.ArgumentTypeError(f"{what} must be greater than 0, not {value}")
        return number

    check.__name__ = what
    return check


def _add_broker(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--broker",
        metavar="URL",
        help="mqtt://[user:pass@]host:port or mqtts://… (default: $FLEETDECK_BROKER or "
        "mqtt://127.0.0.1:1883)",
    )
    p.add_argument(
        "--cluster",
        type=_id("cluster"),
        default=os.environ.get(CLUSTER_ENV, DEFAULT_CLUSTER),
        help=f"cluster name, the topic root's second level (default: ${CLUSTER_ENV} or "
        f"'{DEFAULT_CLUSTER}')",
    )


def build_parser() -> Parser:
    parser = Parser(prog="fleetdeck", description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"fleetdeck {__version__}")
    parser.add_argument("--log-level", default="warning",
                        choices=["debug", "info", "warning", "error"])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("demo", help="private broker + simulated fleet + console, in one go")
    p.add_argument("--nodes", type=_positive(int, "--nodes"), default=64)
    p.add_argument("--broker-kind", choices=["auto", "mosquitto", "amqtt"], default="auto",
                   help="auto = Mosquitto if installed, else the embedded amqtt broker")
    p.add_argument("--interval", type=_positive(float, "--interval"), default=1.0)
    p.add_argument("--cluster", type=_id("cluster"), default=DEFAULT_CLUSTER)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--headless", type=_positive(float, "--headless"), metavar="SECONDS",
                   help="no TUI: run that long, then print the status table (smoke test)")

    p = sub.add_parser("broker", help="run a private broker on loopback until interrupted")
    p.add_argument("--kind", choices=["auto", "mosquitto", "amqtt"], default="auto")
    p.add_argument("--bind", default="127.0.0.1")
    p.add_argument("--port", type=int, default=1883)
    p.add_argument("--allow-remote", action="store_true",
                   help="let the embedded amqtt broker bind a non-loopback address (unsafe)")
    p.add_argument("--serve-embedded", action="store_true", help=argparse.SUPPRESS)

    p = sub.add_parser("agent", help="run one node agent (or print one sample with --once)")
    _add_broker(p)
    p.add_argument("--node-id", type=_id("node id"), default=None,
                   help="node id (default: this host's short name)")
    p.add_argument("--source", default="sim", help="telemetry source: sim (default)")
    p.add_argument("--interval", type=_positive(float, "--interval"), default=1.0)
    p.add_argument("--keepalive", type=_positive(int, "--keepalive"), default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--once", action="store_true",
                   help="print one birth and one telemetry message as JSON and exit (no broker)")

    p = sub.add_parser("sim", help="run N simulated node agents in one process")
    _add_broker(p)
    p.add_argument("--nodes", type=_positive(int, "--nodes"), default=64)
    p.add_argument("--prefix", type=_id("node name prefix"), default="gpu")
    p.add_argument("--interval", type=_positive(float, "--interval"), default=1.0)
    p.add_argument("--keepalive", type=_positive(int, "--keepalive"), default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--connect-concurrency", type=_positive(int, "--connect-concurrency"),
                   default=16, help="simultaneous MQTT connects (use 1 with amqtt)")

    p = sub.add_parser("console", help="open the operator console (Textual TUI)")
    _add_broker(p)
    p.add_argument("--tick", type=_positive(float, "--tick"), default=0.5,
                   help="seconds between screen refreshes")
    p.add_argument("--read-only", action="store_true", help="no commands: header shows [R]")
    p.add_argument("--operator", default=os.environ.get("USER", "operator"),
                   help="who is at the keyboard (audit log)")

    p = sub.add_parser("status", help="one-shot fleet status (table or --json)")
    _add_broker(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--wait", type=_positive(float, "--wait"), default=2.5, metavar="SECONDS",
                   help="how long to collect retained and live state (default 2.5)")

    sub.add_parser("schema", help="print the JSON Schema of every protocol message")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from fleetdeck.logs import setup_logging

    setup_logging(args.log_level)
    try:
        return int(COMMANDS[args.command](args) or 0)
    except UserError as err:
        print(f"fleetdeck {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return 130


def cmd_schema(args: argparse.Namespace) -> int:
    from fleetdeck.protocol.messages import json_schemas

    print(json.dumps(json_schemas(), indent=2))
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    from fleetdeck.embedded_broker import run_embedded

    if args.serve_embedded or args.kind == "amqtt":
        run_embedded(args.bind, args.port, allow_remote=args.allow_remote)
        return 0
    from fleetdeck.broker import ManagedBroker, find_mosquitto

    kind = args.kind
    if kind == "auto" and find_mosquitto() is None:
        print("mosquitto not found; running the embedded amqtt broker (demo only)",
              file=sys.stderr)
        run_embedded(args.bind, args.port, allow_remote=args.allow_remote)
        return 0
    broker = ManagedBroker("mosquitto", host=args.bind, port=args.port).start()
    print(f"{broker.label} listening on {broker.url} (Ctrl-C to stop)", file=sys.stderr)
    try:
        assert broker.proc is not None
        broker.proc.wait()
    finally:
        broker.close()
    return 0


def cmd_agent(args: argparse.Namespace) -> int:
    import socket

    from agents.run import run_agent, sample_once

    node_id = args.node_id or socket.gethostname().split(".")[0]
    try:
        validate_id(node_id, "node id")
    except InvalidId as err:
        raise UserError(f"{err}; pass --node-id.") from None
    if args.once:
        print(json.dumps(sample_once(args, node_id), indent=2))
        return 0
    from fleetdeck.brokerurl import broker_from_env

    asyncio.run(run_agent(args, node_id, broker_from_env(args.broker)))
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from agents.fleet import FleetOptions, run_fleet
    from fleetdeck.brokerurl import broker_from_env

    opts = FleetOptions(
        cluster=args.cluster, nodes=args.nodes, prefix=args.prefix, interval_s=args.interval,
        keepalive=args.keepalive, seed=args.seed, connect_concurrency=args.connect_concurrency,
    )
    asyncio.run(run_fleet(broker_from_env(args.broker), opts))
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from console.status import run_status
    from fleetdeck.brokerurl import broker_from_env

    return run_status(broker_from_env(args.broker), args.cluster, args.wait, args.json)


def cmd_console(args: argparse.Namespace) -> int:
    from console.tui.app import run_console
    from fleetdeck.brokerurl import broker_from_env

    return run_console(
        broker_from_env(args.broker), args.cluster, tick_s=args.tick, read_only=args.read_only,
        operator=args.operator,
    )


def cmd_demo(args: argparse.Namespace) -> int:
    from fleetdeck.demo import run_demo

    return run_demo(args)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": cmd_demo,
    "broker": cmd_broker,
    "agent": cmd_agent,
    "sim": cmd_sim,
    "console": cmd_console,
    "status": cmd_status,
    "schema": cmd_schema,
}


if __name__ == "__main__":
    sys.exit(main())
