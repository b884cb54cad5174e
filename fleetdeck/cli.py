"""fleetdeck: operations console for GPU training clusters (MQTT agents, simulator, TUI).

Every bad argument, bad config or unreachable broker ends in one plain sentence on stderr and a
non-zero exit, never a traceback (UserError). Heavy imports (textual, aiomqtt) happen inside the
subcommand that needs them, so ``fleetdeck agent`` never loads the TUI.
"""

import argparse
import asyncio
import contextlib
import difflib
import json
import math
import os
import re
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from fleetdeck import __version__
from fleetdeck.console.audit import os_user
from fleetdeck.environment import unknown_variables
from fleetdeck.errors import UserError
from fleetdeck.paths import given_file, recording_out, running_demo
from fleetdeck.protocol.ids import InvalidId, validate_id

if TYPE_CHECKING:
    from fleetdeck.brokerurl import BrokerURL

CLUSTER_ENV = "FLEETDECK_CLUSTER"
DEFAULT_CLUSTER = "demo"


EXAMPLES: dict[str, str] = {
    "demo": "fleetdeck demo --nodes 256",
    "broker": "fleetdeck broker --port 0",
    "agent": "fleetdeck agent --source sysfs+nvml --broker mqtts://broker:8883 --ca ca.pem",
    "sim": "fleetdeck sim --nodes 32 --jobs 3",
    "inject": "fleetdeck inject xid79 node=gpu0012 gpu=3",
    "console": "fleetdeck console --read-only",
    "drain": "fleetdeck drain gpu0012 --reason 'XID 79 OPS-1' --now",
    "resume": "fleetdeck resume gpu0012",
    "retire": "fleetdeck retire 'gpu[0025-0032]' --reason decommissioned",
    "restart-job": "fleetdeck restart-job 4102 --reason 'gpu0040 drained, OPS-2'",
    "serve": "fleetdeck serve --port 8000",
    "status": "fleetdeck status --fail-on failed || page",
    "schema": "fleetdeck schema > fleetdeck-schema.json",
    "record": "fleetdeck record --out incident.jsonl.gz --duration 1m",
    "collect": "fleetdeck collect --metrics :9108",
    "events": "fleetdeck events --since 10m --node 'gpu[0010-0020]'",
    "report": "fleetdeck report --since 24h",
    "history": "fleetdeck history gpu0012 --metric temp --plot",
    "replay": "fleetdeck replay incident.jsonl.gz",
}
"""One command line per subcommand: under "example:" in its --help, and in the sentence for a
missing argument ("--reason is required, e.g. …"): argparse's "the following arguments are
required" said what was wrong, not what to type (a newcomer's 3 a.m. run)."""

EXIT_STATUS: dict[str, str] = {
    "inject": "exit status: 0 injected; 2 refused (a bad argument, an unknown fault or node, "
              "no broker, no simulator answering): one sentence on stderr.",
    "events": "exit status: 0 done (no rows too); 2 refused (a bad argument, no store, a "
              "--node the store never held): one sentence on stderr.",
    "report": "exit status: 0 done; 2 refused (a bad argument, no store): one sentence on "
              "stderr.",
    "history": "exit status: 0 done; 2 refused (a bad argument, no store, a node the store "
               "holds no minute of): one sentence on stderr.",
    "record": "exit status: 0 recorded (or stopped before the broker answered: nothing "
              "written); 2 refused (a bad argument, --out exists without --force, no broker): "
              "one sentence on stderr; 3 no message of a node of --cluster was heard (nothing "
              "to replay).",
    "replay": "exit status: 0 done; 1 damage was skipped (--headless, --to-broker: what could "
              "be read was replayed all the same; docs/recording.md); 2 refused (a bad "
              "argument, no such file): one sentence on stderr.",
}
"""The exit statuses of the one-shot readers and inject, said in their --help as drain's and
status's are (a newcomer found them only in the README, if at all)."""


class _Formatter(argparse.HelpFormatter):
    """argparse's wrapping, except for the epilog's example lines (``  fleetdeck …``), kept whole
    so that they can be pasted; each line of the epilog is its own paragraph."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(indent + line if line.startswith("  fleetdeck ")
                         else super(_Formatter, self)._fill_text(line, width, indent)
                         for line in text.split("\n"))


class Parser(argparse.ArgumentParser):
    example = ""
    """This command's line from EXAMPLES, for the sentence on a missing argument."""
    argv: Sequence[str] = ()
    """The words parsed (``_main``), to find the typo behind a missing option."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {self.what_to_do(message)} (see '{self.prog} --help').\n")

    def what_to_do(self, message: str) -> str:
        """argparse's ``message`` as what to type instead, where it can say so."""
        missing = re.fullmatch(r"the following arguments are required: (.+)", message)
        if missing and missing[1] == "COMMAND":
            return ("give a command: 'fleetdeck demo' to try it on a simulated fleet, "
                    "'fleetdeck status' for a fleet's health")
        if missing and self.example:
            names = missing[1].split(", ")
            said = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
            # "--reson x": argparse says --reason is missing before it says --reson is unknown.
            typed = [w.partition("=")[0] for w in self.argv if w.startswith("--")]
            typos = [w for name in names if name.startswith("--")
                     for w in difflib.get_close_matches(name, typed, n=1, cutoff=0.75)
                     if w not in self.options()]
            typo = f" ({typos[0]} is no option: a typo?)" if typos else ""
            return (f"{said} {'is' if len(names) == 1 else 'are'} required{typo}, "
                    f"e.g. {self.example}")
        choice = re.fullmatch(r"argument (\S+): invalid choice: '(.*)' \(choose from (.*)\)",
                              message)
        if choice:
            # Newer Pythons list the choices unquoted ("choose from demo, broker, …").
            named = [c.strip().strip("'") for c in choice[3].split(",")]
            moved = _options_first(self, self.argv, named) if choice[1] == "COMMAND" else None
            if moved:
                return moved
            close = difflib.get_close_matches(choice[2], named, n=1)
            if choice[1] == "COMMAND":
                return (f"unknown command '{choice[2]}': "
                        + (f"did you mean '{close[0]}'?" if close else f"choose from {choice[3]}"))
            if close:
                return (f"argument {choice[1]}: '{choice[2]}' is no choice: did you mean "
                        f"'{close[0]}'?")
        return message

    def options(self) -> list[str]:
        return [o for action in self._actions for o in action.option_strings
                if o.startswith("--")]


def _id(what: str) -> Callable[[str], str]:
    def check(value: str) -> str:
        try:
            return validate_id(value, what)
        except InvalidId as err:
            raise argparse.ArgumentTypeError(str(err)) from None

    check.__name__ = what
    return check


INTERVAL_MAX_S = 3600.0
"""The longest telemetry interval a message may carry (protocol/messages.py, ``interval_s``)."""
KEEPALIVE_MAX_S = 3600
"""The longest MQTT keepalive an agent takes (agents/config.py; MQTT's own limit is 65,535)."""
EVENTS_LIMIT_MAX = 1_000_000_000
"""The most rows ``events --limit`` takes: far beyond any store, well within SQLite's."""
STATUS_WAIT_MAX_S = 86_400.0
"""The longest ``status --wait``: a one-shot answer, a day at most (a watch is the console)."""
RECORD_MAX_DAYS = 366.0
"""The longest ``record --duration``: a year; longer, or open-ended, runs without it."""
REPLAY_TICK_MIN_S = 0.01
"""The shortest headless replay tick: 360,000 ticks an hour of recording, a tick's work each."""


def _operator(value: str) -> str:
    """``--operator``: the audit log's ``who``, never blank (an empty one recorded
    "requested by " and ``"who": ""``: a newcomer's run)."""
    name = value.strip()
    if not name:
        raise argparse.ArgumentTypeError("--operator must name who asks (the audit log says "
                                         "who drained what), not be empty")
    return name


def _between(lo: float, hi: float, what: str) -> Callable[[str], float]:
    """A float within [lo, hi], one sentence for any other: "--speed 0" and "--speed 0.1"
    were refused in two different sentences (a newcomer's run)."""
    as_float = _positive(float, what)

    def check(value: str) -> float:
        try:
            number = float(as_float(value))
        except argparse.ArgumentTypeError:
            number = math.nan
        if not lo <= number <= hi:
            raise argparse.ArgumentTypeError(f"{what} must be between {lo:g} and {hi:g}, "
                                             f"not {value}")
        return number

    return check


def _positive(kind: type[int] | type[float], what: str,
              most: float | None = None) -> Callable[[str], int | float]:
    def check(value: str) -> int | float:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, not '{value}'") from None
        if not math.isfinite(number):
            # float() takes "nan" and "inf": a wait of inf never ends, nan compares false.
            raise argparse.ArgumentTypeError(f"{what} must be a finite number, not {value}")
        if number <= 0:
            raise argparse.ArgumentTypeError(f"{what} must be greater than 0, not {value}")
        if most is not None and number > most:
            shown = f"{most:,.0f}" if most >= 1e6 else f"{most:g}"  # not 1e+09
            raise argparse.ArgumentTypeError(f"{what} must be at most {shown}, not {value}")
        return number

    check.__name__ = what
    return check


