import asyncio
import json
import logging

from fleetdeck.console.audit import HELD_MAX_BYTES, AuditLog, AuditRecord, default_audit_path
from fleetdeck.console.session import ConsoleSession


def test_append_only_jsonl(tmp_path):
    log = AuditLog(tmp_path / "sub" / "audit.jsonl")
    rec = AuditRecord(ts=1767225600.0, who="alice", what="drain", targets="gpu[0001-0002]",
                      why="XID 79", outcome="requested", request_id="c1", cluster="t")
    log.write(rec)
    log.write(AuditRecord(**{**rec.__dict__, "outcome": "done"}))
    lines = (tmp_path / "sub" / "audit.jsonl").read_text().splitlines()
    assert [json.loads(x)["outcome"] for x in lines] == ["requested", "done"]
    first = json.loads(lines[0])
    assert first["when"] == "2026-01-01T00:00:00Z"
    assert first["who"] == "alice" and first["why"] == "XID 79"
    assert log.read()[1]["outcome"] == "done"


def test_default_path_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    assert default_audit_path() == tmp_path / "fleetdeck" / "audit.jsonl"


def test_unwritable_log_counts_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = AuditLog(blocker / "audit.jsonl")
    log.write(AuditRecord(ts=0, who="a", what="drain", targets="n", why="w",
                          outcome="requested", request_id="c"))
    assert log.errors == 1 and "cannot write" in log.last_error


def test_the_operator_defaults_to_the_login_name_without_user(monkeypatch):
    """With $USER unset (containers, cron, systemd units) the audit log said "who":
    "operator" (a newcomer's run): the login name comes from the password database."""
    import os
    import pwd

    from fleetdeck.cli import build_parser

    for name in ("USER", "LOGNAME", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    args = build_parser().parse_args(["drain", "gpu0001", "--reason", "x"])
    assert args.operator == pwd.getpwuid(os.getuid()).pw_name


def drained(i: int) -> AuditRecord:
    return AuditRecord(ts=float(i), who="a", what="drain", targets="n", why="w" * 50_000,
                       outcome="requested", request_id=f"c{i}")


def test_records_dropped_past_the_hold_are_said(tmp_path, caplog):
    """A log failing long enough to hold more than HELD_MAX_BYTES drops its oldest records:
    said in the console's log, and in ``unwritten`` for the end of the console."""
    path = tmp_path / "audit.jsonl"
    path.mkdir()  # cannot be opened for append
    log = AuditLog(path)
    n = HELD_MAX_BYTES // len(drained(0).to_json()) + 10
    with caplog.at_level(logging.WARNING, logger="fleetdeck.console.audit"):
        for i in range(n):
            log.write(drained(i))
    assert log.dropped > 0 and log.held_records == n - log.dropped
    assert any(f"{log.dropped} in all" in r.getMessage() for r in caplog.records), caplog.text
    said = log.unwritten()
    assert f"{log.held_records} record(s) never reached it" in said, said
    assert f"{log.dropped} older record(s) were dropped" in said, said


def test_a_console_closed_while_its_audit_log_fails_tries_it_last_and_says_what_is_lost(
        tmp_path, caplog):
    """Held records went with the process without a word (2026-12-07 review): close tries the
    file once more, and says what never reached it."""
    for room in (False, True):
        path = tmp_path / f"audit-{room}.jsonl"
        path.mkdir()
        session = ConsoleSession("t", audit=AuditLog(path), operator="a", follow_up=False)
        session.audit.write(drained(1))
        assert session.audit_failing
        if room:
            path.rmdir()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="fleetdeck.session"):
            asyncio.run(session.close())
        if room:
            assert [r["request_id"] for r in AuditLog(path).read()] == ["c1"]
            assert "never reached" not in caplog.text, caplog.text
        else:
            assert "1 record(s) never reached it" in caplog.text, caplog.text
