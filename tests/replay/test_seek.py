"""Seeking in the replay console judges as playing straight does: after a seek to T, forwards or
backwards, every judgement (verdicts, findings per node, suspect switches, incidents, job
interruptions, the timeline) is what playing the recording straight to T gives, hour-window
findings (N2 latched fatal counters, N3 symbol errors per hour) and switch correlation included
(docs/recording.md, "The replay console")."""

import itertools
from pathlib import Path
from typing import Any

import pytest

from fleetdeck.console import recording, replay
from fleetdeck.console import session as session_module
from fleetdeck.console.replay import TICK_S, Player, run_headless
from fleetdeck.console.session import ConsoleSession
from fleetdeck.console.summary import fleet_summary
from tests.replay.test_fast_replay import FIXTURES
from tests.replay.test_recording import write_fleet

# Seconds into the recording (None: the end), in the order of the seeks: forwards, far back,
# forwards past the snapshots taken, back by a little. Before the fault, as it starts, inside the
# hour-long windows of N2 and N3 that it opens, off the tick grid.
CASES = {
    "leaf_switch": [20.0, 8.5, 31.5, 12.3, 4.0, None, 9.0, 8.0],
    "symbol_storm": [20.5, 5.5, 33.0, 12.3, 3.0, None, 6.0, 5.0],
    "link_down": [15.0, 9.5, 30.0, 22.2, 6.0, None, 29.5],
    "ib_flap": [19.7, 7.0, 28.0, 11.0, 4.5, None, 27.5],
}


def judgements(session: ConsoleSession, now: float) -> dict[str, Any]:
    """Every judgement the console shows, in the shape of ``status --json``."""
    return fleet_summary(session.state, now, interruptions=session.interruptions.total,
                         log=session.log.lines())


def at(p: Player, offset: float | None) -> float:
    return p.end if offset is None else p.start + offset


def straight(path: Path, offsets: list[float | None]) -> dict[float | None, dict[str, Any]]:
    """Judgements at each offset, playing straight from the start as the console does: the
    Player moved by the wall clock's irregular steps, the console ticking after each."""
    p = Player(path)
    out: dict[float | None, dict[str, Any]] = {}
    steps = iter([0.3, 0.7, 0.5, 0.2, 1.1] * 1000)
    for offset in sorted(offsets, key=lambda o: float("inf") if o is None else o):
        target = at(p, offset)
        while p.position + 1.1 < target:
            p.advance(next(steps))
            if not p.busy:  # as the console: never between two pieces of the Player's work
                p.session.tick()
        p.seek(target)  # the last bit of the way, less than a step
        p.session.tick()
        out[offset] = judgements(p.session, p.clock())
    return out


