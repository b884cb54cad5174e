"""Recording format: round trip, keyframes and seeking, damage tolerance."""

import gzip
import json

import pytest

from fleetdeck.console.recording import JudgedNode, RecordingReader, RecordingWriter
from fleetdeck.console.replay import Player, replay_headless
from fleetdeck.errors import UserError
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.helpers import FakeNode

T0 = 1_800_000_000.0


def write_fleet(path, seconds=30, nodes=3, segment_s=10.0, bad_at=None):
    """A recording of ``nodes`` healthy sim nodes at 1 Hz, optionally with one bad payload."""
    fakes = [FakeNode(f"gpu{i + 1:04d}", cluster="rec", t0=T0) for i in range(nodes)]
    w = RecordingWriter(path, "rec", source="test", started=T0, segment_s=segment_s)
    for f in fakes:
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    for s in range(1, seconds + 1):
        for f in fakes:
            w.write(T0 + s, f.topic(Kind.TELEMETRY), codec.encode(f.telemetry()))
        if s == bad_at:
            w.write(T0 + s, fakes[0].topic(Kind.TELEMETRY), b"\xff\xfe not json")
    w.close()
    return fakes


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])
def test_round_trip_keeps_every_message_byte_for_byte(tmp_path, name):
    path = tmp_path / name
    write_fleet(path, seconds=25, bad_at=12)
    reader = RecordingReader(path)
    msgs = list(reader.messages())
    assert reader.header.cluster == "rec"
    assert len(msgs) == 3 * 2 + 25 * 3 + 1
    assert any(m.payload == b"\xff\xfe not json" for m in msgs)
    assert reader.report.skipped == 0
    assert len(reader.segments) == 3  # 0-10 s, 10-20 s, 20-25 s
    if name.endswith(".gz"):
        with gzip.open(path) as f:  # readable by any gzip tool, member by member
            assert json.loads(f.readline())["fleetdeck_recording"] == 1


@pytest.mark.parametrize("name", ["r.jsonl", "r.jsonl.gz"])
def test_seek_starts_from_the_keyframe_with_the_full_picture(tmp_path, name):
    path = tmp_path / name
    write_fleet(path, seconds=30)
    reader = RecordingReader(path)
    msgs = list(reader.messages(start=T0 + 25))
    frame = [m for m in msgs if m.keyframe]
    kinds = {m.topic.rsplit("/", 1)[1] for m in frame}
    assert kinds == {"birth", "status", "telemetry"}
    assert len(frame) == 9  # birth + status + latest telemetry for 3 nodes
    live = [m for m in msgs if not m.keyframe]
    assert live and min(m.t for m in live) >= T0 + 20  # the segment holding 25 s starts at 20 s


def test_player_seek_back_and_forth_matches_straight_replay(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    write_fleet(path, seconds=30)
    straight = Player(path)
    straight.seek(T0 + 22)
    straight.state.apply(straight.ingest.take_batch(), straight.clock())
    jumpy = Player(path)
    jumpy.seek(T0 + 28)
    jumpy.seek(T0 + 5)
    jumpy.seek(T0 + 22)
    jumpy.state.apply(jumpy.ingest.take_batch(), jumpy.clock())
    for node in ("gpu0001", "gpu0002", "gpu0003"):
        assert straight.state.nodes[node].last_seq == jumpy.state.nodes[node].last_seq == 22
        assert jumpy.state.nodes[node].verdict.value == "ok"


def test_headless_summary_has_status_shape_and_counts_bad_payloads(tmp_path):
    path = tmp_path / "r.jsonl"
    write_fleet(path, seconds=10, bad_at=5)
    out = replay_headless(path)
    assert out["totals"]["nodes"] == 3 and out["totals"]["gpus"] == 24
    assert out["totals"]["by_verdict"]["ok"] == 3
    assert out["totals"]["malformed"] == 1
    assert {"jobs", "events", "replay"} <= set(out)
    until = replay_headless(path, until=4.0)
    assert {n["seq"] for n in until["nodes"]} == {4}


def test_what_no_console_subscribes_to_is_not_malformed_in_a_replay(tmp_path):
    """``record`` keeps everything under the cluster's root, the simulator's ``sim/inject``
    and its ack too, which no console subscribes to: a replay counted each as a malformed
    message (found in a drill, 2026-12-04: "malformed 2" after one ``fleetdeck inject``). A bad
    topic a console does subscribe to (a node id with a space) is still malformed."""
    path = tmp_path / "r.jsonl"
    fakes = write_fleet(path, seconds=6)
    w = RecordingWriter(tmp_path / "more.jsonl", "rec", source="test", started=T0)
    reader = RecordingReader(path)
    for m in reader.messages():
        w.write(m.t, m.topic, m.payload, m.qos, m.retain)
    w.write(T0 + 3, "fleetdeck/v1/rec/sim/inject", b'{"fault": "xid79", "node": "gpu0001"}', 1)
    w.write(T0 + 3, "fleetdeck/v1/rec/sim/inject/ack", b'{"ok": true}', 1)
    w.write(T0 + 3, "fleetdeck/v1/rec/node/bad id/birth", codec.encode(fakes[0].birth()), 1)
    w.close()
    out = replay_headless(tmp_path / "more.jsonl")
    assert out["totals"]["nodes"] == 3 and out["totals"]["malformed"] == 1
    assert [m["topic"] for m in out["malformed"]] == ["fleetdeck/v1/rec/node/bad id/birth"]


def test_truncated_and_damaged_recordings_replay_their_readable_part(tmp_path):
    path = tmp_path / "r.jsonl"
    write_fleet(path, seconds=20)
    data = path.read_bytes()
    lines = data.split(b"\n")
    lines[10] = b"{broken json"
    lines[11] = b'{"t": "soon"}'
    damaged = b"\n".join(lines)
    path.write_bytes(damaged[: len(damaged) - 500])  # cut in the middle of the last line
    out = replay_headless(path)
    rep = out["replay"]
    assert rep["truncated"] is True
    # The edit moved lines under the sidecar index: it no longer matches, which is counted too.
    assert rep["skipped_lines"] == 4
    assert "damaged index" in rep["problems"][0]
    assert out["totals"]["nodes"] == 3


def test_truncated_gzip_replays_what_it_can(tmp_path):
    path = tmp_path / "r.jsonl.gz"
    write_fleet(path, seconds=30)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.8)])
    out = replay_headless(path)
    assert out["replay"]["truncated"] is True
    assert out["totals"]["nodes"] == 3
    assert 10 < out["nodes"][0]["seq"] < 30


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "is empty: it holds no recording"),
        (b'{"hello": 1}\n', "not a fleetdeck recording"),
        (b'{"fleetdeck_recording": 9, "cluster": "c", "started": 1}\n', "format version 9"),
        (b'{"fleetdeck_recording": 1}\n', "misses 'cluster'"),
    ],
)
def test_unreadable_headers_are_one_clear_sentence(tmp_path, content, needle):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(UserError) as err:
        RecordingReader(path)
    assert needle in str(err.value)