def _span(what: str, most_days: float | None = None) -> Callable[[str], float]:
    """A length of time as ``sim --duration`` and ``--since`` take it (``record --duration
    1m`` was refused as not a number: a newcomer's run); ``most_days``: its bound."""
    def check(value: str) -> float:
        from fleetdeck.agents.sim.rates import RatesError, parse_span

        try:
            seconds = parse_span(value, what)
        except RatesError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if not math.isfinite(seconds):
            raise argparse.ArgumentTypeError(f"{what} must be finite, not {value}")
        if most_days is not None and seconds > most_days * 86400:
            raise argparse.ArgumentTypeError(f"{what} must be at most {most_days:g}d, not "
                                             f"{value}; without it, it runs until Ctrl-C")
        return seconds

    check.__name__ = what
    return check


def _public_url(value: str) -> str:
    """``serve --public-url``: an http(s) URL with a host, which textual-serve writes into each
    page it serves; 'javascript:…' was taken as given (a CLI fuzz round)."""
    from urllib.parse import urlsplit

    shown = value.encode("unicode_escape").decode("ascii")
    try:
        url = urlsplit(value)
        good = url.scheme.lower() in ("http", "https") and bool(url.hostname)
    except ValueError:  # 'http://[::1': an unclosed IPv6 address
        good = False
    if not good or not value.isprintable():
        raise argparse.ArgumentTypeError(
            f"--public-url must be the http:// or https:// URL browsers use, as "
            f"https://fleet.example.com/console, not '{shown}'")
    return value


def _bind(value: str) -> str:
    """``--bind`` of broker and serve: an address, never blank ('' waited 15 s for a broker
    that never listened before failing: a CLI fuzz round)."""
    if not value.strip() or not value.isprintable() or any(c.isspace() for c in value):
        shown = value.encode("unicode_escape").decode("ascii")
        raise argparse.ArgumentTypeError(f"--bind must be an address to listen on, as "
                                         f"127.0.0.1 or 0.0.0.0, not '{shown}'")
    return value


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port must be a number, not '{value}'") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 0 and 65535, not {value}")
    return port


def _clusters(value: str) -> list[str]:
    from fleetdeck.console.contexts import ContextError, parse_clusters

    try:
        return parse_clusters(value)
    except ContextError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


_clusters.__name__ = "cluster"


T = TypeVar("T")


class _FromEnv(str):
    """A default read from an environment variable (``name``): its error names the variable,
    where "argument --cluster: …" was said of a flag nobody gave (a newcomer's run)."""

    name = ""


def _env_default(name: str, fallback: str) -> str:
    value = os.environ.get(name)
    if value is None:
        return fallback
    default = _FromEnv(value)
    default.name = name
    return default


def _naming_env(check: Callable[[str], T]) -> Callable[[str], T]:
    def checked(value: str) -> T:
        try:
            return check(value)
        except argparse.ArgumentTypeError as err:
            if isinstance(value, _FromEnv):
                raise argparse.ArgumentTypeError(f"{err} (from ${value.name})") from None
            raise

    checked.__name__ = check.__name__
    return checked


def _add_broker(p: argparse.ArgumentParser, several: bool = False) -> None:
    """``several``: ``--cluster a,b`` names several clusters (console contexts, status)."""
    p.add_argument(
        "--broker",
        metavar="URL",
        help="mqtt://[user:pass@]host:port or mqtts://… (default: $FLEETDECK_BROKER or "
        "mqtt://127.0.0.1:1883)",
    )
    p.add_argument("--ca", metavar="FILE", help="CA bundle for mqtts:// (or $FLEETDECK_CA)")
    p.add_argument("--cert", metavar="FILE", help="client certificate for mutual TLS")
    p.add_argument("--key", metavar="FILE", help="client key for mutual TLS")
    p.add_argument("--command-key", metavar="FILE",
                   default=_env_default("FLEETDECK_COMMAND_KEY_FILE", "") or None,
                   help="sign commands with this key (agents configured with it obey only "
                   "signed commands; default $FLEETDECK_COMMAND_KEY_FILE)")
    p.add_argument(
        "--cluster",
        type=_naming_env(_clusters if several else _id("cluster")),
        default=_env_default(CLUSTER_ENV, DEFAULT_CLUSTER),
        help=(f"cluster name, the topic root's second level (default: ${CLUSTER_ENV} or "
              f"'{DEFAULT_CLUSTER}')"
              + ("; several as a,b (one context each, the first shown first)" if several
                 else "")),
    )


def _unsigned(p: argparse.ArgumentParser, why: str) -> None:
    """``--command-key`` of a command that sends nothing an agent checks: accepted (a script
    may pass the key to every command), said unused. Its help said "sign commands with this
    key" of inject and record, which sign nothing (a newcomer's reading of --help)."""
    for action in p._actions:
        if action.dest == "command_key":
            action.help = f"accepted, not used: {why}"


def _add_command_parsers(sub: "argparse._SubParsersAction[Parser]") -> None:
    """drain / resume / restart-job: the console's commands for scripts (console/cli_commands)."""
    from fleetdeck.console.publish_probe import PROBE_WAIT_S

    # 6 is a drain's alone: resume's and restart-job's lines said "6 a drain timed out still
    # DRAINING" too, which a newcomer read as something a resume could end in.
    exits = ("exit 0 done, 2 refused, 3 rejected or failed, 4 timed out, 5 timed out and most "
             "likely dropped by the broker")
    drain_exits = f"{exits}, 6 timed out still DRAINING"
    # Scripts (a Slurm prolog) branch on these: said in each command's own --help too.
    epilog = ("exit status: 0 done; 2 refused before anything was sent (a bad argument, an "
              "unknown node or job, no broker: one sentence on stderr, a 'refused' record in "
              "the audit log); 3 rejected or failed by a node or the scheduler, or a drain "
              "superseded (the node resumed before it drained); 4 timed out "
              "(no outcome within --timeout; what was sent stays in effect); 5 timed out with "
              "nothing answered, and the broker most likely dropped it: a test publish of this "
              f"broker user's on node/+/cmd did not come back within {PROBE_WAIT_S:g} s either "
              "(it may not publish node/+/cmd, as the shipped ACL's viewer; 'timed_out' in the "
              "audit log, with that sentence; a node known offline or silent is 4, as for any "
              "user); 6 (drain) timed out with every target DRAINED or acknowledged and still "
              "DRAINING, none unanswered, rejected or superseded: the drain took, their jobs "
              "run to completion first (--now: are still being requeued) (4 when any target "
              "never answered). "
              "That test's finding is said when it comes, and "
              "the command still waits for its answers until --timeout (it holds until then "
              "and may still land: a late echo on a loaded broker, a user that may not read "
              "commands back); one nothing answered by then waits for the test's verdict, at "
              f"most {PROBE_WAIT_S + 1:g} s more. Unknown targets are waited for while births "
              "still "
              "arrive (a broker that just restarted), at most 30 s or --timeout.")

    def common(p: argparse.ArgumentParser, timeout_s: float = 60.0) -> None:
        _add_broker(p)
        p.add_argument("--operator", default=os_user(), type=_operator,
                       help="who asks (audit log; default your login name)")
        p.add_argument("--audit-log", metavar="FILE", default=None,
                       help="audit log (default $XDG_STATE_HOME/fleetdeck/audit.jsonl; a "
                       "running demo's own against its broker)")
        p.add_argument("--timeout", type=_positive(float, "--timeout"), default=timeout_s,
                       metavar="SECONDS",
                       help=f"give up waiting after this long (default {timeout_s:g})")

    p = sub.add_parser("drain", help=f"drain nodes and wait until DRAINED ({drain_exits})",
                       epilog=epilog)
    p.add_argument("hostlist", metavar="HOSTLIST", nargs="+",
                   help="e.g. gpu0012 or gpu[0010-0020,0031]; several are one list")
    p.add_argument("--reason", required=True, help="why (required; shown as Reason=…)")
    p.add_argument("--now", action="store_true",
                   help="requeue running jobs from their last checkpoint instead of letting "
                   "them finish")
    p.add_argument("--no-wait", action="store_true",
                   help="return once every node acknowledged (DRAINING is fine)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what the drain would touch (jobs, GPUs, GPU-hours since their "
                   "checkpoint) and send nothing")
    common(p)

    p = sub.add_parser("resume", help=f"return drained nodes to service ({exits})",
                       epilog=epilog)
    p.add_argument("hostlist", metavar="HOSTLIST", nargs="+",
                   help="e.g. gpu0012 or gpu[0010-0020,0031]; several are one list")
    p.add_argument("--reason", default="", help="why (optional, audit log)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what the resume would give back (GPUs, and nodes still failing "
                   "their health checks) and send nothing")
    common(p)

    # Exit 3 is both ways a birth outlives the clear (console/cli/commands.py, run_retire):
    # said as one sentence in the list of commands and in retire --help.
    retire_exits = ("exit 0 done, 2 refused, 3 a birth still there after the clear: an agent "
                    "published it again, or the broker dropped the clear (an ACL)")
    p = sub.add_parser(
        "retire", help="forget decommissioned or renamed nodes: clear their retained birth, "
        f"status and digest on the broker ({retire_exits})",
        epilog="A node heard online now is refused (its agent would publish its birth again): "
        "stop its agent first, or --force; so is one a job holds (requeue or end the job "
        "first, or --force). Every console, collector and status then forgets "
        "it; the stores keep its history, and the audit log says who retired it and why. "
        f"{retire_exits[0].upper()}{retire_exits[1:]}.")
    p.add_argument("hostlist", metavar="HOSTLIST", nargs="+",
                   help="e.g. gpu0025 or gpu[0025-0032]; several are one list")
    p.add_argument("--reason", default="", help="why (optional, audit log)")
    p.add_argument("--force", action="store_true",
                   help="retire nodes heard online too (their agents will publish their "
                   "births again unless stopped)")
    common(p, timeout_s=30.0)

    p = sub.add_parser("restart-job", help=f"requeue a job from its last checkpoint ({exits})",
                       epilog=epilog)
    p.add_argument("job", type=_id("job id"), metavar="JOB",
                   help="the job id, as squeue and the jobs view show it (e.g. 4102)")
    # Required as for drain and the TUI's dialog: a requeue throws away the work since the
    # checkpoint, and the audit log should say why.
    p.add_argument("--reason", required=True, help="why (required; kept in the audit log)")
    p.add_argument("--dry-run", action="store_true",
                   help="print what the requeue would touch (nodes, GPUs, GPU-hours since the "
                   "job's checkpoint) and send nothing")
    common(p)


