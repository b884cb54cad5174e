"""``fleetdeck events --kind``: a typo is refused with the kinds there are (it used to print an
empty table and exit 0); ``verdict``, which the table shows, can be chosen too."""

import asyncio
import json
import re

import pytest

from fleetdeck.cli import main
from fleetdeck.console.store import Store
from tests.store.test_store import fill

SINCE = ["--since", "2020-01-01T00:00"]


async def _filled(path) -> None:
    store = await Store.open(path)
    try:
        await fill(store)
    finally:
        await store.close()


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "s.db"
    asyncio.run(_filled(path))
    return str(path)


def test_an_unknown_kind_is_refused_naming_the_kinds(db, capsys):
    assert main(["events", "--db", db, *SINCE, "--kind", "xid,nosuchkind"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "--kind nosuchkind names no event kind" in err
    assert "drain" in err and "verdict" in err and "xid" in err


def test_a_kind_the_store_holds_is_accepted_though_not_a_known_one(tmp_path, capsys):
    from fleetdeck.console.store import TickRows

    async def custom(path) -> None:
        store = await Store.open(path)
        try:
            await store.write_rows(TickRows(events=[
                ("gpu0001.1.1", 1_800_000_000.0, "gpu0001", "site_power", "warn", "", "PDU",
                 "{}")]))
        finally:
            await store.close()

    asyncio.run(custom(tmp_path / "c.db"))
    assert main(["events", "--db", str(tmp_path / "c.db"), *SINCE, "--kind", "site_power",
                 "--json"]) == 0
    assert [r["kind"] for r in json.loads(capsys.readouterr().out)] == ["site_power"]


def test_known_kinds_with_no_rows_are_an_empty_answer(db, capsys):
    assert main(["events", "--db", db, *SINCE, "--kind", "thermal", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_verdict_changes_can_be_chosen_by_kind(db, capsys):
    assert main(["events", "--db", db, *SINCE, "--kind", "verdict", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["message"] for r in rows] == ["new -> ok", "ok -> offline (H2)"]
    assert main(["events", "--db", db, *SINCE, "--kind", "verdict,xid", "--json"]) == 0
    assert [r["kind"] for r in json.loads(capsys.readouterr().out)] == [
        "verdict", "xid", "verdict"]


def test_a_node_first_seen_healthy_is_no_event_and_a_failure_reads_as_an_error(db, capsys):
    """A collector's start writes a 'new -> ok' row per node: 16,384 of them buried what
    happened under `fleetdeck events`; they are listed only with --kind verdict. The SEV of
    a verdict row follows the verdict it changed to (every row said 'info')."""
    assert main(["events", "--db", db, *SINCE, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    verdicts = [r for r in rows if r["kind"] == "verdict"]
    assert [r["message"] for r in verdicts] == ["ok -> offline (H2)"]
    assert verdicts[0]["severity"] == "error"
    assert main(["events", "--db", db, *SINCE, "--kind", "verdict", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["message"], r["severity"]) for r in rows] == [
        ("new -> ok", "info"), ("ok -> offline (H2)", "error")]
    node = rows[0]["node"]
    assert main(["events", "--db", db, *SINCE, "--node", node, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)  # one node's story starts where it was first seen
    assert next(r["message"] for r in rows if r["kind"] == "verdict") == "new -> ok"


def test_a_node_the_store_never_held_is_a_typo_not_a_quiet_node(db, capsys):
    """events --node gpu9999 printed an empty table and exited 0 where history said no such
    node and exited 2 (SRE drill)."""
    assert main(["events", "--db", db, *SINCE, "--node", "gpu9999"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "holds nothing of gpu9999: mistyped" in err
    # A node it holds, quiet in the window asked about: an empty answer, exit 0.
    assert main(["events", "--db", db, "--since", "1m", "--node", "gpu0001"]) == 0


def test_job_interruptions_are_a_kind_as_the_timeline_shows_them(tmp_path, capsys):
    """The TUI's timeline shows "job 41 interrupted: network on gpu0002 …" as kind
    'interruption'; `events --kind interruption` was refused as naming no event kind."""
    from fleetdeck.console.store import TickRows

    async def stops(path) -> None:
        store = await Store.open(path)
        try:
            await store.write_rows(TickRows(interruptions=[
                ("41", 1_800_000_100.0, "network", "gpu0002,gpu0003", 16, 2.25,
                 "R -> NF (NodeFail)"),
                ("42", 1_800_000_200.0, "operator", "gpu0009", 8, 0.5, "R -> PD (requeued)")]))
        finally:
            await store.close()

    asyncio.run(stops(tmp_path / "i.db"))
    db = str(tmp_path / "i.db")
    assert main(["events", "--db", db, *SINCE, "--kind", "interruption", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["kind"], r["component"], r["node"]) for r in rows] == [
        ("interruption", "job 41", "gpu[0002-0003]"), ("interruption", "job 42", "gpu0009")]
    assert rows[0]["message"] == (
        "job 41 interrupted: network on gpu0002,gpu0003, 2.2 GPU-h of work lost")
    # Listed with everything else by default, and found by one of the job's nodes.
    assert main(["events", "--db", db, *SINCE, "--node", "gpu0003", "--json"]) == 0
    assert [r["component"] for r in json.loads(capsys.readouterr().out)] == ["job 41"]


def test_a_kind_kept_elsewhere_says_where(db, capsys):
    assert main(["events", "--db", db, *SINCE, "--kind", "command"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "audit log" in err and "audit.jsonl" in err


def test_a_narrow_terminal_gives_each_message_its_own_line(db, capsys, monkeypatch):
    """At 80 columns the time of day was cut ("2026-12-05T13:…") and each message wrapped in a
    13-character column (a newcomer's run)."""
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["events", "--db", db, *SINCE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 2 and "…" not in lines[0]
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  ", lines[0]), lines[0]
    assert lines[1].startswith("    ") and lines[1].strip()
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["events", "--db", db, *SINCE]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith("TIMESTAMP")


def test_nothing_since_prints_no_table_header(db, capsys):
    """``events --since`` a time after every row said "nothing in ... since ..." and then
    printed the table's header, which read as a table cut off (a newcomer's run)."""
    assert main(["events", "--db", db, "--since", "2999-01-01T00:00"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "nothing in" in err and err.count("\n") == 1


def test_a_filter_that_matched_nothing_says_so_without_a_header(db, capsys):
    assert main(["events", "--db", db, "--since", "2999-01-01T00:00", "--kind", "xid"]) == 0
    out, err = capsys.readouterr()
    assert out == ""
    assert "matched --kind xid" in err and err.count("\n") == 1
    assert main(["events", "--db", db, "--since", "2999-01-01T00:00", "--kind", "xid",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_kind_command_on_a_demo_store_names_the_demo_runs_audit_log(tmp_path, monkeypatch,
                                                                   capsys):
    """`events --db …/demo-<time>/demo.db --kind command` sent the user to the real audit log
    ($XDG_STATE_HOME/fleetdeck/audit.jsonl), which the demo never writes: its commands are in
    the audit log beside its store (a newcomer's run)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    run = tmp_path / "state" / "fleetdeck" / "demo-20261207T082531"
    run.mkdir(parents=True)
    asyncio.run(_filled(run / "demo.db"))
    (run / "audit.jsonl").write_text("")
    assert main(["events", "--db", str(run / "demo.db"), *SINCE, "--kind", "command"]) == 2
    err = capsys.readouterr().err
    assert f"in the audit log ({run / 'audit.jsonl'})" in err, err


def test_kind_command_lists_the_commands_a_console_kept_in_its_store(tmp_path, monkeypatch,
                                                                    capsys):
    """Two operators' consoles, each with its own --db and --audit-log: alice drained gpu0005,
    bob resumed it a second later (a 2026-12-07 drill). ``events --db alice.db --kind
    command`` said "operator commands are in the audit log ($XDG_STATE_HOME/…/audit.jsonl), not
    in the history store", exit 2: that file did not exist, and the store held alice's request
    and its outcome. Now they are listed as her console's timeline said them."""
    import time

    from fleetdeck.console.audit import AuditRecord

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    path = tmp_path / "alice.db"

    async def kept(path) -> None:
        store = await Store.open(path)
        try:
            await fill(store, seconds=1)
            now = time.time()
            for outcome, detail, dt in (
                    ("requested", "", 0.0),
                    ("superseded", "gpu0005: resumed before it drained: the node is in service",
                     1.5)):
                store.audit(AuditRecord(ts=now + dt, who="alice", what="drain",
                                        targets="gpu0005", why="maint OPS-1", outcome=outcome,
                                        request_id="c1", detail=detail))
            store.audit(AuditRecord(ts=now + 2, who="alice", what="restart_job",
                                    targets="job 4101", why="hung", outcome="requested",
                                    request_id="c2"))
            await fill(store, seconds=1)
        finally:
            await store.close()

    asyncio.run(kept(path))
    assert main(["events", "--db", str(path), *SINCE, "--kind", "command", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["node"], r["kind"], r["component"], r["message"]) for r in rows] == [
        ("gpu0005", "command", "alice", "alice requested drain gpu0005: maint OPS-1"),
        ("gpu0005", "command", "alice", "drain gpu0005: superseded (gpu0005: resumed before it "
                                        "drained: the node is in service)"),
        ("job 4101", "command", "alice", "alice requested restart job 4101: hung")]
    assert [r["severity"] for r in rows] == ["info", "warn", "info"]
    # By node: the job's request names none.
    assert main(["events", "--db", str(path), *SINCE, "--kind", "command", "--node", "gpu0005",
                 "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2


def test_kind_command_lists_a_refused_target_as_typed_in_the_table(tmp_path, monkeypatch,
                                                                   capsys):
    """A TUI's ':drain gpu[/x]' is refused as a bad hostlist and kept in its store as typed;
    ``events --kind command`` (the table, not --json) ended in rich's MarkupError "closing tag
    '[/x]' … doesn't match any open tag" on it, and showed "[bold]bob" as a bold "bob": only
    the message column was escaped."""
    import time

    from fleetdeck.console.audit import AuditRecord

    monkeypatch.setenv("COLUMNS", "200")
    path = tmp_path / "alice.db"

    async def kept(path) -> None:
        store = await Store.open(path)
        try:
            await fill(store, seconds=1)
            now = time.time()
            store.audit(AuditRecord(ts=now, who="[bold]bob", what="drain", targets="gpu[/x]",
                                    why="", outcome="refused", request_id="c1",
                                    detail="bad hostlist: x"))
            await fill(store, seconds=1)
        finally:
            await store.close()

    asyncio.run(kept(path))
    assert main(["events", "--db", str(path), *SINCE, "--kind", "command"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"gpu\[/x\]\s+command\s+warn\s+\[bold\]bob\s+drain gpu\[/x\]: refused",
                     out), out


def test_a_kind_with_a_control_byte_is_refused_escaped_with_a_near_miss(db, capsys):
    """``--kind $'\\x1b]0;x\\x07'`` went back to the terminal raw in the refusal (a CLI fuzz
    round); a near miss ('xdi') is named as a command's or a node's is."""
    assert main(["events", "--db", db, *SINCE, "--kind", "\x1b]0;pwned\x07"]) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\\x1b]0;pwned\\x07" in err, err
    assert main(["events", "--db", db, *SINCE, "--kind", "xdi"]) == 2
    said = capsys.readouterr().err
    assert said == "fleetdeck events: --kind xdi names no event kind; did you mean xid?\n", said


def test_a_near_miss_is_named_alone_not_beside_every_kind(db, capsys):
    """A typo with a near miss was answered with every kind there is after it (13 and the
    store's own): the near misses alone serve, one plain sentence; a typo with none still
    gets the list, all there is to go by."""
    assert main(["events", "--db", db, *SINCE, "--kind", "ib_flp,drian"]) == 2
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "the kinds are" not in said, said
    assert "did you mean ib_flap for ib_flp, drain for drian?" in said, said
    assert main(["events", "--db", db, *SINCE, "--kind", "drian,nosuchkind"]) == 2
    said = capsys.readouterr().err
    assert "the kinds are agent, " in said and "did you mean" not in said, said


@pytest.mark.parametrize("kinds", [",,", "", " , "])
def test_a_kind_list_naming_no_kind_is_refused(db, kinds, capsys):
    """``--kind ,,`` listed every row and exited 0, as if no --kind were given (a CLI fuzz
    round)."""
    assert main(["events", "--db", db, *SINCE, "--kind", kinds, "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--kind names no kind: give one or more" in err, err
