"""Headless replay of telemetry v2 (keyframes and deltas, what agents send by default): the
fast path supersedes deltas from the fields it reads off the line and hands Ingest only the
newest sample of each node and tick plus the keyframe it rests on; the result must be the slow
path's (every message decoded in order), keyframes the console never got included
(docs/recording.md, "Headless replay")."""

from pathlib import Path

import pytest
from msgspec.structs import replace

from fleetdeck.console.recording import RecordingReader, RecordingWriter
from fleetdeck.console.replay import TICK_S, Player, run_headless
from fleetdeck.protocol import codec, wire2
from fleetdeck.protocol.topics import Kind, parse_topic
from tests.helpers import FakeNode
from tests.replay.test_fast_replay import FAULTS, FIXTURES, T0, outcome


def to_v2(src: Path, dst: Path, keyframe_every_s: float = wire2.KEYFRAME_EVERY_S) -> int:
    """``src`` with every v1 telemetry sample re-encoded by the agents' v2 encoder (one per
    node, keyframes every ``keyframe_every_s`` of recorded time, on a new session, deltas in
    between); everything else as it was. Returns how many keyframes it wrote."""
    reader = RecordingReader(src)
    w = RecordingWriter(dst, reader.header.cluster, source="v2 twin",
                        started=reader.header.started)
    encoders: dict[str, wire2.TelemetryEncoder] = {}
    for msg in reader.messages():
        payload = msg.payload
        try:
            parsed = parse_topic(msg.topic)
        except ValueError:
            parsed = None
        if parsed is not None and parsed.kind is Kind.TELEMETRY and not msg.keyframe:
            tel = codec.decode_telemetry(payload)
            enc = encoders.setdefault(parsed.subject, wire2.TelemetryEncoder(keyframe_every_s))
            payload = enc.encode(tel, msg.t)
        if msg.keyframe:
            w.seed(msg.topic, payload)
        else:
            w.write(msg.t, msg.topic, payload, msg.qos, msg.retain)
    w.close()
    return sum(e.keyframes for e in encoders.values())


def v2_outcome(path: Path, tick_s: float, every_sample: bool) -> dict:
    run = run_headless(path, tick_s=tick_s, every_sample=every_sample)
    ingest = run.session.ingest
    return {**outcome(path, tick_s, every_sample),
            "v2": (ingest.keyframe_missing, dict(ingest.keyframe_wanted),
                   run.session.state.quiet_applied)}