ONE_SHOT = frozenset({"status", "drain", "resume", "restart-job", "retire", "inject", "schema",
                      "events", "report", "history", "record", "replay"})
"""Commands that end in one sentence of their own on failure (``setup_logging``)."""
SAYS_ITS_LINK = frozenset({"status", "drain", "resume", "restart-job", "retire"})
"""One-shot commands whose output says what became of their broker connection: the transport's
reconnect warnings are left to --log-level info (``setup_logging``)."""


def _hostlist(words: list[str]) -> str:
    """``drain gpu0001 gpu0002`` and ``drain 'gpu0001 gpu0002'`` as ``gpu0001,gpu0002``: both
    were refused, the second as "unknown node(s) gpu0001 gpu0002", which read as if both
    nodes were unknown (a newcomer's scripts)."""
    return re.sub(",+", ",", ",".join(" ".join(words).split())).strip(",")


def _add_db(p: argparse.ArgumentParser) -> None:
    if not any(a.dest == "cluster" for a in p._actions):
        # A reader's --cluster stays None unless typed: then a --db of another cluster is
        # refused (the store names its cluster), and without it the store's own is read.
        p.add_argument("--cluster", type=_id("cluster"), default=None,
                       help=f"cluster name: picks the default store, and a --db of another "
                       f"cluster is refused (default: ${CLUSTER_ENV} or '{DEFAULT_CLUSTER}')")
    p.add_argument("--db", metavar="FILE",
                   help="SQLite store (default: $XDG_STATE_HOME/fleetdeck/<cluster>.db)")


def _db_path(args: argparse.Namespace) -> Path:
    from fleetdeck.console.store import default_db_path

    if args.db:
        return Path(args.db)
    return default_db_path(args.cluster or os.environ.get(CLUSTER_ENV, DEFAULT_CLUSTER))


def _url(args: argparse.Namespace) -> "BrokerURL":
    from fleetdeck.brokerurl import broker_from_env

    return broker_from_env(args.broker, args.ca, args.cert, args.key)


def _audit_log(args: argparse.Namespace, url: "BrokerURL", command: str,
               clusters: list[str]) -> str | None:
    """``--audit-log``, else the audit log of a demo running with this broker and cluster: the
    demo's drills stay out of the operator's real audit trail (README, "Two commands"); None:
    the real one. Said on stderr, as the operator did not choose it. A dry run sends nothing
    and is not moved: checking the demo's log made it, and the demo's exit then no longer said
    that no commands were sent."""
    if args.audit_log:
        return str(args.audit_log)
    if getattr(args, "dry_run", False):
        return None
    demo = running_demo(url, clusters)
    if demo is None:
        return None
    from fleetdeck.demo import AUDIT_FILE

    path = demo / AUDIT_FILE
    print(f"fleetdeck {command}: {url.address} is a running demo's broker: audited in the "
          f"demo's log {path}, not your real one (--audit-log FILE to choose)", file=sys.stderr)
    return str(path)


def _command_key(args: argparse.Namespace, *, watch_only: bool = False) -> bytes | None:
    """The command key to sign with, or None. ``watch_only``: a command that only watches
    (``status``: its keyframe asks are the only thing it signs) goes on unsigned, with one
    warning, when the key it inherited from the environment cannot be read: a read-only
    monitoring cron stopped at exit 2 over a signing key it never asked for (a review). A key
    given with --command-key is refused as for every command."""
    from fleetdeck.protocol.signing import load_key

    path = args.command_key
    if not path:
        return None
    try:
        return load_key(path)
    except UserError as err:
        if isinstance(path, _FromEnv):
            # A cron's `status` that never gave --command-key read "cannot read command key
            # /etc/…", a key it did not know it had (a review).
            said = f"{str(err).rstrip('.')} (from ${path.name})"
            if watch_only:
                print(f"fleetdeck: {said}; watching unsigned (agents that obey only signed "
                      "commands answer no keyframe ask: nodes they run may read waiting "
                      "until their periodic keyframe).", file=sys.stderr)
                return None
            raise UserError(f"{said}.") from None
        raise


def _add_wire(p: argparse.ArgumentParser) -> None:
    p.add_argument("--wire", type=int, choices=[1, 2], default=None,
                   help="telemetry wire format: 1 (JSON samples) or 2 (columnar, changes "
                   "between keyframes; docs/protocol.md); default: the agent's own")


def _agent_wire(args: argparse.Namespace) -> dict[str, int]:
    """``--wire`` as NodeAgent keywords; refused in one sentence where NodeAgent lacks it."""
    wire = getattr(args, "wire", None)
    if wire is None:
        return {}
    import inspect

    from fleetdeck.agents.agent import NodeAgent

    if "wire" not in inspect.signature(NodeAgent).parameters:
        raise UserError("--wire needs a node agent with the v2 wire encoder, which this build "
                        "lacks.")
    return {"wire": wire}


