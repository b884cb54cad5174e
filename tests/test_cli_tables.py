"""CLI tables piped into a file or another program keep one line per row: rich used to wrap them
at 80 columns whenever stdout was not a terminal. The real CLI, stdout piped."""

import asyncio
import io
import os
import subprocess
import time

import pytest

from fleetdeck.agents.source import EventDraft
from fleetdeck.console.cli.history import PIPE_WIDTH, table_console
from fleetdeck.console.ingest import Ingest
from fleetdeck.console.state import FleetState
from fleetdeck.console.store import Store, TickRows
from fleetdeck.protocol.topics import Kind
from tests.conftest import REPO, fleetdeck_cmd, spawn, stop_process
from tests.helpers import FakeNode

LONG = ("mlx5_ib3:1 went down and up 9 times in 60 s; symbol errors 4956/h; receive errors "
        "increasing; suspect the cable or the leaf switch port, not the node")


def piped(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(fleetdeck_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, env=env, check=False)


def test_table_console_is_wide_only_when_piped(monkeypatch):
    from rich.console import Console

    monkeypatch.delenv("COLUMNS", raising=False)
    tty = Console(force_terminal=True, width=97)
    assert table_console(tty) is tty  # a terminal: its real width
    pipe = table_console(Console(file=io.StringIO()))
    assert pipe.width == PIPE_WIDTH
    monkeypatch.setenv("COLUMNS", "120")
    plain = Console(file=io.StringIO())
    assert table_console(plain) is plain  # $COLUMNS wins


def table_lines(out: str) -> list[str]:
    """The summary line and the node table; the incidents block between them is checked by
    its own tests (one incident is two lines: its title and its action)."""
    lines = [line for line in out.splitlines() if line.strip()]
    if any(line.startswith(("incidents", "jobs held up")) for line in lines):
        start = next(i for i, line in enumerate(lines) if line.startswith("NODE"))
        lines = lines[:1] + lines[start:]
    return lines


def test_replay_summary_rows_are_not_wrapped():
    """``replay --headless`` prints the same table as ``status`` (render_summary)."""
    res = piped("replay", str(REPO / "fixtures" / "thermal.jsonl.gz"), "--headless")
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith("gpu0005"))
    assert row.rstrip().endswith("G12 gpu3: clock throttled (sw thermal)")
    assert len(row.rstrip()) > 80
    assert all(line.split()[0].startswith(("gpu", "NODE", "fx")) for line in
               table_lines(res.stdout))  # no continuation lines


async def _store_with_long_event(path) -> None:
    node = FakeNode("gpu0001", t0=1_800_000_000.0)
    ingest = Ingest(node.cluster)
    state = FleetState(node.cluster, ingest.malformed)
    store = await Store.open(path)
    try:
        node.feed(ingest, node.birth(), Kind.BIRTH)
        node.feed(ingest, node.status(), Kind.STATUS)
        node.feed(ingest, node.telemetry(), Kind.TELEMETRY)
        node.feed(ingest, node.agent._event(EventDraft("link_flap", LONG,
                                                       component="mlx5_ib3:1")), Kind.EVENT)
        batch = ingest.take_batch()
        state.apply(batch, node.now)
        await store.write_tick(batch, state.take_transitions())
    finally:
        await store.close()


def test_events_rows_are_not_wrapped(tmp_path):
    db = tmp_path / "s.db"
    asyncio.run(_store_with_long_event(db))
    res = piped("events", "--db", str(db), "--since", "2020-01-01T00:00")
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if "link_flap" in line]
    assert len(rows) == 1 and rows[0].rstrip().endswith(LONG)
    # No row padded to the longest message: `grep 'carrier$'` must find its line.
    assert not [line for line in res.stdout.splitlines() if line.endswith(" ")], res.stdout


async def _store_with_long_interruption(path) -> None:
    store = await Store.open(path)
    try:
        await store.write_rows(TickRows(interruptions=[
            ("job-4102", 1_800_000_000.0, "network", "gpu0001,gpu0002", 16, 3.25, LONG)]))
    finally:
        await store.close()


