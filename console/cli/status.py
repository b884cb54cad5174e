"""``fleetdeck status``: connect, collect retained + live state for a while, print, exit."""

import asyncio
import json
import os
import sys
import time
from collections.abc import Coroutine, Sequence
from typing import Any, TypeVar

import aiomqtt
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from fleetdeck.brokerurl import BrokerURL
from fleetdeck.console.cli.history import table_console
from fleetdeck.console.contexts import ClusterRow, cluster_row, combined, worst_first
from fleetdeck.console.judgements import SickNode, held_up_text, undecided_silent, utc_hms
from fleetdeck.console.live import broker_uptime_s, clusters_seen
from fleetdeck.console.retained_burst import BURST_CUT_TEXT
from fleetdeck.console.rows import job_urgency
from fleetdeck.console.session import ConsoleSession, TickReport
from fleetdeck.console.state import (
    AGENT_RECONNECT_S,
    BIRTHS_DROPPED,
    KEYFRAMES_DROPPED,
    WAITING,
    FleetState,
    jobs_unheard_text,
)
from fleetdeck.console.summary import fleet_summary
from fleetdeck.errors import UserError
from fleetdeck.hostlist import compress
from fleetdeck.protocol.wire2 import KEYFRAME_EVERY_S
from fleetdeck.runtime import tune_gc
from fleetdeck.transport import TransportError

VERDICT_STYLE = {
    "ok": "green", "degraded": "yellow", "failed": "bold red", "stale": "dim", "offline": "red",
    "waiting": "cyan",
}


CONNECT_TIMEOUT_S = 5.0
TRANSIENT_CONNECT_ERROR = "closed the connection before accepting it"
DEFAULT_WAIT_S = 3.5
"""The watch without ``--wait``: three 1 s telemetry intervals, so a silent node reads stale
and rules that compare samples can fire."""
LONGEST_WAIT_S = 60.0
"""How long a watch without ``--wait`` goes on for agents that sample less often."""
FIRST_SAMPLE_INTERVALS = 2
"""A v2 agent's first sample a new watcher can read comes within two of its intervals: a
delta, which makes the watcher ask for a keyframe, then that keyframe (docs/protocol.md, "Gaps
and keyframe requests")."""
FIRST_SAMPLE_GRACE_S = 1.0


def slow_to_hear(state: FleetState, since_connect: float) -> list[str]:
    """Nodes that sent no telemetry yet but whose birth's interval says their first sample may
    still come: a fleet of agents on ``--interval 10`` read all "waiting" after the 3.5 s
    watch, and ``status --fail-on failed`` exited 3 until the script raised ``--wait``."""
    return [n for n, st in state.nodes.items()
            if st.verdict_shown == WAITING
            and since_connect < FIRST_SAMPLE_INTERVALS * st.interval_s + FIRST_SAMPLE_GRACE_S]


KEYFRAME_GRACE_S = 2.0
"""Past the agents' keyframe period, for the keyframe's way and a tick."""


def keyframe_due(state: FleetState, since_connect: float) -> list[str]:
    """Nodes heard talking (v2 deltas) but not read yet, while their agent's periodic keyframe
    may still come: a broker user whose keyframe asks the ACL drops (the shipped ``viewer``)
    reads every node from its next periodic keyframe alone. Its 3.5 s watch read them stale,
    and a monitoring cron's ``status --fail-on degraded`` paged for a healthy fleet."""
    return [n for n, st in state.nodes.items()
            if st.talks and since_connect < KEYFRAME_EVERY_S + KEYFRAME_GRACE_S]


