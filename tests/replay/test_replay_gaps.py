"""A gap in a recording (its recorder had lost the broker) replays as the live console lived it:
the console's own blindness, not 32 nodes gone stale or offline (a replay audit)."""

import json
import math
from pathlib import Path

import pytest

from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import Player, run_headless
from fleetdeck.console.summary import fleet_summary
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

T0 = 1_800_000_000.0


def write_with_gap(path: Path) -> None:
    """Four nodes at 1 Hz for 10 s; the broker goes (its shutdown sends gpu0004's will), the
    recorder is back at 20 s and the nodes at 22 s, then 20 s more."""
    nodes = [FakeNode(f"gpu000{i}", cluster="gap", t0=T0) for i in range(1, 5)]
    w = RecordingWriter(path, "gap", source="test", started=T0)
    for f in nodes:
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    for i in range(1, 11):
        for f in nodes:
            w.write(T0 + i, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry()))
    w.write(T0 + 10.2, nodes[3].topic(Kind.STATUS), codec.encode(nodes[3].status(online=False)),
            1, True)
    w.gap(T0 + 10.5, T0 + 20.0, "broker connection lost: connection refused")
    for i in range(22, 43):
        for f in nodes:
            f.now = T0 + i
            w.write(T0 + i, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry(advance=0)))
    w.close()


def verdicts(state) -> dict[str, str]:
    return {n: st.verdict.value for n, st in state.nodes.items()}


@pytest.mark.parametrize("tick_s", [0.5, 30.0])
def test_a_headless_replay_inside_and_after_a_gap_judges_no_node_for_it(tmp_path, tick_s):
    path = tmp_path / "gap.jsonl"
    write_with_gap(path)
    inside = run_headless(path, until=18, tick_s=min(tick_s, 18))
    state = inside.session.state
    assert verdicts(state) == dict.fromkeys(verdicts(state), "ok")
    out = fleet_summary(state, T0 + 18)
    assert out["connection_lost"] is not None
    lines = [line.text for _seq, line in inside.session.log]
    assert any(text.startswith("the recording has a gap of 10 s here") for text in lines)
    after = run_headless(path, tick_s=tick_s)
    assert set(verdicts(after.session.state).values()) == {"ok"}
    assert [it for it in after.session.interruptions.total] == []


def test_the_replay_console_seeks_into_a_gap_and_out_of_it_blind_only_there(tmp_path):
    path = tmp_path / "gap.jsonl"
    write_with_gap(path)
    p = Player(path)
    p.seek(T0 + 18)
    assert set(verdicts(p.state).values()) == {"ok"}
    assert p.state.sightless(T0 + 18)
    p.seek(T0 + 60)
    assert set(verdicts(p.state).values()) == {"ok"}
    p.seek(T0 + 5)  # back, before the gap: a snapshot from before it
    assert not p.state.sightless(T0 + 5) and p.state.blind is None


def test_next_event_passes_over_births_reconnects_and_keyframe_requests():
    """`n` stopped at 0.5 s and 1.5 s of the xid79 fixture, where the events view said "no
    events yet" (births, keyframe requests and their answers), and 15 times after a broker
    restart (a replay audit): it stops where something happened."""
    from fleetdeck.console.recording import RecordingReader
    from fleetdeck.protocol.topics import parse_topic
    from tests.conftest import REPO

    path = REPO / "fixtures" / "xid79.jsonl.gz"
    p = Player(path)
    kinds = {}
    for msg in RecordingReader(path).messages():
        kinds.setdefault(msg.t, set()).add(parse_topic(msg.topic).kind)
    xid = [t for t, ks in kinds.items() if Kind.EVENT in ks]
    assert xid and set(xid) <= set(p.events)
    births = [t for t, ks in kinds.items() if ks == {Kind.BIRTH}]
    assert births and not set(births) & set(p.events)
    assert len(p.events) < sum(1 for ks in kinds.values() if ks & {Kind.CMD, Kind.ACK,
                                                                     Kind.STATUS, Kind.EVENT})


