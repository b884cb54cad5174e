"""Headless replay decodes only the newest telemetry sample per node and tick, and reads the file
once: its result must be the slow path's (every message decoded in order), message for message
accounting included (docs/recording.md, "Headless replay")."""

from pathlib import Path

import pytest

from fleetdeck.console.recording import RecordingWriter
from fleetdeck.console.replay import TICK_S, Player, run_headless
from fleetdeck.console.session import TickReport
from fleetdeck.protocol import codec
from fleetdeck.protocol.topics import Kind
from tests.conftest import REPO
from tests.helpers import FakeNode

FIXTURES = REPO / "fixtures"
T0 = 1_800_000_000.0
FAULTS = ["xid79", "link_down", "leaf_switch", "agent_vs_node_death", "ib_flap", "drain"]


def outcome(path: Path, tick_s: float, every_sample: bool) -> dict:
    """Everything a replay ends with or passed through: per-node verdicts and counters, every
    verdict transition with its time, events, interruptions, jobs, malformed counts."""
    transitions: list[tuple] = []

    def on_tick(report: TickReport) -> None:
        transitions.extend((t.node, t.ts, t.old, t.new, t.reasons) for t in report.verdicts)

    run = run_headless(path, tick_s=tick_s, every_sample=every_sample, on_tick=on_tick)
    state, session = run.session.state, run.session
    return {
        "nodes": {n: (st.verdict, tuple(st.reasons), st.last_seq, st.seq_gaps, st.online,
                      st.drain.state, st.last_rx, st.telemetry)
                  for n, st in state.nodes.items()},
        "transitions": transitions,
        "events": [ev.event_id for ev in state.events],
        "log": [(line.ts, line.text) for _seq, line in session.log],
        "interruptions": [it.as_json() for it in session.interruptions.total],
        "jobs": dict(state.jobs),
        "counts": (state.applied, state.superseded, state.malformed.total,
                   dict(state.malformed.by_reason), session.ingest.received, state.behind_s),
        "ticks": session.counters.ticks,
        "end": run.end,
    }


@pytest.mark.parametrize("tick_s", [TICK_S, 5.0])
@pytest.mark.parametrize("name", FAULTS)
def test_fast_replay_of_a_fault_is_the_slow_replay(name, tick_s):
    path = FIXTURES / f"{name}.jsonl.gz"
    slow = outcome(path, tick_s, every_sample=True)
    fast = outcome(path, tick_s, every_sample=False)
    assert slow["transitions"] and slow["nodes"]
    assert fast == slow


def test_coarse_ticks_decode_a_fraction_and_skip_the_rest_as_superseded():
    path = FIXTURES / "xid79.jsonl.gz"
    run = run_headless(path, tick_s=5.0)
    state = run.session.state
    assert run.feed.superseded > 2 * run.feed.decoded / 3
    # Every message counted once: applied to the state or superseded by a newer sample.
    assert state.superseded >= run.feed.superseded
    assert state.applied == run.feed.superseded + run.feed.decoded
    assert {n.verdict.value for n in state.nodes.values()} == {"ok", "failed"}


def write_awkward(path: Path) -> None:
    """Two nodes at 4 Hz; gpu0001's windows hold a lost sample (a seq gap), a sample refused by
    the schema as the newest of its window, one on the wrong node's topic and one that is not
    UTF-8, between good ones."""
    a = FakeNode("gpu0001", cluster="awk", t0=T0)
    b = FakeNode("gpu0002", cluster="awk", t0=T0)
    w = RecordingWriter(path, "awk", source="test", started=T0)
    for f in (a, b):
        w.write(T0, f.topic(Kind.BIRTH), codec.encode(f.birth()), 1, True)
        w.write(T0, f.topic(Kind.STATUS), codec.encode(f.status()), 1, True)
    for i in range(1, 81):
        t = T0 + i / 4
        for f in (a, b):
            payload = codec.encode(f.telemetry(advance=0.25))
            if f is a and i == 13:
                continue  # never arrived: seq 13 is a gap
            if f is a and i == 20:
                # The newest of the window before T0 + 5 s, refused (interval_s must be > 0).
                payload = payload.replace(b'"interval_s":0.25', b'"interval_s":-5', 1)
                payload = payload.replace(b'"interval_s":1.0', b'"interval_s":-5', 1)
                assert b'"interval_s":-5' in payload
            if f is a and i == 30:
                w.write(t, f.topic(Kind.TELEMETRY),
                        payload.replace(b'"node":"gpu0001"', b'"node":"gpu0002"', 1))
            if f is a and i == 45:
                w.write(t, f.topic(Kind.TELEMETRY), b"\xff\xfe not json")
            w.write(t, f.topic(Kind.TELEMETRY), payload)
    w.close()


@pytest.mark.parametrize("tick_s", [TICK_S, 5.0])
def test_gaps_refusals_and_garbage_count_the_same_fast_or_slow(tmp_path, tick_s):
    path = tmp_path / "awk.jsonl"
    write_awkward(path)
    slow = outcome(path, tick_s, every_sample=True)
    fast = outcome(path, tick_s, every_sample=False)
    assert fast == slow
    _applied, superseded, malformed, reasons, received, _behind = slow["counts"]
    assert reasons == {"invalid": 1, "mismatch": 1, "not_json": 1}
    assert malformed == 3 and received == 2 * 2 + 2 * 80 - 1 + 2
    assert slow["nodes"]["gpu0001"][3] == 2  # seq 13 lost, seq 20 refused
    assert slow["nodes"]["gpu0002"][3] == 0
    if tick_s == 5.0:
        assert superseded > 100


def test_player_seek_decodes_what_straight_play_decodes(tmp_path):
    """A seek ticks its way to the target as straight play does (the rules need every tick:
    docs/recording.md, "The replay console"), each tick decoding only the newest sample of each
    node: it decodes, and counts as superseded unread, exactly what a headless replay to the
    same instant does, a backward seek (a snapshot put back) included."""
    path = tmp_path / "awk.jsonl.gz"
    write_awkward(path)
    p = Player(path)
    p.seek(T0 + 19)
    p.session.tick()
    straight = run_headless(path, until=19)
    assert (p.feed.decoded, p.feed.superseded) == (straight.feed.decoded,
                                                   straight.feed.superseded)
    # Two samples per node and tick at 4 Hz: about half of the 152 are counted, not decoded.
    assert p.feed.superseded > 70 and p.state.superseded == p.feed.superseded
    assert p.state.nodes["gpu0001"].last_seq == p.state.nodes["gpu0002"].last_seq == 76
    p.seek(T0 + 2)  # backwards: from the snapshot before it
    p.session.tick()
    straight = run_headless(path, until=2)
    assert (p.feed.decoded, p.feed.superseded) == (straight.feed.decoded,
                                                   straight.feed.superseded)
    assert p.state.nodes["gpu0001"].last_seq == 8