@pytest.mark.parametrize("snapshots", ["every 7 ticks", "as they cost", "thinned"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seek_judges_as_playing_straight_to_there(name, snapshots, monkeypatch):
    path = FIXTURES / f"{name}.jsonl.gz"
    offsets = CASES[name]
    expected = straight(path, offsets)
    p = Player(path)
    if snapshots == "every 7 ticks":
        p.snapshot_every = 7
    elif snapshots == "thinned":
        p.snapshot_every = 3
        monkeypatch.setattr(replay, "SNAPSHOT_BYTES", 2_000_000)  # a few snapshots' worth
    for offset in offsets:
        p.seek(at(p, offset))
        p.session.tick()  # the console's own tick after a seek
        got = judgements(p.session, p.clock())
        assert got == expected[offset], f"{name}: seek to {offset} s"
    if snapshots == "thinned":
        assert 0 < p._snapshot_bytes <= 2_000_000 and p._spread > 1


def test_the_faults_are_judged_where_the_seeks_land():
    """What the UX audit missed after a seek is there: the switch suspected behind leaf02's
    nodes, their latched N2 (link_downed increased), and gpu0004's N3 symbol errors per hour."""
    p = Player(FIXTURES / "leaf_switch.jsonl.gz")
    p.seek(p.end)
    p.seek(p.start + 20)
    p.session.tick()
    st = p.state.nodes["gpu0012"]
    assert st.behind_switch == "leaf02-r[0-7]"
    assert {f.rule for f in st.all_findings} >= {"F1", "N1", "N2"}
    assert len(judgements(p.session, p.clock())["suspect_switches"]) == 8
    p = Player(FIXTURES / "symbol_storm.jsonl.gz")
    p.seek(p.end)
    p.seek(p.start + 20)
    assert "N3" in {f.rule for f in p.state.nodes["gpu0004"].all_findings}


@pytest.mark.parametrize("name", ["xid79", "link_down"])
def test_seeks_on_the_tick_grid_match_a_headless_replay_to_there(name):
    """The Player ticks where a headless replay does (its 0.5 s ticks and the end): on the
    grid, the two are the same replay."""
    path = FIXTURES / f"{name}.jsonl.gz"
    p = Player(path)
    p.seek(p.end)
    for offset in (25.0, 12.5, 3.0):
        p.seek(p.start + offset)
        run = run_headless(path, until=offset)
        assert p.ticks == run.session.counters.ticks
        assert judgements(p.session, p.clock()) == judgements(run.session, run.end)


def test_events_are_shown_by_the_tick_after_them():
    """``n`` lands on the tick that applies the next event (a seek to the event's own time,
    between two ticks, would show the state before it), ``N`` on the one before."""
    p = Player(FIXTURES / "xid79.jsonl.gz")
    xid = next(t for t in p.events if t > p.start + 10)
    p.seek(xid - 1)
    assert p.next_event() == xid
    assert p.position == p.shown_at(xid) >= xid
    assert p.state.nodes["gpu0006"].verdict.value == "failed"
    # Nothing happened before the XID (births and keyframe requests are routine): N stays.
    assert p.prev_event() is None and p.position == p.shown_at(xid)
    p.seek(xid - 1)
    assert p.state.nodes["gpu0006"].verdict.value == "ok"


def test_a_seek_back_reads_from_the_snapshot_not_the_start():
    p = Player(FIXTURES / "thermal.jsonl.gz")
    p.snapshot_every = 20
    p.seek(p.end)
    assert [s.ticks for s in p._snapshots] == [20, 40, 60, 80, 100]
    p.seek(p.start + 45)
    assert p.ticks == 90
    # Put back at tick 80 and ticked ten times, not replayed from the start.
    assert p.session.counters.ticks == 111 + 10
    p.seek(p.start + 5)  # before the first snapshot: from the start
    assert p.session.counters.ticks == 111 + 10 + 10
    # Forwards past snapshots, when putting the last one back costs less than ticking there
    # (made so here: the decision weighs measured times).
    p._restore_s = 0.0
    p.seek(p.start + 52)
    assert p.ticks == 104 and p.session.counters.ticks == 111 + 10 + 10 + 4


def test_a_restored_picture_is_a_new_state_and_redraws_the_timeline():
    """Views cache on the state's serial and the timeline's seq: a snapshot put back must look
    new to both, or a view would keep what it drew of the later picture."""
    p = Player(FIXTURES / "xid79.jsonl.gz", tick_s=TICK_S)
    p.snapshot_every = 10
    p.seek(p.start + 20)
    serial, seq = p.state.serial, p.session.log.seq
    p.seek(p.start + 6)
    assert p.state.serial != serial and p.session.log.seq > seq
    assert [s for s, _line in p.session.log] == sorted(s for s, _line in p.session.log)


@pytest.mark.parametrize("index", [True, False])
def test_a_snapshot_put_back_reads_on_where_it_was_taken(tmp_path, index):
    """Put back, a snapshot reads on from the segment holding it (from the start without the
    index), skipping what it holds: nothing is applied twice or missed (seqs, counts)."""
    path = tmp_path / "r.jsonl.gz"
    write_fleet(path, seconds=30, segment_s=10.0)
    if not index:
        path.with_name(path.name + ".idx").unlink()
    p = Player(path)
    assert len(p.reader.segments) == (4 if index else 0)  # at 0, 10, 20 and 30 s
    p.snapshot_every = 5
    p.seek(p.end)
    for offset in (22.0, 20.0, 10.5, 27.0):
        p.seek(p.start + offset)
        run = run_headless(path, until=offset)
        mine, theirs = p.session, run.session
        assert (mine.state.applied, mine.state.superseded, mine.ingest.received) == (
            theirs.state.applied, theirs.state.superseded, theirs.ingest.received)
        assert judgements(mine, p.clock()) == judgements(theirs, run.end)
        assert {st.last_seq for st in mine.state.nodes.values()} == {int(offset)}
        assert not any(st.seq_gaps for st in mine.state.nodes.values())


@pytest.mark.parametrize("name", ["r.jsonl.gz", "r.jsonl"])
def test_a_snapshot_put_back_reads_on_from_where_the_scan_stood(tmp_path, monkeypatch, name):
    """A snapshot keeps where the Player's scan of the file stood (the reader's state at its
    last read, the decompressor's included): put back, the file is read on from there, not
    from the start of the segment (here one segment of 30 s), and nothing is missed or
    applied twice."""
    monkeypatch.setattr(recording, "READ_BYTES", 4096)  # reads of 1 KiB: a mark each
    path = tmp_path / name
    write_fleet(path, seconds=30, segment_s=60.0)
    p = Player(path)
    lines = p.report.lines
    p.snapshot_every = 5
    p.seek(p.end)
    for offset in (22.0, 10.5, 27.0):
        before = p.reader.report.lines
        # The Player puts a snapshot ahead back only when that is cheaper than ticking to it,
        # by costs it times as it goes: on a loaded host the forward seek to 27 s ticked on
        # from 10.5 s instead ("read 51 of 98 lines", a review's runs). Ticks made dear, the
        # choice is the snapshot's, which is what this test reads.
        p._tick_cost_s = 1.0
        p.seek(p.start + offset)
        reread = p.reader.report.lines - before
        assert 0 < reread < lines / 8, f"read {reread} of {lines} lines to seek to {offset} s"
        run = run_headless(path, until=offset)
        mine, theirs = p.session, run.session
        assert (mine.state.applied, mine.state.superseded, mine.ingest.received) == (
            theirs.state.applied, theirs.state.superseded, theirs.ingest.received)
        assert judgements(mine, p.clock()) == judgements(theirs, run.end)
        assert not any(st.seq_gaps for st in mine.state.nodes.values())


def test_playing_faster_than_it_can_replay_slows_the_recording(monkeypatch):
    """At a speed the machine cannot replay, one advance ticks as long as its budget allows and
    the position waits for the state, instead of stalling the console to catch up."""
    monkeypatch.setattr(replay, "ADVANCE_BUDGET_S", 0.0)
    p = Player(FIXTURES / "xid79.jsonl.gz", speed=100.0)
    p.advance(5.0)  # 500 s asked for: a piece of the first tick (a window read in part)
    assert p.behind and p.busy and p.ticks == 0 and p.position == p.start
    while p.ticks == 0:
        p.advance(5.0)
    assert p.ticks == 1 and p.position == p.tick_at(1) < p.end
    # What it did not reach is owed, a second's worth at its speed at most (not the 500 s
    # asked for): the slices that follow catch that up when they can.
    monkeypatch.setattr(replay, "ADVANCE_BUDGET_S", 60.0)
    p.advance(0.001)
    assert not p.behind and p.position == pytest.approx(p.tick_at(1) + 100.0 + 0.1)


def test_a_seek_goes_in_slices_and_says_how_far_it_got():
    """``aim`` and ``work``: each slice does a bounded piece of the seek (here as little as
    can be: one piece each), the session is where straight play has it after each, the
    progress grows to 100 % and the seek lands where ``seek`` lands."""
    path = FIXTURES / "leaf_switch.jsonl.gz"
    p = Player(path)
    p.snapshot_every = 7
    p.aim(p.start + 30)
    shown: list[float] = []
    slices = 0
    while p.work(0.0):
        slices += 1
        assert p.seeking or p.busy
        shown.append(p.progress)
        assert p.clock() == p.tick_at(p.ticks) <= p.start + 30
    assert not p.seeking and p.position == p.start + 30 and p.progress == 1.0
    assert slices > p.ticks  # a tick took more than one slice: it was cut up
    assert shown == sorted(shown) and 0 < shown[-1] <= 1
    assert [s.ticks for s in p._snapshots] == list(range(7, p.ticks + 1, 7))
    straight_there = Player(path)
    straight_there.seek(p.start + 30)
    assert judgements(p.session, p.clock()) == judgements(straight_there.session,
                                                          straight_there.clock())
    # Back, in slices: the snapshot is put back in pieces, then ticked on from.
    p.aim(p.start + 12.3)
    assert p.work(0.0) and p.ticks == 60  # unpickling: the session is not touched yet
    while p.work(0.0):
        pass
    straight_there.seek(p.start + 12.3)
    assert judgements(p.session, p.clock()) == judgements(straight_there.session,
                                                          straight_there.clock())
    # Turned back to the tick the session is at while the next one is handed to Ingest in
    # part: what was handed over is undone (a snapshot put back), not applied by the next tick.
    p.aim(p.start + 25)
    while not (p._mid and p.feed.waiting and p.ticks >= 40):
        p.work(0.0)
    k = p.ticks
    p.aim(p.tick_at(k))
    while p.work(0.0):
        pass
    p.session.tick()
    straight_there.seek(p.tick_at(k))
    straight_there.session.tick()
    mine, theirs = p.session, straight_there.session
    assert p.ticks == k and not p.busy
    assert (mine.ingest.received, mine.state.applied) == (theirs.ingest.received,
                                                          theirs.state.applied)
    assert judgements(mine, p.clock()) == judgements(theirs, straight_there.clock())


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_seek_turned_or_stopped_half_way_lands_as_straight_play(name, monkeypatch):
    """A seek aimed elsewhere half way (while a window is read in part, a snapshot pickled or
    unpickled in part) or stopped (``cancel``: Escape, ``p``) lands on a tick of straight play,
    and judges there as playing straight there does."""
    # Snapshots of these 16-node fleets in many pieces, as a large fleet's are.
    monkeypatch.setattr(session_module, "PIECE_MIN_ITEMS", 1)
    path = FIXTURES / f"{name}.jsonl.gz"
    offsets = CASES[name] * 2
    p = Player(path)
    p.snapshot_every = 7
    slices = itertools.cycle([1, 5, 2, 30, 3, 200, 8, 60])
    landed: list[tuple[float, dict[str, Any]]] = []
    caught: set[str] = set()

    def land() -> None:
        while p.work(0.0):
            pass
        p.session.tick()  # the console's own tick once the Player is done
        landed.append((p.position - p.start, judgements(p.session, p.clock())))

    for i, offset in enumerate(offsets):
        p.aim(at(p, offset))
        for _ in range(next(slices)):
            p.work(0.0)
        caught.add(type(p._job).__name__ if p._job else "mid" if p._mid else "idle")
        if i % 3 == 2:
            p.cancel()
            assert not p.seeking or p._mid  # a window read in part is finished first
            land()
    p.aim(at(p, offsets[-1]))
    land()
    assert landed[-1][0] == at(p, offsets[-1]) - p.start
    assert caught >= {"_Taking", "_PuttingBack", "mid"}, "turned in each kind of piece"
    expected = straight(path, [o for o, _ in landed])
    for offset, got in landed:
        assert got == expected[offset], f"{name}: landed at {offset} s"