async def collect(url: BrokerURL, cluster: str, wait_s: float | None, *,
                  digests: bool = False, after: asyncio.Event | None = None,
                  connected: asyncio.Event | None = None,
                  unanswered: list[str] | None = None,
                  command_key: bytes | None = None) -> tuple[ConsoleSession, float]:
    """Watch the cluster through a console session (ticking like the console, so rules that
    need two samples fire here too) and return it with the seconds watched: ``wait_s``, or
    with None ``DEFAULT_WAIT_S`` and longer, up to ``LONGEST_WAIT_S``, while a node's first
    sample is still due by its interval (``slow_to_hear``) or a silent node's job may still
    step (``undecided_silent``). Raise ``UserError`` when the broker
    never answered or no node of ``cluster`` was heard.

    ``after``: connect only once it is set; ``connected`` is set once this watch has its
    SUBACK (or gave up). This process's connections go one at a time that way: on the demo's
    amqtt broker a CONNECT that overlaps another client's SUBSCRIBE leaves one of them never
    acknowledged (its connect race), and `status` beside its own uptime probe said "no answer
    (CONNACK) within 5 s" for one run in two (a newcomer's run).

    ``unanswered``: shared by the watches of one run; a watch the broker left unanswered for
    its whole CONNECT_TIMEOUT_S says why there, and a watch whose turn comes after that gives
    up without connecting: behind a broker that never answers, three clusters in turn took
    5 s each (17 s), and a shared 5 s left the third of a slow TLS broker's (2 s a connect)
    1 s of its own.

    ``command_key``: signs the watch's keyframe asks, which are commands: an agent that obeys
    only signed commands rejected each unsigned one (docs/security.md, "Signed commands"), and
    its nodes read waiting until their periodic keyframe."""
    if after is not None:
        # The one before always ends its turn: with its SUBACK, its error, or its own
        # CONNECT_TIMEOUT_S. Waiting less would connect over its SUBSCRIBE (the race above).
        await after.wait()
        if unanswered:
            raise UserError(f"cannot get a status from {url}: not tried: {unanswered[0]}.")
    # Each watch's connect has its own CONNECT_TIMEOUT_S, counted from its own start (not
    # from the first cluster's): the time spent waiting for its turn is not its own.
    started = time.monotonic()
    session = ConsoleSession(cluster, url=url, follow_up=False, operator="status",
                             digests=digests, one_shot=True, command_key=command_key,
                             client_id=f"fd-status-{os.getpid()}-{int(time.time())}-{cluster}"[:64])
    feed = session.feed
    assert feed is not None
    connected_at: float | None = None
    auto = wait_s is None and not digests
    least = DEFAULT_WAIT_S if wait_s is None else wait_s
    counted_from = started
    """Where the watch's ``least`` seconds count from: its start, or the connect of the
    second try after a dropped first connect."""
    until = LONGEST_WAIT_S if auto else least
    """The watch's length from ``started``, as ``enough`` knows it now."""

    def enough(_report: TickReport) -> bool:
        nonlocal connected_at, counted_from, until
        now = time.monotonic()
        if not feed.conn.connects:
            # No CONNACK in time (a hung or wrong broker): an answer about an empty fleet
            # would be the worst one for a script. A connection closed before its CONNACK
            # gets a second try (the link's next attempt, 0.5-1 s later): the embedded amqtt
            # broker drops one now and then when connects overlap (docs/reliability.md); a
            # plain URL on a TLS listener fails the same way twice.
            error = feed.first_error
            tries = 2 if error is not None and TRANSIENT_CONNECT_ERROR in error else 1
            if feed.failed_connects >= tries or now - started > CONNECT_TIMEOUT_S:
                return True
            if feed.failed_connects:
                # That second try waits out its back-off: a `--wait 1` ended before its
                # CONNACK came, and said the broker closed the connection for one run in ten
                # on a loaded host. The watch goes on for it, up to CONNECT_TIMEOUT_S.
                until = max(until, CONNECT_TIMEOUT_S)
            return False
        if connected_at is None:
            connected_at = now
            if connected is not None:
                connected.set()
            if feed.failed_connects:
                # Connected on the second try: the watch is ``least`` from now, or one ended
                # right after its SUBACK would not have read the retained births yet.
                counted_from = now
                until = LONGEST_WAIT_S if auto else now - started + least
        if not auto or now - counted_from < least:
            return False
        return not (slow_to_hear(session.state, now - connected_at)
                    or keyframe_due(session.state, now - connected_at)
                    or undecided_silent(session.state, now - connected_at))

    await session.watch(asyncio.Event(), tick_s=0.5, on_tick=enough, duration_s=lambda: until)
    # A --wait past LOOK_AGAIN_S may end with a look in flight (console/deaf_check.py): its
    # connection ends with the watch, not with the last cluster's of ``--cluster a,b``.
    await session.sight.deaf.close()
    # What the operator asked for, or, extended, how long it ran.
    watched = round(max(least, time.monotonic() - counted_from), 1) if auto else least
    if feed.conn.connects == 0:
        # As long as it waited: a --wait shorter than CONNECT_TIMEOUT_S ends the watch first.
        gave_up = f"{min(CONNECT_TIMEOUT_S, max(1, round(time.monotonic() - started))):g}"
        if feed.first_error:
            # Already a sentence that names the broker: prefixing it would say the URL twice.
            raise UserError(feed.first_error)
        if unanswered is not None:
            unanswered.append(
                f"the broker did not confirm the subscription of cluster '{cluster}' (no "
                f"SUBACK) within {gave_up} s" if feed.conn.connacks else
                f"no answer (CONNACK) to the connect of cluster '{cluster}' within {gave_up} s")
        if feed.conn.connacks:
            # The broker accepted the connection and left the SUBSCRIBE unanswered (amqtt's
            # connect race): "no answer (CONNACK)" sent the operator to a broker that was up.
            raise UserError(f"cannot get a status from {url}: connected, but the broker did not "
                            f"confirm the subscription (no SUBACK) within {gave_up} s (a "
                            "hung or overloaded broker? try again).")
        raise UserError(f"cannot get a status from {url}: no answer (CONNACK) within "
                        f"{gave_up} s.")
    if not session.state.nodes:
        dropped = session.state.births_dropped_text()
        if dropped:
            raise UserError(f"no node of cluster '{cluster}' could be listed from {url} within "
                            f"{watched:g} s: {dropped}.")
        if digests:
            raise UserError(f"no digest of cluster '{cluster}' was heard on {url} within "
                            f"{watched:g} s (is a 'fleetdeck collect --shard' running?)")
        try:
            others = await clusters_seen(url, f"fd-status-probe-{os.getpid()}-{cluster}"[:64])
        except (aiomqtt.MqttError, TransportError):
            others = []
        # With no node of any cluster there, --cluster is not the likely mistake: nothing
        # publishes to that broker (a newcomer's run).
        hint = (f"clusters seen there: {', '.join(others)}; wrong --cluster?" if others
                else "no node of any cluster there: is an agent or 'fleetdeck sim' running "
                     "against this broker?")
        if not others and url.username:
            # A user the ACL lets read nothing (an agent's, by mistake) gets its SUBACK and then
            # silence from Mosquitto: the fleet looked gone (an SRE drill).
            hint = (f"{hint[:-1]}, or may broker user '{url.username}' not read "
                    "fleetdeck/v1/# (its ACL: console and viewer may)?")
        raise UserError(f"no node of cluster '{cluster}' was heard on {url} within "
                        f"{watched:g} s ({hint})")
    return session, watched


INCIDENTS_SHOWN = 10

OK_NODES_LISTED = 64
"""Above this many healthy nodes in service, ``status``'s node table leaves them out and says
how many (a 64-node fleet, the demo's, is listed whole)."""


def render_incidents(found: list[dict[str, Any]], console: Console) -> None:
    """One root-cause line per incident, worst first, with what to do."""
    if not found:
        return
    console.print(f"[b]incidents[/] ({len(found)}):")
    # A grid, so a line the terminal's width wraps goes on under its own text, not at the
    # left edge: at 80 columns "view)" and "(gpu[0035,0040]): …" began lines of their own
    # between the severities (a newcomer's run). Piped, each row is still one line.
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for inc in found[:INCIDENTS_SHOWN]:
        style = "red" if inc["severity"] == "error" else "yellow"
        grid.add_row(f"  [{style}]{inc['severity']:5}[/]", escape(inc["title"]))
        grid.add_row("", f"[dim]→ {escape(inc['action'])}[/]")
    console.print(grid)
    if len(found) > INCIDENTS_SHOWN:
        console.print(f"  … {len(found) - INCIDENTS_SHOWN} more (status --json has them all)")