def build_parser() -> Parser:
    parser = Parser(prog="fleetdeck", description=__doc__.splitlines()[0] if __doc__ else None,
                    epilog="'fleetdeck COMMAND --help' says a command's options and an "
                    "example, and a one-shot command's exit statuses. To begin:\n  fleetdeck "
                    "demo\n  fleetdeck status --broker mqtt://127.0.0.1:1883")
    parser.add_argument("--version", action="version", version=f"fleetdeck {__version__}")
    parser.add_argument("--log-level", default="warning",
                        choices=["debug", "info", "warning", "error"],
                        help="how much is logged on stderr (the console's lines go to its "
                        "console.log): warnings and worse by default; info and debug say more, "
                        "debug the MQTT libraries' own lines too; give it before the command")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True

    p = sub.add_parser("demo", help="private broker + simulated fleet + console, in one go")
    p.add_argument("--nodes", type=_positive(int, "--nodes"), default=64,
                   help="simulated fleet size (default 64)")
    p.add_argument("--broker-kind", choices=["auto", "mosquitto", "amqtt"], default="auto",
                   help="auto = Mosquitto if installed, else the embedded amqtt broker")
    p.add_argument("--interval", type=_positive(float, "--interval"), default=1.0,
                   help="seconds between samples of each simulated node (default 1)")
    p.add_argument("--cluster", type=_id("cluster"), default=DEFAULT_CLUSTER,
                   help=f"cluster name (default {DEFAULT_CLUSTER!r})")
    p.add_argument("--seed", type=int, default=1,
                   help="same seed -> same simulated telemetry (default 1)")
    p.add_argument("--headless", type=_positive(float, "--headless"), metavar="SECONDS",
                   help="no TUI: run that long, then print the status table (smoke test)")
    p.add_argument("--port", type=_port, default=0,
                   help="the private broker's loopback port (default 0: a free one)")

    p = sub.add_parser("broker", help="run a private broker on loopback until interrupted")
    p.add_argument("--kind", choices=["auto", "mosquitto", "amqtt"], default="auto",
                   help="auto = Mosquitto if installed, else the embedded amqtt broker")
    p.add_argument("--bind", default="127.0.0.1", type=_bind, help="address to listen on (default "
                   "127.0.0.1)")
    p.add_argument("--port", type=_port, default=1883, help="TCP port (default 1883; 0: any "
                   "free port, printed)")
    p.add_argument("--allow-remote", action="store_true",
                   help="let the embedded amqtt broker bind a non-loopback address (unsafe)")
    p.add_argument("--serve-embedded", action="store_true", help=argparse.SUPPRESS)

    p = sub.add_parser("agent", help="run one node agent (or print one sample with --once)")
    # No defaults here: unset flags fall through to $FLEETDECK_* and the config file.
    p.add_argument("--config", metavar="FILE",
                   help="TOML config (default: /etc/fleetdeck/agent.toml if it exists)")
    p.add_argument("--check-config", action="store_true",
                   help="validate the configuration, print it and exit")
    p.add_argument("--broker", metavar="URL", help="mqtt://[user:pass@]host:port or mqtts://…")
    p.add_argument("--ca", metavar="FILE", help="CA bundle for mqtts:// (or $FLEETDECK_CA)")
    p.add_argument("--cert", metavar="FILE",
                   help="client certificate for mutual TLS (or $FLEETDECK_CERT)")
    p.add_argument("--key", metavar="FILE", help="client key for mutual TLS (or $FLEETDECK_KEY)")
    p.add_argument("--cluster", help="cluster name (default 'demo')")
    p.add_argument("--node-id", help="node id (default: this host's short name)")
    p.add_argument("--source",
                   help="telemetry source: sim (default), or real readers joined by '+': "
                   "sysfs (InfiniBand), nvml or nvsmi (GPUs), e.g. sysfs+nvml")
    p.add_argument("--sysfs-root", metavar="DIR",
                   help="sysfs mount to read InfiniBand from (default /sys; tests use a copy)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="keep the drain state, executed command ids and undelivered events "
                   "here, so they survive agent restarts (without it a restarted agent "
                   "forgets a drain)")
    p.add_argument("--kernel-log", metavar="journal|FILE",
                   help="follow XID and IB carrier lines from the journal or a log file")
    p.add_argument("--expect-gpus", type=int, metavar="N",
                   help="GPUs this node should have (8 on ND H100 v5): one missing at start "
                   "then fails the node (default: as many as found)")
    p.add_argument("--expect-ib-ports", type=int, metavar="N",
                   help="InfiniBand ports it should have (8 on ND H100 v5; default: as many "
                   "as found)")
    p.add_argument("--expect-ib-rate", type=float, metavar="GBPS",
                   help="the link rate its ports should run at (400 on NDR, 200 on HDR): a "
                   "port slower than it fails N1 (default: not stated in its birth, and the "
                   "console judges by NDR's 400)")
    p.add_argument("--leaf", metavar="NAME", help="the leaf switch group its HCAs are cabled "
                   "to (rail K is NAME-rK): the console names suspect switches only among "
                   "nodes that say theirs")
    p.add_argument("--rack", metavar="NAME", help="its rack (groups silent nodes by rack)")
    p.add_argument("--spine-group", metavar="NAME", help="the spine group above its leaf")
    p.add_argument("--interval", type=_positive(float, "--interval", INTERVAL_MAX_S),
                   help="seconds (default 1)")
    p.add_argument("--keepalive", type=_positive(int, "--keepalive", KEEPALIVE_MAX_S),
                   help="MQTT keepalive seconds (default 10)")
    p.add_argument("--seed", type=int, help="simulated source only")
    p.add_argument("--command-key", metavar="FILE",
                   help="obey only commands signed with this key (HMAC-SHA256)")
    p.add_argument("--once", action="store_true",
                   help="print one birth and one telemetry message as JSON and exit (no broker)")
    _add_wire(p)

    p = sub.add_parser("sim", help="run N simulated node agents (in one process or --procs N)")
    _add_broker(p)
    for action in p._actions:
        if action.dest == "command_key":  # the simulator checks signatures, it does not sign
            action.help = ("obey only commands signed with this key, in every simulated agent "
                           "and the simulated scheduler, like 'fleetdeck agent --command-key' "
                           "(default $FLEETDECK_COMMAND_KEY_FILE)")
    p.add_argument("--nodes", type=_positive(int, "--nodes"), default=None,
                   help="fleet size (default: the scenario's [fleet] nodes, else 64)")
    p.add_argument("--prefix", type=_id("node name prefix"), default="gpu",
                   help="node names are PREFIX0001, PREFIX0002, … (default 'gpu')")
    # The agent's own bounds (agents/config.py): a birth with interval_s > 3600 is refused.
    p.add_argument("--interval", type=_positive(float, "--interval", INTERVAL_MAX_S),
                   default=1.0, help="seconds between samples of each node (default 1)")
    p.add_argument("--keepalive", type=_positive(int, "--keepalive", KEEPALIVE_MAX_S),
                   default=10, help="MQTT keepalive seconds of each node's session (default 10)")
    p.add_argument("--seed", type=int, default=0,
                   help="same seed + scenario -> same telemetry (timestamps aside)")
    p.add_argument("--connect-concurrency", type=_positive(int, "--connect-concurrency"),
                   default=16, help="simultaneous MQTT connects (use 1 with amqtt)")
    p.add_argument("--scenario", metavar="NAME|FILE",
                   help="jobs + fault timeline: a built-in name (e.g. 'demo') or a .toml file "
                   "(docs/scenarios.md); default: none, the fleet stays healthy")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="keep N generated jobs queued or running (default 0: idle fleet)")
    p.add_argument("--nodes-per-leaf", type=_positive(int, "--nodes-per-leaf"), default=None,
                   help="nodes per rail-aligned leaf group (default 16)")
    p.add_argument("--procs", type=int, default=1, metavar="N",
                   help="spread the fleet's agents over N processes (one MQTT session and Last "
                   "Will per node still; one simulated scheduler; default 1)")
    p.add_argument("--state-dir", metavar="DIR",
                   help="keep each node's drain, executed command ids and error windows in "
                   "DIR/CLUSTER, as 'fleetdeck agent --state-dir' does, so a restarted "
                   "simulator's drained nodes come back drained (default: memory only); a "
                   "second simulator of the same --prefix on DIR/CLUSTER is refused, exit 2, "
                   "as a second agent of a node is (a lock, sim-PREFIX.lock)")
    _add_wire(p)
    p.add_argument("--fault-rates", metavar="NAME|FILE", help="draw faults from a rate table "
                   "(failures per node-day by cause, docs/scenarios.md): 'rates-week' or a .toml")
    p.add_argument("--out", metavar="FILE", help="no broker: run in virtual time, as fast as the "
                   "CPU allows, into a recording for 'fleetdeck replay' (needs --duration)")
    p.add_argument("--duration", metavar="SPAN", help="with --out: simulated time (7d, 36h, 90m)")
    p.add_argument("--force", action="store_true",
                   help="with --out: overwrite the file if it exists (default: refuse)")

    p = sub.add_parser("inject", help="inject a fault into a running 'fleetdeck sim'")
    _add_broker(p)
    _unsigned(p, "a simulator takes its faults (sim/inject) unsigned; its agents check the "
              "commands of drain, resume and restart-job")
    p.add_argument("fault", metavar="FAULT",
                   help="ib_flap, link_down, symbol_storm, leaf_switch, xid (any code: "
                   "gpu=2 code=119 then=45; code=154 action=2), xid79, ecc_dbe, thermal, "
                   "power_cap (gpu=3 limit=400), nvlink, pcie_replay, agent_death, "
                   "node_death, repair, agent_restart, submit, cancel, job_hang (job=41 "
                   "[duration=5m])")
    # default=[]: argparse counts a '*' positional without one as required, and said "FAULT
    # and KEY=VALUE are required" of a bare 'inject'.
    p.add_argument("params", nargs="*", default=[], metavar="KEY=VALUE",
                   help="e.g. node=gpu0012 port=3 count=5 (docs/scenarios.md)")
    # --timeout, as drain, resume, retire and restart-job name the wait for an answer (a
    # newcomer's --timeout was refused here); --wait still works.
    p.add_argument("--timeout", "--wait", dest="wait", type=_positive(float, "--timeout"),
                   default=5.0, metavar="SECONDS",
                   help="how long to wait for the simulator's answer (default 5; --wait is the "
                   "same)")

    p = sub.add_parser("console", help="open the operator console (Textual TUI)")
    _add_broker(p, several=True)
    p.add_argument("--tick", type=_positive(float, "--tick"), default=0.5,
                   help="seconds between screen refreshes (default 0.5)")
    p.add_argument("--read-only", action="store_true", help="no commands: header shows [R]")
    p.add_argument("--operator", default=os_user(), type=_operator,
                   help="who is at the keyboard (audit log; default your login name)")
    p.add_argument("--audit-log", metavar="FILE", default=None,
                   help="append-only JSON-lines audit log (default "
                   "$XDG_STATE_HOME/fleetdeck/audit.jsonl; a running demo's own against its "
                   "broker)")
    _add_db(p)
    p.add_argument("--no-store", action="store_true",
                   help="keep no history in the SQLite store")
    p.add_argument("--digests", action="store_true",
                   help="fleet-wide views from the sharded collectors' digests (one core: "
                   "65,536 nodes at the default 5 s digest refresh, 100,000 with 'collect "
                   "--shard K/N --digest-every 10'); node detail subscribes to that node's "
                   "raw telemetry while it is open")
    _add_command_parsers(sub)

    p = sub.add_parser("serve", help="the console in a browser (textual-serve), read-only "
                       "by default")
    _add_broker(p)
    p.add_argument("--bind", default="127.0.0.1", type=_bind, help="address to listen on (default "
                   "127.0.0.1; anyone who reaches it sees the console)")
    p.add_argument("--port", type=_port, default=8000, help="TCP port (default 8000)")
    p.add_argument("--public-url", metavar="URL", default=None, type=_public_url,
                   help="the URL browsers use, when behind a reverse proxy")
    p.add_argument("--allow-commands", action="store_true",
                   help="let browser tabs drain, resume and restart jobs (needs --operator)")
    p.add_argument("--operator", default=None, type=_operator,
                   help="who the audit log names for commands "
                   "from browser tabs (with --allow-commands)")
    p.add_argument("--tick", type=_positive(float, "--tick"), default=0.5,
                   help="seconds between screen updates in each tab (default 0.5)")

    p = sub.add_parser("status", help="one-shot fleet status (table or --json)", epilog=(
        "exit 0 seen, 1 with --fail-on a bad node, 2 no broker or no node, 3 the fleet not "
        "seen whole: the broker connection lost during the watch, nodes not heard (with "
        "--fail-on), the broker dropped part "
        "of its retained messages at connect (nodes missing from every count; "
        "retained_burst_cut in --json; docs/reliability.md), or with --digests a cluster's "
        "bridge into this broker is down (bridge in --json; docs/security.md)"))
    _add_broker(p, several=True)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--all", action="store_true", dest="every_node",
                   help="list every node in the table (above 64 healthy nodes in service, "
                   "they are one line by default; --json lists every node)")
    # Bounded: 1e300 was taken, a one-shot status that never printed (a CLI fuzz round).
    p.add_argument("--wait", type=_positive(float, "--wait", STATUS_WAIT_MAX_S), default=None,
                   metavar="SECONDS",
                   help="how long to watch the fleet (default 3.5: three 1 s telemetry "
                        "intervals, so a silent node reads stale and rules that compare "
                        "samples can fire; longer, up to 60, while a node whose agent samples "
                        "less often has not sent its first sample)")
    p.add_argument("--digests", action="store_true",
                   help="read the sharded collectors' per-node digests instead of raw "
                   "telemetry (their verdicts, owner per node; needs 'collect --shard')")
    p.add_argument("--fail-on", choices=("failed", "degraded"), metavar="VERDICT",
                   help="exit 1 when a node reads VERDICT or worse: 'failed' (failed, "
                   "offline) or 'degraded' (also degraded, stale), 3 when none does but "
                   "nodes sent nothing in the watch (raise --wait); for 'status || page'")

    sub.add_parser("schema", help="print the JSON Schema of every protocol message")

    p = sub.add_parser("record", help="record every message under the cluster's topic root")
    _add_broker(p)
    _unsigned(p, "record asks for keyframes with the ctl/rebirth broadcast, which agents "
              "answer unsigned")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="recording file (.jsonl, or .jsonl.gz to compress)")
    # Bounded: 99999999999d was taken, a recording no one would stop (a CLI fuzz round).
    p.add_argument("--duration", type=_span("--duration", RECORD_MAX_DAYS), metavar="SPAN",
                   help="stop after that long: 90 (seconds), 30s, 5m, 2h, at most "
                   f"{RECORD_MAX_DAYS:g}d (default: until Ctrl-C)")
    p.add_argument("--force", action="store_true",
                   help="overwrite --out if it exists (default: refuse)")

    p = sub.add_parser("collect", help="headless collector: keep history in the SQLite store")
    _add_broker(p)
    _add_db(p)
    p.add_argument("--retention-days", type=_positive(float, "--retention-days"), default=7.0,
                   help="how long history is kept (default 7)")
    p.add_argument("--metrics", metavar="ADDR", default=None,
                   help="serve Prometheus metrics on HOST:PORT, :PORT (all interfaces) or PORT "
                   "(loopback)")
    p.add_argument("--shard", metavar="K/N", default=None,
                   help="run as collector K of N: own a stable share of the nodes (rendezvous "
                   "hashing over the live collectors), subscribe to exactly their topics, "
                   "publish a digest per node, take over the nodes of a collector that dies")
    p.add_argument("--digest-every", type=_positive(float, "--digest-every"), default=None,
                   metavar="SECONDS", help="with --shard: re-send every node's digest this "
                   "often besides on every change (default 5; 10 halves what consoles on "
                   "digests receive, for 100,000+ nodes)")
    p.add_argument("--status-every", type=_positive(float, "--status-every"), default=60.0,
                   metavar="SECONDS", help="a progress line on stderr this often (default 60)")

    p = sub.add_parser("events", help="events and verdict changes from the store (like sinfo -R)")
    _add_db(p)
    p.add_argument("--since", default="1h",
                   help="a span (90s, 15m, 1h, 7d), a clock time (18:40: the latest, today "
                   "or yesterday) or an ISO time, UTC unless it says (default 1h)")
    p.add_argument("--node", metavar="HOSTLIST", help="only these nodes, e.g. gpu[0010-0020]")
    p.add_argument("--kind", metavar="KIND[,KIND…]", help="only these event kinds (xid, drain…)")
    # Bounded: SQLite's integers stop at 2^63 - 1, and 2^64 ended in aiosqlite's
    # OverflowError traceback (a CLI audit).
    p.add_argument("--limit", type=_positive(int, "--limit", EVENTS_LIMIT_MAX), default=10_000,
                   help="at most this many rows, the newest (default 10000)")
    p.add_argument("--json", action="store_true", help="print the rows as one JSON array")

    p = sub.add_parser("report", help="job interruptions by cause, GPU-hours lost, effective "
                       "training time ratio (from the store)")
    _add_db(p)
    p.add_argument("--since", default="7d", help="a span (1h, 7d), a clock time (18:40) or an "
                   "ISO time, UTC unless it says (default 7d)")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = sub.add_parser("history", help="a node's per-minute telemetry history from the store")
    _add_db(p)
    p.add_argument("node", type=_id("node id"), metavar="NODE",
                   help="one node, e.g. gpu0012")
    p.add_argument("--metric", choices=["util", "temp", "power", "clock", "ib"], default="util",
                   help="GPU utilisation, temperature, power, SM clock, or IB throughput per "
                   "port (default util)")
    p.add_argument("--since", default="1h",
                   help="a span (90s, 15m, 1h, 7d), a clock time (18:40: the latest, today "
                   "or yesterday) or an ISO time, UTC unless it says (default 1h)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the rows as one JSON array")
    out.add_argument("--plot", action="store_true", help="a chart in the terminal, one line "
                     "per GPU (or IB port)")

    # No abbreviations: "--to 30" (meant: stop 30 s in) was taken for --to-broker 30 and
    # answered "broker URL '30' must start with mqtt://" (a replay drill); "--to" is caught
    # below and answered with both options.
    p = sub.add_parser("replay", help="replay a recording: in the console, headless, or "
                       "into a broker", allow_abbrev=False)
    p.add_argument("file", metavar="FILE",
                   help="a recording (.jsonl.gz) from record, the console's R or sim --out")
    p.add_argument("--headless", action="store_true",
                   help="no TUI: replay as fast as possible and print the final state")
    p.add_argument("--until", metavar="TIME",
                   help="with --headless: stop that far into the recording (90, 90s, 15m, 2h) "
                   "or at a UTC clock time (04:02:30, 2026-12-05T04:02), or start or end, as "
                   "':seek' takes it")
    # A floor: 1e-9 made billions of ticks of an hour's recording (a CLI fuzz round).
    p.add_argument("--tick", type=_between(REPLAY_TICK_MIN_S, INTERVAL_MAX_S, "--tick"),
                   default=None, metavar="SECONDS",
                   help="with --headless: console tick in recorded time (default 0.5, as live; "
                   f"30 for a week from 'sim --out'; {REPLAY_TICK_MIN_S:g} to "
                   f"{INTERVAL_MAX_S:g})")
    p.add_argument("--summary-json", action="store_true",
                   help="with --headless: print the final state as JSON (status --json shape)")
    p.add_argument("--to-broker", metavar="URL", help="republish what the recorded fleet said "
                   "into a broker (never the operators' commands in it)")
    p.add_argument("--as-cluster", type=_id("cluster"), metavar="NAME",
                   help="with --to-broker: publish under this cluster name instead of the "
                   "recording's")
    p.add_argument("--force", action="store_true",
                   help="with --to-broker: replay into a cluster the broker already holds")
    p.add_argument("--speed", type=_between(0.5, 100, "--speed"), default=1.0,
                   help="replay speed, 0.5-100 (default 1)")
    p.add_argument("--to", dest="to_ambiguous", help=argparse.SUPPRESS)
    for name, command in sub.choices.items():
        command.example = EXAMPLES[name]
        said = [command.epilog] if command.epilog else []
        said += [EXIT_STATUS[name]] if name in EXIT_STATUS else []
        command.epilog = "\n".join([*said, "example:", f"  {EXAMPLES[name]}"])
    return parser


