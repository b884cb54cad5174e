"""The operators' commands a recording holds (drain, resume, restart and the acks that answered
them) are lines of the replay's timeline, at the tick that applies them, and a seek puts the
timeline back to what it held then: a replay used to show only their effects ("job 4101
interrupted: operator"), by whom and why nowhere (a replay drill)."""

import gzip
import json
from pathlib import Path

import pytest

from fleetdeck.console import ingest as ingest_mod
from fleetdeck.console.ingest import request_of
from fleetdeck.console.replay import Player, replay_headless
from fleetdeck.console.session import ConsoleSession

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


def _resent(tmp_path: Path, *, answered: bool) -> Path:
    """The fixture's drain as a console re-sends a command its node did not answer: the same
    cmd_id 3 s, 6 s and 9 s after the first (``RETRY_EVERY_S``), each written to the
    recording. Answered: the node's "accepted" comes after the second re-send, and again (from
    memory) for the third; unanswered: no ack of it at all."""
    lines = _lines(FIXTURE)
    cmd = next(d for d in lines if d.get("topic", "").endswith("/cmd"))
    acks = [d for d in lines if d.get("topic", "").endswith("/ack")]
    accepted = next(d for d in acks if '"accepted"' in d["p"])
    t0 = cmd["t"]
    kept = [d for d in lines if d is not accepted and (answered or d not in acks)]
    extra = [dict(cmd, t=t0 + k * 3.0) for k in (1, 2, 3)]
    if answered:
        extra += [dict(accepted, t=t0 + 7.0), dict(accepted, t=t0 + 9.1)]
    # In time order after the header, as a recording is written.
    rest = sorted(kept[1:] + extra, key=lambda d: d["t"])
    out = tmp_path / "resent.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in kept[:1] + rest))
    return out


def test_a_command_re_sent_unanswered_is_one_request_and_each_answer_once_after_any_seek(
        tmp_path: Path) -> None:
    """The live console re-sends an unanswered command every 3 s under its cmd_id, and each
    re-send is recorded: the replay said "alice requested drain gpu0002 …" four times, as if
    she had hammered it, and the node's "accepted" to each re-send again (a review). A seek
    back rebuilds the timeline: it must tell them once there too."""
    p = Player(_resent(tmp_path, answered=True), snapshot_every=4)
    assert p.reader.report.skipped == 0
    whole = [("info", REQUESTED), ("info", ACCEPTED), ("done", DONE)]
    p.seek(p.end)
    assert command_lines(p.session) == whole
    # Between the second and third re-send, the node's first answer not yet in.
    p.seek(p.start + 11)
    assert command_lines(p.session) == [("info", REQUESTED)]
    p.seek(p.start + 20)
    assert command_lines(p.session) == whole[:2]
    p.seek(p.end)
    p.seek(p.start + 3)
    assert command_lines(p.session) == []
    p.seek(p.end)
    assert command_lines(p.session) == whole


def test_the_headless_summary_counts_the_re_sends_of_an_unanswered_request(
        tmp_path: Path) -> None:
    out = replay_headless(_resent(tmp_path, answered=False))
    assert [(c["text"], c.get("resent")) for c in out["commands"]] == [(REQUESTED, 3)]
    out = replay_headless(FIXTURE)
    assert [c.get("resent") for c in out["commands"]] == [0, None, None]


def _many(tmp_path: Path) -> Path:
    """The fixture's drain (request R0, unanswered: its acks left out) and three more drains
    half a second later (R1-R3, one node each), then R0's command re-sent 3, 6 and 9 s after it
    and R1's once, all within their 10 s lifetime; 35 s in, when every one has expired, two more
    drains (R4, R5)."""
    lines = [d for d in _lines(FIXTURE) if not d.get("topic", "").endswith("/ack")]
    cmd = next(d for d in lines if d.get("topic", "").endswith("/cmd"))
    body, t0 = json.loads(cmd["p"]), cmd["t"]

    def drain(k: int, at: float) -> dict:
        node = f"gpu{k + 2:04d}"
        p = dict(body, cmd_id=f"c60113{k}-21112-{k}.0", target=node, issued_by="bob")
        return dict(cmd, t=at, topic=cmd["topic"].replace("gpu0002", node), p=json.dumps(p))

    extra = [drain(k, t0 + 0.5) for k in (1, 2, 3)]
    extra += [dict(cmd, t=t0 + s) for s in (3.0, 6.0, 9.0)] + [drain(1, t0 + 3.5)]
    extra += [drain(k, t0 + 35) for k in (4, 5)]
    rest = sorted(lines[1:] + extra, key=lambda d: d["t"])
    out = tmp_path / "many.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in lines[:1] + rest))
    return out


