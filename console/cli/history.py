"""``fleetdeck events`` and ``fleetdeck history``: the store, queried like ``sinfo -R``."""

import asyncio
import contextlib
import difflib
import io
import json
import os
import sys
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, TypeVar, cast

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from fleetdeck.console.audit import AUDIT_FILE, default_audit_path, iso
from fleetdeck.console.health import VERDICT_SEVERITY, Verdict, verdict_text
from fleetdeck.console.interruptions import INTERRUPTION, interruption_text
from fleetdeck.console.rows import IB_UNIT, ib_throughput_text
from fleetdeck.console.store import MINUTE_AGGREGATION, Store
from fleetdeck.errors import UserError
from fleetdeck.hostlist import HostlistError, compress, expand, padded_forms
from fleetdeck.paths import state_base
from fleetdeck.timespan import clock_s, span_s

EVENTS_NARROW = 110
"""Below this many columns ``events`` and ``report`` give each message a line of its own."""


def print_narrow(console: Console, head: Iterable[str], message: str) -> None:
    """One row on a narrow terminal: its short fields on a line, its message under them."""
    console.print(escape("  ".join(x for x in head if x)), highlight=False)
    console.print(f"    {escape(message)}", highlight=False)
PIPE_WIDTH = 100_000
"""Line width when stdout is not a terminal: wide enough that no table row ever wraps."""


def table_console(console: Console | None = None) -> Console:
    """Where tables go: on a terminal, ``console`` (or a new one) at the terminal's real width;
    piped or redirected, one that never wraps, so each row stays one line for grep, awk and
    ``less -S`` (rich would otherwise wrap at 80). ``$COLUMNS`` still wins when it is set."""
    console = console if console is not None else Console()
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    trimmed = cast(IO[str], _TrimmedLines(console.file))  # a text stream; typeshed's IO is not
    return Console(file=trimmed, width=PIPE_WIDTH, soft_wrap=True,
                   no_color=console.no_color, highlight=False)