def test_report_rows_are_not_wrapped(tmp_path):
    db = tmp_path / "s.db"
    asyncio.run(_store_with_long_interruption(db))
    res = piped("report", "--db", str(db), "--since", "2020-01-01T00:00")
    assert res.returncode == 0, res.stderr
    rows = [line for line in res.stdout.splitlines() if "job-4102" in line]
    assert len(rows) == 1, res.stdout
    assert rows[0].startswith("2027-01-15T08:00:00") and rows[0].rstrip().endswith(LONG)
    assert res.stdout.splitlines()[0].rstrip().endswith("effective training time ratio -")
    assert not [line for line in res.stdout.splitlines() if line.endswith(" ")], res.stdout


@pytest.mark.needs("mosquitto")
def test_status_rows_are_not_wrapped(mosquitto, tmp_path):
    url = str(mosquitto.url)
    sim = spawn("sim", "--broker", url, "--cluster", "wide", "--nodes", "4", "--seed", "2",
                log=tmp_path / "sim.log")
    try:
        deadline = time.monotonic() + 40
        while True:  # an uncorrectable ECC error: three findings, a long REASONS cell
            res = piped("inject", "--broker", url, "--cluster", "wide", "ecc_dbe",
                        "node=gpu0002", "gpu=1", "--wait", "2")
            if res.returncode == 0 or time.monotonic() > deadline:
                break
        assert res.returncode == 0, res.stderr
        row = ""
        while time.monotonic() < deadline and row.count(";") < 2:
            res = piped("status", "--broker", url, "--cluster", "wide", "--wait", "2")
            row = next((line for line in res.stdout.splitlines()
                        if line.startswith("gpu0002")), "")
        assert row.count(";") >= 2 and len(row.rstrip()) > 80, res.stdout  # one line
        assert res.stdout.splitlines()[0].startswith("wide @ ")
        assert all(line.split()[0].startswith(("gpu", "NODE", "wide")) for line in
                   table_lines(res.stdout))  # no continuation lines
    finally:
        stop_process(sim)


@pytest.mark.parametrize("command", ["events", "report", "history"])
def test_a_since_clock_time_taken_as_yesterday_says_so_once(tmp_path, monkeypatch, capsys,
                                                             command):
    """``events --since 07:59`` typed at 00:10 UTC took yesterday's 07:59 without a word: the
    rows (or "nothing since") read as today's. One line on stderr says which day it took."""
    from datetime import UTC, datetime
    from types import SimpleNamespace

    from fleetdeck.console.cli import history as hist
    from fleetdeck.console.cli import report as rep
    from fleetdeck.errors import UserError

    db = tmp_path / "s.db"
    asyncio.run(_store_with_long_event(db))  # an event at 2027-01-15T08:00Z
    now = datetime(2027, 1, 16, 0, 10, tzinfo=UTC).timestamp()
    clock = SimpleNamespace(time=lambda: now)
    monkeypatch.setattr(hist, "time", clock)
    monkeypatch.setattr(rep, "time", clock)
    monkeypatch.setenv("COLUMNS", "200")
    if command == "history":
        from fleetdeck.console.store import Store, TickRows

        async def minute() -> None:  # one minute of gpu0001 (08:00Z), for history to find
            store = await Store.open(db)
            try:
                await store.write_rows(TickRows(gpu=[
                    ("gpu0001", 0, int(now - 16 * 3600 + 600) // 60, 60, 90.0, 50.0, 400.0,
                     1980.0, 1)]))
            finally:
                await store.close()
        asyncio.run(minute())
        # An error stays one sentence: the note comes only with an answer.
        with pytest.raises(UserError, match="holds no minute"):
            hist.run_history(db, "gpu0099", "util", "07:59", False)
        assert "yesterday" not in capsys.readouterr().err

    if command == "events":
        with pytest.raises(UserError, match="names no event kind"):
            hist.run_events(db, "07:59", None, ["bogus"], False)
        assert "yesterday" not in capsys.readouterr().err

    def history(since: str) -> int:
        return hist.run_history(db, "gpu0001", "util", since, False)

    run = {"events": lambda s: hist.run_events(db, s, None, None, False),
           "report": lambda s: rep.run_report(db, s, False), "history": history}[command]
    assert run("07:59") == 0
    out, err = capsys.readouterr()
    said = f"fleetdeck {command}: since 07:59 UTC yesterday (2027-01-15)"
    assert err.count(said) == 1, err
    if command == "events":
        assert "link_flap" in out
    # Today's clock time, a span or an ISO time: nothing said (it says its day, or has one).
    for since in ("00:05", "1h", "2027-01-15T07:59"):
        run(since)
        assert "yesterday" not in capsys.readouterr().err, since