def test_past_the_bound_a_re_sent_command_is_still_one_request_and_counted(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """More recorded commands than RECORDED_CMDS_MAX (patched down to 2): the oldest used to go
    while its console still re-sent it, and its next re-send was told as a second "alice
    requested drain gpu0002" with its re-sends read 0 (a review). An unexpired command stays
    (a seek back too); expired ones go, so the bound holds once they have."""
    monkeypatch.setattr(ingest_mod, "RECORDED_CMDS_MAX", 2)
    path = _many(tmp_path)
    bob = "bob requested drain {} (finish); reason: fan noise on gpu5, ticket OPS-42"
    said = [REQUESTED] + [bob.format(f"gpu{k + 2:04d}") for k in (1, 2, 3, 4, 5)]
    p = Player(path, snapshot_every=4)
    p.seek(p.end)
    assert [text for _sev, text in command_lines(p.session)] == said
    assert len(p.session.ingest.recorded_cmds) <= 2
    p.seek(p.start + 8)
    assert [text for _sev, text in command_lines(p.session)] == said[:4]
    p.seek(p.end)
    assert [text for _sev, text in command_lines(p.session)] == said
    out = replay_headless(path)
    assert [(c["text"], c["resent"]) for c in out["commands"]] == list(
        zip(said, [3, 1, 0, 0, 0, 0], strict=True))


def test_the_hard_bound_holds_even_for_unexpired_commands(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only a drain of more nodes than RECORDED_CMDS_HARD_MAX at once (or a forged recording)
    gets here: memory stays bounded (the oldest goes though unexpired; its next re-send is then
    told as a request again, the price of the bound)."""
    monkeypatch.setattr(ingest_mod, "RECORDED_CMDS_MAX", 2)
    monkeypatch.setattr(ingest_mod, "RECORDED_CMDS_HARD_MAX", 3)
    p = Player(_many(tmp_path))
    p.seek(p.start + 8)
    assert len(p.session.ingest.recorded_cmds) == 3


def test_answers_of_a_command_the_recording_lacks_are_told_once_with_why(tmp_path: Path) -> None:
    """A console's R records the commands it sends, not a CLI's in a second terminal: the
    README's demo run restarted job 4102 from the CLI during an R recording, and the replay's
    timeline had nothing of it while the scheduler's acks were in the file (a newcomer run)."""
    from fleetdeck.console.outbox import UNRECORDED_COMMAND

    lines = _lines(FIXTURE)
    cmd = next(d for d in lines if d.get("topic", "").endswith("/cmd"))
    accepted = next(d for d in lines
                    if d.get("topic", "").endswith("/ack") and '"accepted"' in d["p"])
    sched_ack = cmd["topic"].split("/node/")[0] + "/sched/ack"
    restart = {"v": 1, "cmd_id": "c1-2-3.0", "by": "sched", "op": "restart_job",
               "ts": json.loads(cmd["p"])["issued_at"] + 5}
    extra = [
        # The node answers the same command again (a re-send it remembers): told once.
        dict(accepted, t=accepted["t"] + 0.2),
        dict(accepted, t=accepted["t"] + 0.3, topic=sched_ack,
             p=json.dumps(dict(restart, result="accepted",
                               reason="requeue job 4101 from step 100"))),
        dict(accepted, t=accepted["t"] + 1.0, topic=sched_ack,
             p=json.dumps(dict(restart, result="done",
                               reason="job 4101 running again from step 100 on 2 nodes"))),
    ]
    kept = [d for d in lines if d is not cmd]
    rest = sorted(kept[1:] + extra, key=lambda d: d["t"])
    out = tmp_path / "no-commands.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in kept[:1] + rest))
    want = [
        ("info", f"drain gpu0002: accepted (drain (finish)) {UNRECORDED_COMMAND}"),
        ("info", f"restart of a job: accepted (requeue job 4101 from step 100) "
                 f"{UNRECORDED_COMMAND}"),
        ("done", f"restart of a job: done (job 4101 running again from step 100 on 2 nodes) "
                 f"{UNRECORDED_COMMAND}"),
        ("done", f"drain gpu0002: done (DRAINED) {UNRECORDED_COMMAND}")]
    p = Player(out, snapshot_every=4)
    p.seek(p.end)
    assert command_lines(p.session) == want
    p.seek(p.start + 3)
    assert command_lines(p.session) == []
    p.seek(p.end)
    assert command_lines(p.session) == want
    assert p.session.state.malformed.total == 0


def test_a_recorded_restart_reads_as_the_live_console_said_it(tmp_path: Path) -> None:
    """A restart has no drain mode: the replay's timeline read "root requested restart job
    4106 (now)" where the live console had said "root requested restart job 4106" (a
    newcomer's run)."""
    lines = _lines(FIXTURE)
    i, cmd = next((i, d) for i, d in enumerate(lines) if d.get("topic", "").endswith("/cmd"))
    body = json.loads(cmd["p"])
    restart = dict(body, cmd_id=body["cmd_id"][:-2] + "9.0", op="restart_job", target="4101",
                   args={"reason": "retry", "mode": "now", "job": "4101"})
    topic = cmd["topic"].rsplit("/node/", 1)[0] + "/sched/cmd"
    lines.insert(i + 1, dict(cmd, topic=topic, p=json.dumps(restart)))
    out = tmp_path / "restart.jsonl"
    out.write_text("".join(json.dumps(d) + "\n" for d in lines))
    p = Player(out)
    p.seek(p.end)
    said = [text for _sev, text in command_lines(p.session)]
    assert "alice requested restart job 4101; reason: retry" in said, said
    assert REQUESTED in said  # a drain still says its mode