EXIT_CLOSED_PIPE = 141
"""128 + SIGPIPE: what a shell reports for a tool whose reader went away (``yes | head``)."""


def main(argv: Sequence[str] | None = None) -> int:
    try:
        try:
            return _main(argv)
        finally:
            # What is still buffered (also --help's text, before argparse's exit) goes out
            # here, where a closed pipe is handled, not in the interpreter's flush at exit.
            sys.stdout.flush()
    except BrokenPipeError:
        # The reader (head, grep -q, less quit early) is gone: there is no one to tell, so end
        # quietly as Unix tools do. stdout goes to devnull first, or the interpreter's own
        # flush at exit fails on the same pipe and prints a second error (Python docs, signal
        # module, "Note on SIGPIPE").
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


def _subparser(parser: argparse.ArgumentParser, command: str | None) -> Parser | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            found = action.choices.get(command or "")
            return found if isinstance(found, Parser) else None
    return None


def _options_first(parser: Parser, words: Sequence[str], commands: Sequence[str]) -> str | None:
    """The line to type for a command's options given before the command ('fleetdeck --json
    status', 'fleetdeck --cluster x drain gpu1'): argparse takes them for the top level's, so
    the first read "--json is no option of fleetdeck status: did you mean --json?" and the
    second "unknown command 'x'". None where no word before the command is an option of none
    of the top level's."""
    import shlex

    at = next((i for i, w in enumerate(words) if w in commands), None)
    if not at:
        return None
    top = parser._option_string_actions
    front: list[str] = []
    moved: list[str] = []
    i = 0
    while i < at:
        word, name = words[i], words[i].partition("=")[0]
        action = top.get(name)
        if action is None:
            moved.append(word)
        elif action.nargs == 0 or "=" in word or i + 1 >= at:
            front.append(word)
        else:
            front += [word, words[i + 1]]
            i += 1
        i += 1
    flags = [w.partition("=")[0] for w in moved if w.startswith("-")]
    sub = _subparser(parser, words[at])
    if not moved or not moved[0].startswith("-") or sub is None or any(
            f not in sub.options() for f in flags):
        return None  # not options of that command: argparse's own words, or the typo's
    line = shlex.join(["fleetdeck", *front, words[at], *words[at + 1:], *moved])
    return (f"{' '.join(moved)} {'goes' if len(flags) == 1 else 'go'} after the command "
            f"{words[at]}: {line}")