def _one_healthy_node() -> tuple[FakeNode, FleetState]:
    """A fleet of one node, its birth and one sample applied."""
    from fleetdeck.protocol import codec
    from fleetdeck.protocol.topics import Kind, topic_for

    node = FakeNode()
    ingest = Ingest(node.cluster)
    for kind, msg in ((Kind.BIRTH, node.birth()), (Kind.TELEMETRY, node.telemetry())):
        ingest.handle(topic_for(node.cluster, kind, node.node_id), codec.encode(msg), node.now)
    state = FleetState(node.cluster, ingest.malformed)
    state.apply(ingest.take_batch(), node.now)
    return node, state


def test_the_status_table_says_how_many_reasons_it_leaves_out():
    """The REASONS cell cut the findings at three without a word: a port DOWN that came fourth
    (after a rate, a flap count and a saturated counter) was not in the row at all, beside
    "IB UP 7/8" (a real-node audit)."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.summary import fleet_summary

    node, state = _one_healthy_node()
    summary = fleet_summary(state, node.now)
    summary["nodes"][0]["findings"] = [
        "N1 mlx5_ib2:1: 200 Gb/s, not 400", "N5 mlx5_ib5:1: 5 carrier losses/24h (≥ 5)",
        "N6 mlx5_ib6:1: symbol_error saturated", "N1 mlx5_ib7:1: DOWN/Disabled"]
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400))
    (row,) = [ln for ln in out.getvalue().splitlines() if ln.startswith(node.node_id)]
    assert row.rstrip().endswith("N6 mlx5_ib6:1: symbol_error saturated (+1 more)"), row


def test_the_status_summary_line_wraps_between_groups_on_a_narrow_terminal(monkeypatch):
    """At 80 columns the summary line broke inside a group: "GPUs 512" ended one line and
    "(in use 432, …)" began the next (a newcomer's run). It wraps between groups, the next
    lines indented; piped, it stays one line for grep."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.summary import fleet_summary

    node, state = _one_healthy_node()
    summary = fleet_summary(state, node.now)
    summary.update(cluster="demo", broker="mqtt://127.0.0.1:25101")
    summary["totals"].update(nodes=64, gpus=512, gpus_in_use=432, gpus_free=48, gpus_failed=1,
                             gpus_out=31, ib_ports=512, ib_ports_up=505, ib_ports_down=7,
                             ib_ports_erroring=18)
    summary["totals"]["by_verdict"].update(ok=44, degraded=16, failed=4)
    groups = ["GPUs 512 (in use 432, free 48, failed 1, out 31)",
              "IB up 505/512 (down 7, erroring 18)", "drained 0 draining 0", "malformed 0"]
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=80))
    head = out.getvalue().split("incidents")[0].split("NODE")[0].splitlines()
    assert all(len(line) <= 80 for line in head), head
    assert head[0].startswith("demo @ mqtt://127.0.0.1:25101: 64 nodes  ok 44"), head
    assert all(line.startswith("  ") for line in head[1:]), head
    for group in groups:
        assert sum(group in line for line in head) == 1, (group, head)
    monkeypatch.delenv("COLUMNS")
    piped = io.StringIO()
    render_summary(summary, Console(file=piped, width=80))
    first = piped.getvalue().splitlines()[0]
    assert all(group in first for group in groups), first