def test_seek_takes_seconds_spans_and_utc_clock_times():
    """`:seek 04:02:30`, `:seek 2h` and `:seek +1h` were refused as "not a number of seconds";
    going to 02:13, when the node failed, took working the offset out by hand (a replay
    audit)."""
    from datetime import UTC, datetime

    from fleetdeck.console.replay import seek_target

    start = datetime(2026, 12, 5, 1, 30, tzinfo=UTC).timestamp()
    heading = start + 600
    assert seek_target("90", start, heading) == start + 90
    assert seek_target("+10", start, heading) == heading + 10
    assert seek_target("-30", start, heading) == heading - 30
    assert seek_target("2h", start, heading) == start + 7200
    assert seek_target("+1h30m", start, heading) == heading + 5400
    assert seek_target("-5m", start, heading) == heading - 300
    assert seek_target("02:13", start, heading) == start + 43 * 60
    assert seek_target("01:00:30", start, heading) == start + 86400 - 29 * 60 - 30  # next day
    assert seek_target("2026-12-05T03:00", start, heading) == start + 5400
    for bad in ("soon", "25:00", "1h30", "nan", "inf"):
        with pytest.raises(ValueError):
            seek_target(bad, start, heading)
    # The ends by name, here (not in the console's app) so that --until takes them too; the
    # refusal one sentence that names them with the rest ("..., nor start or end" was glued
    # on by the app: a review).
    assert seek_target("start", start, heading, start + 900) == start
    assert seek_target(" END ", start, heading, start + 900) == start + 900
    assert seek_target("end", start, heading) == math.inf  # no end known: read to the end
    with pytest.raises(ValueError) as err:
        seek_target("soon", start, heading)
    assert str(err.value) == ("'soon' is not seconds (90, +10, -30), a span (2h, +1h30m), a UTC "
                              "clock time (04:02:30, 2026-12-05T04:02), start or end")


def test_a_clock_time_is_of_the_recordings_own_days_and_a_seek_outside_it_says_so():
    """`:seek 19:10` 3.7 min before a recording of 19:13:42-19:16:12 jumped to its end (read
    as tomorrow); `:seek 999`, `2h`, `-999` and a time before the start landed at an end without
    a word (an SRE's run)."""
    from datetime import UTC, datetime

    from fleetdeck.console.replay import seek_note, seek_target

    start = datetime(2026, 12, 5, 19, 13, 42, tzinfo=UTC).timestamp()
    end, heading = start + 150, start + 46

    def where(arg: str) -> tuple[float, str]:
        target = seek_target(arg, start, heading, end)
        return target, seek_note(arg, target, start, end)

    assert where("19:10") == (start - 222, "19:10 is before the recording (19:13:42 to "
                                           "19:16:12): at its start")
    assert where("19:15") == (start + 78, "")
    assert where("999")[1] == "999 is after the recording (19:13:42 to 19:16:12): at its end"
    assert where("2h")[1].endswith(": at its end")
    assert where("-999")[1] == "-999 is before the recording (19:13:42 to 19:16:12): at its start"
    assert where("2026-12-05T19:00")[1].endswith(": at its start")
    assert where("19:20")[1].endswith(": at its end")
    assert where("150") == (end, "")
    # Two days: the occurrence nearest where the replay is, the next day's the date says.
    two_days = start + 2 * 86400
    assert seek_target("19:15", start, start + 86400 + 3600, two_days) == start + 86400 + 78
    assert seek_target("19:15", start, start + 60, two_days) == start + 78
    assert seek_note("3d", start + 3 * 86400, start, two_days) == (
        "3d is after the recording (2026-12-05 19:13:42 to 2026-12-07 19:13:42): at its end")


@pytest.mark.parametrize("tick_s", [20.0, 30.0])
def test_a_coarse_tick_still_sees_an_interruption_inside_it(tick_s):
    """At --tick 20 or 30 the xid79 fixture's requeue (R, NF, RQ, PD and R again within one
    tick) left "interruptions": [] (a replay audit): the statuses a tick replaced are walked,
    and the interruption is timed by the scheduler's status, as at the console's tick."""
    from tests.conftest import REPO

    path = REPO / "fixtures" / "xid79.jsonl.gz"
    fine = run_headless(path).session.interruptions.total
    coarse = run_headless(path, tick_s=tick_s).session.interruptions.total
    assert [(i.job_id, i.cause, i.nodes) for i in coarse] == [
        (i.job_id, i.cause, i.nodes) for i in fine] == [("4101", "gpu", ("gpu0006",))]
    assert abs(coarse[0].ts - fine[0].ts) < 1.0
    assert coarse[0].lost_gpu_hours == pytest.approx(fine[0].lost_gpu_hours, rel=0.2)


