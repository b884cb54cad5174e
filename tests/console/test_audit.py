import json

from fleetdeck.console.audit import AuditLog, AuditRecord, default_audit_path


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