def test_the_status_table_shows_a_port_down_before_warnings_it_would_cut():
    """The REASONS cell cut the findings at three in the order the rules wrote them: a port
    DOWN (drain) after three warnings was the one left out, as "(+1 more)" (a review). The
    findings come worst first, by the console's own ranking (``finding_rank``)."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.health import Finding, Severity
    from fleetdeck.console.summary import fleet_summary

    node, state = _one_healthy_node()
    down = Finding("N1", Severity.DRAIN, "mlx5_ib7:1", "DOWN/Disabled")
    state.nodes[node.node_id].findings = [
        Finding("N4", Severity.WARN, "mlx5_ib2:1", "receive errors increasing"),
        Finding("N6", Severity.WARN, "mlx5_ib6:1", "symbol_error saturated"),
        Finding("N4", Severity.WARN, "mlx5_ib5:1", "12 symbol errors/s (> 10/s)"), down]
    summary = fleet_summary(state, node.now)
    assert summary["nodes"][0]["findings"][0] == str(down)
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400))
    (row,) = [ln for ln in out.getvalue().splitlines() if ln.startswith(node.node_id)]
    assert "N1 mlx5_ib7:1: DOWN/Disabled; N4 mlx5_ib2:1: receive errors increasing; N4 " in row
    assert row.rstrip().endswith("(+1 more)"), row


def test_status_lists_nodes_in_the_consoles_health_order_in_text_and_json():
    """Of one verdict, the console's HEALTH sort puts the nodes no one acted on before the
    drained or draining ones (``rows.health_order``); ``status`` sorted by the verdict alone in
    its table (a failed node drained an hour ago above one no one had touched, its name first)
    and by id in --json. Both now list the nodes as the console does."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.node_order import NodeOrder
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.messages import DrainState
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(6, clock)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=clock)
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0001", DrainState.DRAINED, "ib", "alice")
    fleet.status(ingest, "gpu0002", DrainState.DRAINING, "ib", "alice")
    fleet.status(ingest, "gpu0004", DrainState.DRAINED, "disk", "bob")
    clock.advance(1)
    fleet.telemetry(ingest, faults={n: port_down() for n in ("gpu0001", "gpu0002", "gpu0003")})
    session.tick()
    want = ["gpu0003", "gpu0001", "gpu0002",  # failed: the untouched one first
            "gpu0005", "gpu0006", "gpu0004"]  # ok: the drained one last
    assert list(NodeOrder().ids(session.state, "verdict")) == want  # the console's HEALTH
    summary = fleet_summary(session.state, clock())
    assert [n["id"] for n in summary["nodes"]] == want
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400))
    rows = [ln.split()[0] for ln in out.getvalue().splitlines() if ln.startswith("gpu")]
    assert rows == want, out.getvalue()


def test_report_names_every_node_of_an_interruption(tmp_path):
    """The wide table listed the first four nodes of a switch outage's six and said nothing of
    the other two, where ``events`` said "(+2)" and the narrow table the whole host list (a 3
    a.m. drive): it prints the host list, as the narrow one does."""
    db = tmp_path / "s.db"

    async def fill() -> None:
        store = await Store.open(db)
        try:
            nodes = "gpu0017,gpu0018,gpu0020,gpu0021,gpu0024,gpu0025"
            await store.write_rows(TickRows(interruptions=[
                ("4105", 1_800_000_000.0, "network", nodes, 64, 0.68, "R -> NF")]))
        finally:
            await store.close()

    asyncio.run(fill())
    res = piped("report", "--db", str(db), "--since", "2020-01-01T00:00")
    assert res.returncode == 0, res.stderr
    row = next(line for line in res.stdout.splitlines() if line.startswith("2027"))
    assert "gpu[0017-0018,0020-0021,0024-0025]" in row, res.stdout