class _TrimmedLines(io.TextIOBase):
    """A pipe's stream without the spaces rich pads every row's last cell with to its column's
    width (a MESSAGE column padded each line to its longest message: ``grep 'carrier$'``
    found nothing). A line goes out once complete; a flush sends a partial one as it is."""

    def __init__(self, file: IO[str]) -> None:
        super().__init__()
        self._file = file
        self._tail = ""

    def write(self, text: str) -> int:
        lines = (self._tail + text).split("\n")
        self._tail = lines.pop()
        if lines:
            self._file.write("".join(f"{line.rstrip(' ')}\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self._tail:
            self._file.write(self._tail)
            self._tail = ""
        self._file.flush()

    def isatty(self) -> bool:
        return False


SINCE_MAX_S = 10 * 365.25 * 86400.0
"""The longest span ``--since`` takes: no store keeps more, and ``99999999d`` went back to
before the epoch without a word."""


CLOCK_AHEAD_S = 600.0
"""A ``--since`` clock time up to this far ahead of now means now, not yesterday."""


def parse_since(text: str, now: float) -> float:
    """``90s``, ``15m``, ``1h``, ``7d`` ago (``-15m`` too, as journalctl writes it), a clock
    time as the views show them, UTC (``18:40``, ``18:40:05``: the latest such time, today or
    yesterday), or an ISO time (``2026-11-30T03:00``, UTC unless it says)."""
    span = text.strip().removeprefix("-")
    seconds = span_s(span) if span[-1:] in "smhd" else None
    if seconds is not None:
        if seconds > SINCE_MAX_S:
            raise UserError(f"--since '{text}' reaches back more than 10 years: give a "
                            "shorter span or an ISO time.")
        since = now - seconds
    elif (clock := clock_s(text)) is not None:
        # "--since 18:40" read off a view: today's 18:40 when that has come, else yesterday's;
        # a few minutes ahead is a clock a little off, not a day back (18:41 typed at
        # 18:40:30 covered 24 h: a review).
        ago = (now - clock) % 86400.0
        since = now - ago if ago < 86400.0 - CLOCK_AHEAD_S else now
    else:
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            raise UserError(f"--since '{text}' is neither a span like 1h/30m/7d, a UTC clock "
                            "time like 18:40, nor an ISO time.") from None
        since = (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()
    if since < 0:
        raise UserError(f"--since '{text}' reaches back before 1970-01-01 (the epoch): give a "
                        "later time.")
    return since


def tell_yesterday(command: str, text: str, since: float, now: float) -> None:
    """One line on stderr when ``--since`` (``text``, read as ``since`` at ``now``) was a clock
    time taken as yesterday's: "--since 23:50" typed at 00:10 UTC covered 20 minutes short of
    a day, and its rows (or "nothing since") said nothing of the day it reached back to. Said
    once the store opened (an error stays one sentence); on stderr, so ``--json`` is as it was."""
    if clock_s(text) is None:
        return
    day = datetime.fromtimestamp(since, UTC).date()
    if day < datetime.fromtimestamp(now, UTC).date():
        print(f"fleetdeck {command}: since {text.strip()} UTC yesterday ({day.isoformat()}): "
              f"today's {text.strip()} has not come yet.", file=sys.stderr)


DEMO_STORES = ("demo-*/demo.db", "demo-*/console-*.db")
"""Where ``fleetdeck demo`` keeps each run's store under the state directory, and a second
console against a running demo its own (fleetdeck/demo.py and cli.py, which this side may not
import; tests check they agree)."""


def written_at(db: Path) -> float:
    """When a store was last written: a WAL store's writes land in its ``-wal`` file until a
    checkpoint, so the database file's own time can be its creation's (a demo run's fresh
    store read as older than a stale one, and ``events`` named neither)."""
    times = []
    for path in (db, db.with_name(db.name + "-wal")):
        with contextlib.suppress(OSError):
            times.append(path.stat().st_mtime)
    if not times:
        raise FileNotFoundError(db)
    return max(times)


def demo_stores() -> list[Path]:
    """The demo runs' stores, newest first."""
    found = []
    for path in (p for pattern in DEMO_STORES for p in state_base().glob(pattern)):
        with contextlib.suppress(OSError):
            found.append((written_at(path), path))
    return [path for _, path in sorted(found, reverse=True)]


def _check(db: Path) -> float:
    """Refuse a store that is not there; return when it was last written (before this reader
    opens it: opening writes its schema version)."""
    if db.exists():
        if db.is_file():
            # A reader must never make a store: an empty file (or a recording given as --db)
            # became a 90 KB SQLite database under "nothing in it" (a newcomer's run).
            with contextlib.suppress(OSError), db.open("rb") as fh:
                head = fh.read(16)
                if head != b"SQLite format 3\x00":
                    what = "empty" if not head else "not a SQLite database"
                    raise UserError(f"{db} is not a history store (it is {what}): give --db "
                                    "the store that 'fleetdeck collect' or the console "
                                    "wrote.")
        return written_at(db)
    why = f"no store at {db} (run 'fleetdeck collect' or the console first, or pass --db FILE)"
    demos = demo_stores()
    if demos:
        # The demo keeps its store in a run directory of its own, so after 'make demo' the
        # default path is empty: point at what the user most likely wants.
        others = f" ({len(demos) - 1} older demo store(s) beside it)" if len(demos) > 1 else ""
        why += f"; the newest demo run's store is {demos[0]}{others}: pass --db {demos[0]}"
    raise UserError(f"{why}.")


def nothing_found(command: str, db: Path, since_ts: float, written: float) -> None:
    """Say on stderr that ``db`` held nothing since ``since_ts``, and name a newer demo run's
    store when there is one: a collector started once by hand leaves an empty store at the
    default path, which then hides the demo's (an empty table and rc 0 said nothing).
    ``written``: when ``db`` was last written before this command opened it (``_check``)."""
    why = f"fleetdeck {command}: nothing in {db} since {iso(since_ts)}"
    with contextlib.suppress(OSError):
        newer = [d for d in demo_stores() if d.resolve() != db.resolve()
                 and written_at(d) > written]
        if newer:
            why += f"; a newer demo run's store is {newer[0]}: pass --db {newer[0]}"
    print(f"{why}.", file=sys.stderr)


async def _open(db: Path, cluster: str | None = None) -> Store:
    """A reader's store: ``cluster`` (typed by the user) must be the one the store holds."""
    return await Store.open(db, cluster=cluster)


VERDICT = "verdict"
"""The kind ``events`` gives a node's verdict changes (the store's transitions)."""
KNOWN_KINDS = frozenset({"xid", "ib_port_state", "ib_flap", "ib_errors", "ecc", "row_remap",
                         "nvlink", "thermal", "drain", "agent", "repair", VERDICT, INTERRUPTION})
"""Kinds the agents and the simulator send (docs/protocol.md), with the two the store keeps of
its own (verdict changes, job interruptions). The protocol allows others, so a kind the store
holds is accepted too; anything else is a typo, not an empty answer."""
COMMAND = "command"
"""The kind ``events`` gives the operator commands a console kept in its store (its audit
records, a row for each request and outcome; ``Store.audit_rows``)."""
ELSEWHERE = {COMMAND: "operator commands are in the audit log ({audit})",
             "console": "no console note (a gap no console watched, a stop of its own) is in "
                        "this store yet: a console on it keeps them from now on",
             "job": "no job line (hung, stepping again, running again, withdrawn) is in this "
                    "store yet; a job's hang is in status --json too (not_stepping_s)"}
"""Kinds of the TUI's timeline a store may not hold yet: where to look instead. Its own lines
are kept in the store as the node ``CONSOLE_SOURCE``'s events (ConsoleSession.note)."""


def _shown(typed: str) -> str:
    """``typed`` as the terminal may be given it: a control byte as its escape (``\\x1b``)."""
    return typed.encode("unicode_escape").decode("ascii")


def _command_nodes(targets: str) -> list[str]:
    """The nodes an audit record's target text names ('' for a job's: ``job 4101``)."""
    try:
        return expand(targets) if not targets.startswith("job ") else []
    except HostlistError:
        return []


def command_text(a: dict[str, Any]) -> str:
    """An audit row as the console's timeline words it: who asked what and why, then each
    outcome with its detail ("drain gpu0005: superseded (… resumed before it drained …)")."""
    # "restart job 4101", as the CLI and the timeline say it (its target text names the job).
    what = f"{a['what'].removesuffix('_job').replace('_', ' ')} {a['targets']}"
    if a["outcome"] == "requested":
        return f"{a['who']} requested {what}" + (f": {a['why']}" if a["why"] else "")
    return f"{what}: {a['outcome']}" + (f" ({a['detail']})" if a["detail"] else "")


def audit_beside(db: Path) -> Path:
    """The audit log that goes with the store ``db``: a demo run keeps both in its folder, so
    ``--kind command`` on a demo's store named the real audit log, which the demo never wrote
    (a newcomer's run); any store with an audit log beside it is read the same way."""
    beside = db.parent / AUDIT_FILE
    return beside if beside.is_file() else default_audit_path()


def run_events(db: Path, since: str, nodes: list[str] | None, kinds: list[str] | None,
               as_json: bool, limit: int = 10_000, cluster: str | None = None) -> int:
    now = time.time()
    since_ts = parse_since(since, now)
    written = _check(db)
    verdicts = not kinds or VERDICT in kinds
    # A node first seen healthy is no event of the fleet's: a collector's start writes one such
    # row per node (16,384 of them would bury the rest). Asked for by --kind verdict, or about
    # chosen nodes (when the store first saw them), they are listed.
    first_ok = bool(nodes) or (kinds is not None and VERDICT in kinds)
    stopped = not kinds or INTERRUPTION in kinds
    event_kinds = ([k for k in kinds if k not in (VERDICT, INTERRUPTION, COMMAND)]
                   if kinds else None)

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                              list[dict[str, Any]], list[dict[str, Any]], int]:
        store = await _open(db, cluster)
        try:
            commands: list[dict[str, Any]] = []
            held: list[dict[str, Any]] = []
            if kinds and COMMAND in kinds:
                # A console keeps its commands in its store (its audit records): "--kind
                # command" said they were only in an audit log, and named the default one where
                # the console had written another (--audit-log) (a 2026-12-07 drill: two
                # operators' consoles, each on its own store and log). A store that holds none
                # (a collector's) still points to the audit log.
                held = await store.audit_rows(0.0)
                commands = [a for a in held if a["ts"] >= since_ts and (
                    not nodes or set(_command_nodes(a["targets"])) & set(nodes))]
            if kinds:
                valid = KNOWN_KINDS | await store.event_kinds() | ({COMMAND} if held else set())
                unknown = [k for k in kinds if k not in valid]
                for k in unknown:
                    if k in ELSEWHERE:  # known words: nothing to escape
                        raise UserError(f"--kind {k}: "
                                        + ELSEWHERE[k].format(audit=audit_beside(db))
                                        + ", not in the history store.")
                if unknown:
                    # Escaped: what was typed goes back to the terminal, an ESC in it too
                    # (a CLI fuzz round); a near miss is named, as a command's or a node's is.
                    # The near misses alone when every typo has one: the whole list (13
                    # kinds and the store's own) buried the one word the operator wanted.
                    close = {k: difflib.get_close_matches(k, valid, 3) for k in unknown}
                    if all(close.values()):
                        hint = "did you mean " + ", ".join(
                            " or ".join(ms) + (f" for {_shown(k)}" if len(unknown) > 1 else "")
                            for k, ms in close.items()) + "?"
                    else:
                        hint = f"the kinds are {', '.join(sorted(valid))}."
                    raise UserError(f"--kind {_shown(','.join(unknown))} names no event kind; "
                                    f"{hint}")
            events, transitions, stops, matched = [], [], [], 0
            if event_kinds is None or event_kinds:
                events = await store.events(since_ts, nodes, event_kinds, limit=limit)
                matched += await store.count("events", since_ts, nodes, event_kinds)
            if verdicts:
                transitions = await store.transitions(since_ts, nodes, limit=limit,
                                                      first_ok=first_ok)
                matched += await store.count("transitions", since_ts, nodes, first_ok=first_ok)
            if stopped:
                # A few a day: read whole, filtered here (a job's nodes are one column).
                stops = [it for it in await store.interruptions(since_ts)
                         if not nodes or set(it["nodes"]) & set(nodes)]
                matched += len(stops)
                stops = stops[-limit:]
            matched += len(commands)
            commands = commands[-limit:]
            if nodes and not events and not transitions and not stops and not commands:
                # As 'history' does: nothing about a node the store never held is a typo
                # (or another --db), not a quiet node.
                unknown = [n for n in nodes if not (
                    await store.count("transitions", 0.0, [n])
                    or await store.count("events", 0.0, [n]) or await store.has_minutes_of(n))]
                if unknown:
                    # gpu42 for gpu0042 (a 3 a.m. run): the nodes to type, where found.
                    meant = [form for n in unknown for form in padded_forms(n)
                             if await store.has_heard_of(form)
                             or await store.has_minutes_of(form)]
                    hint = (f"did you mean {compress(meant)}?" if meant
                            else "mistyped, or nodes of another --cluster or --db.")
                    raise UserError(f"the store {db} holds nothing of {compress(unknown)}: "
                                    f"{hint}")
            return events, transitions, stops, commands, matched
        finally:
            await store.close()

    events, transitions, stops, commands, matched = asyncio.run(main())
    tell_yesterday("events", since, since_ts, now)
    rows = [{"ts": e["ts"], "node": e["node"], "kind": e["kind"], "severity": e["severity"],
             "component": e["component"], "message": e["message"]} for e in events]
    rows += [{"ts": t["ts"], "node": t["node"], "kind": VERDICT,
              "severity": VERDICT_SEVERITY.get(Verdict(t["new"]), "info"),
              "component": "", "message": verdict_text(t["old"], Verdict(t["new"]), t["reasons"],
                                                       t["seen"])} for t in transitions]
    rows += [{"ts": it["ts"], "node": compress(it["nodes"]) if it["nodes"] else "",
              "kind": INTERRUPTION, "severity": "warn", "component": f"job {it['job_id']}",
              "message": interruption_text(it["job_id"], it["cause"], it["nodes"],
                                           it["lost_gpu_hours"])} for it in stops]
    rows += [{"ts": a["ts"], "node": a["targets"], "kind": COMMAND,
              "severity": "info" if a["outcome"] in ("requested", "done") else "warn",
              "component": a["who"], "message": command_text(a)} for a in commands]
    if commands:
        print("fleetdeck events: --kind command lists what the consoles that wrote this store "
              "kept of their commands; a CLI command's record is in its audit log only "
              f"(default {default_audit_path()}).", file=sys.stderr)
    rows.sort(key=lambda r: r["ts"])
    if len(rows) > limit:
        rows = rows[-limit:]
    if not rows and not nodes and not kinds:  # a filter that matched nothing is not that
        nothing_found("events", db, since_ts, written)
    elif not rows:
        chosen = " ".join(filter(None, (f"--node {compress(nodes)}" if nodes else "",
                                        f"--kind {','.join(kinds)}" if kinds else "")))
        print(f"fleetdeck events: nothing in {db} since {iso(since_ts)} matched {chosen}.",
              file=sys.stderr)
    if matched > len(rows):
        print(f"fleetdeck events: showing the newest {len(rows)} of {matched} rows; narrow "
              "with --since, --node or --kind, or raise --limit.", file=sys.stderr)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        # The header alone under "nothing in ..." read as a table cut off (a newcomer's run).
        return 0
    console = table_console()
    if console.width < EVENTS_NARROW:
        # At 80 columns rich cut the time of day ("2026-12-05T13:…") and squeezed each
        # message into a 13-character column, 5-8 lines tall (a newcomer's run): each event
        # is its heading line, then its message on a line of its own.
        for r in rows:
            print_narrow(console, (iso(r["ts"]), r["node"], r["kind"], r["severity"],
                                   r["component"]), r["message"])
        return 0
    table = Table(box=None, pad_edge=False)
    table.add_column("TIMESTAMP", no_wrap=True)
    for col in ("NODE", "KIND", "SEV", "COMPONENT", "MESSAGE"):
        table.add_column(col)
    for r in rows:
        # Every text escaped, not the message alone: a command's targets are kept as typed
        # when refused ("gpu[/x]" ended the listing in a MarkupError), and an event's component
        # comes from the network (printable, but "[bold]" is still markup to rich).
        table.add_row(iso(r["ts"]), *(escape(r[k]) for k in ("node", "kind", "severity",
                                                                 "component", "message")))
    console.print(table)
    return 0


METRICS = ("util", "temp", "power", "clock", "ib")
COLUMN = {"util": "util", "temp": "temp_max", "power": "power", "clock": "sm_clock_min",
          "ib": "xmit_Bps"}
"""The store column each ``--metric`` shows (ib: its table shows the symbol errors and samples
down of each minute beside the transmit rate)."""
TITLE = {"util": "GPU utilisation (%)", "temp": "GPU temperature (°C)", "power": "power (W)",
         "clock": "SM clock (MHz)", "ib": f"IB transmit ({IB_UNIT})"}
WORDS = {"mean": "mean", "max": "maximum", "min": "minimum", "sum": "sum", "count": "count"}


def aggregation(metric: str) -> str:
    """How the minute's samples were folded into the value shown: mean, max or min."""
    return MINUTE_AGGREGATION[COLUMN[metric]]


def heading(node: str, metric: str) -> str:
    """The line above the table: what each cell is, aggregation included."""
    line = f"{node} {TITLE[metric]}: the {WORDS[aggregation(metric)]} of each minute's samples"
    if metric == "ib":
        line += (f"; sym: symbol errors in the minute ({MINUTE_AGGREGATION['symbol_errors']}),"
                 f" down: samples with the port not ACTIVE ({MINUTE_AGGREGATION['down_samples']})")
    return line


V = TypeVar("V")


def _with_gaps(by_minute: dict[int, V]) -> list[tuple[int, V | None]]:
    """The minutes in order, with (first missing minute, None) where minutes are missing
    between two: a collector killed (or a silent node) left 16:51 followed by 16:53 in a
    table that read as continuous (an SRE drill)."""
    out: list[tuple[int, V | None]] = []
    last = None
    for minute, row in sorted(by_minute.items()):
        if last is not None and minute > last + 1:
            out.append((last + 1, None))
        out.append((minute, row))
        last = minute
    return out


def _gap_row(minute: int, columns: int) -> list[str]:
    return [iso(minute * 60)[:16], "no data", *["·"] * (columns - 1)]


def run_history(db: Path, node: str, metric: str, since: str, as_json: bool,
                plot: bool = False, cluster: str | None = None) -> int:
    now = time.time()
    since_ts = parse_since(since, now)
    _check(db)

    twins: list[str] = []

    async def main() -> tuple[list[dict[str, Any]], bool, bool]:
        store = await _open(db, cluster)
        try:
            if metric == "ib":
                rows = await store.port_history(node, since_ts)
            else:
                rows = await store.gpu_history(node, since_ts)
            known = bool(rows) or await store.has_minutes_of(node)
            heard = known or await store.has_heard_of(node)
            if not heard:
                twins.extend([form for form in padded_forms(node)
                               if await store.has_minutes_of(form)
                               or await store.has_heard_of(form)])
            return rows, known, heard
        finally:
            await store.close()

    rows, known, heard = asyncio.run(main())
    if not known and heard:
        # The README's step by step runs `history` a minute after `collect`: "mistyped" of a
        # node the store has events of sent a newcomer looking for a typo (a newcomer run).
        raise UserError(f"the store {db} holds no minute of {node} yet, though it has heard "
                        "of it: a minute is written once it is over (a collector or console "
                        "started a minute ago has none yet); try again in a minute.")
    if not known and twins:
        # gpu42 for gpu0042 (a 3 a.m. run): the node to type; every one the store holds, as
        # a store of gpu0042 and gpu00042 (two racks' schemes) must not be told one of them.
        raise UserError(f"the store {db} holds no minute of a node named '{node}': did you "
                        f"mean {compress(twins)}?")
    if not known:
        # "no history since …" and exit 0 read as a quiet node; a typo deserves to be told.
        raise UserError(f"the store {db} holds no minute of a node named '{node}': mistyped, "
                        "or a node of another --cluster or --db.")
    tell_yesterday("history", since, since_ts, now)
    if as_json:
        # Every row keeps all its columns; these two say which one answers --metric, and how
        # the minute was folded into it.
        column, how = COLUMN[metric], aggregation(metric)
        print(json.dumps([{**r, "metric": column, "aggregation": how} for r in rows], indent=2))
        return 0
    if not rows:
        table_console().print(f"no history for {escape(node)} since {iso(since_ts)}")
        return 0
    if plot:
        from fleetdeck.console.cli.plot import render

        out = Console()
        size = os.get_terminal_size() if out.is_terminal else os.terminal_size((100, 24))
        color = out.is_terminal and not out.no_color
        print(render(rows, node, metric, width=size.columns, height=max(12, size.lines - 4),
                     color=color))
        return 0
    table_console().print(escape(heading(node, metric)))
    table = Table(box=None, pad_edge=False)
    table.add_column("MINUTE (UTC)", no_wrap=True, min_width=16)
    if metric == "ib":
        devs = sorted({r["dev"] for r in rows})
        for d in devs:
            table.add_column(f"{d} {IB_UNIT}  sym  down", justify="right")
        by_minute: dict[int, dict[str, dict[str, Any]]] = {}
        for r in rows:
            by_minute.setdefault(r["minute"], {})[r["dev"]] = r
        for minute, per in _with_gaps(by_minute):
            if per is None:
                table.add_row(*_gap_row(minute, len(devs)))
                continue
            cells = []
            for d in devs:
                row = per.get(d)
                tx = ib_throughput_text(row["xmit_Bps"] or 0) if row is not None else ""
                cells.append("-" if row is None else
                             f"{tx:>5} {row['symbol_errors']:4d} {row['down_samples']:4d}")
            table.add_row(iso(minute * 60)[:16], *cells)
    else:
        gpus = sorted({r["gpu"] for r in rows})
        for g in gpus:
            table.add_column(f"gpu{g}", justify="right")
        by_min: dict[int, dict[int, Any]] = {}
        for r in rows:
            by_min.setdefault(r["minute"], {})[r["gpu"]] = r[COLUMN[metric]]
        for minute, per_gpu in _with_gaps(by_min):
            if per_gpu is None:
                table.add_row(*_gap_row(minute, len(gpus)))
                continue
            table.add_row(iso(minute * 60)[:16],
                          *("-" if per_gpu.get(g) is None else f"{per_gpu[g]:.0f}" for g in gpus))
    table_console().print(table)
    return 0