def test_until_takes_what_seek_takes_and_says_when_it_is_past_the_end():
    """`--headless --until 1e9` ran to the end, rc=0, with no word that the recording is 35 s;
    `--until 04:02:30` was refused where `:seek 04:02:30` went there (an SRE's run)."""
    from tests.conftest import REPO, run_cli

    fixture = str(REPO / "fixtures" / "xid79.jsonl.gz")  # 04:02:20.99 to 04:02:55.97 UTC

    def until(arg: str):
        res = run_cli("replay", fixture, "--headless", "--summary-json", f"--until={arg}",
                      timeout=60)
        assert "Traceback" not in res.stderr
        rep = json.loads(res.stdout)["replay"] if res.returncode == 0 else None
        return res.returncode, res.stderr.strip(), rep and round(rep["end"] - rep["start"], 3)

    assert until("1e9") == (0, "fleetdeck replay: --until 1e9 is past the recording's end; "
                            "replayed all of it, to 04:02:56 UTC (35.0 s in).", 34.983)
    assert until("04:02:30") == (0, "", 9.013)
    assert until("2026-11-30T04:02:40") == (0, "", 19.013)
    assert until("10") == (0, "", 10.0)
    assert until("04:00") == (2, "fleetdeck replay: --until 04:00 is before the recording, "
                              "which starts at 04:02:21 UTC.", None)
    # The start as the replay's header says it, to the nearest second: 04:02:21 is in it.
    assert until("04:02:21") == (0, "", 0.013)
    assert until("end") == (0, "", 34.983)
    # The end as the note says it, to the nearest second, is not past it (it read "--until
    # 04:02:56 is past the recording's end; replayed all of it, to 04:02:56 UTC").
    assert until("04:02:56") == (0, "", 34.983)
    assert until("35") == (0, "", 34.983)
    assert until("start") == (0, "", 0.0)
    code, said, _ = until("soon")
    assert code == 2 and said.startswith("fleetdeck replay: --until: 'soon' is not seconds ")
    assert said.endswith(", start or end."), said


def test_next_event_passes_over_the_state_a_recording_starts_with(tmp_path):
    """A console's `R` seeds its recording's first keyframe with what it knew: a node drained
    before the recording began. `n` stopped there, at +0.5 s, on "no events yet" (a newcomer's
    run); the drain that happens in the recording is still an event."""
    from fleetdeck.protocol.messages import DrainInfo, DrainState

    path = tmp_path / "seeded.jsonl"
    a, b = (FakeNode(f"gpu000{i}", cluster="seed", t0=T0) for i in (1, 2))
    drained = DrainInfo(state=DrainState.DRAINED, reason="OPS-1", requested_by="sre")
    w = RecordingWriter(path, "seed", source="test", started=T0)
    for f in (a, b):
        w.seed(f.topic(Kind.BIRTH), codec.encode(f.birth()))
    w.seed(a.topic(Kind.STATUS), codec.encode(a.status().model_copy(update={"drain": drained})))
    w.seed(b.topic(Kind.STATUS), codec.encode(b.status()))
    for i in range(1, 11):
        for f in (a, b):
            w.write(T0 + i, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry()))
    w.write(T0 + 10.2, b.topic(Kind.STATUS),
            codec.encode(b.status().model_copy(update={"drain": drained})), 1, True)
    w.close()
    p = Player(path)
    assert p.events == [T0 + 10.2]


@pytest.mark.parametrize("v2", [False, True])
def test_a_change_heard_after_a_gap_is_one_the_replay_saw(tmp_path, v2):
    """A recording with a 1 s damaged part (a gap) read "ok -> degraded (G12); first heard
    so: it changed while this console did not hear the node" of a node heard ok for three
    seconds after it (a replay UX run): its samples after the gap changed nothing, a v2 delta
    took the quiet path, and its verdict stayed the one from before the gap. A node heard
    after a gap has its verdict from then, and a change after that is one seen."""
    import msgspec

    from fleetdeck.console.health import UNSEEN_CHANGE
    from fleetdeck.protocol import wire2

    nodes = [FakeNode(f"gpu000{i}", cluster="gap", t0=T0) for i in range(1, 3)]
    path = tmp_path / "gap.jsonl"
    w = RecordingWriter(path, "gap", source="test", started=T0)
    encoders = {f.node_id: wire2.TelemetryEncoder() for f in nodes}
    for f in nodes:
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    for i in [*range(1, 11), *range(12, 21)]:
        if i == 12:
            w.gap(T0 + 10.5, T0 + 11.5, "broker connection lost: connection refused")
        for f in nodes:
            f.now = T0 + i
            tel = codec.decode_telemetry(codec.encode(f.telemetry(advance=0)))
            if i >= 16 and f.node_id == "gpu0001":
                tel = msgspec.structs.replace(tel, gpus=[
                    msgspec.structs.replace(g, present=False) if g.index == 0 else g
                    for g in tel.gpus])
            payload = encoders[f.node_id].encode(tel, T0 + i) if v2 else codec.encode(tel)
            w.write(T0 + i, f.topic(Kind.TELEMETRY), payload)
    w.close()
    run = run_headless(path)
    st = run.session.state.nodes["gpu0001"]
    assert st.verdict.value == "failed" and st.change_seen
    (line,) = [ln for ln in run.session.log.lines()
               if ln.kind == "verdict" and ln.source == "gpu0001"]
    assert line.text.startswith("ok -> failed") and UNSEEN_CHANGE not in line.text, line.text