def _options_last(words: Sequence[str], command: str, flag: str,
                  action: argparse.Action) -> str | None:
    """The line to type for an option of fleetdeck's own (``--log-level``) given after the
    command: it moved before it. None where the command is not among ``words``."""
    import shlex

    if command not in words:
        return None
    at = words.index(command)
    rest = list(words[at + 1:])
    moved: list[str] = []
    for i, word in enumerate(rest):
        if word.partition("=")[0] != flag:
            continue
        takes = action.nargs != 0 and "=" not in word
        if takes and i + 1 >= len(rest):
            return None  # its value is missing too: argparse's own words
        moved = rest[i:i + 2] if takes else [word]
        del rest[i:i + len(moved)]
        break
    if not moved:
        return None
    line = shlex.join(["fleetdeck", *words[:at], *moved, command, *rest])
    return f"{flag} goes before the command {command}: {line}"


def _unrecognized(parser: argparse.ArgumentParser, sub: Parser | None, extra: list[str]) -> str:
    """argparse's "unrecognized arguments" and what to type instead: the option of this command
    it is likely a typo of, or the commands that have it (``drain --json`` was refused without
    saying that drain has none: its outcome is its exit status and the audit log)."""
    said = f"unrecognized arguments: {' '.join(extra)}"
    flag = next((arg.partition("=")[0] for arg in extra if arg.startswith("--")), None)
    if sub is None or flag is None:
        return said
    top = parser._option_string_actions
    if flag not in sub.options() and flag in top and flag not in ("-h", "--help"):
        # 'fleetdeck status --log-level debug' read "unrecognized arguments: --log-level
        # debug": an option of fleetdeck's own, given after the command (a newcomer's run).
        return _options_last(Parser.argv, sub.prog.rpartition(" ")[2], flag, top[flag]) or said
    if flag in sub.options() and isinstance(parser, Parser):
        # 'fleetdeck --json status' read "--json is no option of fleetdeck status: did you
        # mean --json?": it is, given before the command.
        return _options_first(parser, Parser.argv, [sub.prog.rpartition(" ")[2]]) or said
    close = difflib.get_close_matches(flag, sub.options(), n=1, cutoff=0.75)
    if close:
        return f"{flag} is no option of {sub.prog}: did you mean {close[0]}?"
    subs = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
    having = [name for name, other in (subs.choices.items() if subs else ())
              if isinstance(other, Parser) and flag in other.options()]
    if having:
        return (f"{flag} is no option of {sub.prog} (only {', '.join(having)} "
                f"take{'s' if len(having) == 1 else ''} it)")
    return said


SPAN_OPTIONS = ("--since", "--duration", "--until")
"""Options that take a span, which may be written with a minus."""


def _glued_spans(argv: Sequence[str]) -> list[str]:
    """``--since -5m`` as ``--since=-5m``: argparse takes ``-5m`` for an option and says
    "expected one argument", though journalctl's way of writing "5 minutes ago" is meant.
    So for ``--duration -5m`` and ``--until -5m``, which read "expected one argument" of an
    argument given (a newcomer's run): their own sentence says what they take."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] in SPAN_OPTIONS and re.match(r"-\d", arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    words = _glued_spans(sys.argv[1:] if argv is None else argv)
    Parser.argv = words
    args, extra = parser.parse_known_args(words)
    if extra:
        # Leftovers belong to the subcommand: its parser names it and its --help (argparse
        # would blame 'fleetdeck' and send the reader to the top-level help).
        sub = _subparser(parser, args.command)
        (sub or parser).error(_unrecognized(parser, sub, extra))
    from fleetdeck.logs import setup_logging

    setup_logging(args.log_level, one_shot=args.command in ONE_SHOT,
                  says_its_link=args.command in SAYS_ITS_LINK)
    for sentence in unknown_variables(os.environ):
        print(f"fleetdeck {args.command}: {sentence}", file=sys.stderr)
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


class _Terminated(Exception):
    """SIGTERM or SIGHUP: unwind like Ctrl-C does, so ``finally`` blocks clean up."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_terminated(signum: int, frame: object) -> None:
    raise _Terminated(signum)


def cmd_broker(args: argparse.Namespace) -> int:
    import signal

    from fleetdeck.embedded_broker import run_embedded

    if args.serve_embedded or args.kind == "amqtt":
        return run_embedded(args.bind, args.port, allow_remote=args.allow_remote,
                            announce=not args.serve_embedded)
    from fleetdeck.broker import ManagedBroker, find_mosquitto

    kind = args.kind
    if kind == "auto" and find_mosquitto() is None:
        print("mosquitto not found; running the embedded amqtt broker (demo only)",
              file=sys.stderr)
        return run_embedded(args.bind, args.port, allow_remote=args.allow_remote)
    # Mosquitto runs in its own session (a Ctrl-C meant for us must not kill it first), so
    # nothing stops it but us: SIGTERM and SIGHUP must unwind through the finally below as
    # Ctrl-C does, or the child and its temporary directory outlive us.
    stops = (signal.SIGTERM, signal.SIGHUP)
    for sig in stops:
        signal.signal(sig, _raise_terminated)
    broker: ManagedBroker | None = None
    try:
        broker = ManagedBroker("mosquitto", host=args.bind, port=args.port)
        broker.start()
        assert broker.proc is not None
        print(f"{broker.label} listening on {broker.url} (Ctrl-C to stop)", file=sys.stderr)
        code = broker.proc.wait()
        why = broker.last_words() or f"exit code {code}"
        raise UserError(f"{broker.label} stopped by itself: {why.rstrip('.')}.")
    except _Terminated as stop:
        return 128 + stop.signum
    finally:
        for sig in (*stops, signal.SIGINT):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the clean-up short
        if broker is not None:
            broker.close()