def render_held_up_jobs(jobs: list[dict[str, Any]], console: Console) -> None:
    """The jobs a node stops (``sick_nodes``), that stopped stepping (``not_stepping_s``),
    that failed and wait for a restart (``failed``), a straggler slows or that can never start
    here (``never_fits``, last), one line each: a
    hung job was left out (an SRE drill), and so was a job an XID 48 failed (a fault audit)."""
    # A job that can never start here (``never_fits``) waits for ever unsaid otherwise: a
    # 40-node job on 32 nodes read nowhere in `status` but --json (a jobs audit).
    held = [j for j in jobs if j.get("sick_nodes") or j.get("straggler")
            or j.get("not_stepping_s") is not None or j.get("failed") or j.get("never_fits")]
    if not held:
        return
    # The jobs view's and the overview's order (``rows.job_urgency``): a failed job that lapsed
    # (``lapsed``: no longer work lost now) with the stragglers.
    held.sort(key=lambda j: (*job_urgency(
        bool(j.get("sick_nodes")), j.get("not_stepping_s") is not None,
        bool(j.get("failed") and not j["failed"].get("lapsed")), bool(j.get("straggler"))),
        # Last, after a failed job that lapsed too (both read "nothing urgent" above): it
        # came before one of a higher id.
        bool(j.get("never_fits")), j["job_id"]))
    console.print(f"[b]jobs held up[/] ({len(held)} of {len(jobs)}):")
    for j in held[:INCIDENTS_SHOWN]:
        failed = j.get("failed")
        if failed:
            # The job's own words ("failed on gpu0003 (…Xid 48)") and what brings it back.
            what = failed["text"].removeprefix(f"job {j['job_id']} ")
            style = "yellow" if failed.get("lapsed") else "red"
            console.print(_hanging(f"  [{style}]{escape(j['job_id'])}[/] "
                                   f"{escape(j.get('name', ''))}:",
                                   f"{escape(what)}; {escape(failed['action'])}"))
            continue
        if j.get("never_fits") and not failed:
            console.print(_hanging(f"  [yellow]{escape(j['job_id'])}[/] "
                                   f"{escape(j.get('name', ''))}:",
                                   escape(f"pending: {j['never_fits']}")))
            continue
        sick = j.get("sick_nodes") or []
        slow = j.get("straggler")
        quiet = j.get("not_stepping_s")
        # The TUI's words: a switch outage named a sound node first here too (a 3 a.m. drive).
        what = held_up_text([SickNode(s["node"], s["verdict"], s["finding"], s.get("switch") or "")
                             for s in sick])
        parts = [what] if what else []
        if quiet is not None:
            parts.append(f"hung: no step for {quiet:.0f} s")
        if slow is not None and all(s["node"] != slow["node"] for s in sick):
            parts.append(f"straggler {slow['text']}")
        style = "red" if sick or quiet is not None else "yellow"
        console.print(_hanging(f"  [{style}]{escape(j['job_id'])}[/] "
                               f"{escape(j.get('name', ''))}:", escape("; ".join(parts))))
    if len(held) > INCIDENTS_SHOWN:
        console.print(f"  … {len(held) - INCIDENTS_SHOWN} more (status --json has them all)")


def render_unsaved_drains(nodes: list[dict[str, Any]], console: Console) -> None:
    """Drains (and resumes) their agents could not save (``drain_unsaved``): the acks told the
    console that sent them alone, and this table read such a node "drain" as any other, though
    its agent's next restart forgets it (docs/reliability.md, "not saved")."""
    unsaved = [n for n in nodes if n.get("drain_unsaved")]
    if not unsaved:
        return
    console.print(f"[b]drains not kept on their nodes[/] ({len(unsaved)}):")
    for n in unsaved[:INCIDENTS_SHOWN]:
        console.print(_hanging(f"  [red]{escape(n['id'])}[/]:", escape(n["drain_unsaved"])))
    if len(unsaved) > INCIDENTS_SHOWN:
        console.print(f"  … {len(unsaved) - INCIDENTS_SHOWN} more (status --json has them all)")