@pytest.fixture(scope="module")
def twins(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("v2")
    made = {}
    for name in FAULTS:
        made[name] = out / f"{name}.v2.jsonl.gz"
        # Keyframes every 5 s: windows of 5 s ticks hold one, or two.
        assert to_v2(FIXTURES / f"{name}.jsonl.gz", made[name], keyframe_every_s=5.0)
    return made


@pytest.mark.parametrize("tick_s", [TICK_S, 5.0])
@pytest.mark.parametrize("name", FAULTS)
def test_fast_replay_of_a_v2_fault_is_the_slow_replay(twins, name, tick_s):
    slow = v2_outcome(twins[name], tick_s, every_sample=True)
    fast = v2_outcome(twins[name], tick_s, every_sample=False)
    assert slow["transitions"] and slow["nodes"]
    assert fast == slow


@pytest.mark.parametrize("name", FAULTS)
def test_a_v2_recording_judges_as_its_v1_original(twins, name):
    """Same samples, other wire: the same verdicts, transitions and final samples."""
    v1 = outcome(FIXTURES / f"{name}.jsonl.gz", TICK_S, every_sample=False)
    v2 = outcome(twins[name], TICK_S, every_sample=False)
    for key in ("nodes", "transitions", "events", "log", "interruptions", "jobs"):
        assert v2[key] == v1[key], key


def test_coarse_ticks_supersede_v2_deltas_unread(twins):
    run = run_headless(twins["xid79"], tick_s=5.0)
    state = run.session.state
    # A 5 s window of 1 Hz samples: the newest delta and its keyframe (when the window holds
    # it) are decoded, the rest counted from the line.
    assert run.feed.superseded > run.feed.decoded
    assert state.applied == run.feed.superseded + run.feed.decoded
    assert run.session.ingest.keyframe_missing == 0


def write_awkward_v2(path: Path) -> None:
    """Two v2 nodes at 4 Hz with a keyframe every 3 s. gpu0001: its first keyframe lost (the
    deltas before the next one cannot be applied), a lost sample (a seq gap), a delta refused
    (a column too short) as the newest of its window, one on the wrong node's topic, one not
    UTF-8, and a new session whose first keyframe was lost too."""
    a = FakeNode("gpu0001", cluster="awk", t0=T0)
    b = FakeNode("gpu0002", cluster="awk", t0=T0)
    w = RecordingWriter(path, "awk", source="test", started=T0)
    for f in (a, b):
        f.agent.encoder.keyframe_every_s = 3.0
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    for i in range(1, 81):
        t = T0 + i / 4
        if i == 50:
            # The agent reconnected: a new session, whose keyframe the recorder missed.
            a.agent.bd_seq += 60_000
            w.write(t, a.topic(Kind.BIRTH), codec.encode(a.birth()), 1, True)
        for f in (a, b):
            f.now += 0.25
            payload = f.agent.telemetry_payload()
            if f is a and i in (1, 14, 50):
                assert (i == 14) is not wire2.decode(payload).keyframe
                continue  # never arrived: the first keyframes of two sessions, and seq 14
            if f is a and i == 20:
                # The newest of the window before T0 + 5 s: one value where 8 GPUs need 8.
                assert b'"g":{' in payload
                payload = payload.replace(b'"g":{', b'"g":{"pcie_gen":[5],', 1)
            if f is a and i == 30:
                w.write(t, f.topic(Kind.TELEMETRY),
                        payload.replace(b'"node":"gpu0001"', b'"node":"gpu0002"', 1))
            if f is a and i == 45:
                w.write(t, f.topic(Kind.TELEMETRY), b"\xff\xfe not json")
            w.write(t, f.topic(Kind.TELEMETRY), payload)
    w.close()


@pytest.mark.parametrize("tick_s", [TICK_S, 5.0])
def test_v2_gaps_refusals_and_missing_keyframes_count_the_same_fast_or_slow(tmp_path, tick_s):
    path = tmp_path / "awk2.jsonl"
    write_awkward_v2(path)
    slow = v2_outcome(path, tick_s, every_sample=True)
    fast = v2_outcome(path, tick_s, every_sample=False)
    assert fast == slow
    _applied, superseded, malformed, reasons, _received, _behind = slow["counts"]
    assert reasons == {"invalid": 1, "mismatch": 1, "not_json": 1} and malformed == 3
    missing, _wanted, _quiet = slow["v2"]
    assert missing == 2 * 11  # 2-12 before the second keyframe, 51-61 of the new session
    assert slow["nodes"]["gpu0001"][0].value == "ok" and slow["nodes"]["gpu0002"][2] == 80
    if tick_s == 5.0:
        assert superseded > 80


def test_player_seek_in_a_v2_recording_decodes_what_straight_play_decodes(tmp_path):
    """A seek ticks as straight play does: per node and tick the newest sample and the keyframe
    it rests on are decoded, the other deltas superseded unread, as a headless replay to the
    same instant does, forwards and backwards (a snapshot put back)."""
    path = tmp_path / "awk2.jsonl.gz"
    write_awkward_v2(path)
    p = Player(path)
    p.seek(T0 + 19)
    p.session.tick()
    st = p.state.nodes["gpu0002"]
    assert st.last_seq == 76 and st.seq_gaps == 0
    straight = run_headless(path, until=19)
    assert (p.feed.decoded, p.feed.superseded) == (straight.feed.decoded,
                                                   straight.feed.superseded)
    assert p.feed.superseded > 40
    assert p.ingest.keyframe_missing == straight.session.ingest.keyframe_missing > 0
    p.seek(T0 + 2)  # backwards
    p.session.tick()
    assert p.state.nodes["gpu0002"].last_seq == 8
    straight = run_headless(path, until=2)
    assert (p.feed.decoded, p.feed.superseded) == (straight.feed.decoded,
                                                   straight.feed.superseded)


def test_headless_keeps_no_sparklines_the_replay_console_does(twins):
    """Only the TUI's node detail shows the recent history: a headless replay skips it (its
    summary has none), the Player that the replay console drives keeps it."""
    run = run_headless(twins["xid79"])
    assert run.session.state.nodes and not run.session.recent._rings
    p = Player(twins["xid79"])
    p.step(5.0)
    p.session.tick()
    assert set(p.session.recent._rings) == set(p.state.nodes)


def test_a_fault_in_one_loud_column_of_a_delta_is_judged_at_the_consoles_tick(tmp_path):
    """Two nodes whose samples move only quiet columns (the quiet path, rows never built) until
    one of them reports an uncorrectable ECC error in one column of one delta between
    keyframes, and a damaged line on the other: the replay finds the fault in the tick it
    arrives in, exactly as decoding every message does, and counts the damaged line."""
    path = tmp_path / "dbe.jsonl"
    nodes = [FakeNode("gpu0001", t0=T0), FakeNode("gpu0002", t0=T0)]
    w = RecordingWriter(path, "test", source="test", started=T0)
    for n in nodes:
        w.write(T0, n.topic(Kind.BIRTH), codec.encode(n.birth()), 1, True)
        w.write(T0, n.topic(Kind.STATUS), codec.encode(n.status()), 1, True)
    encoders = [wire2.TelemetryEncoder(keyframe_every_s=30.0) for _ in nodes]
    for s in range(1, 21):
        for n, enc in zip(nodes, encoders, strict=True):
            tel = n.telemetry()
            if n.node_id == "gpu0001" and s >= 12:
                gpus = list(tel.gpus)
                gpus[5] = replace(gpus[5], ecc=replace(gpus[5].ecc, dbe_vol=1))
                tel = replace(tel, gpus=gpus)
            payload = enc.encode(tel, n.now)
            assert s == 1 or not wire2.decode(payload).keyframe  # one keyframe, then deltas
            if n.node_id == "gpu0002" and s == 15:
                payload = payload[:-20]  # cut off: not JSON
            w.write(n.now + 0.1, n.topic(Kind.TELEMETRY), payload)
    w.close()
    for every_sample in (False, True):
        run = run_headless(path, every_sample=every_sample)
        state = run.session.state
        assert state.quiet_applied > 10  # the quiet path was taken before the fault
        assert state.nodes["gpu0001"].verdict.value == "failed"
        assert state.nodes["gpu0001"].reasons == ["G4"]
        assert state.nodes["gpu0002"].verdict.value == "ok"
        assert run.session.ingest.malformed.by_reason == {"not_json": 1}
    fast, slow = _transitions(path), _transitions(path, every_sample=True)
    assert fast == slow
    failed = [t for t in fast if t[2] == "failed"]
    # The delta of second 12 is received at T0 + 12.1: judged by the first tick after it.
    assert failed == [("gpu0001", pytest.approx(T0 + 12.5), "failed")]


def _transitions(path: Path, every_sample: bool = False) -> list[tuple[str, float, str]]:
    seen: list[tuple[str, float, str]] = []
    run_headless(path, every_sample=every_sample,
                 on_tick=lambda rep: seen.extend((tr.node, tr.ts, tr.new.value)
                                                 for tr in rep.verdicts))
    return seen
