"""The operators' commands a recording holds (drain, resume, restart and the acks that answered
them) are lines of the replay's timeline, at the tick that applies them, and a seek puts the
timeline back to what it held then: a replay used to show only their effects ("job 4101
interrupted: operator"), by whom and why nowhere (a replay drill)."""

import gzip
import json
from pathlib import Path

from fleetdeck.console.replay import Player, replay_headless
from fleetdeck.console.session import ConsoleSession, request_of

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "drain.jsonl.gz"
REQUESTED = "alice requested drain gpu0002 (finish); reason: fan noise on gpu5, ticket OPS-42"
ACCEPTED = "drain gpu0002: accepted (drain (finish))"
DONE = "drain gpu0002: done (DRAINED)"


def command_lines(session: ConsoleSession) -> list[tuple[str, str]]:
    return [(ln.severity, ln.text) for ln in session.log.lines() if ln.kind == "command"]


def test_a_recorded_drain_and_its_acks_are_in_the_replay_timeline_as_of_each_seek() -> None:
    p = Player(FIXTURE, snapshot_every=4)
    p.seek(p.end)
    assert command_lines(p.session) == [("info", REQUESTED), ("info", ACCEPTED),
                                        ("done", DONE)]
    line = next(ln for ln in p.session.log.lines() if ln.text == REQUESTED)
    assert line.source == "console" and line.nodes == ("gpu0002",)
    # The drain is sent ~6 s in and done ~28 s in (the job on the node finished).
    p.seek(p.start + 3)
    assert command_lines(p.session) == []
    p.seek(p.start + 15)
    assert command_lines(p.session) == [("info", REQUESTED), ("info", ACCEPTED)]
    p.seek(p.end)
    assert command_lines(p.session) == [("info", REQUESTED), ("info", ACCEPTED),
                                        ("done", DONE)]


def _lines(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f]


def test_one_line_per_request_no_console_chatter_and_bad_commands_are_not_malformed(
        tmp_path: Path) -> None:
    """A drain of two nodes is one line (a 16-node drain was to be 16); a console's own
    keyframe request is nobody's decision; a command payload no agent could read was never
    read live either, so it does not count as malformed in the replay."""
    lines = _lines(FIXTURE)
    i, cmd = next((i, d) for i, d in enumerate(lines) if d.get("topic", "").endswith("/cmd"))
    body = json.loads(cmd["p"])
    second = dict(body, cmd_id=body["cmd_id"][:-2] + ".1", target="gpu0003")
    chatter = dict(body, cmd_id="keyframe-gpu0004-1", op="keyframe", target="gpu0004")
    extra = [
        dict(cmd, topic=cmd["topic"].replace("gpu0002", "gpu0003"), p=json.dumps(second)),
        dict(cmd, topic=cmd["topic"].replace("gpu0002", "gpu0004"), p=json.dumps(chatter)),
        dict(cmd, topic=cmd["topic"].replace("gpu0002", "gpu0005"), p="{not a command"),
        dict(cmd, topic=cmd["topic"].replace("gpu0002", "gpu0003").replace("/cmd", "/ack"),
             p=json.dumps({"v": 1, "cmd_id": second["cmd_id"], "by": "gpu0003",
                           "op": "drain", "result": "accepted", "reason": "drain (finish)",
                           "ts": body["issued_at"] + 1})),
    ]
    lines[i + 1:i + 1] = extra
    out = tmp_path / "drains.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in lines))
    p = Player(out)
    p.seek(p.end)
    said = command_lines(p.session)
    assert said[:2] == [
        ("info", "alice requested drain gpu[0002-0003] (finish); reason: fan noise on gpu5, "
                 "ticket OPS-42"),
        ("info", "drain gpu[0002-0003]: accepted (drain (finish))")], said
    assert not any("keyframe" in text or "gpu0004" in text for _sev, text in said), said
    assert p.session.state.malformed.total == 0
    assert p.reader.report.skipped == 0


def test_request_of_groups_a_consoles_numbered_commands_only() -> None:
    assert request_of("c6011347103-21112-1.0") == "c6011347103-21112-1"
    assert request_of("c6011347103-21112-1.12") == "c6011347103-21112-1"
    assert request_of("keyframe-gpu0020-1796516113613") == "keyframe-gpu0020-1796516113613"
    assert request_of("cli.x") == "cli.x"


def test_the_headless_summary_lists_them() -> None:
    out = replay_headless(FIXTURE)
    assert [(c["severity"], c["text"], c["nodes"]) for c in out["commands"]] == [
        ("info", REQUESTED, ["gpu0002"]), ("info", ACCEPTED, ["gpu0002"]),
        ("done", DONE, ["gpu0002"])]
    assert out["commands"][0]["ts"] < out["commands"][-1]["ts"]
    assert replay_headless(FIXTURE, until=3)["commands"] == []