def _hanging(head: str, text: str) -> Table:
    """``head text`` as one row of a grid of its own, so a line the terminal wraps goes on
    under its text, not at the left edge ("clock throttled (sw thermal, hw thermal))" began a
    line there at 80 columns). Its own: in one grid of every job, a short job name was padded
    to the longest, and piped, "4104 dlrm: straggler" read "4104 dlrm:               straggler"
    (a review: a script's grep found nothing)."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(head, text)
    return grid


def packed(groups: Sequence[str | Sequence[str]], width: int, indent: str = "  ") -> list[str]:
    """Rich markup ``groups`` two spaces apart, as many to a line as ``width`` takes, the next
    lines indented: at 80 columns the summary line broke inside a group, "GPUs 512" on one
    line and "(in use 432, …)" on the next (a newcomer's run). A group is a string, or its
    pieces to keep two spaces apart (the verdict counts: "ok 2000" alone ended a line, its
    "degraded 16" began the next). A group wider than a line is split between its pieces, or
    a string's bracketed part at its ", ", the rest indented deeper: left to the console, a
    60-column terminal broke "(…, out 372," from "waiting 8)" at the margin (a review). A
    pipe's width takes them all on one line."""
    lines: list[str] = []
    line, used = "", 0
    for group in groups:
        pieces, sep = (_bracketed(group), " ") if isinstance(group, str) else (list(group), "  ")
        text = sep.join(pieces)
        n = _cells(text)
        if line and used + 2 + n <= width:
            line, used = f"{line}  {text}", used + 2 + n
            continue
        lead = indent if line or lines else ""
        if line:
            lines.append(line)
        if len(lead) + n <= width or len(pieces) == 1:
            line, used = lead + text, len(lead) + n  # one piece wider than a line: the console's
            continue
        line, used = lead + pieces[0], len(lead) + _cells(pieces[0])
        for piece in pieces[1:]:
            m = _cells(piece)
            if used + len(sep) + m > width:
                lines.append(line)
                line, used = lead + indent + piece, len(lead + indent) + m
            else:
                line, used = line + sep + piece, used + len(sep) + m
        # The next group on a line of its own: after a split group's deeper-indented tail it
        # read as part of it ("    unknown 359)  drained 3", a review).
        lines.append(line)
        line, used = "", 0
    if line:
        lines.append(line)
    return lines


def _cells(markup: str) -> int:
    return Text.from_markup(markup).cell_len


def _bracketed(group: str) -> list[str]:
    """A plain group "GPUs 512 (in use 432, free 48)" as the pieces it may wrap between, one
    space apart: "GPUs 512 (in use 432,", "free 48)"; without such a part, its words: the
    header "demo @ mqtts://<a long broker URL>: 2048 nodes" wider than 60 columns was left to
    the console, its tail at the margin with no indent (a newcomer's run)."""
    head, bracket, inner = group.partition(" (")
    if not bracket or not inner.endswith(")") or ", " not in inner:
        return group.split(" ")
    parts = inner[:-1].split(", ")
    return ([f"{head} ({parts[0]},"] + [f"{p}," for p in parts[1:-1]] + [f"{parts[-1]})"])


def render_summary(summary: dict[str, Any], console: Console, every_node: bool = False) -> None:
    """The human table of a ``fleet_summary`` (status, replay): worst nodes first."""
    console = table_console(console)
    t = summary["totals"]
    verdicts = [f"[{VERDICT_STYLE[v]}]{v} {n}[/]" for v, n in t["by_verdict"].items() if n]
    where = escape(str(summary.get("broker") or summary.get("source") or ""))
    # A silent node's ports are neither up nor down: say how many, or 0/512 reads as an outage.
    unknown = t.get("ib_ports_unknown", 0)
    ports_unknown = f", unknown {unknown}" if unknown else ""
    erroring = t.get("ib_ports_erroring", 0)
    waiting = t.get("gpus_waiting", 0)
    # The overview header's words for the same counts: "GPUs usable 464/512" stood beside the
    # header's "in use 464" of another number (a newcomer's run).
    groups = [
        f"[b]{escape(summary['cluster'])}[/] @ {where}: {t['nodes']} "
        f"node{'' if t['nodes'] == 1 else 's'}",
        verdicts or "no nodes",
        f"GPUs {t['gpus']} (in use {t['gpus_in_use']}, free {t['gpus_free']}, "
        f"failed {t['gpus_failed']}, out {t['gpus_out']}"
        f"{f', waiting {waiting}' if waiting else ''})",
        f"IB up {t['ib_ports_up']}/{t['ib_ports']} (down {t.get('ib_ports_down', 0)}, "
        f"erroring {erroring}{ports_unknown})",
        f"drained {t['drained']} draining {t['draining']}",
        f"malformed {t['malformed']}",
    ]
    for line in packed(groups, console.width):
        console.print(line)
    off = (summary.get("clock") or {}).get("console_off")
    if off:
        # Not any node's T1: most of the fleet agrees, so this console is the odd one out.
        console.print(f"[yellow]this console's clock:[/] {escape(off)}")
    render_incidents(summary.get("incidents", []), console)
    render_held_up_jobs(summary.get("jobs", []), console)
    render_unsaved_drains(summary["nodes"], console)
    table = Table(box=None, pad_edge=False)
    for col in ("NODE", "VERDICT", "STATE", "GPUS", "IB UP", "JOB", "REASONS"):
        table.add_column(col)
    nodes = summary["nodes"]
    # A big fleet's healthy nodes in service are one line, not a row each: 1,003 ok rows
    # under 21 sick ones pushed the incidents, the held-up jobs and the sick nodes off a
    # terminal's screen, its last page all "ok" (a 1,024-node fleet at 3 a.m.).
    quiet = [n for n in nodes if n["verdict"] == "ok" and n["drain"] == "none"]
    if len(quiet) > OK_NODES_LISTED and not every_node:
        folded = {n["id"] for n in quiet}
        nodes = [n for n in nodes if n["id"] not in folded]
    alike = [] if every_node else _alike_rows(summary.get("incidents", []), nodes)
    if alike:
        gone = {n["id"] for _inc, rows in alike for n in rows}
        nodes = [n for n in nodes if n["id"] not in gone]
    # In the summary's order: the console's HEALTH order (``rows.health_order``), as --json.
    for n in nodes:
        table.add_row(
            n["id"],
            f"[{VERDICT_STYLE[n['verdict']]}]{n['verdict']}[/]",
            # sinfo's words, as the console's nodes view: "online" said less than "alloc".
            n["state"],
            f"{n['gpus']}/{n['gpus_expected']}",
            f"{n['ib_ports_up']}/{n['ib_ports']}",
            n["job"] or "",
            escape(_reasons(n["findings"])),
        )
    if nodes:
        console.print(table)
    for inc, rows in alike:
        # The rule and the component's kind (key "common:RULE:COMPONENT:CRC"); T1's is '' (the
        # node's clock): "T1", not "T1 "; a port's, with its digits made '#' and a ':' of its
        # own, read "A1 mlx#_ib#" (a review): the rule alone there.
        parts = inc["key"].split(":")
        comp = ":".join(parts[2:-1])
        cause = parts[1] + (f" {comp}" if comp and "#" not in comp else "")
        console.print(f"  … and {len(rows)} nodes {rows[0]['verdict']}, in service, with only "
                      f"{escape(cause)} of the incident above ({compress(n['id'] for n in rows)}),"
                      " not listed (status --all lists every node)")
    if len(quiet) > OK_NODES_LISTED and not every_node:
        console.print(f"  … and {len(quiet)} nodes ok, in service, not listed "
                      "(status --all lists every node, as --json does)")


ALIKE_ROWS_LISTED = 8
"""Above this many nodes in service whose only trouble is one common cause (a ``common``
incident's ``folded``), ``status``'s node table says them in one line under its own: 2,048
agents that could not read their kernel log were 2,048 identical rows, the nodes with a fault
of their own lost among them (a review)."""


def _alike_rows(incidents: list[dict[str, Any]],
                nodes: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The node rows each ``common`` incident stands for alone, where more than
    ``ALIKE_ROWS_LISTED``: undrained (a drained one is in hand, its row says so), of one verdict."""
    out = []
    by_id = {n["id"]: n for n in nodes}
    for inc in incidents:
        if inc.get("kind") != "common":
            continue
        # A node of two such causes (its kernel log and its counters) is said under the first.
        rows = [n for nid in inc.get("folded", ()) if (n := by_id.get(nid)) is not None
                and n["drain"] == "none" and n["verdict"] == "degraded"]
        if len(rows) > ALIKE_ROWS_LISTED:
            out.append((inc, rows))
            for n in rows:
                del by_id[n["id"]]
    return out


REASONS_SHOWN = 3


def _reasons(findings: list[str]) -> str:
    """The first findings and how many more: cut at three without a word, a port DOWN after a
    rate, a flap count and a saturated counter was not in the row at all (a real-node audit:
    "IB UP 7/8" beside no port down). They come worst first (``node_summary`` sorts them by
    ``judgements.findings_worst_first``, the TUI's order), so the three shown are the worst."""
    shown = "; ".join(findings[:REASONS_SHOWN])
    more = len(findings) - REASONS_SHOWN
    return f"{shown} (+{more} more)" if more > 0 else shown


FAIL_ON = {"failed": frozenset({"failed", "offline"}),
           "degraded": frozenset({"failed", "offline", "degraded", "stale"})}
"""``status --fail-on``: the verdicts that make it exit 1 (a script's ``status || page``)."""
EXIT_UNHEALTHY = 1


EXIT_UNSEEN = 3
"""What ``status`` exits with when it could not see the fleet: the broker connection lost
during the watch, the broker most likely cut its retained burst (nodes missing from every
count), or, with ``--fail-on``, nodes that sent no telemetry during it."""


def said_burst_cut(session: ConsoleSession, out: dict[str, Any]) -> bool:
    """Whether the broker most likely cut the session's retained burst in the births
    (``RetainedBurst._note_burst_cut``); if so, one sentence on stderr and
    ``retained_burst_cut`` in the summary (null otherwise; ``retained_burst_judged`` says
    whether the watch judged its burst at all): nodes whose births it dropped are in no
    count, so the listing must not read as the fleet (2,048 dead agents listed as 1,020
    nodes, exit 0: a review). Not judged is a boolean beside it, not a string in its place:
    ``"unknown"`` there read as a cut to ``if summary["retained_burst_cut"]`` and broke
    ``jq .retained_burst_cut.nodes`` (a review); and the watch is not held open for the
    judgement: a node reconnecting now and then kept the burst from ever going quiet, and
    every default status took 60 s (a review)."""
    cut = session.burst_cut
    # Live nodes whose births it dropped are learned later from their telemetry (a rebirth
    # ask each): a 30 s watch of 2,048 nodes on Mosquitto's default queue listed all 2,048
    # while the sentence said that such nodes are not listed (an SRE run). A dead node's
    # dropped birth is never learned, so the cut stays said, and the exit 3 with it.
    # Counted by the rebirth asks answered (``FollowUps.rebirth_asked``): the judgement's own
    # count of nodes born takes in those that came before it. Only a node asked for being
    # heard with no birth at all (``asked_unborn``) and none of whose births was refused: a
    # born node asked again for a status it refused (a newer agent's drain state), or one
    # whose garbage birth came, had no birth the broker dropped (a review).
    state = session.state
    refused = state.malformed.refused_births
    learned = 0 if cut is None else sum(
        1 for n in session.follow_ups.asked_unborn
        if (st := state.nodes.get(n)) is not None and st.birth is not None
        and n not in refused)
    out["retained_burst_cut"] = None if cut is None else {
        "nodes_without_status": cut[0], "nodes": cut[1], "nodes_learned_since": learned}
    out["retained_burst_judged"] = session.burst_judged
    if cut is None:
        return False
    since = (f"; {learned} node{'' if learned == 1 else 's'} whose birth it dropped "
             f"{'was' if learned == 1 else 'were'} learned since from their telemetry, but a "
             "dead node's never is" if learned else "")
    print(f"fleetdeck status: {out.get('cluster', session.cluster)}: "
          f"{BURST_CUT_TEXT.format(missing=cut[0], born=cut[1])}{since}.", file=sys.stderr)
    return True


def said_quiet(session: ConsoleSession, seen: bool, cluster: str | None = None) -> None:
    """One sentence on stderr when the watch ended hearing nothing for a while, its broker
    connected (``quiet_link`` in the summary): its nodes read stale or waiting for the fleet's
    silence, said once, not only node by node. Not where the connection was lost (``seen``
    false: that is said, and is the cause)."""
    quiet = session.quiet_link
    if quiet is None or not seen:
        return
    where = f"{cluster}: " if cluster is not None else ""
    print(f"fleetdeck status: {where}nothing heard for {quiet.quiet_s:.0f} s at the end of the "
          f"watch ({quiet.text}).", file=sys.stderr)


def unheard(summaries: list[dict[str, Any]], wait_s: float,
            talking: Sequence[str] = ()) -> list[str]:
    """The nodes still ``waiting`` after the watch, said on stderr (for a script too): a
    `status --wait 1 --fail-on failed` read 63 of 64 nodes waiting, exit 0, and missed the
    four failed among them (a newcomer's run). ``talking``: those of them whose deltas were
    heard (``FleetState.talking_unread``), said apart: they did send telemetry."""
    waiting = [n["id"] for out in summaries for n in out.get("nodes", [])
               if n["verdict"] == WAITING]
    dropped = {n["id"] for out in summaries for n in out.get("nodes", [])
               if any(KEYFRAMES_DROPPED in f for f in n.get("findings", []))}
    if dropped:
        nodes = f"{len(dropped)} node{'' if len(dropped) == 1 else 's'}"
        print(f"fleetdeck status: {nodes} ({compress(sorted(dropped))}) sent telemetry deltas "
              "but no keyframe, though their agents answered the asks for one: the broker "
              "most likely drops their keyframes, their largest telemetry (its "
              "message_size_limit or max_packet_size below their size?).", file=sys.stderr)
    heard = [n for n in waiting if n in set(talking) and n not in dropped]
    if heard:
        nodes = f"{len(heard)} node{'' if len(heard) == 1 else 's'}"
        print(f"fleetdeck status: {nodes} ({compress(heard)}) sent telemetry deltas but no "
              f"keyframe in the {wait_s:g} s watch: their health is unknown (a broker user "
              "that may not publish node/+/cmd, such as 'viewer', reads a node from its "
              f"agent's periodic keyframe, every {KEYFRAME_EVERY_S:.0f} s: leave out --wait, "
              f"or raise it to {KEYFRAME_EVERY_S + KEYFRAME_GRACE_S:.0f}).", file=sys.stderr)
    silent = [n for n in waiting if n not in set(talking)]
    if silent:
        nodes = f"{len(silent)} node{'' if len(silent) == 1 else 's'}"
        print(f"fleetdeck status: {nodes} ({compress(silent)}) sent no telemetry in the "
              f"{wait_s:g} s watch: their health is unknown (raise --wait; after a broker "
              f"restart the agents take up to {AGENT_RECONNECT_S:.0f} s to be back).",
              file=sys.stderr)
    # One sentence per cause: a scheduler not back after a broker restart is not an ACL.
    jobs: dict[str | None, set[str]] = {}
    for out in summaries:
        if out.get("jobs_unheard"):
            jobs.setdefault(out.get("jobs_unheard_why"), set()).update(out["jobs_unheard"])
    for cause, unheard_jobs in jobs.items():
        print(f"fleetdeck status: {jobs_unheard_text(sorted(unheard_jobs), cause)}.",
              file=sys.stderr)
    unborn = [n for out in summaries for n in out.get("unborn", [])]
    if unborn:
        # A node whose retained birth is garbage was left out of the counts, its failures
        # with it, and the exit was 0 (an SRE drill).
        nodes = f"{len(unborn)} node{'' if len(unborn) == 1 else 's'}"
        # Why, where a birth was refused: a node whose clock is an hour ahead sends births
        # that can never be taken, and asking again does not help (an SRE drill).
        why = {n: w for out in summaries for n, w in out.get("unborn_why", {}).items()}
        # Births answered and never come are no birth refused (a message_size_limit below a
        # birth's size: docs/reliability.md): said once, naming them.
        unheard = sorted(n for n, w in why.items() if w == BIRTHS_DROPPED)
        refused = sorted(n for n in why if why[n] != BIRTHS_DROPPED)
        said = "".join(f" {n}'s birth was refused: {why[n]}." for n in refused[:3])
        more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
        if unheard:
            said += (f" {compress(unheard)}: re-published when asked, and no birth came: "
                     f"{BIRTHS_DROPPED}.")
        print(f"fleetdeck status: {nodes} ({compress(unborn)}) sent messages but "
              f"{_unborn_cause(summaries)}: their health is unknown (a birth that "
              f"could not be read is asked for again).{said}{more}", file=sys.stderr)
    return waiting + unborn


def _unborn_cause(summaries: list[dict[str, Any]]) -> str:
    """Why nodes heard talking have no birth, as far as the summaries tell: "see 'malformed'"
    read on a default Mosquitto whose cut burst had dropped 29 births, with nothing malformed
    (an SRE run, 2,048 nodes on the default max_queued_messages; docs/reliability.md, "The
    retained burst")."""
    if any(out.get("totals", {}).get("malformed") for out in summaries):
        return "no birth this watch could read (see 'malformed')"
    if any(out.get("retained_burst_cut") for out in summaries):
        return ("no birth: the broker most likely dropped it with the retained burst it cut "
                "at connect")
    return "no birth yet"


def unhealthy(summaries: list[dict[str, Any]], fail_on: str | None,
              waiting: list[str] | None = None) -> int:
    """EXIT_UNHEALTHY, with a line on stderr, when a node of ``summaries`` reads as bad as
    ``fail_on`` or worse; else EXIT_UNSEEN when nodes are ``waiting`` (their health unknown:
    ``unheard`` said which); else 0."""
    if fail_on is None:
        return 0
    # A node drained or draining is one an operator has acted on: no page for it.
    bad = [n["id"] for out in summaries for n in out.get("nodes", [])
           if n["verdict"] in FAIL_ON[fail_on] and n["drain"] == "none"]
    if not bad:
        # A drained node not heard is in hand, as a drained bad one is: no page for it.
        drained = {n["id"] for out in summaries for n in out.get("nodes", [])
                   if n["drain"] != "none"}
        return EXIT_UNSEEN if set(waiting or ()) - drained else 0
    print(f"fleetdeck status: {len(bad)} node(s) {fail_on} or worse ({compress(bad)}; "
          f"--fail-on {fail_on})", file=sys.stderr)
    return EXIT_UNHEALTHY


def run_status(url: BrokerURL, cluster: str | list[str], wait_s: float | None, as_json: bool,
               *, digests: bool = False, fail_on: str | None = None,
               every_node: bool = False, command_key: bytes | None = None) -> int:
    """One cluster: its summary (the keys of docs/protocol.md). Several (``--cluster a,b``):
    every cluster watched at the same time, each by its own session, then one summary per
    cluster plus their sum (``run_status_many``)."""
    tune_gc()
    clusters = [cluster] if isinstance(cluster, str) else cluster
    if len(clusters) > 1:
        return run_status_many(url, clusters, wait_s, as_json, digests=digests,
                               fail_on=fail_on, every_node=every_node,
                               command_key=command_key)
    async def run() -> tuple[tuple[ConsoleSession, float], float | None]:
        connected = asyncio.Event()
        return await with_uptime(url, collect(url, clusters[0], wait_s, digests=digests,
                                              connected=connected, command_key=command_key),
                                 connected=connected)

    (session, watched), uptime = asyncio.run(run())
    out = _summary(session, url, watched)
    talking = session.state.talking_unread()
    out["broker_uptime_s"] = uptime
    cut = said_burst_cut(session, out)
    if as_json:
        print(json.dumps(out, indent=2))
    else:
        render_summary(out, table_console(), every_node)
        if not digests and sys.stderr.isatty():
            # The agents count N2/N3/G11's windows and hold G12/G13 (docs/protocol.md, "Agent
            # windows"), but the other rates and holds are the watch's alone. For a person at a
            # terminal: stdout stays the table, and a script's stderr quiet.
            print(f"fleetdeck status: judged on {watched:g} s of telemetry and the agents' own "
                  "windows (N2, N3, G11) and holds (G12, G13): rates and holds (N4, G9, G10) "
                  "count only "
                  "what this watch saw; status --digests has the collectors' judgement, "
                  "events their history.", file=sys.stderr)
    bridge = out.get("bridge")
    if bridge is not None and not bridge["up"] and not bridge["cluster_side"]:
        # Nothing of the cluster crosses to this (site) broker: what it lists is as of the
        # bridge's fall, one cause, not each node's (console/bridge.py). Unseen, as for a
        # broker this watch lost; a bad node seen before it still pages (exit 1).
        print(f"fleetdeck status: {bridge['text']}; the verdicts are as of then.",
              file=sys.stderr)
        return exit_when_cut_off(out, fail_on)
    collectors = session.state.collectors.values()
    if digests and collectors and not any(c.online for c in collectors):
        print("fleetdeck status: no collector is live: the digests are what the collectors "
              "last said, not the fleet now.", file=sys.stderr)
        return EXIT_UNSEEN
    blind = session.state.blind
    if blind is not None:
        # A script must not read a fleet it could not see as healthy (docs/protocol.md); a
        # bad node seen before the loss is bad all the same: exit 1 for it, not 3 (a drill
        # read "failed 2" and exit 3, which a script routes to "blind", not "page").
        print(f"fleetdeck status: {session.state.blind_why} during the watch "
              f"(at {utc_hms(session.state.outage_start())} UTC): the verdicts "
              "are as of then.", file=sys.stderr)
    said_quiet(session, blind is None)
    # Said in every case: a cut burst left the nodes it did list waiting or unborn unnamed on
    # stderr (a review).
    waiting = unheard([out], watched, talking)
    if blind is not None or cut:
        # An incomplete listing is a fleet not seen: 3, as for a lost broker; 1 where a node
        # it did see is bad (``--fail-on``).
        return exit_when_cut_off(out, fail_on)
    return unhealthy([out], fail_on, waiting)


def exit_when_cut_off(out: dict[str, Any], fail_on: str | None) -> int:
    """A watch that lost its broker: EXIT_UNSEEN, unless ``fail_on`` finds a bad node among
    those seen before the loss (EXIT_UNHEALTHY, said on stderr)."""
    return EXIT_UNHEALTHY if unhealthy([out], fail_on) == EXIT_UNHEALTHY else EXIT_UNSEEN


T = TypeVar("T")
SYS_INTERVAL_S = 10.0
"""Mosquitto's default ``sys_interval``: how often it publishes ``$SYS/broker/uptime``."""
UPTIME_PROBE_S = 2.0
"""The longest the uptime probe may take; it runs beside the watch, so it costs nothing more
where the broker answers, and nothing is said where it does not."""


async def with_uptime(url: BrokerURL, watch: Coroutine[Any, Any, T], *,
                      connected: asyncio.Event | None = None) -> tuple[T, float | None]:
    """``watch``'s result and the broker's uptime (``$SYS/broker/uptime``), read beside it;
    said on stderr when the broker is younger than the agents' reconnect grace. Right after a
    restart of a broker that kept no retained messages, nodes not reconnected yet are missing
    altogether: `status` read "2 nodes ok 2" of a 32-node fleet with two failed ones (an SRE
    drill). None where the broker does not say (amqtt) or the probe fails; nothing is said
    when the watch itself fails (its sentence is the one to read). ``connected``: the probe
    connects only once the watch has (amqtt's connect race, ``collect``); at most a tick
    later on Mosquitto, whose uptime is as of its last refresh anyway."""

    asked = time.time()

    probed: list[bool] = []

    async def probe() -> float | None:
        nonlocal asked
        if connected is not None:
            await connected.wait()
            asked = time.time()
        probed.append(True)
        try:
            return await asyncio.wait_for(broker_uptime_s(
                url, f"fd-uptime-{os.getpid()}-{int(time.time())}"), UPTIME_PROBE_S)
        except (TimeoutError, aiomqtt.MqttError, TransportError, OSError):
            return None

    probing = asyncio.create_task(probe())
    try:
        result = await watch
    except BaseException:
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
        raise
    if not probed:
        # The watch never connected (nor, with several clusters, did the last one): a broker
        # that did not answer it would keep the probe waiting UPTIME_PROBE_S more for nothing.
        probing.cancel()
        await asyncio.gather(probing, return_exceptions=True)
        return result, None
    up = await probing
    if up is not None and up < AGENT_RECONNECT_S:
        # Judged again with the restart known: a node not heard since it is reconnecting
        # (waiting), not stale, and no rack "fell silent" (FleetState.broker_restarted).
        # The broker says its uptime every sys_interval (Mosquitto: 10 s), so it may be that
        # much older than it reads: taken as early as it can be, an agent that reconnected
        # since (and is silent: hung) is not taken for one still reconnecting.
        unsettled = on_digests = False
        for watched in result if isinstance(result, list) else [result]:
            # A cluster's (session, seconds watched), or the UserError it ended in.
            session = watched[0] if isinstance(watched, tuple) else watched
            if isinstance(session, ConsoleSession):
                started = asked - up - SYS_INTERVAL_S
                session.state.broker_restarted(started, latest=asked - up)
                session.tick()
                nodes = session.state.nodes.values()
                # On digests no node waits: a collector republishes its digests as it
                # reconnects, and the share of one not back yet, whose digests (and birth) a
                # broker without persistence lost, is not there to wait. A drill read "ok 26"
                # of 64 nodes, exit 0, with no word of the restart.
                on_digests = on_digests or session.digests
                unsettled = unsettled or session.digests or not nodes or any(
                    st.verdict_shown == WAITING for st in nodes)
            else:
                unsettled = True
        # "started 0 s ago" of a broker 15 s old read as a broker restarting under the
        # operator's feet (a 3 a.m. drive): its uptime is as of its last $SYS refresh. Said
        # only while a node still waits: every status in a demo's first half minute printed
        # it over a healthy fleet (a newcomer's run).
        if unsettled and on_digests:
            print(f"fleetdeck status: the broker at {url} started {up:.0f}-"
                  f"{up + SYS_INTERVAL_S:.0f} s ago: collectors may still be reconnecting: "
                  "a node whose digest the broker did not keep (no persistence) is missing "
                  "from the counts until its collector sends it again (docs/reliability.md).",
                  file=sys.stderr)
        elif unsettled:
            print(f"fleetdeck status: the broker at {url} started {up:.0f}-"
                  f"{up + SYS_INTERVAL_S:.0f} s ago: agents may still "
                  "be reconnecting: a node not heard since reads waiting, and one whose birth "
                  "the broker did not keep (no persistence) is missing from the counts "
                  "(docs/reliability.md).", file=sys.stderr)
    return result, up


def _summary(session: ConsoleSession, url: BrokerURL, wait_s: float) -> dict[str, Any]:
    # Equal incidents by key, not by ``since``: a watch's ``since`` is when its first sample
    # of each node arrived, and two runs on one fleet listed them in two orders.
    quiet = session.quiet_link
    return fleet_summary(session.state, time.time(), broker=str(url), collected_s=wait_s,
                         interruptions=session.interruptions.total, log=session.log.lines(),
                         dated=False, console_problems=session.problems_json(),
                         quiet_link=quiet.as_json() if quiet is not None else None)


def run_status_many(url: BrokerURL, clusters: list[str], wait_s: float | None, as_json: bool,
                    *, digests: bool = False, fail_on: str | None = None,
                    every_node: bool = False, command_key: bytes | None = None) -> int:
    """``{"clusters": [summary, …], "combined": row}``; a cluster that could not be watched
    keeps its place with an ``error`` sentence, and the exit status is 2 (as for one cluster)."""

    async def all_of(turns: list[asyncio.Event]) -> list[tuple[ConsoleSession, float] | UserError]:
        # Watched at the same time, connected one after another (amqtt's connect race,
        # ``collect``): each waits for the one before to have its SUBACK, and none connects
        # once one got no answer in its time (``unanswered``).
        unanswered: list[str] = []

        async def one(i: int, name: str) -> tuple[ConsoleSession, float] | UserError:
            try:
                return await collect(url, name, wait_s, digests=digests,
                                     after=turns[i - 1] if i else None, connected=turns[i],
                                     unanswered=unanswered, command_key=command_key)
            except UserError as err:
                return err
            finally:
                turns[i].set()
        return await asyncio.gather(*(one(i, name) for i, name in enumerate(clusters)))

    async def run() -> tuple[list[tuple[ConsoleSession, float] | UserError], float | None]:
        turns = [asyncio.Event() for _ in clusters]  # made in the loop that waits on them
        return await with_uptime(url, all_of(turns), connected=turns[-1])

    results, uptime = asyncio.run(run())
    summaries: list[dict[str, Any]] = []
    rows: list[ClusterRow] = []
    errors: list[str] = []
    unwatched: list[tuple[str, str]] = []
    longest = 0.0
    talking: list[str] = []
    cut = False
    for name, result in zip(clusters, results, strict=True):
        if isinstance(result, UserError):
            summaries.append({"cluster": name, "error": str(result)})
            errors.append(str(result))
            unwatched.append((name, str(result)))
            continue
        got, watched = result
        longest = max(longest, watched)
        out = _summary(got, url, watched)
        cut = said_burst_cut(got, out) or cut
        said_quiet(got, got.state.blind is None, name)
        row = cluster_row(got.state, connection=got.feed.conn.state
                          if got.feed is not None else "", dated=False)
        talking += got.state.talking_unread()
        summaries.append(out)
        rows.append(row)
    if len(errors) == len(clusters):
        raise UserError(errors[0] if len(errors) == 1 else
                        f"no cluster could be watched: {'; '.join(errors)}")
    total = combined(rows)
    if as_json:
        print(json.dumps({"broker": str(url), "collected_s": longest,
                          "broker_uptime_s": uptime, "clusters": summaries,
                          "combined": total.as_json()}, indent=2))
    else:
        console = table_console()
        render_clusters(rows, total, console, unwatched)
        for out in summaries:
            console.print()
            if "error" in out:
                console.print(f"[b]{escape(out['cluster'])}[/]: [red]{escape(out['error'])}[/]")
            else:
                render_summary(out, console, every_node)
    for err in errors:
        print(f"fleetdeck status: {err}", file=sys.stderr)
    # The clusters that were watched still name their nodes not heard: a cluster gone dark
    # beside them left those unsaid (README: "is named on stderr").
    waiting = unheard(summaries, longest, talking)
    # A cluster whose bridge into this (site) broker is down is not seen, as with one cluster
    # (``run_status``): beside a cluster whose bridge is up it read exit 0, unsaid.
    down = [out["bridge"] for out in summaries if (out.get("bridge") or {}).get("up") is False
            and not out["bridge"]["cluster_side"]]
    for bridge in down:
        print(f"fleetdeck status: {bridge['text']}; its verdicts are as of then.",
              file=sys.stderr)
    if errors:
        return 2
    worst = unhealthy(summaries, fail_on, waiting)
    return EXIT_UNSEEN if (cut or down) and worst == 0 else worst


TOP_INCIDENT_MIN = 20
"""Fewer columns than this left for TOP INCIDENT beside the counts: it goes under the table."""


def render_clusters(rows: list[ClusterRow], total: ClusterRow, console: Console,
                    unwatched: Sequence[tuple[str, str]] = ()) -> None:
    """The fleet of fleets: one line per cluster, worst first, then the sum. A cluster that
    could not be watched (``unwatched``: name, why) comes first, with its counts unknown: left
    out of the table, a whole cluster gone dark read as a fleet of fleets without it."""
    # WAIT: nodes whose health is unknown yet; without it, a cluster watched too briefly
    # read "64 nodes, ok 0, fail 0, 0/512 usable" with nothing to say why (a newcomer's run).
    heads = ("CLUSTER", "NODES", "OK", "DEGR", "FAIL", "STALE", "OFFL", "WAIT", "GPUS USABLE",
             "IB UP", "JOBS R", "INC")

    def cells(r: ClusterRow, name: str) -> list[str]:
        v = r.by_verdict
        return [name, str(r.nodes), str(v.get("ok", 0)),
                *(f"[{VERDICT_STYLE[k]}]{v.get(k, 0)}[/]" if v.get(k, 0) else "0"
                  for k in ("degraded", "failed", "stale", "offline", "waiting")),
                f"{r.gpus_usable}/{r.gpus}", f"{r.ib_ports_up}/{r.ib_ports}",
                f"{r.jobs_running}/{r.jobs_total}", str(r.incidents)]

    lines = [([f"[red]{escape(name)}[/]", *(["?"] * 11)], f"[red]{escape(why)}[/]")
             for name, why in unwatched]
    lines += [(cells(r, escape(r.cluster)), escape(r.top_incident)) for r in worst_first(rows)]
    lines.append((cells(total, "[b]all[/]"), escape(total.top_incident)))
    # The counts are never cut: rich shrank every column alike, so at 80 columns they read
    # "8…" and "81…" while the long root-cause line kept its room. Each count column is as
    # wide as its widest cell; TOP INCIDENT, the one cell worth cutting, takes what is left,
    # or goes under the table when too little is (each cluster stays one line either way).
    widths = [max(Text.from_markup(line[0][i]).cell_len for line in [([*heads], ""), *lines])
              for i in range(len(heads))]

    def across(cols: list[int], gap: int) -> int:
        return sum(widths[i] for i in cols) + gap * (len(cols) - 1)

    every = list(range(len(heads)))
    if across(every, 1) <= console.width:
        groups, gap = [every], 2 if across(every, 2) + 2 + TOP_INCIDENT_MIN <= console.width else 1
    else:
        # Too many digits for one line (16,384 nodes at 80 columns: 84 columns of counts): two
        # tables, health then capacity, each led by CLUSTER, so every count reads whole. Cut at
        # the right edge, "13/14" read "13/1" and INC went with nothing to say so (a review).
        groups, gap = [], 2
        for part in (every[1:8], every[8:]):
            group = [0]
            for i in part:
                if len(group) > 1 and across([*group, i], gap) > console.width:
                    groups.append(group)
                    group = [0]
                group.append(i)
            groups.append(group)
    left = console.width - across(groups[-1], gap) - gap
    beside = left >= TOP_INCIDENT_MIN
    for n, group in enumerate(groups):
        table = Table(box=None, pad_edge=False, padding=(0, gap, 0, 0))
        for i in group:
            table.add_column(heads[i], no_wrap=True, min_width=widths[i])
        last = n == len(groups) - 1
        if last and beside:
            widest = max(Text.from_markup(top).cell_len for _, top in lines)
            table.add_column("TOP INCIDENT", no_wrap=True, overflow="ellipsis",
                             width=max(len("TOP INCIDENT"), min(left, widest)))
        for counts, top in lines:
            table.add_row(*(counts[i] for i in group), *([top] if last and beside else []))
        if n:
            console.print()
        # Not cropped: on a terminal too narrow for even CLUSTER and one count, the line runs
        # long (the terminal wraps it) rather than losing digits at the edge unmarked.
        console.print(table, crop=False)
    if not beside and any(top for _, top in lines):
        console.print("TOP INCIDENT")
        for counts, top in lines:
            if top:
                console.print(f"  {counts[0]}: {top}", no_wrap=True, overflow="ellipsis")