def cmd_agent(args: argparse.Namespace) -> int:
    from fleetdeck.agents.config import load_settings
    from fleetdeck.agents.run import ReaderLeftOpen, run_agent, sample_once

    given: dict[str, Any] = {
        "broker": args.broker, "cluster": args.cluster, "node_id": args.node_id,
        "source": args.source, "sysfs_root": args.sysfs_root, "state_dir": args.state_dir,
        "kernel_log": args.kernel_log, "interval_s": args.interval,
        "keepalive": args.keepalive, "seed": args.seed, "command_key_file": args.command_key,
        "ca": args.ca, "cert": args.cert, "key": args.key, "wire": args.wire,
        "expect_gpus": args.expect_gpus, "expect_ib_ports": args.expect_ib_ports,
        "expect_ib_rate": args.expect_ib_rate,
        "rack": args.rack, "leaf": args.leaf, "spine_group": args.spine_group,
    }
    settings = load_settings(args.config, given)
    if args.check_config:
        from fleetdeck.brokerurl import parse_broker_url

        shown = settings.model_dump(mode="json")
        shown["broker"] = str(parse_broker_url(settings.broker))  # never print the password
        print(json.dumps(shown, indent=2))
        return 0
    if args.once:
        print(json.dumps(sample_once(settings), indent=2))
        return 0
    code = 0
    try:
        closed = asyncio.run(run_agent(settings,
                                       reread=lambda: load_settings(args.config, given)))
    except ReaderLeftOpen as left:
        # Said as _main would have, a broker error's sentence or a bug's traceback.
        closed, err = False, left.error
        if isinstance(err, UserError):
            print(f"fleetdeck {args.command}: {err}", file=sys.stderr)
            code = err.exit_code
        elif isinstance(err, SystemExit):
            # As the interpreter ends on one: its code, or its message on stderr and 1 (was: a
            # traceback and 1, whatever its code).
            if err.code is None or isinstance(err.code, int):
                code = err.code or 0
            else:
                print(err.code, file=sys.stderr)
                code = 1
        elif isinstance(err, (KeyboardInterrupt, asyncio.CancelledError)):
            # A backstop: the agent's loop takes SIGINT itself (agents/run.py, ``on_signal``),
            # so Ctrl-C is a stop, not this.
            code = 130
        else:
            traceback.print_exception(err)
            code = 1
    if not closed:
        # A reader did not close (nvmlShutdown on a wedged driver): the interpreter's exit, and
        # the NVIDIA library's own exit code, may wait on the same driver, past systemd's stop
        # timeout (agents/real/source.py, ``CLOSE_WAIT_S``).
        import logging

        from fleetdeck.runtime import force_exit

        logging.shutdown()
        sys.stderr.flush()
        force_exit(code)
    return 0


def cmd_sim(args: argparse.Namespace) -> int:
    from fleetdeck.agents.fleet import FleetOptions, run_fleet
    from fleetdeck.agents.sim import rates
    from fleetdeck.agents.sim.footprint import refuse_unless_it_fits
    from fleetdeck.agents.sim.scenario import load_scenario
    from fleetdeck.agents.sim.spec import SpecError
    from fleetdeck.agents.sim.topology import TopologySpec
    from fleetdeck.agents.state import hold_sim_lock, usable_state_dir

    scenario = table = None
    try:
        if args.scenario:
            scenario = load_scenario(args.scenario)
        if args.fault_rates:
            table = rates.load_rates(args.fault_rates)
            scenario = rates.with_table(scenario, table)
        duration = rates.parse_span(args.duration) if args.duration else 0.0
    except SpecError as err:
        raise UserError(f"{err}.") from None
    if bool(args.out) != bool(args.duration):
        raise UserError("--out and --duration go together (a run in virtual time into a file).")
    # Command line first, then the scenario's [fleet] table, then the defaults.
    sc_nodes = scenario.nodes if scenario else None
    sc_leaf = scenario.nodes_per_leaf if scenario else None
    topo = TopologySpec(
        nodes_per_leaf=args.nodes_per_leaf or sc_leaf or 16,
        nodes_per_rack=(scenario.nodes_per_rack if scenario else None) or 4,
        leaves_per_spine_group=(scenario.leaves_per_spine_group if scenario else None) or 8,
    )
    jobs = args.jobs if args.jobs is not None else (
        (scenario.background_jobs if scenario else None) or 0)
    if jobs < 0:
        raise UserError("--jobs must be 0 or more.")
    nodes = args.nodes or sc_nodes or 64
    if scenario is not None and sc_nodes and nodes < sc_nodes:
        # Said up front: otherwise a demo scenario on a small fleet shows jobs pending forever
        # and, minutes later, one "skipped" warning per fault aimed at them.
        big = sorted({int(a.get("nodes") or 0) for a in scenario.actions
                      if a.kind == "submit" and int(a.get("nodes") or 0) > nodes})
        never = (f"; its jobs of {', '.join(map(str, big))} nodes never start and faults aimed "
                 "at them are skipped") if big else ""
        print(f"fleetdeck sim: scenario {scenario.name or args.scenario} is written for "
              f"{sc_nodes} nodes, this fleet has {nodes}{never}", file=sys.stderr)
    if args.out and args.state_dir:
        raise UserError("--state-dir keeps a live simulator's drains across its restarts; "
                        "'sim --out' runs no agents to keep them: drop one of the two.")
    if args.out and args.procs != 1:
        # It was ignored: 'sim --procs 2 --out … --duration 1m' ran in one process and said
        # nothing of it (a newcomer's run).
        raise UserError("--procs spreads a live simulator's agents over processes; 'sim --out' "
                        "runs no agents to spread: drop one of the two.")
    if not 1 <= args.procs <= nodes:
        raise UserError(f"--procs must be a whole number from 1 to the fleet size ({nodes}), "
                        f"not {args.procs}.")
    refuse_unless_it_fits(nodes, offline=bool(args.out))
    opts = FleetOptions(
        cluster=args.cluster, nodes=nodes, prefix=args.prefix,
        interval_s=args.interval, keepalive=args.keepalive, seed=args.seed,
        connect_concurrency=args.connect_concurrency, jobs=jobs, topology=topo,
        scenario=scenario, command_key=_command_key(args), agent_kwargs=_agent_wire(args),
        # A directory per cluster: the files name only the node, and one DIR used for two
        # clusters brought the first's drains back on the second (a review).
        tune_gc=True, state_dir=usable_state_dir(Path(args.state_dir) / args.cluster)
        if args.state_dir else None,
    )
    lock = None
    if opts.state_dir is not None:
        # Held until this process and its --procs workers (each inherits it) exit: two
        # simulators on one directory overwrote each other's drain state, as two agents of
        # one node would (agents/state.py).
        lock = hold_sim_lock(opts.state_dir, args.cluster, args.prefix, Path(args.state_dir))
    drawn = None
    if table is not None and scenario is not None:
        from fleetdeck.agents.sim.topology import node_names

        drawn = rates.add_faults(scenario, table, node_names(opts.nodes, opts.prefix),
                                 seed=opts.seed,
                                 until_s=duration or rates.live_horizon_s(table, opts.nodes))
    if args.out:
        from fleetdeck.agents.sim.offline import SEGMENT_S, run_cli
        from fleetdeck.console.recording import RecordingWriter

        out = recording_out(args.out)
        if out.exists() and not args.force:
            raise UserError(f"{out} already exists; pick another --out, or pass --force to "
                            "overwrite that recording.")
        return run_cli(opts, duration, table, drawn, lambda started: RecordingWriter(
            out, args.cluster, started=started, source="fleetdeck sim --out",
            segment_s=SEGMENT_S, overwrite=args.force))
    from fleetdeck.console.cli.progress import ProgressLine

    url = _url(args)
    # The agents report (connected, total); the bar is drawn here, in the front end.
    bar = ProgressLine(f"sim {opts.cluster}: agents connecting", opts.nodes, unit="agents")

    def on_connect(done: int, total: int) -> None:
        bar.update(done, total)
        if done >= total:
            bar.close(f"sim {opts.cluster}: all {total} agents connected to {url}")

    if args.procs == 1:
        with bar:
            asyncio.run(run_fleet(url, opts, on_connect))
        return 0
    from fleetdeck.agents.fleet import run_spread

    with bar:
        problem = run_spread(url, opts, args.procs, args.log_level, on_connect, lock)
    if problem:
        raise UserError(f"{problem}.")
    return 0