def test_next_and_previous_event(tmp_path):
    path = tmp_path / "r.jsonl"
    fakes = write_fleet(path, seconds=5)
    p = Player(path)
    # Births and online statuses at the start are routine, not events (a replay audit).
    assert p.events == []
    p.seek(T0 + 3)
    assert p.next_event() is None and p.prev_event() is None
    assert fakes


def test_a_recording_keeps_what_its_console_judged_as_it_started(tmp_path):
    """A recording made with R five minutes into the demo replayed as another fleet: the
    live console's N3 and recovered-switch findings rest on the hour before the recording.
    Its header now keeps them, and the replay says so instead of silently disagreeing."""
    from fleetdeck.console.summary import judged_not_ok
    from tests.console.test_judgements import session_with
    from tests.tui.fleet import port_down

    session = session_with({"gpu0003": port_down("mlx5_ib5")})
    judged = judged_not_ok(session.state)
    assert [j.node for j in judged] == ["gpu0003"] and judged[0].verdict == "failed"
    assert any(f.startswith("N1 mlx5_ib5:1") for f in judged[0].findings)
    rec = session._new_recording(tmp_path / "r.jsonl", session.clock())
    node = FakeNode("gpu0003", cluster=session.cluster, t0=session.clock())
    # A recording of no node at all is nothing to replay (exit 3).
    rec.write(session.clock(), node.topic(Kind.STATUS), codec.encode(node.status()))
    rec.close()
    header = RecordingReader(tmp_path / "r.jsonl").header
    assert [(j.node, j.verdict) for j in header.judged_at_start] == [("gpu0003", "failed")]
    out = replay_headless(tmp_path / "r.jsonl")
    assert out["replay"]["judged_at_start"] == [j.as_json() for j in judged]
    # A damaged list is one problem of the replay, not a refusal of the recording.
    bad = tmp_path / "bad.jsonl"
    lines = (tmp_path / "r.jsonl").read_text().splitlines()
    head = json.loads(lines[0])
    head["judged_at_start"] = [{"node": "bad node!", "verdict": 3}]
    bad.write_text("\n".join([json.dumps(head), *lines[1:]]) + "\n")
    reader = RecordingReader(bad)
    assert reader.header.judged_at_start == ()
    assert any("judged_at_start" in p for p in reader.report.problems)


def test_a_long_judged_list_keeps_the_recording_readable(tmp_path):
    """500 nodes x 20 findings of ~120 characters made a 1.25 MB header, which a reader (1 MiB
    of header at most) refused as no recording; one finding over 1,000 characters threw away
    the whole list (review)."""
    findings = ("N3 mlx5_ib6:1: " + "x" * 2000, *["G2 gpu1: XID 74 " + "y" * 100] * 19)
    judged = [JudgedNode(f"gpu{i:04d}", "failed", findings) for i in range(1, 501)]
    path = tmp_path / "r.jsonl"
    RecordingWriter(path, "c", started=1_800_000_000.0, judged=judged).close()
    reader = RecordingReader(path)
    kept = reader.header.judged_at_start
    assert 0 < len(kept) < 500 and kept[0].node == "gpu0001"  # worst first, cut at a budget
    assert all(len(f) <= 300 for j in kept for f in j.findings)
    assert not reader.report.problems