def test_a_status_summary_group_wider_than_the_terminal_wraps_inside_its_brackets(monkeypatch):
    """At 60 columns the GPUs group of 16,384 GPUs ("…, waiting 8)") is wider than a line:
    the console broke it at the margin, "waiting 8)" at the start of a line with no indent (a
    review). It wraps at a ", " of its bracket, indented deeper. And the verdict counts stay
    together: at 80 columns "ok 2000" ended the first line and "degraded 16" began the next."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.summary import fleet_summary

    node, state = _one_healthy_node()
    summary = fleet_summary(state, node.now)
    summary.update(cluster="demo", broker="mqtts://broker-a.prod.example.com:8883")
    summary["totals"].update(nodes=2048, gpus=16384, gpus_in_use=15000, gpus_free=1000,
                             gpus_failed=12, gpus_out=372, gpus_waiting=8, ib_ports=16384,
                             ib_ports_up=16000, ib_ports_down=7, ib_ports_erroring=18,
                             ib_ports_unknown=359)
    summary["totals"]["by_verdict"].update(ok=2000, degraded=16, failed=4, stale=28)

    def head(width):
        monkeypatch.setenv("COLUMNS", str(width))  # a terminal's, not a pipe's
        out = io.StringIO()
        render_summary(summary, Console(file=out, width=width))
        return out.getvalue().split("NODE")[0].rstrip("\n").splitlines()

    narrow = head(60)
    assert narrow[:4] == ["demo @ mqtts://broker-a.prod.example.com:8883: 2048 nodes",
                          "  ok 2000  degraded 16  failed 4  stale 28",
                          "  GPUs 16384 (in use 15000, free 1000, failed 12, out 372,",
                          "    waiting 8)"], narrow
    assert all(len(line) <= 60 and line.startswith("  ") for line in narrow[1:]), narrow
    wide = head(80)
    assert wide[:2] == ["demo @ mqtts://broker-a.prod.example.com:8883: 2048 nodes",
                        "  ok 2000  degraded 16  failed 4  stale 28"], wide
    monkeypatch.delenv("COLUMNS")


def test_a_group_after_a_split_one_starts_a_line_of_its_own():
    """After a group split at its bracket's ", " the next group followed its deeper-indented
    tail and read as part of it: "    unknown 359)  drained 3" (a review)."""
    from fleetdeck.console.cli.status import packed

    lines = packed(["head", "IB up 9/9 (down 1, erroring 2, unknown 359)", "dr 3"], 34)
    assert lines == ["head", "  IB up 9/9 (down 1, erroring 2,", "    unknown 359)", "  dr 3"]


def test_a_header_wider_than_the_terminal_wraps_between_its_words_indented():
    """The status header with a long broker URL at 60 columns: its tail began the next line at
    the margin, read as a line of its own."""
    from fleetdeck.console.cli.status import packed

    url = "mqtts://broker-a.training-fleet-eastus2.prod.example.com:8883"
    lines = packed([f"[b]demo[/] @ {url}: 2048 nodes", ["ok 2000", "failed 4"]], 60)
    assert lines == ["[b]demo[/] @", f"  {url}:", "  2048 nodes", "  ok 2000  failed 4"], lines


def test_an_incident_wrapped_on_a_narrow_terminal_goes_on_under_its_own_text(monkeypatch):
    """At 80 columns an incident's title and its action wrapped to the left edge: "view)" and
    "(gpu[0035,0040]): …" began lines of their own among the severities (a newcomer's run).
    Piped, each is still one line."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_incidents

    found = [{"severity": "error", "title": "job 4102: 2 of its nodes had already failed when "
              "first heard (gpu[0035,0040]): gpu0035: N2 mlx5_ib3:1: link_downed "
              "increased; gpu0040: G2 gpu1: XID 74",
              "action": "each of gpu[0035,0040] as its own finding says (its reasons in "
              "the node table, its action per node in status --json or replay "
              "--summary-json)"}]
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    render_incidents(found, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("  error job 4102: "), lines
    assert len(lines) > 4 and all(ln.startswith(" " * 8) for ln in lines[2:]), lines
    assert all(len(ln) <= 80 for ln in lines), lines
    monkeypatch.delenv("COLUMNS")
    piped = io.StringIO()
    render_incidents(found, table_console(Console(file=piped, width=80)))
    assert piped.getvalue().splitlines()[1:] == [
        f"  error {found[0]['title']}", f"        → {found[0]['action']}"]


def test_a_held_up_job_wrapped_on_a_narrow_terminal_goes_on_under_its_own_text(monkeypatch):
    """ "clock throttled (sw thermal, hw thermal))" began a line at the left edge under
    "jobs held up" at 80 columns (a newcomer's run)."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs

    jobs = [{"job_id": "4104", "name": "dlrm-v3", "straggler": {
        "node": "gpu0020", "text": "rank 21 gpu0020 +23%: throttled GPU (gpu5 clock throttled "
                                   "(sw thermal, hw thermal))"}}]
    monkeypatch.setenv("COLUMNS", "80")
    out = io.StringIO()
    render_held_up_jobs(jobs, Console(file=out, width=80))
    lines = out.getvalue().splitlines()
    assert lines[1].startswith("  4104 dlrm-v3: straggler rank 21"), lines
    assert len(lines) == 3 and lines[2].startswith(" " * len("  4104 dlrm-v3: ")), lines


def test_held_up_jobs_piped_are_one_line_each_as_before_the_grid(monkeypatch):
    """In one grid of every held-up job a short job name was padded to the longest: piped,
    "4104 dlrm: straggler" read "4104 dlrm:               straggler" (a review); each job's
    text goes on under its own head on a terminal, and piped is the line it always was."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs

    slow = ("rank 21 gpu0020 +23%: throttled GPU (gpu5 clock throttled (sw thermal, hw "
            "thermal))")
    jobs = [{"job_id": "4102", "name": "llama-70b-pretrain", "sick_nodes": [
                {"node": "gpu0035", "verdict": "failed", "finding": "G2 gpu2: XID 79"}]},
            {"job_id": "4104", "name": "dlrm", "straggler": {"node": "gpu0020", "text": slow}}]
    monkeypatch.delenv("COLUMNS", raising=False)  # piped: the width of table_console's own
    piped = io.StringIO()
    render_held_up_jobs(jobs, table_console(Console(file=piped, width=80)))
    lines = piped.getvalue().splitlines()
    assert lines[1].startswith("  4102 llama-70b-pretrain: gpu0035 "), lines
    assert lines[2:] == [f"  4104 dlrm: straggler {slow}"], lines
    out = io.StringIO()
    render_held_up_jobs(jobs, Console(file=out, width=60))
    lines = out.getvalue().splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("  4104 dlrm: straggler")))
    assert len(lines) > at + 1, lines
    assert all(ln.startswith(" " * len("  4104 dlrm: ")) for ln in lines[at + 1:]), lines
    assert all(len(ln) <= 60 for ln in lines), lines