def cmd_inject(args: argparse.Namespace) -> int:
    import aiomqtt

    from fleetdeck.agents.fleet import inject
    from fleetdeck.agents.sim.spec import SpecError, parse_action, parse_kv
    from fleetdeck.brokerurl import describe_mqtt_error

    try:
        entry: dict[str, object] = {"fault": args.fault, **parse_kv(args.params)}
        parse_action(entry, default_at=0)  # refuse typos here, before touching the broker
    except SpecError as err:
        raise UserError(f"{err}.") from None
    url = _url(args)
    try:
        ok, detail = asyncio.run(inject(url, args.cluster, entry, timeout=args.wait))
    except TimeoutError:
        raise UserError(f"no simulator answered on cluster '{args.cluster}' within "
                        f"{args.wait:g} s (is 'fleetdeck sim' running there?).") from None
    except aiomqtt.MqttError as err:
        raise UserError(describe_mqtt_error(url, err)) from None
    if not ok:
        raise UserError(f"the simulator refused it: {detail}.")
    print(f"injected: {detail}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.status import run_status

    return run_status(_url(args), args.cluster, args.wait, args.json, digests=args.digests,
                      fail_on=args.fail_on, every_node=args.every_node,
                      command_key=_command_key(args, watch_only=True))


def cmd_console(args: argparse.Namespace) -> int:
    from fleetdeck.console.store import default_db_path, path_problem
    from fleetdeck.console.tui.app import run_console

    clusters: list[str] = args.cluster
    if args.db and len(clusters) > 1:
        raise UserError("--db names one store, but --cluster names several clusters: each "
                        "keeps its own default store (drop --db, or --no-store)")
    db = given_file(args.db, "--db") if args.db and not args.no_store else None
    stores = {name: None if args.no_store else (db or default_db_path(name))
              for name in clusters}
    for path in stores.values():
        problem = path_problem(path) if path is not None else ""
        if problem:
            raise UserError(problem)
    url = _url(args)
    demo = None if args.db or args.no_store else running_demo(url, clusters)
    if demo is not None:
        # A second console on the demo's fleet filled the default store (<cluster>.db, the
        # operator's real one when their cluster is the default 'demo') with simulated
        # history; the demo's own store is its console's to write (one writer a store).
        # Named as the demo's exit summary and 'events' look for them (demo.CONSOLE_STORES).
        stores = {name: demo / f"console-{os.getpid()}-{name}.db" for name in clusters}
        print(f"fleetdeck console: {url.address} is a running demo's broker: this console's "
              f"history store is {stores[clusters[0]]}, in the demo's folder (--db FILE to "
              "choose)", file=sys.stderr)
    given = args.audit_log if args.read_only else _audit_log(args, url, "console", clusters)
    audit_log = given_file(given, "--audit-log") if given else None
    if not args.read_only:
        from fleetdeck.console.audit import AuditLog

        # Checked before the screen opens, as the one-shot commands check it: a console whose
        # log cannot be written drained and resumed with nothing recorded (a newcomer's run).
        problem = AuditLog(audit_log).check()
        if problem:
            raise UserError(f"{problem}: the console would send commands unrecorded (give a "
                            "writable --audit-log, or --read-only to only watch)")
    return run_console(
        url, clusters, tick_s=args.tick, read_only=args.read_only,
        operator=args.operator, audit_path=audit_log, command_key=_command_key(args),
        stores=stores, digests=args.digests,
    )


def cmd_serve(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.serve import run_serve

    _command_key(args)  # an unreadable or short key is one sentence here, not in every tab
    return run_serve(args.broker, args.ca, args.cert, args.key, args.cluster, args.bind,
                     args.port, allow_commands=args.allow_commands, operator=args.operator,
                     tick_s=args.tick, public_url=args.public_url,
                     command_key=args.command_key)


def cmd_drain(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.commands import run_drain

    url = _url(args)
    return run_drain(url, args.cluster, _hostlist(args.hostlist), args.reason,
                     now=args.now, operator=args.operator,
                     audit_path=_audit_log(args, url, "drain", [args.cluster]),
                     timeout_s=args.timeout, wait=not args.no_wait,
                     command_key=_command_key(args), dry_run=args.dry_run)


def cmd_resume(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.commands import run_resume

    url = _url(args)
    return run_resume(url, args.cluster, _hostlist(args.hostlist),
                      reason=args.reason, operator=args.operator,
                      audit_path=_audit_log(args, url, "resume", [args.cluster]),
                      timeout_s=args.timeout, command_key=_command_key(args),
                      dry_run=args.dry_run)


def cmd_retire(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.commands import run_retire

    url = _url(args)
    return run_retire(url, args.cluster, _hostlist(args.hostlist), reason=args.reason,
                      force=args.force, operator=args.operator,
                      audit_path=_audit_log(args, url, "retire", [args.cluster]),
                      timeout_s=args.timeout, command_key=_command_key(args))


def cmd_restart_job(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.commands import run_restart_job

    url = _url(args)
    return run_restart_job(url, args.cluster, args.job,
                           reason=args.reason, operator=args.operator,
                           audit_path=_audit_log(args, url, "restart-job", [args.cluster]),
                           timeout_s=args.timeout,
                           command_key=_command_key(args), dry_run=args.dry_run)


def cmd_record(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.replay import run_record

    return run_record(_url(args), args.cluster, args.out, args.duration, force=args.force)


def cmd_collect(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.collect import run_collect

    if args.digest_every is not None and args.shard is None:
        # Only a shard sends digests: 'collect --digest-every 5' started a plain collector on
        # the default store and said nothing of the option (a newcomer's run).
        raise UserError("--digest-every goes with --shard K/N: a collector without --shard "
                        "sends no digests.")
    db = given_file(args.db, "--db") if args.db else _db_path(args)
    if args.shard is not None and not args.db:
        from fleetdeck.console.shard import parse_shard

        # One SQLite writer per file: each shard gets its own default store.
        db = db.with_name(f"{db.stem}-{parse_shard(args.shard).member}{db.suffix}")
    every = {} if args.digest_every is None else {"digest_every_s": args.digest_every}
    return run_collect(_url(args), args.cluster, db, args.retention_days,
                       command_key=_command_key(args), metrics=args.metrics,
                       shard=args.shard, status_every_s=args.status_every, **every)


def cmd_events(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.history import run_events
    from fleetdeck.hostlist import HostlistError, expand

    try:
        nodes = expand(args.node) if args.node else None
    except HostlistError as err:
        raise UserError(f"--node: {err}") from None
    kinds = None
    if args.kind is not None:
        kinds = [k.strip() for k in args.kind.split(",") if k.strip()]
        if not kinds:
            # ',,' (or '') was no filter at all: every row listed, exit 0 (a CLI fuzz round).
            raise UserError("--kind names no kind: give one or more, as --kind xid or "
                            "--kind xid,drain.")
    return run_events(_db_path(args), args.since, nodes, kinds, args.json, args.limit,
                      cluster=args.cluster)


def cmd_report(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.report import run_report

    return run_report(_db_path(args), args.since, args.json, cluster=args.cluster)


def cmd_history(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.history import run_history

    return run_history(_db_path(args), args.node, args.metric, args.since, args.json,
                       args.plot, cluster=args.cluster)


def cmd_replay(args: argparse.Namespace) -> int:
    from fleetdeck.console.cli.replay import run_replay

    return run_replay(args)


def cmd_demo(args: argparse.Namespace) -> int:
    import signal

    from fleetdeck.demo import run_demo

    # The demo's broker and simulator run in sessions of their own (a Ctrl-C meant for the
    # console must not kill them first): a SIGTERM or a closed terminal (SIGHUP) must unwind
    # through run_demo's clean-up as q and Ctrl-C do, or they outlive the demo. While the
    # console runs, it handles both itself (an orderly exit); these cover start-up, the
    # headless mode and the clean-up.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise_terminated)
    try:
        return run_demo(args)
    except _Terminated as stop:
        return 128 + stop.signum


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "demo": cmd_demo,
    "broker": cmd_broker,
    "agent": cmd_agent,
    "sim": cmd_sim,
    "inject": cmd_inject,
    "console": cmd_console,
    "drain": cmd_drain,
    "resume": cmd_resume,
    "restart-job": cmd_restart_job,
    "retire": cmd_retire,
    "status": cmd_status,
    "schema": cmd_schema,
    "record": cmd_record,
    "collect": cmd_collect,
    "events": cmd_events,
    "history": cmd_history,
    "serve": cmd_serve,
    "report": cmd_report,
    "replay": cmd_replay,
}


if __name__ == "__main__":
    sys.exit(main())