def test_a_job_that_can_never_start_here_is_a_held_up_job_of_status(monkeypatch):
    """A 40-node job on 32 nodes (a live sim, a jobs audit) was in `status --json`'s
    ``never_fits`` alone: the table said nothing of a job that waits for ever."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_held_up_jobs

    never = "needs 40 nodes; the cluster has 32: it can never start here"
    jobs = [{"job_id": "4107", "name": "huge", "state": "PD", "never_fits": never},
            {"job_id": "4104", "name": "dlrm", "straggler": {"node": "gpu0020",
                                                              "text": "rank 21 gpu0020 +23%"}},
            {"job_id": "4106", "name": "ok", "state": "PD", "never_fits": None}]
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    render_held_up_jobs(jobs, table_console(Console(file=out, width=120)))
    assert out.getvalue().splitlines() == [
        "jobs held up (2 of 3):", "  4104 dlrm: straggler rank 21 gpu0020 +23%",
        f"  4107 huge: pending: {never}"]
    # Last, after a failed job that lapsed (its incident a warning) of a higher id too.
    lapsed = {"job_id": "4200", "name": "bert", "failed": {
        "text": "job 4200 failed (NonZeroExitCode); not restarted in 30 min",
        "action": "restart-job 4200", "lapsed": "not restarted in 30 min"}}
    out = io.StringIO()
    render_held_up_jobs([*jobs, lapsed], table_console(Console(file=out, width=120)))
    assert out.getvalue().splitlines()[-1] == f"  4107 huge: pending: {never}", out.getvalue()


def test_status_folds_a_big_fleets_healthy_nodes_into_one_line():
    """1,003 ok rows under 21 sick ones: the incidents, the held-up jobs and the sick nodes
    scrolled off the terminal, its last page all "ok" (a 1,024-node fleet at 3 a.m.). The
    healthy nodes in service are one line; a drained healthy one keeps its row; --json has
    every node."""
    from rich.console import Console

    from fleetdeck.console.cli.status import render_summary
    from fleetdeck.console.session import ConsoleSession
    from fleetdeck.console.summary import fleet_summary
    from fleetdeck.protocol.messages import DrainState
    from tests.tui.fleet import CLUSTER, Clock, SynthFleet, port_down

    n = 72  # above OK_NODES_LISTED (64: the demo's fleet is listed whole)
    clock = Clock()
    ingest = Ingest(CLUSTER)
    fleet = SynthFleet(n, clock)
    session = ConsoleSession(CLUSTER, ingest=ingest, follow_up=False, clock=clock)
    fleet.birth(ingest)
    fleet.status(ingest, "gpu0004", DrainState.DRAINED, "disk", "bob")
    clock.advance(1)
    fleet.telemetry(ingest, faults={"gpu0003": port_down()})
    session.tick()
    summary = fleet_summary(session.state, clock())
    assert len(summary["nodes"]) == n
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400))
    text = out.getvalue()
    rows = [ln.split()[0] for ln in text.splitlines() if ln.startswith("gpu")]
    assert rows == ["gpu0003", "gpu0004"], text
    assert (f"… and {n - 2} nodes ok, in service, not listed (status --all lists every node, "
            "as --json does)") in text, text
    # `status --all | grep gpu0042`: an operator looking for one healthy node finds it.
    out = io.StringIO()
    render_summary(summary, Console(file=out, width=400), every_node=True)
    rows = [ln.split()[0] for ln in out.getvalue().splitlines() if ln.startswith("gpu")]
    assert len(rows) == n and "not listed" not in out.getvalue()
